"""The machine a scenario runs on: catalog figures, the user's overrides and calibrated measurements, in SI units."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine import frameworks
from engine.catalog import load_catalog
from engine.physics.model import qk_head_dim
from engine.precision import precision
from engine.scenario import PRECISION_DTYPE, Scenario

GIB = 2**30
# Achievable fraction of peak HBM bandwidth for streaming kernels: STREAM/BabelStream-style copies reach ~90% of the
# datasheet figure (Deakin et al. 2018, "Evaluating attainable memory bandwidth of parallel programming models via
# BabelStream", IJCSE 17(3), https://github.com/UoB-HPC/BabelStream: V100 about 0.9).
MEMORY_BW_EFFICIENCY = 0.90
# Kernels inside a training step sustain less than the isolated best cases above: MAMF is the best shape of a sweep
# on one idle GPU, STREAM the simplest memory kernel; a step runs the model's own shapes back to back under sustained
# power limits (clocks drop), with launch gaps and synchronisation, and each software stack does so differently. The
# level is fitted per stack x accelerator x precision class on public per-step throughput (data/frameworks.json
# levels; scripts/calibrate_sustained.py prints the fit); without one the estimate says the accelerator is
# uncalibrated (engine.frameworks.resolve). Calibrated measurements replace it.


def sustained_level(sc: Scenario, acc) -> frameworks.Resolved:
    """The scenario's software stack and its in-training level on this accelerator and precision."""
    return frameworks.resolve(sc.training.framework, acc.vendor, acc.id, sc.training.precision)


# Base latency of one ring collective in the collective library's tuning model, Simple protocol (baseLat Ring):
# NCCL 2.19 src/graph/tuning.cc @b6475625 8.4 us; RCCL src/graph/tuning.cc @0023b9b 27.9 us. Stacks without a
# published model (Gaudi HCCL, XLA on TPU) take NCCL's figure.
# Fused attention where the catalog has no measurement: the H100's cuDNN rates over its max achievable matmul
# (Shah et al. 2024 Fig. 5-6: 600 forward, 516 backward, against 794.5 TFLOP/s bf16 matmul).
FLASH_FWD_OF_MATMUL = 600.0 / 794.5
FLASH_BWD_OF_MATMUL = 516.0 / 794.5
COLLECTIVE_BASE_LATENCY_US = {"CUDA": 8.4, "ROCm": 27.9}
COLLECTIVE_BASE_LATENCY_DEFAULT_US = 8.4


@dataclass(frozen=True)
class Hardware:
    accelerator: str
    peak_flops: float              # dense peak of the training precision, FLOP/s (MFU denominator)
    matmul_flops: float            # achievable for the weight matmuls in the training precision
    attention_flops: float         # achievable for the 16-bit matmuls of materialised attention (16-bit even in fp8 training)
    attention_fwd_flops: float     # achievable fused (Flash) attention forward, long sequences
    attention_bwd_flops: float     # achievable fused attention backward
    hbm_bytes_per_s: float         # achievable memory bandwidth
    memory_bytes: float            # allocatable per device
    gpus_per_node: int
    intra_busbw: float             # achievable collective bus bandwidth inside a node, B/s per GPU
    intra_latency_s: float
    inter_busbw: float             # achievable per GPU across nodes
    inter_latency_s: float
    collective_base_latency_s: float  # fixed cost of one collective call (library launch and synchronisation)
    matmul_input_bytes: float         # bytes per element of matmul inputs in the training precision (scales included)
    cast_bytes: float                 # HBM bytes per matmul-input element to quantize it (0 for 16-bit training)
    weight_copy_bytes: float          # bytes per parameter of the low-precision weight copy beside the 16-bit weights
    framework: str = "megatron_core"  # the software stack (engine.frameworks): what follows is its semantics
    selective_recompute_matmul_share: float = 0.0   # forward matmuls selective recompute runs again (per-op SAC: 0.5)
    tp_overlap_share: float = 1.0     # share of the exposed tensor-parallel communication tp_comm_overlap hides
    eager_elementwise: bool = False   # a PyTorch stack run without torch.compile: one kernel per element-wise op
    calibrated: bool = True           # a level fitted for this stack, accelerator and precision class
    moe_expert_gemm_fixed_s: float = 0.0  # per local expert and GEMM (engine.frameworks Stack.moe_expert_fixed_us)
    grad_reduce_bytes: float = 0.0    # the stack's gradient-reduction format where it overrides the gradients' (fp32: 4)
    frozen_weight_bytes: float | None = None  # LoRA's frozen base per weight where the stack keeps it in the
    #                                           low-precision format only (Stack.fp8.frozen_base_low_precision_only)
    framework_detail: dict = field(default_factory=dict, compare=False)   # engine.frameworks.Resolved.detail()
    provenance: dict = field(default_factory=dict, compare=False)


def resolve_hardware(sc: Scenario) -> Hardware:
    cat = load_catalog()
    acc = cat.accelerator(sc.cluster.accelerator)
    cl = sc.cluster
    dtype = PRECISION_DTYPE[sc.training.precision]
    spec = precision(sc.training.precision)
    fmt = spec.for_vendor(acc.vendor)
    attn_dtype = ("bf16" if acc.peak("bf16") else "fp16") if spec.low_precision else dtype   # the attention core stays 16-bit
    eff, eff_note = acc.matmul_efficiency(dtype)
    attn_eff, _ = acc.matmul_efficiency(attn_dtype)
    attn_matmul = acc.peak(attn_dtype) * 1e12 * attn_eff
    measured = acc.attention_measured_tflops
    if measured is not None and cl.matmul_efficiency is None:
        flash_fwd, flash_bwd, flash_note = measured.fwd * 1e12, measured.bwd * 1e12, measured.note
    else:
        flash_fwd, flash_bwd = attn_matmul * FLASH_FWD_OF_MATMUL, attn_matmul * FLASH_BWD_OF_MATMUL
        flash_note = "no published fused-attention rate: the H100's ratios to its matmul rate (cuDNN 600/516 of 794.5 TFLOP/s)"
    fw = sustained_level(sc, acc)
    kernel = fw.stack.attention.of_catalog_rate.get(acc.vendor, 1.0)      # the stack's attention kernel
    flash_fwd, flash_bwd = flash_fwd * kernel, flash_bwd * kernel
    if kernel != 1.0:
        flash_note += f"; {fw.stack.attention.kernel}: {kernel:g} of it ({fw.stack.attention.note})"
    by_head = fw.stack.attention.head_dim_rate          # the rates above are at head dimension 128
    head_dim = qk_head_dim(sc.arch)
    if by_head is not None and (scale := by_head.at(head_dim)) != (1.0, 1.0):
        flash_fwd, flash_bwd = flash_fwd * scale[0], flash_bwd * scale[1]
        flash_note += (f"; at head dimension {head_dim}: {scale[0]:.3f} (forward) and {scale[1]:.3f} (backward) of "
                       f"the kernel's rate at 128 ({by_head.source})")
    if cl.matmul_efficiency is not None:
        eff, eff_note = cl.matmul_efficiency, "given in the scenario (cluster.matmul_efficiency)"
        attn_eff = cl.matmul_efficiency
    level, level_note = fw.level, fw.level_note
    if cl.level_scale is not None:        # a trusted step-time log of this cluster (benchmarks_db/step_time.py)
        level, level_note = level * cl.level_scale, f"{level_note}; x {cl.level_scale:g} measured on this cluster"
    intra_net, inter_net = cat.networks[acc.intra_node_link.network], cat.networks[acc.network.network]
    intra_line = cl.intra_node_bw_gbs or acc.intra_node_link.bandwidth_gbs
    inter_line = cl.inter_node_bw_gbs or acc.network.bandwidth_gbs
    intra_bus = cl.intra_node_busbw_gbs or intra_line * intra_net.collective_efficiency
    inter_bus = cl.inter_node_busbw_gbs or inter_line * inter_net.collective_efficiency
    # a recipe that keeps a share of the linear layers in 16-bit (NVFP4: ~15%) runs them at the 16-bit rate
    low_rate = acc.peak(dtype) * 1e12 * eff * level
    high_share = spec.high_precision_linear_fraction
    matmul_rate = 1.0 / ((1 - high_share) / low_rate + high_share / (attn_matmul * level)) if high_share else low_rate
    in_bytes = spec.element_bytes + (fmt.scale_bytes / fmt.block_size if fmt.block_size else 0.0)
    eager = fw.stack.torch_compile is not None and not sc.training.compiled
    tp_overlap_share = fw.stack.torch_compile.eager_tp_overlap_share if eager else fw.stack.tp_overlap_share
    return Hardware(
        accelerator=acc.id,
        peak_flops=acc.peak(dtype) * 1e12,
        matmul_flops=matmul_rate,
        attention_flops=attn_matmul * level,
        attention_fwd_flops=flash_fwd * level,
        attention_bwd_flops=flash_bwd * level,
        hbm_bytes_per_s=acc.memory_bandwidth_gbs * 1e9 * MEMORY_BW_EFFICIENCY * level,
        memory_bytes=acc.memory_gib * GIB,
        gpus_per_node=sc.gpus_per_node,
        intra_busbw=intra_bus * 1e9, intra_latency_s=(cl.intra_node_latency_us or intra_net.latency_us) * 1e-6,
        inter_busbw=inter_bus * 1e9, inter_latency_s=(cl.inter_node_latency_us or inter_net.latency_us) * 1e-6,
        collective_base_latency_s=COLLECTIVE_BASE_LATENCY_US.get(acc.software_stack, COLLECTIVE_BASE_LATENCY_DEFAULT_US) * 1e-6,
        matmul_input_bytes=(1 - high_share) * in_bytes + high_share * 2.0,
        cast_bytes=(1 - high_share) * (spec.cast_read_bytes * fw.stack.fp8.cast_passes + fmt.cast_write_bytes),
        weight_copy_bytes=(1 - high_share) * fmt.weight_copy_bytes,
        framework=fw.stack.id, selective_recompute_matmul_share=fw.stack.selective_recompute_matmul_share,
        tp_overlap_share=tp_overlap_share, eager_elementwise=eager, calibrated=fw.calibrated,
        moe_expert_gemm_fixed_s=fw.stack.moe_expert_fixed_us(acc.architecture) * 1e-6, framework_detail=fw.detail(),
        grad_reduce_bytes=fw.stack.grad_reduce_bytes,
        frozen_weight_bytes=((1 - high_share) * fmt.weight_copy_bytes + high_share * 2.0)
        if fw.stack.fp8.frozen_base_low_precision_only and fmt.weight_copy_bytes > 0 else None,
        provenance={
            "matmul_efficiency": round(eff, 4), "matmul_efficiency_source": eff_note,
            "intra_node": f"{intra_net.name}: {intra_line:g} GB/s line, {intra_bus:.1f} GB/s achievable bus bandwidth",
            "inter_node": f"{inter_net.name}: {inter_line:g} GB/s line per GPU, {inter_bus:.1f} GB/s achievable",
            "attention": flash_note,
            "precision": f"{fmt.name}" + (f"; {high_share:.0%} of linear layers in 16-bit as the recipe keeps them"
                                          if high_share else ""),
            "memory_bandwidth_efficiency": MEMORY_BW_EFFICIENCY,
            "sustained_kernel_fraction": level, "sustained_kernel_fraction_source": level_note,
            "framework": fw.describe, "calibrated": fw.calibrated,
            "element_wise": ("eager (training.torch_compile false): one kernel per element-wise op, "
                             f"{fw.stack.torch_compile.note}" if eager else
                             "fused (torch.compile, Transformer Engine or XLA), as the stack's level was measured"),
        },
    )
