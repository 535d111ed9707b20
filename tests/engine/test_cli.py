"""python -m engine: the stable command-line contract."""
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.engine.helpers import scenario

KEYS = {"memory_gib", "fits", "step_time_s", "tokens_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu",
        "mfu", "hfu", "time_breakdown_s", "train_days", "gpu_hours", "cost_usd", "energy_mwh", "co2_t", "goodput",
        "wall_days"}


def run(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=60)


def test_estimate_prints_contract(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(scenario(**{"layout.zero_stage": 3})))
    out = run("estimate", str(f))
    assert out.returncode == 0, out.stderr
    est = json.loads(out.stdout)
    assert KEYS <= set(est)
    assert set(est["memory_gib"]) == {"weights", "gradients", "optimizer_states", "activations", "other", "total"}
    # GPU-hours are GPUs x hours of the run: its steps plus Megatron-LM's default evaluation (100 forward-only steps,
    # a third of a training step each, every 1,000 steps); tokens/s and step time agree with the batch
    steps_hours = 8 * 1e12 / est["tokens_per_s"] / 3600
    assert est["gpu_hours"] == __import__("pytest").approx(steps_hours * (1 + 100 / 1000 / 3))
    assert est["tokens_per_s"] * est["step_time_s"] == __import__("pytest").approx(256 * 4096)


def test_bad_input_exits_2_with_message_on_stderr(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(scenario(**{"layout.tp": 3})))
    out = run("estimate", str(f))
    assert out.returncode == 2 and out.stdout == ""
    assert "layout.tp" in out.stderr and "Traceback" not in out.stderr


def test_malformed_and_missing_files(tmp_path):
    f = tmp_path / "x.json"
    f.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00garbage")
    out = run("estimate", str(f))
    assert out.returncode == 2 and "not valid JSON" in out.stderr
    out = run("estimate", str(tmp_path / "missing.json"))
    assert out.returncode == 2 and "no such file" in out.stderr
    out = run("estimate", "-", stdin="[1, 2, 3]")
    assert out.returncode == 2 and "JSON object" in out.stderr


def test_catalog_lists_ids_and_presets():
    out = run("catalog")
    cat = json.loads(out.stdout)
    assert "H100-SXM5-80GB" in {a["id"] for a in cat["accelerators"]}
    assert "deepseek-v3" in {p["id"] for p in cat["presets"]}


def test_catalog_gives_every_accelerator_its_sources():
    cat = json.loads(run("catalog").stdout)
    for acc in cat["accelerators"]:
        assert acc["sources"] and all("http" in s for s in acc["sources"]), acc["id"]


def test_an_announced_accelerator_is_said_in_the_printed_warnings_and_catalog(tmp_path):
    f = tmp_path / "rubin.json"
    f.write_text(json.dumps(scenario(**{"cluster.accelerator": "VR200", "cluster.n_gpus": 72, "layout.dp": 72,
                                        "training.global_batch_size": 288, "layout.zero_stage": 1})))
    out = run("estimate", str(f))
    assert out.returncode == 0, out.stderr
    assert any("no shipping measurement" in w for w in json.loads(out.stdout)["warnings"])
    status = {a["id"]: a["status"] for a in json.loads(run("catalog").stdout)["accelerators"]}
    assert status["VR200"] == "announced" and status["H100-SXM5-80GB"] == "shipping"


def test_import_hf_prints_the_model_block_and_counts():
    out = run("import-hf", "tests/data/hf_configs/qwen3-30b-a3b.json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert set(got) == {"model", "params_total", "params_active"}
    assert (got["model"]["n_experts"], got["model"]["experts_per_token"], got["model"]["head_dim"]) == (128, 8, 128)
    assert got["params_total"] / 1e9 == pytest.approx(30.5, rel=0.01)      # Qwen3-30B-A3B model card


def test_import_hf_refuses_with_the_key_and_exit_2():
    out = run("import-hf", "-", stdin='{"model_type": "qwen3", "hidden_size": 4096}')
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "num_attention_heads" in out.stderr and "Qwen3" in out.stderr
    out = run("import-hf", "no/such/config.json")
    assert out.returncode == 2 and "no such file" in out.stderr


def test_a_deeply_nested_scenario_file_is_refused_with_a_message(tmp_path):
    f = tmp_path / "deep.json"
    f.write_text("[" * 5000 + "]" * 5000)
    out = run("estimate", str(f))
    assert out.returncode == 2 and "nested more than 32 levels" in out.stderr and "Traceback" not in out.stderr


def test_a_layout_that_does_not_fit_gets_no_days_or_money_and_names_one_that_fits(tmp_path):
    # Llama 3.1 405B on 64 H100 with tp8 dp8: its 16-bit weights alone, split 8 ways, are 2 x 405.9e9 / 8 bytes =
    # 94.5 GiB per GPU, over the H100's 80 GB
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": {"preset": "llama3.1-405b"},
                             "training": {"seq_len": 8192, "global_batch_size": 2048, "total_tokens": 15e12},
                             "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 64},
                             "layout": {"tp": 8, "dp": 8, "micro_batch_size": 1, "zero_stage": 1}}))
    out = run("estimate", str(f))
    assert out.returncode == 0, out.stderr
    est = json.loads(out.stdout)
    assert est["memory_gib"]["weights"] == pytest.approx(2 * 405.9e9 / 8 / 2**30, rel=0.01)
    assert est["fits"] is False and "does not fit" in est["problem"]
    assert all(est[k] is None for k in ("train_days", "wall_days", "gpu_hours", "cost_usd", "energy_mwh", "co2_t"))
    assert est["cost"]["cost_usd"] is None and est["energy"]["energy_mwh"] is None
    near = est["nearest_fit"]
    again = json.loads(f.read_text())
    again["cluster"]["n_gpus"], again["layout"] = near["n_gpus"], {k: v for k, v in near["layout"].items() if v is not None}
    f.write_text(json.dumps(again))
    fitting = json.loads(run("estimate", str(f)).stdout)
    assert fitting["fits"] and fitting["wall_days"] > 0
