"""Honest ranges around the headline figures: every time-proportional figure (days, GPU-hours, cost, energy, CO2)
with the band the engine's measured error on published runs implies (data/accuracy.json, written by
scripts/calibrate_ranges.py), for a well-tuned stack or a typical one.

- tuned: the engine's figure, and the 10th-90th percentile of published/predicted time over every validated run.
- typical: the tuned figure times the ratio published whole-run GPU-hours bore to the engine's (Llama 2), with the
  tuned spread around it.
"""
from __future__ import annotations

import json
from functools import lru_cache

from engine.catalog import DATA_DIR
from engine.scenario import ScenarioError

EFFICIENCIES = ("tuned", "typical")
EXPLAIN = {
    "tuned": "A well-tuned Megatron-class stack: the engine's figure; published runs took {low:.2f}-{high:.2f}x it "
             "(10th-90th percentile over {n} runs).",
    "typical": "A typical stack: {factor:.2f}x the tuned figure, as Llama 2's published whole-run GPU-hours were, with "
               "the same spread.",
}


@lru_cache(maxsize=1)
def accuracy() -> dict:
    return json.loads((DATA_DIR / "accuracy.json").read_text())


def factor(efficiency: str) -> float:
    """Multiplier on time-proportional figures for the chosen stack."""
    if efficiency not in EFFICIENCIES:
        raise ScenarioError([("efficiency", f"choose one of {', '.join(EFFICIENCIES)}")])
    return 1.0 if efficiency == "tuned" else accuracy()["typical"]["factor"]


def band(value: float | None, efficiency: str = "tuned") -> dict | None:
    """{"value", "low", "high"} for a time-proportional figure the engine computed for a tuned stack."""
    if value is None:
        return None
    t = accuracy()["tuned"]
    if efficiency == "tuned":
        return {"value": value, "low": value * t["low"], "high": value * t["high"]}
    mid = value * factor(efficiency)
    return {"value": mid, "low": mid * t["low"] / t["median"], "high": mid * t["high"] / t["median"]}


def explain(efficiency: str) -> str:
    a = accuracy()
    t = a["tuned"]
    return EXPLAIN[efficiency].format(low=t["low"], high=t["high"], n=t["n_runs"], factor=a["typical"]["factor"])


def chance_within(value: float, limit: float, efficiency: str = "tuned") -> dict:
    """The chance that a time-proportional figure the engine computed for a tuned stack (value) comes in at or under
    limit, read off the measured published/predicted quantiles (10th, 50th, 90th percentile of data/accuracy.json),
    linearly between them: {"chance": 0.1-0.9, or None outside the measured quantiles, "text"}."""
    t = accuracy()["tuned"]
    scale = value if efficiency == "tuned" else value * factor(efficiency) / t["median"]
    points = [(scale * t["low"], 0.1), (scale * t["median"], 0.5), (scale * t["high"], 0.9)]
    if limit < points[0][0]:
        return {"chance": None, "text": "under 10%"}
    if limit >= points[-1][0]:
        return {"chance": None, "text": "over 90%"}
    (x0, p0), (x1, p1) = next((a, b) for a, b in zip(points, points[1:]) if a[0] <= limit < b[0])
    chance = p0 + (p1 - p0) * (limit - x0) / (x1 - x0)
    return {"chance": chance, "text": f"about {chance:.0%}"}
