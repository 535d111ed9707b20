"""The physics behind the search's answers, each checked against an independent calculation or a published figure:
pipeline idle time for any micro-batch count, collective latency by scale, priced overlap, ZeRO-3 at a fixed batch,
MoE all-to-all per network interface, matmul efficiency by shape, FLOP conventions, uneven stages and expert
folding (the layouts the issue names), and the whole run beyond its steps."""
import numpy as np
import pytest

from engine.catalog import load_catalog
from engine.physics.comm import all_gather_s, all_to_all_s, overlapped_s
from engine.planning.estimate import context, estimate
from engine.physics.hardware import resolve_hardware
from engine.physics.kernels import gemm_s
from engine.inputs import parse_scenario
from engine.scenario import PRECISION_DTYPE, ScenarioError
from engine.physics.layout_rules import virtual_stage_options
from engine.physics.model import busiest_rank_load, shape_of
from engine.physics.schedule import SplitError, pipeline_slots, split_options, stage_layers
from engine.planning.search import _best_json as best_layout_cache, search   # the cache behind best_at
from engine.physics.steptime import OVERLAP_SLOWDOWN, zero3_calls
from tests.engine.helpers import gpt

H100 = {"accelerator": "H100-SXM5-80GB"}


def _est(model, n, layout, seq=4096, gbs=1024, accelerator="H100-SXM5-80GB", **training):
    return estimate(parse_scenario({"model": model, "training": {"seq_len": seq, "global_batch_size": gbs,
                                                                 "total_tokens": 1e12, **training},
                                    "cluster": {"accelerator": accelerator, "n_gpus": n}, "layout": layout}))


# --- pipeline schedule -------------------------------------------------------------------------------------------

def test_slots_match_the_1f1b_and_interleaved_formulas():
    pp, v, m = np.array([4, 4, 4, 2, 16]), np.array([1, 1, 3, 63, 8]), np.array([16, 1, 16, 1, 16])
    # 1F1B: m + p - 1; one micro-batch: v*p (each GPU busy v of them); interleaved m >= p: v*m + p - 1
    assert pipeline_slots(pp, v, m).tolist() == [19, 4, 51, 126, 143]


def test_one_micro_batch_on_two_stages_idles_half_the_step_even_interleaved():
    # Llama 3.1 405B's earlier search pick: pp2, 63 virtual stages, one micro-batch per step
    for v in (1, 63):
        e = _est({"preset": "llama3.1-405b"}, 16384, {"tp": 4, "pp": 2, "dp": 2048, "virtual_stages": v, "zero_stage": 3,
                                                      "sequence_parallel": True}, seq=8192, gbs=2048)
        b = e.time_breakdown_s
        busy = sum(b[k] for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero3_comm"))
        # each GPU works its stage's share and waits for the other stage as long: bubble = average stage time
        assert b["pipeline_bubble"] == pytest.approx(busy, rel=0.02)
    one, many = (_est({"preset": "llama3.1-405b"}, 16384, {"tp": 4, "pp": 2, "dp": 2048, "virtual_stages": v,
                                                           "zero_stage": 3, "sequence_parallel": True},
                      seq=8192, gbs=2048).time_breakdown_s["pp_comm"] for v in (1, 63))
    assert many == pytest.approx(one * 126 / 2, rel=1e-6)        # point-to-point crossings grow with the slots


def test_no_phantom_imbalance_without_a_pipeline():
    e = _est({"preset": "deepseek-v3"}, 64, {"tp": 8, "dp": 8, "ep": 8, "zero_stage": 1, "sequence_parallel": True,
                                            "recompute": "full"}, gbs=64)
    assert e.time_breakdown_s["pipeline_imbalance"] == 0 and e.time_breakdown_s["pipeline_bubble"] == 0


# --- collectives and overlap -------------------------------------------------------------------------------------

def test_ring_latency_follows_nccls_tuning_model():
    hw = resolve_hardware(parse_scenario({"model": {"preset": "llama3.1-8b"},
                                          "training": {"seq_len": 4096, "global_batch_size": 384, "total_tokens": 1e12},
                                          "cluster": {**H100, "n_gpus": 384}}))
    # NCCL 2.19 tuning.cc, ring Simple: 8.4 us base + (383 - 47) x 3.4 us NVLink steps + 47 x 14 us network steps
    expected = 8.4e-6 + 336 * 3.4e-6 + 47 * 14e-6
    assert float(all_gather_s(np.array(8.0), np.array(384), np.array(8), hw)) == pytest.approx(expected, rel=1e-3)


def test_overlap_has_a_price_and_exposes_what_outlasts_the_compute():
    window, exposed = overlapped_s(np.array([1.0, 1.0]), np.array([0.5, 2.0]), OVERLAP_SLOWDOWN)
    assert exposed[0] == pytest.approx(0.5 * 0.189)      # hidden, but the compute ran 18.9% slower beside it
    assert exposed[1] == pytest.approx(1.0)               # the collective outlasts the compute


def test_all_to_all_leaves_through_each_gpus_own_nic():
    hw = resolve_hardware(parse_scenario({"model": {"preset": "mixtral-8x7b"},
                                          "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 1e12},
                                          "cluster": {**H100, "n_gpus": 16}}))
    nbytes = 1e9
    t = float(all_to_all_s(np.array(nbytes), np.array(16), np.array(8), hw))
    # half of the data leaves the node through one 400 Gb/s NIC (45 GB/s achievable), not the node's eight
    assert t == pytest.approx(hw.collective_base_latency_s + hw.inter_latency_s + 0.5 * nbytes / hw.inter_busbw, rel=1e-9)
    assert hw.inter_busbw == pytest.approx(45e9)


def test_zero3_at_a_fixed_batch_is_bound_by_its_gathers_once_compute_shrinks():
    # GPT-3 175B, FSDP over every GPU, one sequence per GPU: the per-GPU gather volume stays 3 x 350 GB per step
    # while the per-GPU compute halves with each doubling; on a 200 Gb/s-per-node network the run is bound by it
    def per_gpu(n, net_gbs):
        e = estimate(parse_scenario({"model": {"preset": "gpt3-175b"},
                                     "training": {"seq_len": 2048, "global_batch_size": 1024, "total_tokens": 3e11},
                                     "cluster": {"accelerator": "A100-SXM4-80GB", "n_gpus": n,
                                                 "inter_node_bw_gbs": net_gbs},
                                     "layout": {"dp": n, "zero_stage": 3, "recompute": "full",
                                                "micro_batch_size": 1024 // n}}))
        return e.tokens_per_s / n, e.time_breakdown_s["zero3_comm"] / e.step_time_s
    slow = [per_gpu(n, 3.125) for n in (256, 512, 1024)]
    assert slow[1][0] / slow[0][0] < 0.7 and slow[2][0] / slow[1][0] < 0.7     # near-halving per doubling
    fast = [per_gpu(n, None) for n in (256, 1024)]
    assert fast[1][1] > fast[0][1]                                              # exposure grows even on DGX networking


def _a100_scenario(n, framework="deepspeed", model="llama2-13b"):
    return parse_scenario({"model": {"preset": model},
                           "training": {"seq_len": 2048, "global_batch_size": n, "total_tokens": 1e11,
                                        "framework": framework},
                           "cluster": {"accelerator": "A100-SXM4-80GB", "n_gpus": n},
                           "layout": {"dp": n, "zero_stage": 3, "recompute": "full", "micro_batch_size": 1}})


def test_every_call_of_a_ring_collective_pays_the_ring_latency():
    # NCCL's ring over 384 A100 in 48 nodes of 8 (DGX A100: NVLink 3 step 3.4 us, HDR network step 14 us, 8.4 us
    # base): 383 steps, 47 of them across nodes = 8.4 + 336 x 3.4 + 47 x 14 = 1808.8 us per call; seven calls of the
    # same bytes cost six more latencies than one
    hw = resolve_hardware(_a100_scenario(384))
    n, k, nbytes = np.array([384]), np.array([8]), np.array([2e8])
    one = all_gather_s(nbytes, n, k, hw)
    assert float(all_gather_s(0.0 * nbytes, n, k, hw)[0]) == pytest.approx(1808.8e-6)
    assert float((all_gather_s.on(n, k, hw).in_calls_s(nbytes, 7.0) - one)[0]) == pytest.approx(6 * 1808.8e-6)


def test_deepspeed_zero3_gathers_by_prefetch_bucket_and_reduces_by_reduce_bucket():
    # Llama 3.1 8B layer: q, o 4096 x 4096, k, v 4096 x 1024, three 4096 x 14336 MLP matrices = 218.1M parameters.
    # DeepSpeed's defaults (stage3_prefetch_bucket_size 5e7, reduce_bucket_size 5e8): ceil(218.1 / 50) = 5 gathers,
    # 0.436 reductions per layer; Llama 2 70B's 855.6M-parameter layer would need 18 buckets but has 7 matrices
    layer_8b = 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    layer_70b = 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672
    hw = resolve_hardware(_a100_scenario(8))
    gathers, reductions = zero3_calls(hw, np.array([layer_8b, layer_70b]), np.array([7, 7]))
    assert list(gathers) == [5, 7]
    assert reductions == pytest.approx([0.4362, 1.7113], rel=1e-3)
    fsdp = resolve_hardware(_a100_scenario(8, "pytorch_fsdp2"))
    assert [list(c) for c in zero3_calls(fsdp, np.array([layer_8b]), np.array([7]))] == [[1.0], [1.0]]     # one unit


def test_deepspeed_zero3_at_thousands_of_ranks_is_bound_by_its_gather_latency():
    # Llama 2 13B (40 layers of 7 matrices, each under 5e7 parameters apart from the MLP's, ceil(317M / 5e7) = 7
    # gathers) over 2,240 A100 in 280 nodes: each gather call costs 8.4 + (2239 - 279) x 3.4 + 279 x 14 = 10578.4 us
    # before any byte moves; forward and backward gather every layer, 14 calls of it, which no compute of the step can
    # hide: the exposed ZeRO-3 time is at least 40 x 14 x 10.58 ms less all the compute there is to hide behind
    e = estimate(_a100_scenario(2240))
    bd = e.time_breakdown_s
    assert bd["zero3_comm"] >= 40 * 14 * 10578.4e-6 - (bd["compute"] + bd["recompute"])
    assert bd["zero3_comm"] > bd["compute"]


# --- compute -----------------------------------------------------------------------------------------------------

def test_matmul_efficiency_by_shape():
    f, bw = 794.5e12, 3.015e12
    rate = lambda m, n, k: 2 * m * n * k / float(gemm_s(m, n, k, f, bw, 2.0)) / f
    assert rate(6144, 17920, 2816) > 0.98            # the H100's best measured shape runs at the measured rate
    assert rate(8192, 8192, 1024) > 0.93
    assert rate(64, 4096, 7168) < 0.3                # a small expert's tokens: bound by reading its weights


def test_causal_mfu_counts_half_the_square_and_stays_physical_at_long_context():
    # a 26B model (48 layers, h 6144) at 128k tokens with context parallelism
    e = _est(gpt(48, 6144, 48, vocab=128000, seq=131072) | {"learned_position_embeddings": 0, "dropout": False},
             64, {"tp": 8, "cp": 8, "dp": 1, "sequence_parallel": True, "recompute": "full"}, seq=131072, gbs=8)
    s, h = 131072, 6144
    attention_share_full = 4 * s * h / (24 * h * h + 4 * s * h)          # of a layer's forward FLOPs, full square
    assert e.mfu_full_square / e.mfu == pytest.approx((1) / (1 - attention_share_full / 2), rel=0.03)
    assert e.mfu < 0.75 and e.hfu > e.mfu


# --- layouts real runs use ---------------------------------------------------------------------------------------

def test_uneven_splits_are_expressible_and_suggested():
    assert stage_layers(126, 16, 4, 7, 7) == (7, 8, 7)                    # Llama 3 405B, interleaved
    # Llama 3 405B as Meta ran it (Dubey et al. 2024 sec. 3.3.2): one layer per chunk, so the first stage's first
    # chunk is the embedding alone and the last stage's last chunk the output layer and loss alone
    assert stage_layers(126, 16, 8, 7, 7) == (7, 8, 7)
    assert virtual_stage_options(126, 16, 7, 7) == [1, 2, 4, 8]
    with pytest.raises(SplitError):
        stage_layers(126, 16, 8, 6, 8)                                     # 6 layers cannot fill 7 of 8 chunks
    assert stage_layers(70, 12, 1, 5, 5) == (5, 6, 5)                      # BLOOM 176B
    assert (11, 11) in split_options(94, 8)                                # Qwen3-235B-A22B
    with pytest.raises(ScenarioError) as info:
        parse_scenario({"model": {"preset": "qwen3-235b-a22b"},
                        "training": {"seq_len": 4096, "global_batch_size": 1024, "total_tokens": 1e12},
                        "cluster": {**H100, "n_gpus": 256}, "layout": {"tp": 2, "pp": 8, "dp": 16}})
    assert "first_stage_layers=11, last_stage_layers=11" in str(info.value)


@pytest.mark.parametrize("case", [
    ("llama3.1-405b", "H100-SXM5-80GB", 16384, 8192, 2048,
     {"tp": 8, "pp": 16, "dp": 128, "virtual_stages": 4, "first_stage_layers": 7, "last_stage_layers": 7,
      "zero_stage": 1, "sequence_parallel": True, "tp_comm_overlap": True, "recompute": "full"}),
    ("bloom", "A100-SXM4-80GB", 384, 2048, 2048,
     {"tp": 4, "pp": 12, "dp": 8, "micro_batch_size": 2, "first_stage_layers": 5, "last_stage_layers": 5,
      "zero_stage": 1, "sequence_parallel": True}),
    ("deepseek-v3", "H800-SXM-80GB", 2048, 4096, 15360,
     {"pp": 16, "dp": 128, "ep": 64, "first_stage_layers": 4, "last_stage_layers": 1, "zero_stage": 1,
      "recompute": "full"}),
    ("qwen3-235b-a22b", "H100-SXM5-80GB", 256, 4096, 1024,
     {"tp": 2, "pp": 8, "dp": 16, "ep": 32, "expert_tp": 1, "first_stage_layers": 11, "last_stage_layers": 11,
      "zero_stage": 1, "sequence_parallel": True, "recompute": "full"}),
], ids=["llama3-405b-tp8pp16", "bloom-176b-tp4pp12", "deepseek-v3-pp16ep64", "qwen3-235b-tp2pp8ep32"])
def test_published_layouts_are_accepted_and_estimated(case):
    preset, acc, n, seq, gbs, layout = case
    # BLOOM 176B (BigScience 2022): 70 layers, hidden 14336, 112 heads, vocabulary 250,880, tied embeddings
    model = ({"n_layers": 70, "hidden_size": 14336, "n_heads": 112, "ffn_hidden_size": 57344, "vocab_size": 250880,
              "ffn_type": "gelu", "tied_embeddings": True} if preset == "bloom" else {"preset": preset})
    e = _est(model, n, layout, seq=seq, gbs=gbs, accelerator=acc, precision="fp8" if "H800" in acc else "bf16")
    assert e.step_time_s > 0 and 0 < e.mfu < 0.75
    if preset == "qwen3-235b-a22b":
        assert layout["ep"] > layout["dp"]                                 # experts folded over tp x dp ranks
    if preset in ("llama3.1-405b", "bloom"):
        assert e.fits


def test_mfu_stays_physical_on_every_accelerator():
    cat = load_catalog()
    worst = 0.0
    for acc in cat.accelerators.values():
        precisions = [p for p in ("bf16", "fp8", "nvfp4") if acc.peak(PRECISION_DTYPE[p])]
        if not precisions:
            continue                                  # no published peak (Apple): refused with a message elsewhere
        n = acc.gpus_per_node * (8 if acc.gpus_per_node < 72 else 1)
        for preset, seq, gbs in (("llama3.1-8b", 4096, 512), ("gpt3-175b", 2048, 1536)):
            try:
                out = search(parse_scenario({"model": {"preset": preset},
                                             "training": {"seq_len": seq, "global_batch_size": gbs,
                                                          "total_tokens": 1e12, "precision": precisions[-1]},
                                             "cluster": {"accelerator": acc.id, "n_gpus": n}}), top=1, pareto_sizes=[])
            except ScenarioError:
                continue
            if out.best:
                worst = max(worst, out.best[0].mfu, out.best[0].mfu_full_square)
    assert 0.3 < worst < 0.75


# --- the whole run -----------------------------------------------------------------------------------------------

def test_whole_run_adds_evaluation_and_phases():
    base = {"model": {"preset": "llama3.1-8b"}, "training": {"seq_len": 4096, "global_batch_size": 512,
                                                            "total_tokens": 1e12}, "cluster": {**H100, "n_gpus": 64},
            "layout": {"dp": 64, "micro_batch_size": 1, "zero_stage": 1}}
    e = estimate(parse_scenario(base))
    w = e.whole_run
    assert w["evaluation_days"] == pytest.approx(w["steps_days"] * 100 / 1000 / 3)    # Megatron-LM's defaults
    phased_schedule = {"phases": [{"name": "long context", "tokens": 1e11, "seq_len": 32768, "global_batch_size": 64}]}
    phased = estimate(parse_scenario(base | {"schedule": phased_schedule}))
    p = phased.whole_run["phases"][0]
    assert p["seconds"] > 0 and p["layout"]["cp"] * p["layout"]["tp"] >= 1
    assert phased.whole_run["steps_days"] == pytest.approx(w["steps_days"] * 0.9)   # the rest at the main setup
    with pytest.raises(ScenarioError):
        parse_scenario(base | {"schedule": {"phases": [{"name": "too long", "tokens": 2e12}]}})
    assert context(parse_scenario(base)).run.phase_s == 0
    # the phase's layout search is the search's cached best layout: another layout of the same run searches nothing
    before = best_layout_cache.cache_info()
    other = estimate(parse_scenario(base | {"layout": {"dp": 64, "micro_batch_size": 2, "zero_stage": 1},
                                            "schedule": phased_schedule}))
    after = best_layout_cache.cache_info()
    assert after.misses == before.misses and after.hits == before.hits + 1
    assert other.whole_run["phases"] == phased.whole_run["phases"]


def test_the_busiest_expert_parallel_rank_carries_the_hot_expert_and_its_share_of_the_rest():
    shape = shape_of(load_catalog().models["qwen3-30b-a3b"].arch)            # 128 experts
    assert busiest_rank_load(shape, 2.0, 128) == 2.0                        # one expert per rank: its own load
    assert abs(busiest_rank_load(shape, 2.0, 1) - 1.0) < 1e-12              # every expert on one rank: the mean
    # 16 local experts: (2 + 15 x (128 - 2) / 127) / 16, the other 127 sharing the remaining 126 expert-loads
    assert abs(busiest_rank_load(shape, 2.0, 8) - (2 + 15 * 126 / 127) / 16) < 1e-12
    assert busiest_rank_load(shape, 1.0, 8) == 1.0


def test_an_unbalanced_router_slows_and_fills_the_busiest_rank():
    # Mixtral 8x7B with one expert per GPU (ep 8): the busiest rank receives twice the mean's token copies at
    # ratio 2, so its all-to-all moves twice the bytes (the latency stays) and its expert activations double
    data = {"model": {"preset": "mixtral-8x7b"}, "training": {"seq_len": 4096, "global_batch_size": 64,
                                                            "total_tokens": 1e9},
            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
            "layout": {"dp": 8, "ep": 8, "micro_batch_size": 1, "zero_stage": 1, "recompute": "full"}}
    balanced = estimate(parse_scenario(data))
    hot = estimate(parse_scenario(data | {"training": data["training"] | {"expert_load_ratio": 2.0}}))
    ratio = hot.time_breakdown_s["ep_comm"] / balanced.time_breakdown_s["ep_comm"]
    assert 1.9 < ratio <= 2.0
    assert hot.time_breakdown_s["compute"] > 1.3 * balanced.time_breakdown_s["compute"]   # experts are most of it
    assert hot.memory_gib.total > balanced.memory_gib.total
    assert hot.tokens_per_s < balanced.tokens_per_s and hot.mfu < balanced.mfu
