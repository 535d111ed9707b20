"""Honest ranges around the engine's time-proportional figures (step time, days, GPU-hours, cost, energy, CO2): the
band the engine's measured error on published runs of the scenario's regime implies (data/accuracy.json, written by
scripts/calibrate_ranges.py), for a well-tuned stack or a typical one.

A regime is what the engine's error depends on (issue 21): the training method (pre-training, or a fine-tuning
method), the software stack, the accelerator family (the catalog's architecture), the precision class, dense or MoE,
how data parallelism holds the weights (replicated: ZeRO 0-2; sharded: ZeRO-3/FSDP) and the scale (one node of 8 or
fewer, up to 1,023 accelerators, 1,024 or more). Its band is read from the finest level of LEVELS that has enough
published runs from enough sources; with fewer it falls back to a coarser level (stack x family x precision -> stack
x family -> stack x precision -> stack -> every run of the method) and names it. A regime whose method and stack
have no published run on its accelerator family (a fine-tuning method without published runs, a stack never
measured there), or whose accelerator has no level fitted for the stack
(engine.frameworks: uncalibrated), says so and gets the widest band.

The band of a level (fit): the ratios published / predicted time of its runs, in logs; the centre is their median; the
spread is the 10th-90th conformal quantile of the runs' residuals, each residual taken from the centre fitted without
the run's own source (a jackknife+ over sources: the spread includes how far a new source lands from the others). With
n runs the order statistics floor(0.1 (n+1)) and ceil(0.9 (n+1)) bound at least 80% of a new exchangeable run, so a
level needs MIN_RUNS runs and MIN_SOURCES sources; thinner data falls back to a wider level. The band always contains
the engine's own figure. scripts/calibrate_ranges.py checks the coverage by leaving one source out at a time.

- tuned: the engine's figure, with its regime's band.
- typical: the tuned figure times the ratio published whole-run GPU-hours bore to the engine's (Llama 2), with the
  regime's band around it.
"""
from __future__ import annotations

import json
import math
import statistics
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from engine.catalog import DATA_DIR, load_catalog
from engine.scenario import ScenarioError

EFFICIENCIES = ("tuned", "typical")
COVERAGE = (0.10, 0.90)          # the band: 10th to 90th percentile of published / predicted time
MIN_RUNS = 9                     # the fewest whose order statistics bound 80%: floor(0.1*10) = 1, ceil(0.9*10) = 9
MIN_SOURCES = 2                  # the spread must include how far one source lands from another
DIMENSIONS = ("method", "framework", "family", "precision", "model", "sharding", "scale")
# finest first; each a tuple of the dimensions it keeps (the others are pooled); a method's runs never pool with
# another method's
LEVELS: tuple[tuple[str, ...], ...] = (
    DIMENSIONS,
    ("method", "framework", "family", "precision", "model", "sharding"),
    ("method", "framework", "family", "precision"),
    ("method", "framework", "family"),
    ("method", "framework", "precision"),
    ("method", "framework"),
    ("method",),
)
SCALES = ((8, "one node"), (1023, "9-1,023 accelerators"), (math.inf, "1,024+ accelerators"))
EXPLAIN = {
    "tuned": "A well-tuned stack: the engine's figure for the scenario's software stack run as its publishers run it; "
             "the range is what published runs of the regime took against the engine (10th-90th percentile, checked "
             "by leaving one source out).",
    "typical": "A typical stack: {factor:.2f}x the tuned figure, as Llama 2's published whole-run GPU-hours were, with "
               "the regime's range around it.",
}


class RegimeBand(BaseModel):
    """The band of a scenario's regime: low, median and high multiples of the engine's time (low <= 1 <= high), the
    level it was read from and the runs behind it; measured False: no data (or no fitted level), the widest band."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    regime: dict[str, str]
    measured: bool
    level: str
    n_runs: int
    sources: list[str]
    low: float
    median: float
    high: float
    text: str


def scale_of(n_gpus: int) -> str:
    return next(name for limit, name in SCALES if n_gpus <= limit)


def regime_of(method: str, framework: str, accelerator: str, precision_class: str, moe: bool, zero_stage: int,
              n_gpus: int) -> dict[str, str]:
    """The regime of a run: training method, stack, accelerator family (catalog architecture), precision class,
    dense/MoE, data-parallel sharding and scale."""
    return {"method": method, "framework": framework, "family": load_catalog().accelerator(accelerator).architecture,
            "precision": precision_class, "model": "MoE" if moe else "dense",
            "sharding": "sharded" if zero_stage == 3 else "replicated", "scale": scale_of(n_gpus)}


def _conformal(values: list[float]) -> tuple[float, float] | None:
    """The COVERAGE order statistics of values (None: too few for them to bound that share of a new value)."""
    v, n = sorted(values), len(values)
    lo, hi = math.floor(COVERAGE[0] * (n + 1)), math.ceil(COVERAGE[1] * (n + 1))
    return None if lo < 1 or hi > n else (v[lo - 1], v[hi - 1])


def _level_band(runs: list[dict]) -> dict | None:
    """The band of a pool of runs (see the module docstring), in ratios; None with too few runs or sources."""
    sources = sorted({r["source"] for r in runs})
    if len(runs) < MIN_RUNS or len(sources) < MIN_SOURCES:
        return None
    logs = [math.log(r["ratio"]) for r in runs]
    centre = statistics.median(logs)
    residuals = []
    for s in sources:
        without = statistics.median(math.log(r["ratio"]) for r in runs if r["source"] != s)
        residuals += [math.log(r["ratio"]) - without for r in runs if r["source"] == s]
    q = _conformal(residuals)
    if q is None:
        return None
    return {"low": math.exp(centre + q[0]), "median": math.exp(centre), "high": math.exp(centre + q[1]),
            "n_runs": len(runs), "sources": sources}


def fit(runs: list[dict]) -> dict:
    """Bands for every level and key the runs support, and the widest band (for regimes without data): runs are
    {source, method, framework, family, precision, model, sharding, scale, calibrated, ratio (published / predicted
    time)}.
    Only calibrated runs fit the regime bands (an uncalibrated run's error is the borrowed level's, shown with the
    widest band); the widest band is the envelope of every band, of all runs pooled and of the uncalibrated runs
    pooled (what an estimate on a borrowed level has been off by)."""
    fitted = [r for r in runs if r["calibrated"]]
    bands = []
    for level in LEVELS:
        pools: dict[tuple, list[dict]] = {}
        for r in fitted:
            pools.setdefault(tuple(r[d] for d in level), []).append(r)
        for key, pool in sorted(pools.items()):
            b = _level_band(pool)
            if b is not None:
                bands.append({"level": list(level), "key": dict(zip(level, key)), **b})
    pooled = [b for b in (_level_band(runs), _level_band([r for r in runs if not r["calibrated"]])) if b]
    lows, highs = [b["low"] for b in bands + pooled], [b["high"] for b in bands + pooled]
    if not lows:
        raise ValueError("no level has enough published runs for a band")
    widest = {"low": min(lows), "median": 1.0, "high": max(highs), "n_runs": len(runs),
              "sources": sorted({r["source"] for r in runs})}
    return {"bands": bands, "widest": widest,
            "measured": sorted({(r["method"], r["framework"], r["family"]) for r in fitted})}


def _level_name(level) -> str:
    return " x ".join(d for d in level if d != "method") or "every run of the method"


def band_from(fitted: dict, regime: dict[str, str], calibrated: bool = True) -> RegimeBand:
    """The band of a regime from a fit (fit): the finest level with a band, else the widest band with the reason.
    The band is widened to contain the engine's figure (1.0)."""
    words = (f"{regime['method']}, {regime['framework']} on {regime['family']}, {regime['precision']}, "
             f"{regime['model']}, {regime['sharding']} data parallelism, {regime['scale']}")
    measured = [tuple(m) for m in fitted["measured"]]
    reason = None
    if not calibrated:
        reason = "the accelerator has no level fitted for this stack and precision (uncalibrated)"
    elif (regime["method"], regime["framework"], regime["family"]) not in measured:
        reason = (f"no published {regime['method']} run of {regime['framework']} on {regime['family']} measures the "
                  "engine's error")
    found = None if reason else next(((level, b) for level in LEVELS for b in fitted["bands"]
                                      if b["level"] == list(level) and b["key"] == {d: regime[d] for d in level}), None)
    if reason is None and found is None:
        reason = (f"too few published runs on a fitted level ({MIN_RUNS} from {MIN_SOURCES} sources are needed) at "
                  "any level of this regime")
    if reason is None:
        level, b = found
        name = _level_name(level)
        pooled = [d for d in DIMENSIONS if d not in level]
        text = (f"{words}: published runs took {b['low']:.2f}-{b['high']:.2f}x the engine's time "
                f"(10th-90th percentile of {b['n_runs']} runs from {len(b['sources'])} sources at level {name}"
                + (f"; {', '.join(pooled)} pooled" if pooled else "") + ")")
    else:
        b, name = fitted["widest"], "widest"
        text = f"{words}: {reason}; the widest band, {b['low']:.2f}-{b['high']:.2f}x the engine's time"
    return RegimeBand(regime=regime, measured=reason is None, level=name, n_runs=b["n_runs"], sources=b["sources"],
                      low=min(b["low"], 1.0), median=b["median"], high=max(b["high"], 1.0), text=text)


@lru_cache(maxsize=1)
def accuracy() -> dict:
    return json.loads((DATA_DIR / "accuracy.json").read_text())


@lru_cache(maxsize=256)
def _regime_band(items: tuple, calibrated: bool) -> RegimeBand:
    return band_from(accuracy()["fit"], dict(items), calibrated)


def regime_band(regime: dict[str, str], calibrated: bool = True) -> RegimeBand:
    """The band of a regime from the measured fit (data/accuracy.json)."""
    return _regime_band(tuple(regime.items()), calibrated)


def widest() -> RegimeBand:
    """The band of a regime without data (what an unknown stack or accelerator gets)."""
    b = accuracy()["fit"]["widest"]
    return RegimeBand(regime={}, measured=False, level="widest", n_runs=b["n_runs"], sources=b["sources"],
                      low=min(b["low"], 1.0), median=1.0, high=max(b["high"], 1.0),
                      text=f"no regime given: the widest band, {b['low']:.2f}-{b['high']:.2f}x the engine's time")


def factor(efficiency: str) -> float:
    """Multiplier on time-proportional figures for the chosen stack."""
    if efficiency not in EFFICIENCIES:
        raise ScenarioError([("efficiency", f"choose one of {', '.join(EFFICIENCIES)}")])
    return 1.0 if efficiency == "tuned" else accuracy()["typical"]["factor"]


def band(value: float | None, rb: RegimeBand, efficiency: str = "tuned") -> dict | None:
    """{"value", "low", "high"} for a time-proportional figure the engine computed (value), with its regime's band
    (rb) for the chosen stack."""
    if value is None:
        return None
    mid = value * factor(efficiency)
    return {"value": mid, "low": mid * rb.low, "high": mid * rb.high}


def explain(efficiency: str, rb: RegimeBand | None = None) -> str:
    """What the chosen stack means and, given the regime's band, where its range comes from."""
    out = EXPLAIN[efficiency].format(factor=accuracy()["typical"]["factor"])
    return out if rb is None else f"{out} {rb.text}."


def chance_within(value: float, limit: float, rb: RegimeBand, efficiency: str = "tuned") -> dict:
    """The chance that a time-proportional figure the engine computed (value) comes in at or under limit, read off
    its regime's band (low, median, high as the 10th, 50th and 90th percentile), linearly between them:
    {"chance": 0.1-0.9, or None outside the band, "text"}."""
    scale = value * factor(efficiency)
    points = [(scale * rb.low, 0.1), (scale * min(max(rb.median, rb.low), rb.high), 0.5), (scale * rb.high, 0.9)]
    if limit < points[0][0]:
        return {"chance": None, "text": "under 10%"}
    if limit >= points[-1][0]:
        return {"chance": None, "text": "over 90%"}
    (x0, p0), (x1, p1) = next((a, b) for a, b in zip(points, points[1:]) if a[0] <= limit < b[0])
    chance = p0 if x1 == x0 else p0 + (p1 - p0) * (limit - x0) / (x1 - x0)
    return {"chance": chance, "text": f"about {chance:.0%}"}
