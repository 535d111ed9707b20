"""The server as scripts/start.sh starts it listens on 127.0.0.1 only and makes no outside connection while it starts;
with the container's wildcard address (STREAMLIT_SERVER_ADDRESS=0.0.0.0) it makes none either (Streamlit would ask
checkip.amazonaws.com for the external IP, ../shared/reference/ecosystem-notes.md).

Every socket a Python process of the server opens is recorded by an audit hook (sys.addaudithook, installed through
a sitecustomize module on PYTHONPATH, so the seeding subprocess is recorded too): what it binds, connects and sends
to and which names it resolves."""
import ast
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from serve import free_port, local_server
from tests.conftest import ROOT

AUDIT_HOOK = '''
import os, sys
_log = open(os.environ["PLANNER_AUDIT_LOG"], "a", buffering=1)
_EVENTS = ("socket.bind", "socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
           "socket.gethostbyname", "socket.gethostbyaddr")
def _hook(event, args):
    if event in _EVENTS:
        where = args[0] if event.startswith(("socket.get",)) else args[1]
        _log.write(f"{event} {where!r}\\n")
sys.addaudithook(_hook)
'''
LOCAL_NAMES = {"127.0.0.1", "::1", "localhost", "0.0.0.0", "::", ""}
LISTEN = "0A"                                      # TCP_LISTEN in /proc/net/tcp


def _audited_env(tmp: Path) -> dict[str, str]:
    hook_dir = tmp / "audit"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(AUDIT_HOOK)
    return {"PYTHONPATH": str(hook_dir), "PLANNER_AUDIT_LOG": str(tmp / "audit.log")}


def _audit(tmp: Path) -> list[tuple[str, str]]:
    lines = (tmp / "audit.log").read_text().splitlines() if (tmp / "audit.log").exists() else []
    return [tuple(line.split(" ", 1)) for line in lines]


def _host(where: str):
    """The host of an audited address: ('127.0.0.1', 8501) -> '127.0.0.1'; a bare name stays; a Unix path -> ''."""
    value = ast.literal_eval(where)                # repr() of a str, bytes, tuple or None, written by the hook above
    if isinstance(value, tuple):
        value = value[0]
    if isinstance(value, bytes):
        value = value.decode()
    return value if isinstance(value, str) and not value.startswith("/") else ""


def _outside(audit: list[tuple[str, str]]) -> list[str]:
    return [f"{event} {where}" for event, where in audit
            if event != "socket.bind" and _host(where) not in LOCAL_NAMES]


def _listening(pid: int) -> list[str]:
    """host:port of every TCP socket the process listens on, from /proc (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                addr, port = fields[1].split(":")
                raw = bytes.fromhex(addr)
                host = ".".join(str(b) for b in raw[::-1]) if width == 8 else \
                    ":".join(raw[i:i + 4][::-1].hex() for i in range(0, 16, 4))
                found.append(f"{host}:{int(port, 16)}")
    return found


def test_start_sh_listens_on_loopback_only_and_makes_no_outside_request(tmp_path, monkeypatch):
    installed = ROOT / ".venv" / ".requirements.lock"
    if not (ROOT / ".venv" / "bin" / "python").exists() or not installed.exists() or \
            installed.read_bytes() != (ROOT / "requirements.lock").read_bytes():
        pytest.skip("scripts/start.sh would first install requirements.lock into .venv (minutes): run it once, or the "
                    "suite through scripts/test.sh, which installs it")
    monkeypatch.delenv("STREAMLIT_SERVER_ADDRESS", raising=False)              # start.sh as a newcomer runs it
    start = ["bash", "scripts/start.sh"]
    with local_server(tmp_path, command=start, env=_audited_env(tmp_path)) as (url, pid, log_path):
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        assert _listening(pid) == [f"127.0.0.1:{port}"]
        log = log_path.read_text()
    assert f"URL: http://127.0.0.1:{port}" in log
    assert "listening on 127.0.0.1 only" in log
    for absent in ("Network URL", "External URL", "Did not auto detect external IP"):
        assert absent not in log
    audit = _audit(tmp_path)
    assert ("socket.bind", f"('127.0.0.1', {port})") in audit, audit          # the hook saw the server's own socket
    assert _outside(audit) == []


def test_the_containers_wildcard_address_makes_no_outside_request_either(tmp_path):
    """serve.py with the image's STREAMLIT_SERVER_ADDRESS=0.0.0.0, in a network namespace of its own (so the wildcard
    bind is reachable from nowhere while the test runs): Streamlit starts without looking up the external IP."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare to give the server a private network namespace for its 0.0.0.0 bind")
    port = free_port()
    env = {**os.environ, **_audited_env(tmp_path), "APP_DB_PATH": str(tmp_path / "planner.duckdb"),
           "STREAMLIT_SERVER_ADDRESS": "0.0.0.0", "STREAMLIT_SERVER_PORT": str(port)}
    log_path = tmp_path / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["unshare", "--net", sys.executable, "serve.py"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "URL: " not in log_path.read_text():            # Streamlit prints it once the server listens
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.3)
        time.sleep(1)
    finally:
        proc.terminate()                     # while the warm-up validation runs (serve.py starts it with the server)
        try:
            proc.wait(timeout=10)            # `docker stop` waits 10 s before it kills; a ThreadPoolExecutor took 14 s
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail("SIGTERM did not stop the server within 10 s: " + log_path.read_text()[-2000:])
    log = log_path.read_text()
    assert f"URL: http://localhost:{port}" in log and "listening on every interface" in log
    for absent in ("Network URL", "External URL", "Did not auto detect external IP"):
        assert absent not in log
    audit = _audit(tmp_path)
    assert ("socket.bind", f"('0.0.0.0', {port})") in audit, audit
    assert _outside(audit) == []
