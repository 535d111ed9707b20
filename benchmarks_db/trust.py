"""Which uploads calibrate the engine: an upload enters calibration only once the deployment's operator trusts it,
with `python -m benchmarks_db trust SOURCE_ID` (run with the planner stopped, as it takes the store) or, for
everyone the reverse proxy signs on as one of APP_TRUSTED_UPLOADERS, on arrival (ui/settings.py). Anonymous and
unlisted uploads are stored and shown, but never change what the planner predicts for anyone else."""
from __future__ import annotations

import pandas as pd

from benchmarks_db.checks import text_problem
from benchmarks_db.store import Store, utc_now



def uploads(store: Store) -> pd.DataFrame:
    """Every upload, newest first, with who sent it, how many runs it holds and whether it is trusted."""
    return store.df("""
SELECT src.source_id, src.filename, src.submitter, src.uploaded_by, src.ingested_at, count(r.run_id) AS runs,
       count(r.run_id) FILTER (WHERE r.validation = 'accepted') AS accepted_runs, src.trusted_by, src.trusted_at
FROM source src LEFT JOIN run r USING (source_id)
WHERE src.kind = 'user_submitted'
GROUP BY src.source_id, src.filename, src.submitter, src.uploaded_by, src.ingested_at, src.trusted_by, src.trusted_at
ORDER BY src.ingested_at DESC, src.source_id""")


def set_trusted(store: Store, source_id: str, by: str | None) -> str:
    """Trust an upload (by: who vouches for it) or take the trust back (by=None); returns what was done. KeyError
    for an unknown source, PermissionError for one that is not an upload, ValueError for an unusable name."""
    if by is not None and (problem := text_problem("the name of who trusts it", by)):
        raise ValueError(problem)
    with store.transaction() as cur:
        kind = cur.execute("SELECT kind FROM source WHERE source_id = ?", [source_id]).fetchall()
        if not kind:
            raise KeyError(f"no source {source_id!r} (python -m benchmarks_db uploads lists them)")
        if kind[0][0] != "user_submitted":
            raise PermissionError(f"{source_id} is a {kind[0][0]} source; only uploads are trusted or not")
        cur.execute("UPDATE source SET trusted_by = ?, trusted_at = ? WHERE source_id = ?",
                    [by, utc_now() if by is not None else None, source_id])
    return f"{source_id}: trusted by {by}; its accepted runs now calibrate" if by is not None else \
        f"{source_id}: no longer trusted; its runs no longer calibrate"
