"""Command line: python -m engine {estimate,export-config,search,compare,energy,catalog,import-hf} ...  (JSON on stdout, or with
estimate --explain every term as text; bad input exits 2 with the reason on stderr)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine import json_input
from engine.economics.ranges import check_chance
from engine.frameworks import FRAMEWORKS
from engine.scenario import ScenarioError
from engine.inputs import parse_scenario
from engine.presentation.launch_config import FORMATS

MAX_SCENARIO_BYTES = 1_000_000


def _load(path: str):
    p = Path(path)
    if path == "-":
        text = sys.stdin.read(MAX_SCENARIO_BYTES + 1)
    elif not p.is_file():
        raise ScenarioError([("(file)", f"{path}: no such file")])
    elif p.stat().st_size > MAX_SCENARIO_BYTES:
        raise ScenarioError([("(file)", f"{path}: larger than {MAX_SCENARIO_BYTES} bytes; a scenario is a small JSON object")])
    else:
        text = p.read_text(errors="replace")
    if len(text) > MAX_SCENARIO_BYTES:
        raise ScenarioError([("(file)", "input larger than 1 MB; a scenario is a small JSON object")])
    try:
        data = json_input.loads(text)
    except json_input.JsonInputError as err:
        raise ScenarioError([("(file)", str(err))]) from None
    if not isinstance(data, dict):
        raise ScenarioError([("(file)", "the scenario must be a JSON object with model, training, cluster (and layout)")])
    return data


# Each command is its document from the scenario as parsed JSON and the command's options (the HTTP API,
# planner/http_api.py, calls the same functions, so both answer alike), and cmd_* reads them from the command line.
def estimate_doc(data: dict) -> dict:
    from engine.planning.estimate import estimate
    return estimate(parse_scenario(data)).as_json()


def cmd_estimate(args) -> dict | str:
    if args.explain:
        from engine.planning.explain import explain_text
        return explain_text(parse_scenario(_load(args.scenario)))
    return estimate_doc(_load(args.scenario))


STACK_CHOICES = ("auto", *FRAMEWORKS)
STACK_HELP = ("the training software stack: auto lets the planner choose, for each accelerator, the fastest of the "
              "stacks that run on its vendor with a level fitted for it (data/frameworks.json); a stack id keeps that "
              "stack; default: the scenario's training.framework (auto where it names none)")


def _on_framework(data: dict, framework: str | None) -> dict:
    """The scenario with the --framework option applied: a stack id names it, auto leaves the choice to the planner
    (training.framework unset), None keeps the scenario's."""
    if framework is None:
        return data
    if framework not in STACK_CHOICES:
        raise ScenarioError([("--framework", f"unknown stack {framework!r}; choose one of {', '.join(STACK_CHOICES)}")])
    training = {k: v for k, v in (data.get("training") or {}).items() if k != "framework"}
    return {**data, "training": {**training, **({} if framework == "auto" else {"framework": framework})}}


def search_doc(data: dict, top: int = 10, objective: str = "time", deadline_days: float | None = None,
               gpu_hour_budget: float | None = None, allow_span_nodes: bool = False, framework: str | None = None,
               confidence: float | None = None) -> dict:
    from engine.planning.search import search
    from engine.planning.sizing import cluster_search
    data = _on_framework({k: v for k, v in data.items() if k != "layout"}, framework)   # the search finds the layout
    if top < 1 or top > 1000:
        raise ScenarioError([("--top", "must be between 1 and 1000")])
    for name, value in (("deadline_days", deadline_days), ("gpu_hour_budget", gpu_hour_budget)):
        if value is not None and not (value > 0):
            raise ScenarioError([("--" + name.replace("_", "-"), "must be a positive number")])
    check_chance(confidence, "--confidence")
    if confidence is not None and deadline_days is None and gpu_hour_budget is None:
        raise ScenarioError([("--confidence", "qualifies the cluster sizing: give --deadline-days or "
                                              "--gpu-hour-budget too")])
    sc = parse_scenario(data)
    out = search(sc, top=top, objective=objective, allow_span_nodes=allow_span_nodes)
    sized = cluster_search(sc, deadline_days, gpu_hour_budget, objective, confidence)
    return (out if sized is None else out.model_copy(update={"cluster_search": sized})).as_json()


def cmd_search(args) -> dict:
    return search_doc(_load(args.scenario), top=args.top, objective=args.objective, deadline_days=args.deadline_days,
                      gpu_hour_budget=args.gpu_hour_budget, allow_span_nodes=args.allow_span_nodes,
                      framework=args.framework, confidence=args.confidence)


def _weights(text: str | None) -> dict | None:
    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ScenarioError([("--weights", f"{part!r} is not name=number; e.g. time=0.4,cost=0.4,ecosystem=0.2")]) from None
    return out


QUESTION = ("deadline_days", "budget_usd", "gpu_hours", "max_gpus", "batch_range", "efficiency", "confidence")


def _question(deadline_days: float | None = None, budget_usd: float | None = None, gpu_hours: float | None = None,
              max_gpus: int | None = None, batch_range: str | None = None, efficiency: str = "tuned",
              confidence: float | None = None) -> dict:
    """The plan's question (plan and compare take the same one, from the command line or the HTTP API), checked."""
    for name, value in (("deadline_days", deadline_days), ("budget_usd", budget_usd), ("gpu_hours", gpu_hours)):
        if value is not None and not (value > 0):
            raise ScenarioError([("--" + name.replace("_", "-"), "must be a positive number")])
    if max_gpus is not None and max_gpus < 1:
        raise ScenarioError([("--max-gpus", "must be a whole number of accelerators, at least 1")])
    if max_gpus is not None and deadline_days is None and budget_usd is None and gpu_hours is None:
        raise ScenarioError([("--max-gpus", "limits a question: give --deadline-days, --budget-usd or --gpu-hours too")])
    check_chance(confidence, "--confidence")
    if confidence is not None and deadline_days is None and budget_usd is None and gpu_hours is None:
        raise ScenarioError([("--confidence", "qualifies a question: give --deadline-days, --budget-usd or "
                                              "--gpu-hours too")])
    return dict(deadline_days=deadline_days, budget_usd=budget_usd, gpu_hours=gpu_hours, max_gpus=max_gpus,
                batch_range=_batch_range(batch_range), efficiency=efficiency, confidence=confidence)


def _question_of(args) -> dict:
    return {name: getattr(args, name) for name in QUESTION}


def compare_doc(data: dict, weights: str | None = None, accelerators: str | None = None, framework: str | None = None,
                **question) -> dict:
    from engine.planning.vendor import compare
    data = _on_framework({k: v for k, v in data.items() if k != "layout"}, framework)
    ids = [a.strip() for a in accelerators.split(",")] if accelerators else None
    return compare(parse_scenario(data), weights=_weights(weights), accelerators=ids, **_question(**question)).as_json()


def cmd_compare(args) -> dict:
    return compare_doc(_load(args.scenario), weights=args.weights, accelerators=args.accelerators,
                       framework=args.framework, **_question_of(args))


def cmd_energy(args) -> dict:
    from engine.economics.energy import calculator_problems, energy_calculator
    given = dict(gpu_hours=args.gpu_hours, power_w=args.power_w, pue=args.pue, region=args.region,
                 carbon_intensity_g_per_kwh=args.carbon_intensity_g_per_kwh, price_usd_per_gpu_hour=args.price_usd_per_gpu_hour)
    if problems := calculator_problems(**given):
        raise ScenarioError(problems)
    return energy_calculator(**given)


def _batch_range(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    lo, sep, hi = text.partition("-")
    try:
        return int(lo), int(hi)
    except ValueError:
        raise ScenarioError([("--batch-range", f"{text!r} is not MIN-MAX sequences, e.g. 512-4096")]) from None


def plan_doc(data: dict, deadline_days: float | None = None, budget_usd: float | None = None,
             gpu_hours: float | None = None, max_gpus: int | None = None, vendor: str = "any",
             efficiency: str = "tuned", batch_range: str | None = None, framework: str | None = None,
             confidence: float | None = None) -> dict:
    from engine.planning.plan import plan
    data = _on_framework({k: v for k, v in data.items() if k != "layout"}, framework)
    if deadline_days is None and budget_usd is None and gpu_hours is None:
        raise ScenarioError([("--deadline-days", "give --deadline-days, --budget-usd or --gpu-hours")])
    result = plan(parse_scenario(data), vendor=vendor, **_question(deadline_days, budget_usd, gpu_hours, max_gpus,
                                                                  batch_range, efficiency, confidence))
    out = result.as_json()
    if result.answer is not None:               # the layout search's full estimate is long; keep its key figures
        out["answer"]["estimate"] = {k: out["answer"]["estimate"][k] for k in ("layout", "memory_gib", "step_time_s",
                                                                               "mfu", "tokens_per_s",
                                                                               "time_breakdown_s", "whole_run")}
    return out


def cmd_plan(args) -> dict:
    return plan_doc(_load(args.scenario), vendor=args.vendor, framework=args.framework, **_question_of(args))


def _source(s) -> str:
    return f"{s.document} ({s.url}, {s.date})"


def cmd_catalog(args) -> dict:
    from engine.catalog import load_catalog
    from engine.physics.model import shape_of
    cat = load_catalog()
    return {
        "accelerators": [{"id": a.id, "name": a.name, "vendor": a.vendor, "year": a.year, "status": a.status,
                          "memory_gib": a.memory_gib,
                          "dense_peak_tflops": a.peak_tflops.model_dump(exclude_none=True), "tdp_w": a.tdp_w,
                          "scale_up_domain": a.gpus_per_node, "sources": [_source(s) for s in a.sources]}
                         for a in cat.accelerators.values()],
        "presets": [{"id": m.id, "name": m.name, "params_b": m.published_params_b,
                     "engine_params_b": round(shape_of(m.arch).total_params() / 1e9, 3), "source": _source(m.source)}
                    for m in cat.models.values()],
        "networks": [{"id": n.id, "name": n.name, "bandwidth_gbs": n.bandwidth_gbs, "source": _source(n.source)}
                     for n in cat.networks.values()],
    }


def cmd_import_hf(args) -> dict:
    from engine.hf_config import MAX_CONFIG_BYTES, HFConfigError, import_hf
    p = Path(args.config)
    if args.config == "-":
        text = sys.stdin.read(MAX_CONFIG_BYTES + 1)
    elif not p.is_file():
        raise HFConfigError([("(file)", f"{args.config}: no such file")])
    elif p.stat().st_size > MAX_CONFIG_BYTES:
        raise HFConfigError([("(file)", f"{args.config}: larger than {MAX_CONFIG_BYTES} bytes; a config.json is a few KB")])
    else:
        text = p.read_text(errors="replace")
    return import_hf(text)


def cmd_export_config(args) -> dict | str:
    from engine.presentation.launch_config import for_scenario
    out = for_scenario(parse_scenario(_load(args.scenario)), args.format)
    for note in out.notes:
        print(f"note: {note}", file=sys.stderr)
    return out.as_json() if args.json else out.text


COMMANDS = {"estimate": cmd_estimate, "export-config": cmd_export_config, "search": cmd_search, "compare": cmd_compare, "plan": cmd_plan,
            "energy": cmd_energy, "catalog": cmd_catalog, "import-hf": cmd_import_hf}


def _question_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """The plan's question, the same for plan and compare."""
    q = p.add_argument_group("the question", what)
    q.add_argument("--deadline-days", type=float, dest="deadline_days", help="finish within this many days (wall clock)")
    q.add_argument("--budget-usd", type=float, dest="budget_usd", help="spend at most this much")
    q.add_argument("--gpu-hours", type=float, dest="gpu_hours", help="use at most this many GPU-hours")
    q.add_argument("--max-gpus", type=int, dest="max_gpus", help="on at most this many accelerators (what you have)")
    q.add_argument("--batch-range", dest="batch_range", help="let the global batch grow within MIN-MAX sequences "
                                                              "(tokens fixed), e.g. 512-4096")
    q.add_argument("--confidence", type=float, dest="confidence",
                   help="meet the target with this chance, 0.5-0.9 (e.g. 0.9), read off each option's range; "
                        "without it, on the engine's own figures")
    q.add_argument("--efficiency", choices=["tuned", "typical"], default="tuned",
                   help="tuned: a well-tuned Megatron-class stack; typical: as published whole-run GPU-hours imply")
    p.add_argument("--framework", choices=STACK_CHOICES, help=STACK_HELP)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine", description="LLM training capacity estimates")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("estimate", help="memory, step time, throughput and GPU-hours of one scenario with a layout")
    p.add_argument("scenario", help="scenario JSON file, or - for stdin")
    p.add_argument("--explain", action="store_true", help="print every term (memory of the heaviest pipeline stage, "
                   "step time, collectives, pipeline, FLOPs, cost, energy, CO2, goodput) with its inputs, function and "
                   "source, as text")
    p = sub.add_parser("export-config", help="the scenario's layout (or the search's best) as its stack's launch "
                                             "configuration: Megatron-LM arguments, TorchTitan TOML, DeepSpeed JSON "
                                             "or a MaxText command line")
    p.add_argument("scenario", help="scenario JSON file, or - for stdin")
    p.add_argument("--format", choices=list(FORMATS),
                   help="default: the format of the scenario's training.framework (its vendor's MLPerf default)")
    p.add_argument("--json", action="store_true", help="print {format, framework, filename, notes, text} as JSON; "
                                                       "otherwise the file itself, with the notes on stderr")
    p = sub.add_parser("search", help="best parallelism layouts for a scenario's cluster (its layout is ignored)")
    p.add_argument("scenario", help="scenario JSON file, or - for stdin")
    p.add_argument("--top", type=int, default=10, help="how many layouts to return (default 10)")
    p.add_argument("--objective", choices=["time", "cost", "energy"], default="time")
    p.add_argument("--deadline-days", type=float, dest="deadline_days", help="also find the cheapest cluster that trains within this many days")
    p.add_argument("--gpu-hour-budget", type=float, dest="gpu_hour_budget", help="also find the fastest cluster within this GPU-hour budget")
    p.add_argument("--confidence", type=float, dest="confidence",
                   help="meet the deadline or budget with this chance, 0.5-0.9, read off the range (as plan's)")
    p.add_argument("--allow-span-nodes", action="store_true", help="let tensor/context/expert-parallel groups span nodes")
    p.add_argument("--framework", choices=STACK_CHOICES, help=STACK_HELP)
    p = sub.add_parser("compare", help="every accelerator on this scenario, each with its best layout, ranked")
    p.add_argument("scenario", help="scenario JSON file, or - for stdin")
    _question_arguments(p, "size each accelerator's cluster as the plan does for the question (deadline, budgets, at "
                           "most so many accelerators) and rank by the plan's rule (default: the scenario's n_gpus, "
                           "ranked by the weights)")
    p.add_argument("--weights", help="decision weights, e.g. time=0.3,cost=0.3,energy=0.05,co2=0.1,memory_headroom=0.05,ecosystem=0.2")
    p.add_argument("--accelerators", help="comma-separated catalog ids (default: all)")
    p = sub.add_parser("plan", help="the answer for a deadline or budget: accelerator, cluster size, days, cost, "
                                    "energy, CO2 with ranges, and the nearest alternatives")
    p.add_argument("scenario", help="scenario JSON file, or - for stdin (its cluster size and layout are ignored)")
    _question_arguments(p, "the answer meets every one given")
    p.add_argument("--vendor", default="any", help="any (default), same (the scenario's accelerator), or a vendor: "
                                                   "NVIDIA, AMD, Intel, Google, AWS")
    p = sub.add_parser("energy", help="energy, CO2 and cost of a run that already happened, from its GPU-hours")
    p.add_argument("--gpu-hours", type=float, required=True, dest="gpu_hours", help="GPU-hours of the run")
    p.add_argument("--power-w", type=float, required=True, dest="power_w", help="average power per GPU, W (TDP or measured)")
    p.add_argument("--pue", type=float, help="facility PUE (default: the sourced default in data/energy_defaults.json)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--carbon-intensity-g-per-kwh", type=float, dest="carbon_intensity_g_per_kwh", help="grid intensity, gCO2e/kWh")
    where.add_argument("--region", help="FRA, US-VA, gcp:us-central1, aws:us-east-1, ... (default: world average)")
    p.add_argument("--price-usd-per-gpu-hour", type=float, dest="price_usd_per_gpu_hour", help="price per GPU-hour, USD")
    sub.add_parser("catalog", help="list accelerators (dense peaks, sources), model presets and networks")
    p = sub.add_parser("import-hf", help="a Hugging Face config.json as the scenario's model block, with parameter counts")
    p.add_argument("config", help="config.json file, or - for stdin")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = COMMANDS[args.command](args)
    except ScenarioError as err:
        for field, msg in err.problems:
            print(f"error: {field}: {msg}", file=sys.stderr)
        return 2
    if isinstance(result, str):
        sys.stdout.write(result)
        return 0
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    from engine.command_line import run
    run(main)
