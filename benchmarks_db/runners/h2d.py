"""Host-to-device and device-to-host copy bandwidth (needs torch with a CUDA, ROCm or MPS device): pinned and
pageable host buffers, copied with .to(..., non_blocking=True) and timed on the device (as nvbandwidth's
host_to_device_memcpy_ce and ml-engineering's tables measure it)."""
from __future__ import annotations

from benchmarks_db.result_schema import CopyResult
from benchmarks_db.runners.common import Device, Progress, rate_stats, time_calls


def skip_reason(dev: Device) -> str | None:
    if dev.torch is None:
        return "torch is not installed (pip install torch): host-device copies need a device runtime"
    if dev.kind == "cpu":
        return "no CUDA, ROCm or MPS device: there is no host-to-device link to measure"
    return None


def run(dev: Device, quick: bool, progress: Progress) -> list[CopyResult]:
    torch = dev.torch
    device = "cuda" if dev.kind == "cuda" else "mps"
    size = (64 if quick else 1024) * 2**20
    warmup, repeats = (2, 5) if quick else (3, 20)
    out = []
    pinned_options = (True, False) if dev.kind == "cuda" else (False,)      # MPS has unified memory, no pinning
    cases = [(op, pinned) for op in ("h2d", "d2h") for pinned in pinned_options]
    for i, (op, pinned) in enumerate(cases, 1):
        host = torch.empty(size, dtype=torch.uint8, pin_memory=pinned)
        dev_buf = torch.empty(size, dtype=torch.uint8, device=device)
        fn = (lambda: dev_buf.copy_(host, non_blocking=True)) if op == "h2d" else \
            (lambda: host.copy_(dev_buf, non_blocking=True))
        times = time_calls(fn, dev, warmup, repeats)
        rate, t, cv = rate_stats(times, size / 1e9)
        out.append(CopyResult(benchmark="h2d", unit="GB/s", op=op, pinned=pinned, message_bytes=size, stats=rate,
                              time_s=t, n_samples=repeats, warmup_iters=warmup, cv_pct=cv))
        progress.line(f"  h2d    {i}/{len(cases)} | {op} {'pinned' if pinned else 'pageable'} {size / 2**20:.0f} MiB | "
                      f"median {rate.median:7.2f} max {rate.max:7.2f} GB/s | cv {cv:4.1f}%")
    return out
