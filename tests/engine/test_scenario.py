"""Impossible or malformed scenarios get messages that name the field and say what would be valid."""
import pytest

from engine.scenario import ScenarioError
from engine.inputs import parse_scenario
from tests.engine.helpers import scenario


def problems(**overrides):
    with pytest.raises(ScenarioError) as info:
        parse_scenario(scenario(**overrides))
    return dict(info.value.problems)


def test_valid_scenario_parses():
    sc = parse_scenario(scenario())
    assert sc.arch.n_layers == 32 and sc.gpus_per_node == 8


def test_gpu_product_mismatch_names_dp_and_suggests_value():
    p = problems(**{"layout.tp": 2, "layout.dp": 8})
    assert "layout.dp" in p and "= 16 but cluster.n_gpus = 8" in p["layout.dp"] and "use dp=4" in p["layout.dp"]


def test_heads_not_divisible_by_tp_lists_valid_tp():
    p = problems(**{"layout.tp": 3, "layout.dp": 1, "cluster.n_gpus": 3, "training.global_batch_size": 3})
    assert "n_heads=32" in p["layout.tp"] and "valid tp: 1, 2, 4, 8" in p["layout.tp"]


def test_layers_not_divisible_by_pipeline():
    p = problems(**{"layout.pp": 8, "layout.dp": 1, "layout.virtual_stages": 3})
    assert "n_layers=32" in p["layout.virtual_stages"]


def test_batch_not_divisible_lists_micro_batches():
    p = problems(**{"training.global_batch_size": 24, "layout.micro_batch_size": 2})
    assert "valid micro_batch_size: 1, 3" in p["layout.micro_batch_size"]


def test_unknown_preset_and_accelerator_reported_together_with_schema_errors():
    p = problems(**{"model.preset": "gpt-9", "cluster.accelerator": "H900", "training.seq_len": -5})
    assert "unknown preset 'gpt-9'" in p["model.preset"] and "llama3.1-70b" in p["model.preset"]
    assert "unknown accelerator 'H900'" in p["cluster.accelerator"] and "H100-SXM5-80GB" in p["cluster.accelerator"]
    assert "greater than or equal to 1" in p["training.seq_len"]


@pytest.mark.parametrize("path,value,field", [
    ("training.global_batch_size", 0, "training.global_batch_size"),
    ("cluster.n_gpus", -8, "cluster.n_gpus"),
    ("training.total_tokens", "lots", "training.total_tokens"),
    ("training.precision", "fp4", "training.precision"),
    ("layout.zero_stage", 4, "layout.zero_stage"),
    ("layout.recompute", "some", "layout.recompute"),
])
def test_schema_errors_name_the_field(path, value, field):
    assert field in problems(**{path: value})


def test_precision_unsupported_by_accelerator():
    p = problems(**{"cluster.accelerator": "V100-SXM2-32GB"})
    assert "no published dense bf16 peak" in p["training.precision"] and "fp16" in p["training.precision"]


def test_expert_parallel_on_dense_model():
    assert "needs an MoE model" in problems(**{"layout.ep": 2})["layout.ep"]


def test_custom_architecture_errors():
    p = problems(**{"model": {"n_layers": 4, "hidden_size": 100, "n_heads": 3, "ffn_hidden_size": 400, "vocab_size": 1000}})
    assert "not divisible by n_heads 3" in p["model"]
    p = problems(**{"model": {"n_layers": 4, "hidden_size": 128}})
    assert {"model.n_heads", "model.ffn_hidden_size", "model.vocab_size"} <= set(p)


def test_unknown_fields_are_rejected():
    assert "layout.tensor_parallel" in problems(**{"layout.tensor_parallel": 2})


def test_injection_strings_are_just_unknown_names():
    p = problems(**{"cluster.accelerator": "H100'; DROP TABLE runs; --"})
    assert "unknown accelerator" in p["cluster.accelerator"]


def test_new_precisions_run_where_the_hardware_has_them_and_are_refused_elsewhere():
    from engine.planning.estimate import estimate
    from engine.scenario import ScenarioError
    from engine.inputs import parse_scenario
    big = {"model": {"preset": "llama3.1-405b"},
           "training": {"seq_len": 8192, "global_batch_size": 2048, "total_tokens": 15.6e12, "precision": "nvfp4"},
           "cluster": {"accelerator": "GB300", "n_gpus": 4608},
           "layout": {"pp": 9, "dp": 64, "cp": 8, "virtual_stages": 2, "zero_stage": 2}}
    assert estimate(parse_scenario(big)).fits                       # issue 11: 405B on GB300 NVL72 in NVFP4
    oss = {"model": {"preset": "gpt-oss-120b"},
           "training": {"seq_len": 4096, "global_batch_size": 1024, "total_tokens": 1e12},
           "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 64},
           "layout": {"pp": 2, "dp": 32, "ep": 8, "virtual_stages": 2, "zero_stage": 2}}
    assert estimate(parse_scenario(oss)).fits                       # issue 11: gpt-oss-120b on 64 H100
    oss["training"]["precision"] = "mxfp8"
    try:
        parse_scenario(oss)
        raise AssertionError("Hopper has no MX tensor cores")
    except ScenarioError as err:
        assert err.problems[0][0] == "training.precision" and "no published dense mxfp8 peak" in err.problems[0][1]


def test_an_expert_load_ratio_needs_routed_experts_and_at_most_every_token():
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario(**{"training.expert_load_ratio": 1.3}))          # a dense model
    assert "applies to mixture-of-experts models" in dict(err.value.problems)["training.expert_load_ratio"]
    moe = {"model": {"preset": "mixtral-8x7b"}, "training": {"seq_len": 4096, "global_batch_size": 64,
                                                           "total_tokens": 1e9, "expert_load_ratio": 4.5},
           "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8}}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(moe)                      # 8 experts, 2 per token: one expert gets at most 8 / 2 = 4x the mean
    assert "exceeds 4: with 8 experts and 2 per token" in dict(err.value.problems)["training.expert_load_ratio"]
    assert parse_scenario(moe | {"training": moe["training"] | {"expert_load_ratio": 4.0}})
    with pytest.raises(ScenarioError):
        parse_scenario(moe | {"training": moe["training"] | {"expert_load_ratio": 0.9}})   # below balanced
