"""The benchmark store's one command line, python -m benchmarks_db COMMAND:

    seed [--db PATH_OR_URL]   create or upgrade the store and load the published data (idempotent; the planner's
                              start runs it)
    info [--json]             the store's contents: backend, schema version, tables and their row counts
    backup PATH               a copy of the whole store in one file (PostgreSQL: pg_dump's custom format; DuckDB: the
                              database file, copied under the serving lock)
    restore PATH              replace the store's contents with a backup's (benchmarks_db/backup.py)
    ingest FILE_OR_FOLDER...  check and store result files: [--json] [--submitter NAME] [--accelerator CATALOG_ID]
                              [--scenario FILE_OR_ID] (the run a training step-time log comes from)
                              [--max-bytes N] [--trusted]; each input on its own (one that is refused or breaks a
                              parser does not stop the others), exit status 1 if any input was refused
    uploads                   the uploads, who they are listed to and whether they are trusted
    trust SOURCE_ID...        let uploads into calibration [--by NAME]; distrust SOURCE_ID... takes them out again
    delete-upload SOURCE_ID...
                              remove uploads and everything each added (published and seed data cannot be removed)
    audit                     who uploaded, trusted, shared or deleted what, newest first: [--json] [--who NAME]
                              [--limit N]; ingest, trust, distrust and delete-upload record --by NAME (default: the
                              operating-system user who runs them)
    training-runs             the uploaded training step-time runs (ingest --scenario) beside the planner's prediction
                              of each: measured and predicted seconds a step, their ratio and the factor on the stack's
                              level that would make them agree; then, per cluster its trusted runs calibrate, the step
                              time and training days on its newest run's scenario before and after, with their ranges
                              [--json] (shared uploads; a private one is shown to its owner on the Benchmarks page)
    validate --benchmark NAME  the engine's time to train beside every MLPerf result of that benchmark in the store:
                              [--round vX.Y] [--json] (one JSON object a line; predicted_minutes null with the
                              reason where the engine gives none); exit status 2 for a benchmark or round the store
                              lacks

The store is APP_DB_URL's PostgreSQL database when that is set (postgresql://USER:PASSWORD@HOST:PORT/DATABASE), else
the DuckDB file at APP_DB_PATH; --db names either. On DuckDB every command takes the store's serving lock, so none runs
beside a planner serving the same store (stop it first, as for a backup; uploads go through its Benchmarks page
meanwhile); on PostgreSQL they run beside the replicas, the server ordering their writes."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import duckdb
import pandas as pd

from benchmarks_db import audit, backup, trust
from benchmarks_db.ingest import MAX_FILE_BYTES, IngestReport, Uploader, delete_upload, ingest_each
from benchmarks_db.seed import seed
from benchmarks_db.store import (SchemaVersionError, Store, StoreBusy, StoreConfigError, open_store, serving,
                                 store_target)

COMMANDS = {
    "seed": "create or upgrade the store and load the published data",
    "info": "the store's contents: backend, schema version, tables and their row counts",
    "backup": "write a copy of the whole store to a file",
    "restore": "replace the store's contents with a backup's",
    "ingest": "check and store result files (runner JSON, nccl-tests text, MLPerf results or a .zip of them, CSV)",
    "uploads": "the uploads and whether they are trusted",
    "trust": "let uploads into calibration",
    "distrust": "take uploads out of calibration again",
    "delete-upload": "remove uploads and everything each added (published and seed data cannot be removed)",
    "audit": "who uploaded, trusted, shared or deleted what, newest first",
    "training-runs": "the uploaded training step-time runs beside the planner's prediction, and what the trusted "
                     "ones calibrate, before and after",
    "validate": "the engine's predicted time to train beside every MLPerf result of a benchmark in the store",
}
RUN_FIELDS = ("run_id", "source_id", "filename", "accelerator_id", "framework", "precision", "n_gpus", "measured_s",
              "p10_s", "p90_s", "n_samples", "predicted_s", "ratio", "level_scale", "trusted", "validation", "problem")
# The JSON line of one result (validate --json): the contract's fields first, then what the prediction rests on
VALIDATE_FIELDS = {"run_id": "result_id", "accelerator": "accelerator", "n_accelerators": "n_accelerators",
                   "published_minutes": "published_minutes", "predicted_minutes": "predicted_minutes",
                   "status": "reason", "round": "round", "submitter": "submitter", "system_name": "system_name",
                   "ratio": "ratio", "precision": "precision", "global_batch_size": "global_batch_size",
                   "tokens": "tokens", "token_basis": "basis", "scaling_factor": "scaling_factor",
                   "layout": "layout", "mfu": "mfu", "diagnosis": "diagnosis"}


def _open(path: Path | str) -> Store | None:
    try:
        return open_store(path)
    except duckdb.IOException as err:
        print(f"cannot open the store: {str(err).splitlines()[0]}", file=sys.stderr)
    except (SchemaVersionError, StoreConfigError) as err:
        print(f"cannot use the store: {err}", file=sys.stderr)
    return None


def _summary(store: Store) -> str:
    return (f"{store.location}: schema version {store.schema_version()}; "
            + ", ".join(f"{n} {t} rows" for t, n in store.counts().items()))


def seed_store(path: Path | str) -> int:
    """Create, migrate and seed the store, print what happened, close it; 2 when it cannot be opened. The caller
    holds the serving lock (serve.py, or main below)."""
    store = _open(path)
    if store is None:
        return 2
    try:
        for dataset, what in seed(store).items():
            print(f"{dataset}: {what}")
        print(_summary(store), flush=True)
    finally:
        store.close()
    return 0


def _human(r: IngestReport) -> str:
    status = "folder  " if r.format == "folder" and r.ingested else "ingested" if r.ingested else "REFUSED "
    lines = [f"{status} {r.input}" + (f" [{r.format}]" if r.format and r.format != "folder" else "")]
    if r.rows_added:
        lines.append("  rows added: " + ", ".join(f"{k} {v}" for k, v in r.rows_added.items()))
    lines += [f"  MLPerf score {path}: {minutes:.4f} min" for path, minutes in r.mlperf_scores.items()]
    lines += [f"  error: {e}" for e in r.errors[:50]]
    lines += [f"  flagged: {f}" for f in r.flags[:20]]
    lines += [f"  note: {w}" for w in r.warnings[:20]]
    return "\n".join(lines)


def _scenario(store, given: str | None) -> str | None | IngestReport:
    """--scenario: a scenario JSON file, or the short id of a scenario saved in this store (its shared link's ?s=)."""
    if given is None:
        return None
    p = Path(given)
    if p.is_file():
        if p.stat().st_size > 1_000_000:
            return IngestReport(input=given, errors=[f"--scenario {given}: larger than 1 MB; a scenario is a small JSON "
                                                     "object"])
        return p.read_text(errors="replace")
    from benchmarks_db.scenarios import load_scenario
    from engine.scenario import ScenarioError
    try:
        return load_scenario(store, given).scenario.model_dump_json(exclude_none=True)
    except ScenarioError as err:
        return IngestReport(input=given, errors=[f"--scenario {given[:40]!r}: not a file, and "
                                                 + "; ".join(m for _, m in err.problems)])


def _ingest(args: argparse.Namespace, path: Path) -> int:
    """Every input on its own, and the report of every input tried so far printed whatever happens; 1 when any input
    was refused, 2 when the store cannot be opened."""
    reports: list[IngestReport] = []
    predicted: dict[str, str] = {}
    try:
        store = open_store(path)
        try:
            scenario = _scenario(store, args.scenario)
            if isinstance(scenario, IngestReport):
                reports = [scenario]
                return 1
            reports = ingest_each(store, args.paths, args.accelerator, args.max_bytes,
                                  Uploader(submitter=args.submitter, trusted=args.trusted,
                                           actor=audit.command_line_user(args.by)), scenario)
            if not args.json:
                predicted = _step_runs_predicted(store, reports)
        finally:
            store.close()
    except (duckdb.IOException, SchemaVersionError, StoreConfigError) as err:
        print(f"cannot open the store: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    finally:
        if reports:
            print(json.dumps([r.model_dump() for r in reports], indent=1) if args.json else
                  "\n".join(_human(r) + "".join(predicted.get(i, "") for i in r.run_ids) for r in reports),
                  flush=True)
    return 0 if all(r.ingested for r in reports) else 1


def _step_runs_predicted(store: Store, reports: list[IngestReport]) -> dict[str, str]:
    """For each training step-time run the reports added: a line with its measured step time beside the planner's
    prediction of its scenario."""
    added = {i for r in reports if r.ingested and (r.format or "").startswith("step_log_") for i in r.run_ids}
    if not added:
        return {}
    from benchmarks_db.step_time import prediction, training_runs
    out = {}
    for r in training_runs(store).itertuples():
        predicted_s, _ = prediction(r.scenario) if r.run_id in added else (None, None)
        if predicted_s is not None:
            out[r.run_id] = (f"\n  {r.run_id}: measured {r.measured_s:.3f} s a step, the planner predicts "
                             f"{predicted_s:.3f} s for its scenario (measured / predicted {r.measured_s / predicted_s:.3f}; "
                             "python -m benchmarks_db training-runs lists every run)")
    return out


def _run(args: argparse.Namespace, path: Path | str) -> int:
    if args.command == "seed":
        return seed_store(path)
    if args.command == "ingest":
        return _ingest(args, path)
    if args.command == "restore":
        print(backup.restore(path, Path(args.file)), flush=True)
        return 0
    store = _open(path)
    if store is None:
        return 2
    try:
        if args.command == "info":
            print(json.dumps(store.summary(), indent=1) if args.json else _summary(store))
        elif args.command == "backup":
            print(backup.backup(store, Path(args.file)), flush=True)
        elif args.command == "validate":
            return _validate(args, store)
        elif args.command == "training-runs":
            _training_runs(args, store)
        elif args.command == "uploads":
            print(trust.uploads(store).to_string(index=False) if len(trust.uploads(store)) else "no uploads")
        elif args.command == "audit":
            _audit(args, store)
        else:
            by = audit.command_line_user(args.by)
            for source_id in args.source_ids:
                try:
                    print(_removed(source_id, delete_upload(store, source_id, by, operator=True))
                          if args.command == "delete-upload" else
                          trust.set_trusted(store, source_id, by if args.command == "trust" else None, who=by))
                except (KeyError, PermissionError) as err:
                    print(f"{source_id}: {err.args[0]}", file=sys.stderr)
                    return 1
    finally:
        store.close()
    return 0


def _audit(args: argparse.Namespace, store: Store) -> None:
    """The audit trail, newest first: one JSON object a line (--json; details as the object recorded) or a table."""
    df = audit.events(store, who=args.who, limit=args.limit)
    if args.json:
        rows = [{**row, "occurred_at": row["occurred_at"].isoformat() + "Z", "details": json.loads(row["details"])}
                for row in df.to_dict("records")]
        print("\n".join(json.dumps(row) for row in rows), flush=True)
    elif df.empty:
        print("no audit events" + (f" of {args.who}" if args.who else ""))
    else:
        print(df.assign(occurred_at=df.occurred_at.dt.strftime("%Y-%m-%d %H:%M:%S UTC"),
                        who=df.who.fillna("(anonymous)")).to_string(index=False))


def _validate(args: argparse.Namespace, store: Store) -> int:
    """Predicted vs published for every MLPerf result of one benchmark: JSON lines or a table; 2 when the store holds
    no result of that benchmark or round (the message lists those it holds)."""
    from benchmarks_db.validation import predicted_vs_measured
    held = [b for (b,) in store.rows("SELECT DISTINCT benchmark FROM run WHERE suite = 'mlperf_training' "
                                     "ORDER BY benchmark")]
    if args.benchmark not in held:
        print(f"--benchmark {args.benchmark!r}: no MLPerf result of that benchmark in the store; it holds "
              + (", ".join(held) or "none"), file=sys.stderr)
        return 2
    rounds = [r for (r,) in store.rows("SELECT DISTINCT mlperf_round FROM run WHERE suite = 'mlperf_training' AND "
                                       "benchmark = $b AND mlperf_round IS NOT NULL ORDER BY 1", {"b": args.benchmark})]
    if args.round is not None and args.round not in rounds:
        print(f"--round {args.round!r}: no {args.benchmark} result of that round in the store; it holds "
              + (", ".join(rounds) or "none with a round"), file=sys.stderr)
        return 2
    df = predicted_vs_measured(store, benchmark=args.benchmark, mlperf_round=args.round)
    rows = [{out: _plain(getattr(r, col)) for col, out in VALIDATE_FIELDS.items()} for r in df.itertuples()]
    for row in rows:
        if row["predicted_minutes"] is not None:
            row["reason"] = None
    if args.json:
        print("\n".join(json.dumps(row) for row in rows), flush=True)
        return 0
    print(f"{'result':62} {'accelerator':15} {'n':>5} {'published':>9} {'predicted':>9} {'ratio':>5}  reason / diagnosis")
    for row in rows:
        pred = f"{row['predicted_minutes']:9.2f}" if row["predicted_minutes"] is not None else f"{'-':>9}"
        ratio = f"{row['ratio']:5.2f}" if row["ratio"] is not None else f"{'-':>5}"
        print(f"{row['result_id'][:62]:62} {str(row['accelerator'])[:15]:15} {row['n_accelerators']:5d} "
              f"{row['published_minutes']:9.2f} {pred} {ratio}  {row['reason'] or row['diagnosis'] or ''}")
    return 0


def _training_runs(args: argparse.Namespace, store: Store) -> None:
    """Every shared training step-time run beside the engine's prediction, and the clusters its trusted runs calibrate
    (benchmarks_db.step_time: predicted_vs_measured, before_after): one JSON object or two tables."""
    from benchmarks_db.step_time import before_after, predicted_vs_measured
    df = predicted_vs_measured(store)
    runs = [{**{k: _plain(getattr(r, k)) for k in RUN_FIELDS}, "scenario": json.loads(r.scenario)}
            for r in df.itertuples()]
    for run in runs:
        run["trusted"] = bool(run["trusted"])
    calibrated = before_after(store)
    if args.json:
        print(json.dumps({"runs": runs, "calibrated": calibrated}, indent=1), flush=True)
        return
    if not runs:
        print("no training runs: ingest a step-time log with the scenario it ran "
              "(python -m benchmarks_db ingest LOG --scenario SCENARIO.json)")
        return
    print(f"{'run':40} {'accelerator':15} {'stack':13} {'GPUs':>5} {'measured s/step (p10-p90)':>27} "
          f"{'predicted':>9} {'meas/pred':>9} {'level x':>7}  trusted")
    for r in runs:
        spread = f"{r['measured_s']:.3f} ({r['p10_s']:.3f}-{r['p90_s']:.3f})" if r["p10_s"] is not None else \
            f"{r['measured_s']:.3f}"
        figures = (f"{'-':>9} {'-':>9} {'-':>7}" if r["problem"] else
                   f"{r['predicted_s']:9.3f} {r['ratio']:9.3f} {r['level_scale']:7.3f}")
        print(f"{r['run_id'][:40]:40} {str(r['accelerator_id'])[:15]:15} {str(r['framework'])[:13]:13} "
              f"{r['n_gpus']:5d} {spread:>27} {figures}  {'yes' if r['trusted'] else 'no (' + str(r['validation']) + ')'}"
              + (f"\n  not predicted: {r['problem']}" if r["problem"] else ""))
    if not calibrated:
        print("\nno cluster is calibrated yet: python -m benchmarks_db trust SOURCE_ID lets a run calibrate its "
              "accelerator and stack")
        return
    fmt = lambda b: "-" if b is None else f"{b['value']:.3f} ({b['low']:.3f}-{b['high']:.3f})"
    for c in calibrated:
        f = c["figures"]
        print(f"\n{c['accelerator']} on {c['framework']}: the stack's level x {c['level_scale']:.3f}, from "
              f"{c['n_runs']} trusted run(s) on {c['n_systems']} system(s); on the scenario of {c['run_id']} "
              f"(measured {c['measured_s']:.3f} s a step):")
        for name, unit in (("step_time_s", "step time, s"), ("train_days", "training days")):
            print(f"  {unit:15} before {fmt(f[name]['before']):>30}   after {fmt(f[name]['after']):>30}")


def _plain(value):
    """A value as JSON writes it: NaN/NA as null, numpy numbers as Python's."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _removed(source_id: str, n_runs: int) -> str:
    return f"{source_id}: removed with its {n_runs} run(s), their measurements and the systems only they used"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks_db", description="The benchmark store: "
                                 + ", ".join(COMMANDS) + " (python -m benchmarks_db COMMAND --help)")
    db_help = ("the store: a DuckDB file or a postgresql:// URL (default: $APP_DB_URL, else $APP_DB_PATH, else "
               "var/planner.duckdb)")
    ap.add_argument("--db", help=db_help)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = {name: sub.add_parser(name, help=text, description=text) for name, text in COMMANDS.items()}
    for p in parsers.values():                      # --db before or after the command
        p.add_argument("--db", default=argparse.SUPPRESS, help=db_help)
    ingest = parsers["ingest"]
    ingest.add_argument("paths", nargs="+", metavar="FILE_OR_FOLDER")
    ingest.add_argument("--json", action="store_true", help="one JSON report per input on stdout")
    ingest.add_argument("--submitter", help="your name or team, stored with the upload")
    ingest.add_argument("--accelerator",
                        help="catalog id of the device when the file's name for it is missing or ambiguous")
    ingest.add_argument("--scenario", help="for a training step-time log (Megatron-LM, TorchTitan, DeepSpeed, "
                        "MaxText): the scenario it ran, with its layout: a scenario JSON file or the short id of a "
                        "saved scenario")
    ingest.add_argument("--max-bytes", type=int, default=MAX_FILE_BYTES, help="largest accepted file (bytes)")
    ingest.add_argument("--trusted", action="store_true",
                        help="you run this deployment and vouch for these results: they calibrate the engine at once "
                             "(otherwise: python -m benchmarks_db trust SOURCE_ID later)")
    for name in ("trust", "distrust", "delete-upload"):
        parsers[name].add_argument("source_ids", nargs="*", metavar="SOURCE_ID",
                                   help="the uploads (python -m benchmarks_db uploads lists them)")
    for name in ("ingest", "trust", "distrust", "delete-upload"):
        parsers[name].add_argument("--by", help="who does it, as the audit trail records it (trust: who vouches for "
                                   "the uploads; default: the operating-system user running the command)")
    trail = parsers["audit"]
    trail.add_argument("--json", action="store_true", help="one JSON object a line per event")
    trail.add_argument("--who", help="only the events of this user (the identity header's value, or a --by name)")
    trail.add_argument("--limit", type=_positive, default=audit.DEFAULT_LIMIT,
                       help=f"the newest N events (default {audit.DEFAULT_LIMIT})")
    parsers["info"].add_argument("--json", action="store_true", help="one JSON object: backend, location (the URL "
                                 "without its password), schema_version, tables (rows per table)")
    parsers["backup"].add_argument("file", metavar="PATH", help="the backup file to write (not overwritten)")
    parsers["restore"].add_argument("file", metavar="PATH", help="a file `backup` wrote, of the same backend")
    parsers["training-runs"].add_argument("--json", action="store_true", help="one JSON object: runs (each with "
                                          "its scenario) and calibrated (before and after, per cluster)")
    validate = parsers["validate"]
    validate.add_argument("--benchmark", required=True, help="MLPerf benchmark as the store names it: gpt3, "
                          "llama2_70b_lora, llama31_405b, ...")
    validate.add_argument("--round", help="only this MLPerf round (v4.0, v5.1, ...)")
    validate.add_argument("--json", action="store_true", help="one JSON object a line per result")
    return ap


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= 1_000_000):
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a whole number from 1 to 1000000")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command in ("trust", "distrust", "delete-upload") and not args.source_ids:
        ap.error(f"{args.command} needs the source ids of the uploads (python -m benchmarks_db uploads lists them)")
    try:
        path = store_target(args.db)
        with serving(path):
            return _run(args, path)
    except (StoreConfigError, backup.BackupError) as err:
        print(f"{args.command}: {err}", file=sys.stderr)
        return 2
    except StoreBusy as err:
        then = ("ingesting from the command line, or upload through its Benchmarks page" if args.command == "ingest"
                else "running this command (or upload through its page)")
        print(f"{err}\nStop it before {then}.", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from engine.command_line import run
    run(main)
