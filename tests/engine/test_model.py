"""Parameter counts and FLOPs from the architecture, against published counts and Narayanan et al. 2021."""
import pytest

from engine.catalog import load_catalog
from engine.physics.model import ModelArch, shape_of
from tests.engine.helpers import gpt


def _like_published(p):
    """(total, active) counted as the preset's source counts them (published_scope says how)."""
    shape = shape_of(p.arch)
    total, active = shape.main_params(), shape.main_active_params()        # published counts leave MTP modules out
    if "active without the input embedding" in p.published_scope:
        active -= shape.embedding_params
    return total, active


def test_every_preset_count_matches_its_published_count():
    rows, bad = [], []
    for p in load_catalog().models.values():
        total, active = _like_published(p)
        err = total / 1e9 / p.published_params_b - 1
        err_a = active / 1e9 / p.published_active_params_b - 1 if p.published_active_params_b else None
        rows.append(f"{p.id:16s} {total / 1e9:9.2f} {p.published_params_b:8.2f} {err:+6.2%}  "
                    + (f"{active / 1e9:7.2f} {p.published_active_params_b:6.2f} {err_a:+6.2%}" if err_a is not None
                       else " " * 23) + f"  tol {p.count_tolerance:.0%}  {p.published_scope[:70]}")
        if abs(err) > p.count_tolerance or (err_a is not None and abs(err_a) > p.count_tolerance):
            bad.append(p.id)
    print("\npreset           engine(B) publ.(B)  error   active  publ.  error")
    print("\n".join(rows))
    assert not bad, bad


def test_presets_above_1pct_say_why():
    for p in load_catalog().models.values():
        if p.count_tolerance > 0.01:
            assert any(w in p.published_scope for w in ("rounds", "digits", "vision")), p.id


REQUIRED_NEW = ["llama4-scout", "llama4-maverick", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
                "gpt-oss-20b", "gpt-oss-120b", "deepseek-r1", "kimi-k2", "mixtral-8x22b", "gemma3-27b", "olmo2-32b"]


def test_2025_presets_exist_and_describe_their_attention_and_experts():
    cat = load_catalog()
    assert set(REQUIRED_NEW) <= set(cat.models)
    scout, maverick = shape_of(cat.models["llama4-scout"].arch), shape_of(cat.models["llama4-maverick"].arch)
    assert scout.attention_windows[:4] == (8192, 8192, 8192, None) and scout.attention_window_kind == "chunked"
    assert maverick.moe_layer_mask[:4] == (False, True, False, True) and maverick.n_moe_layers == 24
    gemma = shape_of(cat.models["gemma3-27b"].arch)
    assert sum(w is None for w in gemma.attention_windows) == 62 // 6            # 5 local : 1 global
    r1 = shape_of(cat.models["deepseek-r1"].arch)
    assert r1.mtp_layers == 1 and r1.total_params() - r1.main_params() == r1.mtp_layer_params
    assert r1.mtp_layer_params / 1e9 == pytest.approx(11.5, rel=0.02)            # DeepSeek README_WEIGHTS.md


def test_qwen3_head_dim_is_independent_of_hidden_over_heads():
    # the numbers: without head_dim Qwen3-32B counted 30.5B (published 32.8B), Qwen3-30B-A3B 2.9B active (3.3B)
    q32 = load_catalog().models["qwen3-32b"].arch
    assert q32.head_dim == 128 and q32.hidden_size // q32.n_heads == 80
    assert shape_of(q32).total_params() / 1e9 == pytest.approx(32.8, rel=0.01)
    assert shape_of(q32.model_copy(update={"head_dim": None})).total_params() / 1e9 == pytest.approx(30.5, rel=0.01)


def test_new_fields_default_to_the_old_counts():
    arch = load_catalog().models["llama3.1-8b"].arch
    same = arch.model_copy(update={"head_dim": 128, "moe_layer_every": 1, "qk_norm": "none", "linear_bias": "none"})
    assert shape_of(same).total_params() == shape_of(arch).total_params()
    assert shape_of(arch).attention_windows == (None,) * 32 and shape_of(arch).moe_layer_mask == (False,) * 32


def test_gpt_params_follow_narayanan_eq2():
    # Narayanan et al. 2021 eq. (2): P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)); biases ignored by the engine
    l, h, V, s = 96, 12288, 51200, 2048
    expected = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))
    got = shape_of(ModelArch(**gpt(l, h, 96, V, s))).total_params()
    assert got == pytest.approx(expected, rel=1e-3)


def test_model_flops_follow_narayanan_eq3_without_recompute():
    # forward+backward FLOPs per sequence: 72 s l h^2 (1 + s/(6h) + V/(12 l h))  (eq. 3 is 96/(16) with recompute),
    # the full attention square; the causal count removes half of the s/(6h) term
    import numpy as np
    from engine.physics.flops import flops_per_token
    from engine.physics.layouts import Layouts
    from engine.scenario import Layout, Training
    l, h, V, s = 40, 6144, 51200, 2048
    shape = shape_of(ModelArch(**gpt(l, h, 48, V, s)))
    f = flops_per_token(shape, Training(seq_len=s, global_batch_size=1, total_tokens=1.0), Layouts.of([Layout()]))
    assert f["model_full_square"] * s == pytest.approx(72 * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)), rel=1e-9)
    causal = 72 * s * l * h * h * (1 + (s + 1) / 2 / (6 * h) + V / (12 * l * h))
    assert f["model_causal"] * s == pytest.approx(causal, rel=1e-9)
    assert np.all(f["hardware_full_square"] == f["model_full_square"])


def test_gqa_and_swiglu_counts():
    # Llama 3.1 8B by hand: embeddings 128256*4096 twice, per layer q,o 4096^2, k,v 4096*1024, mlp 3*4096*14336
    per_layer = 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    expected = 32 * per_layer + 2 * 128256 * 4096 + 4096
    assert shape_of(load_catalog().models["llama3.1-8b"].arch).total_params() == expected
