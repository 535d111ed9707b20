"""The manager's answer (engine.planning.plan) as people read it: one sentence, the figures with their ranges, the
cluster as a scenario change, the nearest alternatives and every accelerator's option as a table. Pure: no Streamlit."""
from __future__ import annotations

from engine.inputs import parse_scenario
from engine.planning.results import Plan, PlanAnswer
from engine.planning.search import pinned
from engine.scenario import Scenario
from engine.presentation.figures import Figure, energy_line, range_text
from engine.presentation.formatting import fmt_days, fmt_num, fmt_usd, job_text

ALTERNATIVE_LABELS = {"one size smaller": "One size smaller", "one size larger": "One size larger",
                      "cheapest other": "Cheapest other accelerator", "fastest other": "Fastest other accelerator",
                      "other vendor": "Best of another vendor",
                      "cheapest calibrated": "Cheapest with a fitted level"}
NO_PRICE = "no price: enter one"


def nodes_text(answer: PlanAnswer) -> str:
    """'512 nodes of 8', '1 node of 8'."""
    return f"{answer.nodes:,} node{'s' if answer.nodes != 1 else ''} of {answer.gpus_per_node}"


def cluster_text(answer: PlanAnswer) -> str:
    """'4,096 x NVIDIA B200 ... in 512 nodes of 8'."""
    return f"{answer.n_gpus:,} x {answer.name} in {nodes_text(answer)}"


def headline(result: Plan) -> str:
    """One sentence answering the target, e.g. '4,096 x NVIDIA B200 in 512 nodes of 8 train it within 30 days: 24.5
    days (17.7-26.8), $14.5M ($10.5M-$15.8M), 4,070 MWh and 1,930 t CO2e.'"""
    a = result.answer
    r = a.ranges
    parts = [f"{fmt_days(a.wall_days)} ({range_text(r['wall_days'], 'wall_days')})"]
    parts.append(f"{fmt_usd(a.cost_usd)} ({range_text(r['cost_usd'], 'cost_usd')})" if a.cost_usd is not None
                 else f"cost unknown ({NO_PRICE})")
    if a.energy_mwh is not None:
        parts.append(f"{fmt_num(a.energy_mwh)} MWh")
    if a.co2_t is not None:
        parts.append(f"{fmt_num(a.co2_t)} t CO2e")
    chance = a.deadline_chance
    return (f"{cluster_text(a)} train it {result.target}: " + ", ".join(parts[:-1]) + " and " + parts[-1] + "."
            + (f" Note: {chance['text']}." if chance else ""))


def job_headline(sc: Scenario, result: Plan) -> str:
    """The headline, led by the job where it is a fine-tune, e.g. 'LoRA fine-tune of Llama 3.1 70B (rank 16,
    attention; 500 million tokens): 1 x ...'; a pre-training run (the default job) reads as the headline alone."""
    return f"{job_text(sc)}: {headline(result)}" if sc.training.fine_tune else headline(result)


def stack_text(stack: dict | None) -> str:
    """The software stack of an answer or row (Estimate.framework) and why it is the one, e.g. 'Megatron-Core / NeMo,
    chosen by the planner: 17% faster than PyTorch FSDP2 on this job (...)'."""
    if not stack:
        return "not known"
    name = stack["name"].split(" (")[0]
    chosen_by = stack.get("chosen_by", "")
    if "planner_choice" in stack:
        why = stack["planner_choice"]["why"]
        text = f"{name}, chosen by the planner: {why.removeprefix(name + ': ')}"
    elif chosen_by == "the scenario":
        text = f"{name}, as the scenario names it"
    else:
        text = f"{name}, its vendor's MLPerf default"
    return text + ("" if stack.get("calibrated", True) else " (uncalibrated for this accelerator and precision: "
                                                            "widest range)")


def answer_figures(answer: PlanAnswer) -> list[Figure]:
    """The answer's headline figures, each time-proportional one with its range."""
    r = answer.ranges
    out = [Figure("Accelerators", f"{answer.n_gpus:,}", f"{nodes_text(answer)} "
                                                            f"{answer.name}, global batch "
                                                            f"{answer.global_batch_size:,} sequences"),
           Figure("Days (wall clock)", fmt_days(answer.wall_days), "wall-clock time including failures, restarts, "
                                                                     "checkpoints and evaluation",
                  range_text(r["wall_days"], "wall_days")),
           Figure("Cost", fmt_usd(answer.cost_usd) if answer.cost_usd is not None else "unknown",
                  "billed GPU-hours x the price per GPU-hour" if answer.cost_usd is not None else
                  "no published price for this accelerator: enter one on the Scenario page",
                  range_text(r["cost_usd"], "cost_usd")),
           Figure("GPU-hours (billed)", fmt_num(answer.gpu_hours), "accelerators x wall-clock hours (what a cloud bills)",
                  range_text(r["gpu_hours"], "gpu_hours")),
           Figure("Energy", f"{fmt_num(answer.energy_mwh)} MWh" if answer.energy_mwh is not None else "unknown",
                  "electricity of accelerators and hosts, times the facility's PUE",
                  energy_line(answer.estimate, r["energy_mwh"], "energy_mwh")),
           Figure("CO2e", f"{fmt_num(answer.co2_t)} t" if answer.co2_t is not None else "unknown",
                  "operational emissions at the site's grid carbon intensity (location-based)",
                  energy_line(answer.estimate, r["co2_t"], "co2_t"))]
    return out


def alternative_rows(result: Plan) -> list[dict]:
    """The nearest alternatives: what each is and its figures, in words."""
    return [{"alternative": ALTERNATIVE_LABELS.get(a.kind, a.kind), "what it takes": a.text}
            for a in result.alternatives]


def lever_rows(result: Plan) -> list[dict]:
    """When nothing meets a money budget: what would make it work for the cheapest priced option, in words."""
    return [{"lever": lv["kind"], "what it takes": lv["text"]} for lv in result.levers or []]


def option_rows(result: Plan) -> list[dict]:
    """Every accelerator sized for the target: meets it or why not, size, days, cost (or 'no price: enter one'),
    energy and CO2, in the plan's order: those that meet it first (for a deadline the cheapest first, for a budget the
    fastest first), priced before unpriced (listed apart with 'no price: enter one'), then those that do not."""
    by_days = result.ranked_by == "days"
    rows = []
    for o in result.options:
        priced = o.cost_usd is not None
        rows.append({"accelerator": o.name, "vendor": o.vendor, "stack": o.stack,
                     "meets the target": "yes" if o.met else "no",
                     "GPUs": o.n_gpus, "nodes": o.nodes, "days": o.wall_days, "cost USD": o.cost_usd,
                     "energy MWh": o.energy_mwh, "CO2 t": o.co2_t,
                     "note": (o.reason or "") if not o.met else ("" if priced else NO_PRICE)})
    order = lambda r: (r["meets the target"] != "yes", r["cost USD"] is None,
                       (r["days"] if by_days else r["cost USD"]) or 0, r["days"] or 0)
    return sorted(rows, key=order)


def answer_scenario(sc: Scenario, answer: PlanAnswer) -> Scenario:
    """The scenario this answer describes: the same model, tokens, site and prices on the answer's accelerator,
    cluster size, precision, global batch and layout. Its estimate is the answer's (the plan sized the cluster with
    the same engine), so every page then shows the answer. Measured efficiencies and link overrides belong to the
    previous accelerator and cluster and are dropped, as the plan did."""
    data = sc.model_dump(mode="json", exclude_none=True)
    keep_node = sc.cluster.accelerator == answer.accelerator and sc.cluster.gpus_per_node
    data["cluster"] = {"accelerator": answer.accelerator, "n_gpus": answer.n_gpus,
                       **({"gpus_per_node": sc.cluster.gpus_per_node} if keep_node else {})}
    data["training"] = {**data["training"], "precision": answer.precision,
                        "global_batch_size": answer.global_batch_size}
    data["layout"] = answer.layout.model_dump(exclude_none=True)
    return pinned(parse_scenario(data), answer.estimate)      # on the stack the planner chose, where it chose
