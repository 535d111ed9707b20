"""Memory bandwidth with STREAM's four kernels and STREAM's byte counting (McCalpin stream.c: copy c=a and scale
b=q*c count 2 words per element, add c=a+b and triad a=b+q*c count 3; write-allocate traffic is not counted).
On the CPU the arrays are float64 (STREAM's type) in numpy; numpy needs two passes for triad (a=q*c; a+=b), which
moves 5 words while 3 are counted, so its triad understates the bandwidth (said in each result). On a GPU torch
does triad in one kernel (torch.add(b, c, alpha=q))."""
from __future__ import annotations

import numpy as np

from benchmarks_db.result_schema import MembwResult
from benchmarks_db.runners.common import Device, Progress, rate_stats, time_calls

WORDS = {"copy": 2, "scale": 2, "add": 3, "triad": 3}
Q = 3.0                                  # STREAM's scalar


def array_bytes(dev: Device, quick: bool) -> int:
    """Per array. STREAM wants each array at least 4x the last-level cache; 256 MiB covers CPUs with up to 64 MiB of
    L3. --quick uses 32 MiB, which may partly sit in cache: a pipeline check, not a measurement."""
    if quick:
        return 32 * 2**20
    return 256 * 2**20 if dev.kind == "cpu" else 2**30


def _kernels(dev: Device, n: int):
    if dev.kind == "cpu":
        a, b, c = np.full(n, 1.0), np.full(n, 2.0), np.zeros(n)
        impl = "numpy float64"
        return {"copy": lambda: np.copyto(c, a), "scale": lambda: np.multiply(c, Q, out=b),
                "add": lambda: np.add(a, b, out=c),
                "triad": lambda: (np.multiply(c, Q, out=a), np.add(a, b, out=a))}, 8, {
                    **{k: impl for k in WORDS}, "triad": impl + ", 2 passes (a=q*c; a+=b): 5 words moved, 3 counted"}
    torch = dev.torch
    device = "cuda" if dev.kind == "cuda" else "mps"
    a, b, c = (torch.full((n,), v, dtype=torch.float32, device=device) for v in (1.0, 2.0, 0.0))
    impl = f"torch float32 on {device}"
    return {"copy": lambda: c.copy_(a), "scale": lambda: torch.mul(c, Q, out=b), "add": lambda: torch.add(a, b, out=c),
            "triad": lambda: torch.add(b, c, alpha=Q, out=a)}, 4, {k: impl for k in WORDS}


def run(dev: Device, quick: bool, progress: Progress) -> list[MembwResult]:
    n = array_bytes(dev, quick) // (8 if dev.kind == "cpu" else 4)
    kernels, elem, impls = _kernels(dev, n)
    warmup, repeats = (1, 5) if quick else (1, 10)      # STREAM: NTIMES=10, the first discarded
    out = []
    for i, (op, fn) in enumerate(kernels.items(), 1):
        progress.status(f"membw {op} ...")
        times = time_calls(fn, dev, warmup, repeats)
        counted = WORDS[op] * elem * n
        rate, t, cv = rate_stats(times, counted / 1e9)
        out.append(MembwResult(benchmark="membw", unit="GB/s", op=op, element_bytes=elem, array_elements=n,
                               bytes_per_iter=counted, implementation=impls[op], stats=rate, time_s=t,
                               n_samples=repeats, warmup_iters=warmup, cv_pct=cv))
        progress.line(f"  membw  {i}/4 | {op:<6} {n * elem / 2**20:6.0f} MiB arrays | best {rate.max:8.2f} "
                      f"median {rate.median:8.2f} GB/s | cv {cv:4.1f}%")
    return out
