"""The step-time lines of a short real training run, in each stack's own log format, read into one run of the store
with the scenario (model, training, cluster, layout) it ran, so that the planner's prediction can be set beside it.

Formats (each stack's own log line, as its source prints it):
- Megatron-LM (megatron/training/training.py training_log): `iteration N/ M | consumed samples: ... | elapsed time
  per iteration (ms): X | ...`, X the mean over the log interval; Megatron-DeepSpeed prints the same line.
- TorchTitan (torchtitan/components/metrics.py MetricsProcessor.log): `step: N  loss: ...  memory: X GiB(Y%)
  tps: T  tflops: ...  mfu: ...%`, T tokens per second per GPU over the log interval (tokens of one data-parallel
  rank / (seconds x tensor x pipeline x context ranks)), so a step takes seq_len x global_batch / (T x GPUs).
- DeepSpeed (deepspeed/utils/timer.py ThroughputTimer.stop): `epoch=E/micro_step=M/global_step=N,
  RunningAvgSamplesPerSec=..., CurrSamplesPerSec=S, ...`, S = batch_size / the last step's seconds, where the engine
  builds its ThroughputTimer with batch_size=train_batch_size() (the global batch; deepspeed/runtime/engine.py in the
  releases that print `global_step=`), so a step takes global_batch / S. Older releases timed the per-GPU micro-batch
  and printed `0/20, RunningAvgSamplesPerSec=...` without `global_step=`: such lines are refused as not parsed.
- MaxText (MaxText/metric_logger.py, earlier train.py): `completed step: N, seconds: X, TFLOP/s/device: ...,
  Tokens/s/device: ..., total_weights: ..., loss: ...` (older releases print `TFLOP/s:` and no tokens), X the
  seconds of that one step, N counted from 0 (step N is the (N + 1)-th optimizer step; stored as N + 1, so that every
  stack's steps count from 1).

Warm-up: a line whose interval includes any of the first WARMUP_STEPS (10) optimizer steps is left out. Those steps
compile (torch.compile, CUDA graphs), create the NCCL communicators and grow the allocator's pool; in the Megatron-LM
log of tests/data/step-logs the interval ending at iteration 10 averages 1,147.6 ms against 774-904 ms for the ten
that follow. The figure kept is the median over the remaining lines; their 10th-90th percentile spread is kept too
(the range a self-measured cluster narrows to).

Everything is checked before anything is returned: a line that starts like a step line but does not parse, a time
that is not a finite positive number, steps that go backwards (two runs in one file), a step faster than the
accelerators' dense peak allows, and too few lines after the warm-up each give an error naming the line.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field

from benchmarks_db.checks import CONTROL_CHARS, lines
from benchmarks_db.records import Measurement, Run, Software, System

WARMUP_STEPS = 10
MIN_STEADY_LINES = 3            # fewer lines after the warm-up: refused (no median worth comparing)
FLAG_STEADY_LINES = 5           # fewer: stored but flagged, as microbenchmarks with fewer than 5 samples
FLAG_CV_PCT = 10.0              # a noisier run (shared or throttled machine) is flagged, as microbenchmarks are
MAX_LINE_CHARS = 8192           # longer lines are not step lines (the stacks' lines are under 1,000 characters)
SCAN_CHARS = 8_000_000          # where the format is looked for (Megatron prints thousands of argument lines first)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
NUMBER = r"([-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf)"
FORMATS = {
    "megatron": {
        "marker": "elapsed time per iteration (ms):",
        "line": re.compile(r"iteration\s+(\d+)\s*/\s*(?:\d+|infinity)\s*\|.*?elapsed time per iteration \(ms\):\s*"
                           + NUMBER),
        "tool": "megatron_lm", "name": "Megatron-LM"},
    "torchtitan": {
        "marker": "tps:",
        "line": re.compile(r"step:\s*(\d+)\s.*?memory:\s*[\d.]+\s*GiB\([\d.]+%\)\s+tps:\s*" + NUMBER),
        "tool": "torchtitan", "name": "TorchTitan"},
    "deepspeed": {
        "marker": "CurrSamplesPerSec=",
        "line": re.compile(r"global_step=(\d+),\s*RunningAvgSamplesPerSec=[^,]*,\s*CurrSamplesPerSec=" + NUMBER),
        "tool": "deepspeed", "name": "DeepSpeed"},
    "maxtext": {
        "marker": "completed step:",
        "line": re.compile(r"completed step:\s*(\d+),\s*seconds:\s*" + NUMBER),
        "tool": "maxtext", "name": "MaxText"},
}
FIRST_STEP = {"maxtext": 0}     # the step number of the first optimizer step where it is not 1
# a line holding the marker must parse; TorchTitan's marker needs its step too (tps alone is a common word)
TORCHTITAN_LINE_START = re.compile(r"step:\s*\d+")
FORMAT_FRAMEWORK = {"megatron": "megatron_core", "torchtitan": "pytorch_fsdp2", "deepspeed": "deepspeed",
                    "maxtext": "jax_maxtext"}
DESCRIPTION = ("a training log with step-time lines: Megatron-LM 'iteration N/ M | ... | elapsed time per iteration "
               "(ms): X', TorchTitan 'step: N  loss: ...  memory: X GiB(Y%)  tps: T', DeepSpeed "
               "'global_step=N, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=S', or MaxText 'completed step: N, "
               "seconds: X, ...'")


def detect(text: str) -> str | None:
    """Which stack's step lines the text holds (None: none)."""
    head = ANSI.sub("", text[:SCAN_CHARS])
    if FORMATS["megatron"]["marker"] in head and FORMATS["megatron"]["line"].search(head):
        return "megatron"
    if FORMATS["deepspeed"]["marker"] in head:
        return "deepspeed"
    if FORMATS["maxtext"]["line"].search(head):
        return "maxtext"
    if FORMATS["torchtitan"]["line"].search(head):
        return "torchtitan"
    return None


@dataclass
class StepLog:
    format: str
    steps: list[tuple[int, float]] = field(default_factory=list)   # (last step of the interval, seconds per step)
    warmup_lines: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> list[float]:
        return [s for _, s in self.steps]


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def parse(text: str, name: str, fmt: str, tokens_per_step: int, global_batch: int, n_gpus: int) -> StepLog:
    """The steady-state step times (seconds) of the log, warm-up lines left out, or errors naming the lines."""
    spec = FORMATS[fmt]
    out = StepLog(fmt)
    per_step: dict[int, list[float]] = {}
    order: list[int] = []
    try:
        for lineno, raw in lines(text):
            if _read_line(out, spec, fmt, name, lineno, raw, per_step, order, tokens_per_step, global_batch, n_gpus):
                return out
    except ValueError as err:                  # more lines than any log of a short run
        out.errors.append(f"{name}: {err}")
        return out
    if out.errors:
        return out
    previous = 0
    for step in order:
        if previous < WARMUP_STEPS:          # the interval (previous, step] includes a warm-up step
            out.warmup_lines += 1
        else:
            out.steps.append((step, statistics.median(per_step[step])))
        previous = step
    if len(out.steps) < MIN_STEADY_LINES:
        out.errors.append(f"{name}: {len(order)} {spec['name']} step line(s), {len(out.steps)} after the first "
                          f"{WARMUP_STEPS} steps (warm-up: compilation, communicator setup); at least "
                          f"{MIN_STEADY_LINES} are needed: run longer or log more often")
    return out


def _read_line(out: StepLog, spec: dict, fmt: str, name: str, lineno: int, raw: str, per_step: dict, order: list,
               tokens_per_step: int, global_batch: int, n_gpus: int) -> bool:
    """One line into per_step (seconds per step, by step); True when reading must stop."""
    if len(raw) > MAX_LINE_CHARS:
        return False
    line = ANSI.sub("", raw)
    if spec["marker"] not in line or (fmt == "torchtitan" and not TORCHTITAN_LINE_START.search(line)):
        return False
    if fmt == "torchtitan" and ("validate step:" in line or "calibration" in line):
        return False
    found = spec["line"].search(line)
    value = _number(found.group(2)) if found else None
    if found is None or value is None:
        what = "does not parse" if found is None else f"has {found.group(2)!r}, not a finite number above zero"
        out.errors.append(f"{name} line {lineno}: a {spec['name']} step line that {what}: "
                          f"{CONTROL_CHARS.sub('?', line.strip())[:120]!r}")
        if len(out.errors) >= 10:
            out.errors.append(f"{name}: stopped after 10 bad lines")
            return True
        return False
    shift = 1 - FIRST_STEP.get(fmt, 1)
    step = int(found.group(1)) + shift               # counted from 1, as the warm-up rule and the stored steps count
    if order and step < order[-1]:
        out.errors.append(f"{name} line {lineno}: step {step - shift} comes after step {order[-1] - shift}; the "
                          "file holds more than one run (a restart): upload one run per file")
        return True
    if step not in per_step:
        order.append(step)
    seconds = {"megatron": value / 1000.0,
               "torchtitan": tokens_per_step / (value * n_gpus),
               "deepspeed": global_batch / value,
               "maxtext": value}[fmt]
    per_step.setdefault(step, []).append(seconds)       # TorchTitan prints the line on every rank: one step
    return False


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in [0, 1]."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def to_run(log: StepLog, scenario_json: dict, sc, name: str) -> tuple[Run | None, list[str]]:
    """The parsed log as one store run (suite training_run, metric step_time in seconds, stat median) with the
    scenario it ran; errors for a step faster than the accelerators' dense peak allows."""
    from engine.catalog import load_catalog
    from engine.physics.model import shape_of
    from engine.precision import PRECISION_DTYPE
    acc = load_catalog().accelerator(sc.cluster.accelerator)
    lay = sc.layout
    n, gpn = lay.n_gpus, sc.gpus_per_node
    xs = log.seconds
    median = statistics.median(xs)
    tokens = sc.training.seq_len * sc.training.global_batch_size
    peak = acc.peak(PRECISION_DTYPE[sc.training.precision]) * 1e12
    floor_s = 6 * shape_of(sc.arch).active_params() * tokens / (n * peak)
    errors = []
    if min(xs) < floor_s:
        errors.append(f"{name}: a step of {min(xs):.4g} s is impossible for this scenario: 6 x active parameters x "
                      f"{tokens:,} tokens on {n} {acc.id} at their dense {sc.training.precision} peak take at least "
                      f"{floor_s:.4g} s; check the scenario (model, batch, sequence, GPU count) is the one that ran")
        return None, errors
    mean = statistics.fmean(xs)
    cv = 100 * statistics.pstdev(xs) / mean if len(xs) > 1 else 0.0
    from engine.frameworks import resolve
    framework = resolve(sc.training.framework, acc.vendor, acc.id, sc.training.precision).stack.id
    nodes = -(-n // gpn)
    m = Measurement("step_time", median, "s", "median", n_samples=len(xs), value_min=min(xs), value_max=max(xs),
                    cv_pct=cv, dtype=sc.training.precision, n_ranks=n, n_nodes=nodes,
                    params={"p10_s": percentile(xs, 0.1), "p90_s": percentile(xs, 0.9),
                            "warmup_lines_skipped": log.warmup_lines, "warmup_steps": WARMUP_STEPS,
                            "first_step": log.steps[0][0], "last_step": log.steps[-1][0],
                            "steps": [[s, round(t, 6)] for s, t in log.steps[:2000]]},
                    where=f"{name} step lines")
    run = Run(suite="training_run", benchmark="step_time", tool=FORMATS[log.format]["tool"],
              system=System(accelerator_raw=acc.id, accelerator_id=acc.id, device_type=_device_type(acc.vendor),
                            accelerators_per_node=min(gpn, n), n_nodes=nodes, n_accelerators=n),
              software=Software(framework=framework), measurements=[m],
              params={"scenario": scenario_json, "log_format": log.format, "framework": framework})
    if FORMAT_FRAMEWORK[log.format] != framework:
        run.notes.append(f"a {FORMATS[log.format]['name']} log for a scenario on {framework}: the comparison and the "
                         f"calibration are for {framework}")
    if len(xs) < FLAG_STEADY_LINES:
        run.flags.append(f"only {len(xs)} step lines after the warm-up (fewer than {FLAG_STEADY_LINES}): kept for "
                         "reference, not used for calibration")
    if cv > FLAG_CV_PCT:
        run.flags.append(f"noisy: the step times vary by {cv:.0f}% (cv above {FLAG_CV_PCT:g}%): shared or throttled "
                         "machine? kept for reference, not used for calibration")
    return run, errors


def _device_type(vendor: str) -> str:
    return {"Google": "tpu", "Intel": "hpu"}.get(vendor, "gpu")
