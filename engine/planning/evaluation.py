"""Memory, step time, throughput and the whole run's figures of many layouts at once, as arrays (`evaluate`), and one
layout's Estimate (`row`). The search ranks on these arrays and the single estimate reads its row from them, so the two
agree exactly. A Context is everything but the layout; its whole-run phases come searched from
engine.planning.search.context."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np

from engine.catalog import load_catalog
from engine.economics import cost, energy, goodput, ranges, whole_run
from engine.frameworks import precision_class
from engine.physics.flops import CONVENTIONS, flops_per_token
from engine.physics.hardware import GIB, Hardware, resolve_hardware
from engine.physics.layouts import Layouts
from engine.physics import finetune, finetune_time
from engine.physics.memory import (FRAGMENTATION, allocator_reserve_fraction, headroom_fraction, memory_breakdown,
                                   staged_params)
from engine.physics.model import Shape, shape_of
from engine.planning.results import Estimate
from engine.scenario import Layout, Scenario
from engine.physics.steptime import step_time

STAGES = ("first", "middle", "last")
MEMORY_SUMMARY = ("weights", "gradients", "optimizer_states", "activations")
MEMORY_OTHER = ("logits", "comm_buffers", "framework_overhead")
MEMORY_RESERVED = "reserved_peak"   # beside the terms: torch.cuda.max_memory_reserved at the peak (not in the total)


@dataclass(frozen=True)
class Context:
    """Everything about a scenario except its layout, resolved once."""

    scenario: Scenario
    shape: Shape
    hw: Hardware
    reliability: goodput.Reliability
    power: energy.Power
    price: cost.Price
    run: whole_run.WholeRun

    @property
    def n_gpus(self) -> int:
        return self.scenario.cluster.n_gpus


def context(sc: Scenario, phases: tuple[whole_run.PhaseRun, ...] = ()) -> Context:
    """The scenario resolved, with its whole-run phases as already trained (none: a phase's own scenario)."""
    shape = shape_of(sc.arch)
    power = energy.resolve(sc)
    return Context(scenario=sc, shape=shape, hw=resolve_hardware(sc), reliability=goodput.resolve(sc, shape),
                   power=power, price=cost.resolve(sc, power), run=whole_run.resolve(sc, phases))


def host_memory_bytes(sc: Scenario) -> float:
    """CPU memory per GPU that offloaded states may use: cluster.host_memory_gb_per_gpu, else the catalog's
    reference server (data/accelerators.json host_memory_gb_per_gpu)."""
    gb = sc.cluster.host_memory_gb_per_gpu
    if gb is None:
        gb = load_catalog().accelerator(sc.cluster.accelerator).host_memory_gb_per_gpu
    return gb * 1e9


def memory(ctx: Context, lay: Layouts) -> dict[str, np.ndarray]:
    """Memory per GPU of every layout (its worst pipeline stage) and whether it fits; `staged` for the time model."""
    tr = ctx.scenario.training
    staged = staged_params(ctx.shape, lay, lay.micro_batches(tr.global_batch_size))
    mem = memory_breakdown(ctx.shape, tr, lay, staged, ctx.hw.weight_copy_bytes, ctx.hw.framework,
                           ctx.hw.frozen_weight_bytes)
    for s in STAGES:                     # QLoRA's paged optimizer states go to host memory where the GPU is short
        m = mem[s]
        if tr.method != "qlora":
            m["paged"] = 0.0 * m["total"]
            continue
        paged = finetune.paged_optimizer_bytes(tr, m["total"], m["optimizer_states"], ctx.hw.memory_bytes, FRAGMENTATION)
        m["optimizer_states"] = m["optimizer_states"] - paged
        m["framework_overhead"] = m["framework_overhead"] - FRAGMENTATION * paged
        m["total"] = m["total"] - (1 + FRAGMENTATION) * paged
        m["reserved_peak"] = m["reserved_peak"] - (1 + allocator_reserve_fraction()) * paged
        m["host_offloaded"] = m["host_offloaded"] + paged
        m["paged"] = paged
    totals = np.stack([mem[s]["total"] for s in STAGES])
    worst = np.argmax(totals, axis=0)
    # the fullest stage's figure of each key (np.choose's result, gathered from the stacked stages: twice as fast)
    pick = lambda key: np.take_along_axis(np.stack(np.broadcast_arrays(*[mem[s][key] for s in STAGES], worst)[:-1]),
                                          worst[None], 0)[0]
    out = {f"mem_{k}": pick(k) for k in mem["first"]}
    out["worst_stage"] = worst
    # offloaded states must fit in the host's memory too (the fullest stage's share of it)
    out["mem_host_offloaded"] = np.max(np.stack([mem[s]["host_offloaded"] for s in STAGES]), axis=0)
    out["fits_gpu"] = out["mem_total"] <= ctx.hw.memory_bytes
    out["fits_host"] = out["mem_host_offloaded"] <= host_memory_bytes(ctx.scenario)
    out["fits"] = out["fits_gpu"] & out["fits_host"]
    # what the search recommends: fits with the headroom kept free (a user's own layout is estimated either way)
    out["fits_with_headroom"] = out["fits_host"] & (
        out["mem_total"] <= (1 - headroom_fraction(ctx.scenario.training)) * ctx.hw.memory_bytes)
    out["staged"] = staged
    return out


def timing(ctx: Context, lay: Layouts, staged, paged: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Step time, throughput, FLOP rates, the whole run's time, cost, energy and CO2 of every layout (paged: the
    bytes of QLoRA's paged optimizer states in host memory, memory()'s mem_paged)."""
    tr = ctx.scenario.training
    out = dict(step_time(ctx.shape, tr, ctx.hw, lay, ctx.n_gpus, staged))
    if paged is not None:
        paging = finetune_time.paged_optimizer_s(paged, ctx.hw)
        out["offload"] = out["offload"] + paging
        out["step_time_s"] = out["step_time_s"] + paging
    flops = flops_per_token(ctx.shape, tr, lay)
    tokens_per_s = tr.global_batch_size * tr.seq_len / out["step_time_s"]
    out["tokens_per_s"] = tokens_per_s
    per_gpu = lambda key: flops[key] * tokens_per_s / ctx.n_gpus / 1e12
    out["model_tflops_per_gpu"] = per_gpu("model_causal")
    out["hardware_tflops_per_gpu"] = per_gpu("hardware_causal")
    out["model_tflops_per_gpu_full_square"] = per_gpu("model_full_square")
    out["hardware_tflops_per_gpu_full_square"] = per_gpu("hardware_full_square")
    out["mfu"] = out["model_tflops_per_gpu"] * 1e12 / ctx.hw.peak_flops
    out["hfu"] = out["hardware_tflops_per_gpu"] * 1e12 / ctx.hw.peak_flops
    out["mfu_full_square"] = out["model_tflops_per_gpu_full_square"] * 1e12 / ctx.hw.peak_flops
    # the whole run: the main setup's steps, the phases at other sequences or batches, periodic evaluation
    out["steps_s"] = (tr.trained_tokens - ctx.run.phase_tokens) / tokens_per_s     # dataset x epochs
    # an evaluation step is a forward pass: its share of a training step's work (1/3 when every weight trains and
    # nothing is recomputed, Kaplan et al. 2020; about 1/2 with a frozen base, whose weights get no gradients)
    out["forward_share"] = flops["forward_causal"] / flops["hardware_causal"]
    out["eval_s"] = (out["steps_s"] + ctx.run.phase_s) * out["forward_share"] * ctx.run.eval_steps_per_step
    out["train_s"] = out["steps_s"] + ctx.run.phase_s + out["eval_s"]
    out["gpu_hours"] = cost.gpu_hours(ctx.n_gpus, out["train_s"])
    out.update(run_figures(ctx, out["train_s"]))
    return out


def evaluate(ctx: Context, lay: Layouts, timed: np.ndarray | None = None, mem: dict | None = None) -> dict[str, np.ndarray]:
    """All estimate figures for every layout in `lay` (arrays of len(lay)). With `timed` (a boolean mask), the time
    model runs only for those layouts and the others carry NaN time figures (the search times only what fits)."""
    out = dict(memory(ctx, lay) if mem is None else mem)
    staged = out.pop("staged")
    if timed is None:
        out.update(timing(ctx, lay, staged, out["mem_paged"]))
        return out
    idx = np.flatnonzero(timed)
    part = timing(ctx, lay.take(idx), {k: _take_stage(v, idx) for k, v in staged.items()},
                  out["mem_paged"][idx]) if len(idx) else {}
    for key, values in part.items():
        full = np.full(len(lay), np.nan)
        full[idx] = values
        out[key] = full
    return out


def _take_stage(sp, idx):
    st = sp.stage
    stage = replace(st, **{f.name: np.asarray(getattr(st, f.name))[idx] for f in fields(st)})
    return type(sp)(stage, np.asarray(sp.non_expert)[idx], np.asarray(sp.expert)[idx])


def run_figures(ctx: Context, train_s: np.ndarray) -> dict[str, np.ndarray]:
    """What the run costs on a real cluster: wall time with failures and checkpoints, goodput, money, energy and
    location-based CO2 (NaN where no price or no power figure is known)."""
    out = goodput.run_time(ctx.reliability, train_s)
    billed = cost.gpu_hours(ctx.n_gpus, out["wall_s"])
    nan_if_none = lambda x: np.nan if x is None else x
    kwh = energy.energy_kwh(billed, nan_if_none(ctx.power.node_w_per_gpu), ctx.power.pue)
    out["cost_usd"] = cost.cost_usd(billed, nan_if_none(ctx.price.usd_per_gpu_hour))
    out["energy_mwh"] = kwh / 1000.0
    out["co2_t"] = energy.co2_kg(kwh, ctx.power.grid.g_per_kwh) / 1000.0
    return out


BREAKDOWN = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "zero3_comm", "pp_comm",
             "pipeline_bubble", "pipeline_imbalance", "dp_comm", "optimizer", "offload")


def row(ctx: Context, ev: dict[str, np.ndarray], lay: Layouts, i: int, **more) -> Estimate:
    """The estimate of layout i (with `more` fields: an estimate's nearest_fit and assumptions). A layout that does not
    fit has no days, GPU-hours, cost, energy or CO2 (None) and says why in `problem`; so does a run that never finishes
    (failures outpace recovery: wall_days None)."""
    return Estimate.model_validate({**_row_data(ctx, ev, lay, i), **more})


def time_band(ctx: Context, layout: Layout) -> ranges.RegimeBand:
    """The measured band of the engine's time for a layout's regime (engine.economics.ranges): the scenario's training
    method, stack, accelerator, precision and model, the layout's data-parallel sharding and size."""
    sc = ctx.scenario
    method = getattr(sc.training, "method", "pretrain")     # training.method arrives with the fine-tuning physics
    regime = ranges.regime_of(method, ctx.hw.framework, sc.cluster.accelerator, precision_class(sc.training.precision),
                              sc.arch.is_moe, layout.zero_stage, layout.n_gpus)
    return ranges.regime_band(regime, ctx.hw.calibrated)


def _row_data(ctx: Context, ev: dict[str, np.ndarray], lay: Layouts, i: int) -> dict:
    """The estimate of layout i as the plain data Estimate is validated from, keys in their printed order."""
    g = lambda k: float(ev[k][i])
    fits = bool(ev["fits"][i])
    gib = lambda k: round(g(f"mem_{k}") / GIB, 3)
    other = sum(g(f"mem_{k}") for k in MEMORY_OTHER) / GIB
    tr = ctx.scenario.training
    m = int(lay.micro_batches(tr.global_batch_size)[i])
    layout = lay.layout(i)
    band = time_band(ctx, layout)
    return {
        "layout": layout.model_dump(),
        "memory_gib": {**{k: gib(k) for k in MEMORY_SUMMARY}, "other": round(other, 3), "total": gib("total")},
        "memory_detail_gib": {**{k: gib(k) for k in MEMORY_OTHER}, MEMORY_RESERVED: gib(MEMORY_RESERVED)},
        "memory_capacity_gib": round(ctx.hw.memory_bytes / GIB, 3),
        "worst_stage": STAGES[int(ev["worst_stage"][i])] if int(lay.pp[i]) > 1 else "only",
        "fits": fits,
        "micro_batches_per_step": m,
        "step_time_s": g("step_time_s"),
        "step_time_range_s": {"low": g("step_time_s") * band.low, "high": g("step_time_s") * band.high},
        "tokens_per_s": g("tokens_per_s"),
        "model_tflops_per_gpu": g("model_tflops_per_gpu"),
        "hardware_tflops_per_gpu": g("hardware_tflops_per_gpu"),
        "mfu": g("mfu"),
        "hfu": g("hfu"),
        "model_tflops_per_gpu_full_square": g("model_tflops_per_gpu_full_square"),
        "hardware_tflops_per_gpu_full_square": g("hardware_tflops_per_gpu_full_square"),
        "mfu_full_square": g("mfu_full_square"),
        "flop_convention": {"mfu": CONVENTIONS["causal"], "mfu_full_square": CONVENTIONS["full_square"],
                            "hfu": "causal model FLOPs plus the recomputed forward work, over the dense peak"},
        "time_breakdown_s": {k: g(k) for k in BREAKDOWN},
        "params_total": ctx.shape.total_params(),
        "params_active": ctx.shape.active_params(),
        "train_days": g("train_s") / 86400 if fits else None,
        "whole_run": ctx.run.detail(g("steps_s"), g("eval_s")) if fits else ctx.run.detail(None, None),
        "gpu_hours": g("gpu_hours") if fits else None,
        **run_row(ctx, ev, i),
        "framework": ctx.hw.framework_detail,
        "time_range": band,
        "fine_tuning": fine_tuning_row(ctx, ev, lay, i),
    }


def fine_tuning_row(ctx: Context, ev: dict[str, np.ndarray], lay: Layouts, i: int) -> dict:
    """The job's method and what trains, the tokens it trains on, and what offload keeps in CPU memory."""
    tr, shape = ctx.scenario.training, ctx.shape
    return {"method": tr.method, "trainable_params": finetune.trainable_total(shape, tr),
            "frozen_params": finetune.frozen_total(shape, tr),
            **({"lora_rank": tr.lora_rank, "lora_targets": tr.lora_targets} if tr.adapters else {}),
            "tokens_trained": tr.trained_tokens, "epochs": tr.epochs,
            "offload": lay.layout(i).offload,
            "host_offloaded_gb_per_gpu": float(ev["mem_host_offloaded"][i]) / 1e9,
            "host_memory_gb_per_gpu": host_memory_bytes(ctx.scenario) / 1e9,
            "paged_optimizer_gb": float(ev["mem_paged"][i]) / 1e9}


def misfit(ctx: Context, ev: dict[str, np.ndarray], i: int) -> str:
    """Why layout i does not fit: the accelerator's memory, or the host memory its offloaded states need."""
    if not bool(ev["fits_gpu"][i]):
        return (f"does not fit: {float(ev['mem_total'][i]) / GIB:.1f} GiB per GPU on its fullest pipeline stage, "
                f"{ctx.hw.memory_bytes / GIB:.1f} GiB available")
    sc = ctx.scenario
    where = ("cluster.host_memory_gb_per_gpu" if sc.cluster.host_memory_gb_per_gpu is not None else
             f"host_memory_gb_per_gpu of {sc.cluster.accelerator} in data/accelerators.json; set "
             "cluster.host_memory_gb_per_gpu for your servers")
    return (f"does not fit in host memory: layout.offload={sc.layout.offload if sc.layout else 'searched'} keeps "
            f"{float(ev['mem_host_offloaded'][i]) / 1e9:.1f} GB per GPU in CPU memory, "
            f"{host_memory_bytes(sc) / 1e9:.1f} GB available ({where})")


def run_row(ctx: Context, ev: dict[str, np.ndarray], i: int) -> dict:
    """Wall time, goodput, cost, energy and CO2 of layout i, with the inputs and sources behind them (None: not known,
    the layout does not fit, or the run never finishes), and the problem that leaves them out."""
    fits = bool(ev["fits"][i])
    wall_s = float(ev["wall_s"][i]) if fits else math.nan
    finishes = bool(np.isfinite(wall_s))
    value = lambda k: float(ev[k][i]) if finishes and np.isfinite(ev[k][i]) else None
    billed = float(cost.gpu_hours(ctx.n_gpus, wall_s))
    mwh = value("energy_mwh")
    reliability = goodput.detail(ctx.reliability, float(ev["train_s"][i]) if fits else None, wall_s)
    return {
        "wall_days": wall_s / 86400 if finishes else None,
        "goodput": float(ev["goodput"][i]) if fits else None,
        "cost_usd": value("cost_usd"),
        "energy_mwh": value("energy_mwh"),
        "co2_t": value("co2_t"),
        "problem": None if finishes else reliability["problem"] if fits else misfit(ctx, ev, i),
        "reliability": reliability,
        "cost": cost.detail(ctx.price, ctx.scenario.cluster.accelerator, billed),
        "energy": energy.detail(ctx.power, ctx.n_gpus, billed, None if mwh is None else mwh * 1000),
    }
