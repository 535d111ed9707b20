"""Many layouts at once: a struct of numpy arrays, and the divisibility rules every layout must satisfy.

The single estimate is a batch of one, so the search and the estimate share every formula.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from engine.model import ModelArch
from engine.scenario import Layout, Training

RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class Layouts:
    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    mbs: np.ndarray
    v: np.ndarray
    zero: np.ndarray
    sp: np.ndarray       # bool
    rc: np.ndarray       # index into RECOMPUTE

    def __len__(self) -> int:
        return len(self.tp)

    @classmethod
    def of(cls, layouts: list[Layout]) -> "Layouts":
        col = lambda f: np.array([f(x) for x in layouts], dtype=np.int64)
        return cls(tp=col(lambda x: x.tp), pp=col(lambda x: x.pp), dp=col(lambda x: x.dp), cp=col(lambda x: x.cp),
                   ep=col(lambda x: x.ep), mbs=col(lambda x: x.micro_batch_size), v=col(lambda x: x.virtual_stages),
                   zero=col(lambda x: x.zero_stage), sp=np.array([x.sequence_parallel for x in layouts], dtype=bool),
                   rc=col(lambda x: RECOMPUTE.index(x.recompute)))

    def take(self, idx) -> "Layouts":
        return Layouts(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def layout(self, i: int) -> Layout:
        return Layout(tp=int(self.tp[i]), pp=int(self.pp[i]), dp=int(self.dp[i]), cp=int(self.cp[i]), ep=int(self.ep[i]),
                      micro_batch_size=int(self.mbs[i]), virtual_stages=int(self.v[i]), zero_stage=int(self.zero[i]),
                      sequence_parallel=bool(self.sp[i]), recompute=RECOMPUTE[int(self.rc[i])])

    def micro_batches(self, global_batch: int) -> np.ndarray:
        """Micro-batches per optimizer step per pipeline (gradient-accumulation steps)."""
        return global_batch // (self.dp * self.mbs)


def violations(arch: ModelArch, training: Training, n_gpus: int, lay: Layouts) -> dict[str, np.ndarray]:
    """Boolean masks, one per rule, True where the layout breaks that rule (keys are the user-facing reasons)."""
    kv = arch.kv_heads
    return {
        "tp*pp*dp*cp != n_gpus": lay.tp * lay.pp * lay.dp * lay.cp != n_gpus,
        "heads, KV heads or MLP width not divisible by tp": (arch.n_heads % lay.tp != 0) | (kv % lay.tp != 0)
                                                           | (arch.ffn_hidden_size % lay.tp != 0),
        "layers not divisible by pp*virtual_stages": arch.n_layers % (lay.pp * lay.v) != 0,
        "interleaving (virtual_stages > 1) without pipeline": (lay.v > 1) & (lay.pp == 1),
        "global batch not divisible by dp*micro_batch": training.global_batch_size % (lay.dp * lay.mbs) != 0,
        "experts not divisible by ep, or ep not dividing dp*cp": (lay.ep > 1) & ((arch.n_experts % lay.ep != 0)
                                                                                | ((lay.dp * lay.cp) % lay.ep != 0)),
        "sequence not divisible by cp": training.seq_len % lay.cp != 0,
    }


@dataclass(frozen=True)
class Stage:
    """What one pipeline stage's GPU holds: its layers by kind, whether it has the embedding or the output head,
    and how many micro-batches of activations it keeps alive under the 1F1B schedule."""

    dense: np.ndarray
    moe: np.ndarray
    embedding: np.ndarray
    head: np.ndarray
    in_flight: np.ndarray


def pipeline_stages(n_layers: int, n_dense: int, lay: Layouts, micro_batches: np.ndarray) -> dict[str, Stage]:
    """First, middle and last stage (for pp == 1 all three are the single stage; a dense model has n_dense == n_layers)."""
    pp, v = lay.pp, lay.v
    per_gpu = n_layers // pp
    chunk = n_layers // (pp * v)
    all_dense = n_dense >= n_layers
    first_dense = per_gpu if all_dense else np.minimum(n_dense, chunk)
    last_dense = per_gpu if all_dense else np.clip(n_dense - (n_layers - per_gpu), 0, per_gpu)
    mid_dense = per_gpu if all_dense else np.zeros_like(per_gpu)
    single = pp == 1
    # Korthikanti et al. 2022 sec. 4.2: the first 1F1B stage holds min(m, p) micro-batches; interleaving with
    # v chunks multiplies that by 1 + (p-1)/(p*v) (Megatron-LM theoretical_memory_usage.py).
    interleave = np.where(v > 1, 1.0 + (pp - 1) / (pp * v), 1.0)
    first_flight = np.where(single, 1.0, np.minimum(micro_batches, pp) * interleave)
    mid_flight = np.where(single, 1.0, np.minimum(micro_batches, np.ceil(pp / 2)))
    ones = np.ones_like(per_gpu, dtype=bool)
    return {
        "first": Stage(first_dense + 0 * per_gpu, per_gpu - first_dense, ones, single, first_flight),
        "middle": Stage(mid_dense + 0 * per_gpu, per_gpu - mid_dense, single, single, mid_flight),
        "last": Stage(last_dense + 0 * per_gpu, per_gpu - last_dense, single, ones, np.ones_like(first_flight)),
    }
