"""Vendor choice: every accelerator in the catalog on the same scenario, each with its own best layout, compared on
time, cost, energy, CO2, memory headroom and software ecosystem, with a decision score from user weights and a
plain-language reason for each rank. With the plan's question (a deadline, budgets, at most so many accelerators)
every accelerator is sized as the plan sizes it (sized_option, shared with engine.planning.plan) and ranked by the
plan's rule (engine.planning.sizing.target_key), so the answer, this comparison, the report and the command line
recommend one accelerator with one set of figures."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache

from pydantic import Field

from engine import frameworks
from engine.catalog import ANNOUNCED_NOTE, DATA_DIR, load_catalog
from engine.economics import ranges
from engine.precision import trained_precision
from engine.readable import fmt_usd
from engine.scenario import Scenario, ScenarioError
from engine.planning.results import AcceleratorEntry, Comparison, Estimate, VendorEntry
from engine.planning.search import pinned, search
from engine.planning.sizing import Sizing, Target, ranked, size_for, target_key

CRITERIA = {  # name: (row key, lower is better)
    "time": ("wall_days", True),
    "cost": ("cost_usd", True),
    "energy": ("energy_mwh", True),
    "co2": ("co2_t", True),
    "memory_headroom": ("memory_headroom", False),
    "ecosystem": ("ecosystem_score", False),
}
MAX_BATCH_CHOICES = 4
DEFAULT_WEIGHTS = {"time": 0.30, "cost": 0.30, "energy": 0.05, "co2": 0.10, "memory_headroom": 0.05, "ecosystem": 0.20}


@lru_cache(maxsize=1)
def ecosystem_table() -> dict:
    doc = json.loads((DATA_DIR / "ecosystem.json").read_text())
    levels = doc["levels"]
    table = {}
    for r in doc["rows"]:
        scores = {c: levels[lvl] for c, lvl in r["levels"].items()}
        if set(scores) != set(doc["criteria"]):
            raise ValueError(f"data/ecosystem.json: {r['stack']} must rate every criterion {list(doc['criteria'])}")
        table[r["stack"]] = {"score": sum(scores.values()) / len(scores), "levels": r["levels"], "notes": r["notes"],
                             "risks": r["risks"], "source": r["source"]}
    return table


def normalise_weights(weights: dict | None) -> dict[str, float]:
    w = dict(DEFAULT_WEIGHTS if weights is None else weights)
    unknown = set(w) - set(CRITERIA)
    if unknown:
        raise ScenarioError([("weights", f"unknown criteria {sorted(unknown)}; use {', '.join(CRITERIA)}")])
    if any(not (v >= 0) for v in w.values()) or sum(w.values()) <= 0:
        raise ScenarioError([("weights", "weights must be non-negative numbers with a positive sum")])
    total = sum(w.values())
    return {c: w.get(c, 0.0) / total for c in CRITERIA}


def scenario_on(sc: Scenario, acc, precision: str, n_gpus: int, overrides: dict) -> Scenario:
    """The scenario moved onto another accelerator, precision and cluster size (no layout), with cluster overrides.
    On the scenario's own accelerator its cluster settings stay (node size, bandwidths, host memory, measured
    efficiencies and level): they describe that cluster, so the plan and the comparison size the user's cluster, not
    the datasheet's; another accelerator starts from its catalog row."""
    data = sc.model_dump(exclude_none=True)
    data.pop("layout", None)
    data["training"]["precision"] = precision
    own = sc.cluster.model_dump(exclude_none=True, exclude={"accelerator", "n_gpus"}) \
        if sc.cluster.accelerator == acc.id else {}
    cluster = {"accelerator": acc.id, "n_gpus": n_gpus, **own}
    cluster.update(overrides)
    data["cluster"] = cluster
    return Scenario.model_validate(data)


def batches_of(sc: Scenario, batch_range: tuple[int, int] | None) -> list[int]:
    """The scenario's batch, and powers of two times it within the accepted range."""
    gbs = sc.training.global_batch_size
    if batch_range is None:
        return [gbs]
    lo, hi = batch_range
    if not (1 <= lo <= gbs <= hi):
        raise ScenarioError([("batch_range", f"the range {lo}-{hi} must contain the scenario's global batch {gbs}")])
    out, b = [gbs], gbs * 2
    while b <= hi and len(out) < MAX_BATCH_CHOICES:
        out.append(b)
        b *= 2
    return out


@dataclass(frozen=True)
class Option:
    """One accelerator sized for the target: which it is and the precision it trains in (entry), and the sizing
    (engine.planning.sizing) at the global batch that served the target best, or the problem that left it unsized."""

    entry: AcceleratorEntry
    sizing: Sizing | None = None
    global_batch_size: int | None = None
    scenario: Scenario | None = None
    problem: str | None = None

    @property
    def met(self) -> bool:
        return self.sizing is not None and self.sizing.met

    @property
    def best(self) -> Estimate | None:
        return None if self.sizing is None else self.sizing.best

    @property
    def reason(self) -> str | None:
        return self.problem if self.sizing is None else self.sizing.reason


def cannot_train(sc: Scenario, acc, precision: str | None, note: str) -> str | None:
    """Why the accelerator cannot train the scenario, None where it can: no precision it trains in (precision and
    note from engine.precision.trained_precision), or a named stack that does not run on its vendor's accelerators.
    The one check of the comparison's rows and the plan's options."""
    if precision is None:
        if acc.device_class == "workstation":
            return (f"{acc.vendor} publishes no dense peak for {acc.name}, so no training estimate is made: a "
                    "workstation with unified memory and no scale-up fabric, fine for development, fine-tuning and "
                    "inference on one machine, not competitive for training at scale")
        return note
    return frameworks.not_run_on(sc.training.framework, acc.vendor)


def accelerator_entry(sc: Scenario, acc, overrides: dict | None = None) -> AcceleratorEntry:
    """Which accelerator an option or a row is about, with the precision it trains the scenario in
    (engine.precision.trained_precision); measured_efficiencies: its figures use the cluster's measured
    efficiencies (overrides)."""
    precision, note = trained_precision(acc, sc.training.precision)
    return AcceleratorEntry(accelerator=acc.id, name=acc.name, vendor=acc.vendor, software_stack=acc.software_stack,
                            precision=precision, precision_note=note, measured_efficiencies=bool(overrides),
                            status=acc.status)


def sized_option(sc: Scenario, acc, target: Target, factor: float, batches: list[int], objective: str = "time",
                 overrides: dict | None = None) -> Option:
    """One accelerator sized for the target (engine.planning.sizing.size_for) at each global batch, the batch that
    meets it best kept (ranked by the one rule, engine.planning.sizing.target_key); overrides: measured cluster
    efficiencies that replace the published defaults. The plan's options and the comparison's rows both come from
    here."""
    entry = accelerator_entry(sc, acc, overrides)
    base = Option(entry=entry)
    if why := cannot_train(sc, acc, entry.precision, entry.precision_note):
        return replace(base, problem=why)
    found = None
    for gbs in batches:
        scn = scenario_on(sc, acc, entry.precision, sc.cluster.n_gpus, overrides or {})
        if gbs != sc.training.global_batch_size:
            scn = scn.model_copy(update={"training": scn.training.model_copy(update={"global_batch_size": gbs})})
        try:
            option = replace(base, sizing=size_for(scn, target, objective, factor, full=False))
        except ScenarioError as err:
            option = replace(base, problem=str(err))
        option = replace(option, global_batch_size=gbs, scenario=pinned(scn, option.best))
        better = found is None or (option.met and not found.met) or (
            option.met and found.met and ranked(option.best, target) < ranked(found.best, target))
        if better:
            found = option
    return found


class Candidate(VendorEntry):
    """One accelerator evaluated for the comparison: its entry, with its best layout's estimate (None where it has
    none) and the stack's efficiency (tuned or typical) its figures are read at."""
    best: Estimate | None = Field(default=None, exclude=True)
    efficiency: str = Field(default="tuned", exclude=True)

    def as_row(self) -> dict:
        """The comparison's JSON row (before scores and rank): figures None where there are none, the
        time-proportional ones for the chosen stack (engine.economics.ranges.factor, as the plan gives them), each
        headline figure with its range (engine.economics.ranges.band, as the plan's)."""
        b = self.best
        factor = ranges.factor(self.efficiency)
        k = lambda x: None if x is None else x * factor
        figures = {} if b is None else {
            "layout": b.layout, "train_days": k(b.train_days), "wall_days": k(b.wall_days), "gpu_hours": k(b.gpu_hours),
            "mfu": b.mfu, "cost_usd": k(b.cost_usd), "energy_mwh": k(b.energy_mwh), "co2_t": k(b.co2_t),
            "memory_gib": b.memory_gib.total, "memory_capacity_gib": b.memory_capacity_gib,
            "memory_headroom": b.memory_headroom, "framework": b.framework, "time_range": b.time_range,
            "ranges": {key: ranges.band(getattr(b, key), b.time_range, self.efficiency)
                       for key in ("wall_days", "cost_usd", "energy_mwh", "co2_t")}}
        return {**self.model_dump(), **figures}


def _evaluate_accelerator(sc, acc, target: Target | None, batches: list[int], overrides, objective,
                          efficiency: str = "tuned") -> Candidate:
    factor = ranges.factor(efficiency)
    base = Candidate(**accelerator_entry(sc, acc, overrides).model_dump(), efficiency=efficiency)
    if why := cannot_train(sc, acc, base.precision, base.precision_note):
        return base.model_copy(update={"reason": why})
    if target is not None:
        # the plan's option for this accelerator (its sizing, batch and row), so both give the same figures
        o = sized_option(sc, acc, target, factor, batches, objective, overrides)
        if not o.met:
            return base.model_copy(update={"fits": o.best is not None, "meets_target": False, "reason": o.reason})
        return _with_best(base.model_copy(update={"n_gpus": o.sizing.n_gpus, "meets_target": True}), o.best)
    n = sc.cluster.n_gpus
    out = search(scenario_on(sc, acc, base.precision, n, overrides), top=1, objective=objective, pareto_sizes=[],
                 summaries=False)
    if out.never_finishes:                          # layouts fit, but no run on this cluster finishes
        return base.model_copy(update={"fits": True, "n_gpus": n, "reason": out.problem})
    if not out.best:
        main = max(out.rejected.items(), key=lambda kv: kv[1])[0] if out.rejected else "no valid layout"
        return base.model_copy(update={"n_gpus": n, "reason": f"no layout fits on {n} GPUs ({main})"})
    return _with_best(base.model_copy(update={"n_gpus": n}), out.best[0])


def _with_best(c: Candidate, best: Estimate) -> Candidate:
    """A candidate with its best layout; one whose run never finishes (failures outpace recovery) has nothing to be
    ranked on and says why."""
    return c.model_copy(update={"fits": True, "best": best, "reason": best.problem if best.never_finishes else None})


def _score(rows: list[dict], weights: dict[str, float]) -> None:
    """Each criterion scores 1.0 for the best accelerator and the ratio to it for the others. A criterion an
    accelerator has no figure for (no published price, no power figure) is left out of its score, whose weights are
    renormalised over what is known, and listed in `unknown`: it is never scored 0."""
    fitting = [r for r in rows if r["fits"] and r["meets_target"] is not False and r.get("wall_days") is not None]
    for c, (key, lower) in CRITERIA.items():
        values = [r[key] for r in fitting if r.get(key) is not None and r[key] > 0]
        best = (min(values) if lower else max(values)) if values else None
        for r in fitting:
            v = r.get(key)
            r.setdefault("scores", {})[c] = None if v is None or best is None or v <= 0 else (best / v if lower else v / best)
    for r in fitting:
        known = {c: w for c, w in weights.items() if r["scores"][c] is not None}
        total = sum(known.values())
        r["unknown"] = [c for c, w in weights.items() if w > 0 and r["scores"][c] is None]
        r["decision_score"] = sum(w * r["scores"][c] for c, w in known.items()) / total if total else 0.0


UNKNOWN_LABEL = {"cost": "cost (no price: enter one)", "energy": "energy (no power figure)",
                 "co2": "CO2 (no power figure)"}


def _why_first(r: dict, fitting: list[dict], target: Target | None = None) -> str:
    def place(key, lower=True):
        vals = sorted((x[key] for x in fitting if x.get(key) is not None), reverse=not lower)
        return "" if r.get(key) is None else (" (best)" if vals and r[key] == vals[0] else f" (#{vals.index(r[key]) + 1} of {len(vals)})")
    if target is not None:
        rule = "cheapest" if target.ranked_by == "cost" else "fastest"
        head = (f"{r['name']} ranks first as the {rule} that trains {target.describe()}, the plan's rule (decision "
                f"score {r['decision_score']:.2f}):")
    else:
        head = f"{r['name']} ranks first with a decision score of {r['decision_score']:.2f}:"
    parts = [head, f"{r['wall_days']:.1f} days on {r['n_gpus']:,} GPUs{place('wall_days')}"]
    parts.append(f"costs {fmt_usd(r['cost_usd'])}{place('cost_usd')}" if r.get("cost_usd") is not None
                 else "no price: enter one (ranked " + ("after every priced accelerator, by GPU-hours)" if target
                                                        else "on what is known)"))
    if r.get("co2_t") is not None:
        parts.append(f"{r['co2_t']:,.0f} tCO2e{place('co2_t')}")
    parts.append(f"{r['memory_headroom']:.0%} memory headroom, {r['software_stack']} ecosystem score {r['ecosystem_score']:.2f}")
    return " ".join(parts[:1]) + " " + "; ".join(parts[1:]) + "."


def _why_other(r: dict, top: dict, rank: int, target: Target | None = None) -> str:
    bits = []
    t = r["wall_days"] / top["wall_days"]
    bits.append(f"{t:.2f}x the time" if abs(t - 1) >= 0.005 else "the same time")
    if r.get("cost_usd") is not None and top.get("cost_usd") is not None:
        c = r["cost_usd"] / top["cost_usd"] - 1
        bits.append(f"{abs(c):.0%} {'more expensive' if c > 0 else 'cheaper'}" if abs(c) >= 0.005 else "the same cost")
    elif r.get("cost_usd") is None:
        bits.append("no price: enter one")
    if r.get("co2_t") is not None and top.get("co2_t") is not None and top["co2_t"] > 0:
        e = r["co2_t"] / top["co2_t"] - 1
        if abs(e) >= 0.05:
            bits.append(f"{abs(e):.0%} {'more' if e > 0 else 'less'} CO2")
    h = r["memory_headroom"] - top["memory_headroom"]
    if abs(h) >= 0.05:
        bits.append(f"{'more' if h > 0 else 'less'} memory headroom ({r['memory_headroom']:.0%} vs {top['memory_headroom']:.0%})")
    if r["software_stack"] != top["software_stack"]:
        bits.append(f"{r['software_stack']} ecosystem {r['ecosystem_score']:.2f} vs {top['ecosystem_score']:.2f}")
    note = f" ({r['precision_note']})" if r.get("precision_note") else ""
    after = ("ranked after every priced accelerator" if "cost" in r["unknown"] else "ranked by the plan's rule") \
        if target is not None else "ranked after every accelerator scored on all weighted criteria"
    unknown = (f"; scored without {', '.join(UNKNOWN_LABEL.get(c, c) for c in r['unknown'])}, so {after}"
               if r.get("unknown") else "")
    return (f"#{rank} {r['name']} (score {r['decision_score']:.2f}): {', '.join(bits)} compared with {top['name']}"
            f"{note}{unknown}.")


def compare(sc: Scenario, weights: dict | None = None, deadline_days: float | None = None,
            calibrations: dict[str, dict] | None = None, accelerators: list[str] | None = None,
            objective: str = "time", progress=None, efficiency: str = "tuned", budget_usd: float | None = None,
            gpu_hours: float | None = None, max_gpus: int | None = None,
            batch_range: tuple[int, int] | None = None, confidence: float | None = None) -> Comparison:
    """Compare accelerators for one scenario (efficiency: the stack, as the plan's: tuned or typical). Without a
    target: a fixed cluster size (the scenario's n_gpus), ranked by the weighted score. With the plan's question (a
    deadline, a money budget and/or GPU-hours, on at most max_gpus, the batch free within batch_range): each
    accelerator sized as the plan sizes it (sized_option: the same row for the same accelerator and size) and ranked
    by the plan's rule (rank_key), met with the plan's confidence (None: on the engine's figures; 0.5-0.9: at that
    percentile of each row's regime band). calibrations maps accelerator id -> measured cluster overrides (matmul_efficiency,
    intra_node_busbw_gbs, inter_node_busbw_gbs) that replace the published defaults."""
    cat = load_catalog()
    w = normalise_weights(weights)
    target = _target(deadline_days, budget_usd, gpu_hours, max_gpus, confidence)
    batches = batches_of(sc, batch_range if target is not None else None)
    ids = accelerators or list(cat.accelerators)
    unknown = [a for a in ids if a not in cat.accelerators]
    if unknown:
        raise ScenarioError([("accelerators", f"unknown ids {unknown}; known: {', '.join(cat.accelerators)}")])
    eco = ecosystem_table()
    rows = []
    for k, acc_id in enumerate(ids):
        if progress:
            progress(k / len(ids), f"{acc_id}: searching layouts")
        acc = cat.accelerator(acc_id)
        c = _evaluate_accelerator(sc, acc, target, batches, (calibrations or {}).get(acc_id, {}), objective,
                                  efficiency)
        rows.append({**c.as_row(), "ecosystem_score": eco[acc.software_stack]["score"],
                     "ecosystem_levels": eco[acc.software_stack]["levels"]})
    if progress:
        progress(1.0, "done")
    return Comparison.model_validate({
        "mode": "target" if target is not None else "fixed cluster",
        "n_gpus": None if target is not None else sc.cluster.n_gpus,
        "deadline_days": deadline_days, "budget_usd": budget_usd, "gpu_hours": gpu_hours, "max_gpus": max_gpus,
        "confidence": confidence,
        "target": None if target is None else target.describe(),
        "ranked_by": "score" if target is None else target.ranked_by,
        "efficiency": efficiency,
        "ecosystem_sources": {s: e["source"] for s, e in eco.items()},
        **_rank(rows, w, target),
    })


def _target(deadline_days, budget_usd, gpu_hours, max_gpus, confidence=None) -> Target | None:
    """The plan's question as a Target; None without a deadline or budget (max_gpus or a chance alone limit nothing
    to rank)."""
    if deadline_days is None and budget_usd is None and gpu_hours is None:
        if max_gpus is not None:
            raise ScenarioError([("max_gpus", "at most so many accelerators limits a question: give a deadline, a "
                                              "budget or GPU-hours too")])
        if confidence is not None:
            raise ScenarioError([("confidence", "the chance of meeting a target qualifies a question: give a "
                                                "deadline, a budget or GPU-hours too")])
        return None
    return Target(deadline_days, budget_usd, gpu_hours, max_gpus, confidence)


RANKING_KEYS = ("scores", "decision_score", "rank", "why", "unknown")


def rescore(result: Comparison, weights: dict | None) -> Comparison:
    """The same comparison under other weights: no search is rerun, only the scores and, without a target, the ranks
    and reasons change."""
    rows = [r.model_dump(exclude_unset=True, exclude=set(RANKING_KEYS)) for r in result.rows]
    target = _target(result.deadline_days, result.budget_usd, result.gpu_hours, result.max_gpus, result.confidence)
    ranked_rows = _rank(rows, normalise_weights(weights), target)
    return Comparison.model_validate({**result.model_dump(exclude_unset=True), **ranked_rows})


def rank_key(r: dict, target: Target | None) -> tuple:
    """The one ranking rule. With a target, the plan's (engine.planning.sizing.target_key): the cheapest that meets a
    deadline, every priced accelerator before any without a price, or the fastest within budgets; the decision score
    is shown beside it. Without one, the decision score, every accelerator scored on all weighted criteria before any
    scored without one (a cost-weighted score never puts an accelerator without a price first). Either way an
    accelerator known only from its announcement ranks after every shipping one: it cannot be bought and measured."""
    announced = r.get("status") == "announced"
    if target is not None:
        return (announced, *target_key(target, r["wall_days"], r["cost_usd"], r["n_gpus"]))
    return (announced, bool(r["unknown"]), -r["decision_score"])


def _rank(rows: list[dict], w: dict[str, float], target: Target | None = None) -> dict:
    _score(rows, w)
    order = {a: i for i, a in enumerate(load_catalog().accelerators)}      # ties keep catalog order
    rows = sorted(rows, key=lambda r: order[r["accelerator"]])
    placed = sorted((r for r in rows if "decision_score" in r), key=lambda r: rank_key(r, target))
    others = [r for r in rows if "decision_score" not in r]
    for i, r in enumerate(placed):
        r["rank"] = i + 1
        r["why"] = _why_first(r, placed, target) if i == 0 else _why_other(r, placed[0], i + 1, target)
    for r in others:
        r["rank"] = None
        r["why"] = f"{r['name']} is not ranked: {r.get('reason', 'it does not meet the target')}."
    for r in rows:
        if r.get("status") == "announced":
            r["why"] += f" {ANNOUNCED_NOTE[0].upper()}{ANNOUNCED_NOTE[1:]}."
    return {
        "weights": w,
        "recommendation": placed[0]["accelerator"] if placed else None,
        "why": placed[0]["why"] if placed else (
            f"No accelerator in the catalog trains {target.describe()}: each row says why, and the answer on the "
            "Scenario page names the closest option." if target else
            "No accelerator in the catalog can run this scenario as given."),
        "rows": placed + others,
    }
