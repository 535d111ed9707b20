"""Validation and hostile input: each refusal names what is wrong, and the store is unchanged after it."""
import io
import json
import zipfile

import pytest

from benchmarks_db.__main__ import main
from benchmarks_db.ingest import IngestReport, ingest_bytes, ingest_path

from .helpers import GPT3_RESULTS, busbw_result, matmul_result, runner_file, seed003_nccl_sample

SQL = "x'); DROP TABLE measurement; --"


def refused(store, name, data, **kw) -> IngestReport:
    before = store.counts()
    report = ingest_bytes(store, name, data, **kw)
    assert not report.ingested and report.errors, report
    assert store.counts() == before
    return report


def test_runner_file_is_stored_in_canonical_units(store):
    times = [1.60e-3, 1.58e-3, 1.62e-3, 1.59e-3, 1.61e-3]
    report = ingest_bytes(store, "h100.json", runner_file([matmul_result(8192, 8192, 8192, "bf16", times)]))
    assert report.ingested, report.errors
    value, peak, eff, lo, hi = store.rows("SELECT value, peak_value, efficiency, value_min, value_max FROM measurement")[0]
    expected = 2 * 8192**3 / 1.60e-3 / 1e12                       # median time 1.60 ms
    assert value == pytest.approx(expected) and peak == 989.4 and eff == pytest.approx(expected / 989.4)
    assert lo == pytest.approx(2 * 8192**3 / 1.62e-3 / 1e12) and hi == pytest.approx(2 * 8192**3 / 1.58e-3 / 1e12)


def test_rate_that_does_not_match_its_times_is_refused(store):
    bad = matmul_result(4096, 4096, 4096, "bf16", [1.0e-3, 0.8e-3, 1.2e-3, 1.1e-3, 0.9e-3])
    bad["stats"]["median"] *= 1.1                                  # still between min and max, but not work / time
    report = refused(store, "r.json", runner_file([bad]))
    assert report.errors[0].startswith("r.json: results[0].stats.median") and "2*m*n*k/t/1e12" in report.errors[0]


def test_busbw_must_be_algbw_times_the_ring_factor(store):
    bad = busbw_result("all_reduce", 2**30, 8, [5e-3] * 5)
    bad["stats"] = dict(bad["algbw"])                              # busbw reported as algbw: factor 1 instead of 1.75
    report = refused(store, "c.json", runner_file([bad]))
    assert "busbw must be algbw x 1.75 for all_reduce on 8 ranks" in report.errors[0]


def test_stream_byte_count_is_checked(store):
    r = {"benchmark": "membw", "unit": "GB/s", "op": "triad", "element_bytes": 8, "array_elements": 1000,
         "bytes_per_iter": 16000, "implementation": "x", "stats": {"median": 16, "min": 16, "max": 16},
         "time_s": {"median": 1e-6, "min": 1e-6, "max": 1e-6}, "n_samples": 5, "warmup_iters": 1, "cv_pct": 0}
    report = refused(store, "m.json", runner_file([r], device_type="cpu", device_name="cpu", count=1))
    assert "STREAM counts 3 words of 8 B x 1000 elements = 24000" in report.errors[0]


def test_above_datasheet_peak_is_refused_and_very_low_is_flagged(store):
    fast = matmul_result(8192, 8192, 8192, "bf16", [0.5e-3] * 5)          # 2199 TFLOP/s on a 989 TFLOP/s H100
    report = refused(store, "fast.json", runner_file([fast]))
    assert "2.22x the H100-SXM5-80GB datasheet peak (989.4 TFLOP/s, dense bf16)" in report.errors[0]
    slow = matmul_result(8192, 8192, 8192, "bf16", [10e-3] * 5)           # 110 TFLOP/s = 11% of peak
    report = ingest_bytes(store, "slow.json", runner_file([slow]))
    assert report.ingested and any("only 11% of the datasheet peak" in f for f in report.flags)


def test_incomplete_gpu_metadata_is_flagged_not_refused(store):
    report = ingest_bytes(store, "m.json", runner_file([matmul_result(4096, 4096, 4096, "bf16", [0.3e-3] * 5)],
                                                       software={"torch": "2.5.1"}))
    assert report.ingested and any("incomplete metadata" in f for f in report.flags)


def test_csv_rows_are_checked_and_converted(store):
    csv_text = ("accelerator,metric,value,unit,dtype,m,n,k,time_s,notes\n"
                "H100-SXM5-80GB,matmul_tflops,687194.77,GFLOP/s,bf16,8192,8192,8192,0.0016,from my tool\n")
    report = ingest_bytes(store, "r.csv", csv_text.encode())
    assert report.ingested, report.errors
    assert store.rows("SELECT value, unit FROM measurement") == [(pytest.approx(687.19477), "TFLOP/s")]
    bad = csv_text.replace("687194.77,GFLOP/s", "687194.77,TFLOPS/s")
    assert "unit 'TFLOPS/s' does not fit metric matmul_tflops" in refused(store, "b.csv", bad.encode()).errors[0]
    bad = csv_text.replace("0.0016", "0.0032")
    assert refused(store, "c.csv", bad.encode()).errors[0].startswith("line 2: 687.195 TFLOP/s does not equal")
    bad = csv_text.replace("8192,8192,8192", "8192,eight,8192")
    assert "line 2, column 'n': 'eight' is not a whole number" in refused(store, "d.csv", bad.encode()).errors[0]


@pytest.mark.parametrize("name, data, message", [
    ("x.json", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "binary data"),
    ("x.txt", "café".encode("latin-1") + b"\n" * 10, "not UTF-8 text"),
    ("x.json", b'{"schema_version": 1, "runner": {"name": "benchmarks_db.run", "ver', "not valid JSON"),
    ("x.txt", b"   \n\n", "the file is empty"),
    ("x.txt", b"hello world\nthis is not a benchmark\n", "not a recognised format"),
    ("../../etc/passwd", b"a,b\n", "not a plain file name"),
    ("C:evil.csv", b"a,b\n", "not a plain file name"),
    ("dir/x.csv", b"a,b\n", "not a plain file name"),
    ("..", b"a,b\n", "not a plain file name"),
    ("x\x00.csv", b"a,b\n", "not a plain file name"),
    ("x.json", json.dumps({"submitter": "NVIDIA", "accelerator_model_name": "H100"}).encode(), "has no results"),
])
def test_malformed_and_hostile_files_are_refused(store, name, data, message):
    report = refused(store, name, data)
    assert any(message in e for e in report.errors), report.errors


def test_oversized_file_is_refused_before_parsing(store):
    data = runner_file([matmul_result(1024, 1024, 1024, "bf16", [1e-5] * 5)])
    assert "over the 100-byte limit" in refused(store, "big.json", data, max_bytes=100).errors[0]


def test_zip_with_path_tricks_or_bombs_is_refused(store):
    def make(entries):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for n, d in entries:
                zf.writestr(n, d)
        return buf.getvalue()
    assert "unsafe path" in refused(store, "a.zip", make([("../../evil.txt", "x")])).errors[0]
    assert "unsafe path" in refused(store, "b.zip", make([("/etc/passwd", "x")])).errors[0]
    bomb = make([("zeros.txt", "0" * 5_000_000)])                      # 5 MB that compresses to a few KB
    assert len(bomb) < 20_000
    assert "decompression bomb" in refused(store, "c.zip", bomb).errors[0]
    text = "".join(f"{i} {i * 7919 % 10007}\n" for i in range(120_000)).encode()       # packs about 3x
    assert "unpacks to more than" in refused(store, "e.zip", make([("a.txt", text)]), max_bytes=1_000_000).errors[0]
    assert "not a readable .zip" in refused(store, "d.zip", b"PK\x03\x04" + b"\x00" * 50).errors[0]


def test_sql_in_every_text_field_is_stored_as_text(store):
    sw = {k: SQL for k in ("os", "kernel", "python", "numpy", "blas", "torch", "cuda", "driver", "nccl")}
    sw["env_vars"] = {"NCCL_ALGO": SQL}
    data = runner_file([matmul_result(1024, 1024, 1024, "bf16", [1e-5] * 5)], device_name=SQL, software=sw,
                       cpu_model=SQL, hostname_sha256=SQL)
    report = ingest_bytes(store, "sql.json", data, submitter=SQL)
    assert report.ingested, report.errors
    assert store.rows("SELECT accelerator_raw, host_cpu FROM system") == [(SQL, SQL)]
    assert store.rows("SELECT submitter FROM source") == [(SQL,)]
    assert store.rows("SELECT os, driver_version FROM software_env") == [(SQL, SQL)]
    assert store.rows("SELECT count(*) FROM measurement")[0][0] == 1           # the table is still there
    csv_text = f"accelerator,metric,value,unit,op,n_ranks,message_bytes,notes\n\"{SQL}\",busbw,10,GB/s,all_reduce,8,1000,\"{SQL}\"\n"
    assert ingest_bytes(store, "sql.csv", csv_text.encode()).ingested
    # where a field has a vocabulary, SQL is refused with the allowed values
    bad = csv_text.replace(",all_reduce,", f",\"{SQL}\",")
    assert "needs op (one of all_reduce" in refused(store, "sql2.csv", bad.encode()).errors[0]
    assert "is not a catalog id" in refused(store, "x.csv", b"a,b\n", accelerator=SQL).errors[0]


def test_control_characters_and_overlong_text_are_refused(store):
    data = runner_file([matmul_result(1024, 1024, 1024, "bf16", [1e-5] * 5)], device_name="H100\x1b[2J")
    assert refused(store, "c.json", data).errors == ["c.json: system.device_name: contains control characters; "
                                                     "remove them"]
    assert "control characters" in refused(store, "c.json", b"x", submitter="a\x07b").errors[0]
    assert "at most 500" in refused(store, "c.json", b"x", submitter="a" * 501).errors[0]


def test_duplicates_by_file_and_by_content(store):
    data = runner_file([matmul_result(4096, 4096, 4096, "bf16", [0.3e-3] * 5)])
    assert ingest_bytes(store, "a.json", data).ingested
    assert "this file was already ingested" in refused(store, "a.json", data).errors[0]
    same_content = data.replace(b'"duration_s": 12.5', b'"duration_s": 99.0')     # another file, same measurements
    assert "already in the store" in refused(store, "b.json", same_content).errors[0]
    twice = json.loads(same_content)
    twice["runner"]["started_at"] = "2026-11-21T10:00:00Z"
    twice["results"] = twice["results"] * 2
    assert "results[1] repeats results[0] exactly" in refused(store, "c.json", json.dumps(twice).encode()).errors[0]


def test_a_refused_file_in_a_folder_does_not_stop_the_others(store, tmp_path):
    tmp_path = tmp_path / "uploads"
    tmp_path.mkdir()
    (tmp_path / "good.json").write_bytes(runner_file([matmul_result(4096, 4096, 4096, "bf16", [0.3e-3] * 5)]))
    (tmp_path / "bad.txt").write_text(seed003_nccl_sample().replace("43.90   76.82", "43.90   86.82"))
    (tmp_path / "notes.md").write_text("not a result")
    reports = {r.input.rsplit("/", 1)[-1]: r for r in ingest_path(store, tmp_path)}
    assert reports["good.json"].ingested and not reports["bad.txt"].ingested
    assert "1 file(s) skipped" in reports[tmp_path.name].warnings[0]
    assert store.rows("SELECT count(*) FROM run")[0][0] == 1


def test_cli_json_report_and_exit_status(location, tmp_path, capsys):
    db = str(location)
    good, bad = tmp_path / "result_0.txt", tmp_path / "bad.csv"
    good.write_bytes((GPT3_RESULTS / "result_0.txt").read_bytes())
    bad.write_text("accelerator,metric,value,unit\nH100-SXM5-80GB,matmul_tflops,-5,TFLOP/s\n")
    assert main(["ingest", str(good), "--json", "--db", db]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[0]["ingested"] and out[0]["score_minutes"] == pytest.approx(49.7747, abs=5e-5)
    assert out[0]["rows_added"] == {"source": 1, "run": 1, "measurement": 1}
    assert main(["ingest", str(bad), "--json", "--db", db]) == 1
    out = json.loads(capsys.readouterr().out)
    assert not out[0]["ingested"] and "must be a finite number above zero" in out[0]["errors"][0]


def test_an_accelerator_label_on_a_cpu_result_is_reported_not_silently_dropped(store):
    # a numpy matmul on the host CPU, uploaded with an H100 label: stored as the CPU result it is, and the report says
    # the label was not used (issue 19: it was ignored without a word)
    data = runner_file([matmul_result(1024, 1024, 1024, "fp32", [0.01, 0.011, 0.0105], backend="numpy")],
                       device_type="cpu", device_name="cpu", count=1, cpu_model="AMD EPYC 7R13")
    report = ingest_bytes(store, "cpu.json", data, accelerator="H100-SXM5-80GB")
    assert report.ingested, report.errors
    assert any("'H100-SXM5-80GB'" in w and "is not used" in w and "'AMD EPYC 7R13'" in w for w in report.warnings)
    assert store.rows("SELECT accelerator_id, device_type, accelerator_raw FROM system") == [(None, "cpu", "AMD EPYC 7R13")]
