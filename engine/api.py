"""The engine's public API, for notebooks and scripts: typed results over the same functions the app and the command
line use.

    from engine import estimate, load, plan, search

    sc = load({"model": {"preset": "llama3.1-70b"}, ...})   # a Scenario from a dict, JSON text or a file path
    e = estimate(sc)                     # Estimate: memory, step time, MFU, days, cost, energy, CO2, whole run
    terms = explain(sc)                  # every term of it with the numbers used, the function and the source
    best = search(sc).best[0]            # the fastest layouts, why the others were rejected, the Pareto front
    answer = plan(sc, deadline_days=30)  # the manager's answer: accelerator, cluster, days, cost, CO2 with ranges
    cfg = export_config(sc)              # the layout as Megatron-LM args, TorchTitan TOML, DeepSpeed JSON, MaxText

Every function takes a Scenario, a dict, JSON text or a path to a JSON file, and raises ScenarioError (a ValueError
with .problems, a list of (field, message)) for anything it cannot use.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.scenario import Scenario, ScenarioError
from engine.inputs import parse_scenario
from engine.planning.results import (Alternative, ClusterSearch, Comparison, Estimate, Figure,  # noqa: F401
                                     MemoryGiB, NearestFit, ParetoPoint, Plan, PlanAnswer, PlanOption,
                                     Result, SearchResult, VendorRow)

ScenarioLike = Scenario | dict | str | Path


def load(scenario: ScenarioLike) -> Scenario:
    """A validated Scenario from a Scenario, a dict, JSON text or the path of a JSON file."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, Path) or (isinstance(scenario, str) and not scenario.lstrip().startswith("{")):
        path = Path(scenario)
        if not path.is_file():
            raise ScenarioError([("(file)", f"{path}: no such file")])
        return parse_scenario(path.read_text())
    return parse_scenario(scenario)


def estimate(scenario: ScenarioLike) -> Estimate:
    """Memory, step time, throughput, MFU, days, GPU-hours, cost, energy and CO2 of a scenario with a layout."""
    from engine.planning.estimate import estimate as run
    return run(load(scenario))


def explain(scenario: ScenarioLike) -> list:
    """Every term of the estimate (memory of the heaviest pipeline stage, step time, collectives, pipeline, FLOPs,
    whole run, goodput, cost, energy, CO2) as engine.planning.explain.Term: value, unit, the formula with the numbers
    used, the function that computes it and its source. engine.planning.explain.explain_text prints the same."""
    from engine.planning.explain import explain as run
    return run(load(scenario))


def search(scenario: ScenarioLike, top: int = 10, objective: str = "time", deadline_days: float | None = None,
           gpu_hour_budget: float | None = None, pareto_sizes: list[int] | None = None,
           confidence: float | None = None) -> SearchResult:
    """The best layouts for the scenario's cluster (its layout is ignored), the Pareto front over cluster sizes and,
    with a deadline or GPU-hour budget, the cluster size for it (met with the chance `confidence`, as the plan's)."""
    from engine.planning.search import search as run
    from engine.planning.sizing import cluster_search
    sc = load(scenario).model_copy(update={"layout": None})
    out = run(sc, top=top, objective=objective, pareto_sizes=pareto_sizes, summaries=False)
    return out.model_copy(update={"cluster_search": cluster_search(sc, deadline_days, gpu_hour_budget, objective,
                                                                   confidence)})


def compare(scenario: ScenarioLike, weights: dict[str, float] | None = None, deadline_days: float | None = None,
            accelerators: list[str] | None = None, efficiency: str = "tuned", budget_usd: float | None = None,
            gpu_hours: float | None = None, max_gpus: int | None = None,
            batch_range: tuple[int, int] | None = None, confidence: float | None = None) -> Comparison:
    """Every catalog accelerator (or the given ids) on the scenario, each with its own best layout, ranked: on the
    scenario's cluster by the weights, or sized for the plan's question (met with the chance `confidence`, as the
    plan's) and ranked by the plan's rule."""
    from engine.planning.vendor import compare as run
    return run(load(scenario).model_copy(update={"layout": None}), weights=weights, deadline_days=deadline_days,
               accelerators=accelerators, efficiency=efficiency, budget_usd=budget_usd, gpu_hours=gpu_hours,
               max_gpus=max_gpus, batch_range=batch_range, confidence=confidence)


def plan(scenario: ScenarioLike, deadline_days: float | None = None, budget_usd: float | None = None,
         gpu_hours: float | None = None, vendor: str = "any", efficiency: str = "tuned",
         batch_range: tuple[int, int] | None = None, max_gpus: int | None = None,
         confidence: float | None = None) -> Plan:
    """The manager's answer for a deadline, a money budget or a GPU-hour budget, on at most max_gpus accelerators,
    met on the engine's own figures or, with confidence 0.5-0.9, at that percentile of each option's range (see
    engine.planning.plan)."""
    from engine.planning.plan import plan as run
    return run(load(scenario), deadline_days=deadline_days, budget_usd=budget_usd, gpu_hours=gpu_hours, vendor=vendor,
               efficiency=efficiency, batch_range=batch_range, max_gpus=max_gpus, confidence=confidence)


def export_config(scenario: ScenarioLike, fmt: str | None = None):
    """The scenario's layout (or the layout search's best when it gives none) as its stack's launch configuration:
    fmt "megatron" | "torchtitan" | "deepspeed", default the format of training.framework. Returns
    engine.presentation.launch_config.LaunchConfig (text, filename, notes on what the stack cannot express)."""
    from engine.presentation.launch_config import for_scenario
    return for_scenario(load(scenario), fmt)


def as_dict(result: Any) -> dict:
    """A result as plain JSON-ready data (the command line's document)."""
    if isinstance(result, Result):
        return result.as_json()
    return result.as_json() if hasattr(result, "as_json") else result
