"""torch.compile as an input of the PyTorch stacks (training.torch_compile): eagerly, each element-wise op of the
Llama block is a kernel of its own (engine.physics.compute.eager_elementwise_bytes), counted op by op and checked
against TorchTitan's eager runs, which nothing is fitted on (tests/engine/test_accuracy.py holds the figures)."""
import tomllib

import pytest

from engine.inputs import parse_scenario
from engine.physics.compute import eager_elementwise_bytes
from engine.physics.hardware import resolve_hardware
from engine.physics.model import shape_of
from engine.planning.estimate import estimate
from engine.presentation.edit import apply_edit
from engine.presentation.launch_config import export
from engine.scenario import ScenarioError
from tests.engine.helpers import gpt, scenario
from tests.engine.published_runs import torchtitan_2024_12

FSDP_8B = {"training.seq_len": 8192, "training.global_batch_size": 16, "training.framework": "pytorch_fsdp2",
           "layout.zero_stage": 3, "layout.micro_batch_size": 2, "layout.recompute": "selective"}


def _shape(**model):
    return shape_of(parse_scenario(scenario(**model)).arch)


def test_llama_8b_eager_bytes_per_token_and_layer_counted_op_by_op():
    # Llama 3.1 8B in bf16 (hidden 4096, 32 query and 8 KV heads of 128, SwiGLU MLP of 14336), no tensor parallelism:
    # two RMSNorms of 4096 at 32 extra bytes each (x.float 2+4, pow 4+4, mean 4, x*rsqrt 4+4, type_as 4+2, *weight
    # 2+2 = 36 against the fused kernel's 2+2), the rotary embedding of 32*128 query and 8*128 key elements at 16
    # extra (float 2+4, complex mul 4+4, type_as 4+2 = 20 against 2+2), silu-then-mul over 14336 at 2*2 extra
    shape = _shape()
    expected = 2 * 4096 * (36 - 4) + (32 + 8) * 128 * (20 - 4) + 14336 * 2 * 2
    assert expected == 401_408
    assert eager_elementwise_bytes(shape, 2.0, 1, 1, 14336) == pytest.approx(expected)
    # tensor parallelism 2 with sequence parallelism splits the norms by the sequence, the heads and the MLP by TP
    assert eager_elementwise_bytes(shape, 2.0, 2, 2, 14336 / 2) == pytest.approx(expected / 2)


def test_what_is_one_kernel_eagerly_costs_nothing_more():
    # GPT-3: LayerNorm is one torch kernel, learned positions are not rotated, GELU is one kernel
    gpt3 = shape_of(parse_scenario(scenario(**{"model": gpt(24, 2048, 16)})).arch)
    assert not gpt3.rms_norm and gpt3.rotary_elems == 0 and not gpt3.gated
    assert eager_elementwise_bytes(gpt3, 2.0, 1, 1, 4 * 2048) == 0.0
    # fp32 training: no casts to fp32 and back, so RMSNorm costs pow, mean, mul (20 bytes more) and rotary nothing
    assert eager_elementwise_bytes(_shape(), 4.0, 1, 1, 14336) == pytest.approx(2 * 4096 * 20 + 14336 * 2 * 4)


def test_eager_adds_the_traffic_at_the_stacks_bandwidth_and_async_tp_hides_nothing():
    compiled = parse_scenario(scenario(**FSDP_8B))
    eager = parse_scenario(scenario(**FSDP_8B, **{"training.torch_compile": False}))
    hw = resolve_hardware(eager)
    assert hw.eager_elementwise and not resolve_hardware(compiled).eager_elementwise
    assert hw.tp_overlap_share == 0.0 and resolve_hardware(compiled).tp_overlap_share > 0
    assert estimate(parse_scenario(scenario(**FSDP_8B, **{"training.torch_compile": True}))).step_time_s == \
        estimate(compiled).step_time_s
    # forward, backward (twice the forward's traffic) and TorchTitan's per-op selective recompute (every element-wise
    # op again): 4 passes of 401,408 bytes over 32 layers and 2 x 8192 tokens, at the stack's sustained bandwidth
    extra_s = 4 * 401_408 * 32 * 2 * 8192 / hw.hbm_bytes_per_s
    assert estimate(eager).step_time_s - estimate(compiled).step_time_s == pytest.approx(extra_s, rel=0.01)


@pytest.mark.parametrize("framework, why", [(None, "no training.framework is named"),
                                            ("megatron_core", "Megatron-Core / NeMo fuses its element-wise kernels")])
def test_torch_compile_is_refused_where_no_pytorch_stack_is_named(framework, why):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario(**{**FSDP_8B, "training.framework": framework, "training.torch_compile": False}))
    (field, message), = err.value.problems
    assert field == "training.torch_compile" and why in message and "pytorch_fsdp2, deepspeed" in message


def test_switching_to_a_stack_that_fuses_its_kernels_clears_the_setting():
    eager = parse_scenario(scenario(**FSDP_8B, **{"training.torch_compile": False}))
    edit = apply_edit(eager, "training.framework", "megatron_core")
    assert edit.scenario is not None and edit.scenario.training.torch_compile is None
    assert edit.notes[0] == "torch.compile setting cleared: Megatron-Core / NeMo fuses its element-wise kernels itself."
    kept = apply_edit(eager, "training.framework", "deepspeed")
    assert kept.scenario.training.torch_compile is False and not kept.notes


def test_torchtitan_export_compiles_as_the_estimate_assumed():
    # TorchTitan compiles only with [training] compile = true (job_config.py: compile: bool = False), so the
    # exported job says what the estimate assumed, and an eager job with async TP is told it hides nothing
    run = next(r for r in torchtitan_2024_12() if r.name == "tt24-t4-70b-256gpu-2d_asynctp")
    sc = parse_scenario({**run.scenario, "layout": run.layouts[0]})
    assert tomllib.loads(export(sc).text)["training"]["compile"] is True
    eager = parse_scenario({**run.scenario, "training": {**run.scenario["training"], "torch_compile": False},
                            "layout": run.layouts[0]})
    cfg = export(eager)
    assert tomllib.loads(cfg.text)["training"]["compile"] is False
    assert any("async TP is only effective when compile is enabled" in n for n in cfg.notes)
    assert estimate(eager).step_time_s > estimate(sc).step_time_s
