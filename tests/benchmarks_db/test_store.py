import subprocess
import sys

import duckdb
import pytest

from benchmarks_db.migrations import MIGRATIONS
from benchmarks_db.store import DEFAULT_DB_PATH, SchemaVersionError, db_path, open_store
from tests.conftest import ROOT


def test_migrations_are_recorded_and_not_rerun(tmp_path):
    path = tmp_path / "s.duckdb"
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


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.duckdb"
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
    with pytest.raises(duckdb.Error):
        with store.transaction() as cur:
            cur.execute("INSERT INTO source (source_id, kind, title, ingested_at) VALUES ('a', 'published', 't', now())")
            cur.execute("INSERT INTO source (source_id, kind, title, ingested_at) VALUES ('a', 'published', 't', now())")
    assert store.counts() == before


def test_no_file_access_from_sql(store):
    with pytest.raises(duckdb.Error, match="disabled by configuration"):
        store.rows("SELECT * FROM read_csv('/etc/passwd')")
