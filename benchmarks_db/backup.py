"""Backup and restore of the whole store, on either backend: `python -m benchmarks_db backup PATH` / `restore PATH`.

PostgreSQL (APP_DB_URL): pg_dump's custom format, one consistent snapshot of the database (schema, rows and the
schema_version record), taken while the replicas keep serving; restored with pg_restore --clean --if-exists in one
transaction into the same database, so a restore that fails leaves the store as it was. Stop the replicas for a
restore (their cached answers would describe the old contents). pg_dump and pg_restore must be at least the server's
version (Debian: postgresql-client).

DuckDB (APP_DB_PATH): a copy of the database file, taken after a CHECKPOINT has folded the write-ahead log into it,
while this command holds the store's serving lock, so no planner has the file open and nothing writes it meanwhile
(stop the planner first, as for any command on a DuckDB store). Restored by checking that the copy opens as a store
this code can use and renaming it over the store file (atomic: the store is the old file or the new one, never a
mix). Chosen over EXPORT DATABASE / IMPORT DATABASE: those need the file access the store's connections are denied
(enable_external_access is off), and IMPORT rebuilds the tables with DuckDB's own DDL into a fresh file beside the
migrations rather than through them; the file copy is the store itself, its schema_version record included.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import duckdb
import psycopg

from benchmarks_db.migrations import MIGRATIONS
from benchmarks_db.store import CONFIG, Store, is_url, mask_url, open_store

PG_MAGIC = b"PGDMP"               # the first bytes of pg_dump's custom format
DUCKDB_MAGIC = b"DUCK"            # at offset 8 of a DuckDB database file
TIMEOUT_S = 3600


class BackupError(RuntimeError):
    """A backup or restore that could not be done; str(err) says why and what to do (never a password)."""


def find_pg_program(name: str) -> str | None:
    """A PostgreSQL program (pg_dump, pg_restore, initdb, ...): the newest installed PostgreSQL's (Debian keeps them
    in /usr/lib/postgresql/N/bin, off PATH), else the one on PATH, else None."""
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
                   key=lambda p: int(re.sub(r"\D", "", p.parts[-3]) or 0))
    return str(found[-1]) if found else shutil.which(name)


def pg_program(name: str) -> str:
    program = find_pg_program(name)
    if program is None:
        raise BackupError(f"{name} is not installed: install PostgreSQL's client programs (Debian: apt-get install "
                          "postgresql-client), of at least the server's version")
    return program


def _pg_run(program: str, args: list[str], url: str) -> None:
    """Run pg_dump/pg_restore on the store at url; the password goes in the environment, not on the command line."""
    params = psycopg.conninfo.conninfo_to_dict(url)
    password = params.pop("password", None)
    env = {**os.environ, **({"PGPASSWORD": str(password)} if password else {})}
    done = subprocess.run([pg_program(program), *args, "--dbname", psycopg.conninfo.make_conninfo(**params)],
                          env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        why = " ".join(done.stderr.split())[:500]
        raise BackupError(f"{program} failed on {mask_url(url)}: "
                          + (why.replace(str(password), "***") if password else why))


def _fresh(path: Path) -> Path:
    if path.exists():
        raise BackupError(f"{path} exists already: name a new file (a backup never overwrites one)")
    if not path.parent.is_dir():
        raise BackupError(f"{path.parent} is not a folder: create it first")
    return path.with_name(path.name + ".partial")


def backup(store: Store, path: Path) -> str:
    """Write the whole store to path (a new file); returns what was written."""
    partial = _fresh(path)
    summary = store.summary()
    try:
        if store.postgres:
            _pg_run("pg_dump", ["--format=custom", "--no-owner", "--no-privileges", "--file", str(partial)], store.url)
        else:
            store.rows("CHECKPOINT")
            shutil.copyfile(store.path, partial)
        partial.rename(path)
    finally:
        partial.unlink(missing_ok=True)
    rows = ", ".join(f"{n} {t}" for t, n in summary["tables"].items())
    return f"{store.location} ({store.backend}, schema version {summary['schema_version']}; {rows}) backed up to " \
           f"{path} ({path.stat().st_size:,} bytes)"


def restore(target: Path | str, path: Path) -> str:
    """Replace the contents of the store at target (a DuckDB file or a postgresql:// URL) with the backup at path;
    returns the restored store's summary. The caller holds the serving lock of a DuckDB store."""
    if not path.is_file():
        raise BackupError(f"{path}: no such backup file")
    with open(path, "rb") as fh:
        head = fh.read(16)
    if is_url(target):
        if not head.startswith(PG_MAGIC):
            raise BackupError(f"{path} is not a PostgreSQL backup (pg_dump's custom format): a backup restores "
                              "into a store of the backend it was taken from")
        open_store(target).close()          # the URL checked (a clear message if wrong) before pg_restore runs
        _pg_run("pg_restore", ["--clean", "--if-exists", "--no-owner", "--no-privileges", "--single-transaction",
                               "--exit-on-error", str(path)], target)
    else:
        if head[8:12] != DUCKDB_MAGIC:
            raise BackupError(f"{path} is not a DuckDB store backup: a backup restores into a store of the backend "
                              "it was taken from")
        staged = target.with_name(target.name + ".restoring")
        shutil.copyfile(path, staged)
        try:
            with duckdb.connect(str(staged), config=CONFIG) as con:        # a store this code can use, or refused
                version = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchall()[0][0]
                con.execute("CHECKPOINT")
            if version > len(MIGRATIONS):
                raise BackupError(f"{path} holds schema version {version}, newer than this code knows "
                                  f"({len(MIGRATIONS)}): restore it with the app version that wrote it")
        except duckdb.Error as err:
            staged.unlink(missing_ok=True)
            raise BackupError(f"{path} cannot be opened as a store: {str(err).splitlines()[0]}") from None
        except BackupError:
            staged.unlink(missing_ok=True)
            raise
        target.with_name(target.name + ".wal").unlink(missing_ok=True)      # the old file's log, not the backup's
        os.replace(staged, target)
    store = open_store(target)              # migrated up to this code's schema if the backup is older
    try:
        summary = store.summary()
    finally:
        store.close()
    rows = ", ".join(f"{n} {t}" for t, n in summary["tables"].items())
    return f"{store.location} restored from {path}: schema version {summary['schema_version']}; {rows}"
