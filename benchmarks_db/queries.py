"""What the app's pages ask the store, as pandas DataFrames. Every filter is optional (None = all) and bound as a
parameter. Derived figures (accelerator-hours) are labelled as derived, beside the primary metric, as MLCommons'
results guidelines ask. The per-result tables take `limit` and `offset` (a page; None: every row) and carry the
number of rows of every page in `total_rows`, so that a page never loads every row (ten 100,000-row uploads made
each Benchmarks view cost 9 s of CPU and GBs of memory)."""
from __future__ import annotations

import pandas as pd

from benchmarks_db.store import Store

BASE = """
FROM run r JOIN system s USING (system_id) JOIN source src USING (source_id) JOIN measurement m USING (run_id)
"""
# SQL for "this run's source may calibrate": published tables, and uploads an operator trusted (benchmarks_db.trust).
TRUSTED_SOURCE = "(src.kind = 'published' OR (src.kind = 'user_submitted' AND src.trusted_at IS NOT NULL))"
ACCEL = "coalesce(s.accelerator_id, s.accelerator_raw)"
TOTAL = "count(*) OVER () AS total_rows"
PAGE = "LIMIT $limit OFFSET $offset"
DATASHEET_COLUMNS = ("accelerator, accelerator_id, dtype, op, value, unit, stat, peak_value, efficiency, source_kind, "
                     "trusted, source, tool, validation, validation_msgs, run_id")


def _page(limit: int | None, offset: int) -> dict:
    return {"limit": limit, "offset": max(0, int(offset))}


def filter_options(store: Store) -> dict[str, list[str]]:
    """Distinct values for the pages' filter widgets."""
    q = lambda sql: [r[0] for r in store.rows(sql) if r[0] is not None]
    return {
        "accelerators": q(f"SELECT DISTINCT {ACCEL} FROM run r JOIN system s USING (system_id) ORDER BY 1"),
        "benchmarks": q("SELECT DISTINCT benchmark FROM run WHERE suite != 'training_run' ORDER BY 1"),
        "mlperf_rounds": q("SELECT DISTINCT mlperf_round FROM run ORDER BY 1"),
        "source_kinds": q("SELECT DISTINCT kind FROM source ORDER BY 1"),
        "metrics": q("SELECT DISTINCT metric FROM measurement JOIN run USING (run_id) WHERE suite != 'training_run' "
                     "ORDER BY 1"),      # step times are shown beside their predictions (ui/training_runs.py)
    }


def mlperf_results(store: Store, benchmark: str | None = None, accelerator: str | None = None,
                   mlperf_round: str | None = None, source_kind: str | None = None,
                   availability: str | None = None, limit: int | None = None, offset: int = 0) -> pd.DataFrame:
    """One row per MLPerf Training result (score in minutes) with its system and source."""
    return store.df(f"""
SELECT r.run_id, r.mlperf_round AS round, r.submitter_org AS submitter, s.system_name, r.benchmark,
       s.accelerator_raw, s.accelerator_id, s.n_accelerators, s.accelerators_per_node, s.n_nodes,
       m.value AS score_minutes, m.value / 60 * s.n_accelerators AS accelerator_hours_derived,
       r.availability, r.division, src.kind AS source_kind, {TRUSTED_SOURCE} AS trusted, src.title AS source,
       coalesce(r.params->>'url', src.url) AS url, r.validation, r.validation_msgs, {TOTAL}
{BASE}
WHERE r.suite = 'mlperf_training' AND m.stat = 'score'
  AND ($benchmark IS NULL OR r.benchmark = $benchmark)
  AND ($accelerator IS NULL OR s.accelerator_id = $accelerator OR s.accelerator_raw = $accelerator)
  AND ($round IS NULL OR r.mlperf_round = $round)
  AND ($kind IS NULL OR src.kind = $kind)
  AND ($availability IS NULL OR r.availability = $availability)
ORDER BY r.benchmark, m.value, r.mlperf_round, r.submitter_org, s.system_name, r.run_id {PAGE}""",
                    {"benchmark": benchmark, "accelerator": accelerator, "round": mlperf_round, "kind": source_kind,
                     "availability": availability, **_page(limit, offset)})


def compare_systems(store: Store, benchmark: str, source_kind: str | None = "published") -> pd.DataFrame:
    """Best (lowest) score per accelerator and accelerator count for one benchmark, with the derived
    accelerator-hours to compare efficiency across scales."""
    return store.df(f"""
SELECT {ACCEL} AS accelerator, s.n_accelerators, min(m.value) AS best_minutes,
       (array_agg(r.mlperf_round ORDER BY m.value))[1] AS round,
       (array_agg(r.submitter_org ORDER BY m.value))[1] AS submitter,
       (array_agg(s.system_name ORDER BY m.value))[1] AS system_name, count(*) AS n_results,
       min(m.value) / 60 * s.n_accelerators AS accelerator_hours_derived
{BASE}
WHERE r.suite = 'mlperf_training' AND m.stat = 'score' AND r.benchmark = $benchmark
  AND ($kind IS NULL OR src.kind = $kind)
GROUP BY 1, 2 ORDER BY 1, 2""", {"benchmark": benchmark, "kind": source_kind})


def microbench_results(store: Store, metric: str | None = None, accelerator: str | None = None,
                       source_kind: str | None = None, limit: int | None = None, offset: int = 0) -> pd.DataFrame:
    """Every microbenchmark measurement (matmul, memory, copy, collectives, storage) with its system and source."""
    return store.df(f"""
SELECT r.run_id, r.benchmark, m.metric, m.value, m.unit, m.stat, m.value_min, m.value_max, m.cv_pct, m.n_samples,
       m.dtype, m.m, m.n, m.k, m.op, m.message_bytes, m.n_ranks, m.n_nodes, m.backend, m.peak_value, m.efficiency,
       {ACCEL} AS accelerator, s.device_type, s.accelerator_raw, r.tool, r.started_at, src.kind AS source_kind,
       {TRUSTED_SOURCE} AS trusted, src.title AS source, src.submitter, src.uploaded_by, r.validation,
       r.validation_msgs, {TOTAL}
{BASE}
WHERE r.suite = 'microbench'
  AND ($metric IS NULL OR m.metric = $metric)
  AND ($accelerator IS NULL OR s.accelerator_id = $accelerator OR s.accelerator_raw = $accelerator)
  AND ($kind IS NULL OR src.kind = $kind)
ORDER BY r.benchmark, accelerator, m.metric, m.op, m.dtype, m.message_bytes, m.m, r.run_id, m.value {PAGE}""",
                    {"metric": metric, "accelerator": accelerator, "kind": source_kind, **_page(limit, offset)})


def datasheet_efficiency(store: Store, metric: str = "matmul_tflops", limit: int | None = None,
                         offset: int = 0) -> pd.DataFrame:
    """Measured vs datasheet: per run its best value (best matmul shape, fastest memory kernel) against the catalog
    peak of the same dtype, with where the number comes from and whether it is trusted."""
    return store.df(f"""
SELECT {DATASHEET_COLUMNS}, {TOTAL} FROM (
  SELECT {ACCEL} AS accelerator, s.accelerator_id, m.dtype, m.op, m.value, m.unit, m.stat, m.peak_value,
         m.efficiency, src.kind AS source_kind, {TRUSTED_SOURCE} AS trusted, src.title AS source, r.tool,
         r.validation, r.validation_msgs, r.run_id,
         row_number() OVER (PARTITION BY r.run_id, m.dtype, m.op ORDER BY m.value DESC) AS best
  {BASE}
  WHERE m.metric = $metric) AS per_run
WHERE best = 1
ORDER BY accelerator, dtype, value DESC, run_id {PAGE}""", {"metric": metric, **_page(limit, offset)})


def sources(store: Store) -> pd.DataFrame:
    """Every source with its kind, link and how many runs and measurements it holds."""
    return store.df("""
SELECT src.source_id, src.kind, src.title, src.publisher, src.url, src.source_commit, src.submitter, src.filename,
       src.ingested_at, count(DISTINCT r.run_id) AS runs, count(m.run_id) AS measurements
FROM source src LEFT JOIN run r USING (source_id) LEFT JOIN measurement m USING (run_id)
GROUP BY src.source_id, src.kind, src.title, src.publisher, src.url, src.source_commit, src.submitter,
         src.filename, src.ingested_at
ORDER BY src.kind, src.source_id""")
