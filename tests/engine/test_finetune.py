"""Fine-tuning (full, LoRA, QLoRA) and offload against published facts and independent arithmetic (issue 20).

Published figures used: LoRA paper (Hu et al. 2021, arXiv 2106.09685) Tables 4-5 adapter counts for GPT-3 175B;
QLoRA (Dettmers et al. 2023, arXiv 2305.14314): 0.127 bits of double-quantized constants per parameter and a 65B
model fine-tuned on one 48 GB GPU (r 64 on every linear layer, sequences of 384 + 128 tokens, batch 16, paged AdamW);
PEFT's README (huggingface/peft, "Single A100 80GB GPU"): bloomz-7b1 full fine-tuning OOM, PEFT-LoRA 32 GB, with
DeepSpeed CPU offloading 18.1 GB; ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840) abstract: 13B on a single V100;
the seed recipes (../shared/seeds 004, extract seed-000-004 R25, R27, W26, E5).
"""
import pytest

from engine.catalog import load_catalog
from engine.inputs import parse_scenario
from engine.physics import finetune
from engine.physics.hardware import GIB
from engine.physics.model import shape_of
from engine.planning.alternatives import fitting_alternatives
from engine.planning.estimate import estimate
from engine.planning.sanity import warnings_for
from engine.planning.search import search
from engine.scenario import ScenarioError

# DeepSpeed's ZeRO-Offload tutorial trains a 10B GPT-2 of 50 layers x 4096; the ZeRO-Offload paper's 13B has 64
GPT2 = {"hidden_size": 4096, "n_heads": 32, "ffn_hidden_size": 16384, "vocab_size": 50257,
        "learned_position_embeddings": 1024}
LLAMA_65B = {"n_layers": 80, "hidden_size": 8192, "n_heads": 64, "ffn_hidden_size": 22016, "vocab_size": 32000,
             "ffn_type": "swiglu"}
BLOOMZ_7B1 = {"n_layers": 30, "hidden_size": 4096, "n_heads": 32, "ffn_hidden_size": 16384, "vocab_size": 250880,
              "tied_embeddings": True, "linear_bias": "all"}


def _sc(model, accelerator, n_gpus, layout, cluster=None, **training):
    return parse_scenario({"model": model, "training": {"total_tokens": 1e8, **training},
                           "cluster": {"accelerator": accelerator, "n_gpus": n_gpus, **(cluster or {})},
                           "layout": layout})


def _problems(data) -> dict:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data)
    return dict(err.value.problems)


# ---- adapters: the LoRA paper's counts ----------------------------------------------------------------------------

def test_adapter_counts_match_the_lora_paper_for_gpt3_175b():
    shape = shape_of(load_catalog().models["gpt3-175b"].arch)
    qv = [m for m in shape.attn_matrices if m[0] in ("q_proj", "v_proj")]
    # Table 4: LoRA on W_q, W_v of GPT-3 175B with 4.7M and 37.7M trainable parameters (r = 1 and r = 8)
    assert 96 * finetune.adapter_params(qv, 1) == pytest.approx(4.7e6, rel=0.01)
    assert 96 * finetune.adapter_params(qv, 8) == pytest.approx(37.7e6, rel=0.01)
    # Table 5: the 18M budget spread over W_q, W_k, W_v, W_o at r = 2: the engine's "attention" targets
    tr = parse_scenario({"model": {"preset": "gpt3-175b"}, "training": {
        "seq_len": 2048, "global_batch_size": 8, "total_tokens": 1e8, "method": "lora", "lora_rank": 2},
        "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8}}).training
    assert finetune.adapter_total(shape, tr) == 96 * 4 * 2 * (12288 + 12288) == pytest.approx(18e6, rel=0.05)


def test_nf4_with_double_quantization_costs_what_qlora_says():
    # QLoRA section 3: double quantization brings the constants from 0.5 to 0.127 bits per parameter
    assert finetune.DOUBLE_QUANT_BITS == pytest.approx(0.127, abs=5e-4)
    assert finetune.NF4_BYTES == pytest.approx(4.127 / 8, abs=1e-4)


# ---- the seed's recipes ---------------------------------------------------------------------------------------------

def test_the_seeds_7b_recipe_fits_on_four_a100s():
    # R25: LLaMA-2-7B fine-tune, FSDP SHARD_GRAD_OP (ZeRO-2), bf16, gradient checkpointing, batch 32 = 8 per GPU, seq 2048
    sc = _sc({"preset": "llama2-7b"}, "A100-SXM4-80GB", 4, {"dp": 4, "zero_stage": 2, "micro_batch_size": 8,
                                                           "recompute": "full"},
             seq_len=2048, global_batch_size=32, method="full")
    est = estimate(sc)
    p = 6_738_415_616                                        # LLaMA-2-7B's parameters
    assert est.params_total == p
    assert est.memory_gib.weights == pytest.approx(2 * p / GIB, abs=1e-3)           # every bf16 weight on each GPU
    assert est.memory_gib.gradients == pytest.approx(2 * p / 4 / GIB, abs=1e-3)     # ZeRO-2: a quarter each
    assert est.memory_gib.optimizer_states == pytest.approx(12 * p / 4 / GIB, abs=1e-3)
    assert est.fits and est.memory_gib.total < est.memory_capacity_gib


def test_the_seeds_10b_on_two_3090s_fits_with_optimizer_offload_and_not_without():
    # R27: 10B, ZeRO-3 + optimizer offload, fp16, aggressive checkpointing, 2 per GPU x 8 accumulation = batch 32
    def run(offload, host=None):
        return estimate(_sc({"n_layers": 50, **GPT2}, "RTX-3090", 2,
                            {"dp": 2, "micro_batch_size": 2, "zero_stage": 3, "recompute": "full", "offload": offload},
                            cluster={"host_memory_gb_per_gpu": host} if host else None,
                            seq_len=1024, global_batch_size=32, precision="fp16", method="full"))
    without = run("none")
    assert not without.fits and without.memory_gib.total > 24     # 16 B/param over 2 GPUs: ~78 GiB of states each
    # its 10.5B parameters keep 14 bytes each in CPU memory (fp16 gradient + fp32 master, momentum, variance) over 2
    # ranks: 73 GB per GPU, more than the catalog's assumed 128 GB workstation, and the message says where to set it
    short = run("optimizer")
    assert not short.fits and "host_memory_gb_per_gpu" in short.problem
    assert short.memory_gib.total < 24                             # the GPU side fits
    offloaded = run("optimizer", host=128)                         # a 256 GB workstation
    assert offloaded.fits and offloaded.memory_gib.optimizer_states == 0
    # the seed's "0.1-0.2 tokens/s per GPU" is wrong (extract W26/E5: order 10^2-10^3 at 10-30 TFLOP/s effective)
    assert 100 < offloaded.tokens_per_s / 2 < 1000


def test_zero_offload_trains_13b_on_one_v100():
    # ZeRO-Offload abstract: "over 13 billion parameters on a single GPU" (a V100 32 GB in a DGX-2, 1.5 TB of host memory)
    def run(zero, offload):
        return estimate(_sc({"n_layers": 64, **GPT2}, "V100-SXM2-32GB", 1,
                            {"zero_stage": zero, "recompute": "full", "offload": offload},
                            cluster={"host_memory_gb_per_gpu": 1500},
                            seq_len=1024, global_batch_size=32, precision="fp16", method="full"))
    assert not run(0, "none").fits
    with_offload = run(2, "optimizer")
    assert with_offload.params_total == pytest.approx(13e9, rel=0.03) and with_offload.fits


# ---- QLoRA and PEFT's measurements ----------------------------------------------------------------------------------

def test_qlora_fine_tunes_65b_on_one_48gb_gpu():
    # QLoRA: r 64 on every linear layer, 384 + 128 tokens, batch 16 by accumulation, gradient checkpointing, paged AdamW
    def run(method):
        return estimate(_sc(LLAMA_65B, "L40S", 1, {"recompute": "full"}, seq_len=512, global_batch_size=16,
                            method=method, lora_rank=64, lora_targets="all_linear"))
    q = run("qlora")
    assert q.memory_capacity_gib < 48 and q.fits
    h, f, v, layers = 8192, 22016, 32000, 80
    linear = layers * (4 * h * h + 3 * h * f)
    adapters = layers * 64 * (4 * (h + h) + 3 * (h + f))
    assert linear + 2 * v * h + layers * 2 * h + h == q.params_total                # LLaMA-65B's 65.3B
    # NF4 linear layers + 16-bit embedding, output layer and norms + bf16 adapters (qlora.py keeps them in bf16)
    weights = linear * 4.127 / 8 + 2 * (2 * v * h + layers * 2 * h + h) + 2 * adapters
    assert q.memory_gib.weights == pytest.approx(weights / GIB, rel=2e-3)
    assert q.memory_gib.gradients == pytest.approx(2 * adapters / GIB, abs=1e-3)          # GiB to 3 places
    # paged AdamW: 8 bytes per adapter parameter, of which what the GPU lacks waits in host memory
    assert 0 < 8 * adapters / GIB - q.memory_gib.optimizer_states < 1.0
    assert not run("lora").fits                                    # a 16-bit 65B base alone is 122 GiB


def test_peft_lora_against_full_fine_tuning_of_bloomz_7b1_on_one_a100():
    # PEFT README, single A100 80GB: bloomz-7b1 full fine-tuning OOM, PEFT-LoRA 32 GB, LoRA + DeepSpeed offload 18.1 GB
    # (fp32: the example's accelerate config has mixed_precision 'no'; batch 8 of 64-token sequences, r 8)
    def run(method, layout):
        return estimate(_sc(BLOOMZ_7B1, "A100-SXM4-80GB", 1, layout, seq_len=64, global_batch_size=8, precision="fp32",
                            method=method, lora_rank=8))
    full = run("full", {"micro_batch_size": 8})
    lora = run("lora", {"micro_batch_size": 8})
    offloaded = run("lora", {"micro_batch_size": 8, "zero_stage": 3, "offload": "optimizer_and_params"})
    assert not full.fits
    assert lora.fits and lora.memory_gib.total * GIB / 1e9 == pytest.approx(32, rel=0.15)
    assert offloaded.memory_gib.total < lora.memory_gib.total


# ---- time, tokens, warnings -----------------------------------------------------------------------------------------

def test_nemos_lora_recipe_keeps_the_frozen_base_in_fp8_only():
    """NVIDIA's MLPerf Llama 2 70B LoRA recipe (megatron_gpt_peft_tuning_config.yaml: fp8_params: ${FP8}, FP8=True;
    Fujitsu's 4 x H100 config_GX2560M7_1x4x8xtp4pp1cp1.sh: TP 4, micro-batch 1, no recompute key): the frozen linear
    weights are FP8 tensors only, so at TP 4 a GPU holds 68.45B / 4 linear weights at 1 byte, the vocabulary-parallel
    embedding and output layer in bf16, and the adapters; it fits 80 GB without recomputation, as the submissions
    ran. PyTorch FSDP2 (AMD's recipe) and 16-bit training keep the 16-bit weights."""
    def lora(precision="fp8", framework=None, recompute="none"):
        return parse_scenario({"model": {"preset": "llama2-70b"},
                               "training": {"seq_len": 8192, "global_batch_size": 8, "total_tokens": 3072 * 8192,
                                            "precision": precision, "method": "lora", "lora_rank": 16,
                                            "lora_targets": "attention", "framework": framework},
                               "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 4},
                               "layout": {"tp": 4, "micro_batch_size": 1, "recompute": recompute,
                                          "sequence_parallel": True}})
    h, layers, ffn, kv, vocab = 8192, 80, 28672, 1024, 32000
    linear = layers * (2 * h * h + 2 * h * kv + 3 * h * ffn)                   # q, o; k, v; gate, up, down
    adapters = layers * 16 * ((h + h + 2 * kv) + (h + h))                      # rank 16 on fused qkv and o: A and B
    expected = linear / 4 * 1 + 2 * vocab * h / 4 * 2 + (2 * layers + 1) * h * 2 + adapters / 4 * 2
    est = estimate(lora())
    assert linear == pytest.approx(68.45e9, rel=1e-3)
    assert est.memory_gib.weights * GIB == pytest.approx(expected, rel=0.005)
    assert est.fits and est.memory_gib.total < 80
    # the 16-bit weights and their FP8 cast otherwise: 3 bytes per linear weight
    sixteen = estimate(lora(framework="pytorch_fsdp2"))
    assert sixteen.memory_gib.weights * GIB == pytest.approx(expected + linear / 4 * 2, rel=0.01)
    assert estimate(lora(precision="bf16")).memory_gib.weights * GIB == pytest.approx(expected + linear / 4, rel=0.01)


def test_a_frozen_base_skips_its_weight_gradients():
    # LoRA section 4.2: no gradients for the frozen weights; GPT-3 175B trained 25% faster than with full fine-tuning
    # (its layout is not published: here one without recomputation, which would add a forward to both alike)
    layout = {"tp": 8, "pp": 4, "dp": 2, "zero_stage": 1, "micro_batch_size": 1}
    full = estimate(_sc({"preset": "gpt3-175b"}, "H100-SXM5-80GB", 64, layout, seq_len=2048, global_batch_size=64,
                        method="full"))
    lora = estimate(_sc({"preset": "gpt3-175b"}, "H100-SXM5-80GB", 64, layout, seq_len=2048, global_batch_size=64,
                        method="lora", lora_rank=4))
    assert 1 - lora.step_time_s / full.step_time_s == pytest.approx(0.25, abs=0.10)
    assert lora.time_breakdown_s["dp_comm"] <= full.time_breakdown_s["dp_comm"]
    # model FLOPs per token: the frozen matmuls' backward is their input gradient alone (2x forward instead of 3x)
    shape = shape_of(load_catalog().models["gpt3-175b"].arch)
    linear_fwd = 2 * (96 * (shape.attn_params + shape.dense_mlp_params) + shape.vocab * shape.hidden)
    adapters = finetune.adapter_total(shape, parse_scenario({"model": {"preset": "gpt3-175b"}, "training": {
        "seq_len": 2048, "global_batch_size": 64, "total_tokens": 1e8, "method": "lora", "lora_rank": 4},
        "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 64}}).training)
    full_flops = full.model_tflops_per_gpu * 64 * 1e12 / full.tokens_per_s
    lora_flops = lora.model_tflops_per_gpu * 64 * 1e12 / lora.tokens_per_s
    assert full_flops - lora_flops == pytest.approx(linear_fwd - 6 * adapters, rel=1e-9)


def test_a_fine_tunes_tokens_are_the_dataset_times_its_epochs_and_no_pretraining_warning():
    # the new user: a 0.5B-token fine-tune of 7B was told "fewer tokens than parameters"
    def run(epochs, method="full"):
        sc = _sc({"preset": "llama2-7b"}, "A100-SXM4-80GB", 4, {"dp": 4, "zero_stage": 2, "micro_batch_size": 8,
                                                               "recompute": "full"},
                 seq_len=2048, global_batch_size=32, method=method, epochs=epochs)
        return sc, estimate(sc)
    sc1, one = run(1)
    sc3, three = run(3)
    assert three.train_days == pytest.approx(3 * one.train_days, rel=1e-9)
    assert not any("fewer than the model" in w for w in warnings_for(sc1, one))
    pre, est = run(1, "pretrain")
    assert any("fewer than the model" in w for w in warnings_for(pre, est))


# ---- bad input names its field ---------------------------------------------------------------------------------------

def _data(training=None, layout=None, cluster=None):
    return {"model": {"preset": "llama2-7b"},
            "training": {"seq_len": 2048, "global_batch_size": 32, "total_tokens": 1e8, **(training or {})},
            "cluster": {"accelerator": "A100-SXM4-80GB", "n_gpus": 4, **(cluster or {})},
            "layout": {"dp": 4, "zero_stage": 2, **(layout or {})}}


def test_bad_fine_tuning_input_names_its_field():
    assert "training.lora_rank" in _problems(_data({"method": "lora", "lora_rank": 0}))
    too_wide = _problems(_data({"method": "lora", "lora_rank": 4096}))              # LLaMA-2-7B's matrices are 4096 wide
    assert "4096" in too_wide["training.lora_rank"]
    assert "training.precision" in _problems(_data({"method": "qlora", "precision": "fp8"},
                                                   cluster={"accelerator": "H100-SXM5-80GB"}))
    assert "training.method" in _problems(_data({"method": "dpo"}))
    needs_zero = _problems(_data(layout={"zero_stage": 0, "offload": "optimizer"}))
    assert "zero_stage" in needs_zero["layout.offload"]
    assert "zero_stage 3" in _problems(_data(layout={"offload": "optimizer_and_params"}))["layout.offload"]


def test_offload_without_host_memory_says_which_field():
    est = estimate(parse_scenario(_data({"method": "full"}, {"offload": "optimizer"}, {"host_memory_gb_per_gpu": 0})))
    assert not est.fits and "cluster.host_memory_gb_per_gpu" in est.problem and "CPU memory" in est.problem


# ---- the search ------------------------------------------------------------------------------------------------------

def test_the_search_offloads_only_where_nothing_fits_without_it():
    base = {"model": {"preset": "llama2-70b"}, "training": {"seq_len": 4096, "global_batch_size": 64,
                                                            "total_tokens": 1e9, "method": "full"},
            "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 8}}
    best = search(parse_scenario(base), top=1, pareto_sizes=[], summaries=False).best
    # 70B x 16 bytes = 1.1 TB of states do not fit in 8 x 80 GB: only offloading to the 2 TB host fits it
    assert best and best[0].layout.offload != "none"
    no_host = {**base, "cluster": {**base["cluster"], "host_memory_gb_per_gpu": 0}}
    assert not search(parse_scenario(no_host), top=1, pareto_sizes=[], summaries=False).best
    lora = {**base, "training": {**base["training"], "method": "lora"}}
    assert search(parse_scenario(lora), top=1, pareto_sizes=[], summaries=False).best[0].layout.offload == "none"


def test_what_would_fit_when_nothing_does():
    # 70B trained in full on 2 x A100-40GB: 16 bytes for each of its 69.0B parameters is 552 GB per GPU to offload
    sc = parse_scenario({"model": {"preset": "llama2-70b"}, "training": {
        "seq_len": 4096, "global_batch_size": 64, "total_tokens": 5e8, "method": "full"},
        "cluster": {"accelerator": "A100-SXM4-40GB", "n_gpus": 2}})
    options = {o.option: o for o in fitting_alternatives(sc)}
    assert set(options) == {"lora", "qlora", "offload", "more_gpus"}
    assert options["lora"].fits and options["qlora"].fits and options["qlora"].memory_gib < 40
    p = shape_of(sc.arch).total_params()
    assert options["offload"].host_memory_gb_per_gpu == pytest.approx(16 * p / 2 / 1e9, rel=0.01)
    assert "cluster.host_memory_gb_per_gpu" in options["offload"].text
    assert options["more_gpus"].fits and options["more_gpus"].n_gpus > 2 and options["more_gpus"].wall_days > 0
    fits = sc.model_copy(update={"training": sc.training.model_copy(update={"method": "qlora"})})
    assert fitting_alternatives(fits) == []


def test_fitting_options_name_their_changes_and_adapters_only_for_fine_tunes():
    # the same 70B on 2 x A100-40GB: applying an option's changes with its layout gives that option's figures
    data = {"model": {"preset": "llama2-70b"}, "training": {
        "seq_len": 4096, "global_batch_size": 64, "total_tokens": 5e8, "method": "full"},
        "cluster": {"accelerator": "A100-SXM4-40GB", "n_gpus": 2}}
    options = {o.option: o for o in fitting_alternatives(parse_scenario(data))}
    assert options["lora"].changes == {"training.method": "lora"}
    assert options["qlora"].changes == {"training.method": "qlora", "training.precision": "bf16"}
    assert options["more_gpus"].changes == {"cluster.n_gpus": options["more_gpus"].n_gpus}
    qlora = {**data, "training": {**data["training"], "method": "qlora", "precision": "bf16"},
             "layout": options["qlora"].layout.model_dump(exclude_none=True)}
    assert estimate(parse_scenario(qlora)).memory_gib.total == pytest.approx(options["qlora"].memory_gib)
    # pre-training starts from random weights: there is no base to adapt, so no LoRA or QLoRA is offered
    pretrain = {**data, "training": {**data["training"], "method": "pretrain"}}
    assert {o.option for o in fitting_alternatives(parse_scenario(pretrain))} == {"offload", "more_gpus"}
