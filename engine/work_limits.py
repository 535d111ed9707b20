"""Bounded work per process: at most `slots` heavy jobs (layout searches, vendor comparisons, plans, ingestions) run
at once. A job waits for a slot at most WAIT_S, and at most MAX_WAITING_PER_SLOT jobs per slot wait at all; past
either it is refused with Busy and a message, so a burst of requests queues instead of running at once and taking
the server's memory (each search may hold about a GB at the engine's candidate limit).

Slots are shared fairly: a freed slot goes to the next requester in turn (round robin over requesters, and over the
sessions of each), not to the job that has waited longest, so one requester's burst of jobs does not hold everyone
else back; and one session may have at most MAX_PER_SESSION jobs running or waiting, one requester MAX_PER_REQUESTER.

Every job that has to wait is logged when it queues and when it gets its slot, and every refusal when it is refused
(logger "engine.work_limits", INFO, naming its requester and how many of its jobs run or wait), so an operator can see
who waits behind whom and who was held to their share; a job that finds a slot free is not logged.

Pure Python (threads only), so that the web app (ui/work_limits.py, which knows Streamlit's sessions) and the HTTP
API (planner/http_api.py, which knows the caller's address) apply the same rule.

    limiter = WorkLimiter(slots=1)
    with limiter.slot("layout search", Requester(session=None, who="10.0.0.7")):
        result = search(sc, ...)
"""
from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict, deque
from contextlib import contextmanager
from dataclasses import dataclass

WAIT_S = 120.0                 # the longest a job waits for a slot before the user is told to try again
MAX_WAITING_PER_SLOT = 64      # jobs queued per slot; more are refused at once
MAX_PER_SESSION = 2            # jobs one session may have running or waiting (its page's, and its answer's)
MAX_PER_REQUESTER = 8          # ... one requester (a signed-on person or an address) over all its sessions

log = logging.getLogger(__name__)


class Busy(RuntimeError):
    """No slot within the wait, or too many jobs waiting; str(err) is the message for the user."""


@dataclass(frozen=True)
class Requester:
    """Who a job is for: the session, and the requester it counts against (the session itself when nothing else is
    known). Jobs of no session (the start's warm-up, tests) share Requester()."""
    session: str | None = None
    who: str | None = None

    @property
    def owner(self) -> str | None:
        return self.who or self.session


class _Ticket:
    __slots__ = ("granted", "what", "owner", "queued_at")

    def __init__(self, what: str, owner: str | None):
        self.granted = False
        self.what, self.owner, self.queued_at = what, owner, time.monotonic()


class WorkLimiter:
    """At most `slots` jobs at once, handed out in turn per requester and session; a thread already holding a slot
    may nest jobs without taking another."""

    def __init__(self, slots: int, wait_s: float = WAIT_S, max_waiting: int | None = None,
                 per_session: int = MAX_PER_SESSION, per_requester: int = MAX_PER_REQUESTER):
        self.slots = slots
        self.wait_s = wait_s
        self.max_waiting = MAX_WAITING_PER_SLOT * slots if max_waiting is None else max_waiting
        self.per_session, self.per_requester = per_session, per_requester
        self._cond = threading.Condition()
        self._free = slots
        self._queue: OrderedDict[str | None, OrderedDict[str | None, deque[_Ticket]]] = OrderedDict()
        self._waiting = 0
        self._running = 0
        self._sessions: Counter = Counter()       # jobs running or waiting per session, per requester
        self._owners: Counter = Counter()
        self._held = threading.local()

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def running(self) -> int:
        return self._running

    def state(self) -> dict[str, int]:
        """The slots, the jobs running in them and the jobs waiting for one, read together (an operator's view of the
        queue: the API's /healthz)."""
        with self._cond:
            return {"slots": self.slots, "running": self._running, "waiting": self._waiting}

    def _refusal(self, what: str, req: Requester) -> str | None:
        if req.session is not None and self._sessions[req.session] >= self.per_session:
            return (f"This session already has {self._sessions[req.session]} jobs running or waiting, so this {what} "
                    "did not start. Wait for them to finish, then try again.")
        if req.owner is not None and self._owners[req.owner] >= self.per_requester:
            return (f"You already have {self._owners[req.owner]} jobs running or waiting (over all your tabs), so "
                    f"this {what} did not start. Wait for them to finish, then try again.")
        if self._free == 0 and self._waiting >= self.max_waiting:
            return (f"The planner is busy: {self._waiting} other jobs are waiting for the {self.slots} that run at "
                    f"once, so this {what} did not start. Try again in a minute.")
        return None

    def _held_by(self, req: Requester) -> str:
        """What the requester holds, for the log: its jobs running or waiting (this one included once counted)."""
        return f"its jobs running or waiting: {self._owners[req.owner]}"       # a Counter: 0 for None, never counted

    def _count(self, req: Requester, step: int) -> None:
        for counter, key in ((self._sessions, req.session), (self._owners, req.owner)):
            if key is not None:
                counter[key] += step
                if counter[key] <= 0:
                    del counter[key]

    def _acquire(self, what: str, req: Requester) -> None:
        with self._cond:
            if problem := self._refusal(what, req):
                log.info("%s for %s was refused at once; %s", what, req.owner, self._held_by(req))
                raise Busy(problem)
            self._count(req, +1)
            if self._free > 0:
                self._free -= 1
                return
            ticket = _Ticket(what, req.owner)
            log.info("%s for %s waits for a work slot behind %d jobs; %s", what, req.owner, self._waiting,
                     self._held_by(req))
            self._queue.setdefault(req.owner, OrderedDict()).setdefault(req.session, deque()).append(ticket)
            self._waiting += 1
            deadline = time.monotonic() + self.wait_s
            while not ticket.granted and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            if ticket.granted:
                return
            self._withdraw(req, ticket)
            self._count(req, -1)
            log.info("%s for %s was refused after waiting %.0f s for a work slot", what, req.owner, self.wait_s)
        raise Busy(f"The planner is busy: this {what} waited {self.wait_s:.0f} s for one of the {self.slots} job "
                   "slots without getting one. Try again in a minute.")

    def _withdraw(self, req: Requester, ticket: _Ticket) -> None:
        sessions = self._queue[req.owner]
        sessions[req.session].remove(ticket)
        if not sessions[req.session]:
            del sessions[req.session]
        if not sessions:
            del self._queue[req.owner]
        self._waiting -= 1

    def _release(self, req: Requester) -> None:
        """Hand the slot to the first waiting requester in turn (its first session in turn), who then goes last."""
        with self._cond:
            self._count(req, -1)
            if not self._queue:
                self._free += 1
                return
            owner, sessions = next(iter(self._queue.items()))
            session, tickets = next(iter(sessions.items()))
            ticket = tickets.popleft()
            ticket.granted = True
            self._waiting -= 1
            log.info("%s for %s got a work slot after %.1f s waiting", ticket.what, ticket.owner,
                     time.monotonic() - ticket.queued_at)
            if tickets:
                sessions.move_to_end(session)
            else:
                del sessions[session]
            if sessions:
                self._queue.move_to_end(owner)
            else:
                del self._queue[owner]
            self._cond.notify_all()

    @contextmanager
    def slot(self, what: str, req: Requester | None = None):
        """Run the body in a slot (waiting for one in turn if needed); Busy when none comes or the requester holds
        its share already. `req`: whom the job is for (default: Requester(), no session and no requester)."""
        depth = getattr(self._held, "depth", 0)
        if depth == 0:
            req = Requester() if req is None else req
            self._acquire(what, req)
            with self._cond:
                self._running += 1
        self._held.depth = depth + 1
        try:
            yield
        finally:
            self._held.depth = depth
            if depth == 0:
                with self._cond:
                    self._running -= 1
                self._release(req)
