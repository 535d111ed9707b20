"""python -m benchmarks_db validate: one JSON line per MLPerf result of a benchmark, and the Llama 2 70B LoRA run
parameters it rests on, checked against the published logs read by hand."""
import csv
import json
from pathlib import Path

import pytest

from benchmarks_db.__main__ import main
from benchmarks_db.ingest import ingest_path
from benchmarks_db.reference_runs import REFERENCE
from benchmarks_db.store import open_store
from benchmarks_db.validation import EVALUATION, evaluations, run_params

from .helpers import AMD_LORA, DELL_LORA, GPT3

RESULTS_CSV = Path(__file__).resolve().parents[2] / "benchmarks_db" / "data" / "mlperf_training_results.csv"


def _published(benchmark: str) -> int:
    with RESULTS_CSV.open() as f:
        return sum(r["benchmark"] == benchmark for r in csv.DictReader(f))


def _mllog(path: Path) -> list[dict]:
    return [json.loads(line.split(":::MLLOG", 1)[1]) for line in path.read_text().splitlines() if ":::MLLOG" in line]


def test_lora_run_params_are_the_logged_values():
    params = run_params()
    # v4.0 NVIDIA eos_ngc24.04_nemo (8 H100) result_0.txt: global_batch_size 8, run_stop samples_count 3072
    eos = params["mlperf:v4.0:NVIDIA:eos_ngc24.04_nemo:llama2_70b_lora"]
    assert (eos["global_batch_size"], eos["seq_len"], eos["tokens"]) == (8, 8192, 3072 * 8192)
    # v5.1 NVIDIA theia_ngpu512 (GB300): run_stop samples_count 7296 at step 114, i.e. 64 sequences a step
    theia = params["mlperf:v5.1:NVIDIA:theia_ngpu512_ngc25.09_nemo:llama2_70b_lora"]
    assert (theia["global_batch_size"], theia["tokens"]) == (64, 7296 * 8192) and 7296 / 114 == 64
    # v5.0 NVIDIA tyche_ngpu144 (GB200): 3780 samples; logged throughput 73.874/s x step time 0.24366 s = 18 a step
    tyche = params["mlperf:v5.0:NVIDIA:tyche_ngpu144_ngc25.04_nemo:llama2_70b_lora"]
    assert tyche["global_batch_size"] == round(73.87419963149078 * 0.24365746214226375) == 18
    assert tyche["tokens"] == 3780 * 8192
    assert REFERENCE["llama2_70b_lora"]["tokens"] == eos["tokens"]


def test_the_lora_logs_read_are_the_published_runs():
    # each run's minutes, where both ends of the log were read, is one of the per-run minutes MLCommons published
    with RESULTS_CSV.open() as f:
        published = {(r["round"], r["submitter"], r["system_id"]): [float(m) for m in r["run_minutes_sorted"].split()]
                     for r in csv.DictReader(f) if r["benchmark"] == "llama2_70b_lora"}
    with (RESULTS_CSV.parent / "mlperf_run_params.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["benchmark"] == "llama2_70b_lora"]
    timed = [r for r in rows if r["run_minutes"]]
    assert len(rows) == 64 and len(timed) == 64
    for r in timed:
        runs = published[(r["round"], r["submitter"], r["system_id"])]
        assert min(abs(m - float(r["run_minutes"])) for m in runs) < 2e-4, r["system_id"]
    for r in rows:                                        # a whole number of steps of the logged batch
        assert int(r["trained_count"]) % int(r["global_batch_size"]) == 0, r["system_id"]


@pytest.mark.parametrize("folder, system, batch, samples", [
    (DELL_LORA, "9xXE9712x4GB200", 9, 3024), (AMD_LORA, "MI300X_EPYC_9575F_pytorch", 8, 3072)])
def test_run_params_agree_with_the_local_copies_of_the_logs(folder, system, batch, samples):
    log = _mllog(next(folder.glob(f"*/results/{system}/llama2_70b_lora/result_0.txt")))
    logged_batch = next(e["value"] for e in log if e["key"] == "global_batch_size")
    stop = next(e for e in log if e["key"] == "run_stop")
    assert (logged_batch, stop["metadata"]["samples_count"]) == (batch, samples)
    row = run_params()[f"mlperf:v5.0:{folder.name.split('_')[1]}:{system}:llama2_70b_lora"]
    assert (row["global_batch_size"], row["tokens"]) == (batch, samples * 8192)


def test_lora_eval_share_is_the_one_the_log_measures():
    log = _mllog(next(AMD_LORA.glob("*/results/*/llama2_70b_lora/result_0.txt")))
    t = {k: [e["time_ms"] for e in log if e["key"] == k] for k in ("eval_start", "eval_stop", "run_start", "run_stop")}
    share = sum(b - a for a, b in zip(t["eval_start"], t["eval_stop"])) / (t["run_stop"][0] - t["run_start"][0])
    assert EVALUATION["llama2_70b_lora"]["share"] == pytest.approx(share, abs=5e-4)      # 166.0 of 1695.6 s


@pytest.mark.parametrize("folder, name, unit_per_sequence", [(AMD_LORA, "llama2_70b_lora", 1),
                                                                  (GPT3, "gpt3", 2048)])
def test_the_evaluation_cadence_gives_each_log_its_number_of_evaluations_and_forward_steps(folder, name,
                                                                                            unit_per_sequence):
    """The logs' own eval_start count, and their evaluation set at their batch (173 sequences at batch 8: 22 steps
    of which the last is padded; GPT-3's 11,590,004 tokens = 5,659.2 sequences at batch 2048: 3 steps)."""
    log = _mllog(next(folder.glob(f"*/results/*/{name}/result_0.txt")))
    value = lambda key: next(e["value"] for e in log if e["key"] == key)
    stop = next(e for e in log if e["key"] == "run_stop")["metadata"]
    trained = (stop.get("samples_count") or value("train_samples")) / unit_per_sequence
    gbs, size = value("global_batch_size"), value("eval_samples") / unit_per_sequence
    n_evals = sum(e["key"] == "eval_start" for e in log)
    assert evaluations(name, trained, gbs) == (n_evals, n_evals * -(-size // gbs))


def _validate(capsys, db, *args) -> tuple[int, str, str]:
    code = main(["--db", str(db), "validate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_validate_prints_one_json_line_per_lora_result(seeded_copy, capsys):
    db = seeded_copy
    code, out, _ = _validate(capsys, db, "--benchmark", "llama2_70b_lora", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(rows) == _published("llama2_70b_lora") == 173
    assert {"result_id", "accelerator", "n_accelerators", "published_minutes", "predicted_minutes"} <= set(rows[0])
    assert len({r["result_id"] for r in rows}) == len(rows)
    for r in rows:
        assert (r["predicted_minutes"] is None) == bool(r["reason"])            # a refusal always says why
        assert r["predicted_minutes"] is None or r["predicted_minutes"] > 0
    theia = next(r for r in rows if r["result_id"] == "mlperf:v5.1:NVIDIA:theia_ngpu512_ngc25.09_nemo:llama2_70b_lora")
    assert (theia["accelerator"], theia["n_accelerators"], theia["published_minutes"]) == ("GB300", 512, 0.4034)
    code, table, _ = _validate(capsys, db, "--benchmark", "llama2_70b_lora", "--round", "v4.0")
    assert code == 0 and len(table.splitlines()) == 1 + sum(r["round"] == "v4.0" for r in rows)


def test_a_refused_result_carries_its_reason(tmp_path, capsys):
    db = tmp_path / "uploads.duckdb"
    store = open_store(db)
    try:                                                   # an upload nobody trusted yet gets no prediction
        assert next(r for r in ingest_path(store, AMD_LORA) if r.format == "mlperf_results").ingested
    finally:
        store.close()
    code, out, _ = _validate(capsys, db, "--benchmark", "llama2_70b_lora", "--json")
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and row["predicted_minutes"] is None
    assert row["reason"] == "not predicted: an upload the deployment's operator has not trusted"


def test_an_unknown_benchmark_is_named_with_those_the_store_holds(seeded_copy, capsys):
    db = seeded_copy
    code, out, err = _validate(capsys, db, "--benchmark", "llama2_70b", "--json")
    assert code == 2 and out == ""
    assert err.strip() == ("--benchmark 'llama2_70b': no MLPerf result of that benchmark in the store; it holds "
                           "gpt3, llama2_70b_lora, llama31_405b")


def test_an_uploaded_lora_log_is_predicted_from_its_own_batch_and_samples(store):
    from benchmarks_db.ingest import Uploader
    from benchmarks_db.validation import predicted_vs_measured
    assert next(r for r in ingest_path(store, AMD_LORA, uploader=Uploader(trusted=True))
                if r.format == "mlperf_results").ingested
    (row,) = predicted_vs_measured(store).itertuples()
    # its logs: batch 8, 3,072 sequences at run_stop; scaling.json 1.03472 (README.txt of the sample: score 29.2502)
    assert (row.status, row.token_basis, row.global_batch_size) == ("predicted", "this result's log", 8)
    assert row.tokens == 3072 * 8192 and row.scaling_factor == pytest.approx(1.03472, abs=1e-5)
    assert row.ratio == pytest.approx(row.predicted_minutes / 29.2502, rel=1e-4)


def test_an_unknown_round_is_named_with_those_the_store_holds(seeded_copy, capsys):
    db = seeded_copy
    code, out, err = _validate(capsys, db, "--benchmark", "llama2_70b_lora", "--round", "v3.0")
    assert code == 2 and out == ""      # LoRA entered MLPerf Training in v4.0
    assert err.strip() == ("--round 'v3.0': no llama2_70b_lora result of that round in the store; it holds "
                           "v4.0, v4.1, v5.0, v5.1")
