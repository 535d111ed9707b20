"""The sidebar on every page: what the scenario is, how to share it, and saving it under a short link."""
from __future__ import annotations

import streamlit as st

from benchmarks_db.scenarios import MAX_NAME_CHARS, list_scenarios, save_scenario
from engine.presentation.edit import describe_layout
from engine.presentation.formatting import scenario_title
from engine.scenario import ScenarioError
from ui import binding, cached, escape, state
from ui.links import app_url
from ui.settings import load_settings

SAVE_NAME = "save_name"
LAST_SAVED = "last_saved"


def _save() -> None:
    ss = st.session_state
    ss[state.PROBLEMS].pop("save name", None)
    try:
        saved = save_scenario(cached.store(), state.scenario(), ss.get(SAVE_NAME, ""))
    except ScenarioError as err:
        ss[state.PROBLEMS]["save name"] = [msg for _, msg in err.problems]
        return
    ss[state.SAVED_IDS].add(saved.scenario_id)
    ss[LAST_SAVED] = saved


def draw_sidebar() -> None:
    sc = state.scenario()
    settings = load_settings()
    with st.sidebar:
        st.header(escape.md_escape(settings.title))
        st.markdown(f"**{scenario_title(sc)}**")
        st.caption(f"Layout: {describe_layout(sc.layout.model_dump())}")
        st.caption("The address bar always holds this scenario: copy it to share exactly what you see.")
        if settings.read_only:
            st.info("This deployment is read-only: scenarios cannot be saved here (share the address bar instead).")
        else:
            with st.form("save_scenario", border=False):
                st.text_input("Scenario name", key=SAVE_NAME, max_chars=MAX_NAME_CHARS,
                              placeholder="e.g. 70B on 1,024 H100, Q3 plan",
                              help="Saving stores the scenario in this planner's database and gives it a short "
                                   "link (?s=...) that stays valid for everyone who can reach this planner.")
                st.form_submit_button("Save scenario", on_click=_save)
        binding.field_problems("save name")
        saved = st.session_state.get(LAST_SAVED)
        if saved is not None:
            verb = "Saved" if saved.new else f"Already saved on {saved.created_at:%Y-%m-%d} as"
            st.success(f"{verb} '{escape.md_escape(saved.name)}'. Short link:")
            st.code(f"{app_url()}?s={saved.scenario_id}", language=None)
        recent = list_scenarios(cached.store(), limit=8)
        if len(recent):
            with st.expander("Saved scenarios"):
                for row in recent.itertuples():
                    st.markdown(f"[{escape.md_escape(row.name)}](?s={row.scenario_id}) · {row.created_at:%Y-%m-%d}")
