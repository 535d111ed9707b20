"""Transformer architecture: the spec, parameter counts and FLOPs per token.

Conventions: one multiply-add = 2 FLOPs; a linear layer with P weights costs 2*P FLOPs per token
forward and 4*P backward (Kaplan et al. 2020, C ~ 6ND). Attention scores cost 2*s*d per head per
token for Q.K^T and again for A.V (PaLM appendix B; Narayanan et al. 2021 eq. 3), counted over the
full s x s square as PaLM and Megatron-LM's paper do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError


class MLA(BaseModel):
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank Q and joint low-rank K/V."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    q_lora_rank: int = Field(ge=1, le=1_000_000)
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
    ffn_hidden_size: int = Field(ge=1, le=10_000_000, description="MLP width (per expert for MoE)")
    vocab_size: int = Field(ge=1, le=100_000_000)
    ffn_type: Literal["gelu", "swiglu"] = "gelu"
    n_experts: int = Field(default=1, ge=1, le=100_000)
    experts_per_token: int = Field(default=1, ge=1, le=100_000)
    n_shared_experts: int = Field(default=0, ge=0, le=1_000)
    n_dense_layers: int = Field(default=0, ge=0, le=10_000, description="leading layers with a dense MLP in an MoE model")
    dense_ffn_hidden_size: int | None = Field(default=None, ge=1, le=10_000_000)
    tied_embeddings: bool = False
    learned_position_embeddings: int = Field(default=0, ge=0, le=10_000_000, description="rows of a learned position table (0: rotary)")
    dropout: bool = Field(default=False, description="residual and attention dropout (GPT-2/3 style); Llama-style models train without")
    mla: MLA | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "ModelArch":
        kv = self.kv_heads
        if self.mla is None and self.hidden_size % self.n_heads:
            raise PydanticCustomError("arch", "hidden_size {h} is not divisible by n_heads {a}; the head dimension must be whole",
                                      {"h": self.hidden_size, "a": self.n_heads})
        if self.n_heads % kv:
            raise PydanticCustomError("arch", "n_heads {a} is not divisible by n_kv_heads {kv}; GQA needs whole query groups",
                                      {"a": self.n_heads, "kv": kv})
        if self.experts_per_token > self.n_experts:
            raise PydanticCustomError("arch", "experts_per_token {k} exceeds n_experts {e}",
                                      {"k": self.experts_per_token, "e": self.n_experts})
        if self.n_dense_layers > self.n_layers:
            raise PydanticCustomError("arch", "n_dense_layers {d} exceeds n_layers {l}", {"d": self.n_dense_layers, "l": self.n_layers})
        return self

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 1


@dataclass(frozen=True)
class Shape:
    """Per-layer sizes derived once from a ModelArch (all counts are elements, not bytes)."""

    n_layers: int
    n_dense_layers: int          # layers with a dense MLP (all layers of a dense model)
    n_moe_layers: int
    hidden: int
    n_heads: int
    kv_elems_per_token: int      # K and V elements per token per layer (what CP rings pass around)
    qk_head_dim: int
    v_head_dim: int
    vocab: int
    tied_embeddings: bool
    position_params: int
    attn_params: int             # all attention projections of one layer
    attn_act_split: float        # stored attention activations split by TP, in elements per token (Q, K, V, proj input, latents)
    dense_mlp_params: int
    dense_ffn: int
    expert_params: int           # one routed expert
    expert_ffn: int
    shared_expert_params: int    # all shared experts of one layer
    shared_ffn: int
    n_experts: int
    top_k: int
    gated: bool                  # SwiGLU: three matrices, otherwise two
    norm_params: int             # both norms of one layer
    dropout: bool                # dropout masks stored and applied (1 byte per element)

    @property
    def router_params(self) -> int:
        return self.hidden * self.n_experts if self.n_moe_layers else 0

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def total_params(self) -> int:
        """All parameters, embeddings included (what model cards quote)."""
        dense = self.attn_params + self.dense_mlp_params + self.norm_params
        moe = (self.attn_params + self.n_experts * self.expert_params + self.shared_expert_params
               + self.router_params + self.norm_params)
        heads = self.embedding_params * (1 if self.tied_embeddings else 2)
        return self.n_dense_layers * dense + self.n_moe_layers * moe + heads + self.position_params + self.hidden

    def active_params(self) -> int:
        """Parameters touched per token (routed experts counted top_k times)."""
        moe_active = (self.attn_params + self.top_k * self.expert_params + self.shared_expert_params
                      + self.router_params + self.norm_params)
        dense = self.attn_params + self.dense_mlp_params + self.norm_params
        heads = self.embedding_params * (1 if self.tied_embeddings else 2)
        return self.n_dense_layers * dense + self.n_moe_layers * moe_active + heads + self.position_params + self.hidden

    def attn_core_flops_per_token(self, seq_len: int) -> float:
        """Forward Q.K^T plus A.V of one layer for one token attending to seq_len keys."""
        return 2.0 * seq_len * self.n_heads * (self.qk_head_dim + self.v_head_dim)

    def layer_linear_flops_per_token(self, moe: bool) -> float:
        """Forward FLOPs of the weight matmuls of one layer for one token."""
        if moe:
            mlp = self.top_k * self.expert_params + self.shared_expert_params + self.router_params
        else:
            mlp = self.dense_mlp_params
        return 2.0 * (self.attn_params + mlp)

    def model_flops_per_token(self, seq_len: int) -> float:
        """Forward + backward FLOPs per token (3x forward), logits included, no recompute."""
        fwd = (self.n_dense_layers * self.layer_linear_flops_per_token(False)
               + self.n_moe_layers * self.layer_linear_flops_per_token(True)
               + self.n_layers * self.attn_core_flops_per_token(seq_len)
               + 2.0 * self.hidden * self.vocab)
        return 3.0 * fwd


def mlp_params(hidden: int, ffn: int, gated: bool) -> int:
    return (3 if gated else 2) * hidden * ffn


def shape_of(arch: ModelArch) -> Shape:
    h, a, kv = arch.hidden_size, arch.n_heads, arch.kv_heads
    gated = arch.ffn_type == "swiglu"
    if arch.mla is None:
        d = h // a
        attn = h * (a * d) + 2 * h * (kv * d) + (a * d) * h      # Q, K, V, output projections
        qk_dim = v_dim = d
        kv_elems = 2 * kv * d
        attn_act = (a * d + kv_elems) + a * d                     # Q, K, V, then the output-projection input
    else:
        m = arch.mla
        qk_dim, v_dim = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
        attn = (h * m.q_lora_rank + m.q_lora_rank * a * qk_dim            # Q down and up
                + h * (m.kv_lora_rank + m.qk_rope_head_dim)                  # joint KV down (+ shared rope key)
                + m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)   # K (nope) and V up
                + a * v_dim * h)                                              # output projection
        kv_elems = a * (qk_dim + v_dim)
        attn_act = a * qk_dim + kv_elems + a * v_dim + m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim
    moe = arch.is_moe
    n_dense = arch.n_dense_layers if moe else arch.n_layers
    dense_ffn = (arch.dense_ffn_hidden_size or arch.ffn_hidden_size)
    return Shape(
        n_layers=arch.n_layers, n_dense_layers=n_dense, n_moe_layers=arch.n_layers - n_dense,
        hidden=h, n_heads=a, kv_elems_per_token=kv_elems, qk_head_dim=qk_dim, v_head_dim=v_dim,
        vocab=arch.vocab_size, tied_embeddings=arch.tied_embeddings,
        position_params=arch.learned_position_embeddings * h,
        attn_params=attn, attn_act_split=float(attn_act),
        dense_mlp_params=mlp_params(h, dense_ffn, gated), dense_ffn=dense_ffn,
        expert_params=mlp_params(h, arch.ffn_hidden_size, gated) if moe else 0, expert_ffn=arch.ffn_hidden_size,
        shared_expert_params=arch.n_shared_experts * mlp_params(h, arch.ffn_hidden_size, gated) if moe else 0,
        shared_ffn=arch.n_shared_experts * arch.ffn_hidden_size if moe else 0,
        n_experts=arch.n_experts, top_k=arch.experts_per_token if moe else 1, gated=gated,
        norm_params=2 * h,
        dropout=arch.dropout,
    )
