"""Cluster sizing: the cheapest cluster (in whole nodes - scale-up domains - of the accelerator) whose best layout
meets a deadline (and the budgets), or the fastest that stays within a money or GPU-hour budget.

The sizes tried are the GPU counts some layout can use (layout_sizes: tp x cp x pp x dp with each degree allowed by
the layout rules, in whole nodes), so 1,792 GPUs (7 x 256) is a size and 1,800 is not. Time to train falls with
cluster size until the global batch runs out of data-parallel room, while GPU-hours and cost grow with it, but
neither is monotonic: a size whose factors fit the heads, the batch and the layers well beats its neighbours. So the
search is coarse to fine: sizes double from one node until the target is met (or stops improving), the boundary is
bisected, and then every size within a factor of WINDOW either side of it is searched (a size with a large odd
factor - a deep pipeline - among powers of two); the cheapest (deadline) or fastest (budget) of those that meet the
target is the answer (target_key, the one ranking rule). tests/engine/test_plan.py checks that this finds the
optimum of a dense sweep of every node count on several models, accelerators and deadlines. Each size is searched in the quick layout space
(engine.planning.search, quick=True: the choices tuned runs use); the plan and the vendor comparison show that row
(full=False), the Layout search page's sizing searches the answer's size in the full space. Best layouts come from
the search's per-process cache (engine.planning.search.best_at), shared with the Pareto front, the whole run's
phases, the plan and the vendor comparison.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from engine.economics import ranges
from engine.physics import layout_rules
from engine.planning.results import ClusterSearch, Estimate, NearestFit
from engine.planning.search import MIN_TOKENS_PER_CP_RANK, best_at
from engine.scenario import Scenario, ScenarioError, divisors, rule_facts

MAX_GPUS = 1 << 20
WINDOW = 1.5        # the fine search covers every size within this factor of the coarse search's boundary
NEAR_CHEAPEST = 1.05  # sizes within 5% of the cheapest count as the cheapest when nothing meets a budget


@dataclass(frozen=True)
class Target:
    """What the cluster must achieve: finish within deadline_days (wall clock), and/or cost at most budget_usd,
    and/or use at most gpu_hours (billed: GPUs x wall hours), on at most max_gpus accelerators (what one has), with
    the engine's own figures (confidence None) or with this chance (0.5-0.9): the run's time read at that percentile
    of its regime's band (engine.economics.ranges.quantile), so an accelerator whose figures are less certain (an
    uncalibrated one gets the widest band) needs more room to meet the same target."""

    deadline_days: float | None = None
    budget_usd: float | None = None
    gpu_hours: float | None = None
    max_gpus: int | None = None
    confidence: float | None = None

    def __post_init__(self):
        if self.deadline_days is None and self.budget_usd is None and self.gpu_hours is None:
            raise ScenarioError([("target", "give a deadline in days, a budget in USD or a GPU-hour budget")])
        for name in ("deadline_days", "budget_usd", "gpu_hours", "max_gpus"):
            value = getattr(self, name)
            if value is not None and not (value > 0):
                raise ScenarioError([(name, "must be a positive number")])
        ranges.check_chance(self.confidence)

    def margin(self, row: Estimate) -> float:
        """The multiple of a row's time-proportional figures that must meet the target: 1 for the engine's own
        figures, else the percentile of the row's regime band at the target's chance."""
        return 1.0 if self.confidence is None else ranges.quantile(row.time_range, self.confidence)

    def days(self, row: Estimate, factor: float = 1.0) -> float:
        """A row's days as the target reads them: the stack's days at the target's chance (Target.margin)."""
        return _days(row, factor) * self.margin(row)

    def days_text(self, row: Estimate, factor: float = 1.0) -> str:
        """A row's days as the target reads them: '12.3 days', or '14.1 days at a 90% chance'."""
        return f"{self.days(row, factor):.1f} days" + ("" if self.confidence is None
                                                       else f" at {chance_words(self.confidence)}")

    @property
    def ranked_by(self) -> str:
        """What target_key minimises first: the cost for a deadline, the days for budgets alone."""
        return "cost" if self.deadline_days is not None else "days"

    def describe(self) -> str:
        parts = []
        if self.deadline_days is not None:
            parts.append(f"within {self.deadline_days:g} days")
        if self.budget_usd is not None:
            parts.append(f"for at most ${self.budget_usd:,.0f}")
        if self.gpu_hours is not None:
            parts.append(f"in at most {self.gpu_hours:,.0f} GPU-hours")
        text = " and ".join(parts)
        text += f" on at most {self.max_gpus:,} accelerators" if self.max_gpus is not None else ""
        return text + (f" with {chance_words(self.confidence)}" if self.confidence is not None else "")


def chance_words(confidence: float | None) -> str:
    """'a 90% chance', 'an 80% chance' ('' where no chance was asked)."""
    if confidence is None:
        return ""
    pct = f"{confidence:.0%}"
    return ("an " if pct.startswith("8") else "a ") + pct + " chance"


def billed_gpu_hours(row: Estimate, factor: float = 1.0) -> float:
    """GPUs x wall-clock hours (infinite for a run that never finishes)."""
    return row.n_gpus * row.days * 24.0 * factor


def meets_deadline(row: Estimate | None, target: Target, factor: float = 1.0) -> bool:
    """Within the deadline at the target's chance (Target.margin); a run that never finishes meets no deadline."""
    return row is not None and (target.deadline_days is None or target.days(row, factor) <= target.deadline_days)


def within_budget(row: Estimate | None, target: Target, factor: float = 1.0) -> bool:
    """Within the money budget (only a priced row can be) and the GPU-hour budget, at the target's chance."""
    if row is None:
        return False
    factor = factor * target.margin(row)
    if target.budget_usd is not None and (row.cost_usd is None or row.cost_usd * factor > target.budget_usd):
        return False
    return target.gpu_hours is None or billed_gpu_hours(row, factor) <= target.gpu_hours


def spend(row: Estimate, factor: float = 1.0) -> float:
    """What a deadline's answer minimises: the cost, or billed GPU-hours past every priced row where there is no
    price (so a priced option always ranks before an unpriced one)."""
    return row.cost_usd * factor if row.cost_usd is not None else 1e30 + billed_gpu_hours(row, factor)


def target_key(target: Target, days: float, cost_usd: float | None, n_gpus: int) -> tuple:
    """The one rule that ranks clusters for a target, smaller first: for a deadline the cheapest (by cost; an
    unpriced cluster by billed GPU-hours after every priced one), for budgets alone the fastest (then the cheaper);
    ties go to fewer GPUs. The sizing picks a size with it, the plan an accelerator and batch, the vendor
    comparison its ranks (engine.planning.vendor.rank_key), so they cannot disagree. days and cost_usd may carry the
    stack's efficiency factor: scaling them all alike keeps the order."""
    paid = (cost_usd is None, n_gpus * days * 24.0 if cost_usd is None else cost_usd)
    return (*paid, n_gpus) if target.ranked_by == "cost" else (days, *paid, n_gpus)


def ranked(row: Estimate, target: Target, factor: float = 1.0) -> tuple:
    """target_key of an estimate on the stack of this efficiency factor."""
    return target_key(target, _days(row, factor), None if row.cost_usd is None else row.cost_usd * factor, row.n_gpus)


def layout_sizes(sc: Scenario, max_gpus: int = MAX_GPUS) -> tuple[int, ...]:
    """GPU counts some layout can use, ascending: products tp x cp x pp x dp of degrees that the layout rules reading
    one degree each allow (tp divides the heads and widths and stays within a node, cp the sequence with at least
    MIN_TOKENS_PER_CP_RANK tokens per rank, dp the global batch, pp stages that split the layers), in whole nodes
    (or a fraction of one node that divides it). A count outside this set has no valid layout; one inside may still
    have none (the rules reading two degrees, memory)."""
    facts = rule_facts(sc, 1)
    return _layout_sizes(facts, sc.gpus_per_node, max_gpus)


@lru_cache(maxsize=256)
def _layout_sizes(facts, unit: int, max_gpus: int) -> tuple[int, ...]:
    def allowed(name, values, **fixed):
        ok = layout_rules.allowed(facts, layout_rules.columns(**{name: values}, **fixed),
                                  layout_rules.within((name, *fixed)))
        return np.array(values, dtype=np.int64)[ok]
    tp = allowed("tp", [d for d in divisors(facts.n_heads) if d <= unit and unit % d == 0])
    cp = allowed("cp", [d for d in divisors(facts.seq_len) if d == 1 or facts.seq_len // d >= MIN_TOKENS_PER_CP_RANK])
    dp = allowed("dp", divisors(facts.global_batch), mbs=1)
    pp = np.array([p for p in range(1, facts.n_layers + 1) if any(
        layout_rules.split_error(facts.n_layers, p, 1, a, b) is None for a, b in layout_rules.split_choices(facts.n_layers, p))],
        dtype=np.int64)
    n = np.unique(np.multiply.outer(np.multiply.outer(tp, cp), np.multiply.outer(pp, dp)).reshape(-1))
    n = n[n <= max_gpus]
    return tuple(int(x) for x in n if x % unit == 0 or (x < unit and unit % x == 0))


def node_counts(sc: Scenario, max_gpus: int = MAX_GPUS) -> tuple[int, ...]:
    """The node counts of layout_sizes (whole nodes only)."""
    unit = sc.gpus_per_node
    return tuple(n // unit for n in layout_sizes(sc, max_gpus) if n >= unit)


@dataclass(frozen=True)
class Sizing:
    """A sizing search's answer: the cluster size (None when no size meets the target), the best row on it, the
    neighbour (the next smaller size the layouts allow for a deadline, the next larger for a budget) with why it is
    not the answer, the sizes tried and, when not met, the reason."""

    met: bool
    n_gpus: int | None
    gpus_per_node: int
    best: Estimate | None
    neighbour: Estimate | None
    sizes_tried: tuple[int, ...]
    efficiency_factor: float
    reason: str | None = None
    neighbour_gpus: int | None = None
    neighbour_why: str | None = None

    @property
    def nodes(self) -> int | None:
        return None if self.n_gpus is None else -(-self.n_gpus // self.gpus_per_node)

@dataclass
class Ladder:
    """The cluster sizes one sizing search walks (node counts of node_counts, whole nodes of the accelerator, up to
    the target's max_gpus) and the quick-search best rows it has met on them (None: no layout fits)."""

    sc: Scenario
    objective: str
    max_gpus: int = MAX_GPUS
    unit: int = field(init=False)
    counts: tuple[int, ...] = field(init=False)
    tried: dict = field(init=False, default_factory=dict)      # n_gpus -> the quick search's best row (or None)

    def __post_init__(self):
        self.unit = self.sc.gpus_per_node
        self.counts = node_counts(self.sc, self.max_gpus)

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

    def window(self, i: int) -> range:
        """Ladder indices within WINDOW of the i-th size, either side: every odd factor's member near it."""
        n = self.counts[i]
        return range(int(np.searchsorted(self.counts, n / WINDOW, side="right")),
                     int(np.searchsorted(self.counts, n * WINDOW, side="left")))


def size_for(sc: Scenario, target: Target, objective: str = "time", factor: float = 1.0, full: bool = True) -> Sizing:
    """The cluster size for a target: with a deadline the cheapest that meets it (and the budgets,
    cheapest_for_deadline), with budgets only the fastest within them (fastest_within_budget). factor scales
    time-proportional figures (the typical-stack efficiency); full=False keeps the quick search's rows (the plan and
    the vendor comparison show those), full=True shows the full search's best on the sizes chosen (the Layout search
    page)."""
    if target.deadline_days is not None:
        return cheapest_for_deadline(sc, target, objective, factor, full)
    return fastest_within_budget(sc, target, objective, factor, full)


def cheapest_for_deadline(sc: Scenario, target: Target, objective: str = "time", factor: float = 1.0,
                          full: bool = True) -> Sizing:
    """The cheapest cluster (by cost, or billed GPU-hours without a price) whose best layout meets
    target.deadline_days and its budgets. Coarse: sizes grow from one node until the deadline is met (_grow) and the
    boundary is narrowed between the last miss and the first hit (_narrow). Fine: every size within WINDOW of that
    boundary is searched, and the cheapest that meets the target wins (ties: fewer GPUs). With full=True the full
    search's best then steps down the sizes while a smaller one still meets the target and ranks first, so the size
    below the answer never meets it for less (the quick search can miss the layout that makes it)."""
    ladder = Ladder(sc, objective, target.max_gpus or MAX_GPUS)
    if not ladder.counts:
        return _result(False, None, None, None, ladder, factor, reason="no cluster size can hold a layout of this model")
    lo, hi = _grow(ladder, target, factor)
    ok = lambda r: meets_deadline(r, target, factor) and within_budget(r, target, factor)
    if hi is None:
        days = lambda r: _days(r, factor)
        fastest = min((r for r in ladder.tried.values() if r is not None), key=days, default=None)
        limit = f" on at most {target.max_gpus:,} accelerators" if target.max_gpus else ""
        return _result(False, None, fastest, None, ladder, factor,
                       reason=(f"no cluster size{limit} meets {target.deadline_days:g} days: the fastest found is "
                               f"{target.days_text(fastest, factor)} on {fastest.n_gpus:,} GPUs" if fastest else
                               "no cluster size tried can hold the model"))
    hi = _narrow(ladder, target, factor, lo, hi)
    if hi == 0 and ladder.unit > 1:              # a fraction of one node may be enough for a small model
        for n in (d for d in (1, 2, 4) if d < ladder.unit and ladder.unit % d == 0):
            if ok(ladder.on(n)):
                return _finish(ladder, n, n // 2 or None, factor, ok, full, target)
    meeting = [i for i in ladder.window(hi) if ok(ladder.at(i))]
    if not meeting:                              # the budgets exclude every size that meets the deadline
        cheapest = min((r for r in ladder.tried.values() if meets_deadline(r, target, factor)),
                       key=lambda r: spend(r, factor))
        return _result(False, None, cheapest, None, ladder, factor,
                       reason=f"no cluster size meets {target.describe()}: the cheapest that meets the deadline is "
                              f"{cheapest.n_gpus:,} GPUs, {_spend_text(cheapest, factor)}")
    j = min(meeting, key=lambda i: ranked(ladder.at(i), target, factor))
    if full:                     # the full search may find a layout the quick one missed on a smaller size
        shown = lambda i: ladder.shown(ladder.gpus(i), True)
        while j > 0 and ok(shown(j - 1)) and ranked(shown(j - 1), target, factor) < ranked(shown(j), target, factor):
            j -= 1
    return _finish(ladder, ladder.gpus(j), ladder.gpus(j - 1) if j > 0 else None, factor, ok, full, target)


def _spend_text(r: Estimate, factor: float) -> str:
    return (f"${r.cost_usd * factor:,.0f}" if r.cost_usd is not None else "no price") + \
        f", {billed_gpu_hours(r, factor):,.0f} GPU-hours, {_days(r, factor):.1f} days"


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
        ratio = 2.0 if r is None else max(2.0, target.days(r, factor) / target.deadline_days)
        i = max(i + 1, ladder.index_of(ladder.counts[i] * 2 ** np.ceil(np.log2(ratio))))
    return lo, None


def _narrow(ladder: Ladder, target: Target, factor: float, lo: int, hi: int) -> int:
    """The smallest ladder index between a miss (lo) and a hit (hi) that meets the deadline: proportional guesses
    from the miss's days, alternating with bisection."""
    step = 0
    while hi - lo > 1:
        r_lo = ladder.tried.get(ladder.gpus(lo)) if lo >= 0 else None
        guess = (ladder.index_of(ladder.counts[lo] * target.days(r_lo, factor) / target.deadline_days)
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


def fastest_within_budget(sc: Scenario, target: Target, objective: str = "time", factor: float = 1.0,
                          full: bool = True) -> Sizing:
    """The fastest cluster within target's money and/or GPU-hour budget (only a priced row meets a money budget).
    Coarse: cost and GPU-hours grow with size, so sizes double from one node until one is over budget (or spend
    starts rising past the cheapest size) and the boundary is bisected. Fine: every size within WINDOW of the
    largest within budget is searched and the fastest within budget wins (ties: the cheaper)."""
    ladder = Ladder(sc, objective, target.max_gpus or MAX_GPUS)
    ok = lambda r: within_budget(r, target, factor)
    cost_of = lambda r: r.cost_usd if target.budget_usd is not None else billed_gpu_hours(r)
    i_in, i_out, i, previous = None, None, 0, None
    while i < len(ladder.counts):
        r = ladder.at(i)
        if ok(r):
            i_in = i
        elif r is not None:
            i_out = i
            # past the cheapest size (tiny clusters pay for long checkpoint writes), spend only grows from here
            rising = previous is not None and cost_of(previous) is not None and cost_of(r) is not None \
                and cost_of(r) > cost_of(previous)
            if i_in is not None or rising or (target.budget_usd is not None and r.cost_usd is None):
                break
        previous = r if r is not None else previous
        i = max(i + 1, ladder.index_of(ladder.counts[i] * 2))
    if i_in is None:
        cheapest = _practical_cheapest(ladder, i, factor)
        return _result(False, None if cheapest is None else cheapest.n_gpus, cheapest, None, ladder, factor,
                       reason=f"no cluster size trains {target.describe()}" + (
                           "" if cheapest is None else
                           f": {cheapest.n_gpus:,} GPUs (the fastest size within {NEAR_CHEAPEST - 1:.0%} of the "
                           f"cheapest) need {_spend_text(cheapest, factor)}"
                           if cheapest.cost_usd is not None or target.budget_usd is None else
                           ": no price for this accelerator, so no money budget can be checked: enter one"))
    lo, hi = i_in, i_out if i_out is not None and i_out > i_in else len(ladder.counts)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(ladder.at(mid)):
            lo = mid
        else:
            hi = mid
    within = [k for k in ladder.window(lo) if ok(ladder.at(k))]
    j = min(within, key=lambda k: ranked(ladder.at(k), target, factor))
    return _finish(ladder, ladder.gpus(j), ladder.gpus(j + 1) if j + 1 < len(ladder.counts) else None, factor, ok,
                   full, target)


def _practical_cheapest(ladder: Ladder, i: int, factor: float) -> Estimate | None:
    """The size to name when nothing is within the budget: the fastest of the sizes that cost within NEAR_CHEAPEST of
    the cheapest (spend is nearly flat in size, and the cheapest - one or two nodes of a large model - takes years).
    Sizes keep doubling from the i-th while they stay that cheap."""
    found = lambda: [r for r in ladder.tried.values() if r is not None and r.wall_days is not None]
    if not found():
        return None
    paid = lambda r: r.cost_usd if r.cost_usd is not None else billed_gpu_hours(r)      # no price: GPU-hours
    floor = lambda: min(paid(r) for r in found())
    while i < len(ladder.counts):
        r = ladder.at(i)
        if r is not None and r.wall_days is not None and paid(r) > NEAR_CHEAPEST * floor():
            break
        i = max(i + 1, ladder.index_of(ladder.counts[i] * 2))
    return min((r for r in found() if paid(r) <= NEAR_CHEAPEST * floor()), key=lambda r: r.days)


def _days(r: Estimate, factor: float) -> float:
    return r.days * factor


def _finish(ladder: Ladder, n: int, neighbour: int | None, factor: float, ok, full: bool,
            target: Target | None = None) -> Sizing:
    best = ladder.shown(n, full)
    if not ok(best) and ok(ladder.on(n)):       # keep the answer the target was met with
        best = ladder.tried[n]
    near = None if neighbour is None else (ladder.shown(neighbour, full) if full else ladder.on(neighbour))
    why = None if neighbour is None or target is None else jump_reason(ladder, n, best, neighbour, near, target, factor)
    return _result(ok(best), n, best, near, ladder, factor, neighbour_gpus=neighbour, neighbour_why=why)


def jump_reason(ladder: Ladder, n: int, best: Estimate, other: int, row: Estimate | None, target: Target,
                factor: float) -> str:
    """Why the neighbouring size the layouts allow is not the answer: which rule leaves the sizes between without a
    layout, whether any layout fits in memory, and which target it breaks (or how much more it costs or takes)."""
    lo, hi = sorted((n, other))
    gap = (hi - lo) // ladder.unit - 1
    parts = []
    if gap > 0:
        sc = ladder.sc
        parts.append(f"no size between {lo:,} and {hi:,} GPUs has a layout (tp x cp x pp x dp must make the GPU count "
                     f"with tp dividing the {sc.arch.n_heads} heads, cp the sequence, dp the batch of "
                     f"{sc.training.global_batch_size:,} and pp stages splitting the {sc.arch.n_layers} layers)")
    if row is None:
        parts.append(f"on {other:,} GPU{'s' if other > 1 else ''} no layout fits in memory")
    elif row.wall_days is None:
        parts.append(f"on {other:,} GPUs {row.problem}")
    else:
        L = row.layout
        shape = f"its best layout is tp={L.tp}, cp={L.cp}, pp={L.pp}, dp={L.dp}"
        if target.deadline_days is not None and not meets_deadline(row, target, factor):
            parts.append(f"{shape}, {target.days_text(row, factor)}: misses the deadline by "
                         f"{target.days(row, factor) - target.deadline_days:.1f} days")
        elif not within_budget(row, target, factor):
            parts.append(f"{shape}: {_spend_text(row, factor)}, over the budget")
        elif target.deadline_days is not None:
            parts.append(f"{shape}: it meets the target but costs more ({_spend_text(row, factor)})")
        else:
            parts.append(f"{shape}: within the budget but slower ({_days(row, factor):.1f} days)")
    return "; ".join(parts)


def _result(met, n, best, near, ladder: Ladder, factor, reason=None, neighbour_gpus=None, neighbour_why=None) -> Sizing:
    return Sizing(met=met, n_gpus=n, gpus_per_node=ladder.unit, best=best, neighbour=near,
                  sizes_tried=tuple(sorted(ladder.tried)), efficiency_factor=factor, reason=reason,
                  neighbour_gpus=neighbour_gpus, neighbour_why=neighbour_why)


def nearest_sizes(sc: Scenario, n_gpus: int, how_many: int = 2) -> list[dict]:
    """Cluster sizes near n_gpus (whole nodes whose count the layouts can use) that have a layout for this model and
    batch, nearest first, with the best layout's days: what to suggest when n_gpus itself has none."""
    unit = sc.gpus_per_node
    candidates = sorted((k * unit for k in node_counts(sc)), key=lambda n: (abs(n - n_gpus), n))
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
                   objective: str = "time", confidence: float | None = None) -> ClusterSearch | None:
    """The layout search's cluster sizing: the smallest cluster for a deadline (and GPU-hour budget), or the largest
    within the budget, met with the plan's chance (confidence, Target); None when neither is given."""
    if deadline_days is None and gpu_hour_budget is None:
        return None
    s = size_for(sc, Target(deadline_days=deadline_days, gpu_hours=gpu_hour_budget, confidence=confidence), objective)
    return ClusterSearch(met=s.met, n_gpus=s.n_gpus, nodes=s.nodes, gpus_per_node=s.gpus_per_node, best=s.best,
                         neighbour=s.neighbour, neighbour_gpus=s.neighbour_gpus, neighbour_why=s.neighbour_why,
                         sizes_tried=list(s.sizes_tried), efficiency_factor=s.efficiency_factor,
                         **({"reason": s.reason} if s.reason else {}), deadline_days=deadline_days,
                         gpu_hour_budget=gpu_hour_budget, confidence=confidence)


def nearest_fit(sc: Scenario) -> NearestFit | None:
    """For a layout that does not fit: the fastest layout that fits on the same cluster, else the nearest cluster
    size where one fits; None when nothing fits near."""
    n = sc.cluster.n_gpus
    best = best_at(sc, n)
    if best is not None:
        return NearestFit(n_gpus=n, layout=best.layout, wall_days=best.wall_days)
    sizes = nearest_sizes(sc, n, how_many=1)
    return NearestFit(**{k: sizes[0][k] for k in ("n_gpus", "layout", "wall_days")}) if sizes else None
