"""The manager's journey in real headless Chromium at a laptop's 1280x800 and a desktop's 1920x1080, against the app
started as deployed: the question (how many accelerators to finish in 30 days, at what cost and CO2, from which
vendor) answered from the first page in one action, with ranges; the answer made the scenario, and every page and the
Summary report then show the same figures; nothing cut off anywhere. Screenshots in test-artifacts/."""
import re

import pytest

from engine.presentation.figures import NO_POWER

from tests.e2e.conftest import (VIEWPORTS, answered, ask, choose, cut_off, downloaded_report, go_to, no_exception, open_page, screenshot,
                                screenshot_whole, wait_for_app)

pytestmark = pytest.mark.e2e
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
    answered(page, answer)
    wait_for_app(page)
    no_exception(page)
    assert answer.is_visible() and answer.bounding_box()["y"] < VIEWPORTS[size]["height"]    # on the first screen
    screenshot(page, f"manager-answer-first-screen-{size}")
    answer, results = answer_and_results(page)
    assert days(answer["Days (wall clock)"][0]) <= 30
    # every figure of the answer has its range, or says why it has none (an accelerator whose vendor publishes no
    # power figure: NO_POWER)
    has_range = lambda line: "\u2013" in line or line == NO_POWER
    for label in ("Days (wall clock)", "Cost", "GPU-hours (billed)", "Energy", "CO2e"):
        assert has_range(answer[label][1]), (label, answer)
    for label in ("Time to train", "Cost", "Energy"):
        assert has_range(results[label][1]), (label, results)       # and so has every headline figure
    assert re.fullmatch(r"[\d,]+", answer["Accelerators"][0])
    assert page.get_by_text("Nearest alternatives").count() == 1
    assert page.get_by_text(re.compile(r"^A well-tuned stack")).count() >= 1   # the stack explained
    assert cut_off(page) == []
    screenshot_whole(page, f"manager-answer-{size}")


def test_a_chance_of_meeting_the_deadline_sizes_for_the_top_of_the_range(app_url, sized):
    """The manager asks for a 90% chance: the answer's whole range of days is then within the deadline, and the
    Vendor choice page, which asks the same question, ranks for the same chance."""
    size, page = sized
    open_page(page, app_url)
    page.get_by_role("spinbutton", name="Deadline (days)").fill("30")
    choose(page, "Chance of meeting it", "90% (its range's top)")
    page.get_by_role("button", name="Answer", exact=True).click()
    answered(page, page.get_by_text(re.compile(r"train it within 30 days with a 90% chance")))
    wait_for_app(page)
    no_exception(page)
    answer, _ = answer_and_results(page)
    high = days(answer["Days (wall clock)"][1].split("\u2013")[1])
    assert high <= 30.05 and days(answer["Days (wall clock)"][0]) < high
    assert cut_off(page) == []
    screenshot(page, f"manager-answer-90-percent-{size}")
    go_to(page, "Vendor choice")
    page.get_by_text(re.compile(r"within 30 days with a 90% chance")).first.wait_for(timeout=300_000)
    no_exception(page)


def test_the_answer_becomes_the_scenario_and_every_page_and_the_report_agree(app_url, sized, tmp_path):
    size, page = sized
    open_page(page, app_url)
    page.get_by_role("spinbutton", name="Deadline (days)").fill("60")
    page.get_by_role("button", name="Answer").click()
    answered(page, page.get_by_text(re.compile(r"train it within 60 days")))
    wait_for_app(page)
    answer = {label: value for label, (value, _) in answer_and_results(page)[0].items()}
    page.get_by_role("button", name="Use this answer in the scenario").click()
    # the plan is worked out again for the adopted scenario (a search over every accelerator) before the page can say
    # the scenario is this answer. In whole-suite runs on 2 cores (2026-11-24, 2026-11-28) the sentence was sometimes
    # not there after 120-300 s with no error in the server's log; 120 s is the slot wait of engine/work_limits.py,
    # and every browser of the suite is one requester (127.0.0.1) whose earlier pages' jobs may hold the one slot, so
    # the likeliest cause is a Busy refusal, which `answered` meets as a user would
    answered(page, page.get_by_text("The scenario is this answer: every page shows it."))
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
    report = downloaded_report(page, tmp_path)
    assert "The scenario of this report is this answer" in report
    headline = re.search(r'<p class="rec">(.*?)</p>', report).group(1)
    assert answer["Days (wall clock)"] in headline and answer["Cost"] in headline
    assert report.count(answer["Days (wall clock)"]) >= 3       # the headline, the answer and the key figures
    report_page = page.context.new_page()
    report_page.goto((tmp_path / "report.html").as_uri())
    screenshot(report_page, f"summary-report-{size}")


def usd(text: str) -> float:
    """'$13,615,338', '$14.3M' or a table cell's raw 14842683.15 as dollars."""
    m = re.search(r"\$?([\d,.]+)([kMB]?)", text)
    return float(m.group(1).replace(",", "")) * {"": 1, "k": 1e3, "M": 1e6, "B": 1e9}[m.group(2)]


def option_table(page) -> list[dict]:
    """The rows of 'Every accelerator sized ...' that the grid has drawn (the top ones, in the plan's order)."""
    page.get_by_text(re.compile(r"^Every accelerator sized")).click()
    table = page.get_by_test_id("stDataFrame").first
    table.locator("td").first.wait_for(state="attached")          # the grid fills its cells after the run
    rows = [r.locator("th, td").all_inner_texts() for r in table.locator("tr").all()]
    return [dict(zip(rows[0], r)) for r in rows[1:] if len(r) == len(rows[0])]


def option_notes(page) -> dict[str, str]:
    """The notes listed under the options table: accelerator name -> note."""
    items = page.get_by_test_id("stExpander").filter(has_text="Every accelerator sized").locator("li").all_inner_texts()
    return dict(item.split(": ", 1) for item in items)


def test_a_deadline_gets_the_cheapest_cluster_that_meets_it_and_its_chance(app_url, sized):
    size, page = sized
    open_page(page, app_url)
    ask(page, "Deadline (days)", "60")
    no_exception(page)
    headline = page.get_by_test_id("stAlert").filter(has_text="train it within 60 days").inner_text()
    answer, _ = answer_and_results(page)
    assert days(answer["Days (wall clock)"][0]) <= 60
    low, high = (float(x.replace(",", "")) for x in re.findall(r"[\d,.]+", answer["Days (wall clock)"][1])[:2])
    # the chance of meeting the deadline is given exactly when the range of days crosses it
    assert ("chance" in headline) == (high > 60), (headline, low, high)
    rows = option_table(page)
    meeting = [r for r in rows if r["meets"] == "yes"]
    assert meeting and meeting[0]["accelerator"] in headline              # the first of the cheapest-first list
    assert usd(meeting[0]["cost USD"]) == pytest.approx(usd(answer["Cost"][0]), rel=0.01)
    priced = [usd(r["cost USD"]) for r in meeting[1:] if r["cost USD"] not in ("", "None")]
    assert all(cost >= usd(meeting[0]["cost USD"]) for cost in priced)
    assert cut_off(page) == []
    screenshot_whole(page, f"manager-deadline-60-days-{size}")


def test_a_budget_names_the_cheapest_priced_option_and_what_would_make_it_work(app_url, sized):
    size, page = sized
    open_page(page, app_url)
    ask(page, "Budget (USD)", "10000000")
    no_exception(page)
    nothing = page.get_by_test_id("stAlert").filter(has_text="No priced accelerator meets for at most $10,000,000")
    said = nothing.inner_text()
    named = re.search(r"the cheapest is [\d,]+ x (.+?): (\$[\d,]+)", said)
    option_table(page)
    notes = option_notes(page)
    priced = {name: usd(note.split("need ", 1)[1]) for name, note in notes.items() if "need $" in note}
    unpriced = [name for name, note in notes.items() if "no price" in note]
    assert priced and unpriced                                    # the unpriced are listed apart, with why
    assert min(priced.values()) == pytest.approx(usd(named.group(2)), abs=1)     # the cheapest priced one is named
    assert named.group(1) not in unpriced and not any(name in said for name in unpriced)
    levers = page.get_by_test_id("stMarkdownContainer").filter(has_text="What would make the budget work").inner_text()
    assert "owning the cluster" in levers, levers
    assert cut_off(page) == []
    screenshot_whole(page, f"manager-budget-10M-{size}")


def test_one_recommendation_on_the_answer_the_vendor_page_and_the_report(app_url, sized, tmp_path):
    size, page = sized
    open_page(page, app_url)
    ask(page, "Deadline (days)", "60")
    answer, _ = answer_and_results(page)
    headline = page.get_by_test_id("stAlert").filter(has_text="train it within 60 days").inner_text()
    name = re.search(r"^[\d,]+ x (.+?) in [\d,]+ nodes", headline).group(1)
    go_to(page, "Vendor choice")
    no_exception(page)
    recommendation = page.get_by_test_id("stAlert").filter(has_text="Recommendation:").inner_text()
    assert f"Recommendation: {name} ({answer['Days (wall clock)'][0]}" in recommendation, (recommendation, answer)
    assert f"on {answer['Accelerators'][0]} accelerators" in recommendation
    screenshot_whole(page, f"manager-one-recommendation-vendor-{size}")
    report = downloaded_report(page, tmp_path)
    assert name in report and answer["Days (wall clock)"][0] in report and answer["Cost"][0] in report


def test_a_saved_short_link_restores_the_question_and_its_answer(app_url, sized, browser):
    size, page = sized
    open_page(page, app_url)
    ask(page, "Deadline (days)", "60")
    asked = page.get_by_test_id("stAlert").filter(has_text="train it within 60 days").inner_text()
    page.get_by_role("textbox", name="Scenario name").fill(f"e2e 60-day question {size}")
    page.get_by_role("button", name="Save scenario").click()
    wait_for_app(page)
    link = page.get_by_test_id("stCode").inner_text().strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?s=[a-z2-7]{10}", link), link
    assert cut_off(page) == []                                      # the short link is whole in the sidebar
    screenshot(page, f"manager-short-link-sidebar-{size}")
    other = browser.new_context(viewport=VIEWPORTS[size])
    try:
        fresh = other.new_page()
        open_page(fresh, link)
        fresh.wait_for_function("() => document.querySelector('[data-testid=stMain]').innerText"
                                ".includes('train it within 60 days')", timeout=180_000)
        wait_for_app(fresh)
        no_exception(fresh)
        assert fresh.get_by_role("spinbutton", name="Deadline (days)", exact=True).input_value() == "60"
        assert fresh.get_by_test_id("stAlert").filter(has_text="train it within 60 days").inner_text() == asked
        screenshot_whole(fresh, f"manager-short-link-opened-{size}")
    finally:
        other.close()
