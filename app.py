"""LLM training capacity planner: the memory breakdown of one preset (the full multi-page app replaces this)."""
import plotly.graph_objects as go
import streamlit as st

from engine.estimate import estimate
from engine.scenario import parse_scenario

st.set_page_config(page_title="LLM Training Capacity Planner", page_icon="assets/favicon.png", layout="wide")
st.title("LLM training capacity planner")

SCENARIO = {
    "model": {"preset": "llama3.1-70b"},
    "training": {"seq_len": 8192, "global_batch_size": 1024, "total_tokens": 15.6e12, "precision": "bf16"},
    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 1024},
    "layout": {"tp": 8, "pp": 4, "dp": 32, "micro_batch_size": 1, "virtual_stages": 5, "zero_stage": 1,
               "sequence_parallel": True, "recompute": "selective"},
}


@st.cache_data
def _estimate() -> dict:
    return estimate(parse_scenario(SCENARIO))


est = _estimate()
st.caption("Llama 3.1 70B on 1,024 H100 SXM5 80GB, TP 8 x PP 4 x DP 32, ZeRO-1, selective recompute")
mem = est["memory_gib"]
fig = go.Figure()
for part in ("weights", "gradients", "optimizer_states", "activations", "other"):
    fig.add_bar(name=part.replace("_", " "), x=["per GPU"], y=[mem[part]])
fig.add_hline(y=est["memory_capacity_gib"], line_dash="dash", annotation_text="capacity")
fig.update_layout(barmode="stack", yaxis_title="GiB", height=420)
st.plotly_chart(fig)
cols = st.columns(4)
cols[0].metric("Memory per GPU", f"{mem['total']:.1f} GiB", "fits" if est["fits"] else "does not fit")
cols[1].metric("Step time", f"{est['step_time_s']:.2f} s")
cols[2].metric("MFU", f"{est['mfu']:.1%}")
cols[3].metric("Time to train", f"{est['train_days']:.0f} days")
