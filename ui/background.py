"""Work done once per server process, off the script thread, and shared by every session: a job runs once per key
(in a work slot, ui/work_limits.py, taken in turn for the session that asked first, so a session or requester
holding its share of jobs is refused with Busy at once and one requester's many questions do not queue ahead of
everyone else's) and pages show its result once it is done, with a progress bar that polls until then, so that a
page rerun never waits for it. The manager's answer (engine.planning.plan) and the uploaded training runs'
predictions run here, and the MLPerf validation is warmed here when the server starts (serve.py). Nothing here
imports Streamlit.

    job = background.job(("plan", key), "answer", plan, sc, deadline_days=30)
    if job.done: show(job.value())
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Callable

from benchmarks_db.reference_runs import REFERENCE
from engine.scenario import ScenarioError
from ui import work_limits

VALIDATED = tuple(REFERENCE)               # the MLPerf benchmarks the engine predicts (Benchmarks page)

MAX_JOBS = 256            # finished jobs kept for other sessions; the oldest go first


class Job:
    """One piece of work: its future, and how far it got (fraction, message) for a progress bar."""

    def __init__(self, key: tuple, what: str):
        self.key, self.what = key, what
        self.future: Future = Future()
        self.fraction = 0.0
        self.message = f"waiting for a free slot for the {what}"

    def progress(self, fraction: float, message: str) -> None:
        self.fraction, self.message = min(max(fraction, 0.0), 1.0), message

    @property
    def done(self) -> bool:
        return self.future.done()

    def value(self):
        """The result; raises what the work raised (ScenarioError, Busy)."""
        return self.future.result()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the result at most timeout_s; True when it is done."""
        try:
            self.future.exception(timeout=timeout_s)
        except TimeoutError:
            return False
        return True

    def retry(self) -> bool:
        """A job that failed for a passing reason (Busy, an unexpected error) is started again when asked for;
        one the engine refused (ScenarioError) keeps its answer."""
        return self.done and self.future.exception() is not None and not isinstance(self.future.exception(), ScenarioError)


# slot=False jobs run one at a time, on daemon threads: a SIGTERM stops the server at once instead of after the queued
# warm-up work (a ThreadPoolExecutor's workers are joined at exit, ~14 s of validation on a quiet machine)
_BESIDE = threading.Lock()
_JOBS: OrderedDict[tuple, Job] = OrderedDict()
_LOCK = threading.Lock()


def job(key: tuple, what: str, work: Callable, *args, progress: bool = False, slot: bool = True,
        awaited: Callable[[tuple], bool] | None = None, **kwargs) -> Job:
    """The job for `key`, started now (`work(*args, **kwargs)` in a work slot named `what`, or beside the slots
    with slot=False) unless it is already running or done. A job that failed for a passing reason is started again,
    unless awaited(key) says the caller's page was waiting for this very job: that page is drawn again because the
    job ended, and shows how (restarting it there would keep a refused page waiting, refused again, for ever). With
    progress=True, `work` is also given progress=job.progress."""
    with _LOCK:
        found = _JOBS.get(key)
        restart = found is not None and found.retry() and not (awaited is not None and awaited(key))
        if found is not None and not restart:
            _JOBS.move_to_end(key)
            return found
        new = _JOBS[key] = Job(key, what)
        while len(_JOBS) > MAX_JOBS:
            _JOBS.popitem(last=False)
    if progress:
        kwargs["progress"] = new.progress
    if slot:                   # a thread of its own waits for a slot in turn (work_limits hands them out fairly)
        threading.Thread(target=_run, args=(new, work, args, kwargs, work_limits.requester()), daemon=True,
                         name="planner-background").start()
    else:
        threading.Thread(target=_run, args=(new, work, args, kwargs, None), daemon=True, name="planner-warm-up").start()
    return new


def _run(job_: Job, work: Callable, args: tuple, kwargs: dict, req: work_limits.Requester | None) -> None:
    """The work, in a slot for `req` (None: beside the slots)."""
    try:
        with work_limits.slot(job_.what, req) if req is not None else _BESIDE:
            job_.progress(0.0, f"started the {job_.what}")
            value = work(*args, **kwargs)
    except BaseException as err:          # handed to whoever reads the job (Busy, ScenarioError, a bug)
        job_.future.set_exception(err)
    else:
        job_.future.set_result(value)


def find(key: tuple) -> Job | None:
    with _LOCK:
        return _JOBS.get(key)


def wait_all(timeout_s: float = 120.0) -> None:
    """Wait until every job started so far is done (tests and benchmarks)."""
    with _LOCK:
        jobs = list(_JOBS.values())
    for j in jobs:
        j.wait(timeout_s)


def validation(store, benchmark: str, slot: bool = True, awaited: Callable[[tuple], bool] | None = None) -> Job:
    """benchmarks_db.validation.predicted_vs_measured for a benchmark on the store as it is now (the version of its
    MLPerf results is part of the key, so an MLPerf upload or a trust decision gives a new job, another kind of upload
    does not); ~30 layout searches from scratch, so computed once per process."""
    from benchmarks_db.validation import predicted_vs_measured, results_version
    version = results_version(store, benchmark)
    return job(("validation", benchmark, version), "validation", predicted_vs_measured, store, benchmark, slot=slot,
               awaited=awaited)


def training_runs(store, viewer: str | None, version: tuple, awaited: Callable[[tuple], bool] | None = None) -> Job:
    """The uploaded training runs `viewer` may see with the engine's prediction of each
    (benchmarks_db.step_time.predicted_vs_measured), and every trusted cluster's figures before and after
    calibration (before_after), on the store at `version` (benchmarks_db.step_time.runs_version, part of the key):
    an estimate per run, in a work slot taken in turn for the session that asked."""
    return job(("training runs", viewer, version), "training-run predictions", _training_runs, store, viewer,
               awaited=awaited)


def _training_runs(store, viewer: str | None) -> tuple:
    from benchmarks_db.step_time import before_after, predicted_vs_measured
    return predicted_vs_measured(store, viewer), before_after(store)


def warm_up(store) -> None:
    """Start the validation of every predicted benchmark now (serve.py, when the server starts), so that the first
    visitor of Predicted vs MLPerf finds it done; start-up does not wait for it. It runs beside the work slots
    (one job, the published results only), so the first visitors' own answers do not queue behind it."""
    for benchmark in VALIDATED:
        validation(store, benchmark, slot=False)
