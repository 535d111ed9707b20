"""Editing a scenario one field at a time, as the app does: the edit is applied to the last valid scenario, dependent
fields follow (dp from the cluster size, training setup from a preset, precision and calibration from the
accelerator), and when only the layout stops working after a change elsewhere, the fastest layout that fits is
chosen and said so. Nothing here knows about Streamlit."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from engine.catalog import load_catalog
from engine.scenario import (PRECISION_DTYPE, Cost, ReliabilityInputs, Scenario, ScenarioError, Site, divisors,
                             parse_scenario)
from engine.planning.search import MIN_TOKENS_PER_CP_RANK, search, search_cluster

DEFAULT_SCENARIO = {
    "model": {"preset": "llama3.1-70b"},
    "training": {"seq_len": 8192, "global_batch_size": 1024, "total_tokens": 15.6e12, "precision": "bf16"},
    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 1024},
    "layout": {"tp": 8, "pp": 4, "dp": 32, "micro_batch_size": 1, "virtual_stages": 5, "zero_stage": 1,
               "sequence_parallel": True, "recompute": "selective"},
}
CALIBRATION_FIELDS = ("matmul_efficiency", "intra_node_busbw_gbs", "inter_node_busbw_gbs", "intra_node_latency_us",
                      "inter_node_latency_us")
PRECISION_PREFERENCE = ("bf16", "fp16", "fp8", "fp32")
DERIVES_DP = ("cluster.n_gpus", "layout.tp", "layout.pp", "layout.cp")


@dataclass(frozen=True)
class Edit:
    """The outcome of an edit: the new valid scenario, or the problems (field path, message) that stop it."""

    scenario: Scenario | None
    problems: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def default_scenario() -> Scenario:
    return parse_scenario(DEFAULT_SCENARIO)


def get_path(data: dict, path: str):
    node = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set_path(data: dict, path: str, value) -> None:
    *parents, leaf = path.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(leaf, None)
        if not node and parents:                       # an emptied optional block goes away with its last field
            _set_path(data, ".".join(parents), None)
    else:
        node[leaf] = value


def scenario_dict(sc: Scenario) -> dict:
    """The scenario as plain JSON-ready data without unset optional fields."""
    return sc.model_dump(mode="json", exclude_none=True)


def field_value(sc: Scenario, path: str):
    """The value a form shows for a field: the scenario's, else the schema default of its optional block."""
    data = scenario_dict(sc)
    for block, model in (("cost", Cost), ("site", Site), ("reliability", ReliabilityInputs)):
        data[block] = {**model().model_dump(mode="json", exclude_none=True), **data.get(block, {})}
    return get_path(data, path)


def describe_layout(layout: dict) -> str:
    """One line naming a layout, e.g. 'tp=8, pp=4, dp=32, micro-batch 1, ZeRO-1, recompute none'."""
    parts = [f"{k}={layout[k]}" for k in ("tp", "pp", "dp", "cp", "ep") if layout.get(k, 1) != 1 or k == "dp"]
    parts.append(f"micro-batch {layout.get('micro_batch_size', 1)}")
    if layout.get("virtual_stages", 1) > 1:
        parts.append(f"{layout['virtual_stages']} virtual stages")
    parts.append(f"ZeRO-{layout.get('zero_stage', 0)}")
    if layout.get("sequence_parallel"):
        parts.append("sequence parallel")
    parts.append(f"recompute {layout.get('recompute', 'none')}")
    return ", ".join(parts)


def closest_layout(sc: Scenario) -> tuple[dict | None, str]:
    """The fastest layout that fits (search ranking), else the valid layout that needs the least memory; and a note."""
    found = search(sc, top=1, pareto_sizes=[])
    if found["best"]:
        return found["best"][0]["layout"], "the fastest layout that fits in memory"
    cs = search_cluster(sc, sc.cluster.n_gpus)
    if not len(cs.layouts):
        return None, "no layout satisfies the divisibility rules for this model, batch and cluster"
    least = int(np.argmin(cs.ev["mem_total"]))
    return cs.layouts.layout(least).model_dump(), "nothing fits in memory; this layout needs the least memory per GPU"


def with_layout(sc: Scenario) -> Edit:
    """The scenario itself when it has a layout, else with the closest layout (for scenarios loaded without one)."""
    if sc.layout is not None:
        return Edit(sc)
    layout, why = closest_layout(sc)
    if layout is None:
        return Edit(None, [("layout", why)])
    data = scenario_dict(sc)
    data["layout"] = layout
    return Edit(parse_scenario(data), notes=[f"Layout chosen: {describe_layout(layout)} ({why})."])


def _supported_precision(accelerator: str, wanted: str) -> str | None:
    acc = load_catalog().accelerators.get(accelerator)
    if acc is None or acc.peak(PRECISION_DTYPE[wanted]):
        return None
    return next((p for p in PRECISION_PREFERENCE if acc.peak(PRECISION_DTYPE[p])), None)


def _on_field(path: str, problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """All problems of an edit, shown at the edited field (naming the other field where it differs)."""
    return [(path, msg if where == path else f"{where}: {msg}") for where, msg in problems]


def apply_edit(current: Scenario, path: str, value) -> Edit:
    """Set one field (dotted path; None removes an optional field; a block path like 'model' replaces the block)."""
    data = copy.deepcopy(scenario_dict(current))
    notes: list[str] = []
    cat = load_catalog()
    _set_path(data, path, value)
    if path == "model.preset" and value in cat.models:
        preset = cat.models[value]
        data["model"] = {"preset": value}
        defaults = preset.training_defaults
        data["training"].update(seq_len=defaults.seq_len, global_batch_size=defaults.global_batch_size,
                                total_tokens=defaults.total_tokens)
        notes.append(f"Training setup set to {preset.name}'s published one: sequence length {defaults.seq_len:,}, "
                     f"global batch {defaults.global_batch_size:,} sequences, {defaults.total_tokens / 1e12:g} "
                     "trillion tokens.")
    if path == "cluster.accelerator" and value in cat.accelerators:
        dropped = [f for f in CALIBRATION_FIELDS if data["cluster"].pop(f, None) is not None]
        if dropped:
            notes.append("Measured efficiencies belong to the previous accelerator and were cleared: "
                         + ", ".join(dropped) + ".")
        fallback = _supported_precision(value, data["training"]["precision"])
        if fallback:
            notes.append(f"{cat.accelerators[value].name} has no {data['training']['precision']} support; "
                         f"precision set to {fallback}.")
            data["training"]["precision"] = fallback
    layout = data.get("layout")
    if path == "layout.pp" and layout and layout.get("virtual_stages", 1) > 1 and \
            (value == 1 or current.arch.n_layers % (value * layout["virtual_stages"])):
        layout["virtual_stages"] = 1
        notes.append(f"Virtual stages set to 1: {current.arch.n_layers} layers do not split into {value} pipeline "
                     "stages of that many chunks.")
    if path in DERIVES_DP and layout:
        rest = layout.get("tp", 1) * layout.get("pp", 1) * layout.get("cp", 1)
        if data["cluster"]["n_gpus"] % rest == 0:
            layout["dp"] = data["cluster"]["n_gpus"] // rest
    try:
        return Edit(parse_scenario(data), notes=notes)
    except ScenarioError as err:
        problems = err.problems
    if path.startswith("layout") or not all(where.startswith("layout") for where, _ in problems):
        return Edit(None, _on_field(path, problems))
    old = layout
    data.pop("layout", None)
    try:
        bare = parse_scenario(data)
    except ScenarioError as err:
        return Edit(None, _on_field(path, err.problems))
    repaired = with_layout(bare)
    if repaired.scenario is None:
        return Edit(None, _on_field(path, problems + repaired.problems))
    reason = problems[0][1]
    notes.append(f"The layout {describe_layout(old)} no longer works ({reason}). " + repaired.notes[0])
    return Edit(repaired.scenario, notes=notes)


def load(data: dict | str | bytes) -> Edit:
    """A whole new scenario (uploaded JSON): validated, and given the closest layout if it has none."""
    try:
        sc = parse_scenario(data)
    except ScenarioError as err:
        return Edit(None, err.problems)
    return with_layout(sc)


def layout_choices(sc: Scenario) -> dict[str, list]:
    """The values worth offering for each layout field of this scenario (the search's own candidate space)."""
    arch, tr, n = sc.arch, sc.training, sc.cluster.n_gpus
    lay = sc.layout
    divs = divisors(n)
    pp = lay.pp if lay else 1
    dp = lay.dp if lay else n
    per_replica = tr.global_batch_size // dp if tr.global_batch_size % dp == 0 else tr.global_batch_size
    out = {
        "tp": [d for d in divs if arch.n_heads % d == 0 and arch.kv_heads % d == 0 and arch.ffn_hidden_size % d == 0],
        "pp": [d for d in divs if arch.n_layers % d == 0],
        "cp": [d for d in divs if d == 1 or (tr.seq_len % d == 0 and tr.seq_len // d >= MIN_TOKENS_PER_CP_RANK)],
        "ep": [d for d in divs if arch.n_experts % d == 0] if arch.is_moe else [1],
        "micro_batch_size": divisors(per_replica)[:64],
        "virtual_stages": [v for v in divisors(arch.n_layers) if pp * v <= arch.n_layers] if pp > 1 else [1],
        "zero_stage": [0, 1, 2, 3],
        "recompute": ["none", "selective", "full"],
    }
    if lay:
        current = lay.model_dump()
        for name, values in out.items():
            if current[name] not in values:
                values.append(current[name])
                values.sort()
    return out
