"""The deployment's settings (ui/settings.py): a read-only planner writes nothing and says so where one would
write, the title is the team's, the upload limit applies to the store's ingestion, and a wrong setting is named
with what it takes, in the browser and by serve.py before anything starts."""
import os
import subprocess
import sys
import urllib.request

import duckdb
import pytest

from benchmarks_db.scenarios import save_scenario, scenario_id
from benchmarks_db.seed import seed
from benchmarks_db.store import open_store
from engine.presentation.edit import default_scenario
from ui import cached
from ui.settings import SettingsError, load_settings
from tests.app.conftest import ROOT, on_page, run_app, texts
from tests.app.test_benchmarks_page import upload


@pytest.fixture
def read_only_store(tmp_path, monkeypatch):
    """A seeded store of its own (the session's store is open read-write in this process), served read-only."""
    path = tmp_path / "published.duckdb"
    store = open_store(path)
    seed(store)
    store.close()
    monkeypatch.setenv("APP_DB_PATH", str(path))
    monkeypatch.setenv("APP_READ_ONLY", "true")
    cached.store.clear()
    yield path
    open_store(path, read_only=True).close()
    cached.store.clear()


def test_a_read_only_planner_offers_no_upload_or_save_and_its_store_refuses_writes(read_only_store):
    at = run_app()
    assert not [b for b in at.button if b.label == "Save scenario"]
    assert any("read-only" in s for s in texts(at.sidebar.info))
    on_page(at, "benchmarks")
    assert not at.get("file_uploader")
    assert not [b for b in at.button if b.label == "Check and add to the store"]
    assert any("read-only: uploads are off" in s for s in texts(at.info))
    store = open_store(read_only_store, read_only=True)       # the handle the app opened
    before = store.counts()
    with pytest.raises(duckdb.Error, match="read-only"):
        save_scenario(store, default_scenario(), "not saved")
    assert store.counts() == before


def test_a_read_only_planner_lists_a_users_own_scenarios_with_nothing_to_change(tmp_path, monkeypatch, signed_in):
    path = tmp_path / "published.duckdb"
    store = open_store(path)
    save_scenario(store, default_scenario(), "Alice's plan", owner="alice@example.com", visibility="private")
    store.close()
    monkeypatch.setenv("APP_DB_PATH", str(path))
    monkeypatch.setenv("APP_READ_ONLY", "true")
    cached.store.clear()
    try:
        signed_in.who = "alice@example.com"
        at = run_app()
        sid = scenario_id(default_scenario(), owner="alice@example.com")
        assert any(f"(?s={sid})" in t and "yours, private" in t for t in texts(at.markdown)), texts(at.markdown)
        assert not [b for b in at.button if b.key and sid in b.key]
    finally:
        open_store(path, read_only=True).close()
        cached.store.clear()


def test_the_title_is_the_teams(monkeypatch):
    monkeypatch.setenv("APP_TITLE", "GPU planning, team A")
    at = run_app()
    assert [h.value for h in at.sidebar.header] == ["GPU planning, team A"]


def test_the_upload_limit_applies_to_the_store(monkeypatch):
    monkeypatch.setenv("APP_MAX_UPLOAD_MB", "1")
    at = on_page(run_app(), "benchmarks")
    assert at.get("file_uploader")[0].proto.max_upload_size_mb == 1
    upload(at, "big.json", b" " * (2**20 + 1))
    assert any("over the 1048576-byte limit" in s for s in texts(at.markdown)), texts(at.markdown)


BAD = {"APP_MAX_UPLOAD_MB": "lots", "APP_READ_ONLY": "maybe", "STREAMLIT_SERVER_BASE_URL_PATH": "/a b/",
       "APP_TITLE": "x" * 81}


def test_every_wrong_setting_is_named_with_what_it_takes(monkeypatch, tmp_path):
    for name, value in BAD.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("APP_DB_PATH", str(tmp_path))
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert [p.split("=")[0].split(":")[0] for p in err.value.problems] == [
        "APP_DB_PATH", "STREAMLIT_SERVER_BASE_URL_PATH", "APP_MAX_UPLOAD_MB", "APP_READ_ONLY", "APP_TITLE"]
    assert "a whole number of MB from 1 to 1024" in str(err.value)
    at = run_app()                                     # the browser shows what is wrong instead of the planner
    assert any("APP_MAX_UPLOAD_MB='lots'" in s for s in texts(at.error))
    started = subprocess.run([sys.executable, "serve.py"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert started.returncode == 2 and "APP_READ_ONLY='maybe'" in started.stderr
    assert "Uvicorn" not in started.stdout + started.stderr


def test_a_wrong_app_db_url_is_named_before_anything_starts(monkeypatch, tmp_path):
    """APP_DB_URL that is not a PostgreSQL URL is a settings problem; one whose server refuses stops serve.py with the
    reason; neither prints the password nor a traceback."""
    monkeypatch.setenv("APP_DB_URL", "mysql://planner:hunter2@db/planner")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert [p.split("=")[0] for p in err.value.problems] == ["APP_DB_URL"] and "hunter2" not in str(err.value)
    assert "postgresql://USER:PASSWORD@HOST:PORT/DATABASE" in str(err.value)
    env = {"APP_DB_URL": "postgresql://planner:hunter2@127.0.0.1:1/planner", "APP_DB_PATH": str(tmp_path / "x.duckdb")}
    started = subprocess.run([sys.executable, "serve.py"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                             env={**os.environ, **env})
    said = started.stdout + started.stderr
    assert started.returncode == 2 and "APP_DB_URL=postgresql://planner:***@127.0.0.1:1/planner: cannot connect" in said
    assert "hunter2" not in said and "Traceback" not in said and "Uvicorn" not in said


def test_the_planner_serves_from_postgres_when_app_db_url_is_set(postgres, tmp_path):
    """serve.py on a PostgreSQL store: no serving lock (a second replica starts beside the first), the store seeded,
    the pages' health check answering from it."""
    from serve import local_server
    url = postgres.new_database()
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    with local_server(tmp_path / "a", env={"APP_DB_URL": url}) as (first, _, log_a), \
            local_server(tmp_path / "b", env={"APP_DB_URL": url}) as (second, _, _):
        for server in (first, second):
            with urllib.request.urlopen(server + "_stcore/health", timeout=30) as resp:
                assert resp.read() == b"ok"
        assert "268 run rows, 2188 measurement rows" in log_a.read_text()
    store = open_store(url)
    assert store.counts()["run"] == 268 and store.health() is None
    store.close()
    postgres.drop(url)
