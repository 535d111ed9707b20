"""Validation shared by every input format: units, internal consistency, plausibility against the catalog's
datasheet peaks, statistics and metadata completeness (rules from ../shared/reference/benchmarks-formats.md 4.1).

A check either refuses the whole input (an error string naming where and how to fix it) or flags a run, which
keeps it visible but out of calibration.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import fields

from benchmarks_db.accelerators import accelerator
from benchmarks_db.records import Measurement, Run
from benchmarks_db.reference_runs import minimum_minutes

# Canonical unit per metric and the accepted spellings with their factor to it (GB/s = 1e9 B/s, MB = 1e6, MiB = 2^20).
CANONICAL_UNIT = {"time_to_train": "min", "matmul_tflops": "TFLOP/s", "mem_bw": "GB/s", "copy_bw": "GB/s",
                  "algbw": "GB/s", "busbw": "GB/s", "io_bw": "GB/s"}
UNIT_FACTORS = {
    "min": {"min": 1.0, "s": 1 / 60, "h": 60.0},
    "TFLOP/s": {"TFLOP/s": 1.0, "TFLOPS": 1.0, "GFLOP/s": 1e-3, "GFLOPS": 1e-3, "PFLOP/s": 1e3},
    "GB/s": {"GB/s": 1.0, "MB/s": 1e-3, "TB/s": 1e3, "KiB/s": 1024 / 1e9, "MiB/s": 2**20 / 1e9, "GiB/s": 2**30 / 1e9},
}
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")
COLLECTIVE_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
CONSISTENCY_TOL = 0.01                 # 1% (benchmarks-formats.md 4.1 rule 2)
REJECT_ABOVE_PEAK = 1.05               # matmul and bus bandwidth above 1.05 x datasheet peak are impossible
REJECT_ABOVE_PEAK_MEMORY = 1.02        # memory bandwidth above 1.02 x datasheet peak
REJECT_ABOVE_PEAK_NVLS = 1.15          # all-reduce with NVLink SHARP can exceed the link rate (nccl-tests #153, #212)
NVLS_CAPABLE = {"H100-SXM5-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "GB200"}
FLAG_BELOW_EFFICIENCY = 0.2            # "misconfigured, thermal or shared" (benchmarks-formats.md 4.1 rule 3)
MIN_SAMPLES = 5                        # rule 4: n_samples >= 5
FLAG_CV_PCT = 10.0                     # rule 4: cv above 10% flagged (torch Timer warns at a large IQR)
FLAG_ABOVE_PEAK_UPLOAD = 0.95          # uploads: matmul above 95% of the dense peak is flagged (published MAMF: 51-87%
                                       # of peak on every accelerator but Gaudi 2, ml-engineering's table)
MAX_TEXT = 500                         # longest accepted free-text field
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MAX_LINES = 1_000_000                  # lines of one text file (an MLPerf result log has about 50-10,000)
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1     # the store's INTEGER and BIGINT columns (benchmarks_db/migrations.py)
INT64_COLUMNS = {"m", "n", "k", "message_bytes"}
INT32_COLUMNS = {"n_samples", "n_ranks", "n_nodes", "accelerators_per_node", "n_accelerators"}


def bus_factor(op: str, n_ranks: int) -> float:
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (all-gather, reduce-scatter,
    # all-to-all), 1 (broadcast, reduce, send/recv)
    if op == "all_reduce":
        return 2 * (n_ranks - 1) / n_ranks
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n_ranks - 1) / n_ranks
    return 1.0


def close(a: float, b: float, tol: float = CONSISTENCY_TOL, abs_tol: float = 0.0) -> bool:
    """a and b agree within tol (relative) or abs_tol; never for NaN or infinity (inf - x <= tol x inf would hold)."""
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= max(tol * max(abs(a), abs(b)), abs_tol)


def to_canonical(metric: str, value: float, unit: str) -> tuple[float | None, str | None]:
    """(value in the metric's canonical unit, None) or (None, error message)."""
    canon = CANONICAL_UNIT.get(metric)
    if canon is None:
        return None, f"unknown metric {metric!r}; use one of {', '.join(CANONICAL_UNIT)}"
    factors = UNIT_FACTORS[canon]
    if unit not in factors:
        return None, f"unit {unit!r} does not fit metric {metric}; use one of {', '.join(factors)}"
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        return None, f"value {value!r} must be a finite number above zero"
    converted = value * factors[unit]
    if not (math.isfinite(converted) and converted > 0):
        return None, f"value {value:g} {unit} is {converted:g} {canon}, not a finite number above zero; check the unit"
    return converted, None


def text_problem(field: str, value) -> str | None:
    """Free text is stored as given (always as a bound parameter) but must be short and printable."""
    if value is None:
        return None
    if not isinstance(value, str):
        return f"{field} must be text"
    if len(value) > MAX_TEXT:
        return f"{field} is {len(value)} characters long; at most {MAX_TEXT} are accepted"
    if CONTROL_CHARS.search(value):
        return f"{field} contains control characters; remove them"
    return None


def link_limit_gbs(accel_id: str, op: str, n_nodes: int | None, ranks_per_node: int | None) -> float | None:
    """Highest plausible bus bandwidth (GB/s) for a collective on this accelerator and placement."""
    acc = accelerator(accel_id)
    if acc is None:
        return None
    limit = acc.intra_node_link.bandwidth_gbs
    if n_nodes and n_nodes > 1:
        # across nodes a ring is limited by min(node link, GPUs per node x per-GPU NIC) (engine/physics/comm.py)
        limit = min(limit, (ranks_per_node or 1) * acc.network.bandwidth_gbs)
    factor = REJECT_ABOVE_PEAK_NVLS if (op == "all_reduce" and accel_id in NVLS_CAPABLE) else REJECT_ABOVE_PEAK
    return limit * factor


def datasheet_peak(accel_id: str | None, m: Measurement) -> float | None:
    """The catalog figure a measurement is compared with, in its unit (dense peak for matmul, HBM for memory)."""
    acc = accelerator(accel_id)
    if acc is None:
        return None
    if m.metric == "matmul_tflops" and m.dtype in DTYPES:
        return acc.peak(m.dtype)
    if m.metric == "mem_bw":
        return acc.memory_bandwidth_gbs
    return None


def plausibility(run: Run) -> list[str]:
    """Fill peak_value/efficiency; return errors for impossible values and add flags for suspicious ones."""
    errors = []
    accel_id = run.system.accelerator_id
    if accel_id is None and (run.suite == "mlperf_training" or
                             (run.suite == "microbench" and run.system.device_type not in ("cpu",))):
        run.flags.append(f"unverifiable: accelerator {run.system.accelerator_raw!r} is not in the catalog: checked "
                         f"against the work alone, not a datasheet; not used for calibration (name the catalog id to "
                         f"fix)")
    rpn = run.system.accelerators_per_node
    best_eff = {}
    floor = None
    if run.suite == "mlperf_training":
        floor = minimum_minutes(run.benchmark, accel_id, run.system.n_accelerators)
    for m in run.measurements:
        if m.metric == "time_to_train" and floor and m.value < floor[0]:
            errors.append(f"{m.where or run.benchmark}: {m.value:g} min on {run.system.n_accelerators} "
                          f"{accel_id or run.system.accelerator_raw} is "
                          f"impossible: {floor[1]}; check the unit (minutes) and the accelerator count")
        if m.metric in ("busbw", "algbw") and accel_id:
            limit = link_limit_gbs(accel_id, m.op, m.n_nodes, rpn)
            if m.metric == "busbw" and limit and m.value > limit:
                errors.append(f"{m.where}: busbw {m.value:g} GB/s is above what {accel_id} links allow "
                              f"({limit:.0f} GB/s incl. margin); check the units (GB/s = 1e9 B/s) and the rank count")
            continue
        peak = datasheet_peak(accel_id, m)
        if peak is None:
            if m.metric == "matmul_tflops" and accel_id:
                run.flags.append(f"{m.where}: {accel_id} has no published dense {m.dtype} peak: efficiency unknown")
            continue
        m.peak_value, m.efficiency = peak, m.value / peak
        limit = REJECT_ABOVE_PEAK_MEMORY if m.metric == "mem_bw" else REJECT_ABOVE_PEAK
        if m.value > limit * peak:
            errors.append(f"{m.where}: {m.metric} {m.value:g} {m.unit} is {m.value / peak:.2f}x the {accel_id} "
                          f"datasheet peak ({peak:g} {m.unit}{', dense ' + m.dtype if m.dtype else ''}); impossible - "
                          f"check the dtype, the units and the FLOP count (2*m*n*k)")
        key = (m.metric, m.dtype)
        best_eff[key] = max(best_eff.get(key, 0.0), m.efficiency)
    for (metric, dtype), best in best_eff.items():
        if best < FLAG_BELOW_EFFICIENCY:
            run.flags.append(f"best {metric}{' ' + dtype if dtype else ''} is only {best:.0%} of the datasheet peak: "
                             f"misconfigured, throttled or shared device?")
    return errors


def statistics(run: Run) -> None:
    """Flag too few samples and noisy runs of microbenchmarks (benchmarks-formats.md 4.1 rule 4): noisy means the
    median cv of the run's measurements is above FLAG_CV_PCT (one noisy small case does not discard a sweep)."""
    if run.suite != "microbench":
        return
    few = [m for m in run.measurements if m.n_samples is not None and m.n_samples < MIN_SAMPLES]
    if few:
        run.flags.append(f"{len(few)} measurement(s) with fewer than {MIN_SAMPLES} samples (e.g. {few[0].where})")
    cvs = sorted(m.cv_pct for m in run.measurements if m.cv_pct is not None)
    if cvs and cvs[len(cvs) // 2] > FLAG_CV_PCT:
        run.flags.append(f"noisy: median cv {cvs[len(cvs) // 2]:.0f}% is above {FLAG_CV_PCT:g}% (busy or throttled "
                         f"machine, or sizes too small)")


def metadata(run: Run) -> None:
    """Accelerator results need their software stack to be trusted (rule 5): collectives the NCCL/RCCL version
    (what nccl-tests reports), other kernels the driver and the CUDA or ROCm version."""
    if run.suite != "microbench" or run.system.device_type in ("cpu", "mps", "unknown"):
        return
    sw = run.software
    if run.benchmark == "collectives":
        missing = [] if sw and sw.nccl_version else ["NCCL/RCCL version"]
    else:
        missing = [] if sw and (sw.cuda_version or sw.rocm_version) else ["CUDA or ROCm version"]
        missing += [] if sw and sw.driver_version else ["driver version"]
    if missing:
        run.flags.append(f"incomplete metadata (no {', '.join(missing)}): kept for reference, not used for calibration")


def lines(text: str):
    """(line number, line) one at a time, without a list of every line (60 MiB of newlines would be a 480 MB list);
    ValueError past MAX_LINES."""
    if text.count("\n") >= MAX_LINES:
        raise ValueError(f"more than {MAX_LINES:,} lines; no result file of this kind is that long")
    start, lineno, end_of_text = 0, 0, len(text)
    while start < end_of_text:
        end = text.find("\n", start)
        end = end_of_text if end < 0 else end
        lineno += 1
        yield lineno, text[start:end].rstrip("\r")
        start = end + 1


def _number_problem(where: str, name: str, value) -> str | None:
    """Why a number cannot go into its column: not finite, or outside the column's integer type."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {name} is {value}; only finite numbers are stored (check the units)"
    if isinstance(value, int):
        top = INT64_MAX if name in INT64_COLUMNS else INT32_MAX if name in INT32_COLUMNS else None
        if top is not None and not -top <= value <= top:
            return f"{where}: {name} {str(value)[:30]} is out of range (at most {top:,})"
    return None


def _json_problem(where: str, name: str, value) -> str | None:
    try:
        json.dumps(value, allow_nan=False, default=str)
    except ValueError:
        return f"{where}: {name} holds a number that is not finite (NaN or infinity); only finite numbers are stored"
    except RecursionError:
        return f"{where}: {name} is nested too deeply"
    return None


def record_problems(run: Run) -> list[str]:
    """Everything about a run the store's columns cannot hold, whichever parser made it: numbers that are not finite
    (after unit conversion), integers outside INTEGER/BIGINT, text that is too long or has control characters, and
    JSON that is not plain JSON. Each message names where in the input the value came from."""
    where_run = f"{run.benchmark} run"
    problems = []
    parts = ((run.system, f"{where_run}, system"), (run.software, f"{where_run}, software"), (run, where_run))
    for obj, where in parts:
        if obj is None:
            continue
        for f in fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, str):
                problems.append(text_problem(f"{where}: {f.name}", value))
            elif isinstance(value, (int, float)):
                problems.append(_number_problem(where, f.name, value))
            elif isinstance(value, (dict, list)) and f.name not in ("measurements", "flags", "notes"):
                problems.append(_json_problem(where, f.name, value))
    for m in run.measurements:
        where = m.where or where_run
        for f in fields(m):
            value = getattr(m, f.name)
            if f.name == "params":
                problems.append(_json_problem(where, "params", value))
            elif f.name != "where" and isinstance(value, str):
                problems.append(text_problem(f"{where}: {f.name}", value))
            elif isinstance(value, (int, float)):
                problems.append(_number_problem(where, f.name, value))
    found = [p for p in problems if p]
    return found[:20] + ([f"... and {len(found) - 20} more values that cannot be stored"] if len(found) > 20 else [])


def upload_flags(run: Run) -> None:
    """Flags for uploads only (published tables are taken as published): matmul above FLAG_ABOVE_PEAK_UPLOAD of the
    datasheet peak, a figure few accelerators reach, stays out of calibration until checked."""
    high = [m for m in run.measurements if m.metric == "matmul_tflops" and m.efficiency is not None
            and m.efficiency > FLAG_ABOVE_PEAK_UPLOAD]
    if high:
        best = max(high, key=lambda m: m.efficiency)
        run.flags.append(f"{best.where}: matmul at {best.efficiency:.0%} of the {run.system.accelerator_id} dense "
                         f"{best.dtype} peak, above {FLAG_ABOVE_PEAK_UPLOAD:.0%}: published maximum achievable "
                         f"matmul is 51-87% on almost every accelerator; not used for calibration")
