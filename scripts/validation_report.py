"""Write the tables of docs/validation.md from the engine as it is: the calibration set with published layouts, the
search's best answers for the same jobs, out-of-sample runs and every MLPerf result in the seeded store.

    .venv/bin/python scripts/validation_report.py > /tmp/tables.md     (then paste into docs/validation.md)
"""
from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks_db.seed import seed  # noqa: E402
from benchmarks_db.store import open_store  # noqa: E402
from benchmarks_db.validation import REFERENCE, predicted_vs_measured  # noqa: E402
from engine.planning.estimate import estimate  # noqa: E402
from engine.inputs import parse_scenario  # noqa: E402
from engine.planning.search import search  # noqa: E402
from engine.scenario import Layout  # noqa: E402
from tests.engine.published_runs import h100_weak_scaling, megatron_table1, nemo_25_11, torchtitan_2024_12  # noqa: E402,E501


def layout_text(layout: Layout) -> str:
    lay = layout.model_dump()
    parts = [f"tp{lay['tp']}", f"pp{lay['pp']}", f"dp{lay['dp']}"]
    parts += [f"cp{lay['cp']}"] if lay["cp"] > 1 else []
    parts += [f"ep{lay['ep']}"] if lay["ep"] > 1 else []
    parts += [f"v{lay['virtual_stages']}"] if lay["virtual_stages"] > 1 else []
    parts += [f"mbs{lay['micro_batch_size']}", f"ZeRO-{lay['zero_stage']}"]
    parts += [f"split {lay['first_stage_layers']}/{lay['last_stage_layers']}"] if lay["first_stage_layers"] else []
    parts += [f"recompute {lay['recompute']}"] if lay["recompute"] != "none" else []
    return " ".join(parts)


def table(title: str, runs, predictions) -> list[str]:
    out = [f"### {title}", "", "| Run | Published | Predicted | Error | Layout |", "|---|---|---|---|---|"]
    errors = []
    for run, est in zip(runs, predictions):
        pred = run.figure(est)
        errors.append(pred / run.published - 1)
        out.append(f"| {run.name} | {run.published:.1f} | {pred:.1f} | {errors[-1]:+.1%} | {layout_text(est.layout)} |")
    out += ["", f"Median |error| {statistics.median(abs(e) for e in errors):.1%}, worst {max(abs(e) for e in errors):.1%}.", ""]
    return out


def per_accelerator(df) -> list[str]:
    """Count, median and worst error of predicted vs published per accelerator and benchmark."""
    out = ["| Accelerator | Benchmark | Results | Predicted | Median ratio | Median \\|error\\| | Worst \\|error\\| | "
           "Within 25% |", "|---|---|---|---|---|---|---|---|"]
    for (acc, bench), g in df.groupby(["accelerator", "benchmark"]):
        r = g.ratio.dropna().astype(float)
        err = (r - 1).abs()
        out.append(f"| {acc} | {bench} | {len(g)} | {len(r)} | {r.median():.2f} | {err.median():.0%} | "
                   f"{err.max():.0%} ({g.loc[err.idxmax(), 'round']} {g.loc[err.idxmax(), 'submitter']}, "
                   f"{g.loc[err.idxmax(), 'n_accelerators']}) | {int((err <= 0.25).sum())} |" if len(r) else
                   f"| {acc} | {bench} | {len(g)} | 0 | - | - | - | 0 |")
    return out


def mlperf_results(store, benchmarks: list[str], title: str) -> list[str]:
    df = predicted_vs_measured(store)
    df = df[df.benchmark.isin(benchmarks)].sort_values(["benchmark", "round", "n_accelerators"])
    ratios = df.ratio.astype(float)
    out = [f"### {title}", "",
           f"{len(df)} results; median predicted/published **{ratios.median():.3f}**; "
           f"{int(((ratios - 1).abs() <= 0.10).sum())} within 10%, {int(((ratios - 1).abs() <= 0.25).sum())} within 25%.",
           ""] + per_accelerator(df) + [
           "", "| Round | Submitter | System | Accelerators | Batch | Precision | Published min | Predicted min | Ratio | Search's layout |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in df.itertuples():
        out.append(f"| {r.round} | {r.submitter} | {r.system_name} | {r.n_accelerators} x {r.accelerator} | "
                   f"{int(r.global_batch_size)} | {r.precision} | {r.published_minutes:.1f} | {r.predicted_minutes:.1f} | "
                   f"{r.ratio:.2f} | {r.layout} |")
    out += ["", "Results more than 25% off, with their diagnosis:", "", "| Result | Ratio | Diagnosis |", "|---|---|---|"]
    for r in df[df.diagnosis.notna()].itertuples():
        out.append(f"| {r.round} {r.submitter} {r.system_name} ({r.n_accelerators} x {r.accelerator}) | {r.ratio:.2f} | "
                   f"{r.diagnosis} |")
    return out + [""]


def lora_steps(store) -> list[str]:
    """The training step each LoRA log measured (benchmarks_db/data/mlperf_run_params.csv train_step_s) against the
    engine's at the search's layout for the logged batch: the step alone, without evaluations, start-up or stalls."""
    df = predicted_vs_measured(store, benchmark="llama2_70b_lora")
    df = df[df.logged_step_s.notna() & df.step_time_s.notna()].sort_values(["accelerator", "n_accelerators", "round"])
    df = df.assign(step_ratio=df.step_time_s.astype(float) / df.logged_step_s.astype(float),
                   tokens_per_accelerator=df.global_batch_size * REFERENCE["llama2_70b_lora"]["seq_len"] / df.n_accelerators)
    err = (df.step_ratio - 1).abs()
    out = ["### MLPerf Llama 2 70B LoRA: the training step each log measured", "",
           "The step each log measured (benchmarks_db/data/mlperf_run_params.csv `train_step_s`: the median logged "
           "`train_step_time`, or the batch over the logged samples per second) against the engine's step at the "
           "search's layout for the logged batch and precision: the step alone, without the evaluations, start-up and "
           "stalls that the time to train above mixes in. NVIDIA's LoRA results are held out of every fit; AMD's fit their "
           "stack's level on time to train, not on these steps. The Habana and Juniper logs log no step.", "",
           f"{len(df)} logs; engine/logged step: median **{df.step_ratio.median():.3f}**, median |error| "
           f"{err.median():.1%}, {int((err <= 0.10).sum())} within 10%.", "",
           "| Group | Logs | Median engine/logged | Median \\|error\\| | Worst \\|error\\| | Within 10% |",
           "|---|---|---|---|---|---|"]
    groups = [("8 or fewer accelerators", df.n_accelerators <= 8),
              ("9-1,023 accelerators, 2,048+ tokens per accelerator per step",
               (df.n_accelerators > 8) & (df.tokens_per_accelerator >= 2048)),
              ("9+ accelerators, 1,024 tokens per accelerator per step", df.tokens_per_accelerator < 2048)]
    groups += [(f"round {rnd}", df["round"] == rnd) for rnd in sorted(df["round"].unique())]
    for name, mask in groups:
        g, e = df[mask], err[mask]
        if len(g):
            out.append(f"| {name} | {len(g)} | {g.step_ratio.median():.3f} | {e.median():.1%} | {e.max():.1%} | "
                       f"{int((e <= 0.10).sum())} |")
    out += ["", "| Round | Submitter | System | Accelerators | Batch | Logged step s | Engine step s | Engine/logged | "
            "Evaluations (logged) | Search's layout |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in df.itertuples():
        out.append(f"| {r.round} | {r.submitter} | {r.system_name} | {r.n_accelerators} x {r.accelerator} | "
                   f"{int(r.global_batch_size)} | {r.logged_step_s:.3f} | {r.step_time_s:.3f} | {r.step_ratio:.2f} | "
                   f"{int(r.evaluations)} | {r.layout} |")
    return out + [""]


def mlperf() -> list[str]:
    store = open_store(str(Path(tempfile.mkdtemp()) / "validation.duckdb"))
    seed(store)
    return (mlperf_results(store, ["gpt3", "llama31_405b"], "MLPerf Training results in the store (GPT-3 175B, Llama 3.1 405B)")
            + mlperf_results(store, ["llama2_70b_lora"], "MLPerf Training Llama 2 70B LoRA (NVIDIA's held out; AMD's "
                                                         "and Intel's fit their stack's level: calibrate_sustained.py)")
            + lora_steps(store))


def llama3_whole_run() -> list[str]:
    import json
    example = json.loads((ROOT / "data" / "schedule.json").read_text())["examples"][1]
    base = {"model": {"preset": "llama3.1-405b"}, "training": {"seq_len": 8192, "global_batch_size": 2048,
                                                              "total_tokens": 15.6e12},
            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 16384}}
    rows = []
    for label, sc in (("main setup only", base), ("with the published schedule (ramp-up, long context)",
                                                  base | {"schedule": {"phases": example["phases"]}})):
        b = search(parse_scenario(sc), top=1, pareto_sizes=[]).best[0]
        rows.append(f"| {label} | {b.gpu_hours / 1e6:.2f}M (steps, evaluation, phases) | {b.wall_days * 24 * 16384 / 1e6:.2f}M "
                    f"(with failures and checkpoints) | {layout_text(b.layout)} |")
    return ["### Whole run: Llama 3.1 405B on 16,384 H100 (model card: 30.84M GPU-hours)", "",
            "| Scenario | GPU-hours of compute | GPU-hours billed | Layout |", "|---|---|---|---|", *rows, ""]


def korthikanti() -> list[str]:
    from tests.engine.test_validation import _mt530b
    out = ["### Korthikanti et al. 2022: 530B on 2,240 A100", "", "| Setup | Published MFU | Predicted (full square) |",
           "|---|---|---|"]
    for rc, sp, pub in (("selective", True, 0.542), ("full", False, 0.421)):
        out.append(f"| {rc} recompute | {pub:.1%} | {_mt530b(rc, sp).mfu_full_square:.1%} |")
    return out + [""]


def flash_attention_2() -> list[str]:
    from tests.engine.test_validation import fa2_gpt3_2p7b_8k_best
    b = fa2_gpt3_2p7b_8k_best()
    return ["### FlashAttention-2 (Dao 2023): GPT-3 2.7B at 8k context on 8 A100, layout free", "",
            "| Published | Predicted (search's best, full square) | Layout |", "|---|---|---|",
            f"| 225 TFLOP/s per GPU (72% MFU) | {b.model_tflops_per_gpu_full_square:.0f} TFLOP/s ({b.mfu_full_square:.1%} MFU) "
            f"| {layout_text(b.layout)} |", ""]


def llama3_table4() -> list[str]:
    from tests.engine.test_validation import LLAMA3_TABLE4, llama3_table4_estimate
    out = ["### Llama 3 405B on H100, Meta's published layouts (Dubey et al. 2024, Table 4)", "",
           "| GPUs | Layout | Published TFLOP/s | Predicted | Error | Memory per GPU |", "|---|---|---|---|---|---|"]
    for n_gpus, dp, per_dp, published in LLAMA3_TABLE4:
        e = llama3_table4_estimate(n_gpus, dp, per_dp)
        out.append(f"| {n_gpus:,} | {layout_text(e.layout)} | {published:.0f} | {e.model_tflops_per_gpu:.0f} | "
                   f"{e.model_tflops_per_gpu / published - 1:+.1%} | {e.memory_gib.total:.1f} GiB |")
    return out + [""]


def main() -> None:
    t1, ws = megatron_table1(), h100_weak_scaling()
    lines = table("Megatron-LM Table 1: hardware TFLOP/s per A100, published layouts (calibration set)", t1,
                  [r.predict() for r in t1])
    lines += table("Megatron-LM H100 weak scaling: model TFLOP/s per GPU, published layouts (calibration set)", ws,
                   [r.predict() for r in ws])
    lines += table("Search realism: the search's best layout for each weak-scaling job (layout free)", ws,
                   [r.search_best() for r in ws])
    nemo = nemo_25_11()
    lines += table("Search realism: NeMo 25.11, the search's best layout for each job (layout free; tokens/s per GPU)",
                   nemo, [r.search_best() for r in nemo])
    titan = torchtitan_2024_12()
    lines += table("Search realism: TorchTitan Dec 2024, the search's best layout for each job on FSDP2 (layout free; "
                   "tokens/s per GPU)", titan, [r.search_best() for r in titan])
    lines += korthikanti() + flash_attention_2() + llama3_table4() + llama3_whole_run() + mlperf()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
