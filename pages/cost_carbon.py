"""Cost & carbon: time to train with failures, GPU-hours, cloud against owned hardware, energy, CO2 and the budget
planner."""

import plotly.graph_objects as go
import streamlit as st

from engine.economics import ranges
from engine.economics.cost import plan_budget
from engine.economics.cost import break_even_curves
from engine.presentation.figures import band as figure_band, range_text
from engine.presentation.formatting import GLOSSARY, fmt_days, fmt_num, fmt_pct, fmt_seconds, fmt_usd
from engine.presentation.tables import price_rows
from ui import binding, cached, charts, components, escape, state
from ui.fields import plain

INPUT_NAMES = {"server_capex_usd": "server price", "host_capex_usd_per_gpu": "host share per GPU",
               "gpus_per_server": "GPUs per server", "network_fraction": "network share of the hardware",
               "storage_capex_usd_per_gpu": "shared storage per GPU", "depreciation_years": "depreciation",
               "utilisation": "utilisation", "power_usd_per_kwh": "electricity price",
               "colocation_usd_per_kw_month": "colocation rent", "contracted_kw_per_gpu": "contracted power per GPU",
               "ops_usd_per_gpu_year": "operations per GPU-year"}
sc = state.scenario()
opts = state.options()
est = cached.current_estimate()
if not est.fits:
    st.title("Cost & carbon")
    st.warning(f"This layout {est.problem}, so it has no time, cost, energy or CO2.")
    components.show_what_fits(sc)
    st.stop()
cost, energy, rel = est.cost, est.energy, est.reliability
band = lambda value, key: range_text(figure_band(value, est.time_range, "tuned"), key)  # the figure, its regime's range


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
    fig.update_layout(xaxis_title="years of use", yaxis_title="cumulative cost of the cluster (USD)", height=400,
                      margin=dict(t=60, b=10), **charts.LEGEND_ABOVE)
    return fig


def co2_figure() -> go.Figure:
    """Operational and embodied CO2 on a log axis with each value written on its bar: the embodied share is a
    hundredth of the operational emissions and would not show on a linear one."""
    parts = [("operational, location-based", energy["co2_location_t"], "#E45756"),
             ("operational, market-based", energy["co2_market_t"], "#72B7B2"),
             ("embodied (manufacturing share)", energy["embodied"]["co2_t"], "#BAB0AC")]
    shown = [(n, v, c) for n, v, c in parts if v]
    fig = go.Figure(go.Bar(x=[n for n, _, _ in shown], y=[v for _, v, _ in shown], marker_color=[c for *_, c in shown],
                           text=[f"{fmt_num(v)} t" for _, v, _ in shown], textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}: %{y:,.1f} t CO2e<extra></extra>"))
    fig.update_layout(yaxis_title="tonnes CO2e (log scale)", height=340, margin=dict(t=30, b=10))
    charts.log_axis(fig, "y", [v for _, v, _ in shown], pad_decades=0.4)
    return fig


st.title("Cost & carbon")
st.caption("What the run takes on a real cluster: failures and checkpoints stretch the wall-clock time, and every "
           "hour of it is paid for and draws power.")

st.caption(ranges.explain("tuned", est.time_range) + " Each time-proportional figure has that range under it.")
st.subheader("Time")
cols = st.columns(4)
cols[0].metric("Compute time", fmt_days(est.train_days), help="Training time if nothing ever failed.")
cols[1].metric("Wall-clock time", fmt_days(est.wall_days), delta=band(est.wall_days, "wall_days"),
               delta_color="off", delta_arrow="off",
               help="Including the expected failures, restarts and checkpoint writes, and evaluation.")
cols[2].metric("Goodput", fmt_pct(est.goodput), help=GLOSSARY["goodput"][0].upper() + GLOSSARY["goodput"][1:] + ".")
cols[3].metric("Expected interruptions", f"{rel['expected_failures']:,.0f}",
               help=f"One every {rel['job_mtbf_hours']:.1f} hours for this cluster. {plain(rel['mtbf_source'])}")
st.caption(f"Checkpoints of {rel['checkpoint_gib']:,.0f} GiB every {fmt_seconds(rel['checkpoint_interval_s'])} "
           f"({plain(rel['checkpoint_interval_source'])}), {fmt_seconds(rel['checkpoint_write_s'])} to write; "
           f"{fmt_seconds(rel['restart_s'])} to restart after a failure.")

st.subheader("GPU-hours and cost")
cols = st.columns(4)
cols[0].metric("GPU-hours (compute)", fmt_num(est.gpu_hours), delta=band(est.gpu_hours, "gpu_hours"),
               delta_color="off", delta_arrow="off", help="Accelerators x compute hours.")
cols[1].metric("GPU-hours (billed)", fmt_num(cost["billed_gpu_hours"]),
               delta=band(cost["billed_gpu_hours"], "gpu_hours"), delta_color="off", delta_arrow="off",
               help="Accelerators x wall-clock hours: what a cloud bills and what a budget pays.")
cols[2].metric(f"Cost ({cost['basis'].replace('_', '-')})", fmt_usd(est.cost_usd),
               delta=band(est.cost_usd, "cost_usd"), delta_color="off", delta_arrow="off",
               help=plain(cost["price_source"] or cost["missing"]))
cols[3].metric("Price per GPU-hour", f"${cost['usd_per_gpu_hour']:.2f}" if cost["usd_per_gpu_hour"] else "unknown")
if cost["missing"]:
    st.warning(escape.md_escape(plain(cost["missing"])))
if cost["cloud_prices"]:
    with st.expander(f"Every published cloud price for this accelerator ({len(cost['cloud_prices'])})"):
        components.table(price_rows(cost), hide_index=True, key="cloud_prices", row_height=66,
                         column_config={"source": st.column_config.LinkColumn(display_text="price page", width=90),
                                        "instance": st.column_config.TextColumn(width=150),
                                        "USD per GPU-hour": st.column_config.NumberColumn("USD/GPU-h", width=80),
                                        "this run (USD)": st.column_config.NumberColumn(format="dollar")})

st.subheader("Cloud or own hardware")
onprem = cost["on_prem"]
curves = break_even_curves(est.cost, est.energy, sc.cluster.n_gpus)
if curves is None:
    st.info(escape.md_escape(plain(onprem.get("missing") or "A break-even needs a server price, a power figure and a "
                                                             "cloud price.")))
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
if onprem.get("per_gpu_hour_terms"):
    st.markdown("**Owned cost per used GPU-hour, term by term:** " + ", ".join(
        f"{t['term']} {fmt_usd(t['usd_per_gpu_hour'])}" for t in onprem["per_gpu_hour_terms"])
        + f" = {fmt_usd(onprem['usd_per_gpu_hour'])} (set your own values on the Scenario page, under "
          "\u201cOwning the hardware\u201d).")
with st.expander("Ownership inputs: values, units, how each is derived and its source"):
    components.show_inputs([{"input": INPUT_NAMES.get(k, k.replace("_", " ")), "value": v["value"], "unit": v["unit"],
                             "how it is derived": plain(v["derivation"]), "source": plain(v["source"])}
                            for k, v in onprem["inputs"].items()])

st.subheader("Energy and CO2")
cols = st.columns(4)
cols[0].metric("Energy", f"{fmt_num(est.energy_mwh)} MWh" if est.energy_mwh is not None else "n/a",
               delta=band(est.energy_mwh, "energy_mwh"), delta_color="off", delta_arrow="off",
               help=f"{energy['node_power_w_per_gpu']:.0f} W per accelerator with its host share, x PUE "
                    f"{energy['pue']:.2f}." if energy["node_power_w_per_gpu"] else energy["missing"])
cols[1].metric("CO2, location-based", f"{fmt_num(energy['co2_location_t'])} t"
               if energy["co2_location_t"] is not None else "n/a",
               delta=band(energy["co2_location_t"], "co2_t"), delta_color="off", delta_arrow="off",
               help=f"{energy['grid']['where']}: {energy['grid']['g_co2e_per_kwh']:.0f} gCO2e/kWh.")
cols[2].metric("CO2, market-based", f"{fmt_num(energy['co2_market_t'])} t" if energy["co2_market_t"] is not None
               else "not given", help="From the contracted supply's intensity (set it on the Scenario page).")
cols[3].metric("CO2, embodied share", f"{fmt_num(energy['embodied']['co2_t'])} t"
               if energy["embodied"]["co2_t"] is not None else "n/a",
               help=f"Manufacturing emissions of the accelerators, the run's share of their "
                    f"{energy['embodied']['lifetime_years']:g}-year life.")
if energy["missing"]:
    st.warning(escape.md_escape(plain(energy["missing"])))
st.plotly_chart(co2_figure(), key="co2_chart")
with st.expander("Where these figures come from"):
    st.markdown("\n".join(f"- **{what}:** {escape.md_escape(plain(source))}" for what, source in (
        ("Accelerator power", energy["accelerator_power_source"]), ("Host power", energy["host_power_source"]),
        ("PUE", energy["pue_source"]), ("Grid", energy["grid"]["source"]), ("Embodied", energy["embodied"]["source"]))))

st.subheader("Budget planner")
st.caption("How many runs like this one a budget pays for. Pilot a smaller run first; set a per-job limit to be "
           "warned about any single run above it.")
cols = st.columns(3)
with cols[0]:
    binding.bind_option("gpu_hour_budget", st.number_input, "Budget (GPU-hours)",
                       "A GPU-hour allocation or quota (the question's GPU-hours on the Scenario page); with a money "
                       "budget too, both apply.",
                       step=100_000.0, placeholder="none")
with cols[1]:
    binding.bind_option("budget_usd", st.number_input, "Budget (USD)",
                       "A money budget (the question's budget on the Scenario page), converted at the price per "
                       "GPU-hour above; with a GPU-hour budget too, both apply.", step=100_000.0,
                       placeholder="none")
with cols[2]:
    binding.bind_option("budget_warn_gpu_hours", st.number_input, "Warn above (GPU-hours per job)",
                       "Optional per-job limit of your allocation policy (some clusters ask for a pilot before any job "
                       "above a few hundred GPU-hours); empty: no per-job warning.", step=100.0,
                       placeholder="no limit")
if opts.gpu_hour_budget is None and opts.budget_usd is None:
    st.info("Enter a budget to see how many runs it pays for.")
else:
    try:
        plan = plan_budget(cost["billed_gpu_hours"], budget_gpu_hours=opts.gpu_hour_budget,
                           budget_usd=opts.budget_usd, usd_per_gpu_hour=cost["usd_per_gpu_hour"],
                           warn_above_gpu_hours=opts.budget_warn_gpu_hours)
    except ValueError as err:
        st.error(f"The budget planner cannot answer: {err}.")
    else:
        cols = st.columns(3)
        cols[0].metric("Runs the budget pays for", f"{plan['max_runs']:,}")
        cols[1].metric("GPU-hours per run", fmt_num(plan["run_gpu_hours"]))
        cols[2].metric("Left over (GPU-hours)", fmt_num(plan["left_over_gpu_hours"]))
        if opts.gpu_hour_budget is not None and opts.budget_usd is not None:
            st.caption(f"Both budgets apply, as in the question on the Scenario page: the {plan['binding']} budget "
                       f"is the tighter ({fmt_num(plan['budget_gpu_hours'])} GPU-hours).")
        for warning in plan["warnings"]:
            st.warning(warning[0].upper() + warning[1:] + ".")
