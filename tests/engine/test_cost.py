"""Cost: the dated price table, cloud vs on-premises TCO, break-even, and the published DeepSeek-V3 figure."""
import json
import re

import pytest

from engine.catalog import Source, load_catalog
from engine.cost import (HOURS_PER_YEAR, break_even_utilisation, break_even_years, capex_per_gpu_usd, cost_usd,
                         fixed_usd_per_gpu_year, onprem_usd_per_gpu_hour, power_usd_per_gpu_hour, price_table)
from engine.estimate import estimate
from engine.scenario import ScenarioError
from tests.conftest import ROOT
from tests.engine.helpers import parse

PRICES = json.loads((ROOT / "data" / "prices.json").read_text())["rows"]


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
    est = estimate(parse())
    cheapest = min(r.get("usd_per_gpu_hour") or r["usd_per_instance_hour"] / r["gpus_per_instance"]
                   for r in PRICES if r["accelerator"] == "H100-SXM5-80GB" and r["pricing"] == "on_demand")
    c = est["cost"]
    assert c["usd_per_gpu_hour"] == pytest.approx(cheapest)
    assert est["cost_usd"] == pytest.approx(8 * est["wall_days"] * 24 * cheapest)
    assert c["price_row"]["date"] and c["price_row"]["source"].startswith("https://")
    assert len(c["cloud_prices"]) == sum(r["accelerator"] == "H100-SXM5-80GB" for r in PRICES)


def test_explicit_provider_pricing_and_price():
    azure = estimate(parse(**{"cluster.accelerator": "A100-SXM4-80GB", "cost.provider": "azure", "cost.region": "eastus",
                              "cost.pricing": "reserved_3y"}))
    assert azure["cost"]["usd_per_gpu_hour"] == 2.13 and azure["cost"]["price_row"]["pricing"] == "reserved_3y"
    mine = estimate(parse(**{"cost.price_usd_per_gpu_hour": 2.0}))
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

    est = estimate(parse(**{"cost.basis": "on_prem", "site.accelerator_power_w": 1000, "site.host_power_w_per_gpu": 0,
                            "site.pue": 1.5, "cost.on_prem.server_capex_usd": 100_000, "cost.on_prem.gpus_per_server": 4,
                            "cost.on_prem.network_fraction": 0.2, "cost.on_prem.storage_capex_usd_per_gpu": 1_000,
                            "cost.on_prem.depreciation_years": 4, "cost.on_prem.utilisation": 0.5,
                            "cost.on_prem.power_usd_per_kwh": 0.10, "cost.on_prem.ops_usd_per_gpu_year": 500}))
    assert est["cost"]["basis"] == "on_prem" and est["cost"]["usd_per_gpu_hour"] == pytest.approx(per_h)
    assert est["cost_usd"] == pytest.approx(8 * est["wall_days"] * 24 * per_h)


def test_default_tco_uses_the_published_server_price():
    c = estimate(parse())["cost"]["on_prem"]
    # DGX H100 at ~$270,000 for 8 GPUs, network 19% of the cluster (Epoch AI)
    assert c["capex_usd_per_gpu"] == pytest.approx(270_000 / 8 / 0.81)
    assert 0 < c["break_even"]["utilisation"] < 1 and c["break_even"]["years_at_utilisation"] > 0
    assert all(v["source"] for v in c["inputs"].values())


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
