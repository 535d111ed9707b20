"""Training software stacks as data (data/frameworks.json): what each stack does differently (how it recomputes, how
much of the tensor-parallel communication its overlap hides, how its fp8 recipe casts) and its fitted in-training level
per accelerator and precision class, each with the public runs it was fitted on.

One rule for calibration: a level is looked up for exactly the (stack, accelerator, precision class) asked for; where
none was fitted, the estimate is marked uncalibrated for this stack and precision (the widest range) and borrows, and
says which (never another accelerator's level in silence), the nearest level there is:
1. the same stack and precision class on another accelerator of the same architecture (the catalog's: B300 and GB300
   are one Blackwell Ultra die, B200 and GB200 one Blackwell die; the level is a share of each one's own datasheet
   peak, and the same kernels run on the same die);
2. at 4-bit, the same stack's 8-bit level on this accelerator (or its die): the engine prices a 4-bit recipe as the
   FP8 recipe with FP4 matmuls (engine.precision: FP8's matmul efficiency at the FP4 rate, 15% of the linear layers
   kept in BF16), so its software efficiency is FP8's or better (Megatron-Core's 4-bit levels on GB200 and GB300,
   fitted on NVIDIA's MLPerf v5.1 NVFP4 Llama 3.1 405B results, are 1.15x and 1.08x their FP8 levels; at
   Megatron-Core's H100 16-bit level those results were 16-29% slow; docs/validation.md);
3. another stack's level on this accelerator (or its die) and precision class, times this stack's level over that
   stack's at the fallback's accelerator (the H100), where both stacks were fitted at that precision class and the
   accelerator is of the H100's vendor: a stack's efficiency relative to another is its software (its kernels,
   casts and overlap over the same vendor libraries) and an accelerator's level relative to another is its
   hardware, so the two multiply (PyTorch FSDP on the A100: Megatron-Core's 0.824 there x FSDP2's 0.655 / Megatron's
   0.683 on the H100 = 0.790). Across vendors the libraries differ, so no ratio carries there;
4. the same stack at the fallback's accelerator and precision class (the H100 at 16-bit, where each stack is best
   measured): the stack's own software efficiency at the reference point rather than another stack's;
5. the documented fallback level (Megatron-Core on the H100 at 16-bit).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.catalog import DATA_DIR, Source, load_catalog

Framework = Literal["megatron_core", "pytorch_fsdp2", "deepspeed", "jax_maxtext"]
FRAMEWORKS: tuple[str, ...] = ("megatron_core", "pytorch_fsdp2", "deepspeed", "jax_maxtext")


# Rule 2 of the module's docstring: the precision class whose level a narrower one borrows on the same accelerator.
WIDER_CLASS = {"4bit": "8bit"}


class Fp8Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    recipe: str
    cast_passes: float = Field(gt=0, le=4, description=(
        "HBM passes over each quantized input relative to one fused cast (Transformer Engine fuses the cast into the "
        "norm or activation that produces the input: 1; torchao's dynamic scaling reads the input for its amax and "
        "again to cast it: 2)"))
    frozen_base_low_precision_only: bool = Field(default=False, description=(
        "under LoRA, the frozen base weights are stored in the low-precision training format only, with no 16-bit "
        "copy (NeMo's fp8_params in NVIDIA's MLPerf LoRA recipe); otherwise the 16-bit weights and their cast"))
    frozen_base_source: str = ""


class TorchCompile(BaseModel):
    """What running a PyTorch stack's model eagerly (training.torch_compile false) changes."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    eager_tp_overlap_share: float = Field(ge=0, le=1, description=(
        "tp_overlap_share without torch.compile (TorchTitan's async TP is a compiler pass: 0)"))
    note: str = Field(min_length=10)


class Recompute(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    selective: Literal["attention_core", "per_op_every_other_matmul"]
    note: str


class HeadDimRate(BaseModel):
    """The stack's attention kernel's rate at a head dimension over its rate at 128 (where the catalog's rates were
    measured), forward and backward, measured at a few head dimensions."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    fwd: dict[int, Annotated[float, Field(gt=0, le=2)]] = Field(min_length=1)
    bwd: dict[int, Annotated[float, Field(gt=0, le=2)]] = Field(min_length=1)
    source: str = Field(min_length=10)

    def at(self, head_dim: int) -> tuple[float, float]:
        """(forward, backward) rate multiples at head_dim: linear in log2(head dim) between the measured ones,
        held at the nearest measured one outside them."""
        def one(table: dict[int, float]) -> float:
            dims = sorted(table)
            x = math.log2(min(max(head_dim, dims[0]), dims[-1]))
            for lo, hi in zip(dims, dims[1:]):
                if math.log2(lo) <= x <= math.log2(hi):
                    t = (x - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
                    return table[lo] + t * (table[hi] - table[lo])
            return table[dims[0]]
        return one(self.fwd), one(self.bwd)


class Attention(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kernel: str
    of_catalog_rate: dict[str, float] = Field(description=(
        "by vendor: the stack's fused-attention rate over the catalog's (cuDNN on NVIDIA); 1 where not listed"))
    note: str
    head_dim_rate: HeadDimRate | None = Field(default=None, description=(
        "the kernel's rate by head dimension over its rate at 128 (None: no measurement, the rate at 128)"))


class RunsOn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    vendors: list[str] = Field(min_length=1, description="accelerator vendors (data/accelerators.json vendor) the stack "
                                                         "runs on")
    source: str = Field(min_length=10)


class Stack(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: Framework
    name: str
    runs_on: RunsOn
    sharding: str
    zero_stages: tuple[Literal[0, 1, 2, 3], ...] = Field(min_length=1, description=(
        "the data-parallel sharding modes the stack offers, as ZeRO stages (layout.zero_stage), ascending: the layout "
        "rules refuse the others (engine.physics.layout_rules STACK_ZERO), so the search never tries them and the "
        "Memory page does not offer them"))
    zero_stages_note: str = Field(min_length=10, description="the stack's own names for those modes, with the source")
    recompute: Recompute
    selective_recompute_matmul_share: float = Field(ge=0, le=1, description=(
        "share of the forward matmuls (and, when above 0, every element-wise op) that selective recompute runs again"))
    tp_overlap_share: float = Field(ge=0, le=1, description=(
        "share of the exposed tensor-parallel communication that the stack's overlap (tp_comm_overlap) hides"))
    tp_overlap_note: str
    attention: Attention
    moe_expert_kernels: Literal["host_per_expert", "grouped_on_device"] = Field(description=(
        "how the stack runs a MoE layer's local experts: host_per_expert, the host issues each expert's kernels once "
        "it has read the tokens per expert back from the device (a fixed cost per local expert); grouped_on_device, "
        "one grouped kernel per projection reads the per-expert offsets on the device (no per-expert fixed cost)"))
    moe_expert_gemm_fixed_us: float = Field(ge=0, le=1000, description=(
        "time each local expert's GEMM adds beyond its FLOPs and bytes, microseconds: the per-expert kernels around "
        "it (splits, casts, the grouped GEMM's per-expert setup) issued by the host after the token dispatcher's "
        "device-to-host synchronisation of the tokens per expert, while the GPU waits; 0 where the experts run "
        "grouped on the device"))
    moe_expert_note: str
    moe_expert_gemm_fixed_us_by_architecture: dict[str, Annotated[float, Field(ge=0, le=1000)]] = Field(
        default_factory=dict, description=(
        "moe_expert_gemm_fixed_us where the stack's tuned recipes for an accelerator architecture (catalog "
        "`architecture`) run the MoE layer otherwise, microseconds; the other architectures take "
        "moe_expert_gemm_fixed_us"))
    moe_expert_by_architecture_note: str = ""
    moe_fitted: bool = Field(description=(
        "the stack's MoE physics (per-expert cost, all-to-all) was fitted on published MoE runs of the stack "
        "(scripts/calibrate_sustained.py); without, the planner does not choose the stack for a MoE model on its own: "
        "a stack whose MoE was never measured would win on costs nobody measured it paying (candidates)"))
    moe_a2a_overlap: bool = Field(description=(
        "the stack can overlap one micro-batch's MoE all-to-all with another's compute (layout.moe_a2a_overlap)"))
    moe_a2a_overlap_note: str = Field(min_length=10)
    grad_reduce_bytes: float = Field(ge=0, le=4, description=(
        "bytes per gradient element the stack reduces in where it overrides the gradients' format (0: as stored)"))
    grad_reduce_note: str
    fp8: Fp8Recipe
    torch_compile: TorchCompile | None = Field(default=None, description=(
        "the stack trains PyTorch modules whose element-wise ops run one kernel each unless compiled: "
        "training.torch_compile may turn compilation off (engine.physics.compute eager_elementwise_bytes); absent "
        "where the stack fuses them itself (Transformer Engine, XLA)"))
    source: Source

    @model_validator(mode="after")
    def _zero_stages_ascending(self) -> "Stack":
        if list(self.zero_stages) != sorted(set(self.zero_stages)):
            raise ValueError(f"{self.id}: zero_stages {list(self.zero_stages)} must be distinct and ascending")
        return self

    @model_validator(mode="after")
    def _grouped_experts_pay_no_host_cost(self) -> "Stack":
        by_architecture = self.moe_expert_gemm_fixed_us_by_architecture
        if self.moe_expert_kernels == "grouped_on_device" and (self.moe_expert_gemm_fixed_us
                                                               or any(by_architecture.values())):
            raise ValueError(f"{self.id}: experts grouped on the device pay no per-expert host cost on any "
                             f"architecture (moe_expert_gemm_fixed_us {self.moe_expert_gemm_fixed_us}, by "
                             f"architecture {by_architecture}, expected 0)")
        if by_architecture and not self.moe_expert_by_architecture_note:
            raise ValueError(f"{self.id}: moe_expert_gemm_fixed_us_by_architecture needs its "
                             "moe_expert_by_architecture_note (which recipes, fitted on what)")
        return self

    def moe_expert_fixed_us(self, architecture: str) -> float:
        """The per-expert fixed cost on this accelerator architecture (moe_expert_gemm_fixed_us unless the stack's
        recipes for it differ)."""
        return self.moe_expert_gemm_fixed_us_by_architecture.get(architecture, self.moe_expert_gemm_fixed_us)

    @property
    def short_name(self) -> str:
        """The name without its parenthesis, e.g. 'Megatron-Core / NeMo', for sentences and selectors."""
        return self.name.split(" (")[0]


class Level(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    framework: Framework
    accelerators: list[str] = Field(min_length=1)
    precision_class: Literal["16bit", "8bit", "4bit"]
    value: float = Field(gt=0, le=1.0, description=(
        "a level above 1 would run the kernels faster than their isolated best: the runs then did something the "
        "engine does not model (scripts/calibrate_sustained.py leaves such a group uncalibrated)"))
    fitted_on: str = Field(min_length=10)
    moe_only: bool = Field(default=False, description=(
        "fitted on MoE runs only: it stands for its own stack and accelerator but is not borrowed by another "
        "accelerator or stack, since a MoE run's level also absorbs what the engine misses of MoE (all-to-all "
        "dispatchers, per-expert costs): NeMo's H100 MoE runs' own levels lie 0.69-0.82 around the dense 0.683 / "
        "0.787 (scripts/calibrate_sustained.py)"))


class VendorDefault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    framework: Framework
    source: str = Field(min_length=10)


class Fallback(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    framework: Framework
    accelerator: str
    precision_class: Literal["16bit", "8bit", "4bit"]
    note: str


class Frameworks(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_version: Literal[1]
    updated: str
    about: str
    precision_classes: dict[str, list[str]]
    uncalibrated_fallback: Fallback
    vendor_defaults: dict[str, VendorDefault]
    rows: list[Stack]
    levels: list[Level]


@lru_cache(maxsize=1)
def frameworks() -> Frameworks:
    doc = Frameworks(**json.loads((DATA_DIR / "frameworks.json").read_text()))
    ids = [r.id for r in doc.rows]
    if sorted(ids) != sorted(FRAMEWORKS):
        raise ValueError(f"data/frameworks.json: rows {ids} are not the frameworks {FRAMEWORKS}")
    seen = set()
    for lv in doc.levels:
        for acc in lv.accelerators:
            key = (lv.framework, acc, lv.precision_class)
            if key in seen:
                raise ValueError(f"data/frameworks.json: two levels for {key}")
            seen.add(key)
    for vendor, default in doc.vendor_defaults.items():
        if vendor not in next(r for r in doc.rows if r.id == default.framework).runs_on.vendors:
            raise ValueError(f"data/frameworks.json: {vendor}'s default {default.framework} does not run on {vendor}")
    if level_row(doc, doc.uncalibrated_fallback.framework, doc.uncalibrated_fallback.accelerator,
                 doc.uncalibrated_fallback.precision_class) is None:
        raise ValueError("data/frameworks.json: the uncalibrated fallback names no fitted level")
    return doc


def stack(framework: str) -> Stack:
    return next(r for r in frameworks().rows if r.id == framework)


def precision_class(precision: str) -> str:
    return next(c for c, members in frameworks().precision_classes.items() if precision in members)


def level_row(doc: Frameworks, framework: str, accelerator: str, pclass: str) -> Level | None:
    return next((lv for lv in doc.levels if lv.framework == framework and accelerator in lv.accelerators
                 and lv.precision_class == pclass), None)


def stack_id(framework: str | None, vendor: str) -> str:
    """The stack a scenario trains on: the one it names, else its accelerator vendor's MLPerf default
    (stack_id(None, vendor) is the default)."""
    return framework or frameworks().vendor_defaults[vendor].framework


def candidates(vendor: str, accelerator: str, precision: str, moe: bool = False) -> tuple[str, ...]:
    """The stacks the planner weighs when the scenario names none: those that run on the accelerator's vendor
    (runs_on) and have a level fitted for this accelerator and precision class, and for a MoE model only those whose
    MoE was fitted on published MoE runs (moe_fitted), the vendor's MLPerf default first (it wins a tie); where none
    qualifies, the vendor's default alone, which resolve marks uncalibrated. So an uncalibrated stack never competes
    on the fallback level borrowed from another stack and accelerator, nor an unmeasured MoE implementation on
    per-expert costs nobody measured."""
    doc = frameworks()
    default = stack_id(None, vendor)
    pclass = precision_class(precision)
    order = [default] + [r.id for r in doc.rows if r.id != default]
    fitted = tuple(row.id for row in map(stack, order) if vendor in row.runs_on.vendors
                   and level_row(doc, row.id, accelerator, pclass) is not None and (row.moe_fitted or not moe))
    return fitted or (default,)


def not_run_on(framework: str | None, vendor: str) -> str | None:
    """Why a named stack is not offered on a vendor's accelerators (runs_on), or None where it runs there."""
    if framework is None or vendor in stack(framework).runs_on.vendors:
        return None
    row = stack(framework)
    return (f"{row.short_name} does not run on {vendor} accelerators (data/frameworks.json runs_on: "
            f"{', '.join(row.runs_on.vendors)}); leave training.framework unset for the planner to choose, or name a "
            "stack that runs there")


@dataclass(frozen=True)
class Resolved:
    """The stack a scenario runs on and its level on the scenario's accelerator and precision."""
    stack: Stack
    chosen_by_default: bool      # the vendor's MLPerf default, not the scenario's choice
    vendor: str
    default_source: str
    level: float
    calibrated: bool
    level_note: str
    stand_in: str                # uncalibrated: the level that stands in for it, in a phrase ('' when calibrated)

    @property
    def describe(self) -> str:
        """'framework: megatron_core, NVIDIA's MLPerf default' or 'framework: pytorch_fsdp2, as given'."""
        how = f"{self.vendor}'s MLPerf default" if self.chosen_by_default else "as given"
        return f"framework: {self.stack.id}, {how}"

    def detail(self) -> dict:
        """The estimate's `framework` block: which stack, why, and the level with its calibration."""
        return {"id": self.stack.id, "name": self.stack.name, "text": self.describe,
                "chosen_by": f"default: {self.default_source}" if self.chosen_by_default else "the scenario",
                "calibrated": self.calibrated, "sustained_level": self.level, "level_source": self.level_note}


def resolve(framework: str | None, vendor: str, accelerator: str, precision: str) -> Resolved:
    """The scenario's stack (its vendor's MLPerf default when None) and the level fitted for it on this accelerator
    and precision class; without one, the documented fallback level, marked uncalibrated."""
    doc = frameworks()
    default = doc.vendor_defaults[vendor]
    chosen = stack_id(framework, vendor)
    pclass = precision_class(precision)
    row = level_row(doc, chosen, accelerator, pclass)
    if row is not None:
        return Resolved(stack(chosen), framework is None, vendor, default.source, row.value, True,
                        f"{chosen} on {accelerator}, {pclass}: fitted on {row.fitted_on}", "")
    missing = f"uncalibrated: no public per-step calibration of {chosen} on {accelerator} at {pclass} precision; "
    for cls in (pclass, WIDER_CLASS.get(pclass)):            # rules 1 and 2: the same die; a 4-bit recipe's FP8
        found = None if cls is None else here_or_same_die(doc, chosen, accelerator, cls)
        if found is None:
            continue
        where, row = found
        why = (f"the same {load_catalog().accelerator(accelerator).architecture} die" if cls == pclass
               else f"the {pclass} recipe being the {cls} one with {pclass} matmuls")
        note = f"{missing}the level of {chosen} on {where} ({cls}, {row.value}), {why}, is used: fitted on {row.fitted_on}"
        return Resolved(stack(chosen), framework is None, vendor, default.source, row.value, False, note,
                        f"the level of {chosen} on {where} at {cls}" + (", the same die" if cls == pclass else ""))
    crossed = cross_stack_level(doc, chosen, accelerator, pclass)
    if crossed is not None:
        other, where, here, own_ref, other_ref = crossed
        value = round(here.value * own_ref.value / other_ref.value, 3)
        ref = doc.uncalibrated_fallback.accelerator
        note = (f"{missing}{other}'s level on {where} ({pclass}, {here.value}) x {chosen}'s over {other}'s on {ref} "
                f"({own_ref.value} / {other_ref.value}) = {value} is used: fitted on {here.fitted_on}; and "
                f"{own_ref.fitted_on}")
        return Resolved(stack(chosen), framework is None, vendor, default.source, value, False, note,
                        f"{other}'s level on {where} at {pclass} times {chosen}'s over {other}'s on {ref}")
    fb = doc.uncalibrated_fallback
    own = level_row(doc, chosen, fb.accelerator, fb.precision_class)
    if own is not None:
        note = (f"{missing}the level of {chosen} on {fb.accelerator} ({fb.precision_class}, {own.value}), the stack's "
                f"own at the reference point, is used: fitted on {own.fitted_on}")
        return Resolved(stack(chosen), framework is None, vendor, default.source, own.value, False, note,
                        f"{chosen}'s own level on {fb.accelerator} at {fb.precision_class}")
    ref = level_row(doc, fb.framework, fb.accelerator, fb.precision_class)
    note = f"{missing}the level of {fb.framework} on {fb.accelerator} ({fb.precision_class}, {ref.value}) is used: {fb.note}"
    return Resolved(stack(chosen), framework is None, vendor, default.source, ref.value, False, note,
                    f"the level of {fb.framework} on {fb.accelerator} at {fb.precision_class}")


def same_die_level(doc: Frameworks, framework: str, accelerator: str, pclass: str) -> tuple[str, Level] | None:
    """(the accelerator, its level) of the stack and precision class fitted on another accelerator of the same
    architecture in the catalog (the first in the catalog's order), None where there is none."""
    catalog = load_catalog()
    acc = catalog.accelerators.get(accelerator)
    if acc is None:
        return None
    for other in catalog.accelerators.values():
        if other.id != accelerator and other.architecture == acc.architecture:
            row = level_row(doc, framework, other.id, pclass)
            if row is not None and not row.moe_only:
                return other.id, row
    return None


def here_or_same_die(doc: Frameworks, framework: str, accelerator: str, pclass: str) -> tuple[str, Level] | None:
    """(the accelerator, the level) of the stack and precision class fitted on this accelerator, else on another of
    its die (same_die_level), else None."""
    row = level_row(doc, framework, accelerator, pclass)
    return (accelerator, row) if row is not None else same_die_level(doc, framework, accelerator, pclass)


def cross_stack_level(doc: Frameworks, framework: str, accelerator: str, pclass: str
                      ) -> tuple[str, str, Level, Level, Level] | None:
    """(the other stack, the accelerator its level is on, that level, this stack's and the other's level on the
    fallback's accelerator) for rule 3 of the module's docstring, the stacks in data/frameworks.json's order; None where
    no other stack was fitted on this accelerator (or its die) and on the reference at this precision class, or the
    accelerator is another vendor's than the reference."""
    catalog = load_catalog()
    ref = doc.uncalibrated_fallback.accelerator
    acc = catalog.accelerators.get(accelerator)
    own_ref = level_row(doc, framework, ref, pclass)
    if acc is None or own_ref is None or acc.vendor != catalog.accelerator(ref).vendor:
        return None
    for other in (r.id for r in doc.rows if r.id != framework):
        other_ref = level_row(doc, other, ref, pclass)
        found = here_or_same_die(doc, other, accelerator, pclass)
        if other_ref is not None and found is not None and not found[1].moe_only:
            return other, *found, own_ref, other_ref
    return None
