import sys
import time

import pytest

from benchmarks_db import nccl_tests
from benchmarks_db.ingest import ingest_bytes
from benchmarks_db.nccl_tests import parse

from .helpers import seed003_nccl_sample

# The 21 rows of the seed 003 sample: size (B), time (us), algbw, busbw (GB/s) as printed.
SEED003_LAST = (8388608, 191.09, 43.90, 76.82)


def test_seed003_sample_parses_with_placement_and_versions():
    run, errors = parse(seed003_nccl_sample(), "all_reduce.txt", None)
    assert errors == []
    s = run.system
    assert (s.accelerator_raw, s.accelerator_id, s.n_accelerators, s.n_nodes, s.accelerators_per_node) == \
           ("NVIDIA H100", None, 8, 2, 4)                        # "NVIDIA H100" is ambiguous: not mapped
    assert run.software.nccl_version == "2.20.5" and run.tool_version == "2.18.3"
    busbw = [m for m in run.measurements if m.metric == "busbw"]
    assert busbw[-1].message_bytes == SEED003_LAST[0] and busbw[-1].value == SEED003_LAST[3]
    assert busbw[-1].params["time_us"] == SEED003_LAST[1] and busbw[-1].n_samples == 20
    # algbw = size / time and busbw = algbw x 2(n-1)/n with n = 8, recomputed here
    assert SEED003_LAST[0] / SEED003_LAST[1] / 1e3 == pytest.approx(SEED003_LAST[2], abs=0.005)
    assert SEED003_LAST[2] * 2 * 7 / 8 == pytest.approx(SEED003_LAST[3], abs=0.01)
    assert all(m.op == "all_reduce" and m.n_ranks == 8 for m in run.measurements)
    # rows whose algbw prints as 0.00 carry no information and are not stored
    assert len(busbw) == 17


def test_host_names_are_stored_hashed(store):
    report = ingest_bytes(store, "all_reduce.txt", seed003_nccl_sample().encode(), accelerator="H100-SXM5-80GB")
    assert report.ingested, report.errors
    extra = store.rows("SELECT extra FROM system")[0][0]
    assert "as01r4b08" not in extra and "hosts_sha256" in extra
    assert store.rows("SELECT DISTINCT accelerator_id FROM system") == [("H100-SXM5-80GB",)]


def test_inconsistent_busbw_is_refused_with_its_line(store):
    text = seed003_nccl_sample().replace("43.90   76.82", "43.90   86.82")
    before = store.counts()
    report = ingest_bytes(store, "all_reduce.txt", text.encode())
    assert not report.ingested
    assert report.errors[0].startswith("line ") and "busbw 86.82 != algbw x 1.75" in report.errors[0]
    assert store.counts() == before


def _full_format(n_ranks=8, rows=((1 << 30, 4_000.0),), op="all_reduce", device="NVIDIA H100 80GB HBM3",
                 hosts=("nodeA",)) -> str:
    """nccl-tests' full layout (root, #wrong, out-of-place and in-place), numbers derived from size and time."""
    per_host = n_ranks // len(hosts)
    factor = 2 * (n_ranks - 1) / n_ranks if op == "all_reduce" else (n_ranks - 1) / n_ranks
    lines = ["# nccl-tests version 2.20.0 (b4d5bee) nccl-headers=22304 nccl-library=22304",
             f"# Collective test starting: {op}_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1",
             "#"] + [f"#  Rank {r:2d} Group  0 Pid {1000 + r} on {hosts[r // per_host]} device {r % per_host} [0x1b] {device}"
                     for r in range(n_ranks)] + [
             "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong",
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)"]
    for size, t in rows:
        algbw = size / t / 1e3
        lines.append(f"{size:>12d} {size // 4:>12d}     float     sum      -1 {t:8.2f} {algbw:7.2f} {algbw * factor:7.2f}"
                     f"       0 {t:8.2f} {algbw:7.2f} {algbw * factor:7.2f}       0")
    return "\n".join(lines + ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1"]) + "\n"


def test_full_layout_with_in_place_columns():
    run, errors = parse(_full_format(), "x.txt", None)
    assert errors == []
    assert run.system.accelerator_id == "H100-SXM5-80GB" and run.software.nccl_version == "2.23.4"
    busbw = [m for m in run.measurements if m.metric == "busbw"]
    assert [m.params["in_place"] for m in busbw] == [False, True]
    assert busbw[0].value == round((1 << 30) / 4000 / 1e3 * 1.75, 2)


def test_busbw_above_the_link_is_refused(store):
    # 8 H100 in one node: NVLink 450 GB/s x 1.15 (NVLS all-reduce margin) = 517.5 GB/s is the most plausible
    ok = ingest_bytes(store, "ar.txt", _full_format(rows=((1 << 30, 4_000.0),)).encode())       # 469.8 GB/s busbw
    assert ok.ingested, ok.errors
    before = store.counts()
    bad = ingest_bytes(store, "ar2.txt", _full_format(rows=((1 << 30, 3_000.0),)).encode())    # 626.2 GB/s
    assert not bad.ingested and "above what H100-SXM5-80GB links allow" in bad.errors[0]
    assert store.counts() == before


def test_missing_rank_lines_or_collective_name_are_explained():
    text = "\n".join(l for l in seed003_nccl_sample().splitlines() if "# Rank" not in l)
    assert "no '# Rank" in parse(text, "x.txt", None)[1][0]
    text = "\n".join(l for l in seed003_nccl_sample().splitlines() if "Collective test starting" not in l)
    assert "cannot tell which collective" in parse(text, "results.txt", None)[1][0]
    assert parse(text, "all_reduce_perf.txt", None)[1] == []          # the file name names it


# ------------------------------------------------------------------------------------- linear in the input (issue 18)
HEAD = ("# nccl-tests version 2.20.0 nccl-headers=22304 nccl-library=22304\n# Collective test starting: all_reduce_perf\n"
        "# Rank 0 Group 0 Pid 1 on h device 0 [0] NVIDIA H100\n# Rank 1 Group 0 Pid 2 on h device 1 [1] NVIDIA H100\n"
        "#  size  count  type  redop  time  algbw  busbw\n")
LINE = 1000                          # characters per hostile line (under nccl_tests.MAX_LINE_CHARS)
# Shapes that made the old patterns try every split of a run: spaces inside a rank line's device name, a result
# field of digits with a letter at its end, and a header repeating 'nccl-tests version' without 'nccl-library='.
HOSTILE_LINES = {
    "rank lines with a run of spaces": lambda i: f"# Rank {i} Group 0 Pid 1 on h device 0 [0] NVIDIA"
                                                 + " " * (LINE - 60) + "x",
    "result rows with a run of digits": lambda i: f"{8 + i} 2 float sum " + "1" * (LINE - 40) + "x 0.00 0.00",
    "repeated version headers": lambda i: "# " + "nccl-tests version 1 " * (LINE // 21),
}


def _operations(text: str) -> int:
    """Python and C function calls made while parsing text: a count that does not depend on the machine's speed."""
    calls = 0

    def count(_frame, event, _arg):
        nonlocal calls
        calls += event in ("call", "c_call")
    sys.setprofile(count)
    try:
        parse(text, "all_reduce.txt", None)
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("shape", HOSTILE_LINES)
def test_parsing_work_grows_linearly_from_40_to_400_kb(shape):
    make = HOSTILE_LINES[shape]
    small, large = (HEAD + "".join(make(i) + "\n" for i in range(n)) for n in (40, 400))
    assert 38_000 < len(small) < 45_000 and 380_000 < len(large) < 450_000
    ratio = _operations(large) / _operations(small)
    assert ratio < 11, f"{shape}: 10x the input took {ratio:.1f}x the operations"


@pytest.mark.parametrize("pattern, subject", [
    (nccl_tests.RANK_LINE, "# Rank 0 Group 0 Pid 1 on h device 0 [0] NVIDIA" + " " * 200_000 + "x"),
    (nccl_tests.NUMBER, "1" * 200_000 + "x"),
    (nccl_tests.VERSION, "nccl-tests version 1 " * 10_000),
    (nccl_tests.TEST_NAME, "Collective test starting: " * 8_000 + "!"),
])
def test_each_pattern_is_linear_on_a_200_kb_line(pattern, subject):
    """Beside the line cap: on a 200 KB line a pattern that tries every split takes minutes (the old rank pattern
    took 6 s on 40 KB, the old number pattern 2.4 s on 10 KB), a linear one a millisecond; 1 s of CPU is a bound
    a thousand times too generous to flake."""
    start = time.process_time()
    pattern.fullmatch(subject) if pattern is not nccl_tests.VERSION else list(pattern.finditer(subject))
    pattern.search(subject)
    assert time.process_time() - start < 1.0


def test_a_line_longer_than_any_nccl_tests_output_is_refused_by_its_number():
    run, errors = parse(HEAD + "# Rank 0" + " " * 120_000 + "x\n", "all_reduce.txt", None)
    assert run is None and errors == [f"all_reduce.txt: line 6 is 120,009 characters long; nccl-tests prints lines of "
                                      f"at most a few hundred (upload the output as the test printed it)"]
