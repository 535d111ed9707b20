"""The manager's answer: a deadline or a budget in; the cluster (accelerator, vendor, size in whole nodes, layout),
wall days, cost, energy and CO2 out, each with its range, and the nearest alternatives.

For every accelerator of the chosen vendor(s) the cluster is sized for the target (engine.planning.sizing: the cheapest
size meeting a deadline, the fastest within a budget, on at most max_gpus), each size with the best layout of the quick
layout space that sized it: the vendor comparison shows the same row for the same accelerator and size, and the
estimate of that layout gives the same figures. The answer is the cheapest
option that meets a deadline (a priced one before any without a price, which is listed with 'no price: enter one'),
or the fastest within a budget (only a priced option can be within a money budget); where the range of days crosses
the deadline, the chance of meeting it. When nothing meets a budget, the cheapest priced option and what would make
the budget work (owning the cluster, a committed-use price, a tuned stack, fewer tokens, a later deadline).
Alternatives: the neighbouring size and why it is not the answer, the cheapest and the fastest other accelerator
that also meets the target (how much slower or dearer), the best of another vendor, and where the answer borrows
another accelerator's level (uncalibrated: the widest range) the cheapest option whose own level is fitted, with both
ranges of days. Optionally the global batch
may vary within a range the user accepts (tokens fixed): bigger clusters need bigger batches to keep their
data-parallel ranks busy.
"""
from __future__ import annotations

from dataclasses import replace

from engine.economics import ranges
from engine.catalog import load_catalog
from engine.scenario import Scenario, ScenarioError
from engine.planning.results import Estimate, Plan
from engine.planning.sizing import Target, billed_gpu_hours, ranked, size_for, spend
from engine.planning.vendor import Option, batches_of, sized_option

HEADLINE = ("wall_days", "cost_usd", "energy_mwh", "co2_t")


def _figures(row: Estimate, factor: float, efficiency: str) -> dict:
    """The headline figures of a row for the chosen stack, each with its range from the row's regime (None: not known,
    or the run never finishes)."""
    finishes = row.wall_days is not None
    base = {"wall_days": row.wall_days, "gpu_hours": billed_gpu_hours(row) if finishes else None,
            "cost_usd": row.cost_usd, "energy_mwh": row.energy_mwh, "co2_t": row.co2_t}
    out = {k: None if v is None else v * factor for k, v in base.items()}
    out["ranges"] = {k: ranges.band(v, row.time_range, efficiency) for k, v in base.items()}
    return out


def plan(sc: Scenario, deadline_days: float | None = None, budget_usd: float | None = None,
         gpu_hours: float | None = None, vendor: str = "any", efficiency: str = "tuned",
         batch_range: tuple[int, int] | None = None, accelerators: list[str] | None = None,
         objective: str = "time", progress=None, max_gpus: int | None = None,
         calibrations: dict[str, dict] | None = None, confidence: float | None = None) -> Plan:
    """See the module docstring. vendor: 'any', 'same' (the scenario's accelerator only) or a vendor name; max_gpus:
    at most this many accelerators (what one has); calibrations: accelerator id -> measured cluster overrides, as
    engine.planning.vendor.compare takes them (the scenario's own cluster settings go with its accelerator);
    confidence: meet the target with this chance (0.5-0.9, read off each option's regime band) instead of on the
    engine's own figures (None)."""
    target = Target(deadline_days, budget_usd, gpu_hours, max_gpus, confidence)
    factor = ranges.factor(efficiency)
    cat = load_catalog()
    if accelerators:
        unknown = [a for a in accelerators if a not in cat.accelerators]
        if unknown:
            raise ScenarioError([("accelerators", f"unknown ids {unknown}")])
        pool = [cat.accelerator(a) for a in accelerators]
    elif vendor == "same":
        pool = [cat.accelerator(sc.cluster.accelerator)]
    elif vendor == "any":
        pool = list(cat.accelerators.values())
    else:
        vendors = sorted({a.vendor for a in cat.accelerators.values()})
        if vendor not in vendors:
            raise ScenarioError([("vendor", f"unknown vendor {vendor!r}; choose any, same or one of {', '.join(vendors)}")])
        pool = [a for a in cat.accelerators.values() if a.vendor == vendor]
    batches = batches_of(sc, batch_range)
    options = []
    for k, acc in enumerate(pool):
        if progress:
            progress(k / len(pool), f"sizing a cluster of {acc.name}")
        options.append(sized_option(sc, acc, target, factor, batches, objective, (calibrations or {}).get(acc.id)))
    # an accelerator known only from its announcement comes after every shipping one (engine.planning.vendor.rank_key)
    met = sorted((o for o in options if o.met),
                 key=lambda o: (o.entry.status == "announced", ranked(o.best, target)))
    result = {"target": target.describe(), "ranked_by": target.ranked_by, "confidence": confidence,
              "answer": None, "alternatives": [], "efficiency": efficiency,
              "efficiency_explain": ranges.explain(efficiency), "vendor": vendor,
              "options": [_summary(o, factor, efficiency) for o in options]}
    if not met:
        result.update(answer=None, **_nothing_meets(options, target, factor, efficiency, objective))
        return Plan.model_validate(result)
    chosen = met[0]
    result["answer"] = _answer(chosen, factor, efficiency, target)
    result["alternatives"] = _alternatives(chosen, met, target, factor, efficiency)
    if progress:
        progress(1.0, "done")
    return Plan.model_validate(result)


def _nothing_meets(options: list[Option], target: Target, factor: float, efficiency: str, objective: str) -> dict:
    """Why nothing meets the target, the closest option and, for a money budget, the cheapest priced option with
    what would make the budget work (levers)."""
    found = [o for o in options if o.best is not None and o.best.wall_days is not None]
    if target.budget_usd is None:
        closest = min(found, key=lambda o: o.best.days, default=None)
        return {"reason": "no accelerator meets " + target.describe() + (
            f"; the closest is {closest.entry.name}: {closest.reason or ''}" if closest else "")}
    priced = [o for o in found if o.best.cost_usd is not None]
    if not priced:
        return {"reason": f"no accelerator meets {target.describe()}: none of them has a price; enter one",
                "levers": []}
    o = min(priced, key=lambda o: spend(o.best))
    f = _figures(o.best, factor, efficiency)
    return {"reason": (f"no priced accelerator meets {target.describe()}; the cheapest is {o.best.n_gpus:,} x "
                       f"{o.entry.name}: ${f['cost_usd']:,.0f}, {f['wall_days']:.1f} days"),
            "cheapest": {"accelerator": o.entry.accelerator, "name": o.entry.name, "n_gpus": o.best.n_gpus, **f},
            "levers": _levers(priced, target, factor, efficiency, objective)}


def _levers(priced: list[Option], target: Target, factor: float, efficiency: str, objective: str) -> list[dict]:
    """What would bring a priced option within the money budget, each with its cost: owning the cluster (on-premises
    cost per used GPU-hour, engine.economics.cost) and a committed-use price (the reserved rows of data/prices.json
    sold for the cluster), the cheapest of each over every priced option; for the cheapest option, a tuned stack
    (where the typical one was asked), fewer tokens and, with a deadline, the fastest size within the budget."""
    budget, out = target.budget_usd, []

    def add(kind, found):            # found: (usd, option, what) candidates, the cheapest kept
        if found:
            usd, o, what = min(found, key=lambda x: x[0])
            out.append({"kind": kind, "accelerator": o.entry.accelerator, "n_gpus": o.best.n_gpus, "cost_usd": usd,
                        "meets_budget": usd <= budget,
                        "text": f"{what} ({o.best.n_gpus:,} x {o.entry.name}): ${usd:,.0f}"
                                + (" - within the budget" if usd <= budget else "")})
    owned = [(o.best.cost["on_prem"]["cost_usd"] * factor, o, "owning the cluster")
             for o in priced if o.best.cost["on_prem"]["cost_usd"] is not None]
    add("own the cluster", owned)
    for term, words in (("reserved_1y", "a 1-year commitment"), ("reserved_3y", "a 3-year commitment"),
                        ("reserved", "a reserved (committed-use) price")):
        add(term, [(p["cost_usd"] * factor, o, f"{words}, {p['provider']} {p['instance']} at "
                                               f"${p['usd_per_gpu_hour']:.2f} per GPU-hour")
                   for o in priced for p in o.best.cost["cloud_prices"]
                   if p["pricing"] == term and p["sold_for_this_cluster"] and p["cost_usd"] is not None])
    o = min(priced, key=lambda o: spend(o.best))
    row, sc = o.best, o.scenario
    if efficiency == "typical":
        add("tuned stack", [(row.cost_usd, o, "a well-tuned stack instead of a typical one")])
    tokens = sc.training.total_tokens * budget / (row.cost_usd * factor)
    out.append({"kind": "fewer tokens", "accelerator": o.entry.accelerator, "n_gpus": row.n_gpus, "tokens": tokens,
                "meets_budget": True,
                "text": f"about {tokens / 1e12:,.2f}T tokens instead of {sc.training.total_tokens / 1e12:,.2f}T "
                        f"({row.n_gpus:,} x {o.entry.name}; the cost grows with the tokens)"})
    if target.deadline_days is not None:
        relaxed = size_for(sc, replace(target, deadline_days=None), objective, factor, full=False)
        if relaxed.met:
            r = relaxed.best
            out.append({"kind": "later deadline", "accelerator": o.entry.accelerator, "n_gpus": r.n_gpus,
                        "cost_usd": r.cost_usd * factor, "meets_budget": True,
                        "text": f"a later deadline: {r.n_gpus:,} x {o.entry.name} finish in "
                                f"{r.wall_days * factor:.1f} "
                                f"days for ${r.cost_usd * factor:,.0f}"})
    return out


def _answer(o: Option, factor: float, efficiency: str, target: Target) -> dict:
    best, s = o.best, o.sizing
    figures = _figures(best, factor, efficiency)
    deadline = None
    if target.deadline_days is not None and figures["ranges"]["wall_days"]["high"] > target.deadline_days:
        chance = ranges.chance_within(best.wall_days, target.deadline_days, best.time_range, efficiency)
        deadline = {**chance, "text": f"the range of days crosses the {target.deadline_days:g}-day deadline: "
                                      f"{chance['text']} chance of meeting it (published/predicted times of its regime)"}
    e = o.entry
    return {"deadline_chance": deadline, "accelerator": e.accelerator, "name": e.name, "vendor": e.vendor,
            "precision": e.precision, "n_gpus": s.n_gpus, "nodes": s.nodes, "gpus_per_node": s.gpus_per_node,
            "global_batch_size": o.global_batch_size, "layout": best.layout, "mfu": best.mfu,
            "memory_gib": best.memory_gib.total, "memory_capacity_gib": best.memory_capacity_gib,
            **figures, "stack": best.framework, "estimate": best}


def _summary(o: Option, factor: float, efficiency: str) -> dict:
    s, e = o.sizing, o.entry
    out = {"accelerator": e.accelerator, "name": e.name, "vendor": e.vendor, "precision": e.precision, "met": o.met,
           "n_gpus": s.n_gpus if s else None, "nodes": s.nodes if s else None,
           "global_batch_size": o.global_batch_size}
    if o.best is not None:
        out.update(_figures(o.best, factor, efficiency))
        out["price_known"] = o.best.cost_usd is not None
        out["stack"] = (o.best.framework or {}).get("id")
    if not o.met:
        out["reason"] = o.reason
    return out


def _calibrated(row: Estimate) -> bool:
    """The estimate's stack has a level fitted for its accelerator and precision (engine.frameworks.resolve)."""
    return bool((row.framework or {}).get("calibrated"))


def _alternatives(chosen: Option, met: list[Option], target: Target, factor: float, efficiency: str) -> list[dict]:
    mine = _figures(chosen.best, factor, efficiency)
    out = []
    s = chosen.sizing
    if s.neighbour_gpus is not None:
        n, near = s.neighbour_gpus, s.neighbour
        f = _figures(near, factor, efficiency) if near is not None else {k: None for k in (*HEADLINE, "gpu_hours")}
        kind = "smaller" if n < s.n_gpus else "larger"
        figures = "" if f["wall_days"] is None else (
            f" {f['wall_days']:.1f} days" + (f", ${f['cost_usd']:,.0f}" if f["cost_usd"] is not None else "") + ";")
        out.append({"kind": f"one size {kind}", "accelerator": chosen.entry.accelerator, "n_gpus": n, **f,
                    "text": f"{n:,} GPUs:{figures} {s.neighbour_why}"})
    others = [o for o in met if o.entry.accelerator != chosen.entry.accelerator]
    priced = [o for o in others if o.best.cost_usd is not None]
    picks = []
    fitted = [o for o in priced if _calibrated(o.best)]
    if not _calibrated(chosen.best) and fitted:
        # the answer borrows another accelerator's level (the widest range): the cheapest whose own level is fitted
        picks.append(("cheapest calibrated", min(fitted, key=lambda o: o.best.cost_usd)))
    if priced:
        picks.append(("cheapest other", min(priced, key=lambda o: o.best.cost_usd)))
    if others:
        picks.append(("fastest other", min(others, key=lambda o: o.best.days)))
        vendors = [o for o in others if o.entry.vendor != chosen.entry.vendor]
        if vendors:
            picks.append(("other vendor", vendors[0]))
    seen = set()
    for kind, o in picks:
        if o.entry.accelerator in seen:
            continue
        seen.add(o.entry.accelerator)
        f = _figures(o.best, factor, efficiency)
        slower = f["wall_days"] / mine["wall_days"] - 1
        dearer = None if f["cost_usd"] is None or mine["cost_usd"] is None else f["cost_usd"] / mine["cost_usd"] - 1
        text = (f"{o.entry.name} ({o.entry.vendor}), {o.sizing.n_gpus:,} GPUs: {f['wall_days']:.1f} days "
                f"({slower:+.0%})"
                + ("" if dearer is None else f", ${f['cost_usd']:,.0f} ({dearer:+.0%})")
                + ("" if f["cost_usd"] is not None else ", no price: enter one"))
        if kind == "cheapest calibrated":
            days, own = f["ranges"]["wall_days"], mine["ranges"]["wall_days"]
            text += (f"; its level is fitted on published runs: {days['low']:.1f}-{days['high']:.1f} days, where the "
                     f"answer's borrowed level gives {own['low']:.1f}-{own['high']:.1f}")
        out.append({"kind": kind, "accelerator": o.entry.accelerator, "n_gpus": o.sizing.n_gpus, **f, "text": text})
    return out
