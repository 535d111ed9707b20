"""Wall time a real cluster needs: failures, checkpoint writes, lost work and restarts on top of the compute time.

Failures arrive at rate n_gpus / MTBF_gpu (Poisson, independent GPUs). A checkpoint of the whole training state
(weights + optimizer states) is written every interval chosen by Young's formula; each failure loses on average half
an interval of work and one restart. Goodput = compute time / wall time.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from engine.catalog import DATA_DIR
from engine.physics.hardware import GIB
from engine.physics.memory import bytes_per_element


def young_interval_s(write_s, mtbf_s):
    """Young 1974: the checkpoint interval that minimises lost time, sqrt(2 x write time x MTBF)."""
    return np.sqrt(2.0 * np.asarray(write_s) * np.asarray(mtbf_s))


def job_mtbf_s(mtbf_gpu_hours: float, n_gpus: int) -> float:
    """Mean time between failures of a job on n independent GPUs: MTBF_gpu / n (a series system of exponential
    components: their failure rates add; NIST/SEMATECH e-Handbook of Statistical Methods sec. 8.1.8.2,
    https://www.itl.nist.gov/div898/handbook/apr/section1/apr182.htm)."""
    return mtbf_gpu_hours * 3600.0 / n_gpus


def checkpoint_bytes(shape, training) -> float:
    """Whole-model restartable checkpoint: weights + optimizer states of every parameter, once (data-parallel replicas hold
    copies, ZeRO shards are disjoint, so the layout does not change it); gradients are not saved."""
    b = bytes_per_element(training)
    return shape.total_params() * (b["weight"] + b["optimizer"])


def checkpoint_contents(training) -> str:
    """What checkpoint_bytes counts, in words from the byte counts used."""
    b = bytes_per_element(training)
    return (f"every parameter's {b['weight']:g}-byte weights and {b['optimizer']:g} bytes of {training.optimizer} "
            f"optimizer states (gradients are not saved)")


def wall_time_s(compute_s, write_s, interval_s, mtbf_s, restart_s):
    """First-order expected wall time (the accounting behind Young 1974): every interval of work pays one checkpoint
    write; each failure (one per MTBF of wall time) costs a restart plus, on average, half an interval and half a write
    of redone work. Infinite where failures come faster than the run can recover."""
    compute_s = np.asarray(compute_s, dtype=float)
    lost_per_failure_s = restart_s + (interval_s + write_s) / 2.0
    progress = 1.0 - lost_per_failure_s / mtbf_s
    with np.errstate(divide="ignore", invalid="ignore"):
        wall = compute_s * (1.0 + write_s / interval_s) / progress
    return np.where(progress > 0, wall, np.inf)


@lru_cache(maxsize=1)
def reliability_defaults() -> dict:
    return json.loads((DATA_DIR / "reliability.json").read_text())


@dataclass(frozen=True)
class Reliability:
    """The failure and checkpoint inputs of one scenario, resolved once (layout-independent)."""
    mtbf_gpu_hours: float
    mtbf_source: str
    storage_write_bytes_per_s: float
    storage_source: str
    checkpoint_bytes: float
    checkpoint_write_s: float
    write_source: str
    restart_s: float
    restart_source: str
    interval_s: float | None        # fixed by the user; None = Young's optimum
    n_gpus: int
    checkpoint_contents: str         # what checkpoint_bytes counts, in words

    @property
    def job_mtbf_s(self) -> float:
        return job_mtbf_s(self.mtbf_gpu_hours, self.n_gpus)

    @property
    def chosen_interval_s(self) -> float:
        return self.interval_s if self.interval_s is not None else float(young_interval_s(self.checkpoint_write_s, self.job_mtbf_s))


def resolve(sc, shape) -> Reliability:
    """The scenario's reliability block where given, the Llama 3 defaults (data/reliability.json) otherwise."""
    d = reliability_defaults()
    r = sc.reliability
    n = sc.cluster.n_gpus
    given = lambda name: r is not None and getattr(r, name) is not None
    if given("mtbf_gpu_hours"):
        mtbf, mtbf_src = r.mtbf_gpu_hours, "given in reliability.mtbf_gpu_hours"
    else:
        i = d["interruptions"]
        mtbf = i["days"] * 24.0 * i["gpus"] / i["count"]          # GPU-hours observed per interruption
        mtbf_src = f"{i['days']} days x {i['gpus']} GPUs / {i['count']} interruptions: {i['source']['document']} ({i['source']['url']})"
    if given("storage_write_gb_per_s"):
        bw, bw_src = r.storage_write_gb_per_s * 1e9, "given in reliability.storage_write_gb_per_s"
    else:
        s = d["storage_write"]
        bw = s["cluster_bytes_per_s"] / s["gpus"] * n
        bw_src = (f"{s['cluster_bytes_per_s'] / 1e12:g} TB/s for {s['gpus']} GPUs, scaled to {n} GPUs: "
                  f"{s['source']['document']} ({s['source']['url']})")
    size = checkpoint_bytes(shape, sc.training)
    if given("checkpoint_write_s"):
        write, write_src = r.checkpoint_write_s, "given in reliability.checkpoint_write_s"
    else:
        write, write_src = size / bw, "checkpoint size / storage write bandwidth"
    if given("restart_s"):
        restart, restart_src = r.restart_s, "given in reliability.restart_s"
    else:
        restart, restart_src = d["restart_s"]["value"], d["restart_s"]["note"]
    return Reliability(mtbf_gpu_hours=mtbf, mtbf_source=mtbf_src, storage_write_bytes_per_s=bw, storage_source=bw_src,
                       checkpoint_bytes=size, checkpoint_write_s=write, write_source=write_src, restart_s=restart,
                       restart_source=restart_src, interval_s=r.checkpoint_interval_s if given("checkpoint_interval_s") else None,
                       n_gpus=n, checkpoint_contents=checkpoint_contents(sc.training))


def run_time(rel: Reliability, compute_s) -> dict[str, np.ndarray]:
    """Wall time, goodput and checkpoint interval for the compute times of many layouts."""
    compute_s = np.asarray(compute_s, dtype=float)
    interval = rel.chosen_interval_s
    wall = wall_time_s(compute_s, rel.checkpoint_write_s, interval, rel.job_mtbf_s, rel.restart_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        goodput = np.where(np.isfinite(wall), compute_s / wall, 0.0)
    return {"wall_s": wall, "goodput": goodput, "checkpoint_interval_s": np.full_like(compute_s, interval)}


def detail(rel: Reliability, compute_s: float | None, wall_s: float) -> dict:
    """The reliability block of an estimate (compute_s None: a layout that does not fit, no run figures)."""
    finite = compute_s is not None and bool(np.isfinite(wall_s))
    return {
        "mtbf_gpu_hours": rel.mtbf_gpu_hours, "mtbf_source": rel.mtbf_source,
        "job_mtbf_hours": rel.job_mtbf_s / 3600.0,
        "checkpoint_gib": rel.checkpoint_bytes / GIB,
        "checkpoint_contents": rel.checkpoint_contents,
        "storage_write_gb_per_s": rel.storage_write_bytes_per_s / 1e9, "storage_source": rel.storage_source,
        "checkpoint_write_s": rel.checkpoint_write_s, "checkpoint_write_source": rel.write_source,
        "checkpoint_interval_s": rel.chosen_interval_s,
        "checkpoint_interval_source": "given in reliability.checkpoint_interval_s" if rel.interval_s is not None
        else "Young 1974: sqrt(2 x checkpoint write time x job MTBF)",
        "restart_s": rel.restart_s, "restart_source": rel.restart_source,
        "expected_failures": wall_s / rel.job_mtbf_s if finite else None,
        "compute_days": None if compute_s is None else compute_s / 86400.0,
        "wall_days": wall_s / 86400.0 if finite else None,
        "goodput": compute_s / wall_s if finite else None if compute_s is None else 0.0,
        "problem": None if finite or compute_s is None else (
            f"failures every {rel.job_mtbf_s / 60:.1f} min on average arrive faster than a restart "
            f"({rel.restart_s:.0f} s) plus half a checkpoint interval can recover; the run would not finish. "
            "Use fewer GPUs, faster storage (reliability.storage_write_gb_per_s) or a shorter restart"),
    }
