"""What would make a job fit that fits nowhere on its cluster: adapters instead of every weight (LoRA, QLoRA), a host
with room for the offloaded states, or more GPUs, each searched like the job itself (engine.planning.search.best_at,
cached) and returned with its figures as engine.planning.results.FitOption."""
from __future__ import annotations

import math

from engine.planning.evaluation import host_memory_bytes
from engine.planning.results import Estimate, FitOption
from engine.planning.search import best_at
from engine.planning.sizing import nearest_sizes
from engine.scenario import Scenario

# what a host could hold at most for the offload option: the schema's limit on cluster.host_memory_gb_per_gpu
UNLIMITED_HOST_GB = 100_000
QLORA_PRECISIONS = ("bf16", "fp16", "fp32")    # QLoRA's compute types (engine.scenario.training_problems)


def _option(option: str, best: Estimate | None, text: str, failed: str, changes: dict) -> FitOption:
    if best is None:
        return FitOption(option=option, fits=False, text=failed)
    ft = best.fine_tuning or {}
    return FitOption(option=option, fits=True, text=text, changes=changes, n_gpus=best.n_gpus, layout=best.layout,
                     memory_gib=best.memory_gib.total, host_memory_gb_per_gpu=ft.get("host_offloaded_gb_per_gpu"),
                     step_time_s=best.step_time_s, wall_days=best.wall_days, gpu_hours=best.gpu_hours,
                     cost_usd=best.cost_usd)


def _with(sc: Scenario, training: dict | None = None, cluster: dict | None = None) -> Scenario:
    return sc.model_copy(update={"training": sc.training.model_copy(update=training or {}),
                                 "cluster": sc.cluster.model_copy(update=cluster or {}), "layout": None})


def fitting_alternatives(sc: Scenario) -> list[FitOption]:
    """For a job with no layout that fits on its cluster: LoRA and QLoRA adapters (for a fine-tune that trains
    every weight; a pre-training run from random weights has no base to adapt; QLoRA in bf16 where the precision is
    not one of its compute types), offloading to a host with more memory (the CPU memory per GPU it would need), and
    the nearest larger cluster that fits the job as it is. Each option names the fields it changes. An empty list
    where the job fits already."""
    n, tr = sc.cluster.n_gpus, sc.training
    if best_at(sc, n) is not None:
        return []
    out = []
    if tr.method == "full":
        out.append(_option("lora", best_at(_with(sc, {"method": "lora"}), n),
                           f"train LoRA adapters (rank {tr.lora_rank}, {tr.lora_targets}) on the frozen 16-bit model",
                           "LoRA does not fit either: the frozen 16-bit weights alone are too large",
                           {"training.method": "lora"}))
    if tr.method in ("full", "lora"):
        precision = tr.precision if tr.precision in QLORA_PRECISIONS else "bf16"
        out.append(_option("qlora", best_at(_with(sc, {"method": "qlora", "precision": precision}), n),
                           f"train QLoRA adapters on the model stored in 4-bit NF4 ({precision} compute)",
                           "QLoRA does not fit either: even the 4-bit weights and activations are too large",
                           {"training.method": "qlora", "training.precision": precision}))
    have = host_memory_bytes(sc) / 1e9
    best = best_at(_with(sc, cluster={"host_memory_gb_per_gpu": UNLIMITED_HOST_GB}), n)
    need = (best.fine_tuning or {}).get("host_offloaded_gb_per_gpu") if best else None
    out.append(_option("offload", best,
                       f"offload to CPU memory: {need:,.0f} GB per GPU needed, {have:,.0f} GB available "
                       "(cluster.host_memory_gb_per_gpu)" if best else "",
                       "offloading does not fit either: what stays on the GPU (activations, gathered layers) is too large",
                       {"cluster.host_memory_gb_per_gpu": math.ceil(need)} if need else {}))
    larger = [s for s in nearest_sizes(sc, n, how_many=4) if s["n_gpus"] > n][:1]
    more = best_at(sc, larger[0]["n_gpus"]) if larger else None
    out.append(_option("more_gpus", more, f"{larger[0]['n_gpus']:,} GPUs ({larger[0]['nodes']} node{'s' if larger[0]['nodes'] != 1 else ''}) fit the "
                       "job as it is"
                       if larger else "", "no larger cluster near this one fits the job",
                       {"cluster.n_gpus": larger[0]["n_gpus"]} if larger else {}))
    return out
