"""The HTTP API (`planner api`, planner/http_api.py) as a client meets it: a real uvicorn server in a process of its
own on a free port, real HTTP requests, and its answers compared with the command line's (`python -m engine`) run on
the same scenario files."""
import copy
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from engine.presentation.edit import DEFAULT_SCENARIO
from serve import free_port
from tests.conftest import ROOT
from tests.engine.helpers import BASE

HF = ROOT / "tests" / "data" / "hf_configs"
LLAMA_70B = {"model": {"preset": "llama3.1-70b"},
             "training": {"seq_len": 8192, "global_batch_size": 512, "total_tokens": 2e12, "precision": "bf16"},
             "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 256},
             "layout": {"tp": 8, "pp": 4, "dp": 8, "micro_batch_size": 1, "zero_stage": 1}}


def start(tmp, **env):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "planner", "api", "--host", "127.0.0.1", "--port", str(port)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "APP_DB_PATH": str(tmp / "planner.duckdb"), **env})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2):
                return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"planner api did not start: {proc.stderr.read().decode()[-2000:]}") from None
            time.sleep(0.2)


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api")
    seeded = subprocess.run([sys.executable, "-m", "benchmarks_db", "seed", "--db", str(tmp / "planner.duckdb")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert seeded.returncode == 0, seeded.stderr
    proc, url = start(tmp)
    yield url
    stop(proc)


def post(url, path, body, headers=None):
    """(status, parsed JSON, headers); body: bytes as sent, or data sent as JSON."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, json.loads(resp.read()), resp.headers
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), err.headers


def cli(tmp_path, command, scenario, *options):
    f = tmp_path / "scenario.json"
    f.write_text(json.dumps(scenario))
    out = subprocess.run([sys.executable, "-m", "engine", command, str(f), *options], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("scenario", [DEFAULT_SCENARIO, LLAMA_70B], ids=["default", "llama-70b"])
def test_estimate_equals_the_command_line(api, tmp_path, scenario):
    status, doc, _ = post(api, "/v1/estimate", scenario)
    assert status == 200, doc
    assert doc == cli(tmp_path, "estimate", scenario)
    assert doc["fits"] is True and doc["step_time_s"] > 0


def test_search_compare_plan_answer_as_the_command_line(api, tmp_path):
    status, doc, _ = post(api, "/v1/search?top=3&objective=cost&deadline_days=30", BASE)
    assert status == 200, doc
    assert doc == cli(tmp_path, "search", BASE, "--top", "3", "--objective", "cost", "--deadline-days", "30")
    assert len(doc["best"]) == 3 and doc["cluster_search"] is not None
    query = "?accelerators=H100-SXM5-80GB,MI300X&weights=time=0.5,cost=0.5"
    status, doc, _ = post(api, "/v1/compare" + query, BASE)
    assert status == 200, doc
    assert doc == cli(tmp_path, "compare", BASE, "--accelerators", "H100-SXM5-80GB,MI300X",
                      "--weights", "time=0.5,cost=0.5")
    status, doc, _ = post(api, "/v1/plan?deadline_days=60&vendor=NVIDIA&max_gpus=512", BASE)
    assert status == 200, doc
    assert doc == cli(tmp_path, "plan", BASE, "--deadline-days", "60", "--vendor", "NVIDIA", "--max-gpus", "512")
    assert doc["answer"]["wall_days"] <= 60
    status, doc, _ = post(api, "/v1/plan?deadline_days=60&vendor=NVIDIA&max_gpus=1024&confidence=0.9", BASE)
    assert status == 200, doc
    assert doc == cli(tmp_path, "plan", BASE, "--deadline-days", "60", "--vendor", "NVIDIA", "--max-gpus", "1024",
                      "--confidence", "0.9")
    assert doc["confidence"] == 0.9 and doc["answer"]["ranges"]["wall_days"]["high"] <= 60
    status, doc, _ = post(api, "/v1/plan?deadline_days=60&confidence=0.99", BASE)
    assert status == 400 and "--confidence" in problems(doc)


def test_the_stack_option_answers_as_the_command_line_and_the_answer_names_its_stack(api, tmp_path):
    """framework=auto lets the planner choose (on H100: Megatron-Core, the higher fitted level in
    data/frameworks.json, with how much faster than PyTorch FSDP2); a stack id keeps that stack; an unknown one is a
    422 naming the option."""
    scenario = {k: v for k, v in DEFAULT_SCENARIO.items() if k != "layout"}
    status, doc, _ = post(api, "/v1/plan?deadline_days=30&vendor=same&framework=auto", scenario)
    assert status == 200, doc
    assert doc == cli(tmp_path, "plan", scenario, "--deadline-days", "30", "--vendor", "same", "--framework", "auto")
    assert doc["answer"]["stack"]["id"] == "megatron_core"
    assert re.search(r"the planner: Megatron-Core / NeMo: \d+% faster than PyTorch FSDP2",
                     doc["answer"]["stack"]["chosen_by"])
    status, doc, _ = post(api, "/v1/search?top=1&framework=pytorch_fsdp2", scenario)
    assert status == 200 and doc["stack"]["id"] == "pytorch_fsdp2" and doc["stack"]["chosen_by"] == "the scenario"
    status, doc, _ = post(api, "/v1/plan?deadline_days=30&framework=megatron", scenario)
    assert status == 422 and "query.framework" in problems(doc)


def test_import_hf_reads_a_real_config(api, tmp_path):
    config = HF / "llama-3.1-8b.json"
    status, doc, _ = post(api, "/v1/import-hf", config.read_bytes())
    assert status == 200, doc
    out = subprocess.run([sys.executable, "-m", "engine", "import-hf", str(config)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and doc == json.loads(out.stdout)
    # Meta's config.json: 32 layers of width 4096, 8 KV heads, SwiGLU of 14,336; 8.03 B parameters as Meta publishes
    assert {k: doc["model"][k] for k in ("n_layers", "hidden_size", "n_kv_heads", "ffn_hidden_size")} == \
        {"n_layers": 32, "hidden_size": 4096, "n_kv_heads": 8, "ffn_hidden_size": 14336}
    assert doc["params_total"] == pytest.approx(8.03e9, rel=5e-3)
    status, doc, _ = post(api, "/v1/import-hf", b'{"architectures": ["LlamaForCausalLM"]}')
    assert 400 <= status < 500 and doc["problems"]


def problems(doc):
    return {p["field"]: p["message"] for p in doc["problems"]}


def test_bad_input_is_a_4xx_naming_the_field(api):
    wrong_type = copy.deepcopy(BASE)
    wrong_type["training"]["global_batch_size"] = "lots"
    status, doc, _ = post(api, "/v1/estimate", wrong_type)
    assert status == 422 and "training.global_batch_size" in problems(doc)

    unknown = copy.deepcopy(BASE)
    unknown["training"]["learning_rate"] = 3e-4
    status, doc, _ = post(api, "/v1/estimate", unknown)
    assert status == 422 and "training.learning_rate" in problems(doc)

    absurd = copy.deepcopy(BASE)
    absurd["cluster"]["n_gpus"] = 10**12
    status, doc, _ = post(api, "/v1/estimate", absurd)
    assert status == 422 and "cluster.n_gpus" in problems(doc)

    rule = copy.deepcopy(BASE)
    rule["layout"]["tp"] = 3                                 # 8 GPUs are not 3 x 1 x 8: a layout rule, not the schema
    status, doc, _ = post(api, "/v1/estimate", rule)
    assert status == 400 and "layout.tp" in problems(doc)

    injection = copy.deepcopy(BASE)
    injection["cluster"]["accelerator"] = "H100'; DROP TABLE runs; --<script>"
    status, doc, _ = post(api, "/v1/estimate", injection)
    assert status == 400 and "cluster.accelerator" in problems(doc)       # not in the catalog

    status, doc, _ = post(api, "/v1/estimate", b"{not json")
    assert status == 400 and "not valid JSON" in problems(doc)["(body)"]
    status, doc, _ = post(api, "/v1/estimate", b'{"x": NaN}')
    assert status == 400 and "(body)" in problems(doc)
    status, doc, _ = post(api, "/v1/estimate", [1, 2, 3])
    assert status == 400 and "JSON object" in problems(doc)["(body)"]

    # 2 MB declared: refused before a byte of it is read; 2 MB sent in chunks without a length: refused past 1 MB
    host, port = api.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/v1/estimate")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", "2000000")
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and "(body)" in problems(json.loads(resp.read()))
    conn.close()
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", "/v1/estimate", body=iter([b"{" + b" " * 2**16] * 32), encode_chunked=True,
                     headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        resp = conn.getresponse()
        assert resp.status == 413 and "(body)" in problems(json.loads(resp.read()))
    except (BrokenPipeError, ConnectionResetError):
        pass                                                 # answered 413 and closed before the rest was sent
    conn.close()

    status, doc, _ = post(api, "/v1/search?top=many", BASE)
    assert status == 422 and "query.top" in problems(doc)
    status, doc, _ = post(api, "/v1/search?top=0", BASE)         # the command line's own range check
    assert status == 400 and problems(doc) == {"--top": "must be between 1 and 1000"}
    status, doc, _ = post(api, "/v1/plan", BASE)
    assert status == 400 and "--deadline-days" in problems(doc)

    status, doc, _ = post(api, "/v1/estimate", BASE | {"layout": {**BASE["layout"], "zero_stage": 1}})
    assert status == 200                                     # and it keeps serving


def test_openapi_lists_the_routes_and_health(api):
    with urllib.request.urlopen(api + "/openapi.json", timeout=10) as resp:
        spec = json.loads(resp.read())
    routes = {path for path, ops in spec["paths"].items() if "post" in ops}
    assert routes == {"/v1/estimate", "/v1/search", "/v1/compare", "/v1/plan", "/v1/import-hf"}
    with urllib.request.urlopen(api + "/readyz", timeout=30) as resp:
        assert resp.status == 200 and json.loads(resp.read()) == {"status": "ok"}
    with urllib.request.urlopen(api + "/healthz", timeout=10) as resp:     # idle, one slot (the default)
        assert json.loads(resp.read()) == {"status": "ok", "work": {"slots": 1, "running": 0, "waiting": 0}}


def test_readyz_says_why_without_a_store(tmp_path):
    proc, url = start(tmp_path, APP_DB_PATH=str(tmp_path / "missing" / "planner.duckdb"))
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + "/readyz", timeout=30)
        assert err.value.code == 503 and "no store" in json.loads(err.value.read())["store"]
    finally:
        stop(proc)


def test_readyz_queries_a_postgres_store(tmp_path, postgres):
    """With APP_DB_URL the API's readiness is a query on the shared store: 200 while it answers, 503 naming the
    setting (without its password) once the database is gone."""
    from benchmarks_db.store import open_store
    db = postgres.new_database()
    open_store(db).close()                                   # created and migrated, as the app's start does
    proc, url = start(tmp_path, APP_DB_URL=db)
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=30) as resp:
            assert resp.status == 200 and json.loads(resp.read()) == {"status": "ok"}
        postgres.drop(db)
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + "/readyz", timeout=30)
        assert err.value.code == 503 and "cannot be used right now" in json.loads(err.value.read())["store"]
    finally:
        stop(proc)
    proc, url = start(tmp_path, APP_DB_URL="postgresql://planner:hunter2@127.0.0.1:1/planner")
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + "/readyz", timeout=30)
        said = json.loads(err.value.read())["store"]
        assert err.value.code == 503 and said.startswith("APP_DB_URL=postgresql://planner:***@127.0.0.1:1/planner: "
                                                         "cannot connect") and "hunter2" not in said
    finally:
        stop(proc)


def work_state(url: str, until, timeout_s: float = 60.0) -> dict:
    """/healthz's work limit state, polled until `until(state)` holds (or the timeout passes: the last state)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with urllib.request.urlopen(url + "/healthz", timeout=10) as resp:
            state = json.loads(resp.read())["work"]
        if until(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


def test_work_beyond_the_limit_gets_429_with_retry_after(tmp_path):
    """One slot, and one requester may have at most 8 jobs running or waiting (engine/work_limits.py): of 12
    searches sent at once from one address while the slot is busy, at least 4 are refused with 429 and Retry-After,
    the others answer. The slot is held by another requester (named by APP_IDENTITY_HEADER) with a vendor comparison
    of a small-expert MoE on eight accelerators (about 18 s on an idle core), sent first, so none of the 12 can end
    and free its place before the twelfth is admitted (/healthz says when the holder runs). Before, the 12 raced each other for the slot: under CI's load
    the first search ended before the twelfth request was admitted, which then took the freed place (3 refused).
    Each of the 12 asks a different batch, so none is answered from the search cache, and all leave together at a
    barrier."""
    proc, url = start(tmp_path, APP_MAX_CONCURRENT_WORK="1", APP_IDENTITY_HEADER="X-Test-User")
    results, held = [], []
    lock = threading.Lock()
    together = threading.Barrier(12)

    def hold():
        question = {"model": {"preset": "qwen3-30b-a3b"}, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 512},
                    "training": {"seq_len": 4096, "global_batch_size": 2048, "total_tokens": 2e12, "precision": "bf16"}}
        held.append(post(url, "/v1/compare?accelerators=H100-SXM5-80GB,H200-SXM-141GB,B200-SXM-180GB,GB200,MI300X,"
                         "MI325X,B300-SXM-270GB,GH200-144GB", question, {"X-Test-User": "holder"})[0])

    def one(i):
        question = LLAMA_70B | {"training": LLAMA_70B["training"] | {"global_batch_size": 256 * (i + 2)}}
        together.wait()
        status, doc, headers = post(url, "/v1/search?top=1", question)
        with lock:
            results.append((status, doc, headers.get("Retry-After")))

    try:
        holder = threading.Thread(target=hold)
        holder.start()
        assert work_state(url, lambda w: w["running"] == 1) == {"slots": 1, "running": 1, "waiting": 0}
        threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        # eight of the twelve queue behind the holder (the requester's share), the other four are refused
        assert work_state(url, lambda w: w["waiting"] == 8) == {"slots": 1, "running": 1, "waiting": 8}
        for t in [holder, *threads]:
            t.join(timeout=600)
        refused = [r for r in results if r[0] == 429]
        assert held == [200]
        assert len(results) == 12 and len(refused) == 4
        assert all(retry == "30" and "jobs running or waiting" in problems(doc)["(request)"]
                   for _, doc, retry in refused)
        assert {status for status, _, _ in results} == {200, 429}
        assert work_state(url, lambda w: True) == {"slots": 1, "running": 0, "waiting": 0}
        status, _, _ = post(url, "/v1/estimate", LLAMA_70B)
        assert status == 200
    finally:
        stop(proc)


def test_the_engine_imports_no_web_framework():
    out = subprocess.run([sys.executable, "-c", "import sys, engine, engine.api, engine.__main__, engine.work_limits; "
                          "print(sorted(m for m in ('fastapi', 'starlette', 'uvicorn', 'streamlit') if m in sys.modules))"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
