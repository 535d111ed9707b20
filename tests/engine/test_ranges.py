"""Ranges per regime (engine/economics/ranges.py, data/accuracy.json): the method on numbers worked by hand, the
estimate's step-time range from its regime, a regime without data, the deadline chance from the regime's band. The
coverage on held-out sources is recounted from the case list in tests/engine/test_range_coverage.py (slow)."""
import json
import math
import statistics
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


def test_a_centre_is_each_levels_source_mean_shrunk_toward_the_level_above():
    # a (two runs at 1.0) and b (1.21) at 9-1,023 GPUs, c (1.5) at 1,024+: worked by hand in logs, each source once.
    # Down to model x sharding every level pools all three: the mean of 0, ln 1.21 and ln 1.5 (shrinking a level
    # toward an equal one changes nothing); at scale the two pools shrink toward it with weight m / (m + 1)
    runs = _runs({"a": [1.0, 1.0], "b": [1.21]}) + _runs({"c": [1.5]}, scale="1,024+ accelerators")
    pooled = (math.log(1.21) + math.log(1.5)) / 3
    centres = ranges._centres(runs)
    small = {"method": "pretrain", "framework": "megatron_core", "family": "Hopper", "precision": "16bit",
             "model": "dense", "sharding": "replicated", "scale": "9-1,023 accelerators"}
    assert centres[(4, tuple(small[d] for d in ranges.LEVELS[4]))]["centre"] == pytest.approx(pooled)
    depth, mid = ranges._deepest(centres, small)
    assert depth == 5 and mid["centre"] == pytest.approx((2 * math.log(1.1) + pooled) / 3)
    assert mid["n_runs"] == 3 and mid["sources"] == ["a", "b"]
    _, big = ranges._deepest(centres, {**small, "scale": "1,024+ accelerators"})
    assert big["centre"] == pytest.approx((math.log(1.5) + pooled) / 2)
    # a run on a borrowed level sets no centre
    assert ranges._centres(_runs({"d": [3.0]}, calibrated=False)) == {}


def test_a_spread_is_the_conformal_quantile_of_residuals_with_the_source_left_out_per_support_class():
    # five sources of one run each in one regime: without source i the centre is the mean of the other four logs
    # (every level pools the same runs), so i's residual is |ln r_i - that mean|
    ratios = {"a": [0.9], "b": [1.0], "c": [1.05], "d": [1.1], "e": [1.3]}
    runs = _runs(ratios)
    logs = {s: math.log(r[0]) for s, r in ratios.items()}
    expected = sorted(abs(v - statistics.fmean(w for t, w in logs.items() if t != s)) for s, v in logs.items())
    res = ranges.residuals(runs)
    assert sorted(res[("pretrain", "measured")]) == pytest.approx(expected)
    # n = 5: ceil(0.8 * 6) = 5, the largest residual bounds 80% of a new run
    fitted = ranges.fit(runs)
    assert fitted["spreads"]["pretrain"]["measured"]["spread"] == pytest.approx(expected[-1])
    # the regime's band: its centre times and divided by the spread's factor
    band = next(b for b in fitted["bands"] if b["level"] == list(ranges.DIMENSIONS))
    centre = statistics.fmean(logs.values())
    assert (band["low"], band["median"], band["high"]) == pytest.approx(
        (math.exp(centre - expected[-1]), math.exp(centre), math.exp(centre + expected[-1])))
    # three runs cannot bound 80% (ceil(0.8 * 4) = 4 > 3); four can, with the largest (ceil(0.8 * 5) = 4)
    assert ranges._conformal([0.1, 0.2, 0.3]) is None and ranges._conformal([0.4, 0.1, 0.3, 0.2]) == 0.4


def test_a_regime_without_its_own_data_says_what_is_missing_and_gets_a_band_no_narrower():
    runs = (_runs({"a": [0.9, 0.95, 1.0], "b": [1.0, 1.05, 1.1], "c": [1.2, 1.3, 1.4]})
            + _runs({"d": [1.0, 1.1]}, framework="pytorch_fsdp2")
            + _runs({"e": [2.0, 0.5, 1.8, 0.6, 1.9]}, family="Blackwell", calibrated=False))
    fitted = ranges.fit(runs)
    hopper = {"method": "pretrain", "framework": "megatron_core", "family": "Hopper", "precision": "16bit",
              "model": "dense", "sharding": "replicated", "scale": "9-1,023 accelerators"}
    rb = ranges.band_from(fitted, hopper)
    assert rb.measured and rb.support == "measured" and rb.level == ranges._level_name(ranges.DIMENSIONS)
    assert rb.low <= 1 <= rb.high
    # the stack measured on another family only: says so; its spread is no narrower than the measured one's
    other = ranges.band_from(fitted, {**hopper, "family": "Blackwell"})
    assert not other.measured and other.support == "no family run" and other.level == "framework"
    assert "no published pre-training run of Megatron-Core / NeMo on Blackwell" in other.text
    spreads = fitted["spreads"]["pretrain"]
    assert spreads["no family run"]["spread"] >= spreads["measured"]["spread"]
    # a stack without runs of the method: every run of the method
    none = ranges.band_from(fitted, {**hopper, "framework": "deepspeed"})
    assert none.support == "no stack run" and "no published pre-training run of DeepSpeed" in none.text
    # an uncalibrated accelerator and a method without published runs: the widest band, from the borrowed levels'
    # residuals against the engine's own figure (e's five runs: |ln 2|, |ln 0.5|, ln 1.8, |ln 0.6|, ln 1.9; the
    # fifth smallest is ln 2), wider than any regime's
    uncal = ranges.band_from(fitted, hopper, calibrated=False)
    assert not uncal.measured and uncal.level == "widest" and "uncalibrated" in uncal.text
    assert (uncal.low, uncal.high) == pytest.approx((0.5, 2.0))
    assert all(uncal.high / uncal.low >= b["high"] / b["low"] for b in fitted["bands"])
    lora = ranges.band_from(fitted, {**hopper, "method": "lora"})
    assert lora.support == "no data" and "no published LoRA fine-tuning run" in lora.text and lora.level == "widest"
    # a MoE model where the stack has no MoE run on the family: the MoE physics is borrowed, the widest band
    moe = ranges.band_from(fitted, {**hopper, "model": "MoE"})
    assert (moe.support, moe.level, moe.measured) == ("no MoE run", "widest", False)
    assert "no published pre-training run of a MoE model on Megatron-Core / NeMo and Hopper" in moe.text
    assert (moe.low, moe.high) == pytest.approx((0.5, 2.0))
    one = ranges.band_from(ranges.fit(runs + _runs({"f": [1.1, 1.2]}, model="MoE")), {**hopper, "model": "MoE"})
    assert one.support == "no MoE run" and "come from one source (f)" in one.text       # never measured left out
    two = ranges.fit(runs + _runs({"f": [1.1, 1.2], "g": [1.0]}, model="MoE"))
    assert ranges.band_from(two, {**hopper, "model": "MoE"}).support == "measured"


def test_the_stored_fit_is_the_fit_of_the_stored_runs():
    acc = ranges.accuracy()
    refit = ranges.fit(acc["runs"])
    assert len(refit["bands"]) == len(acc["fit"]["bands"])
    for mine, stored in zip(refit["bands"], acc["fit"]["bands"]):
        assert (mine["level"], mine["key"], mine["n_runs"]) == (stored["level"], stored["key"], stored["n_runs"])
        assert (mine["low"], mine["high"]) == pytest.approx((stored["low"], stored["high"]), abs=1e-4)
    flat = lambda spreads: {(m, c): v["factor"] for m, cs in spreads.items() for c, v in cs.items()}
    assert flat(refit["spreads"]) == pytest.approx(flat(acc["fit"]["spreads"]), abs=1e-4)


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
    # the band is the stored fit's for the deepest level of this regime that has runs
    fitted = ranges.accuracy()["fit"]
    first = next(b for level in reversed(ranges.LEVELS) for b in fitted["bands"]
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
    # DeepSpeed has no level fitted on the H100 (engine.frameworks): uncalibrated, the widest band
    assert not rb.measured and rb.level == "widest" and "DeepSpeed" in rb.text and "uncalibrated" in rb.text
    assert (rb.low, rb.high) == (widest.low, widest.high)
    # the widest in width (a regime's band is centred on its runs, the widest on the engine's figure), with the
    # engine's figure in each
    assert all(widest.high / widest.low >= max(b["high"], 1) / min(b["low"], 1)
               for b in ranges.accuracy()["fit"]["bands"])
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
