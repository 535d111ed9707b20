"""The bundled runners, run for real in --quick mode: schema, units and internal consistency (never speed)."""
import importlib.util
import json
import subprocess
import sys

import pytest

from benchmarks_db.ingest import ingest_path
from benchmarks_db.result_schema import ResultFile
from benchmarks_db.store import ROOT

HAS_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = "import sys; sys.modules['torch'] = None; from benchmarks_db.run import main; sys.exit(main(sys.argv[1:]))"


def _run(args, without_torch=False):
    cmd = [sys.executable, "-c", NO_TORCH, *args] if without_torch else [sys.executable, "-m", "benchmarks_db.run", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def _consistent(doc: ResultFile):
    assert doc.results
    for r in doc.results:
        assert r.stats.median > 0 and r.stats.min <= r.stats.median <= r.stats.max and r.n_samples >= 5
        if r.benchmark == "matmul":
            assert r.stats.median == pytest.approx(2 * r.m * r.n * r.k / r.time_s.median / 1e12, rel=1e-9)
            assert r.stats.max == pytest.approx(2 * r.m * r.n * r.k / r.time_s.min / 1e12, rel=1e-9)
        elif r.benchmark == "membw":
            words = {"copy": 2, "scale": 2, "add": 3, "triad": 3}[r.op]
            assert r.bytes_per_iter == words * r.element_bytes * r.array_elements
            assert r.stats.median == pytest.approx(r.bytes_per_iter / r.time_s.median / 1e9, rel=1e-9)
        elif r.benchmark == "collectives":
            n = r.n_ranks
            factor = 2 * (n - 1) / n if r.op == "all_reduce" else (n - 1) / n
            assert r.algbw.median == pytest.approx(r.message_bytes / r.time_s.median / 1e9, rel=1e-9)
            assert r.stats.median == pytest.approx(r.algbw.median * factor, rel=1e-9)
        elif r.benchmark == "storage":
            assert r.stats.median == pytest.approx(r.file_bytes / r.time_s.median / 1e9, rel=1e-9)


def test_all_runners_without_torch(tmp_path):
    out = tmp_path / "r.json"
    proc = _run(["all", "--quick", "--out", str(out), "--storage-dir", str(tmp_path)], without_torch=True)
    assert proc.returncode == 0, proc.stderr
    doc = ResultFile.model_validate_json(out.read_text())
    assert doc.schema_version == 1 and doc.runner.quick and doc.system.device_type == "cpu"
    assert {r.benchmark for r in doc.results} == {"matmul", "membw", "storage"}
    assert {s.runner: s.reason for s in doc.skipped}.keys() == {"h2d", "collectives"}
    assert all("torch is not installed" in s.reason for s in doc.skipped)
    assert "skipped collectives: torch is not installed" in proc.stdout and "Legend:" in proc.stdout
    _consistent(doc)
    assert {(r.dtype, r.backend) for r in doc.results if r.benchmark == "matmul"} == {("fp32", "numpy"), ("fp64", "numpy")}
    assert {r.op for r in doc.results if r.benchmark == "membw"} == {"copy", "scale", "add", "triad"}


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed: the gloo collectives runner needs torch.distributed")
def test_collectives_with_gloo_and_ingest(tmp_path, store):
    out = tmp_path / "c.json"
    proc = _run(["collectives", "--quick", "--device", "cpu", "--ranks", "2", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr
    doc = ResultFile.model_validate_json(out.read_text())
    assert {(r.op, r.backend, r.n_ranks) for r in doc.results} == {
        ("all_reduce", "gloo", 2), ("all_gather", "gloo", 2), ("reduce_scatter", "gloo", 2)}
    _consistent(doc)
    report = ingest_path(store, out)[0]
    assert report.ingested, report.errors
    assert any("--quick run" in f for f in report.flags)
    assert store.rows("SELECT count(*) FROM measurement WHERE metric = 'busbw'")[0][0] == len(doc.results)


def test_schema_is_printed_and_bad_arguments_explained():
    proc = _run(["--schema"])
    schema = json.loads(proc.stdout)
    assert schema["properties"]["schema_version"]["const"] == 1
    proc = _run(["matmul"])
    assert proc.returncode == 2 and "--out FILE" in proc.stderr
