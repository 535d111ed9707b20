"""The headline figures of an estimate as shown: each with its value in words, what it is, and its range for the
chosen software stack (engine.economics.ranges); and the model makers' published GPU-hours beside the estimate.
Pure: no Streamlit."""
from __future__ import annotations

from typing import NamedTuple

from engine.catalog import load_catalog
from engine.economics import ranges
from engine.planning.results import Estimate, Figure as Band
from engine.presentation.formatting import GLOSSARY, accelerator_name, fmt_days, fmt_num, fmt_pct, fmt_rate, fmt_usd
from engine.scenario import PresetRef, Scenario


class Figure(NamedTuple):
    """One headline figure as shown: label, value text, what it is, and the line under the value: its range, or
    what it is measured against (None where there is none)."""
    label: str
    value: str
    what: str
    range: str | None = None


FIGURE_UNITS = {"wall_days": fmt_days, "gpu_hours": fmt_num, "cost_usd": fmt_usd,
                "energy_mwh": lambda v: f"{fmt_num(v)} MWh", "co2_t": lambda v: f"{fmt_num(v)} t"}


def band(value: float | None, rb: ranges.RegimeBand, efficiency: str = "tuned") -> Band | None:
    """A figure with its range from its regime's band (rb) for the chosen stack (engine.economics.ranges.band), typed;
    None for no figure."""
    b = ranges.band(value, rb, efficiency)
    return None if b is None else Band(**b)


def range_text(band: Band | None, key: str) -> str | None:
    """'17.7-26.8 days' for a band (None when there is none)."""
    if band is None:
        return None
    fmt = FIGURE_UNITS[key]
    low, high = fmt(band.low), fmt(band.high)
    unit = " " + low.split(" ", 1)[1] if " " in low and low.split(" ", 1)[1] == high.split(" ", 1)[1] else ""
    return f"{low[:len(low) - len(unit)]}–{high}" if unit else f"{low}–{high}"


def billed_gpu_hours(est: Estimate) -> float | None:
    """GPUs x wall-clock hours, as the cost bills them (the compute GPU-hours where the run has no wall time)."""
    return est.cost.get("billed_gpu_hours") or est.gpu_hours


def headline_bands(est: Estimate, efficiency: str = "tuned") -> dict[str, Band | None]:
    """The time-proportional headline figures of an estimate as bands for the chosen stack: wall days, GPU-hours
    (billed: GPUs x wall-clock hours, as the cost), cost, energy and CO2."""
    rb = est.time_range
    return {"wall_days": band(est.wall_days, rb, efficiency),
            "gpu_hours": band(billed_gpu_hours(est), rb, efficiency),
            **{k: band(getattr(est, k), rb, efficiency) for k in ("cost_usd", "energy_mwh", "co2_t")}}


NO_POWER = "no published power: enter the measured W per accelerator (Site)"


def energy_line(est: Estimate, band: Band | None, key: str) -> str | None:
    """The line under an energy or CO2 figure: its range, or why there is none (the accelerator's vendor publishes no
    power figure: engine.economics.energy's `missing`)."""
    if band is not None:
        return range_text(band, key)
    return NO_POWER if (est.energy or {}).get("missing") else None


def key_figures(est: Estimate, efficiency: str = "tuned") -> list[Figure]:
    """The headline figures of an estimate, each time-proportional one with its range for the chosen stack
    (engine.economics.ranges). A layout that does not fit gets its memory only: no time, cost or throughput."""
    figures = [Figure("Memory per GPU", f"{est.memory_gib.total:.1f} GiB",
                      "peak memory on the fullest GPU (worst pipeline stage) against what the accelerator can allocate"
                      + ("" if est.fits else "; it does NOT fit, so no time or cost is given"),
                      f"of {est.memory_capacity_gib:.0f} GiB")]
    if not est.fits:
        return figures
    bands = headline_bands(est, efficiency)
    factor = ranges.factor(efficiency)
    stack = "" if efficiency == "tuned" else " on a typical software stack"
    tuned = "" if efficiency == "tuned" else (f" (for a well-tuned stack; a typical one takes {ranges.factor(efficiency):.2f}x "
                                              "the time overall)")
    value = lambda key: bands[key].value if bands[key] else None
    figures += [
        Figure("Time to train", fmt_days(value("wall_days")),
               (f"wall-clock time{stack} including failures, restarts and checkpoints (goodput "
                f"{fmt_pct(est.goodput)}); pure compute time {fmt_days(est.train_days)}" if est.wall_days
                else f"no time to train: {est.problem}"), range_text(bands["wall_days"], "wall_days")),
        Figure("GPU-hours (billed)", fmt_num(value("gpu_hours")), f"GPUs x wall-clock hours{stack}: what a cloud bills "
                                                                   f"and a budget pays (compute alone: "
                                                                   f"{fmt_num(est.gpu_hours * factor)})",
               range_text(bands["gpu_hours"], "gpu_hours")),
        Figure("MFU", fmt_pct(est.mfu), GLOSSARY["MFU"] + "; 35-55% is typical for large well-tuned runs" + tuned),
        Figure("Step time", f"{est.step_time_s:.2f} s", f"one optimizer step ({est.micro_batches_per_step} "
                                                         "micro-batches per pipeline)" + tuned,
               f"{est.step_time_range_s['low']:.2f}–{est.step_time_range_s['high']:.2f} s"),
        Figure("Throughput", f"{fmt_rate(est.tokens_per_s)} tok/s", "training tokens processed per second by the "
                                                                    "whole cluster" + tuned),
        Figure("Cost", fmt_usd(value("cost_usd")), est.cost.get("price_source") or "no price known: "
               "enter one on the Scenario page", range_text(bands["cost_usd"], "cost_usd")),
        Figure("Energy", f"{fmt_num(value('energy_mwh'))} MWh" if bands["energy_mwh"] else "n/a",
               "electricity drawn by accelerators and hosts, times the facility's PUE",
               energy_line(est, bands["energy_mwh"], "energy_mwh")),
        Figure("CO2 (location-based)", f"{fmt_num(value('co2_t'))} t" if bands["co2_t"] else "n/a",
               "operational emissions from the grid's average carbon intensity at the site",
               energy_line(est, bands["co2_t"], "co2_t")),
    ]
    return figures


def published_training_note(sc: Scenario, est: Estimate, efficiency: str = "tuned") -> str | None:
    """The whole-training GPU-hours the model's makers published (data/models.json published_training) beside this
    estimate's billed GPU-hours, scaled linearly to the scenario's tokens, and where the published figure falls
    against the range shown. None for a custom model, a preset without a published figure, or a layout that does
    not fit, or a fine-tune (the published hours are the model's pre-training, another job)."""
    if not isinstance(sc.model, PresetRef) or not est.fits or sc.training.fine_tune:
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
    ratio = scaled / shown.value
    scaled_text = ("" if abs(sc.training.total_tokens / published.tokens - 1) < 1e-9 else
                   f"Scaled to this scenario's {fmt_num(sc.training.total_tokens)} tokens: {fmt_num(scaled)}; ")
    if shown.low <= scaled <= shown.high:
        verdict = "within the range shown"
    elif scaled > shown.high:
        typical = band(billed_gpu_hours(est), est.time_range, "typical")
        verdict = ("above the range shown" + (": about what a typical stack takes, so plan with 'typical' unless "
                                              "your stack is tuned" if efficiency == "tuned" and typical.low <=
                                              scaled <= typical.high else
                                              ": the published run did work this estimate leaves out, or ran "
                                              "further below a tuned stack's efficiency"))
    else:
        verdict = "below the range shown: the published run was faster than this layout is estimated to be"
    return said + f" {scaled_text}{ratio:.2f}x this estimate's {fmt_num(shown.value)} billed GPU-hours, " \
                  f"{verdict}."

