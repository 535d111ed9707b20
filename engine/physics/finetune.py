"""Fine-tuning and offload: what a frozen base, LoRA adapters, a 4-bit base and ZeRO-Offload change in a step.

- LoRA (Hu et al. 2021, arXiv 2106.09685, section 4): the pretrained weights are frozen; each targeted matrix W
  (d_in x d_out) gets a trainable pair A (d_in x r), B (r x d_out): r (d_in + d_out) parameters, with their own
  gradients and optimizer states. The frozen weights have neither: "we do not need to calculate the gradients or
  maintain the optimizer states for most parameters" (section 4.2, which measures a 25% faster step on GPT-3 175B).
  The backward pass still computes the input gradient of every frozen matmul, to reach the adapters below it, but
  not its weight gradient: a frozen matmul's backward is one matmul instead of two. The adapter branch costs a
  forward x.A.B and its backward at the adapter's shapes.
- Targets: `attention` = the query, key, value and output projections, as MLPerf's Llama-2-70B LoRA reference
  (mlcommons/training llama2_70b_lora/run_llama_70B_scrolls_r16.sh: --lora_target_modules "qkv_proj,o_proj",
  --lora_r 16); `all_linear` = every linear layer of the transformer blocks, experts and router included, the output
  layer excluded (PEFT LoraConfig target_modules="all-linear"; QLoRA trains adapters on all of them, section 4).
- Adapter states: PEFT keeps adapters in fp32 beside a 16-bit base (get_peft_model autocast_adapter_dtype=True), with
  fp32 gradients and Adam's two fp32 moments: 16 bytes per adapter parameter, the same as the engine's mixed-precision
  count (2 + 2 + 12). QLoRA's reference casts the adapters to bf16 (qlora.py: LoraLayer modules .to(torch.bfloat16))
  and steps paged 32-bit AdamW: 2 + 2 + 8 = 12 bytes, no master copy.
- QLoRA (Dettmers et al. 2023, arXiv 2305.14314, section 3): the frozen linear weights are stored in 4-bit NormalFloat
  with blocks of 64 and double quantization: an 8-bit absmax per block and a 32-bit constant per 256 blocks,
  8/64 + 32/(64 x 256) = 0.127 bits per parameter beyond the 4. Embeddings, norms and the output layer stay 16-bit
  (bitsandbytes quantizes nn.Linear only and transformers keeps the output layer out). Each use of a weight
  dequantizes it to the 16-bit compute type (forward, backward, recomputation): read the 4-bit block and its
  constants, write the 16-bit matrix the matmul reads.
- Paged optimizer (QLoRA section 3): QLoRA allocates the optimizer states in CUDA unified memory, "automatically
  evicted to CPU RAM when the GPU runs out-of-memory and paged back into GPU memory when the memory is needed in the
  optimizer update step": under QLoRA the share of the optimizer states that does not fit lives in host memory and
  crosses the host link twice a step.
- Offload (data/offload.json): ZeRO-Offload (Ren et al. 2021) keeps the optimizer states and the gradient partition
  in CPU memory, the GPU only the bucket being reduced; the gradients go down during the backward, the CPU runs Adam,
  the 16-bit weights come back. ZeRO-Infinity (Rajbhandari et al. 2021) also keeps the 16-bit weights there and
  fetches each layer's when it runs. DeepSpeed allows optimizer offload with ZeRO 1-3, parameter offload with ZeRO-3.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from engine.catalog import DATA_DIR, load_catalog
from engine.physics.model import Shape

# training: an engine.scenario.Training and lay: engine.physics.layouts.Layouts, not imported here because the
# scenario's own checks use this module (engine.scenario.training_problems)

# QLoRA section 3: 4-bit NF4 storage plus double-quantized constants (8-bit absmax per 64 weights, one fp32 per 256
# blocks): 8/64 + 32/(64*256) = 0.127 bits per parameter
NF4_BITS = 4.0
DOUBLE_QUANT_BITS = 8 / 64 + 32 / (64 * 256)
NF4_BYTES = (NF4_BITS + DOUBLE_QUANT_BITS) / 8
ROW_PARALLEL = ("o_proj", "down_proj")        # matrices tensor parallelism splits along d_in (Megatron-LM)
OFFLOAD_OPTIMIZER, OFFLOAD_PARAMS = 1, 2       # layout column `off` (engine.physics.layout_rules.OFFLOAD)


@lru_cache(maxsize=1)
def offload_data() -> dict:
    """data/offload.json: the host link's achievable share, CPU-Adam's rate, the gradient bucket, the overlap."""
    doc = json.loads((DATA_DIR / "offload.json").read_text())
    if doc.get("schema_version") != 1:
        raise ValueError(f"data/offload.json: unsupported schema_version {doc.get('schema_version')!r}")
    return doc


def adapter_params(matrices, rank: int) -> int:
    """LoRA parameters on these (name, d_in, d_out) matrices: r (d_in + d_out) each (Hu et al. 2021, section 4.1)."""
    return sum(rank * (d_in + d_out) for _, d_in, d_out in matrices)


@dataclass(frozen=True)
class Targets:
    """The matrices adapters attach to in one layer of each kind."""

    dense: tuple       # a dense layer
    moe: tuple         # an MoE layer's non-expert matrices (attention, shared experts, router)
    expert: tuple      # one routed expert


def targets(shape: Shape, training) -> Targets:
    """training.lora_targets as matrices of this architecture (module docstring)."""
    if training.lora_targets == "attention":
        return Targets(shape.attn_matrices, shape.attn_matrices, ())
    return Targets(shape.attn_matrices + shape.dense_mlp_matrices,
                   shape.attn_matrices + shape.shared_matrices + shape.router_matrices, shape.expert_matrices)


@lru_cache(maxsize=256)
def adapters(shape: Shape, training) -> dict[str, float]:
    """Adapter parameters per dense layer, per MoE layer (non-expert) and per routed expert; zero without adapters."""
    if not training.adapters:
        return {"dense": 0.0, "moe": 0.0, "expert": 0.0}
    t, r = targets(shape, training), training.lora_rank
    return {"dense": float(adapter_params(t.dense, r)), "moe": float(adapter_params(t.moe, r)),
            "expert": float(adapter_params(t.expert, r))}


def adapter_total(shape: Shape, training) -> float:
    """All adapter parameters of the model (multi-token-prediction modules count as layers of the last kind)."""
    a = adapters(shape, training)
    last_moe = bool(shape.moe_layer_mask and shape.moe_layer_mask[-1])
    per_moe = a["moe"] + shape.n_experts * a["expert"]
    return (shape.n_dense_layers * a["dense"] + shape.n_moe_layers * per_moe
            + shape.mtp_layers * (per_moe if last_moe else a["dense"]))


def trainable_total(shape: Shape, training) -> float:
    """Parameters with gradients and optimizer states: the adapters, or every parameter without them."""
    return adapter_total(shape, training) if training.adapters else float(shape.total_params())


def frozen_total(shape: Shape, training) -> float:
    """Parameters without gradients or optimizer states: the base under LoRA/QLoRA, none otherwise."""
    return float(shape.total_params()) if training.adapters else 0.0


def smallest_target(shape: Shape, training) -> tuple[str, int]:
    """(name, smaller dimension) of the narrowest targeted matrix: a rank at or above it is no low-rank adapter.
    Every architecture the schema describes has attention projections, so there is always one."""
    t = targets(shape, training)
    matrices = t.dense + t.moe + t.expert
    name, d_in, d_out = min(matrices, key=lambda m: min(m[1], m[2]))
    return name, min(d_in, d_out)


def stage_trainable(shape: Shape, training, lay, st, non_expert, expert):
    """(non-expert, expert) trainable parameters one GPU of a stage holds: the adapters of its layers (split by tensor
    and expert parallelism as their matrices are), or all it holds without adapters."""
    if not training.adapters:
        return non_expert, expert
    a = adapters(shape, training)
    ne = (st.dense * a["dense"] + st.moe * a["moe"]) / lay.tp
    ex = st.moe * (shape.n_experts / lay.ep) * a["expert"] / lay.etp
    return ne + 0.0 * non_expert, ex + 0.0 * non_expert


def stage_linear(shape: Shape, lay, st, expert) -> np.ndarray:
    """Weights of the linear layers one GPU of a stage holds (what QLoRA stores in NF4): the layers' projections, MLPs,
    shared experts, router and its routed experts; not the embedding, the norms or the output layer."""
    dense = (shape.attn_params + shape.dense_mlp_params) / lay.tp
    moe = (shape.attn_params + shape.shared_expert_params + shape.router_params) / lay.tp
    return st.dense * dense + st.moe * moe + expert


def frozen_in_low_precision(training, frozen_bytes: float | None) -> bool:
    """Whether the frozen base is stored in the low-precision training format only, with no 16-bit copy: LoRA on a
    stack whose recipe does so (`frozen_bytes`, Hardware.frozen_weight_bytes: NeMo's fp8_params)."""
    return training.method == "lora" and frozen_bytes is not None


def frozen_linear_bytes(training, weight_bytes: float, frozen_bytes: float | None = None) -> float:
    """Bytes per weight of the frozen linear matrices as stored (what ZeRO-3 gathers): NF4 under QLoRA;
    `frozen_bytes` where frozen_in_low_precision; else the training format's weight bytes."""
    if training.method == "qlora":
        return NF4_BYTES
    if frozen_in_low_precision(training, frozen_bytes):
        return frozen_bytes
    return weight_bytes


def base_weight_bytes(shape: Shape, training, lay, st, non_expert, expert, weight_bytes: float,
                      frozen_bytes: float | None = None):
    """Bytes of the weights one GPU of a stage holds before ZeRO sharding: every parameter at the training format's
    weight bytes, the frozen linear weights as stored (frozen_linear_bytes: NF4 under QLoRA), plus the adapters
    (module docstring)."""
    held = weight_bytes * (non_expert + expert)
    frozen = frozen_linear_bytes(training, weight_bytes, frozen_bytes)
    if frozen != weight_bytes:
        held = held - (weight_bytes - frozen) * stage_linear(shape, lay, st, expert)
    if training.adapters:
        tr_ne, tr_ex = stage_trainable(shape, training, lay, st, non_expert, expert)
        held = held + weight_bytes * (tr_ne + tr_ex)
    return held


def sharded_weight_bytes(shape: Shape, training, lay, st, non_expert, expert, weight_bytes: float,
                         shard, expert_shard, frozen_bytes: float | None = None):
    """base_weight_bytes of one ZeRO shard: the held bytes in the proportion the parameters shard."""
    if not training.adapters and training.method != "qlora":     # every weight at the training format's bytes
        return weight_bytes * (non_expert / shard + expert / expert_shard)
    held = base_weight_bytes(shape, training, lay, st, non_expert, expert, weight_bytes, frozen_bytes)
    return held * (non_expert / shard + expert / expert_shard) / (non_expert + expert)


def trainable_share(shape: Shape, training, moe: bool, expert: bool = False) -> float:
    """Share of a layer's matrices (its routed experts with expert=True) that trains: what ZeRO reduces and updates."""
    if not training.adapters:
        return 1.0
    a = adapters(shape, training)
    if expert:
        return a["expert"] / shape.expert_params if shape.expert_params else 0.0
    params = shape.attn_params + (shape.shared_expert_params + shape.router_params if moe else shape.dense_mlp_params)
    return a["moe" if moe else "dense"] / params


def adapter_optimizer_bytes(training, optimizer_bytes: float) -> float:
    """Optimizer bytes per trainable parameter: QLoRA's bf16 adapters keep no fp32 master copy (module docstring)."""
    if training.method == "qlora" and training.precision != "fp32":
        return optimizer_bytes - 4.0
    return optimizer_bytes


# ---- FLOPs and the host ---------------------------------------------------------------------------------------------------------

def frozen_linear_flops_per_token(shape: Shape, training, linear_fwd: float) -> float:
    """Forward FLOPs per token of the weight matmuls whose weight gradient a frozen base skips (all of them under
    LoRA/QLoRA; linear_fwd is the model's weight-matmul forward, output layer included)."""
    return linear_fwd if training.adapters else 0.0


def adapter_flops_per_token(shape: Shape, training) -> float:
    """Forward FLOPs per token of the adapters a token passes through: 2 per adapter parameter (x.A.B), routed
    experts counted top_k times."""
    if not training.adapters:
        return 0.0
    a = adapters(shape, training)
    last_moe = bool(shape.moe_layer_mask and shape.moe_layer_mask[-1])
    per_moe = a["moe"] + shape.top_k * a["expert"]
    return 2.0 * (shape.n_dense_layers * a["dense"] + shape.n_moe_layers * per_moe
                  + shape.mtp_layers * (per_moe if last_moe else a["dense"]))


@lru_cache(maxsize=64)
def host(accelerator: str) -> dict[str, float]:
    """The host side of one accelerator: achievable host-link bytes/s per direction and CPU-Adam parameters/s for
    its share of the server's CPUs (data/offload.json; the link from data/accelerators.json)."""
    acc = load_catalog().accelerator(accelerator)
    d = offload_data()
    per_server = acc.accelerators_per_server or acc.gpus_per_node
    return {"link_bytes_per_s": acc.host_link.bandwidth_gbs * 1e9 * d["host_link_efficiency"]["value"],
            "cpu_adam_params_per_s": d["cpu_adam"]["params_per_s_per_server"] / per_server}


def paged_optimizer_bytes(training, total, optimizer, capacity: float, fragmentation: float):
    """Bytes of QLoRA's paged optimizer states evicted to host memory (module docstring): what the GPU lacks, at
    most the optimizer states, each byte freeing its fragmentation allowance too; 0 for other methods."""
    if training.method != "qlora":
        return 0.0 * total
    return np.clip((total - capacity) / (1 + fragmentation), 0.0, optimizer)

