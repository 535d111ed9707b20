"""Workstation and consumer GPUs and the announced 2026 parts: datasheet figures, their inter-GPU limits, and an
announced part never used silently."""
import pytest

from engine.catalog import ANNOUNCED_NOTE, load_catalog
from engine.inputs import parse_scenario
from engine.planning.estimate import estimate
from engine.planning.search import search
from engine.planning.vendor import compare

WORKSTATION = ["RTX-3090", "RTX-A6000", "RTX-4090", "RTX-6000-Ada", "RTX-5090", "RTX-PRO-6000-Blackwell"]
ANNOUNCED = ["VR200", "MI455X", "Trainium3"]


@pytest.mark.parametrize("acc_id,memory_gb,bandwidth_gbs,tdp_w", [
    # NVIDIA product pages / datasheets
    ("RTX-3090", 24, 936, 350), ("RTX-4090", 24, 1008, 450), ("RTX-5090", 32, 1792, 575),
    ("RTX-A6000", 48, 768, 300), ("RTX-6000-Ada", 48, 960, 300), ("RTX-PRO-6000-Blackwell", 96, 1792, 600),
])
def test_datasheet_memory_bandwidth_and_power(acc_id, memory_gb, bandwidth_gbs, tdp_w):
    acc = load_catalog().accelerator(acc_id)
    assert (acc.memory_gb, acc.memory_bandwidth_gbs, acc.tdp_w) == (memory_gb, bandwidth_gbs, tdp_w)
    assert acc.status == "shipping" and acc.device_class == "workstation"


@pytest.mark.parametrize("acc_id,dtype,dense", [
    # GeForce: the FP32-accumulate rate, half the FP16-accumulate rate and a quarter of the sparse headline
    ("RTX-3090", "bf16", 284 / 4),        # GA102 whitepaper: FP16 142 / 284 with FP16 accumulate, 71 / 142 with FP32
    ("RTX-4090", "bf16", 660.6 / 4),      # Ada whitepaper: 330.3 / 660.6 with FP16 accumulate
    ("RTX-4090", "fp8", 1321.2 / 4),      # FP8 660.6 / 1321.2 with FP16 accumulate, 330.3 with FP32
    ("RTX-5090", "bf16", 838 / 4),        # RTX Blackwell whitepaper: 419 / 838 with FP16 accumulate
    ("RTX-5090", "fp8", 1676 / 4),
    # professional cards accumulate in FP32 at the full rate: half the sparse datasheet figure
    ("RTX-A6000", "bf16", 309.7 / 2), ("RTX-6000-Ada", "fp8", 1457.0 / 2), ("RTX-6000-Ada", "bf16", 1457.0 / 4),
    ("RTX-PRO-6000-Blackwell", "fp4", 4000 / 2),   # 4000 AI TOPS is sparse FP4
    # Neuron docs print dense figures
    ("Trainium3", "bf16", 671.0), ("Trainium3", "mxfp8", 2517.0),
])
def test_dense_tensor_peaks(acc_id, dtype, dense):
    assert load_catalog().accelerator(acc_id).peak(dtype) == pytest.approx(dense, rel=0.01)


def test_the_seeds_bf16_misquote_is_not_carried():
    # the seeds say 'bf16 not supported on RTX 3090'; GA102 has BF16 tensor cores (whitepaper, 71 TFLOPS dense)
    assert load_catalog().accelerator("RTX-3090").peak("bf16") == 71.0
    assert load_catalog().accelerator("RTX-3090").peak("fp8") is None          # Ampere has no FP8


def test_inter_gpu_limits():
    cat = load_catalog()
    bridge = cat.networks["nvlink3_bridge"]
    assert bridge.bandwidth_gbs * 2 == 112.5                                   # GA102: 112.5 GB/s bidirectional
    for acc_id in ("RTX-3090", "RTX-A6000"):                                   # the bridge joins a pair, no more
        acc = cat.accelerator(acc_id)
        assert acc.intra_node_link.network == "nvlink3_bridge" and acc.gpus_per_node == 2
    # no NVLink on the others; no PCIe peer-to-peer on GeForce: traffic staged through host memory
    assert cat.accelerator("RTX-4090").intra_node_link.network == "pcie4_host_staged"
    assert cat.accelerator("RTX-5090").intra_node_link.network == "pcie5_host_staged"
    assert cat.accelerator("RTX-6000-Ada").intra_node_link.network == "pcie4"
    assert cat.accelerator("RTX-PRO-6000-Blackwell").intra_node_link.network == "pcie5"
    staged = cat.networks["pcie4_host_staged"]
    assert staged.collective_efficiency == pytest.approx(30 / 63, abs=0.01)    # 30 GB/s both ways over 2 x 31.5
    assert staged.latency_us > 4 * cat.networks["pcie4"].latency_us            # 24 us measured vs NCCL's 5.7 us
    for acc_id in WORKSTATION:
        acc = cat.accelerator(acc_id)
        gen = 5 if acc_id in ("RTX-5090", "RTX-PRO-6000-Blackwell") else 4
        assert acc.host_link.link == f"pcie_gen{gen}_x16" and acc.host_link.bandwidth_gbs == {4: 31.5, 5: 63.0}[gen]
        assert acc.host_memory_gb_per_gpu >= acc.memory_gb


def test_tensor_parallel_over_pcie_without_peer_to_peer_is_priced_on_the_host_staged_path():
    sc = {"model": {"preset": "llama2-7b"},
          "training": {"seq_len": 4096, "global_batch_size": 64, "total_tokens": 1e10, "precision": "bf16"},
          "cluster": {"accelerator": "RTX-4090", "n_gpus": 2},
          "layout": {"tp": 2, "dp": 1, "micro_batch_size": 1, "zero_stage": 1, "recompute": "full"}}
    staged = estimate(parse_scenario(sc))
    p2p = estimate(parse_scenario({**sc, "cluster": {**sc["cluster"], "intra_node_busbw_gbs": 31.5 * 0.8}}))
    assert "without peer-to-peer" in staged.assumptions["intra_node"]
    assert "15.1 GB/s achievable" in staged.assumptions["intra_node"]          # 31.5 x 0.48
    # the same traffic over half the bus bandwidth and four times the latency takes longer
    assert staged.time_breakdown_s["tp_comm"] > 1.5 * p2p.time_breakdown_s["tp_comm"] > 0


@pytest.mark.parametrize("acc_id,n", [("RTX-4090", 8), ("RTX-A6000", 4), ("RTX-PRO-6000-Blackwell", 8)])
def test_search_finds_a_layout_on_workstation_cards(acc_id, n):
    out = search(parse_scenario({"model": {"preset": "llama3.1-8b"},
                                 "training": {"seq_len": 4096, "global_batch_size": 256, "total_tokens": 1e10},
                                 "cluster": {"accelerator": acc_id, "n_gpus": n}}), top=1, pareto_sizes=[])
    best = out.best[0]
    assert best.fits and 0.1 < best.mfu < 0.75
    tp = best.layout.tp
    assert tp <= load_catalog().accelerator(acc_id).gpus_per_node              # tensor parallel stays in the domain


def test_announced_parts_carry_their_status_and_sources():
    cat = load_catalog()
    assert {a.id for a in cat.accelerators.values() if a.status == "announced"} == set(ANNOUNCED)
    for acc_id in ANNOUNCED:
        acc = cat.accelerator(acc_id)
        assert acc.sources and all(s.url.startswith("https://") and s.date[:4] >= "2025" for s in acc.sources)
        assert ANNOUNCED_NOTE in acc.status_note
    assert cat.accelerator("VR200").memory_gb == 288 and cat.accelerator("MI455X").memory_gb == 432
    assert cat.accelerator("Trainium3").memory_bandwidth_gbs == 4900
    assert cat.networks["nvlink6"].bandwidth_gbs * 2 == 3600                   # NVLink 6: 3.6 TB/s per GPU


def test_an_announced_accelerator_is_said_in_the_estimate_warnings():
    base = {"model": {"preset": "llama3.1-8b"},
            "training": {"seq_len": 4096, "global_batch_size": 288, "total_tokens": 1e11, "precision": "bf16"},
            "layout": {"dp": 72, "micro_batch_size": 1, "zero_stage": 1}}
    announced = estimate(parse_scenario({**base, "cluster": {"accelerator": "VR200", "n_gpus": 72}}))
    shipping = estimate(parse_scenario({**base, "cluster": {"accelerator": "GB200", "n_gpus": 72}}))
    assert any(ANNOUNCED_NOTE in w for w in announced.warnings)
    assert not any(ANNOUNCED_NOTE in w for w in shipping.warnings or [])


def test_the_comparison_ranks_announced_parts_after_every_shipping_one():
    sc = parse_scenario({"model": {"preset": "llama3.1-8b"},
                         "training": {"seq_len": 4096, "global_batch_size": 288, "total_tokens": 1e11},
                         "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 72}})
    result = compare(sc, accelerators=["H100-SXM5-80GB", "B200-SXM-180GB", "VR200", "MI455X"])
    ranks = {r.accelerator: r for r in result.rows}
    # Rubin is faster on its announced figures, and still ranks after the parts one can buy and measure
    assert ranks["VR200"].wall_days < ranks["B200-SXM-180GB"].wall_days
    assert max(ranks[a].rank for a in ("H100-SXM5-80GB", "B200-SXM-180GB")) < min(ranks[a].rank for a in ("VR200", "MI455X"))
    assert result.recommendation in ("H100-SXM5-80GB", "B200-SXM-180GB")
    for a in ("VR200", "MI455X"):
        assert ranks[a].status == "announced" and "no shipping measurement" in ranks[a].why

