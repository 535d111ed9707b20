"""Bounded work per request: the planner's heavy jobs (layout searches, the vendor comparison, the MLPerf
validation, choosing a layout for a link, ingesting an upload) run in at most APP_MAX_CONCURRENT_WORK slots for the
whole process. A job waits for a slot at most WAIT_S, and at most MAX_WAITING_PER_SLOT jobs per slot wait at all;
past either it is refused with Busy and a message, so a burst of requests queues instead of running at once and
taking the server's memory (each search may hold about a GB at the engine's candidate limit). Nothing here imports
Streamlit: the pages call `slot(...)` around the engine and store calls.

    with work_limits.slot("layout search"):
        result = search(sc, ...)
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from functools import lru_cache

from ui.settings import load_settings

WAIT_S = 120.0                 # the longest a job waits for a slot before the user is told to try again
MAX_WAITING_PER_SLOT = 64      # jobs queued per slot (a session queues at most one); more are refused at once


class Busy(RuntimeError):
    """No slot within the wait, or too many jobs waiting; str(err) is the message for the user."""


class WorkLimiter:
    """At most `slots` jobs at once; a thread already holding a slot may nest jobs without taking another."""

    def __init__(self, slots: int, wait_s: float = WAIT_S, max_waiting: int | None = None):
        self.slots = slots
        self.wait_s = wait_s
        self.max_waiting = MAX_WAITING_PER_SLOT * slots if max_waiting is None else max_waiting
        self._free = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self._waiting = 0
        self._running = 0
        self._held = threading.local()

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def running(self) -> int:
        return self._running

    def _acquire(self, what: str) -> None:
        if self._free.acquire(blocking=False):
            return
        with self._lock:
            if self._waiting >= self.max_waiting:
                raise Busy(f"The planner is busy: {self._waiting} other jobs are waiting for the {self.slots} that "
                           f"run at once, so this {what} did not start. Try again in a minute.")
            self._waiting += 1
        try:
            got = self._free.acquire(timeout=self.wait_s)
        finally:
            with self._lock:
                self._waiting -= 1
        if not got:
            raise Busy(f"The planner is busy: this {what} waited {self.wait_s:.0f} s for one of the {self.slots} "
                       "job slots without getting one. Try again in a minute.")

    @contextmanager
    def slot(self, what: str):
        """Run the body in a slot (waiting for one if needed); Busy when none comes."""
        depth = getattr(self._held, "depth", 0)
        if depth == 0:
            self._acquire(what)
            with self._lock:
                self._running += 1
        self._held.depth = depth + 1
        try:
            yield
        finally:
            self._held.depth = depth
            if depth == 0:
                with self._lock:
                    self._running -= 1
                self._free.release()


@lru_cache(maxsize=1)
def limiter() -> WorkLimiter:
    """The process's limiter, sized by APP_MAX_CONCURRENT_WORK."""
    return WorkLimiter(load_settings().max_concurrent_work)


def slot(what: str):
    """A slot of the process's limiter: `with slot("layout search"): ...`."""
    return limiter().slot(what)
