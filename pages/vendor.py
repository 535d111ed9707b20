"""Vendor choice: every accelerator on this scenario with its own best layout, weighted into a decision score, and
the recommendation with its reasons."""
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.presentation.report import fmt_days, vendor_rows
from engine.scenario import ScenarioError
from engine.planning.vendor import CRITERIA
from pages import common

WEIGHT_LABELS = {"time": "Time to train", "cost": "Cost", "energy": "Energy", "co2": "CO2",
                 "memory_headroom": "Memory headroom", "ecosystem": "Software ecosystem"}
WEIGHT_HELP = {"time": "Wall-clock days to train.", "cost": "Cost of the run at published prices (an accelerator "
               "without a published price scores 0 here).", "energy": "Electricity used.",
               "co2": "Location-based operational emissions.",
               "memory_headroom": "Spare memory per accelerator: room for longer sequences or bigger batches.",
               "ecosystem": "Maturity of the software stack (frameworks, libraries, tooling, hiring) from "
                            "data/ecosystem.json."}
VENDOR_COLORS = {"NVIDIA": "#76B900", "AMD": "#ED1C24", "Intel": "#0071C5", "Google": "#FBBC04"}
sc = common.scenario()
opts = common.options()


def _apply_weights() -> None:
    common.set_options(vendor_weights={c: st.session_state["weight:" + c] for c in CRITERIA})


def score_figure(rows: list[dict]) -> go.Figure:
    ranked = [r for r in rows if r["rank"] is not None]
    fig = go.Figure(go.Bar(x=[r["decision score"] for r in ranked], y=[r["accelerator"] for r in ranked],
                           orientation="h", marker_color=[VENDOR_COLORS.get(r["vendor"], "#888") for r in ranked],
                           hovertemplate="%{y}: %{x:.2f}<extra></extra>"))
    fig.update_layout(xaxis_title="decision score (1 = best on every weighted criterion)", xaxis_range=[0, 1],
                      yaxis_autorange="reversed", height=max(300, 26 * len(ranked)), margin=dict(t=10, b=10))
    return fig


def tradeoff_figure(rows: list[dict]) -> go.Figure:
    shown = [r for r in rows if r["rank"] is not None and r["cost USD"] is not None]
    fig = go.Figure()
    for vendor in dict.fromkeys(r["vendor"] for r in shown):
        mine = [r for r in shown if r["vendor"] == vendor]
        fig.add_scatter(x=[r["days (wall)"] for r in mine], y=[r["cost USD"] for r in mine], mode="markers",
                        name=vendor, text=[r["accelerator"] for r in mine],
                        marker=dict(color=VENDOR_COLORS.get(vendor, "#888"), size=12),
                        hovertemplate="%{text}: %{x:.1f} days, $%{y:,.0f}<extra></extra>")
    fig.update_xaxes(type="log", title="days to train (wall clock)")
    fig.update_yaxes(type="log", title="cost (USD)")
    fig.update_layout(height=420,
                      legend_orientation="h", margin=dict(t=10, b=10))
    return fig


st.title("Vendor choice")
mode = (f"the smallest cluster of each that trains within {opts.deadline_days:g} days" if opts.deadline_days
        else f"{sc.cluster.n_gpus:,} accelerators of each kind")
st.caption(f"Every accelerator in the catalog on this scenario, each with its own best layout, on {mode}. Set a "
           "deadline on the Layout search page to compare cluster sizes instead.")

with st.container(border=True):
    st.markdown("**What matters to you** (relative weights; they are normalised to sum to 1; the ranking follows "
                "each change at once)")
    cols = st.columns(len(CRITERIA))
    for col, criterion in zip(cols, CRITERIA):
        st.session_state.setdefault("weight:" + criterion, float(common.vendor_weights().get(criterion, 0.0)))
        col.slider(WEIGHT_LABELS[criterion], 0.0, 1.0, step=0.05, key="weight:" + criterion,
                   help=WEIGHT_HELP[criterion], on_change=_apply_weights)
common.field_problems("options.vendor_weights")

try:
    result = common.current_comparison()
except ScenarioError as err:
    st.error("The comparison cannot run: " + common.problems_text(err.problems))
    st.stop()
except common.Busy as err:
    st.warning(str(err))
    st.stop()

rows = vendor_rows(result)
if result["recommendation"]:
    top = next(r for r in result["rows"] if r["accelerator"] == result["recommendation"])
    st.success(f"**Recommendation: {top['name']}** ({fmt_days(top['wall_days'])} on {top['n_gpus']:,} "
               "accelerators)")
    st.markdown(result["why"])
else:
    st.error(result["why"])

cols = st.columns(2)
with cols[0]:
    st.markdown("**Decision score**")
    st.plotly_chart(score_figure(rows), key="score_chart")
with cols[1]:
    st.markdown("**Time against cost**")
    st.plotly_chart(tradeoff_figure(rows), key="tradeoff_chart")

table = pd.DataFrame(rows)
st.dataframe(table, hide_index=True, key="vendor_table",
             column_config={"decision score": st.column_config.ProgressColumn(format="%.2f", min_value=0,
                                                                              max_value=1),
                            "days (wall)": st.column_config.NumberColumn(format="%.1f"),
                            "cost USD": st.column_config.NumberColumn(format="dollar"),
                            "energy MWh": st.column_config.NumberColumn(format="%.0f"),
                            "CO2 t": st.column_config.NumberColumn(format="%.0f"),
                            "MFU": st.column_config.NumberColumn(format="percent"),
                            "memory headroom": st.column_config.NumberColumn(format="percent")})
st.download_button("Download the comparison (CSV)", common.csv_safe(table).to_csv(index=False),
                   "vendor_comparison.csv", "text/csv",
                   on_click="ignore")

with st.expander("How to read this"):
    st.markdown(
        "- Each accelerator is evaluated with **its own best layout**, found by the same search as the Layout "
        "search page, and in the scenario's precision (or the nearest it supports).\n"
        "- The **decision score** gives each criterion 1.0 for the best accelerator and the ratio to it for the "
        "others, weighted by your sliders.\n"
        "- **Ecosystem** matters beyond speed: CUDA's libraries (cuBLAS, cuDNN, NCCL) are the reason most teams "
        "stay on NVIDIA; ROCm is deployable since 2024-2025 and wins on memory capacity and often on price; "
        "porting existing CUDA code costs 10-20% manual work after hipify (seed 000, section 5).\n"
        "- **Running two vendors has a cost** (the 'fragmentation tax': duplicate kernels, CI on both, split "
        "expertise). Pick one and commit unless the saving you see here is larger than that tax.")
