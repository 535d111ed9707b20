"""Budget planner: GPU-hours and the runs a budget pays for, against hand arithmetic."""
import pytest

from engine.economics.cost import gpu_hours, plan_budget


def test_gpu_hours_by_hand():
    # 1 node x 4 GPUs x 3 h, 4 nodes x 8 GPUs x 6 h, 8 nodes x 8 GPUs x 24 h
    assert float(gpu_hours(1 * 4, 3 * 3600)) == pytest.approx(12)
    assert float(gpu_hours(4 * 8, 6 * 3600)) == pytest.approx(192)
    assert float(gpu_hours(8 * 8, 24 * 3600)) == pytest.approx(1536)
    # 8 GPUs for 4 h and 16 GPUs for 2 h cost the same
    assert float(gpu_hours(8, 4 * 3600)) == float(gpu_hours(16, 2 * 3600)) == pytest.approx(32)


def test_runs_that_fit_a_budget():
    # a 2,000 GPU-hour cap and 192 GPU-hours per run -> floor(2000 / 192) = 10 runs
    plan = plan_budget(192, budget_gpu_hours=2000)
    assert plan["max_runs"] == 10 and plan["left_over_gpu_hours"] == pytest.approx(80) and plan["warnings"] == []
    assert plan_budget(192, budget_gpu_hours=1920)["max_runs"] == 10          # an exact multiple is not rounded down
    money = plan_budget(192, budget_usd=10_000, usd_per_gpu_hour=2.0)       # $10k at $2 = 5,000 GPU-hours
    assert money["max_runs"] == 26 and money["run_usd"] == pytest.approx(384)
    # both budgets apply, as the plan meets them together: the smaller in GPU-hours binds
    both = plan_budget(192, budget_gpu_hours=2000, budget_usd=10_000, usd_per_gpu_hour=2.0)
    assert (both["max_runs"], both["binding"]) == (10, "GPU-hours")          # 2,000 < 5,000 GPU-hours
    both = plan_budget(192, budget_gpu_hours=8000, budget_usd=10_000, usd_per_gpu_hour=2.0)
    assert (both["max_runs"], both["binding"]) == (26, "USD")                # $10k at $2 = 5,000 < 8,000


def test_warnings_above_threshold_and_when_nothing_fits():
    # warn above a per-job threshold of the allocation policy (here 512 GPU-hours)
    big = plan_budget(1536, budget_gpu_hours=2000, warn_above_gpu_hours=512)
    assert big["max_runs"] == 1 and "512" in big["warnings"][0]
    assert plan_budget(1536, budget_gpu_hours=2000)["warnings"] == []            # no threshold unless one is given
    assert plan_budget(1536, budget_gpu_hours=2000, warn_above_gpu_hours=2000)["warnings"] == []
    none = plan_budget(192, budget_gpu_hours=100)
    assert none["max_runs"] == 0 and "does not cover one run" in none["warnings"][-1]


@pytest.mark.parametrize("kwargs, words", [
    ({"run_gpu_hours": 0, "budget_gpu_hours": 10}, "positive"),
    ({"run_gpu_hours": float("nan"), "budget_gpu_hours": 10}, "finite"),
    ({"run_gpu_hours": 10}, "give a budget"),
    ({"run_gpu_hours": 10, "budget_gpu_hours": 5, "budget_usd": 5}, "usd_per_gpu_hour"),
    ({"run_gpu_hours": 10, "budget_usd": 100}, "usd_per_gpu_hour"),
    ({"run_gpu_hours": 10, "budget_gpu_hours": -1}, "non-negative"),
    ({"run_gpu_hours": 10, "budget_gpu_hours": 100, "warn_above_gpu_hours": 0}, "warn_above"),
])
def test_bad_input_says_what_is_wrong(kwargs, words):
    with pytest.raises(ValueError, match=words):
        plan_budget(**kwargs)
