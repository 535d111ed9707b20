"""The MLPerf reference runs the engine models (model, sequence, batch and tokens trained, each from a published
log), and the fastest time to train any system could reach on them: the floor below which an uploaded result is
impossible (benchmarks_db.checks) and the runs predicted_vs_measured compares with (benchmarks_db.validation)."""
from __future__ import annotations

from functools import lru_cache

from benchmarks_db.accelerators import accelerator

REFERENCE = {
    "gpt3": {"preset": "gpt3-175b", "seq_len": 2048, "global_batch_size": 2048, "tokens": 1_207_959_552,
             "tokens_in_log": "tokens",
             "source": "v4.1 NVIDIA eos_n64_ngc24.09_nemo gpt3 result_0.txt: trained_samples 1,207,959,552 tokens"},
    "llama31_405b": {"preset": "llama3.1-405b", "seq_len": 8192, "global_batch_size": 1152,
                     "tokens": 331_776 * 8192, "tokens_in_log": "sequences",
                     "source": "v5.1 NVIDIA theia_ngpu512_ngc25.09_nemo (GB300) llama31_405b result_0.txt: "
                               "331,776 sequences x 8192 tokens"},
    # Llama 2 70B fine-tuned with LoRA on GovReport (SCROLLS), tokenized and packed into 8192-token sequences
    # (mlcommons/training llama2_70b_lora README; AMD's and Krai's v5.1 READMEs). Adapters of rank 16 (alpha 32, both
    # logged as lora_rank/lora_alpha) on the attention projections: the reference trains lora_target_modules
    # qkv_proj,o_proj (run_llama_70B_scrolls_r16.sh). Samples are logged as sequences (samples_count).
    "llama2_70b_lora": {"preset": "llama2-70b", "seq_len": 8192, "global_batch_size": 8, "tokens": 3072 * 8192,
                        "tokens_in_log": "sequences",
                        "training": {"method": "lora", "lora_rank": 16, "lora_targets": "attention"},
                        "source": "v4.0 NVIDIA eos_ngc24.04_nemo (8 H100) llama2_70b_lora result_0.txt: global_batch_size 8, "
                                  "run_stop samples_count 3,072 sequences x 8192 tokens"},
}

# A time to train below the reference run's model FLOPs over every accelerator at FLOOR_PEAK_FACTOR x its fastest
# datasheet peak is impossible. 2 allows for FP4 (twice the FP8 rate on Blackwell; not in the catalog) and for runs
# that converge on fewer tokens: the fastest of the 59 seeded results the engine models is at 1.24x this floor at 1x
# the peak (v4.0 Google TPU-v5p, GPT-3 on 1,024 chips, 56.9 min). For an accelerator the catalog does not know, the
# floor comes from the work alone: the fastest peak in the catalog, and at most MAX_ACCELERATORS of them.
FLOOR_PEAK_FACTOR = 2.0
FLOOR_DTYPES = ("fp8", "bf16", "fp16")
MAX_ACCELERATORS = 1_000_000     # ten times the largest GPU clusters announced so far (about 100,000 GPUs)


def _fastest_peak(acc) -> float | None:
    return max((p for d in FLOOR_DTYPES if (p := acc.peak(d))), default=None)


@lru_cache(maxsize=256)
def minimum_minutes(benchmark: str, accelerator_id: str | None, n_accelerators: int | None) -> tuple[float, str] | None:
    """(floor, why) for an MLPerf time to train on this system, or None where the benchmark is unknown. An unknown
    accelerator is taken as fast as the catalog's fastest, an unknown or larger count as MAX_ACCELERATORS."""
    from engine.catalog import load_catalog
    from engine.physics.flops import flops_per_token
    from engine.physics.layouts import Layouts
    from engine.physics.model import shape_of
    from engine.scenario import Layout, Training
    ref, acc = REFERENCE.get(benchmark), accelerator(accelerator_id)
    if ref is None:
        return None
    if acc is None or _fastest_peak(acc) is None:
        acc = max((a for a in load_catalog().accelerators.values() if _fastest_peak(a)), key=_fastest_peak)
        which = f"the fastest catalog accelerator's datasheet peak ({acc.id}: {_fastest_peak(acc):g} TFLOP/s)"
    else:
        which = f"the fastest {accelerator_id} datasheet peak ({_fastest_peak(acc):g} TFLOP/s)"
    n = min(n_accelerators, MAX_ACCELERATORS) if n_accelerators and n_accelerators >= 1 else MAX_ACCELERATORS
    shape = shape_of(load_catalog().models[ref["preset"]].arch)
    training = Training(seq_len=ref["seq_len"], global_batch_size=ref["global_batch_size"], total_tokens=ref["tokens"],
                        **ref.get("training", {}))     # LoRA: no weight gradients for the frozen base
    per_token = float(flops_per_token(shape, training, Layouts.of([Layout()]))["model_full_square"])
    flops = per_token * ref["tokens"]
    floor = flops / (n * FLOOR_PEAK_FACTOR * _fastest_peak(acc) * 1e12) / 60
    return floor, (f"{ref['tokens']:,} tokens of {ref['preset']} need {flops:.3g} FLOP, at least {floor:.3g} min "
                   f"on {n:,} accelerators even at {FLOOR_PEAK_FACTOR:g}x {which}")
