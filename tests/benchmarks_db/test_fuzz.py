"""Property-based fuzzing of every parser the planner exposes (runner JSON, MLLOG, nccl-tests, CSV, zip layouts,
?sc= share tokens, scenario files): valid inputs are mutated with hostile values (deep nesting, NaN and Infinity,
integers past int64, digits of other scripts, control characters, markup and formulas, cut-off or damaged bytes).
Every input either ingests or is refused with a message naming where, never with an unhandled exception; a refused
upload leaves the store byte-for-byte as it was, and an accepted one is removed again completely by the undo.

HYPOTHESIS_EXAMPLES sets the examples per parser (default 120)."""
import io
import json
import os
import warnings
import zipfile

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from benchmarks_db.ingest import INTERNAL_ERROR, delete_upload, ingest_bytes
from engine import json_input
from engine.scenario import Scenario, ScenarioError
from engine.inputs import parse_scenario
from engine.presentation.share import decode
from tests.engine.helpers import BASE
from tests.engine.test_share import raw_token

from .helpers import GPT3, busbw_result, matmul_result, runner_file
from .test_hostile_input import make_zip, mllog, one_run_log, snapshot
from .test_nccl_tests import _full_format

FUZZ = settings(max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", 120)), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

HOSTILE_TEXT = st.sampled_from([
    "", " ", "=HYPERLINK(\"http://evil.example\",\"x\")", "+1+1", "-2+3", "@SUM(A1)", "<img src=x onerror=alert(1)>",
    "<a href='javascript:alert(1)'>x</a>", "[link](javascript:alert(1))", "'; DROP TABLE run; --", "\x1b[2J",
    "\x00", "\u202etxt.exe", "²", "١٢٣", "1_000", "9" * 30, "9" * 5000, "a" * 600, "-1", "0", "1e308", "-1e308",
    "1e999", "NaN", "nan", "Infinity", "-inf", "0x10", "1,5", "\u2028", ":red[x]", "%{customdata[0]}",
]) | st.text(max_size=30)
HOSTILE_NUMBER = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**31, 2**31 - 1, 2**63, 2**63 - 1, 2**64, 10**400, 1e308, -1e308, 5e-324, True]))
SCALAR = st.one_of(st.none(), st.booleans(), HOSTILE_NUMBER, HOSTILE_TEXT)
JSON_VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) |
                          st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
DEEP = st.integers(min_value=30, max_value=3000).map(lambda n: "[" * n + "]" * n)


def dumps(value) -> str:
    """JSON as a hostile client writes it: NaN and Infinity literals included."""
    return json.dumps(value, allow_nan=True)


def mutate_json(data, draw) -> str:
    """A JSON document with one value somewhere replaced: a hostile scalar, any JSON, deep nesting, or a key removed."""
    paths = []

    def walk(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node[:4]):
                walk(v, path + [i])
    walk(data, [])
    path = draw(st.sampled_from(paths[1:]))
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    how = draw(st.sampled_from(["scalar", "json", "deep", "drop"]))
    if how == "drop" and isinstance(parent, dict):
        del parent[path[-1]]
        return dumps(data)
    if how == "deep":
        marker = "__DEEP__"
        parent[path[-1]] = marker
        return dumps(data).replace(f'"{marker}"', draw(DEEP))
    parent[path[-1]] = draw(SCALAR if how == "scalar" else JSON_VALUE)
    return dumps(data)


def mutate_text(text: str, draw) -> str:
    """A text file with one line replaced, one word in a line replaced, a line repeated, or the file cut short."""
    lines = text.splitlines()
    i = draw(st.integers(min_value=0, max_value=len(lines) - 1))
    how = draw(st.sampled_from(["word", "word", "line", "repeat", "cut", "bytes"]))
    if how == "word":
        words = lines[i].split(" ")
        j = draw(st.integers(min_value=0, max_value=len(words) - 1))
        words[j] = draw(HOSTILE_TEXT | HOSTILE_NUMBER.map(str))
        lines[i] = " ".join(words)
    elif how == "line":
        lines[i] = draw(HOSTILE_TEXT | JSON_VALUE.map(lambda v: ":::MLLOG " + dumps(v)) | DEEP)
    elif how == "repeat":
        lines[i:i] = [lines[i]] * draw(st.integers(min_value=1, max_value=3))
    elif how == "cut":
        return "\n".join(lines)[:draw(st.integers(min_value=0, max_value=len(text)))]
    else:
        return "\n".join(lines) + draw(st.binary(max_size=20)).decode("latin-1")
    return "\n".join(lines) + "\n"


def check_ingest(store, name: str, data: bytes, **kw) -> None:
    """The property: a report with errors and the store unchanged, or ingested and undone without a trace."""
    before = snapshot(store)
    report = ingest_bytes(store, name, data, **kw)
    assert not any(INTERNAL_ERROR in e for e in report.errors), report.errors
    event("ingested" if report.ingested else "refused")
    if report.ingested:
        assert report.rows_added["run"] >= 1 and not report.errors
        delete_upload(store, report.source_id)
    else:
        assert report.errors and all(isinstance(e, str) and e for e in report.errors)
    assert snapshot(store) == before


def valid_runner_doc() -> dict:
    return json.loads(runner_file([matmul_result(4096, 4096, 4096, "bf16", [0.3e-3, 0.31e-3, 0.29e-3, 0.3e-3, 0.3e-3]),
                                   busbw_result("all_reduce", 2**30, 8, [0.01] * 5)]))


@FUZZ
@given(data=st.data())
def test_fuzz_runner_json(store, data):
    check_ingest(store, "results.json", mutate_json(valid_runner_doc(), data.draw).encode())


@FUZZ
@given(data=st.data())
def test_fuzz_mllog(store, data):
    log = one_run_log(1.7e12, 1.7e12 + 60_000 * 1500) + "\n" + mllog("global_batch_size", 2048, 1.7e12 + 5) + "\n"
    check_ingest(store, "result_0.txt", mutate_text(log, data.draw).encode(), accelerator="H100-SXM5-80GB")


@FUZZ
@given(data=st.data())
def test_fuzz_nccl_tests(store, data):
    text = _full_format(rows=((2**26, 400.0), (2**30, 4000.0)))
    check_ingest(store, "all_reduce.txt", mutate_text(text, data.draw).encode())


CSV_COLUMNS = ["accelerator", "metric", "value", "unit", "stat", "dtype", "m", "n", "k", "op", "message_bytes",
               "n_ranks", "n_nodes", "n_samples", "cv_pct", "time_s", "algbw", "benchmark", "n_accelerators",
               "driver_version", "cuda_version", "notes"]
CSV_ROWS = [{"accelerator": "H100-SXM5-80GB", "metric": "matmul_tflops", "value": "700", "unit": "TFLOP/s",
             "dtype": "bf16", "m": "8192", "n": "8192", "k": "8192", "driver_version": "550", "cuda_version": "12.4"},
            {"accelerator": "H100-SXM5-80GB", "metric": "busbw", "value": "360", "unit": "GB/s", "op": "all_reduce",
             "n_ranks": "8", "message_bytes": str(2**30), "notes": "x"},
            {"accelerator": "H100-SXM5-80GB", "metric": "time_to_train", "value": "1500", "unit": "min",
             "benchmark": "gpt3", "n_accelerators": "8"}]


@FUZZ
@given(data=st.data())
def test_fuzz_csv(store, data):
    rows = [dict(r) for r in CSV_ROWS]
    for _ in range(data.draw(st.integers(min_value=0, max_value=4))):
        row = data.draw(st.sampled_from(rows))
        row[data.draw(st.sampled_from(CSV_COLUMNS))] = data.draw(HOSTILE_TEXT | HOSTILE_NUMBER.map(str))
    buf = io.StringIO()
    import csv
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(data.draw(st.permutations(rows)))
    text = buf.getvalue()
    if data.draw(st.booleans()):
        text = mutate_text(text, data.draw)
    check_ingest(store, "table.csv", text.encode())


SYSTEM = json.loads((GPT3 / "NVIDIA" / "systems" / "eos_n64_ngc24.09_nemo.json").read_text())


@FUZZ
@given(data=st.data())
def test_fuzz_zip_layouts(store, data):
    logs = {f"result_{i}.txt": one_run_log(1.7e12 + i * 1e8, 1.7e12 + i * 1e8 + 60_000 * 1500 + i * 60_000)
            for i in range(3)}
    system = json.loads(json.dumps(SYSTEM))
    system_text = mutate_json(system, data.draw) if data.draw(st.booleans()) else json.dumps(system)
    root = data.draw(st.sampled_from(["NVIDIA", "training_results_v5.1/NVIDIA", "", "../x", "a/b/c/d"]))
    prefix = f"{root}/" if root else ""
    entries = [(f"{prefix}systems/eos_n64_ngc24.09_nemo.json", system_text)]
    entries += [(f"{prefix}results/eos_n64_ngc24.09_nemo/gpt3/{n}",
                 mutate_text(t, data.draw) if data.draw(st.integers(0, 3)) == 0 else t) for n, t in logs.items()]
    extra = data.draw(st.lists(st.tuples(HOSTILE_TEXT.filter(lambda s: s.strip("/")), st.text(max_size=20)),
                               max_size=2))
    entries += extra
    method = data.draw(st.sampled_from([zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED, zipfile.ZIP_LZMA,
                                        zipfile.ZIP_BZIP2]))
    try:
        buf = io.BytesIO()
        with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", method) as zf:
            warnings.simplefilter("ignore")             # zipfile warns of the duplicate names it is asked to write
            for name, text in entries:
                zf.writestr(name, text.encode("utf-8", "surrogatepass"))
        archive = bytearray(buf.getvalue())
    except (ValueError, UnicodeEncodeError, IndexError):   # a name zipfile cannot write (NUL, "//")
        archive = bytearray(make_zip([("x.txt", "x")]))
    if data.draw(st.booleans()):                      # damage: bytes overwritten, or the archive cut short
        at = data.draw(st.integers(min_value=0, max_value=len(archive) - 1))
        if data.draw(st.booleans()):
            archive[at:at + 8] = data.draw(st.binary(min_size=8, max_size=8))
        else:
            del archive[at:]
    check_ingest(store, "results.zip", bytes(archive))


@FUZZ
@given(data=st.data())
def test_fuzz_share_tokens(data):
    how = data.draw(st.sampled_from(["payload", "text", "cut"]))
    if how == "payload":
        payload = {"scenario": json.loads(json.dumps(BASE)), "options": {"objective": "time"}}
        token = raw_token(mutate_json(payload, data.draw).encode())
    elif how == "cut":
        token = raw_token({"scenario": BASE})
        token = token[:data.draw(st.integers(min_value=0, max_value=len(token)))]
    else:
        token = data.draw(HOSTILE_TEXT | st.text(alphabet="1.-_abcXYZ09", max_size=60))
    try:
        shared = decode(token)
    except ScenarioError as err:
        event("refused")
        assert err.problems and all(isinstance(f, str) and m for f, m in err.problems)
    else:
        event("opened")
        assert isinstance(shared.scenario, Scenario)


@FUZZ
@given(data=st.data())
def test_fuzz_scenario_files(data):
    if data.draw(st.booleans()):
        text = mutate_json(json.loads(json.dumps(BASE)), data.draw)
    else:
        text = data.draw(st.binary(max_size=80)).decode("latin-1")
    try:
        sc = parse_scenario(text.encode("utf-8", "surrogatepass"))
    except ScenarioError as err:
        event("refused")
        assert err.problems and all(isinstance(f, str) and m for f, m in err.problems)
    else:
        event("accepted")
        assert isinstance(sc, Scenario)


@pytest.mark.parametrize("text", ["[" * 10**6, '{"a":' * 10**5, "NaN", "[Infinity]", "1" * 5000, "\udcff", "[1,]"])
def test_json_input_refuses_with_a_message(text):
    with pytest.raises(json_input.JsonInputError) as err:
        json_input.loads(text)
    assert str(err.value)
