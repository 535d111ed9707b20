"""Start the planner as it is deployed (scripts/start.sh and the container image run this): check the settings
(pages/settings.py), take the store's serving lock (one planner per store), create, upgrade and seed the store
(`python -m benchmarks_db seed`), then run `streamlit run app.py` in this process, so that signals such as the
container's SIGTERM reach Streamlit itself. Streamlit's upload limit is set from APP_MAX_UPLOAD_MB; extra arguments
go to `streamlit run`.

    python serve.py [--server.port 8501 ...]
"""
import fcntl
import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from pages.settings import SettingsError, load_settings

ROOT = Path(__file__).resolve().parent
START_TIMEOUT_S = 120
LOOPBACK = "127.0.0.1"
WILDCARDS = ("0.0.0.0", "::", "")
log = logging.getLogger("planner.serve")


def serving_lock(store: Path) -> int | None:
    """An exclusive lock on <store>.lock for as long as this process (then Streamlit) lives, or None when another
    planner holds it. DuckDB's own lock is taken only when the first session opens the store, so without this a
    second replica would start and its users would meet lock errors."""
    store.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(store.with_name(store.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def main(args: list[str]) -> int:
    try:
        settings = load_settings()
    except SettingsError as err:
        log.error("The planner's settings are wrong, so it was not started:%s",
                  "".join("\n  " + problem for problem in err.problems))
        return 2
    log.info("store %s%s; uploads up to %d MB; served under '/%s'", settings.db_path,
             " (read-only)" if settings.read_only else "", settings.max_upload_mb, settings.base_url_path)
    lock = serving_lock(settings.db_path)
    if lock is None:
        log.error("Another planner is already serving %s: DuckDB lets one process write a store, so run one planner "
                  "(one replica) per store.", settings.db_path)
        return 2
    os.chdir(ROOT)
    if subprocess.run([sys.executable, "-m", "benchmarks_db", "seed", "--db", str(settings.db_path)]).returncode:
        return 2
    return run_streamlit([f"--server.maxUploadSize={settings.max_upload_mb}", *listen_args(args, os.environ), *args])


def _option(args: list[str], env: dict, name: str) -> str | None:
    """A Streamlit option as given on the command line (--section.name value or --section.name=value) or in its
    STREAMLIT_SECTION_NAME variable; None when neither sets it."""
    flag = f"--{name}"
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
    variable = "STREAMLIT_" + re.sub(r"([a-z])([A-Z])", r"\1_\2", name).replace(".", "_").upper()
    return env.get(variable)


def listen_args(args: list[str], env: dict) -> list[str]:
    """Where the server listens: loopback unless the caller names an address (--server.address, or
    STREAMLIT_SERVER_ADDRESS as the container image sets it to 0.0.0.0), since the planner has no sign-on. On a
    wildcard address Streamlit would ask checkip.amazonaws.com for this machine's external IP only to print it (and
    open a UDP socket towards 8.8.8.8 for the network address): naming the address browsers use (browser.serverAddress)
    keeps the start free of outside requests."""
    address = _option(args, env, "server.address")
    if address is None:
        log.info("listening on %s only (this machine); STREAMLIT_SERVER_ADDRESS=0.0.0.0 or --server.address 0.0.0.0 "
                 "exposes it to the network, the container image is the way to share it", LOOPBACK)
        return ["--server.address", LOOPBACK]
    if address.strip() in WILDCARDS:
        log.warning("listening on every interface (%r): anyone who can reach this machine can use the planner, which "
                    "has no sign-on of its own", address)
        if _option(args, env, "browser.serverAddress") is None:
            return ["--browser.serverAddress", "localhost"]
    return []


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
def local_server(tmp: Path, command: list[str] | None = None, cwd: Path = ROOT, env: dict[str, str] | None = None):
    """This planner on a free loopback port with a fresh store in `tmp`, as deployed (for the end-to-end tests and the
    load test): yields (url ending in '/', server pid, log file); stopped with SIGTERM at the end. `command` starts it
    another way (scripts/start.sh, an installed `planner serve`); it gets its port from STREAMLIT_SERVER_PORT."""
    port = free_port()
    log_path = tmp / "server.log"
    env = {**os.environ, "APP_DB_PATH": str(tmp / "planner.duckdb"), "STREAMLIT_SERVER_PORT": str(port), **(env or {})}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command or [sys.executable, "serve.py", "--server.address", LOOPBACK], cwd=cwd, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
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
    from engine.command_line import run
    run(lambda: main(sys.argv[1:]))
