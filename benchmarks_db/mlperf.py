"""MLPerf Training results as MLCommons publishes them (training_results_vX.Y repositories):

    <submitter>/systems/<system>.json                       system description (all values are strings)
    <submitter>/results/<system>/<benchmark>/result_N.txt   one ":::MLLOG {json}" log per run
    <submitter>/results/<system>/<benchmark>/scaling.json   optional {"scaling_factor": x} (RCP penalty)

The score is computed as mlperf_logging's result_summarizer does (_compute_strong_score_standalone): per run,
minutes = (first run_stop - first run_start) / 60000; a run with no run_stop, a run_stop status other than
"success" or an unparseable MLLOG line is non-converged and counts as the dropped slowest run; sort the others,
drop the fastest and (unless a run already failed) the slowest, average the rest, times scaling_factor.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field, replace

from benchmarks_db.accelerators import catalog_id, device_type
from benchmarks_db.checks import lines, text_problem
from benchmarks_db.records import Measurement, Run, Software, System
from engine import json_input

# Runs required per benchmark and the most that may be dropped (mlperf_logging benchmark_meta.py; unet3d drops 4).
REQUIRED_RUNS = {"gpt3": 3, "llama31_405b": 3, "deepseekv3_671b": 3, "llama2_70b_lora": 10, "llama31_8b": 10,
                 "bert": 10, "stable_diffusion": 10, "dlrm_dcnv2": 10, "rgat": 10, "gnn": 10, "flux1": 10,
                 "resnet": 5, "ssd": 5, "retinanet": 5, "unet3d": 40, "maskrcnn": 5, "rnnt": 10,
                 # v6.0-v6.1 from mlperf-logging 4.1.68, which marks these "TODO: Update with official values"
                 "gpt_oss_20b": 10, "qwen35_397b_grpo": 3, "dlrmv4": 10}
MAX_DROPPED = {"unet3d": 4}
# Quality targets, eval_accuracy must be at or below: training_4.1.0 closed_gpt3.yaml (log perplexity 2.69),
# closed_llama2_70b_lora.yaml (eval loss 0.925); llama31_405b logs carry their own target_accuracy (5.6 in v5.1).
QUALITY_TARGET = {"gpt3": 2.69, "llama2_70b_lora": 0.925}
# Summarizer config.yaml status aliases -> the availability wording used from v4.1 on.
AVAILABILITY = {"onprem": "Available on-premise", "available": "Available on-premise",
                "available on-premise": "Available on-premise", "cloud": "Available cloud",
                "available cloud": "Available cloud", "preview": "Preview", "rdi": "Research, Development, or Internal (RDI)",
                "research": "Research, Development, or Internal (RDI)",
                "research, development, or internal (rdi)": "Research, Development, or Internal (RDI)"}
SYSTEM_KEYS = ("submitter", "division", "status", "system_name", "number_of_nodes", "accelerators_per_node",
               "accelerator_model_name")
STORED_KEYS = ("accelerator_interconnect", "host_processor_model_name", "host_memory_capacity",
               "accelerator_memory_capacity", "host_networking", "operating_system", "framework")
ROUND_IN_PATH = re.compile(r"training_results_(v\d+\.\d+)")
RESULT_FILE = re.compile(r"^result_\d+\.txt$")
MAX_TIME_MS = 2**53                    # MLLOG time_ms is Unix time in ms; larger is not an exact number of ms
MAX_RUN_MINUTES = 30 * 24 * 60         # 30 days; the longest seeded MLPerf run (v3.0-v5.1) took 460 minutes
MAX_COUNT = 10**12                     # batch size, sequence length, samples: anything larger is not a real log
MAX_ACCELERATORS = 10_000_000          # the scenario's own limit on cluster size


@dataclass
class LogRun:
    """What the score and the checks need from one result_N.txt."""
    name: str
    minutes: float | None = None
    failure: str | None = None
    benchmark: str | None = None
    org: str | None = None
    division: str | None = None
    status: str | None = None
    platform: str | None = None
    global_batch_size: int | None = None
    max_sequence_length: int | None = None
    samples_at_stop: float | None = None
    final_eval: float | None = None
    evaluations: int = 0                 # eval_accuracy events: the evaluations the run made
    target: float | None = None
    start_ms: int | None = None
    sysjson: dict | None = None
    step_times_s: list = field(default_factory=list)       # tracked_stats train_step_time (NeMo logs, v5.0 on)
    samples_per_s: list = field(default_factory=list)      # tracked_stats throughput, samples/s per block

    @property
    def train_step_s(self) -> float | None:
        """The median logged training step: train_step_time, else the global batch over the median samples/s; the
        step alone, without the evaluations, start-up and stalls the run's minutes include."""
        if self.step_times_s:
            return statistics.median(self.step_times_s)
        if self.samples_per_s and self.global_batch_size:
            return self.global_batch_size / statistics.median(self.samples_per_s)
        return None

    def logged(self) -> dict:
        """What the run's log says of the run it measured, as the store keeps it in the run's params (a results
        folder keeps its median run's): batch, sequence, amount trained, evaluations, training step."""
        return {"global_batch_size": self.global_batch_size, "max_sequence_length": self.max_sequence_length,
                "samples_at_stop": self.samples_at_stop, "evaluations": self.evaluations or None,
                "train_step_s": self.train_step_s}


def _number(value, top: float = MAX_COUNT) -> float | None:
    """A JSON number within [0, top] (bools are not numbers here), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= top:
        return value
    return None


def _event(line: str, marker: str):
    """The JSON after ':::MLLOG' / ':::SYSJSON' (finite numbers, shallow nesting), or None."""
    try:
        return json_input.loads(line.split(marker, 1)[1])
    except json_input.JsonInputError:
        return None


def parse_log(text: str, name: str) -> LogRun:
    """One result log. ValueError when the text has more lines than any log (checks.MAX_LINES)."""
    run = LogRun(name)
    start = stop = None
    first_bad = None
    for lineno, line in lines(text):
        if line.startswith(":::SYSJSON") and run.sysjson is None:
            doc = _event(line, ":::SYSJSON")
            run.sysjson = doc if isinstance(doc, dict) else None
            continue
        if ":::MLLOG" not in line:
            continue
        ev = _event(line, ":::MLLOG")
        key = ev.get("key") if isinstance(ev, dict) else None
        t_ms = _number(ev.get("time_ms"), MAX_TIME_MS) if isinstance(ev, dict) else None
        if not isinstance(key, str) or t_ms is None:
            first_bad = first_bad or lineno          # not JSON, no string key, or no time_ms of real Unix time
            continue
        md = ev.get("metadata") if isinstance(ev.get("metadata"), dict) else {}
        raw = ev.get("value")
        value = _number(raw)
        if key == "run_start" and start is None:
            start = t_ms
        elif key == "run_stop" and stop is None:
            stop = (t_ms, md.get("status"))
            samples = _number(md.get("samples_count", md.get("epoch_num")))
            run.samples_at_stop = samples if samples is not None else run.samples_at_stop
        elif key in ("trained_samples", "train_samples") and stop is not None and value is not None:
            run.samples_at_stop = run.samples_at_stop or value
        elif key == "eval_accuracy" and value is not None:
            run.final_eval = value
            run.evaluations += 1
        elif key == "tracked_stats" and isinstance(raw, dict):
            step, rate = _number(raw.get("train_step_time")), _number(raw.get("throughput"))
            if step:
                run.step_times_s.append(step)
            elif rate:
                run.samples_per_s.append(rate)
        elif key == "target_accuracy" and value is not None:
            run.target = value
        elif key in ("global_batch_size", "max_sequence_length") and value is not None:
            setattr(run, key, int(value))
        elif key.startswith("submission_") and isinstance(raw, str):
            attr = {"submission_benchmark": "benchmark", "submission_org": "org", "submission_division": "division",
                    "submission_status": "status", "submission_platform": "platform"}.get(key)
            if attr and getattr(run, attr) is None:
                setattr(run, attr, raw)
    run.start_ms = start
    if first_bad:
        run.failure = f"line {first_bad} is not a valid MLLOG event (the summarizer's compliance check rejects the run)"
    elif start is None:
        run.failure = "no run_start event"
    elif stop is None:
        run.failure = "no run_stop event (truncated log or the run did not finish)"
    elif stop[1] != "success":
        run.failure = f"run_stop status is {str(stop[1])[:40]!r}, not 'success' (did not converge)"
    elif stop[0] <= start:
        run.failure = "run_stop is not after run_start"
    elif (stop[0] - start) / 60000 > MAX_RUN_MINUTES:
        run.failure = (f"run_stop is {(stop[0] - start) / 60000:.4g} minutes after run_start, more than "
                       f"{MAX_RUN_MINUTES:,} (30 days); the times are not milliseconds")
    else:
        run.minutes = (stop[0] - start) / 60000
    return run


def olympic_score(minutes: list[float], n_failed: int, benchmark: str, scaling: float = 1.0) -> float | None:
    """The summarizer's score; None when more runs failed than may be dropped."""
    max_drop = MAX_DROPPED.get(benchmark, 1)
    if n_failed > max_drop or not minutes:
        return None
    s = sorted(minutes)
    kept = s[max_drop: len(s) - (max_drop - n_failed)]
    return sum(kept) / len(kept) * scaling if kept else None


def _int(text) -> int | None:
    """A whole number written in ASCII digits (MLPerf system files write them as strings), else None."""
    found = re.fullmatch(r"\s*([0-9]{1,12})\s*", text) if isinstance(text, str) else None
    if found is None and isinstance(text, int) and not isinstance(text, bool):
        return text
    return int(found.group(1)) if found else None


def system_from_json(doc: dict, where: str) -> tuple[System | None, Software | None, list[str]]:
    errors = [f"{where}: required key {k!r} is missing" for k in SYSTEM_KEYS if k not in doc]
    for k in SYSTEM_KEYS + STORED_KEYS:
        if isinstance(doc.get(k), str) and (msg := text_problem(f"{where}: {k}", doc[k])):
            errors.append(msg)
    if errors:
        return None, None, errors
    apn, nodes = _int(doc["accelerators_per_node"]), _int(doc["number_of_nodes"])
    if apn is None or nodes is None or apn < 0 or nodes < 1 or nodes * max(apn, 1) > MAX_ACCELERATORS:
        return None, None, [f"{where}: accelerators_per_node and number_of_nodes must be whole numbers, at least 0 "
                            f"and 1, with at most {MAX_ACCELERATORS:,} accelerators in all (got "
                            f"{str(doc['accelerators_per_node'])[:30]!r}, {str(doc['number_of_nodes'])[:30]!r})"]
    raw = str(doc["accelerator_model_name"]).strip() or "unknown"
    accel = catalog_id(raw)
    sw_stack = doc.get("other_software_stack") if isinstance(doc.get("other_software_stack"), dict) else {}
    s = lambda v: str(v) if v not in (None, "") else None
    system = System(
        accelerator_raw=raw, accelerator_id=accel, device_type=device_type(accel, raw),
        system_name=s(doc["system_name"]), accelerators_per_node=apn, n_nodes=nodes,
        n_accelerators=nodes * max(apn, 1),        # the summarizer's accelerators count
        interconnect=s(doc.get("accelerator_interconnect")), host_cpu=s(doc.get("host_processor_model_name")),
        host_memory=s(doc.get("host_memory_capacity")),
        extra={"accelerator_memory_capacity": s(doc.get("accelerator_memory_capacity")),
               "host_networking": s(doc.get("host_networking"))})
    software = Software(os=s(doc.get("operating_system")), framework=s(doc.get("framework")),
                        driver_version=s(sw_stack.get("cuda_driver_version")), cuda_version=s(sw_stack.get("cuda_version")),
                        rocm_version=s(sw_stack.get("rocm_version")), nccl_version=s(sw_stack.get("nccl_version")))
    return system, software, errors


@dataclass
class MlperfResult:
    run: Run | None
    score_minutes: float | None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def parse_results_folder(logs: dict[str, str], system_doc: dict | None, scaling_doc: dict | None, benchmark: str,
                         mlperf_system: str, submitter: str | None, path: str) -> MlperfResult:
    """One results folder: its result_*.txt texts (by file name), the parsed systems/<system>.json and scaling.json."""
    errors, warnings = [], []
    runs = []
    for name, text in sorted(logs.items()):
        try:
            runs.append(parse_log(text, name))
        except ValueError as err:
            errors.append(f"{path}/{name}: {err}")
    if errors:
        return MlperfResult(None, None, errors)
    for r in runs:
        if r.benchmark and r.benchmark != benchmark:
            errors.append(f"{r.name}: submission_benchmark is {r.benchmark!r} but the folder is {benchmark!r}")
    doc = system_doc if system_doc is not None else next((r.sysjson for r in runs if r.sysjson), None)
    if doc is None:
        errors.append(f"{path}: systems/{mlperf_system}.json not found (it names the accelerator and the count); "
                      f"upload the submitter folder with its systems/ folder")
        return MlperfResult(None, None, errors)
    system, software, sys_errors = system_from_json(doc, f"systems/{mlperf_system}.json")
    errors += sys_errors
    scaling = 1.0
    if scaling_doc is not None:
        factor = scaling_doc.get("scaling_factor") if isinstance(scaling_doc, dict) else None
        if not isinstance(factor, (int, float)) or not 1.0 <= factor <= 10.0:
            errors.append(f"{path}/scaling.json: scaling_factor must be a number from 1 to 10 (got {factor!r})")
        else:
            scaling = float(factor)
    ok = [r for r in runs if r.minutes is not None]
    failed = [r for r in runs if r.minutes is None]
    warnings += [f"{r.name}: counted as non-converged: {r.failure}" for r in failed]
    score = olympic_score([r.minutes for r in ok], len(failed), benchmark, scaling)
    required = REQUIRED_RUNS.get(benchmark)
    max_drop = MAX_DROPPED.get(benchmark, 1)
    if score is None:
        errors.append(f"{path}: {len(failed)} of {len(runs)} runs did not converge and at most {max_drop} may be "
                      f"dropped, so there is no score")
    if errors or system is None:
        return MlperfResult(None, score, errors, warnings)
    flags = []
    if required and len(runs) < required:
        flags.append(f"{len(runs)} result file(s); MLPerf scores {benchmark} over {required} runs")
    for r in ok:
        target = r.target if r.target is not None else QUALITY_TARGET.get(benchmark)
        if target is not None and r.final_eval is not None and r.final_eval > target:
            flags.append(f"{r.name}: final eval_accuracy {r.final_eval:.4f} misses the target {target}")
    median_run = sorted(ok, key=lambda r: r.minutes)[len(ok) // 2]
    status = str(doc.get("status", "")).strip()
    availability = AVAILABILITY.get(status.lower())
    if availability is None:
        flags.append(f"system status {status!r} is not an MLPerf availability category")
    run = Run(
        suite="mlperf_training", benchmark=benchmark, tool="mlperf_logging MLLOG", system=system, software=software,
        division=str(doc["division"]), availability=availability or status,
        submitter_org=str(doc["submitter"]),
        measurements=[Measurement("time_to_train", score, "min", "score", n_samples=len(runs), where=path,
                                  params={"scaling_factor": scaling})]
                     + [Measurement("time_to_train", r.minutes, "min", "single", where=f"{path}/{r.name}",
                                    params={"file": r.name}) for r in ok],
        params={"mlperf_system": mlperf_system, "submitter_folder": submitter, "results_path": path,
                "n_result_files": len(runs), "n_runs_failed": len(failed), "scaling_factor": scaling,
                **median_run.logged(), "failed_files": [r.name for r in failed]},
        flags=flags)
    return MlperfResult(run, score, errors, warnings)


def parse_single_log(text: str, name: str, accelerator: str | None) -> MlperfResult:
    """A lone result_N.txt: one run's minutes (not an official score), system from :::SYSJSON or the platform name."""
    try:
        r = parse_log(text, name)
    except ValueError as err:
        return MlperfResult(None, None, [f"{name}: {err}"])
    problems = [p for f in ("benchmark", "org", "division", "status", "platform")
                if (p := text_problem(f"{name}: submission_{f}", getattr(r, f)))]
    if problems:
        return MlperfResult(None, None, problems)
    if r.minutes is None:
        return MlperfResult(None, None, [f"{name}: {r.failure}"])
    if not r.benchmark:
        return MlperfResult(None, None, [f"{name}: no submission_benchmark event; is this an MLPerf Training log?"])
    if r.sysjson is not None:
        system, software, errors = system_from_json(r.sysjson, f"{name} :::SYSJSON")
        if errors:
            return MlperfResult(None, None, errors)
    else:
        raw = r.platform or "unknown"
        accel = accelerator or catalog_id(raw)
        system, software = System(accelerator_raw=raw, accelerator_id=accel, device_type=device_type(accel, raw)), None
    if accelerator:
        system = replace(system, accelerator_id=accelerator, device_type=device_type(accelerator, system.accelerator_raw))
    run = Run(suite="mlperf_training", benchmark=r.benchmark, tool="mlperf_logging MLLOG", system=system,
              software=software, division=r.division,
              availability=AVAILABILITY.get((r.status or "").lower()), submitter_org=r.org,
              measurements=[Measurement("time_to_train", r.minutes, "min", "single", where=name, params={"file": name})],
              params={**r.logged(), "n_result_files": 1},
              flags=[f"a single run ({r.minutes:.4f} min); an MLPerf score averages "
                     f"{REQUIRED_RUNS.get(r.benchmark, 'several')} runs - upload the whole results folder"])
    return MlperfResult(run, r.minutes, warnings=[])
