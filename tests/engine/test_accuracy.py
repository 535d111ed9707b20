"""Predicted vs published throughput on the public calibration set, and the search's best answers against what tuned
runs achieved. Each test prints its table (run with -s to see it; docs/validation.md shows the same figures).

- Megatron-LM Table 1 (Narayanan et al. 2021): 10 runs on up to 3,072 A100, published layouts.
- Megatron-LM's H100 weak-scaling table (2024): 9 runs on 48-6,144 H100, published layouts.
- Search realism: for the same 9 jobs (model, GPUs, sequence, batch fixed, layout free) the search's best layout is
  predicted within 15% of the tuned run's published throughput.
  The same for NVIDIA's NeMo 25.11 recipes on H100, B200, GB200 and GB300 (15 jobs): within 15% except the two
  small-expert MoE runs on H100, whose known over-rating is held in a stated band.
- NeMo 25.11 (Megatron-Core, FP8 current scaling) on H100, B200, GB200 and GB300 and TorchTitan (PyTorch FSDP2, Dec
  2024) on H100: tokens/s per GPU with the published layouts. The tolerances are what leaving one run out of each
  level's fit supports (scripts/calibrate_sustained.py: NeMo dense median 3.8%, worst 13.7%; TorchTitan compiled
  median 7.4%, worst 18.4%), not the in-sample errors.
One set of physics for every run; the only constants fitted per stack, accelerator and precision class are the
sustained levels of data/frameworks.json (scripts/calibrate_sustained.py), nothing per run.
"""
import statistics

import pytest

from engine.inputs import parse_scenario
from tests.engine.published_runs import (CASES, h100_weak_scaling, megatron_table1, nemo_25_11, public_case_predictions,
                                         torchtitan_2024_12)


def _table(runs, predictions, capsys, title):
    errors, lines = [], [title, f"{'run':>8} {'predicted':>10} {'published':>10} {'error':>8}  layout"]
    for run, est in zip(runs, predictions):
        pred = run.figure(est)
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


def _named(runs):
    return {r.name: r for r in runs}


def test_nemo_dense_runs_on_four_nvidia_generations(capsys):
    runs = [r for r in nemo_25_11() if not parse_scenario(r.scenario).arch.is_moe]
    errors = _table(runs, [r.predict() for r in runs], capsys, "NeMo 25.11, tokens/s per GPU, dense FP8 runs")
    assert statistics.median(abs(e) for e in errors) <= 0.10
    assert max(abs(e) for e in errors) <= 0.20


# Small-expert MoE on H100, where the search's layout (micro-batch 8, Megatron-FSDP, full recompute) amortises the
# fitted per-expert host cost over four times the tokens of NVIDIA's recipe (micro-batch 1-2, pp with vp): rated
# 1.29-1.55x the published run (docs/validation.md, "Search realism: NeMo 25.11"), shown, not asserted
SMALL_EXPERTS_ON_H100 = ("H100 Qwen3_30B_a3B FP8-CS 16", "H100 Qwen3_235B_a22B FP8-CS 256")


def test_search_best_layout_matches_nvidia_tuned_runs(capsys):
    # NVIDIA's tuned recipes on four generations, model, GPUs, sequence and batch fixed, layout free: the search's best
    # is within 15% of what the tuned run published (the weak-scaling check's bound), never far above it
    runs = nemo_25_11()
    best = [r.search_best() for r in runs]
    errors = _table(runs, best, capsys, "Search realism: the search's best layout for each NeMo 25.11 job")
    for run, est, error in zip(runs, best, errors):
        assert est.fits and est.mfu < 0.75
        if run.name in SMALL_EXPERTS_ON_H100:
            assert 1.15 < error + 1 < 1.7          # the known over-rating; a change that moves it updates the docs
        else:
            assert abs(error) <= 0.15, run.name


@pytest.mark.parametrize("name, published, tolerance", [
    ("GB300 LLAMA3_70B FP8-CS 64", 4520, 0.15),       # leave-one-out +11.4%
    ("GB200 LLAMA3.1_405B FP8-CS 256", 813, 0.10),    # leave-one-out +2.0%
    ("H100 LLAMA3_8B FP8-CS 8", 14451, 0.15),         # leave-one-out -9.6%
])
def test_published_nemo_figures(name, published, tolerance):
    run = _named(nemo_25_11())[name]
    assert run.published == published                                     # the table's tokens/s per GPU
    assert abs(run.figure(run.predict()) / published - 1) <= tolerance


def test_torchtitan_runs_on_h100(capsys):
    runs = torchtitan_2024_12()               # the compiled runs fit the level; the two eager ones are predicted
    errors = _table(runs, [r.predict() for r in runs], capsys, "TorchTitan Dec 2024, tokens/s per GPU")
    assert statistics.median(abs(e) for e in errors) <= 0.10
    assert max(abs(e) for e in errors) <= 0.20
    assert sum(not r.fitted for r in runs) == 2


def test_search_on_fsdp2_beats_torchtitans_demonstration_layouts_but_not_nvidias_tuned_stack(capsys):
    # TorchTitan's tables demonstrate its parallelisms (405B: 8 pipeline stages, full recompute); the search's FSDP2
    # layouts are faster, within 15% for the 8B jobs (eager and compiled), and never above what NeMo's tuned
    # Megatron-Core run of 405B publishes per H100 (292 tokens/s on 1,024), which FSDP2's lower fitted level must
    # stay under
    runs = torchtitan_2024_12()
    best = [r.search_best() for r in runs]
    errors = _table(runs, best, capsys, "Search realism: the search's best FSDP2 layout for each TorchTitan job")
    for run, est, error in zip(runs, best, errors):
        assert est.fits and est.framework["id"] == "pytorch_fsdp2"
        assert est.layout.zero_stage in (0, 3)                     # TorchTitan has no ZeRO-1/2
        if "-8b-" in run.name:
            assert abs(error) <= 0.15, run.name
        if "-405b-" in run.name:
            assert run.figure(est) < _named(nemo_25_11())["H100 LLAMA3.1_405B FP8-CS 1024"].published == 292


def test_torchtitan_8b_fsdp_and_its_fp8_speed_up():
    runs = _named(torchtitan_2024_12())
    eager, compiled, fp8 = (runs[n] for n in ("tt24-t1-8b-8gpu-fsdp", "tt24-t1-8b-8gpu-fsdp_compile",
                                             "tt24-t1-8b-8gpu-fsdp_compile_fp8"))
    assert (eager.published, compiled.published, fp8.published) == (5762, 6667, 8532)
    assert abs(compiled.figure(compiled.predict()) / 6667 - 1) <= 0.10
    # eager (no torch.compile), predicted from its op-by-op element-wise traffic and never fitted on: before that
    # traffic was counted the engine rated it at the compiled speed, 16% too fast
    assert not eager.fitted and compiled.fitted
    assert abs(eager.figure(eager.predict()) / 5762 - 1) <= 0.05
    # the measured compile speed-up, 6667 / 5762 = 1.157x
    assert compiled.figure(compiled.predict()) / eager.figure(eager.predict()) == pytest.approx(6667 / 5762, abs=0.03)
    # float8 (torchao, tensorwise) over bf16: measured 1.28x; before the stack was an input the engine said 1.39x
    speed_up = fp8.figure(fp8.predict()) / compiled.figure(compiled.predict())
    assert 1.15 <= speed_up <= 1.35


def test_async_tp_is_credited_as_measured():
    runs = _named(torchtitan_2024_12())
    off, on = runs["tt24-t4-70b-256gpu-2d"], runs["tt24-t4-70b-256gpu-2d_asynctp"]
    gain = on.figure(on.predict()) / off.figure(off.predict())
    assert abs(gain - 876 / 829) < 0.02                                    # measured 1.057x (before: 1.28x credited)


def test_every_public_case_is_predicted_for_the_ranges():
    rows = public_case_predictions()
    expected = sum(len(CASES[k]["rows"]) for k in ("throughput_cases", "h100_weak_scaling_cases", "nemo_25_11_cases",
                                                   "torchtitan_2024_12_cases"))
    assert len(rows) == expected == 52
    for r in rows:
        assert r["ratio"] > 0 and r["framework"] in ("megatron_core", "pytorch_fsdp2") and r["calibrated"]
        assert abs(r["measured_step_s"] / r["predicted_step_s"] - r["ratio"]) < 1e-9


def test_a_gb300_against_h100_comparison_is_not_skewed():
    # the issue measured GB300-vs-H100 skewed by about 20% against the newer system; published 37,556 / 14,451 = 2.60x
    runs = _named(nemo_25_11())
    gb300, h100 = runs["GB300 LLAMA3_8B FP8-CS 8"], runs["H100 LLAMA3_8B FP8-CS 8"]
    predicted = gb300.figure(gb300.predict()) / h100.figure(h100.predict())
    assert abs(predicted / (37556 / 14451) - 1) <= 0.10        # leave-one-out errors -4.7% and -9.6%
