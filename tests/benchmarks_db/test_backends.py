"""The store on both backends (DuckDB file, PostgreSQL database): the same SQL with its parameter marks translated,
nothing half-written, the command line's info, seed, backup and restore, and a wrong APP_DB_URL told plainly."""
import json
import os
import subprocess
import sys
import threading

import pytest

from benchmarks_db import writer
from benchmarks_db.ingest import ingest_bytes
from benchmarks_db.migrations import MIGRATIONS
from benchmarks_db.scenarios import load_scenario, save_scenario
from benchmarks_db.store import Cursor, mask_url, open_store, pg_sql
from engine.presentation.edit import default_scenario
from tests.conftest import ROOT

from .helpers import matmul_result, runner_file

# The seed (benchmarks_db/data): 237 MLPerf results (one score and one row per timed run: 2,157 measurements),
# 22 MAMF rows and 9 illustrative rows, one measurement each
SEEDED_RUNS, SEEDED_MEASUREMENTS = 237 + 22 + 9, 2157 + 22 + 9


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks_db", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def upload(store, name: str, tflops: float):
    t = 2 * 8192**3 / (tflops * 1e12)
    return ingest_bytes(store, name, runner_file([matmul_result(8192, 8192, 8192, "bf16", [t] * 7)]))


@pytest.mark.parametrize("duckdb_sql, psycopg_sql", [
    ("SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = %s AND c = %s"),
    ("WHERE ($kind IS NULL OR k = $kind) LIMIT $limit", "WHERE (%(kind)s IS NULL OR k = %(kind)s) LIMIT %(limit)s"),
    ("SELECT '50% ?', \"a?b\", x % 2 FROM t WHERE y = ?", "SELECT '50%% ?', \"a?b\", x %% 2 FROM t WHERE y = %s"),
    ("SELECT 'it''s $x ?' -- what? $y\nFROM t WHERE z = $z", "SELECT 'it''s $x ?' -- what? $y\nFROM t WHERE z = %(z)s"),
])
def test_parameter_marks_become_psycopgs_outside_quotes_and_comments(duckdb_sql, psycopg_sql):
    assert pg_sql(duckdb_sql) == psycopg_sql


def test_passwords_are_masked():
    assert mask_url("postgresql://planner:s3cr%40t@db.internal:5432/planner") == \
        "postgresql://planner:***@db.internal:5432/planner"
    assert mask_url("postgresql://db/planner?user=p&password=s3cret") == "postgresql://db/planner?user=p&password=***"


def test_the_same_query_reads_the_same_on_both_backends(store):
    """Parameters of both styles, NULL for an unset filter, a quoted % and JSON read back as text."""
    with store.transaction() as cur:
        cur.execute("INSERT INTO saved_scenario (scenario_id, name, created_at, scenario_json) VALUES (?, ?, ?, ?)",
                    ["abc", "50% more", "2026-01-02 03:04:05", '{"a": 1}'])
    df = store.df("SELECT name, created_at, scenario_json, '100%' AS pct FROM saved_scenario "
                  "WHERE ($owner IS NULL OR owner = $owner) AND name LIKE '50%'", {"owner": None})
    assert df.to_dict("records") == [{"name": "50% more", "created_at": df.created_at[0], "scenario_json": '{"a": 1}',
                                      "pct": "100%"}]
    assert str(df.created_at.dtype) == "datetime64[us]" and str(df.created_at[0]) == "2026-01-02 03:04:05"


def test_an_upload_that_fails_half_way_leaves_no_rows(store, monkeypatch):
    """The source, system and run rows are written, then the measurements' insert fails (as on a lost connection):
    the transaction takes everything back, on either backend."""
    before = store.counts()
    insert = Cursor.insert

    def failing(self, table, schema, rows, ignore=False):
        if table == "measurement":
            assert self.execute("SELECT count(*) FROM run").fetchall()[0][0] == before["run"] + 1   # written so far
            raise OSError("the connection broke")
        return insert(self, table, schema, rows, ignore)

    monkeypatch.setattr(writer.Cursor, "insert", failing)
    report = upload(store, "half.json", 700)
    assert not report.ingested and "internal error" in " ".join(report.errors)
    assert store.counts() == before
    monkeypatch.undo()
    assert upload(store, "whole.json", 700).ingested                   # the same upload, once it can be written
    assert store.counts() == {**before, "source": before["source"] + 1, "run": before["run"] + 1,
                              "measurement": before["measurement"] + 1, "system": before["system"] + 1,
                              "software_env": before["software_env"] + 1}


def backend_of(target) -> str:
    return "postgresql" if str(target).startswith("postgresql://") else "duckdb"


def test_info_prints_the_contents_as_json(seeded_copy):
    backend = backend_of(seeded_copy)
    done = cli("info", "--json", "--db", str(seeded_copy))
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["backend"] == backend and info["schema_version"] == len(MIGRATIONS)
    assert info["tables"]["run"] == SEEDED_RUNS and info["tables"]["measurement"] == SEEDED_MEASUREMENTS
    assert info["tables"]["seed_dataset"] == 3 and info["tables"]["schema_version"] == len(MIGRATIONS)
    assert set(info["tables"]) == {"source", "system", "software_env", "run", "measurement", "seed_dataset",
                                   "saved_scenario", "schema_version"}


def test_seed_runs_on_postgres_from_app_db_url(postgres):
    url = postgres.new_database()
    first = cli("seed", env={"APP_DB_URL": url})
    assert first.returncode == 0, first.stderr
    assert "mlperf_training_results.csv: loaded 237 runs, 2157 measurements" in first.stdout
    again = cli("seed", env={"APP_DB_URL": url})
    assert again.returncode == 0 and "mlperf_training_results.csv: up to date" in again.stdout
    assert f"{SEEDED_RUNS} run rows, {SEEDED_MEASUREMENTS} measurement rows" in again.stdout
    postgres.drop(url)


def test_replicas_starting_together_migrate_once(postgres):
    """Four processes open a fresh database at once: the advisory lock lets one apply each migration."""
    url = postgres.new_database()
    script = "import sys; from benchmarks_db.store import open_store; print(open_store(sys.argv[1]).schema_version())"
    procs = [subprocess.Popen([sys.executable, "-c", script, url], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    assert [o.strip() for o, _ in outs] == [str(len(MIGRATIONS))] * 4
    store = open_store(url)
    assert store.rows("SELECT version FROM schema_version ORDER BY 1") == [(v,) for v in range(1, len(MIGRATIONS) + 1)]
    store.close()
    postgres.drop(url)


def test_backup_and_restore_round_trip(seeded_copy, tmp_path):
    """A backup holds every row, a saved scenario and an upload; what changed after it is gone once it is restored."""
    store = open_store(seeded_copy)
    saved = save_scenario(store, default_scenario(), "kept")
    kept = upload(store, "kept.json", 700)
    assert kept.ingested
    at_backup = store.summary()["tables"]
    store.close()
    path = tmp_path / "store.backup"
    done = cli("backup", str(path), "--db", str(seeded_copy))
    assert done.returncode == 0 and path.is_file(), done.stderr
    assert cli("backup", str(path), "--db", str(seeded_copy)).stderr.startswith(f"backup: {path} exists already")

    store = open_store(seeded_copy)                    # changes after the backup: one more upload, the scenario gone
    assert upload(store, "later.json", 650).ingested
    with store.transaction() as cur:
        cur.execute("DELETE FROM saved_scenario")
    store.close()
    done = cli("restore", str(path), "--db", str(seeded_copy))
    assert done.returncode == 0, done.stderr
    store = open_store(seeded_copy)
    try:
        assert store.summary()["tables"] == at_backup
        assert load_scenario(store, saved.scenario_id).saved.name == "kept"
        assert store.rows("SELECT filename FROM source WHERE kind = 'user_submitted'") == [("kept.json",)]
    finally:
        store.close()


def test_a_backup_restores_only_into_its_own_backend(seeded_copy, tmp_path):
    backend = backend_of(seeded_copy)
    wrong = tmp_path / "wrong.backup"
    wrong.write_bytes(b"PGDMP-not-really" if backend == "duckdb" else b"\0" * 8 + b"DUCK" + b"\0" * 100)
    done = cli("restore", str(wrong), "--db", str(seeded_copy))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"is not a {'DuckDB store' if backend == 'duckdb' else 'PostgreSQL'} backup" in done.stderr


def test_a_wrong_app_db_url_is_named_with_how_to_fix_it(postgres):
    wrong = {
        "mysql://planner:hunter2@db/planner": "is not a PostgreSQL URL: write postgresql://USER:PASSWORD@HOST:PORT/",
        "postgresql://planner:hunter2@127.0.0.1:1/planner": "cannot connect to PostgreSQL",
        postgres.url(user="with_password", password="hunter2"): "password authentication failed",
    }
    for url, said in wrong.items():
        done = cli("info", env={"APP_DB_URL": url})
        assert done.returncode == 2, (url, done.stdout)
        assert "APP_DB_URL=" in done.stderr and said in done.stderr, done.stderr
        assert "hunter2" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    right = cli("info", "--json", env={"APP_DB_URL": postgres.url(user="with_password", password="right-password")})
    assert right.returncode == 0 and "right-password" not in right.stdout, right.stderr
    assert json.loads(right.stdout)["location"].startswith("postgresql://with_password:***@/postgres")


def test_many_threads_read_and_write_one_postgres_store(postgres):
    """The Store's connections are shared by a server's sessions (threads): each gets its own."""
    url = postgres.new_database()
    store = open_store(url)
    errors = []

    def work(i):
        try:
            assert upload(store, f"t{i}.json", 600 + i).ingested
            store.df("SELECT count(*) FROM run")
        except Exception as err:           # collected: an assertion in a thread would not fail the test
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and store.counts()["source"] == 8
    store.close()
    postgres.drop(url)
