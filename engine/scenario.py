"""The scenario: what a planner enters, its schema and the checks against the catalog and the layout rules, with
messages that name the field and what would be valid. Reading one from outside, with the checks that need the price
and carbon tables as well, is engine.inputs.parse_scenario."""
from __future__ import annotations

import math
from functools import lru_cache

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from engine.catalog import load_catalog
from engine.physics.model import ModelArch
from engine.precision import PRECISION_DTYPE, Precision  # PRECISION_DTYPE is looked up here by pages and the engine
from engine.physics.schedule import SplitError, split_options, stage_layers


class ScenarioError(ValueError):
    """An impossible or malformed scenario; `problems` lists (field path, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {msg}" for field, msg in problems))


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
    intra_node_latency_us: float | None = Field(default=None, gt=0, le=10_000, description="measured latency of one ring step inside a node, us (replaces NCCL's tuning-model figure)")
    inter_node_latency_us: float | None = Field(default=None, gt=0, le=100_000, description="measured latency of one ring step across nodes, us")


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
    tp_comm_overlap: bool = Field(default=False, description=(
        "overlap tensor-parallel collectives with the matmuls around them (Transformer Engine userbuffers); the "
        "overlap is not free: the matmuls slow down while the collectives run"))


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


def _choices(values) -> str:
    values = list(values)
    return ", ".join(str(v) for v in values[:40]) + (" ..." if len(values) > 40 else "")


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


@lru_cache(maxsize=65536)
def divisors(n: int) -> list[int]:
    """All divisors of n, ascending (pairs up to sqrt(n), so a batch of 10^8 costs 10^4 steps)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def layout_problems(sc: Scenario, lay: Layout) -> list[tuple[str, str]]:
    """Why this layout cannot run this model on this cluster (empty when it can)."""
    arch, tr, n = sc.arch, sc.training, sc.cluster.n_gpus
    p: list[tuple[str, str]] = []
    prod = lay.tp * lay.pp * lay.dp * lay.cp
    if prod != n:
        rest = lay.tp * lay.pp * lay.cp
        hint = f"; with tp={lay.tp}, pp={lay.pp}, cp={lay.cp} use dp={n // rest}" if n % rest == 0 else ""
        p.append(("layout.dp", f"tp*pp*dp*cp = {lay.tp}*{lay.pp}*{lay.dp}*{lay.cp} = {prod} but cluster.n_gpus = {n}{hint}"))
    dense_ffn = arch.dense_ffn_hidden_size or arch.ffn_hidden_size
    widths = [("n_heads", arch.n_heads, "attention heads"), ("n_kv_heads", arch.kv_heads, "key/value heads")]
    if not arch.is_moe or arch.n_dense_layers:
        widths.append(("dense_ffn_hidden_size" if arch.is_moe else "ffn_hidden_size", dense_ffn, "MLP width"))
    if arch.is_moe and arch.n_shared_experts:
        widths.append(("n_shared_experts*ffn_hidden_size", arch.n_shared_experts * arch.ffn_hidden_size, "shared-expert width"))
    for field, value, what in widths:
        if value % lay.tp:
            valid = [d for d in divisors(arch.n_heads) if all(v % d == 0 for _, v, _ in widths)]
            p.append(("layout.tp", f"tp={lay.tp} does not divide {field}={value} ({what}); valid tp: {_choices(valid)}"))
            break
    try:
        stage_layers(arch.n_layers, lay.pp, lay.virtual_stages, lay.first_stage_layers, lay.last_stage_layers)
    except SplitError as err:
        field = ("layout.virtual_stages" if lay.virtual_stages > 1 and "virtual" in str(err) else
                 "layout.first_stage_layers" if lay.first_stage_layers is not None or lay.last_stage_layers is not None
                 else "layout.pp")
        hint = ""
        if lay.first_stage_layers is None and lay.last_stage_layers is None and lay.pp > 1:
            uneven = [(f, l_) for f, l_ in split_options(arch.n_layers, lay.pp) if f is not None]
            hint = f"; even splits: pp*virtual_stages one of {_choices(divisors(arch.n_layers))}"
            if uneven:
                hint += f"; or split unevenly, e.g. first_stage_layers={uneven[0][0]}, last_stage_layers={uneven[0][1]}"
        p.append((field, f"n_layers={arch.n_layers}: {err}{hint}"))
    per_step = lay.dp * lay.micro_batch_size
    if tr.global_batch_size % per_step:
        valid = [b for b in divisors(max(1, tr.global_batch_size // lay.dp)) ] if tr.global_batch_size % lay.dp == 0 else []
        hint = f"; with dp={lay.dp} valid micro_batch_size: {_choices(valid)}" if valid else \
            f"; dp={lay.dp} does not divide the global batch at all"
        p.append(("layout.micro_batch_size", f"global_batch_size={tr.global_batch_size} is not divisible by "
                                             f"dp*micro_batch_size = {lay.dp}*{lay.micro_batch_size}{hint}"))
    expert_tp = lay.expert_tp or lay.tp
    if lay.ep > 1 or lay.expert_tp is not None:
        if arch.n_experts == 1:
            p.append(("layout.ep" if lay.ep > 1 else "layout.expert_tp",
                      "expert parallelism needs an MoE model (n_experts > 1)"))
        else:
            if arch.n_experts % lay.ep:
                p.append(("layout.ep", f"ep={lay.ep} does not divide n_experts={arch.n_experts}; valid ep: "
                                       f"{_choices(divisors(arch.n_experts))}"))
            if arch.ffn_hidden_size % expert_tp:
                p.append(("layout.expert_tp", f"expert_tp={expert_tp} does not divide the expert width "
                                              f"ffn_hidden_size={arch.ffn_hidden_size}"))
            ranks = lay.tp * lay.cp * lay.dp
            if ranks % (lay.ep * expert_tp):
                p.append(("layout.ep", f"ep*expert_tp = {lay.ep}*{expert_tp} must divide tp*cp*dp = {ranks} (expert "
                                       "groups fold over the tensor-, context- and data-parallel ranks)"))
    if lay.shard_group is not None:
        if lay.zero_stage == 0:
            p.append(("layout.shard_group", "a shard group needs zero_stage 1, 2 or 3"))
        elif (lay.dp * lay.cp) % lay.shard_group:
            p.append(("layout.shard_group", f"shard_group={lay.shard_group} must divide dp*cp = {lay.dp * lay.cp}; "
                                            f"valid: {_choices(divisors(lay.dp * lay.cp))}"))
    if not lay.reshard_after_forward and lay.zero_stage < 3:
        p.append(("layout.reshard_after_forward", "keeping gathered weights (false) applies to zero_stage 3 only"))
    if lay.tp_comm_overlap and (lay.tp == 1 or not lay.sequence_parallel):
        p.append(("layout.tp_comm_overlap", "tensor-parallel overlap needs tp > 1 and sequence_parallel"))
    if lay.cp > 1 and tr.seq_len % lay.cp:
        p.append(("layout.cp", f"cp={lay.cp} does not divide seq_len={tr.seq_len}; valid cp: {_choices(divisors(tr.seq_len)[:20])}"))
    return p
