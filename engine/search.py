"""Layout search: every combination of tp, cp, pp (+ interleaving), ep, dp, micro-batch, ZeRO stage, sequence
parallelism and recompute for a cluster, evaluated at once with the same vectorised formulas as the single
estimate; the rejected space summarised by reason, the best layouts ranked by an objective, a Pareto front over
cluster sizes, and the smallest cluster that meets a deadline or a GPU-hour budget.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.estimate import Context, context, evaluate, row
from engine.layouts import RECOMPUTE, Layouts, violations
from engine.scenario import Scenario, ScenarioError, divisors

OBJECTIVES = {"time": "wall_s", "cost": "cost_usd", "energy": "energy_mwh"}
SPAN_REASON = "tp, cp or ep group would span nodes (allow_span_nodes to permit)"
MEMORY_REASON = "does not fit in accelerator memory"
MIN_TOKENS_PER_CP_RANK = 512     # context parallelism finer than this is not enumerated
MAX_CANDIDATES = 5_000_000       # ~20x the 405B-on-16,384-GPU search; bounds memory (~0.4 GB of layout arrays)


def enumerate_layouts(sc: Scenario, n_gpus: int) -> Layouts:
    """The full candidate space for n_gpus: each (tp, cp, pp) whose product divides n_gpus, dp the rest, crossed with
    every interleaving, expert-parallel size, micro-batch, ZeRO stage, sequence parallelism and recompute choice."""
    arch, tr = sc.arch, sc.training
    divs = divisors(n_gpus)
    tps = [d for d in divs if d <= arch.n_heads]
    cps = [d for d in divs if d == 1 or tr.seq_len // d >= MIN_TOKENS_PER_CP_RANK]
    pps = [d for d in divs if d <= arch.n_layers]
    mbss = divisors(tr.global_batch_size)
    eps = [d for d in divs if arch.n_experts % d == 0] if arch.is_moe else [1]
    rcs = [0, 1, 2] if tr.attention == "standard" else [0, 2]   # flash attention already recomputes its scores
    triples = [(t, c, p) for t in tps for c in cps for p in pps if n_gpus % (t * c * p) == 0]
    per_triple = lambda t, p: (len([v for v in divisors(arch.n_layers) if p * v <= arch.n_layers]) if p > 1 else 1) \
        * len(mbss) * len(eps) * 4 * (2 if t > 1 else 1) * len(rcs)
    total = sum(per_triple(t, p) for t, _, p in triples)
    if total > MAX_CANDIDATES:
        raise ScenarioError([("cluster.n_gpus", f"{n_gpus:,} GPUs with a global batch of {tr.global_batch_size:,} give "
                                                f"{total:,} layouts to try, over the search's limit of {MAX_CANDIDATES:,}; "
                                                "choose a cluster size and batch with fewer divisors (powers of two)")])
    blocks = []
    for t, c, p in triples:
        vs = [v for v in divisors(arch.n_layers) if p * v <= arch.n_layers] if p > 1 else [1]
        sps = [False, True] if t > 1 else [False]
        grid = np.array(np.meshgrid(vs, mbss, eps, [0, 1, 2, 3], sps, rcs, indexing="ij")).reshape(6, -1)
        blocks.append(np.vstack([np.full((3, grid.shape[1]), [[t], [c], [p]]), grid]))
    a = np.concatenate(blocks, axis=1)
    tp, cp, pp = a[0], a[1], a[2]
    return Layouts(tp=tp, pp=pp, dp=n_gpus // (tp * cp * pp), cp=cp, ep=a[5], mbs=a[4], v=a[3], zero=a[6],
                   sp=a[7].astype(bool), rc=a[8])


def span_violation(lay: Layouts, gpus_per_node: int) -> np.ndarray:
    """True where a tensor-, context- or expert-parallel group would not sit inside one node."""
    inside = lambda size: (size <= gpus_per_node) & (gpus_per_node % size == 0)
    return ~(inside(lay.tp) & inside(lay.tp * lay.cp) & inside(lay.tp * lay.ep))


def _scenario_for(sc: Scenario, n_gpus: int) -> Scenario:
    return sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"n_gpus": n_gpus}), "layout": None})


def _objective(ev: dict, objective: str) -> np.ndarray:
    key = OBJECTIVES[objective]
    if key not in ev:
        key = "train_s" if objective == "time" else key
    if key not in ev:
        raise ScenarioError([("objective", f"ranking by {objective} needs the {objective} model, which is not available")])
    return ev[key]


@dataclass(frozen=True)
class ClusterSearch:
    """Every enumerated layout for one cluster size, why each was rejected, and the evaluation of the valid ones."""

    ctx: Context
    layouts: Layouts          # all enumerated candidates
    reason: np.ndarray        # index into `reasons` of the first rule broken, or -1 when feasible
    reasons: list[str]
    valid: np.ndarray         # indices (into layouts) of the candidates that went through the memory/time model
    ev: dict                  # evaluation of layouts.take(valid)

    @property
    def valid_layouts(self) -> Layouts:
        return self.layouts.take(self.valid)

    @property
    def feasible(self) -> np.ndarray:
        return self.ev["fits"] if len(self.valid) else np.zeros(0, bool)

    def rejected(self, mask: np.ndarray | None = None) -> dict[str, int]:
        codes = self.reason if mask is None else self.reason[mask]
        counts = np.bincount(codes[codes >= 0], minlength=len(self.reasons))
        return {r: int(c) for r, c in zip(self.reasons, counts) if c}


def search_cluster(sc: Scenario, n_gpus: int, allow_span_nodes: bool = False) -> ClusterSearch:
    """Enumerate all layouts for one cluster size, check the rules, and evaluate memory and time of the valid ones."""
    scn = _scenario_for(sc, n_gpus)
    ctx = context(scn)
    lay = enumerate_layouts(scn, n_gpus)
    rules = violations(scn.arch, scn.training, n_gpus, lay)
    rules[SPAN_REASON] = np.zeros(len(lay), bool) if allow_span_nodes else span_violation(lay, ctx.hw.gpus_per_node)
    reasons = list(rules) + [MEMORY_REASON]
    reason = np.full(len(lay), -1)
    for code, bad in enumerate(rules.values()):
        reason[(reason < 0) & bad] = code
    valid = np.flatnonzero(reason < 0)
    ev = evaluate(ctx, lay.take(valid)) if len(valid) else {}
    if len(valid):
        reason[valid[~ev["fits"]]] = len(reasons) - 1
    return ClusterSearch(ctx=ctx, layouts=lay, reason=reason, reasons=reasons, valid=valid, ev=ev)


def _best(cs: ClusterSearch, objective: str, k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Indices into cs.valid of the k best feasible layouts (optionally among valid layouts selected by mask)."""
    ok = cs.feasible if mask is None else cs.feasible & mask
    if not ok.any():
        return np.array([], dtype=int)
    score = np.where(ok, _objective(cs.ev, objective), np.inf)
    order = np.lexsort((cs.ev["mem_total"], score))[:k]
    return order[np.isfinite(score[order])]


DIMENSIONS = {"tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "dp": "dp", "zero_stage": "zero",
              "micro_batch_size": "mbs", "virtual_stages": "v", "sequence_parallel": "sp", "recompute": "rc"}


def explain(cs: ClusterSearch, objective: str = "time", **fixed) -> dict:
    """Why not a layout with these values (e.g. tp=16)? Counts, rejection reasons and the best such layout."""
    mask = np.ones(len(cs.layouts), bool)
    for name, value in fixed.items():
        if name not in DIMENSIONS:
            raise ScenarioError([(name, f"unknown layout dimension; choose from {', '.join(DIMENSIONS)}")])
        if name == "recompute":
            value = RECOMPUTE.index(value)
        mask &= getattr(cs.layouts, DIMENSIONS[name]) == value
    out = {"candidates": int(mask.sum()), "feasible": int((cs.reason[mask] < 0).sum()), "rejected": cs.rejected(mask)}
    if out["candidates"] == 0:
        out["note"] = "no candidate has these values: they do not divide the cluster or are outside the enumerated space"
    best = _best(cs, objective, 1, mask[cs.valid])
    if len(best):
        out["best"] = row(cs.ctx, cs.ev, cs.valid_layouts, int(best[0]))
    return out


def _by_dimension(cs: ClusterSearch, objective: str) -> dict:
    """For every value of every dimension: candidates, feasible, best objective value and rejection reasons."""
    score = np.full(len(cs.layouts), np.inf)
    if len(cs.valid):
        score[cs.valid] = np.where(cs.feasible, _objective(cs.ev, objective), np.inf)
    out = {}
    for name, attr in DIMENSIONS.items():
        values = getattr(cs.layouts, attr)
        rows = {}
        for value in np.unique(values):
            sel = values == value
            best = float(score[sel].min())
            key = RECOMPUTE[int(value)] if name == "recompute" else (bool(value) if name == "sequence_parallel" else int(value))
            rows[str(key)] = {"candidates": int(sel.sum()), "feasible": int((cs.reason[sel] < 0).sum()),
                              "best": best if np.isfinite(best) else None, "rejected": cs.rejected(sel)}
        out[name] = rows
    return out


def size_ladder(max_gpus: int = 1 << 20) -> list[int]:
    """Power-of-two cluster sizes. Counted in GPUs, not nodes: a 72-GPU NVL72 rack gives every whole-rack size a
    factor of 9 that power-of-two batches and heads cannot use, so real jobs run 2^k GPUs over partial racks.
    (The search also tries the 1.5 x 2^k size between two of these when it brackets the answer.)"""
    return [1 << k for k in range(max_gpus.bit_length()) if (1 << k) <= max_gpus]


def _best_row(cs: ClusterSearch, objective: str) -> dict | None:
    idx = _best(cs, objective, 1)
    return row(cs.ctx, cs.ev, cs.valid_layouts, int(idx[0])) if len(idx) else None


def search(sc: Scenario, top: int = 10, objective: str = "time", deadline_days: float | None = None,
           gpu_hour_budget: float | None = None, allow_span_nodes: bool = False, pareto_sizes: list[int] | None = None,
           progress=None) -> dict:
    """Search the scenario's cluster (its layout is ignored); see the module docstring.

    progress: optional callable(fraction, message) for the UI."""
    if objective not in OBJECTIVES:
        raise ScenarioError([("objective", f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")])
    note = progress or (lambda fraction, message: None)
    n = sc.cluster.n_gpus
    note(0.0, f"evaluating layouts for {n} GPUs")
    cs = search_cluster(sc, n, allow_span_nodes)
    missing = {"cost": cs.ctx.price.missing, "energy": cs.ctx.power.missing}.get(objective)
    if missing:
        raise ScenarioError([("objective", f"cannot rank by {objective}: {missing}")])
    best = _best(cs, objective, top)
    rows = [row(cs.ctx, cs.ev, cs.valid_layouts, int(i)) for i in best]
    out = {
        "n_gpus": n,
        "objective": objective,
        "candidates_evaluated": len(cs.layouts),
        "model_evaluated": len(cs.valid),
        "feasible": int(cs.feasible.sum()),
        "best": rows,
        "rejected": cs.rejected(),
        "by_dimension": _by_dimension(cs, objective),
    }
    sizes = pareto_sizes if pareto_sizes is not None else sorted({s for s in (n // 4, n // 2, n, 2 * n) if s >= 1})
    front = []
    for k, size in enumerate(sizes):
        note(0.2 + 0.5 * k / max(len(sizes), 1), f"Pareto front: {size} GPUs")
        r = (rows[0] if rows else None) if size == n else _best_row(search_cluster(sc, size, allow_span_nodes), objective)
        if r:
            front.append({"n_gpus": size, "train_days": r["train_days"], "wall_days": r.get("wall_days", r["train_days"]),
                          "gpu_hours": r["gpu_hours"], "cost_usd": r.get("cost_usd"), "layout": r["layout"]})
    front.sort(key=lambda p: p["n_gpus"])
    out["pareto"] = [p for i, p in enumerate(front) if all(q["wall_days"] > p["wall_days"] for q in front[:i])]
    if deadline_days is not None or gpu_hour_budget is not None:
        note(0.75, "searching cluster sizes")
        out["cluster_search"] = cluster_size_search(sc, objective, deadline_days, gpu_hour_budget, allow_span_nodes)
    note(1.0, "done")
    return out


def cluster_size_search(sc: Scenario, objective: str, deadline_days: float | None, gpu_hour_budget: float | None,
                        allow_span_nodes: bool) -> dict:
    """Smallest cluster size whose best layout meets a deadline (wall days) and/or a GPU-hour budget.

    Time to train falls with cluster size until the global batch runs out of data-parallel room, while GPU-hours
    grow with it. Walk power-of-two sizes from the scenario's own size (down while the target is met, up while it
    is missed and time still improves), then try the 1.5x size between the last miss and the first hit."""
    ladder = size_ladder()
    g = sc.gpus_per_node
    cache: dict[int, dict | None] = {}

    def best(size):
        if size not in cache:
            try:
                cache[size] = _best_row(search_cluster(sc, size, allow_span_nodes), objective)
            except ScenarioError:            # a size whose candidate space is over the limit: not a candidate size
                cache[size] = None
        return cache[size]

    def days(r):
        return r.get("wall_days", r["train_days"])

    def meets(r):
        return r is not None and (deadline_days is None or days(r) <= deadline_days)

    i = min(range(len(ladder)), key=lambda j: abs(ladder[j] - sc.cluster.n_gpus))
    hit = None
    if meets(best(ladder[i])):
        hit = i
        while hit > 0 and meets(best(ladder[hit - 1])):
            hit -= 1
    else:
        stalled = 0
        while i + 1 < len(ladder):
            prev, cand = best(ladder[i]), best(ladder[i + 1])
            i += 1
            if meets(cand):
                hit = i
                break
            improving = cand is not None and (prev is None or days(cand) < 0.98 * days(prev))
            stalled = 0 if improving else stalled + 1
            if stalled >= 2:
                break
    tried = {size: r for size, r in cache.items() if r is not None}
    result = {"sizes_tried": sorted(cache), "deadline_days": deadline_days, "gpu_hour_budget": gpu_hour_budget}
    if hit is None:
        fastest = min(tried, key=lambda size: days(tried[size]), default=None)
        result.update({"met": False, "n_gpus": None, "best": tried.get(fastest),
                       "reason": (f"no cluster size meets {deadline_days:g} days: the fastest found is "
                                  f"{days(tried[fastest]):.1f} days on {fastest} GPUs" if fastest else
                                  "no cluster size tried can hold the model")})
        return result
    size = ladder[hit]
    between = size * 3 // 4                        # 1.5 x the size that missed, if it fills whole nodes
    if hit > 0 and size >= 4 and (between % g == 0 or between < g) and meets(best(between)):
        size = between
    r = best(size)
    result.update({"sizes_tried": sorted(cache), "n_gpus": size, "best": r, "met": True})
    if gpu_hour_budget is not None and r["gpu_hours"] > gpu_hour_budget:
        result.update({"met": False, "reason": f"the smallest size that meets the target needs {r['gpu_hours']:,.0f} "
                                               f"GPU-hours, over the {gpu_hour_budget:,.0f} budget; GPU-hours grow "
                                               "with cluster size, so no larger cluster meets both"})
    return result
