"""The benchmark store: one Store class over one of two backends, with the same SQL text for both.

    store = open_store()          # APP_DB_URL (postgresql://...) when set, else APP_DB_PATH (default var/planner.duckdb)
    df = store.df("SELECT ... WHERE x = ?", [value])        # or $name with a dict
    with store.transaction() as cur:                         # everything inside commits together or not at all
        cur.execute("INSERT ...", [...])

DuckDB (the embedded default): one Store per process and file, a fresh cursor for every call (DuckDB 2.0 refuses to
share one connection between threads), writes serialised by a lock. Only this process may open the file while the app
runs (DuckDB: one read-write process per file; serving_lock). The connection has no access to the file system beyond
its own file. A fatal DuckDB error (a write that fails half-way, e.g. on a full disk) invalidates the database for the
rest of the process: every later query raises FatalException. The Store then answers StoreUnavailable, with a message,
and reopens the file on its next use, so it recovers once the cause is gone (space freed).

PostgreSQL (APP_DB_URL, several replicas on one server): connections from a small pool of the Store's own, each read
in autocommit, each transaction on one connection; the SQL is written once, in the dialect both accept, and
translated here only in its parameter marks (DuckDB's ? and $name become psycopg's %s and %(name)s). Parameters are
always bound by the driver, never formatted into SQL by this code. Migrations run under an advisory lock, so replicas
starting together apply each one once. JSON columns come back as text and timestamps as naive UTC on both.

`health()` says whether the store answers now.

Every use of a connection is counted, and `close()` (and, when the process exits, `close_all()`, run by atexit before
the interpreter stops its daemon threads) refuses new uses and waits for those in flight: CPython ends a daemon thread
that is inside DuckDB's C++ at exit by unwinding it, which aborts the whole process ("terminate called after throwing
an instance of ''"), so a server stopped by SIGTERM while a background job reads the store would exit with a crash.
"""
from __future__ import annotations

import atexit
import fcntl
import logging
import os
import re
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import duckdb
import pandas as pd
import psycopg
import pyarrow as pa
from psycopg.types.numeric import FloatLoader
from psycopg.types.string import TextLoader

from benchmarks_db.migrations import MIGRATIONS

ROOT = Path(__file__).resolve().parent.parent
# In a checkout: var/ beside the code. Installed (pip install .): the user's data folder (XDG_DATA_HOME).
DEFAULT_DB_PATH = (ROOT / "var" if (ROOT / "pyproject.toml").is_file() else
                   Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "llm-capacity-planner"
                   ) / "planner.duckdb"
log = logging.getLogger(__name__)
CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False, "enable_external_access": False}
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
CONNECT_TIMEOUT_S = 10
POOL_IDLE_MAX = 8                 # PostgreSQL connections a Store keeps open between uses
MIGRATION_LOCK_KEY = 0x706C616E   # pg_advisory_lock key of the store's migrations ("plan")
CLOSE_WAIT_S = 5                  # how long close() waits for the queries in flight (this app's take milliseconds)


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
def serving(path: Path | str):
    """Hold the serving lock for a command that writes the store; StoreBusy (another_planner's message) if taken.
    A PostgreSQL store (a URL) has none: its server orders the writes of every replica and command."""
    if is_url(path):
        yield
        return
    fd = serving_lock(path)
    if fd is None:
        raise StoreBusy(another_planner(path))
    try:
        yield
    finally:
        os.close(fd)


class StoreConfigError(ValueError):
    """The store's setting (APP_DB_URL, APP_DB_PATH or --db) names no store this process can use; str(err) names the
    setting, what is wrong and how to fix it (never the password)."""


class ConstraintViolation(RuntimeError):
    """A write broke a PRIMARY KEY, UNIQUE or CHECK constraint, on either backend; str(err) is the database's reason."""


def is_url(target) -> bool:
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


def mask_url(url: str) -> str:
    """The connection URL as messages and logs show it: its password (user:PASSWORD@ or password=) as ***."""
    url = re.sub(r"(://[^:/@?#]*:)[^@/?#]*@", r"\1***@", url)
    return re.sub(r"(password=)[^&\s]*", r"\1***", url, flags=re.I)


@lru_cache(maxsize=1024)
def pg_sql(sql: str) -> str:
    """The store's SQL (DuckDB's parameter marks) for psycopg: ? -> %s, $name -> %(name)s, and a literal % -> %%
    (psycopg reads % everywhere); inside quoted strings and names and in comments only the % is touched."""
    out, i, n = [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":                                     # a quoted string or name; '' inside is the quote itself
            j = i + 1
            while j < n and not (sql[j] == c and (j + 1 >= n or sql[j + 1] != c)):
                j += 2 if sql[j] == c else 1
            out.append(sql[i:j + 1].replace("%", "%%"))
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(sql[i:j].replace("%", "%%"))
            i = j
        elif c == "?":
            out.append("%s")
            i += 1
        elif c == "$" and (m := _NAME.match(sql, i + 1)):
            out.append(f"%({m.group()})s")
            i = m.end()
        else:
            out.append("%%" if c == "%" else c)
            i += 1
    return "".join(out)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def connect_postgres(url: str, read_only: bool = False) -> psycopg.Connection:
    """A connection to the PostgreSQL store: reads in autocommit, JSON and NUMERIC read as DuckDB gives them (text,
    float), the session in UTC (so now() and TIMESTAMP agree with utc_now()), parameters bound by the driver on the
    client (so `$x IS NULL OR col = $x` needs no declared type).
    StoreConfigError, naming APP_DB_URL without its password, when the URL is wrong or the server refuses."""
    if not is_url(url):
        raise StoreConfigError(f"APP_DB_URL={mask_url(url)[:200]!r} is not a PostgreSQL URL: write "
                               "postgresql://USER:PASSWORD@HOST:PORT/DATABASE (or leave it unset for the embedded "
                               "DuckDB store at APP_DB_PATH)")
    try:
        con = psycopg.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor,
                              connect_timeout=CONNECT_TIMEOUT_S, application_name="llm-capacity-planner",
                              options="-c TimeZone=UTC" + (" -c default_transaction_read_only=on" if read_only else ""))
    except (psycopg.Error, ValueError) as err:
        password = psycopg.conninfo.conninfo_to_dict(url).get("password") if is_url(url) else None
        why = " ".join(str(err).split())[:300]
        if password:
            why = why.replace(str(password), "***")
        raise StoreConfigError(f"APP_DB_URL={mask_url(url)}: cannot connect to PostgreSQL ({why}). Check the host, "
                               "port, user, password and database in it, and that the server is running and accepts "
                               "connections from this machine.") from None
    for name in ("json", "jsonb"):
        con.adapters.register_loader(name, TextLoader)
    con.adapters.register_loader("numeric", FloatLoader)
    return con


# How a PostgreSQL column becomes a DataFrame column like DuckDB's .df() gives it (the rest stay as pandas infers)
_INT, _FLOAT, _BOOL, _TIME = ({psycopg.adapters.types[t].oid for t in names} for names in (
    ("int2", "int4", "int8"), ("float4", "float8", "numeric"), ("bool",), ("timestamp",)))


def _frame(cur: psycopg.Cursor) -> pd.DataFrame:
    df = pd.DataFrame.from_records(cur.fetchall(), columns=[d.name for d in cur.description])
    for i, d in enumerate(cur.description):
        col = df.iloc[:, i]
        if d.type_code in _INT:
            df.isetitem(i, col.astype("Int64"))
        elif d.type_code in _FLOAT:
            df.isetitem(i, col.astype("float64"))
        elif d.type_code in _BOOL:
            df.isetitem(i, col.astype("boolean"))
        elif d.type_code in _TIME:
            df.isetitem(i, pd.to_datetime(col).astype("datetime64[us]"))
    return df


class Cursor:
    """A cursor of either backend with the interface the store's callers use: execute (DuckDB's parameter marks, the
    same SQL text on both), fetchall, fetchone, df and insert (many rows at once); a broken constraint is
    ConstraintViolation on both."""

    def __init__(self, raw, postgres: bool):
        self.raw, self.postgres = raw, postgres

    @contextmanager
    def _constraints(self):
        try:
            yield
        except (duckdb.ConstraintException, psycopg.errors.IntegrityError) as err:
            raise ConstraintViolation(str(err).splitlines()[0]) from err

    def execute(self, sql: str, params: list | dict | None = None) -> Cursor:
        with self._constraints():
            if self.postgres:
                self.raw.execute(pg_sql(sql) if params else sql, params or None)
            else:
                self.raw.execute(sql, params or [])
        return self

    def fetchall(self) -> list[tuple]:
        return self.raw.fetchall()

    def close(self) -> None:
        """Close the driver's cursor and drop it, so that it is freed now (DuckDB: inside Store's count of calls in
        flight, not later by whoever still holds this object)."""
        raw, self.raw = self.raw, None
        raw.close()

    def fetchone(self) -> tuple | None:
        return self.raw.fetchone()

    def df(self) -> pd.DataFrame:
        return _frame(self.raw) if self.postgres else self.raw.df()

    def insert(self, table: str, schema: dict[str, pa.DataType], rows: list[dict], ignore: bool = False) -> None:
        """rows into table's columns named by schema (with their Arrow types), in one statement; ignore: a row whose
        key is already there is skipped (ON CONFLICT DO NOTHING). DuckDB scans them as one typed Arrow table;
        PostgreSQL takes them as one pipelined batch."""
        if not rows:
            return
        cols = ", ".join(schema)
        conflict = " ON CONFLICT DO NOTHING" if ignore else ""
        with self._constraints():
            if self.postgres:
                self.raw.executemany(f"INSERT INTO {table} ({cols}) VALUES ({', '.join(['%s'] * len(schema))})"
                                     f"{conflict}", [[r[c] for c in schema] for r in rows])
                return
            view = f"_new_{table}"
            self.raw.register(view, pa.table({c: pa.array([r[c] for r in rows], type=t) for c, t in schema.items()}))
            self.raw.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {view}{conflict}")
            self.raw.unregister(view)    # (on error the transaction and its cursor are discarded, views with them)


class Store:
    def __init__(self, target: Path | str, read_only: bool = False):
        self.postgres = is_url(target)
        self.backend = "postgresql" if self.postgres else "duckdb"
        self.url = target if self.postgres else None
        self.path = None if self.postgres else Path(target)
        self.location = mask_url(target) if self.postgres else str(target)     # what messages show
        self.read_only = read_only
        self._con_lock = threading.Lock()     # DuckDB: the connection is swapped under it after a fatal error
        self._broken: str | None = None       # DuckDB: the fatal error, until the file is reopened
        self._write_lock = threading.Lock()
        self._uses = threading.Condition()    # guards _in_use and _closed
        self._in_use = 0                      # calls inside the driver now (close() waits for them)
        self._closed = False
        self._idle: list[psycopg.Connection] = []        # PostgreSQL: connections waiting for their next use
        self._con = self._connect()           # PostgreSQL: the first connection, which says at once if the URL is wrong
        if self.postgres:
            self._idle.append(self._con)
        if not read_only:
            self._migrate()
        elif (current := self.schema_version()) != len(MIGRATIONS):
            raise SchemaVersionError(f"{self.location}: schema version {current}, this code needs {len(MIGRATIONS)}; "
                                     "the store is opened read-only, so run `python -m benchmarks_db seed` on it first")

    def _connect(self):
        if self.postgres:
            return connect_postgres(self.url, self.read_only)
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
        if self.postgres:
            return (f"The benchmark store cannot be used right now ({why.splitlines()[0][:300]}); the planner retries "
                    f"on the next request. If it persists, check that the PostgreSQL server of APP_DB_URL="
                    f"{self.location} is running and reachable.")
        return (f"The benchmark store cannot be used right now ({why.splitlines()[0][:300]}); the planner retries on "
                "the next request. If the disk is full, its administrator must free space.")

    @contextmanager
    def _use(self):
        """One call into the driver, counted for close(); StoreUnavailable once the store is closed."""
        with self._uses:
            if self._closed:
                raise StoreUnavailable(f"The benchmark store {self.location} is closed: the planner is stopping. "
                                       "Try again once it has restarted.")
            self._in_use += 1
        try:
            yield
        finally:
            with self._uses:
                self._in_use -= 1
                self._uses.notify_all()

    @contextmanager
    def _fatal(self):
        """Mark the connection for reopening when DuckDB invalidates the database, and say so as StoreUnavailable;
        PostgreSQL: a lost connection (server restarted, network) is StoreUnavailable, and is not reused."""
        try:
            yield
        except duckdb.FatalException as err:
            self._broken = str(err).splitlines()[0][:300]
            log.error("%s: fatal store error, reopening on the next use: %s", self.path, self._broken)
            raise StoreUnavailable(self._unavailable(self._broken)) from None
        except psycopg.OperationalError as err:
            log.error("%s: store error: %s", self.location, str(err).splitlines()[0][:300] if str(err) else err)
            raise StoreUnavailable(self._unavailable(str(err) or type(err).__name__)) from None

    @contextmanager
    def _connection(self):
        """PostgreSQL: an idle connection of the pool, or a new one; back to the pool after if still healthy."""
        with self._con_lock:
            con = self._idle.pop() if self._idle else None
        if con is None or con.closed:
            try:
                con = self._connect()
            except StoreConfigError as err:
                raise StoreUnavailable(self._unavailable(str(err))) from None
        try:
            yield con
        finally:
            if con.broken or con.closed or con.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                con.close()
            else:
                with self._con_lock:
                    keep = len(self._idle) < POOL_IDLE_MAX
                    if keep:
                        self._idle.append(con)
                if not keep:
                    con.close()

    def _read(self, sql: str, params: list | dict | None, fetch):
        """One query on a cursor of its own, closed after; a fatal error marks the store for reopening. PostgreSQL:
        a read that meets a pooled connection the server has since closed (it restarted) is tried once more on a new
        one, the other idle connections dropped as likely closed too."""
        if self.postgres:
            for retry in (True, False):
                try:
                    with self._use(), self._fatal(), self._connection() as con, con.cursor() as cur:
                        return fetch(Cursor(cur, True).execute(sql, params))
                except StoreUnavailable:
                    if not retry or self._closed:
                        raise
                    self._drop_idle()
        with self._use(), self._fatal():
            cur = Cursor(self.cursor(), False)
            try:
                return fetch(cur.execute(sql, params))
            finally:
                cur.close()

    def df(self, sql: str, params: list | dict | None = None) -> pd.DataFrame:
        return self._read(sql, params, lambda cur: cur.df())

    def rows(self, sql: str, params: list | dict | None = None) -> list[tuple]:
        return self._read(sql, params, lambda cur: cur.fetchall())

    @contextmanager
    def transaction(self):
        """Everything inside commits together or not at all (DuckDB: one writer at a time in this process;
        PostgreSQL: the server orders the writers of every replica)."""
        if self.postgres:
            with self._use(), self._fatal(), self._connection() as con, con.transaction(), con.cursor() as cur:
                yield Cursor(cur, True)
            return
        with self._write_lock, self._use(), self._fatal():
            cur = Cursor(self.cursor(), False)
            cur.raw.execute("BEGIN TRANSACTION")
            try:
                yield cur
                cur.raw.execute("COMMIT")
            except BaseException:
                try:
                    cur.raw.execute("ROLLBACK")
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
        except (duckdb.Error, psycopg.Error) as err:
            return self._unavailable(str(err))
        return None

    def schema_version(self) -> int:
        return self.rows("SELECT coalesce(max(version), 0) FROM schema_version")[0][0]

    def counts(self) -> dict[str, int]:
        """Rows per table (used to show that a refused upload changed nothing)."""
        tables = ("source", "system", "software_env", "run", "measurement")
        return {t: self.rows(f"SELECT count(*) FROM {t}")[0][0] for t in tables}   # table names from the tuple above

    def summary(self) -> dict:
        """The store's contents: backend, where (the URL without its password), schema version, rows per table."""
        tables = [t for (t,) in self.rows("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                          "current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name")]
        return {"backend": self.backend, "location": self.location, "schema_version": self.schema_version(),
                "tables": {t: self.rows(f'SELECT count(*) FROM "{t}"')[0][0] for t in tables}}   # names from the catalog

    @contextmanager
    def _migration_lock(self):
        """PostgreSQL: a session advisory lock, so replicas starting together migrate one after the other (the
        second finds the work done); DuckDB: the serving lock and the write lock already make it one process."""
        if not self.postgres:
            yield
            return
        with self._fatal(), self._connection() as con:
            con.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
            try:
                yield
            finally:
                con.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK_KEY])

    def _migrate(self) -> None:
        with self._migration_lock():
            with self.transaction() as cur:
                cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                            "description VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)")
            current = self.schema_version()
            if current > len(MIGRATIONS):
                raise SchemaVersionError(f"{self.location}: schema version {current} is newer than this code knows "
                                         f"({len(MIGRATIONS)}); upgrade the app or use another store")
            for version, (description, sql) in enumerate(MIGRATIONS[current:], start=current + 1):
                with self.transaction() as cur:
                    cur.execute(sql)
                    cur.execute("INSERT INTO schema_version VALUES (?, ?, ?)", [version, description, utc_now()])
                log.info("%s: schema version %d applied (%s)", self.location, version, description)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Refuse new calls (StoreUnavailable), wait at most wait_s for those in flight, then close the connections
        (DuckDB writes its checkpoint)."""
        with _STORES_LOCK:
            _STORES.pop(self.url if self.postgres else self.path, None)
        with self._uses:
            self._closed = True
            if not self._uses.wait_for(lambda: self._in_use == 0, timeout=wait_s):
                log.warning("%s: closed with %d queries still running", self.location, self._in_use)
        if self.postgres:
            self._drop_idle()
        else:
            con, self._con = self._con, None       # freed now, not left to the interpreter's teardown
            if con is not None:
                con.close()

    def _drop_idle(self) -> None:
        with self._con_lock:
            idle, self._idle = self._idle, []
        for con in idle:
            con.close()


_STORES: dict[Path | str, Store] = {}
_STORES_LOCK = threading.Lock()


@atexit.register
def close_all() -> None:
    """Close every Store of this process (at exit, while its daemon threads still run: see the module's text)."""
    with _STORES_LOCK:
        stores = list(_STORES.values())
    for store in stores:
        store.close()


def db_path(path: str | os.PathLike | None = None) -> Path:
    return Path(path or os.environ.get("APP_DB_PATH") or DEFAULT_DB_PATH).expanduser().resolve()


def store_target(given: str | os.PathLike | None = None) -> Path | str:
    """Which store: `given` (a DuckDB file path or a postgresql:// URL), else $APP_DB_URL when set, else the DuckDB
    file at $APP_DB_PATH (default var/planner.duckdb). StoreConfigError when APP_DB_URL is set but not a PostgreSQL
    URL."""
    if given is not None and str(given).strip():
        return str(given).strip() if is_url(str(given).strip()) else db_path(given)
    url = os.environ.get("APP_DB_URL", "").strip()
    if url and not is_url(url):
        raise StoreConfigError(f"APP_DB_URL={mask_url(url)[:200]!r} is not a PostgreSQL URL: write "
                               "postgresql://USER:PASSWORD@HOST:PORT/DATABASE, or unset it to use the embedded "
                               "DuckDB store at APP_DB_PATH")
    return url or db_path()


def open_store(path: str | os.PathLike | None = None, read_only: bool = False) -> Store:
    """The process's Store for `path` (store_target: a DuckDB file or a postgresql:// URL; default $APP_DB_URL, else
    $APP_DB_PATH, else var/planner.duckdb), created and migrated on first use (read_only: opened as it is, nothing can
    be written); later calls return the same object. StoreConfigError when a URL's server cannot be used."""
    target = store_target(path)
    with _STORES_LOCK:
        store = _STORES.get(target)
        if store is None:
            if not is_url(target):
                target.parent.mkdir(parents=True, exist_ok=True)
            store = _STORES[target] = Store(target, read_only)
        return store
