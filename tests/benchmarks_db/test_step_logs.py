"""Training step-time logs (benchmarks_db/step_logs.py): the real log excerpts of tests/data/step-logs (sources in
tests/data/README.md) read as each stack prints them, and malformed, huge and hostile input refused with a message that
names what is wrong, nothing stored."""
import json
import math
import os
import statistics

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks_db import step_logs
from benchmarks_db.dispatch import parse_file
from benchmarks_db.ingest import ingest_bytes
from tests.conftest import DATA

LOGS = DATA / "step-logs"
FUZZ = settings(max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", 60)), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# 8 H100 under FSDP2, 8 sequences of 8,192 tokens a step: 8,192 tokens per GPU per step
TT_SCENARIO = {"model": {"preset": "llama3.1-8b"},
               "training": {"seq_len": 8192, "global_batch_size": 8, "total_tokens": 1e9, "framework": "pytorch_fsdp2"},
               "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
               "layout": {"dp": 8, "zero_stage": 3, "recompute": "selective"}}
MEGATRON_SCENARIO = {"model": {"n_layers": 12, "hidden_size": 768, "n_heads": 12, "ffn_hidden_size": 3072,
                               "vocab_size": 50304, "learned_position_embeddings": 1024, "tied_embeddings": True},
                     "training": {"seq_len": 1024, "global_batch_size": 16, "total_tokens": 1e9,
                                  "framework": "megatron_core"},
                     "cluster": {"accelerator": "A100-SXM4-80GB", "n_gpus": 1},
                     "layout": {"micro_batch_size": 16}}


def _text(name: str) -> str:
    return (LOGS / name).read_text()


def test_megatron_log_median_after_warmup():
    text = _text("megatron-gpt2-345m.log")
    assert step_logs.detect(text) == "megatron"
    unit = parse_file("m.log", text, None, MEGATRON_SCENARIO)
    assert unit.errors == [] and len(unit.runs) == 1
    m = unit.runs[0].measurements[0]
    # iteration 10's line averages iterations 1-10 (1147.6 ms, warm-up) and is left out; the nine lines of
    # iterations 20-100 (820.7 ... 904.5 ms) have the median 840.3 ms, by hand from the log
    assert (m.metric, m.unit, m.stat, m.n_samples) == ("step_time", "s", "median", 9)
    assert m.value == pytest.approx(0.8403) and m.value_min == pytest.approx(0.8207) and m.value_max == pytest.approx(0.9045)
    assert m.params["warmup_lines_skipped"] == 1 and m.params["first_step"] == 20 and m.params["last_step"] == 100
    assert unit.runs[0].params["framework"] == "megatron_core" and unit.runs[0].params["log_format"] == "megatron"


def test_torchtitan_tps_gives_the_step_time_its_timestamps_show():
    text = _text("torchtitan-pr3393.log")
    unit = parse_file("t.log", text, None, TT_SCENARIO)
    assert unit.errors == [], unit.errors
    m = unit.runs[0].measurements[0]
    # steps 15-21 (step 14's interval reaches back to step 1: warm-up); median tps 7,309 per GPU ->
    # 8 x 8,192 tokens / (7,309 x 8 GPUs) = 1.1208 s per step
    assert m.value == pytest.approx(8 * 8192 / (7309 * 8), rel=1e-9) and m.n_samples == 7
    # the same figure from the log's own timestamps, one line per step: median spacing 1.121 s
    stamps = [float(line.split(" - ")[0].rsplit(":", 1)[1].replace(",", ".")) for line in text.splitlines()]
    spacing = statistics.median(b - a for a, b in zip(stamps, stamps[1:]))
    assert m.value == pytest.approx(spacing, rel=0.005)


def test_torchtitan_lines_of_every_rank_are_one_step():
    log = step_logs.parse(_text("torchtitan-pr2389.log"), "r.log", "torchtitan", 8192, 1, 1)
    assert log.errors and "2 TorchTitan step line(s)" in log.errors[0]        # steps 4 and 5, not 4 lines


def test_deepspeed_samples_per_second_to_step_time():
    text = _text("deepspeed-timer.log")
    assert step_logs.detect(text) == "deepspeed"
    steady = text + "".join(
        f"[x] [INFO] [timer.py:260:stop] epoch=0/micro_step={4 * s}/global_step={s}, RunningAvgSamplesPerSec=25.0, "
        f"CurrSamplesPerSec={25 + s / 100}, MemAllocated=4.32GB, MaxMemAllocated=38.49GB\n" for s in (20, 30, 40))
    log = step_logs.parse(steady, "d.log", "deepspeed", 4096 * 64, 64, 8)
    assert log.warmup_lines == 1 and [s for s, _ in log.steps] == [20, 30, 40]
    assert log.steps[1][1] == pytest.approx(64 / 25.3)            # global batch / samples per second


# the run of tests/data/step-logs/maxtext-llama2-7b-h100x8.log as its Config param lines give it: Llama 2 7B, 96
# sequences of 2,048 tokens (per_device_batch_size 12 x 8 devices), FSDP over the 8 H100, full remat, dot-product
# attention, MaxText on JAX
MAXTEXT_SCENARIO = {"model": {"preset": "llama2-7b"},
                    "training": {"seq_len": 2048, "global_batch_size": 96, "total_tokens": 1e9,
                                 "framework": "jax_maxtext", "attention": "standard"},
                    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
                    "layout": {"dp": 8, "zero_stage": 3, "micro_batch_size": 12, "recompute": "full"}}


def test_maxtext_lines_are_each_steps_own_seconds():
    text = _text("maxtext-llama2-7b-h100x8.log")
    assert step_logs.detect(text) == "maxtext"
    unit = parse_file("x.log", text, None, MAXTEXT_SCENARIO)
    assert unit.errors == [], unit.errors
    run = unit.runs[0]
    m = run.measurements[0]
    # MaxText counts steps from 0: steps 0-9 are the first ten (compilation, the nsys capture) and are left out;
    # steps 10-29 print 3.800 ... 4.400 s, median (4.016 + 4.019) / 2, by hand from the log
    assert (m.value, m.value_min, m.value_max, m.n_samples) == (pytest.approx(4.0175), 3.8, 4.4, 20)
    assert m.params["warmup_lines_skipped"] == 10 and (m.params["first_step"], m.params["last_step"]) == (11, 30)
    # the log's own throughput says the same: 1,033.20 TFLOPs per device per step over the median TFLOP/s/device
    tflops = [float(line.split("TFLOP/s/device: ")[1].split(",")[0]) for line in text.splitlines()
              if "completed step: " in line and int(line.split("completed step: ")[1].split(",")[0]) >= 10]
    assert m.value == pytest.approx(1033.20 / statistics.median(tflops), rel=0.002)
    assert (run.tool, run.params["log_format"], run.params["framework"]) == ("maxtext", "maxtext", "jax_maxtext")


def test_maxtexts_documented_ten_steps_are_all_warm_up():
    """The ten lines of MaxText's own log guide (steps 0-9: 44.9 s of compilation, then 0.3 s and 5.4-5.7 s) are
    the first ten optimizer steps: refused with the reason, as any stack's log that stops there."""
    log = step_logs.parse(_text("maxtext-docs-v5p.log"), "doc.log", "maxtext", 24 * 4 * 2048, 96, 4)
    assert log.steps == [] and log.warmup_lines == 10
    assert "10 MaxText step line(s), 0 after the first 10 steps" in log.errors[0]


def test_a_maxtext_log_is_stored_with_its_scenario_and_predicted(seeded):
    from benchmarks_db.step_time import predicted_vs_measured
    from engine.inputs import parse_scenario
    from engine.planning.estimate import estimate
    r = ingest_bytes(seeded, "maxtext.log", (LOGS / "maxtext-llama2-7b-h100x8.log").read_bytes(),
                     scenario=MAXTEXT_SCENARIO)
    assert r.ingested, r.errors
    row = predicted_vs_measured(seeded).iloc[0]
    assert row.framework == "jax_maxtext" and row.measured_s == pytest.approx(4.0175)
    assert row.predicted_s == pytest.approx(estimate(parse_scenario(MAXTEXT_SCENARIO)).step_time_s)


def test_refused_without_the_scenario_or_with_a_wrong_one(seeded):
    text = _text("megatron-gpt2-345m.log").encode()
    r = ingest_bytes(seeded, "m.log", text)
    assert not r.ingested and "upload it with the scenario it ran" in r.errors[0]
    bad = {**MEGATRON_SCENARIO, "layout": {"tp": 3}}
    r = ingest_bytes(seeded, "m.log", text, scenario=bad)
    assert not r.ingested and r.errors[0].startswith("m.log: the scenario it ran: layout")
    # a scenario whose GPUs could not run these steps so fast: 405B on one GPU
    r = ingest_bytes(seeded, "m.log", text, scenario={**MEGATRON_SCENARIO, "model": {"preset": "llama3.1-405b"}})
    assert not r.ingested and "is impossible for this scenario" in r.errors[0]
    assert seeded.rows("SELECT count(*) FROM run WHERE suite = 'training_run'")[0][0] == 0


def test_restart_in_one_file_is_refused():
    text = _text("megatron-gpt2-345m.log")
    log = step_logs.parse(text + text, "two.log", "megatron", 16384, 16, 1)
    again = len(text.splitlines()) + 4             # iteration 10 is the 4th line of the second copy
    assert log.errors and f"two.log line {again}: step 10 comes after step 100" in log.errors[0]


LINE = (" [2025-04-13 23:41:20] iteration {step:8d}/    1000 | consumed samples: 320 | elapsed time per iteration (ms): "
        "{ms} | learning rate: 4.0E-05 | global batch size:    16 |")
HOSTILE = st.sampled_from(["'; DROP TABLE run; --", "\x00", "\x1b[31m", "<script>alert(1)</script>", "nan", "inf",
                           "-5", "0", "1e400", "\u202e", "=cmd|' /C calc'!A0", "%s%s%n"])


@FUZZ
@given(good=st.lists(st.floats(100, 5000, allow_nan=False), min_size=3, max_size=20),
       bad_value=HOSTILE, at=st.integers(0, 19))
def test_a_malformed_step_line_is_named_and_nothing_parsed(good, bad_value, at):
    lines = [LINE.format(step=10 * (i + 2), ms=f"{v:.1f}") for i, v in enumerate(good)]
    at = at % len(lines)
    lines[at] = LINE.format(step=10 * (at + 2), ms=bad_value)
    log = step_logs.parse("\n".join(lines), "f.log", "megatron", 16384, 16, 1)
    assert log.steps == [] or log.errors
    assert log.errors, bad_value
    assert f"f.log line {at + 1}:" in log.errors[0]


@FUZZ
@given(values=st.lists(st.floats(1, 1e5, allow_nan=False), min_size=4, max_size=30),
       noise=st.lists(st.text(max_size=200).filter(lambda t: "elapsed" not in t and "\n" not in t and "\r" not in t),
                      max_size=10))
def test_well_formed_lines_give_their_median(values, noise):
    lines = [LINE.format(step=10 * (i + 2), ms=f"{v:.1f}") for i, v in enumerate(values)]
    mixed = [x for i, line in enumerate(lines) for x in ([line] + noise[i:i + 1])]
    log = step_logs.parse("\n".join(mixed), "f.log", "megatron", 16384, 16, 1)
    assert log.errors == []
    # the first line's interval reaches back to step 1: warm-up, whatever its number
    assert log.warmup_lines == 1
    expected = statistics.median(float(f"{v:.1f}") / 1000 for v in values[1:])
    assert statistics.median(log.seconds) == pytest.approx(expected)


@FUZZ
@given(junk=st.binary(max_size=3000))
def test_arbitrary_bytes_never_crash_and_never_half_write(seeded, junk):
    data = _text("megatron-gpt2-345m.log").encode() + junk
    r = ingest_bytes(seeded, "j.log", data, scenario=MEGATRON_SCENARIO, dry_run=True)
    assert r.errors or r.dry_run
    assert all("internal error" not in e for e in r.errors)
    assert seeded.rows("SELECT count(*) FROM run WHERE suite = 'training_run'")[0][0] == 0


def test_huge_file_is_refused_with_its_size(seeded):
    big = ("x" * 100 + "\n") * 700_000            # 70.7 MB, over the 64 MiB upload limit
    r = ingest_bytes(seeded, "big.log", big.encode(), scenario=MEGATRON_SCENARIO)
    assert not r.ingested and "over the 67108864-byte limit" in r.errors[0]
    many = "\n" * 1_000_001 + _text("megatron-gpt2-345m.log")
    log = step_logs.parse(many, "many.log", "megatron", 16384, 16, 1)
    assert log.errors and "more than 1,000,000 lines" in log.errors[0]
    long_line = "elapsed time per iteration (ms): " + "9" * 100_000
    assert step_logs.parse(long_line, "l.log", "megatron", 16384, 16, 1).steps == []


TT_LINE = "[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - \x1b[31mstep: {step}  loss:  3.24405  memory:  9.46GiB(64.99%)  tps: {tps}  tflops: 0.52  mfu: 0.17%\x1b[39m"


@FUZZ
@given(tps=st.lists(st.integers(1, 10**7), min_size=4, max_size=20), bad_value=HOSTILE, at=st.integers(0, 19))
def test_torchtitan_lines_with_colour_codes_and_a_hostile_value(tps, bad_value, at):
    lines = [TT_LINE.format(step=10 + i, tps=f"{t:,}") for i, t in enumerate(tps)]
    log = step_logs.parse("\n".join(lines), "t.log", "torchtitan", 65536, 8, 8)
    assert log.errors == [] and log.warmup_lines == 1
    assert statistics.median(log.seconds) == pytest.approx(statistics.median(65536 / (t * 8) for t in tps[1:]))
    at = at % len(lines)
    lines[at] = TT_LINE.format(step=10 + at, tps=bad_value)
    log = step_logs.parse("\n".join(lines), "t.log", "torchtitan", 65536, 8, 8)
    assert log.errors and f"t.log line {at + 1}:" in log.errors[0]
