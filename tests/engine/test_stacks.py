"""The software stack as an input (engine/frameworks.py, data/frameworks.json): the vendor's MLPerf stack by default,
said in the estimate; each stack's semantics reaching the physics; an accelerator without a fitted level warned about
(one rule), never given another's level in silence; an NVL72 rack placing 64-GPU groups inside it."""
import numpy as np
import pytest

from engine import frameworks
from engine.inputs import parse_scenario
from engine.physics.comm import members_per_node, placed_domain
from engine.physics.compute import expert_fixed_s
from engine.physics.hardware import resolve_hardware
from engine.physics.layouts import Layouts
from engine.physics.model import shape_of
from engine.planning.estimate import estimate
from engine.planning.explain import explain
from engine.scenario import ScenarioError
from tests.engine.helpers import scenario

H100_8B = {"training.seq_len": 8192, "training.global_batch_size": 16, "layout.zero_stage": 3,
           "layout.micro_batch_size": 2, "layout.recompute": "selective"}


@pytest.mark.parametrize("vendor, stack", [("NVIDIA", "megatron_core"), ("Google", "jax_maxtext"),
                                           ("Intel", "deepspeed"), ("AMD", "pytorch_fsdp2")])
def test_each_vendor_defaults_to_the_stack_of_its_mlperf_submissions(vendor, stack):
    default = frameworks.frameworks().vendor_defaults[vendor]
    assert default.framework == stack and "MLPerf" in default.source


def test_the_estimate_names_its_stack_and_why():
    chosen = estimate(parse_scenario(scenario(**H100_8B)))
    assert chosen.framework["id"] == "megatron_core"
    assert chosen.framework["text"] == "framework: megatron_core, NVIDIA's MLPerf default"
    given = estimate(parse_scenario(scenario(**H100_8B, **{"training.framework": "pytorch_fsdp2"})))
    assert given.framework["text"] == "framework: pytorch_fsdp2, as given" and given.framework["calibrated"]


def test_an_unknown_stack_is_refused_with_the_choices():
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario(**{"training.framework": "megatron"}))
    assert "training.framework" in str(err.value) and "pytorch_fsdp2" in str(err.value)


def test_an_uncalibrated_accelerator_says_so_and_a_calibrated_one_does_not():
    # B200 has FP8 runs in NeMo 25.11 but no public 16-bit per-step run: bf16 on it is uncalibrated
    b200 = estimate(parse_scenario(scenario(**H100_8B, **{"cluster.accelerator": "B200-SXM-180GB"})))
    assert not b200.framework["calibrated"]
    assert any("B200-SXM-180GB is not calibrated for megatron_core at bf16" in w for w in b200.warnings)
    fp8 = estimate(parse_scenario(scenario(**H100_8B, **{"cluster.accelerator": "B200-SXM-180GB",
                                                          "training.precision": "fp8"})))
    assert fp8.framework["calibrated"] and not any("not calibrated" in w for w in fp8.warnings)
    h100 = estimate(parse_scenario(scenario(**H100_8B)))
    assert h100.framework["calibrated"] and not any("not calibrated" in w for w in h100.warnings)


def test_every_level_is_physical_and_names_its_runs():
    doc = frameworks.frameworks()
    for lv in doc.levels:
        assert 0.3 < lv.value <= 1.0 and "runs" in lv.fitted_on
    for stack in doc.rows:
        assert stack.source.url.startswith("https://")


def test_torchtitan_selective_recompute_reruns_half_the_forward_matmuls():
    # per-op SAC saves every other matmul (torchtitan _save_list policy); Megatron's selective recomputes the
    # attention core, which flash attention does not store: nothing
    megatron = estimate(parse_scenario(scenario(**H100_8B)))
    titan = estimate(parse_scenario(scenario(**H100_8B, **{"training.framework": "pytorch_fsdp2"})))
    assert megatron.time_breakdown_s["recompute"] == 0
    full = estimate(parse_scenario(scenario(**{**H100_8B, "training.framework": "pytorch_fsdp2",
                                               "layout.recompute": "full"})))
    assert 0.3 < titan.time_breakdown_s["recompute"] / full.time_breakdown_s["recompute"] < 0.7


def test_an_nvl72_rack_places_a_64_gpu_group_inside_it():
    assert placed_domain(72) == 64 and placed_domain(8) == 8 and placed_domain(4) == 4
    assert members_per_node(np.array(1), np.array(64), 72) == 64          # gcd(64, 72) = 8 would split it in 8
    assert members_per_node(np.array(8), np.array(32), 72) == 8           # tp8 x dp32: 8 dp members per rack
    assert members_per_node(np.array(2), np.array(8), 8) == 4             # an 8-GPU node is unchanged


def _level(framework, accelerator, pclass):
    return frameworks.level_row(frameworks.frameworks(), framework, accelerator, pclass).value


def test_a_stack_uncalibrated_on_an_accelerator_borrows_another_stacks_level_there_times_their_ratio():
    # PyTorch FSDP on the A100: Megatron-Core's A100 level x FSDP2's over Megatron-Core's on the H100 (0.790), not
    # FSDP2's H100 level (0.655): LLM Foundry's and TorchTitan's A100 runs, held out, sat 20% slow at the latter
    a100 = frameworks.resolve("pytorch_fsdp2", "NVIDIA", "A100-SXM4-80GB", "bf16")
    expected = (_level("megatron_core", "A100-SXM4-80GB", "16bit") * _level("pytorch_fsdp2", "H100-SXM5-80GB", "16bit")
                / _level("megatron_core", "H100-SXM5-80GB", "16bit"))
    assert not a100.calibrated and a100.level == pytest.approx(expected, abs=5e-4) and 0.78 < a100.level < 0.80
    assert "megatron_core's level on A100-SXM4-80GB" in a100.stand_in
    # the FP8 ratio on the H100 (TorchTitan's torchao float8 over Transformer Engine) carries to a B200
    b200 = frameworks.resolve("pytorch_fsdp2", "NVIDIA", "B200-SXM-180GB", "fp8")
    assert b200.level == pytest.approx(_level("megatron_core", "B200-SXM-180GB", "8bit")
                                       * _level("pytorch_fsdp2", "H100-SXM5-80GB", "8bit")
                                       / _level("megatron_core", "H100-SXM5-80GB", "8bit"), abs=5e-4)
    # across vendors the libraries differ: Megatron-Core on an MI300X does not scale FSDP2's MLPerf level there
    mi300x = frameworks.resolve("megatron_core", "AMD", "MI300X", "fp8")
    assert mi300x.level == _level("megatron_core", "H100-SXM5-80GB", "16bit") and "own level" in mi300x.stand_in


def test_the_uncalibrated_warning_names_the_level_that_stands_in():
    a100 = estimate(parse_scenario(scenario(**H100_8B, **{"cluster.accelerator": "A100-SXM4-80GB",
                                                          "training.framework": "pytorch_fsdp2"})))
    warning = next(w for w in a100.warnings if "not calibrated" in w)
    assert "megatron_core's level on A100-SXM4-80GB" in warning and "(0.79)" in warning


def test_a_4bit_recipe_borrows_its_stacks_fp8_level_on_the_same_accelerator():
    # the engine prices NVFP4 as the FP8 recipe with FP4 matmuls: where no 4-bit level is fitted on the accelerator or
    # its die (AMD's MXFP4: no 4-bit MLPerf result), the stack's FP8 level there, not the H100's 16-bit one
    mi355x = frameworks.resolve(None, "AMD", "MI355X", "nvfp4")
    assert not mi355x.calibrated and mi355x.level == _level("pytorch_fsdp2", "MI355X", "8bit")
    assert mi355x.stand_in == "the level of pytorch_fsdp2 on MI355X at 8bit"


def test_4bit_levels_are_fitted_on_nvidias_mlperf_nvfp4_results_and_shared_by_the_die():
    # NeMo 25.11 publishes no 4-bit row; NVIDIA's MLPerf v5.1 NVFP4 Llama 3.1 405B results (GB200: 512, 2,560 and
    # 5,120 GPUs; GB300: 512) are the public 4-bit data (scripts/calibrate_sustained.py), fitted like every MLPerf level
    for acc, n in (("GB200", 3), ("GB300", 1)):
        gb = frameworks.resolve(None, "NVIDIA", acc, "nvfp4")
        assert gb.calibrated and gb.level == _level("megatron_core", acc, "4bit")
        assert f"{n} runs" in gb.level_note and "v5.1 NVIDIA llama31_405b" in gb.level_note
        # faster than the FP8 recipe's level: the 405B results ran 7-14% faster than the FP8 level priced them
        assert gb.level > _level("megatron_core", acc, "8bit")
    b300 = frameworks.resolve(None, "NVIDIA", "B300-SXM-270GB", "nvfp4")          # its die's (GB300) 4-bit level
    assert not b300.calibrated and b300.level == _level("megatron_core", "GB300", "4bit")
    assert b300.stand_in == "the level of megatron_core on GB300 at 4bit, the same die"


OLMOE = {"n_layers": 16, "hidden_size": 2048, "n_heads": 16, "ffn_hidden_size": 1024, "vocab_size": 50304,
         "ffn_type": "swiglu", "n_experts": 64, "experts_per_token": 8}   # OLMoE-1B-7B config.json


@pytest.mark.parametrize("stack, kernels", [("megatron_core", "host_per_expert"), ("deepspeed", "host_per_expert"),
                                            ("pytorch_fsdp2", "grouped_on_device")])
def test_only_stacks_that_issue_each_experts_kernels_from_the_host_pay_the_per_expert_cost(stack, kernels):
    # Transformer Engine's GroupedLinear takes the tokens per expert as a host list and DeepSpeed-MoE loops over its
    # experts in Python; TorchTitan's torch._grouped_mm reads the offsets on the device: 64 local experts (OLMoE on
    # 8 H100 without expert parallelism) cost Megatron-Core 2 GEMMs x 64 x 188.7 us in each layer's forward
    sc = parse_scenario(scenario(**{"model": OLMOE, "training.framework": stack, "layout.zero_stage": 3}))
    hw = resolve_hardware(sc)
    assert frameworks.stack(stack).moe_expert_kernels == kernels
    fixed = float(expert_fixed_s(shape_of(sc.model), Layouts.of([sc.layout]), hw)[0])
    assert fixed == (pytest.approx(2 * 64 * 188.7e-6, rel=1e-3) if kernels == "host_per_expert" else 0.0)


@pytest.mark.parametrize("accelerator, us", [("H100-SXM5-80GB", 188.7), ("B200-SXM-180GB", 56.4), ("GB200", 56.4),
                                             ("GB300", 56.4), ("B300-SXM-270GB", 56.4), ("A100-SXM4-80GB", 188.7)])
def test_megatron_core_pays_the_per_expert_cost_of_nvidias_recipes_for_the_architecture(accelerator, us):
    # NeMo's Blackwell presets graph the router and the MoE preprocessing (fitted on the 25.11 table's six FP8-MX
    # Blackwell MoE rows: 56.4 us); its H100 presets do not (fitted on its three H100 MoE rows: 188.7 us); other
    # architectures, with no tuned MoE recipe in the data, take the H100 presets' figure
    sc = parse_scenario(scenario(**{"model": OLMOE, "training.framework": "megatron_core", "layout.zero_stage": 3,
                                    "cluster.accelerator": accelerator}))
    fixed = float(expert_fixed_s(shape_of(sc.model), Layouts.of([sc.layout]), resolve_hardware(sc))[0])
    assert fixed == pytest.approx(2 * 64 * us * 1e-6, rel=1e-3)


def test_explain_names_the_per_expert_cost_the_moe_layers_pay():
    # OLMoE on 8 GPUs without expert parallelism: 64 local experts; the figure of the accelerator's architecture
    for accelerator, us in (("H100-SXM5-80GB", "188.7"), ("GB200", "56.4")):
        sc = parse_scenario(scenario(**{"model": OLMOE, "training.framework": "megatron_core", "layout.zero_stage": 3,
                                        "cluster.accelerator": accelerator}))
        compute = next(t for t in explain(sc) if t.name == "compute")
        assert f"64 local experts x 2 GEMMs pay {us} us each forward" in compute.formula, compute.formula


def test_a_per_architecture_expert_cost_needs_its_note_and_host_issued_experts():
    row = frameworks.stack("megatron_core").model_dump()
    with pytest.raises(ValueError, match="needs its moe_expert_by_architecture_note"):
        frameworks.Stack.model_validate({**row, "moe_expert_by_architecture_note": ""})
    grouped = frameworks.stack("pytorch_fsdp2").model_dump()
    with pytest.raises(ValueError, match="pay no per-expert host cost on any architecture"):
        frameworks.Stack.model_validate({**grouped, "moe_expert_gemm_fixed_us_by_architecture": {"Blackwell": 50.0},
                                         "moe_expert_by_architecture_note": "a note long enough"})


def test_a_stack_with_experts_grouped_on_the_device_and_a_per_expert_cost_is_refused():
    row = frameworks.stack("pytorch_fsdp2").model_dump()
    with pytest.raises(ValueError, match="pay no per-expert host cost"):
        frameworks.Stack.model_validate({**row, "moe_expert_gemm_fixed_us": 188.7})


TRAINING = {"seq_len": 4096, "global_batch_size": 512, "total_tokens": 1e12}


@pytest.mark.parametrize("framework, kernel, fwd64, bwd64", [("megatron_core", 1.0, 412 / 600, 432 / 518),
                                                             ("pytorch_fsdp2", 0.62, 322 / 370, 287 / 318)])
def test_fused_attention_is_timed_at_the_models_head_dimension(framework, kernel, fwd64, bwd64):
    """The catalog's H100 rates are cuDNN's at head dimension 128 (600 / 516 TFLOP/s); at 64 each kernel runs at its
    own measured share of them (Shah et al. 2024 Fig. 5-6: cuDNN 412 / 432, FlashAttention-2 322 / 287 against 370 /
    318 at 128), at 96 halfway between in log2, and MLA at its query-key dimension (DeepSeek-V3: 192, halfway between
    128 and 256 on the forward, where cuDNN runs 580 at 256)."""
    def rates(preset: str) -> tuple[float, float]:
        hw = resolve_hardware(parse_scenario({"model": {"preset": preset}, "training": {**TRAINING, "framework": framework},
                                              "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 64}}))
        level = hw.provenance["sustained_kernel_fraction"]
        return hw.attention_fwd_flops / (600e12 * kernel * level), hw.attention_bwd_flops / (516e12 * kernel * level)
    assert rates("llama3.1-8b") == pytest.approx((1.0, 1.0))
    assert rates("gpt-oss-120b") == pytest.approx((fwd64, bwd64), abs=1e-3)          # 64 heads of 64
    gpt = {"n_layers": 24, "hidden_size": 2304, "n_heads": 24, "ffn_hidden_size": 9216, "vocab_size": 50304}
    hw96 = resolve_hardware(parse_scenario({"model": gpt, "training": {**TRAINING, "framework": framework},
                                            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 64}}))
    level = hw96.provenance["sustained_kernel_fraction"]
    half = np.log2(96) - 6                                                            # 96 is 0.585 of the way in log2
    assert hw96.attention_fwd_flops / (600e12 * kernel * level) == pytest.approx(fwd64 + half * (1 - fwd64), abs=1e-3)
    assert "head dimension 96" in hw96.provenance["attention"]
    if framework == "megatron_core":
        assert rates("deepseek-v3")[0] == pytest.approx(1 + (np.log2(192) - 7) * (580 / 600 - 1), abs=1e-3)
