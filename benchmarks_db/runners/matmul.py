"""Matmul throughput over a sweep of shapes and dtypes: numpy on the CPU, torch.mm on CUDA/ROCm/MPS, in the manner
of ml-engineering's mamf-finder (random normal inputs, warm-up, then timed calls; FLOPs = 2*m*n*k). On a GPU each
timed call is preceded by an untimed overwrite of a 256 MiB buffer, so the operands are not served from L2."""
from __future__ import annotations

import numpy as np

from benchmarks_db.result_schema import MatmulResult
from benchmarks_db.runners.common import Device, Progress, rate_stats, time_calls

CPU_DTYPES = {"fp32": np.float32, "fp64": np.float64}
GPU_DTYPES = ("bf16", "fp16", "fp32")
L2_FLUSH_BYTES = 256 * 2**20            # mamf-finder's cache-flush buffer


def plan(dev: Device, quick: bool) -> tuple[list[tuple[int, int, int]], list[str], int, int]:
    """(shapes m x n x k, dtypes, warm-up calls, timed calls)."""
    if dev.kind == "cpu":
        sizes = [256, 512] if quick else [1024, 2048, 4096]
        return [(s, s, s) for s in sizes], list(CPU_DTYPES), (1 if quick else 2), (5 if quick else 7)
    sizes = [1024, 2048] if quick else [2048, 4096, 8192, 16384]
    shapes = [(s, s, s) for s in sizes] + ([] if quick else [(8192, 8192, 1024), (16384, 8192, 4096)])
    return shapes, list(GPU_DTYPES), (5 if quick else 50), (10 if quick else 100)


def _numpy_call(shape, dtype):
    m, n, k = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(CPU_DTYPES[dtype])
    b = rng.standard_normal((k, n)).astype(CPU_DTYPES[dtype])
    c = np.empty((m, n), dtype=CPU_DTYPES[dtype])
    return (lambda: np.matmul(a, b, out=c)), None


def _torch_call(dev: Device, shape, dtype):
    torch = dev.torch
    torch.backends.cuda.matmul.allow_tf32 = False          # fp32 means fp32, not TF32 tensor cores
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    m, n, k = shape
    device = "cuda" if dev.kind == "cuda" else "mps"
    a = torch.randn(m, k, dtype=tdt, device=device)
    b = torch.randn(k, n, dtype=tdt, device=device)
    c = torch.empty(m, n, dtype=tdt, device=device)
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)
    return (lambda: torch.mm(a, b, out=c)), flush.zero_


def run(dev: Device, quick: bool, progress: Progress) -> list[MatmulResult]:
    shapes, dtypes, warmup, repeats = plan(dev, quick)
    cases = [(d, s) for d in dtypes for s in shapes]
    out = []
    for i, (dtype, shape) in enumerate(cases, 1):
        label = f"{dtype} {shape[0]}x{shape[1]}x{shape[2]}"
        progress.status(f"matmul {i}/{len(cases)} {label} ...")
        call, flush = _numpy_call(shape, dtype) if dev.kind == "cpu" else _torch_call(dev, shape, dtype)
        times = time_calls(call, dev, warmup, repeats, before=flush)
        tflop = 2 * shape[0] * shape[1] * shape[2] / 1e12
        rate, t, cv = rate_stats(times, tflop)
        out.append(MatmulResult(benchmark="matmul", unit="TFLOP/s", backend="numpy" if dev.kind == "cpu" else "torch",
                                dtype=dtype, m=shape[0], n=shape[1], k=shape[2], stats=rate, time_s=t,
                                n_samples=repeats, warmup_iters=warmup, cv_pct=cv))
        progress.line(f"  matmul {i:>2}/{len(cases)} | {label:<22} | median {rate.median:9.4f} max {rate.max:9.4f} "
                      f"TFLOP/s | cv {cv:4.1f}%")
    return out
