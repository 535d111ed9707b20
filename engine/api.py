"""The engine's public API, for notebooks and scripts: typed results over the same functions the app and the command
line use.

    from engine import estimate, load, plan, search

    sc = load({"model": {"preset": "llama3.1-70b"}, ...})   # a Scenario from a dict, JSON text or a file path
    e = estimate(sc)                     # Estimate: memory, step time, MFU, days, cost, energy, CO2, whole run
    terms = explain(sc)                  # every term of it with the numbers used, the function and the source
    best = search(sc).best[0]            # the fastest layouts, why the others were rejected, the Pareto front
    answer = plan(sc, deadline_days=30)  # the manager's answer: accelerator, cluster, days, cost, CO2 with ranges

Every function takes a Scenario, a dict, JSON text or a path to a JSON file, and raises ScenarioError (a ValueError
with .problems, a list of (field, message)) for anything it cannot use.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.scenario import Layout, Scenario, ScenarioError
from engine.inputs import parse_scenario

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


class _Result(BaseModel):
    # the typed fields below are the contract; the detail blocks (cost, energy, reliability inputs and their sources)
    # ride along as extra fields
    model_config = ConfigDict(extra="allow", frozen=True)


class MemoryGiB(_Result):
    weights: float
    gradients: float
    optimizer_states: float
    activations: float
    other: float
    total: float


class NearestFit(_Result):
    n_gpus: int
    layout: Layout
    wall_days: float | None


class Estimate(_Result):
    """One layout's figures (engine.planning.estimate.estimate / engine.planning.estimate.row)."""
    layout: Layout
    fits: bool
    memory_gib: MemoryGiB
    memory_capacity_gib: float
    step_time_s: float = Field(description="one optimizer step")
    tokens_per_s: float
    mfu: float = Field(description="model FLOP utilisation, causal attention counted (current Megatron-LM)")
    mfu_full_square: float = Field(description="the same with the full attention square (PaLM, Megatron-LM 2024)")
    hfu: float = Field(description="hardware FLOP utilisation: recomputed work included")
    model_tflops_per_gpu: float
    time_breakdown_s: dict[str, float]
    train_days: float | None = Field(description="compute days of the whole run: steps, phases, evaluation "
                                                 "(None: the layout does not fit)")
    wall_days: float | None = Field(description="with failures, checkpoints and restarts (None: the layout does not "
                                                "fit, or the run never finishes: failures outpace recovery)")
    gpu_hours: float | None
    cost_usd: float | None
    energy_mwh: float | None
    co2_t: float | None
    problem: str | None = Field(default=None, description="why days, cost, energy and CO2 are None")
    nearest_fit: NearestFit | None = Field(default=None, description="for a layout that does not fit: the fastest "
                                                                     "layout that does, here or at the nearest size")
    params_total: int | None = None
    params_active: int | None = None

    @property
    def never_finishes(self) -> bool:
        """The layout fits but failures come faster than the run recovers: it has no wall time."""
        return self.fits and self.wall_days is None


class ParetoPoint(_Result):
    n_gpus: int
    wall_days: float
    gpu_hours: float
    cost_usd: float | None
    layout: Layout


class ClusterSearch(_Result):
    """engine.planning.sizing.cluster_search: the cheapest cluster for a deadline (and GPU-hour budget), or the
    fastest within the budget; best on that size, the neighbouring size and why it is not the answer, and why when
    none meets it."""
    met: bool
    n_gpus: int | None
    nodes: int | None
    gpus_per_node: int
    best: Estimate | None
    neighbour: Estimate | None
    neighbour_gpus: int | None = None
    neighbour_why: str | None = None
    sizes_tried: list[int]
    efficiency_factor: float
    reason: str | None = None
    deadline_days: float | None = None
    gpu_hour_budget: float | None = None


class SearchResult(_Result):
    """engine.planning.search.search: the best layouts of the scenario's cluster and what the rules rejected."""
    n_gpus: int
    objective: str
    candidates_evaluated: int
    feasible: int
    best: list[Estimate]
    rejected: dict[str, int]
    pareto: list[ParetoPoint]
    cluster_search: ClusterSearch | None = None


class VendorRow(_Result):
    """One accelerator in a comparison: its best layout and figures (None where it has none), scores and rank."""
    accelerator: str
    name: str
    vendor: str
    software_stack: str
    precision: str | None
    fits: bool
    n_gpus: int | None = None
    layout: Layout | None = None
    wall_days: float | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None
    energy_mwh: float | None = None
    co2_t: float | None = None
    mfu: float | None = None
    memory_headroom: float | None = None
    meets_deadline: bool | None = None
    ecosystem_score: float
    decision_score: float | None = None
    rank: int | None
    why: str
    reason: str | None = None


class Comparison(_Result):
    """engine.planning.vendor.compare: every accelerator with its best layout, ranked by the weighted decision score."""
    recommendation: str | None
    why: str
    weights: dict[str, float]
    rows: list[VendorRow]


class Figure(_Result):
    value: float
    low: float
    high: float


class PlanFigures(_Result):
    """The headline figures of one option for the chosen stack (None: not known), each with its range."""
    wall_days: float | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None
    energy_mwh: float | None = None
    co2_t: float | None = None
    ranges: dict[str, Figure | None] | None = None


class PlanOption(PlanFigures):
    """One accelerator sized for the plan's target (met or not, and why not)."""
    accelerator: str
    name: str
    vendor: str
    precision: str | None
    met: bool
    n_gpus: int | None
    nodes: int | None
    global_batch_size: int | None
    price_known: bool | None = None
    reason: str | None = None


class Alternative(PlanFigures):
    """One size smaller or larger, the cheapest or fastest other accelerator, another vendor: with its text."""
    kind: str
    accelerator: str
    n_gpus: int
    text: str


class DeadlineChance(_Result):
    """The chance of meeting the deadline where the answer's range of days crosses it (None: beyond the measured
    10th-90th percentiles, said in text)."""
    chance: float | None
    text: str


class Lever(_Result):
    """What would bring the cheapest priced option within a money budget (owning, a commitment, a tuned stack, fewer
    tokens, a later deadline), with its text."""
    kind: str
    text: str
    meets_budget: bool
    cost_usd: float | None = None


class PlanAnswer(_Result):
    accelerator: str
    name: str
    vendor: str
    n_gpus: int
    nodes: int
    gpus_per_node: int
    global_batch_size: int
    layout: Layout
    wall_days: float
    gpu_hours: float
    cost_usd: float | None
    energy_mwh: float | None
    co2_t: float | None
    ranges: dict[str, Figure | None]
    deadline_chance: DeadlineChance | None = None


class Plan(_Result):
    """engine.planning.plan.plan: the cluster for a deadline or budget, with ranges and the nearest alternatives."""
    target: str
    ranked_by: str
    efficiency: str
    efficiency_explain: str
    answer: PlanAnswer | None
    alternatives: list[Alternative]
    options: list[PlanOption]
    reason: str | None = None
    levers: list[Lever] | None = None


def estimate(scenario: ScenarioLike) -> Estimate:
    """Memory, step time, throughput, MFU, days, GPU-hours, cost, energy and CO2 of a scenario with a layout."""
    from engine.planning.estimate import estimate as run
    return Estimate.model_validate(run(load(scenario)))


def explain(scenario: ScenarioLike) -> list:
    """Every term of the estimate (memory of the heaviest pipeline stage, step time, collectives, pipeline, FLOPs,
    whole run, goodput, cost, energy, CO2) as engine.planning.explain.Term: value, unit, the formula with the numbers
    used, the function that computes it and its source. engine.planning.explain.explain_text prints the same."""
    from engine.planning.explain import explain as run
    return run(load(scenario))


def search(scenario: ScenarioLike, top: int = 10, objective: str = "time", deadline_days: float | None = None,
           gpu_hour_budget: float | None = None, pareto_sizes: list[int] | None = None) -> SearchResult:
    """The best layouts for the scenario's cluster (its layout is ignored), the Pareto front over cluster sizes and,
    with a deadline or GPU-hour budget, the cluster size for it."""
    from engine.planning.search import search as run
    from engine.planning.sizing import cluster_search
    sc = load(scenario).model_copy(update={"layout": None})
    out = run(sc, top=top, objective=objective, pareto_sizes=pareto_sizes, summaries=False)
    return SearchResult.model_validate({**out, "cluster_search": cluster_search(sc, deadline_days, gpu_hour_budget,
                                                                                objective)})


def compare(scenario: ScenarioLike, weights: dict[str, float] | None = None, deadline_days: float | None = None,
            accelerators: list[str] | None = None, efficiency: str = "tuned") -> Comparison:
    """Every catalog accelerator (or the given ids) on the scenario, each with its own best layout, ranked."""
    from engine.planning.vendor import compare as run
    return Comparison.model_validate(run(load(scenario).model_copy(update={"layout": None}), weights=weights,
                                         deadline_days=deadline_days, accelerators=accelerators,
                                         efficiency=efficiency))


def plan(scenario: ScenarioLike, deadline_days: float | None = None, budget_usd: float | None = None,
         gpu_hours: float | None = None, vendor: str = "any", efficiency: str = "tuned",
         batch_range: tuple[int, int] | None = None, max_gpus: int | None = None) -> Plan:
    """The manager's answer for a deadline, a money budget or a GPU-hour budget, on at most max_gpus accelerators
    (see engine.planning.plan)."""
    from engine.planning.plan import plan as run
    return Plan.model_validate(run(load(scenario), deadline_days=deadline_days, budget_usd=budget_usd,
                                   gpu_hours=gpu_hours, vendor=vendor, efficiency=efficiency, batch_range=batch_range,
                                   max_gpus=max_gpus))


def as_dict(result: Any) -> dict:
    """A result as plain JSON-ready data."""
    return result.model_dump(mode="json") if isinstance(result, BaseModel) else result
