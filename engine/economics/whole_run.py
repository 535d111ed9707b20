"""The whole training run beyond its optimizer steps at the main sequence length and batch: periodic evaluation, and
phases at another sequence length or batch (batch-size ramp-up, long-context stages). Failures, checkpoints and
restarts follow in engine.economics.goodput.

Evaluation: every eval_interval_steps training steps, eval_steps forward-only steps (Megatron-LM's defaults:
100 every 1,000), each costing the forward share of a training step (1/3, Kaplan et al. 2020).
Phases: each trains its tokens (part of the run's total) on the same cluster with the best layout the search finds
for its sequence length and batch; the rest of the tokens train at the main setup.
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
    forward_share: float
    phases: list = field(default_factory=list)      # per phase: name, tokens, seq_len, global_batch_size, seconds, layout
    phase_tokens: float = 0.0
    phase_s: float = 0.0

    @property
    def eval_factor(self) -> float:
        """Evaluation seconds per second of training steps."""
        return self.forward_share * self.eval_steps / self.eval_interval_steps

    def detail(self, steps_s: float, eval_s: float) -> dict:
        return {"steps_days": steps_s / 86400.0, "evaluation_days": eval_s / 86400.0,
                "evaluation": f"{self.eval_steps} forward-only steps every {self.eval_interval_steps} ({self.eval_source})",
                "phases": self.phases, "phases_days": self.phase_s / 86400.0}


def resolve(sc) -> WholeRun:
    """The scenario's schedule block where given, the sourced defaults otherwise; phases searched on the cluster."""
    d = schedule_defaults()
    s = sc.schedule
    ev = d["evaluation"]
    interval = s.eval_interval_steps if s is not None and s.eval_interval_steps is not None else ev["eval_interval_steps"]
    steps = s.eval_steps if s is not None and s.eval_steps is not None else ev["eval_steps"]
    given = s is not None and (s.eval_interval_steps is not None or s.eval_steps is not None)
    source = "given in schedule" if given else ev["source"]["document"]
    phases, tokens, seconds = [], 0.0, 0.0
    for phase in (s.phases if s is not None else []):
        result = _phase(sc, phase)
        phases.append(result)
        tokens += phase.tokens
        seconds += result["seconds"]
    return WholeRun(eval_interval_steps=interval, eval_steps=steps, eval_source=source,
                    forward_share=d["forward_share"]["value"], phases=phases, phase_tokens=tokens, phase_s=seconds)


def _phase(sc, phase) -> dict:
    from engine.planning.search import search            # the search evaluates scenarios, which resolve their whole run
    tr = sc.training
    seq = phase.seq_len or tr.seq_len
    gbs = phase.global_batch_size or tr.global_batch_size
    training = tr.model_copy(update={"seq_len": seq, "global_batch_size": gbs, "total_tokens": phase.tokens})
    schedule = sc.schedule.model_copy(update={"phases": []})
    phase_sc = sc.model_copy(update={"training": training, "schedule": schedule, "layout": None})
    best = search(phase_sc, top=1, pareto_sizes=[])["best"]
    out = {"name": phase.name, "tokens": phase.tokens, "seq_len": seq, "global_batch_size": gbs}
    if not best:
        return {**out, "seconds": float("inf"), "layout": None,
                "problem": f"no layout on {sc.cluster.n_gpus} GPUs fits sequence {seq} with batch {gbs}"}
    b = best[0]
    return {**out, "seconds": b["train_days"] * 86400.0 / (1 + _eval_factor_of(b)), "layout": b["layout"], "mfu": b["mfu"]}


def _eval_factor_of(row: dict) -> float:
    """The evaluation share already inside a phase row's train_days (its own steps carry the run's evaluation)."""
    w = row.get("whole_run") or {}
    steps = w.get("steps_days") or 0.0
    return (w.get("evaluation_days") or 0.0) / steps if steps else 0.0
