"""The two-replica layout run for real (deploy/run.sh, README "Deployment", "Several replicas"): one PostgreSQL, two
replicas of the planner image on it, HAProxy (deploy/haproxy.cfg) in front, each in its own container built here
from Debian's packages. A browser goes through the proxy only. The replica serving it is killed (SIGKILL, `podman
kill`) during a session and during an upload: after a reload the session goes on on the other replica, and the
store holds exactly what was added before the kill, nothing half-written (its row counts, `python -m benchmarks_db
info --json` in a replica). A saved link opens on either replica, the HTTP API answers through the proxy as the
command line does, and LOAD_SESSIONS sessions at once share the two replicas (benchmarks/load_test.py; the README's
figures are of 40, which take about ten minutes on the 2-core test machine: too long for every CI run)."""
import json
import re
import secrets
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks import load_test
from serve import free_port
from tests.conftest import CHROMIUM
from tests.container.conftest import ENV, podman
from tests.e2e.conftest import ROOT, go_to, metrics, no_exception, open_page, wait_for_app
from tests.test_http_api import LLAMA_70B, cli

pytestmark = pytest.mark.container
REPLICAS = ("r1", "r2")                      # the servers of deploy/haproxy.cfg; containers NAME-1 and NAME-2
COOKIE = load_test.REPLICA_COOKIE
BACK_IN_ROTATION_S = 180                     # a restarted replica's start, then the proxy's 2 checks 1 s apart
LOAD_SESSIONS = 10
STEP_TIMEOUT_S = 300
ACTION_TIMEOUT_MS = 180_000                  # a check waits for a work slot (a fresh replica validates in the background)


@dataclass
class Layout:
    name: str
    url: str                                 # the proxy, ending with "/"

    def container(self, replica: str) -> str:
        return f"{self.name}-{replica.removeprefix('r')}"

    def served_by(self, replica: str) -> bool:
        """Whether the proxy sends a browser pinned on `replica` there (it re-pins one whose replica is out)."""
        req = urllib.request.Request(self.url + "_stcore/health", headers={"Cookie": f"{COOKIE}={replica}"})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                # the proxy sets its cookie only when it sent the browser elsewhere
                repinned = [c for c in resp.headers.get_all("Set-Cookie", []) if c.startswith(f"{COOKIE}=")]
                return resp.read() == b"ok" and not repinned
        except OSError:
            return False

    def kill(self, replica: str) -> None:
        podman("kill", "--signal", "KILL", self.container(replica))
        podman("wait", self.container(replica), timeout=30)

    def restart(self, replica: str) -> float:
        """Start a killed replica again; seconds until the proxy sends its browsers to it."""
        t = time.monotonic()
        podman("start", self.container(replica))
        while not self.served_by(replica):
            assert time.monotonic() - t < BACK_IN_ROTATION_S, podman("logs", self.container(replica)).stderr[-3000:]
            time.sleep(0.25)
        return time.monotonic() - t

    def rows(self, replica: str) -> dict[str, int]:
        """The store's tables and row counts, as `python -m benchmarks_db info --json` in that replica prints them."""
        out = podman("exec", self.container(replica), "python", "-m", "benchmarks_db", "info", "--json")
        info = json.loads(out.stdout)
        assert info["backend"] == "postgresql", info
        return {table: n for table, n in info["tables"].items()}


def replica_of(context) -> str:
    return next(c["value"] for c in context.cookies() if c["name"] == COOKIE)


def other(replica: str) -> str:
    return next(r for r in REPLICAS if r != replica)


@pytest.fixture(scope="module")
def layout(image):
    """deploy/run.sh up on free loopback ports, with this run's own names (containers, volume, proxy and PostgreSQL
    image tags), all removed at the end through those names."""
    name, tag = f"planner-test-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:12]
    proxy_port = free_port()
    env = {**ENV, "PODMAN": "podman --runtime runc", "BUILD_OPTIONS": "--network host", "NAME": name,
           "PLANNER_IMAGE": image, "PROXY_IMAGE": f"localhost/planner-proxy-test:{tag}",
           "POSTGRES_IMAGE": f"localhost/planner-postgres-test:{tag}", "PROXY_BIND": f"127.0.0.1:{proxy_port}",
           "APP_PORT_1": str(free_port()), "APP_PORT_2": str(free_port()), "API_PORT_1": str(free_port()),
           "API_PORT_2": str(free_port()), "POSTGRES_PORT": str(free_port()), "RESTART": "no",
           "POSTGRES_PASSWORD": secrets.token_urlsafe(16)}
    try:
        started = time.monotonic()
        up = subprocess.run(["sh", "deploy/run.sh", "up"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=1200)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        print(f"\nthe layout started in {time.monotonic() - started:.0f} s:\n"
              + "\n".join(line for line in up.stdout.splitlines() if line.endswith(" s)")))
        yield Layout(name, f"http://127.0.0.1:{proxy_port}/")
    finally:
        subprocess.run(["sh", "deploy/run.sh", "down"], cwd=ROOT, env=env, capture_output=True, timeout=300)
        podman("volume", "rm", "--force", f"{name}-pgdata", check=False)
        for image_tag in (env["PROXY_IMAGE"], env["POSTGRES_IMAGE"]):
            podman("rmi", image_tag, check=False, timeout=300)


@pytest.fixture(scope="module")
def runner_files(tmp_path_factory):
    """Three distinct real runner results (one `membw --quick` run, its start time moved)."""
    return load_test.runner_files(3, tmp_path_factory.mktemp("runner"))


def test_the_api_answers_through_the_proxy_from_both_replicas_as_the_command_line(layout, tmp_path):
    with urllib.request.urlopen(layout.url + "readyz", timeout=10) as resp:
        assert json.loads(resp.read()) == {"status": "ok"}
    with urllib.request.urlopen(layout.url + "openapi.json", timeout=10) as resp:
        assert {"/v1/estimate", "/v1/search", "/v1/plan"} <= set(json.loads(resp.read())["paths"])
    expected = cli(tmp_path, "estimate", LLAMA_70B)
    for _ in REPLICAS:                                  # round robin: one request to each replica's API
        req = urllib.request.Request(layout.url + "v1/estimate", data=json.dumps(LLAMA_70B).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            assert json.loads(resp.read()) == expected
    with pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(layout.url + "_stcore/metrics", timeout=10)


def save_scenario(page, n_gpus: str, name: str) -> str:
    field = page.get_by_role("spinbutton", name="Number of accelerators")
    field.fill(n_gpus)
    field.press("Enter")
    wait_for_app(page)
    page.get_by_role("textbox", name="Scenario name").fill(name)
    page.get_by_role("button", name="Save scenario").click()
    wait_for_app(page)
    link = page.get_by_test_id("stCode").inner_text().strip()
    assert re.fullmatch(re.escape(layout_base(page)) + r"\?s=[a-z2-7]{10}", link), link
    return link


def layout_base(page) -> str:
    return re.match(r"http://127\.0\.0\.1:\d+/", page.url).group(0)


def test_a_session_goes_on_on_the_other_replica_after_its_own_is_killed(layout, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 2600})
    try:
        page = context.new_page()
        open_page(page, layout.url)
        first = replica_of(context)
        before = layout.rows(first)
        link = save_scenario(page, "512", "replica plan, 512 H100")
        seen = metrics(page)
        assert replica_of(context) == first                     # sticky: the whole session on one replica

        killed_at = time.monotonic()
        layout.kill(first)
        page.reload()                                           # the address bar holds the saved link
        wait_for_app(page)
        took = time.monotonic() - killed_at
        no_exception(page)
        assert replica_of(context) == other(first)
        assert changed(before, layout.rows(other(first))).get("saved_scenario") == 1
        assert page.get_by_text("Opened the saved scenario 'replica plan, 512 H100'").count() == 1
        assert metrics(page) == seen
        back = layout.restart(first)
        print(f"\nkilled {first}: the session reloaded on {other(first)} {took:.1f} s after the kill; "
              f"{first} back in the proxy's rotation {back:.1f} s after its restart")
    finally:
        context.close()

    for replica in REPLICAS:                                    # the saved link on each replica, pinned there
        pinned = browser.new_context(viewport={"width": 1400, "height": 2600})
        try:
            pinned.add_cookies([{"name": COOKIE, "value": replica, "url": layout.url}])
            fresh = pinned.new_page()
            open_page(fresh, link)
            no_exception(fresh)
            assert replica_of(pinned) == replica
            assert fresh.get_by_text("Opened the saved scenario 'replica plan, 512 H100'").count() == 1
            assert metrics(fresh) == seen
        finally:
            pinned.close()


def add_upload(page, name: str, data: bytes) -> None:
    """Send the file on the Benchmarks page's "Upload results" tab (held by the replica until it is added)."""
    page.get_by_role("tab", name="Upload results").click()
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
        files=[{"name": name, "mimeType": "application/json", "buffer": data}])
    page.get_by_role("button", name=f"Remove {name}").wait_for()


def check_and_add(page, name: str) -> str:
    """Press "Check and add to the store"; what the page then says of the file (added, or refused and why)."""
    page.get_by_role("button", name="Check and add to the store").click()
    said = page.get_by_text(re.compile(rf"^(Added|Refused) {re.escape(name)}")).first
    said.wait_for(timeout=ACTION_TIMEOUT_MS)
    wait_for_app(page)
    no_exception(page)
    return page.get_by_test_id("stMain").inner_text()


def changed(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {t: after[t] - before.get(t, 0) for t in after if after[t] != before.get(t, 0)}


def test_an_upload_cut_by_a_kill_is_in_the_store_whole_or_not_at_all(layout, browser, runner_files):
    """A clean upload gives the rows one upload writes (after a first one, which also adds the machine and its
    software the three share); an upload whose replica is killed while it is checked and added leaves either nothing
    or exactly those rows, and added again on the other replica after a reload, the store holds it once."""
    (first_name, first), (clean_name, clean), (cut_name, cut) = runner_files
    context = browser.new_context(viewport={"width": 1400, "height": 2600})
    try:
        page = context.new_page()
        open_page(page, layout.url)
        serving = replica_of(context)
        go_to(page, "Benchmarks")
        add_upload(page, first_name, first)
        assert f"Added {first_name}" in (said := check_and_add(page, first_name)), said
        before = layout.rows(serving)
        add_upload(page, clean_name, clean)
        assert f"Added {clean_name}" in (said := check_and_add(page, clean_name)), said
        one_upload = changed(before, layout.rows(serving))
        assert one_upload.get("source") == 1 and one_upload.get("run", 0) >= 1, one_upload

        before = layout.rows(serving)
        add_upload(page, cut_name, cut)
        page.get_by_role("button", name="Check and add to the store").click()
        layout.kill(serving)                                    # while it is checked and added
        survivor = other(serving)
        after_kill = changed(before, layout.rows(survivor))
        assert after_kill in ({}, one_upload), after_kill      # whole or nothing
        page.reload()
        wait_for_app(page)
        assert replica_of(context) == survivor
        go_to(page, "Benchmarks")
        add_upload(page, cut_name, cut)
        said = check_and_add(page, cut_name)
        # added now, or refused as a duplicate of itself when the killed replica had committed it
        assert (f"Added {cut_name}" in said) if not after_kill else \
            f"Refused {cut_name}" in said and "duplicate: this file was already ingested" in said, said
        assert changed(before, layout.rows(survivor)) == one_upload
        print(f"\nkilled {serving} while it added an upload: {'nothing' if not after_kill else 'all of it'} "
              f"was in the store; added again on {survivor}: {one_upload} rows, once")
    finally:
        context.close()
    layout.restart(serving)
    assert layout.rows(serving) == layout.rows(survivor)


def test_sessions_at_once_share_the_two_replicas(layout, browser):
    """After one session on each replica (its pages' cached work done once, as after any start that has served):
    a fresh replica's first burst of sessions queues behind its background validation and the first computation
    of each page, which took over 300 s here for 5 sessions at once on 2 cores beside the browsers."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"the load test needs Chromium at {CHROMIUM}")
    for replica in REPLICAS:
        pinned = browser.new_context(viewport={"width": 1400, "height": 2600})
        try:
            pinned.add_cookies([{"name": COOKIE, "value": replica, "url": layout.url}])
            page = pinned.new_page()
            page.set_default_timeout(STEP_TIMEOUT_S * 1000)
            open_page(page, layout.url)
            for title in ("Layout search", "Benchmarks"):
                go_to(page, title)
            assert replica_of(pinned) == replica
        finally:
            pinned.close()
    figures = load_test.run(layout.url, None, LOAD_SESSIONS, STEP_TIMEOUT_S)
    print(f"\nload test through the proxy:\n{figures.report()}")
    assert figures.errors == [] and figures.completed == LOAD_SESSIONS
    assert set(figures.replicas) == set(REPLICAS) and min(figures.replicas.values()) >= LOAD_SESSIONS // 4
