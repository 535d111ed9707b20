"""Every term of one estimate with the inputs it was computed from, the function that computes it and its source, in
the manner of Megatron-LM's theoretical_memory_usage(verbose=True) report: `explain(sc)` returns the terms,
`explain_text(sc)` prints them. The numbers are the physics' own (the same calls `estimate` makes); the words around
them are written from the byte counts, degrees and schedule actually used. docs/formulas.md lists the same terms.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.economics import cost, energy, goodput
from engine.physics.comm import members_per_node
from engine.physics.compute import LAYER_FIXED_S
from engine.physics.hardware import GIB
from engine.physics import finetune
from engine.physics.model import busiest_rank_load
from engine.physics.layouts import OFFLOAD as OFFLOAD_NAMES, RECOMPUTE, Layouts
from engine.physics.memory import (FRAGMENTATION, FRAMEWORK_OVERHEAD_BYTES, allocator_reserve_fraction,
                                   bytes_per_element, fsdp2_gradient_bytes, gradient_text, headroom_fraction,
                                   layer_activation_bytes, loss_bytes_per_logit, memory_breakdown,
                                   op_selective_layer_bytes, optimizer_state_bytes, shard_groups, stack_memory,
                                   staged_params)
from engine.physics.schedule import chunk_layers, peak_layers_in_flight, pipeline_slots, warmup_forwards
from engine.planning.evaluation import BREAKDOWN, STAGES, evaluate, host_memory_bytes, time_band
from engine.planning.search import context
from engine.scenario import Scenario, ScenarioError

MEGATRON_SCHEDULES = ("Megatron-LM schedules.py get_pp_rank_microbatches "
                      "(https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/pipeline_parallel/schedules.py)")
KORTHIKANTI = "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models, Table 2 (arXiv 2205.05198)"
ZERO = "Rajbhandari et al. 2020, ZeRO (arXiv 1910.02054) sec. 3 and 5"
NARAYANAN = "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU Clusters (arXiv 2104.04473) sec. 2.2"
MEGATRON_GRADS = ("Megatron-LM examples/llama (--grad-reduce-in-bf16) and megatron/training/arguments.py "
                  "(--accumulate-allreduce-grads-in-fp32); docs/source/api-guide/dist_optimizer.md (the distributed "
                  "optimizer keeps every gradient)")
FSDP2 = ("PyTorch FSDP2 (torch.distributed.fsdp.fully_shard, MixedPrecisionPolicy; torch.distributed.pipelining "
         "stage.backward_maybe_with_nosync) as TorchTitan parallelize_llama.apply_fsdp runs it")
DEEPSPEED = ("DeepSpeed deepspeed/runtime/zero/config.py defaults (stage3_prefetch_bucket_size 5e7, "
             "stage3_max_live_parameters 1e9, reduce_bucket_size 5e8; www.deepspeed.ai/docs/config-json)")
GMLAKE = "Guo et al. 2024, GMLake (arXiv 2401.08156): 9.2 GB of an 80 GB device reserved beyond need (data/memory_headroom.json)"
HEADROOM_SOURCE = ("Guo et al. 2024, GMLake (arXiv 2401.08156): the caching allocator reserves 9.2 GB of an 80 GB A100 "
                   "beyond need on average; less the 5% fragmentation already counted (data/memory_headroom.json)")
NCCL = "NCCL tuning model src/graph/tuning.cc; nccl-tests doc/PERFORMANCE.md bus bandwidth (engine/physics/comm.py)"


@dataclass(frozen=True)
class Term:
    """One figure of the estimate: its value, how it was computed (the formula with the numbers used), the engine
    function that computes it and where the formula comes from."""

    section: str
    name: str
    value: float | None
    unit: str
    formula: str
    function: str
    source: str


def _g(x) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def _gib(x) -> str:
    return f"{_g(x) / GIB:.3f} GiB"


def _memory_terms(ctx, lay: Layouts, ev: dict) -> list[Term]:
    shape, tr = ctx.shape, ctx.scenario.training
    staged_m = lay.micro_batches(tr.global_batch_size)
    staged = staged_params(shape, lay, staged_m)            # the same staging and breakdown memory() uses
    mem = memory_breakdown(shape, tr, lay, staged, ctx.hw.weight_copy_bytes, ctx.hw.framework,
                           ctx.hw.frozen_weight_bytes)
    worst = STAGES[int(ev["worst_stage"][0])]
    sp = staged[worst]
    st = sp.stage
    p, v, m, t = int(lay.pp[0]), int(lay.v[0]), int(staged_m[0]), int(lay.tp[0])
    rank = int(st.rank[0])
    b = bytes_per_element(tr)
    shard, expert_shard = (int(_g(x)) for x in shard_groups(lay))
    zero = int(lay.zero[0])
    ne, ex = _g(sp.non_expert), _g(sp.expert)
    c = {k[4:]: ev[k] for k in ev if k.startswith("mem_")}   # the worst stage as evaluated (QLoRA paging included)
    sec = "Memory per GPU"
    fn = "engine.physics.memory.memory_breakdown"
    where = ("no pipeline" if p == 1 else
             f"the {worst} stage (stage {rank + 1} of {p}, 0-based rank {rank}), the heaviest of "
             + ", ".join(f"{s} {_gib(mem[s]['total'])}" for s in STAGES if p > 2 or s != "middle"))
    layers = int(_g(st.dense) + _g(st.moe))
    params = (f"{ne:,.0f} non-expert" + (f" + {ex:,.0f} expert" if ex else "")
              + f" parameters on this GPU ({layers} layers{', embedding' if _g(st.embedding) else ''}"
              f"{', output layer' if _g(st.head) else ''}; matrices / tp {t})")
    sharded = f"non-expert / {shard}" + (f", expert / {expert_shard}" if ex else "")
    gathered = zero >= 3 and bool(lay.reshard[0])
    sm = stack_memory(ctx.hw.framework, lay)
    fsdp2 = bool(sm.fsdp2[0])
    kept = not bool(lay.reshard[0]) or p > 1
    copy = ctx.hw.weight_copy_bytes
    states = " + ".join(f"{name} {n:g}" for name, n in optimizer_state_bytes(tr).items())
    if fsdp2:
        sharded_grad, reduce = fsdp2_gradient_bytes(tr)
        weights_text = (f"FSDP2 (ZeRO-3): the fp32 sharded parameter is the master weight (with the optimizer states); "
                        + (f"{b['weight']:g} B/param (16-bit, gathered) x {params} kept gathered "
                           + ("(no resharding after forward)" if p == 1 else "(the pipeline stage turns resharding after "
                              "backward off until the last micro-batch)") if kept else
                           "16-bit weights exist only gathered, layer by layer (comm_buffers)"))
        grads_text = (f"FSDP2: {sharded_grad:g} B/param x the same parameters, sharded ({sharded}; the sharded "
                      f"gradient takes the fp32 sharded parameter's dtype)"
                      + (f" + {reduce:g} B/param unsharded, accumulated in the reduce dtype over "
                                               f"the micro-batches of the pipeline (gradient sync off until the last)"
                                               if p > 1 else ""))
        state_source = FSDP2
    else:
        weights_text = (f"{b['weight']:g} B/param ({tr.precision} training)"
                        + (f" + {copy:g} B/param low-precision copy" if copy else "") + f" x {params}"
                        + (f", sharded by ZeRO-3 ({sharded})" if gathered else ""))
        grads_text = (f"{b['grad']:g} B/param ({gradient_text(tr)}) x the same parameters"
                      + (f", sharded by ZeRO-{zero} ({sharded})" if zero >= 2 else ", every gradient kept (ZeRO-1 and below)"))
        state_source = ZERO
    if tr.adapters:
        weights_text += (f"; under {tr.method} the frozen base" + (" (its linear layers in NF4)" if tr.method == "qlora" else "")
                         + " plus the adapters (Fine-tuning and offload below)")
        grads_text = grads_text.replace("x the same parameters", "x the adapter parameters")
    out = [
        Term(sec, "stage", None, "", where, "engine.planning.evaluation.memory (argmax over stages)",
             "Megatron-LM theoretical_memory_usage states its scope (the first stage); here every stage is priced"),
        Term(sec, "weights", _g(c["weights"]) / GIB, "GiB", weights_text,
             fn + ("; engine.physics.memory.fsdp2_terms" if fsdp2 else ""), state_source),
        Term(sec, "gradients", _g(c["gradients"]) / GIB, "GiB", grads_text,
             fn + ("; engine.physics.memory.fsdp2_terms" if fsdp2 else ""), f"{state_source}; {MEGATRON_GRADS}"),
        Term(sec, "optimizer_states", _g(c["optimizer_states"]) / GIB, "GiB",
             f"{finetune.adapter_optimizer_bytes(tr, b['optimizer']):g} B/param ({tr.optimizer}: {states}"
             + ("; QLoRA's bf16 adapters keep no fp32 master copy" if tr.method == "qlora" else "")
             + f") x the {'adapter' if tr.adapters else 'same'} parameters"
             + (f", sharded by ZeRO-{zero} ({sharded})" if zero >= 1 else ""), fn, ZERO),
    ]
    # activations: micro-batches alive at the stage's peak x one micro-batch's activations
    op_sac = sm.op_selective and int(lay.rc[0]) == 1
    act_dense = _g(op_selective_layer_bytes(shape, tr, lay) if op_sac else layer_activation_bytes(shape, tr, lay, moe=False))
    act_moe = _g(layer_activation_bytes(shape, tr, lay, moe=True)) if shape.n_moe_layers else 0.0
    layers_mb = _g(st.dense) * act_dense + _g(st.moe) * act_moe
    flight = _g(st.in_flight)
    rest = _g(c["activations"]) - flight * layers_mb
    rc = RECOMPUTE[int(lay.rc[0])]
    if p == 1:
        schedule = "no pipeline: one micro-batch at a time"
    else:
        # the schedule places transformer layers; multi-token-prediction modules ride on the last stage beside the head
        n_layers_stage = int(_g(st.dense) + _g(st.moe)) - (shape.mtp_layers if _g(st.head) else 0)
        chunks = chunk_layers(n_layers_stage, v, "first" if worst == "first" or p == 2 else worst)
        w = warmup_forwards(p, rank, v, m)
        rule = f"p - r - 1 = {p} - {rank} - 1" if v == 1 else f"2(p - r - 1) + (v - 1)p = 2({p} - {rank} - 1) + ({v} - 1){p}"
        alive = peak_layers_in_flight(chunks, p, rank, m)
        schedule = (f"{'1F1B' if v == 1 else 'interleaved 1F1B'}: warm-up {rule}, at most m*v = {m}*{v}, = {w} forward "
                    f"passes, + 1 = {w + 1} chunk(s) alive; chunks of {list(chunks)} layers -> peak {alive} "
                    f"layer-micro-batches / {n_layers_stage} layers = {flight:.4g} micro-batches")
    detail = (f"{flight:.4g} micro-batches in flight ({schedule}) x ({_g(st.dense):.0f} dense layers x "
              f"{act_dense / GIB:.4f} GiB" + (f" + {_g(st.moe):.0f} MoE layers x {act_moe / GIB:.4f} GiB" if shape.n_moe_layers else "")
              + f") per layer and micro-batch (mbs {int(lay.mbs[0])}, seq {tr.seq_len} / cp {int(lay.cp[0])}, "
              f"tp {t}{' with sequence parallelism' if bool(lay.sp[0]) else ''}, recompute {rc}"
              + (" (per-op: the block input, the attention output and every other matmul output kept"
                 + ("; compiled, only those a backward reads" if tr.compiled
                    else "; eagerly, all of them cached") + ")" if op_sac else "") + ", "
              f"{tr.attention} attention, "
              f"{b['activation']:g}-byte activations)")
    kept_outputs = bool(sm.keeps_stage_outputs[0]) and not _g(st.head)
    what = [w for w, on in (("embedding output per micro-batch in flight", _g(st.embedding)),
                            ("each chunk pass's stage output (the stack's pipeline keeps it until its backward)",
                             kept_outputs),
                            ("one layer re-materialised by full recompute, beyond the loss's peak",
                             rc == "full")) if on]
    if rest > 0 and what:
        detail += f" + {rest / GIB:.4f} GiB ({', '.join(what[:-1]) + ' and ' if len(what) > 1 else ''}{what[-1]})"
    out.append(Term(sec, "activations", _g(c["activations"]) / GIB, "GiB", detail,
                    "engine.physics.memory.layer_activation_bytes; engine.physics.memory.op_selective_layer_bytes; "
                    "engine.physics.memory.recompute_peak_bytes; engine.physics.schedule.peak_layers_in_flight"
                    + ("; engine.physics.memory.pipeline_output_bytes" if kept_outputs else ""),
                    f"{KORTHIKANTI}; {MEGATRON_SCHEDULES}"
                    + ("; TorchTitan parallelize_llama._apply_ac_to_transformer_block (per-op selective checkpointing)"
                       if op_sac else "")))
    tokens = int(lay.mbs[0]) * tr.seq_len / int(lay.cp[0])
    eager = bool(sm.eager_loss[0])
    per_logit = _g(loss_bytes_per_logit(tr, lay, sm.eager_loss, sm.keeps_stage_outputs))
    loss_words = ((f"PyTorch's eager cross-entropy on fp32 logits, {per_logit:g} B per logit at its peak: "
                   + ("vocabulary-parallel, the larger of its forward's 16-bit logits, fp32 cast, shifted logits and "
                      "exponential and its decomposed backward's four fp32 tensors" if t > 1
                      else "the saved fp32 log-softmax, the gradient in and the gradient out")
                   + ("; the pipeline keeps the 16-bit logits, its stage output, into the backward"
                      if bool(sm.keeps_stage_outputs[0]) else "")) if eager else
                  f"{b['activation']:g} B logits + 4 B fp32 for Megatron-Core's fused cross-entropy")
    buffer_words = (f"TP all-gather input tokens x h x {b['activation']:g} B (tp > 1) + 2 pipeline send/recv buffers of "
                    f"tokens x h / tp (pp > 1)")
    if fsdp2:
        buffer_words += (" + FSDP2: " + (f"the current and the prefetched layer's {copy:g} B/param low-precision casts"
                                          if copy else "nothing per layer") + " (the stage is kept gathered)" if kept else
                         " + FSDP2: the current and the prefetched layer gathered in 16 bits"
                         + (f" with their {copy:g} B/param low-precision casts" if copy else "")
                         + ", one layer's unsharded gradients and their reduce-dtype copy, and the root module "
                           "(embedding, output layer) kept gathered from forward to backward")
    elif bool(sm.deepspeed_zero3[0]):
        buffer_words += (" + DeepSpeed ZeRO-3: the layer in flight and the prefetch bucket gathered (at most "
                         "stage3_max_live_parameters) and one reduce bucket of gradients (DeepSpeed's defaults)")
    else:
        buffer_words += (" + ZeRO-3 current and prefetched layer" + (f" with their {copy:g} B/param low-precision copies"
                                                                   if copy else "") + " (with resharding)")
    out += [
        Term(sec, "logits", _g(c["logits"]) / GIB, "GiB",
             f"tokens {tokens:g} x vocab {shape.vocab} / tp {t} x {per_logit:g} B ({loss_words})"
             if _g(st.head) else "0: this stage has no output layer", fn + "; engine.physics.memory.loss_bytes_per_logit",
             "torch.distributed.tensor.parallel.loss_parallel _log_softmax and _nll_loss_and_log_softmax_backward; "
             "TorchTitan cross_entropy_loss (pred.float())"
             if eager else "Megatron-LM cross-entropy in fp32"),
        Term(sec, "comm_buffers", _g(c["comm_buffers"]) / GIB, "GiB", buffer_words,
             fn + ("; engine.physics.memory.fsdp2_terms" if fsdp2 else "; engine.physics.memory.deepspeed_zero3_buffer_bytes"
                   if bool(sm.deepspeed_zero3[0]) else ""),
             FSDP2 if fsdp2 else DEEPSPEED if bool(sm.deepspeed_zero3[0]) else "Megatron-LM / PyTorch FSDP buffer layout"),
        Term(sec, "framework_overhead", _g(c["framework_overhead"]) / GIB, "GiB",
             f"{FRAMEWORK_OVERHEAD_BYTES / GIB:g} GiB CUDA context and workspaces + {FRAGMENTATION:.0%} of "
             f"{(_g(c['total']) - _g(c['framework_overhead'])) / GIB:.3f} GiB live tensors (allocator fragmentation)", fn,
             "Megatron-LM issue #525 (1-3 GiB unexplained); Megatron-LM theoretical_memory_usage.py 5% overhead"),
        Term(sec, "total", _g(c["total"]) / GIB, "GiB",
             f"sum of the above; capacity {ctx.hw.memory_bytes / GIB:.2f} GiB -> "
             f"{'fits' if bool(ev['fits'][0]) else 'does not fit'}", "engine.planning.evaluation.memory", "-"),
        Term(sec, "reserved_peak", _g(c["reserved_peak"]) / GIB, "GiB",
             f"beside the total: what torch.cuda.max_memory_reserved reports at the peak (the figure PyTorch stacks log "
             f"as peak memory) = {(_g(c['total']) - _g(c['framework_overhead'])) / GIB:.3f} GiB live tensors x "
             f"(1 + {allocator_reserve_fraction():.1%} the caching allocator holds beyond them); the CUDA context "
             f"and collective buffers are outside it", "engine.physics.memory.allocator_reserve_fraction", GMLAKE),
        Term(sec, "headroom", headroom_fraction(tr) * ctx.hw.memory_bytes / GIB, "GiB",
             f"{headroom_fraction(tr):.1%} of capacity kept free by the search, sizing and plan (allocator reserve and "
             f"transient peaks beyond the estimate) -> recommendable up to {(1 - headroom_fraction(tr)) * ctx.hw.memory_bytes / GIB:.2f} GiB: "
             f"{'yes' if bool(ev['fits_with_headroom'][0]) else 'no (estimated, but the search would not recommend it)'}",
             "engine.physics.memory.headroom_fraction; engine.planning.evaluation.memory", HEADROOM_SOURCE),
    ]
    return out


def _time_terms(ctx, lay: Layouts, ev: dict) -> list[Term]:
    tr, shape, hw = ctx.scenario.training, ctx.shape, ctx.hw
    b = bytes_per_element(tr)
    m = int(_g(lay.micro_batches(tr.global_batch_size)))
    p, v, t, cp = int(lay.pp[0]), int(lay.v[0]), int(lay.tp[0]), int(lay.cp[0])
    bd = {k: _g(ev[k]) for k in BREAKDOWN}
    slots = int(_g(pipeline_slots(lay.pp, lay.v, lay.micro_batches(tr.global_batch_size))))
    per_mb = sum(bd[k] for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero3_comm")) / m
    tokens = int(lay.mbs[0]) * tr.seq_len / cp
    e, h, g = b["activation"], shape.hidden, hw.gpus_per_node
    full = RECOMPUTE[int(lay.rc[0])] == "full"
    sec_c, sec_n, sec_p = "Step time: compute", "Step time: collectives (exposed)", "Step time: pipeline"
    st = "engine.physics.steptime.step_time"
    tp_bytes = e * tokens * h
    k_tp = int(_g(members_per_node(np.array([1]), lay.tp, g)))
    dp_group = int(_g(lay.dp_group))
    out = [
        Term(sec_c, "compute", bd["compute"], "s",
             f"m {m} micro-batches x stage-weighted per-micro-batch forward + backward of each layer (weight GEMMs by "
             f"shape at {hw.matmul_flops / 1e12:.0f} TFLOP/s achievable, {tr.attention} attention, "
             + ("eager (no torch.compile: each norm, rotary and activation step its own kernel) " if hw.eager_elementwise
                else "") + f"element-wise traffic at "
             f"{hw.hbm_bytes_per_s / 1e12:.2f} TB/s, {LAYER_FIXED_S * 1e6:.0f} us fixed forward and twice that backward per "
             f"layer) + embedding and output layer"
             + (f"; each MoE layer's {shape.n_experts / float(lay.ep[0]):g} local experts x 2 GEMMs pay "
                f"{hw.moe_expert_gemm_fixed_s * 1e6:g} us each forward and twice that backward ({hw.framework}'s "
                "per-expert cost on this accelerator's architecture: data/frameworks.json Stack.moe_expert_fixed_us)"
                if shape.n_moe_layers and hw.moe_expert_gemm_fixed_s else ""),
             "engine.physics.compute.layer_times; engine.physics.compute.expert_fixed_s; "
             + ("engine.physics.compute.eager_elementwise_bytes; " if hw.eager_elementwise else "") + st,
             "MAMF (ml-engineering), Shah et al. 2024 FlashAttention-3, BabelStream (engine/physics/kernels.py)"),
        Term(sec_c, "recompute", bd["recompute"], "s",
             f"recompute {RECOMPUTE[int(lay.rc[0])]}: " + ("the whole forward again" if full else (
                 f"{hw.selective_recompute_matmul_share:g} of the forward matmuls and every element-wise op again "
                 f"({hw.framework}'s per-op selective checkpointing)" if hw.selective_recompute_matmul_share else
                 "the attention core again (materialised attention only)")
                 if RECOMPUTE[int(lay.rc[0])] == "selective" else "none"),
             "engine.physics.compute.layer_times; engine.physics.compute.selective_recompute_s",
             KORTHIKANTI + "; data/frameworks.json recompute"),
        Term(sec_c, "sustained_level", hw.framework_detail.get("sustained_level"), "of the isolated best rates",
             f"{hw.framework_detail.get('text')}; {hw.framework_detail.get('level_source')}",
             "engine.physics.hardware.sustained_level; engine.frameworks.resolve",
             "scripts/calibrate_sustained.py (data/frameworks.json levels)"),
        Term(sec_c, "optimizer", bd["optimizer"], "s",
             f"every local parameter's state streamed once at {hw.hbm_bytes_per_s / 1e12:.2f} TB/s "
             f"({b['grad']:g} B gradient + read and write of master and {tr.optimizer} states)",
             "engine.physics.compute.optimizer_step_s", "streaming traffic, BabelStream rates"),
        Term(sec_n, "tp_comm", bd["tp_comm"], "s",
             f"{4 + 2 * full} all-reduces per layer and micro-batch of tokens {tokens:g} x h {h} x {e:g} B = "
             f"{tp_bytes / 2**20:.1f} MiB over tp {t} ({k_tp} per node)"
             + (", hidden behind the layer's GEMMs (tp_comm_overlap) except what outlasts them" if bool(lay.tpo[0]) else ", exposed"),
             "engine.physics.comm.all_reduce_s; engine.physics.comm.overlapped_s", NCCL),
        Term(sec_n, "cp_comm", bd["cp_comm"], "s",
             f"cp {cp}: (cp - 1) ring steps of each rank's K and V beside the attention core, what outlasts it exposed",
             "engine.physics.comm.send_recv_s; engine.physics.comm.overlapped_s", "Liu et al. 2023 Ring Attention; " + NCCL),
        Term(sec_n, "ep_comm", bd["ep_comm"], "s",
             f"ep {int(lay.ep[0])}: dispatch and combine all-to-all of top-{shape.top_k} routed token copies, forward and "
             f"backward, through each GPU's own NIC"
             + (f", x{float(busiest_rank_load(shape, tr.expert_load_ratio, lay.ep[0])):.3f} on the busiest rank "
                f"(expert_load_ratio {tr.expert_load_ratio:g})" if tr.expert_load_ratio != 1.0 else "")
             + (", each behind another micro-batch's attention or MLP (moe_a2a_overlap) except what outlasts it and "
                "the unpaired warm-up and cool-down" if bool(lay.a2ao[0]) else ", exposed")
             if shape.n_moe_layers else "0: no MoE layers",
             "engine.physics.comm.all_to_all_s; engine.physics.steptime.a2a_overlap_exposed_s",
             NCCL + (("; DeepSeek-V3 technical report (arXiv 2412.19437) Fig. 4 pairing, Megatron-Core combined 1F1B")
                     if bool(lay.a2ao[0]) else "")),
        Term(sec_n, "zero3_comm", bd["zero3_comm"], "s",
             "per layer weight all-gather (again before backward when resharding) and gradient reduce-scatter over the "
             f"shard group in {hw.framework}'s calls (each paying the ring latency), behind the neighbouring layer's "
             "compute; the first gather (with the embedding and output layer) and the last reduce-scatter exposed"
             if int(lay.zero[0]) >= 3 else "0: ZeRO stage below 3",
             "engine.physics.comm.all_gather_s (also the reduce-scatter), OnGroups.in_calls_s; "
             "engine.physics.steptime.zero3_calls, zero3_edges_s", ZERO),
        Term(sec_n, "dp_comm", bd["dp_comm"], "s",
             f"ZeRO-{int(lay.zero[0])} gradient {'all-reduce' if int(lay.zero[0]) == 0 else 'reduce-scatter'} of "
             f"{b['grad']:g} B/param over {dp_group} data-parallel ranks behind the last backward, last bucket exposed"
             + ("; updated weights all-gathered behind the next forward" if int(lay.zero[0]) in (1, 2) else ""),
             "engine.physics.steptime step_time (_data_parallel)", f"{ZERO}; {NCCL}"),
        Term(sec_p, "slots", slots, "chunk-slots",
             f"v*max(m, p) + min(m, p) - 1 = {v}*max({m}, {p}) + min({m}, {p}) - 1",
             "engine.physics.schedule.pipeline_slots", NARAYANAN),
        Term(sec_p, "pipeline_bubble", bd["pipeline_bubble"], "s",
             f"(slots - m*v) x average stage time per micro-batch / v = ({slots} - {m * v}) x {per_mb * 1e3:.3f} ms / {v}",
             st, NARAYANAN),
        Term(sec_p, "pipeline_imbalance", bd["pipeline_imbalance"], "s",
             f"m x (slowest stage - average stage) per micro-batch; stages: first, middle, last weighted 1/p, (p-2)/p, 1/p",
             st, "Megatron-LM uneven first/last stages"),
        Term(sec_p, "pp_comm", bd["pp_comm"], "s",
             f"slots {slots} x 2 point-to-point transfers of tokens x h / tp x {e:g} B = {tp_bytes / t / 2**20:.2f} MiB"
             if p > 1 else "0: no pipeline", "engine.physics.comm.send_recv_s", NARAYANAN),
        Term("Step time", "step_time_s", _g(ev["step_time_s"]), "s",
             "m x slowest stage + bubble + pipeline sends + exposed data-parallel + optimizer = "
             + " + ".join(f"{k} {bd[k]:.4g}" for k in BREAKDOWN), st, "-"),
    ]
    return out


def _flops_terms(ctx, ev: dict) -> list[Term]:
    tr, hw = ctx.scenario.training, ctx.hw
    sec, fn = "FLOPs and utilisation", "engine.physics.flops.flops_per_token"
    est = {k: _g(ev[k]) for k in ("tokens_per_s", "step_time_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu",
                                  "mfu", "hfu")}
    tps = est["tokens_per_s"]
    n = ctx.n_gpus
    per_token = est["model_tflops_per_gpu"] * 1e12 * n / tps
    hw_per_token = est["hardware_tflops_per_gpu"] * 1e12 * n / tps
    return [
        Term(sec, "tokens_per_s", tps, "tokens/s",
             f"global batch {tr.global_batch_size} x seq {tr.seq_len} / step {est['step_time_s']:.4g} s",
             "engine.planning.evaluation.timing", "-"),
        Term(sec, "model_flops_per_token", per_token, "FLOP",
             "3 x forward (2 FLOPs per weight in every matmul, logits included, causal attention over the keys each query "
             "attends to)", fn, "Kaplan et al. 2020 (backward = 2 x forward); current Megatron-LM num_floating_point_operations"),
        Term(sec, "model_tflops_per_gpu", est["model_tflops_per_gpu"], "TFLOP/s",
             f"{per_token:.4g} FLOP/token x {tps:.4g} tokens/s / {n} GPUs", "engine.planning.evaluation.timing", "-"),
        Term(sec, "mfu", est["mfu"], "",
             f"{est['model_tflops_per_gpu']:.1f} / {hw.peak_flops / 1e12:.0f} TFLOP/s dense {tr.precision} peak",
             "engine.planning.evaluation.timing", "Chowdhery et al. 2022 (PaLM) appendix B; vendor datasheet peak (data/accelerators.json)"),
        Term(sec, "hfu", est["hfu"], "",
             f"({hw_per_token:.4g} FLOP/token incl. recomputed forward) x tokens/s / GPUs / peak",
             "engine.planning.evaluation.timing", KORTHIKANTI),
    ]


def _run_terms(ctx, ev: dict) -> list[Term]:
    tr = ctx.scenario.training
    n = ctx.n_gpus
    value = lambda k: _g(ev[k]) if np.isfinite(_g(ev[k])) else None
    est = {"train_days": _g(ev["train_s"]) / 86400, "gpu_hours": _g(ev["gpu_hours"]), "tokens_per_s": _g(ev["tokens_per_s"]),
           "wall_days": None if value("wall_s") is None else value("wall_s") / 86400, "goodput": _g(ev["goodput"]),
           "cost_usd": value("cost_usd"), "energy_mwh": value("energy_mwh"), "co2_t": value("co2_t")}
    billed = float(cost.gpu_hours(n, _g(ev["wall_s"])))
    mwh = est["energy_mwh"]
    r = goodput.detail(ctx.reliability, _g(ev["train_s"]), _g(ev["wall_s"]))
    c = cost.detail(ctx.price, ctx.scenario.cluster.accelerator, billed)
    en = energy.detail(ctx.power, n, billed, None if mwh is None else mwh * 1000)
    wr = ctx.run.detail(_g(ev["steps_s"]), _g(ev["eval_s"]))
    sec_r, sec_g, sec_c, sec_e = "Whole run", "Goodput", "Cost", "Energy and CO2"
    out = [
        Term(sec_r, "train_days", est["train_days"], "days",
             f"steps {wr['steps_days']:.3f} d ({tr.total_tokens:.4g} tokens less phases / {est['tokens_per_s']:.4g} tokens/s) "
             f"+ phases {wr['phases_days']:.3f} d + evaluation {wr['evaluation_days']:.3f} d ({wr['evaluation']}, each "
             f"{_g(ev['forward_share']):.3f} of a training step: the forward pass's share of its FLOPs)",
             "engine.planning.evaluation.timing; engine.economics.whole_run; engine.physics.flops.flops_per_token",
             "Megatron-LM eval defaults; Kaplan et al. 2020 (forward = 1/3 when every weight trains)"),
        Term(sec_r, "gpu_hours", est["gpu_hours"], "GPU-h", f"{n} GPUs x {est['train_days'] * 24:.1f} h of compute",
             "engine.economics.cost.gpu_hours", "-"),
        Term(sec_g, "job_mtbf_hours", r["job_mtbf_hours"], "h",
             f"MTBF per GPU {r['mtbf_gpu_hours']:.4g} GPU-h / {n} GPUs ({r['mtbf_source']})", "engine.economics.goodput.job_mtbf_s",
             "NIST/SEMATECH e-Handbook sec. 8.1.8.2 series model"),
        Term(sec_g, "checkpoint_write_s", r["checkpoint_write_s"], "s",
             f"{r['checkpoint_gib']:.1f} GiB ({r['checkpoint_contents']}) / {r['storage_write_gb_per_s']:.4g} GB/s "
             f"({r['storage_source']})", "engine.economics.goodput.checkpoint_bytes", r["checkpoint_write_source"]),
        Term(sec_g, "checkpoint_interval_s", r["checkpoint_interval_s"], "s",
             f"sqrt(2 x {r['checkpoint_write_s']:.4g} s x {r['job_mtbf_hours'] * 3600:.4g} s)"
             if r["checkpoint_interval_source"].startswith("Young") else "given", "engine.economics.goodput.young_interval_s",
             r["checkpoint_interval_source"]),
        Term(sec_g, "wall_days", est["wall_days"], "days",
             "compute x (1 + write / interval) / (1 - (restart + (interval + write) / 2) / job MTBF), restart "
             f"{r['restart_s']:.0f} s ({r['restart_source']})" + (f"; {r['problem']}" if r["problem"] else ""),
             "engine.economics.goodput.wall_time_s", "Young 1974 (Commun. ACM 17(9), doi:10.1145/361147.361115)"),
        Term(sec_g, "goodput", est["goodput"], "", f"compute {r['compute_days']:.3f} d / wall "
             + (f"{r['wall_days']:.3f} d" if r["wall_days"] is not None else "never finishes"),
             "engine.economics.goodput.run_time", "-"),
        Term(sec_c, "cost_usd", est["cost_usd"], "USD",
             f"{c['billed_gpu_hours'] or 0:,.0f} billed GPU-hours (wall time) x "
             + (f"{c['usd_per_gpu_hour']:.4g} USD/GPU-h ({c['price_source']})" if c["usd_per_gpu_hour"] is not None
                else f"no price: {c['missing']}"), "engine.economics.cost.cost_usd", "data/prices.json rows (provider price pages)"),
    ]
    node_w = en["node_power_w_per_gpu"]
    out += [
        Term(sec_e, "energy_mwh", est["energy_mwh"], "MWh",
             (f"{en['gpu_hours'] or 0:,.0f} GPU-h x ({en['accelerator_power_w']:.0f} W accelerator: "
              f"{en['accelerator_power_source']} + {en['host_power_w_per_gpu']:.0f} W host: {en['host_power_source']}) "
              f"x PUE {en['pue']:g} ({en['pue_source']})") if node_w is not None else f"no power figure: {en['missing']}",
             "engine.economics.energy.energy_kwh", "data/energy_defaults.json sources"),
        Term(sec_e, "co2_t", est["co2_t"], "t CO2e",
             f"energy x {en['grid']['g_co2e_per_kwh']:g} g/kWh ({en['grid']['where']}, {en['grid']['source']}); "
             f"location-based", "engine.economics.energy.co2_kg", "data/carbon (codecarbon, Ember, eGRID)"),
    ]
    return out


LORA = "Hu et al. 2021, LoRA (arXiv 2106.09685) sec. 4"
QLORA = "Dettmers et al. 2023, QLoRA (arXiv 2305.14314) sec. 3"
FROZEN_LOW_PRECISION = "data/frameworks.json fp8.frozen_base_source (NVIDIA's MLPerf LoRA config: fp8_params)"
OFFLOAD = ("Ren et al. 2021, ZeRO-Offload (arXiv 2101.06840) sec. 4 and Table 3; Rajbhandari et al. 2021, ZeRO-Infinity "
           "(arXiv 2104.07857); data/offload.json")


def _finetune_terms(ctx, lay: Layouts, ev: dict) -> list[Term]:
    """The job's method, what trains and what is frozen, what offloading keeps in CPU memory and what it costs."""
    tr, shape = ctx.scenario.training, ctx.shape
    sec, fn = "Fine-tuning and offload", "engine.physics.finetune"
    b = bytes_per_element(tr)
    trainable, frozen = finetune.trainable_total(shape, tr), finetune.frozen_total(shape, tr)
    t = finetune.targets(shape, tr)
    names = sorted({name for name, _, _ in t.dense + t.moe + t.expert})
    adapters = (f"lora_rank {tr.lora_rank} x (d_in + d_out) on {tr.lora_targets} matrices ({', '.join(names)}) of every "
                f"layer = {finetune.adapters(shape, tr)['dense']:,.0f} per dense layer"
                + (f", {finetune.adapters(shape, tr)['moe']:,.0f} + {shape.n_experts} experts x "
                   f"{finetune.adapters(shape, tr)['expert']:,.0f} per MoE layer" if shape.n_moe_layers else ""))
    off = OFFLOAD_NAMES[int(lay.off[0])]
    host = finetune.host(ctx.hw.accelerator)
    frozen_low = finetune.frozen_in_low_precision(tr, ctx.hw.frozen_weight_bytes)
    out = [
        Term(sec, "tokens_trained", tr.trained_tokens, "tokens",
             f"total_tokens {tr.total_tokens:.4g} x epochs {tr.epochs:g} (method {tr.method})",
             "engine.scenario.Training.trained_tokens", "-"),
        Term(sec, "trainable_params", trainable, "params",
             adapters if tr.adapters else f"every parameter ({tr.method}): {shape.total_params():,}", fn + ".trainable_total",
             LORA if tr.adapters else ZERO),
        Term(sec, "frozen_params", frozen, "params",
             ("the base, without gradients or optimizer states; stored at "
              + (f"{finetune.NF4_BYTES:.4f} B/param (NF4 4 bits + {finetune.DOUBLE_QUANT_BITS:.3f} bits of double-"
                 "quantized constants) in its linear layers, 16-bit elsewhere" if tr.method == "qlora" else
                 f"{ctx.hw.frozen_weight_bytes:g} B/param in its linear layers, in the {tr.precision} format only "
                 f"(the {ctx.hw.framework} recipe's fp8_params), {b['weight']:g} B/param elsewhere"
                 if frozen_low else f"{b['weight']:g} B/param"))
             if tr.adapters else "0: every weight trains",
             fn + ".base_weight_bytes", QLORA if tr.method == "qlora" else
             LORA + ("; " + FROZEN_LOW_PRECISION if frozen_low else "")),
        Term(sec, "host_offloaded", _g(ev["mem_host_offloaded"]) / 1e9, "GB",
             (f"offload {off}: gradient partition + optimizer states" + (" + 16-bit weights" if off == "optimizer_and_params" else "")
              + " of this GPU's ZeRO shard in CPU memory" if off != "none" else "0: nothing offloaded")
             + f"; {host_memory_bytes(ctx.scenario) / 1e9:.0f} GB per GPU available"
             + (f" (incl. {_g(ev['mem_paged']) / 1e9:.3f} GB of QLoRA's paged optimizer states)" if _g(ev["mem_paged"]) else ""),
             "engine.physics.memory.memory_breakdown; engine.planning.evaluation.memory", OFFLOAD),
        Term(sec, "offload", _g(ev["offload"]), "s",
             (f"gradients down behind the backward + CPU-Adam at {host['cpu_adam_params_per_s'] / 1e9:.3g}e9 params/s "
              f"+ updated weights up, over the host link at {host['link_bytes_per_s'] / 1e9:.1f} GB/s achievable"
              + ("; each layer's weights fetched for forward and backward behind its compute" if off == "optimizer_and_params" else "")
              if off != "none" else "0: nothing offloaded")
             + ("; QLoRA's paged optimizer states in and out once a step" if _g(ev["mem_paged"]) else ""),
             "engine.physics.finetune_time.offload_step_s, paged_optimizer_s", OFFLOAD),
    ]
    return out


def explain(sc: Scenario) -> list[Term]:
    """Every term of the estimate of a scenario with a layout, in report order."""
    if sc.layout is None:
        raise ScenarioError([("layout", "a layout is needed to explain an estimate; run the layout search to find one")])
    ctx = context(sc)
    lay = Layouts.of([sc.layout])
    ev = evaluate(ctx, lay)
    return (_memory_terms(ctx, lay, ev) + _time_terms(ctx, lay, ev) + _flops_terms(ctx, ev)
            + _finetune_terms(ctx, lay, ev) + _run_terms(ctx, ev) + _range_terms(ctx, lay, ev))


def _range_terms(ctx, lay: Layouts, ev: dict) -> list[Term]:
    """The step time's range from its regime's measured band (every time-proportional range uses the same band)."""
    rb = time_band(ctx, lay.layout(0))
    step = _g(ev["step_time_s"])
    how = f"{'measured' if rb.measured else 'not measured'}: {rb.text}"
    return [Term("Range", f"step_time_{end}_s", step * factor, "s", f"{step:.4g} s x {factor:.3f} ({how})",
                 "engine.economics.ranges.band_from",
                 "data/accuracy.json (scripts/calibrate_ranges.py): published/predicted time of the regime's runs, "
                 "10th-90th conformal quantile, jackknife+ over sources")
            for end, factor in (("low", rb.low), ("high", rb.high))]


def explain_text(sc: Scenario) -> str:
    """The terms as a plain-text report: one line per term with its value, then how and where from."""
    lines, section = [], None
    for t in explain(sc):
        if t.section != section:
            section = t.section
            lines += ["", section, "-" * len(section)]
        if t.value is None:
            value = "n/a" if t.unit else ""
        else:
            value = f"{t.value:.6g} {t.unit}".rstrip() if np.isfinite(t.value) else "n/a (never finishes)"
        lines.append(f"{t.name:<22} {value}")
        lines.append(f"{'':<22} = {t.formula}")
        lines.append(f"{'':<22}   [{t.function}; {t.source}]")
    return "\n".join(lines).lstrip("\n") + "\n"
