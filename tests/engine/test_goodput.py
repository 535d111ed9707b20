"""Goodput: failures, checkpoints and restarts, checked against Young 1974's formula and hand arithmetic."""
import math

import numpy as np
import pytest

from engine.planning.estimate import context, estimate
from engine.economics.goodput import job_mtbf_s, run_time, wall_time_s, young_interval_s
from engine.planning.search import search
from engine.planning.sizing import Target, billed_gpu_hours, meets_deadline
from tests.engine.helpers import FITS, parse


def test_young_interval_by_hand():
    # Young 1974 (Commun. ACM 17(9), doi:10.1145/361147.361115): T_opt = sqrt(2 T_s MTTF)
    # T_s = 5 min, MTTF = 24 h -> sqrt(2 * 5 * 1440) = 120 min
    assert float(young_interval_s(5 * 60, 24 * 3600)) == pytest.approx(120 * 60)
    # T_s = 10 min, MTTF = 24 h -> sqrt(2 * (1/6) * 24) = sqrt(8) h
    assert float(young_interval_s(600, 24 * 3600)) / 3600 == pytest.approx(math.sqrt(8))


def test_job_mtbf_of_many_gpus():
    # a failure every 24 h per GPU on 1024 independent GPUs: one every 24 * 60 / 1024 = 1.40625 minutes
    assert job_mtbf_s(24, 1024) / 60 == pytest.approx(1.40625)


def test_llama3_default_failure_rate():
    est = estimate(parse(**{"model.preset": "llama3.1-405b", "cluster.n_gpus": 16384,
                            "training.global_batch_size": 2048, "training.seq_len": 8192,
                            "layout.tp": 8, "layout.pp": 2, "layout.dp": 1024, "layout.zero_stage": 3,
                            "layout.sequence_parallel": True, "layout.recompute": "selective"}))
    r = est.reliability
    # Llama 3: 466 interruptions in 54 days on 16,384 GPUs -> one every 54 * 24 / 466 = 2.78 h for the job
    assert r["mtbf_gpu_hours"] == pytest.approx(54 * 24 * 16384 / 466)
    assert r["job_mtbf_hours"] == pytest.approx(54 * 24 / 466)
    # checkpoint: 405.85B parameters (published) x (2 + 12) bytes, written at Llama 3's 2 TB/s
    assert r["checkpoint_gib"] * 2**30 == pytest.approx(405.85e9 * 14, rel=0.01)
    assert r["checkpoint_write_s"] == pytest.approx(r["checkpoint_gib"] * 2**30 / 2e12)
    assert r["checkpoint_interval_s"] == pytest.approx(math.sqrt(2 * r["checkpoint_write_s"] * r["job_mtbf_hours"] * 3600))
    assert 0.9 < est.goodput < 1.0                      # Llama 3 reports >90% effective training time
    assert est.wall_days == pytest.approx(est.train_days / est.goodput)


def test_wall_time_hand_computed():
    # 100 h of compute, 0.1 h checkpoints, 10 h job MTBF, 0.1 h restart, interval sqrt(2 * 0.1 * 10) = 1.414 h:
    # W = C (1 + d/tau) / (1 - (R + (tau + d)/2) / M)
    tau = math.sqrt(2 * 0.1 * 10)
    expected = 100 * (1 + 0.1 / tau) / (1 - (0.1 + (tau + 0.1) / 2) / 10)
    got = wall_time_s(100 * 3600, 0.1 * 3600, tau * 3600, 10 * 3600, 0.1 * 3600)
    assert float(got) / 3600 == pytest.approx(expected)
    # failures faster than recovery: the run never finishes
    assert np.isinf(wall_time_s(3600.0, 60.0, 600.0, 300.0, 400.0))


def test_more_gpus_lose_more_to_failures():
    g = [estimate(parse(**FITS, **{"cluster.n_gpus": n, "layout.dp": n, "training.global_batch_size": 4096})).goodput
         for n in (8, 512, 4096)]
    assert g[0] > g[1] > g[2]


def test_overrides_and_a_run_that_cannot_finish():
    est = estimate(parse(**FITS, **{"reliability.checkpoint_interval_s": 3600, "reliability.checkpoint_write_s": 60,
                                    "reliability.restart_s": 120, "reliability.mtbf_gpu_hours": 8 * 100}))
    r = est.reliability
    assert r["checkpoint_interval_s"] == 3600 and "given" in r["checkpoint_interval_source"]
    assert r["job_mtbf_hours"] == pytest.approx(100)
    train_s = est.train_days * 86400
    expected = train_s * (1 + 60 / 3600) / (1 - (120 + (3600 + 60) / 2) / (100 * 3600))
    assert est.wall_days * 86400 == pytest.approx(expected)
    doomed = estimate(parse(**FITS, **{"reliability.mtbf_gpu_hours": 0.01, "reliability.restart_s": 600}))
    assert doomed.goodput == 0 and doomed.wall_days is None and doomed.cost_usd is None and doomed.never_finishes
    assert "would not finish" in doomed.reliability["problem"]
    # a run that never finishes meets no deadline and fits no budget: its compute days are no stand-in
    assert doomed.problem == doomed.reliability["problem"] and doomed.train_days < 1000
    assert not meets_deadline(doomed, Target(deadline_days=1000)) and billed_gpu_hours(doomed) == float("inf")
    # the search ranks no layout of a run that never finishes, and says why rather than "nothing fits"
    found = search(parse(**{"layout": None, "reliability.mtbf_gpu_hours": 0.01, "reliability.restart_s": 600}), top=1,
                   pareto_sizes=[], summaries=False)
    assert found.best == [] and found.feasible > 0 and "would not finish" in found.problem and found.never_finishes


def test_run_time_is_vectorised():
    ctx = context(parse())
    out = run_time(ctx.reliability, np.array([1e5, 2e5, 4e5]))
    assert out["wall_s"].shape == (3,) and np.all(np.diff(out["wall_s"]) > 0)
    assert np.allclose(out["goodput"], out["goodput"][0])  # same overhead fraction whatever the length
