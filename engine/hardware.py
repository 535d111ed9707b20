"""The machine a scenario runs on: catalog figures, the user's overrides and calibrated measurements, in SI units."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.catalog import load_catalog
from engine.scenario import PRECISION_DTYPE, Scenario

GIB = 2**30
# Achievable fraction of peak HBM bandwidth for streaming kernels: STREAM/BabelStream-style copies reach ~90%
# (seed 000 T14: H100 3.1 of 3.35 TB/s, MI300X 4.9 of 5.3; Deakin et al. 2018 BabelStream on V100 ~0.9).
MEMORY_BW_EFFICIENCY = 0.90
# Kernels inside a training step sustain less than the isolated best cases above: MAMF is the best shape of a sweep
# on one idle GPU, STREAM the simplest memory kernel; a step runs the model's own shapes back to back, with launch
# gaps, synchronisation and sustained power limits. One factor for all accelerators, set from published runs on
# two generations: Narayanan et al. 2021 Table 1 (A100, 10 runs) and Llama 3 405B (H100, Llama Team 2024 Table 4,
# out of sample: 420 predicted vs 430 TFLOP/s published at 8,192 GPUs). Calibrated measurements replace it.
SUSTAINED_KERNEL_FRACTION = 0.80


@dataclass(frozen=True)
class Hardware:
    accelerator: str
    peak_flops: float              # dense peak of the training precision, FLOP/s (MFU denominator)
    matmul_flops: float            # achievable for the weight matmuls in the training precision
    attention_flops: float         # achievable for attention (16-bit even in fp8 training)
    hbm_bytes_per_s: float         # achievable memory bandwidth
    memory_bytes: float            # allocatable per device
    gpus_per_node: int
    intra_busbw: float             # achievable collective bus bandwidth inside a node, B/s per GPU
    intra_latency_s: float
    inter_busbw: float             # achievable per GPU across nodes
    inter_latency_s: float
    provenance: dict = field(default_factory=dict, compare=False)


def resolve_hardware(sc: Scenario) -> Hardware:
    cat = load_catalog()
    acc = cat.accelerator(sc.cluster.accelerator)
    cl = sc.cluster
    dtype = PRECISION_DTYPE[sc.training.precision]
    attn_dtype = dtype if dtype != "fp8" else ("bf16" if acc.peak("bf16") else "fp16")
    eff, eff_note = acc.matmul_efficiency(dtype)
    attn_eff, _ = acc.matmul_efficiency(attn_dtype)
    if cl.matmul_efficiency is not None:
        eff, eff_note = cl.matmul_efficiency, "given in the scenario (cluster.matmul_efficiency)"
        attn_eff = cl.matmul_efficiency
    intra_net, inter_net = cat.networks[acc.intra_node_link.network], cat.networks[acc.network.network]
    intra_line = cl.intra_node_bw_gbs or acc.intra_node_link.bandwidth_gbs
    inter_line = cl.inter_node_bw_gbs or acc.network.bandwidth_gbs
    intra_bus = cl.intra_node_busbw_gbs or intra_line * intra_net.collective_efficiency
    inter_bus = cl.inter_node_busbw_gbs or inter_line * inter_net.collective_efficiency
    return Hardware(
        accelerator=acc.id,
        peak_flops=acc.peak(dtype) * 1e12,
        matmul_flops=acc.peak(dtype) * 1e12 * eff * SUSTAINED_KERNEL_FRACTION,
        attention_flops=acc.peak(attn_dtype) * 1e12 * attn_eff * SUSTAINED_KERNEL_FRACTION,
        hbm_bytes_per_s=acc.memory_bandwidth_gbs * 1e9 * MEMORY_BW_EFFICIENCY * SUSTAINED_KERNEL_FRACTION,
        memory_bytes=acc.memory_gib * GIB,
        gpus_per_node=sc.gpus_per_node,
        intra_busbw=intra_bus * 1e9, intra_latency_s=intra_net.latency_us * 1e-6,
        inter_busbw=inter_bus * 1e9, inter_latency_s=inter_net.latency_us * 1e-6,
        provenance={
            "matmul_efficiency": round(eff, 4), "matmul_efficiency_source": eff_note,
            "intra_node": f"{intra_net.name}: {intra_line:g} GB/s line, {intra_bus:.1f} GB/s achievable bus bandwidth",
            "inter_node": f"{inter_net.name}: {inter_line:g} GB/s line per GPU, {inter_bus:.1f} GB/s achievable",
            "memory_bandwidth_efficiency": MEMORY_BW_EFFICIENCY,
            "sustained_kernel_fraction": SUSTAINED_KERNEL_FRACTION,
        },
    )
