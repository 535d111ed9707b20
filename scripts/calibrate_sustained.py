"""Fit each calibrated accelerator's sustained level (data/accelerators.json sustained_fraction) on its published runs.

For every accelerator with a public per-step calibration set, find the level at which the engine's predictions,
with each run's published layout, have a geometric-mean ratio of 1 to the published figures, and print the fit and
the per-run errors. The fitted values are entered in data/accelerators.json by hand, with this script's output as
the source; nothing else in the engine is fitted per accelerator.

    .venv/bin/python scripts/calibrate_sustained.py
"""
from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import engine.physics.hardware as hardware  # noqa: E402
from tests.engine.published_runs import h100_weak_scaling, megatron_table1  # noqa: E402

CALIBRATION_SETS = {"A100-SXM4-80GB": ("Megatron-LM Table 1 (Narayanan et al. 2021)", megatron_table1),
                    "H100-SXM5-80GB": ("Megatron-LM H100 weak-scaling table (2024)", h100_weak_scaling)}


def ratios(runs) -> list[float]:
    return [run.predict()[run.metric] / run.published for run in runs]


def fit(accelerator: str, runs, lo: float = 0.3, hi: float = 1.0) -> tuple[float, list[float]]:
    """Bisection on the level: the geometric-mean predicted/published ratio falls monotonically with... rises with it."""
    original = hardware.sustained_fraction

    def at(level: float) -> list[float]:
        hardware.sustained_fraction = lambda acc: (level, "calibration") if acc.id == accelerator else original(acc)
        try:
            return ratios(runs)
        finally:
            hardware.sustained_fraction = original

    for _ in range(30):
        mid = (lo + hi) / 2
        geo = math.exp(statistics.mean(math.log(r) for r in at(mid)))
        lo, hi = (mid, hi) if geo < 1 else (lo, mid)
    level = round((lo + hi) / 2, 3)
    return level, at(level)


def main() -> None:
    for accelerator, (name, build) in CALIBRATION_SETS.items():
        runs = build()
        level, r = fit(accelerator, runs)
        errors = [x - 1 for x in r]
        print(f"{accelerator}: sustained_fraction {level:.3f} fitted on {name}, {len(runs)} runs: median |error| "
              f"{statistics.median(abs(e) for e in errors):.1%}, worst {max(abs(e) for e in errors):.1%}")
        for run, e in zip(runs, errors):
            print(f"    {run.name:>8}  {e:+6.1%}")


if __name__ == "__main__":
    main()
