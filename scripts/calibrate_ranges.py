"""Derive the ranges the app shows around its time-proportional figures from the engine's measured error on published
runs, per regime (engine/economics/ranges.py), and write them to data/accuracy.json with every run they rest on and
the coverage measured by leaving one source out at a time (tests/engine/test_range_coverage.py checks the file against
the engine and recounts the coverage).

- Runs: every public per-step case at its published layout (tests/engine/published_runs.public_case_predictions:
  Megatron-LM Table 1, the H100 weak-scaling table, NeMo 25.11, TorchTitan Dec 2024) and every MLPerf GPT-3 /
  Llama 3.1 405B / Llama 2 70B LoRA result in the store read from its own log, with the search's layout
  (benchmarks_db.validation.predicted_vs_measured, run on the vendor's default stack). Each run: published /
  predicted time (the logged training step where the log measured one: published_over_predicted), its regime and its
  source (a publication; an MLPerf round is one).
- Regime bands: engine.economics.ranges.fit (centres partially pooled down the regime's levels, spreads the
  conformal quantile of residuals with their source left out, per method and support class).
- Leave one source out: each source's runs against the bands fitted without it, per source, support class,
  stack and regime, each coverage with its 90% Clopper-Pearson interval.
- Typical stack: the ratio of published whole-run GPU-hours to the engine's (best layout on 1,024 A100, the main
  setup, no evaluation) for the Llama 2 models of Touvron et al. 2023 Table 2 that have presets (7B, 13B, 70B),
  the only whole-run GPU-hours in the public calibration set. Its median is the typical-stack factor.

    .venv/bin/python scripts/calibrate_ranges.py --write
"""
from __future__ import annotations

import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks_db.seed import seed  # noqa: E402
from benchmarks_db.store import open_store  # noqa: E402
from benchmarks_db.validation import from_own_log, predicted_vs_measured  # noqa: E402
from engine import frameworks  # noqa: E402
from engine.catalog import load_catalog  # noqa: E402
from engine.economics import ranges  # noqa: E402
from engine.inputs import parse_scenario  # noqa: E402
from engine.planning.search import search  # noqa: E402
from tests.engine.published_runs import CASES, public_case_predictions, public_runs  # noqa: E402

OUT = ROOT / "data" / "accuracy.json"


def _run(source: str, case: str, method: str, framework: str | None, accelerator: str, precision: str, moe: bool,
         zero_stage: int, n_gpus: int, ratio: float) -> dict:
    """One run as the fit reads it: its regime, whether the engine's level is fitted for it, published / predicted
    time."""
    acc = load_catalog().accelerator(accelerator)
    stack = frameworks.resolve(framework, acc.vendor, accelerator, precision)
    regime = ranges.regime_of(method, stack.stack.id, accelerator, frameworks.precision_class(precision), moe, zero_stage,
                              n_gpus)
    return {"source": source, "case": case, **regime, "calibrated": stack.calibrated, "ratio": round(ratio, 4)}


def public_runs_measured() -> list[dict]:
    """The public per-step cases at their published layouts."""
    runs = public_runs()
    out = []
    for run, row in zip(runs, public_case_predictions(runs)):
        if row["ratio"] is None:
            continue
        tr = run.scenario["training"]
        out.append(_run(run.source, run.name, tr.get("method", "pretrain"), tr.get("framework"), run.accelerator,
                        tr.get("precision", "bf16"), row["moe"], int(row["dp_sharding"][-1]), row["n_gpus"],
                        row["ratio"]))
    return out


def mlperf_runs() -> list[dict]:
    """Every MLPerf result the engine predicts from its own logged batch and samples (GPT-3 175B, Llama 3.1 405B: dense
    pre-training; Llama 2 70B LoRA), on the vendor's default stack. A result whose log was not read is predicted at
    the reference run's batch, a different run from the one it measured, so it says nothing of the engine's error."""
    store = open_store(str(Path(tempfile.mkdtemp()) / "ranges.duckdb"))
    seed(store)
    df = predicted_vs_measured(store)
    out = []
    for r in df[df.ratio.notna() & df.token_basis.map(from_own_log)].itertuples():
        zero = int(r.layout.split(" zero")[1][0])
        method = "lora" if r.benchmark.endswith("_lora") else "pretrain"        # llama2_70b_lora: LoRA fine-tuning
        out.append(_run(f"mlperf {r.round}", r.run_id, method, r.framework, r.accelerator,
                        r.precision, False, zero, int(r.n_accelerators), published_over_predicted(r)))
    return out


def published_over_predicted(r) -> float:
    """An MLPerf result's published / predicted time: its logged training step over the engine's where the log
    measured one (the LoRA logs, benchmarks_db/data/mlperf_run_params.csv train_step_s), else its minutes. The step is
    what the band qualifies; MLPerf's minutes add the benchmark's own evaluation cadence (LoRA at batch 64-128
    evaluates every 3-6 steps, each evaluation dearer than its forward steps at that scale), start-up and stalls."""
    if r.logged_step_s is not None and not math.isnan(r.logged_step_s) and r.step_time_s:
        return float(r.logged_step_s) / float(r.step_time_s)
    return 1.0 / float(r.ratio)


def regime_name(run: dict) -> str:
    return " | ".join(run[d] for d in ranges.DIMENSIONS)


def leave_one_source_out(runs: list[dict]) -> dict:
    """Each source's runs against the bands fitted without it: how many fall inside, per source, per support class, per
    stack and per regime (with the 90% binomial interval of each coverage), and the median width (high / low) of the
    bands they got."""
    tables: dict[str, dict] = {"by_source": {}, "by_support": {}, "by_stack": {}, "by_regime": {}}
    widths = []
    for source in sorted({r["source"] for r in runs}):
        fitted = ranges.fit([r for r in runs if r["source"] != source])
        for r in (r for r in runs if r["source"] == source):
            b = ranges.band_from(fitted, {d: r[d] for d in ranges.DIMENSIONS}, r["calibrated"])
            inside = b.low <= r["ratio"] <= b.high
            widths.append(b.high / b.low)
            for table, key in (("by_source", source), ("by_support", f"{r['method']} | {b.support}"),
                               ("by_stack", f"{r['method']} | {r['framework']} | {r['family']}"),
                               ("by_regime", regime_name(r))):
                row = tables[table].setdefault(key, {"runs": 0, "inside": 0, "widths": []})
                row["runs"] += 1
                row["inside"] += inside
                row["widths"].append(b.high / b.low)
    for table in tables.values():
        for row in table.values():
            row["median_width"] = round(statistics.median(row.pop("widths")), 3)
            row["interval_90"] = [round(x, 3) for x in ranges.coverage_interval(row["inside"], row["runs"])]
    n, inside = len(runs), sum(v["inside"] for v in tables["by_source"].values())
    regimes = tables["by_regime"].values()
    return {"runs": n, "inside": inside, "coverage": round(inside / n, 3),
            "median_width": round(statistics.median(widths), 3), "widest_width": round(max(widths), 3),
            "regimes": len(regimes),
            "regimes_in_target": sum(0.75 <= v["inside"] / v["runs"] <= 0.85 for v in regimes),
            "regimes_excluding_80": sum(not v["interval_90"][0] <= 0.80 <= v["interval_90"][1] for v in regimes),
            **{k: dict(sorted(v.items())) for k, v in tables.items()}}


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


def _rounded(fitted: dict) -> dict:
    r = lambda b: {**b, **{k: round(b[k], 4) for k in ("low", "median", "high")}}
    spreads = {m: {c: {**v, "spread": round(v["spread"], 4), "factor": round(v["factor"], 4)} for c, v in cs.items()}
               for m, cs in fitted["spreads"].items()}
    return {"kappa": fitted["kappa"], "spreads": spreads, "bands": [r(b) for b in fitted["bands"]],
            "widest": r(fitted["widest"])}


def compute() -> dict:
    runs = public_runs_measured() + mlperf_runs()
    fitted = _rounded(ranges.fit(runs))
    typical = typical_runs()
    factors = [r["ratio"] for r in typical]
    return {
        "schema_version": 3,
        "about": "Ranges around the engine's time-proportional figures (step time, days, GPU-hours, cost, energy, CO2) "
                 "per regime, from its measured error on published runs; written by scripts/calibrate_ranges.py.",
        "method": ranges.__doc__.split("\n\n")[1].replace("\n", " ") + " " +
                  ranges.__doc__.split("\n\n")[2].replace("\n", " "),
        "coverage": list(ranges.COVERAGE), "kappa": ranges.KAPPA,
        "runs": runs,
        "fit": fitted,
        "leave_one_source_out": leave_one_source_out(runs),
        "typical": {"factor": round(statistics.median(factors), 3), "low": round(min(factors), 3),
                    "high": round(max(factors), 3), "runs": typical,
                    "explain": "a typical stack: published whole-run GPU-hours were this multiple of the engine's "
                               "tuned-stack figure",
                    "source": "Touvron et al. 2023 (Llama 2) Table 2 GPU-hours (tests/data/public-validation-cases.json) "
                              "vs the engine's best layout on 1,024 A100 at sequence 4096, batch 1024, 2T tokens"},
    }


def markdown(result: dict) -> str:
    """The docs/validation.md section: the coverage left one source out (per source, support class, stack and regime,
    each with its 90% binomial interval), the spreads and the bands."""
    loso = result["leave_one_source_out"]
    fitted = result["fit"]
    runs = result["runs"]
    interval = lambda v: "-".join(f"{x:.0%}" for x in ranges.coverage_interval(v["inside"], v["runs"]))
    pct = lambda v: f"{v['inside'] / v['runs']:.0%} | {interval(v)}"
    esc = lambda k: k.replace("|", chr(92) + "|")
    row = lambda k, v: f"| {esc(k)} | {v['runs']} | {v['inside']} | {pct(v)} | {v['median_width']:.2f}x |"
    head = " | Runs | Inside | Coverage | 90% interval | Median band |"
    rule = "|---|---|---|---|---|---|"
    out = [f"{loso['runs']} runs ({sum(r['calibrated'] for r in runs)} on a calibrated level); each source's runs "
           f"against the bands fitted without it: **{loso['inside']} inside ({loso['coverage']:.0%})**, median band "
           f"**{loso['median_width']:.2f}x** high/low, widest band {loso['widest_width']:.2f}x. Of "
           f"{loso['regimes']} regimes, {loso['regimes_in_target']} have a coverage within 75-85% and "
           f"{loso['regimes_excluding_80']} a 90% binomial interval that excludes 80%.", "",
           "| Left-out source" + head, rule]
    out += [row(k, v) for k, v in loso["by_source"].items()]
    out += ["", "| Method \\| support" + head, rule]
    out += [row(k, v) for k, v in loso["by_support"].items()]
    out += ["", "| Method \\| stack \\| family" + head, rule]
    out += [row(k, v) for k, v in loso["by_stack"].items()]
    out += ["", "| Regime (method \\| stack \\| family \\| precision \\| model \\| sharding \\| scale)" + head, rule]
    out += [row(k, v) for k, v in loso["by_regime"].items()]
    out += ["", "Spreads fitted on every run (data/accuracy.json): the band is the centre times or divided by the "
                "factor.",
            "", "| Method | Support | Factor | From |", "|---|---|---|---|"]
    out += [f"| {m} | {c} | {v['factor']:.3f} | {v['basis']} |" for m, cs in fitted["spreads"].items()
            for c, v in cs.items()]
    out += ["", "Bands fitted on every run (data/accuracy.json), coarsest level first; a regime reads the deepest that "
                "holds it:", "", "| Level | Key | Support | Runs | Sources | Low | Median | High |",
            "|---|---|---|---|---|---|---|---|"]
    out += [f"| {ranges._level_name(b['level'])} | {', '.join(b['key'].values())} | {b['support']} | {b['n_runs']} | "
            f"{len(b['sources'])} | {b['low']:.3f} | {b['median']:.3f} | {b['high']:.3f} |" for b in fitted["bands"]]
    w = fitted["widest"]
    out += ["", f"Widest band (an uncalibrated accelerator, a method without published runs): "
                f"**{w['low']:.3f}-{w['high']:.3f}x**."]
    return "\n".join(out)


def main() -> None:
    result = compute()
    text = json.dumps(result, indent=1) + "\n"
    if "--write" in sys.argv:
        OUT.write_text(text)
    print(markdown(result))


if __name__ == "__main__":
    main()
