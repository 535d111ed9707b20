"""Sequential write and read throughput of a directory (for checkpoint planning): a file written in large blocks
and fsync'ed (the fsync is inside the timed region, as a checkpoint must be durable), then read back after asking
the kernel to drop its cached pages (posix_fadvise DONTNEED), so the read comes from the device, not from RAM.
On tmpfs or when the drop is not possible the result says so."""
from __future__ import annotations

import os
import tempfile
import time

from benchmarks_db.result_schema import StorageResult
from benchmarks_db.runners.common import Progress, rate_stats


def filesystem(path: str) -> str | None:
    """The mount's filesystem type (/proc/mounts: the longest mount point that contains path)."""
    try:
        best = ("", None)
        with open("/proc/mounts") as fh:
            for line in fh:
                _, mnt, fstype = line.split()[:3]
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
                    best = (mnt, fstype)
        return best[1]
    except OSError:
        return None


def _drop_cache(fd: int) -> bool:
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (AttributeError, OSError):
        return False


def run(directory: str | None, quick: bool, progress: Progress) -> tuple[list[StorageResult], list[str]]:
    size = (16 if quick else 1024) * 2**20
    block = (1 if quick else 16) * 2**20
    warmup, repeats = 1, 5
    base = os.path.realpath(directory or tempfile.gettempdir())
    fstype = filesystem(base)
    warnings = []
    if fstype in ("tmpfs", "ramfs", "overlay"):
        warnings.append(f"storage: {base} is on {fstype}: the figures are memory or container-layer speed, not a "
                        f"disk; pass --storage-dir on the checkpoint file system")
    payload = os.urandom(block)              # incompressible, so compressing file systems cannot cheat
    buf = bytearray(block)
    times = {"write": [], "read": []}
    dropped = True
    with tempfile.TemporaryDirectory(dir=base, prefix="benchmarks_db_storage_") as tmp:
        path = os.path.join(tmp, "data.bin")
        for i in range(warmup + repeats):
            progress.status(f"storage {i + 1}/{warmup + repeats} ...")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            t0 = time.perf_counter()
            for _ in range(size // block):
                os.write(fd, payload)
            os.fsync(fd)
            t_write = time.perf_counter() - t0
            dropped &= _drop_cache(fd)
            os.close(fd)
            fd = os.open(path, os.O_RDONLY)
            t0 = time.perf_counter()
            while os.readv(fd, [buf]):
                pass
            t_read = time.perf_counter() - t0
            os.close(fd)
            if i >= warmup:
                times["write"].append(t_write)
                times["read"].append(t_read)
    if not dropped:
        warnings.append("storage: the page cache could not be dropped; reads may come from RAM")
    out = []
    for op in ("write", "read"):
        rate, t, cv = rate_stats(times[op], size / 1e9)
        out.append(StorageResult(benchmark="storage", unit="GB/s", op=op, file_bytes=size, block_bytes=block,
                                 fsync=op == "write", page_cache_dropped=dropped, filesystem=fstype, stats=rate,
                                 time_s=t, n_samples=repeats, warmup_iters=warmup, cv_pct=cv))
        progress.line(f"  storage  | {op:<5} {size / 2**20:.0f} MiB in {block / 2**20:.0f} MiB blocks on {fstype} | "
                      f"median {rate.median:7.3f} max {rate.max:7.3f} GB/s | cv {cv:4.1f}%")
    return out, warnings
