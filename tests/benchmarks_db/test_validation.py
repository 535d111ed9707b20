import pytest

from benchmarks_db.ingest import Uploader, ingest_path
from benchmarks_db.validation import REFERENCE, predicted_vs_measured

from .helpers import GPT3


def test_reference_token_counts_come_from_the_logs():
    # v4.1 NVIDIA GPT-3 sample: 288 steps of 2048 sequences x 2048 tokens = trained_samples at run_stop
    assert REFERENCE["gpt3"]["tokens"] == 288 * 2048 * 2048 == 1_207_959_552
    # v5.1 NVIDIA theia_ngpu512 llama31_405b: 288 steps x 1152 sequences x 8192 tokens
    assert REFERENCE["llama31_405b"]["tokens"] == 288 * 1152 * 8192


def test_lora_is_not_modelled(seeded_ro):
    df = predicted_vs_measured(seeded_ro, benchmark="llama2_70b_lora", mlperf_round="v5.0")
    assert len(df) > 0 and df.predicted_minutes.isna().all()
    assert set(df.status) == {"not modelled: LoRA fine-tuning (frozen base weights, low-rank adapters)"}


def test_gpt3_predictions_beside_published_minutes(seeded):
    report = next(r for r in ingest_path(seeded, GPT3) if r.format == "mlperf_results")
    assert not report.ingested                      # the published copy is already there
    df = predicted_vs_measured(seeded, benchmark="gpt3", mlperf_round="v4.1")
    row = df[df.system_name == "Eos_n64"].iloc[0]
    assert row.status == "predicted" and row.precision == "fp8" and row.tokens == 1_207_959_552
    assert row.published_minutes == 49.7951 and row.ratio == pytest.approx(row.predicted_minutes / 49.7951)
    assert row.predicted_minutes > 0 and row.layout.startswith("tp")
    trillium = df[df.accelerator == "TPU-trillium"]
    assert len(trillium) and set(trillium.status) == {"not predicted: accelerator not in the catalog"}


def test_uploaded_log_uses_its_own_tokens(store):
    trusted = Uploader(trusted=True)                                # the operator's own upload
    assert next(r for r in ingest_path(store, GPT3, uploader=trusted) if r.format == "mlperf_results").ingested
    row = predicted_vs_measured(store).iloc[0]
    assert row.token_basis == "this result's log" and row.tokens == 1_207_959_552
    assert row.status == "predicted"


def test_an_untrusted_upload_costs_no_search(store):
    assert next(r for r in ingest_path(store, GPT3) if r.format == "mlperf_results").ingested
    row = predicted_vs_measured(store).iloc[0]
    assert row.status == "not predicted: an upload the deployment's operator has not trusted"
    assert row.predicted_minutes is None
