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
}

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
    from engine.physics.flops import model_flops_per_token
    from engine.physics.model import shape_of
    ref, acc = REFERENCE.get(benchmark), accelerator(accelerator_id)
    peaks = [p for d in FLOOR_DTYPES if acc is not None and (p := acc.peak(d))]
    if ref is None or not peaks or not n_accelerators or n_accelerators < 1:
        return None
    shape = shape_of(load_catalog().models[ref["preset"]].arch)
    flops = model_flops_per_token(shape, ref["seq_len"], "full_square") * ref["tokens"]
    floor = flops / (n_accelerators * FLOOR_PEAK_FACTOR * max(peaks) * 1e12) / 60
    return floor, (f"{ref['tokens']:,} tokens of {ref['preset']} need {flops:.3g} FLOP, at least {floor:.3g} min "
                   f"even at {FLOOR_PEAK_FACTOR:g}x the fastest {accelerator_id} datasheet peak "
                   f"({max(peaks):g} TFLOP/s)")
