"""A simple CSV of measurements, one per row, for results from tools the store does not parse itself.

Required columns: accelerator, metric, value, unit. Optional: stat (default median; score for time_to_train),
dtype, m, n, k, op, message_bytes, n_ranks, n_nodes, n_samples, cv_pct, time_s, algbw (GB/s), benchmark,
n_accelerators, driver_version, cuda_version, rocm_version, nccl_version, torch_version, notes. metric is one of
time_to_train (min, s or h; needs benchmark and n_accelerators), matmul_tflops (TFLOP/s or GFLOP/s; needs dtype, m, n, k), mem_bw, copy_bw, busbw, algbw, io_bw
(GB/s, MB/s, TB/s, KiB/s, MiB/s or GiB/s). Where time_s or algbw are given the row is checked against them.
"""
from __future__ import annotations

import csv
import math

from benchmarks_db.accelerators import catalog_id, device_type
from benchmarks_db.checks import (CANONICAL_UNIT, COLLECTIVE_OPS, DTYPES, INT32_MAX, INT64_COLUMNS, INT64_MAX,
                                  bus_factor, close, lines, text_problem, to_canonical)
from benchmarks_db.records import Measurement, Run, Software, System

REQUIRED = ("accelerator", "metric", "value", "unit")
INTS = ("m", "n", "k", "message_bytes", "n_ranks", "n_nodes", "n_samples", "n_accelerators")
FLOATS = ("value", "cv_pct", "time_s", "algbw")
TEXT = ("accelerator", "metric", "unit", "stat", "dtype", "op", "benchmark", "driver_version", "cuda_version",
        "rocm_version", "nccl_version", "torch_version", "notes")
KNOWN = set(INTS) | set(FLOATS) | set(TEXT)
STATS = ("median", "mean", "max", "single", "score")
BENCHMARK_OF = {"matmul_tflops": "matmul", "mem_bw": "membw", "copy_bw": "h2d", "busbw": "collectives",
                "algbw": "collectives", "io_bw": "storage"}
MAX_ROWS = 100_000
MAX_ERRORS = 50                        # reading stops at this many; the report shows them all


def looks_like(head: str) -> bool:
    first = head.splitlines()[0].lower() if head else ""
    return all(c in first for c in REQUIRED)


def _row(raw: dict, line: int) -> tuple[dict | None, list[str]]:
    errors, row = [], {}
    for key, value in raw.items():
        if key is None:
            errors.append(f"line {line}: more values than columns")
            continue
        key = key.strip()
        value = (value or "").strip()
        if key not in KNOWN or value == "":
            continue
        try:
            row[key] = int(value) if key in INTS else float(value) if key in FLOATS else value
        except ValueError:
            errors.append(f"line {line}, column {key!r}: {value[:40]!r} is not a {'whole ' if key in INTS else ''}number")
            continue
        if key in TEXT and (msg := text_problem(f"line {line}, column {key!r}", value)):
            errors.append(msg)
    for key in REQUIRED:
        if key not in row and not any(e.startswith(f"line {line}, column {key!r}") for e in errors):
            errors.append(f"line {line}: column {key!r} is empty")
    return (None if errors else row), errors


def _check(row: dict, line: int) -> list[str]:
    metric, where = row["metric"], f"line {line}"
    errors = []
    if row.get("stat", "median") not in STATS:
        errors.append(f"{where}, column 'stat': {row['stat']!r}; use one of {', '.join(STATS)}")
    for key in INTS:
        top = INT64_MAX if key in INT64_COLUMNS else INT32_MAX
        if key in row and row[key] < (2 if key == "n_ranks" else 1):
            errors.append(f"{where}, column {key!r}: {row[key]} is too small")
        elif key in row and row[key] > top:
            errors.append(f"{where}, column {key!r}: {str(row[key])[:30]} is too large (at most {top:,})")
    for key in ("time_s", "algbw", "cv_pct"):
        if key in row and not (math.isfinite(row[key]) and row[key] >= 0 and (key == "cv_pct" or row[key] > 0)):
            errors.append(f"{where}, column {key!r}: {row[key]} must be a finite number above zero")
    if errors:                                  # the checks below divide by these numbers
        return errors
    if metric == "matmul_tflops":
        if row.get("dtype") not in DTYPES or not all(k in row for k in "mnk"):
            errors.append(f"{where}: matmul_tflops needs dtype (one of {', '.join(DTYPES)}) and m, n, k")
        elif "time_s" in row and not close(row["value_canon"], 2 * row["m"] * row["n"] * row["k"] / row["time_s"] / 1e12):
            errors.append(f"{where}: {row['value_canon']:.6g} TFLOP/s does not equal 2*m*n*k/time_s/1e12 = "
                          f"{2 * row['m'] * row['n'] * row['k'] / row['time_s'] / 1e12:.6g}")
    if metric in ("busbw", "algbw"):
        if row.get("op") not in COLLECTIVE_OPS or "n_ranks" not in row or "message_bytes" not in row:
            errors.append(f"{where}: {metric} needs op (one of {', '.join(COLLECTIVE_OPS)}), n_ranks >= 2 and "
                          f"message_bytes")
        else:
            algbw = row["value_canon"] if metric == "algbw" else row.get("algbw")
            factor = bus_factor(row["op"], row["n_ranks"])
            if metric == "busbw" and algbw is not None and not close(row["value_canon"], algbw * factor):
                errors.append(f"{where}: busbw {row['value_canon']:.6g} must equal algbw x {factor:.4g} = "
                              f"{algbw * factor:.6g}")
            if algbw is not None and "time_s" in row and not close(algbw, row["message_bytes"] / row["time_s"] / 1e9):
                errors.append(f"{where}: algbw {algbw:.6g} GB/s must equal message_bytes/time_s/1e9 = "
                              f"{row['message_bytes'] / row['time_s'] / 1e9:.6g}")
    if metric == "time_to_train" and ("benchmark" not in row or "n_accelerators" not in row):
        errors.append(f"{where}: time_to_train needs benchmark (e.g. gpt3) and n_accelerators")
    return errors


def parse(text: str, filename: str, accelerator: str | None) -> tuple[list[Run], list[str], list[str]]:
    """(runs, errors, warnings)."""
    try:
        return _parse(text, filename, accelerator)
    except ValueError as err:                   # checks.lines: more lines than any table
        return [], [f"{filename}: {err}"], []


def _parse(text: str, filename: str, accelerator: str | None) -> tuple[list[Run], list[str], list[str]]:
    # the lines one at a time: io.StringIO would hold a copy of the text at 4 bytes per character
    reader = csv.DictReader(line + "\n" for _, line in lines(text))
    try:
        header = [h.strip() for h in (reader.fieldnames or [])]
    except csv.Error as err:
        return [], [f"{filename}: line 1: {err}"], []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        return [], [f"{filename}: header lacks column(s) {', '.join(missing)}; required: {', '.join(REQUIRED)}"], []
    unknown = [h for h in header if h not in KNOWN]
    errors, rows = [], []
    try:
        for raw in reader:
            line = reader.line_num
            if len(rows) >= MAX_ROWS:
                return [], [f"{filename}: more than {MAX_ROWS} rows"], []
            if len(errors) >= MAX_ERRORS:
                break
            row, problems = _row(raw, line)
            errors += problems
            if row is None:
                continue
            value, problem = to_canonical(row["metric"], row["value"], row["unit"])
            if problem:
                errors.append(f"line {line}: {problem}")
                continue
            row["value_canon"] = value
            found = _check(row, line)
            errors += found
            if not found:
                rows.append((line, row))
    except csv.Error as err:
        errors.append(f"line {reader.line_num}: {err}")
    if errors:
        return [], errors[:MAX_ERRORS], []
    if not rows:
        return [], [f"{filename}: no data rows"], []
    runs: dict[tuple, Run] = {}
    for line, row in rows:
        raw = row["accelerator"]
        accel = accelerator or catalog_id(raw)
        benchmark = row.get("benchmark") if row["metric"] == "time_to_train" else BENCHMARK_OF[row["metric"]]
        nodes = row.get("n_nodes")
        count = row.get("n_accelerators") or row.get("n_ranks")
        system = System(accelerator_raw=raw, accelerator_id=accel, device_type=device_type(accel, raw),
                        n_nodes=nodes, n_accelerators=count,
                        accelerators_per_node=count // nodes if count and nodes and count % nodes == 0 else None)
        software = Software(**{k: row.get(k) for k in ("driver_version", "cuda_version", "rocm_version",
                                                         "nccl_version", "torch_version")})
        key = (system, software, benchmark)
        if key not in runs:
            runs[key] = Run(suite="mlperf_training" if row["metric"] == "time_to_train" else "microbench",
                            benchmark=benchmark, tool="csv upload", system=system, software=software, measurements=[])
        runs[key].measurements.append(Measurement(
            row["metric"], row["value_canon"], CANONICAL_UNIT[row["metric"]],
            row.get("stat", "score" if row["metric"] == "time_to_train" else "median"),
            n_samples=row.get("n_samples"), cv_pct=row.get("cv_pct"), dtype=row.get("dtype"), m=row.get("m"),
            n=row.get("n"), k=row.get("k"), op=row.get("op"), message_bytes=row.get("message_bytes"),
            n_ranks=row.get("n_ranks"), n_nodes=nodes, where=f"line {line}",
            params={k: row[k] for k in ("time_s", "notes") if k in row}))
    warnings = [f"ignored unknown column(s): {', '.join(unknown[:10])}"] if unknown else []
    return list(runs.values()), [], warnings
