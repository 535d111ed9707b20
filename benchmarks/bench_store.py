"""Speed of the benchmark store: seeding, ingesting 10,000 measurements (target under 1 s) and every query a page
needs on the seeded store (target under 50 ms each). Prints figures; asserts nothing.

    .venv/bin/python benchmarks/bench_store.py
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks_db import queries  # noqa: E402
from benchmarks_db.calibration import calibrated_cluster, collective_calibration, matmul_calibration  # noqa: E402
from benchmarks_db.ingest import ingest_bytes  # noqa: E402
from benchmarks_db.seed import seed  # noqa: E402
from benchmarks_db.store import open_store  # noqa: E402
from benchmarks_db.validation import predicted_vs_measured  # noqa: E402

N_MEASUREMENTS = 10_000
QUERY_TARGET_MS, INGEST_TARGET_S = 50, 1.0


def runner_file(n: int) -> bytes:
    """n distinct matmul results on an H100 (rates consistent with their times), as the runner writes them."""
    results = []
    for i in range(n):
        m, k = 1024 + 64 * (i % 100), 1024 + 64 * (i // 100)
        work = 2 * m * 4096 * k / 1e12
        t = [work / (600 - j) for j in range(5)]
        results.append({"benchmark": "matmul", "unit": "TFLOP/s", "backend": "torch", "dtype": "bf16", "m": m,
                        "n": 4096, "k": k, "stats": {"median": work / statistics.median(t), "min": work / max(t),
                                                     "max": work / min(t)},
                        "time_s": {"median": statistics.median(t), "min": min(t), "max": max(t)},
                        "n_samples": 5, "warmup_iters": 10, "cv_pct": 0.5})
    doc = {"schema_version": 1, "runner": {"name": "bench", "version": "1", "argv": [], "started_at": "2026-11-21T00:00:00Z",
                                           "duration_s": 1, "quick": False},
           "system": {"device_type": "gpu", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 8},
           "software": {"cuda": "12.4", "driver": "550.54.15", "torch": "2.5.1", "nccl": "2.21.5"}, "results": results}
    return json.dumps(doc).encode()


def csv_file(n: int) -> bytes:
    lines = ["accelerator,metric,value,unit,op,n_ranks,message_bytes"]
    lines += [f"H100-SXM5-80GB,busbw,{100 + (i % 300)},GB/s,all_reduce,{2 + i % 7},{1024 * (i + 1)}" for i in range(n)]
    return ("\n".join(lines) + "\n").encode()


def timed(fn, repeats: int = 1):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench_store_"))
    db = tmp / "bench.duckdb"
    store = open_store(db)
    t, done = timed(lambda: seed(store))
    print(f"seed (empty store):            {t * 1000:8.1f} ms  {done}")
    t, _ = timed(lambda: seed(store), 5)
    print(f"seed (already seeded):         {t * 1000:8.1f} ms")
    for name, data in (("runner JSON", runner_file(N_MEASUREMENTS)), ("CSV", csv_file(N_MEASUREMENTS))):
        t, report = timed(lambda: ingest_bytes(store, f"bench.{name[:3].lower()}", data))
        assert report.ingested, report.errors[:3]
        mark = "ok" if t < INGEST_TARGET_S else "OVER TARGET"
        print(f"ingest {N_MEASUREMENTS:,} measurements ({name:<11}): {t * 1000:8.1f} ms  "
              f"({report.rows_added['measurement']} rows, target < {INGEST_TARGET_S * 1000:.0f} ms: {mark})")
    store.close()

    store = open_store(tmp / "pages.duckdb")
    seed(store)
    pages = {
        "filter_options": lambda: queries.filter_options(store),
        "mlperf_results(all)": lambda: queries.mlperf_results(store),
        "mlperf_results(gpt3, H100)": lambda: queries.mlperf_results(store, benchmark="gpt3", accelerator="H100-SXM5-80GB"),
        "compare_systems(llama2_70b_lora)": lambda: queries.compare_systems(store, "llama2_70b_lora"),
        "microbench_results": lambda: queries.microbench_results(store),
        "datasheet_efficiency": lambda: queries.datasheet_efficiency(store),
        "sources": lambda: queries.sources(store),
        "matmul_calibration": lambda: matmul_calibration(store),
        "collective_calibration": lambda: collective_calibration(store),
        "calibrated_cluster(H100, 1024)": lambda: calibrated_cluster(store, "H100-SXM5-80GB", "bf16", 1024, 8),
    }
    print(f"page queries on the seeded store (median of 20; target < {QUERY_TARGET_MS} ms):")
    for name, fn in pages.items():
        t, out = timed(fn, 20)
        rows = len(out) if hasattr(out, "__len__") else ""
        print(f"  {name:<34} {t * 1000:7.2f} ms  {rows:>5} rows  {'ok' if t * 1000 < QUERY_TARGET_MS else 'OVER TARGET'}")
    t, df = timed(lambda: predicted_vs_measured(store))
    print(f"predicted_vs_measured (runs the engine's layout search per distinct system; cache it on the page): "
          f"{t:.1f} s for {len(df)} results, {int((df.status == 'predicted').sum())} predicted")
    store.close()
    t, _ = timed(lambda: subprocess.run([sys.executable, "-m", "benchmarks_db", "seed", "--db", str(tmp / "pages.duckdb")],
                                        cwd=ROOT, check=True, capture_output=True))
    print(f"python -m benchmarks_db seed on a seeded store (process start included): {t * 1000:.0f} ms")


if __name__ == "__main__":
    main()
