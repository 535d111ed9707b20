"""Widgets bound to the scenario's fields and the page options: each widget is seeded from the scenario, a change
goes through engine.presentation.edit (in a work slot when it may search a new layout), and a refused value is
flagged right under its field, with buttons for valid values near it. The model preset asks before its published
training setup replaces one set by hand."""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

import streamlit as st
from pydantic import ValidationError

from engine.presentation.edit import (PRESET_TRAINING, Edit, apply_edit, describe_layout, field_value, own_training,
                                     preset_switch_text, training_text)
from engine.planning.sizing import nearest_sizes
from engine.inputs import parse_scenario
from engine.scenario import Scenario, ScenarioError
from engine.presentation.share import PlannerOptions
from ui import work_limits
from ui.cached import with_layout_once
from ui.escape import md_escape
from ui.fields import Field, plain
from ui.state import NOTES, OPTION, OPTIONS, PENDING_PRESET, PROBLEMS, SUGGESTIONS, WIDGET, commit, options, scenario
from ui.work_limits import Busy

MAY_SEARCH = ("model", "training", "cluster")       # edits that can break the layout, so that a new one is searched
NUMBER_FORMAT = "%g"      # a number field shows its value as the engine uses it: every digit, no fixed decimals
                          # (0.5 billion tokens is 0.5, not the 1 of "%.0f"; a PUE of 1.125 is not 1.13)


def edit(current: Scenario, path: str, value) -> Edit:
    """engine.presentation.edit.apply_edit, in a work slot when the edit may search a new layout (model, training, cluster)."""
    try:
        if path.split(".")[0] in MAY_SEARCH:
            with work_limits.slot("change"):
                return apply_edit(current, path, value)
        return apply_edit(current, path, value)
    except (ScenarioError, Busy) as err:
        return Edit(None, err.problems if isinstance(err, ScenarioError) else [(path, str(err))])


def _field_changed(path: str, to_scenario: Callable | None) -> None:
    if WIDGET + path not in st.session_state:
        # a whole-scenario change (an adopted answer, a loaded scenario) dropped the widget's state in the same round
        # trip as the browser's last value of it: the widget is re-seeded from the new scenario, nothing to apply.
        # Reading it raised KeyError, an uncaught exception that stopped the page (e2e test_manager, CI, 2026-11-24)
        return
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
    days = lambda d: "never finishing" if d is None else f"{d:,.0f} days"
    ss[PROBLEMS]["cluster.n_gpus"] = [
        f"No layout splits this model over {n_gpus:,} accelerators (its batch, heads and layers must divide among them)"
        ". Nearest sizes that work: " + " or ".join(
            f"{s['n_gpus']:,} ({s['nodes']:,} nodes; {days(s['wall_days'])} with {describe_layout(s['layout'])})"
            for s in near) + "."]
    ss[SUGGESTIONS]["cluster.n_gpus"] = [(f"Use {s['n_gpus']:,}", s["n_gpus"]) for s in near]


def _use_suggestion(path: str, value) -> None:
    st.session_state[SUGGESTIONS].pop(path, None)
    commit(edit(scenario(), path, value), path)


def field_problems(path: str, label: str | None = None) -> None:
    """The refused value's messages under its field, in plain words (after the field's label when given: the message
    then sits under the field's whole row), with buttons for valid values near it."""
    for msg in st.session_state[PROBLEMS].get(path, []):
        st.error((f"**{md_escape(label)}**: " if label else "") + md_escape(plain(msg)))
    suggested = st.session_state[SUGGESTIONS].get(path) if path in st.session_state[PROBLEMS] else None
    if suggested:
        with st.container(horizontal=True):
            for label, value in suggested:
                st.button(label, key=f"suggest:{path}:{value}", on_click=_use_suggestion, args=(path, value))


def bind(path: str, widget: Callable, spec: Field, container=None, **kwargs):
    """Draw `widget` for the scenario field `path`, seeded from the scenario; changes go through engine.presentation.edit and
    refused values are flagged right under the field. A field in a column (`container`) has its message under the
    row of columns, at the section's width and named by the field's label: a column a quarter of a laptop's page
    wide broke it into one word a line ("accelerat ors")."""
    key = WIDGET + path
    if key not in st.session_state:
        value = field_value(scenario(), path)
        if value is None:
            value = spec.blank
        st.session_state[key] = shown_value(value, spec)
    if spec.scale != 1:
        to_scenario = lambda v: None if v is None else v * spec.scale
    else:
        to_scenario = (lambda v: None if v == spec.blank else v) if spec.blank is not None else None
    if widget is st.number_input:
        kwargs.setdefault("format", NUMBER_FORMAT)
    with container if container is not None else nullcontext():
        out = widget(spec.label, key=key, help=spec.help, on_change=_field_changed, args=(path, to_scenario),
                     **kwargs)
        if container is None:
            field_problems(path)
    if container is not None:
        field_problems(path, spec.label)
    return out


def shown_value(value, spec: Field):
    """A scenario value in the field's display unit (tokens in billions, a fraction in percent), without the float
    noise of the division (0.07 / 0.01 is 7.000000000000001): 12 significant digits, far beyond any input."""
    if spec.scale == 1 or not isinstance(value, (int, float)) or isinstance(value, bool):
        return value
    return float(f"{value / spec.scale:.12g}")


PRESET = "model.preset"


def _preset_picked() -> None:
    """A preset replaces the training setup with its authors' at once, unless that was set by hand: then it waits
    for the user's choice (bind_preset shows it)."""
    if WIDGET + PRESET not in st.session_state:      # dropped by a whole-scenario change: see _field_changed
        return
    new = st.session_state[WIDGET + PRESET]
    current = scenario()
    st.session_state.pop(PENDING_PRESET, None)
    if own_training(current, new):
        st.session_state[PENDING_PRESET] = new
    else:
        commit(edit(current, PRESET, new), PRESET)


def _switch_preset(keep_mine: bool) -> None:
    new = st.session_state.pop(PENDING_PRESET, None)
    if new is None:
        return
    current = scenario()
    kept = own_training(current, new)
    if keep_mine and commit(edit(current, "model", {"preset": new}), PRESET):
        st.session_state[NOTES].insert(0, "Kept your " + " and ".join(
            f"{PRESET_TRAINING[name]} ({training_text(name, value)})" for name, (value, _) in kept.items()) + ".")
    elif not keep_mine:
        commit(edit(current, PRESET, new), PRESET)


def bind_preset(spec: Field, presets: dict[str, str]) -> None:
    """The model preset ({id: name}) as a choice; picking one over a training setup set by hand asks first: keep it,
    or use the preset's published one."""
    key, ss = WIDGET + PRESET, st.session_state
    if key not in ss:
        ss[key] = scenario().model.preset
    st.selectbox(spec.label, list(presets), key=key, help=spec.help, format_func=presets.get,
                 on_change=_preset_picked)
    field_problems(PRESET)
    pending = ss.get(PENDING_PRESET)
    if pending is not None and pending != ss[key]:        # another change re-seeded the field: the switch is off
        ss.pop(PENDING_PRESET)
        pending = None
    if pending is not None:
        st.warning(md_escape(preset_switch_text(scenario(), pending)))
        with st.container(horizontal=True):
            st.button("Keep mine", key="preset:keep", on_click=_switch_preset, args=(True,), type="primary")
            st.button(f"Use {presets[pending]}'s", key="preset:replace", on_click=_switch_preset, args=(False,))


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
    if widget is st.number_input:
        kwargs.setdefault("format", NUMBER_FORMAT)
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
