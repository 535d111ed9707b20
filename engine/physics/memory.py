"""Memory per GPU by component, for every pipeline stage of many layouts at once.

Model states follow the ZeRO paper (Rajbhandari et al. 2020): mixed-precision Adam keeps 16-bit weights and
fp32 master weights, momentum and variance (K = 12 bytes); ZeRO-1/2/3 shard the optimizer, then gradients, then
weights over the data-parallel group. Gradients are kept in the 16-bit format (2 bytes), as the tuned recipes
reduce them, or in fp32 (4 bytes) where the scenario accumulates and reduces them in fp32 (grads_in_fp32); ZeRO-1
is Megatron-LM's distributed optimizer, which shards the optimizer states but keeps every gradient (its table: bf16
parameters with fp32 gradients 6 + 12/d bytes per parameter). Activations follow Korthikanti et al. 2022
(sbh(34 + 5as/h) for GPT layers), generalised term by term to GQA, SwiGLU, MoE, MLA and context parallelism.

The training stack changes the layout (stack_memory, keyed on training.framework): PyTorch FSDP2 keeps fp32 sharded
parameters and gradients and gathers 16-bit weights layer by layer, TorchTitan checkpoints per op, PyTorch's loss
holds fp32 copies of the logits, DeepSpeed ZeRO-3 gathers and reduces in buckets. Each stage's total is its peak of
live tensors plus the framework's allowance; beside it, reserved_peak is what torch.cuda.max_memory_reserved reports
(live tensors with the caching allocator's measured reserve), the figure measured peaks are compared with.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from engine.catalog import DATA_DIR
from engine.frameworks import stack
from engine.physics import finetune
from engine.physics.hardware import GIB
from engine.physics.layouts import Layouts
from engine.physics.model import Shape, routed_copies
from engine.physics.schedule import Stage, stages_of
from engine.scenario import Training

# CUDA/HIP context, cuBLAS workspaces and collective-library buffers that no tensor accounts for. Observed as
# 1-3 GiB of unexplained use in practice (Megatron-LM issue #525; gpu_poor's "cuda + other overhead").
FRAMEWORK_OVERHEAD_BYTES = 1.5 * GIB
# Caching-allocator fragmentation on top of live tensors (Megatron-LM adds 5% in theoretical_memory_usage.py).
FRAGMENTATION = 0.05


def grads_in_fp32(training: Training) -> bool:
    """Whether gradients are kept, accumulated over micro-batches and reduced in fp32: the scenario's
    training.accumulate_grads_in_fp32, else what the tuned runs do, 16-bit gradients. Megatron-LM's own recipes
    reduce in 16 bits (examples/llama/train_llama3_8b_h100_fp8.sh passes --grad-reduce-in-bf16,
    examples/gpt3/train_gpt3_175b_distributed.sh trains in fp16), and NeMo's user guide (Communication Overlap) sets
    grad_sync_dtype bf16 because 'reduction in bf16 ensures improved performance at large scale training compared to
    the default precision of fp32'. fp32 is the convergence-safe framework default (megatron/training/arguments.py
    validate_args turns it on for bf16 unless --grad-reduce-in-bf16; NeMo's bf16_mixed recipe sets
    grad_reduce_in_fp32=True), chosen with accumulate_grads_in_fp32=true. fp32 training has fp32 gradients."""
    if training.precision == "fp32":
        return True
    return bool(training.accumulate_grads_in_fp32)


def optimizer_state_bytes(training: Training) -> dict[str, float]:
    """Bytes per parameter of each optimizer state: Adam's fp32 momentum and variance, SGD's fp32 momentum, and the
    fp32 master weights mixed precision keeps beside them (fp32 training updates the weights in place)."""
    states = {"adam": {"fp32 momentum": 4.0, "fp32 variance": 4.0}, "sgd": {"fp32 momentum": 4.0}}[training.optimizer]
    return {**states, "fp32 master weights": 4.0} if training.precision != "fp32" else dict(states)


def bytes_per_element(training: Training) -> dict[str, float]:
    """Bytes per parameter for weights, gradients and optimizer states, and per activation element."""
    mixed = training.precision != "fp32"
    weight = 2.0 if mixed else 4.0
    return {"weight": weight, "grad": 4.0 if grads_in_fp32(training) else weight,
            "optimizer": sum(optimizer_state_bytes(training).values()), "activation": 2.0 if mixed else 4.0}


def gradient_text(training: Training) -> str:
    """The gradients' bytes and why, e.g. '4-byte gradients (fp32 accumulation and reduction)'."""
    b = bytes_per_element(training)
    how = ("fp32 training" if training.precision == "fp32" else
           "fp32 accumulation and reduction" if grads_in_fp32(training) else f"{training.precision} accumulation and reduction")
    return f"{b['grad']:g}-byte gradients ({how})"


def model_state_text(training: Training) -> str:
    """What each parameter costs, in words generated from the byte counts used (e.g. for bf16 Adam: 2-byte weights,
    2-byte gradients, 12 bytes of optimizer states: fp32 momentum 4 + fp32 variance 4 + fp32 master weights 4)."""
    b = bytes_per_element(training)
    parts = " + ".join(f"{name} {n:g}" for name, n in optimizer_state_bytes(training).items())
    return (f"{b['weight']:g}-byte weights, {gradient_text(training)}, {b['optimizer']:g} bytes of "
            f"{training.optimizer} optimizer states per parameter ({parts}); ZeRO paper convention")


@lru_cache(maxsize=1)
def allocator_reserve() -> dict:
    """data/memory_headroom.json's measurement of the memory the caching allocator reserves beyond live tensors."""
    doc = json.loads((DATA_DIR / "memory_headroom.json").read_text())
    if doc.get("schema_version") != 1:
        raise ValueError(f"data/memory_headroom.json: unsupported schema_version {doc.get('schema_version')!r}")
    return doc["allocator_reserve"]


def default_headroom_fraction() -> float:
    """The share of an accelerator's memory recommendations keep free by default: the measured reserve of the
    caching allocator as a share of the device, less the FRAGMENTATION allowance the estimate already counts."""
    r = allocator_reserve()
    return r["reserved_gap_gb"] / r["device_gb"] - FRAGMENTATION


def allocator_reserve_fraction() -> float:
    """What the caching allocator reserves beyond the live tensors at their peak, as a share of them: GMLake's
    measured gap (9.2 GB of an 80 GB device reserved beyond need, data/memory_headroom.json) over the memory in use
    besides it, 9.2 / (80 - 9.2) = 13.0%. torch.cuda.max_memory_reserved, the figure PyTorch stacks log as their peak,
    is the live peak times (1 + this); the estimate's total counts FRAGMENTATION of it and the recommendations keep
    the rest free (default_headroom_fraction)."""
    r = allocator_reserve()
    return r["reserved_gap_gb"] / (r["device_gb"] - r["reserved_gap_gb"])


def headroom_fraction(training: Training) -> float:
    """The scenario's training.memory_headroom_fraction, else the published default."""
    h = training.memory_headroom_fraction
    return default_headroom_fraction() if h is None else h


@dataclass(frozen=True)
class StageParams:
    """A pipeline stage and the (non-expert, expert) parameters one of its GPUs holds."""

    stage: Stage
    non_expert: np.ndarray
    expert: np.ndarray


def moe_layer_mask(shape: Shape) -> tuple[bool, ...]:
    """True for each layer with routed experts (an MoE model's dense layers come first unless the architecture says
    otherwise)."""
    mask = getattr(shape, "moe_layer_mask", None)
    return tuple(mask) if mask else (False,) * shape.n_dense_layers + (True,) * shape.n_moe_layers


def staged_params(shape: Shape, lay: Layouts, micro_batches: np.ndarray) -> dict[str, StageParams]:
    """First, middle and last stage with their parameters, computed once for memory and step time."""
    mask = moe_layer_mask(shape)
    stages = stages_of(shape.n_layers, mask, lay.pp, lay.v, lay.first, lay.last, micro_batches)
    if shape.mtp_layers:
        # multi-token-prediction modules (DeepSeek-V3) are layers like the last one, on the last stage, beside the head
        kind = "moe" if mask[-1] else "dense"
        last = stages["last"]
        stages["last"] = replace(last, **{kind: getattr(last, kind) + shape.mtp_layers})
        if (lay.pp == 1).any():
            for name in ("first", "middle"):
                st = stages[name]
                stages[name] = replace(st, **{kind: np.where(lay.pp == 1, getattr(st, kind) + shape.mtp_layers,
                                                             getattr(st, kind))})
    return {name: StageParams(st, *stage_params(shape, lay, st)) for name, st in stages.items()}


def stage_params(shape: Shape, lay: Layouts, st: Stage) -> tuple[np.ndarray, np.ndarray]:
    """(non-expert, expert) parameters held by one GPU of a stage; TP splits matrices, EP splits the experts and
    expert tensor parallelism splits each expert."""
    t = lay.tp
    dense_layer = (shape.attn_params + shape.dense_mlp_params) / t + shape.norm_params
    moe_layer = (shape.attn_params + shape.shared_expert_params) / t + shape.norm_params + shape.router_params
    non_expert = st.dense * dense_layer + st.moe * moe_layer + outer_params(shape, lay, st)
    expert = st.moe * (shape.n_experts / lay.ep) * shape.expert_params / lay.etp if shape.n_moe_layers else 0.0 * non_expert
    return non_expert, expert


def outer_params(shape: Shape, lay: Layouts, st: Stage) -> np.ndarray:
    """Parameters of a stage outside its transformer layers, on one GPU: the token (and position) embedding on the
    first stage, the final norm and output layer on the last (matrices split by TP)."""
    t = lay.tp
    embed = np.where(st.embedding, shape.embedding_params / t + shape.position_params, 0.0)
    # an untied head has its own matrix; a tied one needs a copy on the last stage when the pipeline splits them
    head_matrix = np.where(st.embedding & shape.tied_embeddings, 0.0, shape.embedding_params / t)
    return embed + np.where(st.head, head_matrix + shape.hidden, 0.0)


def shard_groups(lay: Layouts) -> tuple[np.ndarray, np.ndarray]:
    """(non-expert, expert) ZeRO shard group sizes: the shard group (all data-parallel ranks, or the HSDP group) and
    the same share of the expert data-parallel ranks."""
    return lay.shard, np.maximum(1, lay.expert_dp * lay.shard // lay.dp_group)


# DeepSpeed's ZeRO-3 defaults, in parameter elements (deepspeed/runtime/zero/config.py: stage3_prefetch_bucket_size
# 5e7, stage3_max_live_parameters 1e9, reduce_bucket_size 5e8; www.deepspeed.ai/docs/config-json)
DEEPSPEED_PREFETCH_BUCKET = 5e7
DEEPSPEED_MAX_LIVE_PARAMETERS = 1e9
DEEPSPEED_REDUCE_BUCKET = 5e8


@dataclass(frozen=True)
class StackMemory:
    """How the training stack lays memory out, per layout: the one place the software stack (training.framework,
    resolved to the vendor's MLPerf stack when not given: engine.frameworks) enters the memory model."""

    fsdp2: np.ndarray           # PyTorch FSDP2 sharding (ZeRO-3 layouts on pytorch_fsdp2): fsdp2_terms
    deepspeed_zero3: np.ndarray  # DeepSpeed's ZeRO-3 partitioned parameters and buckets: deepspeed_zero3_buffer_bytes
    eager_loss: np.ndarray      # PyTorch's cross-entropy on fp32 logits, not Megatron's fused vocabulary-parallel one
    op_selective: bool          # selective recompute is TorchTitan's per-op policy (data/frameworks.json recompute)
    keeps_stage_outputs: np.ndarray  # the pipeline keeps each forward's stage output to its backward: pipeline_output_bytes
    stage_output_split: np.ndarray   # ... split that many ways (sequence parallelism, DeepSpeed's partitioned outputs)


def stack_memory(framework: str, lay: Layouts) -> StackMemory:
    """The memory semantics of `framework` (an engine.frameworks id) for every layout. Megatron-Core and MaxText
    keep the ZeRO paper's layout (Megatron-FSDP for ZeRO-3) and a fused vocabulary-parallel loss; PyTorch FSDP2 and
    DeepSpeed train PyTorch modules whose loss is torch's cross-entropy (DeepSpeed under tensor parallelism is
    Megatron-DeepSpeed, with Megatron's loss). PyTorch FSDP2's pipeline (torch.distributed.pipelining: fwd_cache) and
    DeepSpeed's (PipelineEngine: pipe_buffers['outputs'], partitioned over the tensor-parallel ranks once sent when
    tp > 1) keep each forward's stage output until its backward; Megatron-Core frees the output's data once sent
    (deallocate_pipeline_outputs, set by Megatron-LM's core_transformer_config_from_args)."""
    zero3 = lay.zero >= 3
    return StackMemory(fsdp2=zero3 & (framework == "pytorch_fsdp2"), deepspeed_zero3=zero3 & (framework == "deepspeed"),
                       eager_loss=np.full(len(lay), framework == "pytorch_fsdp2") | ((framework == "deepspeed") & (lay.tp == 1)),
                       op_selective=stack(framework).recompute.selective == "per_op_every_other_matmul",
                       keeps_stage_outputs=(framework in ("pytorch_fsdp2", "deepspeed")) & (lay.pp > 1),
                       stage_output_split=np.where(lay.sp | ((framework == "deepspeed") & (lay.tp > 1)), lay.tp, 1))


def op_selective_layer_bytes(shape: Shape, training: Training, lay: Layouts) -> np.ndarray:
    """Activations one dense layer stores for one micro-batch under TorchTitan's per-op selective checkpointing
    (parallelize_llama._apply_ac_to_transformer_block, selective_ac_option 'op'): the block's input, the attention
    core's output and log-sum-exp, every other matmul's output (the 1st, 3rd, 5th, ... of Q, K, V, output, then the
    MLP's in order) and, under tensor parallelism, the reduce-scatter outputs; everything else is recomputed. A
    row-parallel matmul (attention output, MLP down) produces the whole hidden width before its reduce-scatter.
    Written for Q/K/V projections; an MLA layer is counted with its query and value widths in their place.
    Compiled (training.torch_compile not false), the partitioner saves only what the block's backward reads: the
    MLP's last output (the down projection's, and its reduce-scatter's) feeds nothing but the residual add, whose
    backward reads no input, so it is not kept; eagerly the policy's cache keeps every saved op's output
    (torch.utils.checkpoint selective mode, _CachingTorchDispatchMode). TorchTitan's 8B runs measure the difference:
    82.4 / 77.0 GiB eager / compiled on 8 H100, 67.0 / 62.0 on 128."""
    e = bytes_per_element(training)["activation"]
    h, t = shape.hidden, lay.tp
    tokens = lay.mbs * (training.seq_len / lay.cp)
    q, v_width = shape.n_heads * shape.qk_head_dim, shape.kv_elems_per_token / 2
    mlp_in = (shape.dense_ffn / t,) * (2 if shape.gated else 1)
    matmuls = (q / t, v_width / t, v_width / t, h, *mlp_in, h)      # wq, wk, wv, wo, MLP in (gate, up), down
    kept = list(matmuls[0::2])
    compiled = training.compiled
    if compiled and (len(matmuls) - 1) % 2 == 0:
        kept.pop()                                                  # the down projection's output: no reader
    saved = sum(kept)
    core = shape.n_heads * shape.v_head_dim / t * e + 4.0 * shape.n_heads / t      # output + fp32 log-sum-exp
    reduce_scatter = np.where(t > 1, (1 if compiled else 2) * h / np.where(lay.sp, t, 1), 0.0)
    block_input = h / np.where(lay.sp, t, 1)
    return tokens * ((saved + reduce_scatter + block_input) * e + core)


def loss_bytes_per_logit(training: Training, lay: Layouts, eager_loss: np.ndarray,
                         logits_kept: np.ndarray | bool = False) -> np.ndarray:
    """Bytes per logit at the loss's peak. Megatron-Core's fused vocab-parallel cross-entropy keeps the 16-bit logits
    and one fp32 copy that its backward overwrites with the gradient (e + 4). PyTorch's eager cross-entropy on
    fp32-cast logits (TorchTitan's cross_entropy_loss: pred.float()) peaks in its backward with three fp32 tensors of
    the logits' size: the saved log-softmax output, the gradient arriving from the loss and the gradient it returns
    (the 16-bit logits are freed before backward; the forward peak, 16-bit + two fp32, is lower). Under tensor
    parallelism the vocabulary-parallel loss (torch.distributed.tensor.parallel.loss_parallel, whose _log_softmax is
    the decomposition with its all-reduces) keeps the 16-bit logits, their fp32 cast, the shifted logits and their
    exponential at once in its forward (e + 3 fp32), and its backward (_nll_loss_and_log_softmax_backward, nll_loss's
    and log-softmax's backward written out as tensor ops) four fp32 tensors: the saved log-softmax, the zeroed
    gradient it scatters into, and exp(log-softmax) with their sum (then the sum and its product with the incoming
    gradient): the larger of the two, 16 bytes at 16-bit logits. logits_kept: the 16-bit logits live on into the
    backward (a torch.distributed.pipelining stage keeps its output, here the logits, until its backward: StackMemory)
    where TorchTitan's unpipelined step frees them first (`del pred`)."""
    e = bytes_per_element(training)["activation"]
    kept = np.where(logits_kept, e, 0.0)
    eager = np.where(lay.tp > 1, np.maximum(4 * 4.0 + kept, e + 3 * 4.0), np.maximum(3 * 4.0 + kept, e + 2 * 4.0))
    return np.where(eager_loss, eager, e + 4.0)


def fsdp2_gradient_bytes(training: Training) -> tuple[float, float]:
    """(sharded, reduce) bytes per gradient element under FSDP2: the sharded gradient takes the dtype of the sharded
    parameter, fp32 (FSDP2 keeps the fp32 parameter sharded and gathers a 16-bit copy: MixedPrecisionPolicy), and is
    reduced in fp32 (TorchTitan's mixed_precision_reduce default) unless 16-bit reduction is asked for."""
    return 4.0, 2.0 if training.accumulate_grads_in_fp32 is False else 4.0


def fsdp2_terms(shape: Shape, training: Training, lay: Layouts, st: Stage, held_bytes: np.ndarray,
                trainable_local: np.ndarray, trainable_sharded: np.ndarray, layer_params: np.ndarray,
                weight_copy_bytes: float) -> dict[str, np.ndarray]:
    """Weights, gradients and buffers of one stage's GPU under FSDP2 (PyTorch fully_shard with TorchTitan's
    MixedPrecisionPolicy). The fp32 sharded parameter is the master weight (counted with the optimizer states); 16-bit
    weights exist only gathered. Without resharding after forward, and under a pipeline (whose stages turn resharding
    after backward and gradient sync off until the last micro-batch: torch.distributed.pipelining
    stage.backward_maybe_with_nosync), the whole stage stays gathered and its unsharded gradients accumulate in the
    reduce dtype. Otherwise the buffers are the current and the prefetched layer's gathered weights, one layer's
    unsharded 16-bit gradients with the reduce-dtype copy reduce-scattered from, and the root module (embedding, final
    norm, output layer), which FSDP2 does not reshard between its forward and backward. Low-precision training
    (torchao float8) casts the gathered weights of the current and the prefetched layer and keeps no persistent copy.
    held_bytes are the stage's weights as held before sharding (a QLoRA base in NF4 and the adapters:
    finetune.base_weight_bytes); gradients exist for the trainable parameters only (all of them unless fine-tuning
    with adapters)."""
    w = bytes_per_element(training)["weight"]
    sharded_grad, reduce = fsdp2_gradient_bytes(training)
    kept = ~lay.reshard | (lay.pp > 1)
    in_flight = layer_params * (2 * w + w + reduce) + w * outer_params(shape, lay, st)
    return {"weights": np.where(kept, held_bytes, 0.0),
            "gradients": sharded_grad * trainable_sharded + np.where(lay.pp > 1, reduce * trainable_local, 0.0),
            "buffers": 2 * weight_copy_bytes * layer_params + np.where(kept, 0.0, in_flight)}


def deepspeed_zero3_buffer_bytes(training: Training, layer_params: np.ndarray, weight_copy_bytes: float) -> np.ndarray:
    """DeepSpeed ZeRO-3's gathered parameters and gradient bucket at the peak: the layer in flight and what its
    coordinator prefetches ahead of it (stage3_prefetch_bucket_size), at most stage3_max_live_parameters, in the
    16-bit format with their low-precision casts, and one reduce bucket (reduce_bucket_size elements) of 16-bit or
    fp32 gradients."""
    b = bytes_per_element(training)
    live = np.minimum(layer_params + DEEPSPEED_PREFETCH_BUCKET, DEEPSPEED_MAX_LIVE_PARAMETERS)
    return live * (b["weight"] + weight_copy_bytes) + DEEPSPEED_REDUCE_BUCKET * b["grad"]


def layer_activation_bytes(shape: Shape, training: Training, lay: Layouts, moe: bool) -> np.ndarray:
    """Activations one layer stores for one micro-batch on one GPU (Korthikanti et al. 2022, Table 2, generalised)."""
    e = bytes_per_element(training)["activation"]
    h, t = shape.hidden, lay.tp
    tokens = lay.mbs * (training.seq_len / lay.cp)
    sp_div = np.where(lay.sp, t, 1)
    mask = 1.0 if shape.dropout else 0.0                         # dropout masks: 1 byte per element
    # kept whole on every TP rank unless sequence-parallel: both norm inputs, QKV and MLP inputs (4 tensors) + 2 dropout masks
    replicated = (4 * e + 2 * mask) * h
    acts_per_ffn = 3 if shape.gated else 2                      # gate, up, product  |  fc1 output, activation output
    if moe:      # the busiest expert-parallel rank's routed copies
        routed = routed_copies(shape, training.expert_load_ratio, lay.ep)
        mlp = (routed * acts_per_ffn * shape.expert_ffn + acts_per_ffn * shape.shared_ffn + routed * h) * e \
              + 4 * shape.n_experts                              # + dispatched token copies, fp32 router logits
    else:
        mlp = acts_per_ffn * shape.dense_ffn * e
    attention = e * shape.attn_act_split
    if training.attention == "standard":
        scores = (e + mask * (e + 1)) * shape.n_heads * training.seq_len   # softmax output (+ dropout mask and output)
    else:
        scores = 4.0 * shape.n_heads                              # FlashAttention keeps only the fp32 log-sum-exp
    none = tokens * (replicated / sp_div + (attention + mlp + scores) / t)
    selective = tokens * (replicated / sp_div + (attention + mlp + (0 if training.attention == "standard" else scores)) / t)
    full = tokens * e * h / sp_div                               # only the layer input is checkpointed
    return np.select([lay.rc == 0, lay.rc == 1], [none, selective], full)


def pipeline_output_bytes(shape: Shape, training: Training, lay: Layouts, st: Stage, split: np.ndarray) -> np.ndarray:
    """The stage outputs a pipeline that keeps them (StackMemory.keeps_stage_outputs) holds at its peak: each
    chunk's forward output (the residual stream after its last layer, split `split` ways: sequence-sharded under
    sequence parallelism, partitioned by DeepSpeed) stays with its autograd graph until that chunk's backward
    (torch.distributed.pipelining PipelineStage.forward_one_chunk, DeepSpeed PipelineEngine._exec_forward_pass). Full
    recompute does not save it (a checkpointed block keeps only its input), so each chunk pass alive adds one:
    in_flight x v of them, in_flight being layer-micro-batches over the stage's layers (equal chunks: exact)."""
    e = bytes_per_element(training)["activation"]
    tokens = lay.mbs * (training.seq_len / lay.cp)
    return st.in_flight * lay.v * tokens * e * shape.hidden / split


def recompute_peak_bytes(lay: Layouts, full_layer: np.ndarray, loss_peak: np.ndarray) -> np.ndarray:
    """What full recompute adds to the stored activations at the stage's peak: the one layer it re-materialises for
    its backward pass. The loss's transient peak (on the stage with the output layer) comes before, at the end of
    the forward pass, and is freed before the last layer is re-materialised: the stage peaks at the larger of the
    two, so only the re-materialised layer's excess over the loss peak is added."""
    return np.where(lay.rc == 2, np.maximum(full_layer - loss_peak, 0.0), 0.0)


def memory_breakdown(shape: Shape, training: Training, lay: Layouts, staged: dict[str, StageParams],
                     weight_copy_bytes: float = 0.0, framework: str = "megatron_core",
                     frozen_weight_bytes: float | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Bytes per GPU by component for the first, middle and last pipeline stage under the training stack
    `framework` (stack_memory); weight_copy_bytes is the low-precision copy of each weight that FP8/MXFP8/NVFP4
    training keeps beside the 16-bit one, sharded as the stack shards the weights (FSDP2 casts the gathered weights
    layer by layer and keeps none: fsdp2_terms). frozen_weight_bytes (Hardware.frozen_weight_bytes): under LoRA the
    frozen base is stored in that format only, with no 16-bit weights and no copy beside them."""
    b = bytes_per_element(training)
    if finetune.frozen_in_low_precision(training, frozen_weight_bytes):
        weight_copy_bytes = 0.0                   # the low-precision frozen weights are the only copy
    shard, expert_shard = shard_groups(lay)
    sm = stack_memory(framework, lay)
    fsdp2 = sm.fsdp2
    e = b["activation"]
    tokens = lay.mbs * (training.seq_len / lay.cp)
    act_dense = layer_activation_bytes(shape, training, lay, moe=False)
    if sm.op_selective:
        act_dense = np.where(lay.rc == 1, op_selective_layer_bytes(shape, training, lay), act_dense)
    act_moe = layer_activation_bytes(shape, training, lay, moe=True) if shape.n_moe_layers else 0.0
    full_layer = layer_activation_bytes(shape, training, replace(lay, rc=np.zeros_like(lay.rc)),
                                        moe=shape.n_moe_layers > 0)
    layer_params = (shape.attn_params + shape.dense_mlp_params) / lay.tp
    if shape.n_moe_layers:
        layer_params = np.maximum(layer_params, (shape.attn_params + shape.shared_expert_params) / lay.tp
                                  + (shape.n_experts / lay.ep) * shape.expert_params / lay.etp)
    # ZeRO-3 holds the current and the prefetched layer's gathered weights and their low-precision casts (without
    # resharding: the whole stage, counted with the weights); DeepSpeed by its bucket sizes
    zero3_gather = np.where((lay.zero >= 3) & lay.reshard, 2 * (b["weight"] + weight_copy_bytes) * layer_params, 0.0)
    zero3_gather = np.where(sm.deepspeed_zero3, deepspeed_zero3_buffer_bytes(training, layer_params, weight_copy_bytes),
                            zero3_gather)
    tp_buffer = np.where(lay.tp > 1, tokens * e * shape.hidden, 0.0)                 # all-gathered TP input
    pp_buffer = np.where(lay.pp > 1, 2 * tokens * e * shape.hidden / lay.tp, 0.0)    # pipeline send/recv
    embedding_out = tokens * e * shape.hidden / np.where(lay.sp, lay.tp, 1)
    optimizer_bytes = finetune.adapter_optimizer_bytes(training, b["optimizer"])
    bucket = finetune.offload_data()["gradient_bucket_elements"]["value"] * b["grad"]
    offloaded = lay.off >= finetune.OFFLOAD_OPTIMIZER
    out = {}
    for name, sp in staged.items():
        st, ne, ex = sp.stage, sp.non_expert, sp.expert
        local = ne + ex
        sharded = ne / shard + ex / expert_shard
        gathered = (lay.zero >= 3) & lay.reshard
        # frozen base (NF4 under QLoRA) and adapters, or every weight trained (engine.physics.finetune)
        held = finetune.base_weight_bytes(shape, training, lay, st, ne, ex, b["weight"], frozen_weight_bytes)
        held_sharded = finetune.sharded_weight_bytes(shape, training, lay, st, ne, ex, b["weight"], shard, expert_shard,
                                                     frozen_weight_bytes)
        weights = np.where(gathered, held_sharded + weight_copy_bytes * sharded, held + weight_copy_bytes * local)
        weights = np.where((lay.off >= finetune.OFFLOAD_PARAMS) & gathered, 0.0, weights)
        tr_ne, tr_ex = finetune.stage_trainable(shape, training, lay, st, ne, ex)
        tr_local, tr_sharded = tr_ne + tr_ex, tr_ne / shard + tr_ex / expert_shard
        grads = b["grad"] * np.where(lay.zero >= 2, tr_sharded, tr_local)
        f = fsdp2_terms(shape, training, lay, st, held, tr_local, tr_sharded, layer_params, weight_copy_bytes)
        weights, grads = np.where(fsdp2, f["weights"], weights), np.where(fsdp2, f["gradients"], grads)
        grads = np.where(offloaded, np.minimum(grads, bucket), grads)     # ZeRO-Offload: only the bucket in flight
        comm = tp_buffer + pp_buffer + np.where(fsdp2, f["buffers"], zero3_gather)
        optimizer = np.where(offloaded, 0.0, optimizer_bytes * np.where(lay.zero >= 1, tr_sharded, tr_local))
        host_offloaded = ((np.where(offloaded, (b["grad"] + optimizer_bytes) * tr_sharded, 0.0)
                           + np.where(lay.off >= finetune.OFFLOAD_PARAMS, held_sharded, 0.0))
                          if offloaded.any() else 0.0 * local)
        per_mb = st.dense * act_dense + st.moe * act_moe + np.where(st.embedding, embedding_out, 0.0)
        logits = np.where(st.head, tokens * shape.vocab / lay.tp
                          * loss_bytes_per_logit(training, lay, sm.eager_loss, sm.keeps_stage_outputs), 0.0)
        outputs = np.where(sm.keeps_stage_outputs & ~st.head, pipeline_output_bytes(shape, training, lay, st,
                                                                                        sm.stage_output_split), 0.0)
        activations = per_mb * st.in_flight + outputs + recompute_peak_bytes(lay, full_layer, logits)
        live = weights + grads + optimizer + activations + logits + comm
        overhead = FRAMEWORK_OVERHEAD_BYTES + FRAGMENTATION * live
        # beside the terms (not in the total): the caching allocator's reserve at the peak, as PyTorch reports it
        out[name] = {"weights": weights, "gradients": grads, "optimizer_states": optimizer, "activations": activations,
                     "logits": logits, "comm_buffers": comm, "framework_overhead": overhead,
                     "total": live + overhead, "reserved_peak": live * (1 + allocator_reserve_fraction()),
                     "host_offloaded": host_offloaded}
    return out
