"""nccl-tests text output (NVIDIA/nccl-tests src/common.cu): a '#' header (version, sweep, one '# Rank ...' line per
rank with host and device), then one row per message size:

    size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong     (out-of-place | in-place)

Older or trimmed outputs leave out root, #wrong or the in-place half; all three layouts are read. time in us,
algbw and busbw in GB/s (1e9 B/s): algbw = size / time, busbw = algbw x factor(op, ranks).
"""
from __future__ import annotations

import math
import re
from collections import Counter

from benchmarks_db.accelerators import catalog_id, device_type
from benchmarks_db.checks import COLLECTIVE_OPS, bus_factor, close, lines, text_problem
from benchmarks_db.records import Measurement, Run, Software, System, sha256_text

# ASCII digits only: int() also reads other scripts' digits, and str.isdigit() accepts '²', which int() refuses
# Every pattern below runs in time linear in its line: each repeat is followed by something it cannot match (no two
# ways to split a run of spaces or digits), and each is tried at one place or searched for a literal that starts it.
# A lazy '(.+?)\s*$' tried every split of a run of spaces (a 120 KB rank line took 119 s, holding the interpreter and
# with it the whole server); '[0-9]+\.?[0-9]*' tried every split of a run of digits. Lines are capped as well.
# The line is stripped first, so the device name runs to its end.
RANK_LINE = re.compile(r"#\s*Rank\s+(\d{1,9})\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+"
                       r"\[[^\]]*\]\s+(.+)", re.ASCII)
VERSION = re.compile(r"nccl-tests version (\S+)", re.ASCII)
LIBRARY = re.compile(r"nccl-library=(\d{1,9})", re.ASCII)
TEST_NAME = re.compile(r"Collective test starting:\s*(\w+)", re.ASCII)
NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?", re.ASCII)
MAX_LINE_CHARS = 2000                      # nccl-tests prints lines of about 60-200 characters
WHOLE = re.compile(r"[0-9]{1,18}")         # below 2^63: the store's BIGINT
MAX_ROWS = 10_000
MAX_NODES = 100_000                        # as the runner result schema (result_schema.py SystemInfo.n_nodes)


def looks_like(text: str) -> bool:
    head = text[:4000]
    return "nccl-tests" in head or "Collective test starting" in head or ("algbw" in head and "busbw" in head)


def _op(test: str | None, filename: str) -> str | None:
    for cand in (test or "", filename):
        name = cand.lower()
        for op in sorted(COLLECTIVE_OPS, key=len, reverse=True):
            if name.startswith(op.replace("_", "")) or name.startswith(op):
                return op
    return None


def _timed_iters(words: list[str]) -> int | None:
    """'warmup iters: 1 iters: 20 agg iters: 1' -> 20 (the timed iterations per size)."""
    for i, w in enumerate(words[:-1]):
        if w == "iters:" and (i == 0 or words[i - 1] not in ("warmup", "agg")) \
                and re.fullmatch(r"[0-9]{1,9}", words[i + 1]):
            return int(words[i + 1])
    return None


def _nccl_version(code: str) -> str:
    """NCCL_VERSION_CODE 22005 -> 2.20.5 (major*10000 + minor*100 + patch since 2.9)."""
    n = int(code)
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}" if n >= 10000 else f"{n // 1000}.{n // 100 % 10}.{n % 100}"


def parse(text: str, filename: str, accelerator: str | None) -> tuple[Run | None, list[str]]:
    try:
        return _parse(text, filename, accelerator)
    except ValueError as err:                   # checks.lines: more lines than any output
        return None, [f"{filename}: {err}"]


def _parse(text: str, filename: str, accelerator: str | None) -> tuple[Run | None, list[str]]:
    errors: list[str] = []
    ranks: dict[int, tuple[str, str]] = {}
    version = nccl = test = None
    iters = None
    rows: list[tuple[int, list[str]]] = []
    header: list[str] = []
    for lineno, line in lines(text):
        s = line.strip()
        if not s:
            continue
        if len(s) > MAX_LINE_CHARS:
            return None, [f"{filename}: line {lineno} is {len(s):,} characters long; nccl-tests prints lines of at "
                          f"most a few hundred (upload the output as the test printed it)"]
        if s.startswith("#"):
            words = s.lstrip("#").split()
            if words[:2] == ["size", "count"]:
                header = words
            elif m := RANK_LINE.fullmatch(s):
                ranks[int(m.group(1))] = (m.group(2), m.group(3))
            elif (m := VERSION.search(s)) and (lib := LIBRARY.search(s, m.end())):
                version, nccl = m.group(1), _nccl_version(lib.group(1))
            elif m := TEST_NAME.search(s):
                test = m.group(1)
            elif "iters:" in words and iters is None:
                iters = _timed_iters(words)
            continue
        fields = s.split()
        if fields and fields[0].isdigit():
            rows.append((lineno, fields))
            if len(rows) > MAX_ROWS:
                return None, [f"{filename}: more than {MAX_ROWS} result rows; at most {MAX_ROWS} are accepted"]
    op = _op(test, filename)
    if op is None:
        return None, [f"{filename}: cannot tell which collective this is: the '# Collective test starting: <name>' "
                      f"line is missing; name the file after the test (e.g. all_reduce_perf.txt)"]
    if not ranks:
        return None, [f"{filename}: no '# Rank N Group G Pid P on HOST device D [...] NAME' lines: the rank count and "
                      f"placement are unknown; upload the complete output"]
    if not rows:
        return None, [f"{filename}: no result rows (size count type redop ... time algbw busbw)"]
    n = len(ranks)
    if n < 2 or sorted(ranks) != list(range(n)):
        return None, [f"{filename}: ranks {sorted(ranks)[:10]} must be 0..n-1 with n >= 2 for a collective"]
    hosts = sorted({h for h, _ in ranks.values()})
    if len(hosts) > MAX_NODES:
        return None, [f"{filename}: {len(hosts):,} hosts; at most {MAX_NODES:,} nodes are accepted"]
    devices = sorted({d for _, d in ranks.values()})
    for field, value in (("device name", devices[0]), ("host name", hosts[0])):
        if msg := text_problem(f"{filename}: {field}", value):
            errors.append(msg)
    if len(devices) > 1:
        errors.append(f"{filename}: mixed devices {devices[:4]}; one result file must come from one accelerator type")
    per_node = dict(Counter(h for h, _ in ranks.values()))
    if len(set(per_node.values())) > 1:
        shown = ", ".join(f"{h[:40]}: {k}" for h, k in list(per_node.items())[:4])
        errors.append(f"{filename}: uneven ranks per node ({shown}{', ...' if len(per_node) > 4 else ''}): busbw is "
                      f"not comparable")
    if not header:
        return None, [f"{filename}: the column header line '#  size  count  type  redop ... time  algbw  busbw' is "
                      f"missing; upload the complete output"]
    has_root, per_half = "root" in header, 4 if "#wrong" in header else 3
    measurements = []
    factor = bus_factor(op, n)
    for lineno, f in rows:
        lead = 5 if has_root else 4
        rest = f[lead:]
        if len(f) < lead + 3 or len(rest) not in (per_half, 2 * per_half) or not all(NUMBER.fullmatch(x) for x in rest):
            errors.append(f"line {lineno}: expected the columns {' '.join(header)}; got {' '.join(f)[:120]!r}")
            continue
        if not (WHOLE.fullmatch(f[0]) and WHOLE.fullmatch(f[1]) and re.fullmatch(r"[a-z0-9_]{1,16}", f[2])
                and re.fullmatch(r"[a-z0-9_]{1,16}", f[3])):
            errors.append(f"line {lineno}: count, type and redop look wrong in {' '.join(f[:4])[:80]!r}")
            continue
        size, count = int(f[0]), int(f[1])
        halves = [("out_of_place", rest[:per_half]), ("in_place", rest[per_half:])]
        for place, vals in halves:
            if not vals:
                continue
            t_us, algbw, busbw = (float(v) for v in vals[:3])
            if t_us <= 0 or size <= 0 or not all(math.isfinite(x) for x in (t_us, algbw, busbw)):
                errors.append(f"line {lineno}: size and time must be finite numbers above zero")
                break
            # printed with 2 decimals: allow half a unit of rounding on each figure on top of 1%
            if not close(algbw, size / t_us / 1e3, abs_tol=0.006):
                errors.append(f"line {lineno}: {place} algbw {algbw} GB/s != size/time = {size / t_us / 1e3:.3f}; "
                              f"the columns are not size(B) ... time(us) algbw(GB/s)")
                break
            if not close(busbw, algbw * factor, abs_tol=0.006 * (1 + factor)):
                errors.append(f"line {lineno}: {place} busbw {busbw} != algbw x {factor:.4g} (= {algbw * factor:.3f}) for "
                              f"{op} on {n} ranks; the rank lines do not match the run")
                break
            if algbw <= 0:
                continue                    # too small to show at 2 decimals: nothing to store
            common = dict(op=op, message_bytes=size, n_ranks=n, n_nodes=len(hosts), backend="nccl", stat="mean",
                          n_samples=iters, where=f"line {lineno}",
                          params={"in_place": place == "in_place", "time_us": t_us, "count": count, "type": f[2]})
            measurements.append(Measurement("busbw", busbw, "GB/s", **common))
            measurements.append(Measurement("algbw", algbw, "GB/s", **common))
    if errors:
        return None, errors[:50]
    raw = devices[0]
    accel = accelerator or catalog_id(raw)
    system = System(accelerator_raw=raw, accelerator_id=accel, device_type=device_type(accel, raw),
                    accelerators_per_node=n // len(hosts), n_nodes=len(hosts), n_accelerators=n,
                    extra={"hosts_sha256": [sha256_text(h)[:16] for h in hosts]})     # host names are stored hashed
    run = Run(suite="microbench", benchmark="collectives", tool="nccl-tests", tool_version=version, system=system,
              software=Software(nccl_version=nccl), measurements=measurements,
              params={"op": op, "test": test, "n_ranks": n, "n_nodes": len(hosts)})
    return run, []
