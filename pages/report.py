"""Summary report: one page for a manager (download or print), and the scenario as a JSON file."""
from urllib.parse import urlencode

import streamlit as st

from benchmarks_db.scenarios import scenario_id
from benchmarks_db.store import utc_now
from engine.presentation.formatting import scenario_title
from engine.presentation.summary import summary_html
from engine.scenario import ScenarioError
from ui import answer, cached, escape, links, state
from ui.links import app_url
from ui.work_limits import Busy

sc = state.scenario()
est = cached.current_estimate()

st.title("Summary report")
st.caption("One page with the scenario, the recommendation, the key figures and charts, and where the numbers come "
           "from. It is a self-contained HTML file: open it in any browser and print it, or attach it to an email.")
try:
    vendor = cached.current_comparison()
except ScenarioError as err:
    vendor = None
    st.warning("The vendor recommendation is left out: " + escape.problems_text(err.problems))
except Busy as err:
    vendor = None
    st.warning(f"The vendor recommendation is left out for now: {err}")
opts = state.options()
asked = answer.current_job(sc, opts)
result = None
if asked is not None:
    with st.spinner("Waiting for the answer to the target set on the Scenario page ..."):
        asked.wait(120)
    try:
        result = asked.value()
    except (ScenarioError, Busy) as err:
        st.warning("The answer to the target is left out: " + escape.md_escape(str(err)))
link = f"{app_url()}?{urlencode(links.share_params())}"
report = summary_html(sc, est, utc_now(), link=link, vendor=vendor, answer=result, efficiency=opts.efficiency)
sid = scenario_id(sc)
cols = st.columns(2)
cols[0].download_button("Download the summary report (HTML)", report, f"training-plan-{sid}.html", "text/html",
                        type="primary", on_click="ignore")
cols[1].download_button("Download the scenario (JSON)", sc.model_dump_json(indent=2, exclude_none=True),
                        f"scenario-{sid}.json", "application/json", on_click="ignore",
                        help="Load it again on the Scenario page, or run `python -m engine estimate` on it.")
st.markdown(f"**Preview:** {scenario_title(sc)}")
st.iframe(report, height=1900)
