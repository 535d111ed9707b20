"""Predicted vs published throughput: Megatron-LM (Narayanan et al. 2021) Table 1, ten runs on up to 3,072 A100.

Each run is estimated with its published tensor- and pipeline-parallel sizes (dp = n_gpus / (tp * pp)), full
recompute, fp16/bf16 with the standard (non-fused) attention of 2021, and the fastest micro-batch size that fits
(the paper does not list it). One set of physics for all ten; nothing is tuned per run.
"""
import json
import statistics

from engine.estimate import estimate
from engine.scenario import parse_scenario
from tests.conftest import DATA
from tests.engine.helpers import gpt


def _predict(row):
    params_b, heads, hidden, layers, tp, pp, n, gbs, published, _ = row
    best = None
    for mbs in (1, 2, 4, 8):
        dp = n // (tp * pp)
        if gbs % (dp * mbs):
            continue
        sc = parse_scenario({"model": gpt(layers, hidden, heads),
                             "training": {"seq_len": 2048, "global_batch_size": gbs, "total_tokens": 3e11,
                                          "precision": "bf16", "attention": "standard"},
                             "cluster": {"accelerator": "A100-SXM4-80GB", "n_gpus": n},
                             "layout": {"tp": tp, "pp": pp, "dp": dp, "micro_batch_size": mbs, "recompute": "full"}})
        est = estimate(sc)
        if est["fits"] and (best is None or est["step_time_s"] < best[1]["step_time_s"]):
            best = (mbs, est)
    return best


def test_megatron_table1_hardware_tflops(capsys):
    cases = json.loads((DATA / "public-validation-cases.json").read_text())["throughput_cases"]["rows"]
    errors, lines = [], ["params  tp  pp  gpus  mbs  predicted  published   error"]
    for row in cases:
        mbs, est = _predict(row)
        pred, pub = est["hardware_tflops_per_gpu_full_square"], row[8]
        errors.append(abs(pred / pub - 1))
        lines.append(f"{row[0]:6.1f}B {row[4]:3d} {row[5]:3d} {row[6]:5d} {mbs:4d} {pred:9.1f} {pub:10.0f} {pred / pub - 1:+8.1%}")
    lines.append(f"median |error| {statistics.median(errors):.1%}, worst {max(errors):.1%}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert statistics.median(errors) <= 0.10
    assert max(errors) <= 0.20
