"""The session's state: the one scenario that drives every page (the last valid one), the page options, the
refused inputs with their messages, and what the last change did. Widget keys are the scenario's field paths
(WIDGET + path), so a change of scenario re-seeds every widget not holding a refused value."""
from __future__ import annotations

import streamlit as st

from engine.presentation.edit import Edit
from engine.presentation.share import PlannerOptions
from engine.planning.vendor import DEFAULT_WEIGHTS
from engine.scenario import Scenario
from ui.settings import load_settings

SCENARIO = "scenario"            # the last valid Scenario: drives every page
OPTIONS = "options"              # PlannerOptions (search objective, deadline, vendor weights)
PROBLEMS = "problems"            # {field path: [messages]} for the inputs that were refused
NOTES = "notes"                  # what the last change did besides the edited field
LINK_PROBLEMS = "link_problems"  # why the link this session was opened with could not be used
SUGGESTIONS = "suggestions"        # {field path: [(button label, value)]}: valid values near a refused one
SAVED_IDS = "saved_ids"          # {share token: saved id} of scenarios saved or opened in this session (the URL
                                 # then uses ?s=<id> while the scenario and options are the token's)
URL_LOADED = "url_loaded"        # the URL is read once per session
PENDING_PRESET = "pending_preset"  # a model preset picked over a training setup set by hand: waits for keep / replace
OPTION = "opt:"                  # prefix of option widget keys
WIDGET = "w:"                    # prefix of widget keys; the rest is the scenario field path


def scenario() -> Scenario:
    return st.session_state[SCENARIO]


def options() -> PlannerOptions:
    return st.session_state[OPTIONS]


def scenario_json(sc: Scenario | None = None) -> str:
    return (sc or scenario()).model_dump_json()


def signed_in_user() -> str | None:
    """The user the reverse proxy names in APP_IDENTITY_HEADER (a browser cannot forge it when the proxy sets that
    header itself); None without the setting or the header (a local, single-user start)."""
    header = load_settings().identity_header
    if header is None:
        return None
    return (st.context.headers.get(header) or "").strip() or None


def vendor_weights() -> dict[str, float]:
    return options().vendor_weights or DEFAULT_WEIGHTS


def refused_fields() -> dict[str, list[str]]:
    """Scenario fields whose last entered value was refused (the page shows the last valid scenario meanwhile)."""
    return {path: msgs for path, msgs in st.session_state[PROBLEMS].items()
            if path.split(".")[0] in ("model", "training", "cluster", "layout", "site", "cost", "reliability",
                                      "(scenario)", WIDGET + "efficiency_source")}


def revert_refused() -> None:
    """Put the refused fields back to the scenario's values (the last valid ones)."""
    ss = st.session_state
    for path in refused_fields():
        ss[PROBLEMS].pop(path, None)
        ss[SUGGESTIONS].pop(path, None)
    _drop_widget_state(set(ss[PROBLEMS]))


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
