"""python -m benchmarks_db seed [--db PATH]: create or upgrade the store and load the published data (idempotent;
the app's start script runs it). python -m benchmarks_db info: schema version and row counts."""
from __future__ import annotations

import argparse
import sys

import duckdb

from benchmarks_db.seed import seed
from benchmarks_db.store import SchemaVersionError, open_store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks_db", description=__doc__.split(":")[0])
    ap.add_argument("command", choices=["seed", "info"])
    ap.add_argument("--db", help="store path (default: $APP_DB_PATH or var/planner.duckdb)")
    args = ap.parse_args(argv)
    try:
        store = open_store(args.db)
    except duckdb.IOException as err:
        print(f"cannot open the store: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    except SchemaVersionError as err:
        print(f"cannot use the store: {err}", file=sys.stderr)
        return 2
    if args.command == "seed":
        for dataset, what in seed(store).items():
            print(f"{dataset}: {what}")
    print(f"{store.path}: schema version {store.schema_version()}; "
          + ", ".join(f"{n} {t} rows" for t, n in store.counts().items()))
    return 0


if __name__ == "__main__":
    from engine.command_line import run
    run(main)
