"""What every runner shares: the device under test (numpy on the CPU; torch on CUDA, ROCm or Apple MPS when
installed), the machine's metadata, timing statistics and progress lines."""
from __future__ import annotations

import hashlib
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from benchmarks_db.result_schema import SoftwareInfo, Stats, SystemInfo

ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES", "PYTORCH_TUNABLEOP_ENABLED", "NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE",
            "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME")


@dataclass
class Device:
    """The device under test. kind 'cpu' runs numpy (and gloo); 'cuda' covers NVIDIA and AMD ROCm builds."""
    kind: str                       # cpu | cuda | mps
    name: str
    count: int
    torch: object | None            # the torch module when installed, else None
    memory_gib: float | None = None

    @property
    def device_type(self) -> str:
        return {"cpu": "cpu", "cuda": "gpu", "mps": "mps"}[self.kind]

    def sync(self) -> None:
        if self.kind == "cuda":
            self.torch.cuda.synchronize()
        elif self.kind == "mps":
            self.torch.mps.synchronize()


def import_torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def detect(force_cpu: bool = False) -> Device:
    """CUDA/ROCm first (torch.cuda covers both; torch.version.hip tells ROCm), then Apple MPS, else the CPU.
    torch.version.cuda is not a GPU signal: CUDA builds report it on machines without a GPU."""
    torch = import_torch()
    if torch is not None and not force_cpu:
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            return Device("cuda", props.name, torch.cuda.device_count(), torch, props.total_memory / 2**30)
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return Device("mps", f"Apple {platform.machine()} GPU (MPS)", 1, torch)
    return Device("cpu", cpu_model(), 1, torch)


def _host_memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            return int(fh.readline().split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        return None


def system_info(dev: Device) -> SystemInfo:
    return SystemInfo(device_type=dev.device_type, device_name=dev.name, device_count=dev.count,
                      device_memory_gib=dev.memory_gib, cpu_model=cpu_model(), cpu_cores=os.cpu_count(),
                      host_memory_gib=_host_memory_gib(),
                      hostname_sha256=hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16])


def _blas() -> str | None:
    try:
        cfg = np.show_config(mode="dicts")
        deps = cfg.get("Build Dependencies", {}).get("blas", {})
        return " ".join(str(deps.get(k, "")) for k in ("name", "version")).strip() or None
    except Exception:       # numpy's config layout is not a stable API; the BLAS name is optional metadata
        return None


def _driver() -> str | None:
    """NVIDIA driver from nvidia-smi, else the amdgpu kernel module's version (ROCm); None when neither answers."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/sys/module/amdgpu/version") as fh:
            return f"amdgpu {fh.read().strip()}"
    except OSError:
        return None


def software_info(dev: Device) -> SoftwareInfo:
    torch = dev.torch
    info = dict(os=f"{platform.system()} {platform.release()}", kernel=platform.version()[:200],
                python=platform.python_version(), numpy=np.__version__, blas=_blas(), threads=os.cpu_count(),
                torch=getattr(torch, "__version__", None),
                env_vars={k: os.environ.get(k) for k in ENV_VARS if os.environ.get(k) is not None})
    if dev.kind == "cuda":
        hip = getattr(torch.version, "hip", None)
        info.update(cuda=None if hip else torch.version.cuda, rocm=hip, driver=_driver())
        try:
            v = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except (AttributeError, RuntimeError):
            pass
    return SoftwareInfo(**info)


def time_calls(fn: Callable[[], None], dev: Device, warmup: int, repeats: int,
               before: Callable[[], None] | None = None) -> list[float]:
    """Seconds per call after `warmup` untimed calls. `before` runs untimed ahead of each call (cache flush). On
    CUDA/ROCm the call is timed with device events, elsewhere with perf_counter around a synchronised call."""
    for _ in range(warmup):
        if before:
            before()
        fn()
    dev.sync()
    times = []
    for _ in range(repeats):
        if before:
            before()
        if dev.kind == "cuda":
            start, end = dev.torch.cuda.Event(enable_timing=True), dev.torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            dev.sync()
            t0 = time.perf_counter()
            fn()
            dev.sync()
            times.append(time.perf_counter() - t0)
    return times


def rate_stats(times: list[float], work: float) -> tuple[Stats, Stats, float]:
    """(rate stats, time stats, cv %) for a fixed amount of work per call: median rate = work / median time,
    max = work / fastest, min = work / slowest, mean = mean of per-call rates (result_schema.py)."""
    t = Stats(median=statistics.median(times), min=min(times), max=max(times), mean=statistics.fmean(times))
    rate = Stats(median=work / t.median, min=work / t.max, max=work / t.min,
                 mean=statistics.fmean(work / x for x in times))
    cv = 100 * statistics.pstdev(times) / t.mean if len(times) > 1 else 0.0
    return rate, t, cv


class Progress:
    """One aligned line per case; a carriage-return status only on a terminal."""

    def __init__(self, stream=sys.stdout):
        self.stream = stream
        self.tty = stream.isatty()

    def status(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + text[:120].ljust(120))
            self.stream.flush()

    def line(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + " " * 120 + "\r")
        self.stream.write(text + "\n")
        self.stream.flush()
