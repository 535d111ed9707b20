import csv
import shutil

import pytest

from benchmarks_db import seed as seed_mod
from benchmarks_db.ingest import delete_upload, ingest_bytes
from benchmarks_db.seed import DATA, seed
from engine.catalog import load_catalog

from .helpers import matmul_result, runner_file


def _csv(name):
    with open(DATA / name, newline="") as fh:
        return list(csv.DictReader(fh))


def test_seed_data_in_repo_matches_the_shared_copy():
    shared = DATA.parents[2] / "shared" / "data" / "mlperf_training_results.csv"
    if shared.exists():          # CI has ../shared beside the clone; the container does not need it
        assert (DATA / "mlperf_training_results.csv").read_bytes() == shared.read_bytes()
    assert len(_csv("mlperf_training_results.csv")) == 237


def test_every_published_score_is_stored_with_its_source(seeded_ro):
    rows = seeded_ro.rows("""
        SELECT r.mlperf_round, r.params->>'submitter_folder',
               r.params->>'mlperf_system', r.benchmark, m.value, s.n_accelerators, src.kind,
               src.source_commit
        FROM run r JOIN measurement m USING (run_id) JOIN system s USING (system_id) JOIN source src USING (source_id)
        WHERE m.stat = 'score'""")
    stored = {(r[0], r[1], r[2], r[3]): r[4:] for r in rows}
    expected = _csv("mlperf_training_results.csv")
    assert len(stored) == len(expected) == 237
    for row in expected:
        value, count, kind, commit = stored[(row["round"], row["submitter"], row["system_id"], row["benchmark"])]
        assert value == pytest.approx(float(row["score_minutes"]), abs=1e-9)
        assert count == int(row["total_accelerators"])          # TPU names count TensorCores: the CSV's count is used
        assert kind == "published" and commit == row["source_commit"]


def test_per_run_minutes_are_stored(seeded_ro):
    row = next(r for r in _csv("mlperf_training_results.csv")
               if r["round"] == "v4.1" and r["system_id"] == "eos_n64_ngc24.09_nemo" and r["benchmark"] == "gpt3")
    singles = seeded_ro.rows("SELECT value FROM measurement WHERE run_id = 'mlperf:v4.1:NVIDIA:eos_n64_ngc24.09_nemo:gpt3' "
                             "AND stat = 'single' ORDER BY value")
    assert [v for (v,) in singles] == [float(x) for x in row["run_minutes_sorted"].split()]
    assert [v for (v,) in singles] == [49.7747, 49.7951, 53.5139]        # the sample's README.txt


@pytest.mark.parametrize("raw, catalog_id", [
    ("NVIDIA H100-SXM5-80GB", "H100-SXM5-80GB"), ("NVIDIA H100-SXM-80GB", "H100-SXM5-80GB"),
    ("NVIDIA Blackwell GPU (GB200)", "GB200"), ("NVIDIA Blackwell GPU (B200-SXM-180GB)", "B200-SXM-180GB"),
    ("AMD Instinct MI325X 256GB HBM3e", "MI325X"), ("Intel(R) Gaudi(R) 2 AI Accelerator", "Gaudi2"),
    ("TPU-v5p", "TPU-v5p"), ("NVIDIA Blackwell Ultra GPU (GB300)", "GB300"), ("AMD Instinct MI350X", "MI350X"),
    ("TPU-trillium", "TPU-v6e"), ("NVIDIA H200-NVL-141GB", "H200-NVL-141GB"),
    ("NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)", "B300-SXM-270GB")])
def test_accelerator_names_map_to_catalog_ids(seeded_ro, raw, catalog_id):
    ids = {r[0] for r in seeded_ro.rows("SELECT DISTINCT accelerator_id FROM system WHERE accelerator_raw = ?", [raw])}
    assert ids == {catalog_id}


def test_every_mlperf_result_maps_to_a_catalog_accelerator(seeded_ro):
    """Every MLPerf system in the seeded store names a catalog accelerator, and its memory agrees with the catalog's."""
    rows = seeded_ro.rows("SELECT DISTINCT s.accelerator_raw, s.accelerator_id FROM run r JOIN system s USING (system_id) "
                          "WHERE r.suite = 'mlperf_training'")
    assert len(rows) >= 20
    unmapped = sorted(raw for raw, acc in rows if acc is None)
    assert not unmapped, f"MLPerf accelerators without a catalog entry: {unmapped}"
    assert {acc for _, acc in rows} >= {"GB300", "B300-SXM-270GB", "TPU-v6e", "MI350X", "H200-NVL-141GB"}


def test_mamf_table_efficiency_is_measured_over_catalog_peak(seeded_ro):
    cat = load_catalog()
    got = {(a, d): (v, p, e) for a, d, v, p, e in seeded_ro.rows(
        "SELECT s.accelerator_id, m.dtype, m.value, m.peak_value, m.efficiency FROM measurement m JOIN run r USING (run_id) "
        "JOIN system s USING (system_id) WHERE r.tool LIKE 'mamf-finder%' AND s.accelerator_id IS NOT NULL")}
    for row in _csv("mamf_published.csv"):
        if not row["accelerator_id"]:
            continue
        peak = cat.accelerator(row["accelerator_id"]).peak(row["dtype"])
        value, stored_peak, eff = got[(row["accelerator_id"], row["dtype"])]
        assert value == float(row["measured_tflops"]) and stored_peak == peak
        assert eff == pytest.approx(float(row["measured_tflops"]) / peak)
    assert got[("H100-SXM5-80GB", "bf16")][2] == pytest.approx(794.5 / 989.4)


def test_seed_000_values_are_illustrative_and_flagged(seeded_ro):
    rows = seeded_ro.rows("SELECT r.validation, r.validation_msgs, m.value FROM run r JOIN source s USING (source_id) "
                          "JOIN measurement m USING (run_id) WHERE s.kind = 'illustrative'")
    assert len(rows) == 9 and all(v == "flagged" for v, _, _ in rows)
    assert sorted(m for _, _, m in rows) == [8, 12, 55, 59, 60, 360, 720, 3100, 4900]
    h100_gemm = [msg for _, msg, v in rows if v == 60]
    assert "TF32" in h100_gemm[0]


def test_seed_is_idempotent(seeded):
    before = seeded.counts()
    assert set(seed(seeded).values()) == {"up to date"}
    assert seeded.counts() == before


def test_changed_dataset_replaces_only_its_rows(seeded, tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    rows = (data / "mamf_published.csv").read_text().splitlines()
    (data / "mamf_published.csv").write_text("\n".join(rows[:-1]) + "\n")          # drop the last row
    monkeypatch.setattr(seed_mod, "DATA", data)
    mlperf_before = seeded.rows("SELECT count(*) FROM run WHERE suite = 'mlperf_training'")[0][0]
    assert seed(seeded)["mamf_published.csv"].startswith("loaded 21 runs")
    assert seeded.rows("SELECT count(*) FROM run WHERE tool LIKE 'mamf-finder%'")[0][0] == 21
    assert seeded.rows("SELECT count(*) FROM run WHERE suite = 'mlperf_training'")[0][0] == mlperf_before


def test_uploads_cannot_touch_published_rows(seeded):
    published = seeded.df("SELECT * FROM measurement JOIN run USING (run_id) JOIN source USING (source_id) "
                          "WHERE kind = 'published' ORDER BY run_id, stat, value")
    report = ingest_bytes(seeded, "mine.json", runner_file([matmul_result(8192, 8192, 8192, "bf16", [1.6e-3] * 7)]),
                          submitter="me")
    assert report.ingested
    with pytest.raises(PermissionError):
        delete_upload(seeded, "mlcommons:training_results_v4.1@b87b9e3")
    source_id = seeded.rows("SELECT source_id FROM source WHERE kind = 'user_submitted'")[0][0]
    assert delete_upload(seeded, source_id) == 1
    after = seeded.df("SELECT * FROM measurement JOIN run USING (run_id) JOIN source USING (source_id) "
                      "WHERE kind = 'published' ORDER BY run_id, stat, value")
    assert after.equals(published)
