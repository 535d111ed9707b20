"""Cluster sizing: the smallest cluster (in whole nodes - scale-up domains - of the accelerator) whose best layout
meets a deadline, or the largest that stays within a money or GPU-hour budget.

Time to train falls with cluster size until the global batch runs out of data-parallel room, while GPU-hours and cost
grow with it. Sizes double from one node until the target is met (or stops improving), then the node count is
bisected between the last miss and the first hit, so any count of nodes the layouts allow can be the answer, not
only powers of two. Each size is searched in the quick layout space (engine.planning.search, quick=True: the choices tuned
runs use); the answer's size, and the one node smaller, are then searched in the full space. Best layouts come from
the search's per-process cache (engine.planning.search.best_at), shared with the Pareto front, the whole run's
phases, the plan and the vendor comparison.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from engine.planning.results import ClusterSearch, Estimate, NearestFit
from engine.planning.search import best_at
from engine.scenario import Scenario, ScenarioError

MAX_GPUS = 1 << 20


@dataclass(frozen=True)
class Target:
    """What the cluster must achieve: finish within deadline_days (wall clock), and/or cost at most budget_usd,
    and/or use at most gpu_hours (billed: GPUs x wall hours)."""

    deadline_days: float | None = None
    budget_usd: float | None = None
    gpu_hours: float | None = None

    def __post_init__(self):
        if self.deadline_days is None and self.budget_usd is None and self.gpu_hours is None:
            raise ScenarioError([("target", "give a deadline in days, a budget in USD or a GPU-hour budget")])
        for name in ("deadline_days", "budget_usd", "gpu_hours"):
            value = getattr(self, name)
            if value is not None and not (value > 0):
                raise ScenarioError([(name, "must be a positive number")])

    def describe(self) -> str:
        parts = []
        if self.deadline_days is not None:
            parts.append(f"within {self.deadline_days:g} days")
        if self.budget_usd is not None:
            parts.append(f"for at most ${self.budget_usd:,.0f}")
        if self.gpu_hours is not None:
            parts.append(f"in at most {self.gpu_hours:,.0f} GPU-hours")
        return " and ".join(parts)


def billed_gpu_hours(row: Estimate, factor: float = 1.0) -> float:
    """GPUs x wall-clock hours (infinite for a run that never finishes)."""
    return row.n_gpus * row.days * 24.0 * factor


def meets_deadline(row: Estimate | None, target: Target, factor: float = 1.0) -> bool:
    """A run that never finishes meets no deadline."""
    return row is not None and (target.deadline_days is None or row.days * factor <= target.deadline_days)


def within_budget(row: Estimate | None, target: Target, factor: float = 1.0) -> bool:
    if row is None:
        return False
    if target.budget_usd is not None and (row.cost_usd is None or row.cost_usd * factor > target.budget_usd):
        return False
    return target.gpu_hours is None or billed_gpu_hours(row, factor) <= target.gpu_hours


@lru_cache(maxsize=64)
def node_counts(max_nodes: int) -> tuple[int, ...]:
    """Node counts a cluster can have: every count of the form 2^a 3^b 5^c (1, 2, 3, 4, 5, 6, 8, 9, 10, 12, ...), the
    sizes whose divisors give tensor, pipeline, context and data parallelism room; other counts (7, 11, 13, ...
    nodes) leave a prime factor that no power-of-two batch or head count can use."""
    out, p2 = [], 1
    while p2 <= max_nodes:
        p3 = p2
        while p3 <= max_nodes:
            p5 = p3
            while p5 <= max_nodes:
                out.append(p5)
                p5 *= 5
            p3 *= 3
        p2 *= 2
    return tuple(sorted(out))


@dataclass(frozen=True)
class Sizing:
    """A sizing search's answer: the cluster size (None when no size meets the target), the best row on it, the
    neighbour (the next smaller size for a deadline, the next larger for a budget: how far it misses), the sizes
    tried and, when not met, the reason."""

    met: bool
    n_gpus: int | None
    gpus_per_node: int
    best: Estimate | None
    neighbour: Estimate | None
    sizes_tried: tuple[int, ...]
    efficiency_factor: float
    reason: str | None = None

    @property
    def nodes(self) -> int | None:
        return None if self.n_gpus is None else -(-self.n_gpus // self.gpus_per_node)

@dataclass
class Ladder:
    """The cluster sizes one sizing search walks (node counts of node_counts, whole nodes of the accelerator) and the
    quick-search best rows it has met on them (None: no layout fits)."""

    sc: Scenario
    objective: str
    unit: int = field(init=False)
    counts: tuple[int, ...] = field(init=False)
    tried: dict = field(init=False, default_factory=dict)      # n_gpus -> the quick search's best row (or None)

    def __post_init__(self):
        self.unit = self.sc.gpus_per_node
        self.counts = node_counts(MAX_GPUS // self.unit)

    def gpus(self, i: int) -> int:
        return self.counts[i] * self.unit

    def at(self, i: int) -> Estimate | None:
        """The quick search's best row on the i-th size."""
        return self.on(self.gpus(i))

    def on(self, n: int) -> Estimate | None:
        if n not in self.tried:
            self.tried[n] = best_at(self.sc, n, self.objective, quick=True)
        return self.tried[n]

    def shown(self, n: int, full: bool) -> Estimate | None:
        """The row shown for n GPUs: the full search's best, or with full=False the quick one's."""
        return best_at(self.sc, n, self.objective) if full else self.tried.get(n)

    def index_of(self, nodes: float) -> int:
        return min(len(self.counts) - 1, max(0, int(np.searchsorted(self.counts, nodes))))


def size_for(sc: Scenario, target: Target, objective: str = "time", factor: float = 1.0, full: bool = True) -> Sizing:
    """The cluster size for a target: with a deadline the smallest that meets it (and the budgets,
    smallest_for_deadline), with budgets only the largest within them (largest_within_budget). factor scales
    time-proportional figures (the typical-stack efficiency); full=False keeps the quick search's rows (the vendor
    comparison re-searches only what it shows in full)."""
    if target.deadline_days is not None:
        return smallest_for_deadline(sc, target, objective, factor, full)
    return largest_within_budget(sc, target, objective, factor, full)


def smallest_for_deadline(sc: Scenario, target: Target, objective: str = "time", factor: float = 1.0,
                          full: bool = True) -> Sizing:
    """The smallest cluster whose best layout meets target.deadline_days (and its budgets): sizes grow from one node
    until the deadline is met (_grow), the node count is then narrowed between the last miss and the first hit
    (_narrow), and the answer and the size below it are searched in full, which can meet the deadline a size lower."""
    ladder = Ladder(sc, objective)
    lo, hi = _grow(ladder, target, factor)
    if hi is None:
        days = lambda r: _days(r, factor)
        fastest = min((r for r in ladder.tried.values() if r is not None), key=days, default=None)
        return _result(False, None, fastest, None, ladder, factor,
                       reason=(f"no cluster size meets {target.deadline_days:g} days: the fastest found is "
                               f"{days(fastest):.1f} days on {fastest.n_gpus:,} GPUs" if fastest else
                               "no cluster size tried can hold the model"))
    hi = _narrow(ladder, target, factor, lo, hi)
    ok = lambda r: meets_deadline(r, target, factor) and within_budget(r, target, factor)
    if hi == 0 and ladder.unit > 1:              # a fraction of one node may be enough for a small model
        for n in (d for d in (1, 2, 4) if d < ladder.unit and ladder.unit % d == 0):
            if meets_deadline(ladder.on(n), target, factor):
                return _finish(ladder, n, n // 2 or None, factor, ok, full)
    below = lambda j: next((k for k in range(j - 1, -1, -1) if ladder.at(k) is not None), None)
    shown = lambda k: ladder.shown(ladder.gpus(k), True) if full else ladder.at(k)
    j, near_j = hi, below(hi)
    best = shown(j)
    near = None if near_j is None else shown(near_j)
    for _ in range(4):                           # the full search can meet the deadline a size below the quick one
        if near is None or not ok(near):
            break
        j, best, near_j = near_j, near, below(near_j)
        near = None if near_j is None else shown(near_j)
    if not ok(best) and ok(ladder.at(j)):
        best = ladder.at(j)
    return _result(ok(best), ladder.gpus(j), best, near, ladder, factor)


def _grow(ladder: Ladder, target: Target, factor: float) -> tuple[int, int | None]:
    """(the last ladder index that misses the deadline or holds no layout, -1 if none; the first that meets it, None
    if none does). From one node, so the answer does not depend on the scenario's size, by powers of two (the sizes
    power-of-two batches and heads use best), jumping by the time still missing; stops when doubling stops helping
    (the batch ran out of data-parallel room)."""
    lo, i, previous, stalled = -1, 0, None, 0
    days = lambda r: _days(r, factor)
    for _ in range(24):
        r = ladder.at(i)
        if meets_deadline(r, target, factor):
            return lo, i
        lo = i
        if r is not None:
            stalled = stalled + 1 if previous is not None and days(r) >= 0.98 * days(previous) else 0
            previous = r if previous is None or days(r) < days(previous) else previous
        if stalled >= 2 or i >= len(ladder.counts) - 1:
            break
        ratio = 2.0 if r is None else max(2.0, days(r) / target.deadline_days)
        i = max(i + 1, ladder.index_of(ladder.counts[i] * 2 ** np.ceil(np.log2(ratio))))
    return lo, None


def _narrow(ladder: Ladder, target: Target, factor: float, lo: int, hi: int) -> int:
    """The smallest ladder index between a miss (lo) and a hit (hi) that meets the deadline: proportional guesses
    from the miss's days, alternating with bisection."""
    step = 0
    while hi - lo > 1:
        r_lo = ladder.tried.get(ladder.gpus(lo)) if lo >= 0 else None
        guess = (ladder.index_of(ladder.counts[lo] * _days(r_lo, factor) / target.deadline_days)
                 if (r_lo and step % 2 == 0) else (lo + hi) // 2)
        i = min(hi - 1, max(lo + 1, guess))
        # a size where no layout fits (every one would use the memory headroom) says nothing about the sizes
        # around it: judge it by the nearest smaller size above the last miss that has a layout
        k = next((k for k in range(i, lo, -1) if ladder.at(k) is not None), None)
        if k is not None and meets_deadline(ladder.at(k), target, factor):
            hi = k
        else:
            lo = i
        step += 1
    return hi


def largest_within_budget(sc: Scenario, target: Target, objective: str = "time", factor: float = 1.0,
                          full: bool = True) -> Sizing:
    """The largest (fastest) cluster within target's money and/or GPU-hour budget: cost and GPU-hours grow with size,
    so sizes double from one node until one is over budget (or spend starts rising past the cheapest size), then the
    node count is bisected between the last size within budget and the first over it."""
    ladder = Ladder(sc, objective)
    ok = lambda r: within_budget(r, target, factor)
    spend = lambda r: r.cost_usd if target.budget_usd is not None else billed_gpu_hours(r)
    i_in, i_out, i, previous = None, None, 0, None
    while i < len(ladder.counts):
        r = ladder.at(i)
        if ok(r):
            i_in = i
        elif r is not None:
            i_out = i
            # past the cheapest size (tiny clusters pay for long checkpoint writes), spend only grows from here
            rising = previous is not None and spend(previous) is not None and spend(r) is not None \
                and spend(r) > spend(previous)
            if i_in is not None or rising:
                break
        previous = r if r is not None else previous
        i = max(i + 1, ladder.index_of(ladder.counts[i] * 2))
    if i_in is None:
        cheapest = min((r for r in ladder.tried.values() if r is not None),
                       key=lambda r: r.cost_usd or billed_gpu_hours(r), default=None)
        return _result(False, None, cheapest, None, ladder, factor,
                       reason=f"no cluster size trains {target.describe()}" + (
                           "" if cheapest is None else f": the smallest that holds the model needs "
                           f"{billed_gpu_hours(cheapest, factor):,.0f} GPU-hours"
                           + (f" and ${cheapest.cost_usd * factor:,.0f}" if cheapest.cost_usd else "")))
    lo, hi = i_in, i_out if i_out is not None and i_out > i_in else len(ladder.counts)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(ladder.at(mid)):
            lo = mid
        else:
            hi = mid
    above = ladder.gpus(hi) if hi < len(ladder.counts) else None
    return _finish(ladder, ladder.gpus(lo), above, factor, ok, full)


def _days(r: Estimate, factor: float) -> float:
    return r.days * factor


def _finish(ladder: Ladder, n: int, neighbour: int | None, factor: float, ok, full: bool) -> Sizing:
    best = ladder.shown(n, full)
    if not ok(best) and ok(ladder.tried.get(n)):  # keep the answer the target was met with
        best = ladder.tried[n]
    near = ladder.shown(neighbour, full) if neighbour else None
    return _result(ok(best), n, best, near, ladder, factor)


def _result(met, n, best, near, ladder: Ladder, factor, reason=None) -> Sizing:
    return Sizing(met=met, n_gpus=n, gpus_per_node=ladder.unit, best=best, neighbour=near,
                  sizes_tried=tuple(sorted(ladder.tried)), efficiency_factor=factor, reason=reason)


def nearest_sizes(sc: Scenario, n_gpus: int, how_many: int = 2) -> list[dict]:
    """Cluster sizes near n_gpus (whole nodes whose count the layouts can use) that have a layout for this model and
    batch, nearest first, with the best layout's days: what to suggest when n_gpus itself has none."""
    unit = sc.gpus_per_node
    ladder = node_counts(max(1, MAX_GPUS // unit))
    candidates = sorted((k * unit for k in ladder), key=lambda n: (abs(n - n_gpus), n))
    out = []
    for n in candidates[:12]:
        if n == n_gpus:
            continue
        best = best_at(sc, n, quick=True)
        if best is not None:
            out.append({"n_gpus": n, "nodes": n // unit, "wall_days": best.wall_days,
                        "layout": best.layout.model_dump()})
        if len(out) == how_many:
            break
    return out


def cluster_search(sc: Scenario, deadline_days: float | None = None, gpu_hour_budget: float | None = None,
                   objective: str = "time") -> ClusterSearch | None:
    """The layout search's cluster sizing: the smallest cluster for a deadline (and GPU-hour budget), or the largest
    within the budget; None when neither is given."""
    if deadline_days is None and gpu_hour_budget is None:
        return None
    s = size_for(sc, Target(deadline_days=deadline_days, gpu_hours=gpu_hour_budget), objective)
    return ClusterSearch(met=s.met, n_gpus=s.n_gpus, nodes=s.nodes, gpus_per_node=s.gpus_per_node, best=s.best,
                         neighbour=s.neighbour, sizes_tried=list(s.sizes_tried), efficiency_factor=s.efficiency_factor,
                         **({"reason": s.reason} if s.reason else {}), deadline_days=deadline_days,
                         gpu_hour_budget=gpu_hour_budget)


def nearest_fit(sc: Scenario) -> NearestFit | None:
    """For a layout that does not fit: the fastest layout that fits on the same cluster, else the nearest cluster
    size where one fits; None when nothing fits near."""
    n = sc.cluster.n_gpus
    best = best_at(sc, n)
    if best is not None:
        return NearestFit(n_gpus=n, layout=best.layout, wall_days=best.wall_days)
    sizes = nearest_sizes(sc, n, how_many=1)
    return NearestFit(**{k: sizes[0][k] for k in ("n_gpus", "layout", "wall_days")}) if sizes else None
