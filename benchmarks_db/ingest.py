"""Ingest results into the store: runner JSON, nccl-tests text, MLPerf Training results (a results folder with its
systems/ JSON, given as any folder above it, as a .zip of such folders, or as a single log) and a simple CSV.

Everything is parsed (benchmarks_db/dispatch.py; archives through benchmarks_db/zip_archive.py) and checked before
anything is written; one file (or one MLPerf results folder when a folder is given) is one transaction: all of it or
none, with errors that name the line or field and the fix. Every upload is recorded as a source with who sent it
(Uploader) and whether it may calibrate the engine (benchmarks_db/trust.py). The command line is
`python -m benchmarks_db ingest FILE_OR_FOLDER...` (benchmarks_db/__main__.py).
"""
from __future__ import annotations

import hashlib
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

from pydantic import BaseModel, ConfigDict, computed_field

from benchmarks_db import checks
from benchmarks_db.accelerators import accelerator as catalog_accelerator
from benchmarks_db.dispatch import FORMATS, Parsed, Refused, decode, parse_file, parse_tree
from benchmarks_db.records import Run, Source
from benchmarks_db.store import ConstraintViolation, Store, StoreUnavailable, utc_now
from benchmarks_db.writer import write
from benchmarks_db.zip_archive import zip_members

MAX_FILE_BYTES = 64 * 2**20           # per file, and per unpacked .zip (the app passes APP_MAX_UPLOAD_MB's instead)
MAX_NAME_CHARS = 255
MLPERF_SCORE_TOL_MIN = 5e-4            # the CSV's scores agree with the summarizer to 5e-4 min


class IngestReport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: str
    format: str | None = None
    ingested: bool = False
    dry_run: bool = False                 # checked only: rows_added are the rows it would add
    rows_added: dict[str, int] = {}
    source_id: str | None = None          # the stored upload (delete_upload removes it again)
    trusted_by: str | None = None         # who let it into calibration on arrival (None: untrusted)
    run_ids: list[str] = []
    errors: list[str] = []
    warnings: list[str] = []
    flags: list[str] = []
    mlperf_scores: dict[str, float] = {}

    @computed_field
    @property
    def score_minutes(self) -> float | None:
        """The MLPerf score when the input held exactly one result (minutes, as the summarizer computes it)."""
        return next(iter(self.mlperf_scores.values())) if len(self.mlperf_scores) == 1 else None


LOG = logging.getLogger(__name__)
INTERNAL_ERROR = ("could not be checked because of an internal error (logged on the server); nothing from this file "
                  "was stored. Please report it with the file")


def name_problem(name: str) -> str | None:
    """Upload names are plain file names: no folders, no '..', no control characters."""
    if not name or len(name) > MAX_NAME_CHARS:
        return f"the file name must have 1 to {MAX_NAME_CHARS} characters"
    if "/" in name or "\\" in name or name in (".", "..") or checks.CONTROL_CHARS.search(name) or ":" in name[:2]:
        return f"{name[:80]!r} is not a plain file name (no folders, drive letters, '..' or control characters)"
    return None


# ----------------------------------------------------------------------------------------------- checks and write
def _mlperf_duplicate(store: Store, run: Run, score: float) -> str | None:
    """The same MLPerf result already stored (published, or uploaded before from a folder, a .zip or another round's
    listing): same system folder, benchmark and score."""
    rows = store.rows(
        "SELECT s.kind, r.mlperf_round, r.submitter_org, m.value FROM run r JOIN source s USING (source_id) "
        "JOIN measurement m USING (run_id) WHERE r.benchmark = ? AND m.stat = 'score' "
        "AND r.params->>'mlperf_system' = ? AND abs(m.value - ?) < ? "
        "ORDER BY s.kind = 'published' DESC LIMIT 1",
        [run.benchmark, run.params.get("mlperf_system"), score, MLPERF_SCORE_TOL_MIN])
    if rows:
        kind, rnd, org, value = rows[0]
        return (f"duplicate: this MLPerf result is already in the store as a {kind} result "
                f"({rnd or 'round unknown'} {org} {run.params.get('mlperf_system')} {run.benchmark}, {value:.4f} min)")
    return None


def _check_units(store: Store, units: list[Parsed], report: IngestReport) -> list[Run]:
    runs = []
    for unit in units:
        report.warnings += unit.warnings
        report.mlperf_scores.update(unit.scores)
        report.errors += unit.errors
        for run in unit.runs:
            report.errors += checks.plausibility(run)
            report.errors += checks.record_problems(run)
            checks.statistics(run)
            checks.metadata(run)
            checks.upload_flags(run)
            runs.append(run)
    if report.errors:
        return runs
    hashes = [r.content_sha256 for r in runs]
    if len(set(hashes)) < len(hashes):
        report.errors.append("the same result appears twice in this input")
    if hashes and not report.errors:
        dup = store.rows("SELECT r.content_sha256, s.source_id, s.kind, s.ingested_at FROM run r JOIN source s "
                         "USING (source_id) WHERE r.content_sha256 IN (SELECT unnest(CAST(? AS VARCHAR[])))", [hashes])
        for _, source_id, kind, when in dup[:5]:
            report.errors.append(f"duplicate: these measurements are already in the store ({kind} source {source_id}, "
                                 f"ingested {when:%Y-%m-%d %H:%M} UTC)")
    for run in runs:
        score = next((m.value for m in run.measurements if m.stat == "score"), None)
        if score is not None and (dup := _mlperf_duplicate(store, run, score)):
            report.errors.append(dup)
    return runs


class _RollBack(Exception):
    """Raised inside a dry run's transaction: everything was written and checked, then it is undone."""


def _commit(store: Store, units: list[Parsed], source: Source, report: IngestReport, dry_run: bool) -> IngestReport:
    runs = _check_units(store, units, report)
    if not runs and not report.errors:
        report.errors.append(f"no results found; expected {FORMATS}")
    if report.errors:
        return report
    try:
        with store.transaction() as cur:
            report.rows_added = write(cur, source, runs)
            if dry_run:                              # the database's own constraints checked too, then rolled back
                raise _RollBack
    except _RollBack:
        report.dry_run = True
    except ConstraintViolation as err:        # a concurrent upload of the same content won the race
        report.errors.append(f"duplicate: {str(err).splitlines()[0]}")
        report.rows_added = {}
        return report
    report.ingested = not dry_run
    report.source_id = source.source_id if report.ingested else None
    report.trusted_by = source.trusted_by if report.ingested else None
    report.run_ids = [r.run_id for r in runs]
    report.flags = [f"{r.benchmark}: {f}" for r in runs for f in r.flags]
    return report


@dataclass(frozen=True)
class Uploader:
    """Who an upload comes from: the name typed with it (anyone can type any name), the identity the reverse proxy
    vouched for (APP_IDENTITY_HEADER; None when there is none), and whether the deployment's operator trusts that
    identity's uploads for calibration (APP_TRUSTED_UPLOADERS, or the command line run by the operator)."""
    submitter: str | None = None
    identity: str | None = None
    trusted: bool = False


def _upload_source(name: str, sha: str, n_bytes: int | None, uploader: Uploader) -> Source:
    trusted_by = (uploader.identity or "the operator (command line)") if uploader.trusted else None
    return Source(kind="user_submitted", title=f"upload {name}", submitter=uploader.submitter, filename=name,
                  file_sha256=sha, n_bytes=n_bytes, uploaded_by=uploader.identity, trusted_by=trusted_by,
                  trusted_at=utc_now() if trusted_by else None,
                  notes="user-submitted, unverified (MLPerf-style results are not MLCommons-reviewed unless "
                        "published by MLCommons)")


def _prechecks(store: Store, sha: str, uploader: Uploader, accelerator: str | None) -> list[str]:
    errors = []
    for what, value in (("submitter", uploader.submitter), ("uploader identity", uploader.identity)):
        if value is not None and (msg := checks.text_problem(what, value)):
            errors.append(msg)
    if accelerator is not None and catalog_accelerator(accelerator) is None:
        errors.append(f"accelerator {accelerator[:60]!r} is not a catalog id (see python -m engine catalog)")
    dup = store.rows("SELECT source_id, kind, ingested_at FROM source WHERE file_sha256 = ?", [sha])
    if dup:
        source_id, kind, when = dup[0]
        errors.append(f"duplicate: this file was already ingested ({kind} source {source_id}, {when:%Y-%m-%d %H:%M} UTC)")
    return errors


def ingest_bytes(store: Store, filename: str, data: bytes, submitter: str | None = None,
                 accelerator: str | None = None, max_bytes: int = MAX_FILE_BYTES, dry_run: bool = False,
                 uploader: Uploader | None = None, scenario: dict | str | None = None) -> IngestReport:
    """Check and store one uploaded file (the upload page's entry point). Nothing is written unless all of it is
    valid. `accelerator` names the catalog id where the file's device name is missing or ambiguous. dry_run: check
    everything, the store's constraints included, and report what would be added, but keep nothing. `uploader`
    (default: anonymous, untrusted, named `submitter`) says who sends it and whether it may calibrate. `scenario`
    (JSON text or a dict, with its layout) is the run a training step-time log comes from (benchmarks_db/step_logs.py)."""
    uploader = uploader or Uploader(submitter=submitter)
    report = IngestReport(input=str(filename)[:MAX_NAME_CHARS])
    try:
        return _ingest_bytes(store, filename, data, accelerator, max_bytes, dry_run, uploader, report, scenario)
    except StoreUnavailable as err:             # the store, not the file: say so (e.g. a full disk)
        report.errors.append(f"{report.input}: not stored: {err}")
        report.ingested, report.rows_added, report.source_id = False, {}, None
        return report
    except Exception:                           # a parser bug: the file is refused, the page and the command line
        LOG.exception("ingesting %r failed", report.input)          # keep going (the tests fuzz for these)
        report.errors.append(f"{report.input}: {INTERNAL_ERROR}")
        report.ingested, report.rows_added, report.source_id = False, {}, None
        return report


def _ingest_bytes(store: Store, filename: str, data: bytes, accelerator: str | None, max_bytes: int, dry_run: bool,
                  uploader: Uploader, report: IngestReport, scenario: dict | str | None = None) -> IngestReport:
    if problem := name_problem(filename):
        report.errors.append(problem)
        return report
    if len(data) > max_bytes:
        report.errors.append(f"{filename}: {len(data)} bytes is over the {max_bytes}-byte limit")
        return report
    if not data.strip():
        report.errors.append(f"{filename}: the file is empty")
        return report
    sha = hashlib.sha256(data).hexdigest()
    report.errors += _prechecks(store, sha, uploader, accelerator)
    if report.errors:
        return report
    try:
        if data[:4] == b"PK\x03\x04":
            report.format = "zip"
            units, skipped = parse_tree(zip_members(data, filename, max_bytes), accelerator)
            if skipped:
                report.warnings.append(f"{len(skipped)} file(s) in the archive are not results and were skipped "
                                       f"(e.g. {', '.join(skipped[:3])})")
        else:
            unit = parse_file(filename, decode(data, filename), accelerator, scenario)
            report.format, units = unit.format, [unit]
    except Refused as err:
        report.errors.append(str(err))
        return report
    return _commit(store, units, _upload_source(filename, sha, len(data), uploader), report, dry_run)


def _walk(root: Path, max_bytes: int) -> tuple[dict[PurePosixPath, Callable[[], bytes]], list[str]]:
    """Regular files under root (links are not followed; hidden folders skipped), as lazy size-checked readers."""
    files, skipped = {}, []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for fname in filenames:
            p = Path(dirpath) / fname
            st = p.lstat()
            if not stat.S_ISREG(st.st_mode):
                skipped.append(str(p))
                continue
            if st.st_size > max_bytes:
                skipped.append(f"{p} (over {max_bytes} bytes)")
                continue
            files[PurePosixPath(p.as_posix())] = (lambda q=p: q.read_bytes())
    return files, skipped


def _folder_sha(unit: Parsed, files: dict[PurePosixPath, Callable[[], bytes]]) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in files if str(p).startswith(unit.input + "/")):
        h.update(str(path).encode() + b"\0" + hashlib.sha256(files[path]()).digest())
    return h.hexdigest()


def ingest_path(store: Store, path: str | os.PathLike, submitter: str | None = None, accelerator: str | None = None,
                max_bytes: int = MAX_FILE_BYTES, uploader: Uploader | None = None,
                scenario: dict | str | None = None) -> list[IngestReport]:
    """A file (as ingest_bytes) or a folder: every MLPerf results folder and result file under it, each its own
    transaction, plus a report listing the files skipped as not results."""
    uploader = uploader or Uploader(submitter=submitter)
    p = Path(path)
    if p.is_symlink() or not p.exists():
        return [IngestReport(input=str(path), errors=[f"{path}: no such file or folder (links are not followed)"])]
    if p.is_file():
        size = p.stat().st_size
        if size > max_bytes:
            return [IngestReport(input=str(path), errors=[f"{path}: {size} bytes is over the {max_bytes}-byte limit"])]
        report = ingest_bytes(store, p.name, p.read_bytes(), accelerator=accelerator, max_bytes=max_bytes,
                              uploader=uploader, scenario=scenario)
        report.input = str(path)
        return [report]
    files, skipped = _walk(p.resolve(), max_bytes)
    units, not_results = parse_tree(files, accelerator)
    reports = []
    for unit in units:
        report = IngestReport(input=unit.input, format=unit.format)
        sha = _folder_sha(unit, files) if unit.format == "mlperf_results" else \
            hashlib.sha256(files[PurePosixPath(unit.input)]()).hexdigest()
        report.errors += _prechecks(store, sha, uploader, accelerator)
        if report.errors:
            reports.append(report)
            continue
        reports.append(_commit(store, [unit], _upload_source(unit.input, sha, None, uploader), report, dry_run=False))
    skipped += not_results
    if skipped or not units:
        reports.append(IngestReport(input=str(path), format="folder", ingested=bool(units),
                                    errors=[] if units else [f"{path}: no results found; expected {FORMATS}"],
                                    warnings=[f"{len(skipped)} file(s) skipped as not results "
                                              f"(e.g. {', '.join(skipped[:3])})"] if skipped else []))
    return reports


def ingest_each(store: Store, paths: list[str], accelerator: str | None, max_bytes: int,
                uploader: Uploader, scenario: dict | str | None = None) -> list[IngestReport]:
    """Every path on its own: one that cannot be read or crashes a parser is reported and the rest still run."""
    reports = []
    for path in paths:
        try:
            reports += ingest_path(store, path, accelerator=accelerator, max_bytes=max_bytes, uploader=uploader,
                                   scenario=scenario)
        except Exception as err:               # e.g. a folder that cannot be read; ingest_bytes guards files itself
            LOG.exception("ingesting %r failed", path)
            reports.append(IngestReport(input=str(path), errors=[f"{path}: {INTERNAL_ERROR} ({type(err).__name__}: "
                                                                 f"{str(err)[:200]})"]))
    return reports


def delete_upload(store: Store, source_id: str) -> int:
    """Remove one user upload and everything it added: its source, runs and measurements, and the system and
    software rows no other run uses (the upload page's undo). Published and seed sources cannot be removed."""
    with store.transaction() as cur:
        kind = cur.execute("SELECT kind FROM source WHERE source_id = ?", [source_id]).fetchall()
        if not kind:
            raise KeyError(f"no source {source_id!r}")
        if kind[0][0] != "user_submitted":
            raise PermissionError(f"{source_id} is a {kind[0][0]} source; only user uploads can be removed")
        runs = "SELECT run_id FROM run WHERE source_id = ?"
        cur.execute(f"DELETE FROM measurement WHERE run_id IN ({runs})", [source_id])
        n = cur.execute("DELETE FROM run WHERE source_id = ? RETURNING run_id, system_id, env_id",
                        [source_id]).fetchall()
        cur.execute("DELETE FROM source WHERE source_id = ?", [source_id])
        systems, envs = sorted({r[1] for r in n}), sorted({r[2] for r in n if r[2] is not None})
        cur.execute("DELETE FROM system WHERE system_id IN (SELECT unnest(CAST(? AS VARCHAR[]))) "
                    "AND system_id NOT IN (SELECT system_id FROM run)", [systems])
        cur.execute("DELETE FROM software_env WHERE env_id IN (SELECT unnest(CAST(? AS VARCHAR[]))) "
                    "AND env_id NOT IN (SELECT env_id FROM run WHERE env_id IS NOT NULL)", [envs])
    return len(n)



if __name__ == "__main__":     # the command moved: say where rather than exit 0 having ingested nothing
    raise SystemExit("benchmarks_db.ingest is not a command: use `python -m benchmarks_db ingest PATH ...`")
