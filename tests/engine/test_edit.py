"""Editing a scenario one field at a time (engine/presentation/edit.py), as the app's widgets do."""
import pytest

from engine.catalog import load_catalog
from engine.presentation.edit import (DEFAULT_SCENARIO, apply_edit, default_scenario, describe_layout, field_value,
                                      layout_choices, load, own_training)
from engine.planning.estimate import estimate
from engine.scenario import layout_problems
from engine.inputs import parse_scenario
from engine.planning.search import search


def test_the_default_scenario_is_the_readme_example_and_fits():
    sc = default_scenario()
    assert sc == parse_scenario(DEFAULT_SCENARIO)
    assert estimate(sc).fits


@pytest.mark.parametrize("path, value, dp", [("cluster.n_gpus", 512, 16), ("layout.tp", 4, 64), ("layout.pp", 2, 64),
                                             ("layout.cp", 2, 16)])
def test_dp_follows_the_cluster_and_the_other_dimensions(path, value, dp):
    edit = apply_edit(default_scenario(), path, value)
    assert not edit.problems
    lay = edit.scenario.layout
    assert lay.dp == dp and lay.tp * lay.pp * lay.dp * lay.cp == edit.scenario.cluster.n_gpus


def test_a_preset_brings_its_published_training_setup():
    edit = apply_edit(default_scenario(), "model.preset", "gpt3-175b")
    d = load_catalog().models["gpt3-175b"].training_defaults
    tr = edit.scenario.training
    assert (tr.seq_len, tr.global_batch_size, tr.total_tokens) == (d.seq_len, d.global_batch_size, d.total_tokens)
    assert "published" in edit.notes[0]


def test_when_only_the_layout_breaks_the_fastest_fitting_layout_is_chosen_and_said_so():
    edit = apply_edit(default_scenario(), "model.preset", "llama3.1-8b")     # 32 layers: pp 4 x v 5 no longer works
    best = search(edit.scenario.model_copy(update={"layout": None}), top=1, pareto_sizes=[]).best[0]
    assert edit.scenario.layout == best.layout
    assert any("no longer works" in n and describe_layout(best.layout.model_dump()) in n for n in edit.notes)


def test_when_nothing_fits_the_layout_with_the_least_memory_is_chosen():
    # 70B on two GPUs: with ZeRO-Infinity's offload its 1.1 TB of states would need 564 GB of host memory per GPU
    # (one 8-GPU node fits it since offload is searched: tests/engine/test_finetune.py)
    edit = apply_edit(default_scenario(), "cluster.n_gpus", 2)
    assert not estimate(edit.scenario).fits
    assert any("nothing fits in memory" in n for n in edit.notes)
    assert not layout_problems(edit.scenario, edit.scenario.layout)


def test_when_only_the_headroom_is_left_the_layout_with_the_least_memory_is_chosen_and_said_so():
    # 70B on 24 GPUs keeping half of each 79.65 GiB free: the least memory (tp 8 x pp 3, full recompute) is 55.6 GiB;
    # servers without host memory to offload to (ZeRO-Infinity would fit it: 47 GB of states per GPU in CPU memory)
    sc = apply_edit(default_scenario(), "training.memory_headroom_fraction", 0.5).scenario
    sc = apply_edit(sc, "cluster.host_memory_gb_per_gpu", 0).scenario
    edit = apply_edit(sc, "cluster.n_gpus", 24)
    est = estimate(edit.scenario)
    assert est.fits and est.memory_gib.total > 0.5 * est.memory_capacity_gib
    assert any("nothing leaves the memory headroom free; this layout needs the least memory" in n for n in edit.notes)


def test_an_edit_of_the_layout_itself_is_never_repaired_but_flagged_at_its_field():
    edit = apply_edit(default_scenario(), "layout.tp", 3)
    assert edit.scenario is None
    assert {f for f, _ in edit.problems} == {"layout.tp"}
    assert any("tp=3 does not divide n_heads=64" in m for _, m in edit.problems)


def test_problems_elsewhere_are_shown_at_the_edited_field_naming_their_own():
    # 1,000 = 2^3 x 5^3 GPUs: a power-of-two batch leaves dp = 1 or 2 and 125 stages for 80 layers
    edit = apply_edit(default_scenario(), "cluster.n_gpus", 1000)
    assert edit.scenario is None
    assert all(f == "cluster.n_gpus" for f, _ in edit.problems)
    assert any(m.startswith("layout.dp:") for _, m in edit.problems)


def test_a_new_accelerator_clears_measurements_and_falls_back_to_a_supported_precision():
    sc = apply_edit(default_scenario(), "cluster.matmul_efficiency", 0.7).scenario
    edit = apply_edit(sc, "cluster.accelerator", "V100-SXM2-32GB")
    assert edit.scenario.cluster.matmul_efficiency is None
    assert edit.scenario.training.precision == "fp16"
    assert len(edit.notes) == 2


def test_pipeline_of_one_resets_interleaving():
    edit = apply_edit(default_scenario(), "layout.pp", 1)
    assert edit.scenario.layout.virtual_stages == 1 and edit.scenario.layout.dp == 128


def test_emptying_an_optional_block_removes_it():
    sc = apply_edit(default_scenario(), "site.pue", 1.2).scenario
    assert sc.site.pue == 1.2
    assert apply_edit(sc, "site.pue", None).scenario.site is None


def test_form_values_fall_back_to_schema_defaults():
    sc = default_scenario()
    assert field_value(sc, "cost.basis") == "cloud" and field_value(sc, "cost.pricing") == "on_demand"
    assert field_value(sc, "site.pue") is None and field_value(sc, "cluster.n_gpus") == 1024


def test_loading_a_scenario_without_a_layout_gives_it_one():
    data = {k: v for k, v in DEFAULT_SCENARIO.items() if k != "layout"}
    edit = load(data)
    assert edit.scenario.layout is not None and edit.notes
    assert load('{"model": 1}').problems


def test_every_offered_layout_value_passes_its_own_rule():
    sc = default_scenario()
    arch = sc.arch
    choices = layout_choices(sc)
    assert all(arch.n_heads % t == 0 and arch.kv_heads % t == 0 and 1024 % t == 0 for t in choices["tp"])
    assert all(arch.n_layers % p == 0 for p in choices["pp"])
    assert all(sc.training.seq_len % c == 0 for c in choices["cp"])
    assert choices["ep"] == [1]
    assert all(1024 // 32 % m == 0 for m in choices["micro_batch_size"])
    assert sc.layout.virtual_stages in choices["virtual_stages"]


def test_offered_virtual_stages_follow_the_uneven_split():
    # Llama 3 405B on pp16 with 7 + 14 x 8 + 7 layers: interleaving must divide the middle stages' 8 layers, and
    # one layer per chunk (v8) is what Meta ran; every offered value is accepted as the scenario's layout
    data = {"model": {"preset": "llama3.1-405b"},
            "training": {"seq_len": 8192, "global_batch_size": 2048, "total_tokens": 1e12},
            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 16384},
            "layout": {"tp": 8, "pp": 16, "dp": 128, "first_stage_layers": 7, "last_stage_layers": 7}}
    offered = layout_choices(parse_scenario(data))["virtual_stages"]
    assert offered == [1, 2, 4, 8]
    for v in offered:
        parse_scenario(data | {"layout": data["layout"] | {"virtual_stages": v}})


def test_a_training_setup_counts_as_set_by_hand_only_where_it_differs_from_both_presets_published_ones():
    cat = load_catalog()
    seventy, eight = (cat.models[m].training_defaults for m in ("llama3.1-70b", "llama3.1-8b"))
    sc = default_scenario()                               # the 70B's published 8,192 x 1,024 sequences, 15.6T tokens
    assert (sc.training.seq_len, sc.training.global_batch_size, sc.training.total_tokens) == \
        (seventy.seq_len, seventy.global_batch_size, seventy.total_tokens)
    assert own_training(sc, "llama3.1-8b") == {}
    mine = apply_edit(apply_edit(sc, "training.global_batch_size", 2048).scenario, "training.total_tokens", 5e8)
    assert own_training(mine.scenario, "llama3.1-8b") == {"global_batch_size": (2048, eight.global_batch_size),
                                                          "total_tokens": (5e8, eight.total_tokens)}
    same = apply_edit(sc, "training.global_batch_size", eight.global_batch_size).scenario   # already the 8B's value
    assert own_training(same, "llama3.1-8b") == {}
