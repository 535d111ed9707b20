"""python -m benchmarks_db training-runs, and the line `ingest` prints for a step-time log: an uploaded run's measured
step time beside the planner's prediction, and, once its upload is trusted, the cluster's step time and days before
and after calibration (benchmarks_db/step_time.py), from the command line as the Benchmarks page shows them."""
import json
import re
import statistics
from pathlib import Path

import pytest

from benchmarks_db.__main__ import main
from engine.inputs import parse_scenario
from engine.planning.estimate import estimate

from .test_step_logs import LOGS, MAXTEXT_SCENARIO


def _steady_step_times() -> list[float]:
    """The log's own seconds per step after MaxText's ten warm-up steps (0-9), read here from its text."""
    text = (LOGS / "maxtext-llama2-7b-h100x8.log").read_text()
    return [float(m.group(2)) for m in re.finditer(r"completed step: (\d+), seconds: ([\d.]+)", text)
            if int(m.group(1)) >= 10]


@pytest.fixture
def uploaded(tmp_path, capsys) -> tuple[Path, str]:
    db, scenario = tmp_path / "runs.duckdb", tmp_path / "scenario.json"
    scenario.write_text(json.dumps(MAXTEXT_SCENARIO))
    assert main(["--db", str(db), "ingest", str(LOGS / "maxtext-llama2-7b-h100x8.log"), "--scenario",
                 str(scenario)]) == 0
    return db, capsys.readouterr().out


def _json(db: Path, capsys) -> dict:
    assert main(["--db", str(db), "training-runs", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_ingest_says_the_measured_step_beside_the_prediction(uploaded):
    _, out = uploaded
    steps = _steady_step_times()
    predicted = estimate(parse_scenario(MAXTEXT_SCENARIO)).step_time_s
    assert len(steps) == 20 and statistics.median(steps) == pytest.approx(4.0175)
    assert (f"measured {statistics.median(steps):.3f} s a step, the planner predicts {predicted:.3f} s for its "
            f"scenario (measured / predicted {statistics.median(steps) / predicted:.3f}") in out


def test_training_runs_before_and_after_trust(uploaded, capsys):
    db, _ = uploaded
    doc = _json(db, capsys)
    (run,) = doc["runs"]
    steps = _steady_step_times()
    predicted = estimate(parse_scenario(MAXTEXT_SCENARIO)).step_time_s
    assert run["measured_s"] == pytest.approx(statistics.median(steps)) and run["n_samples"] == 20
    assert run["predicted_s"] == pytest.approx(predicted) and run["ratio"] == pytest.approx(run["measured_s"] / predicted)
    assert run["p10_s"] >= min(steps) and run["p90_s"] <= max(steps) and not run["trusted"]
    assert (run["accelerator_id"], run["framework"], run["n_gpus"]) == ("H100-SXM5-80GB", "jax_maxtext", 8)
    # the level factor is the one with which the engine reproduces the run
    scaled = {**MAXTEXT_SCENARIO, "cluster": {**MAXTEXT_SCENARIO["cluster"], "level_scale": run["level_scale"]}}
    assert estimate(parse_scenario(scaled)).step_time_s == pytest.approx(run["measured_s"], rel=2e-3)
    assert doc["calibrated"] == []
    assert main(["--db", str(db), "training-runs"]) == 0
    assert "no cluster is calibrated yet" in capsys.readouterr().out

    assert main(["--db", str(db), "trust", run["source_id"], "--by", "operator"]) == 0
    capsys.readouterr()
    (cal,) = _json(db, capsys)["calibrated"]
    assert (cal["accelerator"], cal["framework"], cal["n_runs"]) == ("H100-SXM5-80GB", "jax_maxtext", 1)
    step = cal["figures"]["step_time_s"]
    assert step["before"]["value"] == pytest.approx(predicted)
    # after: the measured step time, inside the run's own 10th-90th percentile spread
    assert step["after"]["value"] == pytest.approx(statistics.median(steps), rel=2e-3)
    assert step["after"]["low"] == pytest.approx(step["after"]["value"] * run["p10_s"] / run["measured_s"])
    assert step["after"]["high"] == pytest.approx(step["after"]["value"] * run["p90_s"] / run["measured_s"])
    assert main(["--db", str(db), "training-runs"]) == 0
    table = capsys.readouterr().out
    assert "H100-SXM5-80GB on jax_maxtext: the stack's level x" in table and f"{step['after']['value']:.3f}" in table


def test_no_runs_says_how_to_add_one(tmp_path, capsys):
    assert main(["--db", str(tmp_path / "empty.duckdb"), "training-runs"]) == 0
    assert "ingest LOG --scenario" in capsys.readouterr().out


def test_a_run_whose_stored_scenario_no_longer_parses_is_listed_with_why_and_calibrates_nothing(uploaded, capsys):
    """A long-lived store may hold a run whose scenario a later planner cannot read (a renamed preset): it is listed
    with the reason, not predicted, and left out of calibration, instead of stopping the listing and the page."""
    import duckdb
    db, _ = uploaded
    stale = {**MAXTEXT_SCENARIO, "model": {"preset": "llama2-7b-renamed"}}
    with duckdb.connect(str(db)) as con:              # what an older planner wrote, as this one finds it
        con.execute("UPDATE run SET params = json_merge_patch(params, ?) WHERE suite = 'training_run'",
                    [json.dumps({"scenario": stale})])
        source_id = con.execute("SELECT source_id FROM run WHERE suite = 'training_run'").fetchone()[0]
    assert main(["--db", str(db), "trust", source_id, "--by", "operator"]) == 0
    capsys.readouterr()
    doc = _json(db, capsys)
    (run,) = doc["runs"]
    assert run["predicted_s"] is None and run["ratio"] is None and run["level_scale"] is None
    assert "no longer fits this planner" in run["problem"] and "llama2-7b-renamed" in run["problem"]
    assert doc["calibrated"] == []
    assert main(["--db", str(db), "training-runs"]) == 0
    assert "not predicted: its stored scenario no longer fits this planner" in capsys.readouterr().out
