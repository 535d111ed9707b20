"""Transformer architecture: the spec, parameter counts and the weight-matmul FLOPs of a layer.

Conventions: one multiply-add = 2 FLOPs; a linear layer with P weights costs 2*P FLOPs per token forward and 4*P
backward (Kaplan et al. 2020, C ~ 6ND). Attention-core FLOPs and the conventions of published MFU figures
(causal vs full square) are in engine/physics/flops.py.

Layer patterns (0-based layer index i, as in Hugging Face transformers):
- MoE interleaving: layer i has routed experts when i >= n_dense_layers and (i + 1) % moe_layer_every == 0
  (transformers Llama4TextConfig: moe_layers = range(interleave_moe_layer_step - 1, n_layers, step)).
- Local attention: layer i attends to at most attention_window keys unless global_attention_every divides i + 1
  (Gemma 2: even layers sliding; Gemma 3: sliding unless (i + 1) % 6 == 0; gpt-oss layer_types alternate
  sliding/full; Llama 4: chunked attention except every 4th layer (NoPE, global)).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError


class MLA(BaseModel):
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank Q and joint low-rank K/V."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    q_lora_rank: int | None = Field(default=None, ge=1, le=1_000_000, description=(
        "rank of the low-rank query projection; null: one full-rank query projection (DeepSeek-V2-Lite)"))
    kv_lora_rank: int = Field(ge=1, le=1_000_000)
    qk_nope_head_dim: int = Field(ge=1, le=100_000)
    qk_rope_head_dim: int = Field(ge=0, le=100_000)
    v_head_dim: int = Field(ge=1, le=100_000)


class ModelArch(BaseModel):
    """A decoder-only transformer. MoE layers replace the MLP with routed experts of width ffn_hidden_size."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    n_layers: int = Field(ge=1, le=10_000, description="transformer layers")
    hidden_size: int = Field(ge=1, le=1_000_000)
    n_heads: int = Field(ge=1, le=100_000, description="attention (query) heads")
    n_kv_heads: int | None = Field(default=None, ge=1, le=100_000, description="key/value heads (GQA); defaults to n_heads")
    head_dim: int | None = Field(default=None, ge=1, le=100_000, description=(
        "width of one attention head; defaults to hidden_size / n_heads. Set it where the model's heads are wider "
        "or narrower than that (Qwen3, Gemma 2/3, gpt-oss, Llama 3.2 3B)"))
    ffn_hidden_size: int = Field(ge=1, le=10_000_000, description="MLP width (per expert for MoE)")
    vocab_size: int = Field(ge=1, le=100_000_000)
    ffn_type: Literal["gelu", "swiglu", "geglu"] = Field(default="gelu", description=(
        "gelu: two matrices (GPT-2/3, NeoX); swiglu and geglu: gated MLPs with three matrices (Llama; Gemma)"))
    n_experts: int = Field(default=1, ge=1, le=100_000)
    experts_per_token: int = Field(default=1, ge=1, le=100_000)
    n_shared_experts: int = Field(default=0, ge=0, le=1_000)
    shared_expert_ffn_hidden_size: int | None = Field(default=None, ge=1, le=10_000_000, description=(
        "width of each shared expert; defaults to ffn_hidden_size (Qwen2-MoE's shared expert is wider than its "
        "routed ones)"))
    n_dense_layers: int = Field(default=0, ge=0, le=10_000, description="leading layers with a dense MLP in an MoE model")
    moe_layer_every: int = Field(default=1, ge=1, le=10_000, description=(
        "after the leading dense layers, every k-th layer has routed experts and the others a dense MLP "
        "(Llama 4 Maverick: 2); 1: all of them"))
    dense_ffn_hidden_size: int | None = Field(default=None, ge=1, le=10_000_000, description=(
        "MLP width of the dense layers of an MoE model; defaults to ffn_hidden_size"))
    tied_embeddings: bool = False
    learned_position_embeddings: int = Field(default=0, ge=0, le=10_000_000, description="rows of a learned position table (0: rotary)")
    dropout: bool = Field(default=False, description="residual and attention dropout (GPT-2/3 style); Llama-style models train without")
    mla: MLA | None = None
    attention_window: int | None = Field(default=None, ge=1, le=100_000_000, description=(
        "local attention: a query attends to at most this many keys (the sliding window, or the chunk size of "
        "chunked attention); null: every layer attends to the whole causal context"))
    attention_window_kind: Literal["sliding", "chunked"] = Field(default="sliding", description=(
        "sliding: the last attention_window tokens (Mistral 7B v0.1, Gemma 2/3, gpt-oss); chunked: only the "
        "tokens of the same attention_window-sized chunk (Llama 4)"))
    global_attention_every: int | None = Field(default=None, ge=1, le=10_000, description=(
        "with attention_window: every k-th layer (layer i with (i+1) % k == 0) keeps full attention (Gemma 2 and "
        "gpt-oss: 2, Llama 4: 4, Gemma 3: 6); null: all layers are local"))
    mtp_layers: int = Field(default=0, ge=0, le=100, description=(
        "multi-token-prediction modules trained beside the model (DeepSeek-V3: 1), each a transformer layer of the "
        "last layer's kind plus a 2h x h projection, sharing the embedding and the output head"))
    attention_sinks: bool = Field(default=False, description=(
        "a learned sink logit per head in every softmax (gpt-oss): n_heads parameters per layer"))
    qk_norm: Literal["none", "head", "full"] = Field(default="none", description=(
        "RMSNorm on queries and keys: head = one norm of head_dim shared by all heads (Qwen3, Gemma 3); full = over "
        "the whole Q and K projection outputs (OLMo 2)"))
    linear_bias: Literal["none", "qkv", "all"] = Field(default="none", description=(
        "bias vectors: qkv = only the query/key/value projections (Qwen2); all = every linear layer, experts and "
        "router included (GPT-2, GPT-NeoX, gpt-oss)"))
    norm: Literal["rmsnorm", "layernorm"] | None = Field(default=None, description=(
        "the block's normalisation: rmsnorm (Llama and the families after it), layernorm (GPT-2/3, GPT-NeoX); "
        "null: layernorm for a gelu MLP and rmsnorm for a gated one, as every family this planner reads pairs them"))

    @model_validator(mode="after")
    def _consistent(self) -> "ModelArch":
        kv = self.kv_heads
        if self.mla is None and self.head_dim is None and self.hidden_size % self.n_heads:
            raise PydanticCustomError("arch", "hidden_size {h} is not divisible by n_heads {a}; the head dimension must be "
                                              "whole (or set head_dim)", {"h": self.hidden_size, "a": self.n_heads})
        if self.n_heads % kv:
            raise PydanticCustomError("arch", "n_heads {a} is not divisible by n_kv_heads {kv}; GQA needs whole query groups",
                                      {"a": self.n_heads, "kv": kv})
        if self.experts_per_token > self.n_experts:
            raise PydanticCustomError("arch", "experts_per_token {k} exceeds n_experts {e}",
                                      {"k": self.experts_per_token, "e": self.n_experts})
        if self.n_dense_layers > self.n_layers:
            raise PydanticCustomError("arch", "n_dense_layers {d} exceeds n_layers {l}", {"d": self.n_dense_layers, "l": self.n_layers})
        if self.is_moe and not any(moe_layer_mask(self)):
            raise PydanticCustomError("arch", "no layer has experts: with n_dense_layers {d} and moe_layer_every {k} all "
                                              "{l} layers are dense", {"d": self.n_dense_layers, "k": self.moe_layer_every,
                                                                        "l": self.n_layers})
        if self.global_attention_every is not None and self.attention_window is None:
            raise PydanticCustomError("arch", "global_attention_every needs attention_window (the local layers' window)", {})
        return self

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1

    @property
    def norm_kind(self) -> str:
        """The block's normalisation (norm, else the one its MLP type goes with)."""
        return self.norm or ("layernorm" if self.ffn_type == "gelu" else "rmsnorm")

    @property
    def attn_head_dim(self) -> int:
        """Query/key/value width per head of standard (non-MLA) attention."""
        return self.head_dim or self.hidden_size // self.n_heads


def moe_layer_mask(arch: ModelArch) -> tuple[bool, ...]:
    """True where layer i has routed experts (see the module docstring for the pattern)."""
    if not arch.is_moe:
        return (False,) * arch.n_layers
    return tuple(i >= arch.n_dense_layers and (i + 1) % arch.moe_layer_every == 0 for i in range(arch.n_layers))


def attention_windows(arch: ModelArch) -> tuple[int | None, ...]:
    """Keys a query of layer i attends at most (None: the whole causal context)."""
    w, every = arch.attention_window, arch.global_attention_every
    return tuple(None if w is None or (every is not None and (i + 1) % every == 0) else w for i in range(arch.n_layers))


@dataclass(frozen=True)
class Shape:
    """Per-layer sizes derived once from a ModelArch (all counts are elements, not bytes)."""

    n_layers: int
    n_dense_layers: int          # how many layers have a dense MLP (all layers of a dense model)
    n_moe_layers: int            # how many layers have routed experts
    hidden: int
    n_heads: int
    kv_elems_per_token: int      # K and V elements per token per layer (what CP rings pass around)
    qk_head_dim: int
    v_head_dim: int
    vocab: int
    tied_embeddings: bool
    position_params: int
    attn_params: int             # all attention projections of one layer (with their biases and sink logits)
    attn_act_split: float        # stored attention activations split by TP, in elements per token (Q, K, V, proj input, latents)
    dense_mlp_params: int
    dense_ffn: int
    expert_params: int           # one routed expert
    expert_ffn: int
    shared_expert_params: int    # all shared experts of one layer
    shared_ffn: int              # summed width of the shared experts
    n_experts: int
    top_k: int
    gated: bool                  # SwiGLU/GeGLU: three matrices, otherwise two
    norm_params: int             # both norms of one layer (and its query/key or MLA latent norms)
    dropout: bool                # dropout masks stored and applied (1 byte per element)
    router_params: int = 0       # router of one MoE layer (and its bias)
    rms_norm: bool = True        # RMSNorm (Llama) rather than LayerNorm (GPT-2/3): composite ops when run eagerly
    qk_norm_elems: int = 0       # query/key (or MLA latent) elements normalised per token per layer, all heads
    rotary_elems: int = 0        # query and key elements rotated per token per layer, all heads (0: learned positions)
    moe_layer_mask: tuple[bool, ...] = ()                 # len n_layers: True where layer i has routed experts
    attention_windows: tuple[int | None, ...] = ()        # len n_layers: None = full causal attention, else max keys
    attention_window_kind: Literal["sliding", "chunked"] = "sliding"
    mtp_layers: int = 0                                   # multi-token-prediction modules
    mtp_layer_params: int = 0                             # one MTP module (embedding and head are shared, not counted)
    mtp_layer_active_params: int = 0
    # the weight matrices of a layer as (name, d_in, d_out): what LoRA adapters attach to (engine.physics.finetune)
    attn_matrices: tuple[tuple[str, int, int], ...] = ()
    dense_mlp_matrices: tuple[tuple[str, int, int], ...] = ()
    expert_matrices: tuple[tuple[str, int, int], ...] = ()      # one routed expert
    shared_matrices: tuple[tuple[str, int, int], ...] = ()      # all shared experts of a layer
    router_matrices: tuple[tuple[str, int, int], ...] = ()

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def _layer_params(self, moe: bool, active: bool) -> int:
        if moe:
            experts = (self.top_k if active else self.n_experts) * self.expert_params
            mlp = experts + self.shared_expert_params + self.router_params
        else:
            mlp = self.dense_mlp_params
        return self.attn_params + mlp + self.norm_params

    def _heads(self) -> int:
        return self.embedding_params * (1 if self.tied_embeddings else 2) + self.position_params + self.hidden

    def main_params(self) -> int:
        """All parameters of the model proper, embeddings included, MTP modules excluded."""
        return (self.n_dense_layers * self._layer_params(False, False) + self.n_moe_layers * self._layer_params(True, False)
                + self._heads())

    def total_params(self) -> int:
        """All parameters, embeddings and multi-token-prediction modules included (what training holds)."""
        return self.main_params() + self.mtp_layers * self.mtp_layer_params

    def main_active_params(self) -> int:
        """Parameters of the model proper touched per token (routed experts counted top_k times)."""
        return (self.n_dense_layers * self._layer_params(False, True) + self.n_moe_layers * self._layer_params(True, True)
                + self._heads())

    def active_params(self) -> int:
        """Parameters touched per token, MTP modules included."""
        return self.main_active_params() + self.mtp_layers * self.mtp_layer_active_params

    def layer_linear_flops_per_token(self, moe: bool) -> float:
        """Forward FLOPs of the weight matmuls of one layer for one token."""
        if moe:
            mlp = self.top_k * self.expert_params + self.shared_expert_params + self.router_params
        else:
            mlp = self.dense_mlp_params
        return 2.0 * (self.attn_params + mlp)


def mlp_params(hidden: int, ffn: int, gated: bool, bias: bool = False) -> int:
    """Weights of one MLP (up and down, plus the gate when gated) and, with bias, their bias vectors."""
    weights = (3 if gated else 2) * hidden * ffn
    return weights + (((2 if gated else 1) * ffn + hidden) if bias else 0)


def attention_matrices(arch: ModelArch) -> tuple[tuple[str, int, int], ...]:
    """(name, d_in, d_out) of one layer's attention projections, as Hugging Face names them (Llama q/k/v/o_proj;
    DeepSeek MLA q_a/q_b or q, kv_a, kv_b, o_proj)."""
    h, a, kv = arch.hidden_size, arch.n_heads, arch.kv_heads
    if arch.mla is None:
        d = arch.attn_head_dim
        return (("q_proj", h, a * d), ("k_proj", h, kv * d), ("v_proj", h, kv * d), ("o_proj", a * d, h))
    m = arch.mla
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    q = ((("q_proj", h, a * qk),) if m.q_lora_rank is None else
         (("q_a_proj", h, m.q_lora_rank), ("q_b_proj", m.q_lora_rank, a * qk)))
    return q + (("kv_a_proj_with_mqa", h, m.kv_lora_rank + m.qk_rope_head_dim),
                ("kv_b_proj", m.kv_lora_rank, a * (m.qk_nope_head_dim + m.v_head_dim)), ("o_proj", a * m.v_head_dim, h))


def mlp_matrices(hidden: int, ffn: int, gated: bool, copies: int = 1) -> tuple[tuple[str, int, int], ...]:
    """(name, d_in, d_out) of an MLP's matrices (gate, up, down; up and down ungated), `copies` times."""
    one = ((("gate_proj", hidden, ffn),) if gated else ()) + (("up_proj", hidden, ffn), ("down_proj", ffn, hidden))
    return one * copies


def _attention(arch: ModelArch) -> tuple[int, int, int, int, float]:
    """(projection parameters, qk head dim, v head dim, K+V elements per token, TP-split activations per token)."""
    h, a, kv = arch.hidden_size, arch.n_heads, arch.kv_heads
    if arch.mla is None:
        d = arch.attn_head_dim
        params = h * (a * d) + 2 * h * (kv * d) + (a * d) * h      # Q, K, V, output projections
        if arch.linear_bias != "none":
            params += a * d + 2 * kv * d + (h if arch.linear_bias == "all" else 0)
        kv_elems = 2 * kv * d
        return params, d, d, kv_elems, float((a * d + kv_elems) + a * d)   # Q, K, V, then the output-projection input
    m = arch.mla
    qk_dim, v_dim = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
    q = h * a * qk_dim if m.q_lora_rank is None else h * m.q_lora_rank + m.q_lora_rank * a * qk_dim
    params = (q                                                         # Q down and up, or one full-rank projection
              + h * (m.kv_lora_rank + m.qk_rope_head_dim)                  # joint KV down (+ shared rope key)
              + m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)   # K (nope) and V up
              + a * v_dim * h)                                              # output projection
    kv_elems = a * (qk_dim + v_dim)
    act = a * qk_dim + kv_elems + a * v_dim + (m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim
    return params, qk_dim, v_dim, kv_elems, float(act)


def qk_head_dim(arch: ModelArch) -> int:
    """The head dimension of the attention's query-key product (MLA: its no-rope and rope parts together)."""
    return _attention(arch)[1]


def shape_of(arch: ModelArch) -> Shape:
    h, a, kv = arch.hidden_size, arch.n_heads, arch.kv_heads
    gated = arch.ffn_type in ("swiglu", "geglu")
    bias = arch.linear_bias == "all"
    attn, qk_dim, v_dim, kv_elems, attn_act = _attention(arch)
    attn += a if arch.attention_sinks else 0
    if arch.mla is None:
        qk_norm = {"none": 0, "head": 2 * qk_dim, "full": a * qk_dim + kv * qk_dim}[arch.qk_norm]
        qk_norm_elems = 0 if arch.qk_norm == "none" else (a + kv) * qk_dim
        rotary = (a + kv) * qk_dim
    else:                                            # MLA normalises its latents (q_a_layernorm, kv_a_layernorm)
        qk_norm = qk_norm_elems = (arch.mla.q_lora_rank or 0) + arch.mla.kv_lora_rank
        rotary = (a + 1) * arch.mla.qk_rope_head_dim     # each head's rope part of the query, the shared rope key
    norms = 2 * h + qk_norm
    mask = moe_layer_mask(arch)
    n_moe = sum(mask)
    moe = n_moe > 0
    dense_ffn = arch.dense_ffn_hidden_size or arch.ffn_hidden_size
    shared_ffn = arch.shared_expert_ffn_hidden_size or arch.ffn_hidden_size
    expert = mlp_params(h, arch.ffn_hidden_size, gated, bias) if moe else 0
    shared = arch.n_shared_experts * mlp_params(h, shared_ffn, gated, bias) if moe else 0
    router = (h * arch.n_experts + (arch.n_experts if bias else 0)) if moe else 0
    top_k = arch.experts_per_token if moe else 1
    # an MTP module: one layer like the last (DeepSeek-V3: MoE), enorm + hnorm, the 2h -> h projection, its head norm
    last_moe = mask[-1]
    mtp_mlp_total = (arch.n_experts * expert + shared + router) if last_moe else mlp_params(h, dense_ffn, gated, bias)
    mtp_mlp_active = (top_k * expert + shared + router) if last_moe else mtp_mlp_total
    mtp_extra = 2 * h * h + 3 * h
    return Shape(
        n_layers=arch.n_layers, n_dense_layers=arch.n_layers - n_moe, n_moe_layers=n_moe,
        hidden=h, n_heads=a, kv_elems_per_token=kv_elems, qk_head_dim=qk_dim, v_head_dim=v_dim,
        vocab=arch.vocab_size, tied_embeddings=arch.tied_embeddings,
        position_params=arch.learned_position_embeddings * h,
        attn_params=attn, attn_act_split=attn_act,
        dense_mlp_params=mlp_params(h, dense_ffn, gated, bias), dense_ffn=dense_ffn,
        expert_params=expert, expert_ffn=arch.ffn_hidden_size,
        shared_expert_params=shared, shared_ffn=arch.n_shared_experts * shared_ffn if moe else 0,
        n_experts=arch.n_experts, top_k=top_k, gated=gated,
        norm_params=norms, dropout=arch.dropout, router_params=router,
        rms_norm=arch.norm_kind == "rmsnorm", qk_norm_elems=qk_norm_elems,
        rotary_elems=0 if arch.learned_position_embeddings else rotary,
        moe_layer_mask=mask, attention_windows=attention_windows(arch), attention_window_kind=arch.attention_window_kind,
        mtp_layers=arch.mtp_layers,
        mtp_layer_params=attn + mtp_mlp_total + norms + mtp_extra,
        mtp_layer_active_params=attn + mtp_mlp_active + norms + mtp_extra,
        attn_matrices=attention_matrices(arch),
        dense_mlp_matrices=mlp_matrices(h, dense_ffn, gated),
        expert_matrices=mlp_matrices(h, arch.ffn_hidden_size, gated) if moe else (),
        shared_matrices=mlp_matrices(h, shared_ffn, gated, arch.n_shared_experts) if moe else (),
        router_matrices=(("router", h, arch.n_experts),) if moe else (),
    )


def busiest_rank_load(shape: Shape, expert_load_ratio: float, ep):
    """Routed tokens of the busiest expert-parallel rank over the mean rank's (1 with balanced routing), for a MoE
    layer whose busiest expert receives expert_load_ratio times the mean expert's tokens while the other n - 1 share
    the rest evenly: the rank holding it with L - 1 others (L = n / ep local experts) carries
    (r + (L - 1)(n - r) / (n - 1)) / L of the mean rank's load, r with one expert per rank and 1 with every expert on
    one rank. A lower bound on a real router's (its other hot experts may share the rank); every rank waits for it at
    the all-to-all, so it sets the layer's expert time, its received bytes and its stored activations."""
    n, r = shape.n_experts, expert_load_ratio
    if n <= 1 or r == 1.0:
        return 1.0 + 0.0 * ep
    local = n / ep
    return (r + (local - 1) * (n - r) / (n - 1)) / local


def routed_copies(shape: Shape, expert_load_ratio: float, ep):
    """Routed token copies per token the busiest expert-parallel rank processes, over its share of the tokens: top_k
    with balanced routing, scaled by busiest_rank_load."""
    return shape.top_k * busiest_rank_load(shape, expert_load_ratio, ep)
