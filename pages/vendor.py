"""Vendor choice: every accelerator on this scenario with its own best layout, weighted into a decision score, and
the recommendation with its reasons."""
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.economics import ranges
from engine.economics.cost import server_prices, tco_defaults
from engine.presentation.figures import range_text
from engine.presentation.formatting import fmt_days, fmt_usd, job_text
from engine.presentation.tables import vendor_rows
from engine.scenario import ScenarioError
from engine.planning.vendor import CRITERIA
from ui import binding, cached, charts, components, escape, state
from ui.fields import plain
from ui.work_limits import Busy

WEIGHT_LABELS = {"time": "Time to train", "cost": "Cost", "energy": "Energy", "co2": "CO2",
                 "memory_headroom": "Memory headroom", "ecosystem": "Software ecosystem"}
WEIGHT_HELP = {"time": "Wall-clock days to train.", "cost": "Cost of the run at published prices. An accelerator "
               "without a published price is scored on the other criteria, marked \u201cno price: enter one\u201d "
               "and ranked after every accelerator with one (with a budget asked, it is not ranked).",
               "energy": "Electricity used.", "co2": "Location-based operational emissions.",
               "memory_headroom": "Spare memory per accelerator: room for longer sequences or bigger batches.",
               "ecosystem": "Maturity of the software stack (frameworks, libraries, tooling, hiring), scored from the "
                            "planner's sourced ecosystem table."}
NO_PRICE = "no price: enter one"
TABLE_COLUMNS = ["rank", "accelerator", "decision score", "GPUs", "days (wall)", "cost USD", "energy MWh", "CO2 t",
                 "MFU", "memory headroom"]
VENDOR_COLORS = {"NVIDIA": "#76B900", "AMD": "#ED1C24", "Intel": "#0071C5", "Google": "#FBBC04"}
sc = state.scenario()
opts = state.options()


def _apply_weights() -> None:
    binding.set_options(vendor_weights={c: st.session_state["weight:" + c] for c in CRITERIA})


def score_figure(rows: list[dict]) -> go.Figure:
    ranked = [r for r in rows if r["rank"] is not None]
    fig = go.Figure(go.Bar(x=[r["decision score"] for r in ranked], y=[r["accelerator"] for r in ranked],
                           orientation="h", marker_color=[VENDOR_COLORS.get(r["vendor"], "#888") for r in ranked],
                           hovertemplate="%{y}: %{x:.2f}<extra></extra>"))
    fig.update_layout(xaxis_title="decision score (1 = best on every weighted criterion)", xaxis_range=[0, 1],
                      yaxis_autorange="reversed", height=max(300, 26 * len(ranked)), margin=dict(t=10, b=10))
    return fig


def tradeoff_figure(rows: list[dict]) -> go.Figure:
    """Days against cost, one labelled point per priced accelerator (labels placed where they overlap least)."""
    shown = [r for r in rows if r["rank"] is not None and isinstance(r["cost USD"], (int, float))
             and r["days (wall)"] is not None]
    fig = go.Figure()
    x_axis = charts.log_axis(fig, "x", [r["days (wall)"] for r in shown], pad_decades=0.12,
                             title="days to train (wall clock)")
    y_axis = charts.log_axis(fig, "y", [r["cost USD"] for r in shown], pad_decades=0.12, title="cost (USD)")
    where = dict(zip((r["accelerator"] for r in shown), charts.label_positions(
        [r["days (wall)"] for r in shown], [r["cost USD"] for r in shown], [r["accelerator"] for r in shown],
        x_axis, y_axis)))
    for vendor in dict.fromkeys(r["vendor"] for r in shown):
        mine = [r for r in shown if r["vendor"] == vendor]
        fig.add_scatter(x=[r["days (wall)"] for r in mine], y=[r["cost USD"] for r in mine], mode="markers+text",
                        name=vendor, text=[r["accelerator"] for r in mine],
                        textposition=[where[r["accelerator"]] for r in mine], textfont=dict(size=10),
                        cliponaxis=False, marker=dict(color=VENDOR_COLORS.get(vendor, "#888"), size=11),
                        hovertemplate="%{text}: %{x:.1f} days, $%{y:,.0f}<extra></extra>")
    if y_axis["type"] == "linear":
        fig.update_yaxes(tickprefix="$", tickformat="~s")
    fig.update_layout(height=460, margin=dict(t=40, b=10), **charts.LEGEND_ABOVE)
    return fig


def shown_rows(rows: list[dict]) -> list[dict]:
    """The comparison as the table shows it: missing prices and power figures in words."""
    out = []
    for r in rows:
        r = dict(r)
        if r["rank"] is not None:
            r["cost USD"] = fmt_usd(r["cost USD"]) if r["cost USD"] is not None else NO_PRICE
            for key in ("energy MWh", "CO2 t"):
                r[key] = f"{r[key]:,.0f}" if r[key] is not None else "no power figure"
        r["why"] = plain(r["why"])
        out.append(r)
    return out


def details_line(r: dict) -> str:
    """One accelerator's words (vendor, stack, ecosystem score, precision, layout, why) as a list item."""
    about = [r["vendor"], "announced" if r.get("status") == "announced" else None, r["software"], r.get("stack"),
             None if r["ecosystem"] is None else f"ecosystem {r['ecosystem']:.2f}", r["precision"]]
    layout = "" if r["layout"] in (None, "-") else f"{r['layout']}. "
    return (f"- **{escape.md_escape(r['accelerator'])}** ({escape.md_escape(', '.join(a for a in about if a))}): "
            f"{escape.md_escape(layout + (r['why'] or ''))}")


def onprem_inputs() -> list[dict]:
    """The owned-hardware inputs every accelerator is costed with: each published server price, then the shared
    terms, with unit, derivation and source."""
    d = tco_defaults()
    rows = [{"input": f"server price, {acc}", "value": p.price_usd, "unit": f"USD per {p.priced_unit.replace('_', ' ')}"
             f" ({p.gpus_per_server} accelerators)", "how it is derived": p.derivation,
             "source": f"{p.source.document} ({p.source.url}, {p.source.date})"} for acc, p in server_prices().items()]
    for key, what in (("host_capex_usd_per_gpu", "host share per accelerator"),
                      ("network_fraction", "network share of the hardware"),
                      ("storage_capex_usd_per_gpu", "shared storage per accelerator"),
                      ("depreciation_years", "depreciation"), ("utilisation", "utilisation"),
                      ("power_usd_per_kwh", "electricity price"), ("colocation_usd_per_kw_month", "colocation rent"),
                      ("ops_usd_per_gpu_year", "operations per accelerator-year")):
        t = d[key]
        src = t.get("source")
        rows.append({"input": what, "value": t["value"], "unit": t["unit"], "how it is derived": plain(t["derivation"]),
                     "source": f"{src['document']} ({src['url']}, {src['date']})" if src else plain(t.get("note", ""))})
    return rows


st.title("Vendor choice")
about = st.empty()                # what is compared, once the comparison says which question it answers

with st.container(border=True):
    st.markdown("**What matters to you** (relative weights; they are normalised to sum to 1; the ranking follows "
                "each change at once)")
    cols = st.columns(len(CRITERIA))
    for col, criterion in zip(cols, CRITERIA):
        st.session_state.setdefault("weight:" + criterion, float(state.vendor_weights().get(criterion, 0.0)))
        col.slider(WEIGHT_LABELS[criterion], 0.0, 1.0, step=0.05, key="weight:" + criterion,
                   help=WEIGHT_HELP[criterion], on_change=_apply_weights)
binding.field_problems("options.vendor_weights")

try:
    result = cached.current_comparison()
except ScenarioError as err:
    st.error("The comparison cannot run: " + escape.problems_text(err.problems))
    st.stop()
except Busy as err:
    st.warning(str(err))
    st.stop()

if result.target:
    rule = ("the cheapest that meets it first" if result.ranked_by == "cost" else "the fastest within it first")
    about.caption(f"Every accelerator in the catalog on this scenario ({escape.md_escape(job_text(sc))}), each with "
                  "the cluster and layout the answer on "
                  f"the Scenario page gives it for the question ({result.target}), ranked by the answer's rule: {rule}"
                  + (", every priced accelerator before any without a price" if result.ranked_by == "cost" else
                     "; only a priced accelerator can be within a money budget, the others are listed after the "
                     f"ranked ones ({NO_PRICE})" if result.budget_usd else "")
                  + ". The decision score is shown beside it, weighted by what matters to you."
                  + ("" if opts.vendor == "any" else f" The answer is limited to {opts.vendor} accelerators "
                                                     "(Vendor, on the Scenario page); this page compares them all."))
else:
    about.caption(f"Every accelerator in the catalog on this scenario ({escape.md_escape(job_text(sc))}), each with "
                  "its own best layout, on "
                  f"{sc.cluster.n_gpus:,} accelerators of each kind, ranked by the decision score, which weighs what "
                  "matters to you. Ask a question at the top of the Scenario page (a deadline, a budget, at most so "
                  "many accelerators) to size each cluster for it and rank as the answer does.")

rows = vendor_rows(result)        # the chosen software stack's figures (engine.economics.ranges), as the answer's
if result.recommendation:
    top = result.top
    days = range_text(top.ranges["wall_days"], "wall_days")
    st.success(f"**Recommendation: {escape.md_escape(top.name)}** ({fmt_days(top.wall_days)}, range "
               f"{days}, on {top.n_gpus:,} accelerators)")
    st.markdown(escape.md_escape(plain(result.why)))
    unpriced = [r.accelerator for r in result.rows if r.rank is not None and r.cost_usd is None]
    if unpriced:
        st.caption(f"No published price ({NO_PRICE} on the Scenario page): {', '.join(unpriced)}. They are ranked "
                   + ("after every priced accelerator" if result.ranked_by == "cost" else "on what is known, without "
                      "cost") + ", and are not on the time-against-cost chart.")
else:
    st.error(escape.md_escape(plain(result.why)))

st.caption(ranges.explain(opts.efficiency) + " Days, cost, energy and CO2 below are for this stack.")
cols = st.columns(2)
with cols[0]:
    st.markdown("**Decision score**")
    st.plotly_chart(score_figure(rows), key="score_chart")
with cols[1]:
    st.markdown("**Time against cost**")
    st.plotly_chart(tradeoff_figure(rows), key="tradeoff_chart")

table = pd.DataFrame(shown_rows(rows))
# The figures that rank an accelerator fit a laptop's 1,280 px page; the words (vendor, stack, layout, why) follow
# in a list, where they wrap instead of being cut off. The CSV has every column.
components.table(table, hide_index=True, key="vendor_table", column_order=TABLE_COLUMNS,
                 column_config={"rank": st.column_config.NumberColumn(width=45, pinned=True),
                                "accelerator": st.column_config.TextColumn(width=140, pinned=True),
                                "decision score": st.column_config.ProgressColumn(format="%.2f", min_value=0,
                                                                                  max_value=1, width=105),
                                "days (wall)": st.column_config.NumberColumn(format="%.1f"),
                                "MFU": st.column_config.NumberColumn(format="percent", width=55),
                                "memory headroom": st.column_config.NumberColumn("headroom", format="percent",
                                                                                 help=WEIGHT_HELP["memory_headroom"])})
with st.expander("Each accelerator's stack, layout and reasons"):
    st.markdown("\n".join(details_line(r) for r in shown_rows(rows)))
st.download_button("Download the comparison (CSV)", escape.csv_safe(pd.DataFrame(rows)).to_csv(index=False),
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
        "porting existing CUDA code costs 10-20% manual work after hipify.\n"
        "- **Running two vendors has a cost** (the 'fragmentation tax': duplicate kernels, CI on both, split "
        "expertise). Pick one and commit unless the saving you see here is larger than that tax.")

with st.expander("Owning the hardware: the inputs every accelerator is costed with (units, derivations, sources)"):
    st.caption("Used when the Scenario page's cost basis is on_prem. An accelerator without a published server price "
               "gets none (" + NO_PRICE + ": \u201cServer price (USD)\u201d on the Scenario page).")
    components.show_inputs(onprem_inputs())
