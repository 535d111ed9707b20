"""LLM training capacity planner: the router. Every page reads one scenario from session state; this file creates it
(from the link on a session's first run), keeps the address bar in step with it, and draws the sidebar."""
import streamlit as st

from benchmarks_db.store import StoreUnavailable
from ui import components, escape, links
from ui.settings import SettingsError, load_settings
from ui.sidebar import draw_sidebar

# Nothing is cut off at 1280x800 or 1920x1080 (tests/e2e cut_off): figures wrap instead of ending in "5.36k M...", at a
# size that lets two sit side by side in a narrow column; a code block (the sidebar's short link, a command) wraps
# even inside a word, as a link has no spaces, instead of hiding its end behind a scroll bar.
STYLE = """<style>
[data-testid="stMetric"] [data-testid="stMarkdownContainer"], [data-testid="stMetric"] [data-testid="stMarkdownContainer"] p {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important; }
[data-testid="stMetricValue"] { font-size: 1.7rem; line-height: 1.25; }
[data-testid="stCode"] code { overflow-wrap: anywhere; }
</style>"""
PAGES = [
    st.Page("pages/scenario.py", title="Scenario", url_path="scenario", default=True),
    st.Page("pages/memory.py", title="Memory", url_path="memory"),
    st.Page("pages/layout_search.py", title="Layout search", url_path="layout-search"),
    st.Page("pages/cost_carbon.py", title="Cost & carbon", url_path="cost-carbon"),
    st.Page("pages/vendor.py", title="Vendor choice", url_path="vendor"),
    st.Page("pages/benchmarks.py", title="Benchmarks", url_path="benchmarks"),
    st.Page("pages/report.py", title="Summary report", url_path="report"),
]

page = st.navigation(PAGES)
try:
    settings = load_settings()
except SettingsError as err:
    st.error("This planner is misconfigured; its administrator must correct these settings and restart it:\n\n"
             + "\n".join(f"- {escape.md_escape(problem)}" for problem in err.problems))
    st.stop()
st.set_page_config(page_title=settings.title, page_icon="assets/favicon.png", layout="wide")
st.html(STYLE)
try:
    links.init_session()
    draw_sidebar()
    components.show_messages()
    page.run()
except StoreUnavailable as err:         # e.g. a full disk: a message, and the store is reopened on the next run
    st.error(str(err))
    st.stop()
links.sync_url()
