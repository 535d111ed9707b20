"""Write a Source and its Runs inside the caller's transaction, as a few bulk inserts (Cursor.insert: typed Arrow
tables scanned by DuckDB, one pipelined batch on PostgreSQL), so 10,000 measurements take milliseconds rather than a
statement each."""
from __future__ import annotations

import json
import uuid
from dataclasses import asdict

import pyarrow as pa

from benchmarks_db.records import COLUMNS, Run, Source
from benchmarks_db.store import Cursor, utc_now

S, I, F, TS = pa.string(), pa.int64(), pa.float64(), pa.timestamp("us")
SOURCE = {"source_id": S, "kind": S, "dataset": S, "title": S, "publisher": S, "url": S, "source_commit": S,
          "published_date": S, "submitter": S, "filename": S, "file_sha256": S, "n_bytes": I, "ingested_at": TS,
          "notes": S, "uploaded_by": S, "trusted_by": S, "trusted_at": TS}
SYSTEM = {"system_id": S, "system_name": S, "device_type": S, "accelerator_id": S, "accelerator_raw": S,
          "accelerators_per_node": I, "n_nodes": I, "n_accelerators": I, "interconnect": S, "host_cpu": S,
          "host_memory": S, "extra": S}
SOFTWARE = {"env_id": S, "os": S, "kernel": S, "driver_version": S, "cuda_version": S, "rocm_version": S,
            "nccl_version": S, "torch_version": S, "numpy_version": S, "blas": S, "framework": S, "python_version": S,
            "extra": S}
RUN = {"run_id": S, "source_id": S, "system_id": S, "env_id": S, "suite": S, "benchmark": S, "tool": S,
       "tool_version": S, "mlperf_round": S, "division": S, "availability": S, "submitter_org": S, "started_at": TS,
       "duration_s": F, "validation": S, "validation_msgs": S, "content_sha256": S, "params": S}
MEASUREMENT = {"run_id": S, **{c: (I if c in ("n_samples", "m", "n", "k", "message_bytes", "n_ranks", "n_nodes")
                                   else F if c in ("value", "value_min", "value_max", "cv_pct", "peak_value", "efficiency")
                                   else S) for c in COLUMNS}, "params": S}


def _json(obj) -> str:
    """JSON as the store keeps it: no NaN or Infinity (not JSON; checks.record_problems refuses them first)."""
    return json.dumps(obj, sort_keys=True, default=str, allow_nan=False)


def write(cur: Cursor, source: Source, runs: list[Run]) -> dict[str, int]:
    """Insert the source, its systems and software environments (shared ones once) and runs; returns rows added."""
    source.source_id = source.source_id or f"upload:{uuid.uuid4().hex[:16]}"
    src = {k: v for k, v in asdict(source).items()}
    src["ingested_at"] = utc_now()
    cur.insert("source", SOURCE, [src])
    systems = {r.system.system_id: r.system for r in runs}
    envs = {r.software.env_id: r.software for r in runs if r.software}
    cur.insert("system", SYSTEM, [{**asdict(s), "system_id": sid, "extra": _json(s.extra)}
                                    for sid, s in systems.items()], ignore=True)
    cur.insert("software_env", SOFTWARE, [{**asdict(e), "env_id": eid, "extra": _json(e.extra)}
                                            for eid, e in envs.items()], ignore=True)
    run_rows, meas_rows = [], []
    for run in runs:
        content = run.content_sha256
        run.run_id = run.run_id or f"run-{content[:20]}"
        run_rows.append({
            "run_id": run.run_id, "source_id": source.source_id, "system_id": run.system.system_id,
            "env_id": run.software.env_id if run.software else None, "suite": run.suite, "benchmark": run.benchmark,
            "tool": run.tool, "tool_version": run.tool_version, "mlperf_round": run.mlperf_round,
            "division": run.division, "availability": run.availability, "submitter_org": run.submitter_org,
            "started_at": run.started_at, "duration_s": run.duration_s,
            "validation": "flagged" if run.flags else "accepted", "validation_msgs": _json(run.flags + run.notes),
            "content_sha256": content, "params": _json(run.params)})
        meas_rows += [{"run_id": run.run_id, **{c: getattr(m, c) for c in COLUMNS}, "params": _json(m.params)}
                      for m in run.measurements]
    cur.insert("run", RUN, run_rows)
    cur.insert("measurement", MEASUREMENT, meas_rows)
    return {"source": 1, "run": len(run_rows), "measurement": len(meas_rows)}
