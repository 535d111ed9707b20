"""Upload a real run's step-time log -> the operator trusts it -> the calibrated figure (benchmarks_db/step_time.py),
on a real DuckDB file; and the schema upgrade that lets the store hold step times."""
import json
import subprocess
import sys

import numpy as np
import pytest

from benchmarks_db import store as store_module, writer
from benchmarks_db.calibration import calibrated_cluster
from benchmarks_db.ingest import Uploader, ingest_bytes
from benchmarks_db.migrations import MIGRATIONS
from benchmarks_db.seed import seed
from benchmarks_db.step_time import (level_calibration, measured_band, predicted_step_s, predicted_vs_measured,
                                     runs_version)
from benchmarks_db.store import open_store
from benchmarks_db.trust import set_trusted
from engine.inputs import parse_scenario
from engine.physics.hardware import resolve_hardware
from engine.planning.estimate import estimate
from tests.benchmarks_db.test_step_logs import LOGS, TT_SCENARIO

# the steady steps 15-21 of tests/data/step-logs/torchtitan-pr3393.log: tokens/s per GPU as printed
TPS = [7334, 7313, 7282, 7322, 7309, 7272, 7304]
STEPS_S = [8 * 8192 / (t * 8) for t in TPS]


def _upload(store, uploader=None):
    data = (LOGS / "torchtitan-pr3393.log").read_bytes()
    return ingest_bytes(store, "tt.log", data, scenario=TT_SCENARIO, uploader=uploader)


def test_the_training_runs_version_changes_with_a_run_or_its_trust_not_with_other_uploads(seeded, tmp_path):
    """The key of the Benchmarks page's background predictions (ui/background.py training_runs): a new job when a
    run is added or trusted, the finished one kept when a microbenchmark arrives."""
    from tests.conftest import runner_result
    empty = runs_version(seeded)
    assert empty[0] == 0
    assert ingest_bytes(seeded, "matmul.json", runner_result("matmul", tmp_path / "m.json").read_bytes()).ingested
    assert runs_version(seeded) == empty
    report = _upload(seeded)
    added = runs_version(seeded)
    assert added[0] == 1 and added != empty
    set_trusted(seeded, report.source_id, "ops@example.com")
    trusted = runs_version(seeded)
    assert trusted[0] == 1 and trusted != added
    set_trusted(seeded, report.source_id, None)
    assert runs_version(seeded) == added


def test_upload_trust_calibrate_round_trip(seeded):
    report = _upload(seeded)
    assert report.ingested and report.trusted_by is None and report.flags == []
    table = predicted_vs_measured(seeded)
    row = table.iloc[0]
    measured = float(np.median(STEPS_S))
    assert row.measured_s == pytest.approx(measured, rel=1e-12)
    before = estimate(parse_scenario(TT_SCENARIO)).step_time_s
    assert row.predicted_s == pytest.approx(before) and row.ratio == pytest.approx(measured / before)
    # untrusted: shown, but calibrates nothing
    out = calibrated_cluster(seeded, "H100-SXM5-80GB", "bf16", 8, 8, "pytorch_fsdp2")
    assert "level_scale" not in out["overrides"]
    assert out["missing"]["level_scale"] == "no trusted step-time log of pytorch_fsdp2 on H100-SXM5-80GB"
    set_trusted(seeded, report.source_id, "ops@example.com")
    out = calibrated_cluster(seeded, "H100-SXM5-80GB", "bf16", 8, 8, "pytorch_fsdp2")
    scale = out["overrides"]["level_scale"]
    assert out["evidence"]["level_scale"]["runs"] == report.run_ids
    # after: the engine with the calibrated level reproduces the measured median step time
    calibrated = {**TT_SCENARIO, "cluster": {**TT_SCENARIO["cluster"], **out["overrides"]}}
    after = estimate(parse_scenario(calibrated)).step_time_s
    assert after == pytest.approx(measured, rel=2e-3)
    hw = resolve_hardware(parse_scenario(calibrated))
    assert hw.provenance["sustained_kernel_fraction"] == pytest.approx(
        resolve_hardware(parse_scenario(TT_SCENARIO)).provenance["sustained_kernel_fraction"] * scale)
    # the band narrows to the measurement's own 10th-90th percentile spread
    cal = level_calibration(seeded).iloc[0]
    band = measured_band(after, cal)
    assert band["low"] / after == pytest.approx(np.percentile(STEPS_S, 10) / measured)
    assert band["high"] / after == pytest.approx(np.percentile(STEPS_S, 90) / measured)
    assert band["high"] / band["low"] < 1.01            # 7,272-7,334 tokens/s: under 1% apart
    # another stack on the same accelerator is not calibrated by it
    assert "level_scale" not in calibrated_cluster(seeded, "H100-SXM5-80GB", "bf16", 8, 8, "megatron_core")["overrides"]
    set_trusted(seeded, report.source_id, None)
    assert "level_scale" not in calibrated_cluster(seeded, "H100-SXM5-80GB", "bf16", 8, 8, "pytorch_fsdp2")["overrides"]


def test_a_noisy_run_is_stored_flagged_and_never_calibrates(seeded):
    lines = [f"step: {s}  loss:  3.0  memory:  9.46GiB(64.99%)  tps: {t:,}  tflops: 0.52  mfu: 0.17%"
             for s, t in zip(range(10, 17), [7300, 7300, 5000, 7300, 9000, 7300, 4000])]
    report = ingest_bytes(seeded, "noisy.log", "\n".join(lines).encode(), scenario=TT_SCENARIO,
                          uploader=Uploader(identity="ops", trusted=True))
    assert report.ingested and any("noisy" in f for f in report.flags)
    assert level_calibration(seeded).empty


def test_the_prediction_compared_is_the_scenario_that_ran(seeded):
    assert _upload(seeded).ingested
    stored = json.loads(predicted_vs_measured(seeded).scenario.iloc[0])
    assert stored["layout"]["zero_stage"] == 3 and stored["training"]["framework"] == "pytorch_fsdp2"
    assert predicted_step_s(stored) == pytest.approx(estimate(parse_scenario(TT_SCENARIO)).step_time_s)


def test_upgrade_keeps_every_row(location, monkeypatch):
    path = location
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:4])
    # the code of schema 4 wrote no upload visibility (migration 6)
    monkeypatch.setattr(writer, "SOURCE", {k: v for k, v in writer.SOURCE.items() if k != "visibility"})
    old = open_store(path)
    seed(old)
    before = old.counts()
    old.close()
    monkeypatch.undo()                                   # today's migrations and writer
    new = open_store(path)
    assert new.schema_version() == len(MIGRATIONS) and new.counts() == before
    assert _upload(new).ingested
    new.close()


def test_cli_ingest_with_the_scenario(location, tmp_path):
    scenario = tmp_path / "sc.json"
    scenario.write_text(json.dumps(TT_SCENARIO))
    db = location
    log = LOGS / "torchtitan-pr3393.log"
    cmd = [sys.executable, "-m", "benchmarks_db", "ingest", "--db", str(db), str(log)]
    refused = subprocess.run(cmd, capture_output=True, text=True)
    assert refused.returncode == 1 and "upload it with the scenario it ran" in refused.stdout
    done = subprocess.run(cmd + ["--scenario", str(scenario), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)[0]["format"] == "step_log_torchtitan"
    unknown = subprocess.run(cmd + ["--scenario", "ABCDEFGHJK"], capture_output=True, text=True)
    assert unknown.returncode == 1 and "--scenario 'ABCDEFGHJK': not a file" in unknown.stdout
