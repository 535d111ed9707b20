"""estimate --explain and engine.explain: every term with the numbers used, its function and a source in the
repository's reach; the words follow the byte counts and the schedule actually used."""
import json
import subprocess
import sys

import pytest

import engine
from engine.physics.hardware import GIB
from engine.planning.estimate import estimate
from engine.planning.explain import explain, explain_text
from tests.conftest import ROOT
from tests.engine.helpers import parse, scenario

SECTIONS = {"Memory per GPU", "Step time: compute", "Step time: collectives (exposed)", "Step time: pipeline",
            "Step time", "FLOPs and utilisation", "Fine-tuning and offload", "Whole run", "Goodput", "Cost",
            "Energy and CO2", "Range"}


def _terms(sc):
    return {t.name: t for t in explain(sc)}


def test_every_term_agrees_with_the_estimate_and_names_its_function_and_source():
    sc = parse(**{"layout": {"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 2, "zero_stage": 1}})
    terms, est = _terms(sc), estimate(sc)
    assert {t.section for t in explain(sc)} == SECTIONS
    assert all(t.function.startswith("engine.") and t.source for t in terms.values())
    mem = est.memory_gib
    for key in ("weights", "gradients", "optimizer_states", "activations"):
        assert terms[key].value == pytest.approx(getattr(mem, key), abs=1e-3)
    parts = ("weights", "gradients", "optimizer_states", "activations", "logits", "comm_buffers", "framework_overhead")
    assert sum(terms[k].value for k in parts) == pytest.approx(terms["total"].value) == pytest.approx(mem.total, abs=1e-3)
    for key, value in est.time_breakdown_s.items():
        assert terms[key].value == pytest.approx(value)
    for key in ("step_time_s", "mfu", "gpu_hours", "goodput", "cost_usd", "energy_mwh", "co2_t", "train_days", "wall_days"):
        assert terms[key].value == pytest.approx(getattr(est, key)), key
    for end in ("low", "high"):                                  # the step time's range, from the regime's band
        assert terms[f"step_time_{end}_s"].value == pytest.approx(est.step_time_range_s[end])
    # 1F1B on 2 stages with 64 micro-batches: the first stage keeps p - 0 = 2 micro-batches of its 16 layers
    assert "32 layer-micro-batches / 16 layers = 2 micro-batches" in terms["activations"].formula


@pytest.mark.parametrize("optimizer,precision,weight,states,parts", [
    ("adam", "bf16", 2, 12, "fp32 momentum 4 + fp32 variance 4 + fp32 master weights 4"),
    ("sgd", "bf16", 2, 8, "fp32 momentum 4 + fp32 master weights 4"),
    ("adam", "fp32", 4, 8, "fp32 momentum 4 + fp32 variance 4"),
    ("sgd", "fp32", 4, 4, "fp32 momentum 4"),
])
def test_words_follow_the_byte_counts_used(optimizer, precision, weight, states, parts):
    # ZeRO paper sec. 3.1: mixed-precision Adam keeps 2 + 2 bytes of weights and gradients and K = 12 of states;
    # SGD with momentum keeps one fp32 moment, and fp32 training has no separate master copy
    sc = parse(**{"training.optimizer": optimizer, "training.precision": precision})
    terms = _terms(sc)
    assert terms["optimizer_states"].formula.startswith(f"{states} B/param ({optimizer}: {parts})")
    assert terms["weights"].formula.startswith(f"{weight} B/param ({precision} training)")
    text = explain_text(sc)
    assert ("12 B/param" in text) == (states == 12)
    # no byte count is worded as 16-bit where it is not (the range's regime, '16-bit' precision class, aside)
    assert not [t.name for t in terms.values() if "16-bit" in t.formula and not t.name.startswith("step_time_")]
    est = estimate(sc)
    assert f"{states:g} bytes of {optimizer} optimizer states" in est.assumptions["gradients"]
    assert f"{weight:g}-byte weights" in est.reliability["checkpoint_contents"]


def test_llama3_405b_names_the_heaviest_stage_and_its_hand_count():
    # 126 layers on 16 stages (7/8.../8/7), 8 one-layer chunks, 32 micro-batches: the second stage keeps
    # 2*(16-1-1) + (8-1)*16 + 1 = 141 chunks alive (tests/engine/test_memory.py counts it against the schedule)
    sc = parse(**{"model": None, "model.preset": "llama3.1-405b", "training.seq_len": 8192,
                  "training.global_batch_size": 2048, "cluster.n_gpus": 8192,
                  "layout": {"tp": 8, "pp": 16, "dp": 64, "virtual_stages": 8, "first_stage_layers": 7,
                             "last_stage_layers": 7, "sequence_parallel": True, "zero_stage": 2}})
    terms = _terms(sc)
    assert terms["stage"].formula.startswith("the middle stage (stage 2 of 16, 0-based rank 1)")
    assert "2(16 - 1 - 1) + (8 - 1)16" in terms["activations"].formula
    assert "= 140 forward passes, + 1 = 141 chunk(s) alive" in terms["activations"].formula
    assert "peak 141 layer-micro-batches / 8 layers" in terms["activations"].formula


def test_command_line_and_api():
    sc_json = json.dumps(scenario())
    out = subprocess.run([sys.executable, "-m", "engine", "estimate", "--explain", "-"], cwd=ROOT, input=sc_json,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert all(f"\n{s}\n" in "\n" + out.stdout for s in SECTIONS)
    assert "activations" in out.stdout and "[engine.physics.memory.layer_activation_bytes" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "engine", "estimate", "--explain", "-"], cwd=ROOT,
                         input=json.dumps(scenario(**{"layout.tp": 3})), capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and "layout.tp" in bad.stderr
    terms = engine.explain(scenario())
    assert [t.name for t in terms] == [t.name for t in explain(parse())]
    with pytest.raises(engine.ScenarioError):
        engine.explain(scenario(**{"layout": None}))


def _resolves(dotted: str) -> bool:
    import importlib
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def test_every_function_named_in_formulas_and_explain_exists():
    import re
    doc = (ROOT / "docs" / "formulas.md").read_text()
    named = set(re.findall(r"`(engine(?:\.\w+)+)`", doc))
    for t in explain(parse(**{"layout": {"tp": 2, "pp": 2, "dp": 2, "zero_stage": 3}})):
        named |= set(re.findall(r"engine(?:\.\w+)+", t.function))
    assert len(named) > 40
    assert [n for n in named if not _resolves(n)] == []


@pytest.mark.parametrize("overrides,grad_bytes,how", [
    ({}, 2, "bf16 accumulation and reduction"),                      # the tuned recipes reduce in 16 bits
    ({"training.accumulate_grads_in_fp32": True}, 4, "fp32 accumulation and reduction"),
    ({"training.precision": "fp16"}, 2, "fp16 accumulation and reduction"),
])
def test_the_gradient_and_headroom_terms_follow_the_inputs(overrides, grad_bytes, how):
    sc = parse(**{**overrides, "layout": {"tp": 1, "pp": 1, "dp": 8, "zero_stage": 1}})
    terms = _terms(sc)
    assert terms["gradients"].formula.startswith(f"{grad_bytes} B/param ({grad_bytes}-byte gradients ({how}))")
    assert f"{grad_bytes} B/param over 8 data-parallel ranks" in terms["dp_comm"].formula
    assert f"{grad_bytes}-byte gradients ({how})" in estimate(sc).assumptions["gradients"]
    # 6.5% of the H100's 79.65 GiB kept free by the recommendations
    assert terms["headroom"].value == pytest.approx(0.065 * 79.65, abs=1e-3)
    assert "6.5% of capacity" in terms["headroom"].formula
