"""Read a runner result file (benchmarks_db/result_schema.py) into Runs, checking each figure against the times it
was computed from."""
from __future__ import annotations

from datetime import datetime

from pydantic import ValidationError

from benchmarks_db.accelerators import accelerator, catalog_id, device_type
from benchmarks_db.checks import bus_factor, close, to_canonical
from benchmarks_db.records import Measurement, Run, Software, System
from benchmarks_db.result_schema import ResultFile, Stats

STREAM_WORDS = {"copy": 2, "scale": 2, "add": 3, "triad": 3}    # McCalpin stream.c byte counting per element


def looks_like(head: str) -> bool:
    return '"schema_version"' in head and '"results"' in head


def friendly(err: ValidationError, limit: int = 20) -> list[str]:
    out = []
    for e in err.errors(include_url=False, include_input=False)[:limit]:
        loc = ".".join(str(x) for x in e["loc"]) or "(file)"
        out.append(f"{loc}: {e['msg'].removeprefix('Value error, ')}")
    return out


def utc_naive(dt: datetime) -> datetime:
    """The store keeps naive UTC timestamps."""
    return dt if dt.tzinfo is None else (dt - dt.utcoffset()).replace(tzinfo=None)


def _work(r) -> float:
    """Work per iteration in the canonical unit x seconds (TFLOP or GB)."""
    if r.benchmark == "matmul":
        return 2 * r.m * r.n * r.k / 1e12           # FLOPs of an m x k by k x n product
    if r.benchmark == "membw":
        return r.bytes_per_iter / 1e9
    if r.benchmark == "storage":
        return r.file_bytes / 1e9
    return r.message_bytes / 1e9                    # h2d copy; collectives: algbw = message size / time


def _check_rate(where: str, label: str, stats: Stats, factor: float, work: float, time_s: Stats) -> list[str]:
    errors = []
    for stat, t in (("median", time_s.median), ("max", time_s.min), ("min", time_s.max)):
        got, want = getattr(stats, stat) * factor, work / t
        if not close(got, want):
            errors.append(f"{where}.{label}.{stat}: {got:.6g} does not match the work per iteration / time "
                          f"= {want:.6g}; a rate must be work / time (TFLOP/s = 2*m*n*k/t/1e12, GB/s = bytes/t/1e9)")
    return errors


def parse(text: str, accelerator_override: str | None) -> tuple[list[Run], list[str], list[str]]:
    """(runs, errors, warnings)."""
    try:
        doc = ResultFile.model_validate_json(text)
    except ValidationError as err:
        return [], friendly(err), []
    errors: list[str] = []
    sysi, swi = doc.system, doc.software
    accel = accelerator_override or (sysi.accelerator_id if accelerator(sysi.accelerator_id) else None) \
        or catalog_id(sysi.device_name)
    raw = sysi.device_name if sysi.device_type != "cpu" else (sysi.cpu_model or sysi.device_name)
    ignored = []
    if sysi.device_type == "cpu" and accelerator_override:
        # a CPU measurement describes the host, not an accelerator: say the label is not used rather than drop it
        ignored.append(f"the accelerator given ({accelerator_override[:60]!r}) is not used: this file measured the "
                       f"CPU ({raw[:60]!r}), so it is stored as a CPU result; run the runner on the accelerator "
                       "(--device cuda or rocm) to measure it")
    system = System(accelerator_raw=raw, accelerator_id=accel if sysi.device_type != "cpu" else None,
                    device_type=sysi.device_type if sysi.device_type != "gpu" else device_type(accel, raw),
                    accelerators_per_node=sysi.device_count, n_nodes=sysi.n_nodes,
                    n_accelerators=sysi.device_count * sysi.n_nodes, host_cpu=sysi.cpu_model,
                    host_memory=f"{sysi.host_memory_gib:.1f} GiB" if sysi.host_memory_gib else None,
                    extra={"cpu_cores": sysi.cpu_cores, "device_memory_gib": sysi.device_memory_gib,
                           "hostname_sha256": sysi.hostname_sha256})
    software = Software(os=swi.os, kernel=swi.kernel, python_version=swi.python, numpy_version=swi.numpy,
                        blas=swi.blas, torch_version=swi.torch, cuda_version=swi.cuda, rocm_version=swi.rocm,
                        driver_version=swi.driver, nccl_version=swi.nccl,
                        extra={"threads": swi.threads, "env_vars": swi.env_vars})
    groups: dict[str, list[Measurement]] = {}
    seen: dict[str, int] = {}
    for i, r in enumerate(doc.results):
        where = f"results[{i}]"
        if (first := seen.setdefault(r.model_dump_json(), i)) != i:
            errors.append(f"{where} repeats results[{first}] exactly; remove the copy")
            continue
        factor_value, problem = to_canonical(r.metric, 1.0, r.unit)
        if problem:
            errors.append(f"{where}.unit: {problem}")
            continue
        work = _work(r)
        common = dict(n_samples=r.n_samples, cv_pct=r.cv_pct, where=where,
                      params={"mean": r.stats.mean, "time_s_median": r.time_s.median, "warmup_iters": r.warmup_iters})
        if r.benchmark == "membw":
            expected = STREAM_WORDS[r.op] * r.element_bytes * r.array_elements
            if r.bytes_per_iter != expected:
                errors.append(f"{where}.bytes_per_iter: {r.bytes_per_iter} but STREAM counts {STREAM_WORDS[r.op]} words "
                              f"of {r.element_bytes} B x {r.array_elements} elements = {expected} for {r.op}")
                continue
        if r.benchmark == "collectives":
            if r.n_nodes > r.n_ranks:
                errors.append(f"{where}: n_nodes {r.n_nodes} is more than n_ranks {r.n_ranks}")
                continue
            found = _check_rate(where, "algbw", r.algbw, factor_value, work, r.time_s)
            bf = bus_factor(r.op, r.n_ranks)
            for stat in ("median", "min", "max"):
                if not close(getattr(r.stats, stat), getattr(r.algbw, stat) * bf):
                    found.append(f"{where}.stats.{stat}: busbw must be algbw x {bf:.4g} for {r.op} on {r.n_ranks} ranks "
                                 f"(nccl-tests PERFORMANCE.md); got {getattr(r.stats, stat):.6g} vs "
                                 f"{getattr(r.algbw, stat) * bf:.6g}")
        else:
            found = _check_rate(where, "stats", r.stats, factor_value, work, r.time_s)
        if found:
            errors += found
            continue
        scale = lambda s: (s.median * factor_value, s.min * factor_value, s.max * factor_value)
        v, lo, hi = scale(r.stats)
        if r.benchmark == "matmul":
            ms = [Measurement("matmul_tflops", v, "TFLOP/s", "median", value_min=lo, value_max=hi, dtype=r.dtype,
                              m=r.m, n=r.n, k=r.k, backend=r.backend, **common)]
        elif r.benchmark == "membw":
            common["params"] |= {"implementation": r.implementation, "array_elements": r.array_elements,
                                 "element_bytes": r.element_bytes}
            ms = [Measurement("mem_bw", v, "GB/s", "median", value_min=lo, value_max=hi, op=r.op,
                              message_bytes=r.bytes_per_iter, **common)]
        elif r.benchmark == "h2d":
            common["params"] |= {"pinned": r.pinned}
            ms = [Measurement("copy_bw", v, "GB/s", "median", value_min=lo, value_max=hi, op=r.op,
                              message_bytes=r.message_bytes, **common)]
        elif r.benchmark == "collectives":
            a, alo, ahi = scale(r.algbw)
            coll = dict(op=r.op, dtype=r.dtype, message_bytes=r.message_bytes, n_ranks=r.n_ranks, n_nodes=r.n_nodes,
                        backend=r.backend)
            ms = [Measurement("busbw", v, "GB/s", "median", value_min=lo, value_max=hi, **coll, **common),
                  Measurement("algbw", a, "GB/s", "median", value_min=alo, value_max=ahi, **coll, **common)]
        else:
            common["params"] |= {"fsync": r.fsync, "page_cache_dropped": r.page_cache_dropped,
                                 "block_bytes": r.block_bytes, "filesystem": r.filesystem}
            ms = [Measurement("io_bw", v, "GB/s", "median", value_min=lo, value_max=hi, op=r.op,
                              message_bytes=r.file_bytes, **common)]
        groups.setdefault(r.benchmark, []).extend(ms)
    if errors:
        return [], errors[:50] + ([f"... and {len(errors) - 50} more"] if len(errors) > 50 else []), []
    runs = []
    for benchmark, ms in groups.items():
        run = Run(suite="microbench", benchmark=benchmark, tool=doc.runner.name, tool_version=doc.runner.version,
                  system=system, software=software, measurements=ms,
                  started_at=utc_naive(doc.runner.started_at),
                  duration_s=doc.runner.duration_s, params={"argv": doc.runner.argv, "quick": doc.runner.quick})
        if doc.runner.quick:
            run.flags.append("--quick run (small sizes): a pipeline check, not a calibration value")
        if any(m.params.get("warmup_iters") == 0 for m in ms):
            run.flags.append("no warm-up iterations: cold-device numbers are not sustainable (ml-engineering PR #59)")
        runs.append(run)
    warnings = ignored + [f"runner skipped {s.runner}: {s.reason}" for s in doc.skipped] + list(doc.warnings)
    if not runs:
        return [], ["the file has no results (every runner was skipped?)"] + warnings, []
    return runs, [], warnings
