"""Compute time of one transformer layer for one micro-batch on one GPU, kernel by kernel, from the architecture and
the layout (not from an assumed MFU).

A layer is its weight matmuls (each timed by its own shape, engine.physics.kernels.gemm_s: the projections, the MLP or the
routed experts with the tokens each expert actually receives, the router), the attention core (fused
FlashAttention at its forward and backward rates, or the materialised softmax of older stacks), element-wise
kernels at achievable memory bandwidth (norms, residual adds and dropout, the activation function, MoE token
permutation, FP8 casts), and a fixed cost per layer for the ~30 kernel launches and the gaps between them.
Backward: input- and weight-gradient matmuls, FlashAttention's recomputing backward, twice the element-wise traffic.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.physics.hardware import Hardware
from engine.physics.kernels import flash_attention_s, gemm_s, linear_s, stream_s
from engine.physics.layouts import Layouts
from engine.physics.memory import bytes_per_element
from engine.physics.model import Shape, routed_copies
from engine.scenario import Training

# Fixed time per transformer layer and micro-batch in the forward pass (the backward pays twice): kernel launches
# and the idle gaps between ~30 dependent kernels at ~2 us each (launch overheads of a few microseconds per kernel:
# NVIDIA, "Getting Started with CUDA Graphs", https://developer.nvidia.com/blog/cuda-graphs/). An estimate, not
# fitted: scripts/calibrate_sustained.py fits only the sustained levels. It matters only where a layer's kernels
# are short.
LAYER_FIXED_S = 60e-6


@dataclass(frozen=True)
class LayerTimes:
    fwd: np.ndarray
    bwd: np.ndarray
    recompute: np.ndarray
    matmul_fwd: np.ndarray   # the weight matmuls alone: what tensor-parallel communication can overlap with
    matmul_bwd: np.ndarray
    attn_fwd: np.ndarray     # attention core alone: what context-parallel KV exchange can hide behind
    attn_bwd: np.ndarray
    mlp_fwd: np.ndarray      # the MLP (or routed and shared experts with their fixed cost) alone: what a micro-
    mlp_bwd: np.ndarray      # batch's MoE all-to-all hides behind under the overlap (the rest is attention)


def attention_keys(shape: Shape, seq_len: int) -> float:
    """Keys a query attends to on average under the causal mask, over all layers (sliding or chunked windows
    where the architecture has them): sum over positions i of min(i + 1, window) / seq_len."""
    windows = getattr(shape, "attention_windows", None) or (None,) * shape.n_layers
    total = 0.0
    for w in windows:
        if w is None or w >= seq_len:
            total += (seq_len + 1) / 2
        else:
            total += w - w * (w - 1) / (2 * seq_len)
    return total / len(windows)


def tokens_per_local_expert(shape: Shape, training: Training, lay: Layouts, tokens):
    """Routed token copies each local expert of the busiest expert-parallel rank receives in a micro-batch of
    `tokens` tokens per GPU (split by expert tensor parallelism; routed_copies)."""
    return tokens * routed_copies(shape, training.expert_load_ratio, lay.ep) * lay.ep * lay.etp / (lay.tp * shape.n_experts)


def _mlp_shapes(shape: Shape, training: Training, lay: Layouts, tokens, moe: bool):
    """(count, M, K, N) of the forward matmuls of the MLP part of a layer on one GPU (the busiest expert-parallel
    rank's, for a MoE layer)."""
    t = lay.tp
    up = 2 if shape.gated else 1
    if not moe:
        f = shape.dense_ffn
        return [(1, tokens, shape.hidden, up * f / t), (1, tokens, f / t, shape.hidden)]
    et, ep = lay.etp, lay.ep
    per_expert = tokens_per_local_expert(shape, training, lay, tokens)
    local = shape.n_experts / ep
    f = shape.expert_ffn
    out = [(local, per_expert, shape.hidden, up * f / et), (local, per_expert, f / et, shape.hidden),
           (1, tokens / t, shape.hidden, shape.n_experts)]                 # router (sequence-parallel tokens)
    if shape.shared_ffn:
        out += [(1, tokens, shape.hidden, up * shape.shared_ffn / t), (1, tokens, shape.shared_ffn / t, shape.hidden)]
    return out


def layer_times(shape: Shape, training: Training, hw: Hardware, lay: Layouts, moe: bool) -> LayerTimes:
    b = bytes_per_element(training)
    e = b["activation"]
    h, t, a, s = shape.hidden, lay.tp, shape.n_heads, training.seq_len
    tokens = lay.mbs * (s / lay.cp)
    flash = training.attention == "flash"
    mm = lambda count, m, k, n: tuple(count * x for x in linear_s(m, k, n, hw.matmul_flops, hw.hbm_bytes_per_s,
                                                                   hw.matmul_input_bytes, b["grad"]))
    out_proj = a * shape.v_head_dim
    gemms = [(1, tokens, h, (shape.attn_params - out_proj * h) / h / t), (1, tokens, out_proj / t, h)]
    gemms += _mlp_shapes(shape, training, lay, tokens, moe)
    times = [mm(*g) for g in gemms]
    matmul_fwd = sum(x[0] for x in times)
    matmul_bwd = sum(x[1] for x in times)
    mlp_fwd = sum(x[0] for x in times[2:])
    mlp_bwd = sum(x[1] for x in times[2:])

    heads = a / t
    if flash:
        keys = attention_keys(shape, s)
        flops = tokens * heads * 2.0 * (shape.qk_head_dim + shape.v_head_dim) * keys
        attn_fwd, attn_bwd = flash_attention_s(flops, np.minimum(2 * keys, s / lay.cp), hw.attention_fwd_flops,
                                               hw.attention_bwd_flops)
    else:
        # materialised attention: per head, Q.K^T writes the s x s scores, softmax and dropout stream them, A.V reads
        batch = lay.mbs * heads / lay.cp
        qk = gemm_s(s, s, shape.qk_head_dim, hw.attention_flops, hw.hbm_bytes_per_s, 2.0)
        av = gemm_s(s, shape.v_head_dim, s, hw.attention_flops, hw.hbm_bytes_per_s, 2.0)
        scores = batch * s * s
        softmax_dropout = stream_s(scores * (2 * e + (2 * e + 1 if shape.dropout else 0)), hw.hbm_bytes_per_s)
        attn_fwd = batch * (qk + av) + softmax_dropout
        attn_bwd = 2 * attn_fwd

    # element-wise traffic per token: two norms (read+write), two residual adds (2 reads, write; + dropout mask),
    # the activation function (gelu: read+write f; swiglu: read 2f, write f), MoE token permutation
    sp_div = np.where(lay.sp, t, 1)
    if moe:
        routed = routed_copies(shape, training.expert_load_ratio, lay.ep)   # copies per token
        ffn = routed * shape.expert_ffn * (lay.etp / t) + shape.shared_ffn / t
    else:
        ffn = shape.dense_ffn / t
    per_token = (2 * 2 * e * h + 2 * (3 * e + (1 if shape.dropout else 0)) * h) / sp_div + (3 if shape.gated else 2) * e * ffn
    if moe:
        per_token = per_token + 4 * e * h * routed / t                  # permute and un-permute the routed copies
    # low-precision training quantizes each matmul input (read 16-bit, write the element and its share of the scales)
    per_token = per_token + hw.cast_bytes * (3 * h / t + ffn)
    if hw.eager_elementwise:
        per_token = per_token + eager_elementwise_bytes(shape, e, t, sp_div, ffn)
    elementwise_fwd = stream_s(tokens * per_token, hw.hbm_bytes_per_s)

    expert_fixed = expert_fixed_s(shape, lay, hw) if moe else 0.0
    fixed = LAYER_FIXED_S + expert_fixed
    fwd = matmul_fwd + attn_fwd + elementwise_fwd + fixed
    bwd = matmul_bwd + attn_bwd + 2 * elementwise_fwd + 2 * fixed
    selective = selective_recompute_s(attn_fwd, matmul_fwd, elementwise_fwd, flash, hw)
    recompute = np.select([lay.rc == 0, lay.rc == 1], [0.0 * fwd, selective], fwd)
    return LayerTimes(fwd=fwd, bwd=bwd, recompute=recompute, matmul_fwd=matmul_fwd, matmul_bwd=matmul_bwd,
                      attn_fwd=attn_fwd, attn_bwd=attn_bwd, mlp_fwd=mlp_fwd + expert_fixed,
                      mlp_bwd=mlp_bwd + 2 * expert_fixed)


def eager_elementwise_bytes(shape: Shape, e: float, t, sp_div, ffn) -> np.ndarray:
    """HBM bytes per token and layer that a PyTorch model run eagerly (training.torch_compile false) moves in its
    forward beyond the fused element-wise kernels counted above, op by op as the Llama code runs them
    (torchtitan/models/norms.py and llama3/model.py, Hugging Face LlamaRMSNorm and apply_rotary_pos_emb alike):
    - RMSNorm (the block's two, and query/key norms): x.float() (read e, write 4), pow (4, 4), mean (read 4),
      x * rsqrt (4, 4), type_as (4, e), * weight (e, e) where the fused kernel reads e and writes e: 32 bytes more
      per element in bf16 (LayerNorm is one torch kernel eagerly too: nothing more);
    - the rotary embedding of the queries and keys: float() (e, 4), the complex multiply (4, 4), type_as (4, e)
      where a fused kernel reads and writes e: 16 bytes more per element in bf16;
    - the gated activation: silu (read e, write e) then mul (2e, e) where the fused one reads 2e and writes e:
      2e more per element of the MLP width.
    Casts to and from fp32 cost nothing in fp32 training. The backward and any recompute pay in proportion, as
    for the fused traffic (layer_times)."""
    widen = 0.0 if e >= 4 else 2 * (e + 4)                          # x.float() and type_as back
    norm = widen + 8 + 4 + 8 if shape.rms_norm else 0.0             # pow, mean, x * rsqrt; * weight moves what fused does
    norm_elems = 2 * shape.hidden / sp_div + shape.qk_norm_elems / t
    rotary = widen + 8 - 2 * e
    return norm * norm_elems + rotary * shape.rotary_elems / t + (2 * e * ffn if shape.gated else 0.0)


def expert_fixed_s(shape: Shape, lay: Layouts, hw: Hardware) -> np.ndarray:
    """Forward time a MoE layer's local experts add beyond their FLOPs and bytes (the backward pays twice, its two
    GEMMs per forward GEMM): two GEMMs per local expert (the fused gate/up projection and the down projection) at
    the stack's per-expert fixed cost (data/frameworks.json moe_expert_gemm_fixed_us, fitted on NeMo's H100 MoE
    runs). Many small experts per GPU (Qwen3-30B-A3B: 16 of width 768 on each of 8 GPUs) pay it many times."""
    return 2 * (shape.n_experts / lay.ep) * hw.moe_expert_gemm_fixed_s


def selective_recompute_s(attn_fwd, matmul_fwd, elementwise_fwd, flash: bool, hw: Hardware) -> np.ndarray:
    """What selective recompute runs again in the backward, by stack (data/frameworks.json recompute): Megatron's
    recomputes the materialised attention core (nothing with flash attention, which stores no scores); TorchTitan's
    per-op policy saves every other matmul and the attention, so it runs the other half of the forward matmuls and
    every element-wise op again (hw.selective_recompute_matmul_share 0.5)."""
    share = hw.selective_recompute_matmul_share
    core = 0.0 * attn_fwd if flash else attn_fwd
    return core + share * matmul_fwd + (elementwise_fwd if share > 0 else 0.0)


def head_times(shape: Shape, training: Training, hw: Hardware, lay: Layouts) -> tuple[np.ndarray, np.ndarray]:
    """Output projection and cross-entropy loss (last stage), forward and backward, one micro-batch."""
    b = bytes_per_element(training)
    e = b["activation"]
    tokens = lay.mbs * (training.seq_len / lay.cp)
    fwd, bwd = linear_s(tokens, shape.hidden, shape.vocab / lay.tp, hw.matmul_flops, hw.hbm_bytes_per_s, 2.0, b["grad"])
    # loss: read the logits, softmax in fp32 (write, read), write their gradient (logits and gradient in activation bytes)
    loss = stream_s(tokens * shape.vocab / lay.tp * (2 * e + 8), hw.hbm_bytes_per_s)
    return fwd + loss / 2, bwd + loss / 2


def embedding_times(shape: Shape, training: Training, hw: Hardware, lay: Layouts) -> tuple[np.ndarray, np.ndarray]:
    """Token-embedding gather (first stage) forward and its scatter-add backward, one micro-batch."""
    e = bytes_per_element(training)["activation"]
    tokens = lay.mbs * (training.seq_len / lay.cp)
    gather = stream_s(tokens * 2 * e * shape.hidden, hw.hbm_bytes_per_s)
    return gather, 2 * gather


def optimizer_step_s(local_params: np.ndarray, training: Training, hw: Hardware) -> np.ndarray:
    """The optimizer update streams every parameter's state once: Adam reads gradient, master weight and two
    moments and writes them back plus the 16-bit copy (28 bytes/param mixed precision); SGD 20 bytes."""
    b = bytes_per_element(training)
    moments = 8.0 if training.optimizer == "adam" else 4.0
    master = 4.0
    copy = b["weight"] if training.precision != "fp32" else 0.0
    traffic = b["grad"] + 2 * (master + moments) + copy
    return stream_s(local_params * traffic, hw.hbm_bytes_per_s)
