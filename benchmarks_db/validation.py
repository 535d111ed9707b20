"""Predicted vs measured: the engine's time to train for an MLPerf benchmark's model on the submission's system,
next to the published minutes (the app's validation view).

Token counts come from real logs, because the CSV of published scores does not carry them:
- gpt3: the v4.1 NVIDIA eos_n64_ngc24.09_nemo sample (../shared/data/mlperf-samples, result_0.txt) ends with
  trained_samples = 1,207,959,552 at global_batch_size 2048 and max_sequence_length 2048. That is 288 steps x 2048
  x 2048, so NVIDIA's GPT-3 logs count tokens (tracked_stats throughput 404,624 tokens/s x the 49.77-minute run
  agrees to 0.1%).
- llama31_405b: mlcommons/training_results_v5.1 @ 4da2d1c, NVIDIA/results/theia_ngpu512_ngc25.09_nemo/llama31_405b/
  result_0.txt (512 GB300, 64.6-minute score) stops at samples_count = 331,776 sequences (288 steps x
  global_batch_size 1152) of max_sequence_length 8192 = 2,717,908,992 tokens.
Results ingested from their own logs use their own batch size and tokens. The others use the reference run's:
convergence depends on the batch size, so those predictions are approximate, and a submission whose real batch
size was larger may show "no feasible layout" at the reference batch.
Precision: FP8 where the catalog has an FP8 peak (NVIDIA's LLM submissions set FP8=True, e.g. v5.1 theia_ngpu512
llama31_405b config_common.sh), else BF16. This is an assumption per row: Intel's v3.0 GPT-3 runs on Gaudi2 were
not FP8 (FP8 halved the time in v3.1, 311.94 -> 153.58 min; coverage of the v3.1 results, e.g.
https://pcge.eu/2023/11/intels-gaudi-ai-accelerator-surpasses-gpt-3-with-impressive-2x-performance-boost/).
Some v5.1 Blackwell submissions trained in FP4 (NVIDIA's hsg and tyche configs are named *_fp4.sh), which the
engine does not model. Published minutes include the in-run evaluations; the engine's time is training only.
"""
from __future__ import annotations

import json
from functools import lru_cache

import pandas as pd

from benchmarks_db.accelerators import accelerator
from benchmarks_db.queries import mlperf_results
from benchmarks_db.store import Store

REFERENCE = {
    "gpt3": {"preset": "gpt3-175b", "seq_len": 2048, "global_batch_size": 2048, "tokens": 1_207_959_552,
             "tokens_in_log": "tokens",
             "source": "v4.1 NVIDIA eos_n64_ngc24.09_nemo gpt3 result_0.txt: trained_samples 1,207,959,552 tokens"},
    "llama31_405b": {"preset": "llama3.1-405b", "seq_len": 8192, "global_batch_size": 1152,
                     "tokens": 331_776 * 8192, "tokens_in_log": "sequences",
                     "source": "v5.1 NVIDIA theia_ngpu512_ngc25.09_nemo (GB300) llama31_405b result_0.txt: "
                               "331,776 sequences x 8192 tokens"},
}
NOT_MODELLED = {"llama2_70b_lora": "not modelled: LoRA fine-tuning (frozen base weights, low-rank adapters)"}
# A time to train below the reference run's model FLOPs over every accelerator at FLOOR_PEAK_FACTOR x its fastest
# datasheet peak is impossible. 2 allows for FP4 (twice the FP8 rate on Blackwell; not in the catalog) and for runs
# that converge on fewer tokens: the fastest of the 59 seeded results the engine models is at 1.24x this floor at 1x
# the peak (v4.0 Google TPU-v5p, GPT-3 on 1,024 chips, 56.9 min).
FLOOR_PEAK_FACTOR = 2.0
FLOOR_DTYPES = ("fp8", "bf16", "fp16")


@lru_cache(maxsize=256)
def minimum_minutes(benchmark: str, accelerator_id: str | None, n_accelerators: int | None) -> tuple[float, str] | None:
    """(floor, why) for an MLPerf time to train on this system, or None where the benchmark or system is unknown."""
    from engine.catalog import load_catalog
    from engine.model import shape_of
    ref, acc = REFERENCE.get(benchmark), accelerator(accelerator_id)
    peaks = [p for d in FLOOR_DTYPES if acc is not None and (p := acc.peak(d))]
    if ref is None or not peaks or not n_accelerators or n_accelerators < 1:
        return None
    flops = shape_of(load_catalog().models[ref["preset"]].arch).model_flops_per_token(ref["seq_len"]) * ref["tokens"]
    floor = flops / (n_accelerators * FLOOR_PEAK_FACTOR * max(peaks) * 1e12) / 60
    return floor, (f"{ref['tokens']:,} tokens of {ref['preset']} need {flops:.3g} FLOP, at least {floor:.3g} min "
                   f"even at {FLOOR_PEAK_FACTOR:g}x the fastest {accelerator_id} datasheet peak "
                   f"({max(peaks):g} TFLOP/s)")


@lru_cache(maxsize=512)
def _predict(preset: str, seq_len: int, gbs: int, tokens: float, precision: str, accel: str, n_gpus: int) -> dict:
    from engine.scenario import ScenarioError, parse_scenario
    from engine.search import search
    try:
        sc = parse_scenario({"model": {"preset": preset},
                             "training": {"seq_len": seq_len, "global_batch_size": gbs, "total_tokens": tokens,
                                          "precision": precision},
                             "cluster": {"accelerator": accel, "n_gpus": n_gpus}})
        best = search(sc, top=1, pareto_sizes=[])["best"]
    except ScenarioError as err:
        return {"status": f"not predicted: {err}"}
    if not best:
        return {"status": f"no feasible layout at global batch {gbs}"}
    b = best[0]
    lay = b["layout"]
    return {"status": "predicted", "predicted_minutes": b["train_days"] * 1440, "mfu": b["mfu"],
            "layout": f"tp{lay['tp']} pp{lay['pp']} dp{lay['dp']} cp{lay['cp']} mbs{lay['micro_batch_size']} "
                      f"v{lay['virtual_stages']} zero{lay['zero_stage']} {lay['recompute']}"}


def _tokens(benchmark: str, params: dict) -> tuple[int, int, float, str]:
    """(sequence length, global batch, tokens, basis) from the run's own log where it has them."""
    ref = REFERENCE[benchmark]
    seq, gbs, samples = params.get("max_sequence_length"), params.get("global_batch_size"), params.get("samples_at_stop")
    if seq and gbs and samples:
        tokens = samples if ref["tokens_in_log"] == "tokens" else samples * seq
        return int(seq), int(gbs), float(tokens), "this result's log"
    return ref["seq_len"], ref["global_batch_size"], float(ref["tokens"]), ref["source"]


def predicted_vs_measured(store: Store, benchmark: str | None = None, mlperf_round: str | None = None) -> pd.DataFrame:
    """Every MLPerf result with the engine's prediction where the engine models it (status says why not)."""
    df = mlperf_results(store, benchmark=benchmark, mlperf_round=mlperf_round)
    params = dict(store.rows("SELECT run_id, params FROM run WHERE suite = 'mlperf_training'"))
    rows = []
    for r in df.itertuples():
        accel_id = r.accelerator_id if isinstance(r.accelerator_id, str) else None     # NULL arrives as NA
        out = {"run_id": r.run_id, "round": r.round, "submitter": r.submitter, "system_name": r.system_name,
               "benchmark": r.benchmark, "accelerator": accel_id or r.accelerator_raw,
               "n_accelerators": r.n_accelerators, "published_minutes": r.score_minutes, "source_kind": r.source_kind,
               "predicted_minutes": None, "ratio": None, "precision": None, "tokens": None, "token_basis": None,
               "layout": None, "mfu": None}
        acc = accelerator(accel_id)
        if not r.trusted:                              # an untrusted upload costs no search (issue 13)
            out["status"] = "not predicted: an upload the deployment's operator has not trusted"
        elif r.benchmark in NOT_MODELLED:
            out["status"] = NOT_MODELLED[r.benchmark]
        elif r.benchmark not in REFERENCE:
            out["status"] = "not modelled: no model preset for this benchmark"
        elif acc is None:
            out["status"] = "not predicted: accelerator not in the catalog"
        else:
            seq, gbs, tokens, basis = _tokens(r.benchmark, json.loads(params.get(r.run_id) or "{}"))
            precision = "fp8" if acc.peak("fp8") else "bf16"
            pred = _predict(REFERENCE[r.benchmark]["preset"], seq, gbs, tokens, precision, acc.id, int(r.n_accelerators))
            out.update(pred, precision=precision, tokens=tokens, token_basis=basis)
            if pred.get("predicted_minutes"):
                out["ratio"] = pred["predicted_minutes"] / r.score_minutes
        rows.append(out)
    return pd.DataFrame(rows)
