"""Training precisions as data (data/precisions.json): the catalog peak each one uses and the memory and traffic that
its low-precision format adds (weight copies, casts, block scales), each with its source.

The physics reads these figures; this module only loads, checks and looks them up.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.catalog import DATA_DIR, DTYPES, Source

Precision = Literal["bf16", "fp16", "fp8", "fp32", "mxfp8", "nvfp4", "int8"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


class FormatFigures(BaseModel):
    """How a vendor implements a precision differently (AMD runs 4-bit as MXFP4), and what that format costs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    block_size: int = Field(ge=0, description="elements sharing one scale; 0: per-tensor scaling only")
    scale_bytes: float = Field(ge=0)
    per_tensor_scale: bool
    weight_copy_bytes: float = Field(ge=0, description="bytes per parameter of the low-precision weight copy kept beside the 16-bit weights")
    cast_write_bytes: float = Field(ge=0, description="bytes written per matmul-input element when quantizing it once")
    note: str
    source: Source


class PrecisionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: Precision
    name: str
    peak_dtype: str = Field(description="the PeakTflops key of the catalog whose dense peak this precision runs at")
    element_bytes: float = Field(gt=0, description="stored bytes of one matmul-input element")
    block_size: int = Field(ge=0)
    scale_bytes: float = Field(ge=0)
    per_tensor_scale: bool
    weight_copy_bytes: float = Field(ge=0)
    cast_read_bytes: float = Field(ge=0, description="bytes read per matmul-input element when quantizing it once (the 16-bit input)")
    cast_write_bytes: float = Field(ge=0)
    high_precision_linear_fraction: float = Field(ge=0, lt=1, description="share of linear layers the published recipe keeps in BF16")
    note: str
    vendor_variant: dict[str, FormatFigures] = Field(default_factory=dict)
    source: Source

    @model_validator(mode="after")
    def _consistent(self) -> "PrecisionSpec":
        if self.peak_dtype not in DTYPES:
            raise ValueError(f"peak_dtype {self.peak_dtype!r} is not a catalog dtype ({', '.join(DTYPES)})")
        if self.block_size:                           # element plus its share of the block scale
            expected = self.element_bytes + self.scale_bytes / self.block_size
            if abs(self.cast_write_bytes - expected) > 1e-9:
                raise ValueError(f"{self.id}: cast_write_bytes {self.cast_write_bytes} != element + scale/block = {expected}")
        return self

    @property
    def low_precision(self) -> bool:
        """True for the 8- and 4-bit formats whose matmul inputs are cast from 16-bit copies."""
        return self.cast_read_bytes > 0

    @property
    def scale_bytes_per_element(self) -> float:
        return self.scale_bytes / self.block_size if self.block_size else 0.0

    def for_vendor(self, vendor: str) -> FormatFigures:
        """The format this precision takes on a vendor's hardware (AMD runs 4-bit as MXFP4)."""
        v = self.vendor_variant.get(vendor)
        if v is None:
            return FormatFigures(name=self.name, block_size=self.block_size, scale_bytes=self.scale_bytes,
                                 per_tensor_scale=self.per_tensor_scale, weight_copy_bytes=self.weight_copy_bytes,
                                 cast_write_bytes=self.cast_write_bytes, note=self.note, source=self.source)
        return v


@lru_cache(maxsize=1)
def precisions() -> dict[str, PrecisionSpec]:
    """data/precisions.json, validated: every precision the scenario accepts, and nothing else."""
    doc = json.loads((DATA_DIR / "precisions.json").read_text())
    if doc.get("schema_version") != 1:
        raise ValueError(f"data/precisions.json: unsupported schema_version {doc.get('schema_version')!r}")
    rows = {r["id"]: PrecisionSpec(**r) for r in doc["rows"]}
    if set(rows) != set(PRECISIONS):
        raise ValueError(f"data/precisions.json must describe exactly {PRECISIONS}, has {sorted(rows)}")
    return rows


def precision(name: str) -> PrecisionSpec:
    return precisions()[name]


# the catalog peak each training precision runs at (the one mapping the scenario, calibration and pages use)
PRECISION_DTYPE: dict[str, str] = {p: precision(p).peak_dtype for p in PRECISIONS}


# A precision the accelerator lacks falls back to the nearest one it has, in this order: the block-scaled formats to
# the per-tensor FP8 of the generation before them (Hopper has no MX tensor cores and runs FP8 recipes with
# per-tensor scales), FP8 to 16-bit, one 16-bit format to the other and then FP32; FP32 to nothing (a lower precision
# would be another training run, not a substitute). INT8 (AQT, TPUs only) falls back to 16-bit: the other 8-bit formats
# are floating point, another recipe.
FALLBACK: dict[str, tuple[str, ...]] = {"nvfp4": ("mxfp8", "fp8", "bf16", "fp16"), "mxfp8": ("fp8", "bf16", "fp16"),
                                        "fp8": ("bf16", "fp16"), "bf16": ("fp16", "fp32"), "fp16": ("bf16", "fp32"),
                                        "fp32": (), "int8": ("bf16", "fp16")}


def trained_precision(acc, wanted: str) -> tuple[str | None, str]:
    """The precision an accelerator (catalog row) actually trains in when `wanted` is asked for, and a note ("" when
    it has it; None and why when it has no fallback either). The one rule for the Scenario page's accelerator
    change, the vendor comparison and the plan."""
    if acc.peak(PRECISION_DTYPE[wanted]):
        return wanted, ""
    for alt in FALLBACK[wanted]:
        if acc.peak(PRECISION_DTYPE[alt]):
            return alt, f"no {wanted} support: trained in {alt}"
    return None, f"no {wanted} support and no fallback precision"
