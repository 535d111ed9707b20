"""Many layouts at once: a struct of numpy arrays, and the rules every layout must satisfy.

The single estimate is a batch of one, so the search and the estimate share every formula.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from engine.physics.model import ModelArch
from engine.scenario import Layout, Training

RECOMPUTE = ("none", "selective", "full")
UNSET = -1            # first/last stage layers not given: even split


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
    etp: np.ndarray      # expert tensor parallel size
    first: np.ndarray    # transformer layers on the first stage, UNSET for the even split
    last: np.ndarray     # transformer layers on the last stage, UNSET for the even split
    reshard: np.ndarray  # bool: ZeRO-3 frees gathered weights after forward
    shard: np.ndarray    # ZeRO shard group size (HSDP); equal to dp*cp when sharding over every data-parallel rank
    tpo: np.ndarray      # bool: tensor-parallel communication overlapped with matmuls

    def __len__(self) -> int:
        return len(self.tp)

    @classmethod
    def of(cls, layouts: list[Layout]) -> "Layouts":
        col = lambda f: np.array([f(x) for x in layouts], dtype=np.int64)
        flag = lambda f: np.array([f(x) for x in layouts], dtype=bool)
        unset = lambda value: UNSET if value is None else value
        return cls(tp=col(lambda x: x.tp), pp=col(lambda x: x.pp), dp=col(lambda x: x.dp), cp=col(lambda x: x.cp),
                   ep=col(lambda x: x.ep), mbs=col(lambda x: x.micro_batch_size), v=col(lambda x: x.virtual_stages),
                   zero=col(lambda x: x.zero_stage), sp=flag(lambda x: x.sequence_parallel),
                   rc=col(lambda x: RECOMPUTE.index(x.recompute)), etp=col(lambda x: x.expert_tp or x.tp),
                   first=col(lambda x: unset(x.first_stage_layers)), last=col(lambda x: unset(x.last_stage_layers)),
                   reshard=flag(lambda x: x.reshard_after_forward),
                   shard=col(lambda x: x.shard_group or x.dp * x.cp), tpo=flag(lambda x: x.tp_comm_overlap))

    def take(self, idx) -> "Layouts":
        return Layouts(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def layout(self, i: int) -> Layout:
        tp, dp, cp = int(self.tp[i]), int(self.dp[i]), int(self.cp[i])
        optional = lambda value: None if value == UNSET else int(value)
        return Layout(tp=tp, pp=int(self.pp[i]), dp=dp, cp=cp, ep=int(self.ep[i]),
                      micro_batch_size=int(self.mbs[i]), virtual_stages=int(self.v[i]), zero_stage=int(self.zero[i]),
                      sequence_parallel=bool(self.sp[i]), recompute=RECOMPUTE[int(self.rc[i])],
                      expert_tp=None if int(self.etp[i]) == tp else int(self.etp[i]),
                      first_stage_layers=optional(self.first[i]), last_stage_layers=optional(self.last[i]),
                      reshard_after_forward=bool(self.reshard[i]),
                      shard_group=None if int(self.shard[i]) == dp * cp else int(self.shard[i]),
                      tp_comm_overlap=bool(self.tpo[i]))

    def micro_batches(self, global_batch: int) -> np.ndarray:
        """Micro-batches per optimizer step per pipeline (gradient-accumulation steps)."""
        return global_batch // (self.dp * self.mbs)

    @property
    def dp_group(self) -> np.ndarray:
        """Ranks that hold the same non-expert weights: data- times context-parallel."""
        return self.dp * self.cp

    @property
    def expert_dp(self) -> np.ndarray:
        """Ranks that hold the same expert weights under MoE parallel folding: tp*cp*dp / (etp*ep)."""
        return self.tp * self.cp * self.dp // (self.etp * self.ep)


def stage_split_ok(n_layers: int, lay: Layouts) -> np.ndarray:
    """True where the pipeline split is buildable (engine.physics.schedule.stage_layers), vectorised."""
    pp, v = lay.pp, lay.v
    f_set, l_set = lay.first >= 0, lay.last >= 0
    given = np.where(f_set, lay.first, 0) + np.where(l_set, lay.last, 0)
    n_given = f_set.astype(int) + l_set.astype(int)
    others = pp - n_given
    rest = n_layers - given
    each = np.where(others > 0, rest // np.maximum(others, 1), 0)
    split_even = np.where(others > 0, rest % np.maximum(others, 1) == 0, rest == 0)
    f = np.where(f_set, lay.first, each)
    last = np.where(l_set, lay.last, each)
    reference = np.where(pp > 2, each, np.maximum(f, last))
    chunks_ok = (f >= v) & (last >= v) & ((pp <= 2) | (each >= v)) & (reference % v == 0)
    multi = (rest >= 0) & split_even & ((pp <= 2) | (each >= 1)) & chunks_ok
    single = (v == 1) & (~f_set | (lay.first == n_layers)) & (~l_set | (lay.last == n_layers))
    return np.where(pp == 1, single, multi)


def violations(arch: ModelArch, training: Training, n_gpus: int, lay: Layouts) -> dict[str, np.ndarray]:
    """Boolean masks, one per rule, True where the layout breaks that rule (keys are the user-facing reasons)."""
    kv = arch.kv_heads
    dense_ffn = arch.dense_ffn_hidden_size or arch.ffn_hidden_size
    moe = arch.is_moe
    tp_ffn = dense_ffn if (not moe or arch.n_dense_layers) else 0
    return {
        "tp*pp*dp*cp != n_gpus": lay.tp * lay.pp * lay.dp * lay.cp != n_gpus,
        "heads, KV heads or MLP width not divisible by tp": (arch.n_heads % lay.tp != 0) | (kv % lay.tp != 0)
                                                           | (tp_ffn % lay.tp != 0),
        "layers do not split into the pipeline stages and virtual stages": ~stage_split_ok(arch.n_layers, lay),
        "global batch not divisible by dp*micro_batch": training.global_batch_size % (lay.dp * lay.mbs) != 0,
        "experts not divisible by ep, or ep*expert_tp not dividing tp*cp*dp":
            ((lay.ep > 1) | (lay.etp != lay.tp)) & (~moe | (arch.n_experts % lay.ep != 0)
                                                     | ((lay.tp * lay.cp * lay.dp) % (lay.ep * lay.etp) != 0)
                                                     | (arch.ffn_hidden_size % lay.etp != 0)),
        "sequence not divisible by cp": training.seq_len % lay.cp != 0,
        "ZeRO options inconsistent (shard group, resharding)": ((lay.shard != lay.dp_group) & (lay.zero == 0))
                                                               | (lay.dp_group % lay.shard != 0)
                                                               | (~lay.reshard & (lay.zero < 3)),
        "tensor-parallel overlap needs tp > 1 with sequence parallelism": lay.tpo & ((lay.tp == 1) | ~lay.sp),
    }
