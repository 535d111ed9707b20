"""Memory against measured peaks: the estimate's reserved peak (live tensors with the caching allocator's reserve,
engine.physics.memory.allocator_reserve_fraction) beside each published peak, with the median and worst error, and
a leave-one-table-out check of the one constant that could be fitted on them (the allocator's reserve).

    .venv/bin/python scripts/memory_validation.py        (the tables of docs/validation.md "Memory against measured peaks")

Every published peak here is torch.cuda.max_memory_reserved (TorchTitan's 'memory' log, max over ranks): the
allocator's segments at their peak, without the CUDA context and collective buffers outside it. The estimate's own
total (what it checks against capacity) counts those (1.5 GiB) and 5% of the live tensors for fragmentation instead.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.physics.memory import allocator_reserve_fraction  # noqa: E402
from tests.engine.published_runs import reserve_left_out, torchtitan_memory  # noqa: E402


def layout_text(s: dict) -> str:
    lay, tr = s["layout"], s["training"]
    parts = [f"tp{lay['tp']}", f"pp{lay['pp']}", f"dp{lay['dp']}", f"cp{lay['cp']}"]
    parts += [f"v{lay['virtual_stages']}"] if lay["virtual_stages"] > 1 else []
    parts += [f"mbs{lay['micro_batch_size']}", f"seq {tr['seq_len']}", tr["precision"], f"recompute {lay['recompute']}"]
    return " ".join(parts)


def summary(errors: list[float]) -> str:
    a = [abs(e) for e in errors]
    return f"median |error| {statistics.median(a):.1%}, worst {max(a):.1%} ({len(a)} runs)"


def main() -> None:
    runs = torchtitan_memory()
    print("| Run | Layout | Measured GiB | Predicted GiB | Error | Estimate's total GiB |")
    print("|---|---|---|---|---|---|")
    errors = []
    for run in runs:
        est = run.predict()
        reserved = est.memory_detail_gib["reserved_peak"]
        errors.append(reserved / run.measured_gib - 1)
        print(f"| {run.name} | {layout_text(run.scenario)} | {run.measured_gib:.1f} | {reserved:.1f} | {errors[-1]:+.1%} "
              f"| {est.memory_gib.total:.1f} |")
    print(f"\nReserved peak, allocator reserve {allocator_reserve_fraction():.1%} of live (GMLake, not fitted): "
          f"{summary(errors)}")
    print("\n| Table left out | Reserve fitted on the others | Its runs' errors |\n|---|---|---|")
    held_out = []
    for table, (fit, errs) in reserve_left_out(runs).items():
        held_out += errs
        print(f"| {table.upper()} | {fit:.1%} | " + ", ".join(f"{e:+.1%}" for e in errs) + " |")
    print(f"\nLeave one table out: {summary(held_out)}")


if __name__ == "__main__":
    main()
