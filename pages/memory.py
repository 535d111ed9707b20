"""Memory: per-accelerator memory by component against capacity, with what-if controls on the layout."""
import plotly.graph_objects as go
import streamlit as st

from engine.inputs import a2a_overlap_offered
from engine.physics.memory import default_headroom_fraction, grads_in_fp32, headroom_fraction
from engine.planning.sanity import memory_headroom_warning
from engine.presentation.edit import apply_edit
from engine.presentation.formatting import GLOSSARY, accelerator_name
from engine.planning.results import Estimate
from engine.presentation.tables import MEMORY_PARTS, OFFLOAD_NAMES, WORST_STAGE, fine_tuning_rows, memory_rows
from ui import binding, cached, charts, components, state
from ui.fields import F

COLORS = {"weights": "#4C78A8", "gradients": "#72B7B2", "optimizer_states": "#F58518", "activations": "#E45756",
          "other": "#BAB0AC"}
sc = state.scenario()
est = cached.current_estimate()
choices = cached.layout_choices_of(state.scenario_json())


def memory_figure(bars: list[tuple[str, Estimate]], capacity_gib: float, headroom: float) -> go.Figure:
    fig = go.Figure()
    for key, label in MEMORY_PARTS.items():
        fig.add_bar(name=label, x=[name for name, _ in bars], y=[getattr(e.memory_gib, key) for _, e in bars],
                    marker_color=COLORS[key], hovertemplate="%{x}<br>" + label + ": %{y:.1f} GiB<extra></extra>")
    fig.add_hline(y=capacity_gib, line_dash="dash", line_color="#222",
                  annotation_text=f"capacity {capacity_gib:.0f} GiB", annotation_position="top left")
    if headroom > 0:
        fig.add_hline(y=(1 - headroom) * capacity_gib, line_dash="dot", line_color="#888",
                      annotation_text=f"{headroom:.1%} kept free above", annotation_position="bottom left")
    fig.update_layout(barmode="stack", yaxis_title="GiB per accelerator", height=450, margin=dict(t=60, b=10),
                      **charts.LEGEND_ABOVE)
    # bar names on two lines, never slanted over each other in a narrow column
    fig.update_xaxes(tickangle=0, tickmode="array", tickvals=[name for name, _ in bars],
                     ticktext=[name.replace(" ", "<br>", 1) for name, _ in bars])
    return fig


SPLIT_KEY = state.WIDGET + "layout.stage_split"


def _split_text(split: tuple) -> str:
    return "even" if split == (None, None) else f"{split[0]} first, {split[1]} last"


def _split_changed() -> None:
    first, last = st.session_state[SPLIT_KEY]
    layout = {**state.scenario().layout.model_dump(), "first_stage_layers": first, "last_stage_layers": last}
    state.commit(binding.edit(state.scenario(), "layout", {k: v for k, v in layout.items() if v is not None}),
                  "layout.stage_split")


def stage_split_widget(splits: list[tuple]) -> None:
    """The pipeline split sets two layout fields (first and last stage layers) at once."""
    st.session_state.setdefault(SPLIT_KEY, (sc.layout.first_stage_layers, sc.layout.last_stage_layers))
    st.selectbox(F["layout.stage_split"].label, splits, key=SPLIT_KEY, format_func=_split_text,
                 help=F["layout.stage_split"].help, on_change=_split_changed)
    binding.field_problems("layout.stage_split")


st.title("Memory per accelerator")
st.caption(f"What each {accelerator_name(sc.cluster.accelerator)} holds during training with the chosen layout. "
           "Change the layout on the left: the chart and figures follow at once, and the change is part of the "
           "scenario (and of the link).")
controls, chart = st.columns([1.2, 3], gap="large")

with controls:
    st.subheader("What if ...")
    for name in ("tp", "pp", "cp"):
        binding.bind(f"layout.{name}", st.selectbox, F[f"layout.{name}"], options=choices[name])
    if len(choices["ep"]) > 1:
        binding.bind("layout.ep", st.selectbox, F["layout.ep"], options=choices["ep"])
    st.metric("Data parallel (DP)", sc.layout.dp, help="Copies of the model that each train on different data: "
                                                      "the accelerators left after TP x PP x CP.")
    binding.bind("layout.micro_batch_size", st.selectbox, F["layout.micro_batch_size"],
                options=choices["micro_batch_size"])
    if sc.layout.pp > 1:
        binding.bind("layout.virtual_stages", st.selectbox, F["layout.virtual_stages"],
                    options=choices["virtual_stages"])
    if sc.layout.pp > 1 and len(choices["stage_split"]) > 1:
        stage_split_widget(choices["stage_split"])
    binding.bind("layout.zero_stage", st.select_slider, F["layout.zero_stage"], options=choices["zero_stage"])
    if sc.layout.zero_stage >= 1 and sc.layout.dp * sc.layout.cp > 1:
        binding.bind("layout.shard_group", st.selectbox, F["layout.shard_group"],
                    options=[F["layout.shard_group"].blank, *choices["shard_group"][1:]])
    if sc.layout.zero_stage == 3:
        binding.bind("layout.reshard_after_forward", st.toggle, F["layout.reshard_after_forward"])
    if sc.arch.is_moe and len(choices["expert_tp"]) > 1:
        binding.bind("layout.expert_tp", st.selectbox, F["layout.expert_tp"],
                    options=[F["layout.expert_tp"].blank, *choices["expert_tp"][1:]])
    binding.bind("layout.recompute", st.selectbox, F["layout.recompute"], options=choices["recompute"])
    binding.bind("layout.offload", st.selectbox, F["layout.offload"], options=choices["offload"])
    binding.bind("layout.sequence_parallel", st.toggle, F["layout.sequence_parallel"])
    if sc.layout.tp > 1 and sc.layout.sequence_parallel:
        binding.bind("layout.tp_comm_overlap", st.toggle, F["layout.tp_comm_overlap"])
    if a2a_overlap_offered(sc):
        binding.bind("layout.moe_a2a_overlap", st.toggle, F["layout.moe_a2a_overlap"])
    st.subheader("Memory policy")
    recipe = "fp32" if grads_in_fp32(sc.training.model_copy(update={"accumulate_grads_in_fp32": None})) else "16-bit"
    grad_words = {F["training.accumulate_grads_in_fp32"].blank: f"default ({recipe})", True: "fp32", False: "16-bit"}
    binding.bind("training.accumulate_grads_in_fp32", st.selectbox, F["training.accumulate_grads_in_fp32"],
                 options=list(grad_words), format_func=grad_words.get)
    binding.bind("training.memory_headroom_fraction", st.number_input, F["training.memory_headroom_fraction"],
                 min_value=0.0, max_value=50.0, step=0.5, placeholder=f"{default_headroom_fraction():.1%} (published)")

with chart:
    mem = est.memory_gib
    headroom_warning = memory_headroom_warning(sc, est)
    if headroom_warning:
        st.warning(headroom_warning)
    elif est.fits:
        st.success(f"Fits: {mem.total:.1f} of {est.memory_capacity_gib:.0f} GiB on the fullest accelerator, "
                   f"with the {headroom_fraction(sc.training):.1%} kept free for the allocator left over.")
    else:
        st.error(f"Does not fit: {mem.total:.1f} GiB needed, {est.memory_capacity_gib:.0f} GiB available, so no "
                 "time is given. Try a higher ZeRO stage, recompute, more tensor or pipeline parallelism, or a smaller "
                 "micro-batch.")
        components.show_what_fits(sc)
    st.markdown(f"**Worst stage:** {WORST_STAGE[est.worst_stage]}.")
    bars = [("this layout", est)]
    for field, values, label in (("layout.zero_stage", choices["zero_stage"], "ZeRO-{}".format),
                                 ("layout.recompute", choices["recompute"], "recompute {}".format),
                                 ("layout.offload", choices["offload"], OFFLOAD_NAMES.get)):
        current = getattr(sc.layout, field.removeprefix("layout."))
        for value in values:
            variant = apply_edit(sc, field, value).scenario
            if value != current and variant is not None:
                bars.append((label(value), cached.estimate_of(state.scenario_json(variant))))
    st.plotly_chart(memory_figure(bars, est.memory_capacity_gib, headroom_fraction(sc.training)), key="memory_chart")
    st.caption("The first bar is the chosen layout; the others change only the ZeRO stage, the recompute policy or "
               "what is offloaded to CPU memory.")
    if est.fits:
        cols = st.columns(3)
        cols[0].metric("Step time", f"{est.step_time_s:.2f} s", help="One optimizer step of the whole cluster.")
        cols[1].metric("MFU", f"{est.mfu:.1%}", help=GLOSSARY["MFU"][0].upper() + GLOSSARY["MFU"][1:] + ".")
        cols[2].metric("Micro-batches per step", est.micro_batches_per_step,
                       help="Per pipeline: global batch / (DP x micro-batch).")
    st.table([{**r, "GiB": f"{r['GiB']:.2f}", "share of capacity": f"{r['share of capacity']:.1%}"}
              for r in memory_rows(est, sc.training)])
    if est.fine_tuning and (sc.training.fine_tune or sc.layout.offload != "none"):
        st.markdown("**What trains, what is frozen, and what offloading moves to CPU memory**")
        st.table(fine_tuning_rows(est))
    detail = est.memory_detail_gib
    st.caption(f"'Other' is {detail['logits']:.2f} GiB of output logits and loss at its peak, "
               f"{detail['comm_buffers']:.2f} GiB of communication and gathered-weight buffers and "
               f"{detail['framework_overhead']:.2f} GiB framework and fragmentation allowance. PyTorch would log about "
               f"{detail['reserved_peak']:.1f} GiB as its peak (max_memory_reserved: the live tensors with the caching "
               "allocator's measured reserve, without the CUDA context).")
