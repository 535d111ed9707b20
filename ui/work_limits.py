"""Bounded work per request in the web app: the planner's heavy jobs (layout searches, the vendor comparison, the MLPerf
validation, choosing a layout for a link, ingesting an upload) run in at most APP_MAX_CONCURRENT_WORK slots for the
whole process, with engine/work_limits.py's rule (a bounded wait and queue, slots in turn per requester and session,
a share per session and per requester; Busy(message) past them). The HTTP API applies the same rule in its own
process.

The requester is who the reverse proxy signed on (APP_IDENTITY_HEADER), else the client's address, else the session
(`requester()`). Streamlit is imported only there, to ask which session the calling thread serves.

    with work_limits.slot("layout search"):
        result = search(sc, ...)
"""
from __future__ import annotations

from functools import lru_cache

# Busy and MAX_PER_SESSION as the pages and their tests know them from here
from engine.work_limits import MAX_PER_SESSION, Busy, Requester, WorkLimiter  # noqa: F401
from ui.settings import load_settings


def requester() -> Requester:
    """The Requester of the Streamlit session this thread runs a script for; Requester() off a session."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
        ctx = get_script_run_ctx(suppress_warning=True)
    except ImportError:                     # pragma: no cover - Streamlit is a dependency of the pages
        return Requester()
    if ctx is None:
        return Requester()
    import streamlit as st
    header = load_settings().identity_header
    who = (st.context.headers.get(header) or "").strip() if header else ""
    return Requester(ctx.session_id, who or st.context.ip_address or None)


@lru_cache(maxsize=1)
def limiter() -> WorkLimiter:
    """The process's limiter, sized by APP_MAX_CONCURRENT_WORK."""
    return WorkLimiter(load_settings().max_concurrent_work)


def slot(what: str, req: Requester | None = None):
    """A slot of the process's limiter: `with slot("layout search"): ...` (for the calling thread's session, or
    `req`)."""
    return limiter().slot(what, requester() if req is None else req)
