"""Parameter counts and FLOPs from the architecture, against published counts and Narayanan et al. 2021."""
import pytest

from engine.catalog import load_catalog
from engine.model import ModelArch, shape_of
from tests.engine.helpers import gpt


@pytest.mark.parametrize("preset", ["gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3.1-8b",
                                    "llama3.1-70b", "llama3.1-405b", "mixtral-8x7b", "deepseek-v3"])
def test_parameter_count_matches_published_within_1pct(preset):
    p = load_catalog().models[preset]
    assert shape_of(p.arch).total_params() / 1e9 == pytest.approx(p.published_params_b, rel=0.01)


def test_active_parameters_of_moe_models():
    cat = load_catalog()
    assert shape_of(cat.models["mixtral-8x7b"].arch).active_params() / 1e9 == pytest.approx(12.9, rel=0.01)  # Mixtral paper
    assert shape_of(cat.models["deepseek-v3"].arch).active_params() / 1e9 == pytest.approx(37, rel=0.02)     # DeepSeek-V3 report


def test_gpt_params_follow_narayanan_eq2():
    # Narayanan et al. 2021 eq. (2): P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)); biases ignored by the engine
    l, h, V, s = 96, 12288, 51200, 2048
    expected = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))
    got = shape_of(ModelArch(**gpt(l, h, 96, V, s))).total_params()
    assert got == pytest.approx(expected, rel=1e-3)


def test_model_flops_follow_narayanan_eq3_without_recompute():
    # forward+backward FLOPs per sequence: 72 s l h^2 (1 + s/(6h) + V/(12 l h))  (eq. 3 is 96/(16) with recompute)
    l, h, V, s = 40, 6144, 51200, 2048
    shape = shape_of(ModelArch(**gpt(l, h, 48, V, s)))
    expected = 72 * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
    assert shape.model_flops_per_token(s) * s == pytest.approx(expected, rel=1e-9)


def test_gqa_and_swiglu_counts():
    # Llama 3.1 8B by hand: embeddings 128256*4096 twice, per layer q,o 4096^2, k,v 4096*1024, mlp 3*4096*14336
    per_layer = 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    expected = 32 * per_layer + 2 * 128256 * 4096 + 4096
    assert shape_of(load_catalog().models["llama3.1-8b"].arch).total_params() == expected
