"""The deployment's settings: every environment variable the app reads, read and checked here (no Streamlit import, so
serve.py checks them before the server starts).

    APP_DB_PATH                     the DuckDB store (default var/planner.duckdb; /data/planner.duckdb in the image)
    STREAMLIT_SERVER_BASE_URL_PATH  Streamlit's own: the path the app is served under behind a reverse proxy
    APP_MAX_UPLOAD_MB               the largest upload in MB of 2^20 bytes (default 64): Streamlit's server limit, the
                                    upload widget's and the store's ingestion limit
    APP_READ_ONLY                   true: uploads and saving scenarios are off and the store is opened read-only
    APP_TITLE                       the browser tab's title and the heading of the sidebar
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from benchmarks_db.ingest import MAX_FILE_BYTES
from benchmarks_db.store import db_path

DEFAULT_MAX_UPLOAD_MB = MAX_FILE_BYTES // 2**20
MAX_UPLOAD_MB_LIMIT = 1024        # uploads are held in memory while they are checked
DEFAULT_TITLE = "LLM Training Capacity Planner"
MAX_TITLE_CHARS = 80
TRUE, FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
URL_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")


class SettingsError(ValueError):
    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Settings:
    db_path: Path
    base_url_path: str            # without leading or trailing slashes; "" when served at the root
    max_upload_mb: int
    read_only: bool
    title: str

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb * 2**20


def load_settings() -> Settings:
    """The settings from the environment, or SettingsError naming every variable that is wrong and what it takes."""
    env, problems = os.environ, []
    path = db_path()
    if path.is_dir():
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
    if problems:
        raise SettingsError(problems)
    return Settings(db_path=path, base_url_path=base, max_upload_mb=max_mb, read_only=raw_ro in TRUE, title=title)

