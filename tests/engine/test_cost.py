"""Cost: the dated price table, cloud vs on-premises TCO, break-even and its curves, DeepSeek-V3's published cost."""
import json
import re

import pytest

from engine.catalog import Source, load_catalog
from engine.economics.cost import (HOURS_PER_YEAR, break_even_curves, break_even_utilisation, break_even_years,
                         capex_per_gpu_usd, colocation_usd_per_gpu_year, cost_usd, fixed_usd_per_gpu_year,
                         no_published_price, onprem_usd_per_gpu_hour, power_usd_per_gpu_hour, prices_for, price_table,
                         server_capex_usd, server_prices, sold_for_a_cluster)
from engine.planning.estimate import estimate
from engine.presentation.edit import default_scenario
from engine.scenario import ScenarioError
from tests.conftest import ROOT
from tests.engine.helpers import FITS, parse

PRICE_DOC = json.loads((ROOT / "data" / "prices.json").read_text())
PRICES = PRICE_DOC["rows"]
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
    assert len(price_table()) == len(PRICES) > 70
    for r in PRICES:
        assert r["accelerator"] in ids
        assert re.match(r"^https?://", r["source"]["url"]) and re.match(r"^\d{4}(-\d{2})?(-\d{2})?$", r["source"]["date"])
        assert r["pricing"] in ("on_demand", "reserved_1y", "reserved_3y", "reserved", "spot")
        assert r.get("slice_of") in (None, "rack", "pod")
    p5 = next(r for r in price_table() if r.instance == "p5.48xlarge" and r.pricing == "on_demand")
    assert p5.price == pytest.approx(6.88) == 55.04 / 8    # AWS lists the 8-GPU instance at $55.04/h
    p5en = next(r for r in price_table() if r.instance == "p5en.48xlarge" and r.pricing == "on_demand")
    assert p5en.price == pytest.approx(7.912)             # $63.296 per instance-hour / 8 H200
    # Azure bills ND MI300X v5 per instance ($48.00/h in eastus2) and Oracle BM.GPU.MI300X.8 per GPU ($6.00): the same
    # rate read two ways
    azure, oracle = (next(r for r in prices_for("MI300X", p, pricing="on_demand")) for p in ("azure", "oracle"))
    assert azure.price == 48.00 / 8 == oracle.price == 6.00


def test_every_catalog_accelerator_has_a_price_or_says_none_was_found():
    priced = {r["accelerator"] for r in PRICES}
    unpriced = {n["accelerator"] for n in PRICE_DOC["no_published_price"]}
    assert priced | unpriced == set(load_catalog().accelerators) and not priced & unpriced
    assert {"TPU-v5p", "TPU-v7", "Trainium2", "Gaudi3", "GB300"} <= unpriced
    for n in PRICE_DOC["no_published_price"]:
        assert n["providers_checked"] and re.match(r"^\d{4}-\d{2}-\d{2}$", n["date"]) and n["note"]
        assert no_published_price(n["accelerator"]).providers_checked == n["providers_checked"]
    assert no_published_price("MI300X") is None


def per_gpu_hour(r: dict) -> float:
    return r.get("usd_per_gpu_hour") or r["usd_per_instance_hour"] / r["gpus_per_instance"]


def test_default_price_is_the_cheapest_on_demand_row_sold_for_the_cluster():
    # one 8-GPU H100 node: rows of whole 8-GPU instances qualify, the cheapest is Lambda's 8x H100 SXM at $3.99 per
    # GPU-hour; Hyperstack's 1-GPU VM ($3.20) is cheaper but cannot be rented as an NVLink node
    est = estimate(parse(**FITS))
    eight = [per_gpu_hour(r) for r in PRICES if r["accelerator"] == "H100-SXM5-80GB" and r["pricing"] == "on_demand"
             and r["gpus_per_instance"] >= 8]
    c = est.cost
    assert min(eight) == 3.99 and c["usd_per_gpu_hour"] == 3.99 and c["scale_warning"] is None
    assert est.cost_usd == pytest.approx(8 * est.wall_days * 24 * 3.99)
    row = c["price_row"]
    assert (row["provider"], row["instance"], row["pricing"], row["gpus_per_instance"], row["date"], row["source"]) == (
        "lambda", "8x NVIDIA H100 SXM", "on_demand", 8, "2026-09-20", "https://lambda.ai/instances")
    assert "Lambda instances pricing page" in row["source_document"]
    assert all(s in c["price_source"] for s in ("lambda", "8x NVIDIA H100 SXM", "on_demand", "$3.99 per GPU-hour",
                                                "Lambda instances pricing page", "2026-09-20"))
    assert len(c["cloud_prices"]) == sum(r["accelerator"] == "H100-SXM5-80GB" for r in PRICES)
    hyperstack = next(p for p in c["cloud_prices"] if p["provider"] == "hyperstack" and p["pricing"] == "on_demand")
    assert hyperstack["usd_per_gpu_hour"] == 3.20 and not hyperstack["sold_for_this_cluster"]


def test_4096_mi300x_are_priced_from_an_8_gpu_instance_not_a_1_gpu_droplet():
    # before: DigitalOcean's 1-GPU droplet gpu-mi300x1-192gb at $2.59 priced all 4,096 GPUs; now the cheapest 8-GPU
    # instance with InfiniBand, Crusoe's mi300x-192gb-ib.8x at $3.45 per GPU-hour
    est = estimate(parse(**{"cluster.accelerator": "MI300X", "cluster.n_gpus": 4096, "layout.dp": 4096,
                            "training.global_batch_size": 4096}))
    c = est.cost
    assert c["usd_per_gpu_hour"] == 3.45 and c["price_row"]["instance"] == "mi300x-192gb-ib.8x"
    assert c["price_row"]["provider"] == "crusoe" and c["price_row"]["gpus_per_instance"] == 8
    assert est.cost_usd == pytest.approx(4096 * est.wall_days * 24 * 3.45)
    droplet = next(r for r in price_table() if r.instance == "gpu-mi300x1-192gb" and r.pricing == "on_demand")
    assert droplet.price == 2.59 and not sold_for_a_cluster(droplet, 4096, 8)


def test_a_one_gpu_scenario_may_use_a_one_gpu_instance():
    est = estimate(parse(**{"cluster.n_gpus": 1, "layout.dp": 1}))
    assert est.cost["usd_per_gpu_hour"] == 3.20 and est.cost["price_row"]["provider"] == "hyperstack"


def test_slices_of_racks_and_pods_price_a_cluster():
    # CoreWeave rents GB200 NVL72 by the 4-GPU tray ($42.00/h, $10.50 per GPU-hour); Google prices TPU v5e per chip-hour
    # for any pod slice ($1.20 on demand)
    gb200 = estimate(parse(**{"cluster.accelerator": "GB200", "cluster.n_gpus": 72, "layout.dp": 72,
                              "training.global_batch_size": 288})).cost
    assert gb200["usd_per_gpu_hour"] == 42.00 / 4 == 10.50 and gb200["scale_warning"] is None
    v5e = estimate(parse(**{"cluster.accelerator": "TPU-v5e", "cluster.n_gpus": 256, "layout.dp": 256})).cost
    assert v5e["usd_per_gpu_hour"] == 1.20 and v5e["scale_warning"] is None


def test_a_1_gpu_rate_for_a_cluster_is_used_only_when_nothing_else_is_published_and_says_so():
    # B300 on demand: only 1-GPU rates (Hyperstack $7.40, Nebius $9.50); the cost takes the cheapest and says it is
    # not a cluster price. Spot: CoreWeave's 8-GPU HGX B300 at $35.84/h, $4.48 per GPU-hour, a cluster price.
    od = estimate(parse(**{"cluster.accelerator": "B300-SXM-270GB"})).cost
    assert od["usd_per_gpu_hour"] == 7.40 and "1-GPU instance" in od["scale_warning"]
    assert od["scale_warning"] in od["price_source"]
    spot = estimate(parse(**{"cluster.accelerator": "B300-SXM-270GB", "cost.pricing": "spot"})).cost
    assert spot["usd_per_gpu_hour"] == 35.84 / 8 == 4.48 and spot["scale_warning"] is None


def test_committed_terms_are_a_scenario_input():
    # A100 80 GB, 1-year commitment: AWS p4de.24xlarge $24.01/h for 8 GPUs ($3.00 per GPU-hour) is cheaper than Azure's
    # ND96amsr A100 v4 at $3.53
    c = estimate(parse(**{"cluster.accelerator": "A100-SXM4-80GB", "cost.pricing": "reserved_1y"})).cost
    assert c["usd_per_gpu_hour"] == pytest.approx(24.01 / 8) and c["price_row"]["pricing"] == "reserved_1y"
    with pytest.raises(ScenarioError) as err:
        parse(**{"cost.pricing": "monthly"})
    field, msg = err.value.problems[0]
    assert field == "cost.pricing" and all(p in msg for p in ("on_demand", "reserved_1y", "reserved_3y"))


def test_explicit_provider_pricing_and_price():
    azure = estimate(parse(**FITS, **{"cluster.accelerator": "A100-SXM4-80GB", "cost.provider": "azure",
                                      "cost.region": "eastus", "cost.pricing": "reserved_3y"}))
    assert azure.cost["usd_per_gpu_hour"] == 2.13 and azure.cost["price_row"]["pricing"] == "reserved_3y"
    mine = estimate(parse(**FITS, **{"cost.price_usd_per_gpu_hour": 2.0}))
    assert mine.cost_usd == pytest.approx(8 * mine.wall_days * 24 * 2.0)


def test_no_published_price_asks_for_one():
    est = estimate(parse(**{"cluster.accelerator": "TPU-v5p", "cluster.n_gpus": 8}))
    assert est.cost_usd is None and "enter one" in est.cost["missing"]
    assert "providers checked: gcp; 2026-11-24" in est.cost["missing"]
    assert est.cost["on_prem"]["missing"].endswith("cost.on_prem.server_capex_usd")


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
    assert est.cost["basis"] == "on_prem" and est.cost["usd_per_gpu_hour"] == pytest.approx(per_h)
    assert est.cost_usd == pytest.approx(8 * est.wall_days * 24 * per_h)


def test_break_even_curves_cross_at_the_engines_break_even_years():
    est = estimate(default_scenario())
    curves = break_even_curves(est.cost, est.energy, 1024)
    years = est.cost["on_prem"]["break_even"]["years_at_utilisation"]
    diff = [b - r for b, r in zip(curves["buy_usd"], curves["rent_usd"])]
    i = next(k for k, d in enumerate(diff) if d <= 0)
    assert curves["years"][i - 1] <= years <= curves["years"][i]
    # interpolated crossing agrees with cost.break_even_years to 0.1%
    x0, x1, d0, d1 = curves["years"][i - 1], curves["years"][i], diff[i - 1], diff[i]
    assert abs((x0 - d0 * (x1 - x0) / (d1 - d0)) / years - 1) < 1e-3


def test_default_tco_uses_the_published_server_price():
    c = estimate(parse()).cost["on_prem"]
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
    c = est.cost["on_prem"]
    ops = 184.06 * 12 * 10_200 / 8 / 1000
    per_h = (270_000 / 8 / 0.81 / 5.5 + ops) / (8766 * 0.80) + 0.95625 * 1.25 * 0.0806
    assert ops == pytest.approx(2816.118) and per_h == pytest.approx(1.5782, abs=1e-4)
    assert c["inputs"]["contracted_kw_per_gpu"]["value"] == pytest.approx(1.275)
    assert c["inputs"]["ops_usd_per_gpu_year"]["value"] == pytest.approx(ops)
    assert c["usd_per_gpu_hour"] == pytest.approx(per_h) and est.cost["usd_per_gpu_hour"] == pytest.approx(per_h)
    terms = {t["term"]: t["usd_per_gpu_hour"] for t in c["per_gpu_hour_terms"]}
    assert terms["operations"] == pytest.approx(ops / (8766 * 0.8)) and sum(terms.values()) == pytest.approx(per_h)
    # owning is compared with the cheapest on-demand H100 rent sold for this 8-GPU cluster: Lambda's 8x H100, $3.99
    rent = min(per_gpu_hour(r) for r in PRICES if r["accelerator"] == "H100-SXM5-80GB" and r["pricing"] == "on_demand"
               and r["gpus_per_instance"] >= 8)
    assert rent == 3.99
    fixed = 270_000 / 8 / 0.81 / 5.5 + ops
    power_h = 0.95625 * 1.25 * 0.0806
    assert c["break_even"]["against_usd_per_gpu_hour"] == rent
    assert c["break_even"]["utilisation"] == pytest.approx(fixed / (8766 * (rent - power_h)))


def test_contracted_power_is_the_peak_whatever_the_average():
    # the lease is for the DGX H100's peak 1.275 kW per GPU; a lower average-to-peak factor lowers the energy, not the rent
    c = estimate(parse(**{"site.utilisation_factor": 0.5})).cost["on_prem"]["inputs"]
    assert c["contracted_kw_per_gpu"]["value"] == pytest.approx(1.275)
    assert colocation_usd_per_gpu_year(COLO_USD_PER_KW_MONTH, 1.275) == pytest.approx(2816.118)


def test_given_operations_replace_the_colocation_default():
    c = estimate(parse(**{"cost.on_prem.ops_usd_per_gpu_year": 500})).cost["on_prem"]["inputs"]
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
                          "training.global_batch_size": batch})).cost["on_prem"]
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
