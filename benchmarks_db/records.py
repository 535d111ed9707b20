"""The normalised form every input is parsed into before it is checked and written: a Source with Runs, each Run on
one System (and Software environment) with its Measurements in canonical units."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class System:
    accelerator_raw: str
    accelerator_id: str | None
    device_type: str
    system_name: str | None = None
    accelerators_per_node: int | None = None
    n_nodes: int | None = None
    n_accelerators: int | None = None
    interconnect: str | None = None
    host_cpu: str | None = None
    host_memory: str | None = None
    extra: dict = field(default_factory=dict, hash=False)

    @property
    def system_id(self) -> str:
        return "sys-" + sha256_text(canonical_json(asdict(self)))[:24]


@dataclass(frozen=True)
class Software:
    os: str | None = None
    kernel: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    rocm_version: str | None = None
    nccl_version: str | None = None
    torch_version: str | None = None
    numpy_version: str | None = None
    blas: str | None = None
    framework: str | None = None
    python_version: str | None = None
    extra: dict = field(default_factory=dict, hash=False)

    @property
    def env_id(self) -> str:
        return "env-" + sha256_text(canonical_json(asdict(self)))[:24]


@dataclass
class Measurement:
    metric: str
    value: float
    unit: str
    stat: str
    n_samples: int | None = None
    value_min: float | None = None
    value_max: float | None = None
    cv_pct: float | None = None
    dtype: str | None = None
    m: int | None = None
    n: int | None = None
    k: int | None = None
    op: str | None = None
    message_bytes: int | None = None
    n_ranks: int | None = None
    n_nodes: int | None = None
    backend: str | None = None
    peak_value: float | None = None
    efficiency: float | None = None
    params: dict = field(default_factory=dict)
    where: str = ""                 # where it came from in the input (line, field), for messages; not stored


COLUMNS = ("metric", "value", "unit", "stat", "n_samples", "value_min", "value_max", "cv_pct", "dtype", "m", "n", "k",
           "op", "message_bytes", "n_ranks", "n_nodes", "backend", "peak_value", "efficiency")


@dataclass
class Run:
    suite: str
    benchmark: str
    tool: str
    system: System
    measurements: list[Measurement]
    software: Software | None = None
    tool_version: str | None = None
    mlperf_round: str | None = None
    division: str | None = None
    availability: str | None = None
    submitter_org: str | None = None
    started_at: datetime | None = None
    duration_s: float | None = None
    params: dict = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)       # why it is not trustworthy (validation 'flagged')
    notes: list[str] = field(default_factory=list)       # check results worth keeping that do not flag it
    run_id: str | None = None

    @property
    def content_sha256(self) -> str:
        """Identity of the result itself (system, software, benchmark, measured values, start time): the same
        measurements uploaded twice, under any file name and in any order, are one result."""
        body = {
            "system": asdict(self.system), "software": asdict(self.software) if self.software else None,
            "suite": self.suite, "benchmark": self.benchmark, "round": self.mlperf_round,
            "submitter": self.submitter_org,
            "mlperf_folder": [self.params.get("submitter_folder"), self.params.get("mlperf_system")],
            "started_at": self.started_at,
            "measurements": sorted(canonical_json([getattr(m, c) for c in COLUMNS] + [m.params])
                                   for m in self.measurements),
        }
        return sha256_text(canonical_json(body))


@dataclass
class Source:
    kind: str                       # published | user_submitted | illustrative
    title: str
    source_id: str | None = None
    dataset: str | None = None
    publisher: str | None = None
    url: str | None = None
    source_commit: str | None = None
    published_date: str | None = None
    submitter: str | None = None
    filename: str | None = None
    file_sha256: str | None = None
    n_bytes: int | None = None
    notes: str | None = None
    uploaded_by: str | None = None          # identity from the reverse proxy, when the deployment names its header
    trusted_by: str | None = None           # uploads: who let it into calibration (None: not yet)
    trusted_at: datetime | None = None
    visibility: str = "shared"              # uploads: shared | private (benchmarks_db/audit.py)
