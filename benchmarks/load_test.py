"""Load test: SESSIONS app sessions at once in headless Chromium (one browser, a context per session, all driven
concurrently with Playwright's async API). Each session opens the app, goes to Layout search, runs the search, uploads
its own runner result (the same real `membw --quick` measurement under distinct start times, so none is refused as a
duplicate) on the Benchmarks page. Against a running server (--url, with --pid for its memory) or, by default, one
started here: serve.py on a free loopback port with a fresh store (loopback only). Prints the sessions completed, the
errors, p50/p95 response times of each step, the server's CPU time and its peak RSS; exits 1 on any error. Against
the replicas behind deploy/haproxy.cfg (deploy/run.sh) it also counts the sessions each replica served (the proxy's
sticky-session cookie), e.g. 40 sessions:

    python benchmarks/load_test.py [--sessions 20] [--url http://127.0.0.1:8501/ --pid 1234] [--step-timeout 240]
    python benchmarks/load_test.py --sessions 40 --url http://127.0.0.1:8080/
    python benchmarks/load_test.py --hostile     # issue 13: layout-less links and zip bombs, others working meanwhile
    python benchmarks/load_test.py --starving    # issue 18: work that starved everyone else, and what others saw
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine
from contextlib import asynccontextmanager
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from serve import local_server  # noqa: E402  (the planner's own start, on loopback)
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]
STEPS = ("open", "search", "upload")
REPLICA_COOKIE = "SRV"      # the cookie by which deploy/haproxy.cfg pins a browser on its replica
LOCK_ERRORS = ("Could not set lock", "Conflicting lock", "connection is busy", "write-write conflict",
               "TransactionContext Error")     # DuckDB's lock and concurrency errors as the server would log them


def _spread_line(step: str, values: list[float], width: int) -> str:
    p50, p95 = np.percentile(values, [50, 95])
    return f"  {step:<{width}} p50 {p50:5.1f} s  p95 {p95:5.1f} s  max {max(values):5.1f} s  (n={len(values)})"


@dataclass(kw_only=True)
class _ServerFigures:
    """What a load run measured of the whole: its wall time and, when the server's process is known, its CPU time
    and peak memory."""
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    server_cpu_s: float | None = None
    peak_rss_mib: float | None = None

    def _server_line(self) -> str:
        return f"wall {self.wall_s:.1f} s" + (
            f", server CPU {self.server_cpu_s:.0f} s, server peak RSS {self.peak_rss_mib:.0f} MiB"
            if self.peak_rss_mib is not None else "")

    def measure(self, pid: int | None, sessions: Coroutine) -> None:
        """Run the sessions to the end in an event loop of their own (the caller may be running one: pytest)."""
        cpu_before = cpu_seconds(pid) if pid is not None else None
        t = time.perf_counter()
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, sessions).result()
        self.wall_s = time.perf_counter() - t
        if pid is not None:
            self.server_cpu_s = cpu_seconds(pid) - cpu_before
            self.peak_rss_mib = peak_rss_mib(pid)


@dataclass
class Figures(_ServerFigures):
    sessions: int
    completed: int = 0
    seconds: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in STEPS})
    replicas: dict[str, int] = field(default_factory=dict)     # completed sessions per replica, behind the proxy

    def report(self) -> str:
        lines = [f"sessions {self.sessions}, completed {self.completed}, errors {len(self.errors)}, "
                 + self._server_line()]
        if self.replicas:
            lines.append("  sessions per replica (the proxy's sticky cookie): "
                         + ", ".join(f"{name} {n}" for name, n in sorted(self.replicas.items())))
        lines += [_spread_line(step, values, 7) for step, values in self.seconds.items() if values]
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


def runner_files(n: int, tmp: Path) -> list[tuple[str, bytes]]:
    """n distinct valid runner results: one real `membw --quick` run, its start time moved by i seconds."""
    base = tmp / "membw.json"
    subprocess.run([sys.executable, "-m", "benchmarks_db.run", "membw", "--quick", "--out", str(base)], cwd=ROOT,
                   check=True, capture_output=True, timeout=300)
    doc = json.loads(base.read_text())
    start = datetime.fromisoformat(doc["runner"]["started_at"].replace("Z", "+00:00"))
    files = []
    for i in range(n):
        doc["runner"]["started_at"] = (start + timedelta(seconds=i)).isoformat().replace("+00:00", "Z")
        files.append((f"load-{i:03d}.json", json.dumps(doc, indent=1).encode()))
    return files


@asynccontextmanager
async def _browser_page(browser, timeout_ms: float):
    """A fresh browser context (its own cookies, so its own Streamlit session) with one page, closed afterwards."""
    context = await browser.new_context(viewport={"width": 1280, "height": 1600})
    context.set_default_timeout(timeout_ms)
    try:
        yield await context.new_page()
    finally:
        await context.close()


async def _session(browser, url: str, name: str, data: bytes, timeout_ms: float) -> tuple[dict[str, float], str | None]:
    """What a planner does: open the app and its layout search, run it, upload a result; seconds per step, and the
    replica that served it (behind deploy/haproxy.cfg; None without that proxy)."""
    async with _browser_page(browser, timeout_ms) as page:
        seconds = {}
        step = "open"
        try:
            t = time.perf_counter()
            await page.goto(url)
            await page.get_by_test_id("stSidebarNav").get_by_text("Layout search", exact=True).click()
            search = page.get_by_role("button", name="Run layout search")
            await search.wait_for()
            seconds["open"] = time.perf_counter() - t
            step, t = "search", time.perf_counter()
            await search.click()
            await page.get_by_text("Best layouts").wait_for()
            seconds["search"] = time.perf_counter() - t
            await page.get_by_test_id("stSidebarNav").get_by_text("Benchmarks", exact=True).click()
            await page.get_by_role("tab", name="Upload results").click()
            step, t = "upload (sending the file)", time.perf_counter()
            await page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
                files=[{"name": name, "mimeType": "application/json", "buffer": data}])
            await page.get_by_role("button", name=f"Remove {name}").wait_for()        # the upload has finished
            step = "upload (check and add)"
            await page.get_by_role("button", name="Check and add to the store").click()
            await page.get_by_text(f"Added {name}").wait_for()
            seconds["upload"] = time.perf_counter() - t
            await _assert_no_exception(page)
            replica = next((c["value"] for c in await page.context.cookies() if c["name"] == REPLICA_COOKIE), None)
        except Exception as err:
            err.add_note(step)
            shot = os.environ.get("LOAD_TEST_SHOTS")
            if shot:
                await page.screenshot(path=f"{shot}/{name}-{step}.png", full_page=True)
            raise
    return seconds, replica


async def _all_sessions(url: str, files: list[tuple[str, bytes]], step_timeout_s: float, figures: Figures) -> None:
    from playwright.async_api import async_playwright
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        try:
            results = await asyncio.gather(*(_session(browser, url, name, data, step_timeout_s * 1000)
                                             for name, data in files), return_exceptions=True)
        finally:
            await browser.close()
    for (name, _), result in zip(files, results):
        if isinstance(result, BaseException):
            during = " during " + ", ".join(result.__notes__) if getattr(result, "__notes__", None) else ""
            figures.errors.append(f"{name}{during}: {type(result).__name__}: {str(result).splitlines()[0][:300]}")
            continue
        seconds, replica = result
        figures.completed += 1
        for step, s in seconds.items():
            figures.seconds[step].append(s)
        if replica is not None:
            figures.replicas[replica] = figures.replicas.get(replica, 0) + 1


# ------------------------------------------------------------------------------------------------ hostile load
# Links without a layout whose search is near the engine's candidate limit (5 million): opening one makes the planner
# search 4.1-4.9 million layouts (issue 13: "a 74-character shared link ... ~7 s CPU and 1.2 GB").
HOSTILE_SCENARIOS = [{"model": {"preset": "llama3.1-405b"},
                      "training": {"seq_len": 8192, "global_batch_size": gbs, "total_tokens": 1e12},
                      "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 1260}} for gbs in (2520, 1680)]
BOMB_MIB = 60                           # a zip of a few dozen KB that unpacks to 60 MiB (the default limit is 64)
HOSTILE_STEPS = ("link", "bomb", "other")


@dataclass
class HostileFigures(_ServerFigures):
    """What every kind of session saw, and the server's memory and CPU."""
    links: int
    bombs: int
    others: int
    seconds: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in HOSTILE_STEPS})
    outcomes: dict[str, list[str]] = field(default_factory=lambda: {s: [] for s in HOSTILE_STEPS})

    def report(self) -> str:
        lines = [f"{self.links} sessions opening layout-less links, {self.bombs} uploading {BOMB_MIB} MiB zip bombs, "
                 f"{self.others} others working meanwhile: errors {len(self.errors)}, " + self._server_line()]
        lines += [_spread_line(step, values, 6) + ": " + "; ".join(sorted(set(self.outcomes[step])))
                  for step, values in self.seconds.items() if values]
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


def hostile_links() -> list[str]:
    """?sc= tokens of the layout-less scenarios (each under 80 characters)."""
    from engine.inputs import parse_scenario
    from engine.presentation.share import encode
    return [encode(parse_scenario(sc)) for sc in HOSTILE_SCENARIOS]


def zip_bomb() -> bytes:
    """An MLPerf-looking result log of 60 MiB of newlines, deflated to about 61 KB."""
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("NVIDIA/results/sys/gpt3/result_0.txt", b"\n" * (BOMB_MIB * 2**20))
    return buf.getvalue()


async def _idle(page) -> None:
    """Until the app has connected and its script run is over (Streamlit's own e2e signals)."""
    await page.locator("[data-testid='stApp'][data-test-connection-state='CONNECTED']").wait_for(state="attached")
    await page.wait_for_timeout(300)
    await page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(state="attached")


@asynccontextmanager
async def _step(page, name: str):
    """A step of a session; when it fails, the error says which step, the script's state and what the page showed
    (its main area's text, shortened), so that a step that never ends in a long load run can be told apart."""
    try:
        yield
    except Exception as err:
        try:
            state = await page.locator("[data-testid='stApp']").get_attribute("data-test-script-state", timeout=5000)
            shown = " ".join((await page.get_by_test_id("stMain").inner_text(timeout=5000)).split())
            shown = shown[max(shown.find(QUESTION_BOX), 0):]       # the question's box when there is one
        except Exception as why:            # the page itself is gone: say so instead of hiding the first error
            state, shown = "unknown", f"(page unreadable: {type(why).__name__})"
        raise RuntimeError(f"{type(err).__name__} at step {name!r} (script {state}; page: {shown[:600]}): "
                           f"{str(err).splitlines()[0] if str(err) else ''}") from err


async def _assert_no_exception(page) -> None:
    """Fail the session when the page shows a Python exception (a crash instead of a message)."""
    found = page.get_by_test_id("stException")
    if await found.count():
        raise AssertionError(await found.first.inner_text())


async def _link_session(browser, url: str, token: str, timeout_ms: float) -> tuple[float, str]:
    """Open a layout-less link: the planner picks a layout (one search per scenario) or says it is busy."""
    async with _browser_page(browser, timeout_ms) as page:
        t = time.perf_counter()
        await page.goto(f"{url}?sc={token}")
        await page.get_by_text("Layout:").first.wait_for()
        await _idle(page)
        seconds = time.perf_counter() - t
        await _assert_no_exception(page)
        chosen = await page.get_by_text("Layout chosen:").count()
        return seconds, await _refusal(page) or ("layout chosen" if chosen else "opened")


async def _bomb_session(browser, url: str, data: bytes, timeout_ms: float) -> tuple[float, str]:
    """Upload the zip bomb on the Benchmarks page: refused with a message, nothing unpacked."""
    async with _browser_page(browser, timeout_ms) as page:
        await page.goto(url)
        await page.get_by_test_id("stSidebarNav").get_by_text("Benchmarks", exact=True).click()
        await page.get_by_role("tab", name="Upload results").click()
        t = time.perf_counter()
        await page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
            files=[{"name": "bomb.zip", "mimeType": "application/zip", "buffer": data}])
        await page.get_by_role("button", name="Remove bomb.zip").wait_for()
        await page.get_by_role("button", name="Check and add to the store").click()
        await page.get_by_text("Refused bomb.zip").wait_for()
        seconds = time.perf_counter() - t
        await _idle(page)           # the reasons are drawn after the "Refused" line: read them once the run is over
        await _assert_no_exception(page)
        bomb = await page.get_by_text("decompression bomb").count()
        if bomb:
            return seconds, "refused as a bomb"
        reason = " ".join((await page.get_by_test_id("stMain").inner_text()).split())
        return seconds, await _refusal(page) or f"refused: {reason[reason.find('Refused bomb.zip'):][:300]}"


async def _refusal(page) -> str | None:
    """How the work limit refused this session's job, as the page says it (engine.work_limits: the requester over
    its share of jobs, or every slot busy past the wait), or None."""
    if await page.get_by_text("jobs running or waiting").count():
        return "over its share, said so"
    return "busy, said so" if await page.get_by_text("The planner is busy").count() else None


async def _other_session(browser, url: str, timeout_ms: float) -> tuple[float, str]:
    """Somebody else planning meanwhile: open the planner, then the Memory and Cost & carbon pages."""
    async with _browser_page(browser, timeout_ms) as page:
        t = time.perf_counter()
        await page.goto(url)
        await page.get_by_role("heading", name="Scenario").first.wait_for()
        for title, heading in (("Memory", "Memory"), ("Cost & carbon", "Cost & carbon")):
            await page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
            await page.get_by_role("heading", name=heading).first.wait_for()
        await _idle(page)
        await _assert_no_exception(page)
        return time.perf_counter() - t, "answered"


async def _hostile_sessions(url: str, figures: HostileFigures, step_timeout_s: float, others_after_s: float) -> None:
    from playwright.async_api import async_playwright
    tokens, bomb = hostile_links(), zip_bomb()
    timeout_ms = step_timeout_s * 1000

    async def others():
        await asyncio.sleep(others_after_s)          # while the searches and the bombs are under way
        return await asyncio.gather(*(_other_session(browser, url, timeout_ms) for _ in range(figures.others)),
                                    return_exceptions=True)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        try:
            kinds = ["link"] * figures.links + ["bomb"] * figures.bombs
            jobs = [_link_session(browser, url, tokens[i % len(tokens)], timeout_ms) for i in range(figures.links)]
            jobs += [_bomb_session(browser, url, bomb, timeout_ms) for _ in range(figures.bombs)]
            *results, other_results = await asyncio.gather(*jobs, others(), return_exceptions=True)
        finally:
            await browser.close()
    if isinstance(other_results, BaseException):
        other_results = [other_results] * figures.others
    for kind, result in zip(kinds + ["other"] * figures.others, [*results, *other_results]):
        if isinstance(result, BaseException):
            figures.errors.append(f"{kind}: {type(result).__name__}: {str(result).splitlines()[0][:300]}")
            continue
        figures.seconds[kind].append(result[0])
        figures.outcomes[kind].append(result[1])


def run_hostile(url: str, pid: int | None, links: int = 8, bombs: int = 4, others: int = 4,
                step_timeout_s: float = 300, others_after_s: float = 5) -> HostileFigures:
    """Issue 13's load: `links` sessions open layout-less links and `bombs` upload zip bombs at once, and `others`
    sessions use the planner meanwhile (starting `others_after_s` later)."""
    figures = HostileFigures(links, bombs, others)
    figures.measure(pid, _hostile_sessions(url, figures, step_timeout_s, others_after_s))
    return figures


# ------------------------------------------------------------------------------------- starving others (issue 18)
# A 120 KB nccl-tests output of rank lines, each with a run of spaces in its device name (the old parser tried every
# split of each run: 119 s holding the interpreter, and with it every page and the health check).
NCCL_HEAD = ("# nccl-tests version 2.20.0 nccl-headers=22304 nccl-library=22304\n"
             "# Collective test starting: all_reduce_perf\n")
# More layouts than the search's limit (5 million): refused, by counting them, before a work slot is taken.
OVER_LIMIT = {"model": {"preset": "llama3.1-405b"},
              "training": {"seq_len": 8192, "global_batch_size": 720_720, "total_tokens": 1e12},
              "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 7_207_200}}
HOSTILE_IDENTITY, IDENTITY_HEADER = "mallory@example.com", "X-Forwarded-Email"
HOSTILE_QUEUE = 5            # the hostile person's jobs waiting for a slot when the users start (their share is 8)


def nccl_rank_lines(n_bytes: int = 120_000) -> bytes:
    line = "# Rank {i} Group 0 Pid 1 on h device 0 [0] NVIDIA" + " " * 900 + "H100\n"
    lines = [line.format(i=i) for i in range(n_bytes // len(line) + 1)]
    return (NCCL_HEAD + "".join(lines)).encode()[:n_bytes]


def over_limit_link() -> str:
    from engine.presentation.share import encode
    from engine.inputs import parse_scenario
    return encode(parse_scenario(OVER_LIMIT))


def normal_link() -> str:
    """The default scenario without its layout: opening it chooses one (a small search)."""
    from engine.presentation.edit import DEFAULT_SCENARIO
    from engine.presentation.share import encode
    from engine.inputs import parse_scenario
    return encode(parse_scenario({k: v for k, v in DEFAULT_SCENARIO.items() if k != "layout"}))


def question_links(n: int) -> list[str]:
    """n links, each asking a distinct question (a deadline) of the default scenario."""
    from engine.presentation.edit import default_scenario
    from engine.presentation.share import PlannerOptions, encode
    return [encode(default_scenario(), PlannerOptions(deadline_days=20 + i)) for i in range(n)]


@dataclass
class StarvingFigures(_ServerFigures):
    """Seconds per kind of session, what each saw, the longest a health check waited meanwhile and, from the server's
    log, what each user's job that waited for a slot met (`user_waits`)."""
    seconds: dict[str, list[float]] = field(default_factory=dict)
    outcomes: dict[str, list[str]] = field(default_factory=dict)
    health_max_s: float = 0.0
    user_waits: list = field(default_factory=list)       # UserWait per user's job that waited
    hostile_most_held: int | None = None                  # the most jobs the hostile person had (most_held)

    def add(self, kind: str, result) -> None:
        if isinstance(result, BaseException):
            # long enough for what the page showed when a step timed out (_step)
            self.errors.append(f"{kind}: {type(result).__name__}: {str(result).splitlines()[0][:900]}")
            return
        self.seconds.setdefault(kind, []).append(result[0])
        self.outcomes.setdefault(kind, []).append(result[1])

    def report(self) -> str:
        width = max(map(len, self.seconds), default=0)
        lines = [f"errors {len(self.errors)}, longest health check {self.health_max_s:.2f} s, " + self._server_line()]
        lines += [_spread_line(kind, values, width) + ": " + "; ".join(
            f"{o} x{self.outcomes[kind].count(o)}" for o in sorted(set(self.outcomes[kind])))
            for kind, values in self.seconds.items()]
        if self.user_waits:
            lines.append(f"  users' jobs that waited for a slot: {len(self.user_waits)}; the hostile person's jobs "
                         f"waiting when each queued {[w.hostile_ahead for w in self.user_waits]}, served before it "
                         f"{[w.overtaken for w in self.user_waits]}, refused after the longest wait "
                         f"{sum(w.refused for w in self.user_waits)}")
        if self.hostile_most_held is not None:
            lines.append(f"  the most jobs the hostile person had running or waiting: {self.hostile_most_held}")
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


SLOT_LINE = re.compile(r" engine\.work_limits: .+ for (?P<who>\S+) "
                       r"(?P<event>waits for|got|was refused after waiting \d+ s for) a work slot")


def slot_events(log: str) -> list[tuple[str, str]]:
    """(requester, 'waits for' | 'got' | 'refused') for each job that waited for a work slot, in the order the server
    logged them (engine/work_limits.py logs a waiting job when it queues, and when it is handed a slot or refused
    after the longest wait)."""
    return [(m["who"], m["event"] if m["event"] in ("waits for", "got") else "refused")
            for m in map(SLOT_LINE.search, log.splitlines()) if m]


HELD_LINE = re.compile(r" engine\.work_limits: .+ for (?P<who>\S+) (?:waits for a work slot|was refused at once)"
                       r".*; its jobs running or waiting: (?P<held>\d+)")


def most_held(log: str, who: str) -> int:
    """The most jobs `who` had running or waiting when one of theirs queued or was refused at once (the server's log):
    engine/work_limits.py holds it to MAX_PER_REQUESTER."""
    return max((int(m["held"]) for m in map(HELD_LINE.search, log.splitlines()) if m and m["who"] == who), default=0)


def waiting(events: list[tuple[str, str]], who: str) -> int:
    """How many of `who`'s jobs wait for a slot after these events."""
    return sum(+1 if event == "waits for" else -1 for owner, event in events if owner == who)


class UserWait(NamedTuple):
    """One user's job that waited for a slot: the hostile person's jobs waiting when it queued, the user's own, how
    many of the hostile person's got a slot before it did (or before it was refused after the longest wait), and
    whether it was refused so."""
    hostile_ahead: int
    own_ahead: int
    overtaken: int
    refused: bool = False


def served_first(events: list[tuple[str, str]], users: set[str], hostile: str) -> list[UserWait]:
    """What each user's waiting job met (each user's jobs matched to their slots, or refusals, in the order they
    queued). In turn (engine/work_limits.py), the hostile person is served at most once per job of the user's ahead of
    it, plus one; a job refused after the longest wait was overtaken no more (the machine was too slow for anyone)."""
    pending: dict[str, list[tuple[int, int, int]]] = {}
    found = []
    for i, (who, event) in enumerate(events):
        if who not in users:
            continue
        if event == "waits for":
            pending.setdefault(who, []).append((i, waiting(events[:i], hostile), waiting(events[:i], who)))
        else:
            queued, hostile_ahead, own_ahead = pending[who].pop(0)
            found.append(UserWait(hostile_ahead, own_ahead,
                                  sum(1 for owner, e in events[queued:i] if owner == hostile and e == "got"),
                                  event == "refused"))
    return found


async def _hostile_queue(log_path: Path, jobs: int) -> None:
    """Until the server's log shows `jobs` of the hostile person's jobs waiting for a slot."""
    while waiting(slot_events(log_path.read_text()), HOSTILE_IDENTITY) < jobs:
        await asyncio.sleep(0.25)


async def _health_probe(url: str, stop: asyncio.Event, figures: StarvingFigures) -> None:
    import urllib.request
    def probe() -> float:
        t = time.perf_counter()
        with urllib.request.urlopen(url + "_stcore/health", timeout=300) as resp:
            resp.read()
        return time.perf_counter() - t
    while not stop.is_set():
        figures.health_max_s = max(figures.health_max_s, await asyncio.to_thread(probe))
        await asyncio.sleep(0.25)


async def _nccl_session(browser, url: str, data: bytes, timeout_ms: float) -> tuple[float, str]:
    """Upload the rank-line file and press 'Check and add': refused with a message."""
    async with _browser_page(browser, timeout_ms) as page:
        await page.goto(url)
        await page.get_by_test_id("stSidebarNav").get_by_text("Benchmarks", exact=True).click()
        await page.get_by_role("tab", name="Upload results").click()
        await page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
            files=[{"name": "all_reduce.txt", "mimeType": "text/plain", "buffer": data}])
        await page.get_by_role("button", name="Remove all_reduce.txt").wait_for()
        t = time.perf_counter()
        await page.get_by_role("button", name="Check and add to the store").click()
        await page.get_by_text("Refused all_reduce.txt").wait_for()
        seconds = time.perf_counter() - t
        await _assert_no_exception(page)
        return seconds, "refused"


QUESTION_BOX = "How many accelerators, how long"
ANSWERED = re.compile("train it|jobs running or waiting|The planner is busy|cannot be answered|No accelerator")
# what a link's page ends with, read from the page (not from Streamlit's run state, which a progress bar polling a
# background job every 0.3 s keeps flipping on a loaded machine)
OUTCOMES = (("over the search's limit", "refused with the reason"),
            ("jobs running or waiting", "over its share, said so"), ("The planner is busy", "busy, said so"),
            ("Layout chosen:", "layout chosen"), (" train it ", "answered"))
SETTLED = re.compile("|".join(re.escape(text.strip()) for text, outcome in OUTCOMES if outcome != "answered"))


async def _open_link(browser, url: str, token: str, timeout_ms: float, identity: str | None = None,
                     answer: bool = False, opened: asyncio.Event | None = None) -> tuple[float, str]:
    """Open a link until the page says how it ended (with answer=True, until its question is answered or refused);
    what it said. `opened` is set once the page has loaded."""
    headers = {IDENTITY_HEADER: identity} if identity else None
    context = await browser.new_context(viewport={"width": 1280, "height": 1600}, extra_http_headers=headers)
    context.set_default_timeout(timeout_ms)
    try:
        page = await context.new_page()
        t = time.perf_counter()
        async with _step(page, "open"):
            await page.goto(f"{url}?sc={token}")
            await page.get_by_text("Layout:").first.wait_for()
        if opened is not None:
            opened.set()
        async with _step(page, "answer" if answer else "outcome"):
            await page.get_by_text(ANSWERED if answer else SETTLED).first.wait_for()
        seconds = time.perf_counter() - t
        await _assert_no_exception(page)
        for text, outcome in OUTCOMES:
            if await page.get_by_text(text).count():
                return seconds, outcome
        return seconds, "opened"
    finally:
        await context.close()


async def _starving_sessions(url: str, figures: StarvingFigures, links: int, questions: int, users: int,
                             timeout_ms: float, log_path: Path | None) -> None:
    """The hostile sessions at once, the users once the hostile person has HOSTILE_QUEUE jobs waiting for a slot in
    the server's log, or else every hostile page has loaded (so that they meet the queued work if there is any); a
    health probe throughout."""
    from playwright.async_api import async_playwright
    nccl, over, normal, asked = nccl_rank_lines(), over_limit_link(), normal_link(), question_links(questions + users)
    stop = asyncio.Event()
    loaded = [asyncio.Event() for _ in range(links + questions)]

    async def all_loaded():
        for event in loaded:
            await event.wait()

    async def later(coroutines):
        gates = [asyncio.create_task(all_loaded())]
        if log_path is not None:
            gates.append(asyncio.create_task(_hostile_queue(log_path, min(HOSTILE_QUEUE, questions))))
        done, pending = await asyncio.wait(gates, timeout=timeout_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
        for gate in pending:
            gate.cancel()
        if not done:
            raise TimeoutError(f"the hostile pages did not load within {timeout_ms / 1000:.0f} s")
        return await asyncio.gather(*coroutines, return_exceptions=True)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        probe = asyncio.create_task(_health_probe(url, stop, figures))
        try:
            kinds = ["nccl upload"] + ["over-limit link"] * links + ["question link"] * questions
            hostile = [_nccl_session(browser, url, nccl, timeout_ms)]
            hostile += [_open_link(browser, url, over, timeout_ms, HOSTILE_IDENTITY, opened=loaded[i])
                        for i in range(links)]
            hostile += [_open_link(browser, url, asked[i], timeout_ms, HOSTILE_IDENTITY, answer=True,
                                   opened=loaded[links + i]) for i in range(questions)]
            user_kinds = ["user: normal link"] * users + ["user: own question"] * users
            user_jobs = [_open_link(browser, url, normal, timeout_ms, f"user{i}@example.com") for i in range(users)]
            user_jobs += [_open_link(browser, url, asked[questions + i], timeout_ms, f"user{i}@example.com",
                                     answer=True) for i in range(users)]
            *results, user_results = await asyncio.gather(*hostile, later(user_jobs), return_exceptions=True)
        finally:
            stop.set()
            await probe
            await browser.close()
    if isinstance(user_results, BaseException):
        user_results = [user_results] * len(user_kinds)
    for kind, result in zip(kinds + user_kinds, [*results, *user_results]):
        figures.add(kind, result)
    if log_path is not None:
        log = log_path.read_text()
        figures.user_waits = served_first(slot_events(log), {f"user{i}@example.com" for i in range(users)},
                                          HOSTILE_IDENTITY)
        figures.hostile_most_held = most_held(log, HOSTILE_IDENTITY)


def run_starving(url: str, pid: int | None, links: int = 20, questions: int = 60, users: int = 5,
                 step_timeout_s: float = 300, log_path: Path | None = None) -> StarvingFigures:
    """Issue 18's load against a planner whose reverse proxy names people in IDENTITY_HEADER (APP_IDENTITY_HEADER):
    one person uploads a 120 KB rank-line nccl-tests file and opens `links` links over the search's limit and
    `questions` links each asking a plan question, while `users` others each open a normal layout-less link and ask
    a question of their own; a health check runs throughout. `log_path`: the server's log, when it is readable here
    (the users then start when the hostile queue is there, and the figures say who was served first)."""
    figures = StarvingFigures()
    figures.measure(pid, _starving_sessions(url, figures, links, questions, users, step_timeout_s * 1000, log_path))
    return figures


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set size so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmHWM for process {pid}")


def run(url: str, pid: int | None, sessions: int = 20, step_timeout_s: float = 240) -> Figures:
    """All sessions at once against the server at `url` (ending in '/'); `pid`: the server's process, if known."""
    figures = Figures(sessions)
    with tempfile.TemporaryDirectory() as tmp:
        files = runner_files(sessions, Path(tmp))
    figures.measure(pid, _all_sessions(url, files, step_timeout_s, figures))
    return figures


def lock_errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if any(e in line for e in LOCK_ERRORS)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--url", help="a running planner (loopback), e.g. http://127.0.0.1:8501/ (default: start one)")
    ap.add_argument("--pid", type=int, help="the running planner's server process, for its CPU time and memory")
    ap.add_argument("--step-timeout", type=float, default=240, help="seconds one step of a session may take")
    ap.add_argument("--hostile", action="store_true",
                    help="issue 13's load instead: 8 layout-less links, 4 zip bombs and 4 other sessions at once")
    ap.add_argument("--starving", action="store_true",
                    help="issue 18's load instead: one person's rank-line upload, 20 links over the search's limit and "
                         "60 plan questions, while 5 others open a normal link and ask their own question (the "
                         f"server started here names people in {IDENTITY_HEADER})")
    args = ap.parse_args(argv)
    load = (lambda url, pid, log: run_hostile(url, pid, step_timeout_s=args.step_timeout)) if args.hostile else \
        (lambda url, pid, log: run_starving(url, pid, step_timeout_s=args.step_timeout, log_path=log)) \
        if args.starving else (lambda url, pid, log: run(url, pid, args.sessions, args.step_timeout))
    if args.url:
        figures = load(args.url.rstrip("/") + "/", args.pid, None)
        print(figures.report())
        return 1 if figures.errors else 0
    env = {"APP_IDENTITY_HEADER": IDENTITY_HEADER} if args.starving else None
    with tempfile.TemporaryDirectory() as tmp, local_server(Path(tmp), env=env) as (url, pid, log_path):
        figures = load(url, pid, log_path)
        locks = lock_errors(log_path.read_text())
    figures.errors += [f"server log: {line}" for line in locks]
    print(figures.report())
    return 1 if figures.errors else 0


if __name__ == "__main__":
    sys.exit(main())
