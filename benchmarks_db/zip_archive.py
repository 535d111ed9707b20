"""Zip defences: an uploaded .zip is checked from its central directory before anything is unpacked: the number of
entries (walked by hand before zipfile builds an object per entry), duplicate names, unsafe paths and links,
encryption, unusual compression methods, decompression bombs (the packing ratio of each member) and the total
unpacked size. What passes is handed on as the archive's files, each read lazily."""
from __future__ import annotations

import io
import stat
import struct
import zipfile
import zlib
from pathlib import PurePosixPath
from typing import Callable

from benchmarks_db import checks
from benchmarks_db.dispatch import Refused

MAX_ZIP_ENTRIES = 20_000
# Deflate packs ordinary text 3-25x (the MLPerf sample logs in tests/data: 11-21x); a member packed more than this
# is a decompression bomb (a run of one byte deflates about 1,000x). Small members may pack tighter harmlessly.
MAX_ZIP_RATIO = 100
ZIP_RATIO_FROM_BYTES = 2**20
ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}   # what every common zip tool writes
EOCD = struct.Struct("<4s4H2LH")       # end of central directory (APPNOTE.TXT 4.3.16)
ZIP64_LOCATOR = struct.Struct("<4sLQL")                 # 4.3.15
ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")                # 4.3.14
CENTRAL_HEADER = struct.Struct("<4s6H3L5H2L")           # 4.3.12, 46 bytes before name, extra field and comment


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


def zip_members(data: bytes, name: str, max_bytes: int) -> dict[PurePosixPath, Callable[[], bytes]]:
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

