"""What a planner does, in real headless Chromium against the app started as deployed (serve.py): every page offline, a preset, the layout
search, a what-if shared by copying the address bar, a saved short link, uploads good and bad, and the report."""
import re
from urllib.parse import parse_qs, urlparse

import pytest

from engine.inputs import parse_scenario
from engine.presentation.share import decode, encode
from tests.conftest import runner_result
from tests.e2e.conftest import (choose, go_to, metrics, no_exception, open_page, screenshot, table_cells, upload,
                                wait_for_app)

pytestmark = pytest.mark.e2e
PAGES = ["Scenario", "Memory", "Layout search", "Cost & carbon", "Vendor choice", "Benchmarks", "Summary report"]


def scenario_in_url(page):
    return decode(parse_qs(urlparse(page.url).query)["sc"][0]).scenario


def test_every_page_renders_without_a_request_leaving_the_machine(app_url, page):
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    open_page(page, app_url)
    for title in PAGES:
        go_to(page, title)
        no_exception(page)
        assert "sc=" in page.url                       # the address bar carries the scenario on every page
        screenshot(page, "page-" + re.sub(r"\W+", "-", title.lower()))
    outside = [u for u in requests if not u.startswith((app_url, "data:", "blob:"))]
    assert requests and not outside, outside


def test_a_shared_link_works_as_the_first_request_to_a_fresh_server(fresh_app_url, page):
    # Streamlit only leaves its legacy pages/ discovery once app.py has run in the process; serve.py turns it off
    # before the first session, so a deep link opened first (e.g. right after a restart) gets app.py's navigation
    shared = parse_scenario({"model": {"preset": "llama3.1-8b"},
                             "training": {"seq_len": 4096, "global_batch_size": 256, "total_tokens": 1e12},
                             "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 64},
                             "layout": {"tp": 2, "pp": 1, "dp": 32, "micro_batch_size": 1, "zero_stage": 1}})
    open_page(page, f"{fresh_app_url}/memory?sc={encode(shared)}")
    no_exception(page)
    assert page.get_by_role("heading", name="Memory per accelerator").count() == 1
    assert page.get_by_test_id("stSidebarNav").get_by_role("link").all_inner_texts() == PAGES
    assert scenario_in_url(page) == shared


def test_preset_search_what_if_and_a_copied_address_reproduce_the_numbers(app_url, page, browser):
    open_page(page, app_url)
    choose(page, "Model", "Llama 3.1 8B")
    assert scenario_in_url(page).model.preset == "llama3.1-8b"
    go_to(page, "Layout search")
    page.get_by_role("button", name="Run layout search").click()
    wait_for_app(page)
    no_exception(page)
    assert page.get_by_text("Best layouts").count() == 1
    assert page.get_by_test_id("stPlotlyChart").count() == 2               # time breakdown and Pareto front
    screenshot(page, "journey-layout-search")
    # picking the preset already chose the fastest layout that fits, so the search's best is the scenario's own
    assert page.get_by_text("This is the scenario's current layout.").count() == 1
    go_to(page, "Memory")
    before = metrics(page)
    choose(page, "Recompute (activation checkpointing)", "full")
    assert scenario_in_url(page).layout.recompute == "full"
    seen = metrics(page)
    assert seen["Step time"] != before["Step time"]                    # full recompute costs time
    screenshot(page, "journey-memory-what-if")
    other = browser.new_context(viewport={"width": 1400, "height": 2600})
    try:
        fresh = other.new_page()
        open_page(fresh, page.url)
        no_exception(fresh)
        assert metrics(fresh) == seen
        assert scenario_in_url(fresh) == scenario_in_url(page)
    finally:
        other.close()


def test_a_saved_scenario_opens_from_its_short_link(app_url, page, browser):
    open_page(page, app_url)
    field = page.get_by_role("spinbutton", name="Number of accelerators")
    field.fill("512")
    field.press("Enter")
    wait_for_app(page)
    seen = metrics(page)
    page.get_by_role("textbox", name="Scenario name").fill("e2e plan, 512 H100")
    page.get_by_role("button", name="Save scenario").click()
    wait_for_app(page)
    link = page.get_by_test_id("stCode").inner_text().strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?s=[a-z2-7]{10}", link), link
    assert urlparse(page.url).query == urlparse(link).query           # the address bar switched to the short form
    other = browser.new_context(viewport={"width": 1400, "height": 2600})
    try:
        fresh = other.new_page()
        open_page(fresh, link)
        no_exception(fresh)
        assert fresh.get_by_text("Opened the saved scenario 'e2e plan, 512 H100'").count() == 1
        assert metrics(fresh) == seen
    finally:
        other.close()


def test_a_bad_link_explains_itself_and_shows_the_defaults(app_url, page):
    open_page(page, f"{app_url}/memory?sc=1.garbage")
    no_exception(page)
    assert page.get_by_text("This link could not be opened").count() == 1
    open_page(page, f"{app_url}/?s=nosuchidzz")
    assert page.get_by_text("no scenario is saved under id nosuchidzz").count() == 1


@pytest.fixture(scope="module")
def runner_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("runner") / "results.json"
    runner_result("matmul", out)
    return out


def counts(page) -> dict[str, tuple[int, int]]:
    """The before/after row counts table of the last upload: table -> (before, after)."""
    table = page.get_by_test_id("stDataFrame").last
    table.locator("td").first.wait_for(state="attached")               # the grid fills its cells after the run
    rows = [r.locator("th, td").all_inner_texts() for r in table.locator("tr").all()]
    header, body = rows[0], [r for r in rows[1:] if len(r) == 3]
    assert header[-2:] == ["before", "after"], rows
    return {name: (int(before), int(after)) for name, before, after in body}


def test_uploads_a_runner_file_into_the_table_and_refuses_a_malformed_one(app_url, page, runner_file):
    open_page(page, app_url)
    go_to(page, "Benchmarks")
    upload(page, "not-a-result.json", b'{"schema_version": 1, "results": [}')
    no_exception(page)
    assert page.get_by_text("nothing was written to the store").count() == 1
    refused = counts(page)
    assert set(refused) >= {"source", "run", "measurement"}
    assert all(before == after for before, after in refused.values())
    screenshot(page, "journey-upload-refused")
    upload(page, "results.json", runner_file.read_bytes())
    no_exception(page)
    added_text = page.get_by_text(re.compile(r"Added results\.json \(runner_json\)")).inner_text()
    run_id = re.search(r"Run ids: (run-[0-9a-f]+)", added_text).group(1)
    added = {table: after - before for table, (before, after) in counts(page).items()}
    assert added["run"] == 1 and added["measurement"] >= 1
    screenshot(page, "journey-upload-added")
    page.get_by_role("tab", name="Browse").click()
    choose(page, "Source", "user_submitted")
    microbench = page.get_by_test_id("stDataFrame").nth(1)
    microbench.locator("td", has_text=run_id).first.wait_for(state="attached")   # the grid fills its cells after the run
    assert run_id in table_cells(page, 1)                          # the microbenchmark table shows the upload


def test_the_summary_report_downloads_as_one_self_contained_file(app_url, page, tmp_path):
    open_page(page, app_url)
    seen = metrics(page)
    go_to(page, "Summary report")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download the summary report (HTML)").click()
    path = tmp_path / "report.html"
    download.value.save_as(path)
    report = path.read_text()
    assert report.startswith("<!DOCTYPE html>") and "Training plan: Llama 3.1 70B" in report
    assert seen["Step time"] in report and seen["MFU"] in report
    assert "<script" not in report and " src=" not in report
    report_page = page.context.new_page()
    report_page.goto(path.as_uri())
    screenshot(report_page, "summary-report")
