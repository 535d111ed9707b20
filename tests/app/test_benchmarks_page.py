"""Benchmarks page: browse and compare the store's results, measured vs datasheet, and uploads that are checked
completely before anything is written."""
import json
import re

from benchmarks_db import queries, trust
from ui import background
from tests.app.conftest import button, on_page, plotted, run_app, texts
from tests.conftest import runner_result


def benchmarks_page():
    return on_page(run_app(), "benchmarks")


def upload(at, name: str, data: bytes):
    at.file_uploader(key="bench_upload").set_value((name, data, "application/octet-stream"))
    button(at, "Check and add to the store").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_browse_filters_the_stores_mlperf_results(app_store):
    at = benchmarks_page()
    from pages.benchmarks import PAGE_ROWS
    assert len(at.dataframe[0].value) == min(PAGE_ROWS, len(queries.mlperf_results(app_store)))
    at.selectbox(key="f_bench").set_value("gpt3").run()
    at.selectbox(key="f_round").set_value("v4.1").run()
    table = at.dataframe[0].value
    expected = queries.mlperf_results(app_store, benchmark="gpt3", mlperf_round="v4.1")
    assert len(table) == len(expected) > 0
    assert set(table["benchmark"]) == {"gpt3"} and set(table["round"]) == {"v4.1"}


def test_compare_systems_and_measured_vs_datasheet_come_from_the_store(app_store):
    at = benchmarks_page()
    at.selectbox(key="cmp_bench").set_value("gpt3").run()
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    systems = queries.compare_systems(app_store, "gpt3")
    shown = sorted(x for trace in charts[0]["data"] for x in plotted(trace["y"]))
    assert shown == sorted(systems["best_minutes"])
    efficiency = queries.datasheet_efficiency(app_store, "matmul_tflops").dropna(subset=["efficiency"])
    assert sorted(plotted(charts[1]["data"][0]["x"])) == sorted(efficiency["efficiency"])


def test_a_runner_result_file_is_ingested_and_shows_up_in_the_table(runner_file, app_store):
    at = benchmarks_page()
    at.text_input(key="bench_submitter").input("apptest")
    upload(at, "results.json", runner_file.read_bytes())
    assert any("Added results.json" in s for s in texts(at.success)), (texts(at.success), texts(at.error))
    n_results = len(json.loads(runner_file.read_text())["results"])
    added = at.dataframe[-1].value["after"] - at.dataframe[-1].value["before"]
    assert (added.loc["run"], added.loc["measurement"]) == (1, n_results)      # one run, a measurement per result
    at.selectbox(key="f_kind").set_value("user_submitted").run()
    uploaded = at.dataframe[1].value
    assert len(uploaded) == n_results
    assert set(uploaded["submitter"]) == {"apptest"}
    # the operator's command is shown as it is typed: a code span shows markdown escapes literally ('upload\\:...')
    source_id = trust.uploads(app_store)["source_id"].iloc[0]            # newest first
    command = next(m for m in texts(at.info) if "python -m benchmarks_db trust" in m)
    shown = re.search(r"`(python -m benchmarks_db trust [^`]+)`", command).group(1)
    assert "\\" not in shown and shown.split()[-1].startswith("upload:")
    assert shown == f"python -m benchmarks_db trust {source_id}"


def test_a_malformed_file_is_refused_whole_and_changes_nothing(app_store):
    at = benchmarks_page()
    before = app_store.counts()
    for name, data in (("results.json", b'{"schema_version": 1, "results": [}'),
                       ("notes.txt", b"hello, this is not a benchmark"),
                       ("evil.csv", b"accelerator,metric,value,unit\n'); DROP TABLE run; --,matmul_tflops,-5,TFLOP/s\n"),
                       ("../../etc/passwd", b"root:x:0:0"),
                       ("blob.bin", b"\x00\x01\x02" * 100)):
        upload(at, name, data)
        assert any("nothing was written" in e for e in texts(at.error)), (name, texts(at.error))
        assert app_store.counts() == before
        counts = at.dataframe[-1].value
        assert (counts["after"] == counts["before"]).all()


def test_the_same_file_twice_is_refused_as_a_duplicate(runner_file):
    at = benchmarks_page()
    upload(at, "again.json", runner_file.read_bytes())
    assert any("duplicate" in m.value for m in at.markdown), [m.value for m in at.markdown]


def test_how_to_run_the_runners_is_on_the_page():
    at = benchmarks_page()
    assert any("python -m benchmarks_db.run all --out results.json" in c.value for c in at.code)


def test_check_only_reports_what_it_would_add_and_keeps_nothing(tmp_path, app_store):
    # a second real runner result (the session's runner_file is uploaded by another test)
    out = tmp_path / "membw.json"
    runner_result("membw", out)
    at = benchmarks_page()
    at.file_uploader(key="bench_upload").set_value(("membw.json", out.read_bytes(), "application/json"))
    before = app_store.counts()
    button(at, "Check only").click().run()
    assert not at.exception
    report = next(s for s in texts(at.info) if "passes every check" in s)
    promised = {table: int(n) for n, table in re.findall(r"(\d+) (\w+) rows", report)}
    assert promised["run"] == 1 and promised["measurement"] > 0
    assert app_store.counts() == before                               # nothing kept
    button(at, "Check and add to the store").click().run()
    added = at.dataframe[-1].value["after"] - at.dataframe[-1].value["before"]
    assert {t: int(added.loc[t]) for t in promised} == promised       # the real add does what the check said


def test_an_upload_can_be_removed_again(tmp_path, app_store):
    out = tmp_path / "storage.json"
    runner_result("storage", out, "--storage-dir", str(tmp_path))
    before = app_store.counts()
    at = upload(benchmarks_page(), "storage.json", out.read_bytes())
    assert app_store.counts()["run"] == before["run"] + 1
    button(at, "Remove this upload").click().run()
    assert not at.exception
    assert any("Removed upload upload:" in s for s in texts(at.success)), texts(at.success)
    assert app_store.counts() == before


def test_predicted_vs_mlperf_is_computed_once_in_the_background_and_shared_by_every_session(app_store):
    from benchmarks_db.validation import predicted_vs_measured
    from ui import background
    background.validation(app_store, "gpt3").wait(300)            # what serve.py starts when the server starts
    at = benchmarks_page()                                         # a new session finds it done: no wait, no toggle
    charts = {c.proto.id: json.loads(c.proto.spec) for c in at.get("plotly_chart")}
    validation = next(fig for fig in charts.values()
                      if fig["layout"]["xaxis"].get("title", {}).get("text", "").startswith("published MLPerf"))
    expected = predicted_vs_measured(app_store, "gpt3").dropna(subset=["predicted_minutes"])
    shown = sorted(y for trace in validation["data"][:-1] for y in plotted(trace["y"]))
    assert shown == sorted(expected["predicted_minutes"]) and len(shown) > 10
    ticks = validation["layout"]["xaxis"]["ticktext"]
    assert all(re.fullmatch(r"[\d,.]+[kMB]?", t) for t in ticks) and len(ticks) <= 8    # '100', '200', '500', '1,000'


def test_tables_show_one_page_read_from_the_store_not_every_row(app_store):
    """Issue 18: ten 100,000-row uploads made each view load every row (9 s of CPU, 7 GB). A page of PAGE_ROWS
    rows is read, with the total counted by the store and a page chooser."""
    from pages.benchmarks import PAGE_ROWS
    total = len(queries.mlperf_results(app_store))
    assert total > PAGE_ROWS                                          # the seeded MLPerf results: two pages
    at = benchmarks_page()
    first = at.dataframe[0].value
    assert len(first) == PAGE_ROWS and "total_rows" not in first.columns
    chooser = at.number_input(key="mlperf_page")
    assert chooser.label == f"Page (of {-(-total // PAGE_ROWS)}; {total} rows, {PAGE_ROWS} a page)"
    chooser.set_value(2).run()
    second = at.dataframe[0].value
    expected = queries.mlperf_results(app_store, limit=PAGE_ROWS, offset=PAGE_ROWS)
    assert len(second) == total - PAGE_ROWS and list(second["run_id"]) == list(expected["run_id"])
    assert not set(second["run_id"]) & set(first["run_id"])
    at.selectbox(key="f_bench").set_value("gpt3").run()          # fewer rows than the page shown: back to page 1
    gpt3 = queries.mlperf_results(app_store, "gpt3", limit=PAGE_ROWS)
    assert list(at.dataframe[0].value["run_id"]) == list(gpt3["run_id"]) and len(gpt3) < PAGE_ROWS


def test_a_training_log_is_compared_with_the_scenario_it_ran_and_calibrates_once_trusted(app_store):
    """The shared link opens the scenario that ran; its TorchTitan log is stored with it, the prediction is set beside
    the measurement, and once the operator trusts it the page shows the figures before and after calibration."""
    from benchmarks_db.step_time import predicted_vs_measured
    from engine.inputs import parse_scenario
    from engine.presentation.share import encode
    from tests.benchmarks_db.test_step_logs import LOGS, TT_SCENARIO
    at = on_page(run_app({"sc": encode(parse_scenario(TT_SCENARIO))}), "benchmarks")
    upload(at, "tt-run.log", (LOGS / "torchtitan-pr3393.log").read_bytes())
    assert any("Added tt-run.log (step_log_torchtitan)" in s for s in texts(at.success)), texts(at.error)
    background.wait_all()                              # the predictions are a background job: drawn when done
    at.run()
    runs = next(d.value for d in at.dataframe if "measured s/step" in d.value.columns)
    row = runs[runs["upload"] == "tt-run.log"].iloc[0]
    stored = predicted_vs_measured(app_store)
    stored = stored[stored.filename == "tt-run.log"].iloc[0]
    assert row["measured s/step"] == stored.measured_s and row["predicted s/step"] == stored.predicted_s
    assert not row["trusted"]
    trust.set_trusted(app_store, stored.source_id, "ops@example.com")
    # the operator trusts it (the CLI): the store's training runs changed, so a new session gets a new job
    at = on_page(run_app({"sc": encode(parse_scenario(TT_SCENARIO))}), "benchmarks")
    background.wait_all()
    at.run()
    assert any("H100-SXM5-80GB, pytorch_fsdp2: calibrated" in m for m in texts(at.markdown))
    shown = next(d.value for d in at.dataframe if "after: calibrated (measured range)" in d.value.columns)
    assert list(shown["figure"]) == ["step time", "training (compute days)"]
    # after calibration the step time is the measured median, its range the measured 10th-90th percentiles
    assert shown["after: calibrated (measured range)"][0].startswith(f"{stored.measured_s:.3g} s")
    trust.set_trusted(app_store, stored.source_id, None)


def test_the_training_run_predictions_wait_for_a_slot_off_the_page_and_a_refusal_is_a_message(app_store, monkeypatch):
    """In a whole-suite run of the hostile-load e2e test the predictions waited for a work slot inside the page script
    (120 s), then an uncaught Busy stopped the page before its Upload tab. They are a background job now: the page is
    drawn at once while they wait, a refusal is a warning, and the next visit asks again."""
    from benchmarks_db.ingest import ingest_bytes
    from tests.app.test_hostile_pages import _slot_held_elsewhere
    from tests.benchmarks_db.test_step_logs import LOGS, MEGATRON_SCENARIO
    from ui import work_limits
    report = ingest_bytes(app_store, "waiting-run.log", (LOGS / "megatron-gpt2-345m.log").read_bytes(),
                          scenario=MEGATRON_SCENARIO)
    assert report.ingested, report.errors
    small = work_limits.WorkLimiter(1, wait_s=0.5)
    monkeypatch.setattr(work_limits, "limiter", lambda: small)
    with _slot_held_elsewhere(small):
        at = on_page(run_app(), "benchmarks")
        assert any("Predicting the uploaded training runs" in i.value for i in at.info)
        assert at.get("file_uploader")                                   # the Upload tab was drawn meanwhile
        background.wait_all()                                            # refused after its 0.5 s wait
        at.run()
        assert any("training-run predictions waited 0 s" in w.value or "training-run predictions waited 1 s"
                   in w.value for w in at.warning), [w.value for w in at.warning]
    at.run()                                                             # the slot is free: asked again
    background.wait_all()
    at.run()
    runs = next(d.value for d in at.dataframe if "measured s/step" in d.value.columns)
    assert "waiting-run.log" in set(runs["upload"])
    assert not at.exception
