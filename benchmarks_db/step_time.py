"""Uploaded training runs (benchmarks_db/step_logs.py) against the planner's prediction, and what a trusted one
calibrates.

One mechanism, stated once: a trusted step-time run (validation 'accepted', its upload trusted by the operator) of
an (accelerator, framework) gives the factor s on the stack's fitted in-training level (data/frameworks.json) with
which the engine reproduces the run's median step time on the run's own scenario. The step time falls as the level
rises but less than in proportion (communication and pipeline idle do not scale with it), so s is found by iterating
s <- s x predicted(s) / measured until they agree to 0.1%. Per (accelerator, framework) the calibrated factor is the
median over systems of each system's median factor, so one machine uploaded many times counts once. It reaches the
engine only as the cluster override `level_scale` (engine/scenario.py Cluster; engine/physics/hardware.py multiplies
the level by it), through benchmarks_db.calibration.calibrated_cluster: the Scenario page's "calibrated" choice.

Ranges: on a self-measured cluster the step time is known to the measurement's own spread, so the band around the
calibrated step time is its value times the 10th and 90th percentiles of the trusted runs' steady-state step times
over their medians (the widest over those runs), in place of the spread of published runs around the engine.
"""
from __future__ import annotations

import json
import statistics

import pandas as pd

from benchmarks_db.audit import VISIBLE_SOURCE
from benchmarks_db.queries import TRUSTED_SOURCE
from benchmarks_db.store import Store

MAX_ITERATIONS = 12
TOLERANCE = 1e-3
SCALE_BOUNDS = (0.05, 5.0)         # engine/scenario.py Cluster.level_scale: gt 0, le 5

COLUMNS = ["run_id", "source_id", "filename", "trusted", "validation", "accelerator_id", "system_id", "framework",
           "precision", "n_gpus", "measured_s", "p10_s", "p90_s", "n_samples", "scenario"]


def training_runs(store: Store, viewer: str | None = None) -> pd.DataFrame:
    """Every stored training step-time run with its measured median and spread and the scenario it ran (other users'
    private uploads left out: `viewer` is the signed-on user, None for nobody)."""
    df = store.df(f"""
SELECT r.run_id, src.source_id, src.filename, {TRUSTED_SOURCE} AS trusted, r.validation, s.accelerator_id,
       s.system_id, r.params->>'framework' AS framework, m.dtype AS precision,
       s.n_accelerators AS n_gpus, m.value AS measured_s,
       CAST(m.params->>'p10_s' AS DOUBLE PRECISION) AS p10_s,
       CAST(m.params->>'p90_s' AS DOUBLE PRECISION) AS p90_s, m.n_samples,
       CAST(r.params->'scenario' AS VARCHAR) AS scenario
FROM run r JOIN system s USING (system_id) JOIN source src USING (source_id) JOIN measurement m USING (run_id)
WHERE r.suite = 'training_run' AND m.metric = 'step_time' AND m.stat = 'median' AND {VISIBLE_SOURCE}
ORDER BY src.ingested_at DESC, r.run_id""", {"viewer": viewer})
    return df[COLUMNS] if len(df) else pd.DataFrame(columns=COLUMNS)


def predicted_step_s(scenario, level_scale: float | None = None) -> float:
    """The engine's step time of the run's scenario (its stored cluster overrides removed), optionally with the level
    scaled by level_scale."""
    from engine.inputs import parse_scenario
    from engine.planning.estimate import estimate
    data = json.loads(scenario) if isinstance(scenario, str) else dict(scenario)
    cluster = {k: v for k, v in data["cluster"].items() if k != "level_scale"}
    if level_scale is not None:
        cluster["level_scale"] = level_scale
    return estimate(parse_scenario({**data, "cluster": cluster})).step_time_s


def level_scale_for(scenario, measured_s: float, predicted_s: float | None = None) -> float:
    """The factor on the fitted level with which the engine's step time of `scenario` is measured_s; predicted_s: its
    step time at the fitted level where the caller has it already (the first iteration's)."""
    lo, hi = SCALE_BOUNDS
    s = 1.0
    for i in range(MAX_ITERATIONS):
        predicted = predicted_s if i == 0 and predicted_s is not None else predicted_step_s(scenario, s)
        if abs(predicted / measured_s - 1) < TOLERANCE:
            break
        s = min(hi, max(lo, s * predicted / measured_s))
    return s


def runs_version(store: Store) -> tuple:
    """What predicted_vs_measured and before_after depend on in the store: every training run's id, median, scenario,
    validation, trust and visibility. It changes only when one of those does, not with every upload."""
    return tuple(store.rows(f"""
SELECT count(*), md5(coalesce(string_agg(concat_ws('|', r.run_id, m.value, r.validation, CAST(r.params AS VARCHAR),
                                                   {TRUSTED_SOURCE}, src.visibility, src.uploaded_by), ','
                                          ORDER BY r.run_id), ''))
FROM run r JOIN source src USING (source_id) JOIN measurement m USING (run_id)
WHERE r.suite = 'training_run' AND m.metric = 'step_time' AND m.stat = 'median'""")[0])


def prediction(scenario) -> tuple[float | None, str | None]:
    """(the engine's step time of a stored run's scenario, None) or, where it cannot estimate it any more (a model
    preset or a field an update of the planner renamed or tightened since the upload), (None, why)."""
    from engine.scenario import ScenarioError
    try:
        return predicted_step_s(scenario), None
    except ScenarioError as err:
        problems = getattr(err, "problems", None)
        said = "; ".join(f"{f}: {m}" for f, m in problems) if problems else str(err)
        return None, f"its stored scenario no longer fits this planner ({said[:300]}); upload the log again with a current one"


def predicted_vs_measured(store: Store, viewer: str | None = None) -> pd.DataFrame:
    """training_runs (as `viewer` sees them) with the engine's prediction (no level scale), measured / predicted, the
    level factor each run implies and, for a run whose stored scenario the engine cannot estimate any more, why
    (`problem`; its figures None)."""
    df = training_runs(store, viewer)
    if df.empty:
        return df.assign(predicted_s=[], ratio=[], level_scale=[], problem=[])
    df = df.copy()
    df["predicted_s"], df["problem"] = zip(*(prediction(sc) for sc in df.scenario))
    df["ratio"] = [None if p is None else m / p for m, p in zip(df.measured_s, df.predicted_s)]
    df["level_scale"] = [None if p is None else level_scale_for(sc, m, p)
                         for sc, m, p in zip(df.scenario, df.measured_s, df.predicted_s)]
    return df


def level_calibration(store: Store, accelerator_id: str | None = None, framework: str | None = None) -> pd.DataFrame:
    """Per (accelerator, framework), from trusted accepted runs only (of this accelerator and framework when given):
    level_scale (median over systems of each system's median factor), the measured spread (widest p10/median and
    p90/median) and the runs used."""
    cols = ["accelerator_id", "framework", "level_scale", "spread_low", "spread_high", "n_systems", "n_runs", "run_ids"]
    df = training_runs(store)
    df = df[(df.validation == "accepted") & df.trusted.astype(bool) & df.accelerator_id.notna()]
    if accelerator_id is not None:
        df = df[df.accelerator_id == accelerator_id]
    if framework is not None:
        df = df[df.framework == framework]
    df = df.assign(predicted_s=[prediction(sc)[0] for sc in df.scenario])
    df = df[df.predicted_s.notna()]                  # a run the engine cannot estimate any more calibrates nothing
    out = []
    for (acc, fw), g in df.groupby(["accelerator_id", "framework"]):
        g = g.assign(level_scale=[level_scale_for(sc, m, p) for sc, m, p in zip(g.scenario, g.measured_s, g.predicted_s)])
        per_system = g.groupby("system_id").level_scale.median()
        out.append({"accelerator_id": acc, "framework": fw, "level_scale": round(statistics.median(per_system), 4),
                    "spread_low": float((g.p10_s / g.measured_s).min()),
                    "spread_high": float((g.p90_s / g.measured_s).max()),
                    "n_systems": len(per_system), "n_runs": len(g), "run_ids": sorted(g.run_id)})
    return pd.DataFrame(out, columns=cols)


def measured_band(value_s: float, row) -> dict:
    """{"value", "low", "high"}: a calibrated step time with the measurement's own spread (the module docstring)."""
    return {"value": value_s, "low": value_s * row["spread_low"], "high": value_s * row["spread_high"]}


def before_after(store: Store) -> list[dict]:
    """Per calibrated (accelerator, framework), on the newest trusted run's scenario: the engine's step time and
    training days before (the published-run band of engine.economics.ranges) and after calibration (the measured
    band), with the run measured against them."""
    from engine.economics.ranges import band
    from engine.inputs import parse_scenario
    from engine.planning.estimate import estimate
    out = []
    runs = training_runs(store)
    for _, cal in level_calibration(store).iterrows():
        newest = runs[runs.run_id.isin(cal.run_ids)].iloc[0]
        data = json.loads(newest.scenario)
        data["cluster"] = {k: v for k, v in data["cluster"].items() if k != "level_scale"}
        before = estimate(parse_scenario(data))
        after = estimate(parse_scenario({**data, "cluster": {**data["cluster"], "level_scale": cal.level_scale}}))
        rows = {}
        for figure in ("step_time_s", "train_days"):
            b, a = getattr(before, figure), getattr(after, figure)
            rows[figure] = {"before": band(b, before.time_range), "after": None if a is None else measured_band(a, cal)}
        out.append({"accelerator": cal.accelerator_id, "framework": cal.framework, "level_scale": cal.level_scale,
                    "n_runs": int(cal.n_runs), "n_systems": int(cal.n_systems), "run_id": newest.run_id,
                    "measured_s": float(newest.measured_s), "figures": rows})
    return out
