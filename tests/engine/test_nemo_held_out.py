"""NeMo's rows the engine was not fitted on (tests/data/nemo-held-out.json), each predicted at its
published layout like the calibration rows (tests/engine/published_runs.nemo_25_11), and the MoE all-to-all overlap
checked on the calibration run whose recipe uses it.

- MXFP8 on Blackwell: the FP8-MX variants of the dense runs, predicted at the stack's FP8 level on each accelerator
  (fitted on the FP8-CS rows), must land within the issue's 10%.
- MoE with one or two experts per GPU on Blackwell (earlier containers' Mixtral 8x7B and Llama 4 Scout rows) within 5%.
- The Qwen3-235B-A22B run on 256 H100 (published 1,575 tokens/s per GPU) overlaps its all-to-all across micro-batches
  (Megatron-Bridge's H100 preset: moe_a2a_overlap=True); priced exposed, no level reaches it (27% slow before the
  overlap was modelled), with the overlap it is within 10%.
The MoE rows on Blackwell are reported (docs/validation.md), not asserted: their recipes' CUDA graphs and HybridEP
dispatcher are not modelled."""
import json
import statistics

import pytest

from engine.inputs import parse_scenario
from tests.conftest import DATA
from tests.engine import published_runs
from tests.engine.published_runs import nemo_25_11

HELD_OUT = json.loads((DATA / "nemo-held-out.json").read_text())


def held_out_runs(models=None) -> list[published_runs.Run]:
    """The held-out rows as published_runs.Run, through the calibration rows' own builder."""
    cols = HELD_OUT["columns"]
    rows = [r for r in HELD_OUT["rows"] if models is None or r[2] in models]
    cases = {**published_runs.CASES["nemo_25_11_cases"], "columns": cols, "rows": rows}
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(published_runs.CASES, "nemo_25_11_cases", cases)
        mp.setitem(published_runs.NEMO_MODELS, "DeepSeekV3", "deepseek-v3")
        mp.setitem(published_runs.NEMO_MODELS, "Mixtral_8x7B", "mixtral-8x7b")
        mp.setitem(published_runs.NEMO_MODELS, "LLAMA4_Scout", "llama4-scout")
        mp.setitem(published_runs.NEMO_PRECISIONS, "FP8-MX", "mxfp8")
        return nemo_25_11()


def ratio(run) -> float:
    return run.figure(run.predict()) / run.published


def test_mxfp8_on_blackwell_within_ten_percent_of_the_held_out_runs():
    runs = held_out_runs({"LLAMA3_8B", "LLAMA3.1_405B"})
    ratios = {r.name: ratio(r) for r in runs}
    assert len(ratios) == 4                                      # 8B on GB300, GB200, B200; 405B on 128 B200
    assert all(abs(x - 1) < 0.10 for x in ratios.values()), ratios
    assert statistics.median(abs(x - 1) for x in ratios.values()) < 0.05


def test_moe_with_few_experts_per_gpu_on_blackwell_within_five_percent():
    # Mixtral 8x7B (8 experts, ep8: one per GPU) on 64 B200 and GB200, Llama 4 Scout (16 experts, ep16) on 64 GB200:
    # published 15,457, 19,275 and 13,783 tokens/s per GPU; the per-expert host cost hardly counts with one expert
    ratios = {r.name: ratio(r) for r in held_out_runs({"Mixtral_8x7B", "LLAMA4_Scout"})}
    assert len(ratios) == 3 and all(abs(x - 1) < 0.05 for x in ratios.values()), ratios


def test_the_all_to_all_overlap_explains_qwen3_235b_on_h100():
    run = next(r for r in nemo_25_11() if r.name == "H100 Qwen3_235B_a22B FP8-CS 256")
    assert all(lay["moe_a2a_overlap"] for lay in run.layouts)     # its recipe's setting
    overlapped = run.predict()
    exposed = published_runs.Run(**{**vars(run), "layouts": [{**lay, "moe_a2a_overlap": False}
                                                              for lay in run.layouts]}).predict()
    assert abs(run.figure(overlapped) / run.published - 1) < 0.10
    assert run.figure(exposed) / run.published < 0.80             # exposed, the published 1,575 tokens/s is out of reach
    assert overlapped.time_breakdown_s["ep_comm"] < 0.5 * exposed.time_breakdown_s["ep_comm"]


def test_held_out_moe_runs_get_the_widest_band_and_dense_ones_their_measured_band_holds_them():
    # NeMo 25.11's MoE runs all come from one source, so no MoE regime's error was measured with its source left out:
    # each MoE row gets the widest band and says so; the dense rows' measured bands contain their published time
    for run in held_out_runs():
        est = run.predict()
        if est is None:
            continue
        published_over_predicted = run.figure(est) / run.published       # = published time / predicted time
        band = est.time_range
        if parse_scenario(run.scenario).arch.is_moe:
            assert band.level == "widest" and band.support in ("no MoE run", "uncalibrated"), run.name
        else:
            assert band.support == "measured" and band.low <= published_over_predicted <= band.high, run.name
