"""Which parser reads an input: a stand-alone file is recognised by its content (runner JSON, nccl-tests text, an
MLPerf result log, a CSV table), and the files of a folder or an archive are grouped into MLPerf results folders
(result_N.txt with the submitter's systems/ JSON) and stand-alone result files. Each unit is parsed into Runs with
errors that name the line or field; nothing here checks against the store or writes (benchmarks_db/ingest.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Callable

from benchmarks_db import csv_table, mlperf, nccl_tests, runner_file, step_logs
from benchmarks_db.records import Run
from engine import json_input

# Validating runner JSON takes about 19x its size in memory (a 60 MiB file: 1.15 GB); `run all` writes well under
# 1 MiB, so 8 MiB bounds one upload's parse to about 150 MB.
MAX_RUNNER_JSON_CHARS = 8 * 2**20
TEXT_SUFFIXES = (".txt", ".log", ".out")
FORMATS = "runner JSON (schema_version 1), nccl-tests text output, an MLPerf result log or a .zip of MLPerf results " \
          "folders, a CSV with accelerator,metric,value,unit columns, or " + step_logs.DESCRIPTION + " (with the " \
          "scenario it ran)"


@dataclass
class Parsed:
    input: str
    format: str
    runs: list[Run] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)


class Refused(Exception):
    pass


def decode(data: bytes, name: str) -> str:
    if b"\x00" in data[:65536]:
        raise Refused(f"{name}: binary data, not text; expected {FORMATS}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise Refused(f"{name}: not UTF-8 text (byte {err.start}); expected {FORMATS}") from None


def parse_file(name: str, text: str, accelerator: str | None, scenario: dict | str | None = None) -> Parsed:
    """One stand-alone file, recognised by its content (and suffix for CSV). `scenario` (a scenario with its layout,
    as JSON text or a dict) is what a training step-time log ran; other formats ignore it."""
    head = text[:4000]
    if runner_file.looks_like(head):
        if len(text) > MAX_RUNNER_JSON_CHARS:
            return Parsed(name, "runner_json", errors=[
                f"{name}: {len(text):,} characters; a runner result file is at most {MAX_RUNNER_JSON_CHARS:,} (about "
                f"15,000 results): split the sweep into several files"])
        runs, errors, warnings = runner_file.parse(text, accelerator)
        return Parsed(name, "runner_json", runs, [f"{name}: {e}" for e in errors], warnings)
    if name.lower().endswith(".json"):
        try:
            doc = json_input.loads(text)
        except json_input.JsonInputError as err:
            return Parsed(name, "json", errors=[f"{name}: {err}"])
        if isinstance(doc, dict) and "accelerator_model_name" in doc:
            return Parsed(name, "mlperf_system", errors=[f"{name}: an MLPerf system description has no results; upload "
                                                         f"the submitter folder (systems/ and results/) as a .zip"])
        return Parsed(name, "json", errors=[f"{name}: a JSON file must be a runner result (schema_version 1, results)"])
    if ":::MLLOG" in text[:2_000_000]:
        res = mlperf.parse_single_log(text, name, accelerator)
        return Parsed(name, "mlperf_log", [res.run] if res.run else [], res.errors, res.warnings,
                      {name: res.score_minutes} if res.score_minutes is not None else {})
    if (log_format := step_logs.detect(text)) is not None:
        return parse_step_log(name, text, log_format, accelerator, scenario)
    if name.lower().endswith(".csv") or csv_table.looks_like(head):      # before nccl-tests: a table may have
        runs, errors, warnings = csv_table.parse(text, name, accelerator)   # algbw and busbw columns too
        return Parsed(name, "csv", runs, errors, warnings)
    if nccl_tests.looks_like(head):
        run, errors = nccl_tests.parse(text, name, accelerator)
        return Parsed(name, "nccl_tests", [run] if run else [], errors)
    return Parsed(name, "unknown", errors=[f"{name}: not a recognised format; expected {FORMATS}"])


def parse_step_log(name: str, text: str, log_format: str, accelerator: str | None,
                   scenario: dict | str | None) -> Parsed:
    """A training run's step-time log with the scenario it ran (benchmarks_db/step_logs.py)."""
    from engine.inputs import parse_scenario
    from engine.scenario import ScenarioError
    kind, stack = f"step_log_{log_format}", step_logs.FORMATS[log_format]["name"]
    if scenario is None:
        return Parsed(name, kind, errors=[
            f"{name}: a {stack} step-time log; upload it with the scenario it ran (a scenario JSON with its layout, or "
            "the short id of a saved scenario) so that the planner's prediction can be set beside it"])
    try:
        sc = parse_scenario(scenario)
    except ScenarioError as err:
        return Parsed(name, kind, errors=[f"{name}: the scenario it ran: {f}: {m}" for f, m in err.problems])
    if sc.layout is None:
        return Parsed(name, kind, errors=[f"{name}: the scenario it ran has no layout; give the layout (tp, pp, dp, "
                                          "...) the run used"])
    if accelerator is not None and accelerator != sc.cluster.accelerator:
        return Parsed(name, kind, errors=[f"{name}: --accelerator {accelerator[:60]!r} is not the scenario's "
                                          f"{sc.cluster.accelerator}"])
    t = sc.training
    log = step_logs.parse(text, name, log_format, t.seq_len * t.global_batch_size, t.global_batch_size,
                          sc.layout.n_gpus)
    if log.errors:
        return Parsed(name, kind, errors=log.errors)
    import json
    run, errors = step_logs.to_run(log, json.loads(sc.model_dump_json(exclude_none=True)), sc, name)
    warnings = [f"{name}: {log.warmup_lines} step line(s) within the first {step_logs.WARMUP_STEPS} steps left out "
                "as warm-up"]
    return Parsed(name, kind, [run] if run else [], errors, warnings)


def _json_file(read: Callable[[], bytes], path: str) -> tuple[dict | None, str | None]:
    try:
        doc = json_input.loads(decode(read(), path))
    except Refused as err:
        return None, str(err)
    except json_input.JsonInputError as err:
        return None, f"{path}: {err}"
    return (doc, None) if isinstance(doc, dict) else (None, f"{path}: expected a JSON object")


def parse_mlperf_folder(folder: PurePosixPath, logs: dict[str, Callable[[], bytes]],
                        files: dict[PurePosixPath, Callable[[], bytes]]) -> Parsed:
    """<...>/<submitter>/results/<system>/<benchmark>/ with its result_N.txt readers; `files` has every file of the
    upload, to find systems/<system>.json and scaling.json."""
    benchmark, system = folder.name, folder.parent.name
    in_layout = folder.parent.parent.name == "results"
    submitter_dir = folder.parent.parent.parent
    display = str(folder)
    errors = []
    system_doc = scaling_doc = None
    sys_path = submitter_dir / "systems" / f"{system}.json"
    if in_layout and sys_path in files:
        system_doc, err = _json_file(files[sys_path], str(sys_path))
        errors += [err] if err else []
    if folder / "scaling.json" in files:
        scaling_doc, err = _json_file(files[folder / "scaling.json"], f"{display}/scaling.json")
        errors += [err] if err else []
    texts = {}
    for name, read in logs.items():
        try:
            texts[name] = decode(read(), f"{display}/{name}")
        except Refused as err:
            errors.append(str(err))
    if errors:
        return Parsed(display, "mlperf_results", errors=errors)
    res = mlperf.parse_results_folder(texts, system_doc, scaling_doc, benchmark, system,
                                      submitter_dir.name if in_layout else None, display)
    if res.run is not None:
        found = mlperf.ROUND_IN_PATH.search(display)
        res.run.mlperf_round = found.group(1) if found else None
    return Parsed(display, "mlperf_results", [res.run] if res.run else [], res.errors, res.warnings,
                  {display: res.score_minutes} if res.score_minutes is not None else {})


def parse_tree(files: dict[PurePosixPath, Callable[[], bytes]], accelerator: str | None) -> tuple[list[Parsed], list[str]]:
    """Find the results in a set of files (a folder or an archive): MLPerf results folders (result_N.txt grouped
    by folder) and stand-alone result files. Returns the parsed units and the paths skipped as not results."""
    groups: dict[PurePosixPath, dict[str, Callable[[], bytes]]] = {}
    for path, read in files.items():
        if mlperf.RESULT_FILE.match(path.name):
            groups.setdefault(path.parent, {})[path.name] = read
    units = [parse_mlperf_folder(folder, logs, files) for folder, logs in sorted(groups.items())]
    claimed = {f / n for f, logs in groups.items() for n in logs}
    skipped = []
    for path, read in sorted(files.items()):
        if path in claimed or path.name == "scaling.json" or path.parent.name == "systems":
            continue
        suffix = path.suffix.lower()
        if suffix not in (".json", ".csv") + TEXT_SUFFIXES:
            skipped.append(str(path))
            continue
        try:
            text = decode(read(), str(path))
        except Refused:
            skipped.append(str(path))
            continue
        head = text[:4000]
        recognised = (runner_file.looks_like(head) if suffix == ".json" else
                      csv_table.looks_like(head) if suffix == ".csv" else
                      nccl_tests.looks_like(head) or ":::MLLOG" in head)
        if recognised:
            units.append(parse_file(str(path), text, accelerator))
        else:
            skipped.append(str(path))
    return units, skipped

