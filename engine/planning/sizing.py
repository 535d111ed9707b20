"""Cluster sizing: the smallest cluster (in whole nodes - scale-up domains - of the accelerator) whose best layout
meets a deadline, or the largest that stays within a money or GPU-hour budget.

Time to train falls with cluster size until the global batch runs out of data-parallel room, while GPU-hours and cost
grow with it. Sizes double from one node until the target is met (or stops improving), then the node count is
bisected between the last miss and the first hit, so any count of nodes the layouts allow can be the answer, not
only powers of two. Each size is searched in the quick layout space (engine.planning.search, quick=True: the choices tuned
runs use); the answer's size, and the one node smaller, are then searched in the full space. Best layouts are cached
per scenario and size for the process, so the Pareto front, the deadline search, the plan and the vendor comparison
reuse each other's searches.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from engine.scenario import Scenario, ScenarioError

MAX_GPUS = 1 << 20
CACHE_SIZE = 4096


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


def billed_gpu_hours(row: dict, factor: float = 1.0) -> float:
    return row["layout"]["tp"] * row["layout"]["pp"] * row["layout"]["dp"] * row["layout"]["cp"] * \
        (row.get("wall_days") or row["train_days"]) * 24.0 * factor


def meets_deadline(row: dict | None, target: Target, factor: float = 1.0) -> bool:
    return row is not None and (target.deadline_days is None
                                or (row.get("wall_days") or row["train_days"]) * factor <= target.deadline_days)


def within_budget(row: dict | None, target: Target, factor: float = 1.0) -> bool:
    if row is None:
        return False
    if target.budget_usd is not None and (row.get("cost_usd") is None or row["cost_usd"] * factor > target.budget_usd):
        return False
    return target.gpu_hours is None or billed_gpu_hours(row, factor) <= target.gpu_hours


@lru_cache(maxsize=CACHE_SIZE)
def _best_json(scenario_json: str, n_gpus: int, objective: str, quick: bool) -> dict | None:
    from engine.planning.search import _best, row, search_cluster
    sc = Scenario.model_validate_json(scenario_json)
    try:
        cs = search_cluster(sc, n_gpus, quick=quick)
    except ScenarioError:                     # a size whose candidate space is over the search's limit
        return None
    idx = _best(cs, objective, 1)
    return row(cs.ctx, cs.ev, cs.layouts, int(idx[0])) if len(idx) else None


def best_at(sc: Scenario, n_gpus: int, objective: str = "time", quick: bool = False) -> dict | None:
    """The best layout's estimate on n_gpus (None if no layout fits); cached for the process."""
    bare = sc.model_copy(update={"layout": None, "cluster": sc.cluster.model_copy(update={"n_gpus": n_gpus})})
    return _best_json(bare.model_dump_json(), n_gpus, objective, quick)


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


def size_for(sc: Scenario, target: Target, objective: str = "time", factor: float = 1.0, full: bool = True) -> dict:
    """The cluster size for a target: the smallest that meets the deadline (and the budgets), or with budgets only
    the largest within them. factor scales time-proportional figures (the typical-stack efficiency); full=False keeps
    the quick search's rows (the vendor comparison re-searches only what it shows in full).

    Returns met, n_gpus, nodes, best (the best row on that size), neighbour (the next smaller size for a deadline, the
    next larger for a budget: how far it misses), sizes_tried and, when not met, the reason."""
    unit = sc.gpus_per_node
    ladder = node_counts(MAX_GPUS // unit)
    tried: dict[int, dict | None] = {}

    def at(i: int) -> dict | None:
        n = ladder[i] * unit
        if n not in tried:
            tried[n] = best_at(sc, n, objective, quick=True)
        return tried[n]

    def index_of(nodes: float) -> int:
        return min(len(ladder) - 1, max(0, int(np.searchsorted(ladder, nodes))))

    days = lambda r: (r.get("wall_days") or r["train_days"]) * factor
    if target.deadline_days is not None:
        ok = lambda r: meets_deadline(r, target, factor) and within_budget(r, target, factor)
        lo, hi = -1, None                       # ladder indices: lo misses (or holds no layout), hi meets
        i = 0                                   # from one node, so the answer does not depend on the scenario's size
        previous, stalled = None, 0
        # grow by powers of two (the sizes power-of-two batches and heads use best) until the deadline is met,
        # jumping by the time still missing; stop when doubling stops helping (the batch ran out of room)
        for _ in range(24):
            r = at(i)
            if meets_deadline(r, target, factor):
                hi = i
                break
            lo = i
            if r is not None:
                stalled = stalled + 1 if previous is not None and days(r) >= 0.98 * days(previous) else 0
                previous = r if previous is None or days(r) < days(previous) else previous
            if stalled >= 2 or i >= len(ladder) - 1:
                break
            ratio = 2.0 if r is None else max(2.0, days(r) / target.deadline_days)
            i = max(i + 1, index_of(ladder[i] * 2 ** np.ceil(np.log2(ratio))))
        # then the smallest size between the last miss and the hit: proportional guesses and bisection
        step = 0
        while hi is not None and hi - lo > 1:
            r_lo = tried.get(ladder[lo] * unit) if lo >= 0 else None
            guess = index_of(ladder[lo] * days(r_lo) / target.deadline_days) if (r_lo and step % 2 == 0) else (lo + hi) // 2
            i = min(hi - 1, max(lo + 1, guess))
            # a size where no layout fits (every one would use the memory headroom) says nothing about the sizes
            # around it: judge it by the nearest smaller size above the last miss that has a layout
            k = next((k for k in range(i, lo, -1) if at(k) is not None), None)
            if k is not None and meets_deadline(at(k), target, factor):
                hi = k
            else:
                lo = i
            step += 1
        if hi is None:
            fastest = min((r for r in tried.values() if r is not None), key=days, default=None)
            return _result(False, None, fastest, None, tried, unit, factor,
                           reason=(f"no cluster size meets {target.deadline_days:g} days: the fastest found is "
                                   f"{days(fastest):.1f} days on {_gpus(fastest):,} GPUs" if fastest else
                                   "no cluster size tried can hold the model"))
        if hi == 0 and unit > 1:                 # a fraction of one node may be enough for a small model
            for n in (d for d in (1, 2, 4) if d < unit and unit % d == 0):
                tried[n] = best_at(sc, n, objective, quick=True)
                if meets_deadline(tried[n], target, factor):
                    return _finish(sc, n, n // 2 or None, tried, objective, factor, ok, full, unit)
        below = lambda j: next((k for k in range(j - 1, -1, -1) if at(k) is not None), None)
        j, near_j = hi, below(hi)
        best = best_at(sc, ladder[j] * unit, objective) if full else at(j)
        near = None if near_j is None else (best_at(sc, ladder[near_j] * unit, objective) if full else at(near_j))
        for _ in range(4):                       # the full search can meet the deadline a size below the quick one
            if near is None or not ok(near):
                break
            j, best, near_j = near_j, near, below(near_j)
            near = None if near_j is None else (best_at(sc, ladder[near_j] * unit, objective) if full else at(near_j))
        if not ok(best) and ok(at(j)):
            best = at(j)
        return _result(ok(best), ladder[j] * unit, best, near, tried, unit, factor)
    # budgets only: the largest (fastest) cluster within them; cost and GPU-hours grow with size
    ok = lambda r: within_budget(r, target, factor)
    i_in, i_out, i, previous = None, None, 0, None
    spend = lambda r: r.get("cost_usd") if target.budget_usd is not None else billed_gpu_hours(r)
    while i < len(ladder):
        r = at(i)
        if within_budget(r, target, factor):
            i_in = i
        elif r is not None:
            i_out = i
            # past the cheapest size (tiny clusters pay for long checkpoint writes), spend only grows from here
            rising = previous is not None and spend(previous) is not None and spend(r) is not None \
                and spend(r) > spend(previous)
            if i_in is not None or rising:
                break
        previous = r if r is not None else previous
        i = max(i + 1, index_of(ladder[i] * 2))
    if i_in is None:
        cheapest = min((r for r in tried.values() if r is not None),
                       key=lambda r: r.get("cost_usd") or billed_gpu_hours(r), default=None)
        return _result(False, None, cheapest, None, tried, unit, factor,
                       reason=f"no cluster size trains {target.describe()}" + (
                           "" if cheapest is None else f": the smallest that holds the model needs "
                           f"{billed_gpu_hours(cheapest, factor):,.0f} GPU-hours"
                           + (f" and ${cheapest['cost_usd'] * factor:,.0f}" if cheapest.get("cost_usd") else "")))
    lo, hi = i_in, i_out if i_out is not None and i_out > i_in else len(ladder)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if within_budget(at(mid), target, factor):
            lo = mid
        else:
            hi = mid
    above = ladder[hi] * unit if hi < len(ladder) else None
    return _finish(sc, ladder[lo] * unit, above, tried, objective, factor, ok, full, unit)


def _gpus(r: dict) -> int:
    lay = r["layout"]
    return lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"]


def _finish(sc, n, neighbour, tried, objective, factor, ok, full, unit) -> dict:
    best = best_at(sc, n, objective) if full else tried[n]
    if not ok(best) and ok(tried.get(n)):         # keep the answer the target was met with
        best = tried[n]
    near = (best_at(sc, neighbour, objective) if full else tried.get(neighbour)) if neighbour else None
    return _result(ok(best), n, best, near, tried, unit, factor)


def _result(met, n, best, near, tried, unit, factor, reason=None) -> dict:
    out = {"met": met, "n_gpus": n, "nodes": None if n is None else -(-n // unit), "gpus_per_node": unit,
           "best": best, "neighbour": near, "sizes_tried": sorted(tried), "efficiency_factor": factor}
    if reason:
        out["reason"] = reason
    return out


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
            out.append({"n_gpus": n, "nodes": n // unit, "wall_days": best.get("wall_days") or best["train_days"],
                        "layout": best["layout"]})
        if len(out) == how_many:
            break
    return out
