"""Predicted vs measured: the engine's time to train for an MLPerf benchmark's model on the submission's system,
next to the published minutes (the app's validation view).

Batch, sequence and amount trained come from each result's own log: benchmarks_db/data/mlperf_run_params.csv
(gathered from result_0.txt of every GPT-3 and Llama 3.1 405B result and 64 Llama 2 70B LoRA results, sources per
row; for the LoRA logs, each read whole, also the number of evaluations and the median logged training step
(tracked_stats train_step_time, or the global batch over the logged throughput in samples/s); the csv's median
evaluation, eval_start to eval_stop, is for docs/validation.md); results ingested from their own logs use their own
values; the six results whose log could not be read use the reference run's:
- gpt3: the v4.1 NVIDIA eos_n64_ngc24.09_nemo sample (tests/data/mlperf-samples, result_0.txt) ends with
  trained_samples = 1,207,959,552 at global_batch_size 2048 and max_sequence_length 2048 (288 steps; NVIDIA's GPT-3
  logs count tokens).
- llama31_405b: mlcommons/training_results_v5.1 @ 4da2d1c, NVIDIA/results/theia_ngpu512_ngc25.09_nemo/llama31_405b/
  result_0.txt stops at samples_count = 331,776 sequences (288 steps x 1152) of 8192 tokens.
- llama2_70b_lora: mlcommons/training_results_v4.0 @ 62f111b, NVIDIA/results/eos_ngc24.04_nemo/llama2_70b_lora/
  result_0.txt stops at samples_count = 3,072 packed GovReport sequences of 8192 tokens at global_batch_size 8; the
  engine trains rank-16 LoRA adapters on the attention projections of a frozen Llama 2 70B (REFERENCE's training).
Published minutes include the runs' in-run evaluations, which the engine adds as forward-only steps over the evaluation
set: as many evaluations as the result's own log ran where it was read (the csv's `evaluations`: eval_accuracy events
in result_0.txt; a recipe skips the first evaluation points by its scale, e.g. NVIDIA's 128-node H100 LoRA recipe
SKIP_EVALS=18, first evaluation at 7,296 samples where the 8-GPU one evaluates from 1,536), else at the cadence the
logs show (EVALUATION; as the share of the run one log measured where no cadence was read), and the RCP penalty of
the submission (scaling.json scaling_factor, >= 1), by which the published score multiplies the runs' mean.
Precision: per submission, from the submission's configuration where it is published (PRECISION_RULES); an
accelerator without that precision falls back to the nearest it has.
"""
from __future__ import annotations

import csv
import json
import math
import statistics
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from benchmarks_db.accelerators import accelerator
from benchmarks_db.queries import BASE, TRUSTED_SOURCE, mlperf_results
from benchmarks_db.reference_runs import REFERENCE
from benchmarks_db.store import Store

# Each benchmark's in-run evaluation as its logs show it: the first after `first` and then one every `every` trained
# sequences, each a forward pass over `size` sequences (at the training batch, the last one padded); `share` is the
# share of one logged run its evaluations took (eval_start..eval_stop over run_start..run_stop), used where the cadence
# was not read. By cadence, a run that trains more samples, or at a batch larger than the evaluation set, evaluates
# more per training step: LoRA at batch 128 evaluates every 3 steps, at batch 8 every 48.
EVALUATION = {
    "gpt3": {"first": 24_576, "every": 24_576, "size": 11_590_004 / 2048, "share": 0.080,
             "source": "v4.1 NVIDIA eos_n64_ngc24.09_nemo result_0.txt (tests/data/mlperf-samples): eval_start at every "
                       "50,331,648 trained tokens (24,576 sequences of 2048), eval_samples 11,590,004 tokens; 24 "
                       "evaluations, 3.97 of 49.77 minutes"},
    "llama31_405b": {"share": 0.096,
                     "source": "v5.1 NVIDIA theia_ngpu512_ngc25.09_nemo result_0.txt: 22.2 s of evaluation every 16 "
                               "steps of 13.13 s"},
    "llama2_70b_lora": {"first": 1536, "every": 384, "size": 173, "share": 0.098,
                        "source": "v5.0 AMD MI300X_EPYC_9575F_pytorch result_0.txt (tests/data/mlperf-samples): "
                                  "evaluations at 1,536, 1,920, ..., 3,072 samples of the 173 validation sequences "
                                  "(eval_samples), 166.0 of 1695.6 s (NVIDIA's recipe at batch 9, Dell's GB200 log: every 360 from 1,530, 5 "
                                  "evaluations where this cadence gives 4)"},
}


def evaluations(benchmark: str, sequences: float, gbs: int, logged: int | None = None) -> tuple[int, int] | None:
    """(evaluations, forward-only steps in all) of a run that trains `sequences` at batch `gbs`: `logged` evaluations
    where its log counts them, else by the benchmark's logged cadence (EVALUATION); None where only a share was read."""
    ev = EVALUATION[benchmark]
    if "every" not in ev:
        return None
    if logged is not None:
        n = logged
    else:
        n = int((sequences - ev["first"]) // ev["every"]) + 1 if sequences >= ev["first"] else 0
    return n, n * math.ceil(ev["size"] / gbs)
# Training precision per submission (first match wins): (round, submitter, system prefix, precision, source)
PRECISION_RULES = [
    ("v5.1", "NVIDIA", "hsg_", "nvfp4", "v5.1 NVIDIA llama31_405b configs config_GB200_*_fp4.sh / config_GB300_*_fp4.sh"),
    ("v5.1", "NVIDIA", "tyche_", "nvfp4", "v5.1 NVIDIA tyche_ngpu512 config_GB300_32x4x288xtp2pp8cp2_cg_fp4.sh"),
    ("v5.1", "NVIDIA", "theia_", "nvfp4", "v5.1 NVIDIA: every per-system GB200/GB300 llama31_405b config is *_fp4.sh "
                                          "(theia's own system config is not in the index; its config_common.sh sets "
                                          "FP8 for what stays in 8 bits)"),
    # the v5.1 LoRA results of partners whose recipe is NVIDIA's NVFP4 one (config_common_fp4.sh: FP4=True,
    # FP4_RECIPE="nvfp4", HEALING_ITER=350, FP8 from step 350); the other partners' v5.1 LoRA logs print fp4: false or
    # their configs source only config_common.sh (Lenovo's publish neither and log the FP8 recipe's lr and steps)
    ("v5.1", "Dell", "1xXE9680Lx8B200-SXM-180GB", "nvfp4",
     "v5.1 Dell/benchmarks/llama2_70b_lora/implementations/nemo/config_1xXE9680Lx8B200-SXM-180GB.sh sources "
     "config_common_fp4.sh (HEALING_ITER=350); the log's learning rate 0.0006 and 700 steps are that config's"),
    ("v5.1", "Nebius", "nebius_b200_n1", "nvfp4", "v5.1 Nebius config_DGXB200_1x8x1xtp1pp1cp1_fp4.sh sources "
                                                  "config_common_fp4.sh; result_1.txt prints fp4: true, fp4_recipe: nvfp4"),
    ("v5.1", "Nebius", "nebius_b200_n2", "nvfp4", "v5.1 Nebius config_DGXB200_2x8x1xtp1pp1cp2_fp4.sh sources "
                                                  "config_common_fp4.sh; result_1.txt prints fp4: true, fp4_recipe: nvfp4"),
    ("v5.1", "Nebius", "nebius_b300_n1", "nvfp4", "v5.1 Nebius configs/nebius_b300_n1/config_DGXB200_1x8x1xtp1pp1cp1.sh "
                                                  "sources config_common_fp4.sh; result_1.txt prints fp4: true"),
    ("v3.0", "Intel-HabanaLabs", "", "bf16", "Intel's v3.0 GPT-3 runs were BF16; FP8 came in v3.1 (311.94 -> 153.58 min)"),
    ("v3.1", "Google", "cloud-tpu-v5e", "int8", "Google Cloud blog 'Announcing Cloud TPU v5e GA' (2023-11-08): the MLPerf "
                                        "Training 3.1 GPT-3 175B run used INT8 Accurate Quantized Training (AQT) in "
                                        "addition to native BF16"),
    ("v4.1", "Google", "cloud-tpu-trillium", "int8", "Google states no precision for its v4.1 TPU v6e (Trillium) "
                                             "GPT-3 runs; MaxText's own Trillium GPT-3 175B benchmark of that time "
                                             "trains with AQT int8 (AI-Hypercomputer/maxtext benchmarks/"
                                             "maxtext_trillium_model_configs.py gpt_3_175b: quantization int8, 3 "
                                             "sequences per chip, full remat; Google's tpu-recipes "
                                             "training/trillium/GPT3-175B-MaxText, libtpu 2024-10-28: 14.2 s a step on "
                                             "v6e-256, where the bf16 variant gpt_3_175b_bf16 takes 17.2 s)"),
    ("v4.0", "Google", "cloud-tpu-v5p", "int8", "Google states no precision for its v4.0 TPU v5p GPT-3 runs; MaxText's "
                                        "MaxText/configs/v5p/gpt3_175b/gpt3_175b_base.sh, 'the shared config between "
                                        "Google's various MLPerf 4.0 submissions' (v5p_1024.sh, v5p_2048.sh, v5p_3072.sh "
                                        "for its slices), trains with quantization=int8 (AI-Hypercomputer/maxtext "
                                        "@e1fde45 and @d32d207)"),
    ("v4.1", "Google", "cloud-tpu-v5p", "int8", "Google states no precision for its v4.1 TPU v5p GPT-3 runs; the same "
                                        "MaxText recipe (gpt3_175b_base.sh: quantization=int8) carries v5p_4096.sh and "
                                        "v5p_8192.sh, the slices of these results, and read as BF16 they imply 81-89% "
                                        "model FLOP utilisation, as the v4.0 ones (76-86%)"),
    ("", "Google", "", "bf16", "no precision published in the MaxText/PAX submissions; BF16 assumed"),
    ("", "", "", "fp8", "NVIDIA's LLM submissions set FP8=True (e.g. v5.1 theia_ngpu512 config_common.sh; LoRA: v4.0 "
                        "config_DGXH100_1x8x4xtp4pp1cp1.sh), as do the partner and Habana v3.1+ submissions and AMD's "
                        "LoRA recipe (v5.1 Krai config_MI300X_1x8x1.sh: FP8=True)"),
]
# The software stack of a submission where it is not its vendor's MLPerf default (engine.frameworks vendor_defaults):
# the system id or the system description's framework names it (e.g. v4.0 JuniperNetworks h100_n1_ngc24.1_pytorch_
# deepspeed: DeepSpeed ZeRO on NVIDIA GPUs). Anything else runs the vendor's default stack.
FRAMEWORK_WORDS = (("deepspeed", "deepspeed"), ("maxtext", "jax_maxtext"))


def framework_for(system: str, framework_text: str | None) -> str | None:
    """The engine's framework id a submission names in its system id or framework description; None: the vendor's
    default stack."""
    text = f"{system} {framework_text or ''}".lower()
    return next((fw for word, fw in FRAMEWORK_WORDS if word in text), None)


RUN_PARAMS = Path(__file__).resolve().parent / "data" / "mlperf_run_params.csv"


@lru_cache(maxsize=1)
def run_params() -> dict[str, dict]:
    """Logged batch, sequence and amount trained per result, keyed by the store's run_id."""
    out = {}
    with RUN_PARAMS.open() as f:
        for r in csv.DictReader(f):
            if r["global_batch_size"] and r["max_sequence_length"] and r["trained_count"]:
                run_id = f"mlperf:{r['round']}:{r['submitter']}:{r['system_id']}:{r['benchmark']}"
                seq = int(r["max_sequence_length"])
                count = float(r["trained_count"])
                out[run_id] = {"seq_len": seq, "global_batch_size": int(r["global_batch_size"]),
                               "tokens": count if r["trained_unit"] == "tokens" else count * seq,
                               "evaluations": int(r["evaluations"]) if r.get("evaluations") else None,
                               "train_step_s": float(r["train_step_s"]) if r.get("train_step_s") else None,
                               "source": f"{r['source_repo']}@{r['source_commit'][:7]} {r['source_file']}"}
    return out


def precision_for(mlperf_round: str, submitter: str, system: str, acc) -> tuple[str, str]:
    """The submission's training precision (PRECISION_RULES), or the nearest the accelerator supports."""
    from engine.precision import PRECISION_DTYPE
    for rnd, who, prefix, precision, source in PRECISION_RULES:
        if (not rnd or rnd == mlperf_round) and (not who or who == submitter) and system.startswith(prefix):
            for p in (precision, "fp8", "bf16", "fp16"):
                if acc.peak(PRECISION_DTYPE[p]):
                    return p, source if p == precision else f"{source}; {acc.id} has no {precision}: {p}"
    return "bf16", "no rule"


@lru_cache(maxsize=512)
def _predict(benchmark: str, seq_len: int, gbs: int, tokens: float, precision: str, accel: str, n_gpus: int,
             framework: str | None = None, logged_evaluations: int | None = None) -> dict:
    """The engine's time to train the benchmark's model (REFERENCE: preset and training method) on this system, with
    its evaluations (forward-only steps: as many evaluations as the run's log counts, else at the logged cadence,
    EVALUATION, or the logged share of the run), before the RCP penalty; step_time_s is one training step."""
    from engine.scenario import ScenarioError
    from engine.inputs import parse_scenario
    from engine.planning.search import search
    ref = REFERENCE[benchmark]
    counted = evaluations(benchmark, tokens / seq_len, gbs, logged_evaluations)
    train_steps = max(1, round(tokens / (gbs * seq_len)))
    schedule = {"eval_steps": 0} if counted is None else {"eval_interval_steps": train_steps, "eval_steps": counted[1]}
    eval_share = EVALUATION[benchmark]["share"] if counted is None else 0.0
    try:
        sc = parse_scenario({"model": {"preset": ref["preset"]},
                             "training": {"seq_len": seq_len, "global_batch_size": gbs, "total_tokens": tokens,
                                          "precision": precision, "framework": framework, **ref.get("training", {})},
                             "cluster": {"accelerator": accel, "n_gpus": n_gpus},
                             "schedule": schedule})
        best = search(sc, top=1, pareto_sizes=[]).best
    except ScenarioError as err:
        return {"status": f"not predicted: {err}"}
    if not best:
        return {"status": f"no feasible layout at global batch {gbs}"}
    b = best[0]
    lay = b.layout.model_dump()
    split = f" split {lay['first_stage_layers']}/{lay['last_stage_layers']}" if lay["first_stage_layers"] else ""
    return {"status": "predicted", "predicted_minutes": b.train_days * 1440 / (1 - eval_share), "mfu": b.mfu,
            "step_time_s": b.step_time_s,
            "layout": f"tp{lay['tp']} pp{lay['pp']} dp{lay['dp']} cp{lay['cp']} mbs{lay['micro_batch_size']} "
                      f"v{lay['virtual_stages']} zero{lay['zero_stage']} {lay['recompute']}{split}"}


def _logged_tokens(run_id: str, benchmark: str, params: dict) -> tuple[int, int, float, str, int | None] | None:
    """(sequence length, global batch, tokens, basis, evaluations) from the run's own log, None where it has none
    (evaluations None where the log's were not counted). Each benchmark fixes its sequence length, so a log without
    the key (LoRA logs name none) has the reference's."""
    ref = REFERENCE[benchmark]
    seq = params.get("max_sequence_length") or ref["seq_len"]
    gbs, samples = params.get("global_batch_size"), params.get("samples_at_stop")
    if gbs and samples:
        tokens = samples if ref["tokens_in_log"] == "tokens" else samples * seq
        return int(seq), int(gbs), float(tokens), "this result's log", params.get("evaluations")
    logged = run_params().get(run_id)
    if logged:
        return (logged["seq_len"], logged["global_batch_size"], logged["tokens"], logged["source"],
                logged["evaluations"])
    return None


def _peer_tokens(r, peers: list) -> tuple[int, int, float, str, int | None]:
    """A result without its log trains at the batch, and to the samples, of the logged results of the same benchmark
    nearest it: those on the same number of accelerators (submitters scale the batch with the system: LoRA at 8 GPUs
    trains at batch 8, at 512 at batch 64, and a larger batch converges in more samples). Their most common batch
    (the recipes are shared across vendors; one submitter's own batch does not speak for the others) and the median
    of the samples at which the logs at that batch stopped, on the same accelerator where any is (one log's samples
    vary by 10-20% from run to run), and the median of their evaluations where each log counts them (the recipes
    skip more evaluation points at scale). The reference run where no result of the benchmark is logged."""
    ref = REFERENCE[r.benchmark]
    same = [p for p in peers if p.benchmark == r.benchmark]
    if not same:
        return (ref["seq_len"], ref["global_batch_size"], float(ref["tokens"]),
                "reference run (no batch or samples read from this result's log): " + ref["source"], None)
    distance = lambda p: abs(math.log2(p.n_accelerators / r.n_accelerators))
    nearest = min(map(distance, same))
    group = [p for p in same if distance(p) == nearest]
    batches = [p.logged[1] for p in group]
    gbs = max(sorted(set(batches)), key=batches.count)
    at_batch = [p for p in group if p.logged[1] == gbs]
    at_batch = [p for p in at_batch if p.accelerator == r.accelerator] or at_batch
    seq = at_batch[0].logged[0]
    tokens = float(statistics.median(p.logged[2] for p in at_batch))
    counts = [p.logged[4] for p in at_batch]
    evals = None if None in counts else round(statistics.median(counts))
    return seq, gbs, tokens, (f"peers: the median of {len(at_batch)} logged result(s) at batch {gbs} on "
                              f"{at_batch[0].n_accelerators} x {at_batch[0].accelerator if len({p.accelerator for p in at_batch}) == 1 else 'accelerators'} "
                              f"({', '.join(sorted(p.run_id for p in at_batch)[:3])}{' ...' if len(at_batch) > 3 else ''}); "
                              "no batch or samples read from this result's log"), evals


def results_version(store: Store, benchmark: str | None = None) -> tuple:
    """What predicted_vs_measured(store, benchmark) depends on in the store: the benchmark's MLPerf results, their
    scores, whether each is trusted, and their logged batch and tokens. It changes only when one of those does, not
    with every upload (a microbenchmark result changes no prediction)."""
    return tuple(store.rows(f"""
SELECT count(*), md5(coalesce(string_agg(concat_ws('|', r.run_id, m.value, r.params, {TRUSTED_SOURCE}), ','
                                          ORDER BY r.run_id), ''))
{BASE}WHERE r.suite = 'mlperf_training' AND m.stat = 'score' AND ($benchmark IS NULL OR r.benchmark = $benchmark)""",
                            {"benchmark": benchmark})[0])


def from_own_log(token_basis) -> bool:
    """Whether a result's batch and samples were read from its own log (not its nearest peer's, not the reference's):
    only those results calibrate or diagnose the engine."""
    return isinstance(token_basis, str) and not token_basis.startswith(("reference run", "peers: "))


class Peer(NamedTuple):
    """A result as _peer_tokens compares it: logged is its own (sequence, batch, tokens, basis, evaluations), None if
    it has none."""
    run_id: str
    benchmark: str
    accelerator: str
    n_accelerators: int
    submitter: str
    round: str
    logged: tuple | None


def predicted_vs_measured(store: Store, benchmark: str | None = None, mlperf_round: str | None = None) -> pd.DataFrame:
    """Every MLPerf result with the engine's prediction where the engine models it (status says why not)."""
    df = mlperf_results(store, benchmark=benchmark, mlperf_round=mlperf_round)
    params = {run_id: json.loads(text or "{}")
              for run_id, text in store.rows("SELECT run_id, params FROM run WHERE suite = 'mlperf_training'")}
    logged = {r.run_id: found for r in df.itertuples() if r.trusted and r.benchmark in REFERENCE
              and (found := _logged_tokens(r.run_id, r.benchmark, params.get(r.run_id, {})))}
    peers = [Peer(r.run_id, r.benchmark, r.accelerator_id if isinstance(r.accelerator_id, str) else r.accelerator_raw,
                  int(r.n_accelerators), r.submitter, r.round, logged[r.run_id])
             for r in df.itertuples() if r.run_id in logged]
    rows = []
    for r in df.itertuples():
        accel_id = r.accelerator_id if isinstance(r.accelerator_id, str) else None     # NULL arrives as NA
        out = {"run_id": r.run_id, "round": r.round, "submitter": r.submitter, "system_name": r.system_name,
               "benchmark": r.benchmark, "accelerator": accel_id or r.accelerator_raw,
               "n_accelerators": r.n_accelerators, "published_minutes": r.score_minutes, "source_kind": r.source_kind,
               "predicted_minutes": None, "ratio": None, "precision": None, "precision_source": None, "tokens": None,
               "token_basis": None, "global_batch_size": None, "scaling_factor": None, "layout": None, "mfu": None,
               "framework": None, "step_time_s": None, "evaluations": None,
               "logged_step_s": params.get(r.run_id, {}).get("train_step_s")
               or (run_params().get(r.run_id) or {}).get("train_step_s")}
        acc = accelerator(accel_id)
        if not r.trusted:                              # an untrusted upload costs no search (issue 13)
            out["status"] = "not predicted: an upload the deployment's operator has not trusted"
        elif r.benchmark not in REFERENCE:
            out["status"] = "not modelled: no model preset for this benchmark"
        elif acc is None:
            out["status"] = "not predicted: accelerator not in the catalog"
        else:
            seq, gbs, tokens, basis, evals = logged.get(r.run_id) or _peer_tokens(
                Peer(r.run_id, r.benchmark, accel_id or r.accelerator_raw, int(r.n_accelerators), r.submitter,
                     r.round, None), peers)
            parts = r.run_id.split(":")            # mlperf:<round>:<submitter folder>:<system id>:<benchmark>
            folder, system = (parts[2], parts[3]) if len(parts) >= 5 else (r.submitter, r.system_name)
            precision, precision_source = precision_for(r.round, folder, system, acc)
            framework = framework_for(system, getattr(r, "framework", None))
            pred = dict(_predict(r.benchmark, seq, gbs, tokens, precision, acc.id, int(r.n_accelerators), framework,
                                 evals))
            scaling = float(params.get(r.run_id, {}).get("scaling_factor") or 1.0)
            if pred.get("predicted_minutes"):
                pred["predicted_minutes"] *= scaling
                out["ratio"] = pred["predicted_minutes"] / r.score_minutes
            elif r.run_id not in logged:
                pred["status"] = (f"not predicted: this result's global batch is unknown (no batch or samples read from "
                                  f"its log) and the batch of {gbs} its nearest logged peer trained at has no feasible "
                                  f"layout on {int(r.n_accelerators)} accelerators")
            out.update(pred, precision=precision, precision_source=precision_source, tokens=tokens, token_basis=basis,
                       global_batch_size=gbs, scaling_factor=scaling, framework=framework, evaluations=evals)
        rows.append(out)
    df = pd.DataFrame(rows)
    # pandas reads a column of strings and None as text with NaN; a framework is an id or None (the vendor's default)
    df["framework"] = df["framework"].astype(object).where(df["framework"].notna(), None)
    df["diagnosis"] = [diagnosis(r, df) for r in df.itertuples()]
    return df


OFF = 0.25        # predictions further than this from the published minutes are diagnosed
# The fewest tokens per accelerator per optimizer step among the runs that calibrate the engine's step time
# (Megatron-LM Table 1 and its H100 weak-scaling table, tests/engine/published_runs.py: 2,048 for the large models)
CALIBRATED_TOKENS_PER_ACCELERATOR_STEP = 2048


def implied_mfu(row) -> float | None:
    """Model FLOPs per second per accelerator the published minutes imply (training share of the run, 6N per token,
    attention excluded), over the dense peak of the precision assumed."""
    from engine.catalog import load_catalog
    from engine.precision import PRECISION_DTYPE
    from engine.inputs import parse_scenario
    acc = accelerator(row.accelerator)
    if acc is None or not row.tokens or not row.precision:
        return None
    params = parse_scenario({"model": {"preset": REFERENCE[row.benchmark]["preset"]},
                             "training": {"seq_len": 2048, "global_batch_size": 1, "total_tokens": 1.0},
                             "cluster": {"accelerator": acc.id, "n_gpus": 1}}).arch
    from engine.physics.model import shape_of
    n_params = shape_of(params).active_params()
    seconds = row.published_minutes * 60 * (1 - EVALUATION[row.benchmark]["share"])
    peak = load_catalog().accelerator(acc.id).peak(PRECISION_DTYPE[row.precision]) * 1e12
    return 6 * n_params * row.tokens / seconds / row.n_accelerators / peak


def diagnosis(row, df: pd.DataFrame) -> str | None:
    """Why a prediction is more than OFF from the published minutes, from what is known about the submission."""
    if row.ratio is None or pd.isna(row.ratio) or abs(row.ratio - 1) <= OFF:
        return None
    reasons = []
    if not from_own_log(row.token_basis):
        reasons.append(_unread(row, df))
    if str(row.accelerator).startswith("TPU") and row.precision == "bf16":
        mfu = implied_mfu(row)
        if mfu is not None and mfu > 0.6:
            reasons.append(f"precision: Google publishes none for this submission; at BF16 the published minutes imply "
                           f"{mfu:.0%} model FLOP utilisation (6N per token, evaluation excluded), more than published "
                           "BF16 runs reach, so the run most likely computed its matmuls in INT8 (Google's accurate "
                           "quantized training, precision int8, which Google stated for its v5e GPT-3 run) or FP8; "
                           "without a published precision it is predicted at BF16")
        else:
            reasons.append("TPU efficiency not calibrated: no TPU matmul measurement or per-step TPU run is public, so "
                           "the catalog's assumed matmul efficiency and the H100's sustained level stand in; the "
                           "precision (BF16 assumed) is not published either")
    if row.precision == "nvfp4":
        reasons.append("NVFP4 recipe: the engine keeps 15% of the linear layers in BF16 as NVIDIA's published NVFP4 "
                       "pre-training recipe does (12B model) and borrows the FP8 matmul efficiency (no FP4 measurement "
                       "is published); the MLPerf recipe's BF16 share is not published")
    kin = df[(df.benchmark == row.benchmark) & (df.accelerator == row.accelerator) & (df.submitter == row.submitter)
             & df.ratio.notna()]
    close = kin[(kin.ratio - 1).abs() <= OFF]
    if not reasons and len(close) and kin["round"].nunique() > 1:
        same = kin[kin.n_accelerators == row.n_accelerators].sort_values("round")
        scores = ", ".join(f"{m:.1f} ({r_})" for r_, m in zip(same["round"], same.published_minutes))
        reasons.append(f"software round: {row.submitter}'s {row.accelerator} results of this benchmark in rounds "
                       f"{', '.join(sorted(close['round'].unique()))} are predicted within {OFF:.0%}, this one "
                       f"{row.ratio - 1:+.0%}; the same {row.n_accelerators} accelerators scored {scores} minutes, so "
                       + ("the newer software runs faster than the engine's calibration on 2024 BF16 runs" if row.ratio > 1
                          else "this round's software ran slower than the engine's calibration and the later rounds'"))
    if "has no" in str(row.precision_source):
        reasons.append(f"precision: {row.precision_source.rsplit('; ', 1)[-1]} (the submission's own precision is "
                       "not available on this accelerator)")
    others = _submitter_spread(row, df) or _submitter_elsewhere(row, df)
    reasons += [r for r in (others, _one_runs_samples(row, df), _memory_bound(row), _strong_scaled(row),
                            _uncalibrated(row)) if r]
    if not reasons:
        reasons.append(_round_wide(row, df))
    return "; ".join(r for r in reasons if r) or "not diagnosed"


def _round_wide(row, df: pd.DataFrame) -> str | None:
    """What the round's other results on the same accelerator and count (every submitter) say: this submission ran
    apart from them (its own tuning or software), or it ran as they did and the engine misses the whole round the
    same way (its level for the accelerator, fitted on other runs, does not carry to the round's software and
    recipe)."""
    peers = df[(df.benchmark == row.benchmark) & (df["round"] == getattr(row, "round")) & (df.accelerator == row.accelerator)
               & (df.n_accelerators == row.n_accelerators) & df.ratio.notna() & (df.run_id != row.run_id)]
    if not len(peers):
        return None
    published, median = float(peers.published_minutes.median()), float(peers.ratio.median())
    where = f"the other {len(peers)} {getattr(row, 'round')} results on {row.n_accelerators} x {row.accelerator}"
    if abs(row.published_minutes / published - 1) > 0.10:
        return (f"outlier of its round: {where} took a median {published:.1f} minutes against this one's "
                f"{row.published_minutes:.1f}, and the engine predicts them at a median {median:.2f}x; this "
                "submission's own tuning or software sets it apart")
    if (median > 1) != (row.ratio > 1):
        return None
    return (f"systematic in this round: {where} took about as long (median {published:.1f} minutes) and are "
            f"predicted at a median {median:.2f}x, so the engine's level for {row.accelerator}, fitted on other runs, "
            f"does not carry to this round's software and recipe ({'faster' if median > 1 else 'slower'} than the "
            "engine)")


def _unread(row, df: pd.DataFrame) -> str:
    """What taking its peers' (or the reference run's) batch and samples for a result whose log was not read may
    cost: the batches and samples the logs read show on systems of the same size."""
    ref = REFERENCE[row.benchmark]
    used = (f"no batch or samples were read from this result's log, so global batch {int(row.global_batch_size)} and "
            f"{row.tokens / ref['seq_len']:,.0f} sequences are used ({str(row.token_basis).split(' (')[0]})")
    read = df[(df.benchmark == row.benchmark) & (df.n_accelerators == row.n_accelerators) & df.tokens.notna()
              & df.token_basis.map(from_own_log)]
    if not len(read):
        return f"batch size and samples unknown: {used}; no log of a {row.n_accelerators}-accelerator result was read"
    batches = sorted({int(b) for b in read.global_batch_size})
    low, high = (f"{x:,.0f}" for x in (read.tokens.min() / ref["seq_len"], read.tokens.max() / ref["seq_len"]))
    logs = "the log" if len(read) == 1 else f"the {len(read)} logs"
    return (f"batch size and samples unknown: {used}; {logs} read of {row.n_accelerators}-accelerator results train "
            f"at batch {'/'.join(map(str, batches))} and stopped after {low if low == high else f'{low}-{high}'} "
            "sequences")


def _submitter_spread(row, df: pd.DataFrame) -> str | None:
    """Where the same accelerators in the same number published times far apart (other software, other recipe), the
    result's distance from the others'."""
    same = df[(df.benchmark == row.benchmark) & (df.accelerator == row.accelerator)
              & (df.n_accelerators == row.n_accelerators) & (df.run_id != row.run_id)]
    if len(same) < 2:
        return None
    median = float(same.published_minutes.median())
    if abs(row.published_minutes / median - 1) <= OFF:
        return None
    return (f"submitter spread: the {len(same)} other results on {row.n_accelerators} {row.accelerator} published "
            f"{same.published_minutes.min():.2f}-{same.published_minutes.max():.2f} min (median {median:.2f}); this "
            f"one {row.published_minutes:.2f} min is {row.published_minutes / median:.2f}x that median, so its software "
            "or recipe differs from the others' by more than the engine's error")


def _peer_ratio(row, df: pd.DataFrame) -> float | None:
    """This result's published minutes over the median of the other submitters' on the same system size."""
    peers = df[(df.benchmark == row.benchmark) & (df.accelerator == row.accelerator)
               & (df.n_accelerators == row.n_accelerators) & (df.submitter != row.submitter)]
    return row.published_minutes / float(peers.published_minutes.median()) if len(peers) >= 2 else None


def _submitter_elsewhere(row, df: pd.DataFrame) -> str | None:
    """A result whose own system shows no submitter spread (too few peers, or close to them) while every other
    result of its submitter sits far from the other submitters' on the same systems, on the side that explains this
    result's error: the submitter's software, not the accelerator."""
    own = df[(df.benchmark == row.benchmark) & (df.submitter == row.submitter) & (df.run_id != row.run_id)]
    slow = [(r, x) for r in own.itertuples() if (x := _peer_ratio(r, df)) is not None]
    # every one of them off the same way, by more than OFF, and the way that explains this result's error
    if len(slow) < 2 or not all((x - 1 > OFF) == (row.ratio < 1) and abs(x - 1) > OFF for _, x in slow):
        return None
    shown = ", ".join(f"{x:.2f}x on {r.n_accelerators} {r.accelerator}" for r, x in slow)
    return (f"submitter's software: {row.submitter}'s other results of this benchmark took {shown} the other "
            "submitters' median minutes on the same systems, so its software stack, not the accelerator, sets the pace")


def _one_runs_samples(row, df: pd.DataFrame) -> str | None:
    """A result whose one log read stopped after far more (or fewer) samples than the logs of the other results on
    the same system (of its round where there are any), which took about as long: the prediction follows that one
    run's samples, while MLPerf scores the mean of several runs, whose samples to converge differ from run to run."""
    if not from_own_log(row.token_basis):
        return None
    peers = df[(df.benchmark == row.benchmark) & (df.accelerator == row.accelerator)
               & (df.n_accelerators == row.n_accelerators) & (df.run_id != row.run_id) & df.tokens.notna()
               & df.token_basis.map(from_own_log)]
    peers = peers[peers["round"] == getattr(row, "round")] if (peers["round"] == getattr(row, "round")).any() else peers
    if not len(peers):
        return None
    tokens, minutes = float(peers.tokens.median()), float(peers.published_minutes.median())
    off = row.tokens / tokens - 1
    if abs(off) <= 0.05 or (off > 0) != (row.ratio > 1) or abs(row.published_minutes / minutes - 1) > 0.10:
        return None
    seq = REFERENCE[row.benchmark]["seq_len"]
    return (f"one run's samples: this result's log stopped after {row.tokens / seq:,.0f} sequences, the logs of the "
            f"other {len(peers)} result(s) on {row.n_accelerators} x {row.accelerator} after a median "
            f"{tokens / seq:,.0f} ({off:+.0%}) in about the same minutes ({row.published_minutes:.2f} against "
            f"{minutes:.2f}); MLPerf scores the mean of several runs whose samples to converge differ, and the "
            "prediction follows the one log read")


def _memory_bound(row) -> str | None:
    """A run the engine fits only by recomputing every activation, predicted slower than published."""
    if row.ratio <= 1 + OFF or " full" not in str(row.layout):
        return None
    return (f"memory: the engine fits this run on {row.n_accelerators} {row.accelerator} only with full activation "
            f"recomputation ({row.layout}); the submission ran faster, so it kept more in memory than the engine's "
            "memory estimate allows")


def _strong_scaled(row) -> str | None:
    """A run predicted fast whose step gives each accelerator less work than any calibration run did."""
    if row.ratio >= 1 - OFF or not row.global_batch_size or not from_own_log(row.token_basis):
        return None                                  # (an assumed batch says nothing about the run's own scaling)
    per_step = row.global_batch_size * REFERENCE[row.benchmark]["seq_len"] / row.n_accelerators
    if per_step >= CALIBRATED_TOKENS_PER_ACCELERATOR_STEP:
        return None
    return (f"strong scaling beyond the calibration: {per_step:,.0f} tokens per accelerator per step (batch "
            f"{int(row.global_batch_size)} on {row.n_accelerators}), fewer than the "
            f"{CALIBRATED_TOKENS_PER_ACCELERATOR_STEP:,} of every run the engine's step time is calibrated on, so the "
            "per-step costs that do not shrink with the work (launches, synchronisation, collective latency) weigh more "
            "than the engine counts")


def _uncalibrated(row) -> str | None:
    """An accelerator whose in-training level no published per-step run of its stack calibrates at the result's
    precision, in the words of engine.frameworks.resolve (the rule engine.planning.sanity.calibration_warning
    states)."""
    from engine import frameworks
    acc = accelerator(row.accelerator)
    if acc is None:
        return None
    fw = frameworks.resolve(row.framework, acc.vendor, acc.id, row.precision)
    if fw.calibrated:
        return None
    return f"{fw.level_note}; this result is a held-out check of that assumption, {row.ratio - 1:+.0%}"