"""The deployment's settings: every environment variable the app reads, read and checked here (no Streamlit import, so
serve.py checks them before the server starts).

    APP_DB_PATH                     the DuckDB store (default var/planner.duckdb; /data/planner.duckdb in the image)
    APP_DB_URL                      postgresql://USER:PASSWORD@HOST:PORT/DATABASE: the store is that PostgreSQL
                                    database instead (several replicas share it); never printed with its password
    STREAMLIT_SERVER_BASE_URL_PATH  Streamlit's own: the path the app is served under behind a reverse proxy
    APP_MAX_UPLOAD_MB               the largest upload in MB of 2^20 bytes (default 64): Streamlit's server limit, the
                                    upload widget's and the store's ingestion limit
    APP_READ_ONLY                   true: uploads and saving scenarios are off and the store is opened read-only
    APP_TITLE                       the browser tab's title and the heading of the sidebar
    APP_IDENTITY_HEADER             the request header in which the reverse proxy names the signed-on user (e.g.
                                    X-Forwarded-Email); recorded with every upload, owns saved scenarios. The
                                    proxy must set it itself
    APP_TRUSTED_UPLOADERS           comma-separated identities (values of that header) whose uploads calibrate the
                                    engine on arrival; everybody else's wait for `python -m benchmarks_db trust`
    APP_MAX_CONCURRENT_WORK         layout searches, vendor comparisons and ingestions running at once (default 1);
                                    more wait their turn, each may take about a GB at the search's candidate limit
    APP_MAX_PENDING_UPLOAD_MB       all uploaded files the server holds at once, every session together (default 4x
                                    APP_MAX_UPLOAD_MB); an upload past it is refused with 413 until others are done
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from benchmarks_db.ingest import MAX_FILE_BYTES
from benchmarks_db.store import StoreConfigError, db_path, mask_url, store_target

DEFAULT_MAX_UPLOAD_MB = MAX_FILE_BYTES // 2**20
MAX_UPLOAD_MB_LIMIT = 1024        # uploads are held in memory while they are checked
DEFAULT_TITLE = "LLM Training Capacity Planner"
MAX_TITLE_CHARS = 80
TRUE, FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
URL_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")
HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")
MAX_CONCURRENT_WORK_LIMIT = 64


class SettingsError(ValueError):
    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Settings:
    db_path: Path                 # the DuckDB store, unless db_url names a PostgreSQL one
    base_url_path: str            # without leading or trailing slashes; "" when served at the root
    max_upload_mb: int
    read_only: bool
    title: str
    identity_header: str | None = None          # lower case, as Streamlit's st.context.headers matches any case
    trusted_uploaders: frozenset[str] = frozenset()
    max_concurrent_work: int = 1
    max_pending_upload_mb: int = 4 * DEFAULT_MAX_UPLOAD_MB
    db_url: str | None = None     # APP_DB_URL: the PostgreSQL store

    @property
    def store_target(self) -> Path | str:
        """What open_store takes: the PostgreSQL URL when set, else the DuckDB file."""
        return self.db_url or self.db_path

    @property
    def store_location(self) -> str:
        """The store as logs and messages name it (the URL without its password)."""
        return mask_url(self.db_url) if self.db_url else str(self.db_path)

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb * 2**20


def load_settings() -> Settings:
    """The settings from the environment, or SettingsError naming every variable that is wrong and what it takes."""
    env, problems = os.environ, []
    path, url = db_path(), None
    try:
        target = store_target()
        url = target if isinstance(target, str) else None
    except StoreConfigError as err:
        problems.append(str(err))
    if url is None and path.is_dir():
        problems.append(f"APP_DB_PATH={path} is a folder: name the store file in it, e.g. {path / 'planner.duckdb'}")
    base = env.get("STREAMLIT_SERVER_BASE_URL_PATH", "").strip().strip("/")
    if base and not all(URL_SEGMENT.fullmatch(s) for s in base.split("/")):
        problems.append(f"STREAMLIT_SERVER_BASE_URL_PATH={base!r}: use path segments of letters, digits and ._~- "
                        "separated by '/', e.g. 'planner' or 'tools/planner'")
    raw_mb = env.get("APP_MAX_UPLOAD_MB", "").strip()
    max_mb = DEFAULT_MAX_UPLOAD_MB
    if raw_mb:
        max_mb = int(raw_mb) if raw_mb.isdigit() else 0
        if not 1 <= max_mb <= MAX_UPLOAD_MB_LIMIT:
            problems.append(f"APP_MAX_UPLOAD_MB={raw_mb!r}: a whole number of MB from 1 to {MAX_UPLOAD_MB_LIMIT} "
                            f"(default {DEFAULT_MAX_UPLOAD_MB})")
    raw_ro = env.get("APP_READ_ONLY", "").strip().lower()
    if raw_ro not in TRUE + FALSE:
        problems.append(f"APP_READ_ONLY={raw_ro!r}: true or false (also 1/0, yes/no, on/off; default false)")
    title = env.get("APP_TITLE", "").strip() or DEFAULT_TITLE
    if len(title) > MAX_TITLE_CHARS or not title.isprintable():
        problems.append(f"APP_TITLE: at most {MAX_TITLE_CHARS} printable characters (default {DEFAULT_TITLE!r})")
    header = env.get("APP_IDENTITY_HEADER", "").strip()
    if header and not HEADER_NAME.fullmatch(header):
        problems.append(f"APP_IDENTITY_HEADER={header[:80]!r}: an HTTP header name (letters, digits and '-'), e.g. "
                        "X-Forwarded-Email")
    trusted = frozenset(u.strip() for u in env.get("APP_TRUSTED_UPLOADERS", "").split(",") if u.strip())
    if trusted and not header:
        problems.append("APP_TRUSTED_UPLOADERS needs APP_IDENTITY_HEADER: without the reverse proxy's identity "
                        "header no upload can be told apart from an anonymous one")
    work = _whole(env, "APP_MAX_CONCURRENT_WORK", 1, 1, MAX_CONCURRENT_WORK_LIMIT, problems)
    pending = _whole(env, "APP_MAX_PENDING_UPLOAD_MB", 4 * max_mb, max_mb, 64 * MAX_UPLOAD_MB_LIMIT, problems,
                     "APP_MAX_UPLOAD_MB")
    if problems:
        raise SettingsError(problems)
    return Settings(db_path=path, base_url_path=base, max_upload_mb=max_mb, read_only=raw_ro in TRUE, title=title,
                    identity_header=header.lower() or None, trusted_uploaders=trusted, max_concurrent_work=work,
                    max_pending_upload_mb=pending, db_url=url)


def _whole(env, name: str, default: int, low: int, high: int, problems: list[str], low_name: str = "") -> int:
    """A whole-number setting within [low, high] (default when unset); the problem is appended when it is not."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    value = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 10 else 0
    if not low <= value <= high:
        problems.append(f"{name}={raw[:40]!r}: a whole number from {low}{f' ({low_name})' if low_name else ''} to "
                        f"{high} (default {default})")
    return value

