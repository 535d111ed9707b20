"""TPU v6e (Trillium) at the precision it ran. Google's MLPerf v4.1 GPT-3 results on Trillium state no precision;
MaxText's own Trillium GPT-3 175B benchmark of that time trains with AQT int8 (benchmarks_db/validation.py
PRECISION_RULES), so those results fit MaxText's int8 level on the v6e and the v6e has no 16-bit level: a bf16
scenario on it borrows one and says so. Checked on Google's two published GPT-3 recipes on 256 chips
(tests/data/maxtext-trillium-gpt3-recipes.json), which nothing here is fitted on: read as BF16, the MLPerf results had
put the int8 recipe 18% fast (at a borrowed level) and the bf16 recipe 11% fast."""
import json

import pytest

from engine.inputs import parse_scenario
from engine.planning.estimate import estimate
from tests.conftest import DATA

RECIPES = json.loads((DATA / "maxtext-trillium-gpt3-recipes.json").read_text())


def _recipe(precision: str):
    cols = RECIPES["columns"]
    row = dict(zip(cols, next(r for r in RECIPES["rows"] if r[cols.index("precision")] == precision)))
    sc = parse_scenario({"model": {"preset": "gpt3-175b"},
                         "training": {"seq_len": row["seq_len"], "global_batch_size": row["global_batch_size"],
                                      "total_tokens": 1e11, "precision": precision, "framework": "jax_maxtext"},
                         "cluster": {"accelerator": "TPU-v6e", "n_gpus": row["n_chips"]},
                         "layout": {"dp": row["n_chips"], "zero_stage": 3, "recompute": "full",
                                    "micro_batch_size": row["global_batch_size"] // row["n_chips"]}})
    return estimate(sc), row["step_s"]


def test_the_int8_level_fitted_on_mlperf_predicts_googles_int8_recipe():
    e, published = _recipe("int8")
    assert e.framework["calibrated"] and "8bit" in e.framework["level_source"]
    assert e.step_time_s == pytest.approx(published, rel=0.10)                  # +4.4% when written
    assert e.time_range.support == "measured"


def test_bf16_on_a_v6e_is_uncalibrated_and_its_widest_band_holds_the_bf16_recipe():
    e, published = _recipe("bf16")
    assert not e.framework["calibrated"] and "uncalibrated" in e.framework["level_source"]
    band = e.time_range
    assert band.support == "uncalibrated" and band.level == "widest"
    assert band.low <= published / e.step_time_s <= band.high                   # 0.87 of the engine's time
    int8, _ = _recipe("int8")
    assert e.step_time_s > int8.step_time_s                                    # the int8 recipe is the faster one
