"""What the app shows, as plain data: figures formatted for people, tables built from engine results, and the
one-page summary report (self-contained HTML with inline SVG charts; it loads nothing). Pure: no Streamlit."""
from __future__ import annotations

import html
import math

from typing import NamedTuple

from engine.catalog import load_catalog
from engine.economics import ranges
from engine.economics.cost import power_usd_per_gpu_hour
from engine.economics.energy import HOURS_PER_YEAR
from engine.presentation.edit import describe_layout
from engine.physics.model import shape_of
from engine.scenario import PresetRef, Scenario

MEMORY_PARTS = {  # estimate()["memory_gib"] key: label, what it is
    "weights": ("Weights", "the model's parameters held by this GPU (16-bit), after TP/PP/EP and ZeRO-3 splitting"),
    "gradients": ("Gradients", "one gradient per parameter held (16-bit), sharded by ZeRO-2 and -3"),
    "optimizer_states": ("Optimizer states", "fp32 master weights and Adam's two moments (12 bytes per parameter), "
                                              "sharded by ZeRO-1 and up"),
    "activations": ("Activations", "values kept from the forward pass for the backward pass, for every micro-batch "
                                   "in flight; cut by recompute, TP with sequence parallelism, and CP"),
    "other": ("Other", "output logits, communication buffers and a framework/fragmentation allowance"),
}
BREAKDOWN = {  # estimate()["time_breakdown_s"] key: label, kind
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
WORST_STAGE = {  # estimate()["worst_stage"]: what it means
    "first": "the first pipeline stage: it holds the token embedding and keeps the most micro-batches in flight",
    "middle": "a middle pipeline stage",
    "last": "the last pipeline stage: it holds the output layer and its logits",
    "only": "no pipeline: every accelerator holds the same share",
}
LAYOUT_COLUMNS = ("tp", "pp", "dp", "cp", "ep", "micro_batch_size", "virtual_stages", "zero_stage",
                  "sequence_parallel", "recompute")


def fmt_num(x: float | None, digits: int = 3) -> str:
    """1234567 -> '1.23M', 6754 -> '6,750'; None or NaN -> 'n/a'."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if abs(x) >= size:
            return f"{x / size:.{digits}g}{suffix}"
    if abs(x) >= 1e3:
        return f"{float(f'{x:.{digits}g}'):,.0f}"
    return f"{x:.{digits}g}"


def fmt_rate(x: float) -> str:
    """A rate in k or M units: 822,345 -> '822k', 1.2e6 -> '1.2M'."""
    return f"{x / 1e3:.3g}k" if 1e3 <= abs(x) < 1e6 else fmt_num(x)


def fmt_usd(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else "$" + fmt_num(x)


def fmt_days(days: float | None) -> str:
    if days is None or (isinstance(days, float) and math.isnan(days)):
        return "n/a"
    if days < 1:
        return f"{days * 24:.1f} hours"
    return f"{days:,.1f} days" if days < 100 else f"{days:,.0f} days"


def fmt_seconds(seconds: float | None) -> str:
    """A duration in the largest fitting unit: '45 s', '26 minutes', '3.2 hours'."""
    if seconds is None:
        return "n/a"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    return fmt_days(seconds / 86400)


def fmt_pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x * 100:.{digits}f}%"


def model_name(sc: Scenario) -> str:
    if isinstance(sc.model, PresetRef):
        return load_catalog().models[sc.model.preset].name
    arch = sc.arch
    return f"custom model ({arch.n_layers} layers, hidden {arch.hidden_size:,})"


def model_size_text(sc: Scenario) -> str:
    """E.g. '70.6 billion parameters' or '671 billion parameters, 37.5 billion active per token'."""
    shape = shape_of(sc.arch)
    total, active = shape.total_params(), shape.active_params()
    text = f"{fmt_num(total)} parameters".replace("B ", " billion ").replace("M ", " million ")
    if active != total:
        text += f", {fmt_num(active)} active per token".replace("B ", " billion ").replace("M ", " million ")
    return text


def accelerator_name(accelerator_id: str) -> str:
    acc = load_catalog().accelerators.get(accelerator_id)
    return acc.name if acc else accelerator_id


def scenario_title(sc: Scenario) -> str:
    """E.g. 'Llama 3.1 70B on 1,024 x NVIDIA H100 SXM5 80GB'."""
    return f"{model_name(sc)} on {sc.cluster.n_gpus:,} x {accelerator_name(sc.cluster.accelerator)}"


def memory_rows(est: dict) -> list[dict]:
    """Per-GPU memory by component (worst pipeline stage) with its share of the accelerator's capacity."""
    cap = est["memory_capacity_gib"]
    return [{"component": label, "GiB": est["memory_gib"][key], "share of capacity": est["memory_gib"][key] / cap,
             "what it is": what} for key, (label, what) in MEMORY_PARTS.items()]


def breakdown_rows(est: dict) -> list[dict]:
    """Seconds per optimizer step by component and kind, with the share of the step."""
    step = est["step_time_s"]
    return [{"component": label, "kind": kind, "seconds per step": est["time_breakdown_s"][key],
             "share of step": est["time_breakdown_s"][key] / step if step else 0.0}
            for key, (label, kind) in BREAKDOWN.items()]


class Figure(NamedTuple):
    """One headline figure as shown: label, value text, what it is, and the line under the value: its range, or
    what it is measured against (None where there is none)."""
    label: str
    value: str
    what: str
    range: str | None = None


FIGURE_UNITS = {"wall_days": fmt_days, "gpu_hours": fmt_num, "cost_usd": fmt_usd,
                "energy_mwh": lambda v: f"{fmt_num(v)} MWh", "co2_t": lambda v: f"{fmt_num(v)} t"}


def range_text(band: dict | None, key: str) -> str | None:
    """'17.7-26.8 days' for a band from engine.economics.ranges (None when there is none)."""
    if band is None:
        return None
    fmt = FIGURE_UNITS[key]
    low, high = fmt(band["low"]), fmt(band["high"])
    unit = " " + low.split(" ", 1)[1] if " " in low and low.split(" ", 1)[1] == high.split(" ", 1)[1] else ""
    return f"{low[:len(low) - len(unit)]}–{high}" if unit else f"{low}–{high}"


def headline_bands(est: dict, efficiency: str = "tuned") -> dict[str, dict | None]:
    """The time-proportional headline figures of an estimate as bands for the chosen stack: wall days, GPU-hours
    (billed: GPUs x wall-clock hours, as the cost), cost, energy and CO2."""
    billed = (est.get("cost") or {}).get("billed_gpu_hours") or est["gpu_hours"]
    return {"wall_days": ranges.band(est["wall_days"], efficiency),
            "gpu_hours": ranges.band(billed, efficiency),
            **{k: ranges.band(est.get(k), efficiency) for k in ("cost_usd", "energy_mwh", "co2_t")}}


def key_figures(est: dict, efficiency: str = "tuned") -> list[Figure]:
    """The headline figures of an estimate, each time-proportional one with its range for the chosen stack
    (engine.economics.ranges). A layout that does not fit gets its memory only: no time, cost or throughput."""
    mem = est["memory_gib"]
    figures = [Figure("Memory per GPU", f"{mem['total']:.1f} GiB",
                      "peak memory on the fullest GPU (worst pipeline stage) against what the accelerator can allocate"
                      + ("" if est["fits"] else "; it does NOT fit, so no time or cost is given"),
                      f"of {est['memory_capacity_gib']:.0f} GiB")]
    if not est["fits"]:
        return figures
    bands = headline_bands(est, efficiency)
    factor = ranges.factor(efficiency)
    stack = "" if efficiency == "tuned" else " on a typical software stack"
    tuned = "" if efficiency == "tuned" else (f" (for a well-tuned stack; a typical one takes {ranges.factor(efficiency):.2f}x "
                                              "the time overall)")
    value = lambda key: bands[key]["value"] if bands[key] else None
    figures += [
        Figure("Time to train", fmt_days(value("wall_days")),
               (f"wall-clock time{stack} including failures, restarts and checkpoints (goodput "
                f"{fmt_pct(est.get('goodput'))}); pure compute time {fmt_days(est['train_days'])}" if est.get("wall_days")
                else f"no time to train: {est['problem']}"), range_text(bands["wall_days"], "wall_days")),
        Figure("GPU-hours (billed)", fmt_num(value("gpu_hours")), f"GPUs x wall-clock hours{stack}: what a cloud bills "
                                                                   f"and a budget pays (compute alone: "
                                                                   f"{fmt_num(est['gpu_hours'] * factor)})",
               range_text(bands["gpu_hours"], "gpu_hours")),
        Figure("MFU", fmt_pct(est["mfu"]), GLOSSARY["MFU"] + "; 35-55% is typical for large well-tuned runs" + tuned),
        Figure("Step time", f"{est['step_time_s']:.2f} s", f"one optimizer step ({est['micro_batches_per_step']} "
                                                           "micro-batches per pipeline)" + tuned),
        Figure("Throughput", f"{fmt_rate(est['tokens_per_s'])} tok/s", "training tokens processed per second by the "
                                                                      "whole cluster" + tuned),
    ]
    if "cost_usd" in est:
        figures += [
            Figure("Cost", fmt_usd(value("cost_usd")), (est.get("cost") or {}).get("price_source") or "no price known: "
                   "enter one on the Scenario page", range_text(bands["cost_usd"], "cost_usd")),
            Figure("Energy", f"{fmt_num(value('energy_mwh'))} MWh" if bands["energy_mwh"] else "n/a",
                   "electricity drawn by accelerators and hosts, times the facility's PUE",
                   range_text(bands["energy_mwh"], "energy_mwh")),
            Figure("CO2 (location-based)", f"{fmt_num(value('co2_t'))} t" if bands["co2_t"] else "n/a",
                   "operational emissions from the grid's average carbon intensity at the site",
                   range_text(bands["co2_t"], "co2_t")),
        ]
    return figures


def published_training_note(sc: Scenario, est: dict, efficiency: str = "tuned") -> str | None:
    """The whole-training GPU-hours the model's makers published (data/models.json published_training) beside this
    estimate's billed GPU-hours, scaled linearly to the scenario's tokens, and where the published figure falls
    against the range shown. None for a custom model, a preset without a published figure, or a layout that does
    not fit."""
    if not isinstance(sc.model, PresetRef) or not est.get("fits"):
        return None
    published = load_catalog().models[sc.model.preset].published_training
    if published is None:
        return None
    where = published.source.document.split(",")[0]
    said = (f"Published ({where}, {published.source.date}): {fmt_num(published.gpu_hours)} GPU-hours on "
            f"{accelerator_name(published.accelerator)} for {fmt_num(published.tokens)} tokens; {published.scope}.")
    if sc.cluster.accelerator != published.accelerator:
        return said + (f" This scenario runs on {accelerator_name(sc.cluster.accelerator)}, so the two are not "
                       "directly comparable.")
    shown = headline_bands(est, efficiency)["gpu_hours"]
    scaled = published.gpu_hours * sc.training.total_tokens / published.tokens     # GPU-hours scale with tokens
    ratio = scaled / shown["value"]
    scaled_text = ("" if abs(sc.training.total_tokens / published.tokens - 1) < 1e-9 else
                   f"Scaled to this scenario's {fmt_num(sc.training.total_tokens)} tokens: {fmt_num(scaled)}; ")
    if shown["low"] <= scaled <= shown["high"]:
        verdict = "within the range shown"
    elif scaled > shown["high"]:
        typical = ranges.band(est.get("cost", {}).get("billed_gpu_hours") or est["gpu_hours"], "typical")
        verdict = ("above the range shown" + (": about what a typical stack takes, so plan with 'typical' unless "
                                              "your stack is tuned" if efficiency == "tuned" and typical["low"] <=
                                              scaled <= typical["high"] else
                                              ": the published run did work this estimate leaves out, or ran "
                                              "further below a tuned stack's efficiency"))
    else:
        verdict = "below the range shown: the published run was faster than this layout is estimated to be"
    return said + f" {scaled_text}{ratio:.2f}x this estimate's {fmt_num(shown['value'])} billed GPU-hours, " \
                  f"{verdict}."


# A short glossary, shown in tooltips wherever the term appears.
GLOSSARY = {
    "MFU": "model FLOPs utilisation: useful model arithmetic (causal attention counted as computed, as current "
           "Megatron-LM counts) as a share of the accelerators' dense peak",
    "HFU": "hardware FLOPs utilisation: like MFU, but counting the recomputed forward work too",
    "goodput": "share of the wall-clock time spent making training progress, after failures, restarts and "
               "checkpoint writes",
    "virtual stages": "interleaved pipeline: each accelerator holds this many smaller chunks of layers instead of "
                      "one block, which shrinks the pipeline bubble at the cost of more pipeline sends",
    "ZeRO": "splits training state across the data-parallel copies instead of repeating it in each: 1 the optimizer "
            "states, 2 also the gradients, 3 also the weights (like PyTorch FSDP)",
    "HSDP": "hybrid sharding: ZeRO splits the state within groups of copies and repeats it across groups, so the "
            "gathers stay inside a group (often one node or a few)",
    "TP overlap": "tensor-parallel communication runs at the same time as the matrix multiplications around it; "
                  "both slow a little, but less time is exposed",
    "tensor parallel": "every layer's matrices split across accelerators, which then exchange results after each "
                       "layer; needs the fast links inside a node",
    "pipeline bubble": "time the first and last pipeline stages wait while the pipeline fills and drains",
    "data parallel": "copies of the model that each train on different data and average their gradients",
    "expert parallel": "a mixture-of-experts model's experts spread over accelerators; tokens travel to their "
                       "experts and back (all-to-all)",
}


def break_even_curves(est: dict, n_gpus: int, points: int = 41) -> dict | None:
    """Cumulative cost of the cluster's accelerators over the years, bought (capex, then operations and power) against
    rented at the cloud price, both at the on-premises utilisation; they cross at cost.detail's break-even years.
    None when no server price, power figure or cloud price is known."""
    onprem, power = est["cost"]["on_prem"], est["energy"]
    rent = (onprem.get("break_even") or {}).get("against_usd_per_gpu_hour")
    if onprem.get("capex_usd_per_gpu") is None or rent is None or power.get("node_power_w_per_gpu") is None:
        return None
    v = {k: x["value"] for k, x in onprem["inputs"].items()}
    power_h = power_usd_per_gpu_hour(power["node_power_w_per_gpu"], power["pue"], v["power_usd_per_kwh"])
    used_hours_per_year = HOURS_PER_YEAR * v["utilisation"]
    horizon = max(v["depreciation_years"], 1.5 * (onprem["break_even"]["years_at_utilisation"] or 0))
    years = [horizon * i / (points - 1) for i in range(points)]
    buy = [n_gpus * (onprem["capex_usd_per_gpu"] + y * (v["ops_usd_per_gpu_year"] + used_hours_per_year * power_h))
           for y in years]
    return {"years": years, "buy_usd": buy, "rent_usd": [n_gpus * y * used_hours_per_year * rent for y in years],
            "rent_usd_per_gpu_hour": rent, "utilisation": v["utilisation"],
            "break_even_years": onprem["break_even"]["years_at_utilisation"],
            "break_even_utilisation": onprem["break_even"]["utilisation"]}


def vendor_rows(result: dict) -> list[dict]:
    """engine.planning.vendor.compare rows as a table, ranked first, with the plain-language reason of each."""
    return [{"rank": r["rank"], "accelerator": r["accelerator"], "vendor": r["vendor"],
             "software": r["software_stack"], "decision score": r.get("decision_score"),
             "GPUs": r.get("n_gpus"), "days (wall)": r.get("wall_days"), "cost USD": r.get("cost_usd"),
             "energy MWh": r.get("energy_mwh"), "CO2 t": r.get("co2_t"), "MFU": r.get("mfu"),
             "memory headroom": r.get("memory_headroom"), "ecosystem": r.get("ecosystem_score"),
             "precision": r.get("precision"), "layout": describe_layout(r["layout"]) if r.get("layout") else "-",
             "why": r["why"]} for r in result["rows"]]


def ranked_rows(result: dict) -> list[dict]:
    """The search's best layouts as table rows (rank, layout fields, time, MFU, memory, GPU-hours, cost)."""
    rows = []
    for rank, r in enumerate(result["best"], start=1):
        rows.append({"rank": rank, **{k: r["layout"][k] for k in LAYOUT_COLUMNS},
                     "days (wall)": r["wall_days"], "days (compute)": r["train_days"],
                     "MFU": r["mfu"], "memory GiB": r["memory_gib"]["total"], "GPU-hours": r["gpu_hours"],
                     "cost USD": r.get("cost_usd"), "energy MWh": r.get("energy_mwh"),
                     "step s": r["step_time_s"]})
    return rows


def rejected_rows(result: dict) -> list[dict]:
    """Why candidate layouts were rejected, most common first."""
    total = result["candidates_evaluated"]
    return [{"reason": reason, "layouts": n, "share": n / total if total else 0.0}
            for reason, n in sorted(result["rejected"].items(), key=lambda kv: -kv[1])]


def objective_text(objective: str, value: float | None) -> str:
    """A search objective value (seconds for time, USD, MWh) in words."""
    if value is None:
        return "none feasible"
    if objective == "time":
        return fmt_days(value / 86400)
    return fmt_usd(value) if objective == "cost" else f"{fmt_num(value)} MWh"


def dimension_rows(result: dict, dimension: str) -> list[dict]:
    """'Why not ...?' for one layout dimension: per value, how many layouts, how many feasible, the best objective
    reached and the main reasons the others were rejected."""
    rows = []
    for value, info in result["by_dimension"][dimension].items():
        reasons = sorted(info["rejected"].items(), key=lambda kv: -kv[1])
        rows.append({dimension: value, "layouts": info["candidates"], "feasible": info["feasible"],
                     "best": objective_text(result["objective"], info["best"]),
                     "main reasons rejected": "; ".join(f"{r} ({n:,})" for r, n in reasons[:3]) or "-"})
    return rows


def dimension_value(dimension: str, key: str):
    """A by_dimension key (text) back as the layout value it names."""
    if dimension == "recompute":
        return key
    if dimension == "sequence_parallel":
        return key == "True"
    return int(key)


def pareto_rows(result: dict) -> list[dict]:
    return [{"GPUs": p["n_gpus"], "days (wall)": p["wall_days"], "GPU-hours": p["gpu_hours"],
             "cost USD": p.get("cost_usd"), "layout": describe_layout(p["layout"])} for p in result["pareto"]]


# ---- the one-page summary report --------------------------------------------------------------------------------

REPORT_CSS = """
@page { size: A4; margin: 14mm; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: #1b1b1b;
       margin: 0 auto; max-width: 190mm; font-size: 10.5pt; line-height: 1.35; }
h1 { font-size: 17pt; margin: 0 0 2pt; } h2 { font-size: 12pt; margin: 12pt 0 4pt; border-bottom: 1px solid #ccc; }
.sub { color: #555; font-size: 9pt; margin: 0 0 8pt; }
.rec { background: #eef6ee; border-left: 4px solid #2e7d32; padding: 6pt 9pt; margin: 6pt 0; }
.warn { background: #fdecea; border-left: 4px solid #c62828; padding: 6pt 9pt; margin: 6pt 0; }
.figs { display: grid; grid-template-columns: repeat(3, 1fr); gap: 4pt 10pt; }
.fig { border: 1px solid #ddd; border-radius: 4px; padding: 4pt 6pt; }
.fig b { display: block; font-size: 13pt; } .fig span { color: #555; font-size: 8.5pt; }
.fig span.range { display: block; color: #333; font-size: 9pt; margin-bottom: 2pt; }
table { border-collapse: collapse; width: 100%; font-size: 9pt; }
td, th { border-bottom: 1px solid #e5e5e5; padding: 2pt 4pt; text-align: left; vertical-align: top; }
.charts { display: grid; grid-template-columns: 1fr 1fr; gap: 8pt; }
section, .charts, table { break-inside: avoid; }
.src { color: #555; font-size: 8pt; word-break: break-all; }
"""
SVG_COLORS = ("#4C78A8", "#72B7B2", "#F58518", "#E45756", "#BAB0AC", "#54A24B", "#B279A2", "#9D755D")


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def svg_stacked_bar(parts: list[tuple[str, float]], capacity: float, unit: str, title: str) -> str:
    """One vertical stacked bar (parts bottom-up) against a dashed capacity line, with a legend; inline SVG."""
    width, height, top, bottom, bar_x, bar_w = 330, 210, 18, 190, 40, 70
    scale_max = max(capacity, sum(v for _, v in parts)) * 1.08 or 1.0
    y_of = lambda v: bottom - (bottom - top) * v / scale_max
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" '
           f'aria-label="{_e(title)}"><title>{_e(title)}</title>']
    base = 0.0
    for i, (label, value) in enumerate(parts):
        y0, y1 = y_of(base + value), y_of(base)
        out.append(f'<rect x="{bar_x}" y="{y0:.1f}" width="{bar_w}" height="{max(y1 - y0, 0):.1f}" '
                   f'fill="{SVG_COLORS[i % len(SVG_COLORS)]}"><title>{_e(label)}: {value:.1f} {unit}</title></rect>')
        out.append(f'<rect x="150" y="{top + 16 * i}" width="10" height="10" fill="{SVG_COLORS[i % len(SVG_COLORS)]}"/>'
                   f'<text x="165" y="{top + 9 + 16 * i}" font-size="10">{_e(label)}: {value:.1f} {unit}</text>')
        base += value
    cy = y_of(capacity)
    out.append(f'<line x1="30" x2="{bar_x + bar_w + 10}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="#222" '
               f'stroke-dasharray="4 3"/><text x="150" y="{top + 16 * len(parts) + 12}" font-size="10">'
               f'- - capacity {capacity:.0f} {unit}</text>')
    out.append(f'<line x1="30" x2="30" y1="{top}" y2="{bottom}" stroke="#888"/>'
               f'<text x="26" y="{bottom}" font-size="9" text-anchor="end">0</text>'
               f'<text x="26" y="{cy + 3:.1f}" font-size="9" text-anchor="end">{capacity:.0f}</text></svg>')
    return "".join(out)


def svg_hbars(items: list[tuple[str, float]], value_text, title: str, highlight: str | None = None) -> str:
    """Horizontal bars, one per (label, value), longest scaled to the width; inline SVG."""
    row_h, label_w, bar_w = 18, 240, 120
    height = row_h * len(items) + 8
    top = max((v for _, v in items), default=0) or 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {label_w + bar_w + 70} {height}" '
           f'width="{label_w + bar_w + 70}" height="{height}" role="img" '
           f'aria-label="{_e(title)}"><title>{_e(title)}</title>']
    for i, (label, value) in enumerate(items):
        y = 4 + i * row_h
        color = "#2e7d32" if label == highlight else SVG_COLORS[0]
        out.append(f'<text x="{label_w - 4}" y="{y + 12}" font-size="10" text-anchor="end">{_e(label[:46])}</text>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{bar_w * max(value, 0) / top:.1f}" height="{row_h - 6}" '
                   f'fill="{color}"/><text x="{label_w + bar_w * max(value, 0) / top + 4:.1f}" y="{y + 12}" '
                   f'font-size="10">{_e(value_text(value))}</text>')
    out.append("</svg>")
    return "".join(out)


def scenario_rows(sc: Scenario) -> list[tuple[str, str]]:
    """(what, value) lines describing a scenario for people."""
    tr, cl = sc.training, sc.cluster
    rows = [("Model", f"{model_name(sc)}, {model_size_text(sc)}"),
            ("Training", f"{fmt_num(tr.total_tokens)} tokens, sequences of {tr.seq_len:,} tokens, global batch "
                         f"{tr.global_batch_size:,}, {tr.precision}, {tr.optimizer}, {tr.attention} attention"),
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
