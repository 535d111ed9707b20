"""A scenario's layout as its software stack's own launch configuration: Megatron-LM arguments, a TorchTitan TOML job
file, a DeepSpeed JSON config or a MaxText command line, so that the layout the planner chose can be run as it was
estimated.

The stack is the scenario's training.framework (its vendor's MLPerf default when not given, engine.frameworks.resolve):
megatron_core -> Megatron-LM arguments, pytorch_fsdp2 -> TorchTitan TOML, deepspeed -> DeepSpeed JSON, jax_maxtext ->
MaxText overrides of its base.yml. Another format may be asked for; the configuration then says that the estimate
assumed another stack.
Whatever of the layout the target stack cannot express is written into `notes` (and into the file as comments where
the format has them), never dropped in silence.

Names are those of the stacks' sources:
- Megatron-LM megatron/training/arguments.py at commit 307dcf37f03d44da131ba21999278abe4112d2ad (NVIDIA/Megatron-LM):
  --tensor-model-parallel-size, --pipeline-model-parallel-size, --num-layers-per-virtual-pipeline-stage,
  --num-virtual-stages-per-pipeline-rank, --decoder-first/last-pipeline-num-layers, --context-parallel-size,
  --expert-model-parallel-size, --expert-tensor-parallel-size, --sequence-parallel, --micro-batch-size,
  --global-batch-size, --seq-length, --recompute-granularity/-method/-num-layers, --use-distributed-optimizer,
  --fp8-format hybrid, --fp8-recipe {tensorwise,delayed,mxfp8,blockwise}, --bf16/--fp16, --tp-comm-overlap,
  --accumulate-allreduce-grads-in-fp32, and the model shape arguments.
- TorchTitan torchtitan/config/job_config.py at commit 000204a4a8bf3d0f31adc44fc29855fbb6ea13d8 (pytorch/torchtitan):
  [training] local_batch_size, global_batch_size, seq_len, steps, compile; [parallelism] data_parallel_replicate_degree,
  data_parallel_shard_degree, fsdp_reshard_after_forward, tensor_parallel_degree, enable_async_tensor_parallel,
  pipeline_parallel_degree, pipeline_parallel_schedule, pipeline_parallel_microbatch_size,
  pipeline_parallel_split_points, context_parallel_degree, expert_parallel_degree; [activation_checkpoint] mode,
  selective_ac_option; [model] converters ("float8", "mx"); [float8] recipe_name.
- DeepSpeed configuration JSON (the keys of deepspeed.ai/docs/config-json/, checked against public configs such as
  shibing624/MedicalGPT deepspeed_zero_stage3_config.json, not against the page itself): train_batch_size,
  train_micro_batch_size_per_gpu, gradient_accumulation_steps, bf16/fp16 {enabled}, zero_optimization {stage,
  overlap_comm, contiguous_gradients}.
- MaxText MaxText/configs/base.yml at commit 315ebb593a8ef40f4dfff2534238c0beb9402f9d (AI-Hypercomputer/maxtext),
  given as key=value overrides to `python3 -m MaxText.train MaxText/configs/base.yml` (as its own example scripts do,
  e.g. configs/2xv4-128.sh: dcn_data_parallelism=2 ici_fsdp_parallelism=64 per_device_batch_size=16
  remat_policy=full): ici_/dcn_ {data, fsdp, tensor, context, expert, pipeline}_parallelism (the products of the ICI
  axes equal the chips of one slice, of the DCN axes the slices), per_device_batch_size, gradient_accumulation_steps,
  num_pipeline_microbatches, num_layers_per_pipeline_stage, num_pipeline_repeats, model_fsdp_ag_once, remat_policy
  (custom with decoder_layer_input/context/mlpwi/mlpwo/qkv_proj/out_proj), quantization, dtype, max_target_length,
  steps, opt_type, optimizer_memory_host_offload, parameter_memory_host_offload, model_name (configs/models/*.yml)
  or base_emb_dim, base_num_query_heads, base_num_kv_heads, base_mlp_dim, base_num_decoder_layers, head_dim,
  vocab_size, num_experts, num_experts_per_tok, base_moe_mlp_dim.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from engine import frameworks
from engine.catalog import load_catalog
from engine.physics.schedule import SplitError, chunk_layers, stage_layers
from engine.scenario import Layout, Scenario, ScenarioError

Format = Literal["megatron", "torchtitan", "deepspeed", "maxtext"]
FORMATS: tuple[str, ...] = ("megatron", "torchtitan", "deepspeed", "maxtext")
FORMAT_NAMES = {"megatron": "Megatron-LM arguments", "torchtitan": "TorchTitan TOML", "deepspeed": "DeepSpeed JSON",
                "maxtext": "MaxText command line"}
FORMAT_OF_FRAMEWORK = {"megatron_core": "megatron", "pytorch_fsdp2": "torchtitan", "deepspeed": "deepspeed",
                       "jax_maxtext": "maxtext"}
FRAMEWORK_OF_FORMAT = {v: k for k, v in FORMAT_OF_FRAMEWORK.items()}
SUFFIX = {"megatron": "sh", "torchtitan": "toml", "deepspeed": "json", "maxtext": "sh"}


@dataclass(frozen=True)
class LaunchConfig:
    format: str
    framework: str               # the stack the scenario's estimate assumed
    text: str                    # the file as written
    filename: str
    notes: list[str] = field(default_factory=list)   # what the target stack cannot express, or expresses otherwise

    def as_json(self) -> dict:
        return {"format": self.format, "framework": self.framework, "filename": self.filename, "notes": self.notes,
                "text": self.text}


def default_format(sc: Scenario) -> str:
    """The launch format of the scenario's stack (its vendor's MLPerf default when training.framework is null)."""
    fw = _framework(sc)
    if fw not in FORMAT_OF_FRAMEWORK:
        raise ScenarioError([("training.framework", f"{fw} has no launch-config exporter; choose --format "
                                                    f"{'|'.join(FORMATS)} or another training.framework")])
    return FORMAT_OF_FRAMEWORK[fw]


def export(sc: Scenario, fmt: str | None = None) -> LaunchConfig:
    """The scenario's layout as `fmt` (default: its stack's format). ScenarioError when it has no layout."""
    if sc.layout is None:
        raise ScenarioError([("layout", "a launch configuration needs a layout: run the search and export its best "
                                        "layout, or give one in the scenario")])
    fmt = fmt or default_format(sc)
    if fmt not in FORMATS:
        raise ScenarioError([("--format", f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")])
    fw = _framework(sc)
    notes = []
    if FRAMEWORK_OF_FORMAT[fmt] != fw:
        notes.append(f"the estimate assumed {fw}; this {fmt} configuration runs the same layout on "
                     f"{FRAMEWORK_OF_FORMAT[fmt]}, whose efficiency differs (set training.framework to "
                     f"{FRAMEWORK_OF_FORMAT[fmt]} for its estimate)")
    lay = sc.layout
    text = {"megatron": _megatron, "torchtitan": _torchtitan, "deepspeed": _deepspeed,
            "maxtext": _maxtext}[fmt](sc, lay, notes)
    name = sc.model.preset if hasattr(sc.model, "preset") else "model"
    return LaunchConfig(fmt, fw, text, f"{name}-tp{lay.tp}-pp{lay.pp}-dp{lay.dp}-cp{lay.cp}.{SUFFIX[fmt]}", notes)


def for_scenario(sc: Scenario, fmt: str | None = None) -> LaunchConfig:
    """export() of the scenario's layout, or of the layout search's best on its cluster when it gives none."""
    if sc.layout is not None:
        return export(sc, fmt)
    from engine.planning.search import search
    best = search(sc, top=1, summaries=False).best
    if not best:
        raise ScenarioError([("layout", f"no layout fits {sc.cluster.n_gpus} x {sc.cluster.accelerator}; nothing to "
                                        "export (python -m engine search says why)")])
    out = export(sc.model_copy(update={"layout": best[0].layout}), fmt)
    return LaunchConfig(out.format, out.framework, out.text, out.filename,
                        ["layout: the layout search's fastest on this cluster"] + out.notes)


def _framework(sc: Scenario) -> str:
    acc = load_catalog().accelerator(sc.cluster.accelerator)
    return frameworks.resolve(sc.training.framework, acc.vendor, acc.id, sc.training.precision).stack.id


def train_steps(sc: Scenario) -> int:
    """Optimizer steps for the scenario's tokens at its sequence and batch (rounded up)."""
    per_step = sc.training.seq_len * sc.training.global_batch_size
    return max(1, -(-int(sc.training.total_tokens) // per_step))


def _split(sc: Scenario, lay: Layout) -> tuple[int, int, int]:
    try:
        return stage_layers(sc.arch.n_layers, lay.pp, lay.virtual_stages, lay.first_stage_layers,
                            lay.last_stage_layers)
    except SplitError as err:
        raise ScenarioError([("layout", str(err))]) from None


# --- Megatron-LM ------------------------------------------------------------------------------------------------------

def megatron_args(sc: Scenario, lay: Layout, notes: list[str]) -> list[str]:
    """The Megatron-LM command-line arguments of the layout, training shape and model shape, flag then value."""
    a, t = sc.arch, sc.training
    args = ["--tensor-model-parallel-size", str(lay.tp), "--pipeline-model-parallel-size", str(lay.pp)]
    first, _, last = _split(sc, lay)
    if lay.first_stage_layers is not None:
        args += ["--decoder-first-pipeline-num-layers", str(first)]
    if lay.last_stage_layers is not None:
        args += ["--decoder-last-pipeline-num-layers", str(last)]
    if lay.virtual_stages > 1:
        uneven = lay.first_stage_layers is not None or lay.last_stage_layers is not None
        if not uneven and a.n_layers % (lay.pp * lay.virtual_stages) == 0:
            args += ["--num-layers-per-virtual-pipeline-stage", str(a.n_layers // (lay.pp * lay.virtual_stages))]
        else:
            args += ["--num-virtual-stages-per-pipeline-rank", str(lay.virtual_stages)]
    if lay.cp > 1:
        args += ["--context-parallel-size", str(lay.cp)]
    if a.is_moe:
        args += ["--expert-model-parallel-size", str(lay.ep)]
        if lay.expert_tp is not None:
            args += ["--expert-tensor-parallel-size", str(lay.expert_tp)]
    if lay.sequence_parallel:
        args += ["--sequence-parallel"]
    if lay.tp_comm_overlap:
        args += ["--tp-comm-overlap"]
    if lay.moe_a2a_overlap:
        args += ["--overlap-moe-expert-parallel-comm"]
    args += ["--micro-batch-size", str(lay.micro_batch_size), "--global-batch-size", str(t.global_batch_size),
             "--seq-length", str(t.seq_len), "--train-iters", str(train_steps(sc))]
    if lay.recompute == "selective":
        args += ["--recompute-granularity", "selective"]
    elif lay.recompute == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if lay.zero_stage in (1, 2):
        args += ["--use-distributed-optimizer"]
        if lay.zero_stage == 2:
            notes.append("zero_stage 2: Megatron's distributed optimizer shards the optimizer states and reduce-"
                         "scatters the gradients into each rank's shard; there is no separate ZeRO-2 switch")
    elif lay.zero_stage == 3:
        args += ["--use-megatron-fsdp"]
        notes.append("zero_stage 3: --use-megatron-fsdp (Megatron-FSDP) shards weights, gradients and optimizer states; "
                     "its sharding-strategy options come with Megatron-FSDP and were not checked against "
                     "arguments.py at the cited commit")
    if lay.shard_group is not None:
        notes.append(f"shard_group {lay.shard_group} (hybrid sharding) has no Megatron-LM argument in the cited "
                     "arguments.py; the states are sharded over every data-parallel rank")
    if not lay.reshard_after_forward and lay.zero_stage == 3:
        notes.append("reshard_after_forward false has no Megatron-LM argument in the cited arguments.py")
    if t.precision == "fp16":
        args += ["--fp16"]
    elif t.precision != "fp32":
        args += ["--bf16"]
    if t.precision == "fp8":
        args += ["--fp8-format", "hybrid"]
    elif t.precision == "mxfp8":
        args += ["--fp8-format", "hybrid", "--fp8-recipe", "mxfp8"]
    elif t.precision == "nvfp4":
        notes.append("nvfp4: the cited arguments.py has no 4-bit training recipe; the arguments train in bf16")
    if t.accumulate_grads_in_fp32:
        args += ["--accumulate-allreduce-grads-in-fp32"]
    if t.optimizer == "sgd":
        args += ["--optimizer", "sgd"]
    if t.attention == "flash":
        args += ["--attention-backend", "flash"]
    args += _megatron_model(sc, notes)
    return args


def _megatron_model(sc: Scenario, notes: list[str]) -> list[str]:
    a = sc.arch
    args = ["--num-layers", str(a.n_layers), "--hidden-size", str(a.hidden_size),
            "--num-attention-heads", str(a.n_heads), "--vocab-size", str(a.vocab_size),
            "--max-position-embeddings", str(max(sc.training.seq_len, a.learned_position_embeddings))]
    dense_ffn = a.dense_ffn_hidden_size or a.ffn_hidden_size
    args += ["--ffn-hidden-size", str(dense_ffn if a.is_moe else a.ffn_hidden_size)]
    if a.kv_heads != a.n_heads:
        args += ["--group-query-attention", "--num-query-groups", str(a.kv_heads)]
    if a.head_dim is not None:
        args += ["--kv-channels", str(a.head_dim)]
    if a.ffn_type == "swiglu":
        args += ["--swiglu"]
    elif a.ffn_type == "geglu":
        notes.append("geglu MLP: Megatron-LM's gated MLP flag --swiglu uses SiLU; a GELU-gated MLP needs a custom "
                     "activation")
    if a.learned_position_embeddings == 0:
        args += ["--position-embedding-type", "rope"]
    if not a.tied_embeddings:
        args += ["--untie-embeddings-and-output-weights"]
    if not a.dropout:
        args += ["--hidden-dropout", "0", "--attention-dropout", "0"]
    if a.linear_bias == "none":
        args += ["--disable-bias-linear"]
    elif a.linear_bias == "qkv":
        args += ["--disable-bias-linear", "--add-qkv-bias"]
    if a.qk_norm != "none":
        args += ["--qk-layernorm"]
    if a.is_moe:
        args += ["--num-experts", str(a.n_experts), "--moe-router-topk", str(a.experts_per_token),
                 "--moe-ffn-hidden-size", str(a.ffn_hidden_size), "--moe-grouped-gemm"]
        if a.n_shared_experts:
            width = (a.shared_expert_ffn_hidden_size or a.ffn_hidden_size) * a.n_shared_experts
            args += ["--moe-shared-expert-intermediate-size", str(width)]
        if a.n_dense_layers or a.moe_layer_every > 1:
            pattern = [int(i >= a.n_dense_layers and (i + 1) % a.moe_layer_every == 0) for i in range(a.n_layers)]
            args += ["--moe-layer-freq", f"[{','.join(map(str, pattern))}]"]
    if a.mla is not None:
        m = a.mla
        args += ["--multi-latent-attention", "--kv-lora-rank", str(m.kv_lora_rank),
                 "--qk-head-dim", str(m.qk_nope_head_dim), "--qk-pos-emb-head-dim", str(m.qk_rope_head_dim),
                 "--v-head-dim", str(m.v_head_dim)]
        if m.q_lora_rank is not None:
            args += ["--q-lora-rank", str(m.q_lora_rank)]
    if a.attention_window is not None:
        notes.append(f"local attention (window {a.attention_window}, {a.attention_window_kind}) is not exported: "
                     "set the model's window arguments by hand")
    if a.mtp_layers:
        args += ["--mtp-num-layers", str(a.mtp_layers)]
    if a.attention_sinks:
        notes.append("attention sinks are not exported: set them in the model's provider")
    return args


def _megatron(sc: Scenario, lay: Layout, notes: list[str]) -> str:
    args = megatron_args(sc, lay, notes)
    lines = []
    i = 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            lines.append(f"    {args[i]} {_shell(args[i + 1])}")
            i += 2
        else:
            lines.append(f"    {args[i]}")
            i += 1
    head = ["# Megatron-LM arguments for the planner's layout (megatron/training/arguments.py, NVIDIA/Megatron-LM "
            "307dcf37)", f"# {lay.n_gpus} GPUs: tp {lay.tp} x pp {lay.pp} x dp {lay.dp} x cp {lay.cp}"]
    head += [f"# note: {n}" for n in notes]
    return "\n".join(head + ["MEGATRON_ARGS=("] + lines + [")", ""])


def _shell(value: str) -> str:
    return f"'{value}'" if any(c in value for c in "[],") else value


# --- TorchTitan -------------------------------------------------------------------------------------------------------

def torchtitan_job(sc: Scenario, lay: Layout, notes: list[str]) -> dict[str, dict]:
    """The TorchTitan job-config sections of the layout (section -> key -> value)."""
    a, t = sc.arch, sc.training
    local = t.global_batch_size // lay.dp if t.global_batch_size % lay.dp == 0 else None
    if local is None:
        raise ScenarioError([("training.global_batch_size", f"{t.global_batch_size} sequences do not split over "
                                                            f"dp={lay.dp} ranks")])
    training = {"local_batch_size": local, "global_batch_size": t.global_batch_size, "seq_len": t.seq_len,
                "steps": train_steps(sc), "compile": t.compiled}
    if t.precision == "fp32":
        training["mixed_precision_param"] = "float32"
    if lay.zero_stage == 0:
        replicate, shard = lay.dp, 1
    elif lay.shard_group is not None:
        replicate, shard = lay.dp // lay.shard_group, lay.shard_group
    else:
        replicate, shard = 1, lay.dp
    if lay.zero_stage in (1, 2):
        notes.append(f"zero_stage {lay.zero_stage}: FSDP2 shards weights too (ZeRO-3); TorchTitan has no ZeRO-1/2 "
                     "mode, so this runs with more weight gathers than the estimate assumed")
    par = {"data_parallel_replicate_degree": replicate, "data_parallel_shard_degree": shard,
           "tensor_parallel_degree": lay.tp, "pipeline_parallel_degree": lay.pp,
           "context_parallel_degree": lay.cp}
    if lay.zero_stage >= 1 and shard > 1:
        par["fsdp_reshard_after_forward"] = "default" if lay.reshard_after_forward else "never"
    if lay.tp > 1:
        par["enable_async_tensor_parallel"] = lay.tp_comm_overlap
        if lay.tp_comm_overlap and not training["compile"]:
            notes.append("tp_comm_overlap without torch.compile: TorchTitan's async TP is only effective when "
                         "compile is enabled, so the estimate credits it nothing")
        if not lay.sequence_parallel:
            notes.append("sequence_parallel false: TorchTitan's tensor parallelism always shards the norms on the "
                         "sequence (sequence parallelism)")
    if lay.pp > 1:
        par["pipeline_parallel_schedule"] = "Interleaved1F1B" if lay.virtual_stages > 1 else "1F1B"
        par["pipeline_parallel_microbatch_size"] = lay.micro_batch_size
        points = _split_points(sc, lay)
        if points:
            par["pipeline_parallel_split_points"] = points
        elif lay.virtual_stages > 1:
            par["pipeline_parallel_layers_per_stage"] = a.n_layers // (lay.pp * lay.virtual_stages)
    elif lay.micro_batch_size != local:
        notes.append(f"micro_batch_size {lay.micro_batch_size}: without pipeline parallelism TorchTitan runs the "
                     f"local batch ({local}) in one pass; gradient accumulation is not a job-config key at the cited "
                     "commit")
    if a.is_moe:
        par["expert_parallel_degree"] = lay.ep
        if lay.expert_tp not in (None, lay.tp):
            notes.append(f"expert_tp {lay.expert_tp} has no key in the cited job_config.py")
    ac = {"none": {"mode": "none"}, "full": {"mode": "full"},
          "selective": {"mode": "selective", "selective_ac_option": "op"}}[lay.recompute]
    job = {"training": training, "parallelism": par, "activation_checkpoint": ac}
    if t.precision == "fp8":
        job["model"] = {"converters": ["float8"]}
        job["float8"] = {"recipe_name": "tensorwise"}
    elif t.precision == "mxfp8":
        job["model"] = {"converters": ["mx"]}
        job["mx"] = {"recipe_name": "mxfp8"}
    elif t.precision == "nvfp4":
        notes.append("nvfp4: the cited job_config.py has no 4-bit training converter; the job trains in bf16")
    elif t.precision == "fp16":
        notes.append("fp16: TorchTitan's mixed_precision_param is bfloat16 or float32; the job trains in bf16")
    if t.accumulate_grads_in_fp32 is False:
        notes.append("16-bit gradient reduction: TorchTitan's mixed_precision_reduce is float32 only")
    notes.append("the model shape is TorchTitan's [model] name and flavor (e.g. llama3 / 405B); the planner's "
                 f"shape is {a.n_layers} layers x hidden {a.hidden_size}")
    return job


def _split_points(sc: Scenario, lay: Layout) -> list[str]:
    """Module names starting each pipeline stage after the first when the split is uneven ("layers.k"), in model
    order: under a looped (interleaved) schedule model chunk j runs on rank j % pp as its (j // pp)-th chunk, with the
    chunk sizes the engine times (engine.physics.schedule.chunk_layers)."""
    if lay.first_stage_layers is None and lay.last_stage_layers is None:
        return []
    first, middle, last = _split(sc, lay)
    ranks = [chunk_layers(first, lay.virtual_stages, "first")]
    ranks += [chunk_layers(middle, lay.virtual_stages, "middle")] * (lay.pp - 2)
    ranks += [chunk_layers(last, lay.virtual_stages, "last")]
    chunks = [ranks[j % lay.pp][j // lay.pp] for j in range(lay.pp * lay.virtual_stages)]
    points, at = [], 0
    for c in chunks[:-1]:
        at += c
        points.append(f"layers.{at}")
    return points


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def _torchtitan(sc: Scenario, lay: Layout, notes: list[str]) -> str:
    job = torchtitan_job(sc, lay, notes)
    out = ["# TorchTitan job config for the planner's layout (torchtitan/config/job_config.py, pytorch/torchtitan "
           "000204a4)", f"# {lay.n_gpus} GPUs: tp {lay.tp} x pp {lay.pp} x dp {lay.dp} x cp {lay.cp}"]
    out += [f"# note: {n}" for n in notes]
    for section, keys in job.items():
        out += ["", f"[{section}]"] + [f"{k} = {_toml_value(v)}" for k, v in keys.items()]
    return "\n".join(out) + "\n"


# --- DeepSpeed --------------------------------------------------------------------------------------------------------

def deepspeed_config(sc: Scenario, lay: Layout, notes: list[str]) -> dict:
    """The DeepSpeed JSON config of the layout. Tensor, pipeline and context parallelism are Megatron-DeepSpeed
    launcher arguments, not JSON keys: they go into `notes`."""
    t = sc.training
    per_step = lay.micro_batch_size * lay.dp
    if t.global_batch_size % per_step:
        raise ScenarioError([("layout.micro_batch_size", f"global batch {t.global_batch_size} is not a multiple of "
                                                         f"micro_batch_size x dp = {per_step}")])
    cfg = {"train_batch_size": t.global_batch_size, "train_micro_batch_size_per_gpu": lay.micro_batch_size,
           "gradient_accumulation_steps": t.global_batch_size // per_step,
           "bf16": {"enabled": t.precision not in ("fp16", "fp32")}, "fp16": {"enabled": t.precision == "fp16"},
           "zero_optimization": {"stage": lay.zero_stage, "overlap_comm": True, "contiguous_gradients": True}}
    if t.optimizer == "sgd":
        notes.append("optimizer sgd: DeepSpeed's optimizer block is left to the training script")
    if lay.tp > 1 or lay.pp > 1 or lay.cp > 1 or lay.ep > 1:
        notes.append(f"tp {lay.tp}, pp {lay.pp}, cp {lay.cp}, ep {lay.ep} are not DeepSpeed JSON keys: pass them to "
                     "Megatron-DeepSpeed as --tensor-model-parallel-size, --pipeline-model-parallel-size, ... (the "
                     "megatron format lists them)")
    if lay.virtual_stages > 1:
        notes.append(f"virtual_stages {lay.virtual_stages}: DeepSpeed's pipeline engine has no interleaved schedule; "
                     "it runs 1F1B with a larger bubble than the estimate assumed")
    if lay.recompute != "none":
        notes.append(f"recompute {lay.recompute}: DeepSpeed's activation_checkpointing block only configures "
                     "deepspeed.checkpointing; the model script chooses what to recompute")
    if t.precision in ("fp8", "mxfp8", "nvfp4"):
        notes.append(f"{t.precision}: DeepSpeed's JSON has no low-precision matmul switch (Transformer Engine layers "
                     "in the model); the config trains in bf16")
    if lay.shard_group is not None:
        notes.append(f"shard_group {lay.shard_group} (hybrid sharding) is not exported: DeepSpeed's MiCS / ZeRO++ "
                     "partition sizes differ in what they replicate")
    if lay.tp_comm_overlap:
        notes.append("tp_comm_overlap has no DeepSpeed equivalent")
    if not sc.training.compiled:
        notes.append("torch_compile false: the estimate runs the model eagerly, as a script that never calls "
                     "engine.compile() does")
    else:
        notes.append("the estimate assumes fused element-wise kernels: Megatron-DeepSpeed's, or call "
                     "engine.compile() (DeepSpeedEngine.compile) on a plain PyTorch model")
    return cfg


def _deepspeed(sc: Scenario, lay: Layout, notes: list[str]) -> str:
    return json.dumps(deepspeed_config(sc, lay, notes), indent=2) + "\n"


# --- MaxText ----------------------------------------------------------------------------------------------------------

# The planner's presets that MaxText ships a model config for, by its name (MaxText/configs/models/<name>.yml at the
# cited commit's tree); any other model is written as its base_* shape
MAXTEXT_MODEL = {p: p for p in ("gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3.1-8b", "llama3.1-70b",
                                "llama3.1-405b", "mixtral-8x7b", "mixtral-8x22b", "qwen3-8b", "qwen3-32b",
                                "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-20b", "gpt-oss-120b", "gemma3-27b")}
MAXTEXT_MODEL |= {"deepseek-v3": "deepseek3-671b", "deepseek-r1": "deepseek3-671b", "kimi-k2": "kimi-k2-1t",
                  "llama4-scout": "llama4-17b-16e", "llama4-maverick": "llama4-17b-128e"}
# what each recompute mode keeps on the device, as MaxText's remat_policy names it: its `minimal` policy saves the
# weight matmuls' outputs and recomputes the attention core and element-wise work (the engine's selective on this
# stack, data/frameworks.json jax_maxtext), `full` keeps only each layer's input, and keeping everything is a `custom`
# policy with every named tensor on the device
REMAT_CUSTOM_TENSORS = ("decoder_layer_input", "context", "mlpwi", "mlpwo", "qkv_proj", "out_proj")


def slice_chips(sc: Scenario) -> int:
    """Chips of one MaxText slice (its ICI axes' product): the accelerator's largest scale-up domain
    (data/networks.json max_domain_accelerators: a TPU pod) when the cluster is larger, else the whole cluster; on
    accelerators without such a domain (GPUs) one node, the rest over the data-center network."""
    cat = load_catalog()
    acc = cat.accelerator(sc.cluster.accelerator)
    domain = cat.networks[acc.intra_node_link.network].max_domain_accelerators or acc.gpus_per_node
    n = sc.cluster.n_gpus
    if n <= domain:
        return n
    return max(k for k in range(1, domain + 1) if n % k == 0)


def _axis(name: str, degree: int, rest: int, out: dict, notes: list[str]) -> int:
    """Place one parallel degree on ICI as far as the slice allows and the remainder on DCN; the ICI room left."""
    ici = next(k for k in range(min(degree, rest), 0, -1) if degree % k == 0 and rest % k == 0)
    if degree > 1 or name in ("data", "fsdp"):
        out[f"ici_{name}_parallelism"] = ici
        out[f"dcn_{name}_parallelism"] = degree // ici
    if name in ("tensor", "context", "expert") and degree // ici > 1:
        notes.append(f"{name} parallelism {degree} spans {degree // ici} slices over the data-center network (DCN), "
                     "which MaxText does not recommend; the estimate priced its collectives over that network too")
    return rest // ici


def maxtext_overrides(sc: Scenario, lay: Layout, notes: list[str]) -> dict[str, object]:
    """The MaxText base.yml overrides of the layout, training and model shape (key -> value)."""
    a, t = sc.arch, sc.training
    n = lay.n_gpus
    micro = t.global_batch_size // (lay.dp * lay.micro_batch_size)
    if micro * lay.dp * lay.micro_batch_size != t.global_batch_size:
        raise ScenarioError([("layout.micro_batch_size", f"global batch {t.global_batch_size} is not a multiple of "
                                                         f"micro_batch_size x dp = {lay.micro_batch_size * lay.dp}")])
    acc = load_catalog().accelerator(sc.cluster.accelerator)
    out: dict[str, object] = {"run_name": f"planner-{getattr(sc.model, 'preset', 'model')}",
                              "hardware": "tpu" if acc.vendor == "Google" else "gpu_multiprocess"}
    preset = getattr(sc.model, "preset", None)
    if preset in MAXTEXT_MODEL:
        out["model_name"] = MAXTEXT_MODEL[preset]
    else:
        out |= {"base_emb_dim": a.hidden_size, "base_num_query_heads": a.n_heads, "base_num_kv_heads": a.kv_heads,
                "base_mlp_dim": a.dense_ffn_hidden_size or a.ffn_hidden_size, "base_num_decoder_layers": a.n_layers,
                "head_dim": a.attn_head_dim, "vocab_size": a.vocab_size}
        if a.is_moe:
            out |= {"num_experts": a.n_experts, "num_experts_per_tok": a.experts_per_token,
                    "base_moe_mlp_dim": a.ffn_hidden_size}
        notes.append("no MaxText model config for this model: its shape is written as base_* keys on MaxText's default "
                     "decoder_block (llama2); set decoder_block for another architecture")
    out |= {"max_target_length": t.seq_len, "steps": train_steps(sc)}
    # parallel axes: ICI within a slice, DCN across slices (data parallelism first, as MaxText recommends)
    chips = slice_chips(sc)
    if chips < n:
        notes.append(f"{n:,} chips run as {n // chips} slices of {chips:,} ({acc.id}'s largest scale-up domain): "
                     "MaxText's ICI axes cover one slice, its DCN axes the slices")
    room = chips
    for name, degree in (("tensor", lay.tp), ("context", lay.cp), ("expert", lay.ep if a.is_moe else 1),
                         ("pipeline", lay.pp)):
        room = _axis(name, degree, room, out, notes)
    if lay.zero_stage == 0:
        _axis("fsdp", 1, room, out, notes)
        _axis("data", lay.dp, room, out, notes)
    else:
        shard = lay.shard_group or lay.dp
        room = _axis("fsdp", shard, room, out, notes)
        _axis("data", lay.dp // shard, room, out, notes)
        if lay.zero_stage in (1, 2):
            out["model_fsdp_ag_once"] = True
            if lay.zero_stage == 2:
                notes.append("zero_stage 2: MaxText's model_fsdp_ag_once gathers the weights once per step and keeps "
                             "the gradients sharded (ZeRO-1/2 alike)")
    if lay.pp > 1:
        per_step = lay.pp * lay.virtual_stages
        if a.n_layers % per_step or lay.first_stage_layers is not None or lay.last_stage_layers is not None:
            raise ScenarioError([("layout", f"MaxText's SPMD pipeline needs the {a.n_layers} layers split evenly over "
                                            f"pp x virtual_stages = {per_step} chunks (no uneven first or last stage)")])
        out |= {"num_layers_per_pipeline_stage": a.n_layers // per_step, "num_pipeline_repeats": lay.virtual_stages,
                "num_pipeline_microbatches": micro, "per_device_batch_size": _number(t.global_batch_size / n),
                "scan_layers": False}
        if micro % lay.pp:
            notes.append(f"{micro} micro-batches per step: MaxText needs num_pipeline_microbatches to be a multiple "
                         f"of the {lay.pp} stages")
    else:
        out["per_device_batch_size"] = _number(t.global_batch_size / (n * micro))
        if micro > 1:
            out["gradient_accumulation_steps"] = micro
    if lay.recompute == "none":
        out["remat_policy"] = "custom"
        out |= {tensor: "device" for tensor in REMAT_CUSTOM_TENSORS}
    else:
        out["remat_policy"] = "minimal" if lay.recompute == "selective" else "full"
    if lay.offload != "none":
        out["optimizer_memory_host_offload"] = True
        if lay.offload == "optimizer_and_params":
            out["parameter_memory_host_offload"] = True
    if t.optimizer == "sgd":
        out["opt_type"] = "sgd"
    if t.precision == "fp8":
        if acc.vendor in ("NVIDIA", "AMD"):
            out["quantization"] = "fp8" if acc.vendor == "NVIDIA" else "nanoo_fp8"
        else:
            notes.append(f"fp8: MaxText's 8-bit training on {acc.vendor} is AQT int8 (training.precision int8, "
                         "quantization=int8); the command trains in bf16")
    elif t.precision == "int8":
        out["quantization"] = "int8"
    elif t.precision in ("fp16", "fp32"):
        out["dtype"] = {"fp16": "float16", "fp32": "float32"}[t.precision]
    elif t.precision in ("mxfp8", "nvfp4"):
        notes.append(f"{t.precision}: MaxText has no {t.precision} training recipe at the cited commit; the command "
                     "trains in bf16")
    if lay.tp > 1 and lay.tp_comm_overlap and acc.vendor == "Google":
        notes.append("tp_comm_overlap: XLA's collective matmul is a LIBTPU_INIT_ARGS flag, not a base.yml key")
    if a.is_moe and lay.expert_tp not in (None, lay.tp):
        notes.append(f"expert_tp {lay.expert_tp}: MaxText shards experts over its expert axis only")
    if t.method != "pretrain":
        notes.append(f"training.method {t.method}: the command pre-trains; MaxText's fine-tuning entry points take "
                     "the same axes")
    return out


def _number(x: float):
    return int(x) if float(x).is_integer() else round(x, 6)


def _maxtext(sc: Scenario, lay: Layout, notes: list[str]) -> str:
    keys = maxtext_overrides(sc, lay, notes)
    out = ["#!/bin/bash", "# MaxText run of the planner's layout: overrides of MaxText/configs/base.yml "
           "(AI-Hypercomputer/maxtext 315ebb59)", f"# {lay.n_gpus} chips: tp {lay.tp} x pp {lay.pp} x dp {lay.dp} "
           f"x cp {lay.cp}"]
    out += [f"# note: {n}" for n in notes]
    out.append("python3 -m MaxText.train MaxText/configs/base.yml \\")
    out += [f"  {k}={_shell(str(v).lower() if isinstance(v, bool) else str(v))} \\" for k, v in keys.items()]
    out[-1] = out[-1].removesuffix(" \\")
    return "\n".join(out) + "\n"
