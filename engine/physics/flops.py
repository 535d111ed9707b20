"""FLOPs per trained token, in the conventions published runs report.

- Model FLOPs, causal (what MFU means here): 3x the forward pass (Kaplan et al. 2020: backward = 2x forward), weight
  matmuls at 2 FLOPs per weight, logits included, and the attention core counted over the keys each query really
  attends to under the causal mask, about half the s x s square (current Megatron-LM, training.py
  num_floating_point_operations since 2025; windowed layers count their window).
- Model FLOPs, full square (PaLM appendix B; Narayanan et al. 2021 eq. 3; Megatron-LM's count in 2024): the same
  with every query attending to all s keys. Published MFU of 2021-2024 runs (Megatron-LM Table 1, its H100
  weak-scaling table, Llama 3) uses this count, which exceeds the work a causal kernel does.
- Hardware FLOPs (HFU): model FLOPs plus the forward work recomputed in the backward pass.
- Fine-tuning with frozen base weights (LoRA, QLoRA; engine.physics.finetune): the frozen weight matmuls compute
  their input gradient but no weight gradient, 2x their forward instead of 3x (Hu et al. 2021, section 4.2), and
  the adapters add 3x their own forward, 2 FLOPs per adapter parameter.
"""
from __future__ import annotations

import numpy as np

from engine.physics.compute import attention_keys
from engine.physics.finetune import adapter_flops_per_token, frozen_linear_flops_per_token
from engine.physics.layouts import Layouts
from engine.physics.model import Shape
from engine.scenario import Training

CONVENTIONS = {
    "causal": "causal attention counted as computed (about half the square), as current Megatron-LM counts",
    "full_square": "attention counted over the full s x s square (PaLM, Megatron-LM until 2024)",
}


def _forward(shape: Shape, keys: float) -> tuple[float, float]:
    """(forward FLOPs per token of the whole model, of its attention core) with `keys` keys per query."""
    layers = shape.n_layers + shape.mtp_layers      # multi-token-prediction modules are trained layers too
    attention = layers * 2.0 * shape.n_heads * (shape.qk_head_dim + shape.v_head_dim) * keys
    mtp_moe = bool(shape.moe_layer_mask and shape.moe_layer_mask[-1])
    linear = (shape.n_dense_layers * shape.layer_linear_flops_per_token(False)
              + shape.n_moe_layers * shape.layer_linear_flops_per_token(True)
              + shape.mtp_layers * (shape.layer_linear_flops_per_token(mtp_moe) + 2.0 * 2 * shape.hidden * shape.hidden)
              + (1 + shape.mtp_layers) * 2.0 * shape.hidden * shape.vocab)
    return linear + attention, attention


def flops_per_token(shape: Shape, training: Training, lay: Layouts) -> dict[str, np.ndarray | float]:
    """Model and hardware FLOPs per trained token in both attention conventions (keys of CONVENTIONS), and the
    forward pass's alone (an evaluation step's work per token: adapters included, no backward, no recompute)."""
    s = training.seq_len
    out: dict[str, np.ndarray | float] = {}
    for name, keys in (("causal", attention_keys(shape, s)), ("full_square", float(s))):
        fwd, attention = _forward(shape, keys)
        layers = fwd - (1 + shape.mtp_layers) * 2.0 * shape.hidden * shape.vocab
        recomputed = np.select([lay.rc == 0, lay.rc == 1], [0.0, attention if training.attention == "standard" else 0.0],
                               layers)
        model = 3.0 * fwd + finetune_flops(shape, training, fwd - attention)
        out[f"forward_{name}"] = fwd + adapter_flops_per_token(shape, training) / 3.0   # what evaluation computes
        out[f"model_{name}"] = model
        out[f"hardware_{name}"] = model + recomputed + np.where(lay.rc == 2, adapter_flops_per_token(shape, training), 0.0)
    return out


def finetune_flops(shape: Shape, training: Training, linear_fwd: float) -> float:
    """What a frozen base changes in the FLOPs per token (module docstring): less the frozen matmuls' weight
    gradients, plus the adapters' forward and backward; 0 when every weight trains."""
    return -frozen_linear_flops_per_token(shape, training, linear_fwd) + 3.0 * adapter_flops_per_token(shape, training)


def model_flops_per_token(shape: Shape, seq_len: int, convention: str = "causal") -> float:
    """Model FLOPs per trained token of one convention (CONVENTIONS), independent of the layout."""
    keys = attention_keys(shape, seq_len) if convention == "causal" else float(seq_len)
    return 3.0 * _forward(shape, keys)[0]
