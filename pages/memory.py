"""Memory: per-accelerator memory by component against capacity, with what-if controls on the layout."""
import plotly.graph_objects as go
import streamlit as st

from engine.presentation.edit import apply_edit
from engine.presentation.report import MEMORY_PARTS, WORST_STAGE, accelerator_name, memory_rows
from pages import common
from pages.fields import F

COLORS = {"weights": "#4C78A8", "gradients": "#72B7B2", "optimizer_states": "#F58518", "activations": "#E45756",
          "other": "#BAB0AC"}
sc = common.scenario()
est = common.current_estimate()
choices = common.layout_choices_of(common.scenario_json())


def memory_figure(bars: list[tuple[str, dict]], capacity_gib: float) -> go.Figure:
    fig = go.Figure()
    for key, (label, _) in MEMORY_PARTS.items():
        fig.add_bar(name=label, x=[name for name, _ in bars], y=[e["memory_gib"][key] for _, e in bars],
                    marker_color=COLORS[key], hovertemplate="%{x}<br>" + label + ": %{y:.1f} GiB<extra></extra>")
    fig.add_hline(y=capacity_gib, line_dash="dash", line_color="#222",
                  annotation_text=f"capacity {capacity_gib:.0f} GiB", annotation_position="top left")
    fig.update_layout(barmode="stack", yaxis_title="GiB per accelerator", height=430, legend_orientation="h",
                      margin=dict(t=30, b=10))
    return fig


st.title("Memory per accelerator")
st.caption(f"What each {accelerator_name(sc.cluster.accelerator)} holds during training with the chosen layout. "
           "Change the layout on the left: the chart and figures follow at once, and the change is part of the "
           "scenario (and of the link).")
controls, chart = st.columns([1, 3], gap="large")

with controls:
    st.subheader("What if ...")
    for name in ("tp", "pp", "cp"):
        common.bind(f"layout.{name}", st.selectbox, F[f"layout.{name}"], options=choices[name])
    if len(choices["ep"]) > 1:
        common.bind("layout.ep", st.selectbox, F["layout.ep"], options=choices["ep"])
    st.metric("Data parallel (DP)", sc.layout.dp, help="Copies of the model that each train on different data: "
                                                      "the accelerators left after TP x PP x CP.")
    common.bind("layout.micro_batch_size", st.selectbox, F["layout.micro_batch_size"],
                options=choices["micro_batch_size"])
    if sc.layout.pp > 1:
        common.bind("layout.virtual_stages", st.selectbox, F["layout.virtual_stages"],
                    options=choices["virtual_stages"])
    common.bind("layout.zero_stage", st.select_slider, F["layout.zero_stage"], options=choices["zero_stage"])
    common.bind("layout.recompute", st.selectbox, F["layout.recompute"], options=choices["recompute"])
    common.bind("layout.sequence_parallel", st.toggle, F["layout.sequence_parallel"])

with chart:
    mem = est["memory_gib"]
    if est["fits"]:
        st.success(f"Fits: {mem['total']:.1f} of {est['memory_capacity_gib']:.0f} GiB on the fullest accelerator.")
    else:
        st.error(f"Does not fit: {mem['total']:.1f} GiB needed, {est['memory_capacity_gib']:.0f} GiB available. "
                 "Try a higher ZeRO stage, recompute, more tensor or pipeline parallelism, or a smaller micro-batch.")
    st.markdown(f"**Worst stage:** {WORST_STAGE[est['worst_stage']]}.")
    bars = [("this layout", est)]
    for field, values, label in (("layout.zero_stage", choices["zero_stage"], "ZeRO-{}"),
                                 ("layout.recompute", choices["recompute"], "recompute {}")):
        current = sc.layout.zero_stage if field == "layout.zero_stage" else sc.layout.recompute
        for value in values:
            variant = apply_edit(sc, field, value).scenario
            if value != current and variant is not None:
                bars.append((label.format(value), common.estimate_of(common.scenario_json(variant))))
    st.plotly_chart(memory_figure(bars, est["memory_capacity_gib"]), key="memory_chart")
    st.caption("The first bar is the chosen layout; the others change only the ZeRO stage or the recompute policy.")
    cols = st.columns(3)
    cols[0].metric("Step time", f"{est['step_time_s']:.2f} s", help="One optimizer step of the whole cluster.")
    cols[1].metric("MFU", f"{est['mfu']:.1%}", help="Useful model arithmetic as a share of the accelerators' peak.")
    cols[2].metric("Micro-batches per step", est["micro_batches_per_step"],
                   help="Per pipeline: global batch / (DP x micro-batch).")
    st.dataframe(memory_rows(est), hide_index=True, key="memory_table",
                 column_config={"GiB": st.column_config.NumberColumn(format="%.2f"),
                                "share of capacity": st.column_config.ProgressColumn(format="percent", min_value=0,
                                                                                     max_value=1)})
    detail = est["memory_detail_gib"]
    st.caption(f"'Other' is {detail['logits']:.2f} GiB of output logits, {detail['comm_buffers']:.2f} GiB of "
               f"communication buffers and {detail['framework_overhead']:.2f} GiB framework and fragmentation "
               "allowance.")
