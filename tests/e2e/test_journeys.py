"""What a planner does, in real headless Chromium against the app started as deployed (serve.py): every page offline, a preset, the layout
search, a what-if shared by copying the address bar, a saved short link, uploads good and bad, and the report."""
import math
import re
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest

from engine.inputs import parse_scenario
from engine.planning.estimate import estimate
from engine.scenario import Layout
from engine.presentation.share import decode, encode
from tests.conftest import runner_result
from serve import local_server
from tests.e2e.conftest import (VIEWPORTS, choose, cut_off, downloaded_report, go_to, metrics, no_exception, open_page,
                                screenshot, screenshot_whole, table_cells, upload, wait_for_app)

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
    assert run_id in table_cells(page, 1, awaiting=run_id)         # the microbenchmark table shows the upload


def test_a_training_log_of_the_shared_scenario_is_predicted_beside_its_measurement(fresh_app_url, page):
    """Issue 21 item 7 in the browser: a TorchTitan log of a short run of the scenario a link opens is uploaded, and
    the page sets the engine's prediction beside the measured step time. The prediction is a background job the page
    polls (ui/training_runs.py), so the page is drawn before it is done and again when it is."""
    from tests.benchmarks_db.test_step_logs import LOGS, TT_SCENARIO
    open_page(page, f"{fresh_app_url}/benchmarks?sc={encode(parse_scenario(TT_SCENARIO))}")
    upload(page, "tt-run.log", (LOGS / "torchtitan-pr3393.log").read_bytes())
    no_exception(page)
    assert page.get_by_text(re.compile(r"Added tt-run\.log \(step_log_torchtitan\)")).count() == 1
    page.get_by_role("tab", name="Predicted vs MLPerf").click()
    row = page.get_by_test_id("stDataFrame").locator("td", has_text="tt-run.log").first
    row.wait_for(state="attached", timeout=120_000)
    wait_for_app(page)
    no_exception(page)
    table = page.get_by_test_id("stDataFrame").filter(has=page.locator("td", has_text="tt-run.log"))
    cells = table.locator("td").all_inner_texts()
    numbers = [float(c) for c in cells if re.fullmatch(r"[0-9.]+", c)]
    # the steady steps 15-21 of the log print 7,272-7,334 tokens/s per GPU: median 7,309, so 8 x 8192 / (7,309 x 8)
    assert any(x == pytest.approx(8 * 8192 / (7309 * 8), rel=1e-9) for x in numbers), cells
    predicted = estimate(parse_scenario(TT_SCENARIO)).step_time_s
    assert any(x == pytest.approx(predicted, rel=1e-9) for x in numbers), (predicted, cells)
    screenshot(page, "journey-training-run-predicted")


def test_the_summary_report_downloads_as_one_self_contained_file(app_url, page, tmp_path):
    open_page(page, app_url)
    seen = metrics(page)
    report = downloaded_report(page, tmp_path)
    assert report.startswith("<!DOCTYPE html>") and "Training plan: Llama 3.1 70B" in report
    assert seen["Step time"] in report and seen["MFU"] in report
    assert "<script" not in report and " src=" not in report
    report_page = page.context.new_page()
    report_page.goto((tmp_path / "report.html").as_uri())
    screenshot(report_page, "summary-report")


# ---- issue 19: the planner's flows at a laptop's and a desktop's size ----------------------------------------------

@pytest.fixture(params=list(VIEWPORTS))
def sized(browser, request):
    context = browser.new_context(viewport=VIEWPORTS[request.param], accept_downloads=True)
    yield request.param, context.new_page()
    context.close()


def test_ranked_layouts_carry_every_layout_field_and_a_downloaded_row_reproduces_its_figures(app_url, sized, tmp_path):
    size, page = sized
    open_page(page, app_url)
    go_to(page, "Layout search")
    page.get_by_role("button", name="Run layout search").click()
    page.get_by_text(re.compile(r"^Best layouts")).wait_for(timeout=120_000)
    wait_for_app(page)
    no_exception(page)
    assert cut_off(page) == []
    screenshot_whole(page, f"journey-ranked-layouts-{size}")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download ranked layouts (CSV)").click()
    path = tmp_path / "ranked_layouts.csv"
    download.value.save_as(path)
    ranked = pd.read_csv(path)
    fields = set(Layout.model_fields)
    assert fields <= set(ranked.columns), fields - set(ranked.columns)        # every field that tells layouts apart
    assert len(ranked) >= 3 and ranked[sorted(fields)].drop_duplicates().shape[0] == len(ranked)    # rows differ
    sc = scenario_in_url(page)
    for _, row in ranked.head(3).iterrows():              # each row, given back as a layout, gives its own figures
        layout = Layout.model_validate({k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()
                                        if k in fields and not pd.isna(v)})
        est = estimate(sc.model_copy(update={"layout": layout}))
        assert est.wall_days == pytest.approx(row["days (wall)"], rel=1e-9)
        assert est.memory_gib.total == pytest.approx(row["memory GiB"], rel=1e-9)


def test_a_tpu_layout_downloads_as_a_maxtext_command(app_url, browser, tmp_path):
    """Issue 21 item 7 for Google's stack: the layout the search picks on TPU v6e downloads as the MaxText command
    that runs it (its default format; before, this stack had no exporter and the page fell back to Megatron-LM)."""
    shared = parse_scenario({"model": {"preset": "llama3.1-8b"},
                             "training": {"seq_len": 8192, "global_batch_size": 256, "total_tokens": 1e11},
                             "cluster": {"accelerator": "TPU-v6e", "n_gpus": 256}})
    context = browser.new_context(viewport=VIEWPORTS["1280x800"], accept_downloads=True)
    try:
        page = context.new_page()
        open_page(page, f"{app_url}/layout-search?sc={encode(shared)}")
        page.get_by_role("button", name="Run layout search").click()
        page.get_by_text(re.compile(r"^Best layouts")).wait_for(timeout=120_000)
        wait_for_app(page)
        no_exception(page)
        chosen = page.get_by_role("combobox", name="Launch configuration for this layout", exact=True)
        assert chosen.input_value() == "MaxText command line"                    # the stack's own format, chosen
        button = page.get_by_role("button", name=re.compile(r"^Download llama3\.1-8b-tp\d+-pp\d+-dp\d+-cp\d+\.sh$"))
        button.scroll_into_view_if_needed()
        screenshot(page, "journey-tpu-maxtext-launch")
        with page.expect_download() as download:
            button.click()
        path = tmp_path / "launch.sh"
        download.value.save_as(path)
        text = path.read_text()
        assert "python3 -m MaxText.train MaxText/configs/base.yml" in text and "hardware=tpu" in text
        assert "model_name=llama3.1-8b" in text and "max_target_length=8192" in text
        # the command's axes cover the 256 chips of one v6e slice (the largest; no DCN axis beyond 1)
        keys = dict(line.strip().removesuffix(" \\").split("=", 1) for line in text.splitlines()
                    if line.startswith("  ") and "=" in line)
        ici = [int(v) for k, v in keys.items() if k.startswith("ici_") and k.endswith("_parallelism")]
        dcn = [int(v) for k, v in keys.items() if k.startswith("dcn_") and k.endswith("_parallelism")]
        assert math.prod(ici) == 256 and math.prod(dcn) == 1, keys
    finally:
        context.close()


def test_an_upload_reports_an_accelerator_label_it_ignores(app_url, sized, tmp_path):
    size, page = sized
    runner_file = tmp_path / "results.json"          # a new measurement each time: the store keeps a file once
    runner_result("matmul", runner_file)
    open_page(page, app_url)
    go_to(page, "Benchmarks")
    page.get_by_role("tab", name="Upload results").click()
    choose(page, "Accelerator, if the file does not name it", "NVIDIA H100 SXM5 80GB")
    upload(page, "results.json", runner_file.read_bytes())          # a CPU matmul result: it names its device
    no_exception(page)
    page.get_by_text(re.compile(r"Added results\.json")).wait_for()
    assert cut_off(page) == []
    screenshot_whole(page, f"journey-upload-label-{size}")
    assert "\\" not in page.get_by_text(re.compile(r"benchmarks_db trust")).inner_text()   # copyable as shown
    ignored = "the accelerator given ('H100-SXM5-80GB') is not used: this file measured the CPU"
    assert page.get_by_text(ignored).count() == 1


SAVED_SIZES = {"1280x800": (2048, 512), "1920x1080": (256, 4096)}


@pytest.fixture(scope="module")
def signed_on_app_url(tmp_path_factory):
    """The app behind a reverse proxy that names the signed-on user in X-Forwarded-User."""
    with local_server(tmp_path_factory.mktemp("e2e-users"), env={"APP_IDENTITY_HEADER": "X-Forwarded-User"}) as (
            url, _pid, _log):
        yield url.rstrip("/")


def test_a_saved_scenario_is_private_to_its_owner_or_shared_with_everybody(signed_on_app_url, browser):
    def as_user(user: str, size: str):
        context = browser.new_context(viewport=VIEWPORTS[size], extra_http_headers={"X-Forwarded-User": user})
        return context, context.new_page()

    for size in VIEWPORTS:
        alice_ctx, alice = as_user("alice", size)
        bob_ctx, bob = as_user("bob", size)
        try:
            open_page(alice, signed_on_app_url)
            # a saved scenario is stored once: each one saved here is another cluster size
            for (name, private), n_gpus in zip(((f"alice private {size}", True), (f"alice shared {size}", False)),
                                               SAVED_SIZES[size]):
                field = alice.get_by_role("spinbutton", name="Number of accelerators")
                field.fill(str(n_gpus))
                field.press("Enter")
                wait_for_app(alice)
                alice.get_by_role("textbox", name="Scenario name").fill(name)
                if private:
                    alice.get_by_text("Private", exact=True).click()
                alice.get_by_role("button", name="Save scenario").click()
                wait_for_app(alice)
                if private:
                    private_link = alice.get_by_test_id("stCode").inner_text().strip()
                    alice.get_by_text("Private", exact=True).click()            # the next one is shared
            alice.get_by_text("Saved scenarios").click()
            alice.get_by_role("link", name=f"alice shared {size}").wait_for()
            listed = alice.get_by_test_id("stSidebarUserContent").inner_text()
            assert f"alice private {size}" in listed and f"alice shared {size}" in listed and "yours, private" in listed
            assert cut_off(alice) == []
            screenshot(alice, f"journey-saved-alice-{size}")
            open_page(bob, signed_on_app_url)
            bob.get_by_text("Saved scenarios").click()
            bob.get_by_role("link", name=f"alice shared {size}").wait_for()
            listed = bob.get_by_test_id("stSidebarUserContent").inner_text()
            assert f"alice shared {size}" in listed and f"alice private {size}" not in listed
            screenshot(bob, f"journey-saved-bob-{size}")
            open_page(bob, private_link)                       # private: not listed, but its link still opens it
            no_exception(bob)
            assert bob.get_by_text(f"Opened the saved scenario 'alice private {size}'").count() == 1
        finally:
            alice_ctx.close()
            bob_ctx.close()


def test_a_moe_planner_sets_the_busiest_experts_load_and_sees_the_step_slow_down(app_url, page):
    open_page(page, app_url)
    choose(page, "Model", "Mixtral 8x7B")
    before = metrics(page)["Step time"]
    field = page.get_by_role("spinbutton", name="Busiest expert's load (x mean)")
    for ratio, fits in (("1.2", True), ("2", False)):    # the busiest rank stores more: at 2x the layout overflows
        field.fill(ratio)
        field.press("Enter")
        wait_for_app(page)
        no_exception(page)
        sc = scenario_in_url(page)
        assert sc.training.expert_load_ratio == float(ratio)        # the link carries it
        assert estimate(sc).fits is fits
        if fits:
            assert metrics(page)["Step time"] == f"{estimate(sc).step_time_s:.2f} s" != before
        else:
            assert page.get_by_text("Does not fit:").count() == 1
            assert page.get_by_text("What fits on these 1,024 accelerators").count() == 1
    screenshot(page, "scenario-moe-expert-load")


def test_a_pytorch_planner_runs_eagerly_and_sees_the_step_slow_down(app_url, page):
    open_page(page, app_url)
    assert page.get_by_role("combobox", name="torch.compile", exact=True).count() == 0     # Megatron-Core's own
    choose(page, "Training framework", "PyTorch FSDP2")
    no_exception(page)
    compiled = scenario_in_url(page)
    assert compiled.training.framework == "pytorch_fsdp2" and compiled.training.torch_compile is None
    choose(page, "torch.compile", "eager (no torch.compile)")
    no_exception(page)
    sc = scenario_in_url(page)
    assert sc.training.torch_compile is False                          # the link carries it
    assert metrics(page)["Step time"] == f"{estimate(sc).step_time_s:.2f} s"
    assert estimate(sc).step_time_s > estimate(compiled).step_time_s
    screenshot(page, "scenario-pytorch-eager")
