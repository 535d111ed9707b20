"""Run the bundled benchmarks and write one result file (schema: benchmarks_db/result_schema.py):

    python -m benchmarks_db.run matmul|membw|h2d|collectives|storage|all --out results.json [--quick]

Each runner warms up, repeats, reports median and spread and records the machine and its software. numpy alone
is enough on a CPU; torch (CUDA, ROCm or Apple MPS) is used when installed, and runners that need it are skipped
with the reason printed and recorded. --quick (small sizes, under 30 s for all) checks the pipeline, it does not
measure. Upload the file on the app's upload page or with python -m benchmarks_db ingest results.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone

from benchmarks_db.result_schema import SCHEMA_VERSION, ResultFile, RunnerInfo, Skipped
from benchmarks_db.runners import collectives, h2d, matmul, membw, storage
from benchmarks_db.runners.common import Progress, detect, software_info, system_info

NAMES = ("matmul", "membw", "h2d", "collectives", "storage")
VERSION = "1.0"
LEGEND = "Legend: TFLOP/s = 1e12 FLOP/s; GB/s = 1e9 B/s; KiB/MiB/GiB = 2^10/2^20/2^30 B; median over timed " \
         "iterations after warm-up, max = fastest iteration."


def _header(args, dev, sw, out) -> None:
    out.line(f"benchmarks_db.run {VERSION} (result schema {SCHEMA_VERSION}) {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC")
    out.line(f"command: {' '.join(sys.argv)}")
    out.line(f"platform: {platform.platform()}; device: {dev.count} x {dev.name} ({dev.kind}); "
             f"python {sw.python}, numpy {sw.numpy} ({sw.blas}), torch {sw.torch or 'not installed'}"
             + (f", CUDA {sw.cuda}" if sw.cuda else "") + (f", ROCm {sw.rocm}" if sw.rocm else "")
             + (f", NCCL {sw.nccl}" if sw.nccl else "") + (f", driver {sw.driver}" if sw.driver else ""))
    if sw.env_vars:
        out.line("env: " + " ".join(f"{k}={v}" for k, v in sw.env_vars.items()))
    out.line(f"timer: {'device events' if dev.kind == 'cuda' else 'perf_counter around synchronised calls'}; "
             f"{'--quick: small sizes, a pipeline check, not a measurement' if args.quick else 'full sizes'}")


def _summary(results, out) -> None:
    groups = {}
    for r in results:
        key = (r.benchmark, getattr(r, "dtype", None) or getattr(r, "op", ""))
        groups.setdefault(key, []).append(r.stats.median)
    out.line("summary (best and median of the per-case medians):")
    for (bench, what), vals in groups.items():
        vals.sort()
        unit = next(r.unit for r in results if r.benchmark == bench)
        out.line(f"  {bench:<12} {what:<15} best {vals[-1]:10.4f}  median {vals[len(vals) // 2]:10.4f} {unit}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks_db.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("name", nargs="?", choices=NAMES + ("all",), help="which runner (or all)")
    ap.add_argument("--out", help="result file to write (JSON)")
    ap.add_argument("--quick", action="store_true", help="small sizes, under 30 s in all: checks the pipeline only")
    ap.add_argument("--device", choices=("auto", "cpu"), default="auto", help="cpu: ignore GPUs (numpy and gloo)")
    ap.add_argument("--ranks", type=int, help="processes for collectives (default: GPUs present, or 2 on the CPU)")
    ap.add_argument("--storage-dir", help="directory to test for storage (default: the temp directory); use the "
                                          "checkpoint file system")
    ap.add_argument("--schema", action="store_true", help="print the result file's JSON Schema and exit")
    args = ap.parse_args(argv)
    if args.schema:
        print(json.dumps(ResultFile.model_json_schema(), indent=1))
        return 0
    if not args.name or not args.out:
        ap.error("give a runner name (or all) and --out FILE")
    if args.ranks is not None and args.ranks < 2:
        ap.error("--ranks must be at least 2")
    out = Progress()
    dev = detect(force_cpu=args.device == "cpu")
    sw = software_info(dev)
    _header(args, dev, sw, out)
    started, t0 = datetime.now(timezone.utc), time.perf_counter()
    results, skipped, warnings = [], [], []
    names = NAMES if args.name == "all" else (args.name,)
    interrupted = False
    try:
        for name in names:
            if name == "matmul":
                results += matmul.run(dev, args.quick, out)
            elif name == "membw":
                results += membw.run(dev, args.quick, out)
            elif name == "h2d":
                if reason := h2d.skip_reason(dev):
                    skipped.append(Skipped(runner=name, reason=reason))
                else:
                    results += h2d.run(dev, args.quick, out)
            elif name == "collectives":
                if reason := collectives.skip_reason(dev, args.ranks):
                    skipped.append(Skipped(runner=name, reason=reason))
                else:
                    res, warn = collectives.run(dev, args.quick, args.ranks, out)
                    results, warnings = results + res, warnings + warn
            else:
                res, warn = storage.run(args.storage_dir, args.quick, out)
                results, warnings = results + res, warnings + warn
    except KeyboardInterrupt:
        interrupted = True
        warnings.append("interrupted (Ctrl-C): partial results")
    for s in skipped:
        out.line(f"  skipped {s.runner}: {s.reason}")
    noisy = [r for r in results if r.cv_pct > 10]
    if noisy:
        warnings.append(f"{len(noisy)} case(s) with cv above 10%: the machine was busy or the sizes are too small")
    doc = ResultFile(schema_version=SCHEMA_VERSION,
                     runner=RunnerInfo(name="benchmarks_db.run", version=VERSION, argv=sys.argv[:100],
                                       started_at=started, duration_s=time.perf_counter() - t0, quick=args.quick),
                     system=system_info(dev), software=sw, results=results, skipped=skipped, warnings=warnings)
    tmp = f"{args.out}.tmp"
    with open(tmp, "w") as fh:
        fh.write(doc.model_dump_json(indent=1))
    os.replace(tmp, args.out)
    if results:
        _summary(results, out)
    for w in warnings:
        out.line(f"warning: {w}")
    out.line(LEGEND)
    out.line(f"wrote {len(results)} result(s) to {args.out}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    from engine.command_line import run
    run(main)
