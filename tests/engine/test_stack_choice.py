"""The planner chooses the software stack when the scenario names none (issue 21 item 1: "the search and the answer
may choose the stack, and say which"): among the stacks that run on the accelerator's vendor with a level fitted for
it (data/frameworks.json runs_on and levels), the best by the same ranking as the layouts; a named stack is kept."""
import html
import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from engine import __main__ as commands
from engine import frameworks
from engine.planning.estimate import estimate
from engine.planning.plan import plan
from engine.planning.search import best_at, search, stacks
from engine.presentation.answer import answer_scenario, stack_text
from engine.presentation.edit import adopt_layout, default_scenario
from engine.presentation.summary import summary_html
from tests.engine.helpers import parse

DATA = json.loads((Path(__file__).resolve().parents[2] / "data" / "frameworks.json").read_text())


def level(framework: str, accelerator: str, pclass: str) -> float | None:
    """The fitted level as data/frameworks.json writes it (read here, not through engine.frameworks)."""
    return next((lv["value"] for lv in DATA["levels"] if lv["framework"] == framework
                 and accelerator in lv["accelerators"] and lv["precision_class"] == pclass), None)


def on(sc, **training):
    return sc.model_copy(update={"training": sc.training.model_copy(update=training)})


def test_on_tpu_only_jax_maxtext_is_weighed_and_an_uncalibrated_stack_never_competes():
    # TPU: MaxText is the only stack Google runs (its MLPerf gpt3 submissions) and the only one with a TPU level
    assert frameworks.candidates("Google", "TPU-v6e", "bf16") == ("jax_maxtext",)
    # H100 bf16: Megatron-LM's weak-scaling table and TorchTitan's tables each fitted a level; the vendor's MLPerf
    # stack first (it wins a tie)
    assert level("megatron_core", "H100-SXM5-80GB", "16bit") and level("pytorch_fsdp2", "H100-SXM5-80GB", "16bit")
    assert frameworks.candidates("NVIDIA", "H100-SXM5-80GB", "bf16") == ("megatron_core", "pytorch_fsdp2")
    # B200 bf16: no stack has a level there (FSDP2 runs on NVIDIA, but TorchTitan's fit is H100's): the vendor's
    # default alone, marked uncalibrated - never FSDP2 on a borrowed level
    assert level("pytorch_fsdp2", "B200-SXM-180GB", "16bit") is None
    assert frameworks.candidates("NVIDIA", "B200-SXM-180GB", "bf16") == ("megatron_core",)
    assert not frameworks.resolve(None, "NVIDIA", "B200-SXM-180GB", "bf16").calibrated
    # MI300X fp8: PyTorch (AMD's MLPerf stack) has the fitted level; Megatron-Core runs on ROCm but has none there
    assert "AMD" in frameworks.stack("megatron_core").runs_on.vendors
    assert frameworks.candidates("AMD", "MI300X", "fp8") == ("pytorch_fsdp2",)


def test_for_a_moe_model_only_a_stack_whose_moe_was_measured_competes():
    # TorchTitan's grouped experts pay no per-expert host cost, but no published MoE run measured that stack: on
    # H100 only Megatron-Core (fitted on NeMo's H100 MoE runs) is weighed for a MoE model, both for a dense one
    assert frameworks.stack("megatron_core").moe_fitted and not frameworks.stack("pytorch_fsdp2").moe_fitted
    assert frameworks.candidates("NVIDIA", "H100-SXM5-80GB", "bf16", moe=True) == ("megatron_core",)
    assert frameworks.candidates("NVIDIA", "H100-SXM5-80GB", "bf16") == ("megatron_core", "pytorch_fsdp2")
    # AMD: no stack's MoE is measured there; the vendor's default alone, as for an uncalibrated accelerator
    assert frameworks.candidates("AMD", "MI300X", "fp8", moe=True) == ("pytorch_fsdp2",)
    moe = parse(**{"model.preset": "qwen3-30b-a3b", "layout": None})
    dense = parse(**{"layout": None})
    assert stacks(moe) == (None,) and stacks(dense) == ("megatron_core", "pytorch_fsdp2")


def test_on_h100_the_stack_with_the_higher_fitted_level_is_chosen_and_the_gap_is_said():
    sc = default_scenario()
    # equal layout (the default scenario's): Megatron-Core's fitted level 0.675 > FSDP2's 0.649, and FSDP2's own
    # semantics only add work (FlashAttention-2 at 0.62 of cuDNN, fp32 gradient reduction, per-op recompute), so its
    # step is slower by at least the level ratio on the compute-bound part
    assert level("megatron_core", "H100-SXM5-80GB", "16bit") > level("pytorch_fsdp2", "H100-SXM5-80GB", "16bit")
    mc = estimate(on(sc, framework="megatron_core"))
    fsdp = estimate(on(sc, framework="pytorch_fsdp2"))
    assert mc.step_time_s < fsdp.step_time_s
    # the search's choice on 1,024 GPUs is the faster of each stack's own best layout, found with the stack named
    free = sc.model_copy(update={"layout": None})
    named = {fw: best_at(on(free, framework=fw), 1024) for fw in ("megatron_core", "pytorch_fsdp2")}
    chosen = best_at(free, 1024)
    assert chosen.framework["id"] == "megatron_core" == min(named, key=lambda fw: named[fw].wall_days)
    assert chosen.wall_days == named["megatron_core"].wall_days
    gap = 1 - named["megatron_core"].wall_days / named["pytorch_fsdp2"].wall_days
    why = chosen.framework["planner_choice"]["why"]
    assert f"{gap:.0%} faster than PyTorch FSDP2" in why, why
    assert chosen.framework["chosen_by"].startswith("the planner: Megatron-Core / NeMo")
    # the layout search says the same
    result = search(free, top=2, pareto_sizes=[])
    assert result.stack["id"] == "megatron_core" and result.stack["planner_choice"]["why"] == why
    assert all(r.framework["id"] == "megatron_core" for r in result.best)


def test_a_named_stack_is_kept_everywhere():
    free = on(default_scenario().model_copy(update={"layout": None}), framework="pytorch_fsdp2")
    row = best_at(free, 1024)
    assert row.framework["id"] == "pytorch_fsdp2" and row.framework["chosen_by"] == "the scenario"
    assert "planner_choice" not in row.framework
    out = plan(free, deadline_days=30, vendor="same")
    assert out.answer.stack["id"] == "pytorch_fsdp2"
    assert stack_text(out.answer.stack) == "PyTorch FSDP2, as the scenario names it"
    # TorchTitan's fitted level is below Megatron-Core's on H100: the named stack needs more GPUs or more days
    chosen = plan(free.model_copy(update={"training": free.training.model_copy(update={"framework": None})}),
                  deadline_days=30, vendor="same").answer
    assert chosen.stack["id"] == "megatron_core"
    assert (out.answer.n_gpus, out.answer.cost_usd) != (chosen.n_gpus, chosen.cost_usd)
    assert out.answer.cost_usd > chosen.cost_usd


def test_a_ranked_layout_taken_into_the_scenario_keeps_the_stack_it_was_found_on():
    """Layout search's "Use layout #n": the scenario's estimate of the adopted layout is the ranked row's own, also
    where the row's stack is not the vendor's default (the scenario then names it, and says so)."""
    free = default_scenario().model_copy(update={"layout": None})
    for fw in ("pytorch_fsdp2", "megatron_core"):
        row = best_at(on(free, framework=fw), 1024)
        edit = adopt_layout(free, row)
        assert edit.scenario.layout == row.layout
        assert edit.scenario.training.framework == (fw if fw == "pytorch_fsdp2" else None)   # Megatron: NVIDIA's default
        assert any("Training framework set to pytorch_fsdp2" in n for n in edit.notes) == (fw == "pytorch_fsdp2")
        adopted = estimate(edit.scenario)
        assert adopted.framework["id"] == fw
        assert adopted.step_time_s == pytest.approx(row.step_time_s, rel=1e-9)


def test_the_answer_says_the_stack_and_the_tpu_answer_its_only_stack():
    free = default_scenario().model_copy(update={"layout": None})
    # the v6e's level is fitted in int8 (MaxText's AQT, as Google's MLPerf GPT-3 runs trained): in bf16 it borrows one
    int8 = free.model_copy(update={"training": free.training.model_copy(update={"precision": "int8"})})
    tpu = plan(int8, deadline_days=30, accelerators=["TPU-v6e"]).answer
    assert tpu.stack["id"] == "jax_maxtext"
    assert stack_text(tpu.stack) == ("JAX / MaxText, chosen by the planner: Google's MLPerf default, the only stack "
                                     "that runs on Google with a level fitted for Google Cloud TPU v6e (Trillium) at "
                                     "8bit precision")
    bf16 = plan(free, deadline_days=30, accelerators=["TPU-v6e"]).answer
    assert stack_text(bf16.stack) == ("JAX / MaxText, chosen by the planner: Google's MLPerf default; no stack that "
                                      "runs on Google has a level fitted for Google Cloud TPU v6e (Trillium) at 16bit "
                                      "precision (uncalibrated for this accelerator and precision: widest range)")
    h100 = plan(free, deadline_days=30, vendor="same").answer
    assert re.match(r"Megatron-Core / NeMo, chosen by the planner: \d+% faster than PyTorch FSDP2 on this job",
                    stack_text(h100.stack)), stack_text(h100.stack)
    # the answer as a scenario keeps the vendor's default unnamed (its estimate is the same)
    assert answer_scenario(free, h100).training.framework is None
    # the report's answer section says the same
    sc = default_scenario()
    page = summary_html(sc, estimate(sc), datetime(2026, 1, 1), answer=plan(free, deadline_days=30, vendor="same"))
    assert f"<b>Software stack:</b> {html.escape(stack_text(h100.stack))}</p>" in page


@pytest.mark.parametrize("framework, expected", [(None, "megatron_core"), ("auto", "megatron_core"),
                                                 ("pytorch_fsdp2", "pytorch_fsdp2")])
def test_the_command_line_and_api_documents_name_the_stack(framework, expected):
    data = json.loads(default_scenario().model_dump_json(exclude_none=True))
    if framework == "auto":
        data["training"]["framework"] = "pytorch_fsdp2"      # auto overrides the scenario's: the planner chooses
    doc = commands.plan_doc(data, deadline_days=30, vendor="same", framework=framework)
    assert doc["answer"]["stack"]["id"] == expected
    assert all(o["stack"] == expected for o in doc["options"] if o["met"])
    found = commands.search_doc(data, top=1, framework=framework)
    assert found["stack"]["id"] == expected == found["best"][0]["framework"]["id"]


def test_an_unknown_stack_is_refused_with_its_name():
    from engine.scenario import ScenarioError
    with pytest.raises(ScenarioError, match="unknown stack 'megatron'"):
        commands.plan_doc(json.loads(default_scenario().model_dump_json(exclude_none=True)), deadline_days=30,
                          framework="megatron")


def test_a_named_stack_is_not_sized_where_it_does_not_run_and_an_estimate_says_so():
    """Megatron-Core runs on NVIDIA and AMD (ROCm Megatron-LM), not on TPU (data/frameworks.json runs_on): named, it
    is not offered on a TPU, and an estimate of it there warns instead of pricing a stack nobody can run."""
    assert "Google" not in DATA["rows"][[r["id"] for r in DATA["rows"]].index("megatron_core")]["runs_on"]["vendors"]
    free = on(default_scenario().model_copy(update={"layout": None}), framework="megatron_core")
    out = plan(free, deadline_days=30, accelerators=["TPU-v6e", "H100-SXM5-80GB"])
    assert out.answer.accelerator == "H100-SXM5-80GB"
    tpu = next(o for o in out.options if o.accelerator == "TPU-v6e")
    assert not tpu.met and tpu.reason.startswith("Megatron-Core / NeMo does not run on Google accelerators")
    sc = default_scenario()
    tpu_sc = sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"accelerator": "TPU-v6e"}), "layout": None})
    warnings = estimate(on(tpu_sc.model_copy(update={"layout": best_at(tpu_sc, 1024).layout}),
                           framework="megatron_core")).warnings
    assert any(w.startswith("Megatron-Core / NeMo does not run on Google accelerators") for w in warnings), warnings
