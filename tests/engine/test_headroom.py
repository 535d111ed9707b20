"""The memory headroom recommendations keep free, and the gradient precision that memory and time both read: the
default from its published measurement, the search leaving out layouts that use the headroom while the estimate
still gives them with a warning, and the gradient bytes in the weight-gradient GEMM and the data-parallel reduction."""
import json

import numpy as np
import pytest

from engine.catalog import DATA_DIR
from engine.physics.comm import all_reduce_s, members_per_node
from engine.physics.hardware import GIB, resolve_hardware
from engine.physics.kernels import linear_s
from engine.physics.memory import FRAGMENTATION, default_headroom_fraction, headroom_fraction
from engine.planning.estimate import estimate
from engine.planning.search import search, search_cluster
from engine.presentation.edit import DEFAULT_SCENARIO, default_scenario
from engine.inputs import parse_scenario
from engine.scenario import ScenarioError
from tests.engine.helpers import gpt

# Llama 3.1 70B on 1,024 H100 (the app's default scenario) with a layout at 97% of the 79.65 GiB
NEAR_FULL = {"tp": 1, "pp": 2, "dp": 128, "cp": 4, "virtual_stages": 2, "zero_stage": 3, "shard_group": 32}


def _with(layout=None, **training):
    data = {**DEFAULT_SCENARIO, "training": {**DEFAULT_SCENARIO["training"], **training}}
    return parse_scenario({**data, "layout": layout} if layout else {k: v for k, v in data.items() if k != "layout"})


def test_the_default_headroom_is_the_measured_allocator_reserve_less_what_the_estimate_counts():
    # Guo et al. 2024, GMLake (ASPLOS 2024) abstract: PyTorch's caching allocator holds 9.2 GB (up to 25 GB) more than
    # a defragmenting allocator across eight LLMs on an 80 GB A100, fragmentation 15% (up to 33%) higher
    doc = json.loads((DATA_DIR / "memory_headroom.json").read_text())
    r = doc["allocator_reserve"]
    assert (r["reserved_gap_gb"], r["reserved_gap_max_gb"], r["device_gb"]) == (9.2, 25.0, 80.0)
    assert (r["fragmentation_reduction"], r["fragmentation_reduction_max"]) == (0.15, 0.33)
    assert r["source"]["url"] == "https://arxiv.org/abs/2401.08156" and r["source"]["date"] == "2024-01"
    # 9.2 / 80 = 11.5% of the device, of which the estimate's 5% fragmentation allowance is already counted
    assert FRAGMENTATION == 0.05
    assert default_headroom_fraction() == pytest.approx(0.065, abs=1e-12)
    assert headroom_fraction(_with().training) == default_headroom_fraction()
    assert headroom_fraction(_with(memory_headroom_fraction=0.1).training) == 0.1


def test_a_layout_inside_the_headroom_is_estimated_with_a_warning_but_not_recommended():
    est = estimate(_with(NEAR_FULL))
    total, capacity = est.memory_gib.total, est.memory_capacity_gib
    assert capacity == pytest.approx(79.65) and 0.965 < total / capacity < 0.975 and est.fits
    assert est.step_time_s > 0                                  # a user's own layout is never refused for it
    warning = [w for w in est.warnings if "headroom" in w]
    assert warning and f"uses {total:.1f} of {capacity:.1f} GiB" in warning[0] and "6.5% headroom" in warning[0]
    assert f"under {0.935 * capacity:.1f} GiB" in warning[0]

    sc = _with()
    cs = search_cluster(sc, 1024)
    lay = cs.layouts
    i = np.flatnonzero((lay.tp == 1) & (lay.pp == 2) & (lay.dp == 128) & (lay.cp == 4) & (lay.v == 2) & (lay.zero == 3)
                       & (lay.shard == 32) & (lay.mbs == 1) & (lay.rc == 0) & lay.reshard & (lay.first < 0))
    assert len(i) == 1 and cs.ev["mem_total"][i[0]] / GIB == pytest.approx(total, abs=1e-3)
    assert not cs.feasible[i[0]] and cs.reasons[cs.reason[i[0]]].startswith("fits, but only by using the 6.5%")
    best = search(sc, top=20, pareto_sizes=[], summaries=False).best
    assert best and all(r.memory_gib.total <= 0.935 * r.memory_capacity_gib for r in best)
    assert NEAR_FULL | {"micro_batch_size": 1} not in [{k: getattr(r.layout, k) for k in (*NEAR_FULL, "micro_batch_size")}
                                                        for r in best]

    # no headroom: the same layout is ranked again, and its estimate carries no warning
    free = search_cluster(_with(memory_headroom_fraction=0.0), 1024)
    assert free.feasible[i[0]]
    assert not [w for w in estimate(_with(NEAR_FULL, memory_headroom_fraction=0.0)).warnings if "headroom" in w]


def test_the_inputs_are_checked_with_a_message_naming_the_field():
    for training, field in (({"precision": "fp32", "accumulate_grads_in_fp32": False}, "training.accumulate_grads_in_fp32"),
                            ({"memory_headroom_fraction": 0.6}, "training.memory_headroom_fraction"),
                            ({"memory_headroom_fraction": -0.1}, "training.memory_headroom_fraction")):
        with pytest.raises(ScenarioError) as err:
            _with(**training)
        assert [f for f, _ in err.value.problems] == [field]


def test_the_weight_gradient_gemm_writes_the_gradient_bytes():
    # Llama 3.1 70B's MLP up-projection on one GPU: 8,192 tokens x 8,192 x 28,672, at 989 TFLOP/s and 3.35 TB/s
    tokens, k, n, flops, bw = 8192, 8192, 28672, 989e12, 3.35e12
    fwd32, bwd32 = linear_s(tokens, k, n, flops, bw, 2.0, 4.0)
    fwd16, bwd16 = linear_s(tokens, k, n, flops, bw, 2.0, 2.0)
    assert fwd32 == fwd16
    math = 2 * k * n * tokens / flops
    traffic = lambda g: (2.0 * (k * tokens + tokens * n) + g * k * n) / bw          # inputs 2 B, output g B
    wgrad = lambda g: (math ** 2 + traffic(g) ** 2) ** 0.5
    assert bwd32 - bwd16 == pytest.approx(wgrad(4.0) - wgrad(2.0), rel=1e-9)
    assert traffic(4.0) - traffic(2.0) == pytest.approx(2 * k * n / bw)              # 2 bytes more per weight


def test_the_data_parallel_reduction_carries_the_gradient_bytes():
    # plain data parallelism (ZeRO-0) of a 1.3B GPT (24 layers, h 2048) on 8 H100 with one 128-token micro-batch: the
    # gradient all-reduce outlasts the backward pass, so its exposed time is the all-reduce less the layers' backward
    # plus its last bucket, Megatron-Core's default max(40M, 1M x dp) = 40M parameters (the calls' latencies are the
    # same in both formats). fp32 gradients add 2 bytes per parameter to the all-reduce and to the last bucket, and
    # 2 bytes per weight to each weight-gradient GEMM's output, which lengthens the backward it hides behind
    model = gpt(24, 2048, 16)
    scenario = lambda acc: parse_scenario({
        "model": model, "training": {"seq_len": 128, "global_batch_size": 8, "total_tokens": 1e9,
                                     "accumulate_grads_in_fp32": acc},
        "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8}, "layout": {"tp": 1, "pp": 1, "dp": 8}})
    fp32, bf16 = estimate(scenario(True)), estimate(scenario(False))
    params, T, h = fp32.params_total, 128, 2048
    hw = resolve_hardware(scenario(True))
    k = members_per_node(np.array([1]), np.array([8]), hw.gpus_per_node)
    ar = lambda nbytes: float(all_reduce_s(nbytes, np.array([8]), k, hw)[0])
    f, bw = hw.matmul_flops, hw.hbm_bytes_per_s
    wgrad = lambda kk, n, g: ((2 * kk * n * T / f) ** 2 + ((2.0 * (kk * T + T * n) + g * kk * n) / bw) ** 2) ** 0.5
    gemms = [(h, 3 * h), (h, h), (h, 4 * h), (4 * h, h)]          # QKV, attention output, MLP in, MLP out
    longer_backward = 24 * sum(wgrad(kk, n, 4.0) - wgrad(kk, n, 2.0) for kk, n in gemms)
    expected = ar(4.0 * params) - ar(2.0 * params) + ar(4.0 * 40e6) - ar(2.0 * 40e6) - longer_backward
    assert fp32.time_breakdown_s["dp_comm"] - bf16.time_breakdown_s["dp_comm"] == pytest.approx(expected, rel=1e-9)
    assert ar(4.0 * params) - ar(2.0 * params) > 0.01              # 2.6 GB more over NVLink: about 12.5 ms
