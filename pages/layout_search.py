"""Layout search: every way to split the run over the cluster, the best ranked, the Pareto front over cluster sizes,
the time breakdown of a chosen layout, and why the others were rejected."""
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine.physics.memory import headroom_fraction
from engine.presentation.answer import stack_text
from engine.presentation.edit import adopt_layout, describe_layout
from engine.inputs import parse_scenario
from engine.presentation.formatting import GLOSSARY, fmt_days, fmt_num
from engine.presentation.launch_config import FORMAT_NAMES, FORMATS, default_format, export
from engine.presentation.tables import (breakdown_rows, dimension_rows, dimension_value, pareto_rows, ranked_rows,
                                        rejected_rows)
from engine.scenario import ScenarioError
from engine.planning.results import Estimate, SearchResult
from engine.planning.search import DIMENSIONS, explain, pinned, search, search_cluster
from engine.planning.sizing import chance_words, cluster_search
from ui import binding, charts, components, escape, state, work_limits
from ui.work_limits import Busy

RESULT = "search_result"     # {"key": (scenario JSON without layout, options JSON), "result": a SearchResult}
TOP = 20
KIND_COLORS = {"compute": "#4C78A8", "communication": "#F58518", "pipeline idle": "#BAB0AC"}
# Rows tall enough for the grid to wrap a sentence (Streamlit wraps cell text only in rows taller than 64 px): up to
# three lines of one reason, four of three reasons; the widths add up to a laptop's 1,280 px page and stretch wider.
REASON_ROW_PX, REASONS_ROW_PX = 66, 88
OBJECTIVES = {"time": "Fastest (wall-clock time)", "cost": "Cheapest", "energy": "Least energy"}
sc = state.scenario()
opts = state.options()
run_key = (sc.model_copy(update={"layout": None}).model_dump_json(), opts.model_dump_json())   # the search ignores the layout


@st.cache_data(max_entries=64, show_spinner=False)
def why_not(scenario_json: str, allow_span_nodes: bool, objective: str, dimension: str, value) -> dict:
    sc_ = parse_scenario(scenario_json)
    with work_limits.slot("layout search"):
        return explain(search_cluster(sc_, sc_.cluster.n_gpus, allow_span_nodes), objective, **{dimension: value})


def _use_layout(best: Estimate) -> None:
    state.commit(adopt_layout(state.scenario(), best), "layout")


def launch_config_download(sc, layout) -> None:
    """The chosen layout as its stack's launch configuration (engine.presentation.launch_config), with its notes; sc
    is the scenario on the stack the layout was found on (engine.planning.search.pinned)."""
    try:
        default = default_format(sc)
    except ScenarioError:
        default = FORMATS[0]
    fmt = st.selectbox("Launch configuration for this layout", FORMATS, index=FORMATS.index(default),
                       key="launch_format", format_func=FORMAT_NAMES.get,
                       help="Default: the format of the scenario's software stack (training.framework).")
    try:
        cfg = export(sc.model_copy(update={"layout": layout}), fmt)
    except ScenarioError as err:
        st.warning("; ".join(f"{f}: {m}" for f, m in err.problems))
        return
    st.download_button(f"Download {cfg.filename}", cfg.text, cfg.filename, "text/plain", on_click="ignore",
                       key="launch_download")
    for note in cfg.notes:
        st.caption(f"Note: {escape.md_escape(note)}")


def breakdown_figure(est: Estimate) -> go.Figure:
    rows = [r for r in breakdown_rows(est) if r["seconds per step"] > 0]
    fig = go.Figure(go.Bar(x=[r["seconds per step"] for r in rows], y=[r["component"] for r in rows],
                           orientation="h", marker_color=[KIND_COLORS[r["kind"]] for r in rows],
                           customdata=[[r["kind"], r["share of step"]] for r in rows],
                           hovertemplate="%{y} (%{customdata[0]}): %{x:.3f} s, %{customdata[1]:.1%} of the step"
                                         "<extra></extra>"))
    fig.update_layout(xaxis_title="seconds per optimizer step", yaxis_autorange="reversed", height=380,
                      margin=dict(t=10, b=10))
    return fig


def pareto_figure(result: SearchResult, x_axis: str) -> go.Figure:
    rows = pareto_rows(result)
    x = [r["GPUs"] if x_axis == "GPUs" else r["cost USD"] for r in rows]
    fig = go.Figure(go.Scatter(x=x, y=[r["days (wall)"] for r in rows], mode="lines+markers+text",
                               text=[f"{r['GPUs']:,} GPUs" for r in rows], textposition="top right",
                               customdata=[[r["layout"], fmt_num(r["GPU-hours"])] for r in rows],
                               hovertemplate="%{text}: %{y:.1f} days<br>%{customdata[0]}<br>"
                                             "%{customdata[1]} GPU-hours<extra></extra>"))
    fig.update_layout(xaxis_title="accelerators" if x_axis == "GPUs" else "cost (USD)",
                      yaxis_title="days to train (wall clock)", height=380, margin=dict(t=10, b=10))
    if x_axis == "GPUs":
        charts.log_axis(fig, "x", x, pad_decades=0.1)
    return fig


st.title("Layout search")
st.caption("Tries every way to split the run over the cluster (tensor, pipeline, data, context and expert "
           "parallelism, micro-batch, ZeRO stage, recompute), keeps those that fit in memory with "
           f"{headroom_fraction(sc.training):.1%} of it left free (set on the Memory page) and ranks them.")

cols = st.columns(4)
with cols[0]:
    binding.bind_option("objective", st.radio, "Rank by", "What 'best' means for the ranking.", options=list(OBJECTIVES),
           format_func=OBJECTIVES.get)
with cols[1]:
    binding.bind_option("deadline_days", st.number_input, "Deadline (days, optional)",
           "Also find the cheapest cluster whose best layout trains within this many days.", step=1.0,
           placeholder="none")
with cols[2]:
    binding.bind_option("gpu_hour_budget", st.number_input, "GPU-hour budget (optional)",
           "Also check the cheapest cluster against this many GPU-hours.", step=10_000.0, placeholder="none")
with cols[3]:
    binding.bind_option("allow_span_nodes", st.checkbox, "Span nodes (TP/CP/EP)",
           "Normally tensor-, context- and expert-parallel groups stay inside one node, on its fast links.")

if st.button("Run layout search", type="primary"):
    bar = st.progress(0.0, text="waiting for a free search slot")
    try:
        with work_limits.slot("layout search"):
            result = search(sc, top=TOP, objective=opts.objective, allow_span_nodes=opts.allow_span_nodes,
                            progress=lambda fraction, message: bar.progress(min(fraction, 0.9), text=message))
            bar.progress(0.9, text="searching cluster sizes")
            result = result.model_copy(update={"cluster_search": cluster_search(
                sc, opts.deadline_days, opts.gpu_hour_budget, opts.objective, opts.confidence)})
    except ScenarioError as err:
        bar.empty()
        st.error("The search cannot run: " + escape.problems_text(err.problems))
    except Busy as err:
        bar.empty()
        st.warning(str(err))
    else:
        bar.empty()
        st.session_state[RESULT] = {"key": run_key, "result": result}

stored = st.session_state.get(RESULT)
if stored is None:
    st.info("Press **Run layout search** to search the layouts of the current scenario.")
elif stored["key"] != run_key:
    st.info("The scenario or the search options changed since the last search: press **Run layout search** "
            "again.")
else:
    result = stored["result"]
    cols = st.columns(3)
    cols[0].metric("Layouts considered", f"{result.candidates_evaluated:,}")
    cols[1].metric("Passed the rules", f"{result.model_evaluated:,}",
                   help="Divisibility and node-placement rules; these went through the memory and time model.")
    cols[2].metric("Fit in memory", f"{result.feasible:,}",
                   help="With the memory headroom left free; the fastest recompute choice of each layout.")
    if result.never_finishes:
        st.error(f"Layouts fit, but on this cluster none finishes: {result.problem}.")
    elif not result.best:
        st.error("No layout fits in memory with the headroom left free on this cluster. See why below, or try more "
                 "accelerators, an accelerator with more memory, or a shorter sequence.")
    else:
        st.subheader(f"Best layouts ({OBJECTIVES[result.objective].lower()})")
        st.caption("**Software stack:** " + escape.md_escape(stack_text(result.stack)))
        table = pd.DataFrame(ranked_rows(result, sc.arch.n_layers))
        # Every field that tells two layouts apart is a column (about 25 in all, wider than any page), so the
        # figures the ranking is about come first, beside the pinned rank, and the layout's fields scroll beside them
        first = ["rank", "days (wall)", "cost USD", "memory GiB", "MFU"]
        picked = components.table(table, hide_index=True, on_select="rerun", selection_mode="single-row",
                                  key="ranked_table", column_order=first + [c for c in table.columns if c not in first],
                                  column_config={"rank": st.column_config.NumberColumn(pinned=True),
                                                 "MFU": st.column_config.NumberColumn(format="percent", help=GLOSSARY["MFU"]),
                                                 "virtual_stages": st.column_config.NumberColumn(
                                                     help=GLOSSARY["virtual stages"]),
                                                 "zero_stage": st.column_config.NumberColumn(help=GLOSSARY["ZeRO"]),
                                                 "tp": st.column_config.NumberColumn(help=GLOSSARY["tensor parallel"]),
                                                 "dp": st.column_config.NumberColumn(help=GLOSSARY["data parallel"]),
                                                 "ep": st.column_config.NumberColumn(help=GLOSSARY["expert parallel"]),
                                                 "days (wall)": st.column_config.NumberColumn(format="%.1f"),
                                                 "days (compute)": st.column_config.NumberColumn(format="%.1f"),
                                                 "memory GiB": st.column_config.NumberColumn(format="%.1f"),
                                                 "GPU-hours": st.column_config.NumberColumn(format="compact"),
                                                 "cost USD": st.column_config.NumberColumn(format="dollar"),
                                                 "energy MWh": st.column_config.NumberColumn(format="%.0f"),
                                                 "step s": st.column_config.NumberColumn(format="%.2f")})
        st.download_button("Download ranked layouts (CSV)", escape.csv_safe(table).to_csv(index=False),
                           "ranked_layouts.csv",
                           "text/csv", on_click="ignore")
        rows = picked.selection.rows
        chosen = rows[0] if rows else 0
        best = result.best[chosen]
        layout = best.layout.model_dump()
        st.subheader(f"Layout #{chosen + 1}: where the time goes")
        st.caption(f"{describe_layout(layout)}: {best.step_time_s:.2f} s per step, MFU "
                   f"{best.mfu:.1%}, {fmt_days(best.wall_days)}. Select another "
                   "row above to see its breakdown.")
        st.plotly_chart(breakdown_figure(best), key="breakdown_chart")
        st.caption("Blue: computation; orange: communication by kind; grey: pipeline idle time (bubble and "
                   "imbalance).")
        launch_config_download(pinned(sc, best), best.layout)
        if layout == sc.layout.model_dump():
            st.success("This is the scenario's current layout.")
        else:
            st.button(f"Use layout #{chosen + 1} in the scenario", on_click=_use_layout, args=(best,))

    if result.pareto:
        st.subheader("Cluster size: time against accelerators or cost")
        x_axis = st.radio("Horizontal axis", ["GPUs", "cost"], horizontal=True, key="pareto_axis",
                          help="Each point is the best layout for that many accelerators; only sizes that are "
                               "faster than every smaller one are kept (the Pareto front).")
        st.plotly_chart(pareto_figure(result, x_axis), key="pareto_chart")
    cluster = result.cluster_search
    if cluster:
        if cluster.met:
            chance = "" if cluster.confidence is None else f" with {chance_words(cluster.confidence)} (the question's)"
            st.success(f"Cheapest cluster that meets the target{chance}: **{cluster.n_gpus:,} accelerators**, "
                       f"{fmt_days(cluster.best.wall_days)} with "
                       f"{describe_layout(cluster.best.layout.model_dump())}."
                       + (f" {cluster.neighbour_gpus:,} accelerators: {escape.md_escape(cluster.neighbour_why)}."
                          if cluster.neighbour_gpus and cluster.neighbour_why else ""))
        else:
            st.warning(f"Target not met: {cluster.reason}.")

    st.subheader("Why not ...?")
    components.table(rejected_rows(result), hide_index=True, key="rejected_table", row_height=REASON_ROW_PX,
                     column_config={"reason": st.column_config.TextColumn(width=600),
                                    "layouts": st.column_config.NumberColumn(width=80),
                                    "share": st.column_config.NumberColumn(format="percent", width=80)})
    dimension = st.selectbox("Look at one setting", list(DIMENSIONS), key="why_dimension",
                             help="For every value of this setting: how many layouts had it, how many fit, the "
                                  "best result among them, and why the others were rejected.")
    components.table(dimension_rows(result, dimension), hide_index=True, key="dimension_table", row_height=REASONS_ROW_PX,
                     column_config={"main reasons rejected": st.column_config.TextColumn(width=480)})
    values = list(result.by_dimension[dimension])
    value = st.selectbox(f"Why not {dimension} =", values, key="why_value")
    try:
        answer = why_not(state.scenario_json(), opts.allow_span_nodes, result.objective, dimension,
                         dimension_value(dimension, value))
    except Busy as err:
        answer = None
        st.warning(str(err))
    if answer is None:
        pass
    elif "best" in answer:
        best = answer["best"]
        st.markdown(f"The best layout with {dimension}={value}: {describe_layout(best.layout.model_dump())}, "
                    f"{fmt_days(best.wall_days)}, {best.memory_gib.total:.1f} GiB per accelerator.")
    else:
        reasons = "; ".join(f"{r} ({n:,})" for r, n in answer["rejected"].items())
        st.markdown(f"No layout with {dimension}={value} is possible here: {reasons or answer.get('note', '')}.")
