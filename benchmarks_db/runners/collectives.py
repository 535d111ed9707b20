"""Collective bus bandwidth over a sweep of message sizes with torch.distributed on N local processes: gloo on the
CPU (a pipeline check, not an interconnect figure), NCCL (RCCL on ROCm) with one process per GPU.

Timing as ml-engineering's all_reduce_bench: barrier, clock, op, device sync, clock; the per-iteration time is the
maximum over ranks. Sizes and bandwidths as nccl-tests defines them (doc/PERFORMANCE.md): message_bytes is the
whole buffer (for all-gather the gathered output, for reduce-scatter the input), algbw = bytes / time,
busbw = algbw x 2(n-1)/n (all-reduce) or (n-1)/n (all-gather, reduce-scatter)."""
from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
import time

from benchmarks_db.checks import bus_factor
from benchmarks_db.result_schema import CollectiveResult
from benchmarks_db.runners.common import Device, Progress, rate_stats

OPS = ("all_reduce", "all_gather", "reduce_scatter")
ELEMENT_BYTES = 4                         # fp32


def skip_reason(dev: Device, ranks: int | None) -> str | None:
    if dev.torch is None:
        return "torch is not installed (pip install torch): collectives need torch.distributed"
    if not dev.torch.distributed.is_available():
        return "this torch build has no torch.distributed"
    if dev.kind == "mps":
        return "MPS has no collective backend; run with --device cpu for a gloo check"
    if dev.kind == "cuda" and (ranks or dev.count) < 2:
        return f"{dev.count} GPU: a collective needs at least 2 (run with --device cpu for a gloo pipeline check)"
    if dev.kind == "cuda" and (ranks or dev.count) > dev.count:
        return f"--ranks {ranks} is more than the {dev.count} GPUs present"
    if dev.kind == "cpu" and not dev.torch.distributed.is_gloo_available():
        return "this torch build has no gloo backend"
    return None


def plan(dev: Device, quick: bool) -> tuple[list[int], int, int]:
    """(message sizes in bytes, warm-up iterations, timed iterations)."""
    if quick:
        return [2**10 * 4**i for i in range(6)], 2, 5                   # 1 KiB .. 1 MiB
    if dev.kind == "cpu":
        return [2**10 * 4**i for i in range(9)], 3, 10                  # 1 KiB .. 64 MiB
    return [2**20 * 2**i for i in range(12)], 5, 20                      # 1 MiB .. 2 GiB


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, backend: str, sizes: list[int], warmup: int, iters: int,
            out_path: str) -> None:
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    dist.init_process_group(backend, rank=rank, world_size=world)
    sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
    # torch 2.13 renamed the tensor forms to *_single; older releases only have *_tensor
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    results, skipped = [], {}
    for op in OPS:
        for size in sizes:
            chunk = max(1, size // ELEMENT_BYTES // world)       # elements per rank
            full = torch.ones(chunk * world, dtype=torch.float32, device=device)
            part = torch.ones(chunk, dtype=torch.float32, device=device)
            call = {"all_reduce": lambda: dist.all_reduce(full),
                    "all_gather": lambda: gather(full, part),
                    "reduce_scatter": lambda: scatter(part, full)}[op]
            times = []
            try:
                for i in range(warmup + iters):
                    dist.barrier()
                    sync()
                    t0 = time.perf_counter()
                    call()
                    sync()
                    dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
                    dist.all_reduce(dt, op=dist.ReduceOp.MAX)
                    if i >= warmup:
                        times.append(float(dt.item()))
            except (RuntimeError, ValueError, NotImplementedError) as err:    # op missing from this backend
                skipped[op] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
                break
            results.append({"op": op, "message_bytes": chunk * world * ELEMENT_BYTES, "times": times})
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump({"results": results, "skipped": skipped}, fh)
    dist.destroy_process_group()


def run(dev: Device, quick: bool, ranks: int | None, progress: Progress) -> tuple[list[CollectiveResult], list[str]]:
    import torch.multiprocessing as mp
    backend = "nccl" if dev.kind == "cuda" else "gloo"
    world = ranks or (dev.count if dev.kind == "cuda" else 2)
    sizes, warmup, iters = plan(dev, quick)
    progress.status(f"collectives: starting {world} {backend} processes ...")
    with tempfile.TemporaryDirectory(prefix="benchmarks_db_coll_") as tmp:
        path = os.path.join(tmp, "rank0.json")
        mp.spawn(_worker, args=(world, _free_port(), backend, sizes, warmup, iters, path), nprocs=world, join=True)
        with open(path) as fh:
            raw = json.load(fh)
    out = []
    for r in raw["results"]:
        factor = bus_factor(r["op"], world)
        algbw, t, cv = rate_stats(r["times"], r["message_bytes"] / 1e9)
        busbw = type(algbw)(**{k: v * factor for k, v in algbw.model_dump().items() if v is not None})
        out.append(CollectiveResult(benchmark="collectives", unit="GB/s", op=r["op"], backend=backend, dtype="fp32",
                                    message_bytes=r["message_bytes"], n_ranks=world, n_nodes=1, stats=busbw,
                                    algbw=algbw, time_s=t, n_samples=iters, warmup_iters=warmup, cv_pct=cv))
        progress.line(f"  coll   | {r['op']:<14} {world} x {backend} {r['message_bytes']:>11,d} B | busbw median "
                      f"{busbw.median:8.3f} algbw {algbw.median:8.3f} GB/s | time {statistics.median(r['times']) * 1e6:9.1f} us")
    warnings = [f"collectives: {op} skipped: {why}" for op, why in raw["skipped"].items()]
    return out, warnings
