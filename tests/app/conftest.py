"""AppTest harness: the real app (app.py and every page) against a real DuckDB file seeded with the published
data. One store per test session (the app holds one store handle per process, as in production)."""
import base64
import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from benchmarks_db.seed import seed
from benchmarks_db.store import open_store
from ui import cached
from tests.conftest import runner_result

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
TIMEOUT_S = 60            # a cold first run imports plotly, pandas and duckdb


@pytest.fixture(autouse=True)
def served_navigation(monkeypatch):
    """A served app runs st.navigation's pages: app.py's st.navigation clears Streamlit's class-level flag for the
    legacy pages/ directory for the rest of the process. AppTest resets that flag before every run
    (streamlit/testing/v1/app_test.py), after which PagesManager sets it again because pages/ exists, so each run
    after the first would execute only the page script. Keep the flag as the server has it."""
    init = PagesManager.__init__

    def served_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", served_init)


@pytest.fixture(scope="session", autouse=True)
def app_store(tmp_path_factory):
    """APP_DB_PATH -> a freshly seeded store for the whole session; the app's cached handle is reset to it."""
    path = tmp_path_factory.mktemp("app") / "planner.duckdb"
    previous = os.environ.get("APP_DB_PATH")
    os.environ["APP_DB_PATH"] = str(path)
    store = open_store(path)
    seed(store)
    cached.store.clear()
    yield store
    cached.store.clear()
    store.close()
    if previous is None:
        os.environ.pop("APP_DB_PATH", None)
    else:
        os.environ["APP_DB_PATH"] = previous


@pytest.fixture
def signed_in(monkeypatch):
    """The reverse proxy names the user in X-Forwarded-Email. AppTest cannot send request headers (they come from
    the session's client, streamlit/testing/v1/app_test.py), so the client Streamlit reads them from is given here;
    set `.who` before starting a session."""
    monkeypatch.setenv("APP_IDENTITY_HEADER", "X-Forwarded-Email")
    proxy = SimpleNamespace(who=None)
    monkeypatch.setattr("streamlit.runtime.context._get_client_context",
                        lambda: SimpleNamespace(headers=[("X-Forwarded-Email", proxy.who)] if proxy.who else []))
    return proxy


def run_app(query: dict[str, str] | None = None) -> AppTest:
    """A fresh session (new browser tab) of the app, optionally opened with a query string, after its first run."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def on_page(at: AppTest, page: str) -> AppTest:
    """Switch to pages/<page>.py and run it."""
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    found = [m.value for m in at.metric if m.label == label]
    assert found, f"no metric {label!r}; metrics: {[m.label for m in at.metric]}"
    return found[0]


def plotted(values) -> list:
    """A plotly trace's x or y as a list (plotly 7 sends numeric arrays as base64 'bdata' typed arrays)."""
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def button(at: AppTest, label: str):
    found = [b for b in at.button if b.label == label]
    assert found, f"no button {label!r}; buttons: {[b.label for b in at.button]}"
    return found[0]


def texts(elements) -> list[str]:
    """What the elements show: their markdown with backslash escapes resolved (user text is escaped on purpose)."""
    return [re.sub(r"\\(.)", r"\1", e.value) for e in elements]


@pytest.fixture(scope="session")
def runner_file(tmp_path_factory) -> Path:
    """A real result file from the bundled matmul runner (--quick)."""
    out = tmp_path_factory.mktemp("runner") / "results.json"
    runner_result("matmul", out)
    return out
