"""Load the published data shipped in benchmarks_db/data/ (sources in data/README.md). Idempotent and cheap when
already loaded: a dataset is reloaded only when its file's sha256 changes, replacing that dataset's rows (and only
those) in one transaction."""
from __future__ import annotations

import csv
import hashlib
from pathlib import Path

from benchmarks_db import checks
from benchmarks_db.accelerators import catalog_id, device_type
from benchmarks_db.mlperf import AVAILABILITY, olympic_score
from benchmarks_db.records import Measurement, Run, Software, Source, System
from benchmarks_db.store import Store, utc_now
from benchmarks_db.writer import write

DATA = Path(__file__).resolve().parent / "data"
MAMF_COMMIT = "744d01e"
MAMF_URL = f"https://github.com/stas00/ml-engineering/blob/{MAMF_COMMIT}/compute/accelerator/README.md"
# The CSV's 4-decimal scores vs the recomputation from its 4-decimal run minutes and 5-decimal scaling factors.
SCORE_TOL_MIN, SCORE_TOL_REL = 6e-4, 1e-5


def _rows(name: str) -> list[dict]:
    with open(DATA / name, newline="") as fh:
        return list(csv.DictReader(fh))


def mlperf_runs() -> list[tuple[Source, list[Run]]]:
    """mlperf_training_results.csv: one published run per (round, submitter, system, benchmark) results folder;
    one source per round's repository."""
    sources: dict[str, tuple[Source, list[Run]]] = {}
    for row in _rows("mlperf_training_results.csv"):
        rnd, commit = row["round"], row["source_commit"]
        repo = f"training_results_{rnd}"
        sid = f"mlcommons:{repo}@{commit[:7]}"
        runs = sources.setdefault(sid, (Source(
            kind="published", source_id=sid, dataset="mlperf_training_results.csv", publisher="MLCommons",
            title=f"MLPerf Training {rnd} results (closed division)", url=f"https://github.com/mlcommons/{repo}",
            source_commit=commit, notes="scores recomputed from the result logs with the result_summarizer rule; "
                                        "see benchmarks_db/data/mlperf_training_results.README.md"), []))[1]
        raw = row["accelerator_model_name"]
        accel = catalog_id(raw)
        system = System(accelerator_raw=raw, accelerator_id=accel, device_type=device_type(accel, raw),
                        system_name=row["system_name"], accelerators_per_node=int(row["accelerators_per_node"]),
                        n_nodes=int(row["number_of_nodes"]), n_accelerators=int(row["total_accelerators"]),
                        host_cpu=row["host_processor_model_name"],
                        extra={"accelerator_memory_capacity": row["accelerator_memory_capacity"]})
        minutes = [float(x) for x in row["run_minutes_sorted"].split()]
        failed, scaling, score = int(row["n_runs_failed"]), float(row["scaling_factor"]), float(row["score_minutes"])
        path = row["source_path"]
        run = Run(
            suite="mlperf_training", benchmark=row["benchmark"], tool="mlperf_logging result_summarizer rule",
            system=system, software=Software(framework=row["framework"]), mlperf_round=rnd, division=row["division"],
            availability=AVAILABILITY.get(row["status"].lower(), row["availability"]), submitter_org=row["submitter_org"],
            run_id=f"mlperf:{rnd}:{row['submitter']}:{row['system_id']}:{row['benchmark']}",
            measurements=[Measurement("time_to_train", score, "min", "score", n_samples=int(row["n_result_files"]),
                                      params={"scaling_factor": scaling, "n_runs_used": int(row["n_runs_used"])})]
                         + [Measurement("time_to_train", m, "min", "single", params={"rank": i})
                            for i, m in enumerate(minutes)],
            params={"mlperf_system": row["system_id"], "submitter_folder": row["submitter"], "results_path": path,
                    "url": f"https://github.com/mlcommons/{repo}/tree/{commit}/{path}",
                    "n_result_files": int(row["n_result_files"]), "n_runs_failed": failed, "scaling_factor": scaling})
        recomputed = olympic_score(minutes, failed, row["benchmark"], scaling)
        if recomputed is None or abs(recomputed - score) > SCORE_TOL_MIN + SCORE_TOL_REL * score:
            run.flags.append(f"score {score} differs from the per-run list ({recomputed}): {row['notes']}")
        elif row["notes"]:
            run.notes.append(row["notes"])
        runs.append(run)
    return list(sources.values())


def mamf_runs() -> list[tuple[Source, list[Run]]]:
    """mamf_published.csv: ml-engineering's maximum achievable matmul FLOPS table (mean of 100 iterations)."""
    source = Source(kind="published", source_id=f"ml-engineering:mamf@{MAMF_COMMIT}", dataset="mamf_published.csv",
                    publisher="stas00/ml-engineering", url=MAMF_URL, source_commit=MAMF_COMMIT,
                    title="Maximum achievable matmul FLOPS (MAMF), compute/accelerator/README.md",
                    notes="dense; best shape of mamf-finder's sweep; mean of 100 iterations after 50 warm-up")
    runs = []
    for row in _rows("mamf_published.csv"):
        raw, accel = row["accelerator_raw"], row["accelerator_id"] or None
        run = Run(suite="microbench", benchmark="matmul", tool="mamf-finder (ml-engineering)", tool_version="2",
                  system=System(accelerator_raw=raw, accelerator_id=accel, device_type=device_type(accel, raw)),
                  software=Software(extra={"stack": row["software"]}),
                  run_id=f"mamf:{raw}:{row['dtype']}",
                  measurements=[Measurement("matmul_tflops", float(row["measured_tflops"]), "TFLOP/s", "mean",
                                            n_samples=100, dtype=row["dtype"], where=f"{raw} {row['dtype']}",
                                            params={"theory_tflops": float(row["theory_tflops"])})])
        if row["note"]:
            run.notes.append(row["note"])
        runs.append(run)
    return [(source, runs)]


def illustrative_runs() -> list[tuple[Source, list[Run]]]:
    """seed000_illustrative.csv: the seed document's GEMM and STREAM tables, kept for comparison, never calibrated."""
    source = Source(kind="illustrative", source_id="seed-000:T13-T14", dataset="seed000_illustrative.csv",
                    title="Seed document 000: GEMM (T13) and STREAM (T14) tables, illustrative",
                    notes="unsourced round numbers from a seed document (../shared/reference/seed-000-004-extract.md); "
                          "shown for comparison, never used for calibration")
    runs = []
    for row in _rows("seed000_illustrative.csv"):
        raw, accel = row["accelerator_raw"], row["accelerator_id"] or None
        metric = row["metric"]
        m = Measurement(metric, float(row["value"]), row["unit"], "single", dtype=row["dtype"] or None,
                        op=row["op"] or None, where=f"{row['table']} {raw}",
                        params={"library": row["library"], "stated_pct_of_peak": row["stated_pct_of_peak"] or None})
        run = Run(suite="microbench", benchmark="matmul" if metric == "matmul_tflops" else "membw",
                  tool=f"seed 000 table {row['table']}", run_id=f"seed000:{row['table']}:{raw}",
                  system=System(accelerator_raw=raw, accelerator_id=accel, device_type=device_type(accel, raw)),
                  measurements=[m], flags=[f"illustrative seed value, not a measurement: {row['sanity']}"])
        runs.append(run)
    return [(source, runs)]


DATASETS = {"mlperf_training_results.csv": mlperf_runs, "mamf_published.csv": mamf_runs,
            "seed000_illustrative.csv": illustrative_runs}


def _delete_dataset(cur, dataset: str) -> None:
    ids = "SELECT source_id FROM source WHERE dataset = ?"
    cur.execute(f"DELETE FROM measurement WHERE run_id IN (SELECT run_id FROM run WHERE source_id IN ({ids}))", [dataset])
    cur.execute(f"DELETE FROM run WHERE source_id IN ({ids})", [dataset])
    cur.execute("DELETE FROM source WHERE dataset = ?", [dataset])
    cur.execute("DELETE FROM seed_dataset WHERE dataset = ?", [dataset])


def seed(store: Store) -> dict[str, str]:
    """Load every dataset whose file changed since it was last loaded; returns what happened per dataset."""
    done = {}
    loaded = dict(store.rows("SELECT dataset, sha256 FROM seed_dataset"))
    for name, build in DATASETS.items():
        sha = hashlib.sha256((DATA / name).read_bytes()).hexdigest()
        if loaded.get(name) == sha:
            done[name] = "up to date"
            continue
        parts = build()
        errors = [e for _, runs in parts for r in runs for e in checks.plausibility(r)]
        if errors:
            raise ValueError(f"benchmarks_db/data/{name} fails the plausibility checks: {errors[:3]}")
        rows = {"run": 0, "measurement": 0}
        with store.transaction() as cur:
            _delete_dataset(cur, name)
            for src, runs in parts:
                added = write(cur, src, runs)
                rows = {k: rows[k] + added[k] for k in rows}
            cur.execute("INSERT INTO seed_dataset VALUES (?, ?, ?, ?)", [name, sha, rows["run"], utc_now()])
        done[name] = f"loaded {rows['run']} runs, {rows['measurement']} measurements"
    return done
