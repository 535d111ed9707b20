"""Derive the ranges the app shows around its headline figures from the engine's measured error on published runs,
and write them to data/accuracy.json (engine/economics/ranges.py reads them; tests/engine/test_ranges.py checks the file
against this script).

- Tuned stack: the ratio of published to predicted time over every published run the engine is validated on
  (Megatron-LM Table 1 and the H100 weak-scaling table with their published layouts, and every MLPerf GPT-3 /
  Llama 3.1 405B result in the store with the search's layout). The band is the 10th to 90th percentile.
- Typical stack: the ratio of published whole-run GPU-hours to the engine's (best layout on 1,024 A100, the main
  setup, no evaluation) for the Llama 2 models of Touvron et al. 2023 Table 2 that have presets (7B, 13B, 70B),
  the only whole-run GPU-hours in the public calibration set. Its median is the typical-stack factor, its range the band.

    .venv/bin/python scripts/calibrate_ranges.py --write
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks_db.seed import seed  # noqa: E402
from benchmarks_db.store import open_store  # noqa: E402
from benchmarks_db.validation import predicted_vs_measured  # noqa: E402
from engine.inputs import parse_scenario  # noqa: E402
from engine.planning.search import search  # noqa: E402
from tests.engine.published_runs import CASES, h100_weak_scaling, megatron_table1  # noqa: E402

OUT = ROOT / "data" / "accuracy.json"


def percentile(values: list[float], q: float) -> float:
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = int(pos)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (pos - lo)


def tuned_ratios() -> list[float]:
    """Published time over predicted time, one per validated run."""
    ratios = []
    for run in megatron_table1() + h100_weak_scaling():
        ratios.append(run.predict()[run.metric] / run.published)          # throughput ratio = time ratio inverted
    store = open_store(str(Path(tempfile.mkdtemp()) / "ranges.duckdb"))
    seed(store)
    df = predicted_vs_measured(store)
    ratios += [1.0 / r for r in df.ratio.dropna().astype(float)]
    return ratios


def typical_runs() -> list[dict]:
    out = []
    for model, gpu_hours, _, _ in CASES["energy_cases"]["rows"]:
        try:
            sc = parse_scenario({"model": {"preset": model},
                                 "training": {"seq_len": 4096, "global_batch_size": 1024, "total_tokens": 2e12},
                                 "cluster": {"accelerator": "A100-SXM4-80GB", "n_gpus": 1024},
                                 "schedule": {"eval_steps": 0}})
        except Exception:                                                # no preset (Llama 2 34B was never released)
            continue
        best = search(sc, top=1, pareto_sizes=[]).best[0]
        out.append({"model": model, "published_gpu_hours": gpu_hours, "predicted_gpu_hours": round(best.gpu_hours),
                    "ratio": round(gpu_hours / best.gpu_hours, 3)})
    return out


def compute() -> dict:
    tuned = tuned_ratios()
    runs = typical_runs()
    factors = [r["ratio"] for r in runs]
    factor = statistics.median(factors)
    return {
        "schema_version": 1,
        "about": "Ranges around the engine's time-proportional figures (days, GPU-hours, cost, energy, CO2), from its "
                 "measured error on published runs; written by scripts/calibrate_ranges.py.",
        "tuned": {"low": round(percentile(tuned, 0.10), 3), "high": round(percentile(tuned, 0.90), 3),
                  "median": round(statistics.median(tuned), 3), "n_runs": len(tuned),
                  "explain": "a well-tuned Megatron-class stack: published runs took between these multiples of the "
                             "engine's time (10th to 90th percentile)",
                  "source": "Megatron-LM Table 1 and H100 weak-scaling table (published layouts) and every MLPerf "
                            "GPT-3 / Llama 3.1 405B result in the store (docs/validation.md)"},
        "typical": {"factor": round(factor, 3), "low": round(min(factors), 3), "high": round(max(factors), 3),
                    "runs": runs,
                    "explain": "a typical stack: published whole-run GPU-hours were this multiple of the engine's "
                               "tuned-stack figure",
                    "source": "Touvron et al. 2023 (Llama 2) Table 2 GPU-hours (tests/data/public-validation-cases.json) "
                              "vs the engine's best layout on 1,024 A100 at sequence 4096, batch 1024, 2T tokens"},
    }


def main() -> None:
    result = compute()
    text = json.dumps(result, indent=1) + "\n"
    if "--write" in sys.argv:
        OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
