import subprocess
import sys

import duckdb
import pytest

from benchmarks_db.migrations import MIGRATIONS
from benchmarks_db.store import DEFAULT_DB_PATH, ConstraintViolation, SchemaVersionError, db_path, open_store
from tests.conftest import ROOT


def test_migrations_are_recorded_and_not_rerun(location):
    path = location
    s = open_store(path)
    rows = s.rows("SELECT version, description FROM schema_version ORDER BY version")
    assert [r[0] for r in rows] == list(range(1, len(MIGRATIONS) + 1))
    assert [r[1] for r in rows] == [d for d, _ in MIGRATIONS]
    s.close()
    s = open_store(path)                      # reopening applies nothing twice
    assert s.rows("SELECT count(*) FROM schema_version")[0][0] == len(MIGRATIONS)
    s.close()


def test_one_store_per_process_and_path(tmp_path):
    a = open_store(tmp_path / "x.duckdb")
    assert open_store(tmp_path / "x.duckdb") is a
    a.close()


def test_path_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("APP_DB_PATH", str(tmp_path / "env.duckdb"))
    assert db_path() == tmp_path / "env.duckdb"
    monkeypatch.delenv("APP_DB_PATH")
    assert db_path() == DEFAULT_DB_PATH.resolve()
    assert DEFAULT_DB_PATH.parts[-2:] == ("var", "planner.duckdb")


def test_newer_schema_is_refused(location):
    path = location
    s = open_store(path)
    with s.transaction() as cur:
        cur.execute("INSERT INTO schema_version VALUES (999, 'from a newer app', now())")
    s.close()
    with pytest.raises(SchemaVersionError, match="newer than this code"):
        open_store(path)
    cli = subprocess.run([sys.executable, "-m", "benchmarks_db", "seed", "--db", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and "newer than this code" in cli.stderr and "Traceback" not in cli.stderr


def test_failed_transaction_leaves_nothing(store):
    before = store.counts()
    with pytest.raises(ConstraintViolation, match="(?i)duplicate key"):
        with store.transaction() as cur:
            cur.execute("INSERT INTO source (source_id, kind, title, ingested_at) VALUES ('a', 'published', 't', now())")
            cur.execute("INSERT INTO source (source_id, kind, title, ingested_at) VALUES ('a', 'published', 't', now())")
    assert store.counts() == before


def test_no_file_access_from_sql(store):
    if store.postgres:
        pytest.skip("DuckDB's file access from SQL; PostgreSQL's server reads files only for its superusers")
    with pytest.raises(duckdb.Error, match="disabled by configuration"):
        store.rows("SELECT * FROM read_csv('/etc/passwd')")


FULL_DISK = """
import os, resource, signal, sys
from pathlib import Path
from benchmarks_db.store import StoreUnavailable, open_store
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)           # a write past the limit fails with EFBIG, as on a full disk
path = Path(sys.argv[1])
store = open_store(path)
store.rows("CHECKPOINT")
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 200_000, hard))
with store.transaction() as cur:                        # 320 KB of incompressible text: the log takes it, the file not
    cur.execute("INSERT INTO source (source_id, kind, title, ingested_at) SELECT 'full' || i, 'user_submitted', "
                "string_agg(md5(random()::VARCHAR), '') OVER (ROWS 24 PRECEDING), now() FROM range(400) t(i)")
try:
    store.rows("CHECKPOINT")
except StoreUnavailable as err:
    print("checkpoint:", err)
path.parent.rename(path.parent.with_name("gone"))      # while the file cannot be reopened, health says why
print("health while gone:", store.health())
path.parent.with_name("gone").rename(path.parent)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))   # space freed
print("health after:", store.health())
print("sources after:", store.rows("SELECT count(*) FROM source WHERE source_id LIKE 'full%'")[0][0])
"""


def test_a_store_invalidated_by_a_full_disk_reopens_once_space_is_freed(tmp_path):
    """DuckDB invalidates a database whose checkpoint cannot be written (issue 18: every page then showed
    _duckdb.FatalException until the server restarted). The file size limit makes the checkpoint fail as a full disk
    would: the store says it is unavailable, health says why while the file cannot be opened, and once it can the
    store answers again with the committed rows."""
    (tmp_path / "db").mkdir()
    out = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path / "db" / "full.duckdb")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    said = dict(line.split(": ", 1) for line in out.stdout.splitlines())
    assert said["checkpoint"].startswith("The benchmark store cannot be used right now (FATAL Error: Failed to create "
                                         "checkpoint"), out.stdout
    assert said["checkpoint"].endswith("If the disk is full, its administrator must free space.")
    assert said["health while gone"].startswith("The benchmark store cannot be used right now (IO Error"), out.stdout
    assert said["health after"] == "None" and said["sources after"] == "400", out.stdout


def test_health_is_none_for_a_working_store(store):
    assert store.health() is None


def test_a_closed_store_refuses_new_queries_with_a_message(tmp_path):
    from benchmarks_db.store import StoreUnavailable
    s = open_store(tmp_path / "c.duckdb")
    s.close()
    with pytest.raises(StoreUnavailable, match="the planner is stopping"):
        s.rows("SELECT 1")
    s.close()                                  # twice is harmless
    assert open_store(tmp_path / "c.duckdb").rows("SELECT 1") == [(1,)]      # a new Store for the same file


EXIT_WHILE_QUERYING = """
import sys, threading, time
from benchmarks_db.store import StoreUnavailable, open_store
store = open_store(sys.argv[1])
def query_for_ever():
    while True:
        try:
            store.rows("SELECT sum(i) FROM range(20000000) t(i)")
        except StoreUnavailable:
            time.sleep(0.001)
for _ in range(2):
    threading.Thread(target=query_for_ever, daemon=True).start()
time.sleep(0.5)
sys.exit(0)
"""


def test_a_process_that_exits_while_daemon_threads_query_exits_cleanly(tmp_path):
    """A server stopped by SIGTERM while background jobs read the store ends the interpreter with daemon threads in
    DuckDB's C++: without the exit-time close, CPython's unwinding of those threads aborts the process (exit 134,
    "terminate called after throwing an instance of ''"), three times out of three here."""
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", EXIT_WHILE_QUERYING, str(tmp_path / "q.duckdb")], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "terminate called" not in done.stderr and "leaked" not in done.stderr, done.stderr[-2000:]
