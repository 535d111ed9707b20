"""Step time of fine-tuning and offload (engine.physics.finetune has the parameters, bytes and sources): a frozen
base's backward without weight gradients, the adapters' matmuls, QLoRA's dequantization, and what ZeRO-Offload and
ZeRO-Infinity add to a step. Host-link copies run on the copy engines, not the SMs, so the compute they overlap is not
slowed (engine.physics.comm.overlapped_s with no slowdown); what outlasts it is exposed."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.physics.comm import overlapped_s
from engine.physics.compute import LayerTimes, tokens_per_local_expert
from engine.physics.finetune import NF4_BYTES, OFFLOAD_OPTIMIZER, OFFLOAD_PARAMS, ROW_PARALLEL, host, targets
from engine.physics.kernels import linear_s, stream_s
from engine.physics.layouts import Layouts
from engine.physics.model import Shape
from engine.scenario import Training


def layer_times(lt: LayerTimes, shape: Shape, training: Training, hw, lay: Layouts, moe: bool, e: float,
                grad_bytes: float) -> LayerTimes:
    """A layer's times with a frozen base: the weight matmuls' backward without the weight gradient (their input
    gradient costs what their forward does), plus the adapters' matmuls and QLoRA's dequantization."""
    if not training.adapters:
        return lt
    tokens = lay.mbs * (training.seq_len / lay.cp)
    t = targets(shape, training)
    matrices = (t.moe if moe else t.dense)
    fwd_a, bwd_a = 0.0 * lt.fwd, 0.0 * lt.fwd
    r = training.lora_rank
    groups = [(1.0, tokens, lay.tp, m) for m in matrices]
    if moe and t.expert:            # routed experts: the tokens each local expert receives, split by expert tp
        per_expert = tokens_per_local_expert(shape, training, lay, tokens)
        groups += [(shape.n_experts / lay.ep, per_expert, lay.etp, m) for m in t.expert]
    for count, rows, split, (name, d_in, d_out) in groups:
        k, n = (d_in / split, d_out) if name in ROW_PARALLEL else (d_in, d_out / split)
        for kk, nn in ((k, r), (r, n)):            # x.A then (xA).B
            f, b = linear_s(rows, kk, nn, hw.matmul_flops, hw.hbm_bytes_per_s, e, grad_bytes)
            fwd_a, bwd_a = fwd_a + count * f, bwd_a + count * b
    frozen_wgrad = lt.matmul_bwd / 2        # linear_s: backward = input gradient + weight gradient, each a forward
    dequant = 0.0 * lt.fwd
    if training.method == "qlora":
        layer = (shape.attn_params + (shape.shared_expert_params + shape.router_params if moe else shape.dense_mlp_params)) / lay.tp
        if moe:
            layer = layer + (shape.n_experts / lay.ep) * shape.expert_params / lay.etp
        dequant = stream_s(layer * (NF4_BYTES + e), hw.hbm_bytes_per_s)
    fwd = lt.fwd + fwd_a + dequant
    bwd = lt.bwd - frozen_wgrad + bwd_a + dequant
    recompute = np.select([lay.rc == 0, lay.rc == 1], [0.0 * fwd, lt.recompute], fwd)
    return replace(lt, fwd=fwd, bwd=bwd, recompute=recompute, matmul_fwd=lt.matmul_fwd + fwd_a,
                   matmul_bwd=lt.matmul_bwd - frozen_wgrad + bwd_a,
                   mlp_bwd=lt.mlp_bwd * np.where(lt.bwd > 0, bwd / np.maximum(lt.bwd, 1e-30), 1.0))


def offload_step_s(hw, lay: Layouts, m, trainable_shard, weight_shard_bytes, bwd_window, layer_window,
                   grad_bytes: float, weight_bytes: float) -> np.ndarray:
    """Seconds per step that offloading adds on one GPU (data/offload.json overlap): each micro-batch's gradient
    partition down the host link behind the backward, CPU-Adam over the partition, the updated 16-bit partition
    back up; with parameter offload each layer's weight shard fetched up for the forward and again for the
    backward (and the recomputation), behind the layer's compute: the exposed seconds."""
    off = lay.off
    if not (off >= OFFLOAD_OPTIMIZER).any():               # nothing offloaded: nothing to price
        return 0.0 * bwd_window
    h = host(hw.accelerator)
    link = h["link_bytes_per_s"]
    grads_down = m * grad_bytes * trainable_shard / link
    cpu = trainable_shard / h["cpu_adam_params_per_s"]
    params_up = weight_bytes * trainable_shard / link
    fetches = 2 + (lay.rc == 2)
    fetch = m * fetches * weight_shard_bytes / link
    exposed = (overlapped_s(bwd_window * m, grads_down, 0.0)[1] + cpu + params_up
               + np.where(off >= OFFLOAD_PARAMS, overlapped_s(layer_window * m, fetch, 0.0)[1], 0.0))
    return np.where(off >= OFFLOAD_OPTIMIZER, exposed, 0.0)


def paged_optimizer_s(paged_bytes, hw) -> np.ndarray:
    """QLoRA's paged optimizer states evicted to the host come back for the update and go out again: twice over
    the host link per step, exposed (the update waits for them)."""
    return 2.0 * paged_bytes / host(hw.accelerator)["link_bytes_per_s"]

