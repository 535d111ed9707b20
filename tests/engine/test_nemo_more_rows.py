"""NeMo performance-summary rows public-validation-cases.json does not carry (tests/data/nemo-more-rows.json), each
predicted at its published layout like the calibration rows (tests/engine/published_runs.nemo_25_11), and the MoE
all-to-all overlap checked on the calibration run whose recipe uses it.

- MXFP8 on Blackwell (held out): the FP8-MX variants of the dense runs, predicted at the stack's FP8 level on each
  accelerator (fitted on the FP8-CS rows), must land within the issue's 10%.
- The 25.11 table's MoE rows on Blackwell at a level fitted on dense runs (FP8-MX on B200, GB200, GB300) fit
  Megatron-Core's per-expert cost on NeMo's Blackwell presets (scripts/calibrate_sustained.py, 56.4 us where the H100
  presets cost 188.7 us): within 20% each (-19.8% to +11.2%; leave one out -22.3% to +19.1%, docs/validation.md).
- MoE with one or two experts per GPU on Blackwell (held out: earlier containers' Mixtral 8x7B and Llama 4 Scout
  rows) within 10%.
- The Qwen3-235B-A22B run on 256 H100 (published 1,575 tokens/s per GPU) overlaps its all-to-all across micro-batches
  (Megatron-Bridge's H100 preset: moe_a2a_overlap=True); priced exposed, no level reaches it (27% slow before the
  overlap was modelled), with the overlap it is within 10%.
The BF16 MoE rows on Blackwell (GPT-OSS-120B, Qwen3-235B-A22B) are reported (docs/validation.md), not asserted: B200
and GB300 have no 16-bit level, GB200's is fitted on DeepSeek-V3 alone."""
import statistics

import pytest

from engine import frameworks
from engine.inputs import parse_scenario
from tests.engine import published_runs
from tests.engine.published_runs import nemo_25_11, nemo_more_rows

def rows_of(models=None) -> list[published_runs.Run]:
    """The rows of models (None: all), predicted like the calibration rows."""
    return nemo_more_rows(lambda row: models is None or row["model"] in models)


def ratio(run) -> float:
    return run.figure(run.predict()) / run.published


def test_mxfp8_on_blackwell_within_ten_percent_of_the_held_out_runs():
    runs = rows_of({"LLAMA3_8B", "LLAMA3.1_405B"})
    ratios = {r.name: ratio(r) for r in runs}
    assert len(ratios) == 4                                      # 8B on GB300, GB200, B200; 405B on 128 B200
    assert all(abs(x - 1) < 0.10 for x in ratios.values()), ratios
    assert statistics.median(abs(x - 1) for x in ratios.values()) < 0.05


def test_the_blackwell_per_expert_cost_holds_the_rows_it_was_fitted_on():
    # NeMo 25.11's MoE rows on Blackwell with a dense-fitted level: the small-expert ones were 0.43-0.53 of published
    # at the H100 presets' 188.7 us per expert (Qwen3-30B-A3B 16 experts of width 768 per GPU)
    fitted = nemo_more_rows(lambda row: row["container"] == "25.11" and row["precision"] == "FP8-MX"
                            and row["model"] not in ("LLAMA3_8B", "LLAMA3.1_405B"))
    ratios = {r.name: ratio(r) for r in fitted if r.predict() is not None}
    assert len(ratios) == 6                            # the GB300 DeepSeek-V3 row has no split the rules allow
    assert all(abs(x - 1) < 0.20 for x in ratios.values()), ratios
    assert statistics.median(abs(x - 1) for x in ratios.values()) < 0.10
    stack = frameworks.stack("megatron_core")
    assert stack.moe_expert_fixed_us("Blackwell") == stack.moe_expert_fixed_us("Blackwell Ultra") < 100
    assert stack.moe_expert_fixed_us("Hopper") == stack.moe_expert_gemm_fixed_us > 150
    assert all(name in stack.moe_expert_by_architecture_note for name in ratios)


def test_moe_with_few_experts_per_gpu_on_blackwell_within_ten_percent():
    # Mixtral 8x7B (8 experts, ep8: one per GPU) on 64 B200 and GB200, Llama 4 Scout (16 experts, ep16) on 64 GB200:
    # published 15,457, 19,275 and 13,783 tokens/s per GPU, containers 25.02-25.07 (held out); the per-expert cost
    # hardly counts with one expert (0.96-1.03 at the H100 presets' cost, 1.03-1.08 at the Blackwell presets')
    ratios = {r.name: ratio(r) for r in rows_of({"Mixtral_8x7B", "LLAMA4_Scout"})}
    assert len(ratios) == 3 and all(abs(x - 1) < 0.10 for x in ratios.values()), ratios


def test_the_all_to_all_overlap_explains_qwen3_235b_on_h100():
    run = next(r for r in nemo_25_11() if r.name == "H100 Qwen3_235B_a22B FP8-CS 256")
    assert all(lay["moe_a2a_overlap"] for lay in run.layouts)     # its recipe's setting
    overlapped = run.predict()
    exposed = published_runs.Run(**{**vars(run), "layouts": [{**lay, "moe_a2a_overlap": False}
                                                              for lay in run.layouts]}).predict()
    assert abs(run.figure(overlapped) / run.published - 1) < 0.10
    assert run.figure(exposed) / run.published < 0.80             # exposed, the published 1,575 tokens/s is out of reach
    assert overlapped.time_breakdown_s["ep_comm"] < 0.5 * exposed.time_breakdown_s["ep_comm"]


def test_blackwell_moe_runs_get_the_widest_band_and_dense_ones_their_measured_band_holds_them():
    # NeMo 25.11's MoE runs all come from one source, so no MoE regime's error was measured with its source left out:
    # each MoE row gets the widest band and says so; the dense rows' measured bands contain their published time
    for run in rows_of():
        est = run.predict()
        if est is None:
            continue
        published_over_predicted = run.figure(est) / run.published       # = published time / predicted time
        band = est.time_range
        if parse_scenario(run.scenario).arch.is_moe:
            assert band.level == "widest" and band.support in ("no MoE run", "uncalibrated"), run.name
        else:
            assert band.support == "measured" and band.low <= published_over_predicted <= band.high, run.name
