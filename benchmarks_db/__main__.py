"""python -m benchmarks_db seed [--db PATH]: create or upgrade the store and load the published data (idempotent;
the planner's start runs it). python -m benchmarks_db info: schema version and row counts. python -m benchmarks_db
uploads: the uploads and whether they are trusted. python -m benchmarks_db trust SOURCE_ID... [--by NAME] (or
distrust): let uploads into calibration, or take them out again. python -m benchmarks_db delete-upload SOURCE_ID...:
remove uploads and everything each added (published and seed data cannot be removed). Every command takes the store's serving lock, so
none runs beside a planner serving the same store (stop it first, as for a backup)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

from benchmarks_db import trust
from benchmarks_db.ingest import delete_upload
from benchmarks_db.seed import seed
from benchmarks_db.store import SchemaVersionError, Store, StoreBusy, db_path, open_store, serving


def _open(path: Path) -> Store | None:
    try:
        return open_store(path)
    except duckdb.IOException as err:
        print(f"cannot open the store: {str(err).splitlines()[0]}", file=sys.stderr)
    except SchemaVersionError as err:
        print(f"cannot use the store: {err}", file=sys.stderr)
    return None


def _summary(store: Store) -> str:
    return (f"{store.path}: schema version {store.schema_version()}; "
            + ", ".join(f"{n} {t} rows" for t, n in store.counts().items()))


def seed_store(path: Path) -> int:
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


def _run(args: argparse.Namespace, path: Path) -> int:
    if args.command == "seed":
        return seed_store(path)
    store = _open(path)
    if store is None:
        return 2
    try:
        if args.command == "info":
            print(_summary(store))
        elif args.command == "uploads":
            print(trust.uploads(store).to_string(index=False) if len(trust.uploads(store)) else "no uploads")
        else:
            for source_id in args.source_ids:
                try:
                    print(_removed(source_id, delete_upload(store, source_id)) if args.command == "delete-upload" else
                          trust.set_trusted(store, source_id, args.by if args.command == "trust" else None))
                except (KeyError, PermissionError) as err:
                    print(f"{source_id}: {err.args[0]}", file=sys.stderr)
                    return 1
    finally:
        store.close()
    return 0


def _removed(source_id: str, n_runs: int) -> str:
    return f"{source_id}: removed with its {n_runs} run(s), their measurements and the systems only they used"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks_db", description=__doc__.split(":")[0])
    ap.add_argument("command", choices=["seed", "info", "uploads", "trust", "distrust", "delete-upload"])
    ap.add_argument("source_ids", nargs="*", metavar="SOURCE_ID",
                    help="trust/distrust/delete-upload: the uploads (see uploads)")
    ap.add_argument("--by", default="the operator (command line)", help="trust: who vouches for the uploads")
    ap.add_argument("--db", help="store path (default: $APP_DB_PATH or var/planner.duckdb)")
    args = ap.parse_args(argv)
    if args.command in ("trust", "distrust", "delete-upload") and not args.source_ids:
        ap.error(f"{args.command} needs the source ids of the uploads (python -m benchmarks_db uploads lists them)")
    path = db_path(args.db)
    try:
        with serving(path):
            return _run(args, path)
    except StoreBusy as err:
        print(f"{err}\nStop it before running this command (or upload through its page).", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from engine.command_line import run
    run(main)
