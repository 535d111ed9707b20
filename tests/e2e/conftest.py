"""End-to-end harness: the app started as deployed (serve.py) on a free loopback port with a fresh, seeded DuckDB
store, and real headless Chromium driven by Playwright. Screenshots go to test-artifacts/ (git-ignored)."""
from pathlib import Path

import pytest

from serve import local_server

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
VIEWPORT = {"width": 1400, "height": 2600}     # Streamlit scrolls inside stMain: a tall viewport shows whole pages


@pytest.fixture(scope="session")
def app_url(tmp_path_factory):
    """The app started as deployed (serve.py) on a free loopback port, with a store seeded with the published data."""
    with local_server(tmp_path_factory.mktemp("e2e")) as (url, _pid, _log):
        yield url.rstrip("/")


@pytest.fixture
def fresh_app_url(tmp_path):
    """A server no browser has visited yet (for what only a process's first session sees)."""
    with local_server(tmp_path) as (url, _pid, _log):
        yield url.rstrip("/")


@pytest.fixture
def context(browser):
    """A fresh browser profile per test (a new Streamlit session, no shared cookies or storage)."""
    ctx = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    return context.new_page()


def wait_for_app(page, timeout_ms: int = 60_000) -> None:
    """Wait until the script run is over and the app is idle (the signals Streamlit's own e2e suite uses)."""
    page.wait_for_timeout(250)
    page.wait_for_selector("[data-testid='stAppViewContainer']", state="attached", timeout=timeout_ms)
    page.locator("[data-testid='stApp'][data-test-connection-state='CONNECTED']").wait_for(
        state="attached", timeout=timeout_ms)
    page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(
        state="attached", timeout=timeout_ms)
    page.wait_for_function("() => document.querySelectorAll(\"[data-testid='stSkeleton']\").length === 0",
                           timeout=timeout_ms)
    page.wait_for_timeout(150)


def open_page(page, url: str) -> None:
    page.goto(url)
    wait_for_app(page)


def go_to(page, title: str) -> None:
    """Click a page in the sidebar navigation."""
    page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
    wait_for_app(page)


def choose(page, label: str, option: str) -> None:
    """Pick an option of the st.selectbox labelled `label`."""
    page.get_by_role("combobox", name=label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_for_app(page)


def table_cells(page, index: int = 0) -> list[str]:
    return page.get_by_test_id("stDataFrame").nth(index).locator("td").all_inner_texts()


def upload(page, name: str, data: bytes) -> None:
    """Upload a file on the Benchmarks page's "Upload results" tab and add it to the store."""
    page.get_by_role("tab", name="Upload results").click()
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
        files=[{"name": name, "mimeType": "application/octet-stream", "buffer": data}])
    page.get_by_role("button", name=f"Remove {name}").wait_for()          # the file has reached the server
    wait_for_app(page)
    page.get_by_role("button", name="Check and add to the store").click()
    wait_for_app(page)


def metrics(page) -> dict[str, str]:
    """Every st.metric on the page: label -> value text."""
    out = {}
    for m in page.get_by_test_id("stMetric").all():
        label = m.get_by_test_id("stMetricLabel").inner_text().strip()
        out[label] = m.get_by_test_id("stMetricValue").inner_text().strip()
    return out


def no_exception(page) -> None:
    assert page.get_by_test_id("stException").count() == 0, page.get_by_test_id("stException").first.inner_text()


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


CUT_OFF_JS = """() => {
  const out = [];
  const shown = '[data-testid="stMetric"] *, [data-testid="stWidgetLabel"] *, input, button, [role="tab"], '
              + '[data-testid="stMarkdownContainer"] p';
  for (const el of document.querySelectorAll(shown)) {
    if (el.offsetParent === null || el.type === 'file') continue;
    const style = getComputedStyle(el);
    const wider = el.scrollWidth > el.clientWidth + 1;
    if (wider && (el.tagName === 'INPUT' || style.overflow !== 'visible' || style.textOverflow === 'ellipsis'))
      out.push(el.tagName === 'INPUT' ? `field ${el.getAttribute('aria-label')}: ${el.value || el.placeholder}`
                                     : el.innerText.slice(0, 80));
  }
  return out;
}"""


def cut_off(page) -> list[str]:
    """Texts the browser shows cut off: metrics, labels, field values, buttons, tabs and paragraphs wider than their
    box with the overflow hidden or an ellipsis (what a reader cannot see in full)."""
    return page.evaluate(CUT_OFF_JS)


def screenshot_whole(page, name: str) -> None:
    """The whole page at the viewport's width: Streamlit scrolls inside its main block, so the viewport grows to the
    content's height for the screenshot and is then set back."""
    size = page.viewport_size
    height = page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": max(size["height"], height + 40)})
    page.wait_for_timeout(400)
    screenshot(page, name)
    page.set_viewport_size(size)
    page.wait_for_timeout(200)
