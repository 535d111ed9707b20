"""Step time of many layouts at once: each stage's layers (compute and the communication they cannot hide), the
pipeline schedule (engine.physics.schedule), the data-parallel gradient and weight collectives of the ZeRO stage, and the
optimizer update.

Overlap is never free (engine.physics.comm.overlapped_s): a collective that runs beside compute slows that compute by
OVERLAP_SLOWDOWN while it runs, and whatever part of it outlasts the compute it hides behind is exposed. Tensor-
parallel collectives are exposed unless tp_comm_overlap (then they hide behind the layer's matmuls); context-
parallel KV exchange hides behind the attention core; MoE all-to-all is exposed unless the stack overlaps it across
micro-batches (moe_a2a_overlap, a2a_overlap_exposed_s); ZeRO-3 gathers each layer's
weights behind the previous layer's compute and reduce-scatters its gradients behind the next one's, so a layer
whose compute is shorter than its collectives exposes the difference, and a stage's first gather (with the embedding
and output layer) and last reduce-scatter hide behind nothing; the data-parallel reduction of ZeRO 0-2 hides behind
the last micro-batch's backward except its last bucket, and ZeRO-1/2's weight all-gather behind the next step's first
forward except its first bucket. Every collective is issued in the stack's units (its buckets, or one layer), and
each call pays the collective latency, which grows with the ranks of the ring (engine.physics.comm).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from engine.physics.comm import (OnGroups, all_gather_s, all_reduce_s, all_to_all_s, members_per_node, overlapped_s,
                                 send_recv_s)
from engine.physics import finetune, finetune_time
from engine.physics.compute import embedding_times, head_times, layer_times, optimizer_step_s
from engine.physics.hardware import Hardware
from engine.physics.layouts import Layouts
from engine.physics.memory import (DEEPSPEED_PREFETCH_BUCKET, DEEPSPEED_REDUCE_BUCKET, StageParams, bytes_per_element,
                                   outer_params, shard_groups)
from engine.physics.model import Shape, routed_copies
from engine.physics.schedule import pipeline_slots
from engine.scenario import Training

COMPONENTS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero3_comm")
# Compute slowdown while a collective runs beside it: 18.9% on average over GPT and Llama training steps on A100,
# H100, MI250 and MI210 (Lee et al. 2025, "Characterizing Compute-Communication Overlap in GPU-Accelerated
# Distributed Deep Learning", arXiv 2507.03114, abstract; maximum 40%).
OVERLAP_SLOWDOWN = 0.189
# The units a stack issues its data-parallel collectives in (each call pays the collective latency, and the last
# reduction and first gather of a step hide behind nothing): Megatron-Core's gradient buckets hold
# max(40,000,000, 1,000,000 x dp) parameters by default, "larger DP sizes need larger buckets to ensure collectives do
# not become latency-bound" (megatron/core/distributed/distributed_data_parallel_config.py, bucket_size); TorchTitan's
# DDP (ZeRO-0 on the FSDP2 stack) fills buckets of 100 MiB of gradients (torchtitan parallelize apply_ddp:
# replicate(model, device_mesh=dp_mesh, bucket_cap_mb=100)); DeepSpeed reduces in reduce_bucket_size = 5e8 elements and
# ZeRO-3 gathers in stage3_prefetch_bucket_size = 5e7 (engine.physics.memory's constants); FSDP2's fully_shard units,
# Megatron-FSDP and XLA's collectives are one transformer layer.
MEGATRON_BUCKET_PARAMS = 4e7
MEGATRON_BUCKET_PARAMS_PER_DP_RANK = 1e6
DDP_BUCKET_BYTES = 100 * 2**20


class DataParallelRings(NamedTuple):
    """The collectives on a layout's data-parallel groups (comm.OnGroups: each algorithm's latency and seconds per
    byte), worked out once per step: every stage and both layer kinds use the same groups, with other sizes. A
    reduce-scatter takes the time of the all-gather of its total size, so the shard rings time both. The expert
    rings are None for a dense model."""
    shard: OnGroups                       # the non-expert shard group (ZeRO 1-3, FSDP)
    expert_shard: OnGroups | None
    all_reduce: OnGroups                  # the whole data-parallel group (ZeRO-0)
    expert_all_reduce: OnGroups | None
    replicas: OnGroups                    # across the shard groups' replicas (HSDP), the shards' own size
    expert_replicas: OnGroups | None


def data_parallel_rings(shape: Shape, hw: Hardware, lay: Layouts) -> DataParallelRings:
    """The layouts' data-parallel rings (DataParallelRings): ranks are packed tp-innermost, the expert groups
    etp x ep-innermost."""
    g = hw.gpus_per_node
    shard, expert_shard = shard_groups(lay)
    replicas = lay.dp_group // shard
    inner_ex = lay.etp * lay.ep
    moe = shape.n_moe_layers > 0
    expert = lambda collective, group: collective.on(group, members_per_node(inner_ex, group, g), hw) if moe else None
    return DataParallelRings(
        shard=all_gather_s.on(shard, members_per_node(lay.tp, shard, g), hw),
        expert_shard=expert(all_gather_s, expert_shard),
        all_reduce=all_reduce_s.on(lay.dp_group, members_per_node(lay.tp, lay.dp_group, g), hw),
        expert_all_reduce=expert(all_reduce_s, lay.expert_dp),
        replicas=all_reduce_s.on(replicas, members_per_node(lay.tp * shard, replicas, g), hw),
        expert_replicas=expert(all_reduce_s, replicas))


def _layer_step(shape: Shape, training: Training, hw: Hardware, lay: Layouts, moe: bool,
                rings: DataParallelRings) -> dict[str, np.ndarray]:
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
        routed = e * tokens / t * h * routed_copies(shape, training.expert_load_ratio, lay.ep)
        a2a = all_to_all_s(routed, lay.ep, k_ep, hw)
        etp_ag = all_gather_s(routed * lay.etp, lay.etp, members_per_node(1, lay.etp, g), hw)
        one = a2a + etp_ag
        ep = np.where(lay.a2ao, a2a_overlap_exposed_s(lt, one, lay, training, slow) + one * 2 * full,
                      one * (4 + 2 * full))
    else:
        ep = 0.0 * tp

    # ZeRO-3 / FSDP: gather each layer's weights before its forward (and again before its backward when resharding),
    # reduce-scatter its gradients after its backward, each behind the neighbouring layer's compute, in the stack's
    # calls (zero3_calls); the stage's first gather and last reduce-scatter hide behind nothing (zero3_edges_s)
    z3 = 0.0 * tp
    if (lay.zero >= 3).any():
        layer_ne = (shape.attn_params + (shape.shared_expert_params if moe else shape.dense_mlp_params)) / t
        stored = finetune.frozen_linear_bytes(training, b["weight"], hw.frozen_weight_bytes)   # NF4 under QLoRA
        matrices = len(shape.attn_matrices) + len(shape.shared_matrices if moe else shape.dense_mlp_matrices)
        gathers, scatters = zero3_calls(hw, layer_ne, matrices)
        gather = rings.shard.in_calls_s(stored * layer_ne, gathers)
        reduced = reduce_bytes(training, hw)
        scatter = rings.shard.in_calls_s(reduced * finetune.trainable_share(shape, training, moe) * layer_ne, scatters)
        if moe:
            layer_ex = (shape.n_experts / lay.ep) * shape.expert_params / lay.etp
            gathers, scatters = zero3_calls(hw, layer_ex, (shape.n_experts / lay.ep) * len(shape.expert_matrices))
            gather = gather + rings.expert_shard.in_calls_s(stored * layer_ex, gathers)
            expert_share = finetune.trainable_share(shape, training, moe, expert=True)
            scatter = scatter + rings.expert_shard.in_calls_s(reduced * expert_share * layer_ex, scatters)
        bwd_comm = np.where(lay.reshard, gather, 0.0) + scatter
        # under full recompute the layer's forward runs again inside its backward on the weights gathered for it
        # (FSDP2's pre-backward unshard; DeepSpeed keeps them within stage3_max_reuse_distance): no third gather
        z3 = overlapped_s(lt.fwd, gather, slow)[1] + overlapped_s(lt.bwd + lt.recompute, bwd_comm, slow)[1]
        z3 = np.where(lay.zero >= 3, z3, 0.0)

    return {"compute": lt.fwd + lt.bwd, "recompute": lt.recompute, "tp_comm": tp, "cp_comm": cp, "ep_comm": ep,
            "zero3_comm": z3, "bwd": lt.bwd + lt.recompute, "fwd": lt.fwd}


def a2a_overlap_exposed_s(lt, one, lay: Layouts, training: Training, slow: float) -> np.ndarray:
    """Exposed seconds of one layer's four all-to-alls (dispatch and combine, forward and backward; `one` each) per
    micro-batch under the stack's cross-micro-batch overlap (layout.moe_a2a_overlap, Megatron-Core's combined 1F1B):
    micro-batch i's forward runs beside micro-batch j's backward, and each all-to-all hides behind one block of the
    other: j's combine (backward) behind i's attention forward, i's dispatch behind j's MLP backward, j's dispatch
    (backward) behind i's MLP forward, i's combine behind j's attention backward (DeepSeek-V3 technical report, arXiv
    2412.19437, Fig. 4; the same pairing in Megatron-Core). What outlasts its block, and the overlap slowdown of the
    block, is exposed. The forward and backward chunks that have no partner (the first forward and last backward
    without pipelining; the warm-up and cool-down of an interleaved pipeline, about pp of its m micro-batches) pay
    all four exposed. Under full recompute the recomputed forward's two are exposed (the caller adds them)."""
    attn_fwd, attn_bwd = np.maximum(lt.fwd - lt.mlp_fwd, 0.0), np.maximum(lt.bwd - lt.mlp_bwd, 0.0)
    paired = (overlapped_s(attn_fwd, one, slow)[1] + overlapped_s(lt.mlp_bwd, one, slow)[1]
              + overlapped_s(lt.mlp_fwd, one, slow)[1] + overlapped_s(attn_bwd, one, slow)[1])
    m = lay.micro_batches(training.global_batch_size)
    share = np.clip(1.0 - lay.pp / np.maximum(m, 1), 0.0, 1.0)
    return share * paired + (1.0 - share) * 4 * one


def zero3_calls(hw: Hardware, layer_params, matrices) -> tuple[np.ndarray, np.ndarray]:
    """(all-gather, reduce-scatter) calls per layer of ZeRO-3 for `layer_params` gathered parameters per GPU in
    `matrices` weight matrices. DeepSpeed's partitioned-parameter coordinator gathers module by module, each fetch
    with a prefetch of the next modules' parameters up to stage3_prefetch_bucket_size elements in one call: a layer
    costs ceil(layer / bucket) calls, but never more than one per matrix (a matrix above the bucket is one call; the
    norms stay gathered below stage3_param_persistence_threshold); it reduces in reduce_bucket_size buckets
    (layer / bucket calls: a bucket larger than a layer fires once every several layers). FSDP2, Megatron-FSDP and
    XLA gather and reduce each layer as one unit."""
    layer_params = np.asarray(layer_params, dtype=float)
    if hw.framework == "deepspeed":
        gathers = np.minimum(np.maximum(np.ceil(layer_params / DEEPSPEED_PREFETCH_BUCKET), 1.0), np.maximum(matrices, 1))
        return gathers, layer_params / DEEPSPEED_REDUCE_BUCKET
    return np.ones_like(layer_params), np.ones_like(layer_params)


def zero3_edges_s(shape: Shape, training: Training, hw: Hardware, lay: Layouts, st,
                  rings: DataParallelRings) -> np.ndarray:
    """Seconds per micro-batch of a stage's first ZeRO-3 gather and last reduce-scatter, which nothing hides: a gather
    hides only behind the compute before it, and before the stage's first layer runs only the embedding lookup; after
    its last backward no compute is left. The first gather carries the parameters outside the layers (embedding,
    output layer: FSDP2's root module, gathered at the start of each forward and reduced after the last backward,
    torch.distributed.fsdp.fully_shard) with the first layer, or DeepSpeed's first prefetch bucket of it; the last
    reduce-scatter the same parameters, or DeepSpeed's last reduce bucket. The non-expert shard group carries them."""
    b = bytes_per_element(training)
    mlp = shape.shared_expert_params if shape.n_moe_layers and not shape.n_dense_layers else shape.dense_mlp_params
    layer = (shape.attn_params + mlp) / lay.tp
    outer = outer_params(shape, lay, st)
    if hw.framework == "deepspeed":
        first = outer + np.minimum(layer, DEEPSPEED_PREFETCH_BUCKET)
        last = np.minimum(np.maximum(outer, DEEPSPEED_REDUCE_BUCKET), outer + (st.dense + st.moe) * layer)
    else:
        first = last = outer + layer
    stored = finetune.frozen_linear_bytes(training, b["weight"], hw.frozen_weight_bytes)
    reduced = reduce_bytes(training, hw) * finetune.trainable_share(shape, training, moe=False)
    edges = rings.shard.seconds(stored * first) + rings.shard.seconds(reduced * last)
    return np.where(lay.zero >= 3, edges, 0.0)


def grad_bucket_params(hw: Hardware, lay: Layouts, reduce_bytes_per_param: float, layer_params) -> np.ndarray:
    """Parameters per call of the ZeRO 0-2 gradient reduction and of ZeRO-1/2's weight gather (module constants)."""
    if hw.framework == "megatron_core":
        return np.maximum(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP_RANK * lay.dp_group)
    if hw.framework == "deepspeed":
        return np.full(len(lay), DEEPSPEED_REDUCE_BUCKET)
    layer = np.maximum(layer_params, 1.0) * np.ones(len(lay))
    if hw.framework == "pytorch_fsdp2":       # DDP's buckets for ZeRO-0, fully_shard's layers otherwise
        return np.where(lay.zero == 0, DDP_BUCKET_BYTES / reduce_bytes_per_param, layer)
    return layer


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
                   n_local_layers, rings: DataParallelRings) -> np.ndarray:
    """Exposed seconds per step of one stage's data-parallel collectives (module docstring)."""
    b = bytes_per_element(training)
    shard, expert_shard = shard_groups(lay)
    replicas = lay.dp_group // shard

    rb = reduce_bytes(training, hw)
    bucket = grad_bucket_params(hw, lay, rb, (ne + ex) / np.maximum(n_local_layers, 1))
    edge_share = np.minimum(1.0, bucket / np.maximum(ne + ex, 1.0))       # the last (first) bucket's share

    def over(ring, expert_ring, *nbytes_per_param, replicated=False):
        """For each size per parameter, (whole, one bucket) seconds of a collective on the rings of the stage's
        non-expert and expert parameters: the whole issued in calls of `bucket` parameters, and the last (first)
        bucket alone."""
        def both(on, params):
            return [(on.in_calls_s(per * params, np.maximum(params / bucket, 1.0)),
                     on.seconds(edge_share * per * params)) for per in nbytes_per_param]
        out = both(ring, ne / (shard if replicated else 1.0))
        if expert_ring is not None:
            experts = both(expert_ring, ex / (expert_shard if replicated else 1.0))
            out = [(w + we, e + ee) for (w, e), (we, ee) in zip(out, experts)]
        return out

    (full_ar, full_ar_edge), = over(rings.all_reduce, rings.expert_all_reduce, rb)  # ZeRO-0: all-reduce every gradient
    # ZeRO 1-3: reduce-scatter the gradients to their shards; ZeRO 1-2: all-gather the updated weights back
    (sharded_rs, sharded_rs_edge), (gather, gather_edge) = over(rings.shard, rings.expert_shard, rb, b["weight"])
    (replica_ar, replica_ar_edge), = over(rings.replicas, rings.expert_replicas, rb, replicated=True)
    replica_ar, replica_ar_edge = (np.where(replicas > 1, x, 0.0) for x in (replica_ar, replica_ar_edge))
    per_step = np.select([lay.zero == 0, lay.zero <= 2], [full_ar, sharded_rs + replica_ar], replica_ar)
    last_bucket = np.select([lay.zero == 0, lay.zero <= 2], [full_ar_edge, sharded_rs_edge + replica_ar_edge],
                            replica_ar_edge)
    per_mb = np.where(lay.zero == 2, sharded_rs, 0.0)                                # ZeRO-2 frees gradients each micro-batch
    per_step = per_step - np.where(lay.zero == 2, sharded_rs, 0.0)
    reduce = overlapped_s(bwd_window, per_step + per_mb, OVERLAP_SLOWDOWN)[1] + last_bucket
    reduce = reduce + (m - 1) * overlapped_s(bwd_window, per_mb, OVERLAP_SLOWDOWN)[1]
    weights = np.where((lay.zero == 1) | (lay.zero == 2),
                       overlapped_s(fwd_window, gather, OVERLAP_SLOWDOWN)[1] + gather_edge, 0.0)
    return reduce + weights


def step_time(shape: Shape, training: Training, hw: Hardware, lay: Layouts, n_gpus: int,
              staged: dict[str, StageParams]) -> dict[str, np.ndarray]:
    """step_time_s and its breakdown (seconds per optimizer step); the components sum to the step time."""
    b = bytes_per_element(training)
    e, h, g = b["activation"], shape.hidden, hw.gpus_per_node
    m = lay.micro_batches(training.global_batch_size)
    moe_model = shape.n_moe_layers > 0
    rings = data_parallel_rings(shape, hw, lay)
    dense = _layer_step(shape, training, hw, lay, moe=False, rings=rings)
    moe = _layer_step(shape, training, hw, lay, moe=True, rings=rings) if moe_model else None
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
        comp["zero3_comm"] = comp["zero3_comm"] + zero3_edges_s(shape, training, hw, lay, st, rings)
        heads = 1 + shape.mtp_layers                # each multi-token-prediction module runs the shared head again
        comp["compute"] = (comp["compute"] + np.where(st.head, heads * (head_fwd + head_bwd), 0.0)
                           + np.where(st.embedding, emb_fwd + emb_bwd, 0.0))
        per_stage[name] = comp
        dp_exposed.append(_data_parallel(shape, training, hw, lay, tr_ne, tr_ex, m, layers("fwd"), layers("bwd"),
                                         st.dense + st.moe, rings))
        shard, expert_shard = shard_groups(lay)
        local = np.where(lay.zero >= 1, tr_ne / shard + tr_ex / expert_shard, tr_ne + tr_ex)
        # with the optimizer offloaded the CPU steps it (offload below), not the GPU
        optimizer.append(np.where(lay.off >= finetune.OFFLOAD_OPTIMIZER, 0.0, optimizer_step_s(local, training, hw)))
        if (lay.off >= finetune.OFFLOAD_OPTIMIZER).any():
            weight_shard = finetune.sharded_weight_bytes(shape, training, lay, st, ne, ex, b["weight"], shard, expert_shard,
                                                         hw.frozen_weight_bytes)
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
