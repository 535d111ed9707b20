"""Predicted vs published throughput on the public calibration set, and the search's best answers against what tuned
runs achieved. Each test prints its table (run with -s to see it; docs/validation.md shows the same figures).

- Megatron-LM Table 1 (Narayanan et al. 2021): 10 runs on up to 3,072 A100, published layouts.
- Megatron-LM's H100 weak-scaling table (2024): 9 runs on 48-6,144 H100, published layouts.
- Search realism: for the same 9 jobs (model, GPUs, sequence, batch fixed, layout free) the search's best layout is
  predicted within 15% of the tuned run's published throughput.
One set of physics for every run; the only per-accelerator constants are the two sustained levels these tables fit
(scripts/calibrate_sustained.py), nothing per run.
"""
import statistics

import pytest

from tests.engine.published_runs import h100_weak_scaling, megatron_table1


def _table(runs, predictions, capsys, title):
    errors, lines = [], [title, f"{'run':>8} {'predicted':>10} {'published':>10} {'error':>8}  layout"]
    for run, est in zip(runs, predictions):
        pred = getattr(est, run.metric)
        errors.append(pred / run.published - 1)
        lay = est.layout.model_dump()
        lines.append(f"{run.name:>8} {pred:10.1f} {run.published:10.1f} {errors[-1]:+8.1%}  tp{lay['tp']} pp{lay['pp']} "
                     f"dp{lay['dp']} cp{lay['cp']} v{lay['virtual_stages']} mbs{lay['micro_batch_size']} "
                     f"zero{lay['zero_stage']} {lay['recompute']}")
    lines.append(f"median |error| {statistics.median(abs(e) for e in errors):.1%}, worst {max(abs(e) for e in errors):.1%}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    return errors


def test_megatron_table1_published_layouts(capsys):
    runs = megatron_table1()
    errors = _table(runs, [r.predict() for r in runs], capsys, "Megatron-LM Table 1, hardware TFLOP/s per A100")
    assert statistics.median(abs(e) for e in errors) <= 0.10
    assert max(abs(e) for e in errors) <= 0.20


def test_h100_weak_scaling_published_layouts(capsys):
    runs = h100_weak_scaling()
    errors = _table(runs, [r.predict() for r in runs], capsys,
                    "Megatron-LM H100 weak scaling, model TFLOP/s per GPU (2024 count), published layouts")
    assert statistics.median(abs(e) for e in errors) <= 0.10
    assert max(abs(e) for e in errors) <= 0.20


def test_search_best_layout_matches_tuned_runs(capsys):
    runs = h100_weak_scaling()
    best = [r.search_best() for r in runs]
    errors = _table(runs, best, capsys, "Search realism: the search's best layout for each weak-scaling job")
    assert max(abs(e) for e in errors) <= 0.15
    for est in best:
        assert est.fits and est.mfu < 0.75


@pytest.mark.parametrize("run", megatron_table1()[:1] + h100_weak_scaling()[:1], ids=lambda r: f"{r.accelerator}-{r.name}")
def test_search_never_worse_than_the_published_layout(run):
    # the search covers the published layout (same rules), so its best is at least as fast
    assert run.search_best().step_time_s <= run.predict().step_time_s * (1 + 1e-9)
