"""Engine results as table rows for people: memory and step time by component, the search's ranked and rejected
layouts, the vendor comparison, the Pareto front, and a scenario described line by line. Pure: no Streamlit."""
from __future__ import annotations

from engine.presentation.edit import describe_layout
from engine.presentation.formatting import accelerator_name, fmt_days, fmt_num, fmt_usd, model_name, model_size_text
from engine.physics.memory import bytes_per_element, gradient_text, headroom_fraction, optimizer_state_bytes
from engine.precision import precision
from engine.planning.results import Comparison, Estimate, FitOption, SearchResult
from engine.physics.schedule import stage_layers
from engine.scenario import Layout, Scenario, Training

MEMORY_PARTS = {  # Estimate.memory_gib field: label
    "weights": "Weights", "gradients": "Gradients", "optimizer_states": "Optimizer states",
    "activations": "Activations", "other": "Other",
}


def memory_part_text(training: Training) -> dict[str, str]:
    """What each memory component is, the model states in words generated from the byte counts in use."""
    b = bytes_per_element(training)
    states = " + ".join(f"{name} {n:g}" for name, n in optimizer_state_bytes(training).items())
    trained = "trainable parameter (the LoRA adapters only: the frozen base has none)" if training.adapters else \
        "parameter"
    base = "4-bit NF4 with its quantization constants" if training.method == "qlora" else "in 16 bits"
    weights = (f"the frozen base ({base}) and the LoRA adapters held by this GPU" if training.adapters else
               f"the model's parameters held by this GPU ({b['weight']:g} bytes each"
               + (f", plus their {training.precision} copy" if precision(training.precision).low_precision else "")
               + ")")
    return {
        "weights": weights + ", after TP/PP/EP and ZeRO-3 splitting",
        "gradients": f"one gradient per {trained} held: {gradient_text(training)}; all kept up to ZeRO-1 "
                     "(Megatron-LM's distributed optimizer), sharded by ZeRO-2 and -3",
        "optimizer_states": f"{states} = {b['optimizer']:g} bytes per {trained} ({training.optimizer}), sharded by "
                            "ZeRO-1 and up",
        "activations": "values kept from the forward pass for the backward pass, for every micro-batch in flight; cut "
                       "by recompute, TP with sequence parallelism, and CP",
        "other": "output logits, communication buffers and a framework/fragmentation allowance",
    }


BREAKDOWN = {  # Estimate.time_breakdown_s key: label, kind
    "compute": ("Compute", "compute"),
    "recompute": ("Recompute (activation checkpointing)", "compute"),
    "optimizer": ("Optimizer update", "compute"),
    "tp_comm": ("Tensor-parallel communication", "communication"),
    "cp_comm": ("Context-parallel communication", "communication"),
    "ep_comm": ("Expert-parallel all-to-all", "communication"),
    "zero3_comm": ("ZeRO-3 weight gathering", "communication"),
    "pp_comm": ("Pipeline sends", "communication"),
    "dp_comm": ("Data-parallel gradient reduction (exposed)", "communication"),
    "pipeline_bubble": ("Pipeline bubble", "pipeline idle"),
    "pipeline_imbalance": ("Pipeline stage imbalance", "pipeline idle"),
}
WORST_STAGE = {  # Estimate.worst_stage: what it means
    "first": "the first pipeline stage: it holds the token embedding and keeps the most micro-batches in flight",
    "middle": "a middle pipeline stage",
    "last": "the last pipeline stage: it holds the output layer and its logits",
    "only": "no pipeline: every accelerator holds the same share",
}
ALL_REGIONS = "all regions"    # a price row without a region: the provider publishes one price for every region
LAYOUT_COLUMNS = tuple(Layout.model_fields)   # every field that tells two layouts apart, so a row reproduces its own


def layout_cells(layout: Layout, n_layers: int) -> dict:
    """A layout as table cells, each field as the engine uses it (no blanks for defaults): the expert TP width (tp
    when unset), the data-parallel shard group (every dp x cp rank when unset) and the layers on the first and last
    pipeline stages (the even split when unset); each value given back as the field reproduces the same layout."""
    cells = layout.model_dump()
    first, _, last = stage_layers(n_layers, layout.pp, layout.virtual_stages, layout.first_stage_layers,
                                  layout.last_stage_layers)
    cells.update(expert_tp=layout.expert_tp or layout.tp, shard_group=layout.shard_group or layout.dp * layout.cp,
                 first_stage_layers=first, last_stage_layers=last)
    return cells



def price_rows(cost: dict) -> list[dict]:
    """Every published cloud price of an estimate's cost block (engine.economics.cost) as table rows; a price the
    provider publishes for all its regions says so instead of leaving the region blank."""
    return [{"provider": p["provider"], "pricing": p["pricing"], "region": p["region"] or ALL_REGIONS,
             "instance": p["instance"], "USD per GPU-hour": p["usd_per_gpu_hour"], "this run (USD)": p["cost_usd"],
             "as of": p["date"], "source": p["source"]} for p in cost["cloud_prices"]]


def memory_rows(est: Estimate, training: Training) -> list[dict]:
    """Per-GPU memory by component (worst pipeline stage) with its share of the accelerator's capacity."""
    cap = est.memory_capacity_gib
    what = memory_part_text(training)
    gib = lambda key: getattr(est.memory_gib, key)
    return [{"component": label, "GiB": gib(key), "share of capacity": gib(key) / cap,
             "what it is": what[key]} for key, label in MEMORY_PARTS.items()]


def breakdown_rows(est: Estimate) -> list[dict]:
    """Seconds per optimizer step by component and kind, with the share of the step."""
    step = est.step_time_s
    return [{"component": label, "kind": kind, "seconds per step": est.time_breakdown_s[key],
             "share of step": est.time_breakdown_s[key] / step if step else 0.0}
            for key, (label, kind) in BREAKDOWN.items()]



def stack_cell(framework: dict | None) -> str:
    """The training stack an accelerator's figures are for, and whether its level is calibrated there."""
    if not framework:
        return "-"
    return framework["id"] + ("" if framework["calibrated"] else " (uncalibrated: widest range)")


def vendor_rows(result: Comparison) -> list[dict]:
    """engine.planning.vendor.compare rows as a table, ranked first, with the plain-language reason of each."""
    return [{"rank": r.rank, "accelerator": r.accelerator, "vendor": r.vendor, "status": r.status,
             "software": r.software_stack, "stack": stack_cell(r.framework), "decision score": r.decision_score,
             "GPUs": r.n_gpus, "days (wall)": r.wall_days, "cost USD": r.cost_usd,
             "energy MWh": r.energy_mwh, "CO2 t": r.co2_t, "MFU": r.mfu,
             "memory headroom": r.memory_headroom, "ecosystem": r.ecosystem_score,
             "precision": r.precision, "layout": describe_layout(r.layout.model_dump()) if r.layout else "-",
             "why": r.why} for r in result.rows]


def ranked_rows(result: SearchResult, n_layers: int) -> list[dict]:
    """The search's best layouts as table rows (rank, every layout field, time, MFU, memory, GPU-hours, cost)."""
    rows = []
    for rank, r in enumerate(result.best, start=1):
        rows.append({"rank": rank, **layout_cells(r.layout, n_layers),
                     "days (wall)": r.wall_days, "days (compute)": r.train_days,
                     "MFU": r.mfu, "memory GiB": r.memory_gib.total, "GPU-hours": r.gpu_hours,
                     "cost USD": r.cost_usd, "energy MWh": r.energy_mwh,
                     "step s": r.step_time_s})
    return rows


def rejected_rows(result: SearchResult) -> list[dict]:
    """Why candidate layouts were rejected, most common first."""
    total = result.candidates_evaluated
    return [{"reason": reason, "layouts": n, "share": n / total if total else 0.0}
            for reason, n in sorted(result.rejected.items(), key=lambda kv: -kv[1])]


def objective_text(objective: str, value: float | None) -> str:
    """A search objective value (seconds for time, USD, MWh) in words."""
    if value is None:
        return "none feasible"
    if objective == "time":
        return fmt_days(value / 86400)
    return fmt_usd(value) if objective == "cost" else f"{fmt_num(value)} MWh"


def dimension_rows(result: SearchResult, dimension: str) -> list[dict]:
    """'Why not ...?' for one layout dimension: per value, how many layouts, how many feasible, the best objective
    reached and the main reasons the others were rejected."""
    rows = []
    for value, info in result.by_dimension[dimension].items():
        reasons = sorted(info["rejected"].items(), key=lambda kv: -kv[1])
        rows.append({dimension: value, "layouts": info["candidates"], "feasible": info["feasible"],
                     "best": objective_text(result.objective, info["best"]),
                     "main reasons rejected": "; ".join(f"{r} ({n:,})" for r, n in reasons[:3]) or "-"})
    return rows


def dimension_value(dimension: str, key: str):
    """A by_dimension key (text) back as the layout value it names."""
    if dimension == "recompute":
        return key
    if dimension == "sequence_parallel":
        return key == "True"
    return int(key)


def pareto_rows(result: SearchResult) -> list[dict]:
    return [{"GPUs": p.n_gpus, "days (wall)": p.wall_days, "GPU-hours": p.gpu_hours,
             "cost USD": p.cost_usd, "layout": describe_layout(p.layout.model_dump())} for p in result.pareto]



def scenario_rows(sc: Scenario) -> list[tuple[str, str]]:
    """(what, value) lines describing a scenario for people."""
    tr, cl = sc.training, sc.cluster
    rows = [("Model", f"{model_name(sc)}, {model_size_text(sc)}"),
            ("Training", f"{fmt_num(tr.total_tokens)} tokens, sequences of {tr.seq_len:,} tokens, global batch "
                         f"{tr.global_batch_size:,}, {tr.precision}, {tr.optimizer}, {tr.attention} attention"),
            ("Memory policy", f"{gradient_text(tr)}; {headroom_fraction(tr):.1%} of each accelerator's memory kept "
                              "free by the recommendations" + (" (published default)" if tr.memory_headroom_fraction
                                                               is None else "")),
            ("Cluster", f"{cl.n_gpus:,} x {accelerator_name(cl.accelerator)}, {sc.gpus_per_node} per node"),
            ("Layout", describe_layout(sc.layout.model_dump()) if sc.layout else "none")]
    measured = [f"{k.replace('_', ' ')} {getattr(cl, k):g}" for k in ("matmul_efficiency", "intra_node_busbw_gbs",
                                                                     "inter_node_busbw_gbs") if getattr(cl, k)]
    if measured:
        rows.append(("Measured efficiencies", ", ".join(measured)))
    if sc.site is not None:
        rows.append(("Site", ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in
                                       sc.site.model_dump(exclude_none=True).items()) or "defaults"))
    if sc.cost is not None:
        rows.append(("Cost inputs", ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in
                                              sc.cost.model_dump(exclude_none=True).items())))
    return rows



FIT_OPTIONS = {"lora": "LoRA", "qlora": "QLoRA", "offload": "Offload to CPU memory", "more_gpus": "More accelerators"}


def offered_fit_options(options: list[FitOption]) -> list[FitOption]:
    """engine.planning.alternatives.fitting_alternatives to offer, those that fit first."""
    return sorted(options, key=lambda o: not o.fits)


def fit_option_text(o: FitOption) -> str:
    """One fitting option in words with its figures, e.g. 'LoRA: train LoRA adapters (rank 16, attention) on the
    frozen 16-bit model: 2 GPUs, 28.1 GiB per GPU, 22.2 hours, $89'."""
    if not o.fits:
        return f"{FIT_OPTIONS[o.option]}: {o.text}"
    cost = f", {fmt_usd(o.cost_usd)}" if o.cost_usd is not None else ""
    return (f"{FIT_OPTIONS[o.option]}: {o.text}: {o.n_gpus:,} GPUs, {o.memory_gib:.1f} GiB per GPU, "
            f"{fmt_days(o.wall_days)}{cost}")


def fine_tuning_rows(est: Estimate) -> list[dict]:
    """What trains and what is frozen (engine.physics.finetune) and what offloading keeps in CPU memory per GPU
    against what the host has, from the estimate's fine_tuning block."""
    ft = est.fine_tuning
    adapters = ft["method"] in ("lora", "qlora")
    frozen_as = "4-bit NF4 weights with their quantization constants" if ft["method"] == "qlora" else "16-bit weights"
    rows = [{"part": "Trainable parameters", "amount": fmt_num(ft["trainable_params"]),
             "what it is": (f"LoRA adapters (rank {ft['lora_rank']}, {ft['lora_targets'].replace('_', ' ')}): the "
                            "only parameters with gradients and optimizer states" if adapters else
                            "every weight: each has its gradient and optimizer states")}]
    if ft["frozen_params"]:
        rows.append({"part": "Frozen parameters", "amount": fmt_num(ft["frozen_params"]),
                     "what it is": f"the base model, held as {frozen_as}: no gradients, no optimizer states"})
    rows.append({"part": "Offloaded to CPU memory", "amount": f"{ft['host_offloaded_gb_per_gpu']:,.1f} GB per GPU",
                 "what it is": OFFLOAD_TEXT[ft["offload"]]})
    rows.append({"part": "CPU memory available", "amount": f"{ft['host_memory_gb_per_gpu']:,.0f} GB per GPU",
                 "what it is": "the server's CPU memory divided by its accelerators"})
    if ft["paged_optimizer_gb"]:
        rows.append({"part": "Paged optimizer states", "amount": f"{ft['paged_optimizer_gb']:,.2f} GB",
                     "what it is": "optimizer states in unified memory, paged to the CPU under memory pressure"})
    return rows


OFFLOAD_NAMES = {"none": "no offload", "optimizer": "ZeRO-Offload", "optimizer_and_params": "ZeRO-Infinity"}
OFFLOAD_TEXT = {"none": "nothing: every state stays on the accelerator",
                "optimizer": "gradients and optimizer states of the trainable parameters (ZeRO-Offload: the optimizer "
                             "steps on the CPU)",
                "optimizer_and_params": "gradients, optimizer states and the weights (ZeRO-Infinity: each layer's "
                                        "weights are fetched over the host link when it runs)"}
