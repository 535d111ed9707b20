"""Vendor comparison: each accelerator with its own best layout, a weighted decision score and reasons."""
import json
import subprocess
import sys

import pytest

from engine.catalog import load_catalog
from engine.scenario import ScenarioError
from engine.inputs import parse_scenario
from engine.planning.search import search
from engine.planning.vendor import CRITERIA, compare, ecosystem_table, rescore
from tests.conftest import ROOT
from tests.engine.helpers import scenario

SC = scenario(**{"model.preset": "llama3.1-8b", "cluster.n_gpus": 64, "layout": None, "training.seq_len": 4096,
                 "training.global_batch_size": 512, "training.total_tokens": 1e12})


@pytest.fixture(scope="module")
def result():
    return compare(parse_scenario(SC))


def test_every_accelerator_has_a_row(result):
    assert {r.accelerator for r in result.rows} == set(load_catalog().accelerators)
    ranked = [r for r in result.rows if r.rank]
    assert [r.rank for r in ranked] == list(range(1, len(ranked) + 1))
    # every shipping accelerator ranks before any known only from its announcement; among each, every accelerator
    # scored on all weighted criteria before any scored without one (no price: cost weighs 30%), each group by its score
    shipping = [r for r in ranked if r.status == "shipping"]
    announced = [r for r in ranked if r.status == "announced"]
    assert ranked == shipping + announced and announced
    full = [r for r in shipping if not r.unknown]
    partial = [r for r in shipping if r.unknown]
    assert shipping == full + partial and full and partial
    for group in (full, partial, announced):
        scores = [r.decision_score for r in group]
        assert scores == sorted(scores, reverse=True) and all(0 <= x <= 1 for x in scores)
    assert result.recommendation == ranked[0].accelerator


def test_an_accelerator_without_a_price_is_never_ranked_first_on_a_cost_weighted_score():
    # GB300 has no published price; scored on time alone it is the fastest, so it would lead the renormalised score
    out = compare(parse_scenario(SC), weights={"time": 0.5, "cost": 0.5},
                  accelerators=["GB300", "H100-SXM5-80GB", "A100-SXM4-80GB"]).as_json()
    gb300 = next(r for r in out["rows"] if r["accelerator"] == "GB300")
    assert gb300["cost_usd"] is None and gb300["scores"]["time"] == pytest.approx(1.0)
    assert gb300["decision_score"] == pytest.approx(1.0)            # what it can be scored on, it wins
    assert out["recommendation"] != "GB300" and gb300["rank"] == 3
    assert "scored without cost (no price: enter one)" in gb300["why"]


def test_rows_are_the_search_best_layouts(result):
    row = next(r for r in result.rows if r.accelerator == "MI300X")
    data = {**SC, "cluster": {"accelerator": "MI300X", "n_gpus": 64}}
    best = search(parse_scenario(data), top=1, pareto_sizes=[]).best[0]
    assert row.layout == best.layout and row.train_days == best.train_days


def test_best_value_of_each_criterion_scores_one(result):
    ranked = [r for r in result.rows if r.rank]
    for c, (key, lower) in CRITERIA.items():
        known = [r for r in ranked if getattr(r, key) is not None]
        if known:
            top = min(known, key=lambda r: getattr(r, key)) if lower else max(known, key=lambda r: getattr(r, key))
            assert top.scores[c] == pytest.approx(1.0)


def test_weights_steer_the_recommendation():
    fast = compare(parse_scenario(SC), weights={"time": 1})
    ranked = [r for r in fast.rows if r.rank]
    assert ranked[0].wall_days == min(r.wall_days for r in ranked if r.status == "shipping")   # announced ones rank last
    eco = compare(parse_scenario(SC), weights={"ecosystem": 1}, accelerators=["MI300X", "H100-SXM5-80GB", "TPU-v5p"])
    assert eco.recommendation == "H100-SXM5-80GB"     # CUDA rates first-class on every ecosystem criterion
    assert ecosystem_table()["CUDA"]["score"] == 1.0


def test_precision_falls_back_where_unsupported():
    fp8 = compare(parse_scenario({**SC, "training": {**SC["training"], "precision": "fp8"}}),
                  accelerators=["A100-SXM4-80GB", "H100-SXM5-80GB"])
    rows = {r.accelerator: r for r in fp8.rows}
    assert rows["A100-SXM4-80GB"].precision == "bf16" and "no fp8 support" in rows["A100-SXM4-80GB"].precision_note
    assert rows["H100-SXM5-80GB"].precision == "fp8"


def test_a_deadline_sizes_each_cluster():
    out = compare(parse_scenario(SC), deadline_days=20, accelerators=["H100-SXM5-80GB", "A100-SXM4-80GB", "GB200"])
    for r in out.rows:
        assert r.rank and r.wall_days <= 20 and r.meets_target
    slow = {r.accelerator: r.n_gpus for r in out.rows}
    assert slow["A100-SXM4-80GB"] > slow["H100-SXM5-80GB"]       # A100 needs more GPUs for the same deadline


def test_calibration_replaces_defaults():
    base = compare(parse_scenario(SC), accelerators=["H100-SXM5-80GB"]).rows[0]
    slow = compare(parse_scenario(SC), accelerators=["H100-SXM5-80GB"],
                   calibrations={"H100-SXM5-80GB": {"matmul_efficiency": 0.4}}).rows[0]
    assert slow.measured_efficiencies and not base.measured_efficiencies and slow.train_days > 1.5 * base.train_days
    # the row says "calibrated" once, for the stack's fitted level (Megatron-Core's H100 level, Megatron-LM's H100
    # weak-scaling table), not for whether the cluster's own measurements were used
    row = base.model_dump()
    assert "calibrated" not in row and row["framework"]["calibrated"] is True


def test_reasons_are_plain_language(result):
    ranked = [r for r in result.rows if r.rank]
    assert ranked[0].name in result.why and "days on" in result.why
    assert "compared with" in ranked[1].why and "x the time" in ranked[1].why


def test_bad_weights_are_refused():
    with pytest.raises(ScenarioError) as info:
        compare(parse_scenario(SC), weights={"speed": 1})
    assert "unknown criteria" in str(info.value)
    with pytest.raises(ScenarioError):
        compare(parse_scenario(SC), weights={"time": -1})


def test_cli_compare(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(SC))
    out = subprocess.run([sys.executable, "-m", "engine", "compare", str(f), "--accelerators", "H100-SXM5-80GB,MI300X",
                          "--weights", "time=1"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert {r["accelerator"] for r in res["rows"]} == {"H100-SXM5-80GB", "MI300X"}
    bad = subprocess.run([sys.executable, "-m", "engine", "compare", str(f), "--weights", "time"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--weights" in bad.stderr


def test_rescore_equals_a_fresh_comparison_under_new_weights(result):
    weights = {"memory_headroom": 1.0, "ecosystem": 0.5}
    fresh = compare(parse_scenario(SC), weights=weights)
    again = rescore(result, weights)
    assert again.recommendation == fresh.recommendation and again.why == fresh.why
    assert [(r.accelerator, r.rank, r.decision_score) for r in again.rows] == \
           [(r.accelerator, r.rank, r.decision_score) for r in fresh.rows]
    back = rescore(again, None)
    assert [r.accelerator for r in back.rows] == [r.accelerator for r in result.rows]
