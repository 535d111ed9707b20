"""Issue 13 against the planner as deployed (serve.py) and real Chromium: no other site may frame it, Streamlit's
metrics endpoint is closed, uploads under invented file ids are capped per session and in total, and the uploader
is the identity the reverse proxy's header names (trusted on arrival when the deployment lists it)."""
import json
import urllib.error
import urllib.request

import pytest

from engine.work_limits import MAX_PER_REQUESTER
from serve import MAX_FILES_PER_SESSION, local_server
from tests.conftest import runner_result
from tests.e2e.conftest import VIEWPORT, go_to, no_exception, open_page, screenshot, upload, wait_for_app

pytestmark = pytest.mark.e2e

PUT_FILES = """async ([uploadUrl, n, size]) => {
  const base = uploadUrl.slice(0, uploadUrl.lastIndexOf('/') + 1);          // .../upload_file/<session id>/
  const xsrf = document.cookie.split('; ').find(c => c.startsWith('_streamlit_xsrf=')).split('=').slice(1).join('=');
  const statuses = [];
  for (let i = 0; i < n; i++) {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(size)]), `invented-${i}.bin`);
    const r = await fetch(base + crypto.randomUUID(), {method: 'PUT', body: form, headers: {'X-Xsrftoken': xsrf}});
    statuses.push(r.status);
  }
  return statuses;
}"""


def status_and_headers(url: str):
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.headers
    except urllib.error.HTTPError as err:
        return err.code, err.headers


def test_every_response_forbids_framing_by_other_sites_and_metrics_answer_404(app_url):
    for path in ("/", "/_stcore/health", "/benchmarks", "/_stcore/host-config"):
        status, headers = status_and_headers(app_url + path)
        assert status == 200, path
        assert headers["X-Frame-Options"] == "SAMEORIGIN" and headers["Content-Security-Policy"] == \
            "frame-ancestors 'self'", (path, dict(headers))
    for path in ("/_stcore/metrics", "/_stcore/metrics/", "/_stcore/metrics?families=session_events"):
        status, headers = status_and_headers(app_url + path)
        assert status == 404 and headers["X-Frame-Options"] == "SAMEORIGIN", path


def _upload_url(page, tmp_path) -> str:
    """The upload address Streamlit gives this session (caught from the page's own first upload)."""
    seen = []
    page.on("request", lambda r: seen.append(r.url) if r.method == "PUT" and "/upload_file/" in r.url else None)
    go_to(page, "Benchmarks")
    page.get_by_role("tab", name="Upload results").click()
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(
        files=[{"name": "real.json", "mimeType": "application/json", "buffer": b"{}"}])
    page.get_by_role("button", name="Remove real.json").wait_for()
    assert seen, "no upload request seen"
    return seen[0]


def test_40_uploads_under_invented_file_ids_stop_at_the_per_session_cap(app_url, page, tmp_path):
    open_page(page, app_url)
    url = _upload_url(page, tmp_path)
    statuses = page.evaluate(PUT_FILES, [url, 40, 1000])
    held = MAX_FILES_PER_SESSION - 1                          # the page's own file is one of them
    assert statuses == [204] * held + [429] * (40 - held)
    wait_for_app(page)
    no_exception(page)


def test_uploads_past_the_session_or_total_cap_are_refused_but_small_ones_still_fit(browser, tmp_path, monkeypatch):
    """Issue 18: one session holding large uploads filled the total and another user's 115-byte upload got 413 for
    about a minute. A session holds at most half the total (here 1 MiB); small files are outside it."""
    monkeypatch.setenv("APP_MAX_UPLOAD_MB", "1")
    monkeypatch.setenv("APP_MAX_PENDING_UPLOAD_MB", "2")
    with local_server(tmp_path) as (url, _pid, _log):
        ctx = browser.new_context(viewport=VIEWPORT)
        try:
            pages = [ctx.new_page() for _ in range(5)]        # a session each: the total is for all of them
            for page in pages:
                open_page(page, url)
            hostile = [page.evaluate(PUT_FILES, [_upload_url(page, tmp_path), 2, 900_000]) for page in pages[:4]]
            small = pages[4].evaluate(PUT_FILES, [_upload_url(pages[4], tmp_path), 1, 115])
            print(f"\n900 KB uploads from four sessions: {hostile}; another session's 115-byte upload: {small}")
            assert hostile[:3] == [[204, 413]] * 3            # each session's own cap (1 MiB)
            assert hostile[3] == [413, 413]                   # the total (2 MiB, less 256 KiB per session) is full
            assert small == [204]
        finally:
            ctx.close()


def test_the_uploader_is_the_proxys_identity_and_listed_ones_are_trusted(browser, tmp_path, monkeypatch):
    monkeypatch.setenv("APP_IDENTITY_HEADER", "X-Forwarded-Email")
    monkeypatch.setenv("APP_TRUSTED_UPLOADERS", "alice@example.com")
    result = runner_result("matmul", tmp_path / "matmul.json")
    with local_server(tmp_path) as (url, _pid, _log):
        for who, started, expected in (("alice@example.com", "10", "Trusted on arrival (alice@"),
                                       ("bob@example.com", "11", "Kept as an untrusted upload")):
            ctx = browser.new_context(viewport=VIEWPORT, extra_http_headers={"X-Forwarded-Email": who})
            try:
                page = ctx.new_page()
                open_page(page, url)
                go_to(page, "Benchmarks")
                upload(page, f"{who.split('@')[0]}.json", _distinct(result.read_bytes(), started))
                assert page.get_by_text(expected).count() == 1, who
                no_exception(page)
                screenshot(page, f"upload-identity-{who.split('@')[0]}")
            finally:
                ctx.close()


def _distinct(data: bytes, tag: str) -> bytes:
    """The same real measurement under another start time, so the second upload is not a duplicate."""
    doc = json.loads(data)
    doc["runner"]["started_at"] = f"2026-01-{tag}T00:00:00Z"
    return json.dumps(doc).encode()


def test_one_persons_hostile_work_does_not_starve_others_or_the_health_check(tmp_path, monkeypatch):
    """Issue 18 against the server as deployed behind a proxy that names people: one person uploads a 120 KB
    rank-line nccl-tests file (119 s before, holding every page and the health check), opens 20 links over the
    search's limit (five users then waited 102 s instead of 1.8 s) and 12 links each asking a plan question (sixty
    made a user's own answer take 105 s), while 3 others open a normal link and ask their own question."""
    from benchmarks import load_test
    monkeypatch.setenv("APP_IDENTITY_HEADER", load_test.IDENTITY_HEADER)
    with local_server(tmp_path) as (url, pid, log_path):
        # a step's limit: in one whole-suite run the Benchmarks page took over 240 s to draw for the uploader, with
        # 38 pages and 12 plan searches on the two cores (the health check stayed under 36 s)
        figures = load_test.run_starving(url, pid, links=20, questions=12, users=3, step_timeout_s=420,
                                         log_path=log_path)
        locks = load_test.lock_errors(log_path.read_text())
    print("\n" + figures.report())
    assert not figures.errors and not locks, (figures.errors, locks)
    # 119 s before (a quadratic parse on the event loop, holding every page and the health check). Its wall time now
    # is a page rerun on two cores shared with 38 pages and 12 plan searches, as long as any page's there (under 20 s
    # in some whole-suite runs, 65-124 s in others, the code unchanged), so it is not bounded here: the parse is held
    # to linear time by tests/benchmarks_db (operation counts), and the event loop's freedom by the health check below
    assert figures.outcomes["nccl upload"] == ["refused"]
    assert set(figures.outcomes["over-limit link"]) == {"refused with the reason"}
    # 117 s before; 8 s when this test runs alone, up to 28 s inside the whole suite: the browser's 38 pages share
    # the two cores with the server, so the bound is on the mechanism (no parse or store call on the event loop)
    assert figures.health_max_s < 60
    # a user is answered, or told the planner is busy when their job, first in line, waited the longest wait (120 s)
    # for the one slot: in one run the hostile person's running plan job (0.7 s alone) took 156 s with the browser's
    # 38 pages on the two cores, and the users queued behind nobody else were refused. Every such refusal is in the
    # server's log, and the order check below covers those jobs too
    assert set(figures.outcomes["user: normal link"]) <= {"layout chosen", "busy, said so"}
    assert set(figures.outcomes["user: own question"]) <= {"answered", "busy, said so"}
    busy = sum(figures.outcomes[k].count("busy, said so") for k in ("user: normal link", "user: own question"))
    assert busy <= sum(w.refused for w in figures.user_waits), (busy, figures.user_waits)
    # one person holds at most 8 jobs: read from the server's log (each queued or refused job with how many its
    # requester had), since whether 9 of the 12 questions overlap at all depends on the machine's load (4 were over
    # the share in some whole-suite runs, none in another, the code unchanged)
    assert set(figures.outcomes["question link"]) <= {"answered", "over its share, said so", "busy, said so"}
    assert figures.hostile_most_held <= MAX_PER_REQUESTER, figures.hostile_most_held
    # fair shares, from the order in which the server handed out its work slot (its log, which names the proxy's
    # identities): a user's job that waits is served after at most one of the hostile person's jobs per job of that
    # user's ahead of it, plus one, not after the whole queue. Wall times are no measure of this: the plan jobs take
    # seconds (the hostile queue of 7 drained in 4 s once the first had run), while each page's own script shares
    # two cores with the browser's 38 pages, so the users took 20-50 s alone and 124-186 s inside the whole suite
    assert all(w.overtaken <= w.own_ahead + 1 for w in figures.user_waits), figures.user_waits
