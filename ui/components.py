"""Pieces several pages draw: the messages above every page (a refused value, a link that could not be opened,
what the last change did), figures as metrics with their ranges, what fits instead of a layout that does not, and a
progress bar for background work."""
from __future__ import annotations

import logging

import streamlit as st

from engine.presentation.edit import apply_edit, describe_layout
from engine.presentation.figures import key_figures
from engine.presentation.formatting import MISSING, fmt_days
from engine.planning.results import Estimate
from engine.presentation.tables import FIT_OPTIONS, fit_option_text, offered_fit_options
from engine.scenario import Scenario
from ui import background
from ui.binding import edit
from ui.cached import what_fits_of
from ui.escape import md_escape
from ui.fields import label_of, plain
from ui.state import LINK_PROBLEMS, NOTES, commit, options, refused_fields, revert_refused, scenario, scenario_json
from ui.work_limits import Busy


def show_messages() -> None:
    """The link problem (until the first successful change), that the figures show the last valid scenario while a
    field holds a refused value, and, once, what the last change did."""
    ss = st.session_state
    refused = refused_fields()
    if refused:
        names = ", ".join(f"\u201c{label_of(p) or p}\u201d" for p in refused)
        with st.container(horizontal=True, vertical_alignment="center"):
            st.warning(f"The figures show the last valid scenario: the value entered in {md_escape(names)} was refused "
                       "(see the message under it).")
            st.button("Undo the refused value" + ("s" if len(refused) > 1 else ""), on_click=revert_refused,
                      key="revert_refused")
    if ss.get(LINK_PROBLEMS):
        st.error("This link could not be opened, so the default scenario is shown instead:\n\n"
                 + "\n".join(f"- **{md_escape(field)}**: {md_escape(msg)}" for field, msg in ss[LINK_PROBLEMS]))
    for note in ss.get(NOTES, []):
        st.info(md_escape(note))
    ss[NOTES] = []


def table(data, **kwargs):
    """st.dataframe showing engine.presentation.formatting.MISSING in a cell without a figure, where Streamlit would
    show 'None'; every table of the app goes through it."""
    return st.dataframe(data, placeholder=MISSING, **kwargs)


def show_figures(figures, width: int = 170) -> None:
    """engine.presentation.figures.Figure rows as metrics that wrap to the next line instead of being cut off, each
    with its range under the value and what it is in its tooltip."""
    with st.container(horizontal=True, gap="small"):
        for f in figures:
            st.metric(f.label, f.value, delta=f.range, delta_color="off", delta_arrow="off", help=f.what, width=width)


def show_key_figures(est: Estimate, width: int = 170) -> None:
    show_figures(key_figures(est, options().efficiency), width)


def show_inputs(rows: list[dict]) -> None:
    """Sourced inputs (input, value, unit, how it is derived, source) as a list: their derivations and sources are
    sentences, which a table's cells would cut off at any width."""
    def value(v) -> str:
        return "none" if v is None else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    st.markdown("\n".join(f"- **{md_escape(r['input'])}**: {value(r['value'])} {md_escape(r['unit'])}. "
                          f"{md_escape(r['how it is derived'])}. Source: {md_escape(r['source'])}" for r in rows))


def _use_layout(layout: dict) -> None:
    commit(apply_edit(scenario(), "layout", {k: v for k, v in layout.items() if v is not None}), "layout")


# the scenario change that takes a fitting option (engine.planning.alternatives); more GPUs has its size buttons
def _use_fit(changes: dict, layout: dict) -> None:
    """Take a fitting option: its changes to the job or the cluster (FitOption.changes), then the layout it was
    searched with, so that the scenario's figures are the option's."""
    current, first = scenario(), next(iter(changes))
    for path, value in changes.items():
        changed = edit(current, path, value)
        if changed.scenario is None:
            commit(changed, path)
            return
        current = changed.scenario
    commit(edit(current, "layout", layout), first)


def show_what_fits(sc: Scenario) -> None:
    """What would fit instead of a layout that does not: a layout on the same cluster, or another cluster size."""
    try:
        best, sizes, fit_options = what_fits_of(scenario_json(sc))
    except Busy as err:
        st.warning(str(err))
        return
    if best is not None:
        layout = best.layout.model_dump()
        st.markdown(f"**What fits on these {sc.cluster.n_gpus:,} accelerators:** {md_escape(describe_layout(layout))}"
                    f" ({best.memory_gib.total:.1f} GiB, {fmt_days(best.wall_days)}).")
        st.button("Use this layout", key="use_fitting_layout", on_click=_use_layout, args=(layout,))
    elif sizes:
        st.markdown(f"**Nothing fits on {sc.cluster.n_gpus:,} accelerators.** Nearest sizes where it fits: " + " or ".join(
            f"{s['n_gpus']:,} ({fmt_days(s['wall_days'])})" for s in sizes) + ".")
        with st.container(horizontal=True):
            for s in sizes:
                st.button(f"Use {s['n_gpus']:,} accelerators", key=f"use_size:{s['n_gpus']}",
                          on_click=lambda n=s["n_gpus"]: commit(edit(scenario(), "cluster.n_gpus", n), "cluster.n_gpus"))
    else:
        st.markdown("Nothing fits near this cluster size: try an accelerator with more memory or a shorter sequence.")
    offered = offered_fit_options(fit_options)
    if offered:
        st.markdown("**What would make it fit**, each searched like the job itself:\n" + "\n".join(
            f"- {md_escape(plain(fit_option_text(o)))}" for o in offered))
        with st.container(horizontal=True):
            for o in offered:
                if o.fits and o.changes and o.option in FIT_OPTIONS:
                    st.button(f"Use {FIT_OPTIONS[o.option]}", key=f"use_fit:{o.option}", on_click=_use_fit,
                              args=(o.changes, o.layout.model_dump(exclude_none=True)))


class _LatePollFilter(logging.Filter):
    """Drops Streamlit's line for a fragment rerun that arrives after a full rerun removed the fragment. _poll's end
    starts a full rerun, which clears the session's fragments at once; the browser's 0.3 s timer goes on asking for
    the fragment until that rerun is drawn (seconds under load), and Streamlit ignores each such request
    (runtime/app_session.py, at INFO). Everything else the module logs is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and str(record.msg).startswith("The fragment with id "))


LATE_POLLS = _LatePollFilter()
logging.getLogger("streamlit.runtime.app_session").addFilter(LATE_POLLS)     # once: addFilter skips a filter it has


@st.fragment(run_every=0.3)
def _poll(key: tuple, text: str | None) -> None:
    job = background.find(key)
    if job is None or job.done:
        st.rerun()                          # the whole page is drawn again with the result
    st.progress(job.fraction, text=f"{text or 'Working'}: {job.message} ...")


POLLED = "polled_jobs"          # session state: the keys of the background jobs this session's page waits for


def poll(job, text: str | None = None) -> None:
    """A progress bar for a background job (ui/background.py) that checks every 0.3 s and draws the whole
    page again once the job is done, so no rerun waits for the job."""
    st.session_state.setdefault(POLLED, set()).add(job.key)
    _poll(job.key, text)


def awaited(key: tuple) -> bool:
    """True (once) when this session's page was waiting for the job `key`: the rerun its end caused shows how it
    ended, a refusal included, instead of starting it again (background.job's retry)."""
    polled = st.session_state.get(POLLED, set())
    if key in polled:
        polled.discard(key)
        return True
    return False
