"""Cost & carbon: time to train with failures, GPU-hours, cloud against owned hardware, energy, CO2 and the budget
planner."""
import plotly.graph_objects as go
import streamlit as st

from engine.economics.cost import DEFAULT_WARN_GPU_HOURS, plan_budget
from engine.presentation.report import break_even_curves, fmt_days, fmt_num, fmt_pct, fmt_seconds, fmt_usd
from pages import common

sc = common.scenario()
opts = common.options()
est = common.current_estimate()
cost, energy, rel = est["cost"], est["energy"], est["reliability"]


def break_even_figure(curves: dict) -> go.Figure:
    fig = go.Figure()
    fig.add_scatter(x=curves["years"], y=curves["buy_usd"], name="buy (capex, then operations and power)",
                    line_color="#4C78A8", hovertemplate="%{x:.1f} years: $%{y:,.0f}<extra>buy</extra>")
    fig.add_scatter(x=curves["years"], y=curves["rent_usd"], name=f"rent at ${curves['rent_usd_per_gpu_hour']:.2f} "
                                                                   "per GPU-hour", line_color="#F58518",
                    hovertemplate="%{x:.1f} years: $%{y:,.0f}<extra>rent</extra>")
    if curves["break_even_years"] is not None:
        fig.add_vline(x=curves["break_even_years"], line_dash="dash", line_color="#222",
                      annotation_text=f"break-even {curves['break_even_years']:.1f} years")
    fig.update_layout(xaxis_title="years of use", yaxis_title="cumulative cost of the cluster (USD)", height=380,
                      legend_orientation="h", margin=dict(t=30, b=10))
    return fig


def co2_figure() -> go.Figure:
    parts = [("operational, location-based", energy["co2_location_t"], "#E45756"),
             ("operational, market-based", energy["co2_market_t"], "#72B7B2"),
             ("embodied (manufacturing share)", energy["embodied"]["co2_t"], "#BAB0AC")]
    shown = [(n, v, c) for n, v, c in parts if v is not None]
    fig = go.Figure(go.Bar(x=[n for n, _, _ in shown], y=[v for _, v, _ in shown], marker_color=[c for *_, c in shown],
                           hovertemplate="%{x}: %{y:,.1f} t CO2e<extra></extra>"))
    fig.update_layout(yaxis_title="tonnes CO2e", height=320, margin=dict(t=10, b=10))
    return fig


st.title("Cost & carbon")
st.caption("What the run takes on a real cluster: failures and checkpoints stretch the wall-clock time, and every "
           "hour of it is paid for and draws power.")

st.subheader("Time")
cols = st.columns(4)
cols[0].metric("Compute time", fmt_days(est["train_days"]), help="Training time if nothing ever failed.")
cols[1].metric("Wall-clock time", fmt_days(est["wall_days"]),
               help="Including the expected failures, restarts and checkpoint writes.")
cols[2].metric("Goodput", fmt_pct(est["goodput"]), help="Share of the wall-clock time spent making progress.")
cols[3].metric("Expected interruptions", f"{rel['expected_failures']:,.0f}",
               help=f"One every {rel['job_mtbf_hours']:.1f} hours for this cluster. {rel['mtbf_source']}")
st.caption(f"Checkpoints of {rel['checkpoint_gib']:,.0f} GiB every {fmt_seconds(rel['checkpoint_interval_s'])} "
           f"({rel['checkpoint_interval_source']}), {fmt_seconds(rel['checkpoint_write_s'])} to write; "
           f"{fmt_seconds(rel['restart_s'])} to restart after a failure.")

st.subheader("GPU-hours and cost")
cols = st.columns(4)
cols[0].metric("GPU-hours (compute)", fmt_num(est["gpu_hours"]), help="Accelerators x compute hours.")
cols[1].metric("GPU-hours (billed)", fmt_num(cost["billed_gpu_hours"]),
               help="Accelerators x wall-clock hours: what a cloud bills and what a budget pays.")
cols[2].metric(f"Cost ({cost['basis'].replace('_', '-')})", fmt_usd(est["cost_usd"]),
               help=cost["price_source"] or cost["missing"])
cols[3].metric("Price per GPU-hour", fmt_usd(cost["usd_per_gpu_hour"]))
if cost["missing"]:
    st.warning(cost["missing"])
if cost["cloud_prices"]:
    with st.expander(f"Every published cloud price for this accelerator ({len(cost['cloud_prices'])})"):
        st.dataframe([{"provider": p["provider"], "pricing": p["pricing"], "region": p["region"],
                       "instance": p["instance"], "USD per GPU-hour": p["usd_per_gpu_hour"],
                       "this run (USD)": p["cost_usd"], "as of": p["date"], "source": p["source"]}
                      for p in cost["cloud_prices"]], hide_index=True, key="cloud_prices",
                     column_config={"source": st.column_config.LinkColumn(),
                                    "this run (USD)": st.column_config.NumberColumn(format="dollar")})

st.subheader("Cloud or own hardware")
onprem = cost["on_prem"]
curves = break_even_curves(est, sc.cluster.n_gpus)
if curves is None:
    st.info(onprem.get("missing") or "A break-even needs a server price, a power figure and a cloud price.")
else:
    cols = st.columns(3)
    cols[0].metric("Owned: cost per used GPU-hour", fmt_usd(onprem["usd_per_gpu_hour"]),
                   help=f"Purchase spread over {onprem['inputs']['depreciation_years']['value']:g} years at "
                        f"{fmt_pct(onprem['inputs']['utilisation']['value'], 0)} utilisation, plus power.")
    cols[1].metric("Owned: cost of this run", fmt_usd(onprem["cost_usd"]))
    cols[2].metric("Break-even utilisation", fmt_pct(curves["break_even_utilisation"], 0)
                   if curves["break_even_utilisation"] is not None else "never",
                   help="Owning is cheaper per used GPU-hour when the hardware is busy more than this.")
    st.plotly_chart(break_even_figure(curves), key="break_even_chart")
    with st.expander("Ownership inputs and their sources"):
        st.dataframe([{"input": k.replace("_", " "), "value": v["value"], "source": v["source"]}
                      for k, v in onprem["inputs"].items()], hide_index=True, key="tco_inputs")

st.subheader("Energy and CO2")
cols = st.columns(4)
cols[0].metric("Energy", f"{fmt_num(est['energy_mwh'])} MWh" if est["energy_mwh"] is not None else "n/a",
               help=f"{energy['node_power_w_per_gpu']:.0f} W per accelerator with its host share, x PUE "
                    f"{energy['pue']:.2f}." if energy["node_power_w_per_gpu"] else energy["missing"])
cols[1].metric("CO2, location-based", f"{fmt_num(energy['co2_location_t'])} t"
               if energy["co2_location_t"] is not None else "n/a",
               help=f"{energy['grid']['where']}: {energy['grid']['g_co2e_per_kwh']:.0f} gCO2e/kWh.")
cols[2].metric("CO2, market-based", f"{fmt_num(energy['co2_market_t'])} t" if energy["co2_market_t"] is not None
               else "not given", help="From the contracted supply's intensity (set it on the Scenario page).")
cols[3].metric("CO2, embodied share", f"{fmt_num(energy['embodied']['co2_t'])} t"
               if energy["embodied"]["co2_t"] is not None else "n/a",
               help=f"Manufacturing emissions of the accelerators, the run's share of their "
                    f"{energy['embodied']['lifetime_years']:g}-year life.")
if energy["missing"]:
    st.warning(energy["missing"])
st.plotly_chart(co2_figure(), key="co2_chart")
with st.expander("Where these figures come from"):
    st.markdown(f"- **Accelerator power:** {energy['accelerator_power_source']}\n"
                f"- **Host power:** {energy['host_power_source']}\n- **PUE:** {energy['pue_source']}\n"
                f"- **Grid:** {energy['grid']['source']}\n- **Embodied:** {energy['embodied']['source']}")

st.subheader("Budget planner")
st.caption("How many runs like this one a budget pays for, with the guardrails of seed 003 (section 2.4.5): pilot "
           "first, and warn about any single job above a GPU-hour threshold.")
cols = st.columns(3)
with cols[0]:
    common.bind_option("gpu_hour_budget", st.number_input, "Budget (GPU-hours)",
                       "A GPU-hour allocation or quota; leave empty to give a money budget instead.",
                       step=100_000.0, placeholder="none")
with cols[1]:
    common.bind_option("budget_usd", st.number_input, "Budget (USD)",
                       "A money budget, converted at the price per GPU-hour above.", step=100_000.0,
                       placeholder="none")
with cols[2]:
    common.bind_option("budget_warn_gpu_hours", st.number_input, "Warn above (GPU-hours per job)",
                       f"Guardrail: flag any single job larger than this (seed 003 uses "
                       f"{DEFAULT_WARN_GPU_HOURS:g}).", step=100.0, placeholder=f"{DEFAULT_WARN_GPU_HOURS:g}")
if opts.gpu_hour_budget is not None and opts.budget_usd is not None:
    st.error("Give one budget, in GPU-hours or in USD, not both.")
elif opts.gpu_hour_budget is None and opts.budget_usd is None:
    st.info("Enter a budget to see how many runs it pays for.")
else:
    try:
        plan = plan_budget(cost["billed_gpu_hours"], budget_gpu_hours=opts.gpu_hour_budget,
                           budget_usd=opts.budget_usd, usd_per_gpu_hour=cost["usd_per_gpu_hour"],
                           warn_above_gpu_hours=opts.budget_warn_gpu_hours or DEFAULT_WARN_GPU_HOURS)
    except ValueError as err:
        st.error(f"The budget planner cannot answer: {err}.")
    else:
        cols = st.columns(3)
        cols[0].metric("Runs the budget pays for", f"{plan['max_runs']:,}")
        cols[1].metric("GPU-hours per run", fmt_num(plan["run_gpu_hours"]))
        cols[2].metric("Left over (GPU-hours)", fmt_num(plan["left_over_gpu_hours"]))
        for warning in plan["warnings"]:
            st.warning(warning)
