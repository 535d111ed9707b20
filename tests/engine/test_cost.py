"""Cost: the dated price table, cloud vs on-premises TCO, break-even, and the published DeepSeek-V3 figure."""
import json
import re

import pytest

from engine.catalog import Source, load_catalog
from engine.economics.cost import (HOURS_PER_YEAR, break_even_utilisation, break_even_years, capex_per_gpu_usd,
                         colocation_usd_per_gpu_year, cost_usd, fixed_usd_per_gpu_year, onprem_usd_per_gpu_hour,
                         power_usd_per_gpu_hour, prices_for, price_table, server_capex_usd, server_prices)
from engine.planning.estimate import estimate
from engine.scenario import ScenarioError
from tests.conftest import ROOT
from tests.engine.helpers import FITS, parse

PRICES = json.loads((ROOT / "data" / "prices.json").read_text())["rows"]
TCO = json.loads((ROOT / "data" / "tco_defaults.json").read_text())
# SemiAnalysis DGX H100 bill of materials, non-GPU parts, as summed in Epoch AI's h100_manufacturing_cost.ipynb
HOST_USD_PER_GPU = (5200 + 7860 + 3456 + 10908 + 563 + 875 + 463 + 1200 + 1485) / 8
# CBRE North America Data Center Trends H2 2024: 250-500 kW wholesale asking rent
COLO_USD_PER_KW_MONTH = 184.06


def test_deepseek_v3_rental_cost():
    # DeepSeek-AI 2024 (arXiv:2412.19437) Table 1: 2.788M H800 GPU-hours at an assumed $2 per GPU-hour = $5.576M
    assert float(cost_usd(2.788e6, 2.0)) == pytest.approx(5.576e6)


def test_every_price_row_is_dated_sourced_and_known():
    ids = set(load_catalog().accelerators)
    assert len(price_table()) == len(PRICES) > 30
    for r in PRICES:
        assert r["accelerator"] in ids
        assert re.match(r"^https?://", r["source"]["url"]) and re.match(r"^\d{4}(-\d{2})?(-\d{2})?$", r["source"]["date"])
        assert r["pricing"] in ("on_demand", "reserved_1y", "reserved_3y", "reserved", "spot")
    p5 = next(r for r in price_table() if r.instance == "p5.48xlarge" and r.pricing == "on_demand")
    assert p5.price == pytest.approx(55.04 / 8)           # AWS lists the 8-GPU instance at $55.04/h


def test_default_price_is_the_cheapest_published_on_demand_row():
    est = estimate(parse(**FITS))
    cheapest = min(r.get("usd_per_gpu_hour") or r["usd_per_instance_hour"] / r["gpus_per_instance"]
                   for r in PRICES if r["accelerator"] == "H100-SXM5-80GB" and r["pricing"] == "on_demand")
    c = est["cost"]
    assert c["usd_per_gpu_hour"] == pytest.approx(cheapest)
    assert est["cost_usd"] == pytest.approx(8 * est["wall_days"] * 24 * cheapest)
    assert c["price_row"]["date"] and c["price_row"]["source"].startswith("https://")
    assert len(c["cloud_prices"]) == sum(r["accelerator"] == "H100-SXM5-80GB" for r in PRICES)


def test_explicit_provider_pricing_and_price():
    azure = estimate(parse(**FITS, **{"cluster.accelerator": "A100-SXM4-80GB", "cost.provider": "azure",
                                      "cost.region": "eastus", "cost.pricing": "reserved_3y"}))
    assert azure["cost"]["usd_per_gpu_hour"] == 2.13 and azure["cost"]["price_row"]["pricing"] == "reserved_3y"
    mine = estimate(parse(**FITS, **{"cost.price_usd_per_gpu_hour": 2.0}))
    assert mine["cost_usd"] == pytest.approx(8 * mine["wall_days"] * 24 * 2.0)


def test_no_published_price_asks_for_one():
    est = estimate(parse(**{"cluster.accelerator": "TPU-v5p", "cluster.n_gpus": 8}))
    assert est["cost_usd"] is None and "enter one" in est["cost"]["missing"]
    assert est["cost"]["on_prem"]["missing"].endswith("cost.on_prem.server_capex_usd")


def test_unknown_price_references_are_explained():
    with pytest.raises(ScenarioError) as err:
        parse(**{"cost.provider": "acme"})
    assert err.value.problems[0][0] == "cost.provider" and "lambda" in err.value.problems[0][1]
    with pytest.raises(ScenarioError) as err:
        parse(**{"cost.region": "mars-1"})
    assert err.value.problems[0][0] == "cost.region" and "us-east-1" in err.value.problems[0][1]
    with pytest.raises(ScenarioError) as err:
        parse(**{"cost.provider": "lambda", "cost.pricing": "spot"})
    assert err.value.problems[0][0] == "cost.pricing"
    with pytest.raises(ScenarioError) as err:
        parse(**{"cost.basis": "on_prem", "cost.price_usd_per_gpu_hour": 2})
    assert err.value.problems[0][0] == "cost.price_usd_per_gpu_hour"


def test_on_prem_tco_by_hand():
    # server $100k for 4 GPUs, network 20% of the cluster, $1k storage per GPU, 4 years, 50% used, $0.10/kWh,
    # $500 operations per GPU-year, 1 kW per GPU at the node, PUE 1.5
    capex = 100_000 / 4 / 0.8 + 1_000
    fixed = capex / 4 + 500
    power_h = 1.0 * 1.5 * 0.10
    per_h = fixed / (8766 * 0.5) + power_h
    assert capex_per_gpu_usd(100_000, 4, 0.2, 1_000) == pytest.approx(capex)
    assert fixed_usd_per_gpu_year(capex, 4, 500) == pytest.approx(fixed)
    assert power_usd_per_gpu_hour(1000, 1.5, 0.10) == pytest.approx(power_h)
    assert float(onprem_usd_per_gpu_hour(fixed, 0.5, power_h)) == pytest.approx(per_h)
    # renting at $3/GPU-hour: owning wins above fixed / (8766 (3 - power)) utilisation, and pays back in
    # capex / (8766 u (3 - power) - ops) years
    assert break_even_utilisation(fixed, power_h, 3.0) == pytest.approx(fixed / (8766 * (3.0 - power_h)))
    assert break_even_years(capex, 500, power_h, 3.0, 0.5) == pytest.approx(capex / (8766 * 0.5 * (3.0 - power_h) - 500))
    assert break_even_utilisation(fixed, 0.2, 0.1) is None and HOURS_PER_YEAR == 8766

    est = estimate(parse(**FITS, **{
        "cost.basis": "on_prem", "site.accelerator_power_w": 1000, "site.host_power_w_per_gpu": 0, "site.pue": 1.5,
        "cost.on_prem.server_capex_usd": 100_000, "cost.on_prem.gpus_per_server": 4, "cost.on_prem.network_fraction": 0.2,
        "cost.on_prem.storage_capex_usd_per_gpu": 1_000, "cost.on_prem.depreciation_years": 4,
        "cost.on_prem.utilisation": 0.5, "cost.on_prem.power_usd_per_kwh": 0.10, "cost.on_prem.ops_usd_per_gpu_year": 500}))
    assert est["cost"]["basis"] == "on_prem" and est["cost"]["usd_per_gpu_hour"] == pytest.approx(per_h)
    assert est["cost_usd"] == pytest.approx(8 * est["wall_days"] * 24 * per_h)


def test_default_tco_uses_the_published_server_price():
    c = estimate(parse())["cost"]["on_prem"]
    # DGX H100 at ~$270,000 for 8 GPUs, network 19% of the cluster (Epoch AI)
    assert c["capex_usd_per_gpu"] == pytest.approx(270_000 / 8 / 0.81)
    assert 0 < c["break_even"]["utilisation"] < 1 and c["break_even"]["years_at_utilisation"] > 0
    assert all(v["source"] and v["unit"] and v["derivation"] for v in c["inputs"].values())


def test_default_h100_tco_per_gpu_hour_by_hand():
    # DGX H100 $270,000 / 8, network 19%: $41,666.67 per GPU over 5.5 years = $7,575.76 a year.
    # Colocation: DGX H100 10.2 kW / 8 = 1.275 kW of IT capacity per GPU x $184.06 x 12 = $2,816.12 a year.
    # Average node power 1.275 kW x 0.75 = 956.25 W x PUE 1.25 x $0.0806/kWh = $0.0963 per hour.
    # (7,575.76 + 2,816.12) / (8,766 h x 0.80) + 0.0963 = $1.5782 per used GPU-hour (it was $1.18 with operations at 0).
    est = estimate(parse(**{"cost.basis": "on_prem"}))
    c = est["cost"]["on_prem"]
    ops = 184.06 * 12 * 10_200 / 8 / 1000
    per_h = (270_000 / 8 / 0.81 / 5.5 + ops) / (8766 * 0.80) + 0.95625 * 1.25 * 0.0806
    assert ops == pytest.approx(2816.118) and per_h == pytest.approx(1.5782, abs=1e-4)
    assert c["inputs"]["contracted_kw_per_gpu"]["value"] == pytest.approx(1.275)
    assert c["inputs"]["ops_usd_per_gpu_year"]["value"] == pytest.approx(ops)
    assert c["usd_per_gpu_hour"] == pytest.approx(per_h) and est["cost"]["usd_per_gpu_hour"] == pytest.approx(per_h)
    terms = {t["term"]: t["usd_per_gpu_hour"] for t in c["per_gpu_hour_terms"]}
    assert terms["operations"] == pytest.approx(ops / (8766 * 0.8)) and sum(terms.values()) == pytest.approx(per_h)
    # the cheapest published on-demand H100 rent is what owning is compared with
    rent = min(r.get("usd_per_gpu_hour") or r["usd_per_instance_hour"] / r["gpus_per_instance"]
               for r in PRICES if r["accelerator"] == "H100-SXM5-80GB" and r["pricing"] == "on_demand")
    fixed = 270_000 / 8 / 0.81 / 5.5 + ops
    power_h = 0.95625 * 1.25 * 0.0806
    assert c["break_even"]["against_usd_per_gpu_hour"] == rent
    assert c["break_even"]["utilisation"] == pytest.approx(fixed / (8766 * (rent - power_h)))


def test_contracted_power_is_the_peak_whatever_the_average():
    # the lease is for the DGX H100's peak 1.275 kW per GPU; a lower average-to-peak factor lowers the energy, not the rent
    c = estimate(parse(**{"site.utilisation_factor": 0.5}))["cost"]["on_prem"]["inputs"]
    assert c["contracted_kw_per_gpu"]["value"] == pytest.approx(1.275)
    assert colocation_usd_per_gpu_year(COLO_USD_PER_KW_MONTH, 1.275) == pytest.approx(2816.118)


def test_given_operations_replace_the_colocation_default():
    c = estimate(parse(**{"cost.on_prem.ops_usd_per_gpu_year": 500}))["cost"]["on_prem"]["inputs"]
    assert c["ops_usd_per_gpu_year"]["value"] == 500 and "given in" in c["ops_usd_per_gpu_year"]["source"]
    assert "colocation_usd_per_kw_month" not in c and "contracted_kw_per_gpu" not in c


def test_server_price_by_priced_unit():
    assert HOST_USD_PER_GPU == 4001.25 == TCO["host_capex_usd_per_gpu"]["value"]
    assert server_capex_usd(270_000, "server", 8, HOST_USD_PER_GPU) == 270_000
    assert server_capex_usd(3_000_000, "rack", 72, HOST_USD_PER_GPU) == 3_000_000
    # HGX H200 8-GPU baseboard $270,565 plus the host share of 8 GPUs
    assert server_capex_usd(270_565, "gpu_baseboard", 8, HOST_USD_PER_GPU) == pytest.approx(270_565 + 32_010)
    # one H100 PCIe card $24,500, eight of them with their host share
    assert server_capex_usd(24_500, "accelerator", 8, HOST_USD_PER_GPU) == pytest.approx(8 * 24_500 + 32_010)
    with pytest.raises(ValueError):
        server_capex_usd(1, "tray", 4, HOST_USD_PER_GPU)


@pytest.mark.parametrize("accelerator, n_gpus, capex_per_gpu", [
    ("GB200", 72, 3_000_000 / 72 / 0.81),                       # NVL72 rack at ~$3M (NT$96M, UDN via TweakTown)
    ("H200-SXM-141GB", 8, (270_565 + 32_010) / 8 / 0.81),       # HGX H200 baseboard + host share
    ("MI300X", 8, (205_869.68 + 32_010) / 8 / 0.81),            # 8-OAM UBB $25,733.71 x 8 + host share
    ("Gaudi3", 8, (125_000 + 32_010) / 8 / 0.81),               # Intel's Computex 2024 kit list price + host share
    ("H100-PCIe-80GB", 8, (24_500 + 4001.25) / 0.81),           # one card + its host share
    ("B200-SXM-180GB", 8, 47_409.13 / 0.81),                    # DGX B200, $47,409.13 per GPU
])
def test_published_server_prices_per_gpu(accelerator, n_gpus, capex_per_gpu):
    batch = 288 if n_gpus == 72 else 256
    c = estimate(parse(**{"cluster.accelerator": accelerator, "cluster.n_gpus": n_gpus, "layout.dp": n_gpus,
                          "training.global_batch_size": batch}))["cost"]["on_prem"]
    assert c["capex_usd_per_gpu"] == pytest.approx(capex_per_gpu)
    row = next(s for s in TCO["servers"] if s["accelerator"] == accelerator)
    assert row["source"]["url"] in c["inputs"]["server_capex_usd"]["source"]


def test_every_server_price_is_sourced_known_and_single():
    rows = server_prices()
    assert set(rows) == {s["accelerator"] for s in TCO["servers"]} and len(rows) == len(TCO["servers"]) >= 14
    assert set(rows) <= set(load_catalog().accelerators)
    assert rows["GB200"].priced_unit == "rack" and rows["GB200"].gpus_per_server == 72
    assert not {"TPU-v5p", "MI355X", "B300-SXM-270GB", "GB300"} & set(rows)   # no public price found: "enter one"


def test_added_cloud_prices():
    # Google's archived TPU page (2025-03-03): v5e $1.20 / $0.84 / $0.54, v6e $2.70 / $1.89 / $1.22 per chip-hour
    assert [r.price for r in prices_for("TPU-v5e", "gcp")] == [0.54, 0.84, 1.20]
    assert [r.price for r in prices_for("TPU-v6e", "gcp", "us-east1")] == [1.22, 1.89, 2.70]
    assert prices_for("H800-SXM-80GB", pricing="on_demand")[0].price == 3.42


def test_every_tco_term_has_value_unit_derivation_and_source():
    for name, term in TCO.items():
        if name in ("schema_version", "updated", "about", "servers"):
            continue
        assert {"value", "unit", "derivation"} <= set(term) and ("source" in term or term.get("note")), name
    for row in TCO["servers"]:
        Source(**row["source"])
        assert row["derivation"] and row["priced_unit"] in ("server", "rack", "gpu_baseboard", "accelerator")


def test_tco_and_reliability_defaults_carry_sources():
    for name in ("tco_defaults.json", "reliability.json"):
        doc = json.loads((ROOT / "data" / name).read_text())
        found = []

        def walk(node):
            if isinstance(node, dict):
                if "source" in node:
                    found.append(Source(**node["source"]))   # document, http(s) url and date, or it raises
                elif "value" in node:
                    assert node.get("note"), f"{name}: a value with neither source nor note: {node}"
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(doc)
        assert found, name
