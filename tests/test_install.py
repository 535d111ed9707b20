"""`pip install .` into a new virtual environment, then used from another directory as a newcomer would: the `planner`
command on the README's example scenario, the engine imported as a package, the store seeded from the installed
data, and `planner serve` answering on loopback.

The new environment sees this environment's packages through a .pth file, so its dependencies (requirements.txt)
count as installed and nothing large is downloaded; the planner itself is built (setuptools, in pip's isolated build
environment, which pip fetches from the package index) and installed into it for real."""
import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from engine.catalog import load_catalog
from serve import local_server
from tests.conftest import ROOT
from tests.e2e.conftest import context, go_to, no_exception, open_page, screenshot  # noqa: F401 (context: a fixture)

COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "var", "build", "*.egg-info", "__pycache__", ".pytest_cache",
                                     ".hypothesis", ".benchmarks", "test-artifacts", "*.duckdb", "*.duckdb.wal")


def readme_scenario() -> dict:
    """The example scenario under "A scenario is JSON:" in the README."""
    after = (ROOT / "README.md").read_text().split("A scenario is JSON:", 1)[1]
    return json.loads(re.search(r"```json\n(.*?)```", after, re.S).group(1))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A new virtual environment with the planner installed from a copy of this tree; returns its bin folder."""
    tmp = tmp_path_factory.mktemp("install")
    src, env = tmp / "src", tmp / "venv"
    shutil.copytree(ROOT, src, ignore=COPY_IGNORE)
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([env / "bin" / "python", "-c", where], capture_output=True, text=True,
                               check=True).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([env / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", str(src)],
                          cwd=tmp, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Successfully installed llm-capacity-planner" in done.stdout
    return env / "bin"


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A working directory with nothing of the repository in it."""
    return tmp_path


def planner(bin_dir: Path, cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([bin_dir / "planner", *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=300)


def from_checkout(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_planner_estimate_on_the_readme_example_matches_the_checkout(installed, elsewhere):
    scenario = elsewhere / "scenario.json"
    scenario.write_text(json.dumps(readme_scenario()))
    got = planner(installed, elsewhere, "estimate", str(scenario))
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout) == json.loads(from_checkout("engine", "estimate", str(scenario)).stdout)


def test_the_engine_imports_from_the_installed_package_with_its_data(installed, elsewhere):
    code = ("import engine, engine.catalog; from engine.planning.estimate import estimate; "
            "print(engine.__file__); print(engine.catalog.DATA_DIR); "
            "print(len(engine.catalog.load_catalog().accelerators))")
    out = subprocess.run([installed / "python", "-c", code], cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    module, data_dir, n_accelerators = out.stdout.split()
    prefix = str(installed.parent)
    assert module.startswith(prefix) and data_dir.startswith(prefix)         # not this checkout
    checkout = {p.relative_to(ROOT / "data"): p.read_bytes() for p in (ROOT / "data").rglob("*") if p.is_file()}
    assert {p.relative_to(data_dir): p.read_bytes() for p in Path(data_dir).rglob("*") if p.is_file()} == checkout
    assert int(n_accelerators) == len(load_catalog().accelerators) > 0


def test_every_engine_command_is_a_planner_command(installed, elsewhere):
    """Forwarded generically: the engine's subcommands, whatever they are today, are listed and run."""
    from engine.__main__ import build_parser
    helped = planner(installed, elsewhere, "--help")
    assert helped.returncode == 0
    for action in build_parser()._subparsers._group_actions[0].choices:
        assert f"  {action} " in helped.stdout
        assert planner(installed, elsewhere, action, "--help").returncode == 0
    catalog = planner(installed, elsewhere, "catalog")
    assert json.loads(catalog.stdout) == json.loads(from_checkout("engine", "catalog").stdout)


def test_store_and_bench_commands_use_the_installed_data(installed, elsewhere):
    seeded = planner(installed, elsewhere, "store", "seed", "--db", str(elsewhere / "store.duckdb"))
    assert seeded.returncode == 0, seeded.stderr
    reference = from_checkout("benchmarks_db", "seed", "--db", str(elsewhere / "reference.duckdb"))
    assert seeded.stdout.replace("store.duckdb", "X") == reference.stdout.replace("reference.duckdb", "X")
    schema = planner(installed, elsewhere, "bench", "run", "--schema")
    assert json.loads(schema.stdout) == json.loads(from_checkout("benchmarks_db.run", "--schema").stdout)


def test_search_into_a_closed_pipe_ends_quietly(installed, elsewhere):
    scenario = elsewhere / "scenario.json"
    scenario.write_text(json.dumps(readme_scenario()))
    proc = subprocess.Popen([installed / "planner", "search", str(scenario), "--top", "20"], cwd=elsewhere,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "{\n"
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err


def test_planner_serve_runs_the_app_on_loopback_with_its_store_in_the_users_data_folder(installed, elsewhere,
                                                                                         monkeypatch, context):
    monkeypatch.delenv("STREAMLIT_SERVER_ADDRESS", raising=False)
    home = elsewhere / "home"
    with local_server(elsewhere, command=[str(installed / "planner"), "serve"], cwd=elsewhere,
                      env={"HOME": str(home), "XDG_DATA_HOME": "", "APP_DB_PATH": ""}) as (url, _pid, log_path):
        page = context.new_page()
        open_page(page, url)
        assert page.title() == "LLM Training Capacity Planner"
        go_to(page, "Benchmarks")                          # reads the store seeded from the installed data
        no_exception(page)
        screenshot(page, "installed-planner-serve-benchmarks")
        log = log_path.read_text()
    store = home / ".local" / "share" / "llm-capacity-planner" / "planner.duckdb"
    assert f"store {store};" in log and store.exists()
    assert "listening on 127.0.0.1 only" in log
