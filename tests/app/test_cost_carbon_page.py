"""Cost & carbon page: the engine's time, cost, energy and CO2 figures, the buy-or-rent break-even, and the budget
planner with its guardrails."""
import json

from engine.economics.cost import plan_budget
from engine.presentation.edit import default_scenario
from engine.planning.estimate import estimate
from tests.app.conftest import metric, on_page, run_app, texts


def cost_page():
    return on_page(run_app(), "cost_carbon")


def test_the_figures_are_the_engines():
    at = cost_page()
    est = estimate(default_scenario())
    assert metric(at, "Goodput") == f"{est.goodput * 100:.1f}%"
    assert metric(at, "Cost (cloud)") == f"${est.cost_usd / 1e6:.3g}M"
    three_digits = lambda x: f"{round(x, -(len(str(int(x))) - 3)):,.0f}"      # 6,754.3 -> '6,750'
    assert metric(at, "Energy") == three_digits(est.energy_mwh) + " MWh"
    assert metric(at, "CO2, location-based") == three_digits(est.energy["co2_location_t"]) + " t"
    assert metric(at, "Expected interruptions") == f"{est.reliability['expected_failures']:,.0f}"


def test_the_break_even_chart_crosses_at_the_engines_break_even_years():
    at = cost_page()
    est = estimate(default_scenario())
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    buy, rent = fig["data"][0], fig["data"][1]
    years = est.cost["on_prem"]["break_even"]["years_at_utilisation"]
    crossing = next(i for i, (b, r) in enumerate(zip(buy["y"], rent["y"])) if r >= b)
    assert buy["x"][crossing - 1] <= years <= buy["x"][crossing]
    assert any(abs(s.get("x0", -1) - years) < 1e-9 for s in fig["layout"]["shapes"])


def test_the_budget_planner_counts_runs_and_warns_about_big_jobs_only_above_a_limit_you_set():
    at = cost_page()
    assert any("Enter a budget" in i for i in texts(at.info))
    billed = estimate(default_scenario()).cost["billed_gpu_hours"]
    at.number_input(key="opt:gpu_hour_budget").set_value(10_000_000.0).run()
    plan = plan_budget(billed, budget_gpu_hours=10_000_000.0)
    assert metric(at, "Runs the budget pays for") == f"{plan['max_runs']:,}" == "1"     # 10M / 5.65M billed
    assert not at.warning                               # every real run is far above 512 GPU-hours: no default limit
    at.number_input(key="opt:budget_warn_gpu_hours").set_value(512.0).run()
    assert any("above the 512 GPU-hour per-job threshold" in w for w in texts(at.warning))
    at.number_input(key="opt:budget_usd").set_value(5e6).run()
    # both budgets apply, as the question on the Scenario page meets them together: $5M at the H100's price buys
    # fewer GPU-hours than the 10M allocation, so the money binds and no run fits
    price = estimate(default_scenario()).cost["usd_per_gpu_hour"]
    assert not at.error and 5e6 / price < 10_000_000.0 < billed * 2
    assert metric(at, "Runs the budget pays for") == "0"
    assert any("the USD budget is the tighter" in c for c in texts(at.caption))
    at = cost_page()
    at.number_input(key="opt:budget_usd").set_value(5e6).run()
    plan = plan_budget(billed, budget_usd=5e6, usd_per_gpu_hour=estimate(default_scenario()).cost["usd_per_gpu_hour"])
    assert plan["max_runs"] == 0
    assert metric(at, "Runs the budget pays for") == "0"
    assert any("does not cover one run" in w for w in texts(at.warning))


def test_a_market_based_intensity_adds_the_market_based_figure():
    at = run_app()
    at.number_input(key="w:site.market_based_g_per_kwh").set_value(0.0).run()
    on_page(at, "cost_carbon")
    assert metric(at, "CO2, market-based") == "0 t"


def test_owning_the_hardware_shows_each_term_and_takes_your_operations_cost():
    at = run_app()
    at.number_input(key="w:cost.on_prem.ops_usd_per_gpu_year").set_value(10_000.0).run()
    on_page(at, "cost_carbon")
    terms = next(t for t in texts(at.markdown) if t.startswith("**Owned cost per used GPU-hour, term by term:**"))
    assert "operations $1.43" in terms               # $10,000 / (8,766 h x 80% utilisation) = $1.426 per used hour
    inputs = next(t for t in texts(at.markdown) if t.startswith("- **"))      # a list: sources are sentences
    row = next(line for line in inputs.splitlines() if line.startswith("- **operations per GPU-year**"))
    assert row.startswith("- **operations per GPU-year**: 10,000 USD per GPU-year. your value. Source: "), row
    assert "Scenario page" in row and "cost.on_prem" not in row                      # plain words, no field path
