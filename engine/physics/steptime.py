"""Step time of many layouts at once: each stage's layers (compute and the communication they cannot hide), the
pipeline schedule (engine.physics.schedule), the data-parallel gradient and weight collectives of the ZeRO stage, and the
optimizer update.

Overlap is never free (engine.physics.comm.overlapped_s): a collective that runs beside compute slows that compute by
OVERLAP_SLOWDOWN while it runs, and whatever part of it outlasts the compute it hides behind is exposed. Tensor-
parallel collectives are exposed unless tp_comm_overlap (then they hide behind the layer's matmuls); context-
parallel KV exchange hides behind the attention core; MoE all-to-all is exposed; ZeRO-3 gathers each layer's
weights behind the previous layer's compute and reduce-scatters its gradients behind the next one's, so a layer
whose compute is shorter than its collectives exposes the difference; the data-parallel reduction of ZeRO 0-2 hides
behind the last micro-batch's backward except its last bucket, and ZeRO-1/2's weight all-gather behind the next
step's first forward except its first bucket.
"""
from __future__ import annotations

import numpy as np

from engine.physics.comm import (all_gather_s, all_reduce_s, all_to_all_s, members_per_node, overlapped_s, reduce_scatter_s,
                         send_recv_s)
from engine.physics import finetune, finetune_time
from engine.physics.compute import embedding_times, head_times, layer_times, optimizer_step_s
from engine.physics.hardware import Hardware
from engine.physics.layouts import Layouts
from engine.physics.memory import StageParams, bytes_per_element, shard_groups
from engine.physics.model import Shape
from engine.physics.schedule import pipeline_slots
from engine.scenario import Training

COMPONENTS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero3_comm")
# Compute slowdown while a collective runs beside it: 18.9% on average over GPT and Llama training steps on A100,
# H100, MI250 and MI210 (Lee et al. 2025, "Characterizing Compute-Communication Overlap in GPU-Accelerated
# Distributed Deep Learning", arXiv 2507.03114, abstract; maximum 40%).
OVERLAP_SLOWDOWN = 0.189


def _layer_step(shape: Shape, training: Training, hw: Hardware, lay: Layouts, moe: bool) -> dict[str, np.ndarray]:
    """Seconds one layer adds to one micro-batch on one GPU, by component (exposed communication only)."""
    b = bytes_per_element(training)
    e, h, t, g = b["activation"], shape.hidden, lay.tp, hw.gpus_per_node
    tokens = lay.mbs * (training.seq_len / lay.cp)
    lt = finetune_time.layer_times(layer_times(shape, training, hw, lay, moe), shape, training, hw, lay, moe, e, b["grad"])
    full = lay.rc == 2
    slow = OVERLAP_SLOWDOWN

    # tensor parallel: 2 all-reduces (or reduce-scatter + all-gather pairs under sequence parallelism) each way
    tp_one = all_reduce_s(e * tokens * h, t, members_per_node(1, t, g), hw)
    tp_exposed = tp_one * (4 + 2 * full)
    tp_hidden = (overlapped_s(lt.matmul_fwd, 2 * tp_one, slow)[1] * (1 + full)
                 + overlapped_s(lt.matmul_bwd, 2 * tp_one, slow)[1])
    tp = np.where(lay.tpo, tp_overlap_exposed_s(tp_hidden, tp_exposed, hw), tp_exposed)

    # context parallel: the KV chunks go round a ring of cp ranks beside the attention core
    kv_step = send_recv_s(e * tokens * shape.kv_elems_per_token / t, members_per_node(t, lay.cp, g) < lay.cp, hw)
    ring = np.where(lay.cp > 1, (lay.cp - 1) * kv_step, 0.0)
    cp = overlapped_s(lt.attn_fwd, ring, slow)[1] * (1 + full) + overlapped_s(lt.attn_bwd, 2 * ring, slow)[1]

    if moe:
        # dispatch and combine, forward and backward: each GPU's routed token copies of its sequence-parallel share
        k_ep = members_per_node(lay.etp, lay.ep, g)
        routed = e * tokens / t * shape.top_k * h
        a2a = all_to_all_s(routed, lay.ep, k_ep, hw)
        etp_ag = all_gather_s(routed * lay.etp, lay.etp, members_per_node(1, lay.etp, g), hw)
        ep = (a2a + etp_ag) * (4 + 2 * full)
    else:
        ep = 0.0 * tp

    # ZeRO-3 / FSDP: gather each layer's weights before its forward (and again before its backward when resharding),
    # reduce-scatter its gradients after its backward, each behind the neighbouring layer's compute
    z3 = 0.0 * tp
    if (lay.zero >= 3).any():
        shard, expert_shard = shard_groups(lay)
        layer_ne = (shape.attn_params + (shape.shared_expert_params if moe else shape.dense_mlp_params)) / t
        k = members_per_node(t, shard, g)
        stored = finetune.stored_weight_bytes(training, b["weight"])     # NF4 under QLoRA
        gather = all_gather_s(stored * layer_ne, shard, k, hw)
        reduced = reduce_bytes(training, hw)
        scatter = reduce_scatter_s(reduced * finetune.trainable_share(shape, training, moe) * layer_ne, shard, k, hw)
        if moe:
            layer_ex = (shape.n_experts / lay.ep) * shape.expert_params / lay.etp
            k_e = members_per_node(lay.etp * lay.ep, expert_shard, g)
            gather = gather + all_gather_s(stored * layer_ex, expert_shard, k_e, hw)
            scatter = scatter + reduce_scatter_s(reduced * finetune.trainable_share(shape, training, moe, expert=True)
                                                 * layer_ex, expert_shard, k_e, hw)
        bwd_comm = np.where(lay.reshard, gather, 0.0) + scatter
        z3 = overlapped_s(lt.fwd, gather, slow)[1] * (1 + full) + overlapped_s(lt.bwd, bwd_comm, slow)[1]
        z3 = np.where(lay.zero >= 3, z3, 0.0)

    return {"compute": lt.fwd + lt.bwd, "recompute": lt.recompute, "tp_comm": tp, "cp_comm": cp, "ep_comm": ep,
            "zero3_comm": z3, "bwd": lt.bwd + lt.recompute, "fwd": lt.fwd}


def reduce_bytes(training: Training, hw: Hardware) -> float:
    """Bytes per gradient element in the data-parallel reduction: the gradients' own format
    (engine.physics.memory.bytes_per_element), or fp32 where the stack reduces in fp32 whatever they are stored in
    (TorchTitan's FSDP2 mixed precision: reduce_dtype float32 by default, data/frameworks.json grad_reduce_bytes)."""
    return max(bytes_per_element(training)["grad"], hw.grad_reduce_bytes)


def tp_overlap_exposed_s(hidden, exposed, hw: Hardware) -> np.ndarray:
    """Tensor-parallel time left with tp_comm_overlap: the stack's overlap hides hw.tp_overlap_share of what it
    could (Transformer Engine userbuffers: all of it, at the overlap slowdown; async TP in PyTorch: the share its
    measured speed-up implies, data/frameworks.json)."""
    share = hw.tp_overlap_share
    return share * hidden + (1 - share) * exposed


def _data_parallel(shape: Shape, training: Training, hw: Hardware, lay: Layouts, ne, ex, m, fwd_window, bwd_window,
                   n_local_layers) -> np.ndarray:
    """Exposed seconds per step of one stage's data-parallel collectives (module docstring)."""
    b = bytes_per_element(training)
    g = hw.gpus_per_node
    shard, expert_shard = shard_groups(lay)
    replicas = lay.dp_group // shard
    moe = shape.n_moe_layers > 0

    def over(collective, nbytes_per_param, group, expert_group, replicated=False):
        """A collective over the shard groups of the stage's non-expert and expert parameters."""
        ne_bytes = nbytes_per_param * ne / (shard if replicated else 1.0)
        t = collective(ne_bytes, group, members_per_node(lay.tp * (shard if replicated else 1), group, g), hw)
        if moe:
            ex_bytes = nbytes_per_param * ex / (expert_shard if replicated else 1.0)
            t = t + collective(ex_bytes, expert_group, members_per_node(lay.etp * lay.ep, expert_group, g), hw)
        return t

    rb = reduce_bytes(training, hw)
    full_ar = over(all_reduce_s, rb, lay.dp_group, lay.expert_dp)                    # ZeRO-0: all-reduce every gradient
    sharded_rs = over(reduce_scatter_s, rb, shard, expert_shard)                     # ZeRO 1-3: reduce-scatter to shards
    replica_ar = np.where(replicas > 1, over(all_reduce_s, rb, replicas, replicas, replicated=True), 0.0)
    gather = over(all_gather_s, b["weight"], shard, expert_shard)                    # ZeRO 1-2: updated weights back
    per_step = np.select([lay.zero == 0, lay.zero <= 2], [full_ar, sharded_rs + replica_ar], replica_ar)
    per_mb = np.where(lay.zero == 2, sharded_rs, 0.0)                                # ZeRO-2 frees gradients each micro-batch
    per_step = per_step - np.where(lay.zero == 2, sharded_rs, 0.0)
    n = np.maximum(n_local_layers, 1)
    last_bucket = (per_step + per_mb) / n
    reduce = overlapped_s(bwd_window, per_step + per_mb, OVERLAP_SLOWDOWN)[1] + last_bucket
    reduce = reduce + (m - 1) * overlapped_s(bwd_window, per_mb, OVERLAP_SLOWDOWN)[1]
    weights = np.where((lay.zero == 1) | (lay.zero == 2),
                       overlapped_s(fwd_window, gather, OVERLAP_SLOWDOWN)[1] + gather / n, 0.0)
    return reduce + weights


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
    # a stage boundary crosses nodes when a pipeline stage's tp*cp*dp ranks fill whole nodes
    pp_msg = send_recv_s(e * tokens * h / lay.tp, np.full(len(lay), n_gpus > g) & (n_gpus // lay.pp >= g), hw)

    per_stage, dp_exposed, optimizer, offload = {}, [], [], []
    for name, sp in staged.items():
        st, ne, ex = sp.stage, sp.non_expert, sp.expert
        tr_ne, tr_ex = finetune.stage_trainable(shape, training, lay, st, ne, ex)   # what has gradients
        layers = (lambda key: st.dense * dense[key] + st.moe * moe[key]) if moe_model else (lambda key: st.dense * dense[key])
        comp = {c: layers(c) for c in COMPONENTS}
        heads = 1 + shape.mtp_layers                # each multi-token-prediction module runs the shared head again
        comp["compute"] = (comp["compute"] + np.where(st.head, heads * (head_fwd + head_bwd), 0.0)
                           + np.where(st.embedding, emb_fwd + emb_bwd, 0.0))
        per_stage[name] = comp
        dp_exposed.append(_data_parallel(shape, training, hw, lay, tr_ne, tr_ex, m, layers("fwd"), layers("bwd"),
                                         st.dense + st.moe))
        shard, expert_shard = shard_groups(lay)
        local = np.where(lay.zero >= 1, tr_ne / shard + tr_ex / expert_shard, tr_ne + tr_ex)
        # with the optimizer offloaded the CPU steps it (offload below), not the GPU
        optimizer.append(np.where(lay.off >= finetune.OFFLOAD_OPTIMIZER, 0.0, optimizer_step_s(local, training, hw)))
        if (lay.off >= finetune.OFFLOAD_OPTIMIZER).any():
            weight_shard = finetune.sharded_weight_bytes(shape, training, lay, st, ne, ex, b["weight"], shard, expert_shard)
            offload.append(finetune_time.offload_step_s(
                hw, lay, m, tr_ne / shard + tr_ex / expert_shard, weight_shard, layers("bwd"),
                layers("fwd") + layers("bwd"), b["grad"], b["weight"]))
        else:
            offload.append(0.0 * m)

    weights = {name: sp.stage.weight for name, sp in staged.items()}
    total = {name: sum(comp.values()) for name, comp in per_stage.items()}
    slowest = np.maximum(np.maximum(total["first"], total["middle"]), total["last"])
    average = sum(weights[n] * total[n] for n in total)
    slots = pipeline_slots(lay.pp, lay.v, m)
    out = {c: m * sum(weights[n] * per_stage[n][c] for n in per_stage) for c in COMPONENTS}
    out["pipeline_imbalance"] = m * (slowest - average)
    out["pipeline_bubble"] = (slots - m * lay.v) * average / lay.v
    out["pp_comm"] = np.where(lay.pp > 1, slots * 2 * pp_msg, 0.0)
    out["dp_comm"] = np.maximum.reduce(dp_exposed)
    out["optimizer"] = np.maximum.reduce(optimizer)
    out["offload"] = np.maximum.reduce(offload)
    out["step_time_s"] = (m * slowest + out["pipeline_bubble"] + out["pp_comm"] + out["dp_comm"] + out["optimizer"]
                          + out["offload"])
    return out
