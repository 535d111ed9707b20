"""The sidebar on every page: what the scenario is, how to share it, and saving it (with the question the Scenario
page answers) under a short link, owned by the signed-on user where the reverse proxy names one."""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from benchmarks_db.scenarios import MAX_NAME_CHARS, delete_scenario, list_scenarios, save_scenario, set_visibility
from engine.presentation.edit import describe_layout
from engine.presentation.formatting import scenario_title
from engine.presentation.share import encode
from engine.scenario import ScenarioError
from ui import binding, cached, escape, state
from ui.links import app_url
from ui.settings import load_settings

SAVE_NAME = "save_name"
SAVE_PRIVATE = "save_private"
LAST_SAVED = "last_saved"
SAVED_LIST = "saved scenarios"    # where refused changes to saved scenarios are shown
PRIVATE_MEANS = "Private means not listed to others: anyone you give its link can still open it."


def _save() -> None:
    ss = st.session_state
    ss[state.PROBLEMS].pop("save name", None)
    sc, opts = state.scenario(), state.options()
    try:
        saved = save_scenario(cached.store(), sc, ss.get(SAVE_NAME, ""), opts, owner=state.signed_in_user(),
                              visibility="private" if ss.get(SAVE_PRIVATE) else "shared")
    except ScenarioError as err:
        ss[state.PROBLEMS]["save name"] = [msg for _, msg in err.problems]
        return
    ss[state.SAVED_IDS][encode(sc, opts)] = saved.scenario_id
    ss[LAST_SAVED] = saved


def _change(sid: str, visibility: str | None) -> None:
    """Make the user's saved scenario `visibility`, or delete it (None)."""
    ss = st.session_state
    ss[state.PROBLEMS].pop(SAVED_LIST, None)
    try:
        if visibility is None:
            delete_scenario(cached.store(), sid, state.signed_in_user())
        else:
            set_visibility(cached.store(), sid, state.signed_in_user(), visibility)
    except ScenarioError as err:
        ss[state.PROBLEMS][SAVED_LIST] = [msg for _, msg in err.problems]
        return
    last = ss.get(LAST_SAVED)
    if visibility is None:
        ss[state.SAVED_IDS] = {token: s for token, s in ss[state.SAVED_IDS].items() if s != sid}
        if last is not None and last.scenario_id == sid:
            ss.pop(LAST_SAVED)
    elif last is not None and last.scenario_id == sid:
        ss[LAST_SAVED] = replace(last, visibility=visibility)


def draw_sidebar() -> None:
    sc = state.scenario()
    settings = load_settings()
    user = state.signed_in_user()
    with st.sidebar:
        st.header(escape.md_escape(settings.title))
        st.markdown(f"**{scenario_title(sc)}**")
        st.caption(f"Layout: {describe_layout(sc.layout.model_dump())}")
        st.caption("The address bar always holds this scenario and the question asked on the Scenario page: copy "
                   "it to share exactly what you see.")
        if settings.read_only:
            st.info("This deployment is read-only: scenarios cannot be saved here (share the address bar instead).")
        else:
            with st.form("save_scenario", border=False):
                st.text_input("Scenario name", key=SAVE_NAME, max_chars=MAX_NAME_CHARS,
                              placeholder="e.g. 70B on 1,024 H100, Q3 plan",
                              help="Saving stores the scenario and the question asked on the Scenario page in this "
                                   "planner's database and gives them a short link (?s=...) that stays valid for "
                                   "everyone who can reach this planner.")
                if user is not None:
                    st.checkbox("Private", key=SAVE_PRIVATE, help=PRIVATE_MEANS)
                st.form_submit_button("Save scenario", on_click=_save)
        binding.field_problems("save name")
        saved = st.session_state.get(LAST_SAVED)
        if saved is not None:
            verb = "Saved" if saved.new else f"Already saved on {saved.created_at:%Y-%m-%d} as"
            st.success(f"{verb} '{escape.md_escape(saved.name)}'. Short link:")
            st.code(f"{app_url()}?s={saved.scenario_id}", language=None, wrap_lines=True)
            if saved.visibility == "private":
                st.caption(PRIVATE_MEANS)
        _saved_list(user, can_change=not settings.read_only)


def _saved_list(user: str | None, can_change: bool) -> None:
    """The recent saved scenarios listed to this user: everybody's shared ones and the user's own, which the user
    can make private or shared and delete where the store can be written."""
    recent = list_scenarios(cached.store(), viewer=user, limit=8)
    if not len(recent):
        return
    with st.expander("Saved scenarios", expanded=SAVED_LIST in st.session_state[state.PROBLEMS]):
        if user is not None and can_change:
            st.caption(f"Yours can be deleted or made private. {PRIVATE_MEANS}")
        binding.field_problems(SAVED_LIST)
        for row in recent.itertuples():
            line = f"[{escape.md_escape(row.name)}](?s={row.scenario_id}) · {row.created_at:%Y-%m-%d}"
            if user is None or row.owner != user:
                st.markdown(line)
                continue
            st.markdown(f"{line} · yours, {row.visibility}")
            if not can_change:
                continue
            other = "shared" if row.visibility == "private" else "private"
            with st.container(horizontal=True):         # two columns of the sidebar cut "Make private"
                st.button("Share" if other == "shared" else "Make private", key=f"saved:{other}:{row.scenario_id}",
                          on_click=_change, args=(row.scenario_id, other))
                st.button("Delete", key=f"saved:delete:{row.scenario_id}", on_click=_change,
                          args=(row.scenario_id, None))
