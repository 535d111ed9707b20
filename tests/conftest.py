import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"     # test inputs with their sources (tests/data/README.md)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# The slow tier, by place: whole folders (pages through AppTest, the browser, the container) and the files that
# validate accuracy against published runs or build environments. Everything else (formulas, rules, parsers, store)
# is the everyday tier: `bash scripts/test.sh -m "not slow"` (README "Set up").
SLOW_FOLDERS = ("tests/app/", "tests/e2e/", "tests/container/")
SLOW_FILES = ("tests/test_install.py", "tests/test_start.py", "tests/engine/test_accuracy.py",
              "tests/benchmarks_db/test_validation.py")


def pytest_collection_modifyitems(config, items):
    for item in items:
        where = Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
        if where.startswith(SLOW_FOLDERS) or where in SLOW_FILES:
            item.add_marker(pytest.mark.slow)


CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for all browser tests (e2e, container): Playwright's sync API runs one per thread."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        yield b
        b.close()


def runner_result(runner: str, out: Path, *args: str) -> Path:
    """A real result file from a bundled runner in --quick mode (what users upload)."""
    subprocess.run([sys.executable, "-m", "benchmarks_db.run", runner, "--quick", "--out", str(out), *args], cwd=ROOT,
                   check=True, capture_output=True, timeout=120)
    return out


@pytest.fixture(scope="session")
def postgres():
    """A throwaway PostgreSQL cluster for the whole session (tests/postgres.py). Without PostgreSQL's programs the
    tests that need it fail in CI (CI=true: the test command installs them) and are skipped elsewhere."""
    from tests.postgres import MISSING, cluster, pg_bin
    if pg_bin() is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    with cluster() as c:
        yield c
