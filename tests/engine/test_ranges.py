"""Ranges per regime (engine/economics/ranges.py, data/accuracy.json): the method on numbers worked by hand, the
estimate's step-time range from its regime, a regime without data, the deadline chance from the regime's band. The
coverage on held-out sources is recounted from the case list in tests/engine/test_range_coverage.py (slow)."""
import json
import math
import subprocess
import sys

import pytest

from engine.economics import ranges
from engine.inputs import parse_scenario
from engine.planning.estimate import estimate
from tests.conftest import ROOT

H100_70B = {"model": {"preset": "llama3.1-70b"},
            "training": {"seq_len": 8192, "global_batch_size": 1024, "total_tokens": 15.6e12, "precision": "bf16"},
            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 1024},
            "layout": {"tp": 8, "pp": 4, "dp": 32, "micro_batch_size": 1, "virtual_stages": 5, "zero_stage": 1,
                       "sequence_parallel": True, "recompute": "selective"}}


def _runs(ratios_by_source: dict[str, list[float]], **regime) -> list[dict]:
    base = {"method": "pretrain", "framework": "megatron_core", "family": "Hopper", "precision": "16bit", "model": "dense",
            "sharding": "replicated", "scale": "9-1,023 accelerators", "calibrated": True, **regime}
    return [{**base, "source": s, "ratio": r} for s, rs in ratios_by_source.items() for r in rs]


def test_a_band_is_the_conformal_quantile_of_residuals_from_the_centre_fitted_without_each_source():
    # 9 runs from 3 sources, source c off high; worked by hand in ratios: the centre is the median of all nine, 1.05;
    # without c the median of a and b is 1.0 (residuals of c: 1.2, 1.3, 1.4); without a, of b and c: the geometric
    # mean of 1.1 and 1.2 (residuals of a: 0.9, 0.95, 1.0 over it); without b, of a and c: sqrt(1.0 * 1.2).
    runs = _runs({"a": [0.9, 0.95, 1.0], "b": [1.0, 1.05, 1.1], "c": [1.2, 1.3, 1.4]})
    band = ranges._level_band(runs)
    # n = 9: order statistics floor(0.1*10) = 1 and ceil(0.9*10) = 9: the smallest residual (a's 0.9 over
    # sqrt(1.1*1.2)) and the largest (c's 1.4), around the centre; wider than the runs' own 0.9-1.4
    assert band["median"] == pytest.approx(1.05)
    assert band["low"] == pytest.approx(1.05 * 0.9 / math.sqrt(1.1 * 1.2)) and band["high"] == pytest.approx(1.05 * 1.4)
    assert band["n_runs"] == 9 and band["sources"] == ["a", "b", "c"]
    # 8 runs cannot bound 80% of a new run (ceil(0.9*9) = 9 > 8); one source cannot say how far the next one lands
    assert ranges._level_band(runs[:8]) is None
    assert ranges._level_band(_runs({"a": [1.0] * 12})) is None


def test_a_thin_regime_falls_back_to_a_named_coarser_level_and_an_unmeasured_one_gets_the_widest_band():
    runs = (_runs({"a": [0.9, 0.95, 1.0], "b": [1.0, 1.05, 1.1], "c": [1.2, 1.3, 1.4]})
            + _runs({"d": [1.5, 1.6]}, scale="1,024+ accelerators")
            + _runs({"e": [2.0] * 10}, framework="pytorch_fsdp2", calibrated=False))
    fitted = ranges.fit(runs)
    big = {"method": "pretrain", "framework": "megatron_core", "family": "Hopper", "precision": "16bit", "model": "dense",
           "sharding": "replicated", "scale": "1,024+ accelerators"}
    rb = ranges.band_from(fitted, big)
    # two runs at 1,024+ GPUs are too few for their own band: the level without scale (all 11 runs, 4 sources)
    assert rb.measured and rb.level == "framework x family x precision x model x sharding" and rb.n_runs == 11
    assert "scale pooled" in rb.text
    # a stack never measured on this family, and an uncalibrated accelerator: the widest band, saying why
    none = ranges.band_from(fitted, {**big, "framework": "deepspeed"})
    assert not none.measured and none.level == "widest" and "no published pretrain run of deepspeed on Hopper" in none.text
    # a fine-tuning method without published runs: the widest band, saying so
    lora = ranges.band_from(fitted, {**big, "method": "lora"})
    assert not lora.measured and "no published lora run of megatron_core on Hopper" in lora.text
    uncal = ranges.band_from(fitted, big, calibrated=False)
    assert not uncal.measured and "uncalibrated" in uncal.text
    assert none.low <= min(b["low"] for b in fitted["bands"]) and none.high >= max(b["high"] for b in fitted["bands"])
    # the widest band also holds every run pooled, the uncalibrated ones included (the 2.0s of source e)
    assert none.high >= 2.0 * 0.999


def test_the_stored_fit_is_the_fit_of_the_stored_runs():
    acc = ranges.accuracy()
    refit = ranges.fit(acc["runs"])
    assert len(refit["bands"]) == len(acc["fit"]["bands"])
    for mine, stored in zip(refit["bands"], acc["fit"]["bands"]):
        assert (mine["level"], mine["key"], mine["n_runs"]) == (stored["level"], stored["key"], stored["n_runs"])
        assert (mine["low"], mine["high"]) == pytest.approx((stored["low"], stored["high"]), abs=1e-4)


def test_the_estimate_json_carries_the_step_time_range_of_its_regime(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(H100_70B))
    out = subprocess.run([sys.executable, "-m", "engine", "estimate", str(f)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    est = json.loads(out.stdout)
    low, high, step = est["step_time_range_s"]["low"], est["step_time_range_s"]["high"], est["step_time_s"]
    assert low < step < high
    rb = est["time_range"]
    assert rb["regime"] == {"method": "pretrain", "framework": "megatron_core", "family": "Hopper", "precision": "16bit", "model": "dense",
                            "sharding": "replicated", "scale": "1,024+ accelerators"}
    assert rb["measured"] and (low, high) == pytest.approx((step * rb["low"], step * rb["high"]))
    # the band is the stored fit's for the first level of this regime that has one
    fitted = ranges.accuracy()["fit"]
    first = next(b for level in ranges.LEVELS for b in fitted["bands"]
                 if b["level"] == list(level) and b["key"] == {d: rb["regime"][d] for d in level})
    assert (rb["low"], rb["high"]) == pytest.approx((min(first["low"], 1), max(first["high"], 1)))


def test_every_time_proportional_range_uses_the_estimates_regime_band():
    from engine.presentation.figures import headline_bands
    est = estimate(parse_scenario(H100_70B))
    rb = est.time_range
    for key, b in headline_bands(est).items():
        if b is not None:
            assert (b.low / b.value, b.high / b.value) == pytest.approx((rb.low, rb.high)), key


def test_a_stack_without_data_says_so_and_gets_the_widest_band():
    deepspeed = estimate(parse_scenario({**H100_70B, "training": {**H100_70B["training"], "framework": "deepspeed"}}))
    rb = deepspeed.time_range
    widest = ranges.widest()
    assert not rb.measured and rb.level == "widest" and "deepspeed" in rb.text
    assert (rb.low, rb.high) == (widest.low, widest.high)
    assert all(widest.low <= b["low"] and b["high"] <= widest.high for b in ranges.accuracy()["fit"]["bands"])
    assert deepspeed.step_time_range_s["low"] < deepspeed.step_time_s < deepspeed.step_time_range_s["high"]


def test_the_deadline_chance_reads_the_regimes_band():
    measured = estimate(parse_scenario(H100_70B)).time_range
    unknown = ranges.widest()
    days, deadline = 100.0, 100.0 * (measured.median + measured.high) / 2
    # linear between the median (50%) and the 90th percentile: halfway is 70%
    assert ranges.chance_within(days, deadline, measured)["chance"] == pytest.approx(0.7)
    wide = ranges.chance_within(days, deadline, unknown)["chance"]
    x = deadline / days
    expected = (0.1 + 0.4 * (x - unknown.low) / (1 - unknown.low) if x < 1
                else 0.5 + 0.4 * (x - 1) / (unknown.high - 1))
    assert wide == pytest.approx(expected) and not math.isclose(wide, 0.7)
