"""Accelerator names as tools and submitters write them -> engine catalog ids, and the catalog figures checks use.

Names are matched exactly after normalisation (lower case, letters and digits only); there is no fuzzy matching,
so an unknown or ambiguous name (e.g. nccl-tests' bare "NVIDIA H100", which covers the 64 GB, 80 GB SXM and PCIe
parts) stays unmapped and the user names the catalog id instead.
"""
from __future__ import annotations

import re
from functools import lru_cache

from engine.catalog import Accelerator, load_catalog

# Names seen in MLPerf system JSONs (benchmarks_db/data/mlperf_training_results.csv, rounds v3.0-v5.1), in
# torch.cuda.get_device_name() / nccl-tests device lines, and in the published MAMF table.
ALIASES: dict[str, str] = {
    "NVIDIA H100-SXM5-80GB": "H100-SXM5-80GB",
    "NVIDIA H100-SXM-80GB": "H100-SXM5-80GB",
    "NVIDIA H100 80GB HBM3": "H100-SXM5-80GB",       # torch/nvidia-smi name of the SXM5 80 GB part
    "NVIDIA H100 SXM": "H100-SXM5-80GB",
    "NVIDIA H100 PCIe": "H100-PCIe-80GB",
    "NVIDIA H200-SXM5-141GB": "H200-SXM-141GB",
    "NVIDIA H200": "H200-SXM-141GB",                  # torch name of the SXM part (the NVL part reports "H200 NVL")
    "NVIDIA H200 SXM": "H200-SXM-141GB",
    "NVIDIA Blackwell GPU (B200-SXM-180GB)": "B200-SXM-180GB",
    "NVIDIA B200": "B200-SXM-180GB",
    "NVIDIA B200 SXM": "B200-SXM-180GB",
    "NVIDIA Blackwell GPU (GB200)": "GB200",
    "NVIDIA Blackwell Ultra GPU (B300-SXM-270GB)": "B300-SXM-270GB",
    "NVIDIA B300": "B300-SXM-270GB",
    "NVIDIA Blackwell Ultra GPU (GB300)": "GB300",
    "NVIDIA GB300": "GB300",
    "NVIDIA H200-NVL-141GB": "H200-NVL-141GB",
    "NVIDIA H200 NVL": "H200-NVL-141GB",               # torch name of the NVL part
    "NVIDIA H800": "H800-SXM-80GB",
    "NVIDIA GH200 144G HBM3e": "GH200-144GB",
    "NVIDIA GB200": "GB200",
    "NVIDIA A100-SXM4-80GB": "A100-SXM4-80GB",
    "NVIDIA A100-SXM4-40GB": "A100-SXM4-40GB",
    "NVIDIA A100 SXM": "A100-SXM4-80GB",
    "NVIDIA L40S": "L40S",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTX-PRO-6000-Blackwell",   # torch names of the 600 W editions
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTX-PRO-6000-Blackwell",
    "AMD Instinct MI300X 192GB HBM3": "MI300X",
    "AMD Instinct MI300X": "MI300X",
    "AMD MI300X": "MI300X",
    "AMD Instinct MI325X 256GB HBM3E": "MI325X",
    "AMD Instinct MI325X 256GB HBM3E DLC": "MI325X",
    "AMD Instinct MI325X": "MI325X",
    "AMD MI325X": "MI325X",
    "AMD Instinct MI355X": "MI355X",
    "AMD MI355X": "MI355X",
    "AMD Instinct MI350X": "MI350X",
    "AMD MI350X": "MI350X",
    "Habana Gaudi2": "Gaudi2",
    "Intel Gaudi2": "Gaudi2",
    "Intel(R) Gaudi(R) 2 AI Accelerator": "Gaudi2",
    "Intel Gaudi 2": "Gaudi2",
    "Intel Gaudi 3": "Gaudi3",
    "TPU-v5p": "TPU-v5p",
    "TPU-v5e": "TPU-v5e",
    "TPU-trillium": "TPU-v6e",                           # MLPerf v5.0/v5.1 Google system JSONs
    "TPU-v6e": "TPU-v6e",
    "TPU7x": "TPU-v7",
}

# the store's device_type column knows gpu/tpu/hpu/cpu/mps/unknown: Trainium (a torch-xla device) has no own kind
DEVICE_TYPES = {"NVIDIA": "gpu", "AMD": "gpu", "Intel": "hpu", "Google": "tpu", "Apple": "mps", "AWS": "unknown"}


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    cat = load_catalog()
    table = {_norm(a.id): a.id for a in cat.accelerators.values()}
    table.update({_norm(a.name): a.id for a in cat.accelerators.values()})
    table.update({_norm(k): v for k, v in ALIASES.items()})
    return table


def catalog_id(name: str | None) -> str | None:
    """The engine catalog id for an accelerator name, or None when the catalog lacks it (or the name is ambiguous)."""
    if not name:
        return None
    return _table().get(_norm(name))


def accelerator(accel_id: str | None) -> Accelerator | None:
    return load_catalog().accelerators.get(accel_id) if accel_id else None


def device_type(accel_id: str | None, raw: str) -> str:
    acc = accelerator(accel_id)
    if acc is not None:
        return DEVICE_TYPES[acc.vendor]
    low = raw.lower()
    if "tpu" in low:
        return "tpu"
    if "gaudi" in low:
        return "hpu"
    return "gpu" if any(v in low for v in ("nvidia", "amd", "instinct", "apple", "radeon")) else "unknown"
