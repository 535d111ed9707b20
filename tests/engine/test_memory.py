"""Memory per GPU against independently computed values: the ZeRO paper and Korthikanti et al. 2022."""
import pytest

from engine.planning.estimate import estimate
from engine.physics.hardware import GIB
from engine.physics.layouts import Layouts
from engine.physics.memory import bytes_per_element, layer_activation_bytes
from engine.physics.model import shape_of
from engine.scenario import Layout, Training
from tests.engine.helpers import gpt, parse


def _states_gb(zero_stage, grads_in_fp32=False):
    # Megatron-LM's 7.5B configuration of Narayanan et al. Table 1 (h 4096, 36 layers), on 64 GPUs of pure data parallelism
    sc = parse(**{"model": gpt(36, 4096, 32), "training.global_batch_size": 512, "cluster.n_gpus": 64,
                  "cluster.accelerator": "A100-SXM4-80GB", "training.accumulate_grads_in_fp32": grads_in_fp32,
                  "layout": {"tp": 1, "pp": 1, "dp": 64, "micro_batch_size": 8, "zero_stage": zero_stage}})
    est = estimate(sc)
    m = est.memory_gib
    states = (m.weights + m.gradients + m.optimizer_states) * GIB / 1e9
    return states, shape_of(sc.arch).total_params()


@pytest.mark.parametrize("stage,bytes_per_param,paper_gb", [
    # Rajbhandari et al. 2020, Fig. 1: Psi = 7.5B, N_d = 64, K = 12
    (0, 16.0, 120.0), (1, 4 + 12 / 64, 31.4), (2, 2 + 14 / 64, 16.6), (3, 16 / 64, 1.9),
])
def test_zero_paper_model_states(stage, bytes_per_param, paper_gb):
    # the paper's convention: 16-bit gradients
    states_gb, params = _states_gb(stage)
    assert states_gb == pytest.approx(bytes_per_param * params / 1e9, abs=0.002)   # three outputs rounded to 1 MiB
    # the paper's figure for exactly 7.5B parameters; this GPT has 7.5B within 2%
    assert states_gb * 7.5e9 / params == pytest.approx(paper_gb, rel=0.02)


@pytest.mark.parametrize("stage,bytes_per_param", [
    # Megatron-LM docs/source/api-guide/dist_optimizer.md: bf16 parameters with fp32 gradients take 18 bytes per
    # parameter with the plain optimizer and 6 + 12/d with the distributed optimizer (ZeRO-1: gradients kept whole)
    (0, 18.0), (1, 6 + 12 / 64),
])
def test_megatron_distributed_optimizer_bytes_with_fp32_gradients(stage, bytes_per_param):
    states_gb, params = _states_gb(stage, grads_in_fp32=True)
    assert states_gb == pytest.approx(bytes_per_param * params / 1e9, abs=0.002)


def test_gradients_are_16_bit_unless_fp32_accumulation_is_asked_for():
    # the tuned recipes reduce in 16 bits (Megatron-LM's Llama 3 example passes --grad-reduce-in-bf16); fp32 training
    # has fp32 gradients; --accumulate-allreduce-grads-in-fp32 makes them 4 bytes
    for precision, default in (("bf16", 2.0), ("fp8", 2.0), ("fp16", 2.0), ("fp32", 4.0)):
        assert bytes_per_element(parse(**{"training.precision": precision}).training)["grad"] == default
    for precision in ("bf16", "fp16", "nvfp4"):
        assert bytes_per_element(parse(**{"training.precision": precision, "cluster.accelerator": "B200-SXM-180GB",
                                          "training.accumulate_grads_in_fp32": True}).training)["grad"] == 4.0


@pytest.mark.parametrize("zero_stage,shards", [(0, 1), (1, 1), (2, 8), (3, 8)])
def test_fp32_gradients_add_two_bytes_per_parameter_held(zero_stage, shards):
    # Llama 3.1 8B on one node of 8: 8,030,261,248 parameters (Llama 3 paper: 8B); fp32 instead of bf16 gradients
    # add 2 bytes per parameter, kept whole up to ZeRO-1 and split over the 8 data-parallel ranks from ZeRO-2
    params = 8_030_261_248
    mem = {acc: estimate(parse(**{"training.accumulate_grads_in_fp32": acc, "layout.zero_stage": zero_stage})).memory_gib.model_dump()
           for acc in (True, False)}
    assert shape_of(parse().arch).total_params() == params
    assert (mem[True]["gradients"] - mem[False]["gradients"]) * GIB == pytest.approx(2 * params / shards, abs=2**20)
    for part in ("weights", "optimizer_states", "activations"):
        assert mem[True][part] == mem[False][part]


S, B, H, A, L = 2048, 1, 12288, 96, 96     # GPT-3 175B shapes, as in Korthikanti et al. Table 2


def _layer_bytes(t=1, sp=False, rc="none"):
    from engine.physics.model import ModelArch
    shape = shape_of(ModelArch(**gpt(L, H, A)))
    tr = Training(seq_len=S, global_batch_size=64, total_tokens=1e9, attention="standard")
    lay = Layouts.of([Layout(tp=t, dp=1, micro_batch_size=B, sequence_parallel=sp, recompute=rc)])
    return float(layer_activation_bytes(shape, tr, lay, moe=False)[0])


@pytest.mark.parametrize("t,sp,rc,expected", [
    (1, False, "none", S * B * H * (34 + 5 * A * S / H)),                  # no parallelism
    (8, False, "none", S * B * H * (10 + 24 / 8 + 5 * A * S / (H * 8))),   # tensor parallel
    (8, True, "none", S * B * H / 8 * (34 + 5 * A * S / H)),               # + sequence parallel
    (8, True, "selective", 34 * S * B * H / 8),                            # + selective recompute
    (1, False, "full", 2 * S * B * H),                                     # full recompute keeps the layer input
])
def test_korthikanti_activation_formulas(t, sp, rc, expected):
    assert _layer_bytes(t, sp, rc) == pytest.approx(expected, rel=1e-9)


def test_first_pipeline_stage_holds_p_microbatches():
    # Korthikanti sec. 4.2: with 1F1B the first stage keeps p micro-batches of L/p layers, i.e. L layers' worth
    sc = parse(**{"model": gpt(L, H, A), "cluster.accelerator": "A100-SXM4-80GB", "cluster.n_gpus": 64,
                  "training.seq_len": S, "training.global_batch_size": 64, "training.attention": "standard",
                  "layout": {"tp": 8, "pp": 8, "dp": 1, "micro_batch_size": 1, "sequence_parallel": True,
                             "recompute": "selective"}})
    est = estimate(sc)
    per_layer = 34 * S * B * H / 8
    embedding_output = S * B * H * 2 / 8 * 8          # first stage also keeps the embedding output per micro-batch
    assert est.worst_stage == "first"
    assert est.memory_gib.activations * GIB == pytest.approx(L * per_layer + embedding_output, rel=1e-4)


def test_fits_flag_against_capacity():
    big = estimate(parse(**{"model.preset": "llama3.1-70b", "layout": {"tp": 1, "pp": 1, "dp": 8}}))
    assert not big.fits and big.memory_gib.total > big.memory_capacity_gib
    # 8B with plain data parallelism needs 16 B/param = 128 GB of model states; ZeRO-3 over 8 GPUs brings it to 16 GB
    assert not estimate(parse()).fits
    sharded = estimate(parse(**{"layout.zero_stage": 3}))
    assert sharded.fits and sharded.memory_gib.total < 80


def test_memory_components_sum_to_total():
    est = estimate(parse(**{"layout": {"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 2, "zero_stage": 1}}))
    m = est.memory_gib
    assert m.weights + m.gradients + m.optimizer_states + m.activations + m.other == pytest.approx(m.total, abs=0.01)


def test_moe_expert_parallel_divides_expert_weights():
    base = {"model.preset": "mixtral-8x7b", "cluster.n_gpus": 8, "training.global_batch_size": 64}
    one = estimate(parse(**base, layout={"tp": 1, "dp": 8, "ep": 1, "zero_stage": 1}))
    eight = estimate(parse(**base, layout={"tp": 1, "dp": 8, "ep": 8, "zero_stage": 1}))
    expert_params = 32 * 8 * 3 * 4096 * 14336
    saved = (one.memory_gib.weights - eight.memory_gib.weights) * GIB
    assert saved == pytest.approx(2 * expert_params * (1 - 1 / 8), rel=1e-6)


# --- micro-batches in flight per pipeline stage ------------------------------------------------------------------
# The counting below replays Megatron-LM's loop (megatron/core/pipeline_parallel/schedules.py,
# forward_backward_pipelining_with_interleaving: a warm-up of forwards, then one forward and one backward in turn,
# then the remaining backwards), keeping per chunk the list of micro-batches whose activations are alive, as the
# schedule keeps input_tensors/output_tensors; the engine computes the same peak from cumulative sums.

def replay_peak_layers(chunks, p, rank, m):
    """Most layer-micro-batches alive on stage `rank` when its v chunks hold `chunks` layers (m micro-batches)."""
    v = len(chunks)
    table = []                                          # get_schedule_table: groups of p micro-batches, chunk by chunk
    for start in range(0, m, p):
        table += [c for c in range(v) for _ in range(start, min(start + p, m))]
    total = m * v
    warmup = (p - rank - 1) if v == 1 else 2 * (p - rank - 1) + (v - 1) * p
    warmup = min(warmup, total)
    alive = [[] for _ in range(v)]
    peak = 0
    held = lambda: sum(len(a) * chunks[c] for c, a in enumerate(alive))

    def forward(k):
        alive[table[k]].append(k)

    def backward(k):
        alive[v - 1 - table[k]].pop(0)

    for k in range(warmup):
        forward(k)
        peak = max(peak, held())
    for k in range(total - warmup):
        forward(k + warmup)
        peak = max(peak, held())
        backward(k)
    return peak


@pytest.mark.parametrize("p,v,m,expected", [
    # 1F1B (Narayanan et al. 2021 sec. 2.2, PipeDream-Flush): stage r keeps p - r micro-batches, at most m
    (4, 1, 8, [4, 3, 2, 1]),
    (4, 1, 2, [2, 2, 2, 1]),
    # interleaved, 2 chunks on 4 stages, 8 micro-batches (the paper's Figure 4): chunks alive per stage
    (4, 2, 8, [11, 9, 7, 5]),
    # 4 micro-batches on 4 stages: stages 0 and 1 run all 8 forwards before their first backward (a warm-up of 10 and
    # 8 capped at m*v = 8), stages 2 and 3 warm up with 6 and 4 and then alternate
    (4, 2, 4, [8, 8, 7, 5]),
])
def test_in_flight_hand_counted(p, v, m, expected):
    from engine.physics.schedule import peak_layers_in_flight
    ones = (1,) * v
    assert [replay_peak_layers(ones, p, r, m) for r in range(p)] == expected
    assert [peak_layers_in_flight(ones, p, r, m) for r in range(p)] == expected


@pytest.mark.parametrize("p,v", [(4, 2), (8, 3), (16, 8), (12, 5)])
def test_first_stage_matches_korthikanti_interleaving_factor(p, v):
    # Korthikanti et al. 2022 sec. 4.2.3: the first stage of the interleaved schedule holds p(1 + (p-1)/(pv))
    # micro-batches of its layers, i.e. v*p + p - 1 chunks, once there are enough micro-batches (here 2p)
    from engine.physics.schedule import peak_layers_in_flight
    assert peak_layers_in_flight((1,) * v, p, 0, 2 * p) == pytest.approx(v * p * (1 + (p - 1) / (p * v)))


@pytest.mark.parametrize("chunks,p,m", [((0, 1, 1, 1), 4, 8), ((1, 1, 1, 0), 4, 12), ((2, 3), 3, 7), ((0,) + (1,) * 7, 16, 32),
                                         ((1,) * 7 + (0,), 16, 32), ((4, 5, 5), 6, 18), ((1,), 5, 3)])
def test_engine_peak_matches_the_replayed_schedule(chunks, p, m):
    from engine.physics.schedule import peak_layers_in_flight
    for rank in range(p):
        assert peak_layers_in_flight(chunks, p, rank, m) == replay_peak_layers(chunks, p, rank, m)


def test_llama3_405b_second_stage_is_the_heaviest():
    # Dubey et al. 2024 sec. 3.3.2: 126 layers on 16 stages, 7 on the first and last, 8 chunks of one layer (the first
    # stage's first chunk is the embedding alone, the last stage's last chunk the output layer alone). Hand count with
    # 32 micro-batches (8,192 GPUs, DP 64, 32 sequences per DP rank):
    #   stage 1 (8 layers): 2*(16-1-1) + (8-1)*16 = 140 warm-up forwards, + 1 = 141 one-layer chunks alive
    #   stage 0 (7 layers): 143 chunks alive at the end of warm-up, 31 of them the empty chunk 0: 7 x 16 = 112 layers
    #   stage 15 (7 layers): 113 chunks alive at the end of warm-up, 16 of each one-layer chunk and one empty chunk 7
    #   (112 layers); its 16th backward frees an empty chunk while the next group's first forward adds a layer: 113
    from engine.physics.schedule import chunk_layers, peak_layers_in_flight
    assert peak_layers_in_flight(chunk_layers(8, 8, "middle"), 16, 1, 32) == 141
    assert peak_layers_in_flight(chunk_layers(7, 8, "first"), 16, 0, 32) == 112
    assert peak_layers_in_flight(chunk_layers(7, 8, "last"), 16, 15, 32) == 113
    sc = parse(**{"model": None, "model.preset": "llama3.1-405b", "training.seq_len": 8192,
                  "training.global_batch_size": 64 * 32, "cluster.n_gpus": 8192,
                  "layout": {"tp": 8, "pp": 16, "dp": 64, "virtual_stages": 8, "first_stage_layers": 7,
                             "last_stage_layers": 7, "sequence_parallel": True, "zero_stage": 2}})
    est = estimate(sc)
    per_layer = float(layer_activation_bytes(shape_of(sc.arch), sc.training, Layouts.of([sc.layout]), moe=False)[0])
    assert est.worst_stage == "middle"
    assert est.memory_gib.activations * GIB == pytest.approx(141 * per_layer, rel=1e-3)   # rounded to 1 MiB


def test_search_prices_memory_at_the_same_per_stage_peak():
    # the layout search's fit test reads the same heaviest stage: Meta's 8,192-GPU layout is among its candidates with
    # the second stage's 141 chunks, and is refused for memory exactly when the single estimate does not fit
    import numpy as np
    from engine.planning.search import MEMORY_REASON, search_cluster
    layout = {"tp": 8, "pp": 16, "dp": 64, "virtual_stages": 8, "first_stage_layers": 7, "last_stage_layers": 7,
              "sequence_parallel": True, "zero_stage": 2}
    sc = parse(**{"model": None, "model.preset": "llama3.1-405b", "training.seq_len": 8192,
                  "training.global_batch_size": 64 * 32, "cluster.n_gpus": 8192, "layout": layout})
    est = estimate(sc)
    cs = search_cluster(sc, 8192)
    lay = cs.layouts
    i = np.flatnonzero((lay.tp == 8) & (lay.pp == 16) & (lay.dp == 64) & (lay.cp == 1) & (lay.v == 8) & (lay.first == 7)
                       & (lay.last == 7) & (lay.mbs == 1) & (lay.zero == 2) & (lay.rc == 0))
    assert len(i) == 1
    assert cs.ev["mem_total"][i[0]] / GIB == pytest.approx(est.memory_gib.total, abs=1e-3)
    assert cs.ev["worst_stage"][i[0]] == 1 and est.worst_stage == "middle"
    assert (cs.reasons[cs.reason[i[0]]] == MEMORY_REASON) == (not est.fits)
