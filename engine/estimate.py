"""Memory, step time and throughput of layouts: `evaluate` works on arrays (the search), `estimate` on one scenario."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.compute import flops_per_token
from engine.hardware import GIB, Hardware, resolve_hardware
from engine.layouts import Layouts
from engine.memory import memory_breakdown, staged_params
from engine.model import Shape, shape_of
from engine.scenario import Scenario, ScenarioError
from engine.steptime import step_time

STAGES = ("first", "middle", "last")
MEMORY_SUMMARY = ("weights", "gradients", "optimizer_states", "activations")
MEMORY_OTHER = ("logits", "comm_buffers", "framework_overhead")


@dataclass(frozen=True)
class Context:
    """Everything about a scenario except its layout, resolved once."""

    scenario: Scenario
    shape: Shape
    hw: Hardware

    @property
    def n_gpus(self) -> int:
        return self.scenario.cluster.n_gpus


def context(sc: Scenario) -> Context:
    return Context(scenario=sc, shape=shape_of(sc.arch), hw=resolve_hardware(sc))


def evaluate(ctx: Context, lay: Layouts) -> dict[str, np.ndarray]:
    """All estimate figures for every layout in `lay` (arrays of len(lay))."""
    tr = ctx.scenario.training
    staged = staged_params(ctx.shape, lay, lay.micro_batches(tr.global_batch_size))
    mem = memory_breakdown(ctx.shape, tr, ctx.hw, lay, staged)
    totals = np.stack([mem[s]["total"] for s in STAGES])
    worst = np.argmax(totals, axis=0)
    pick = lambda key: np.choose(worst, [mem[s][key] for s in STAGES])
    out = {f"mem_{k}": pick(k) for k in mem["first"]}
    out["worst_stage"] = worst
    out["fits"] = out["mem_total"] <= ctx.hw.memory_bytes
    st = step_time(ctx.shape, tr, ctx.hw, lay, ctx.n_gpus, staged)
    out.update(st)
    model_tok, hw_tok = flops_per_token(ctx.shape, tr, lay)
    tokens_per_s = tr.global_batch_size * tr.seq_len / st["step_time_s"]
    out["tokens_per_s"] = tokens_per_s
    out["model_tflops_per_gpu"] = model_tok * tokens_per_s / ctx.n_gpus / 1e12
    out["hardware_tflops_per_gpu"] = hw_tok * tokens_per_s / ctx.n_gpus / 1e12
    out["mfu"] = out["model_tflops_per_gpu"] * 1e12 / ctx.hw.peak_flops
    out["hfu"] = out["hardware_tflops_per_gpu"] * 1e12 / ctx.hw.peak_flops
    out["train_s"] = tr.total_tokens / tokens_per_s
    out["gpu_hours"] = ctx.n_gpus * out["train_s"] / 3600
    return out


BREAKDOWN = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero3_comm", "pp_comm",
             "pipeline_bubble", "pipeline_imbalance", "dp_comm", "optimizer")


def row(ctx: Context, ev: dict[str, np.ndarray], lay: Layouts, i: int) -> dict:
    """The JSON-ready estimate of layout i."""
    g = lambda k: float(ev[k][i])
    gib = lambda k: round(g(f"mem_{k}") / GIB, 3)
    other = sum(g(f"mem_{k}") for k in MEMORY_OTHER) / GIB
    tr = ctx.scenario.training
    m = int(lay.micro_batches(tr.global_batch_size)[i])
    return {
        "layout": lay.layout(i).model_dump(),
        "memory_gib": {**{k: gib(k) for k in MEMORY_SUMMARY}, "other": round(other, 3), "total": gib("total")},
        "memory_detail_gib": {k: gib(k) for k in MEMORY_OTHER},
        "memory_capacity_gib": round(ctx.hw.memory_bytes / GIB, 3),
        "worst_stage": STAGES[int(ev["worst_stage"][i])] if int(lay.pp[i]) > 1 else "only",
        "fits": bool(ev["fits"][i]),
        "micro_batches_per_step": m,
        "step_time_s": g("step_time_s"),
        "tokens_per_s": g("tokens_per_s"),
        "model_tflops_per_gpu": g("model_tflops_per_gpu"),
        "hardware_tflops_per_gpu": g("hardware_tflops_per_gpu"),
        "mfu": g("mfu"),
        "hfu": g("hfu"),
        "time_breakdown_s": {k: g(k) for k in BREAKDOWN},
        "train_days": g("train_s") / 86400,
        "gpu_hours": g("gpu_hours"),
    }


def estimate(sc: Scenario) -> dict:
    """Full estimate of a scenario with a layout."""
    if sc.layout is None:
        raise ScenarioError([("layout", "a layout is needed for an estimate; run the layout search to find one")])
    ctx = context(sc)
    lay = Layouts.of([sc.layout])
    out = row(ctx, evaluate(ctx, lay), lay, 0)
    out["assumptions"] = {**ctx.hw.provenance, "attention": sc.training.attention,
                          "gradients": "16-bit gradients and fp32 master weights + optimizer states (ZeRO paper convention)"}
    return out
