"""Compute time of one micro-batch on one GPU, layer by layer, from the architecture (not from an assumed MFU).

Each layer is a short list of kernels, timed by a roofline: weight matmuls at the accelerator's achievable
matmul rate (peak x measured max-achievable-matmul efficiency), element-wise kernels (norms, residual and
dropout, activation functions, softmax) at achievable memory bandwidth. Backward is 2x forward for matmuls
(input and weight gradients) and for element-wise traffic; FlashAttention's backward is 2.5x its forward
(Dao 2023, FlashAttention-2 sec. 3.2: it recomputes the scores).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.hardware import Hardware
from engine.layouts import Layouts
from engine.memory import bytes_per_element
from engine.model import Shape
from engine.scenario import Training


@dataclass(frozen=True)
class LayerTimes:
    fwd: np.ndarray
    bwd: np.ndarray
    recompute: np.ndarray
    attn_fwd: np.ndarray     # attention core alone: what context-parallel KV exchange can hide behind
    attn_bwd: np.ndarray


def layer_times(shape: Shape, training: Training, hw: Hardware, lay: Layouts, moe: bool) -> LayerTimes:
    e = bytes_per_element(training)["activation"]
    h, t, a, s = shape.hidden, lay.tp, shape.n_heads, training.seq_len
    tokens = lay.mbs * (s / lay.cp)
    flash = training.attention == "flash"

    if moe:
        mlp_params = shape.top_k * shape.expert_params + shape.shared_expert_params
        ffn = shape.top_k * shape.expert_ffn + shape.shared_ffn
    else:
        mlp_params, ffn = shape.dense_mlp_params, shape.dense_ffn
    linear_fwd = tokens * 2.0 * (shape.attn_params + mlp_params) / t / hw.matmul_flops
    if moe:
        linear_fwd = linear_fwd + tokens * 2.0 * shape.router_params / hw.matmul_flops

    # attention core: flash skips the masked half of the causal square; standard attention computes all of it and
    # streams the s x s scores through HBM (QK^T write, softmax and dropout read/write, A.V read)
    core_flops = tokens * shape.attn_core_flops_per_token(s) / t * (0.5 if flash else 1.0)
    core_math = core_flops / hw.attention_flops
    if flash:
        attn_fwd, attn_bwd = core_math, 2.5 * core_math
    else:
        scores = tokens * a * s / t
        bmm = np.maximum(core_math, scores * 2 * e / hw.hbm_bytes_per_s)
        softmax_dropout = scores * (2 * e + (2 * e + 1 if shape.dropout else 0)) / hw.hbm_bytes_per_s
        attn_fwd = bmm + softmax_dropout
        attn_bwd = 2 * attn_fwd

    # element-wise traffic per token: two norms (read+write), two residual adds (2 reads, write; + dropout mask),
    # the activation function (gelu: read+write f; swiglu: read 2f, write f), MoE token permutation
    sp_div = np.where(lay.sp, t, 1)
    per_token = (2 * 2 * e * h + 2 * (3 * e + (1 if shape.dropout else 0)) * h) / sp_div + (3 if shape.gated else 2) * e * ffn / t
    if moe:
        per_token = per_token + 4 * e * h * shape.top_k / t
    if training.precision == "fp8":                        # casting each matmul input to fp8 (read 16-bit, write 8-bit)
        per_token = per_token + (e + 1) * (3 * h + ffn) / t
    elementwise_fwd = tokens * per_token / hw.hbm_bytes_per_s

    fwd = linear_fwd + attn_fwd + elementwise_fwd
    bwd = 2 * linear_fwd + attn_bwd + 2 * elementwise_fwd
    selective = attn_fwd if not flash else 0.0 * attn_fwd
    recompute = np.select([lay.rc == 0, lay.rc == 1], [0.0 * fwd, selective], fwd)
    return LayerTimes(fwd=fwd, bwd=bwd, recompute=recompute, attn_fwd=attn_fwd, attn_bwd=attn_bwd)


def head_times(shape: Shape, training: Training, hw: Hardware, lay: Layouts) -> tuple[np.ndarray, np.ndarray]:
    """Output projection and cross-entropy loss (last stage), forward and backward, one micro-batch."""
    e = bytes_per_element(training)["activation"]
    tokens = lay.mbs * (training.seq_len / lay.cp)
    matmul = tokens * 2.0 * shape.hidden * shape.vocab / lay.tp / hw.matmul_flops
    # loss: read 16-bit logits, softmax in fp32 (write, read), write 16-bit gradient
    loss = tokens * shape.vocab / lay.tp * (2 * e + 8) / hw.hbm_bytes_per_s
    return matmul + loss / 2, 2 * matmul + loss / 2


def embedding_times(shape: Shape, training: Training, hw: Hardware, lay: Layouts) -> tuple[np.ndarray, np.ndarray]:
    """Token-embedding gather (first stage) forward and its scatter-add backward, one micro-batch."""
    e = bytes_per_element(training)["activation"]
    tokens = lay.mbs * (training.seq_len / lay.cp)
    gather = tokens * 2 * e * shape.hidden / hw.hbm_bytes_per_s
    return gather, 2 * gather


def optimizer_step_s(local_params: np.ndarray, training: Training, hw: Hardware) -> np.ndarray:
    """The optimizer update streams every parameter's state once: Adam reads gradient, master weight and two
    moments and writes them back plus the 16-bit copy (28 bytes/param mixed precision); SGD 20 bytes."""
    b = bytes_per_element(training)
    moments = 8.0 if training.optimizer == "adam" else 4.0
    master = 4.0
    copy = b["weight"] if training.precision != "fp32" else 0.0
    traffic = b["grad"] + 2 * (master + moments) + copy
    return local_params * traffic / hw.hbm_bytes_per_s


def flops_per_token(shape: Shape, training: Training, lay: Layouts) -> tuple[float, np.ndarray]:
    """(model FLOPs, hardware FLOPs) per trained token. Model FLOPs are 3x the forward pass with the full attention
    square (PaLM appendix B, Narayanan et al. 2021); hardware FLOPs add the recomputed forward work."""
    s = training.seq_len
    model = shape.model_flops_per_token(s)
    layers_fwd = (shape.n_dense_layers * shape.layer_linear_flops_per_token(False)
                  + shape.n_moe_layers * shape.layer_linear_flops_per_token(True)
                  + shape.n_layers * shape.attn_core_flops_per_token(s))
    attention_fwd = shape.n_layers * shape.attn_core_flops_per_token(s)
    extra = np.select([lay.rc == 0, lay.rc == 1], [0.0, attention_fwd if training.attention == "standard" else 0.0], layers_fwd)
    return model, model + extra
