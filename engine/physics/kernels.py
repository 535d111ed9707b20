"""Time of single kernels on one accelerator: matrix multiplies by shape, fused attention, streaming kernels.

Matmul: a GEMM C[M,N] = A[M,K] B[K,N] does 2MNK FLOPs and moves its three operands through HBM at least once. A
tiled kernel hides the traffic behind the math in its main loop but not in each tile's prologue and epilogue or in
the tail of a wave, so neither the plain roofline max(math, traffic) (too optimistic for skinny shapes) nor their sum
(too pessimistic: it would put a 6144x17920x2816 GEMM, the H100's best measured shape at 792 TFLOP/s, 13% below an
8192^3 one) fits; the two times combine in quadrature, sqrt(math^2 + traffic^2). Large GEMMs then run at the
max-achievable matmul rate measured on the accelerator (within 1-2%), a 1024-deep one ~5% below it, and a skinny
GEMM (few tokens per expert, M << F/BW) is bound by reading its weights. (Max achievable matmul rates and their best
shapes: ml-engineering compute/accelerator README and mag-/gpu_benchmark README.)

Fused (Flash) attention runs at its own achievable rates, forward and backward (engine.physics.hardware: measured where
published, FlashAttention-2 on A100 and cuDNN on H100). Short key ranges run slower: each 128-row query block pays a
fixed cost (load Q, rescale, write O) worth ~256 keys, so efficiency is s/(s + 256) (cuDNN backward on H100, Shah et
al. 2024 Fig. 6: 305, 408, 465, 499 TFLOP/s at 0.5k, 1k, 2k, 4k keys against ~520 at 16k).
"""
from __future__ import annotations

import numpy as np

GEMM_COMBINE = 2.0                        # p of the p-norm combining math and traffic time (module docstring)
ATTENTION_FIXED_KEYS = 256.0              # per-query-block fixed cost in keys (two 128-wide key tiles)
FLASH_BWD_FLOPS = 2.5                     # FlashAttention backward: 5 matmuls to the forward's 2 (Dao 2023 sec. 3.2)


def gemm_s(m, n, k, flops_per_s: float, bytes_per_s: float, in_bytes: float, out_bytes: float = 2.0) -> np.ndarray:
    """Seconds for C[m,n] = A[m,k] B[k,n]: 2mnk at the achievable matmul rate and the operands' HBM traffic,
    combined in quadrature (module docstring)."""
    compute = 2.0 * m * n * k / flops_per_s
    traffic = (in_bytes * (m * k + k * n) + out_bytes * m * n) / bytes_per_s
    return (compute ** GEMM_COMBINE + traffic ** GEMM_COMBINE) ** (1.0 / GEMM_COMBINE)


def linear_s(tokens, k, n, flops_per_s: float, bytes_per_s: float, in_bytes: float,
             grad_bytes: float) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) seconds of a linear layer y[tokens, n] = x[tokens, k] W[k, n]: the backward computes the
    input gradient (tokens x n times n x k) and the weight gradient (k x tokens times tokens x n), written in the
    gradients' format (grad_bytes: 4 with fp32 accumulation, engine.physics.memory.bytes_per_element)."""
    fwd = gemm_s(tokens, n, k, flops_per_s, bytes_per_s, in_bytes)
    dgrad = gemm_s(tokens, k, n, flops_per_s, bytes_per_s, in_bytes)
    wgrad = gemm_s(k, n, tokens, flops_per_s, bytes_per_s, in_bytes, out_bytes=grad_bytes)
    return fwd, dgrad + wgrad


def flash_attention_s(flops_fwd, keys, fwd_flops_per_s: float, bwd_flops_per_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) seconds of fused attention doing flops_fwd forward FLOPs over `keys` keys per query."""
    length = keys / (keys + ATTENTION_FIXED_KEYS)
    fwd = flops_fwd / (fwd_flops_per_s * length)
    bwd = FLASH_BWD_FLOPS * flops_fwd / (bwd_flops_per_s * length)
    return fwd, bwd


def stream_s(nbytes, bytes_per_s: float) -> np.ndarray:
    """Seconds for a memory-bound kernel moving nbytes through HBM."""
    return nbytes / bytes_per_s
