"""Vendor choice: every accelerator in the catalog on the same scenario, each with its own best layout, compared on
time, cost, energy, CO2, memory headroom and software ecosystem, with a decision score from user weights and a
plain-language reason for each rank. With a deadline every accelerator is sized and ranked as the plan sizes and
ranks it (engine.planning.plan), so the answer, this comparison and the report recommend one accelerator with one
set of figures."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache

from engine.catalog import DATA_DIR, load_catalog
from engine.economics import ranges
from engine.precision import trained_precision
from engine.scenario import Scenario, ScenarioError
from engine.planning.results import Comparison, Estimate
from engine.planning.search import search
from engine.planning.sizing import Target, size_for

CRITERIA = {  # name: (row key, lower is better)
    "time": ("wall_days", True),
    "cost": ("cost_usd", True),
    "energy": ("energy_mwh", True),
    "co2": ("co2_t", True),
    "memory_headroom": ("memory_headroom", False),
    "ecosystem": ("ecosystem_score", False),
}
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
    """The scenario moved onto another accelerator, precision and cluster size (no layout), with cluster overrides."""
    data = sc.model_dump(exclude_none=True)
    data.pop("layout", None)
    data["training"]["precision"] = precision
    keep_node = sc.cluster.accelerator == acc.id and sc.cluster.gpus_per_node
    cluster = {"accelerator": acc.id, "n_gpus": n_gpus, **({"gpus_per_node": sc.cluster.gpus_per_node} if keep_node else {})}
    cluster.update(overrides)
    data["cluster"] = cluster
    return Scenario.model_validate(data)


@dataclass(frozen=True)
class Candidate:
    """One accelerator evaluated for the comparison: the precision it trains in, its cluster size and best layout's
    row (None where it has none), whether it meets the deadline (None: no deadline) and why it cannot be ranked."""

    accelerator: str
    name: str
    vendor: str
    software_stack: str
    precision: str | None
    precision_note: str
    calibrated: bool
    fits: bool = False
    n_gpus: int | None = None
    best: Estimate | None = None
    meets_deadline: bool | None = None
    reason: str | None = None
    efficiency_factor: float = 1.0

    def as_row(self) -> dict:
        """The comparison's JSON row (before scores and rank): figures None where there are none, the
        time-proportional ones for the chosen stack (engine.economics.ranges.factor, as the plan gives them)."""
        b = self.best
        k = lambda x: None if x is None else x * self.efficiency_factor
        figures = {} if b is None else {
            "layout": b.layout, "train_days": k(b.train_days), "wall_days": k(b.wall_days), "gpu_hours": k(b.gpu_hours),
            "mfu": b.mfu, "cost_usd": k(b.cost_usd), "energy_mwh": k(b.energy_mwh), "co2_t": k(b.co2_t),
            "memory_gib": b.memory_gib.total, "memory_capacity_gib": b.memory_capacity_gib,
            "memory_headroom": b.memory_headroom, "framework": b.framework, "time_range": b.time_range}
        return {"accelerator": self.accelerator, "name": self.name, "vendor": self.vendor,
                "software_stack": self.software_stack, "precision": self.precision,
                "precision_note": self.precision_note, "calibrated": self.calibrated, "fits": self.fits,
                "n_gpus": self.n_gpus, "meets_deadline": self.meets_deadline, **figures,
                **({"reason": self.reason} if self.reason is not None else {})}


def _evaluate_accelerator(sc, acc, deadline_days, overrides, objective, factor: float = 1.0) -> Candidate:
    precision, note = trained_precision(acc, sc.training.precision)
    base = Candidate(accelerator=acc.id, name=acc.name, vendor=acc.vendor, software_stack=acc.software_stack,
                     precision=precision, precision_note=note, calibrated=bool(overrides), efficiency_factor=factor)
    if precision is None:
        if acc.device_class == "workstation":
            note = (f"{acc.vendor} publishes no dense peak for {acc.name}, so no training estimate is made: a "
                    "workstation with unified memory and no scale-up fabric, fine for development, fine-tuning and "
                    "inference on one machine, not competitive for training at scale")
        return replace(base, reason=note)
    if deadline_days is not None:
        probe = scenario_on(sc, acc, precision, sc.cluster.n_gpus, overrides)
        target = Target(deadline_days=deadline_days)
        sized = size_for(probe, target, objective, factor, full=False)
        if not sized.met:
            return replace(base, fits=sized.best is not None, meets_deadline=False, reason=sized.reason)
        # the row the plan shows for this accelerator and size (the sizing's), so both give the same figures
        return _with_best(replace(base, n_gpus=sized.n_gpus, meets_deadline=True), sized.best)
    n = sc.cluster.n_gpus
    out = search(scenario_on(sc, acc, precision, n, overrides), top=1, objective=objective, pareto_sizes=[],
                 summaries=False)
    if out.never_finishes:                          # layouts fit, but no run on this cluster finishes
        return replace(base, fits=True, n_gpus=n, reason=out.problem)
    if not out.best:
        main = max(out.rejected.items(), key=lambda kv: kv[1])[0] if out.rejected else "no valid layout"
        return replace(base, n_gpus=n, reason=f"no layout fits on {n} GPUs ({main})")
    return _with_best(replace(base, n_gpus=n), out.best[0])


def _with_best(c: Candidate, best: Estimate) -> Candidate:
    """A candidate with its best layout; one whose run never finishes (failures outpace recovery) has nothing to be
    ranked on and says why."""
    return replace(c, fits=True, best=best, reason=best.problem if best.never_finishes else None)


def _score(rows: list[dict], weights: dict[str, float]) -> None:
    """Each criterion scores 1.0 for the best accelerator and the ratio to it for the others. A criterion an
    accelerator has no figure for (no published price, no power figure) is left out of its score, whose weights are
    renormalised over what is known, and listed in `unknown`: it is never scored 0."""
    fitting = [r for r in rows if r["fits"] and r["meets_deadline"] is not False and r.get("wall_days") is not None]
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


def _fmt_money(x):
    return f"${x / 1e6:,.2f}M" if x >= 1e6 else f"${x:,.0f}"


def _why_first(r: dict, fitting: list[dict], deadline_days: float | None = None) -> str:
    def place(key, lower=True):
        vals = sorted((x[key] for x in fitting if x.get(key) is not None), reverse=not lower)
        return "" if r.get(key) is None else (" (best)" if vals and r[key] == vals[0] else f" (#{vals.index(r[key]) + 1} of {len(vals)})")
    rule = (f"as the cheapest that trains within {deadline_days:g} days, the plan's rule" if deadline_days is not None
            else "with a decision score of")
    parts = [f"{r['name']} ranks first {rule}" + (f" (decision score {r['decision_score']:.2f}):"
                                                   if deadline_days is not None else f" {r['decision_score']:.2f}:"),
             f"{r['wall_days']:.1f} days on {r['n_gpus']:,} GPUs{place('wall_days')}"]
    parts.append(f"costs {_fmt_money(r['cost_usd'])}{place('cost_usd')}" if r.get("cost_usd") is not None
                 else "no price: enter one (ranked on what is known)")
    if r.get("co2_t") is not None:
        parts.append(f"{r['co2_t']:,.0f} tCO2e{place('co2_t')}")
    parts.append(f"{r['memory_headroom']:.0%} memory headroom, {r['software_stack']} ecosystem score {r['ecosystem_score']:.2f}")
    return " ".join(parts[:1]) + " " + "; ".join(parts[1:]) + "."


def _why_other(r: dict, top: dict, rank: int) -> str:
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
    unknown = (f"; scored without {', '.join(UNKNOWN_LABEL.get(c, c) for c in r['unknown'])}, so ranked after every "
               "accelerator scored on all weighted criteria") if r.get("unknown") else ""
    return (f"#{rank} {r['name']} (score {r['decision_score']:.2f}): {', '.join(bits)} compared with {top['name']}"
            f"{note}{unknown}.")


def compare(sc: Scenario, weights: dict | None = None, deadline_days: float | None = None,
            calibrations: dict[str, dict] | None = None, accelerators: list[str] | None = None,
            objective: str = "time", progress=None, efficiency: str = "tuned") -> Comparison:
    """Compare accelerators for one scenario (efficiency: the stack, as the plan's: tuned or typical): a fixed cluster size (the scenario's n_gpus), ranked by the weighted
    score, or for each the cheapest size meeting deadline_days (the plan's sizing and row), ranked by the plan's rule
    (rank_key). calibrations maps accelerator id -> measured cluster overrides
    (matmul_efficiency, intra_node_busbw_gbs, inter_node_busbw_gbs) that replace the published defaults."""
    cat = load_catalog()
    w = normalise_weights(weights)
    factor = ranges.factor(efficiency)
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
        c = _evaluate_accelerator(sc, acc, deadline_days, (calibrations or {}).get(acc_id, {}), objective, factor)
        rows.append({**c.as_row(), "ecosystem_score": eco[acc.software_stack]["score"],
                     "ecosystem_levels": eco[acc.software_stack]["levels"]})
    if progress:
        progress(1.0, "done")
    return Comparison.model_validate({
        "mode": "deadline" if deadline_days is not None else "fixed cluster",
        "n_gpus": None if deadline_days is not None else sc.cluster.n_gpus,
        "deadline_days": deadline_days,
        "efficiency": efficiency,
        "ecosystem_sources": {s: e["source"] for s, e in eco.items()},
        **_rank(rows, w, deadline_days),
    })


RANKING_KEYS = ("scores", "decision_score", "rank", "why", "unknown")


def rescore(result: Comparison, weights: dict | None) -> Comparison:
    """The same comparison under other weights: no search is rerun, only the scores, ranks and reasons change."""
    rows = [r.model_dump(exclude_unset=True, exclude=set(RANKING_KEYS)) for r in result.rows]
    ranked = _rank(rows, normalise_weights(weights), result.deadline_days)
    return Comparison.model_validate({**result.model_dump(exclude_unset=True), **ranked})


def rank_key(r: dict, deadline_days: float | None) -> tuple:
    """The one ranking rule. With a deadline, the plan's (engine.planning.plan): the cheapest that meets it, every
    priced accelerator before any without a price (by billed GPU-hours), ties to fewer GPUs; the decision score is
    shown beside it. Without one, the decision score, every accelerator scored on all weighted criteria before any
    scored without one (a cost-weighted score never puts an accelerator without a price first)."""
    if deadline_days is not None:
        billed = r["n_gpus"] * r["wall_days"] * 24.0
        return (r["cost_usd"] is None, billed if r["cost_usd"] is None else r["cost_usd"], r["n_gpus"])
    return (bool(r["unknown"]), -r["decision_score"])


def _rank(rows: list[dict], w: dict[str, float], deadline_days: float | None = None) -> dict:
    _score(rows, w)
    order = {a: i for i, a in enumerate(load_catalog().accelerators)}      # ties keep catalog order
    rows = sorted(rows, key=lambda r: order[r["accelerator"]])
    ranked = sorted((r for r in rows if "decision_score" in r), key=lambda r: rank_key(r, deadline_days))
    others = [r for r in rows if "decision_score" not in r]
    for i, r in enumerate(ranked):
        r["rank"] = i + 1
        r["why"] = _why_first(r, ranked, deadline_days) if i == 0 else _why_other(r, ranked[0], i + 1)
    for r in others:
        r["rank"] = None
        r["why"] = f"{r['name']} is not ranked: {r.get('reason', 'it does not meet the target')}."
    return {
        "weights": w,
        "recommendation": ranked[0]["accelerator"] if ranked else None,
        "why": ranked[0]["why"] if ranked else "No accelerator in the catalog can run this scenario as given.",
        "rows": ranked + others,
    }
