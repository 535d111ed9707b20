"""Issue 13 in the pages (AppTest, the real app on a real store): text from the store is shown as text in Markdown
and in plotly charts, tables of store text neutralise spreadsheet formulas, a link without a layout is searched once
per scenario for every tab, and hostile links and scenario files get a message instead of Streamlit's error box."""
import csv
import io
import json
import logging
import threading
from contextlib import contextmanager

import pandas as pd
import pytest
import streamlit as st

from benchmarks_db.ingest import Uploader, delete_upload, ingest_bytes
from engine.presentation.edit import DEFAULT_SCENARIO, default_scenario
from ui import cached, escape, work_limits
from ui.work_limits import Busy, WorkLimiter
from tests.app.conftest import button, on_page, run_app, texts
from tests.app.test_links import token_of
from tests.engine.test_share import raw_token
from tests.benchmarks_db.helpers import matmul_result, runner_file

INJECTED_NAME = "[x](javascript:alert(1))<img src=x onerror=alert(1)>.json"
LINK_OP = '<a href="https://evil.example">click</a>'
FORMULA = '=HYPERLINK("https://evil.example","x")'
NO_LAYOUT = {k: v for k, v in DEFAULT_SCENARIO.items() if k != "layout"}
# 5,040 GPUs and a global batch of 5,040 have many divisors: 17 million layouts, over engine.planning.search's 5 million
# 7,207,200 = 2^5 3^2 5^2 7 11 13 GPUs and a batch of 720,720: more valid layouts than the search's limit
HOSTILE = {"model": {"preset": "llama3.1-405b"},
           "training": {"seq_len": 8192, "global_batch_size": 720_720, "total_tokens": 1e12},
           "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 7_207_200}}


@pytest.fixture
def upload_into_app_store(app_store):
    """Ingest into the app's store (as the upload page does) and take every upload out again afterwards."""
    added = []

    def add(name: str, data: bytes, **kw):
        report = ingest_bytes(app_store, name, data, **kw)
        assert report.ingested, report.errors
        added.append(report.source_id)
        st.cache_data.clear()                  # the pages cache the store's tables for a minute
        return report
    yield add
    for source_id in added:
        delete_upload(app_store, source_id, operator=True)
    st.cache_data.clear()


def test_upload_file_names_are_text_in_the_scenario_pages_calibration_caption(upload_into_app_store):
    t = 2 * 8192**3 / 700e12
    upload_into_app_store(INJECTED_NAME, runner_file([matmul_result(8192, 8192, 8192, "bf16", [t] * 7)]),
                          uploader=Uploader(identity="ops@example.com", trusted=True))
    at = run_app()
    raw = [c.value for c in at.caption if "Measured matmul efficiency" in c.value]
    assert raw, [c.value for c in at.caption]
    assert "upload \\[x\\]\\(javascript\\:alert\\(1\\)\\)\\<img src=x onerror=alert\\(1\\)\\>\\.json" in raw[0]
    assert f"upload {INJECTED_NAME}" in texts([c for c in at.caption if "Measured matmul" in c.value])[0]


def test_a_csv_op_value_is_not_a_link_inside_the_efficiency_chart(upload_into_app_store):
    buf = io.StringIO()
    csv.writer(buf).writerows([["accelerator", "metric", "value", "unit", "op"],
                               ["H100-SXM5-80GB", "mem_bw", "3000", "GB/s", LINK_OP]])
    upload_into_app_store("ops.csv", buf.getvalue().encode())
    at = on_page(run_app(), "benchmarks")
    at.radio(key="ds_metric").set_value("mem_bw").run()
    chart = json.loads(at.get("plotly_chart")[1].proto.spec)
    labels = [y for trace in chart["data"] for y in trace["y"]]
    assert any("&lt;a href=\"https://evil.example\"&gt;click&lt;/a&gt;" in y for y in labels), labels
    assert not any("<a " in y for y in labels)


def test_tables_of_store_text_neutralise_formulas_for_csv_export(upload_into_app_store):
    t = 2 * 4096**3 / 500e12
    upload_into_app_store("formula.json", runner_file([matmul_result(4096, 4096, 4096, "bf16", [t] * 5)]),
                          submitter=FORMULA)
    at = on_page(run_app(), "benchmarks")
    micro = at.dataframe[1].value
    assert "'" + FORMULA in set(micro["submitter"]) and FORMULA not in set(micro["submitter"])


def test_csv_cells_starting_like_a_formula_get_an_apostrophe():
    df = pd.DataFrame({"name": ["=1+1", "+1", "-x", "@SUM(A1)", "\tx", "plain", None], "value": [-1, 2, 3, 4, 5, 6, 7]})
    out = escape.csv_safe(df)
    assert list(out["name"])[:6] == ["'=1+1", "'+1", "'-x", "'@SUM(A1)", "'\tx", "plain"]
    assert pd.isna(out["name"][6])
    assert list(out["value"]) == [-1, 2, 3, 4, 5, 6, 7]                      # numbers stay numbers
    assert list(df["name"])[0] == "=1+1"                                    # the page's own data is untouched


def test_a_layout_less_link_is_searched_once_for_every_tab(monkeypatch):
    cached._layout_outcome.clear()
    calls = []
    real = cached.with_layout
    monkeypatch.setattr(cached, "with_layout", lambda sc: calls.append(sc) or real(sc))
    link = token_of({"scenario": {**NO_LAYOUT, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 512}}})
    tabs = [run_app({"sc": link}) for _ in range(3)]
    assert len(calls) == 1
    layouts = {at.session_state["scenario"].layout for at in tabs}
    assert len(layouts) == 1 and None not in layouts
    assert all(not at.error for at in tabs)


def test_a_link_whose_search_is_over_the_engines_limit_opens_the_defaults_with_the_reason(monkeypatch):
    """Refused by counting its layouts before it queues for a work slot (issue 18: twenty such links held the slot
    long enough that five users opening a normal link waited 102 s instead of 1.8 s): with every slot taken and no
    wait allowed, it still gets its reason, not 'busy'."""
    cached._layout_outcome.clear()
    small = WorkLimiter(1, wait_s=0.01, max_waiting=0)
    monkeypatch.setattr(work_limits, "limiter", lambda: small)
    with _slot_held_elsewhere(small):
        at = run_app({"sc": token_of({"scenario": HOSTILE})})
    assert at.session_state["scenario"] == default_scenario()
    assert any("layouts to try, over the search's limit" in e for e in texts(at.error)), texts(at.error)
    assert not any("busy" in e for e in texts(at.error))


def test_a_scenario_file_with_too_many_layouts_is_refused_with_a_message():
    at = run_app()
    at.file_uploader(key="scenario_upload").set_value(("many.json", json.dumps(HOSTILE).encode(), "application/json"))
    at.run()
    assert not at.exception
    assert any("many.json is not a usable scenario" in e for e in texts(at.error))
    assert any("over the search's limit" in e for e in texts(at.error))
    assert at.session_state["scenario"] == default_scenario()


@pytest.mark.parametrize("depth", [40, 20_000])
def test_a_deeply_nested_link_or_scenario_file_gets_a_message(depth):
    at = run_app({"sc": raw_token(b"[" * depth + b"]" * depth)})
    assert any("nested more than 32 levels" in e for e in texts(at.error)), texts(at.error)
    assert at.session_state["scenario"] == default_scenario()
    at.file_uploader(key="scenario_upload").set_value(("deep.json", b"[" * depth + b"]" * depth, "application/json"))
    at.run()
    assert not at.exception
    assert any("nested more than 32 levels" in e for e in texts(at.error)), texts(at.error)


def test_a_busy_planner_says_so_instead_of_searching(monkeypatch):
    small = WorkLimiter(1, wait_s=0.2)
    monkeypatch.setattr(work_limits, "limiter", lambda: small)
    held, release = threading.Event(), threading.Event()

    def occupy():
        with small.slot("test"):
            held.set()
            release.wait(30)
    worker = threading.Thread(target=occupy)
    worker.start()
    try:
        held.wait(10)
        at = on_page(run_app(), "layout_search")
        button(at, "Run layout search").click().run()
        assert not at.exception
        assert any("The planner is busy" in w for w in texts(at.warning)), texts(at.warning)
    finally:
        release.set()
        worker.join()
    at = on_page(run_app(), "layout_search")
    button(at, "Run layout search").click().run()
    assert not at.warning and at.session_state["search_result"]["result"].best


# ------------------------------------------------------------------------------------- the limiter on its own
def test_work_slots_run_jobs_one_at_a_time_and_refuse_past_the_queue():
    limiter = WorkLimiter(1, wait_s=5, max_waiting=2)
    running, most, lock = [0], [0], threading.Lock()
    gate = threading.Event()
    outcomes = []

    def job():
        try:
            with limiter.slot("job"):
                with lock:
                    running[0] += 1
                    most[0] = max(most[0], running[0])
                gate.wait(5)
                with lock:
                    running[0] -= 1
            outcomes.append("ran")
        except Busy as err:
            outcomes.append(str(err))
    threads = [threading.Thread(target=job) for _ in range(3)]
    for t in threads:
        t.start()
    while limiter.waiting < 2:
        threading.Event().wait(0.01)
    job()                                                   # a fourth: two wait already, so it is refused at once
    gate.set()
    for t in threads:
        t.join()
    assert most[0] == 1
    assert outcomes.count("ran") == 3 and len(outcomes) == 4
    assert "2 other jobs are waiting" in next(o for o in outcomes if o != "ran")
    assert limiter.running == 0 and limiter.waiting == 0


def test_a_job_that_waits_past_its_time_is_refused_and_nested_jobs_share_a_slot():
    limiter = WorkLimiter(1, wait_s=0.1)
    with limiter.slot("outer"):
        with limiter.slot("inner"):                         # the same thread: no second slot, no deadlock
            assert limiter.running == 1
        got = []

        def other():
            try:
                with limiter.slot("other"):
                    got.append("ran")
            except Busy as err:
                got.append(str(err))
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert got and "this other waited" in got[0]
    with limiter.slot("after"):
        assert limiter.running == 1


# ------------------------------------------------------------------------------------- fair shares (issue 18)
def _queue_jobs(limiter: WorkLimiter, requesters: list, order: list, gate: threading.Event,
                refused: list | None = None) -> list[threading.Thread]:
    """One thread per requester, each running or queued before the next starts (so arrival order is known); each
    records its session's name when it gets the slot, and holds it until the gate opens; with `refused`, a job the
    limiter refuses (Busy) records its session's name there."""
    threads = []
    for req in requesters:
        def job(req=req):
            try:
                with limiter.slot("job", req):
                    order.append(req.session)
                    gate.wait(10)
            except Busy:
                if refused is None:
                    raise
                refused.append(req.session)
        queued = limiter.waiting + limiter.running
        threads.append(threading.Thread(target=job))
        threads[-1].start()
        while limiter.waiting + limiter.running == queued:
            threading.Event().wait(0.005)
    return threads


def test_a_freed_slot_goes_to_the_next_requester_in_turn_not_to_the_longest_waiting_job():
    """Issue 18: sixty links from one requester queued ahead of a user, whose answer then took 105 s. In turn, the
    user's job runs after one of theirs, not after all of them."""
    limiter = WorkLimiter(1, wait_s=30)
    order, gate = [], threading.Event()
    gate.set()
    mallory = [work_limits.Requester(f"m{i}", "mallory") for i in range(5)]
    with _slot_held_elsewhere(limiter):
        threads = _queue_jobs(limiter, [*mallory, work_limits.Requester("alice", "alice")], order, gate)
    for t in threads:
        t.join()
    assert order == ["m0", "alice", "m1", "m2", "m3", "m4"]
    assert limiter.running == limiter.waiting == 0


def test_each_waiting_job_is_logged_with_its_requester_when_it_queues_and_when_it_gets_its_slot(caplog):
    """What an operator (and the hostile-load e2e test) reads to see who waited behind whom."""
    limiter = WorkLimiter(1, wait_s=30)
    order, gate = [], threading.Event()
    gate.set()
    with caplog.at_level(logging.INFO, logger="engine.work_limits"):
        with _slot_held_elsewhere(limiter):
            threads = _queue_jobs(limiter, [work_limits.Requester("m0", "mallory"),
                                            work_limits.Requester("m1", "mallory"),
                                            work_limits.Requester("a", "alice")], order, gate)
        for t in threads:
            t.join()
    lines = [r.getMessage().split(" after ")[0] for r in caplog.records if r.name == "engine.work_limits"]
    assert lines == ["job for mallory waits for a work slot behind 0 jobs; its jobs running or waiting: 1",
                     "job for mallory waits for a work slot behind 1 jobs; its jobs running or waiting: 2",
                     "job for alice waits for a work slot behind 2 jobs; its jobs running or waiting: 1",
                     "job for mallory got a work slot", "job for alice got a work slot",
                     "job for mallory got a work slot"]


def test_one_session_and_one_requester_hold_at_most_their_share_of_jobs(caplog):
    """... and the server's log says what each requester held when a job of theirs queued or was refused, which the
    hostile-load e2e test reads (benchmarks/load_test.most_held) in the server's own log format."""
    from benchmarks.load_test import most_held
    limiter = WorkLimiter(1, wait_s=30, per_session=2, per_requester=3)
    order, gate = [], threading.Event()
    same_session = work_limits.Requester("s", "bob")
    with caplog.at_level(logging.INFO, logger="engine.work_limits"):
        threads = _queue_jobs(limiter, [work_limits.Requester("x", "other")], order, gate)    # holds the slot
        threads += _queue_jobs(limiter, [same_session, same_session], order, gate)
        with pytest.raises(Busy, match="This session already has 2 jobs running or waiting"):
            with limiter.slot("third link question", same_session):
                pass
        threads += _queue_jobs(limiter, [work_limits.Requester("t", "bob")], order, gate)
        with pytest.raises(Busy, match=r"You already have 3 jobs running or waiting \(over all your tabs\)"):
            with limiter.slot("job", work_limits.Requester("u", "bob")):
                pass
    log = _server_log(caplog)
    assert "third link question for bob was refused at once; its jobs running or waiting: 2" in log
    assert "job for bob was refused at once; its jobs running or waiting: 3" in log
    assert most_held(log, "bob") == 3 and most_held(log, "other") == 0 and most_held(log, "nobody") == 0
    gate.set()
    for t in threads:
        t.join()
    assert order == ["x", "s", "t", "s"] and limiter.running == limiter.waiting == 0
    with limiter.slot("later", same_session):                     # the share is back once the jobs are done
        assert limiter.running == 1


def test_the_load_tests_reading_of_the_log_counts_a_refusal_after_the_longest_wait_as_the_end_of_that_wait(caplog):
    """benchmarks/load_test.served_first on the server's log format: a user's job refused after waiting (the slot
    held by somebody's long job) leaves the queue there, overtaken by none of the hostile person's jobs."""
    from benchmarks.load_test import served_first, slot_events, waiting
    limiter = WorkLimiter(1, wait_s=0.3)
    order, refused = [], []
    with caplog.at_level(logging.INFO, logger="engine.work_limits"), _slot_held_elsewhere(limiter):
        threads = _queue_jobs(limiter, [work_limits.Requester("m", "mallory"), work_limits.Requester("a", "alice")],
                              order, threading.Event(), refused)
        for t in threads:
            t.join()
    events = slot_events(_server_log(caplog))
    assert events == [("mallory", "waits for"), ("alice", "waits for"), ("mallory", "refused"), ("alice", "refused")]
    assert order == [] and refused == ["m", "a"] and waiting(events, "alice") == waiting(events, "mallory") == 0
    assert served_first(events, {"alice"}, "mallory") == [(1, 0, 0, True)]


def _server_log(caplog) -> str:
    """The captured records as the server writes its log (engine.command_line.LOG_FORMAT), which the load test reads."""
    from engine.command_line import LOG_FORMAT
    return "\n".join(logging.Formatter(LOG_FORMAT).format(r) for r in caplog.records)


@contextmanager
def _slot_held_elsewhere(limiter: WorkLimiter):
    """Another user's job holds the limiter's one slot until the block ends."""
    held, release = threading.Event(), threading.Event()

    def hold():
        with limiter.slot("another user's job", work_limits.Requester("u", "u")):
            held.set()
            release.wait(30)
    worker = threading.Thread(target=hold)
    worker.start()
    held.wait(10)
    try:
        yield
    finally:
        release.set()
        worker.join()


def test_one_session_enqueues_at_most_its_share_of_background_questions(monkeypatch):
    """Issue 18: links each carrying a plan question queued one answer each; a session now has at most
    MAX_PER_SESSION questions waiting or running, the next are refused at once (and asked again on a later rerun)."""
    from ui import background
    small = WorkLimiter(1, wait_s=30)
    monkeypatch.setattr(work_limits, "limiter", lambda: small)
    monkeypatch.setattr(work_limits, "requester", lambda: work_limits.Requester("links", "mallory"))
    with _slot_held_elsewhere(small):
        jobs = [background.job(("issue-18-question", i), "answer", lambda x: x * x, i) for i in range(5)]
        refused = [j for j in jobs[2:] if j.wait(5)]
        assert len(refused) == 3 and all(isinstance(j.future.exception(), Busy) for j in refused)
        assert "This session already has 2 jobs running or waiting" in str(refused[0].future.exception())
        assert not jobs[0].done and not jobs[1].done and small.waiting == work_limits.MAX_PER_SESSION
    assert [j.value() for j in jobs[:2] if j.wait(10)] == [0, 1]
    assert refused[0].retry()                                  # asked again on a later rerun


def test_a_page_waiting_for_a_job_that_was_refused_shows_the_refusal_instead_of_asking_again(monkeypatch):
    """CI: a link's question waited its 120 s for a slot, was refused, and the rerun its end caused started it again
    (a passing failure is retried), so the page waited another 120 s, and again. The page that waited for the job
    now gets that job back, refused, and says so; asked afresh later, it is started again."""
    from ui import background
    small = WorkLimiter(1, wait_s=0.3)
    monkeypatch.setattr(work_limits, "limiter", lambda: small)
    monkeypatch.setattr(work_limits, "requester", lambda: work_limits.Requester("waiting", "someone"))
    key = ("refused-while-waited-for", 1)
    with _slot_held_elsewhere(small):
        first = background.job(key, "answer", lambda x: x * x, 3)
        assert first.wait(10) and "waited 0 s" in str(first.future.exception())
        assert background.job(key, "answer", lambda x: x * x, 3, awaited=lambda k: k == key) is first
    again = background.job(key, "answer", lambda x: x * x, 3, awaited=lambda k: False)
    assert again is not first and again.wait(10) and again.value() == 9
