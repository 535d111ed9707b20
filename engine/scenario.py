"""The scenario: what a planner enters, its schema and the checks against the catalog and the layout rules, with
messages that name the field and what would be valid. Reading one from outside, with the checks that need the price
and carbon tables as well, is engine.inputs.parse_scenario."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator

from engine.catalog import load_catalog
from engine import frameworks
from engine.frameworks import Framework
from engine.physics import finetune
from engine.physics.model import ModelArch, shape_of
from engine.precision import PRECISION_DTYPE, Precision  # PRECISION_DTYPE is looked up here by pages and the engine
from engine.physics import layout_rules
from engine.physics.layout_rules import divisors, listing as _choices  # divisors is looked up here by the planner


class ScenarioError(ValueError):
    """An impossible or malformed scenario; `problems` lists (field path, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {msg}" for field, msg in problems))


class SchemaError(ScenarioError):
    """A scenario that does not match the schema (a wrong type, an unknown field, a value out of its range): the
    HTTP API answers it with 422, any other ScenarioError (catalog, prices, layout rules) with 400."""


class PresetRef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    preset: str = Field(min_length=1, max_length=100)


class Training(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    seq_len: int = Field(ge=1, le=10_000_000, description="tokens per sequence")
    global_batch_size: int = Field(ge=1, le=100_000_000, description="sequences per optimizer step")
    total_tokens: float = Field(gt=0, le=1e16, description="tokens to train on")
    precision: Precision = Field(default="bf16", description=(
        "number format of the matmuls: bf16/fp16 mixed precision, fp32, fp8 (per-tensor scaling), mxfp8 (32-element "
        "blocks) or nvfp4 (4-bit, 16-element blocks; MXFP4 on AMD); see data/precisions.json"))
    optimizer: Literal["adam", "sgd"] = "adam"
    attention: Literal["flash", "standard"] = Field(
        default="flash", description="flash: fused attention without the s x s score matrix (FlashAttention); "
                                     "standard: materialised softmax (Megatron-LM before 2022)")
    accumulate_grads_in_fp32: bool | None = Field(default=None, description=(
        "keep, accumulate and reduce the gradients in fp32 (Megatron-LM --accumulate-allreduce-grads-in-fp32, 4 bytes "
        "per parameter) rather than in the 16-bit training format (2 bytes); default: 16-bit, as the tuned recipes "
        "reduce them (engine.physics.memory.grads_in_fp32)"))
    method: Literal["pretrain", "full", "lora", "qlora"] = Field(default="pretrain", description=(
        "pretrain: train every weight from scratch; full: fine-tune every weight of a trained model; lora: train "
        "low-rank adapters beside frozen 16-bit base weights (Hu et al. 2021, arXiv 2106.09685); qlora: the same with "
        "the base stored in 4-bit NF4 (Dettmers et al. 2023, arXiv 2305.14314); see engine/physics/finetune.py"))
    lora_rank: int = Field(default=16, ge=1, le=65_536, description=(
        "rank r of each LoRA adapter (r x (d_in + d_out) parameters per targeted matrix); 16 as MLPerf's "
        "Llama-2-70B LoRA reference (lora_r 16); used by lora and qlora"))
    lora_targets: Literal["attention", "all_linear"] = Field(default="attention", description=(
        "matrices the adapters attach to: attention = the query, key, value and output projections (MLPerf's "
        "reference: lora_target_modules qkv_proj,o_proj); all_linear = also every MLP/expert matrix (QLoRA's "
        "setting; PEFT target_modules='all-linear', the output layer excluded)"))
    epochs: float = Field(default=1.0, gt=0, le=1_000_000, description=(
        "passes over the data: the tokens trained are total_tokens (the dataset's tokens) x epochs"))
    expert_load_ratio: float = Field(default=1.0, ge=1.0, le=1024.0, description=(
        "MoE routing: tokens the busiest routed expert receives over the mean expert's, per layer and micro-batch; "
        "1 = balanced, as NeMo's and MLPerf's benchmarks force it (and as the calibration runs ran). The busiest "
        "expert-parallel rank then computes, stores and receives more than the others, and every rank waits for it. "
        "At most n_experts / experts_per_token; MoE models only"))
    memory_headroom_fraction: float | None = Field(default=None, ge=0, le=0.5, description=(
        "share of each accelerator's memory that recommended layouts keep free for the allocator's reserve and "
        "transient peaks, beyond the estimate; default: from published measurements (data/memory_headroom.json)"))
    framework: Framework | None = Field(default=None, description=(
        "training software stack: megatron_core (Megatron-Core / NeMo), pytorch_fsdp2 (TorchTitan-style FSDP2, TP, PP, "
        "CP; torchao float8), deepspeed (ZeRO), jax_maxtext (TPU); unset: an estimate takes what the accelerator's "
        "vendor ran in its own MLPerf submissions, and the layout search and the plan choose among the stacks that "
        "run on the vendor with a level fitted for the accelerator (data/frameworks.json runs_on, levels)"))
    torch_compile: bool | None = Field(default=None, description=(
        "PyTorch stacks (training.framework pytorch_fsdp2 or deepspeed): false trains the model eagerly, each "
        "element-wise op a kernel of its own (RMSNorm's fp32 steps, the rotary embedding, the gated activation: "
        "engine.physics.compute), and TorchTitan's async TP, a compiler pass, hides nothing; true or unset: fused, as "
        "the stack's level was measured. Megatron-Core and MaxText fuse those ops themselves (Transformer Engine, "
        "XLA): leave it unset there"))

    @property
    def fine_tune(self) -> bool:
        """Whether the run fine-tunes a trained model (full, lora, qlora) rather than pre-training one."""
        return self.method != "pretrain"

    @property
    def adapters(self) -> bool:
        """Whether the base weights are frozen and only LoRA adapters train (lora, qlora)."""
        return self.method in ("lora", "qlora")

    @property
    def compiled(self) -> bool:
        """Whether the element-wise ops run fused (torch.compile, or the stack's own fused kernels): False only where a
        PyTorch stack is told to run eagerly (torch_compile false)."""
        return self.torch_compile is not False

    @property
    def trained_tokens(self) -> float:
        """Tokens the run trains on: the dataset's tokens (total_tokens) times the epochs."""
        return self.total_tokens * self.epochs

    @field_validator("torch_compile")
    @classmethod
    def _compile_is_a_pytorch_setting(cls, value, info):
        framework = info.data.get("framework")
        if value is not None and (framework is None or frameworks.stack(framework).torch_compile is None):
            torch_stacks = [r.id for r in frameworks.frameworks().rows if r.torch_compile is not None]
            where = (f"{frameworks.stack(framework).short_name} fuses its element-wise kernels itself"
                     if framework else "no training.framework is named")
            raise ValueError(f"torch_compile applies to the PyTorch stacks ({', '.join(torch_stacks)}) and {where}; "
                             "name one of them as training.framework, or leave torch_compile unset")
        return value

    @field_validator("accumulate_grads_in_fp32")
    @classmethod
    def _fp32_training_has_fp32_grads(cls, value, info):
        if value is False and info.data.get("precision") == "fp32":
            raise ValueError("fp32 training keeps fp32 gradients; 16-bit gradients need a 16-bit or lower precision")
        return value


class Cluster(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    accelerator: str = Field(min_length=1, max_length=100)
    n_gpus: int = Field(ge=1, le=10_000_000)
    gpus_per_node: int | None = Field(default=None, ge=1, le=100_000)
    intra_node_bw_gbs: float | None = Field(default=None, gt=0, le=100_000, description="line rate per GPU per direction, replaces the catalog's")
    inter_node_bw_gbs: float | None = Field(default=None, gt=0, le=100_000, description="network per GPU per direction, replaces the catalog's")
    matmul_efficiency: float | None = Field(default=None, gt=0, le=1, description="measured matmul FLOP/s over peak, replaces the published default")
    intra_node_busbw_gbs: float | None = Field(default=None, gt=0, le=100_000, description="measured collective bus bandwidth inside a node")
    inter_node_busbw_gbs: float | None = Field(default=None, gt=0, le=100_000, description="measured collective bus bandwidth per GPU across nodes")
    host_memory_gb_per_gpu: float | None = Field(default=None, ge=0, le=100_000, description=(
        "CPU memory of a server divided by its GPUs, GB, which offloaded states must fit in; replaces the catalog's "
        "reference-server figure (data/accelerators.json host_memory_gb_per_gpu)"))
    intra_node_latency_us: float | None = Field(default=None, gt=0, le=10_000, description="measured latency of one ring step inside a node, us (replaces NCCL's tuning-model figure)")
    inter_node_latency_us: float | None = Field(default=None, gt=0, le=100_000, description="measured latency of one ring step across nodes, us")
    level_scale: float | None = Field(default=None, gt=0, le=5, description=(
        "measured in-training level over the stack's fitted one on this cluster: the factor that makes the engine "
        "reproduce a trusted step-time log of a real run (benchmarks_db/step_time.py); multiplies the sustained level"))


class Layout(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tp: int = Field(default=1, ge=1, le=100_000)
    pp: int = Field(default=1, ge=1, le=100_000)
    dp: int = Field(default=1, ge=1, le=10_000_000)
    cp: int = Field(default=1, ge=1, le=100_000)
    ep: int = Field(default=1, ge=1, le=100_000)
    micro_batch_size: int = Field(default=1, ge=1, le=1_000_000)
    virtual_stages: int = Field(default=1, ge=1, le=10_000)
    zero_stage: int = Field(default=0, ge=0, le=3, description="ZeRO stage: 1 shards optimizer states, 2 also gradients, "
                                                                 "3 also weights (FSDP) over the data-parallel ranks")
    sequence_parallel: bool = False
    recompute: Literal["none", "selective", "full"] = "none"
    expert_tp: int | None = Field(default=None, ge=1, le=100_000, description=(
        "tensor parallelism inside the MoE experts (Megatron-LM MoE parallel folding: expert groups span data-, "
        "context- and tensor-parallel ranks, so ep may exceed dp); defaults to tp"))
    first_stage_layers: int | None = Field(default=None, ge=0, le=10_000, description=(
        "transformer layers on the first pipeline stage (Megatron-LM --decoder-first-pipeline-num-layers); the "
        "embedding shares that stage; the other stages split the rest evenly"))
    last_stage_layers: int | None = Field(default=None, ge=0, le=10_000, description=(
        "transformer layers on the last pipeline stage, which also holds the output layer and the loss "
        "(--decoder-last-pipeline-num-layers)"))
    reshard_after_forward: bool = Field(default=True, description=(
        "ZeRO-3/FSDP: free each layer's gathered weights after its forward and gather them again for the backward; "
        "false keeps them to the end of the micro-batch's backward (FSDP without resharding, as Llama 3 ran)"))
    shard_group: int | None = Field(default=None, ge=1, le=10_000_000, description=(
        "hybrid sharding (HSDP): shard the ZeRO states within groups of this many data-parallel ranks and replicate "
        "across groups; default: shard over every data-parallel rank"))
    offload: Literal["none", "optimizer", "optimizer_and_params"] = Field(default="none", description=(
        "ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840): gradients go to CPU memory, the optimizer steps on the "
        "CPU and updated weights come back over the host link (needs zero_stage >= 1); optimizer_and_params: "
        "ZeRO-Infinity (Rajbhandari et al. 2021, arXiv 2104.07857) also keeps the 16-bit weights in CPU memory and "
        "fetches each layer's over the host link when it runs (needs zero_stage 3)"))
    tp_comm_overlap: bool = Field(default=False, description=(
        "overlap tensor-parallel collectives with the matmuls around them (Transformer Engine userbuffers); the "
        "overlap is not free: the matmuls slow down while the collectives run"))
    moe_a2a_overlap: bool = Field(default=False, description=(
        "overlap the MoE all-to-all of one micro-batch with another micro-batch's compute (Megatron-Core "
        "--overlap-moe-expert-parallel-comm: forward and backward of two micro-batches interleaved, each dispatch or "
        "combine behind the other's attention or MLP); needs ep > 1 and, with pipelining, interleaved stages"))

    @property
    def n_gpus(self) -> int:
        """The GPUs the layout runs on: the product of its parallel degrees (experts are spread within them)."""
        return self.tp * self.pp * self.dp * self.cp


class Site(BaseModel):
    """Where the run happens and what its machines draw (energy and CO2); defaults from data/energy_defaults.json."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    region: str | None = Field(default=None, min_length=2, max_length=60, description=(
        "grid location: ISO 3166 alpha-3 country (FRA), US state (US-VA), or cloud region (gcp:us-central1, aws:us-east-1, "
        "azure:eastus); the world average when absent"))
    pue: float | None = Field(default=None, ge=1.0, le=3.0, description="facility power usage effectiveness (>= 1)")
    carbon_intensity_g_per_kwh: float | None = Field(default=None, ge=0, le=2000, description="location-based grid intensity, gCO2e/kWh, replaces the region's")
    market_based_g_per_kwh: float | None = Field(default=None, ge=0, le=2000, description="market-based intensity of the contracted supply (e.g. 0 for matched renewables), gCO2e/kWh")
    accelerator_power_w: float | None = Field(default=None, gt=0, le=5000, description="measured average power per accelerator, W; replaces TDP x utilisation factor")
    utilisation_factor: float | None = Field(default=None, gt=0, le=1, description="average power over TDP during training")
    host_power_w_per_gpu: float | None = Field(default=None, ge=0, le=10000, description="host/node power (CPUs, memory, NICs, fans) per accelerator, W")


class OnPremCost(BaseModel):
    """Total-cost-of-ownership inputs for owned hardware; defaults from data/tco_defaults.json."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    server_capex_usd: float | None = Field(default=None, gt=0, le=1e8, description="price of one GPU server, USD")
    gpus_per_server: int | None = Field(default=None, ge=1, le=1000)
    network_fraction: float | None = Field(default=None, ge=0, lt=1, description="cluster network as a fraction of total hardware cost")
    storage_capex_usd_per_gpu: float | None = Field(default=None, ge=0, le=1e7, description="storage capex per GPU, USD")
    depreciation_years: float | None = Field(default=None, gt=0, le=20)
    utilisation: float | None = Field(default=None, gt=0, le=1, description="fraction of the year the owned GPUs do paid work")
    power_usd_per_kwh: float | None = Field(default=None, ge=0, le=5, description="electricity price, USD/kWh")
    ops_usd_per_gpu_year: float | None = Field(default=None, ge=0, le=1e7, description="staff, colocation and maintenance per GPU-year, USD")


class Cost(BaseModel):
    """Which price the run's cost uses: an explicit price, a row of data/prices.json, or the on-premises TCO."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    basis: Literal["cloud", "on_prem"] = Field(default="cloud", description="cost_usd from a cloud price or from owning the hardware")
    price_usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=1000, description="explicit cloud price, USD per GPU-hour")
    provider: str | None = Field(default=None, min_length=2, max_length=40, description="price table provider (aws, azure, gcp, lambda, ...)")
    region: str | None = Field(default=None, min_length=2, max_length=40, description="price table region (us-east-1, eastus, ...)")
    pricing: Literal["on_demand", "reserved_1y", "reserved_3y", "reserved", "spot"] = "on_demand"
    on_prem: OnPremCost | None = None


class ReliabilityInputs(BaseModel):
    """Failure and checkpoint inputs for goodput; defaults from data/reliability.json (Llama 3)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    mtbf_gpu_hours: float | None = Field(default=None, gt=0, le=1e9, description="mean time between interruptions per GPU, hours")
    storage_write_gb_per_s: float | None = Field(default=None, gt=0, le=1e6, description="checkpoint write bandwidth of the whole cluster, GB/s")
    checkpoint_write_s: float | None = Field(default=None, ge=0, le=1e6, description="measured blocking checkpoint time, s; replaces size / bandwidth")
    checkpoint_interval_s: float | None = Field(default=None, gt=0, le=1e8, description="fixed checkpoint interval, s; Young's optimum when absent")
    restart_s: float | None = Field(default=None, ge=0, le=1e6, description="time from a failure to resumed training, s")


class Phase(BaseModel):
    """A stretch of the run trained at another sequence length or batch (batch-size ramp-up, long-context stages);
    its tokens are part of training.total_tokens and it runs on the same cluster with its own best layout."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, max_length=60)
    tokens: float = Field(gt=0, le=1e16, description="tokens trained in this phase (part of training.total_tokens)")
    seq_len: int | None = Field(default=None, ge=1, le=10_000_000, description="defaults to training.seq_len")
    global_batch_size: int | None = Field(default=None, ge=1, le=100_000_000, description="defaults to training.global_batch_size")


class Schedule(BaseModel):
    """What a whole training run spends beyond its optimizer steps; defaults in data/schedule.json."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    eval_interval_steps: int | None = Field(default=None, ge=1, le=10_000_000, description="training steps between evaluations")
    eval_steps: int | None = Field(default=None, ge=0, le=10_000_000, description="forward-only steps per evaluation")
    phases: list[Phase] = Field(default_factory=list, max_length=8, description="ramp-up and long-context phases")


def _model_kind(value) -> str:
    if isinstance(value, PresetRef) or (isinstance(value, dict) and "preset" in value):
        return "preset"
    return "arch"


ModelSpec = Annotated[Union[Annotated[PresetRef, Tag("preset")], Annotated[ModelArch, Tag("arch")]], Discriminator(_model_kind)]


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    version: Literal[1] = 1
    model: ModelSpec
    training: Training
    cluster: Cluster
    layout: Layout | None = None
    cost: Cost | None = None
    site: Site | None = None
    reliability: ReliabilityInputs | None = None
    schedule: Schedule | None = None

    @property
    def arch(self) -> ModelArch:
        if isinstance(self.model, PresetRef):
            return load_catalog().models[self.model.preset].arch
        return self.model

    @property
    def gpus_per_node(self) -> int:
        return self.cluster.gpus_per_node or load_catalog().accelerator(self.cluster.accelerator).gpus_per_node


def schema_problems(err: ValidationError) -> list[tuple[str, str]]:
    """The schema's errors as (field, message), the union tags left out of the field paths."""
    out = []
    for e in err.errors(include_url=False, include_input=False):
        loc = [str(x) for x in e["loc"] if not str(x).startswith("function-")]
        if loc[:1] == ["model"] and len(loc) > 1 and loc[1] in ("preset", "arch"):
            del loc[1]                                 # the union's tag, not a field
        msg = e["msg"].removeprefix("Value error, ")
        out.append((".".join(loc) or "(scenario)", msg))
    return out


def raw_catalog_problems(data: dict) -> list[tuple[str, str]]:
    """Unknown preset or accelerator in input that failed schema validation elsewhere, so all problems show at once."""
    cat = load_catalog()
    out = []
    model, cluster = data.get("model"), data.get("cluster")
    if isinstance(model, dict) and isinstance(model.get("preset"), str) and model["preset"] not in cat.models:
        out.append(("model.preset", f"unknown preset {model['preset']!r}; known presets: {_choices(cat.models)}"))
    if isinstance(cluster, dict) and isinstance(cluster.get("accelerator"), str) and cluster["accelerator"] not in cat.accelerators:
        out.append(("cluster.accelerator", f"unknown accelerator {cluster['accelerator']!r}; known ids: {_choices(cat.accelerators)}"))
    return out


def catalog_problems(sc: Scenario) -> list[tuple[str, str]]:
    cat = load_catalog()
    problems = []
    if isinstance(sc.model, PresetRef) and sc.model.preset not in cat.models:
        problems.append(("model.preset", f"unknown preset {sc.model.preset!r}; known presets: {_choices(cat.models)}"))
    acc = cat.accelerators.get(sc.cluster.accelerator)
    if acc is None:
        problems.append(("cluster.accelerator", f"unknown accelerator {sc.cluster.accelerator!r}; known ids: {_choices(cat.accelerators)}"))
    elif acc.peak(PRECISION_DTYPE[sc.training.precision]) is None:
        ok = [p for p, d in PRECISION_DTYPE.items() if acc.peak(d) is not None]
        problems.append(("training.precision", f"{acc.id} has no published dense {sc.training.precision} peak; "
                                               f"supported precisions: {_choices(ok)}"))
    if sc.schedule is not None and sc.schedule.phases:
        phased = sum(p.tokens for p in sc.schedule.phases)
        if phased >= sc.training.total_tokens:
            problems.append(("schedule.phases", f"the phases train {phased:.3g} tokens, not less than "
                                                f"training.total_tokens = {sc.training.total_tokens:.3g}; phases are "
                                                "part of the run, the rest trains at the main sequence and batch"))
    return problems




def _expert_load_problems(sc: Scenario) -> list[tuple[str, str]]:
    """An expert load ratio on a dense model, or above what top-k routing allows (each token picks experts_per_token
    distinct experts, so one expert receives at most every token: n_experts / experts_per_token times the mean)."""
    ratio = sc.training.expert_load_ratio
    if ratio == 1.0 or (isinstance(sc.model, PresetRef) and sc.model.preset not in load_catalog().models):
        return []                                            # an unknown preset is named by catalog_problems
    arch = sc.arch
    if not arch.is_moe:
        return [("training.expert_load_ratio", f"expert_load_ratio={ratio:g} applies to mixture-of-experts models; "
                                               "this model has no routed experts: leave it at 1")]
    most = arch.n_experts / arch.experts_per_token
    if ratio > most:
        return [("training.expert_load_ratio", f"expert_load_ratio={ratio:g} exceeds {most:g}: with {arch.n_experts} "
                                               f"experts and {arch.experts_per_token} per token one expert receives at "
                                               f"most every token, {most:g} times the mean; choose 1-{most:g}")]
    return []


def training_problems(sc: Scenario) -> list[tuple[str, str]]:
    """What the fine-tuning method cannot do with this model (engine.physics.finetune): a LoRA rank at or above the
    narrowest targeted matrix's dimension is no low-rank adapter (Hu et al. 2021: r << min(d_in, d_out)), and QLoRA
    computes in a 16-bit or fp32 type (bitsandbytes bnb_4bit_compute_dtype), not in fp8 or fp4."""
    tr = sc.training
    problems = _expert_load_problems(sc)
    if not tr.adapters:
        return problems
    shape = shape_of(sc.arch)
    narrowest = finetune.smallest_target(shape, tr)
    if tr.lora_rank >= narrowest[1]:
        problems.append(("training.lora_rank", f"lora_rank={tr.lora_rank} is not below the {narrowest[0]} matrix's "
                                               f"smaller dimension {narrowest[1]}: the adapter would be no smaller "
                                               f"than the weight it adapts; choose lora_rank < {narrowest[1]} "
                                               "(LoRA uses 1-64)"))
    if tr.method == "qlora" and tr.precision not in ("bf16", "fp16", "fp32"):
        problems.append(("training.precision", f"qlora dequantizes its 4-bit base to a 16-bit or fp32 compute type; "
                                               f"precision {tr.precision!r} is not one; choose bf16, fp16 or fp32"))
    return problems


def stack_on(framework: str | None, accelerator: str) -> frameworks.Stack:
    """The software stack a scenario runs: the framework it names, else its accelerator vendor's default."""
    vendor = load_catalog().accelerator(accelerator).vendor
    return frameworks.stack(frameworks.stack_id(framework, vendor))


def scenario_stack(sc: Scenario) -> frameworks.Stack:
    """The scenario's software stack (stack_on)."""
    return stack_on(sc.training.framework, sc.cluster.accelerator)


def rule_facts(sc: Scenario, n_gpus: int) -> layout_rules.Facts:
    """What the layout rules read from the scenario on n_gpus accelerators, its stack's ZeRO stages included."""
    return layout_rules.facts_of(sc.arch, sc.training, n_gpus, scenario_stack(sc))


def layout_problems(sc: Scenario, lay: Layout) -> list[tuple[str, str]]:
    """Why this layout cannot run this model on this cluster and stack (empty when it can):
    engine.physics.layout_rules."""
    return layout_rules.problems(rule_facts(sc, sc.cluster.n_gpus), lay)
