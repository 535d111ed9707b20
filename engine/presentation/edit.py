"""Editing a scenario one field at a time, as the app does: the edit is applied to the last valid scenario, dependent
fields follow (dp from the cluster size, training setup from a preset, precision and calibration from the
accelerator), and when only the layout stops working after a change elsewhere, the fastest layout that fits is
chosen and said so. Nothing here knows about Streamlit."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
from pydantic import ValidationError

from engine import frameworks
from engine.catalog import load_catalog
from engine.inputs import parse_scenario
from engine.physics import layout_rules
from engine.precision import trained_precision
from engine.presentation.formatting import fmt_num
from engine.scenario import (Cost, Layout, PresetRef, ReliabilityInputs, Scenario, ScenarioError, Site, divisors,
                             rule_facts, scenario_stack, stack_on)
from engine.planning.search import MIN_TOKENS_PER_CP_RANK, pinned, search, search_cluster

DEFAULT_SCENARIO = {
    "model": {"preset": "llama3.1-70b"},
    "training": {"seq_len": 8192, "global_batch_size": 1024, "total_tokens": 15.6e12, "precision": "bf16"},
    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 1024},
    "layout": {"tp": 8, "pp": 4, "dp": 32, "micro_batch_size": 1, "virtual_stages": 5, "zero_stage": 1,
               "sequence_parallel": True, "recompute": "selective"},
}
CALIBRATION_FIELDS = ("matmul_efficiency", "intra_node_busbw_gbs", "inter_node_busbw_gbs", "intra_node_latency_us",
                      "inter_node_latency_us", "level_scale")
DERIVES_DP = ("cluster.n_gpus", "layout.tp", "layout.pp", "layout.cp")
CHANGES_STACK = ("training.framework", "cluster.accelerator")   # the stack (its vendor's default when unnamed)
PRESET_TRAINING = {"seq_len": "sequence length", "global_batch_size": "global batch",
                   "total_tokens": "training tokens"}      # what picking a preset sets: its authors' training setup


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
    """One line naming a layout, e.g. 'tp=8, pp=4, dp=32, micro-batch 1, ZeRO-1, recompute none'; the optional
    settings (expert TP, uneven pipeline stages, HSDP shard groups, kept ZeRO-3 weights, TP overlap, offload) where
    set."""
    parts = [f"{k}={layout[k]}" for k in ("tp", "pp", "dp", "cp", "ep") if layout.get(k, 1) != 1 or k == "dp"]
    if layout.get("expert_tp") is not None:
        parts.append(f"expert tp={layout['expert_tp']}")
    parts.append(f"micro-batch {layout.get('micro_batch_size', 1)}")
    if layout.get("virtual_stages", 1) > 1:
        parts.append(f"{layout['virtual_stages']} virtual stages")
    if layout.get("first_stage_layers") is not None or layout.get("last_stage_layers") is not None:
        parts.append(f"first/last stage {_or_even(layout.get('first_stage_layers'))}/"
                     f"{_or_even(layout.get('last_stage_layers'))} layers")
    parts.append(f"ZeRO-{layout.get('zero_stage', 0)}")
    if layout.get("shard_group") is not None:
        parts.append(f"sharded in groups of {layout['shard_group']} (HSDP)")
    if layout.get("reshard_after_forward") is False:
        parts.append("weights kept through the backward")
    if layout.get("sequence_parallel"):
        parts.append("sequence parallel")
    if layout.get("tp_comm_overlap"):
        parts.append("TP overlap")
    if layout.get("moe_a2a_overlap"):
        parts.append("all-to-all overlap")
    parts.append(f"recompute {layout.get('recompute', 'none')}")
    if layout.get("offload", "none") != "none":
        parts.append(OFFLOAD_SHORT[layout["offload"]])
    return ", ".join(parts)


def _or_even(layers: int | None) -> str:
    return "even" if layers is None else str(layers)


OFFLOAD_SHORT = {"optimizer": "optimizer offloaded to CPU",
                 "optimizer_and_params": "optimizer and weights offloaded to CPU"}
OFFLOAD_WORDS = {"optimizer": "gradients go to CPU memory and the optimizer steps there (ZeRO-Offload)",
                 "optimizer_and_params": "gradients, optimizer states and weights live in CPU memory, each layer's "
                                         "weights fetched when it runs (ZeRO-Infinity)"}
ZERO_WORDS = {0: "every copy keeps the full optimizer state",
              1: "the optimizer states are split across the copies (ZeRO-1)",
              2: "the optimizer states and gradients are split across the copies (ZeRO-2)",
              3: "weights, gradients and optimizer states are split across the copies (ZeRO-3, like FSDP)"}
RECOMPUTE_WORDS = {"none": "no activations are recomputed",
                   "selective": "the cheap-to-redo activations are recomputed in the backward pass (selective recompute)",
                   "full": "each layer's activations are recomputed in the backward pass (full recompute)"}


def layout_words(layout: dict, gpus_per_node: int) -> str:
    """A layout in plain words for someone who has not trained a model at scale, e.g. 'each layer is split over 8
    accelerators of one node (tensor parallel); 512 copies of the model train on different data (data parallel); ...'."""
    tp, pp, dp, cp, ep = (layout.get(k, 1) for k in ("tp", "pp", "dp", "cp", "ep"))
    out = []
    if tp > 1:
        out.append(f"each layer is split over {tp} accelerators" + (" of one node" if tp <= gpus_per_node else "")
                   + " (tensor parallel)")
    if pp > 1:
        text = f"the layers are cut into {pp} consecutive stages (pipeline parallel)"
        if layout.get("virtual_stages", 1) > 1:
            text += f", each accelerator holding {layout['virtual_stages']} smaller chunks (interleaved)"
        first, last = layout.get("first_stage_layers"), layout.get("last_stage_layers")
        if first is not None or last is not None:
            text += (f", with {_or_even(first)} layers on the first stage and {_or_even(last)} on the last, which also "
                     "hold the embedding and the output layer")
        out.append(text)
    if cp > 1:
        out.append(f"each sequence is split over {cp} accelerators (context parallel)")
    if ep > 1:
        text = f"the experts are spread over {ep} accelerators (expert parallel)"
        if layout.get("expert_tp") is not None:
            text += f", each expert split over {layout['expert_tp']}"
        out.append(text)
    out.append("one copy of the model" if dp == 1 else
               f"{dp:,} copies of the model train on different data (data parallel)")
    mb = layout.get("micro_batch_size", 1)
    out.append(f"{mb} sequence{'s' if mb > 1 else ''} per accelerator at a time")
    zero = ZERO_WORDS[layout.get("zero_stage", 0)]
    if layout.get("shard_group") is not None:
        zero += f", within groups of {layout['shard_group']} copies and repeated across groups (hybrid sharding, HSDP)"
    if layout.get("reshard_after_forward") is False and layout.get("zero_stage") == 3:
        zero += "; gathered weights are kept until the backward pass"
    out.append(zero)
    if layout.get("tp_comm_overlap"):
        out.append("tensor-parallel communication runs during the matrix multiplications (overlap)")
    if layout.get("moe_a2a_overlap"):
        out.append("each micro-batch's expert all-to-all runs during another micro-batch's compute (overlap)")
    out.append(RECOMPUTE_WORDS[layout.get("recompute", "none")])
    if layout.get("offload", "none") != "none":
        out.append(OFFLOAD_WORDS[layout["offload"]])
    text = "; ".join(out)
    return text[0].upper() + text[1:] + "."


def closest_layout(sc: Scenario) -> tuple[dict | None, str]:
    """The fastest layout that fits (search ranking), else the valid layout that needs the least memory; and a note."""
    found = search(sc, top=1, pareto_sizes=[])
    if found.best:
        return found.best[0].layout.model_dump(), "the fastest layout that fits in memory"
    cs = search_cluster(sc, sc.cluster.n_gpus)
    if not len(cs.layouts):
        return None, "no layout satisfies the divisibility rules for this model, batch and cluster"
    least = int(np.argmin(cs.ev["mem_total"]))
    why = ("nothing leaves the memory headroom free" if cs.ev["fits"][least] else "nothing fits in memory")
    return cs.layouts.layout(least).model_dump(), f"{why}; this layout needs the least memory per GPU"


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


def _on_field(path: str, problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """All problems of an edit, shown at the edited field (naming the other field where it differs)."""
    return [(path, msg if where == path else f"{where}: {msg}") for where, msg in problems]


def training_text(name: str, value) -> str:
    """A PRESET_TRAINING field's value in words: '8,192 tokens', '1,024 sequences', '500M tokens'."""
    return {"seq_len": lambda v: f"{v:,} tokens", "global_batch_size": lambda v: f"{v:,} sequences",
            "total_tokens": lambda v: f"{fmt_num(v)} tokens"}[name](value)


def own_training(current: Scenario, preset: str) -> dict[str, tuple]:
    """The training setup a switch from the current preset to `preset` would replace although it was set by hand:
    {field: (yours, the new preset's)} for each PRESET_TRAINING field that differs from the current preset's
    published value and from the new one's. Empty when the current model is not a preset or nothing was changed."""
    cat = load_catalog()
    if not isinstance(current.model, PresetRef) or preset not in cat.models or current.model.preset not in cat.models:
        return {}
    published = cat.models[current.model.preset].training_defaults
    new = cat.models[preset].training_defaults
    return {name: (getattr(current.training, name), getattr(new, name)) for name in PRESET_TRAINING
            if getattr(current.training, name) not in (getattr(published, name), getattr(new, name))}


def _and(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def preset_switch_text(current: Scenario, preset: str) -> str:
    """The question a preset switch asks when it would replace a training setup set by hand."""
    cat = load_catalog()
    old, new = cat.models[current.model.preset], cat.models[preset]
    mine = own_training(current, preset)
    yours = _and([f"the {PRESET_TRAINING[n]} to {training_text(n, v)} (published: "
                  f"{training_text(n, getattr(old.training_defaults, n))})" for n, (v, _) in mine.items()])
    theirs = _and([training_text(n, v) for n, (_, v) in mine.items()])
    return f"You set {yours} for {old.name}. {new.name} was trained with {theirs}: keep yours, or use its published setup?"


def adopt_layout(current: Scenario, best) -> Edit:
    """Take a ranked row of the search (an Estimate) into the scenario: its layout and, where the scenario names no
    stack and the planner found the row on another than the vendor's default, that stack (engine.planning.search.
    pinned), so that the estimate, the range and the launch configuration are the ranked row's own."""
    on_stack = pinned(current, best)
    edit = apply_edit(on_stack, "layout", best.layout.model_dump())
    if edit.scenario is not None and on_stack is not current:
        edit.notes.insert(0, f"Training framework set to {on_stack.training.framework}, the stack the planner found "
                             "this layout on.")
    return edit


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
        wanted = data["training"]["precision"]
        fallback, _ = trained_precision(cat.accelerators[value], wanted)
        if fallback not in (None, wanted):
            notes.append(f"{cat.accelerators[value].name} has no {data['training']['precision']} support; "
                         f"precision set to {fallback}.")
            data["training"]["precision"] = fallback
    if path == "training.framework" and data["training"].get("torch_compile") is not None and (
            value not in frameworks.FRAMEWORKS or frameworks.stack(value).torch_compile is None):
        data["training"].pop("torch_compile")
        notes.append("torch.compile setting cleared: "
                     + (f"{frameworks.stack(value).short_name} fuses its element-wise kernels itself."
                        if value in frameworks.FRAMEWORKS else "it applies to a named PyTorch stack only."))
    if path.startswith("model.") and data["training"].get("expert_load_ratio", 1.0) != 1.0 and not _is_moe(data):
        data["training"].pop("expert_load_ratio")
        notes.append("Busiest expert's load reset to 1: the model has no routed experts.")
    layout = data.get("layout")
    if path in DERIVES_DP and layout:
        rest = layout.get("tp", 1) * layout.get("pp", 1) * layout.get("cp", 1)
        if data["cluster"]["n_gpus"] % rest == 0:
            layout["dp"] = data["cluster"]["n_gpus"] // rest
    if layout and (path.startswith("layout.") or path in DERIVES_DP or path in CHANGES_STACK):
        notes += _follow_layout(current, path, layout, data["cluster"]["n_gpus"], _stack_of(data, current))
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


def _is_moe(data: dict) -> bool:
    """Whether the edited scenario's model routes to experts (True where the model cannot be read yet: parse_scenario
    names its problem)."""
    try:
        return Scenario.model_validate(data).arch.is_moe
    except (ValidationError, KeyError):
        return True


def _stack_of(data: dict, current: Scenario):
    """The software stack of the edited scenario (its framework, else its accelerator vendor's default); the current
    one where the edit names an unknown accelerator or stack (parse_scenario names the problem)."""
    accelerator, framework = data["cluster"].get("accelerator"), data["training"].get("framework")
    if accelerator not in load_catalog().accelerators or framework not in (None, *frameworks.FRAMEWORKS):
        return scenario_stack(current)
    return stack_on(framework, accelerator)


def _follow_layout(current: Scenario, path: str, layout: dict, n_gpus, stack) -> list[str]:
    """Settings that only apply with another one follow it when an edit breaks their rule (in place), with a note
    each: the resets of engine.physics.layout_rules (the ZeRO stage with the software stack, kept ZeRO-3 weights and
    shard groups with the ZeRO stage, TP overlap with TP and sequence parallel, the pipeline split and interleaving
    with the number of stages). The edited field itself is never reset: a value that breaks a rule is refused at its
    field."""
    try:
        lay = Layout.model_validate(layout)
    except ValidationError:
        return []                                      # parse_scenario names the problem
    if not isinstance(n_gpus, int):
        return []
    facts = layout_rules.facts_of(current.arch, current.training, n_gpus, stack)
    before = layout_rules.row(lay)
    edited = {layout_rules.COLUMN[path.removeprefix("layout.")]} if path.startswith("layout.") else set()
    after, applied = layout_rules.follow(facts, layout_rules.columns(**before), edited)
    if not applied:
        return []
    new = {k: getattr(after, k)[0].item() for k in before}
    for name, value in layout_rules.layout_fields(new).items():
        if value is None:
            layout.pop(name, None)
        else:
            layout[name] = value
    return [rule.note(facts, before, new) for rule in applied]


def load(data: dict | str | bytes) -> Edit:
    """A whole new scenario (uploaded JSON): validated, and given the closest layout if it has none."""
    try:
        sc = parse_scenario(data)
    except ScenarioError as err:
        return Edit(None, err.problems)
    return with_layout(sc)


def layout_choices(sc: Scenario) -> dict[str, list]:
    """The values worth offering for each layout field of this scenario: of the candidates (the search's space:
    divisors of the cluster, context parallelism down to MIN_TOKENS_PER_CP_RANK tokens a rank, expert TP within the
    TP group, the search's pipeline splits), those that every rule reading the field (or an unset expert_tp or
    shard_group that follows it) allows once the edit's dependent fields follow: dp from the cluster size, whose
    own rule (the batch) speaks when the edit is applied, and the resets of engine.physics.layout_rules. The
    pipeline split as (first, last) stage layers, None for the even split."""
    arch, tr, n = sc.arch, sc.training, sc.cluster.n_gpus
    facts = rule_facts(sc, n)
    lay = sc.layout or Layout(dp=n)
    base = layout_rules.row(lay)
    divs = divisors(n)
    U = layout_rules.UNSET

    def allowed(field: str, candidates: list) -> list:
        """Candidates of one column (or of several, as tuples) that the rules reading it allow after the edit."""
        names = layout_rules.COLUMN[field] if field in layout_rules.COLUMN else ("first", "last")
        names = (names,) if isinstance(names, str) else names
        values = np.array(candidates, dtype=np.int64).reshape(len(candidates), len(names)).T
        cols = {**base, **dict(zip(names, values))}
        if field in ("tp", "pp", "cp"):                 # dp follows the cluster size (DERIVES_DP)
            rest = cols["tp"] * cols["pp"] * cols["cp"]
            cols["dp"] = np.where(n % rest == 0, n // rest, base["dp"])
        changed = set(names)
        if lay.expert_tp is None and field != "expert_tp":      # unset optional fields keep following their default
            cols["etp"] = cols["tp"]
            changed.add("etp")
        if lay.shard_group is None and field != "shard_group":
            cols["shard"] = cols["dp"] * cols["cp"]
            changed.add("shard")
        after, _ = layout_rules.follow(facts, layout_rules.columns(**cols), set(names))
        ok = layout_rules.allowed(facts, after, layout_rules.reading(changed))
        return [c for c, good in zip(candidates, ok) if good]

    dp_group = lay.dp * lay.cp
    out = {
        "tp": allowed("tp", divs),
        "pp": allowed("pp", divs),
        "cp": allowed("cp", [d for d in divs if d == 1 or tr.seq_len // d >= MIN_TOKENS_PER_CP_RANK]),
        "ep": allowed("ep", divs),
        "micro_batch_size": allowed("micro_batch_size", divisors(tr.global_batch_size))[:64],
        "virtual_stages": allowed("virtual_stages", list(range(1, arch.n_layers + 1))) or [1],
        "zero_stage": allowed("zero_stage", [0, 1, 2, 3]),
        "recompute": list(layout_rules.RECOMPUTE),
        "offload": [layout_rules.OFFLOAD[i] for i in allowed("offload", list(range(len(layout_rules.OFFLOAD))))],
        "shard_group": [None, *[g for g in allowed("shard_group", divisors(dp_group)) if g < dp_group]][:64],
        "expert_tp": [None, *[d for d in allowed("expert_tp", divisors(lay.tp)) if d != lay.tp]],
        "stage_split": [(None if a == U else a, None if b == U else b) for a, b in allowed(
            "stage_split", list(dict.fromkeys([(U, U), *layout_rules.split_choices(arch.n_layers, lay.pp)])))]
        if lay.pp > 1 else [(None, None)],
    }
    if sc.layout:
        current = lay.model_dump()
        current["stage_split"] = (lay.first_stage_layers, lay.last_stage_layers)
        for name, values in out.items():
            if current[name] not in values:
                values.append(current[name])
                values.sort(key=lambda v: (v is not None, v if not isinstance(v, tuple) else tuple(x or 0 for x in v)))
    return out
