"""Start the planner as it is deployed (scripts/start.sh and the container image run this): check the settings
(ui/settings.py), take the store's serving lock (one planner per store), create, upgrade and seed the store
(what `python -m benchmarks_db seed` does), then run `streamlit run app.py` in this process, so that signals such as
the container's SIGTERM reach Streamlit itself. Streamlit's upload limit is set from APP_MAX_UPLOAD_MB, its pending
uploads are capped (APP_MAX_PENDING_UPLOAD_MB), every response carries the anti-framing headers and the metrics
endpoint is closed (Guard); extra arguments go to `streamlit run`.

    python serve.py [--server.port 8501 ...]
"""
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from benchmarks_db.__main__ import seed_store
from benchmarks_db.store import another_planner, serving_lock
from ui.settings import SettingsError, load_settings

ROOT = Path(__file__).resolve().parent
START_TIMEOUT_S = 120
LOOPBACK = "127.0.0.1"
WILDCARDS = ("0.0.0.0", "::", "")
log = logging.getLogger("planner.serve")


def main(args: list[str]) -> int:
    try:
        settings = load_settings()
    except SettingsError as err:
        log.error("The planner's settings are wrong, so it was not started:%s",
                  "".join("\n  " + problem for problem in err.problems))
        return 2
    log.info("store %s%s; uploads up to %d MB; served under '/%s'", settings.store_location,
             " (read-only)" if settings.read_only else "", settings.max_upload_mb, settings.base_url_path)
    # DuckDB: one planner per file, held (the descriptor stays open) until the process ends. PostgreSQL: none, as
    # several replicas share the database and its server orders their writes.
    if settings.db_url is None and serving_lock(settings.db_path) is None:
        log.error("%s", another_planner(settings.db_path))
        return 2
    os.chdir(ROOT)
    if seed_store(settings.store_target):             # in this process: a seed command would meet the lock
        return 2
    warm_up(settings)
    return run_streamlit([f"--server.maxUploadSize={settings.max_upload_mb}", *listen_args(args, os.environ), *args])


def warm_up(settings) -> None:
    """Start what every server computes once for all its sessions in the background (the MLPerf validation of the
    Benchmarks page, ui/background.py); the server starts at once and serves while it runs."""
    from benchmarks_db.store import open_store
    from ui import background

    background.warm_up(open_store(settings.store_target, read_only=settings.read_only))


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


# Sent with every HTTP response: no other site may frame the planner (clickjacking); behind a reverse proxy set the
# same headers there too (README "Deployment"). 'self' keeps Streamlit's own same-origin component frames working.
SECURITY_HEADERS = ((b"x-frame-options", b"SAMEORIGIN"), (b"content-security-policy", b"frame-ancestors 'self'"),
                    (b"x-content-type-options", b"nosniff"))
CLOSED_PATHS = ("_stcore/metrics",)      # Streamlit's metrics: no access control, and they list every session
MAX_FILES_PER_SESSION = 8                # a session's uploaders hold one or two files; more is not a person
SMALL_UPLOAD_BYTES = 256 * 1024          # per session, outside the shared total (a runner result is a few KB)


HEALTH_PATH = "_stcore/health"


class Guard:
    """ASGI middleware around Streamlit's server: the security headers on every HTTP response, 404 for
    CLOSED_PATHS (Streamlit has no setting to turn its metrics endpoint off), and a health check that also asks
    `health()` (the store: None when it answers, else why not), so that an orchestrator sees a broken store as 503
    instead of Streamlit's unconditional 'ok'."""

    def __init__(self, app, health=None):
        self.app = app
        self.health = health

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "").rstrip("/")
        if path.endswith(CLOSED_PATHS):
            return await _plain(send, 404, b"not found")
        if path.endswith(HEALTH_PATH) and self.health is not None:
            import anyio                                   # the query runs off the event loop
            problem = await anyio.to_thread.run_sync(self.health)
            if problem is not None:
                return await _plain(send, 503, f"store unavailable: {problem}".encode())

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []),
                                                  *(h for h in SECURITY_HEADERS if h[0] not in present)]}
            await send(message)
        return await self.app(scope, receive, send_with_headers)


async def _plain(send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


def capped_upload_manager(max_pending_bytes: int, per_session_bytes: int):
    """Streamlit's in-memory store of uploaded files, with a count and a total per session and a total for every
    session together (Streamlit keeps each file under any file id a client invents until its session ends, with no
    total). A session's first SMALL_UPLOAD_BYTES are outside the shared total, so one session filling it (it may hold
    per_session_bytes) cannot turn away another's result file of a few KB."""
    from starlette.exceptions import HTTPException
    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager

    class CappedUploadedFileManager(MemoryUploadedFileManager):
        def __init__(self, endpoint: str):
            super().__init__(endpoint)
            self._cap_lock = threading.Lock()          # check and add as one step (the parent's lock is not reentrant)

        def add_file(self, session_id, file) -> None:
            with self._cap_lock:
                with self._lock:
                    held = self.file_storage.get(session_id, {})
                    replaced = held.get(file.file_id)
                    freed = len(replaced.data) if replaced else 0
                    session = sum(len(f.data) for f in held.values()) - freed + len(file.data)
                    shared = sum(max(0, sum(len(f.data) for f in files.values()) - SMALL_UPLOAD_BYTES)
                                 for sid, files in self.file_storage.items() if sid != session_id)
                    files = len(held) + (0 if replaced else 1)
                if files > MAX_FILES_PER_SESSION:
                    raise HTTPException(status_code=429, detail=f"at most {MAX_FILES_PER_SESSION} uploaded files "
                                                                "per session; remove one first")
                if session > per_session_bytes:
                    raise HTTPException(status_code=413, detail=f"this session holds {session - len(file.data):,} "
                                                                f"bytes of uploads; at most {per_session_bytes:,} "
                                                                "together: remove one first")
                if session > SMALL_UPLOAD_BYTES and shared + session - SMALL_UPLOAD_BYTES > max_pending_bytes:
                    raise HTTPException(status_code=413, detail="the server holds as many uploads as it may; try "
                                                                "again in a minute")
                super().add_file(session_id, file)

    return CappedUploadedFileManager


def session_upload_cap(settings) -> int:
    """Bytes of pending uploads one session may hold: two files at the upload limit (one replacing the other), and
    at most half the shared total, so that no one session fills it."""
    return min(2 * settings.max_upload_bytes, settings.max_pending_upload_mb * 2**20 // 2)


def install_guards(max_pending_upload_bytes: int, per_session_upload_bytes: int, health=None) -> None:
    """Put Guard in front of Streamlit's middleware (with `health`, the store's check) and cap its uploads; before
    the server starts."""
    from starlette.middleware import Middleware
    from streamlit.web.server import server
    from streamlit.web.server.starlette import starlette_app

    streamlit_middleware = starlette_app.create_streamlit_middleware
    starlette_app.create_streamlit_middleware = lambda: [Middleware(Guard, health=health), *streamlit_middleware()]
    server.MemoryUploadedFileManager = capped_upload_manager(max_pending_upload_bytes, per_session_upload_bytes)


def run_streamlit(args: list[str]) -> int:
    """`streamlit run app.py` in this process (which keeps holding the serving lock).

    Streamlit decides once per process, when the first session starts, whether the app uses its legacy pages/
    folder discovery (PagesManager.uses_pages_directory, from whether pages/ exists); app.py's st.navigation turns
    it off, but only after app.py has run once. Until then a fresh server routes every session through the legacy
    discovery: a shared link such as /memory?sc=... fails and the sidebar lists every module in pages/. Turning it
    off before the server starts keeps every session on app.py's st.navigation from the first request on."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    from benchmarks_db.store import open_store

    PagesManager.uses_pages_directory = False
    settings = load_settings()
    install_guards(settings.max_pending_upload_mb * 2**20, session_upload_cap(settings),
                   health=lambda: open_store(settings.store_target, read_only=settings.read_only).health())
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
