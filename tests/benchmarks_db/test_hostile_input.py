"""Issue 13's hostile inputs, one test each, named after the case: every one is refused with a message that names the
file, line or field, the store is unchanged, or (for uploads that would steer calibration) stored without effect."""
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from benchmarks_db import csv_table
from benchmarks_db.calibration import calibrated_cluster, matmul_calibration
from benchmarks_db.ingest import INTERNAL_ERROR, Uploader, delete_upload, ingest_bytes
from benchmarks_db.zip_archive import MAX_ZIP_ENTRIES
from benchmarks_db.store import another_planner, serving_lock
from benchmarks_db.trust import set_trusted
from tests.conftest import ROOT

from .helpers import GPT3, GPT3_RESULTS, matmul_result, runner_file

DEEP = 100_000                          # far past Python's recursion limit (1,000)
H100_BF16_PEAK = 989.4                  # catalog dense bf16 TFLOP/s (data/accelerators.json)
MAMF_H100_BF16 = 794.5                  # ml-engineering's published MAMF (benchmarks_db/data/mamf_published.csv)


def snapshot(store) -> dict:
    """Every row of every table the uploads touch, to show a refused upload changed nothing."""
    tables = ("source", "system", "software_env", "run", "measurement")
    return {t: sorted(map(repr, store.rows(f"SELECT * FROM {t}"))) for t in tables}


def refused(store, name, data, **kw):
    before = snapshot(store)
    report = ingest_bytes(store, name, data, **kw)
    assert not report.ingested and report.errors, report
    assert not any(INTERNAL_ERROR in e for e in report.errors), report.errors
    assert snapshot(store) == before
    return report


def make_zip(entries, method=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return buf.getvalue()


def gpt3_folder(logs: dict[str, str], root: str = "NVIDIA", system_doc: str | None = None) -> list[tuple[str, str]]:
    """The GPT-3 sample's submitter folder as zip entries, with the logs replaced."""
    system = GPT3 / "NVIDIA" / "systems" / "eos_n64_ngc24.09_nemo.json"
    entries = [(f"{root}/systems/eos_n64_ngc24.09_nemo.json", system_doc or system.read_text())]
    return entries + [(f"{root}/results/eos_n64_ngc24.09_nemo/gpt3/{n}", t) for n, t in logs.items()]


def mllog(key, value, time_ms, **metadata) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key,
                                     "value": value, "metadata": metadata})


def one_run_log(start_ms: float, stop_ms: float, benchmark: str = "gpt3") -> str:
    return "\n".join([mllog("submission_benchmark", benchmark, start_ms - 10),
                      mllog("submission_org", "NVIDIA", start_ms - 10),
                      mllog("submission_division", "closed", start_ms - 10),
                      mllog("submission_status", "onprem", start_ms - 10),
                      mllog("run_start", None, start_ms),
                      mllog("run_stop", None, stop_ms, status="success")])


# ------------------------------------------------------------------------------------- crashes instead of refusals
def test_deeply_nested_json_in_a_runner_file_is_refused(store):
    nested = b'{"schema_version": 1, "results": ' + b"[" * DEEP + b"]" * DEEP + b"}"
    assert "r.json" in refused(store, "r.json", nested).errors[0]
    no_results_key = b"[" * DEEP + b"]" * DEEP                  # not recognised as a runner file: parsed as JSON
    assert "nested more than 32 levels" in refused(store, "r.json", no_results_key).errors[0]


def test_deeply_nested_json_in_an_mllog_line_is_refused(store):
    log = ":::MLLOG " + "[" * DEEP + "]" * DEEP + "\n" + one_run_log(1.7e12, 1.7e12 + 60_000 * 50)
    report = refused(store, "result_0.txt", log.encode())
    assert report.errors == ["result_0.txt: line 1 is not a valid MLLOG event (the summarizer's compliance check "
                             "rejects the run)"]


def test_deeply_nested_systems_json_in_a_zip_is_refused(store):
    logs = {f"result_{i}.txt": (GPT3_RESULTS / f"result_{i}.txt").read_text() for i in range(3)}
    deep = '{"a": ' * DEEP + "1" + "}" * DEEP
    report = refused(store, "nvidia.zip", make_zip(gpt3_folder(logs, system_doc=deep)))
    assert report.errors == ["NVIDIA/systems/eos_n64_ngc24.09_nemo.json: nested more than 32 levels deep; no file "
                             "of this kind is"]


def test_mllog_key_5_is_an_invalid_event_not_an_attribute_error(store):
    log = one_run_log(1.7e12, 1.7e12 + 60_000 * 50) + "\n" + mllog(5, 1, 1.7e12 + 1)
    assert "line 7 is not a valid MLLOG event" in refused(store, "result_0.txt", log.encode()).errors[0]


@pytest.mark.parametrize("literal", ["Infinity", "-Infinity", "NaN"])
def test_mllog_value_infinity_or_nan_is_an_invalid_event(store, literal):
    log = one_run_log(1.7e12, 1.7e12 + 60_000 * 50) + '\n:::MLLOG {"key": "eval_accuracy", "value": ' + literal + \
        ', "time_ms": 1700000000001}'
    assert "line 7 is not a valid MLLOG event" in refused(store, "result_0.txt", log.encode()).errors[0]


@pytest.mark.parametrize("start, stop", [(1.7e12, float("inf")), (1.7e12, 1e308), (float("nan"), 1.7e12)])
def test_mllog_times_of_infinity_nan_or_1e308_are_not_stored(store, start, stop):
    log = one_run_log(start, stop).replace("Infinity", "1e999")        # json.dumps writes inf as Infinity
    report = refused(store, "result_0.txt", log.encode())
    assert report.errors[0].startswith("result_0.txt: ")


def test_nccl_size_superscript_two_is_refused_with_its_line(store):
    from .test_nccl_tests import _full_format
    text = _full_format().replace("\n  1073741824 ", "\n  ²", 1)
    assert text.count("²") == 1
    report = refused(store, "all_reduce.txt", text.encode())
    assert report.errors[0].startswith("line ") and "look wrong" in report.errors[0]


@pytest.mark.parametrize("column, value, limit", [("m", str(2**63), "at most 9,223,372,036,854,775,807"),
                                                   ("n_ranks", str(2**31), "at most 2,147,483,647"),
                                                   ("message_bytes", "9" * 5000, "not a whole number")])
def test_csv_integers_above_int64_or_int32_are_refused(store, column, value, limit):
    row = {"accelerator": "H100-SXM5-80GB", "metric": "matmul_tflops", "value": "500", "unit": "TFLOP/s",
           "dtype": "bf16", "m": "8192", "n": "8192", "k": "8192", column: value}
    if column != "m":
        row.update(metric="busbw", unit="GB/s", op="all_reduce", n_ranks="8", message_bytes=str(2**30), dtype="")
        row[column] = value
    text = ",".join(row) + "\n" + ",".join(row.values()) + "\n"
    report = refused(store, "big.csv", text.encode())
    assert report.errors[0].startswith("line 2, column ") and limit in report.errors[0]


def test_runner_message_bytes_above_int64_is_refused_with_its_field(store):
    from .helpers import busbw_result
    result = busbw_result("all_reduce", 2**30, 8, [0.01] * 5)
    result["message_bytes"] = 2**64
    report = refused(store, "r.json", runner_file([result]))
    assert report.errors[0].startswith("r.json: results.0.collectives.message_bytes")


def test_mlperf_system_with_more_nodes_than_int32_is_refused(store):
    doc = json.loads((GPT3 / "NVIDIA" / "systems" / "eos_n64_ngc24.09_nemo.json").read_text())
    doc["number_of_nodes"] = str(2**40)
    logs = {f"result_{i}.txt": (GPT3_RESULTS / f"result_{i}.txt").read_text() for i in range(3)}
    report = refused(store, "n.zip", make_zip(gpt3_folder(logs, system_doc=json.dumps(doc))))
    assert "number_of_nodes must be whole numbers" in report.errors[0]


def test_corrupt_deflate_member_in_a_zip_is_refused(store):
    data = bytearray(make_zip([("NVIDIA/results/s/gpt3/result_0.txt", "x" * 100_000 + "y" * 5_000)]))
    start = data.index(b"result_0.txt") + len("result_0.txt")
    data[start + 10:start + 40] = b"\xff" * 30                   # inside the compressed stream
    report = refused(store, "broken.zip", bytes(data))
    assert "cannot be unpacked" in report.errors[0] and "result_0.txt" in report.errors[0]


def test_corrupt_lzma_member_in_a_zip_is_refused_by_its_method(store):
    data = make_zip([("NVIDIA/results/s/gpt3/result_0.txt", "x" * 1000)], method=zipfile.ZIP_LZMA)
    report = refused(store, "lzma.zip", data)
    assert "compression method 14" in report.errors[0] and "deflate" in report.errors[0]


def test_the_command_line_reports_each_file_and_always_prints_its_report(tmp_path):
    good = tmp_path / "good.json"
    good.write_bytes(runner_file([matmul_result(4096, 4096, 4096, "bf16", [0.3e-3] * 5)]))
    deep = tmp_path / "result_0.txt"                 # crashed the command line before (RecursionError)
    deep.write_text(":::MLLOG " + "[" * DEEP + "]" * DEEP)
    also_good = tmp_path / "later.json"
    also_good.write_bytes(runner_file([matmul_result(2048, 2048, 2048, "bf16", [0.05e-3] * 5)]))
    db = tmp_path / "store.duckdb"
    proc = subprocess.run([sys.executable, "-m", "benchmarks_db", "ingest", str(good), str(deep), str(also_good),
                           "--db", str(db), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    reports = json.loads(proc.stdout)
    assert [(Path(r["input"]).name, r["ingested"]) for r in reports] == \
           [("good.json", True), ("result_0.txt", False), ("later.json", True)]
    assert reports[1]["errors"] and "Traceback" not in proc.stderr


def test_non_finite_after_unit_conversion_csv_1e308_tb_per_s_is_refused(store):
    text = "accelerator,metric,value,unit,op\nH100-SXM5-80GB,mem_bw,1e308,TB/s,triad\n"
    report = refused(store, "huge.csv", text.encode())
    assert report.errors == ["line 2: value 1e+308 TB/s is inf GB/s, not a finite number above zero; check the unit"]


# ------------------------------------------------------------------------------ uploads that steer what all see
def test_the_same_results_in_another_order_are_a_duplicate(store):
    results = [matmul_result(4096, 4096, 4096, "bf16", [0.3e-3] * 5), matmul_result(2048, 2048, 2048, "bf16",
                                                                                    [0.05e-3] * 5)]
    assert ingest_bytes(store, "a.json", runner_file(results)).ingested
    report = refused(store, "b.json", runner_file(results[::-1]))
    assert report.errors[0].startswith("duplicate: these measurements are already in the store")


def test_reordered_csv_rows_are_a_duplicate(store):
    header = "accelerator,metric,value,unit,op,driver_version,cuda_version\n"
    rows = ["H100-SXM5-80GB,mem_bw,3000,GB/s,triad,550,12.4\n", "H100-SXM5-80GB,mem_bw,2900,GB/s,copy,550,12.4\n"]
    assert ingest_bytes(store, "a.csv", (header + "".join(rows)).encode()).ingested
    report = refused(store, "b.csv", (header + "".join(rows[::-1])).encode())
    assert report.errors[0].startswith("duplicate: these measurements are already in the store")


def _matmul_upload(tflops: float, host: str) -> bytes:
    t = 2 * 8192**3 / (tflops * 1e12)
    return runner_file([matmul_result(8192, 8192, 8192, "bf16", [t] * 7)], hostname_sha256=host)


def test_three_anonymous_uploads_do_not_outvote_the_published_matmul_efficiency(seeded):
    published = calibrated_cluster(seeded, "H100-SXM5-80GB", "bf16", 64, 8)["overrides"]
    assert published == {"matmul_efficiency": round(MAMF_H100_BF16 / H100_BF16_PEAK, 4)}
    reports = [ingest_bytes(seeded, "a.json", _matmul_upload(900, "a")),
               ingest_bytes(seeded, "b.json", _matmul_upload(905, "b"))]
    assert all(r.ingested and not r.flags for r in reports)
    again = runner_file([matmul_result(8192, 8192, 8192, "bf16", [2 * 8192**3 / 900e12] * 7)], hostname_sha256="a")
    assert not ingest_bytes(seeded, "c.json", again.replace(b'"started_at"', b'"started_at" ')).ingested   # dup
    assert calibrated_cluster(seeded, "H100-SXM5-80GB", "bf16", 64, 8)["overrides"] == published
    # trusted by the operator, each system counts once: the median of three systems, not of every run
    for r in reports:
        set_trusted(seeded, r.source_id, "ops")
    assert ingest_bytes(seeded, "a2.json", _matmul_upload(880, "a"), uploader=Uploader(trusted=True)).ingested
    row = matmul_calibration(seeded).query("accelerator_id == 'H100-SXM5-80GB' and dtype == 'bf16'").iloc[0]
    system_a = (900 + 880) / 2                                   # system a's shape: the median of its two runs
    assert row.n_systems == 3 and row.n_runs == 4
    assert row.tflops == pytest.approx(sorted([MAMF_H100_BF16, system_a, 905])[1])


def test_matmul_at_1_04x_the_datasheet_peak_is_flagged_not_trusted(store):
    report = ingest_bytes(store, "fast.json", _matmul_upload(1.04 * H100_BF16_PEAK, "x"),
                          uploader=Uploader(identity="ops", trusted=True))
    assert report.ingested and any("above 95%" in f for f in report.flags), report.flags
    assert "matmul_efficiency" in calibrated_cluster(store, "H100-SXM5-80GB", "bf16", 64, 8)["missing"]
    at_0_96 = ingest_bytes(store, "0.96.json", _matmul_upload(0.96 * H100_BF16_PEAK, "y"))
    assert any("above 95%" in f for f in at_0_96.flags)
    at_0_90 = ingest_bytes(store, "0.90.json", _matmul_upload(0.90 * H100_BF16_PEAK, "z"))
    assert not any("above 95%" in f for f in at_0_90.flags)


def test_a_forged_mlperf_csv_gpt3_in_0_001_min_on_8_h100_is_refused(store):
    text = "accelerator,metric,value,unit,benchmark,n_accelerators\nH100-SXM5-80GB,time_to_train,0.001,min,gpt3,8\n"
    report = refused(store, "forged.csv", text.encode())
    # GPT-3's 1.2B reference tokens x 6 x 175B parameters (+ attention) over 8 x 2 x 1979 TFLOP/s: about 684 min
    assert "0.001 min on 8 H100-SXM5-80GB is impossible" in report.errors[0] and "684 min" in report.errors[0]


def test_a_zip_of_1_minute_runs_labelled_v5_1_nvidia_is_refused(store):
    logs = {f"result_{i}.txt": one_run_log(1.7e12 + i * 1e7, 1.7e12 + i * 1e7 + 60_000) for i in range(3)}
    data = make_zip(gpt3_folder(logs, root="training_results_v5.1/NVIDIA"))
    report = refused(store, "v5.1.zip", data)
    assert "1 min on 512 H100-SXM5-80GB is impossible" in report.errors[0]


def test_anonymous_uploads_are_stored_untrusted_and_trusted_only_by_the_operator(store):
    report = ingest_bytes(store, "a.json", _matmul_upload(700, "a"))
    assert report.ingested and report.trusted_by is None
    assert store.rows("SELECT uploaded_by, trusted_by FROM source WHERE source_id = ?", [report.source_id]) == \
           [(None, None)]
    assert "matmul_efficiency" in calibrated_cluster(store, "H100-SXM5-80GB", "bf16", 8, 8)["missing"]
    set_trusted(store, report.source_id, "ops@example.com")
    assert calibrated_cluster(store, "H100-SXM5-80GB", "bf16", 8, 8)["overrides"] == \
           {"matmul_efficiency": round(700 / H100_BF16_PEAK, 4)}
    set_trusted(store, report.source_id, None)
    assert "matmul_efficiency" in calibrated_cluster(store, "H100-SXM5-80GB", "bf16", 8, 8)["missing"]
    signed_on = ingest_bytes(store, "b.json", _matmul_upload(710, "b"),
                             uploader=Uploader(identity="alice@example.com", trusted=False))
    assert store.rows("SELECT uploaded_by, trusted_by FROM source WHERE source_id = ?", [signed_on.source_id]) == \
           [("alice@example.com", None)]


# ---------------------------------------------------------------------------------- work a request can trigger
def test_a_zip_with_more_entries_than_allowed_is_refused_before_it_is_parsed(store):
    entries = [(f"f{i}.txt", "") for i in range(MAX_ZIP_ENTRIES + 1)]
    report = refused(store, "many.zip", make_zip(entries, zipfile.ZIP_STORED))
    assert report.errors == [f"many.zip: more than {MAX_ZIP_ENTRIES:,} entries; upload fewer results at once"]


def test_a_zip_whose_end_record_understates_its_entries_is_counted_from_its_directory(store):
    data = bytearray(make_zip([(f"f{i}.txt", "") for i in range(MAX_ZIP_ENTRIES + 5)], zipfile.ZIP_STORED))
    end = data.rindex(b"PK\x05\x06")
    data[end + 8:end + 12] = (1).to_bytes(2, "little") * 2              # "1 entry" on this disk and in all
    assert f"more than {MAX_ZIP_ENTRIES:,} entries" in refused(store, "lies.zip", bytes(data)).errors[0]


def test_a_61_kb_zip_that_unpacks_to_60_mib_is_refused_before_unpacking(store):
    bomb = make_zip([("NVIDIA/results/s/gpt3/result_0.txt", b"\n" * (60 * 2**20))])
    assert len(bomb) < 70_000
    report = refused(store, "bomb.zip", bomb)
    assert "decompression bomb" in report.errors[0] and "62,914,560" in report.errors[0]


def test_the_ingest_and_seed_commands_refuse_while_a_planner_serves_the_store(tmp_path):
    db = tmp_path / "planner.duckdb"
    lock = serving_lock(db)                            # what serve.py holds for as long as the planner runs
    try:
        for cmd in (["benchmarks_db", "seed"], ["benchmarks_db", "ingest", str(ROOT / "README.md")],
                    ["benchmarks_db", "trust", "upload:x"]):
            proc = subprocess.run([sys.executable, "-m", *cmd, "--db", str(db)], cwd=ROOT, capture_output=True,
                                  text=True, timeout=120)
            assert proc.returncode == 2 and another_planner(db) in proc.stderr, proc.stderr
        assert not db.exists()                         # nothing opened the store
    finally:
        os.close(lock)
    proc = subprocess.run([sys.executable, "-m", "benchmarks_db", "seed", "--db", str(db)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "schema version" in proc.stdout


# ------------------------------------------------------------------------------------------------------ also
def test_remove_this_upload_leaves_no_orphan_system_or_software_rows(seeded):
    before = snapshot(seeded)
    report = ingest_bytes(seeded, "mine.json", _matmul_upload(700, "orphan-check"))
    assert report.ingested and report.rows_added["run"] == 1
    assert snapshot(seeded) != before
    assert delete_upload(seeded, report.source_id) == 1
    assert snapshot(seeded) == before


def test_two_zip_entries_of_the_same_name_are_refused(store):
    log = (GPT3_RESULTS / "result_0.txt").read_text()
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = make_zip([("NVIDIA/results/s/gpt3/result_0.txt", log), ("NVIDIA/results/s/gpt3/result_0.txt", "x")])
    report = refused(store, "dup.zip", data)
    assert report.errors == ["dup.zip: two entries are named 'NVIDIA/results/s/gpt3/result_0.txt'; an archive must "
                             "not hold the same path twice"]


def test_csv_reading_stops_after_fifty_errors():
    text = "accelerator,metric,value,unit\n" + "H100,mem_bw,x,GB/s\n" * 100_000
    runs, errors, _ = csv_table.parse(text, "bad.csv", None)
    assert runs == [] and len(errors) == 50 and errors[0] == "line 2, column 'value': 'x' is not a number"


def test_the_operator_deletes_an_upload_from_the_command_line_and_never_published_data(seeded_copy):
    """Issue 18: operators had no command to delete an upload. It removes everything the upload added in one
    transaction; a published source is refused, the store unchanged."""
    from benchmarks_db.store import open_store
    db = seeded_copy
    store = open_store(db)
    before = snapshot(store)
    report = ingest_bytes(store, "mine.json", _matmul_upload(700, "cli-delete"))
    assert report.ingested
    published = store.rows("SELECT source_id FROM source WHERE kind = 'published' ORDER BY 1 LIMIT 1")[0][0]
    store.close()
    cli = lambda *ids: subprocess.run([sys.executable, "-m", "benchmarks_db", "delete-upload", *ids, "--db", str(db)],
                                      cwd=ROOT, capture_output=True, text=True, timeout=120)
    refused_cli = cli(published)
    assert refused_cli.returncode == 1 and refused_cli.stderr == \
        f"{published}: {published} is a published source; only user uploads can be removed\n"
    done = cli(report.source_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{report.source_id}: removed with its 1 run(s), their measurements and the systems only " \
                          "they used\n"
    assert cli(report.source_id).stderr == f"{report.source_id}: no source {report.source_id!r}\n"
    store = open_store(db)
    try:
        assert snapshot(store) == before
    finally:
        store.close()


# GPT-3's floor on 8 H100 at 2 x 1979 TFLOP/s is 684 min (above); an accelerator outside the catalog is taken as fast
# as the catalog's fastest, announced parts included (a floor must never refuse a possible result): MI455X's 20,000
# TFLOP/s FP8 (AMD's announcement, data/accelerators.json): 684 x 1979 / 20000 = 67.7 min on 8.
FASTEST_FP8 = 20000.0


def test_gpt3_in_0_0001_min_on_an_accelerator_outside_the_catalog_is_refused_by_the_work_alone(store):
    """Issue 18: results for an accelerator not in the catalog skipped the floor (GPT-3 in 0.0001 min was row 1 of
    the MLPerf table, 'accepted')."""
    text = "accelerator,metric,value,unit,benchmark,n_accelerators\nHyperchip-9000,time_to_train,0.0001,min,gpt3,8\n"
    report = refused(store, "forged.csv", text.encode())
    assert "0.0001 min on 8 Hyperchip-9000 is impossible" in report.errors[0]
    assert f"at least {684 * 1979 / FASTEST_FP8:.3g} min on 8 accelerators" in report.errors[0], report.errors[0]
    assert "the fastest catalog accelerator's datasheet peak (MI455X: 20000 TFLOP/s)" in report.errors[0]


@pytest.mark.parametrize("count", [None, 0, 10**9])
def test_without_a_believable_count_the_floor_takes_a_million_accelerators(count):
    from benchmarks_db.reference_runs import minimum_minutes
    floor, why = minimum_minutes("gpt3", None, count)
    assert floor == pytest.approx(684 * 1979 / FASTEST_FP8 * 8 / 1_000_000, rel=2e-3) and "1,000,000 accelerators" in why


def test_a_plausible_result_on_an_accelerator_outside_the_catalog_is_kept_as_unverifiable(store):
    text = "accelerator,metric,value,unit,benchmark,n_accelerators\nHyperchip-9000,time_to_train,900,min,gpt3,8\n"
    report = ingest_bytes(store, "hyper.csv", text.encode())
    assert report.ingested and report.flags == ["gpt3: unverifiable: accelerator 'Hyperchip-9000' is not in the "
                                                "catalog: checked against the work alone, not a datasheet; not used "
                                                "for calibration (name the catalog id to fix)"]
    from benchmarks_db.queries import mlperf_results
    row = mlperf_results(store, "gpt3", "Hyperchip-9000").iloc[0]
    assert row.validation == "flagged" and "unverifiable" in row.validation_msgs
