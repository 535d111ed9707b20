"""Who changed what: one audit_event row for every upload, trust and untrust, removal of an upload, change of who an
upload or saved scenario is listed to, and saved scenario saved or deleted. Each row is written by `record` on the
transaction's own cursor, inside the transaction that makes the change, so a change that is refused or fails leaves
neither the change nor its row, and no change commits without its row.

`who` is the signed-on user the reverse proxy names (APP_IDENTITY_HEADER) for what is done in the app, the command
line's --by (default: the operating-system user who ran it) for what the operator does there, None for an anonymous
user. `python -m benchmarks_db audit [--json] [--who X] [--limit N]` lists the trail, newest first.

Ownership of uploads is stated here too, as both the writers (ingest, trust) and the readers (queries) use it: an
upload is 'shared' (listed to everybody; what every upload was before owners were recorded) or 'private' (listed to
its uploader only, and never used to calibrate: calibration changes what the planner tells everybody)."""
from __future__ import annotations

import getpass
import json
import uuid
from datetime import datetime, timezone

import pandas as pd

from benchmarks_db.store import Store

ACTIONS = ("upload", "trust", "untrust", "delete_upload", "share", "unshare", "save_scenario", "delete_scenario")
VISIBILITIES = ("shared", "private")      # listed to everybody | listed to its owner only
DEFAULT_LIMIT = 100
# SQL for "the viewer (bound as $viewer; None: nobody signed on) may see this source": everything but other users'
# private uploads
VISIBLE_SOURCE = "(src.visibility = 'shared' OR src.uploaded_by = $viewer)"
COLUMNS = ["occurred_at", "who", "action", "object_kind", "object_id", "details"]


def command_line_user(by: str | None = None) -> str:
    """Who a command run by the operator is recorded as: --by when given, else the operating-system user."""
    if by:
        return by
    try:
        return getpass.getuser()
    except (KeyError, OSError):           # no login name (a container started with an unnamed uid)
        return "the operator (command line)"


def record(cur, who: str | None, action: str, object_kind: str, object_id: str, **details) -> None:
    """Write one audit row on `cur`, the cursor of the transaction making the change (Store.transaction)."""
    if action not in ACTIONS:
        raise ValueError(f"audit action {action!r} is not one of {', '.join(ACTIONS)}")
    at = datetime.now(timezone.utc).replace(tzinfo=None)
    cur.execute("INSERT INTO audit_event (event_id, occurred_at, who, action, object_kind, object_id, details) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [uuid.uuid4().hex, at, who, action, object_kind, object_id,
                 json.dumps(details, sort_keys=True, default=str)])


def events(store: Store, who: str | None = None, limit: int = DEFAULT_LIMIT) -> pd.DataFrame:
    """The newest `limit` audit rows (of `who` only, when given), newest first."""
    df = store.df("SELECT occurred_at, who, action, object_kind, object_id, details FROM audit_event "
                  + ("WHERE who = ? " if who is not None else "") + "ORDER BY occurred_at DESC, event_id LIMIT ?",
                  [who, int(limit)] if who is not None else [int(limit)])
    return df[COLUMNS] if len(df) else pd.DataFrame(columns=COLUMNS)
