"""The data catalog loads, carries sources, and holds dense datasheet figures (not the seeds' errors)."""
import pytest

from engine.catalog import load_catalog

REQUIRED_IDS = ["V100-SXM2-32GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H100-PCIe-80GB",
                "H200-SXM-141GB", "B200-SXM-180GB", "GB200", "MI250X", "MI300X", "MI325X", "MI355X", "Gaudi2",
                "Gaudi3", "TPU-v5e", "TPU-v5p", "L40S"]
REQUIRED_PRESETS = ["gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3.1-8b", "llama3.1-70b",
                    "llama3.1-405b", "mixtral-8x7b", "deepseek-v3"]


def test_required_accelerators_and_presets_exist():
    cat = load_catalog()
    assert set(REQUIRED_IDS) <= set(cat.accelerators)
    assert set(REQUIRED_PRESETS) <= set(cat.models)
    for kind in ("pcie4", "pcie5", "nvlink3", "nvlink4", "nvlink5", "infinity_fabric_cdna3", "ib_hdr", "ib_ndr", "ib_xdr", "roce_400"):
        assert kind in cat.networks


def test_every_row_has_a_dated_source():
    cat = load_catalog()
    for acc in cat.accelerators.values():
        assert acc.sources and all(s.url.startswith("http") and s.date[:4].isdigit() for s in acc.sources)
    for row in list(cat.networks.values()) + list(cat.models.values()):
        assert row.source.url.startswith("http")


@pytest.mark.parametrize("acc_id,dtype,dense", [
    # datasheets list tensor figures with 2:4 sparsity (NVIDIA's footnote 'with sparsity'); the catalog holds half of them
    ("H100-SXM5-80GB", "bf16", 989.4), ("H100-SXM5-80GB", "fp8", 1978.9), ("B200-SXM-180GB", "bf16", 2250.0),
    ("MI300X", "bf16", 1307.4), ("A100-SXM4-80GB", "bf16", 312.0), ("MI250X", "bf16", 383.0),
])
def test_peaks_are_dense(acc_id, dtype, dense):
    assert load_catalog().accelerator(acc_id).peak(dtype) == pytest.approx(dense)


def test_datasheet_figures_not_their_common_misquotes():
    cat = load_catalog()
    assert cat.accelerator("MI300X").memory_gb == 192           # AMD MI300X datasheet: 192 GB HBM3 (not 128)
    assert cat.accelerator("MI250X").memory_bandwidth_gbs > 3000  # 3.2 TB/s for the module, 1.6 TB/s is one GCD
    assert cat.accelerator("A100-SXM4-80GB").memory_bandwidth_gbs == 2039  # 80GB SXM part; 1.56 TB/s is the 40GB
    assert cat.networks["nvlink4"].bandwidth_gbs == 450        # 900 GB/s bidirectional, per direction 450
    assert cat.networks["ib_ndr"].bandwidth_gbs == 50          # 400 Gb/s, not GB/s


def test_matmul_efficiency_is_measured_over_peak():
    h100 = load_catalog().accelerator("H100-SXM5-80GB")
    eff, note = h100.matmul_efficiency("bf16")
    assert eff == pytest.approx(794.5 / 989.4)
    assert "794.5" in note
    assert h100.matmul_efficiency("fp8")[0] == pytest.approx(1402.6 / 1978.9)


NEW_IDS = ["B300-SXM-270GB", "GB300", "GH200-144GB", "H200-NVL-141GB", "H800-SXM-80GB", "MI350X", "TPU-v6e", "TPU-v7",
           "Trainium2", "Apple-M3-Ultra", "Apple-M4-Max"]


def test_2025_2026_accelerators_are_in_the_catalog_with_sources():
    cat = load_catalog()
    for acc_id in NEW_IDS:
        acc = cat.accelerator(acc_id)
        assert acc.sources and all(s.url.startswith("https://") for s in acc.sources), acc_id


@pytest.mark.parametrize("acc_id,dtype,dense", [
    # NVIDIA rack and platform pages print sparse tensor figures: the catalog holds half
    ("GB300", "bf16", 360e3 / 72 / 2), ("GB300", "fp4", 1080e3 / 72), ("GB300", "fp8", 720e3 / 72 / 2),
    ("B300-SXM-270GB", "bf16", 36e3 / 8 / 2), ("H200-NVL-141GB", "bf16", 1671 / 2), ("H800-SXM-80GB", "fp8", 3958 / 2),
    # vendors that print dense figures: AMD, Google, AWS
    ("MI350X", "bf16", 2306.9), ("TPU-v6e", "bf16", 918.0), ("TPU-v7", "fp8", 4614.0), ("Trainium2", "fp8", 1299.0),
])
def test_new_peaks_are_dense(acc_id, dtype, dense):
    assert load_catalog().accelerator(acc_id).peak(dtype) == pytest.approx(dense, rel=0.002)


def test_scale_up_domains_and_workstations():
    cat = load_catalog()
    assert cat.accelerator("GB300").gpus_per_node == 72 and cat.accelerator("GB300").accelerators_per_server == 4
    assert cat.accelerator("GB200").gpus_per_node == 72
    for apple in ("Apple-M3-Ultra", "Apple-M4-Max"):
        acc = cat.accelerator(apple)
        assert acc.device_class == "workstation" and acc.gpus_per_node == 1 and acc.vendor == "Apple"
        assert all(v is None for v in acc.peak_tflops.model_dump().values())    # Apple publishes no TFLOPS
    assert cat.accelerator("TPU-v6e").tdp_w is None                                # Google publishes no TPU power
    # microscaling and 4-bit need Blackwell / CDNA4 tensor cores; Hopper has neither
    assert cat.accelerator("H100-SXM5-80GB").peak("mxfp8") is None and cat.accelerator("H100-SXM5-80GB").peak("fp4") is None
    assert cat.accelerator("B200-SXM-180GB").peak("mxfp8") == cat.accelerator("B200-SXM-180GB").peak("fp8")
