"""The manager's journey in real headless Chromium at a laptop's 1280x800 and a desktop's 1920x1080, against the app
started as deployed: the question (how many accelerators to finish in 30 days, at what cost and CO2, from which
vendor) answered from the first page in one action, with ranges; the answer made the scenario, and every page and the
Summary report then show the same figures; nothing cut off anywhere. Screenshots in test-artifacts/."""
import re

import pytest

from tests.e2e.conftest import cut_off, go_to, no_exception, open_page, screenshot, screenshot_whole, wait_for_app

pytestmark = pytest.mark.e2e
VIEWPORTS = {"1280x800": {"width": 1280, "height": 800}, "1920x1080": {"width": 1920, "height": 1080}}
PAGES = ["Memory", "Layout search", "Cost & carbon", "Vendor choice", "Benchmarks", "Summary report"]


@pytest.fixture(params=list(VIEWPORTS))
def sized(browser, request):
    context = browser.new_context(viewport=VIEWPORTS[request.param], accept_downloads=True)
    yield request.param, context.new_page()
    context.close()


def figures(page) -> list[tuple[str, str, str | None]]:
    """Every metric in page order: (label, value, the line under the value (its range) or None)."""
    out = []
    for m in page.get_by_test_id("stMetric").all():
        delta = m.get_by_test_id("stMetricDelta")
        out.append((m.get_by_test_id("stMetricLabel").inner_text().strip(),
                    m.get_by_test_id("stMetricValue").inner_text().strip(),
                    delta.inner_text().strip() if delta.count() else None))
    return out


def answer_and_results(page) -> tuple[dict, dict]:
    """The answer's figures (the first six, ending with CO2e) and the Scenario results after them, each label ->
    (value, range)."""
    shown = figures(page)
    end = [label for label, _, _ in shown].index("CO2e") + 1
    return ({label: (value, line) for label, value, line in shown[:end]},
            {label: (value, line) for label, value, line in shown[end:]})


def days(text: str) -> float:
    return float(re.match(r"([\d,.]+) days", text).group(1).replace(",", ""))


def test_the_managers_question_is_answered_from_the_first_page_in_one_action(app_url, sized):
    size, page = sized
    open_page(page, app_url)
    target = page.get_by_role("spinbutton", name="Deadline (days)")
    target.fill("30")
    target.press("Enter")                                    # the one action: type the deadline, press Enter
    answer = page.get_by_text(re.compile(r"train it within 30 days"))
    answer.wait_for(timeout=120_000)
    wait_for_app(page)
    no_exception(page)
    assert answer.is_visible() and answer.bounding_box()["y"] < VIEWPORTS[size]["height"]    # on the first screen
    screenshot(page, f"manager-answer-first-screen-{size}")
    answer, results = answer_and_results(page)
    assert days(answer["Days (wall clock)"][0]) <= 30
    for label in ("Days (wall clock)", "Cost", "GPU-hours (billed)", "Energy", "CO2e"):
        assert "\u2013" in answer[label][1], (label, answer)         # every figure of the answer has its range
    for label in ("Time to train", "Cost", "Energy"):
        assert "\u2013" in results[label][1], (label, results)       # and so has every headline figure
    assert re.fullmatch(r"[\d,]+", answer["Accelerators"][0])
    assert page.get_by_text("Nearest alternatives").count() == 1
    assert page.get_by_text(re.compile(r"^A well-tuned Megatron-class stack")).count() >= 1   # the stack explained
    assert cut_off(page) == []
    screenshot_whole(page, f"manager-answer-{size}")


def test_the_answer_becomes_the_scenario_and_every_page_and_the_report_agree(app_url, sized, tmp_path):
    size, page = sized
    open_page(page, app_url)
    page.get_by_role("spinbutton", name="Deadline (days)").fill("60")
    page.get_by_role("button", name="Answer").click()
    page.get_by_text(re.compile(r"train it within 60 days")).wait_for(timeout=120_000)
    wait_for_app(page)
    answer = {label: value for label, (value, _) in answer_and_results(page)[0].items()}
    page.get_by_role("button", name="Use this answer in the scenario").click()
    page.get_by_text("The scenario is this answer: every page shows it.").wait_for(timeout=120_000)
    wait_for_app(page)
    _, results = answer_and_results(page)
    assert results["Time to train"][0] == answer["Days (wall clock)"] and results["Cost"][0] == answer["Cost"]
    assert "\u2013" in results["Time to train"][1]
    assert cut_off(page) == []
    screenshot_whole(page, f"page-scenario-{size}")
    for title in PAGES:
        go_to(page, title)
        if title == "Benchmarks":
            page.get_by_role("tab", name="Predicted vs MLPerf").click()
            page.get_by_text("engine's prediction (minutes)").first.wait_for(timeout=120_000)
        if title == "Layout search":
            page.get_by_role("button", name="Run layout search").click()
            page.get_by_text("Best layouts").wait_for(timeout=120_000)
        wait_for_app(page)
        no_exception(page)
        assert cut_off(page) == [], title
        screenshot_whole(page, "page-" + re.sub(r"\W+", "-", title.lower()) + f"-{size}")
        if title == "Cost & carbon":
            wall = next((value, line) for label, value, line in figures(page) if label == "Wall-clock time")
            assert wall[0] == answer["Days (wall clock)"] and "\u2013" in wall[1]
    with page.expect_download() as download:
        page.get_by_role("button", name="Download the summary report (HTML)").click()
    path = tmp_path / "report.html"
    download.value.save_as(path)
    report = path.read_text()
    assert "The scenario of this report is this answer" in report
    headline = re.search(r'<p class="rec">(.*?)</p>', report).group(1)
    assert answer["Days (wall clock)"] in headline and answer["Cost"] in headline
    assert report.count(answer["Days (wall clock)"]) >= 3       # the headline, the answer and the key figures
    report_page = page.context.new_page()
    report_page.goto(path.as_uri())
    screenshot(report_page, f"summary-report-{size}")
