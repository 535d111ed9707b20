"""The result file the bundled runners write (`python -m benchmarks_db.run ... --out results.json`), schema_version 1.

Units: TFLOP/s = 1e12 FLOP/s, GB/s = 1e9 B/s, times in seconds, sizes in bytes. Every result carries the
per-iteration times it was computed from (`time_s`) and the derived rate (`stats`):
rate median = work / median time, max = work / min time, min = work / max time, mean = mean of per-iteration
rates, where work is 2*m*n*k FLOP (matmul), the STREAM-counted bytes (membw), the bytes moved (h2d, storage) or the
message size (collectives, nccl-tests' algbw; busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather and
reduce-scatter). `python -m benchmarks_db.run --schema` prints this as JSON Schema.
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from benchmarks_db.checks import CONTROL_CHARS, INT64_MAX, MAX_TEXT

SCHEMA_VERSION = 1


def _printable(text: str) -> str:
    if CONTROL_CHARS.search(text):
        raise ValueError("contains control characters; remove them")
    return text


Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_printable)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Bytes = Annotated[int, Field(ge=1, le=INT64_MAX)]           # sizes in bytes: the store's BIGINT
Count = Annotated[int, Field(ge=1, le=1_000_000)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Stats(Strict):
    median: Positive
    min: Positive
    max: Positive
    mean: Positive | None = None

    @model_validator(mode="after")
    def _ordered(self):
        if not self.min <= self.median <= self.max:
            raise ValueError(f"min <= median <= max does not hold ({self.min}, {self.median}, {self.max})")
        return self


class Measured(Strict):
    """What every result has: the statistics, how many timed samples after how many warm-up iterations."""
    unit: Text
    stats: Stats
    time_s: Stats
    n_samples: int = Field(ge=1, le=1_000_000)
    warmup_iters: int = Field(ge=0, le=1_000_000)
    cv_pct: float = Field(ge=0, allow_inf_nan=False)


class MatmulResult(Measured):
    benchmark: Literal["matmul"]
    metric: Literal["matmul_tflops"] = "matmul_tflops"
    backend: Literal["numpy", "torch"]
    dtype: Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8"]
    m: int = Field(ge=1, le=1_000_000)
    n: int = Field(ge=1, le=1_000_000)
    k: int = Field(ge=1, le=1_000_000)


class MembwResult(Measured):
    benchmark: Literal["membw"]
    metric: Literal["mem_bw"] = "mem_bw"
    op: Literal["copy", "scale", "add", "triad"]
    element_bytes: int = Field(ge=1, le=16)
    array_elements: Bytes
    bytes_per_iter: Bytes = Field(description="STREAM counting: copy, scale 2 words per element; add, triad 3")
    implementation: Text


class CopyResult(Measured):
    benchmark: Literal["h2d"]
    metric: Literal["copy_bw"] = "copy_bw"
    op: Literal["h2d", "d2h"]
    pinned: bool
    message_bytes: Bytes


class CollectiveResult(Measured):
    """`stats` is busbw, `algbw` the algorithm bandwidth, both GB/s; message_bytes as nccl-tests counts it (the whole
    gathered / reduced array for all-gather and reduce-scatter)."""
    benchmark: Literal["collectives"]
    metric: Literal["busbw"] = "busbw"
    op: Literal["all_reduce", "all_gather", "reduce_scatter"]
    backend: Literal["gloo", "nccl"]
    dtype: Literal["fp32", "bf16", "fp16"]
    message_bytes: Bytes
    n_ranks: int = Field(ge=2, le=1_000_000)
    n_nodes: int = Field(ge=1, le=100_000)
    algbw: Stats


class StorageResult(Measured):
    benchmark: Literal["storage"]
    metric: Literal["io_bw"] = "io_bw"
    op: Literal["write", "read"]
    file_bytes: Bytes
    block_bytes: Bytes
    fsync: bool
    page_cache_dropped: bool
    filesystem: Text | None = None


Result = Annotated[Union[MatmulResult, MembwResult, CopyResult, CollectiveResult, StorageResult],
                   Field(discriminator="benchmark")]


class RunnerInfo(Strict):
    name: Text
    version: Text
    argv: list[Text] = Field(max_length=100)
    started_at: datetime
    duration_s: float = Field(ge=0, allow_inf_nan=False)
    quick: bool


class SystemInfo(Strict):
    device_type: Literal["cpu", "gpu", "mps", "hpu", "tpu"]
    device_name: Text
    device_count: int = Field(ge=1, le=1_000_000)
    n_nodes: int = Field(default=1, ge=1, le=100_000)
    accelerator_id: Text | None = None
    device_memory_gib: float | None = Field(default=None, gt=0)
    cpu_model: Text | None = None
    cpu_cores: Count | None = None
    host_memory_gib: float | None = Field(default=None, gt=0)
    hostname_sha256: Text | None = None


class SoftwareInfo(Strict):
    os: Text | None = None
    kernel: Text | None = None
    python: Text | None = None
    numpy: Text | None = None
    blas: Text | None = None
    threads: Count | None = None
    torch: Text | None = None
    cuda: Text | None = None
    rocm: Text | None = None
    driver: Text | None = None
    nccl: Text | None = None
    env_vars: dict[Text, Text | None] = Field(default_factory=dict, max_length=100)


class Skipped(Strict):
    runner: Text
    reason: Text


class ResultFile(Strict):
    schema_version: Literal[1]
    runner: RunnerInfo
    system: SystemInfo
    software: SoftwareInfo
    results: list[Result] = Field(max_length=100_000)
    skipped: list[Skipped] = Field(default_factory=list, max_length=100)
    warnings: list[Text] = Field(default_factory=list, max_length=1000)
