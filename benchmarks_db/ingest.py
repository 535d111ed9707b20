"""Ingest results into the store: runner JSON, nccl-tests text, MLPerf Training results (a results folder with its
systems/ JSON, given as any folder above it, as a .zip of such folders, or as a single log) and a simple CSV.

Everything is parsed and checked before anything is written; one file (or one MLPerf results folder when a folder
is given) is one transaction: all of it or none, with errors that name the line or field and the fix.

    python -m benchmarks_db.ingest FILE_OR_FOLDER... [--json] [--submitter NAME] [--accelerator CATALOG_ID] [--trusted]

prints per input whether it was ingested, the rows added, the errors and (MLPerf) the computed score in minutes,
every input on its own (one that is refused or breaks a parser does not stop the others), and exits 1 if any input
was refused. It takes the store's serving lock: beside a running planner it stops with the planner's message.
Uploads calibrate the engine only once trusted (benchmarks_db/trust.py); --trusted: the operator vouches for them.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import os
import stat
import struct
import sys
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable

import duckdb
from pydantic import BaseModel, ConfigDict, computed_field

from benchmarks_db import checks, csv_table, mlperf, nccl_tests, runner_file
from benchmarks_db.accelerators import accelerator as catalog_accelerator
from benchmarks_db.records import Run, Source
from benchmarks_db.store import (SchemaVersionError, Store, StoreBusy, StoreUnavailable, db_path, open_store, serving,
                                  utc_now)
from benchmarks_db.writer import write
from engine import json_input

MAX_FILE_BYTES = 64 * 2**20           # per file, and per unpacked .zip (the app passes APP_MAX_UPLOAD_MB's instead)
MAX_ZIP_ENTRIES = 20_000
# Validating runner JSON takes about 19x its size in memory (a 60 MiB file: 1.15 GB); `run all` writes well under
# 1 MiB, so 8 MiB bounds one upload's parse to about 150 MB.
MAX_RUNNER_JSON_CHARS = 8 * 2**20
# Deflate packs ordinary text 3-25x (the MLPerf sample logs in tests/data: 11-21x); a member packed more than this
# is a decompression bomb (a run of one byte deflates about 1,000x). Small members may pack tighter harmlessly.
MAX_ZIP_RATIO = 100
ZIP_RATIO_FROM_BYTES = 2**20
ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}   # what every common zip tool writes
EOCD = struct.Struct("<4s4H2LH")       # end of central directory (APPNOTE.TXT 4.3.16)
ZIP64_LOCATOR = struct.Struct("<4sLQL")                 # 4.3.15
ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")                # 4.3.14
CENTRAL_HEADER = struct.Struct("<4s6H3L5H2L")           # 4.3.12, 46 bytes before name, extra field and comment
MAX_NAME_CHARS = 255
MLPERF_SCORE_TOL_MIN = 5e-4            # the CSV's scores agree with the summarizer to 5e-4 min
TEXT_SUFFIXES = (".txt", ".log", ".out")
FORMATS = "runner JSON (schema_version 1), nccl-tests text output, an MLPerf result log or a .zip of MLPerf results " \
          "folders, or a CSV with accelerator,metric,value,unit columns"


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


@dataclass
class Parsed:
    input: str
    format: str
    runs: list[Run] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)


class Refused(Exception):
    pass


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


def decode(data: bytes, name: str) -> str:
    if b"\x00" in data[:65536]:
        raise Refused(f"{name}: binary data, not text; expected {FORMATS}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise Refused(f"{name}: not UTF-8 text (byte {err.start}); expected {FORMATS}") from None


# ----------------------------------------------------------------------------------------------- parsing a unit
def parse_file(name: str, text: str, accelerator: str | None) -> Parsed:
    """One stand-alone file, recognised by its content (and suffix for CSV)."""
    head = text[:4000]
    if runner_file.looks_like(head):
        if len(text) > MAX_RUNNER_JSON_CHARS:
            return Parsed(name, "runner_json", errors=[
                f"{name}: {len(text):,} characters; a runner result file is at most {MAX_RUNNER_JSON_CHARS:,} (about "
                f"15,000 results): split the sweep into several files"])
        runs, errors, warnings = runner_file.parse(text, accelerator)
        return Parsed(name, "runner_json", runs, [f"{name}: {e}" for e in errors], warnings)
    if name.lower().endswith(".json"):
        try:
            doc = json_input.loads(text)
        except json_input.JsonInputError as err:
            return Parsed(name, "json", errors=[f"{name}: {err}"])
        if isinstance(doc, dict) and "accelerator_model_name" in doc:
            return Parsed(name, "mlperf_system", errors=[f"{name}: an MLPerf system description has no results; upload "
                                                         f"the submitter folder (systems/ and results/) as a .zip"])
        return Parsed(name, "json", errors=[f"{name}: a JSON file must be a runner result (schema_version 1, results)"])
    if ":::MLLOG" in text[:2_000_000]:
        res = mlperf.parse_single_log(text, name, accelerator)
        return Parsed(name, "mlperf_log", [res.run] if res.run else [], res.errors, res.warnings,
                      {name: res.score_minutes} if res.score_minutes is not None else {})
    if name.lower().endswith(".csv") or csv_table.looks_like(head):      # before nccl-tests: a table may have
        runs, errors, warnings = csv_table.parse(text, name, accelerator)   # algbw and busbw columns too
        return Parsed(name, "csv", runs, errors, warnings)
    if nccl_tests.looks_like(head):
        run, errors = nccl_tests.parse(text, name, accelerator)
        return Parsed(name, "nccl_tests", [run] if run else [], errors)
    return Parsed(name, "unknown", errors=[f"{name}: not a recognised format; expected {FORMATS}"])


def _json_file(read: Callable[[], bytes], path: str) -> tuple[dict | None, str | None]:
    try:
        doc = json_input.loads(decode(read(), path))
    except Refused as err:
        return None, str(err)
    except json_input.JsonInputError as err:
        return None, f"{path}: {err}"
    return (doc, None) if isinstance(doc, dict) else (None, f"{path}: expected a JSON object")


def parse_mlperf_folder(folder: PurePosixPath, logs: dict[str, Callable[[], bytes]],
                        files: dict[PurePosixPath, Callable[[], bytes]]) -> Parsed:
    """<...>/<submitter>/results/<system>/<benchmark>/ with its result_N.txt readers; `files` has every file of the
    upload, to find systems/<system>.json and scaling.json."""
    benchmark, system = folder.name, folder.parent.name
    in_layout = folder.parent.parent.name == "results"
    submitter_dir = folder.parent.parent.parent
    display = str(folder)
    errors = []
    system_doc = scaling_doc = None
    sys_path = submitter_dir / "systems" / f"{system}.json"
    if in_layout and sys_path in files:
        system_doc, err = _json_file(files[sys_path], str(sys_path))
        errors += [err] if err else []
    if folder / "scaling.json" in files:
        scaling_doc, err = _json_file(files[folder / "scaling.json"], f"{display}/scaling.json")
        errors += [err] if err else []
    texts = {}
    for name, read in logs.items():
        try:
            texts[name] = decode(read(), f"{display}/{name}")
        except Refused as err:
            errors.append(str(err))
    if errors:
        return Parsed(display, "mlperf_results", errors=errors)
    res = mlperf.parse_results_folder(texts, system_doc, scaling_doc, benchmark, system,
                                      submitter_dir.name if in_layout else None, display)
    if res.run is not None:
        found = mlperf.ROUND_IN_PATH.search(display)
        res.run.mlperf_round = found.group(1) if found else None
    return Parsed(display, "mlperf_results", [res.run] if res.run else [], res.errors, res.warnings,
                  {display: res.score_minutes} if res.score_minutes is not None else {})


def parse_tree(files: dict[PurePosixPath, Callable[[], bytes]], accelerator: str | None) -> tuple[list[Parsed], list[str]]:
    """Find the results in a set of files (a folder or an archive): MLPerf results folders (result_N.txt grouped
    by folder) and stand-alone result files. Returns the parsed units and the paths skipped as not results."""
    groups: dict[PurePosixPath, dict[str, Callable[[], bytes]]] = {}
    for path, read in files.items():
        if mlperf.RESULT_FILE.match(path.name):
            groups.setdefault(path.parent, {})[path.name] = read
    units = [parse_mlperf_folder(folder, logs, files) for folder, logs in sorted(groups.items())]
    claimed = {f / n for f, logs in groups.items() for n in logs}
    skipped = []
    for path, read in sorted(files.items()):
        if path in claimed or path.name == "scaling.json" or path.parent.name == "systems":
            continue
        suffix = path.suffix.lower()
        if suffix not in (".json", ".csv") + TEXT_SUFFIXES:
            skipped.append(str(path))
            continue
        try:
            text = decode(read(), str(path))
        except Refused:
            skipped.append(str(path))
            continue
        head = text[:4000]
        recognised = (runner_file.looks_like(head) if suffix == ".json" else
                      csv_table.looks_like(head) if suffix == ".csv" else
                      nccl_tests.looks_like(head) or ":::MLLOG" in head)
        if recognised:
            units.append(parse_file(str(path), text, accelerator))
        else:
            skipped.append(str(path))
    return units, skipped


# ----------------------------------------------------------------------------------------------- checks and write
def _mlperf_duplicate(store: Store, run: Run, score: float) -> str | None:
    """The same MLPerf result already stored (published, or uploaded before from a folder, a .zip or another round's
    listing): same system folder, benchmark and score."""
    rows = store.rows(
        "SELECT s.kind, r.mlperf_round, r.submitter_org, m.value FROM run r JOIN source s USING (source_id) "
        "JOIN measurement m USING (run_id) WHERE r.benchmark = ? AND m.stat = 'score' "
        "AND json_extract_string(r.params, '$.mlperf_system') = ? AND abs(m.value - ?) < ? "
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
                         "USING (source_id) WHERE r.content_sha256 IN (SELECT unnest(?))", [hashes])
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
    except duckdb.ConstraintException as err:        # a concurrent upload of the same content won the race
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


def _zip_directory(data: bytes, name: str) -> None:
    """Refuse an archive whose central directory is too large before zipfile reads it (zipfile builds an object per
    entry: 1.3 million entries took 13 s): walk the directory's fixed-size headers, stopping past MAX_ZIP_ENTRIES."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - EOCD.size - 0xFFFF))
    if end < 0 or end + EOCD.size > len(data):
        raise Refused(f"{name}: not a readable .zip archive (no end of central directory record)")
    _, _, _, _, entries, size, _, _ = EOCD.unpack_from(data, end)
    start = end - size
    if entries == 0xFFFF or size == 0xFFFFFFFF:                  # ZIP64: the sizes are in the ZIP64 record
        locator = end - ZIP64_LOCATOR.size
        record = locator - ZIP64_EOCD.size
        if record < 0 or data[locator:locator + 4] != b"PK\x06\x07" or data[record:record + 4] != b"PK\x06\x06":
            raise Refused(f"{name}: not a readable .zip archive (its ZIP64 directory record is missing)")
        size = ZIP64_EOCD.unpack_from(data, record)[8]
        start = record - size
    if start < 0:
        raise Refused(f"{name}: not a readable .zip archive (the central directory lies outside the file)")
    pos, count = start, 0
    while pos < start + size:
        if data[pos:pos + 4] != b"PK\x01\x02" or pos + CENTRAL_HEADER.size > len(data):
            raise Refused(f"{name}: not a readable .zip archive (damaged central directory)")
        name_len, extra_len, comment_len = struct.unpack_from("<3H", data, pos + 28)
        pos += CENTRAL_HEADER.size + name_len + extra_len + comment_len
        count += 1
        if count > MAX_ZIP_ENTRIES:
            raise Refused(f"{name}: more than {MAX_ZIP_ENTRIES:,} entries; upload fewer results at once")


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why one entry is not unpacked: an unsafe path, a link, encryption, an unusual compression, a bomb."""
    path = PurePosixPath(info.filename)
    if (info.filename.startswith(("/", "\\")) or "\\" in info.filename or ".." in path.parts or ":" in info.filename
            or checks.CONTROL_CHARS.search(info.filename) or stat.S_ISLNK(info.external_attr >> 16)):
        return "has an unsafe path (absolute, '..', a link or a drive)"
    if info.flag_bits & 0x1:
        return "is encrypted; upload an archive without a password"
    if info.compress_type not in ZIP_METHODS:
        return (f"uses compression method {info.compress_type}; re-create the archive with ordinary deflate "
                f"compression (zip, or 'Compress' in a file manager)")
    if info.file_size > ZIP_RATIO_FROM_BYTES and info.file_size > MAX_ZIP_RATIO * max(info.compress_size, 1):
        return (f"unpacks {info.compress_size:,} bytes to {info.file_size:,}, more than {MAX_ZIP_RATIO}x: a "
                f"decompression bomb, not result files")
    return None


def _zip_members(data: bytes, name: str, max_bytes: int) -> dict[PurePosixPath, Callable[[], bytes]]:
    """The archive's files, each checked from the central directory before anything is unpacked: the number of
    entries, duplicate names, paths, compression method and ratio, and the total unpacked size."""
    _zip_directory(data, name)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, struct.error,
            NotImplementedError) as err:
        raise Refused(f"{name}: not a readable .zip archive ({err})") from None
    if any(not info.filename for info in infos):
        raise Refused(f"{name}: not a readable .zip archive (an entry has no name)")
    files = [info for info in infos if not info.is_dir()]
    seen, total = set(), 0
    for info in files:
        shown = info.filename[:80]
        if info.filename in seen:
            raise Refused(f"{name}: two entries are named {shown!r}; an archive must not hold the same path twice")
        seen.add(info.filename)
        if problem := _member_problem(info):
            raise Refused(f"{name}: entry {shown!r} {problem}; refused")
        total += info.file_size
        if total > max_bytes:
            raise Refused(f"{name}: unpacks to more than {max_bytes} bytes (the limit); upload fewer results at once")
    members = {}
    for info in files:
        try:
            with zf.open(info) as fh:
                content = fh.read(info.file_size + 1)
        except (zipfile.BadZipFile, zlib.error, OSError, RuntimeError, ValueError, EOFError,
                NotImplementedError) as err:
            raise Refused(f"{name}: entry {info.filename[:80]!r} cannot be unpacked ({str(err)[:120]}); the "
                          f"archive is damaged: create it again") from None
        if len(content) != info.file_size:
            raise Refused(f"{name}: entry {info.filename[:80]!r} is not the size its header says; refused")
        members[PurePosixPath(info.filename)] = (lambda c=content: c)
    return members


def ingest_bytes(store: Store, filename: str, data: bytes, submitter: str | None = None,
                 accelerator: str | None = None, max_bytes: int = MAX_FILE_BYTES, dry_run: bool = False,
                 uploader: Uploader | None = None) -> IngestReport:
    """Check and store one uploaded file (the upload page's entry point). Nothing is written unless all of it is
    valid. `accelerator` names the catalog id where the file's device name is missing or ambiguous. dry_run: check
    everything, the store's constraints included, and report what would be added, but keep nothing. `uploader`
    (default: anonymous, untrusted, named `submitter`) says who sends it and whether it may calibrate."""
    uploader = uploader or Uploader(submitter=submitter)
    report = IngestReport(input=str(filename)[:MAX_NAME_CHARS])
    try:
        return _ingest_bytes(store, filename, data, accelerator, max_bytes, dry_run, uploader, report)
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
                  uploader: Uploader, report: IngestReport) -> IngestReport:
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
            units, skipped = parse_tree(_zip_members(data, filename, max_bytes), accelerator)
            if skipped:
                report.warnings.append(f"{len(skipped)} file(s) in the archive are not results and were skipped "
                                       f"(e.g. {', '.join(skipped[:3])})")
        else:
            unit = parse_file(filename, decode(data, filename), accelerator)
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
                max_bytes: int = MAX_FILE_BYTES, uploader: Uploader | None = None) -> list[IngestReport]:
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
                              uploader=uploader)
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


def _ingest_each(store: Store, paths: list[str], accelerator: str | None, max_bytes: int,
                 uploader: Uploader) -> list[IngestReport]:
    """Every path on its own: one that cannot be read or crashes a parser is reported and the rest still run."""
    reports = []
    for path in paths:
        try:
            reports += ingest_path(store, path, accelerator=accelerator, max_bytes=max_bytes, uploader=uploader)
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
        cur.execute("DELETE FROM system WHERE system_id IN (SELECT unnest(?)) "
                    "AND system_id NOT IN (SELECT system_id FROM run)", [systems])
        cur.execute("DELETE FROM software_env WHERE env_id IN (SELECT unnest(?)) "
                    "AND env_id NOT IN (SELECT env_id FROM run WHERE env_id IS NOT NULL)", [envs])
    return len(n)


# ----------------------------------------------------------------------------------------------- command line
def _human(r: IngestReport) -> str:
    status = "folder  " if r.format == "folder" and r.ingested else "ingested" if r.ingested else "REFUSED "
    lines = [f"{status} {r.input}" + (f" [{r.format}]" if r.format and r.format != "folder" else "")]
    if r.rows_added:
        lines.append("  rows added: " + ", ".join(f"{k} {v}" for k, v in r.rows_added.items()))
    lines += [f"  MLPerf score {path}: {minutes:.4f} min" for path, minutes in r.mlperf_scores.items()]
    lines += [f"  error: {e}" for e in r.errors[:50]]
    lines += [f"  flagged: {f}" for f in r.flags[:20]]
    lines += [f"  note: {w}" for w in r.warnings[:20]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks_db.ingest", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", metavar="FILE_OR_FOLDER")
    ap.add_argument("--json", action="store_true", help="one JSON report per input on stdout")
    ap.add_argument("--submitter", help="your name or team, stored with the upload")
    ap.add_argument("--accelerator", help="catalog id of the device when the file's name for it is missing or ambiguous")
    ap.add_argument("--max-bytes", type=int, default=MAX_FILE_BYTES, help="largest accepted file (bytes)")
    ap.add_argument("--trusted", action="store_true",
                    help="you run this deployment and vouch for these results: they calibrate the engine at once "
                         "(otherwise: python -m benchmarks_db trust SOURCE_ID later)")
    ap.add_argument("--db", help="store path (default: $APP_DB_PATH or var/planner.duckdb)")
    args = ap.parse_args(argv)
    path = db_path(args.db)
    reports: list[IngestReport] = []
    try:
        with serving(path):
            store = open_store(path)
            try:
                reports = _ingest_each(store, args.paths, args.accelerator, args.max_bytes,
                                       Uploader(submitter=args.submitter, trusted=args.trusted))
            finally:
                store.close()
    except StoreBusy as err:
        print(f"{err}\nStop it before ingesting from the command line, or upload through its Benchmarks page.",
              file=sys.stderr)
        return 2
    except (duckdb.IOException, SchemaVersionError) as err:
        print(f"cannot open the store: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    finally:                                   # whatever happened, every file tried so far is reported
        if reports:
            print(json.dumps([r.model_dump() for r in reports], indent=1) if args.json else
                  "\n".join(_human(r) for r in reports), flush=True)
    return 0 if all(r.ingested for r in reports) else 1


if __name__ == "__main__":
    from engine.command_line import run
    run(main)
