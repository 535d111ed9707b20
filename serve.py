"""Start the planner as it is deployed (scripts/start.sh and the container image run this): check the settings
(pages/settings.py), take the store's serving lock (one planner per store), create, upgrade and seed the store
(`python -m benchmarks_db seed`), then run `streamlit run app.py` in this process, so that signals such as the
container's SIGTERM reach Streamlit itself. Streamlit's upload limit is set from APP_MAX_UPLOAD_MB; extra arguments
go to `streamlit run`.

    python serve.py [--server.port 8501 ...]
"""
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from benchmarks_db.__main__ import seed_store
from benchmarks_db.store import another_planner, serving_lock
from pages.settings import SettingsError, load_settings

ROOT = Path(__file__).resolve().parent
START_TIMEOUT_S = 120


def main(args: list[str]) -> int:
    try:
        settings = load_settings()
    except SettingsError as err:
        print("The planner's settings are wrong, so it was not started:", *err.problems, sep="\n  ", file=sys.stderr)
        return 2
    print(f"store {settings.db_path}{' (read-only)' if settings.read_only else ''}; uploads up to "
          f"{settings.max_upload_mb} MB; served under '/{settings.base_url_path}'", flush=True)
    if serving_lock(settings.db_path) is None:       # held (the descriptor stays open) until the process ends
        print(another_planner(settings.db_path), file=sys.stderr)
        return 2
    os.chdir(ROOT)
    if seed_store(settings.db_path):                   # in this process: a seed command would meet the lock
        return 2
    return run_streamlit([f"--server.maxUploadSize={settings.max_upload_mb}", *args])


def run_streamlit(args: list[str]) -> int:
    """`streamlit run app.py` in this process (which keeps holding the serving lock).

    Streamlit decides once per process, when the first session starts, whether the app uses its legacy pages/
    folder discovery (PagesManager.uses_pages_directory, from whether pages/ exists); app.py's st.navigation turns
    it off, but only after app.py has run once. Until then a fresh server routes every session through the legacy
    discovery: a shared link such as /memory?sc=... fails and the sidebar lists every module in pages/. Turning it
    off before the server starts keeps every session on app.py's st.navigation from the first request on."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    PagesManager.uses_pages_directory = False
    sys.argv = ["streamlit", "run", "app.py", *args]
    return cli.main()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def local_server(tmp: Path):
    """This planner on a free loopback port with a fresh store in `tmp`, as deployed (for the end-to-end tests and the
    load test): yields (url ending in '/', server pid, log file); stopped with SIGTERM at the end."""
    port = free_port()
    log_path = tmp / "server.log"
    env = {**os.environ, "APP_DB_PATH": str(tmp / "planner.duckdb")}
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "serve.py", "--server.address", "127.0.0.1", "--server.port",
                                 str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "_stcore/health", timeout=2) as resp:
                    if resp.read() == b"ok":
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server was not healthy within {START_TIMEOUT_S} s") from None
                time.sleep(0.3)
        yield url, proc.pid, log_path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
