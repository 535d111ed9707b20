"""Which uploads calibrate the engine, and who they are listed to. An upload enters calibration only once the
deployment's operator trusts it, with `python -m benchmarks_db trust SOURCE_ID` (run with the planner stopped, as it
takes the store) or, for everyone the reverse proxy signs on as one of APP_TRUSTED_UPLOADERS, on arrival
(ui/settings.py). Anonymous and unlisted uploads are stored and shown, but never change what the planner predicts
for anyone else. An upload's uploader may list it to everybody or keep it private (benchmarks_db/audit.py): a private
upload is never trusted, so making one private takes it out of calibration until the operator trusts it again.
Every change writes its audit row in its own transaction."""
from __future__ import annotations

import pandas as pd

from benchmarks_db import audit
from benchmarks_db.audit import VISIBILITIES
from benchmarks_db.checks import text_problem
from benchmarks_db.store import Store, utc_now



def uploads(store: Store, uploaded_by: str | None = None) -> pd.DataFrame:
    """Every upload (or only those of `uploaded_by`), newest first, with who sent it, who it is listed to, how many
    runs it holds and whether it is trusted."""
    mine = "AND src.uploaded_by = ? " if uploaded_by is not None else ""
    return store.df(f"""
SELECT src.source_id, src.filename, src.submitter, src.uploaded_by, src.visibility, src.ingested_at,
       count(r.run_id) AS runs, count(r.run_id) FILTER (WHERE r.validation = 'accepted') AS accepted_runs,
       src.trusted_by, src.trusted_at
FROM source src LEFT JOIN run r USING (source_id)
WHERE src.kind = 'user_submitted' {mine}
GROUP BY src.source_id, src.filename, src.submitter, src.uploaded_by, src.visibility, src.ingested_at, src.trusted_by,
         src.trusted_at
ORDER BY src.ingested_at DESC, src.source_id""", [uploaded_by] if uploaded_by is not None else [])


def _upload(cur, source_id: str) -> tuple:
    """(uploaded_by, visibility, trusted_by, filename) of an upload; KeyError or PermissionError when it is none."""
    found = cur.execute("SELECT kind, uploaded_by, visibility, trusted_by, filename FROM source WHERE source_id = ?",
                        [source_id]).fetchall()
    if not found:
        raise KeyError(f"no source {source_id!r} (python -m benchmarks_db uploads lists them)")
    if found[0][0] != "user_submitted":
        raise PermissionError(f"{source_id} is a {found[0][0]} source; only uploads are trusted or not, shared or not")
    return found[0][1:]


def set_trusted(store: Store, source_id: str, by: str | None, who: str | None = None) -> str:
    """Trust an upload (by: who vouches for it) or take the trust back (by=None); returns what was done. `who` is
    the operator the audit names (default: by). KeyError for an unknown source, PermissionError for one that is not
    an upload or is private, ValueError for an unusable name."""
    if by is not None and (problem := text_problem("the name of who trusts it", by)):
        raise ValueError(problem)
    with store.transaction() as cur:
        uploaded_by, visibility, before, filename = _upload(cur, source_id)
        if by is not None and visibility != "shared":
            raise PermissionError(f"{source_id} is private to its uploader, and a private upload calibrates nobody; "
                                  "its uploader must share it first")
        cur.execute("UPDATE source SET trusted_by = ?, trusted_at = ? WHERE source_id = ?",
                    [by, utc_now() if by is not None else None, source_id])
        audit.record(cur, who or by, "trust" if by is not None else "untrust", "upload", source_id,
                     filename=filename, uploaded_by=uploaded_by, trusted_by=by, was_trusted_by=before)
    return f"{source_id}: trusted by {by}; its accepted runs now calibrate" if by is not None else \
        f"{source_id}: no longer trusted; its runs no longer calibrate"


def set_upload_visibility(store: Store, source_id: str, who: str | None, visibility: str) -> str:
    """List the uploader's upload to everybody ('shared') or to them only ('private'; its trust, if any, is taken
    back); returns what was done. Only its uploader, a signed-on user, may: PermissionError otherwise (nothing
    changed, nothing recorded), KeyError for an unknown source, ValueError for an unknown visibility."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility {str(visibility)[:40]!r}: shared (listed to everybody) or private (listed to "
                         "you only)")
    with store.transaction() as cur:
        uploaded_by, before, trusted_by, filename = _upload(cur, source_id)
        if who is None or uploaded_by != who:
            raise PermissionError(f"{source_id} ({filename}) "
                                  + ("belongs to another user" if uploaded_by is not None else
                                     "was uploaded without a signed-on user")
                                  + ": only its uploader can change who it is listed to")
        if before == visibility:
            return f"{source_id}: already {visibility}"
        dropped = trusted_by if visibility == "private" else None
        if dropped:
            cur.execute("UPDATE source SET visibility = ?, trusted_by = NULL, trusted_at = NULL WHERE source_id = ?",
                        [visibility, source_id])
        else:
            cur.execute("UPDATE source SET visibility = ? WHERE source_id = ?", [visibility, source_id])
        audit.record(cur, who, "share" if visibility == "shared" else "unshare", "upload", source_id,
                     filename=filename, visibility=visibility, trust_taken_back_from=dropped)
    return (f"{source_id}: listed to everybody" if visibility == "shared" else
            f"{source_id}: listed to you only" + (" and no longer used for calibration" if dropped else ""))
