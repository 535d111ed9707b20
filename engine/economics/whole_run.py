"""The whole training run beyond its optimizer steps at the main sequence length and batch: periodic evaluation, and
phases at another sequence length or batch (batch-size ramp-up, long-context stages). Failures, checkpoints and
restarts follow in engine.economics.goodput.

Evaluation: every eval_interval_steps training steps, eval_steps forward-only steps (Megatron-LM's defaults:
100 every 1,000), each costing the forward pass's share of a training step's FLOPs (engine.physics.flops: 1/3 when
every weight trains, Kaplan et al. 2020; about 1/2 for LoRA, whose frozen base has no weight gradients; less under
recomputation).
Phases: each trains its tokens (part of the run's total) on the same cluster with the best layout the search finds
for its sequence length and batch (engine.planning.search.context searches them, through the search's cache); the
rest of the tokens train at the main setup.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache

from engine.catalog import DATA_DIR


@lru_cache(maxsize=1)
def schedule_defaults() -> dict:
    return json.loads((DATA_DIR / "schedule.json").read_text())


@dataclass(frozen=True)
class WholeRun:
    eval_interval_steps: int
    eval_steps: int
    eval_source: str
    phases: list = field(default_factory=list)      # per phase: name, tokens, seq_len, global_batch_size, seconds, layout
    phase_tokens: float = 0.0
    phase_s: float = 0.0

    @property
    def eval_steps_per_step(self) -> float:
        """Forward-only evaluation steps per training step (each costs the forward share of a training step,
        engine.planning.evaluation.timing)."""
        return self.eval_steps / self.eval_interval_steps

    def detail(self, steps_s: float | None, eval_s: float | None) -> dict:
        """The whole run's terms (steps and evaluation days None for a layout that does not fit)."""
        days = lambda s: None if s is None else s / 86400.0
        return {"steps_days": days(steps_s), "evaluation_days": days(eval_s),
                "evaluation": f"{self.eval_steps} forward-only steps every {self.eval_interval_steps} ({self.eval_source})",
                "phases": self.phases, "phases_days": self.phase_s / 86400.0}


@dataclass(frozen=True)
class PhaseRun:
    """One phase as trained: its own best layout on the run's cluster (engine.planning.search.context) and its
    seconds of optimizer steps (its evaluation is counted with the run's); infinite, with the problem, where no
    layout fits."""
    name: str
    tokens: float
    seq_len: int
    global_batch_size: int
    seconds: float
    layout: dict | None = None
    mfu: float | None = None
    problem: str | None = None

    def detail(self) -> dict:
        out = {"name": self.name, "tokens": self.tokens, "seq_len": self.seq_len,
               "global_batch_size": self.global_batch_size, "seconds": self.seconds, "layout": self.layout}
        return {**out, "problem": self.problem} if self.problem is not None else {**out, "mfu": self.mfu}


def phase_scenario(sc, phase):
    """The scenario one phase trains: its sequence length, batch and tokens, no phases of its own, no layout."""
    tr = sc.training
    training = tr.model_copy(update={"seq_len": phase.seq_len or tr.seq_len,
                                     "global_batch_size": phase.global_batch_size or tr.global_batch_size,
                                     "total_tokens": phase.tokens})
    return sc.model_copy(update={"training": training, "schedule": sc.schedule.model_copy(update={"phases": []}),
                                 "layout": None})


def resolve(sc, phases: tuple[PhaseRun, ...] = ()) -> WholeRun:
    """The scenario's schedule block where given, the sourced defaults otherwise, with its phases as trained."""
    d = schedule_defaults()
    s = sc.schedule
    ev = d["evaluation"]
    interval = s.eval_interval_steps if s is not None and s.eval_interval_steps is not None else ev["eval_interval_steps"]
    steps = s.eval_steps if s is not None and s.eval_steps is not None else ev["eval_steps"]
    given = s is not None and (s.eval_interval_steps is not None or s.eval_steps is not None)
    source = "given in schedule" if given else ev["source"]["document"]
    return WholeRun(eval_interval_steps=interval, eval_steps=steps, eval_source=source,
                    phases=[p.detail() for p in phases],
                    phase_tokens=sum(p.tokens for p in phases), phase_s=sum(p.seconds for p in phases))
