"""A Hugging Face config.json -> the scenario's model block (ModelArch), for the families people train.

Keys and defaults follow the transformers configuration classes of each family (configuration_<family>.py); a key
a family requires is reported by name when missing, with the family that needs it. Multimodal checkpoints
(Llama 4, Gemma 3) are read from their nested text_config: the vision tower is not part of the language model the
planner trains, and is not counted.
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable

from pydantic import ValidationError

from engine.physics.model import ModelArch, shape_of
from engine.scenario import ScenarioError

MAX_CONFIG_BYTES = 1_000_000          # release configs are a few KB; the largest (layer_types lists) under 20 KB
WHERE = "config.json"


class HFConfigError(ScenarioError):
    """A config.json that cannot be imported; problems name the key and the family that needs it."""


class _Reader:
    """Typed access to one config dict that reports missing or mistyped keys with the family expecting them."""

    def __init__(self, cfg: dict, family: str):
        self.cfg, self.family = cfg, family

    def _problem(self, key: str, msg: str) -> HFConfigError:
        return HFConfigError([(f"{WHERE}: {key}", msg)])

    def int(self, key: str, default: Any = ..., minimum: int = 1) -> Any:
        value = self.cfg.get(key, default)
        if value is ...:
            raise self._problem(key, f"missing: a {self.family} config.json gives {key}; add it (a whole number)")
        if value is None and default is not ... and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value != int(value) or value < minimum:
            raise self._problem(key, f"{value!r} is not a whole number >= {minimum} ({self.family} config.json)")
        return int(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._problem(key, f"{value!r} is not true or false ({self.family} config.json)")
        return value

    def num(self, key: str, default: float) -> float:
        value = self.cfg.get(key, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self._problem(key, f"{value!r} is not a number ({self.family} config.json)")
        return float(value)

    def int_list(self, key: str) -> list[int] | None:
        value = self.cfg.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self._problem(key, f"must be a list of whole numbers ({self.family} config.json)")
        return value

    def str_list(self, key: str) -> list[str] | None:
        value = self.cfg.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._problem(key, f"must be a list of strings ({self.family} config.json)")
        return value


def _base(r: _Reader, tied_default: bool) -> dict:
    """The keys every Llama-style family shares (transformers LlamaConfig names)."""
    heads = r.int("num_attention_heads")
    out = {"n_layers": r.int("num_hidden_layers"), "hidden_size": r.int("hidden_size"), "n_heads": heads,
           "n_kv_heads": r.int("num_key_value_heads", heads), "ffn_hidden_size": r.int("intermediate_size"),
           "vocab_size": r.int("vocab_size"), "ffn_type": "swiglu",
           "tied_embeddings": r.bool("tie_word_embeddings", tied_default)}
    head_dim = r.int("head_dim", None)
    if head_dim is not None and (out["hidden_size"] % heads or head_dim != out["hidden_size"] // heads):
        out["head_dim"] = head_dim
    return out


def _period(pattern: list[bool], key: str, r: _Reader) -> int | None:
    """k such that the global (False) layers are exactly those with (i+1) % k == 0; None when all are local."""
    n = len(pattern)
    global_layers = [i for i, local in enumerate(pattern) if not local]
    if not global_layers:
        return None
    k = global_layers[0] + 1
    if all((i + 1) % k == 0 for i in global_layers) and len(global_layers) == n // k:
        return k
    raise r._problem(key, "local and full-attention layers do not follow a repeating pattern (every k-th layer "
                          "global); describe the model by hand in the Scenario page")


def _layer_types(r: _Reader, n_layers: int, window: int | None, kind: str = "sliding") -> dict:
    """attention_window / global_attention_every from a transformers layer_types list (Gemma 3, gpt-oss, Qwen3)."""
    types = r.str_list("layer_types")
    if types is None or window is None:
        return {}
    if len(types) != n_layers:
        raise r._problem("layer_types", f"has {len(types)} entries for num_hidden_layers {n_layers}")
    local = [t in ("sliding_attention", "chunked_attention") for t in types]
    if not any(local):
        return {}
    every = _period(local, "layer_types", r)
    out = {"attention_window": window, "attention_window_kind": kind}
    if every is not None:
        out["global_attention_every"] = every
    return out


def _llama(r: _Reader) -> dict:
    out = _base(r, False)
    if r.bool("attention_bias", False):
        out["linear_bias"] = "qkv"             # q, k, v (and o) biases; o's h-sized bias is left out
    return out


def _mistral(r: _Reader) -> dict:
    out = _base(r, False)
    window = r.int("sliding_window", None)
    if window is not None:
        out["attention_window"] = window       # Mistral 7B v0.1: every layer slides over 4096 tokens
    return out


def _mixtral(r: _Reader) -> dict:
    out = _mistral(r)
    out.update(n_experts=r.int("num_local_experts"), experts_per_token=r.int("num_experts_per_tok"))
    return out


def _qwen_window(r: _Reader, out: dict) -> None:
    if r.bool("use_sliding_window", False):
        window = r.int("sliding_window", None)
        first_windowed = r.int("max_window_layers", out["n_layers"], minimum=0)
        if window is not None and first_windowed < out["n_layers"]:
            raise r._problem("use_sliding_window", "sliding window on the layers after max_window_layers is not a "
                                                   "repeating pattern the planner describes; set it to false or "
                                                   "describe the model by hand")


def _qwen2(r: _Reader) -> dict:
    out = _base(r, False)
    out["linear_bias"] = "qkv"                 # Qwen2 projects Q, K and V with bias (transformers Qwen2Attention)
    _qwen_window(r, out)
    return out


def _qwen3(r: _Reader) -> dict:
    out = _base(r, False)
    out["qk_norm"] = "head"                    # Qwen3Attention: q_norm, k_norm = RMSNorm(head_dim)
    if r.bool("attention_bias", False):
        out["linear_bias"] = "qkv"
    _qwen_window(r, out)
    return out


def _sparse_layers(r: _Reader, out: dict, step_key: str) -> None:
    step = r.int(step_key, 1)
    mlp_only = r.int_list("mlp_only_layers") or []
    if mlp_only:
        raise r._problem("mlp_only_layers", "dense layers at arbitrary positions are not a pattern the planner "
                                            "describes; only leading dense layers and every-k-th MoE layers are")
    out["moe_layer_every"] = step


def _qwen_moe(r: _Reader, qk_norm: bool) -> dict:
    out = _qwen3(r) if qk_norm else _qwen2(r)
    dense = out["ffn_hidden_size"]
    out.update(n_experts=r.int("num_experts"), experts_per_token=r.int("num_experts_per_tok"),
               ffn_hidden_size=r.int("moe_intermediate_size"))
    _sparse_layers(r, out, "decoder_sparse_step")
    if out["moe_layer_every"] > 1:
        out["dense_ffn_hidden_size"] = dense
    shared = r.int("shared_expert_intermediate_size", 0, minimum=0)
    if shared:                                 # Qwen2-MoE: one shared expert of its own width
        out.update(n_shared_experts=1, shared_expert_ffn_hidden_size=shared)
    return out


def _olmo2(r: _Reader) -> dict:
    out = _base(r, False)
    out["qk_norm"] = "full"                    # Olmo2Attention: q_norm over heads*head_dim, k_norm over kv*head_dim
    return out


def _gemma(r: _Reader, every_default: int) -> dict:
    out = _base(r, True)
    out["ffn_type"] = "geglu"
    n = out["n_layers"]
    window = r.int("sliding_window", None)
    if every_default == 6:
        out["qk_norm"] = "head"                # Gemma3Attention: q_norm, k_norm = RMSNorm(head_dim)
    if window is None:
        return out
    if r.cfg.get("layer_types") is not None:
        out.update(_layer_types(r, n, window))
    else:
        out.update(attention_window=window, global_attention_every=r.int("sliding_window_pattern", every_default))
    return out


def _llama4(r: _Reader) -> dict:
    out = _base(r, False)
    n = out["n_layers"]
    out.update(n_experts=r.int("num_local_experts"), experts_per_token=r.int("num_experts_per_tok"),
               n_shared_experts=1,             # Llama4TextMoe: one shared expert as wide as a routed one
               dense_ffn_hidden_size=r.int("intermediate_size_mlp"))
    step = r.int("interleave_moe_layer_step", 1)
    moe_layers = r.int_list("moe_layers")
    if moe_layers is not None and moe_layers != list(range(step - 1, n, step)):
        raise r._problem("moe_layers", f"MoE layers {moe_layers[:8]}... are not every {step}-th layer")
    out["moe_layer_every"] = step
    chunk = r.int("attention_chunk_size", None)
    if chunk is not None:
        rope = r.int_list("no_rope_layers")    # 1: a RoPE layer with chunked attention, 0: a global NoPE layer
        if rope is not None and len(rope) == n:
            every = _period([bool(x) for x in rope], "no_rope_layers", r)
        else:                                  # Llama4TextConfig default: every 4th layer is NoPE (global)
            every = r.int("no_rope_layer_interval", 4)
        out.update(attention_window=chunk, attention_window_kind="chunked")
        if every is not None:
            out["global_attention_every"] = every
    return out


def _gpt_oss(r: _Reader) -> dict:
    out = _base(r, False)
    n = out["n_layers"]
    out.update(n_experts=r.int("num_local_experts"),
               experts_per_token=r.int("num_experts_per_tok", r.cfg.get("experts_per_token", ...)),
               attention_sinks=True,           # GptOssAttention.sinks: one learned logit per head
               linear_bias="all" if r.bool("attention_bias", True) else "none")
    out.update(_layer_types(r, n, r.int("sliding_window", None)))
    return out


def _deepseek(r: _Reader) -> dict:
    heads = r.int("num_attention_heads")
    n = r.int("num_hidden_layers")
    out = {"n_layers": n, "hidden_size": r.int("hidden_size"), "n_heads": heads,
           "n_kv_heads": r.int("num_key_value_heads", heads), "vocab_size": r.int("vocab_size"), "ffn_type": "swiglu",
           "tied_embeddings": r.bool("tie_word_embeddings", False)}
    dense_ffn = r.int("intermediate_size")
    routed = r.int("n_routed_experts", None)
    if routed is not None and routed > 1:
        out.update(n_experts=routed, experts_per_token=r.int("num_experts_per_tok"),
                   n_shared_experts=r.int("n_shared_experts", 0, minimum=0), ffn_hidden_size=r.int("moe_intermediate_size"),
                   n_dense_layers=r.int("first_k_dense_replace", 0, minimum=0),
                   moe_layer_every=r.int("moe_layer_freq", 1), dense_ffn_hidden_size=dense_ffn)
        if out["n_dense_layers"] == 0:
            del out["n_dense_layers"]
    else:
        out["ffn_hidden_size"] = dense_ffn
    out["mla"] = {"q_lora_rank": r.int("q_lora_rank", None), "kv_lora_rank": r.int("kv_lora_rank"),
                  "qk_nope_head_dim": r.int("qk_nope_head_dim"), "qk_rope_head_dim": r.int("qk_rope_head_dim", minimum=0),
                  "v_head_dim": r.int("v_head_dim")}
    mtp = r.int("num_nextn_predict_layers", 0, minimum=0)
    if mtp:
        out["mtp_layers"] = mtp
    return out


def _gpt2(r: _Reader) -> dict:
    h = r.int("n_embd")
    return {"n_layers": r.int("n_layer"), "hidden_size": h, "n_heads": r.int("n_head"),
            "ffn_hidden_size": r.int("n_inner", None) or 4 * h, "vocab_size": r.int("vocab_size"), "ffn_type": "gelu",
            "tied_embeddings": r.bool("tie_word_embeddings", True), "learned_position_embeddings": r.int("n_positions"),
            "dropout": r.num("resid_pdrop", 0.1) > 0 or r.num("attn_pdrop", 0.1) > 0, "linear_bias": "all",
            "norm": "layernorm"}


def _gpt_neox(r: _Reader) -> dict:
    heads = r.int("num_attention_heads")
    return {"n_layers": r.int("num_hidden_layers"), "hidden_size": r.int("hidden_size"), "n_heads": heads,
            "ffn_hidden_size": r.int("intermediate_size"), "vocab_size": r.int("vocab_size"), "ffn_type": "gelu",
            "tied_embeddings": r.bool("tie_word_embeddings", False), "linear_bias": "all", "norm": "layernorm",
            "dropout": r.num("hidden_dropout", 0.0) > 0 or r.num("attention_dropout", 0.0) > 0}


# model_type -> (family name in messages, reader)
FAMILIES: dict[str, tuple[str, Callable[[_Reader], dict]]] = {
    "llama": ("Llama 2/3", _llama),
    "mistral": ("Mistral", _mistral),
    "mixtral": ("Mixtral", _mixtral),
    "qwen2": ("Qwen2/Qwen2.5", _qwen2),
    "qwen2_moe": ("Qwen2-MoE", lambda r: _qwen_moe(r, qk_norm=False)),
    "qwen3": ("Qwen3", _qwen3),
    "qwen3_moe": ("Qwen3-MoE", lambda r: _qwen_moe(r, qk_norm=True)),
    "olmo2": ("OLMo 2", _olmo2),
    "gemma2": ("Gemma 2", lambda r: _gemma(r, 2)),
    "gemma3_text": ("Gemma 3", lambda r: _gemma(r, 6)),
    "llama4_text": ("Llama 4", _llama4),
    "gpt_oss": ("gpt-oss", _gpt_oss),
    "deepseek_v2": ("DeepSeek-V2", _deepseek),
    "deepseek_v3": ("DeepSeek-V3", _deepseek),
    "kimi_k2": ("Kimi K2 (DeepSeek-V3 architecture)", _deepseek),
    "gpt2": ("GPT-2", _gpt2),
    "gpt_neox": ("GPT-NeoX / Pythia", _gpt_neox),
}
# multimodal wrappers whose language model sits in text_config
WRAPPERS = {"llama4": "llama4_text", "gemma3": "gemma3_text"}


def _text_config(cfg: dict) -> tuple[dict, str]:
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        archs = cfg.get("architectures")
        raise HFConfigError([(f"{WHERE}: model_type", "missing: every Hugging Face config.json names its family in "
                                                      f"model_type (architectures: {archs!r}); supported: "
                                                      f"{', '.join(sorted(FAMILIES))}")])
    if model_type in WRAPPERS or isinstance(cfg.get("text_config"), dict):
        text = cfg.get("text_config")
        if not isinstance(text, dict):
            raise HFConfigError([(f"{WHERE}: text_config", f"missing: a {model_type} config.json holds its language "
                                                           "model in text_config")])
        inner = text.get("model_type", WRAPPERS.get(model_type))
        text = {**{k: v for k, v in cfg.items() if k in ("tie_word_embeddings",)}, **text}
        return text, inner
    return cfg, model_type


def arch_from_hf(cfg: Any) -> ModelArch:
    """The ModelArch a config.json describes; HFConfigError naming the key and family when it cannot."""
    if not isinstance(cfg, dict):
        raise HFConfigError([(WHERE, "a config.json is a JSON object of model settings (keys such as model_type, "
                                     "hidden_size, num_hidden_layers)")])
    text, model_type = _text_config(cfg)
    if model_type not in FAMILIES:
        archs = cfg.get("architectures")
        raise HFConfigError([(f"{WHERE}: model_type", f"unknown architecture {model_type!r} (architectures: {archs!r}); "
                                                      "the importer reads these families: "
                                                      + ", ".join(f"{k} ({v[0]})" for k, v in FAMILIES.items())
                                                      + ". Describe other models by hand under 'My own architecture'.")])
    family, read = FAMILIES[model_type]
    fields = read(_Reader(text, f"{family} ({model_type})"))
    try:
        return ModelArch(**fields)
    except ValidationError as err:
        problems = [(f"{WHERE} -> model.{'.'.join(str(x) for x in e['loc'])}".rstrip("."),
                     e["msg"].removeprefix("Value error, ")) for e in err.errors(include_url=False, include_input=False)]
        raise HFConfigError(problems) from None


def parse_hf_config(data: str | bytes | dict) -> ModelArch:
    """JSON text (or an already parsed dict) -> ModelArch, with size and syntax checked first."""
    if isinstance(data, (str, bytes)):
        if len(data) > MAX_CONFIG_BYTES:
            raise HFConfigError([(WHERE, f"larger than {MAX_CONFIG_BYTES // 1000} KB; a config.json is a few KB")])
        try:
            data = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise HFConfigError([(WHERE, f"not valid JSON: {err}")]) from None
        except RecursionError:
            raise HFConfigError([(WHERE, "nested too deeply to be a config.json")]) from None
    return arch_from_hf(data)


def import_hf(data: str | bytes | dict) -> dict:
    """{"model": the scenario's model block, "params_total": N, "params_active": N} for a config.json."""
    arch = parse_hf_config(data)
    shape = shape_of(arch)
    return {"model": arch.model_dump(mode="json", exclude_defaults=True),
            "params_total": shape.total_params(), "params_active": shape.active_params()}
