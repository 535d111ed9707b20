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
    # datasheets list tensor figures with sparsity; the catalog holds half of them (seed 003 L343-L350 errors)
    ("H100-SXM5-80GB", "bf16", 989.4), ("H100-SXM5-80GB", "fp8", 1978.9), ("B200-SXM-180GB", "bf16", 2250.0),
    ("MI300X", "bf16", 1307.4), ("A100-SXM4-80GB", "bf16", 312.0), ("MI250X", "bf16", 383.0),
])
def test_peaks_are_dense(acc_id, dtype, dense):
    assert load_catalog().accelerator(acc_id).peak(dtype) == pytest.approx(dense)


def test_seed_errors_are_corrected():
    cat = load_catalog()
    assert cat.accelerator("MI300X").memory_gb == 192           # seed 003 L255 says 128 GB
    assert cat.accelerator("MI250X").memory_bandwidth_gbs > 3000  # seed says 1.6 TB/s (one GCD)
    assert cat.accelerator("A100-SXM4-80GB").memory_bandwidth_gbs == 2039  # seed lists 1.56 TB/s (40GB part)
    assert cat.networks["nvlink4"].bandwidth_gbs == 450        # 900 GB/s bidirectional, per direction 450
    assert cat.networks["ib_ndr"].bandwidth_gbs == 50          # 400 Gb/s, not GB/s (seed 004 T5)


def test_matmul_efficiency_is_measured_over_peak():
    h100 = load_catalog().accelerator("H100-SXM5-80GB")
    eff, note = h100.matmul_efficiency("bf16")
    assert eff == pytest.approx(794.5 / 989.4)
    assert "794.5" in note
    assert h100.matmul_efficiency("fp8")[0] == pytest.approx(1402.6 / 1978.9)
