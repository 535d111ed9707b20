"""The table of layout rules (engine/physics/layout_rules.py): each rule reads only what it declares, the search can
filter dimension by dimension, published layouts pass, and the widths tensor parallelism splits are the model's."""
from types import SimpleNamespace

import numpy as np
import pytest

from engine.catalog import load_catalog
from engine.physics import layout_rules
from engine.physics.layout_rules import RULES, columns, facts_of
from engine.planning.search import BLOCK_DIMENSIONS, GROUP, UNSEARCHED, enumerate_layouts
from engine.planning.vendor import compare
from engine.presentation.edit import apply_edit, default_scenario, layout_choices
from engine.inputs import a2a_overlap_offered, parse_scenario
from engine.scenario import ScenarioError

LLAMA3_405B = {"model": {"preset": "llama3.1-405b"},
               "training": {"seq_len": 8192, "global_batch_size": 2048, "total_tokens": 1e12},
               "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 16384},
               "layout": {"tp": 8, "pp": 16, "dp": 128, "first_stage_layers": 7, "last_stage_layers": 7,
                          "virtual_stages": 8}}


def problems(data: dict) -> dict[str, str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    return dict(info.value.problems)


class Only(SimpleNamespace):
    """Columns that refuse to be read unless declared."""

    def __init__(self, cols, allowed):
        super().__init__(**{k: v for k, v in vars(cols).items() if k in allowed})


def test_every_rule_reads_only_the_columns_it_declares():
    facts = facts_of(default_scenario().arch, default_scenario().training, 1024)
    full = columns(**layout_rules.row(default_scenario().layout))
    for rule in RULES:
        assert rule.holds(facts, Only(full, rule.reads)).shape == (1,), rule.name   # AttributeError otherwise


class SizeFree:
    """Facts that refuse to give the cluster size."""

    def __init__(self, facts):
        self._facts = facts

    def __getattr__(self, name):
        if name == "n_gpus":
            raise AttributeError("n_gpus")
        return getattr(self._facts, name)


def test_every_rule_that_reads_the_cluster_size_says_so():
    # the search caches each dimension's choices on Facts.any_size, shared by every size the planner tries: only a rule
    # that does not read the size may answer there
    facts = facts_of(default_scenario().arch, default_scenario().training, 1024)
    full = columns(**layout_rules.row(default_scenario().layout))
    for rule in RULES:
        if rule.reads_size:
            with pytest.raises(AttributeError):
                rule.holds(SizeFree(facts), full)
        else:
            assert rule.holds(SizeFree(facts), full).shape == (1,), rule.name
    assert [r.name for r in RULES if r.reads_size] == ["gpus"]
    with pytest.raises(ValueError, match="read the cluster size"):
        layout_rules.choices(facts.any_size(), {"tp": 8, "dp": 128, "cp": 1, "v": 1, "first": -1, "last": -1},
                             pp=np.array([1]))
    assert list(layout_rules.choices(facts.any_size(), {"dp": 4}, mbs=np.array([1, 3, 4]))) == [0, 2]   # batch 1024


def test_no_rule_couples_two_of_the_searchs_block_dimensions():
    # the search builds a block as the product of each dimension's allowed choices: exact only if no rule reads two
    # (a rule on a flag the search leaves off constrains no dimension)
    for rule in (r for r in RULES if not set(r.reads) & set(UNSEARCHED)):
        touched = [dims for dims in BLOCK_DIMENSIONS if set(dims) & set(rule.reads)]
        assert len(touched) <= 1 and set(rule.reads) <= set(GROUP) | set(sum(touched, ())), rule.name


def test_the_all_to_all_overlap_is_offered_where_megatron_core_has_it_and_left_off_by_the_search():
    # Megatron-Core pairs two micro-batches' chunks without pipelining or with the interleaved schedule only
    data = {"model": {"preset": "qwen3-30b-a3b"}, "training": {"seq_len": 4096, "global_batch_size": 512,
                                                             "total_tokens": 1e12, "framework": "megatron_core"},
            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 16}}
    assert not enumerate_layouts(parse_scenario(data), 16).a2ao.any()
    offered = {(pp, v): a2a_overlap_offered(parse_scenario(data | {"layout": {"dp": 16 // pp, "pp": pp, "ep": 8,
                                                                              "virtual_stages": v}}))
               for pp, v in ((1, 1), (2, 1), (2, 2))}
    assert offered == {(1, 1): True, (2, 1): False, (2, 2): True}
    fsdp = data | {"training": data["training"] | {"framework": "pytorch_fsdp2"}, "layout": {"dp": 16, "ep": 8}}
    assert not a2a_overlap_offered(parse_scenario(fsdp))          # TorchTitan has no cross-micro-batch overlap
    p = problems(data | {"training": data["training"] | {"framework": "pytorch_fsdp2"},
                         "layout": {"dp": 16, "ep": 8, "moe_a2a_overlap": True}})
    assert "no cross-micro-batch all-to-all overlap" in p["layout.moe_a2a_overlap"]
    p = problems(data | {"layout": {"dp": 8, "pp": 2, "ep": 8, "moe_a2a_overlap": True}})
    assert "interleaved stages" in p["layout.moe_a2a_overlap"]


def test_a_zero_stage_the_stack_lacks_is_refused_never_searched_and_followed_on_a_stack_change():
    # TorchTitan's data parallelism is DDP (replicate) or FSDP2 (shard: weights, gradients and optimizer states
    # together); it has no ZeRO-1/2. Megatron-Core has all four (distributed optimizer; Megatron-FSDP's strategies)
    data = {"model": {"preset": "llama3.1-8b"},
            "training": {"seq_len": 8192, "global_batch_size": 128, "total_tokens": 1e12,
                         "framework": "pytorch_fsdp2"},
            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 64}}
    for stage in (1, 2):
        p = problems(data | {"layout": {"dp": 64, "zero_stage": stage}})
        assert p["layout.zero_stage"].startswith(f"PyTorch FSDP2 has no zero_stage {stage}; it offers zero_stage 0, 3")
    assert parse_scenario(data | {"layout": {"dp": 64, "zero_stage": 3, "reshard_after_forward": False}})
    fsdp = parse_scenario(data)
    assert set(enumerate_layouts(fsdp, 64).zero.tolist()) == {0, 3}
    assert layout_choices(parse_scenario(data | {"layout": {"dp": 64}}))["zero_stage"] == [0, 3]
    megatron = parse_scenario(data | {"training": data["training"] | {"framework": "megatron_core"}})
    assert set(enumerate_layouts(megatron, 64).zero.tolist()) == {0, 1, 2, 3}
    # naming TorchTitan for a ZeRO-1 layout moves it to the stage that shards at least as much, and says so
    zero1 = parse_scenario(data | {"training": data["training"] | {"framework": "megatron_core"},
                                   "layout": {"dp": 64, "zero_stage": 1}})
    edit = apply_edit(zero1, "training.framework", "pytorch_fsdp2")
    assert edit.scenario.layout.zero_stage == 3 and edit.scenario.training.framework == "pytorch_fsdp2"
    assert any(n.startswith("ZeRO stage set to 3: PyTorch FSDP2 has no ZeRO-1") for n in edit.notes)


def test_meta_405b_interleaved_one_layer_per_chunk_passes_and_its_neighbours_do_not():
    # Dubey et al. 2024 sec. 3.3.2: 126 layers on 16 stages, 7 on the first and last, 8 on the others, v = 8
    sc = parse_scenario(LLAMA3_405B)
    facts = facts_of(sc.arch, sc.training, 16384)
    v = np.arange(1, 17)
    ok = layout_rules.SPLIT.holds(facts, columns(pp=16, v=v, first=7, last=7))
    assert v[ok].tolist() == [1, 2, 4, 8]          # v divides the middle stages' 8 layers
    assert layout_choices(sc)["virtual_stages"] == [1, 2, 4, 8]
    p = problems(LLAMA3_405B | {"layout": LLAMA3_405B["layout"] | {"virtual_stages": 3}})
    assert "virtual_stages=3 must divide" in p["layout.virtual_stages"]


def arch(**extra):
    return {"n_layers": 8, "hidden_size": 1024, "n_heads": 16, "n_kv_heads": 8, "ffn_hidden_size": 2048,
            "vocab_size": 32000, "ffn_type": "swiglu", **extra}


def scenario(model: dict, layout: dict, n_gpus: int = 8) -> dict:
    return {"model": model, "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 1e10},
            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": n_gpus}, "layout": layout}


def test_tensor_parallelism_splits_the_dense_layers_of_an_moe_model_even_between_moe_layers():
    # Llama 4 Maverick style: MoE every second layer, no leading dense layers; the dense MLP of 1,100 columns does
    # not split 8 ways (the old rule only looked at the dense width when there were leading dense layers)
    moe = arch(n_experts=8, experts_per_token=1, moe_layer_every=2, dense_ffn_hidden_size=1100)
    p = problems(scenario(moe, {"tp": 8}))
    assert "tp=8 does not divide dense_ffn_hidden_size=1100 (MLP width); valid tp: 1, 2, 4" in p["layout.tp"]
    parse_scenario(scenario(moe, {"tp": 4, "dp": 2}))


def test_tensor_parallelism_splits_the_shared_experts_at_their_own_width():
    # Qwen2-MoE style: a shared expert wider than a routed one; its 1,500 columns do not split 8 ways, whatever
    # the routed width (the old rule multiplied the routed width by the number of shared experts)
    moe = arch(n_experts=8, experts_per_token=2, n_shared_experts=1, shared_expert_ffn_hidden_size=1500,
               ffn_hidden_size=512)
    p = problems(scenario(moe, {"tp": 8}))
    assert "n_shared_experts*shared_expert_ffn_hidden_size=1500 (shared-expert width)" in p["layout.tp"]
    assert "valid tp: 1, 2, 4, 8" not in p["layout.tp"] and "valid tp: 1, 2, 4" in p["layout.tp"]


def test_the_routed_experts_split_by_expert_tp_which_defaults_to_tp():
    moe = arch(n_experts=8, experts_per_token=2, ffn_hidden_size=1500)       # 1,500 = 4 x 375
    p = problems(scenario(moe, {"tp": 8}))                                   # ep 1: the experts still split 8 ways
    assert "expert_tp=8 does not divide the expert width ffn_hidden_size=1500 (expert_tp defaults to tp)" \
        in p["layout.expert_tp"]
    parse_scenario(scenario(moe, {"tp": 8, "expert_tp": 4}))


def test_scenario_messages_come_from_the_table_in_its_order():
    data = scenario(arch(), {"tp": 3, "dp": 2, "micro_batch_size": 5, "tp_comm_overlap": True, "zero_stage": 1,
                             "reshard_after_forward": False})
    fields = [f for f, _ in problems(data).items()]
    assert fields == ["layout.dp", "layout.tp", "layout.micro_batch_size", "layout.reshard_after_forward",
                      "layout.tp_comm_overlap"]


def test_an_edit_elsewhere_resets_what_no_longer_applies_and_says_so():
    sc = apply_edit(default_scenario(), "layout.zero_stage", 3).scenario
    sc = apply_edit(sc, "layout.reshard_after_forward", False).scenario
    edit = apply_edit(sc, "layout.zero_stage", 1)
    assert edit.scenario.layout.reshard_after_forward is True and "Gathered weights are freed" in edit.notes[0]
    refused = apply_edit(edit.scenario, "layout.reshard_after_forward", False)   # the edited field is never reset
    assert refused.scenario is None and refused.problems[0][0] == "layout.reshard_after_forward"


def test_a_new_number_of_stages_takes_a_split_that_builds():
    # Llama 3 405B from 16 stages (7/8/7, v 8) to 8: 126 layers split 15 + 6 x 16 + 15 with 8 chunks of 2 layers
    sc = parse_scenario(LLAMA3_405B)
    edit = apply_edit(sc, "layout.pp", 8)
    lay = edit.scenario.layout
    assert (lay.pp, lay.dp, lay.first_stage_layers, lay.last_stage_layers, lay.virtual_stages) == (8, 256, 15, 15, 8)
    assert edit.notes == ["Pipeline split set to 15 layers on the first stage and 15 on the last for the new number "
                          "of stages."]
    one = apply_edit(sc, "layout.pp", 1).scenario.layout
    assert (one.first_stage_layers, one.last_stage_layers, one.virtual_stages) == (None, None, 1)


def test_tp_choices_follow_every_width_tensor_parallelism_splits():
    moe = arch(n_experts=8, experts_per_token=2, n_dense_layers=2, dense_ffn_hidden_size=1100, ffn_hidden_size=1536)
    sc = parse_scenario(scenario(moe, {"tp": 1, "dp": 8}))
    assert layout_choices(sc)["tp"] == [1, 2, 4]          # dense 1,100 stops 8; the routed 1,536 would allow it


def test_one_precision_fallback_for_the_scenario_page_and_the_vendor_comparison():
    # Hopper has no MX tensor cores: an MXFP8 scenario trains in per-tensor FP8 on H100, wherever it is asked
    data = {"model": {"preset": "llama3.1-8b"}, "training": {"seq_len": 4096, "global_batch_size": 256,
            "total_tokens": 1e11, "precision": "mxfp8"}, "cluster": {"accelerator": "B200-SXM-180GB", "n_gpus": 8}}
    sc = parse_scenario(data)
    edit = apply_edit(sc, "cluster.accelerator", "H100-SXM5-80GB")
    assert edit.scenario.training.precision == "fp8" and "precision set to fp8" in edit.notes[-1]
    rows = {r.accelerator: r for r in compare(sc, accelerators=["H100-SXM5-80GB", "A100-SXM4-80GB"]).rows}
    assert rows["H100-SXM5-80GB"].precision == "fp8"
    assert rows["A100-SXM4-80GB"].precision == "bf16"
    h100 = load_catalog().accelerator("H100-SXM5-80GB")
    assert h100.peak("fp8") and not h100.peak("mxfp8")
