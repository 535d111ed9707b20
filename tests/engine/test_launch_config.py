"""The chosen layout as its stack's launch configuration (engine/presentation/launch_config.py), checked against the
published layouts: Megatron-LM's 530B row of Narayanan et al. 2021 Table 1 (tp 8, pp 35 on 2,520 A100) and
TorchTitan's Llama 3.1 405B and 8B rows (benchmarks/llama3_h100_202412_torchtitan.md, in
tests/data/public-validation-cases.json)."""
import json
import subprocess
import sys
import tomllib

import pytest

from engine.inputs import parse_scenario
from engine.presentation.launch_config import default_format, export, for_scenario, megatron_args
from engine.scenario import ScenarioError
from tests.conftest import DATA
from tests.engine.helpers import parse
from tests.engine.published_runs import megatron_table1, torchtitan_2024_12

CASES = json.loads((DATA / "public-validation-cases.json").read_text())


def _flags(args: list[str]) -> dict[str, str | bool]:
    out, i = {}, 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[args[i]] = args[i + 1]
            i += 2
        else:
            out[args[i]] = True
            i += 1
    return out


def test_megatron_530b_table1_row_exports_tp8_pp35():
    params_b, heads, hidden, layers, tp, pp, n, gbs, *_ = CASES["throughput_cases"]["rows"][8]
    assert (params_b, tp, pp, n) == (529.6, 8, 35, 2520)       # the row as published
    run = megatron_table1()[8]
    sc = parse_scenario({**run.scenario, "layout": run.layouts[0]})
    notes = []
    flags = _flags(megatron_args(sc, sc.layout, notes))
    assert flags["--tensor-model-parallel-size"] == "8" and flags["--pipeline-model-parallel-size"] == "35"
    assert (flags["--num-layers"], flags["--hidden-size"], flags["--num-attention-heads"]) == ("105", "20480", "128")
    assert (flags["--global-batch-size"], flags["--seq-length"]) == ("2520", "2048")
    assert flags["--recompute-granularity"] == "full" and flags["--recompute-method"] == "uniform"
    assert 8 * 35 * sc.layout.dp == 2520
    # 2021's Megatron had no flash attention: the export must not switch it on; GPT-3's MLP is 4h, not gated
    assert "--attention-backend" not in flags and "--swiglu" not in flags and flags["--ffn-hidden-size"] == "81920"
    # the file is the default for the Megatron-Core scenario and carries the same arguments
    assert default_format(sc) == "megatron"
    text = export(sc).text
    assert "--pipeline-model-parallel-size 35" in text and "--tensor-model-parallel-size 8" in text


def _torchtitan(case_id: str) -> tuple[dict, dict, list[str]]:
    run = next(r for r in torchtitan_2024_12() if r.name == case_id)
    sc = parse_scenario({**run.scenario, "layout": run.layouts[0]})
    cfg = export(sc)
    assert cfg.format == "torchtitan" and cfg.filename.endswith(".toml")
    case = next(c for c in CASES["torchtitan_2024_12_cases"]["rows"] if c["id"] == case_id)
    return tomllib.loads(cfg.text), case, cfg.notes


def test_torchtitan_405b_3d_row_as_published():
    job, case, _ = _torchtitan("tt24-t5-405b-512gpu-1f1b")
    lay = case["layout"]
    par = job["parallelism"]
    assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"], par["data_parallel_shard_degree"],
            par["context_parallel_degree"]) == (lay["tp"], lay["pp"], lay["fsdp"], lay["cp"]) == (8, 8, 8, 1)
    assert par["data_parallel_replicate_degree"] == 1
    assert par["enable_async_tensor_parallel"] is lay["async_tp"] is True
    assert par["pipeline_parallel_schedule"] == lay["pp_schedule"] == "1F1B"
    assert job["training"]["local_batch_size"] == lay["local_batch_per_dp_rank"] == 32
    assert job["training"]["global_batch_size"] == lay["global_batch"] == 256
    assert job["training"]["seq_len"] == case["model"]["seq_len"] == 8192
    assert job["activation_checkpoint"]["mode"] == lay["recompute"] == "full"
    assert job["model"]["converters"] == ["float8"]
    # 126 layers over 8 stages: 7 split points, each naming the first layer of the next stage
    points = [int(p.removeprefix("layers.")) for p in par["pipeline_parallel_split_points"]]
    assert len(points) == 7 and points == sorted(points) and points[-1] < 126


def test_torchtitan_interleaved_405b_row_places_the_embedding_and_output_chunks():
    job, case, _ = _torchtitan("tt24-t5-405b-512gpu-interleaved1f1b")
    par = job["parallelism"]
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B" and case["layout"]["pp_schedule"] == "Interleaved 1F1B"
    points = [int(p.removeprefix("layers.")) for p in par["pipeline_parallel_split_points"]]
    sizes = [b - a for a, b in zip([0] + points, points + [126])]
    assert len(sizes) == 16 and sum(sizes) == 126
    # rank r holds model chunks r and r + 8; with the split the run's layouts use, the first model chunk (rank 0,
    # beside the embedding) and the last (rank 7, beside the output layer and loss) are the short ones
    run = next(r for r in torchtitan_2024_12() if r.name == "tt24-t5-405b-512gpu-interleaved1f1b")
    lay = run.layouts[0]
    per_rank = [sizes[r] + sizes[r + 8] for r in range(8)]
    assert per_rank[0] == lay["first_stage_layers"] and per_rank[-1] == lay["last_stage_layers"]
    assert sizes[0] <= sizes[8] and sizes[-1] <= sizes[7]


def test_torchtitan_context_parallel_row():
    job, case, _ = _torchtitan("tt24-t6-405b-512gpu-fsdp4-cp2-s65536")
    assert job["parallelism"]["context_parallel_degree"] == case["layout"]["cp"] == 2
    assert job["parallelism"]["data_parallel_shard_degree"] == case["layout"]["fsdp"] == 4
    assert job["training"]["seq_len"] == 65536 and job["training"]["local_batch_size"] == 8


def test_torchtitan_selective_is_per_op():
    job, case, _ = _torchtitan("tt24-t1-8b-8gpu-fsdp")
    assert case["layout"]["recompute"].startswith("selective (per-op SAC")
    assert job["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    assert job["training"]["local_batch_size"] == 16 // 8 == 2
    assert "model" not in job                       # bf16: no float8 converter


def test_what_the_stack_cannot_express_is_a_note_not_a_silent_drop():
    # a Megatron-Core layout with ZeRO-1 written as TorchTitan's config (which has no ZeRO-1: FSDP2 shards all)
    sc = parse(**{"layout.zero_stage": 1})
    cfg = export(sc, "torchtitan")
    assert any("zero_stage 1" in n and "ZeRO-3" in n for n in cfg.notes)
    assert any("the estimate assumed megatron_core" in n for n in cfg.notes)
    assert all(f"# note: {n}" in cfg.text for n in cfg.notes)
    ds = export(parse(**{"layout.tp": 2, "layout.dp": 4, "layout.zero_stage": 2}), "deepspeed")
    doc = json.loads(ds.text)
    # 256 sequences = micro-batch 1 x 4 data-parallel ranks x 64 accumulation steps
    assert (doc["train_batch_size"], doc["train_micro_batch_size_per_gpu"], doc["gradient_accumulation_steps"]) == (256, 1, 64)
    assert doc["zero_optimization"]["stage"] == 2 and doc["bf16"]["enabled"] is True
    assert any("tp 2" in n and "not DeepSpeed JSON keys" in n for n in ds.notes)
    assert any("the estimate assumed megatron_core" in n for n in ds.notes)


def _maxtext_keys(text: str) -> dict[str, str]:
    """The key=value overrides of a MaxText command (one per continued line after the base.yml)."""
    lines = text.split("MaxText/configs/base.yml \\\n", 1)[1].splitlines()
    return dict(line.strip().removesuffix(" \\").split("=", 1) for line in lines)


def test_a_tpu_scenario_exports_maxtexts_multi_slice_form():
    """MaxText's own multi-slice example (AI-Hypercomputer/maxtext MaxText/configs/2xv4-128.sh: dcn_data_parallelism=2
    ici_fsdp_parallelism=64 per_device_batch_size=16 remat_policy=full, 22B model of hidden 6144, 48 layers) on TPU
    v5e, whose slices hold at most 256 chips: FSDP inside each slice, data parallelism over the data-center network."""
    sc = parse_scenario({"model": {"n_layers": 48, "hidden_size": 6144, "n_heads": 24, "ffn_hidden_size": 24576,
                                   "vocab_size": 32000, "ffn_type": "swiglu"},
                         "training": {"seq_len": 2048, "global_batch_size": 16 * 512, "total_tokens": 1e10},
                         "cluster": {"accelerator": "TPU-v5e", "n_gpus": 512},
                         "layout": {"dp": 512, "zero_stage": 3, "shard_group": 256, "micro_batch_size": 16,
                                    "recompute": "full"}})
    assert default_format(sc) == "maxtext"                  # Google's MLPerf stack (jax_maxtext) has its exporter
    cfg = export(sc)
    keys = _maxtext_keys(cfg.text)
    assert cfg.text.startswith("#!/bin/bash") and "python3 -m MaxText.train MaxText/configs/base.yml" in cfg.text
    assert {k: keys[k] for k in ("ici_fsdp_parallelism", "dcn_data_parallelism", "dcn_fsdp_parallelism",
                                  "per_device_batch_size", "remat_policy", "hardware")} == {
        "ici_fsdp_parallelism": "256", "dcn_data_parallelism": "2", "dcn_fsdp_parallelism": "1",
        "per_device_batch_size": "16", "remat_policy": "full", "hardware": "tpu"}
    # no MaxText model config for a custom shape: its base_* keys, said in a note
    assert (keys["base_emb_dim"], keys["base_num_decoder_layers"], keys["base_mlp_dim"], keys["head_dim"]) == \
        ("6144", "48", "24576", "256")
    assert any("2 slices of 256" in n for n in cfg.notes) and any("base_* keys" in n for n in cfg.notes)
    # the same chips sharded over all 512 (no shard group) put the FSDP axis over the DCN too
    whole = _maxtext_keys(export(sc.model_copy(update={"layout": sc.layout.model_copy(update={"shard_group": None})})).text)
    assert (whole["ici_fsdp_parallelism"], whole["dcn_fsdp_parallelism"], whole["dcn_data_parallelism"]) == ("256", "2", "1")


def test_maxtext_pipeline_tensor_and_batch_keys_add_up():
    """Llama 3.1 405B on 2,048 TPU v5p chips (one slice: a pod holds 8,960) at tp 8, pp 8, dp 32. Its 126 layers
    need an uneven split on 8 stages (15 on the first and last), which MaxText's SPMD pipeline cannot run: refused with
    the reason. 128 layers of the same shape, 2 virtual stages: 8 layers per stage and repeat."""
    data = {"model": {"preset": "llama3.1-405b"},
            "training": {"seq_len": 8192, "global_batch_size": 2048, "total_tokens": 1e10, "precision": "bf16"},
            "cluster": {"accelerator": "TPU-v5p", "n_gpus": 2048},
            "layout": {"tp": 8, "pp": 8, "dp": 32, "micro_batch_size": 1, "zero_stage": 1, "recompute": "selective",
                       "first_stage_layers": 15, "last_stage_layers": 15}}
    with pytest.raises(ScenarioError, match="126 layers split evenly over pp x virtual_stages = 8 chunks"):
        export(parse_scenario(data))
    from engine.catalog import load_catalog
    arch = load_catalog().models["llama3.1-405b"].arch.model_dump(exclude_none=True)
    even = {"tp": 8, "pp": 8, "dp": 32, "virtual_stages": 2, "micro_batch_size": 1, "zero_stage": 1,
            "recompute": "selective"}
    cfg = export(parse_scenario({**data, "model": {**arch, "n_layers": 128}, "layout": even}))
    keys = _maxtext_keys(cfg.text)
    # 2,048 sequences = 32 data-parallel ranks x micro-batch 1 x 64 pipeline micro-batches; MaxText's global batch
    # is per_device_batch_size x 2,048 chips
    assert (keys["ici_tensor_parallelism"], keys["ici_pipeline_parallelism"], keys["ici_fsdp_parallelism"],
            keys["dcn_data_parallelism"]) == ("8", "8", "32", "1")
    assert (keys["num_layers_per_pipeline_stage"], keys["num_pipeline_repeats"], keys["num_pipeline_microbatches"],
            keys["per_device_batch_size"], keys["model_fsdp_ag_once"], keys["remat_policy"]) == \
        ("8", "2", "64", "1", "true", "minimal")
    assert "gradient_accumulation_steps" not in keys


def test_maxtext_without_pipelining_accumulates_and_keeps_everything_without_recompute():
    sc = parse(**{"training.framework": "jax_maxtext", "layout.recompute": "none"})
    cfg = export(sc, "maxtext")
    keys = _maxtext_keys(cfg.text)
    lay, t = sc.layout, sc.training
    micro = t.global_batch_size // (lay.dp * lay.micro_batch_size)
    assert int(keys["gradient_accumulation_steps"]) == micro
    # per_device_batch_size x chips x accumulation steps = the global batch
    assert float(keys["per_device_batch_size"]) * lay.n_gpus * micro == t.global_batch_size
    assert keys["remat_policy"] == "custom" and keys["qkv_proj"] == keys["mlpwo"] == "device"
    assert keys["model_name"] == sc.model.preset and keys["hardware"] == "gpu_multiprocess"


def test_without_a_layout_the_search_best_is_exported():
    sc = parse(**{"layout": None})
    assert sc.layout is None
    cfg = for_scenario(sc, "deepspeed")
    assert cfg.notes[0] == "layout: the layout search's fastest on this cluster"
    assert json.loads(cfg.text)["train_batch_size"] == 256


def test_cli_export_config(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"model": {"preset": "llama3.1-8b"},
                                "training": {"seq_len": 8192, "global_batch_size": 16, "total_tokens": 1e9,
                                             "framework": "pytorch_fsdp2"},
                                "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
                                "layout": {"dp": 8, "zero_stage": 3, "micro_batch_size": 2, "recompute": "selective"}}))
    out = subprocess.run([sys.executable, "-m", "engine", "export-config", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    job = tomllib.loads(out.stdout)
    assert job["parallelism"]["data_parallel_shard_degree"] == 8 and job["training"]["local_batch_size"] == 2
    maxtext = subprocess.run([sys.executable, "-m", "engine", "export-config", str(path), "--format", "maxtext"],
                             capture_output=True, text=True)
    assert maxtext.returncode == 0, maxtext.stderr
    assert _maxtext_keys(maxtext.stdout)["ici_fsdp_parallelism"] == "8"
    assert "the estimate assumed pytorch_fsdp2" in maxtext.stderr
    bad = subprocess.run([sys.executable, "-m", "engine", "export-config", str(path), "--format", "xla"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice: 'xla'" in bad.stderr


def test_api_export_config_and_as_dict():
    import engine
    data = {"model": {"preset": "llama3.1-8b"},
            "training": {"seq_len": 8192, "global_batch_size": 16, "total_tokens": 1e9, "framework": "deepspeed"},
            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8},
            "layout": {"dp": 8, "zero_stage": 3, "micro_batch_size": 1}}
    cfg = engine.export_config(data)
    doc = engine.as_dict(cfg)
    assert doc["format"] == "deepspeed" and doc["framework"] == "deepspeed"
    # 16 sequences = 1 per GPU x 8 data-parallel ranks x 2 accumulation steps
    assert json.loads(doc["text"])["gradient_accumulation_steps"] == 2


def test_nemo_qwen3_235b_on_h100_exports_its_all_to_all_overlap():
    # NeMo 25.11's Qwen3-235B-A22B on 256 H100 (tp2 pp8 vp4 ep32) overlaps its all-to-all (Megatron-Bridge H100
    # preset moe_a2a_overlap=True): Megatron-LM's --overlap-moe-expert-parallel-comm, beside the layout it needs
    from tests.engine.published_runs import nemo_25_11
    run = next(r for r in nemo_25_11() if r.name == "H100 Qwen3_235B_a22B FP8-CS 256")
    lay = next(x for x in run.layouts if x["recompute"] == "none" and x.get("first_stage_layers") is not None)
    sc = parse_scenario({**run.scenario, "layout": lay})
    flags = _flags(megatron_args(sc, sc.layout, []))
    assert flags["--overlap-moe-expert-parallel-comm"] is True
    assert (flags["--expert-model-parallel-size"], flags["--pipeline-model-parallel-size"]) == ("32", "8")
    off = parse_scenario({**run.scenario, "layout": {**lay, "moe_a2a_overlap": False}})
    assert "--overlap-moe-expert-parallel-comm" not in _flags(megatron_args(off, off.layout, []))


def test_int8_on_a_tpu_exports_maxtexts_aqt_quantization_and_a_gpu_refuses_it():
    # MaxText quantization=int8 (AQT: forward and both backward matmuls in int8); int8 has a catalog peak on TPUs only
    data = {"model": {"preset": "llama2-7b"}, "training": {"seq_len": 2048, "global_batch_size": 512,
                                                         "total_tokens": 1e11, "precision": "int8"},
            "cluster": {"accelerator": "TPU-v5e", "n_gpus": 256},
            "layout": {"dp": 256, "zero_stage": 3, "micro_batch_size": 2, "recompute": "full"}}
    keys = _maxtext_keys(export(parse_scenario(data)).text)
    assert keys["quantization"] == "int8"
    bf16 = _maxtext_keys(export(parse_scenario(data | {"training": data["training"] | {"precision": "bf16"}})).text)
    assert "quantization" not in bf16
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data | {"cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 256}})
    assert "no published dense int8 peak" in str(info.value.problems)
