"""Shared UI plumbing for every page: the one scenario in session state, widgets bound to its fields (a widget key
per field, seeded from the scenario, written back through engine.presentation.edit on change), the URL that always carries the
scenario, the process-wide store, and cached engine calls keyed on the scenario's JSON."""
from __future__ import annotations

import html
import json
import re
from contextlib import nullcontext
from typing import Callable

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from benchmarks_db.calibration import calibrated_cluster
from benchmarks_db.scenarios import load_scenario, scenario_id
from benchmarks_db.store import Store, open_store
from engine.catalog import load_catalog
from engine.presentation.edit import (CALIBRATION_FIELDS, Edit, apply_edit, default_scenario, describe_layout,
                                     field_value, layout_choices, with_layout)
from engine.planning.estimate import estimate
from engine.presentation.report import key_figures
from engine.planning.sizing import best_at, nearest_sizes
from engine.presentation.report import fmt_days
from engine.scenario import PRECISION_DTYPE, Scenario, ScenarioError, parse_scenario
from engine.presentation.share import PlannerOptions, decode, encode
from engine.planning.vendor import DEFAULT_WEIGHTS, compare, rescore
from pages import background, work_limits
from pages.fields import Field, label_of, plain
from pages.settings import load_settings
from pages.work_limits import Busy

SCENARIO = "scenario"            # the last valid Scenario: drives every page
OPTIONS = "options"              # PlannerOptions (search objective, deadline, vendor weights)
PROBLEMS = "problems"            # {field path: [messages]} for the inputs that were refused
NOTES = "notes"                  # what the last change did besides the edited field
LINK_PROBLEMS = "link_problems"  # why the link this session was opened with could not be used
SUGGESTIONS = "suggestions"        # {field path: [(button label, value)]}: valid values near a refused one
SAVED_IDS = "saved_ids"          # ids of scenarios saved or opened in this session (the URL then uses ?s=)
URL_LOADED = "url_loaded"        # the URL is read once per session
MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$&:")
AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=@)|(?<=www)(?=\.)", re.IGNORECASE)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")   # a spreadsheet reads a cell starting so as a formula (OWASP CSV injection)
MAY_SEARCH = ("model", "training", "cluster")       # edits that can break the layout, so that a new one is searched
OPTION = "opt:"                  # prefix of option widget keys
WIDGET = "w:"                    # prefix of widget keys; the rest is the scenario field path


@st.cache_resource(show_spinner=False)
def store() -> Store:
    """The process's one store handle (each use takes its own cursor), read-only in a read-only deployment."""
    settings = load_settings()
    return open_store(settings.db_path, read_only=settings.read_only)


@st.cache_data(max_entries=512, show_spinner=False)
def estimate_of(scenario_json: str) -> dict:
    return estimate(parse_scenario(scenario_json))


@st.cache_data(max_entries=512, show_spinner=False)
def layout_choices_of(scenario_json: str) -> dict:
    return layout_choices(parse_scenario(scenario_json))


@st.cache_data(max_entries=32, show_spinner="Searching the best layout on every accelerator ...")
def comparison_of(scenario_json: str, deadline_days: float | None, calibrations_json: str) -> dict:
    with work_limits.slot("vendor comparison"):
        return compare(parse_scenario(scenario_json), deadline_days=deadline_days,
                       calibrations=json.loads(calibrations_json))


@st.cache_data(max_entries=256, show_spinner="Choosing the fastest layout that fits ...")
def _layout_outcome(scenario_json: str) -> tuple[str | None, list[str], list[tuple[str, str]]]:
    """engine.presentation.edit.with_layout for a scenario without a layout, once per scenario for the whole process (every tab
    that opens the same link shares one search) and in a work slot: (scenario JSON with its layout or None, notes,
    problems). A search the engine refuses (ScenarioError, e.g. too many candidates) is cached as problems too;
    Busy is not cached."""
    from engine.planning.search import candidate_problems
    sc = parse_scenario(scenario_json)
    if problems := candidate_problems(sc):       # refused by counting, before it queues for a slot
        return None, [], problems
    try:
        with work_limits.slot("layout search"):
            chosen = with_layout(sc)
    except ScenarioError as err:
        return None, [], err.problems
    return (chosen.scenario.model_dump_json() if chosen.scenario else None), chosen.notes, chosen.problems


def with_layout_once(sc: Scenario) -> Edit:
    """The scenario itself when it has a layout, else with the fastest layout that fits (cached per scenario)."""
    if sc.layout is not None:
        return Edit(sc)
    try:
        found, notes, problems = _layout_outcome(sc.model_dump_json())
    except Busy as err:
        return Edit(None, [("layout", str(err))])
    return Edit(parse_scenario(found), notes=notes) if found else Edit(None, problems)


def edit(current: Scenario, path: str, value) -> Edit:
    """engine.presentation.edit.apply_edit, in a work slot when the edit may search a new layout (model, training, cluster)."""
    try:
        if path.split(".")[0] in MAY_SEARCH:
            with work_limits.slot("change"):
                return apply_edit(current, path, value)
        return apply_edit(current, path, value)
    except (ScenarioError, Busy) as err:
        return Edit(None, err.problems if isinstance(err, ScenarioError) else [(path, str(err))])


@st.cache_data(ttl=60, show_spinner=False)
def calibration_of(accelerator: str, dtype: str, n_gpus: int, gpus_per_node: int) -> dict:
    """benchmarks_db.calibration.calibrated_cluster for this placement (trusted measurements in the store)."""
    return calibrated_cluster(store(), accelerator, dtype, n_gpus, gpus_per_node)


def scenario() -> Scenario:
    return st.session_state[SCENARIO]


def options() -> PlannerOptions:
    return st.session_state[OPTIONS]


def scenario_json(sc: Scenario | None = None) -> str:
    return (sc or scenario()).model_dump_json()


def current_estimate() -> dict:
    return estimate_of(scenario_json())


def vendor_weights() -> dict[str, float]:
    return options().vendor_weights or DEFAULT_WEIGHTS


def calibration_for(sc: Scenario, accelerator: str | None = None) -> dict:
    """Trusted measurements of an accelerator (the scenario's by default) for the scenario's precision and size."""
    return calibration_of(accelerator or sc.cluster.accelerator, PRECISION_DTYPE[sc.training.precision],
                          sc.cluster.n_gpus, sc.gpus_per_node)


def efficiency_source(sc: Scenario) -> str:
    """'datasheet' (no measured overrides), 'calibrated' (exactly the store's calibration) or 'custom'."""
    measured = {f: getattr(sc.cluster, f) for f in CALIBRATION_FIELDS if getattr(sc.cluster, f) is not None}
    if not measured:
        return "datasheet"
    return "calibrated" if measured == calibration_for(sc)["overrides"] else "custom"


def current_comparison() -> dict:
    """engine.planning.vendor.compare of the scenario and deadline (cached), re-scored with the page options' weights. The scenario's
    own measured efficiencies go with its accelerator; when they are the store's calibration, every other
    accelerator is compared with its calibration too."""
    sc = scenario()
    calibrations = {}
    if efficiency_source(sc) == "calibrated":
        calibrations = {acc: cal for acc in load_catalog().accelerators
                        if (cal := calibration_for(sc, acc)["overrides"])}
    calibrations[sc.cluster.accelerator] = {f: getattr(sc.cluster, f) for f in CALIBRATION_FIELDS
                                            if getattr(sc.cluster, f) is not None}
    searched = comparison_of(scenario_json(), options().deadline_days, json.dumps(calibrations, sort_keys=True))
    return rescore(searched, vendor_weights())       # weights only re-rank: no search reruns


def _open_link(params) -> tuple[Edit, PlannerOptions, list[str]]:
    """The scenario a link carries (?s=<saved id> or ?sc=<token>), or None with the problems."""
    if "s" in params:
        sc, saved = load_scenario(store(), params["s"])
        st.session_state[SAVED_IDS].add(saved.scenario_id)
        opened = f"Opened the saved scenario '{saved.name}' (saved {saved.created_at:%Y-%m-%d %H:%M} UTC)."
        return with_layout_once(sc), PlannerOptions(), [opened]
    shared = decode(params["sc"])
    return with_layout_once(shared.scenario), shared.options, []


def init_session() -> None:
    """Create the session's scenario, from the URL on the first run of a session, else from the defaults."""
    ss = st.session_state
    if ss.get(URL_LOADED):
        return
    ss[URL_LOADED] = True
    ss[PROBLEMS], ss[NOTES], ss[SAVED_IDS], ss[SUGGESTIONS] = {}, [], set(), {}
    ss[SCENARIO], ss[OPTIONS] = default_scenario(), PlannerOptions()
    params = st.query_params
    if "s" not in params and "sc" not in params:
        return
    try:
        edit, opts, notes = _open_link(params)
    except ScenarioError as err:
        ss[LINK_PROBLEMS] = err.problems
        return
    if edit.scenario is None:
        ss[LINK_PROBLEMS] = edit.problems
        return
    ss[SCENARIO], ss[OPTIONS], ss[NOTES] = edit.scenario, opts, notes + edit.notes


def share_params() -> dict[str, str]:
    """The query that reproduces this session's view: ?s=<id> while the scenario equals a saved one (and the page
    options are the defaults), else ?sc=<token>."""
    sc, opts = scenario(), options()
    sid = scenario_id(sc)
    return {"s": sid} if sid in st.session_state[SAVED_IDS] and opts == PlannerOptions() else {"sc": encode(sc, opts)}


def sync_url() -> None:
    """Write the scenario into the address bar (Streamlit clears query parameters on a page switch, so every run
    writes them)."""
    wanted = share_params()
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def refused_fields() -> dict[str, list[str]]:
    """Scenario fields whose last entered value was refused (the page shows the last valid scenario meanwhile)."""
    return {path: msgs for path, msgs in st.session_state[PROBLEMS].items()
            if path.split(".")[0] in ("model", "training", "cluster", "layout", "site", "cost", "reliability",
                                      "(scenario)", WIDGET + "efficiency_source")}


def _revert_refused() -> None:
    """Put the refused fields back to the scenario's values (the last valid ones)."""
    ss = st.session_state
    for path in refused_fields():
        ss[PROBLEMS].pop(path, None)
        ss[SUGGESTIONS].pop(path, None)
    _drop_widget_state(set(ss[PROBLEMS]))


def show_messages() -> None:
    """The link problem (until the first successful change), that the figures show the last valid scenario while a
    field holds a refused value, and, once, what the last change did."""
    ss = st.session_state
    refused = refused_fields()
    if refused:
        names = ", ".join(f"\u201c{label_of(p) or p}\u201d" for p in refused)
        with st.container(horizontal=True, vertical_alignment="center"):
            st.warning(f"The figures show the last valid scenario: the value entered in {md_escape(names)} was refused "
                       "(see the message under the field).")
            st.button("Undo the refused value" + ("s" if len(refused) > 1 else ""), on_click=_revert_refused,
                      key="revert_refused")
    if ss.get(LINK_PROBLEMS):
        st.error("This link could not be opened, so the default scenario is shown instead:\n\n"
                 + "\n".join(f"- **{md_escape(field)}**: {md_escape(msg)}" for field, msg in ss[LINK_PROBLEMS]))
    for note in ss.get(NOTES, []):
        st.info(md_escape(note))
    ss[NOTES] = []


def _drop_widget_state(keep: set[str]) -> None:
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith(WIDGET)]:
        if key[len(WIDGET):] not in keep:
            del st.session_state[key]


def commit(edit: Edit, path: str | None = None) -> bool:
    """Adopt an edit's scenario (True), or record its problems at the field `path` (False). A whole-scenario
    change (path None) clears every pending problem; all widgets not holding a refused value are re-seeded."""
    ss = st.session_state
    if edit.scenario is None:
        ss[PROBLEMS][path or "(scenario)"] = [msg for _, msg in edit.problems]
        return False
    ss[SCENARIO] = edit.scenario
    if path is None:
        ss[PROBLEMS] = {}
    else:
        ss[PROBLEMS].pop(path, None)
    ss[NOTES] = edit.notes
    ss.pop(LINK_PROBLEMS, None)
    _drop_widget_state(set(ss[PROBLEMS]))
    return True


def _field_changed(path: str, to_scenario: Callable | None) -> None:
    raw = st.session_state[WIDGET + path]
    current = scenario()
    value = to_scenario(raw) if to_scenario else raw
    st.session_state[SUGGESTIONS].pop(path, None)
    if not commit(edit(current, path, value), path) and path == "cluster.n_gpus" and isinstance(value, (int, float)):
        _suggest_sizes(current, int(value))


def _suggest_sizes(current: Scenario, n_gpus: int) -> None:
    """A refused cluster size: the nearest sizes (whole nodes) that have a layout, with their days, as the message
    and as buttons."""
    try:
        with work_limits.slot("cluster sizes"):
            near = nearest_sizes(current, n_gpus) if 0 < n_gpus <= 10_000_000 else []
    except Busy:
        near = []
    if not near:
        return
    ss = st.session_state
    ss[PROBLEMS]["cluster.n_gpus"] = [
        f"No layout splits this model over {n_gpus:,} accelerators (its batch, heads and layers must divide among them)"
        ". Nearest sizes that work: " + " or ".join(
            f"{s['n_gpus']:,} ({s['nodes']:,} nodes; {s['wall_days']:,.0f} days with {describe_layout(s['layout'])})"
            for s in near) + "."]
    ss[SUGGESTIONS]["cluster.n_gpus"] = [(f"Use {s['n_gpus']:,}", s["n_gpus"]) for s in near]


def _use_suggestion(path: str, value) -> None:
    st.session_state[SUGGESTIONS].pop(path, None)
    commit(edit(scenario(), path, value), path)


def field_problems(path: str) -> None:
    """The refused value's messages under its field, in plain words, with buttons for valid values near it."""
    for msg in st.session_state[PROBLEMS].get(path, []):
        st.error(md_escape(plain(msg)))
    suggested = st.session_state[SUGGESTIONS].get(path) if path in st.session_state[PROBLEMS] else None
    if suggested:
        with st.container(horizontal=True):
            for label, value in suggested:
                st.button(label, key=f"suggest:{path}:{value}", on_click=_use_suggestion, args=(path, value))


def bind(path: str, widget: Callable, spec: Field, container=None, **kwargs):
    """Draw `widget` for the scenario field `path`, seeded from the scenario; changes go through engine.presentation.edit and
    refused values are flagged right under the field."""
    key = WIDGET + path
    if key not in st.session_state:
        value = field_value(scenario(), path)
        if value is None:
            value = spec.blank
        st.session_state[key] = value / spec.scale if spec.scale != 1 and value is not None else value
    if spec.scale != 1:
        to_scenario = lambda v: None if v is None else v * spec.scale
    else:
        to_scenario = (lambda v: None if v == spec.blank else v) if spec.blank is not None else None
    with container if container is not None else nullcontext():
        out = widget(spec.label, key=key, help=spec.help, on_change=_field_changed, args=(path, to_scenario),
                     **kwargs)
        field_problems(path)
    return out


def replace_scenario(data) -> bool:
    """Adopt a whole new scenario (uploaded JSON, reset); problems are shown under '(scenario)'."""
    try:
        sc = parse_scenario(data)
    except ScenarioError as err:
        return commit(Edit(None, err.problems))
    return commit(with_layout_once(sc))


def _option_changed(name: str) -> None:
    set_options(**{name: st.session_state[OPTION + name]})


def bind_option(name: str, widget: Callable, label: str, help: str, **kwargs):
    """Draw `widget` for the page option `name` (part of the link, like the scenario)."""
    key = OPTION + name
    if key not in st.session_state:
        st.session_state[key] = getattr(options(), name)
    out = widget(label, key=key, help=help, on_change=_option_changed, args=(name,), **kwargs)
    field_problems("options." + name)
    return out


def set_options(**changes) -> bool:
    """Change page options (validated); a refused change is flagged under 'options.<name>'."""
    try:
        st.session_state[OPTIONS] = PlannerOptions.model_validate({**options().model_dump(), **changes})
    except ValidationError as err:
        name = "options." + next(iter(changes))
        st.session_state[PROBLEMS][name] = [e["msg"] for e in err.errors(include_url=False, include_input=False)]
        return False
    for name in changes:
        st.session_state[PROBLEMS].pop("options." + name, None)
    return True


def problems_text(problems: list[tuple[str, str]]) -> str:
    """ScenarioError problems as one line of escaped markdown (they may quote what a link or a file held)."""
    return "; ".join(f"{md_escape(field)}: {md_escape(msg)}" for field, msg in problems)


def md_escape(text) -> str:
    """Text from users or the store, safe inside markdown: every markdown and HTML special character escaped, and a
    word joiner (invisible) in '://', after '@' and in 'www.', where the renderer would otherwise link the plain text
    (GitHub-flavoured autolinks are found after escapes are resolved)."""
    text = AUTOLINK.sub("\u2060", str(text))
    return "".join("\\" + ch if ch in MARKDOWN_SPECIAL else ch for ch in text)


def plot_text(text) -> str:
    """Text from the store, safe as a plotly label, legend name or hover value: plotly draws <a href>, <b>, <br>
    from its text, and shows &lt; &gt; &amp; as the characters again."""
    return html.escape(str(text), quote=False)


def csv_cell(value):
    """A value as a CSV export may hold it: text a spreadsheet would run as a formula (starting with = + - @, tab or
    carriage return) gets a leading apostrophe, which spreadsheets show as text (OWASP CSV injection)."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_START) else value


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """The table with every text cell through csv_cell: for downloads, and for tables of store text on screen (the
    table's own toolbar exports CSV in the browser, beyond the server's reach)."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(csv_cell)
    out.columns = [csv_cell(str(c)) for c in out.columns]
    return out


def show_figures(figures, width: int = 170) -> None:
    """engine.presentation.report.Figure rows as metrics that wrap to the next line instead of being cut off, each
    with its range under the value and what it is in its tooltip."""
    with st.container(horizontal=True, gap="small"):
        for f in figures:
            st.metric(f.label, f.value, delta=f.range, delta_color="off", delta_arrow="off", help=f.what, width=width)


def show_key_figures(est: dict, width: int = 170) -> None:
    show_figures(key_figures(est, options().efficiency), width)


@st.cache_data(max_entries=64, show_spinner="Looking for a layout that fits ...")
def what_fits_of(scenario_json: str) -> tuple[dict | None, list[dict]]:
    """For a scenario whose layout does not fit: the fastest layout that fits on its cluster, else the nearest
    cluster sizes where one fits (engine.planning.sizing)."""
    sc = parse_scenario(scenario_json)
    with work_limits.slot("layout search"):
        best = best_at(sc, sc.cluster.n_gpus)
        return best, ([] if best else nearest_sizes(sc, sc.cluster.n_gpus))


def _use_layout(layout: dict) -> None:
    commit(apply_edit(scenario(), "layout", {k: v for k, v in layout.items() if v is not None}), "layout")


def show_what_fits(sc: Scenario) -> None:
    """What would fit instead of a layout that does not: a layout on the same cluster, or another cluster size."""
    try:
        best, sizes = what_fits_of(scenario_json(sc))
    except Busy as err:
        st.warning(str(err))
        return
    if best is not None:
        st.markdown(f"**What fits on these {sc.cluster.n_gpus:,} accelerators:** {md_escape(describe_layout(best['layout']))}"
                    f" ({best['memory_gib']['total']:.1f} GiB, {fmt_days(best.get('wall_days') or best['train_days'])}).")
        st.button("Use this layout", key="use_fitting_layout", on_click=_use_layout, args=(best["layout"],))
    elif sizes:
        st.markdown(f"**Nothing fits on {sc.cluster.n_gpus:,} accelerators.** Nearest sizes where it fits: " + " or ".join(
            f"{s['n_gpus']:,} ({fmt_days(s['wall_days'])})" for s in sizes) + ".")
        with st.container(horizontal=True):
            for s in sizes:
                st.button(f"Use {s['n_gpus']:,} accelerators", key=f"use_size:{s['n_gpus']}",
                          on_click=lambda n=s["n_gpus"]: commit(edit(scenario(), "cluster.n_gpus", n), "cluster.n_gpus"))
    else:
        st.markdown("Nothing fits near this cluster size: try an accelerator with more memory or a shorter sequence.")


@st.fragment(run_every=0.3)
def _poll(key: tuple, text: str | None) -> None:
    job = background.find(key)
    if job is None or job.done:
        st.rerun()                          # the whole page is drawn again with the result
    st.progress(job.fraction, text=f"{text or 'Working'}: {job.message} ...")


def poll(job, text: str | None = None) -> None:
    """A progress bar for a background job (pages/background.py) that checks every 0.3 s and draws the whole
    page again once the job is done, so no rerun waits for the job."""
    _poll(job.key, text)
