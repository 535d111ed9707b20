"""Many layouts at once: a struct of numpy arrays (the rules every layout must satisfy are in
engine.physics.layout_rules).

The single estimate is a batch of one, so the search and the estimate share every formula.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from engine.physics.layout_rules import FLAGS, OFFLOAD, RECOMPUTE, layout_fields, row  # noqa: F401 (re-exported)
from engine.scenario import Layout


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
    off: np.ndarray      # index into OFFLOAD: what ZeRO-Offload keeps in CPU memory
    a2ao: np.ndarray     # bool: MoE all-to-all overlapped with another micro-batch's compute

    def __len__(self) -> int:
        return len(self.tp)

    @classmethod
    def of(cls, layouts: list[Layout]) -> "Layouts":
        rows = [row(x) for x in layouts]
        return cls(**{f.name: np.array([r[f.name] for r in rows], dtype=bool if f.name in FLAGS else np.int64)
                      for f in fields(cls)})

    def take(self, idx) -> "Layouts":
        return Layouts(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    def layout(self, i: int) -> Layout:
        return Layout(**layout_fields({f.name: getattr(self, f.name)[i] for f in fields(self)}))

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
