"""The versioned catalog in data/: accelerators, interconnects and model presets, validated at load."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.physics.model import ModelArch

# data/ at the repository root; installed (pip install .), the same files are package data in engine/data
_INSTALLED_DATA = Path(__file__).resolve().parent / "data"
DATA_DIR = _INSTALLED_DATA if _INSTALLED_DATA.is_dir() else Path(__file__).resolve().parent.parent / "data"
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "fp4", "int8")


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    document: str = Field(min_length=3)
    url: str = Field(pattern=r"^https?://")
    date: str = Field(pattern=r"^\d{4}(-\d{2})?(-\d{2})?$")


class PeakTflops(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    fp64: float | None = Field(default=None, gt=0)
    fp32: float | None = Field(default=None, gt=0)
    tf32: float | None = Field(default=None, gt=0)
    bf16: float | None = Field(default=None, gt=0)
    fp16: float | None = Field(default=None, gt=0)
    fp8: float | None = Field(default=None, gt=0)
    mxfp8: float | None = Field(default=None, gt=0, description="OCP MX FP8 (32-element blocks, E8M0 scales); null where the "
                                                               "tensor cores have no microscaling support (Hopper, MI300)")
    fp4: float | None = Field(default=None, gt=0, description="4-bit floating point: NVFP4 on NVIDIA, MXFP4 on AMD and others")
    int8: float | None = Field(default=None, gt=0, description="dense INT8 matmul peak (TOPS) where training runs it: "
                                                               "TPUs under AQT (precision int8); null elsewhere")


class AttentionRate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    fwd: float = Field(gt=0, description="fused attention forward, TFLOP/s, 16-bit")
    bwd: float = Field(gt=0, description="fused attention backward, TFLOP/s, 16-bit")
    note: str = Field(min_length=10, description="the measurement and its source")


class Link(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    network: str
    bandwidth_gbs: float = Field(gt=0, description="per accelerator, per direction, GB/s")
    note: str = ""


class HostLink(BaseModel):
    """The link between an accelerator and its host CPU's memory, which offloaded states cross every step."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    link: str = Field(min_length=3, description="pcie_gen3_x16, pcie_gen4_x16, pcie_gen5_x16, nvlink_c2c, infinity_fabric, "
                                                "unified_memory, ...")
    bandwidth_gbs: float = Field(gt=0, description="line rate per accelerator, per direction, GB/s")
    note: str = Field(min_length=10, description="the link's and the host memory's sources")


# The one rule for an accelerator known only from its vendor's announcement: said wherever it is chosen (the estimate's
# warnings, the vendor comparison's reasons), never used silently.
ANNOUNCED_NOTE = "announced: figures from the vendor's announcement, no shipping measurement"


class Fallback(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float = Field(gt=0, le=1)
    note: str


class Accelerator(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    name: str
    vendor: Literal["NVIDIA", "AMD", "Intel", "Google", "AWS", "Apple"]
    architecture: str
    year: int = Field(ge=2010, le=2030)
    software_stack: Literal["CUDA", "ROCm", "SynapseAI", "XLA", "Neuron", "Metal/MLX"]
    status: Literal["shipping", "announced"] = Field(description=(
        "announced: every figure is the vendor's announcement and no shipping part has been measured (ANNOUNCED_NOTE)"))
    device_class: Literal["datacenter", "workstation"] = Field(default="datacenter", description=(
        "workstation: a desktop or workstation part (Apple M-series with unified memory; GeForce and RTX workstation "
        "cards on PCIe, at most a 2-way NVLink bridge)"))
    peak_tflops: PeakTflops
    memory_gb: float = Field(gt=0)
    memory_gib_usable: float | None = Field(default=None, gt=0)
    memory_type: str
    memory_bandwidth_gbs: float = Field(gt=0)
    tdp_w: float | None = Field(default=None, gt=0)
    intra_node_link: Link
    gpus_per_node: int = Field(ge=1, description="accelerators in one scale-up domain (NVLink, ICI, Infinity Fabric...): "
                                                   "what tensor and expert parallelism stay inside; 72 for NVL72 racks")
    accelerators_per_server: int | None = Field(default=None, ge=1, description=(
        "accelerators in one server or compute tray when that differs from the scale-up domain (NVL72: 4 per "
        "tray), for server prices and power"))
    network: Link
    host_link: HostLink
    host_memory_gb_per_gpu: float = Field(ge=0, description=(
        "CPU memory of the reference server divided by its accelerators, GB: what offloaded optimizer states and "
        "weights must fit in (0: unified memory, nothing to offload to)"))
    matmul_measured_tflops: dict[Literal["bf16", "fp16", "fp8", "mxfp8", "fp4"], float | None]
    attention_measured_tflops: AttentionRate | None = None
    matmul_efficiency_fallback: Fallback | None = None
    matmul_measurement_note: str = ""
    device_note: str = ""
    sources: list[Source] = Field(min_length=1)

    @property
    def memory_gib(self) -> float:
        """Capacity a training process can allocate: the driver-reported figure where published, else the datasheet's."""
        return self.memory_gib_usable or self.memory_gb

    @property
    def status_note(self) -> str | None:
        """What a planner must be told where this accelerator is chosen; None for a shipping part."""
        return f"{self.name}: {ANNOUNCED_NOTE}" if self.status == "announced" else None

    def peak(self, dtype: str) -> float | None:
        return getattr(self.peak_tflops, dtype)

    def matmul_efficiency(self, dtype: str) -> tuple[float, str]:
        """Measured max achievable matmul over the dense peak, and where the figure comes from."""
        measured = self.matmul_measured_tflops
        # a microscaled or 4-bit format without its own measurement borrows the nearest low-precision ratio
        order = (dtype, "fp8", "bf16", "fp16") if dtype in ("mxfp8", "fp4") else (dtype, "bf16", "fp16")
        for key in order:
            value, peak = measured.get(key), self.peak(key)
            if value and peak:
                borrowed = "" if key == dtype else f" (no {dtype} measurement; {key} ratio used)"
                return min(value / peak, 1.0), f"measured {value} of {peak} TFLOP/s {key}{borrowed}"
        if self.matmul_efficiency_fallback:
            return self.matmul_efficiency_fallback.value, self.matmul_efficiency_fallback.note
        raise ValueError(f"{self.id} has neither a matmul measurement nor a fallback efficiency")


class Network(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    name: str
    kind: Literal["pcie", "nvlink", "infinity_fabric", "infiniband", "roce", "ethernet", "ici"]
    bandwidth_gbs: float = Field(gt=0)
    latency_us: float = Field(gt=0)
    collective_efficiency: float = Field(gt=0, le=1)
    source: Source
    efficiency_note: str = ""
    latency_note: str = ""
    max_domain_accelerators: int | None = Field(default=None, ge=1, description=(
        "the most accelerators one domain of this link joins where that is larger than a node (a TPU pod's chips, "
        "the largest slice): more are several domains over the data-center network. None: the node's"))
    domain_note: str = ""


class TrainingDefaults(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    seq_len: int
    global_batch_size: int
    total_tokens: float


class PublishedTraining(BaseModel):
    """Whole-training GPU-hours a model's makers published: shown beside the estimate, never used to calibrate it."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    gpu_hours: float = Field(gt=0)
    accelerator: str = Field(description="catalog id of the accelerator the hours were counted on")
    tokens: float = Field(gt=0, description="training tokens the published hours cover")
    scope: str = Field(description="what the hours include (pre-training only, or training as a model card counts it)")
    source: Source


class ModelPreset(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    name: str
    arch: ModelArch
    published_params_b: float
    published_active_params_b: float | None = None
    published_scope: str = Field(default="all parameters of the language model", description=(
        "what the published counts include, so the engine's count is compared like with like (MTP modules, vision "
        "encoders, the input embedding in active counts)"))
    count_tolerance: float = Field(default=0.01, gt=0, le=0.05, description=(
        "relative agreement required with the published count; above 1% only where the published figure is "
        "rounded coarser than that or includes parts the engine does not count (published_scope says which)"))
    training_defaults: TrainingDefaults
    published_training: PublishedTraining | None = None
    source: Source


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True)
    accelerators: dict[str, Accelerator]
    networks: dict[str, Network]
    models: dict[str, ModelPreset]

    def accelerator(self, accel_id: str) -> Accelerator:
        return self.accelerators[accel_id]


def _rows(name: str) -> list[dict]:
    doc = json.loads((DATA_DIR / name).read_text())
    if doc.get("schema_version") != 1:
        raise ValueError(f"data/{name}: unsupported schema_version {doc.get('schema_version')!r}")
    return doc["rows"]


def _keyed(rows: list[BaseModel], what: str) -> dict:
    out = {}
    for row in rows:
        if row.id in out:
            raise ValueError(f"data catalog: duplicate {what} id {row.id!r}")
        out[row.id] = row
    return out


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """Load and validate data/*.json once per process; raises with the file and field on bad data."""
    accels = _keyed([Accelerator(**r) for r in _rows("accelerators.json")], "accelerator")
    nets = _keyed([Network(**r) for r in _rows("networks.json")], "network")
    models = _keyed([ModelPreset(**r) for r in _rows("models.json")], "model")
    for acc in accels.values():
        for link in (acc.intra_node_link, acc.network):
            if link.network not in nets:
                raise ValueError(f"data/accelerators.json: {acc.id} names unknown network {link.network!r}")
        if any(acc.peak(d) for d in ("bf16", "fp16")):
            acc.matmul_efficiency("bf16" if acc.peak("bf16") else "fp16")
    return Catalog(accelerators=accels, networks=nets, models=models)
