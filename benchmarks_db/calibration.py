"""Measured figures that replace the engine's defaults when the planner picks "calibrated".

They reach the engine only as the scenario's cluster overrides (engine/scenario.py Cluster): matmul_efficiency
(measured MAMF-style TFLOP/s over the catalog's dense peak, the quantity the engine's default uses),
intra_node_busbw_gbs and inter_node_busbw_gbs (the plateau of the collective curve), and intra_node_latency_us and
inter_node_latency_us (its small-message end: one ring step's latency in the engine's NCCL-based model). Only trustworthy runs count: published tables, and user uploads that
passed every check with complete metadata (validation 'accepted') and that the deployment's operator trusts
(benchmarks_db/trust.py); illustrative, flagged and untrusted runs never do. Each system counts once per shape or
scale, so one machine's results uploaded many times do not outvote the others.
"""
from __future__ import annotations

import math

import pandas as pd

from benchmarks_db.store import Store
from benchmarks_db.queries import TRUSTED_SOURCE

TRUSTED = f"r.validation = 'accepted' AND {TRUSTED_SOURCE} AND s.accelerator_id IS NOT NULL"
BASE = "FROM run r JOIN system s USING (system_id) JOIN source src USING (source_id) JOIN measurement m USING (run_id)"
# Latency is fitted on the messages NCCL sends with its Simple protocol (the engine's latency model): at least 1 MiB
# (smaller ones use LL/LL128, whose latency is lower), with at least three sizes per run.
MIN_LATENCY_FIT_BYTES = 2**20
MIN_LATENCY_FIT_SIZES = 3
# Bus bandwidth is calibrated on its large-message plateau only: nccl-tests curves flatten from tens to hundreds of
# MiB (benchmarks-formats.md 2.1: A100 reaches ~230 GB/s at 8 GiB; H100 NVLS needs more than 256 MiB).
MIN_PLATEAU_MESSAGE_BYTES = 64 * 2**20


def median(column: str) -> str:
    """The median in the SQL both backends accept (DuckDB's median(x) is the same continuous 50th percentile)."""
    return f"percentile_cont(0.5) WITHIN GROUP (ORDER BY {column})"


def _same(keys: tuple[str, ...]) -> str:
    """Join condition of the figures with their evidence on `keys`, a NULL key (e.g. no dtype) matching NULL."""
    return " AND ".join(f"f.{k} IS NOT DISTINCT FROM e.{k}" for k in keys)


def matmul_calibration(store: Store) -> pd.DataFrame:
    """Per accelerator and dtype: the median over systems of each system's best matmul efficiency, where a system's
    figure for a shape is the median over its trustworthy runs of that shape. Each system and shape counts once, so
    uploading the same machine's results again (or reordered) adds no weight. The evidence (runs, sources) is every
    run and source of those figures."""
    keys = ("accelerator_id", "dtype")
    return store.df(f"""
WITH per_run_shape AS (
  SELECT s.accelerator_id, m.dtype, s.system_id, m.m, m.n, m.k, r.run_id, src.title AS source,
         max(m.efficiency) AS efficiency, max(m.value) AS tflops
  {BASE}
  WHERE m.metric = 'matmul_tflops' AND m.stat IN ('median', 'mean') AND m.efficiency IS NOT NULL AND {TRUSTED}
  GROUP BY s.accelerator_id, m.dtype, s.system_id, m.m, m.n, m.k, r.run_id, src.title),
per_system_shape AS (
  SELECT accelerator_id, dtype, system_id, m, n, k, {median("efficiency")} AS efficiency,
         {median("tflops")} AS tflops
  FROM per_run_shape GROUP BY accelerator_id, dtype, system_id, m, n, k),
per_system AS (
  SELECT accelerator_id, dtype, system_id, max(efficiency) AS efficiency,
         (array_agg(tflops ORDER BY efficiency DESC))[1] AS tflops
  FROM per_system_shape GROUP BY accelerator_id, dtype, system_id),
figures AS (
  SELECT accelerator_id, dtype, {median("efficiency")} AS matmul_efficiency, {median("tflops")} AS tflops,
         count(*) AS n_systems
  FROM per_system GROUP BY accelerator_id, dtype),
evidence AS (
  SELECT accelerator_id, dtype, count(DISTINCT run_id) AS n_runs, array_agg(DISTINCT run_id ORDER BY run_id) AS run_ids,
         array_agg(DISTINCT source ORDER BY source) AS sources
  FROM per_run_shape GROUP BY accelerator_id, dtype)
SELECT f.accelerator_id, f.dtype, f.matmul_efficiency, f.tflops, f.n_systems, e.n_runs, e.run_ids, e.sources
FROM figures f JOIN evidence e ON {_same(keys)} ORDER BY f.accelerator_id, f.dtype""")


def collective_calibration(store: Store) -> pd.DataFrame:
    """Per accelerator and scale (nodes, ranks): the median over systems of each system's plateau bus bandwidth
    (a run's highest busbw at messages of at least MIN_PLATEAU_MESSAGE_BYTES, the median over the system's runs):
    each system counts once per scale."""
    keys = ("accelerator_id", "n_nodes", "n_ranks")
    df = store.df(f"""
WITH per_run AS (
  SELECT s.accelerator_id, s.system_id, m.n_nodes, m.n_ranks, r.run_id, src.title AS source, m.op,
         max(m.value) AS busbw_gbs
  {BASE}
  WHERE m.metric = 'busbw' AND m.stat IN ('median', 'mean') AND m.message_bytes >= ? AND {TRUSTED}
  GROUP BY s.accelerator_id, s.system_id, m.n_nodes, m.n_ranks, r.run_id, src.title, m.op),
per_system AS (
  SELECT accelerator_id, system_id, n_nodes, n_ranks, {median("busbw_gbs")} AS busbw_gbs
  FROM per_run GROUP BY accelerator_id, system_id, n_nodes, n_ranks),
figures AS (
  SELECT accelerator_id, n_nodes, n_ranks, {median("busbw_gbs")} AS busbw_gbs, count(*) AS n_systems
  FROM per_system GROUP BY accelerator_id, n_nodes, n_ranks),
evidence AS (
  SELECT accelerator_id, n_nodes, n_ranks, count(DISTINCT run_id) AS n_runs, array_agg(DISTINCT op ORDER BY op) AS ops,
         array_agg(DISTINCT run_id ORDER BY run_id) AS run_ids, array_agg(DISTINCT source ORDER BY source) AS sources
  FROM per_run GROUP BY accelerator_id, n_nodes, n_ranks)
SELECT f.accelerator_id, f.n_nodes, f.n_ranks, f.busbw_gbs, f.n_systems, e.n_runs, e.ops, e.run_ids, e.sources
FROM figures f JOIN evidence e ON {_same(keys)} ORDER BY f.accelerator_id, f.n_nodes, f.n_ranks""",
                  [MIN_PLATEAU_MESSAGE_BYTES])
    df.insert(3, "ranks_per_node", df.n_ranks // df.n_nodes)
    return df


def collective_latency_calibration(store: Store) -> pd.DataFrame:
    """Per accelerator, link kind (intra: one node, inter: several) and system: the latency of one ring step that
    the engine's collective model (engine/physics/comm.py) needs to reproduce each trustworthy run's measured times.
    A run's latency is the intercept of time = latency + bytes x cost per byte, fitted by least squares on its
    Simple-protocol messages; the median over a system's runs, then over systems."""
    import numpy as np

    from engine.physics.comm import step_latencies_from
    rows = store.df(f"""
SELECT s.accelerator_id, s.system_id, r.run_id, src.title AS source, m.op, m.n_ranks, m.n_nodes, m.message_bytes,
       {median("m.value")} AS algbw_gbs
{BASE}
WHERE m.metric = 'algbw' AND m.stat IN ('median', 'mean') AND m.message_bytes >= ? AND m.value > 0
  AND m.op IN ('all_reduce', 'all_gather', 'reduce_scatter') AND {TRUSTED}
GROUP BY s.accelerator_id, s.system_id, r.run_id, src.title, m.op, m.n_ranks, m.n_nodes, m.message_bytes
ORDER BY 1, 2, 3, 4, 5, 6, 7, 8""", [MIN_LATENCY_FIT_BYTES])
    fitted = []
    for (acc, system, run, op, n, nodes), g in rows.groupby(["accelerator_id", "system_id", "run_id", "op", "n_ranks",
                                                           "n_nodes"]):
        if len(g) < MIN_LATENCY_FIT_SIZES or n < 2:
            continue
        size = g.message_bytes.to_numpy(dtype=float)
        seconds = size / (g.algbw_gbs.to_numpy(dtype=float) * 1e9)
        slope, intercept = np.polyfit(size, seconds, 1)
        hw = _default_hardware(acc)
        if intercept <= 0 or hw is None:
            continue
        kind, step_s = step_latencies_from(float(intercept), op, int(n), max(1, int(n) // int(nodes)), hw)
        if step_s > 0:
            fitted.append({"accelerator_id": acc, "system_id": system, "run_id": run, "source": g.source.iloc[0],
                           "link": kind, "op": op, "n_ranks": int(n), "n_nodes": int(nodes),
                           "latency_us": float(intercept) * 1e6, "step_latency_us": step_s * 1e6})
    df = pd.DataFrame(fitted, columns=["accelerator_id", "system_id", "run_id", "source", "link", "op", "n_ranks",
                                       "n_nodes", "latency_us", "step_latency_us"])
    if df.empty:
        return df
    per_system = df.groupby(["accelerator_id", "link", "system_id"], as_index=False).agg(
        step_latency_us=("step_latency_us", "median"), run_ids=("run_id", list), sources=("source", list),
        ops=("op", list))
    return per_system.groupby(["accelerator_id", "link"], as_index=False).agg(
        step_latency_us=("step_latency_us", "median"), n_systems=("system_id", "count"),
        run_ids=("run_ids", lambda x: sorted({r for runs in x for r in runs})),
        sources=("sources", lambda x: sorted({s for ss in x for s in ss})),
        ops=("ops", lambda x: sorted({o for os_ in x for o in os_}))).assign(
        n_runs=lambda d: d.run_ids.map(len))


def _default_hardware(accelerator_id: str):
    """The engine's figures for this accelerator with no measurement applied (what a fit is measured against)."""
    from engine.catalog import load_catalog
    from engine.physics.hardware import resolve_hardware
    from engine.precision import PRECISION_DTYPE
    from engine.scenario import ScenarioError
    from engine.inputs import parse_scenario
    acc = load_catalog().accelerators.get(accelerator_id)
    precision = next((p for p in ("bf16", "fp16", "fp32") if acc is not None and acc.peak(PRECISION_DTYPE[p])), None)
    if precision is None:
        return None
    try:
        return resolve_hardware(parse_scenario({"model": {"preset": "llama3.1-8b"},
                                                "training": {"seq_len": 4096, "global_batch_size": 8,
                                                             "total_tokens": 1e9, "precision": precision},
                                                "cluster": {"accelerator": accelerator_id, "n_gpus": 8}}))
    except ScenarioError:
        return None


def _level_scale(store: Store, accelerator_id: str, framework: str | None, out: dict) -> None:
    """level_scale from trusted step-time runs of this accelerator and stack (benchmarks_db/step_time.py)."""
    from benchmarks_db.step_time import level_calibration
    from engine.catalog import load_catalog
    from engine.frameworks import stack_id
    acc = load_catalog().accelerators.get(accelerator_id)
    if acc is None:
        return
    fw = stack_id(framework, acc.vendor)
    hit = level_calibration(store, accelerator_id, fw)
    if not len(hit):
        out["missing"]["level_scale"] = f"no trusted step-time log of {fw} on {accelerator_id}"
        return
    row = hit.iloc[0]
    value = float(row.level_scale)
    out["overrides"]["level_scale"] = value
    out["evidence"]["level_scale"] = {
        "value": value, "runs": list(row.run_ids), "sources": ["uploaded step-time logs"], "n_runs": int(row.n_runs),
        "n_systems": int(row.n_systems), "spread": [float(row.spread_low), float(row.spread_high)],
        "how": f"the factor on {fw}'s fitted level with which the engine reproduces the median step time of each "
               f"trusted run on its own scenario, median over {row.n_systems} system(s)"}


def _evidence(value: float, row: pd.Series, how: str) -> dict:
    return {"value": value, "runs": list(row["run_ids"]), "sources": list(row["sources"]), "n_runs": int(row["n_runs"]),
            "n_systems": int(row["n_systems"]), "how": how}


def calibrated_cluster(store: Store, accelerator_id: str, dtype: str, n_gpus: int, gpus_per_node: int,
                       framework: str | None = None) -> dict:
    """Cluster overrides from trustworthy measurements for this accelerator, training dtype and placement:
    {"overrides": {field: value}, "evidence": {field: {value, runs, sources, n_runs, how}}, "missing": {field: why}}.
    Only fields with measurements appear in overrides; the engine keeps its defaults for the rest. `framework` (the
    scenario's training.framework; None: the accelerator vendor's default) selects the trusted step-time runs whose
    level factor applies (benchmarks_db/step_time.py)."""
    out = {"overrides": {}, "evidence": {}, "missing": {}}
    _level_scale(store, accelerator_id, framework, out)
    mm = matmul_calibration(store)
    hit = mm[(mm.accelerator_id == accelerator_id) & (mm.dtype == dtype)]
    if len(hit):
        row = hit.iloc[0]
        eff = round(min(float(row.matmul_efficiency), 1.0), 4)
        out["overrides"]["matmul_efficiency"] = eff
        out["evidence"]["matmul_efficiency"] = _evidence(eff, row, f"median over {row.n_systems} system(s) ("
                                                                   f"{row.n_runs} run(s)) of the best {dtype} matmul "
                                                                   f"TFLOP/s over the datasheet peak")
    else:
        out["missing"]["matmul_efficiency"] = f"no trustworthy {dtype} matmul measurement for {accelerator_id}"
    coll = collective_calibration(store)
    coll = coll[coll.accelerator_id == accelerator_id]
    intra = coll[coll.n_nodes == 1]
    want = min(gpus_per_node, n_gpus)
    if len(intra):
        # the measurement closest to the group that matters: the node's GPUs (or the whole job if smaller)
        row = intra.iloc[int((intra.n_ranks - want).abs().values.argmin())]
        value = round(float(row.busbw_gbs), 2)
        out["overrides"]["intra_node_busbw_gbs"] = value
        out["evidence"]["intra_node_busbw_gbs"] = _evidence(
            value, row, f"plateau busbw of {row.n_ranks} ranks in one node ({', '.join(row.ops)}), median of "
                        f"{row.n_systems} system(s)")
    else:
        out["missing"]["intra_node_busbw_gbs"] = (f"no trustworthy single-node collective measurement for "
                                                  f"{accelerator_id} with messages of at least "
                                                  f"{MIN_PLATEAU_MESSAGE_BYTES // 2**20} MiB")
    inter = coll[coll.n_nodes > 1]
    if len(inter) and n_gpus > gpus_per_node:
        distance = (inter.n_ranks.map(lambda r: abs(math.log(r / n_gpus)))).values
        row = inter.iloc[int(distance.argmin())]
        # the engine's inter-node figure is per GPU: a ring across nodes runs at k x per-GPU network (engine/physics/comm.py)
        value = round(float(row.busbw_gbs) / int(row.ranks_per_node), 2)
        out["overrides"]["inter_node_busbw_gbs"] = value
        out["evidence"]["inter_node_busbw_gbs"] = _evidence(
            value, row, f"plateau busbw {row.busbw_gbs:.1f} GB/s of {row.n_ranks} ranks on {row.n_nodes} nodes "
                        f"({', '.join(row.ops)}) / {row.ranks_per_node} GPUs per node, median of {row.n_systems} "
                        f"system(s)")
    elif n_gpus > gpus_per_node:
        out["missing"]["inter_node_busbw_gbs"] = (f"no trustworthy multi-node collective measurement for "
                                                  f"{accelerator_id} with messages of at least "
                                                  f"{MIN_PLATEAU_MESSAGE_BYTES // 2**20} MiB")
    lat = collective_latency_calibration(store)
    for link, field in (("intra", "intra_node_latency_us"), ("inter", "inter_node_latency_us")):
        hit = lat[(lat.accelerator_id == accelerator_id) & (lat.link == link)] if len(lat) else lat
        if link == "inter" and n_gpus <= gpus_per_node:
            continue
        if len(hit):
            row = hit.iloc[0]
            value = round(float(row.step_latency_us), 2)
            out["overrides"][field] = value
            out["evidence"][field] = _evidence(value, row, f"latency of one ring step that reproduces the measured "
                                                           f"times ({', '.join(row.ops)}; intercept of time against "
                                                           f"message size from 1 MiB), median of {row.n_systems} "
                                                           "system(s)")
        else:
            out["missing"][field] = (f"no trustworthy {'single' if link == 'intra' else 'multi'}-node collective "
                                     f"measurement for {accelerator_id} with {MIN_LATENCY_FIT_SIZES}+ message sizes "
                                     "from 1 MiB")
    return out
