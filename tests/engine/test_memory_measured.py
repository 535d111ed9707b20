"""Memory against measured peaks: TorchTitan's published peaks on H100 (torch.cuda.max_memory_reserved; Dec 2024,
tests/data/public-validation-cases.json `torchtitan_2024_12_cases`) and the FSDP2 terms behind them, checked against
hand counts from the PyTorch and TorchTitan sources (engine/physics/memory.py cites each)."""
import statistics

import pytest

from engine.inputs import parse_scenario
from engine.physics.hardware import GIB
from engine.physics.memory import allocator_reserve_fraction
from engine.planning.estimate import estimate
from tests.engine.published_runs import reserve_left_out, torchtitan_memory

RUNS = torchtitan_memory()
LLAMA3_8B_PARAMS = 8_030_261_248          # Llama 3 paper: 8B (tests/engine/test_memory.py checks the count)


def _errors() -> dict[str, float]:
    return {r.name: r.predicted_reserved_gib() / r.measured_gib - 1 for r in RUNS}


def test_the_allocator_reserve_is_gmlakes_measured_gap():
    # Guo et al. 2024 (GMLake): 9.2 GB of an 80 GB device reserved beyond need, i.e. 9.2 / 70.8 of the memory in use
    assert allocator_reserve_fraction() == pytest.approx(9.2 / 70.8, rel=1e-12)


def test_torchtitan_peaks_within_the_held_out_tolerance():
    # Nothing is fitted on these runs (the allocator's reserve is GMLake's): every one of the 18 peaks is held out.
    # Measured: median 1.2%, worst 10.2% (the 262k-token context-parallel 405B run); leaving one table out and
    # fitting the reserve on the others gives median 1.6%, worst 10.6% (scripts/memory_validation.py), so 13% is
    # what the check supports
    errors = _errors()
    assert len(errors) == 18
    assert statistics.median(abs(e) for e in errors.values()) < 0.03
    assert max(abs(e) for e in errors.values()) < 0.13, errors


def test_the_reserve_fitted_without_each_table_stays_near_gmlakes():
    # leave one table out: the reserve the other tables want lies between 8% and 17% of the live tensors, around
    # GMLake's 13.0%, and predicts the table left out within 13% (median under 10%)
    held = reserve_left_out(RUNS)
    assert set(held) == {"t1", "t2", "t3", "t4", "t5", "t6"}
    assert all(0.05 < fit < 0.2 for fit, _ in held.values())
    errs = [abs(e) for _, table in held.values() for e in table]
    assert statistics.median(errs) < 0.10 and max(errs) < 0.13


def _t1(name: str):
    return next(r for r in RUNS if r.name == name)


def test_fp8_under_fsdp2_keeps_no_unsharded_weight_copy():
    # TorchTitan Table 1, 8B on 8 H100 with FSDP2 + torch.compile: 77.0 GiB in bf16, 76.8 GiB with torchao float8.
    # torchao casts the gathered layer's weights per matmul and keeps no fp8 copy: the estimate adds only the current
    # and prefetched layer's 1-byte casts (2 x 218,112,000 parameters = 0.41 GiB), not the 7.5 GiB of an unsharded copy
    bf16, fp8 = _t1("tt24-t1-8b-8gpu-fsdp_compile"), _t1("tt24-t1-8b-8gpu-fsdp_compile_fp8")
    layer = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 14336
    added = fp8.predict().memory_gib.total - bf16.predict().memory_gib.total
    assert added * GIB == pytest.approx(2 * layer * 1.0 * 1.05, abs=2**21)   # + the 5% fragmentation allowance; GiB to 3 places
    assert added < 0.5 < LLAMA3_8B_PARAMS / GIB
    assert fp8.predicted_reserved_gib() == pytest.approx(fp8.measured_gib, rel=0.10)


def test_megatron_layouts_still_keep_their_fp8_weight_copy():
    # Transformer Engine keeps the FP8 copy of every local weight beside the 16-bit one (data/precisions.json fp8):
    # ZeRO-1 on 8 GPUs (Megatron's distributed optimizer) adds 1 byte per parameter
    base = {"model": {"preset": "llama3.1-8b"}, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
            "layout": {"tp": 1, "dp": 8, "zero_stage": 1}}
    w = {p: estimate(parse_scenario({**base, "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 1e12,
                                                            "precision": p}})).memory_gib.weights for p in ("bf16", "fp8")}
    assert (w["fp8"] - w["bf16"]) * GIB == pytest.approx(LLAMA3_8B_PARAMS, abs=2**21)


def test_fsdp2_model_states_are_sixteen_bytes_sharded_plus_the_gathered_root():
    # FSDP2 with MixedPrecisionPolicy(bf16, fp32): fp32 sharded parameter 4 + fp32 sharded gradient 4 + Adam 8 =
    # 16 bytes per parameter over the 8 ranks; the 16-bit copies exist gathered: two layers, one layer's gradients in
    # bf16 and fp32, and the root module (token embedding + output layer, 2 x 128256 x 4096, + the final norm)
    m = _t1("tt24-t1-8b-8gpu-fsdp").predict()
    states = (m.memory_gib.weights + m.memory_gib.gradients + m.memory_gib.optimizer_states) * GIB
    assert m.memory_gib.weights == 0
    assert states == pytest.approx(16 * LLAMA3_8B_PARAMS / 8, abs=2**20)
    layer = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 14336
    root = 2 * 128256 * 4096 + 4096
    assert m.memory_detail_gib["comm_buffers"] * GIB == pytest.approx(layer * (2 * 2 + 2 + 4) + 2 * root, abs=2**20)


def test_eager_cross_entropy_peak_is_three_fp32_copies_of_the_logits():
    # TorchTitan's loss: cross_entropy(pred.float()); its backward holds the saved fp32 log-softmax, the gradient in
    # and the gradient out: 12 bytes per logit, 16,384 tokens (2 x 8192) x 128,256 vocabulary
    m = _t1("tt24-t1-8b-8gpu-fsdp").predict()
    assert m.memory_detail_gib["logits"] * GIB == pytest.approx(16384 * 128256 * 12, abs=2**20)
    # under tensor parallelism (loss_parallel, 70B on TP 8) the decomposed log-softmax's forward holds the 16-bit
    # logits, the fp32 cast, the shifted logits and their exponential (14 bytes), and its decomposed backward
    # (_nll_loss_and_log_softmax_backward) the saved fp32 log-softmax, the zeroed gradient, exp() of the log-softmax
    # and their sum: 16 bytes per logit of the 1/8 vocabulary shard at the peak
    tp = _t1("tt24-t4-70b-256gpu-2d").predict()
    assert tp.memory_detail_gib["logits"] * GIB == pytest.approx(16 * 8192 * 128256 / 8 * 16, abs=2**20)


def test_per_op_selective_checkpointing_keeps_half_the_matmul_outputs():
    # TorchTitan's per-op policy on a Llama 3 8B block (tp 1): the block input (4096), the attention output (4096)
    # with its fp32 log-sum-exp (32 heads), and matmuls 1, 3, 5, 7 of wq, wk, wv, wo, w1, w3, w2: wq 4096, wv 1024,
    # w1 14336, w2 4096; 2 bytes each, 16,384 tokens, 32 layers (+ the embedding output of 4096 per token)
    m = _t1("tt24-t1-8b-8gpu-fsdp").predict()                      # eager: the policy's cache keeps all four
    per_token_layer = (4096 + 4096 + 4096 + 1024 + 14336 + 4096) * 2 + 32 * 4
    assert m.memory_gib.activations * GIB == pytest.approx(16384 * (32 * per_token_layer + 4096 * 2), abs=2**20)
    # compiled, w2's output is not kept (only the residual add reads it, and its backward reads no input): 4096 x 2
    # bytes less per token and layer, 4 GiB of the measured 5.4 GiB between the eager and compiled peaks (82.4, 77.0)
    compiled = _t1("tt24-t1-8b-8gpu-fsdp_compile").predict()
    assert (m.memory_gib.activations - compiled.memory_gib.activations) * GIB == pytest.approx(16384 * 32 * 4096 * 2,
                                                                                              abs=2**20)


def test_fsdp2_under_a_pipeline_keeps_the_stage_gathered_with_fp32_gradients():
    # torch.distributed.pipelining turns FSDP2's resharding after backward and gradient sync off until the last
    # micro-batch: the stage's 16-bit weights stay gathered and its gradients accumulate unsharded in fp32 (the
    # reduce dtype). 405B, TP 8 x PP 8 x FSDP 8, first stage of 15 layers + the embedding
    est = _t1("tt24-t5-405b-512gpu-1f1b").predict()
    h, ffn, kv = 16384, 53248, 8 * 128
    layer = (h * (h + 2 * kv + h) + 3 * h * ffn) / 8 + 2 * h
    local = 15 * layer + 128256 * h / 8
    assert est.worst_stage == "first"
    assert est.memory_gib.weights * GIB == pytest.approx(2 * local, abs=2**21)
    assert est.memory_gib.gradients * GIB == pytest.approx(4 * local + 4 * local / 8, abs=2**21)


def test_pytorch_pipelining_keeps_each_stage_output_until_its_backward():
    # torch.distributed.pipelining's fwd_cache holds each forward's stage output (the residual stream after the
    # stage's last layer: 32,768 tokens x 16,384 / tp 8 x 2 bytes = 0.125 GiB under sequence parallelism) until the
    # backward; under full recompute nothing else keeps it. 405B 1F1B, first stage: 8 micro-batches alive (p - r - 1
    # warm-up forwards + 1), each with its stage output beside its 15 checkpointed block inputs
    fsdp2 = _t1("tt24-t5-405b-512gpu-1f1b")
    est = fsdp2.predict()
    training = {k: v for k, v in fsdp2.scenario["training"].items() if k != "torch_compile"}
    layout = {k: v for k, v in fsdp2.scenario["layout"].items() if k != "reshard_after_forward"}
    # Megatron-Core frees a sent output's data (deallocate_pipeline_outputs): the same layout keeps none
    megatron = estimate(parse_scenario({**fsdp2.scenario, "training": {**training, "framework": "megatron_core"},
                                        "layout": {**layout, "zero_stage": 1}}))
    assert est.worst_stage == megatron.worst_stage == "first"
    assert est.memory_gib.activations - megatron.memory_gib.activations == pytest.approx(
        8 * 32768 * 16384 / 8 * 2 / GIB, abs=1e-3)


def test_a_pipelined_last_stage_keeps_its_16_bit_logits_into_the_loss_backward():
    # TorchTitan frees the 16-bit logits before the backward (`del pred`): 12 bytes per logit at the peak (three fp32
    # tensors). Pipelined, the last stage's output is the logits, which torch.distributed.pipelining keeps until the
    # stage's backward: 2 bytes more. Llama 3.1 8B, micro-batch 2 x 8,192 tokens, 128,256-token vocabulary
    def logits_bytes(pp: int) -> float:
        est = estimate(parse_scenario({
            "model": {"preset": "llama3.1-8b"}, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
            "training": {"seq_len": 8192, "global_batch_size": 64, "total_tokens": 1e12, "framework": "pytorch_fsdp2"},
            "layout": {"tp": 1, "pp": pp, "dp": 8 // pp, "micro_batch_size": 2, "zero_stage": 3, "recompute": "full"}}))
        assert est.worst_stage == ("last" if pp > 1 else "only")
        return est.memory_detail_gib["logits"] * GIB
    assert logits_bytes(1) == pytest.approx(16384 * 128256 * 12, abs=2**20)
    assert logits_bytes(2) == pytest.approx(16384 * 128256 * 14, abs=2**20)


def test_deepspeed_pipeline_keeps_each_output_partitioned_over_the_tensor_parallel_ranks():
    # DeepSpeed's PipelineEngine keeps pipe_buffers['outputs'] until the micro-batch's backward, partitioned over the
    # tensor-parallel ranks once sent (is_pipe_partitioned); Megatron-Core frees the data. Llama 3.1 70B, tp 2 pp 4,
    # first stage: 4 micro-batches alive (1F1B warm-up p - r - 1 = 3, + 1), each output 4,096 tokens x 8,192 x 2
    # bytes / tp 2
    def first_stage_activations(framework: str) -> float:
        est = estimate(parse_scenario({
            "model": {"preset": "llama3.1-70b"}, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 32},
            "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 1e12, "framework": framework},
            "layout": {"tp": 2, "pp": 4, "dp": 4, "micro_batch_size": 1, "zero_stage": 1, "recompute": "full",
                       "sequence_parallel": False}}))
        assert est.worst_stage == "first"
        return est.memory_gib.activations
    extra = first_stage_activations("deepspeed") - first_stage_activations("megatron_core")
    assert extra * GIB == pytest.approx(4 * 4096 * 8192 * 2 / 2, abs=2**12)


def _llama8b(framework: str | None, precision: str = "bf16", **training) -> dict:
    # Llama 3.1 8B on one node of 8 H100, ZeRO-3 over the 8 data-parallel ranks
    return estimate(parse_scenario({
        "model": {"preset": "llama3.1-8b"}, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
        "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 1e12, "precision": precision,
                     **({"framework": framework} if framework else {}), **training},
        "layout": {"tp": 1, "dp": 8, "zero_stage": 3}})).memory_gib.model_dump()


LAYER_8B = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 14336     # attention + SwiGLU MLP of one layer


def test_fp32_gradient_reduction_changes_no_stored_gradient_under_fsdp2():
    # FSDP2's sharded gradient takes the dtype of the fp32 sharded parameter (MixedPrecisionPolicy's param_dtype is
    # only the gathered copy's); the reduce dtype changes the one layer's reduce-scatter copy (2 more bytes each)
    fp32, bf16 = (estimate(parse_scenario({
        "model": {"preset": "llama3.1-8b"}, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
        "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 1e12, "framework": "pytorch_fsdp2",
                     "accumulate_grads_in_fp32": acc},
        "layout": {"tp": 1, "dp": 8, "zero_stage": 3}})) for acc in (True, False))
    assert fp32.memory_gib.gradients == bf16.memory_gib.gradients
    assert fp32.memory_gib.gradients * GIB == pytest.approx(4 * LLAMA3_8B_PARAMS / 8, abs=2**21)
    added = (fp32.memory_detail_gib["comm_buffers"] - bf16.memory_detail_gib["comm_buffers"]) * GIB
    assert added == pytest.approx(2 * LAYER_8B, abs=2**21)


def test_megatron_fsdp_shards_the_low_precision_copy_like_the_weights():
    # NVIDIA's default stack (Megatron-Core) under ZeRO-3: the fp8 copy is sharded over the 8 ranks like the 16-bit
    # weights (1 byte per parameter / 8), and the two gathered layers carry their 1-byte copies too
    fp8, bf16 = _llama8b(None, "fp8"), _llama8b(None, "bf16")
    assert (fp8["weights"] - bf16["weights"]) * GIB == pytest.approx(LLAMA3_8B_PARAMS / 8, abs=2**21)


def test_deepspeed_zero3_buffers_follow_its_bucket_defaults():
    # DeepSpeed's defaults: the layer in flight (218,112,000 parameters) and a prefetch bucket of 5e7 elements
    # gathered in bf16 (under stage3_max_live_parameters 1e9), and a reduce bucket of 5e8 bf16 gradients
    est = estimate(parse_scenario({
        "model": {"preset": "llama3.1-8b"}, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
        "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 1e12, "framework": "deepspeed"},
        "layout": {"tp": 1, "dp": 8, "zero_stage": 3}}))
    assert est.memory_detail_gib["comm_buffers"] * GIB == pytest.approx((LAYER_8B + 5e7) * 2 + 5e8 * 2, abs=2**21)
    # DeepSpeed trains the PyTorch module, whose loss is torch's cross-entropy on fp32 logits: 12 bytes per logit
    assert est.memory_detail_gib["logits"] * GIB == pytest.approx(4096 * 128256 * 12, abs=2**21)


def test_explain_lists_the_stacks_memory_terms_with_their_functions():
    # --explain prints every memory term: the FSDP2 run names fsdp2_terms, the loss's bytes per logit, per-op
    # checkpointing and the reserved peak beside the total; the figures are the estimate's own
    from engine.planning.explain import explain
    run = _t1("tt24-t1-8b-8gpu-fsdp")
    est = run.predict()
    terms = {t.name: t for t in explain(parse_scenario(run.scenario)) if t.section == "Memory per GPU"}
    assert "engine.physics.memory.fsdp2_terms" in terms["gradients"].function
    assert "12 B per logit" in terms["logits"].formula and "loss_bytes_per_logit" in terms["logits"].function
    assert "per-op" in terms["activations"].formula
    assert "root module" in terms["comm_buffers"].formula
    assert terms["reserved_peak"].value == pytest.approx(est.memory_detail_gib["reserved_peak"], abs=1e-3)
    assert "max_memory_reserved" in terms["reserved_peak"].formula
