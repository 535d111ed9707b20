"""Many page sessions (threads) reading while uploads are written: nothing lost, nothing half-visible, no lock
errors."""
import threading

from benchmarks_db import queries
from benchmarks_db.calibration import calibrated_cluster
from benchmarks_db.ingest import ingest_bytes

from .helpers import matmul_result, runner_file

N_UPLOADS, N_READERS = 30, 8
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 8192, 4096)]


def test_readers_and_writers_together(seeded):
    errors, partial = [], []
    start_runs = seeded.rows("SELECT count(*) FROM run")[0][0]
    done = threading.Event()

    def writer(first):
        try:
            for i in range(first, N_UPLOADS, 2):
                data = runner_file([matmul_result(m, n, k, "bf16", [2 * m * n * k / (400e12 + i * 1e12)] * 5)
                                    for m, n, k in SHAPES], started=f"2026-11-20T10:{i:02d}:00Z")
                report = ingest_bytes(seeded, f"u{i}.json", data, submitter=f"w{first}")
                if not report.ingested:
                    errors.append(report.errors)
        except Exception as err:                # noqa: BLE001 - any failure is the finding
            errors.append(repr(err))

    def reader():
        try:
            while not done.is_set():
                queries.mlperf_results(seeded, benchmark="gpt3")
                queries.datasheet_efficiency(seeded)
                calibrated_cluster(seeded, "H100-SXM5-80GB", "bf16", 64, 8)
                # a run is never visible without all of its measurements
                partial.extend(seeded.rows("SELECT r.run_id, count(m.run_id) FROM run r LEFT JOIN measurement m "
                                           "USING (run_id) WHERE r.benchmark = 'matmul' AND r.tool = 'benchmarks_db.run' "
                                           "GROUP BY 1 HAVING count(m.run_id) <> 3"))
        except Exception as err:                # noqa: BLE001
            errors.append(repr(err))

    readers = [threading.Thread(target=reader) for _ in range(N_READERS)]
    writers = [threading.Thread(target=writer, args=(k,)) for k in (0, 1)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join(timeout=120)
    done.set()
    for t in readers:
        t.join(timeout=60)
    assert errors == [] and partial == []
    assert seeded.rows("SELECT count(*) FROM run")[0][0] == start_runs + N_UPLOADS
    assert seeded.rows("SELECT count(*) FROM source WHERE kind = 'user_submitted'")[0][0] == N_UPLOADS
    # the links the writer keeps: no run without its source and system, no measurement without its run
    orphans = seeded.rows("""
        SELECT (SELECT count(*) FROM run WHERE source_id NOT IN (SELECT source_id FROM source)
                                          OR system_id NOT IN (SELECT system_id FROM system)),
               (SELECT count(*) FROM measurement WHERE run_id NOT IN (SELECT run_id FROM run))""")
    assert orphans == [(0, 0)]
