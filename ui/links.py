"""The link that carries the scenario: a session opens the scenario its link names (?s=<saved id> or ?sc=<token>)
on its first run, and every run writes the scenario back into the address bar, so copying it shares exactly what
is shown."""
from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import streamlit as st

from benchmarks_db.scenarios import load_scenario
from engine.presentation.edit import Edit, default_scenario
from engine.scenario import ScenarioError
from engine.presentation.share import PlannerOptions, decode, encode
from ui.cached import store, with_layout_once
from ui.state import (LINK_PROBLEMS, NOTES, OPTIONS, PROBLEMS, SAVED_IDS, SCENARIO, SUGGESTIONS, URL_LOADED,
                      options, scenario)


def _open_link(params) -> tuple[Edit, PlannerOptions, list[str]]:
    """The scenario and page options (with the question the answer answers) a link carries (?s=<saved id> or
    ?sc=<token>); ScenarioError when it cannot be opened."""
    if "s" in params:
        sc, opts, saved = load_scenario(store(), params["s"])
        st.session_state[SAVED_IDS][encode(sc, opts)] = saved.scenario_id
        opened = f"Opened the saved scenario '{saved.name}' (saved {saved.created_at:%Y-%m-%d %H:%M} UTC)."
        return with_layout_once(sc), opts, [opened]
    shared = decode(params["sc"])
    return with_layout_once(shared.scenario), shared.options, []


def init_session() -> None:
    """Create the session's scenario, from the URL on the first run of a session, else from the defaults."""
    ss = st.session_state
    if ss.get(URL_LOADED):
        return
    ss[URL_LOADED] = True
    ss[PROBLEMS], ss[NOTES], ss[SAVED_IDS], ss[SUGGESTIONS] = {}, [], {}, {}
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
    """The query that reproduces this session's view: ?s=<id> while the scenario and the page options are those of a
    scenario saved or opened in this session, else ?sc=<token>."""
    token = encode(scenario(), options())
    saved = st.session_state[SAVED_IDS].get(token)
    return {"s": saved} if saved else {"sc": token}


def sync_url() -> None:
    """Write the scenario into the address bar (Streamlit clears query parameters on a page switch, so every run
    writes them)."""
    wanted = share_params()
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def app_url() -> str:
    """The address of the current page without its query (empty in tests without a browser)."""
    url = urlsplit(st.context.url or "")
    return urlunsplit((url.scheme, url.netloc, url.path or "/", "", "")) if url.netloc else ""
