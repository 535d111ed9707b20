import io
import shutil
import zipfile

import pytest

from benchmarks_db.ingest import ingest_bytes, ingest_path
from benchmarks_db.mlperf import olympic_score, parse_log

from .helpers import AMD_LORA, DELL_LORA, GPT3, GPT3_RESULTS, SAMPLES


def _readme_score(folder):
    line = next(l for l in (folder / "README.txt").read_text().splitlines() if l.startswith("expected_score_minutes"))
    return float(line.split(":")[1])


@pytest.mark.parametrize("folder, expected", [(GPT3, 49.7951), (AMD_LORA, 29.2502), (DELL_LORA, 2.9991)])
def test_sample_folders_score_as_published(store, folder, expected):
    assert _readme_score(folder) == expected
    reports = ingest_path(store, folder)
    unit = [r for r in reports if r.format == "mlperf_results"]
    assert len(unit) == 1 and unit[0].ingested, unit[0].errors
    assert unit[0].score_minutes == pytest.approx(expected, abs=5e-5)


def test_all_three_samples_from_the_top_folder(store):
    got = sorted(round(r.score_minutes, 4) for r in ingest_path(store, SAMPLES) if r.format == "mlperf_results")
    assert got == [2.9991, 29.2502, 49.7951]
    stored = sorted(round(v, 4) for (v,) in store.rows("SELECT value FROM measurement WHERE stat = 'score'"))
    assert stored == got


def test_failed_run_counts_as_the_dropped_slowest(store):
    report = next(r for r in ingest_path(store, DELL_LORA) if r.format == "mlperf_results")
    assert any("result_9.txt" in w and "no run_stop" in w for w in report.warnings)
    params = store.rows("SELECT params->'failed_files', params->>'n_runs_failed' "
                        "FROM run")[0]
    assert params == ('["result_9.txt"]', "1")
    # README: 9 successful runs; drop only the fastest; mean of 8; x scaling 1.00769
    runs = [2.7456, 3.1155, 3.1102, 3.1155, 3.1149, 2.7440, 2.7456, 3.1165, 2.7459]
    assert olympic_score(runs, 1, "llama2_70b_lora", 1.00769) == pytest.approx(2.9991, abs=1e-4)


def test_olympic_rule_examples():
    # benchmarks-formats.md 1.4 worked example (H200 LoRA v4.0, 10 runs): drop first and last, mean of 8 = 24.689
    h200 = [23.43, 23.52, 23.53, 23.57, 23.57, 23.58, 26.52, 26.54, 26.68, 26.69]
    assert olympic_score(h200, 0, "llama2_70b_lora") == pytest.approx(24.689, abs=1e-3)
    assert olympic_score([49.7747, 53.5139, 49.7951], 0, "gpt3") == 49.7951            # 3 runs: the median
    assert olympic_score([1.0, 2.0], 2, "gpt3") is None                                # two failures: no score


def test_system_description_is_read(store):
    ingest_path(store, GPT3)
    row = store.rows("SELECT accelerator_raw, accelerator_id, n_accelerators, accelerators_per_node, n_nodes FROM system")
    assert row == [("NVIDIA H100-SXM5-80GB", "H100-SXM5-80GB", 512, 8, 64)]
    env = store.rows("SELECT cuda_version, driver_version, nccl_version FROM software_env")
    assert env == [("12.6.1.006", "560.35.03", "2.22.3")]
    params = store.rows("SELECT params->>'global_batch_size', "
                        "params->>'max_sequence_length', "
                        "params->>'samples_at_stop' FROM run")
    assert params == [("2048", "2048", "1207959552")]


def _zip(folder) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for p in folder.rglob("*"):
            if p.is_file():
                zf.write(p, p.relative_to(folder.parent).as_posix())
    return buf.getvalue()


def test_zip_upload_of_a_submitter_folder(store):
    report = ingest_bytes(store, "amd.zip", _zip(AMD_LORA))
    assert report.ingested, report.errors
    assert report.format == "zip" and report.score_minutes == pytest.approx(29.2502, abs=5e-5)
    assert any("README.txt" in w for w in report.warnings)
    # the same result as a folder is another file but the same result
    again = next(r for r in ingest_path(store, AMD_LORA) if r.format == "mlperf_results")
    assert not again.ingested and "already in the store" in again.errors[0]


def test_single_log_gives_that_runs_minutes(store):
    report = ingest_bytes(store, "result_0.txt", (GPT3_RESULTS / "result_0.txt").read_bytes())
    assert report.ingested and report.format == "mlperf_log"
    assert report.score_minutes == pytest.approx(49.7747, abs=5e-5)
    assert any("single run" in f for f in report.flags)


def test_truncated_log_is_refused_alone_and_fails_its_run_in_a_folder(store, tmp_path):
    text = (GPT3_RESULTS / "result_1.txt").read_text()
    cut = text[: len(text) // 2]                                      # ends inside a line
    before = store.counts()
    report = ingest_bytes(store, "result_1.txt", cut.encode())
    assert not report.ingested and "is not a valid MLLOG event" in report.errors[0]
    report = ingest_bytes(store, "result_1.txt", cut[: cut.rindex("\n") + 1].encode())     # ends at a line end
    assert not report.ingested and "no run_stop" in report.errors[0]
    assert store.counts() == before
    # the same cut inside the results folder: that run is non-converged, the median of the other two is kept
    dest = tmp_path / "NVIDIA"
    shutil.copytree(GPT3 / "NVIDIA", dest)
    (dest / "results" / "eos_n64_ngc24.09_nemo" / "gpt3" / "result_1.txt").write_text(cut)
    report = next(r for r in ingest_path(store, tmp_path) if r.format == "mlperf_results")
    assert report.ingested
    # with one run failed, sort [49.7747, 49.7951], drop only the fastest: 49.7951
    assert report.score_minutes == pytest.approx(49.7951, abs=5e-5)


def test_published_result_uploaded_again_is_a_duplicate(seeded):
    before = seeded.counts()
    report = next(r for r in ingest_path(seeded, GPT3) if r.format == "mlperf_results")
    assert not report.ingested
    assert report.score_minutes == pytest.approx(49.7951, abs=5e-5)          # still reported
    assert "already in the store as a published result (v4.1 NVIDIA eos_n64_ngc24.09_nemo gpt3" in report.errors[0]
    assert seeded.counts() == before


def test_folder_without_system_json_is_refused(store, tmp_path):
    shutil.copytree(GPT3 / "NVIDIA" / "results", tmp_path / "results")
    report = next(r for r in ingest_path(store, tmp_path) if r.format == "mlperf_results")
    assert not report.ingested and "systems/eos_n64_ngc24.09_nemo.json not found" in report.errors[0]


def test_parse_log_reads_the_keys():
    r = parse_log((GPT3_RESULTS / "result_0.txt").read_text(), "result_0.txt")
    assert (r.benchmark, r.org, r.division, r.global_batch_size, r.max_sequence_length) == \
           ("gpt3", "NVIDIA", "closed", 2048, 2048)
    assert r.minutes == pytest.approx(49.7747, abs=5e-5) and r.final_eval <= 2.69
