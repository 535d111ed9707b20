"""Step time of many layouts at once: per-layer compute and communication, the 1F1B pipeline schedule,
data-parallel gradient reduction overlapped with the last backward pass, and the optimizer update.

Pipeline (Narayanan et al. 2021): a step takes m x (slowest stage's micro-batch time) plus the bubble
(p-1)/v x (average stage's micro-batch time); the difference between slowest and average stage is reported as
pipeline imbalance. Tensor-parallel collectives (2 forward, 2 backward per layer; reduce-scatter/all-gather
pairs of the same volume under sequence parallelism) are exposed, as in Megatron-LM without TP overlap.
"""
from __future__ import annotations

import numpy as np

from engine.comm import all_gather_s, all_reduce_s, all_to_all_s, members_per_node, reduce_scatter_s, send_recv_s
from engine.compute import embedding_times, head_times, layer_times, optimizer_step_s
from engine.hardware import Hardware
from engine.layouts import Layouts
from engine.memory import StageParams, bytes_per_element
from engine.model import Shape
from engine.scenario import Training

COMPONENTS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero3_comm", "pp_comm")


def _layer_step(shape: Shape, training: Training, hw: Hardware, lay: Layouts, moe: bool) -> dict[str, np.ndarray]:
    """Seconds one layer adds to one micro-batch on one GPU, by component."""
    b = bytes_per_element(training)
    e, h, t, g = b["activation"], shape.hidden, lay.tp, hw.gpus_per_node
    tokens = lay.mbs * (training.seq_len / lay.cp)
    lt = layer_times(shape, training, hw, lay, moe)
    full = lay.rc == 2

    tp_ar = all_reduce_s(e * tokens * h, t, members_per_node(1, t, g), hw)
    tp = tp_ar * (4 + 2 * full)

    kv_step = send_recv_s(e * tokens * shape.kv_elems_per_token / t, members_per_node(t, lay.cp, g) < lay.cp, hw)
    ring = np.where(lay.cp > 1, (lay.cp - 1) * kv_step, 0.0)
    cp_fwd = np.maximum(0.0, ring - lt.attn_fwd)
    cp = cp_fwd * (1 + full) + np.maximum(0.0, 2 * ring - lt.attn_bwd)

    if moe:
        a2a = all_to_all_s(e * tokens * shape.top_k * h / t, lay.ep, members_per_node(t, lay.ep, g), hw)
        ep = a2a * (4 + 2 * full)
    else:
        ep = 0.0 * tp

    # ZeRO-3 / FSDP: gather each layer's weights before its forward and backward, reduce-scatter its gradients
    z3 = 0.0 * tp
    if (lay.zero >= 3).any():
        dp_group = lay.dp * lay.cp
        layer_ne = (shape.attn_params + (shape.shared_expert_params if moe else shape.dense_mlp_params)) / t
        k_dp = members_per_node(t, dp_group, g)
        gather = all_gather_s(b["weight"] * layer_ne, dp_group, k_dp, hw)
        scatter = reduce_scatter_s(b["grad"] * layer_ne, dp_group, k_dp, hw)
        if moe:
            layer_ex = (shape.n_experts / lay.ep) * shape.expert_params / t
            k_edp = members_per_node(t * lay.ep, dp_group // lay.ep, g)
            gather = gather + all_gather_s(b["weight"] * layer_ex, dp_group // lay.ep, k_edp, hw)
            scatter = scatter + reduce_scatter_s(b["grad"] * layer_ex, dp_group // lay.ep, k_edp, hw)
        z3 = np.maximum(0.0, gather - lt.fwd) * (1 + full) + np.maximum(0.0, gather + scatter - lt.bwd)
        z3 = np.where(lay.zero >= 3, z3, 0.0)

    return {"compute": lt.fwd + lt.bwd, "recompute": lt.recompute, "tp_comm": tp, "cp_comm": cp, "ep_comm": ep,
            "zero3_comm": z3, "bwd": lt.bwd + lt.recompute, "fwd": lt.fwd}


def step_time(shape: Shape, training: Training, hw: Hardware, lay: Layouts, n_gpus: int,
              staged: dict[str, StageParams]) -> dict[str, np.ndarray]:
    """step_time_s and its breakdown (seconds per optimizer step); the components sum to the step time."""
    b = bytes_per_element(training)
    e, h, g = b["activation"], shape.hidden, hw.gpus_per_node
    m = lay.micro_batches(training.global_batch_size)
    moe_model = shape.n_moe_layers > 0
    dense = _layer_step(shape, training, hw, lay, moe=False)
    moe = _layer_step(shape, training, hw, lay, moe=True) if moe_model else None
    head_fwd, head_bwd = head_times(shape, training, hw, lay)
    emb_fwd, emb_bwd = embedding_times(shape, training, hw, lay)
    tokens = lay.mbs * (training.seq_len / lay.cp)
    pp_msg = send_recv_s(e * tokens * h / lay.tp, np.full(len(lay), n_gpus > g), hw)
    pp_comm = np.where(lay.pp > 1, 2 * lay.v * pp_msg, 0.0)

    dp_group = lay.dp * lay.cp
    k_dp = members_per_node(lay.tp, dp_group, g)
    k_edp = members_per_node(lay.tp * lay.ep, dp_group // lay.ep, g) if moe_model else None

    def grad_sync(collective, bytes_per_param, ne, ex):
        t = collective(bytes_per_param * ne, dp_group, k_dp, hw)
        return t + collective(bytes_per_param * ex, dp_group // lay.ep, k_edp, hw) if moe_model else t

    per_stage, dp_exposed, optimizer = {}, [], []
    for name, sp in staged.items():
        st, ne, ex = sp.stage, sp.non_expert, sp.expert
        layers = (lambda key: st.dense * dense[key] + st.moe * moe[key]) if moe_model else (lambda key: st.dense * dense[key])
        comp = {c: layers(c) for c in COMPONENTS if c != "pp_comm"}
        comp["compute"] = comp["compute"] + np.where(st.head, head_fwd + head_bwd, 0.0) + np.where(st.embedding, emb_fwd + emb_bwd, 0.0)
        comp["pp_comm"] = pp_comm
        per_stage[name] = comp
        # gradient reduction after the last micro-batch's backward, hidden behind that backward bucket by bucket
        red = np.where(lay.zero == 0, grad_sync(all_reduce_s, b["grad"], ne, ex), grad_sync(reduce_scatter_s, b["grad"], ne, ex))
        gather = grad_sync(all_gather_s, b["weight"], ne, ex)
        n_local = np.maximum(st.dense + st.moe, 1)
        bwd_window, fwd_window = layers("bwd"), layers("fwd")
        red_exposed = np.maximum(red - bwd_window, red / n_local)
        gather_exposed = np.where((lay.zero == 1) | (lay.zero == 2), np.maximum(gather - fwd_window, gather / n_local), 0.0)
        dp_exposed.append(np.where(lay.zero >= 3, 0.0, red_exposed + gather_exposed))
        local = np.where(lay.zero >= 1, ne / dp_group + ex / (dp_group // lay.ep), ne + ex)
        optimizer.append(optimizer_step_s(local, training, hw))

    total = {name: sum(comp.values()) for name, comp in per_stage.items()}
    slowest = np.maximum(np.maximum(total["first"], total["middle"]), total["last"])
    pp = lay.pp
    weights = {"first": 1 / pp, "last": np.where(pp > 1, 1 / pp, 0.0), "middle": np.where(pp > 2, (pp - 2) / pp, 0.0)}
    average = sum(weights[n] * total[n] for n in total)
    out = {c: m * sum(weights[n] * per_stage[n][c] for n in per_stage) for c in COMPONENTS}
    out["pipeline_imbalance"] = m * (slowest - average)
    out["pipeline_bubble"] = (pp - 1) / lay.v * average
    out["dp_comm"] = np.maximum.reduce(dp_exposed)
    out["optimizer"] = np.maximum.reduce(optimizer)
    out["step_time_s"] = m * slowest + out["pipeline_bubble"] + out["dp_comm"] + out["optimizer"]
    return out
