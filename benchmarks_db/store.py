"""The DuckDB store: one Store per process and file, a fresh cursor for every call (DuckDB 2.0 refuses to share one
connection between threads), writes serialised by a lock and each one a single transaction.

    store = open_store()                         # APP_DB_PATH, default var/planner.duckdb under the repository
    df = store.df("SELECT ... WHERE x = ?", [value])

Only this process may open the file while the app runs (DuckDB: one read-write process per file). Parameters are
always bound, never formatted into SQL; the connection has no access to the file system beyond its own file.

A fatal DuckDB error (a write that fails half-way, e.g. on a full disk) invalidates the database for the rest of the
process: every later query raises FatalException. The Store then answers StoreUnavailable, with a message, and
reopens the file on its next use, so it recovers once the cause is gone (space freed); `health()` says whether it
answers now.
"""
from __future__ import annotations

import logging
import fcntl
import os
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pandas as pd

from benchmarks_db.migrations import MIGRATIONS

ROOT = Path(__file__).resolve().parent.parent
# In a checkout: var/ beside the code. Installed (pip install .): the user's data folder (XDG_DATA_HOME).
DEFAULT_DB_PATH = (ROOT / "var" if (ROOT / "pyproject.toml").is_file() else
                   Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "llm-capacity-planner"
                   ) / "planner.duckdb"
log = logging.getLogger(__name__)
CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False, "enable_external_access": False}


def utc_now() -> datetime:
    """Naive UTC timestamp (the store keeps TIMESTAMP in UTC; TIMESTAMPTZ would need pytz to read back)."""
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


class SchemaVersionError(RuntimeError):
    """The store's schema is not the one this code writes (newer code wrote it, or a read-only store is behind)."""


class StoreUnavailable(RuntimeError):
    """The store hit a fatal error (e.g. its disk is full) and could not be reopened yet; str(err) is the message
    for the user."""


class StoreBusy(RuntimeError):
    """Another process (a planner, or a seed or ingest command) holds the store's serving lock."""


def another_planner(path: Path) -> str:
    """What a second planner, and every command that would write the store, says when the lock is taken."""
    return (f"Another planner is already serving {path}: DuckDB lets one process write a store, so run one planner "
            "(one replica) per store.")


def serving_lock(path: Path) -> int | None:
    """An exclusive lock on <store>.lock for as long as this process lives (or until the descriptor is closed), or
    None when another process holds it. DuckDB's own lock is taken only when the first session opens the store, so
    without this a second replica, or a command run beside the planner, would start and its users meet lock errors."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextmanager
def serving(path: Path):
    """Hold the serving lock for a command that writes the store; StoreBusy (another_planner's message) if taken."""
    fd = serving_lock(path)
    if fd is None:
        raise StoreBusy(another_planner(path))
    try:
        yield
    finally:
        os.close(fd)


class Store:
    def __init__(self, path: Path, read_only: bool = False):
        self.path = path
        self.read_only = read_only
        self._con = self._connect()
        self._con_lock = threading.Lock()     # the connection is swapped under it after a fatal error
        self._broken: str | None = None       # the fatal error, until the file is reopened
        self._write_lock = threading.Lock()
        if not read_only:
            self._migrate()
        elif (current := self.schema_version()) != len(MIGRATIONS):
            raise SchemaVersionError(f"{path}: schema version {current}, this code needs {len(MIGRATIONS)}; the store is "
                               "opened read-only, so run `python -m benchmarks_db seed` on it first")

    def _connect(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(self.path), read_only=self.read_only, config=CONFIG)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        with self._con_lock:
            if self._broken is not None:
                self._reopen()
            return self._con.cursor()

    def _reopen(self) -> None:
        """A new connection in place of the invalidated one (under _con_lock); StoreUnavailable while it fails."""
        try:
            self._con.close()
        except duckdb.Error:
            pass
        try:
            self._con = self._connect()
        except duckdb.Error as err:
            raise StoreUnavailable(self._unavailable(str(err))) from None
        log.warning("%s reopened after a fatal error (%s)", self.path, self._broken)
        self._broken = None

    def _unavailable(self, why: str) -> str:
        return (f"The benchmark store cannot be used right now ({why.splitlines()[0][:300]}); the planner retries on "
                "the next request. If the disk is full, its administrator must free space.")

    @contextmanager
    def _fatal(self):
        """Mark the connection for reopening when DuckDB invalidates the database, and say so as StoreUnavailable."""
        try:
            yield
        except duckdb.FatalException as err:
            self._broken = str(err).splitlines()[0][:300]
            log.error("%s: fatal store error, reopening on the next use: %s", self.path, self._broken)
            raise StoreUnavailable(self._unavailable(self._broken)) from None

    def _read(self, sql: str, params: list | dict | None, fetch):
        """One query on a cursor of its own, closed after; a fatal error marks the store for reopening."""
        with self._fatal():
            cur = self.cursor()
            try:
                return fetch(cur.execute(sql, params or []))
            finally:
                cur.close()

    def df(self, sql: str, params: list | dict | None = None) -> pd.DataFrame:
        return self._read(sql, params, lambda result: result.df())

    def rows(self, sql: str, params: list | dict | None = None) -> list[tuple]:
        return self._read(sql, params, lambda result: result.fetchall())

    @contextmanager
    def transaction(self):
        """One writer at a time; everything inside commits together or not at all."""
        with self._write_lock, self._fatal():
            cur = self.cursor()
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                try:
                    cur.execute("ROLLBACK")
                except duckdb.Error:       # a failed COMMIT ended it already, or the database is gone: the first
                    pass                   # error is the one to report
                raise
            finally:
                cur.close()

    def health(self) -> str | None:
        """None when the store answers a trivial query now (reopening it after a fatal error), else why not."""
        try:
            self.rows("SELECT count(*) FROM schema_version")
        except StoreUnavailable as err:
            return str(err)
        except duckdb.Error as err:
            return self._unavailable(str(err))
        return None

    def schema_version(self) -> int:
        return self.rows("SELECT coalesce(max(version), 0) FROM schema_version")[0][0]

    def counts(self) -> dict[str, int]:
        """Rows per table (used to show that a refused upload changed nothing)."""
        tables = ("source", "system", "software_env", "run", "measurement")
        return {t: self.rows(f"SELECT count(*) FROM {t}")[0][0] for t in tables}   # table names from the tuple above

    def _migrate(self) -> None:
        with self.transaction() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                        "description VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)")
        current = self.schema_version()
        if current > len(MIGRATIONS):
            raise SchemaVersionError(f"{self.path}: schema version {current} is newer than this code knows "
                               f"({len(MIGRATIONS)}); upgrade the app or use another APP_DB_PATH")
        for version, (description, sql) in enumerate(MIGRATIONS[current:], start=current + 1):
            with self.transaction() as cur:
                cur.execute(sql)
                cur.execute("INSERT INTO schema_version VALUES (?, ?, ?)", [version, description, utc_now()])
            log.info("%s: schema version %d applied (%s)", self.path, version, description)

    def close(self) -> None:
        with _STORES_LOCK:
            _STORES.pop(self.path, None)
        self._con.close()


_STORES: dict[Path, Store] = {}
_STORES_LOCK = threading.Lock()


def db_path(path: str | os.PathLike | None = None) -> Path:
    return Path(path or os.environ.get("APP_DB_PATH") or DEFAULT_DB_PATH).expanduser().resolve()


def open_store(path: str | os.PathLike | None = None, read_only: bool = False) -> Store:
    """The process's Store for `path` (default: $APP_DB_PATH, else var/planner.duckdb), created and migrated on
    first use (read_only: opened as it is, nothing can be written); later calls return the same object."""
    p = db_path(path)
    with _STORES_LOCK:
        store = _STORES.get(p)
        if store is None:
            p.parent.mkdir(parents=True, exist_ok=True)
            store = _STORES[p] = Store(p, read_only)
        return store
