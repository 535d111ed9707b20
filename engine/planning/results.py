"""The engine's results as frozen, typed models: one layout's Estimate (what the search ranks, the sizing compares and
every output prints), the layout search's SearchResult with its Pareto front and cluster sizing, the vendor
comparison and the plan. The headline figures are typed attributes; a figure that is not known, or that a layout
which does not fit or a run which never finishes does not have, is None, with `problem` saying why.

Each model's JSON form is `as_json()`: the keys the engine built, in the same order (a field it did not set, such as
an estimate's nearest_fit in a search row, is left out), so the command line prints the same document."""
from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.economics.ranges import RegimeBand
from engine.scenario import Layout


class Result(BaseModel):
    # the typed fields are the contract; a detail block added later rides along as an extra field
    model_config = ConfigDict(extra="allow", frozen=True)

    def as_json(self) -> dict:
        """Plain JSON-ready data: the fields that were set, in declaration order."""
        return self.model_dump(mode="json", exclude_unset=True)


class MemoryGiB(Result):
    """Memory per GPU on the fullest pipeline stage, GiB."""
    weights: float
    gradients: float
    optimizer_states: float
    activations: float
    other: float
    total: float


class NearestFit(Result):
    """For a layout that does not fit: the fastest layout that does, on this cluster or the nearest size."""
    n_gpus: int
    layout: Layout
    wall_days: float | None


class Estimate(Result):
    """One layout's figures (engine.planning.evaluation.row; engine.planning.estimate.estimate adds nearest_fit and
    assumptions). A layout that does not fit has no days, GPU-hours, cost, energy or CO2 (None) and says why in
    `problem`; so does a run that never finishes (failures outpace recovery: wall_days None)."""
    layout: Layout
    memory_gib: MemoryGiB
    memory_detail_gib: dict[str, float]
    memory_capacity_gib: float
    worst_stage: str = Field(description="first, middle or last pipeline stage; only without pipeline parallelism")
    fits: bool
    micro_batches_per_step: int
    step_time_s: float = Field(description="one optimizer step")
    step_time_range_s: dict[str, float] = Field(description="low and high: the step time's range, from the measured "
                                                            "error of the layout's regime (time_range)")
    tokens_per_s: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    mfu: float = Field(description="model FLOP utilisation, causal attention counted (current Megatron-LM)")
    hfu: float = Field(description="hardware FLOP utilisation: recomputed work included")
    model_tflops_per_gpu_full_square: float
    hardware_tflops_per_gpu_full_square: float
    mfu_full_square: float = Field(description="the same with the full attention square (PaLM, Megatron-LM 2024)")
    flop_convention: dict[str, str]
    time_breakdown_s: dict[str, float]
    params_total: int
    params_active: int
    train_days: float | None = Field(description="compute days of the whole run: steps, phases, evaluation "
                                                 "(None: the layout does not fit)")
    whole_run: dict[str, Any]
    gpu_hours: float | None
    wall_days: float | None = Field(description="with failures, checkpoints and restarts (None: the layout does not "
                                                "fit, or the run never finishes: failures outpace recovery)")
    goodput: float | None
    cost_usd: float | None
    energy_mwh: float | None
    co2_t: float | None
    problem: str | None = Field(description="why days, cost, energy and CO2 are None")
    reliability: dict[str, Any]
    cost: dict[str, Any]
    energy: dict[str, Any]
    framework: dict[str, Any] | None = Field(default=None, description=(
        "the software stack the figures are for (engine.frameworks): id, why (the scenario's choice or the vendor's "
        "MLPerf default), and whether its level is calibrated on this accelerator and precision"))
    time_range: RegimeBand = Field(description="the regime (stack, accelerator family, precision, dense/MoE, "
                                               "data-parallel sharding, scale) and the band of published / predicted "
                                               "time every time-proportional range uses (engine.economics.ranges)")
    fine_tuning: dict[str, Any] | None = Field(default=None, description=(
        "the job's method, trainable and frozen parameters, tokens trained (dataset x epochs), and what offloading "
        "keeps in CPU memory per GPU against what the host has (engine.physics.finetune)"))
    nearest_fit: NearestFit | None = Field(default=None, description="for a layout that does not fit: the fastest "
                                                                     "layout that does, here or at the nearest size")
    assumptions: dict[str, Any] | None = None
    warnings: list[str] | None = Field(default=None, description="plausibility and memory-headroom warnings "
                                                                 "(engine.planning.sanity)")

    @property
    def n_gpus(self) -> int:
        """The GPUs it runs on (its layout's)."""
        return self.layout.n_gpus

    @property
    def never_finishes(self) -> bool:
        """The layout fits but failures come faster than the run recovers: it has no wall time."""
        return self.fits and self.wall_days is None

    @property
    def days(self) -> float:
        """Wall-clock days, the one figure deadlines, rankings and sizing compare: infinite where the run never
        finishes or the layout does not fit."""
        return math.inf if self.wall_days is None else self.wall_days

    @property
    def memory_headroom(self) -> float:
        """The share of the accelerator's memory left free on the fullest stage."""
        return 1 - self.memory_gib.total / self.memory_capacity_gib


class FitOption(Result):
    """A way to make a job that fits nowhere on its cluster fit (engine.planning.alternatives.fitting_alternatives):
    train LoRA or QLoRA adapters instead, offload to a host with more memory, or use more GPUs; with its figures."""
    option: str = Field(description="lora, qlora, offload or more_gpus")
    fits: bool
    changes: dict[str, Any] = Field(default_factory=dict, description=(
        "the scenario fields the option changes, by dotted path (e.g. training.method, training.precision, "
        "cluster.host_memory_gb_per_gpu, cluster.n_gpus); the layout it was searched with is `layout`"))
    text: str = Field(description="what changes and what it gives, in words")
    n_gpus: int | None = None
    layout: Layout | None = None
    memory_gib: float | None = Field(default=None, description="per GPU, on the fullest pipeline stage")
    host_memory_gb_per_gpu: float | None = Field(default=None, description="CPU memory per GPU the offloaded states need")
    step_time_s: float | None = None
    wall_days: float | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None


class ParetoPoint(Result):
    """The best layout of one cluster size on the time front (sizes whose run never finishes are on none)."""
    n_gpus: int
    train_days: float | None
    wall_days: float
    gpu_hours: float | None
    cost_usd: float | None
    layout: Layout


class ClusterSearch(Result):
    """engine.planning.sizing.cluster_search: the smallest cluster for a deadline (and GPU-hour budget), or the
    largest within the budget; best on that size, the neighbour that misses, and why when none meets it."""
    met: bool
    n_gpus: int | None
    nodes: int | None
    gpus_per_node: int
    best: Estimate | None
    neighbour: Estimate | None
    neighbour_gpus: int | None = None
    neighbour_why: str | None = Field(default=None, description="why the neighbouring size is not the answer")
    sizes_tried: list[int]
    efficiency_factor: float
    reason: str | None = None
    deadline_days: float | None = None
    gpu_hour_budget: float | None = None
    confidence: float | None = Field(default=None, description="the chance the size meets the target with, read off "
                                                               "its regime's band (None: on the engine's figures)")


class SearchResult(Result):
    """engine.planning.search.search: the best layouts of the scenario's cluster, what the rules rejected, the Pareto
    front over cluster sizes and (added by the callers given a deadline or budget) the cluster sizing."""
    n_gpus: int
    objective: str
    candidates_evaluated: int
    model_evaluated: int
    feasible: int
    best: list[Estimate]
    rejected: dict[str, int]
    by_dimension: dict[str, Any] | None = None
    problem: str | None = Field(default=None, description="layouts fit, but no run on this cluster finishes: why")
    pareto: list[ParetoPoint]
    stack: dict[str, Any] | None = Field(default=None, description=(
        "the software stack searched (Estimate.framework): the scenario's, or where it names none the one the planner "
        "chose among those fitted for the accelerator, with why (planner_choice)"))
    cluster_search: ClusterSearch | None = None

    @property
    def never_finishes(self) -> bool:
        """Layouts fit, but failures outpace recovery on every one: there is no best layout."""
        return not self.best and self.feasible > 0


class AcceleratorEntry(Result):
    """Which accelerator a plan's option or a comparison's row is about: its vendor and software ecosystem, the
    precision it trains in (with why), whether its figures use the cluster's measured efficiencies, and whether it
    ships."""
    accelerator: str
    name: str
    vendor: str
    software_stack: str
    precision: str | None
    precision_note: str
    measured_efficiencies: bool = Field(description="its figures use the cluster's measured efficiencies (the store's "
                                                    "operator-trusted runs, or the caller's own); whether the stack's "
                                                    "level is fitted for it is framework.calibrated")
    status: str = Field(default="shipping", description="shipping, or announced: figures from the vendor's announcement")


class VendorEntry(AcceleratorEntry):
    """A comparison row's accelerator and how its evaluation came out: whether a layout fits and on how many GPUs,
    whether it meets the question's target, and why it cannot be ranked (None: it can)."""
    fits: bool = False
    n_gpus: int | None = None
    meets_target: bool | None = Field(default=None, description="meets the question's target (None: no target, a "
                                                                "fixed cluster)")
    reason: str | None = None


class VendorRow(VendorEntry):
    """One accelerator in a comparison: its best layout and figures (None where it has none: no layout fits, the run
    never finishes, no price or power figure), the scores that ranked it, its rank (None: not ranked, see reason) and
    why, in words."""
    layout: Layout | None = None
    train_days: float | None = None
    wall_days: float | None = None
    gpu_hours: float | None = None
    mfu: float | None = None
    cost_usd: float | None = None
    energy_mwh: float | None = None
    co2_t: float | None = None
    memory_gib: float | None = Field(default=None, description="per GPU, on the fullest pipeline stage")
    memory_capacity_gib: float | None = None
    memory_headroom: float | None = None
    ranges: dict[str, Figure | None] | None = Field(default=None, description="each headline figure's range for the "
                                                                             "chosen stack, as the plan's")
    framework: dict[str, Any] | None = Field(default=None, description="the best layout's software stack and whether "
                                                                      "its level is calibrated (Estimate.framework)")
    time_range: RegimeBand | None = Field(default=None, description="the best layout's regime band (its ranges)")
    ecosystem_score: float
    ecosystem_levels: dict[str, str]
    scores: dict[str, float | None] | None = None
    unknown: list[str] | None = None
    decision_score: float | None = None
    rank: int | None
    why: str


class Comparison(Result):
    """engine.planning.vendor.compare: every accelerator with its best layout, ranked by the weighted decision score
    on a fixed cluster, or sized for the plan's question (target) and ranked by the plan's rule (ranked_by)."""
    mode: str
    n_gpus: int | None
    deadline_days: float | None
    budget_usd: float | None = None
    gpu_hours: float | None = None
    max_gpus: int | None = None
    confidence: float | None = Field(default=None, description="the chance each sized row meets the target with "
                                                               "(None: on the engine's own figures), as the plan's")
    target: str | None = Field(default=None, description="the question in words, as the plan's target")
    ranked_by: str = Field(default="score", description="score (no target), cost (a deadline) or days (budgets)")
    ecosystem_sources: dict[str, Any]
    weights: dict[str, float]
    recommendation: str | None
    why: str
    rows: list[VendorRow]

    @property
    def top(self) -> VendorRow | None:
        """The recommended accelerator's row."""
        return next((r for r in self.rows if r.accelerator == self.recommendation), None)


class Figure(Result):
    """A time-proportional figure with its range for the chosen software stack (engine.economics.ranges.band)."""
    value: float
    low: float
    high: float


class PlanOption(Result):
    """One accelerator sized for the plan's target (met or not, and why not), with its figures where it has a best
    layout (None: not known, or the run never finishes)."""
    accelerator: str
    name: str
    vendor: str
    precision: str | None
    met: bool
    n_gpus: int | None
    nodes: int | None
    global_batch_size: int | None
    wall_days: float | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None
    energy_mwh: float | None = None
    co2_t: float | None = None
    ranges: dict[str, Figure | None] | None = None
    price_known: bool | None = None
    stack: str | None = Field(default=None, description="the software stack of the option's best layout "
                                                        "(engine.frameworks id)")
    reason: str | None = None


class Alternative(Result):
    """One size smaller or larger, the cheapest or fastest other accelerator, another vendor, and where the answer
    borrows another accelerator's level the cheapest option whose own level is fitted: with its text."""
    kind: str
    accelerator: str
    n_gpus: int
    wall_days: float | None
    gpu_hours: float | None
    cost_usd: float | None
    energy_mwh: float | None
    co2_t: float | None
    ranges: dict[str, Figure | None]
    text: str


class PlanAnswer(Result):
    """The chosen accelerator and cluster (whole nodes), its best layout and figures with their ranges, and the full
    estimate of that layout."""
    deadline_chance: dict[str, Any] | None = Field(default=None, description="where the range of days crosses the "
                                                  "deadline: the chance of meeting it (engine.economics.ranges)")
    accelerator: str
    name: str
    vendor: str
    precision: str
    n_gpus: int
    nodes: int
    gpus_per_node: int
    global_batch_size: int
    layout: Layout
    mfu: float
    memory_gib: float = Field(description="per GPU, on the fullest pipeline stage")
    memory_capacity_gib: float
    wall_days: float
    gpu_hours: float
    cost_usd: float | None
    energy_mwh: float | None
    co2_t: float | None
    ranges: dict[str, Figure | None]
    stack: dict[str, Any] | None = Field(default=None, description=(
        "the software stack of the answer (Estimate.framework): the scenario's, its vendor's default, or the one the "
        "planner chose, with why (chosen_by, planner_choice)"))
    estimate: Estimate


class Plan(Result):
    """engine.planning.plan.plan: the cluster for a deadline or budget, with ranges and the nearest alternatives
    (answer None and the reason when no accelerator meets the target)."""
    target: str
    answer: PlanAnswer | None
    alternatives: list[Alternative]
    efficiency: str
    efficiency_explain: str
    vendor: str
    options: list[PlanOption]
    reason: str | None = None
    ranked_by: str | None = Field(default=None, description="cost (for a deadline) or days (for a budget)")
    confidence: float | None = Field(default=None, description="the chance each option meets the target with, read "
                                                               "off its regime's band (None: on the engine's own "
                                                               "figures)")
    levers: list[dict[str, Any]] | None = Field(default=None, description="when nothing meets a money budget: what "
                                                                         "would make it work")
