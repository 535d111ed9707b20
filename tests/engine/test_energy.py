"""Energy and CO2: published figures reproduced from their own inputs, the vendored grid data, and the estimate's block."""
import json
import subprocess
import sys

import pytest

from engine.economics.energy import co2_kg, embodied_kg, energy_kwh, grid_intensity, region_problem
from engine.planning.estimate import estimate
from engine.scenario import ScenarioError
from tests.conftest import DATA, ROOT
from tests.engine.helpers import FITS, parse

CARBON = ROOT / "data" / "carbon"


def _llama2_rows():
    cases = json.loads((DATA / "public-validation-cases.json").read_text())["energy_cases"]
    return [dict(zip(cases["columns"], r)) for r in cases["rows"]]


@pytest.mark.parametrize("case", _llama2_rows(), ids=lambda c: c["model"])
def test_llama2_table2_within_half_percent(case):
    # Touvron et al. 2023 Table 2, Meta's convention (reference note): GPU-hours x power x PUE 1.1 x 0.385 kgCO2e/kWh
    kwh = energy_kwh(case["gpu_hours"], case["power_w"], 1.1)
    assert float(co2_kg(kwh, 385.0)) / 1000 == pytest.approx(case["published_tco2eq"], rel=0.005)


def test_bloom_before_and_after_pue():
    # Luccioni et al. 2023: 1,082,990 A100-hours at 400 W (TDP), French grid 57 gCO2/kWh -> 433 MWh, 24.7 t; PUE 1.2 -> ~29.6 t
    kwh = float(energy_kwh(1_082_990, 400, 1.0))
    assert kwh / 1000 == pytest.approx(433, rel=0.002)
    assert float(co2_kg(kwh, 57)) / 1000 == pytest.approx(24.7, rel=0.005)
    assert float(co2_kg(energy_kwh(1_082_990, 400, 1.2), 57)) / 1000 == pytest.approx(29.6, rel=0.005)


def test_gpt3_patterson_2021():
    # Patterson et al. 2021 Table 4: 10,000 V100 for 14.8 days, 330 W measured per processor, PUE 1.10, 0.429 kgCO2e/kWh
    # -> 1,287 MWh and 552 tCO2e
    kwh = energy_kwh(10_000 * 14.8 * 24, 330, 1.10)
    assert float(kwh) / 1000 == pytest.approx(1287, rel=0.005)
    assert float(co2_kg(kwh, 429)) / 1000 == pytest.approx(552, rel=0.005)


def test_energy_cli_quick_calculator():
    run = lambda *a: subprocess.run([sys.executable, "-m", "engine", "energy", *a], cwd=ROOT, capture_output=True, text=True, timeout=60)
    out = run("--gpu-hours", "1082990", "--power-w", "400", "--pue", "1.2", "--region", "FRA", "--price-usd-per-gpu-hour", "2")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    mix = json.loads((CARBON / "global_energy_mix.json").read_text())["FRA"]
    assert res["energy_mwh"] == pytest.approx(1_082_990 * 0.4 * 1.2 / 1000)
    assert res["co2_t"] == pytest.approx(1_082_990 * 0.4 * 1.2 * mix["carbon_intensity"] / 1e6)
    assert res["inputs"]["grid"]["data_year"] == mix["year"]
    assert res["cost_usd"] == pytest.approx(2_165_980)
    bad = run("--gpu-hours", "0", "--power-w", "400", "--pue", "0.8")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "--gpu-hours" in bad.stderr and "--pue" in bad.stderr and "Traceback" not in bad.stderr


def test_grid_data_is_the_vendored_codecarbon_files():
    source = json.loads((CARBON / "SOURCE.json").read_text())
    assert source["package"] == "codecarbon" and source["version"] == "3.3.2"
    for name in source["files"]:
        assert (CARBON / name).is_file()
    mix = json.loads((CARBON / "global_energy_mix.json").read_text())
    fra = grid_intensity("FRA")
    assert fra.g_per_kwh == mix["FRA"]["carbon_intensity"] and fra.year == mix["FRA"]["year"] >= 2021
    assert grid_intensity("fra").g_per_kwh == fra.g_per_kwh                       # case does not matter
    usa = json.loads((CARBON / "usa_emissions.json").read_text())
    # eGRID is in lb/MWh; 1 lb = 453.59237 g, 1 MWh = 1000 kWh
    assert grid_intensity("US-VA").g_per_kwh == pytest.approx(usa["virginia"]["emissions"] * 0.45359237)
    assert grid_intensity("aws:us-east-1").g_per_kwh == grid_intensity("US-VA").g_per_kwh
    assert grid_intensity("gcp:europe-west9").g_per_kwh == 34.0 and "Paris" in grid_intensity("gcp:europe-west9").label
    assert grid_intensity(None).g_per_kwh == 475.0                                 # IEA world average shipped by codecarbon
    assert region_problem("FRA") is None and "gcp:NAME" in region_problem("Atlantis")


def test_estimate_energy_block_matches_hand_computation():
    est = estimate(parse(**FITS, **{"site.region": "FRA", "site.pue": 1.1}))
    e = est.energy
    # H100: 700 W TDP and 10.2 kW DGX per 8 GPUs, both at the 0.75 utilisation factor of data/energy_defaults.json
    node_w = 0.75 * 700 + 0.75 * (10_200 / 8 - 700)
    billed_h = 8 * est.wall_days * 24
    assert e["node_power_w_per_gpu"] == pytest.approx(node_w)
    assert est.energy_mwh == pytest.approx(billed_h * node_w * 1.1 / 1e6)
    assert est.co2_t == pytest.approx(est.energy_mwh * grid_intensity("FRA").g_per_kwh / 1000)
    assert e["grid"]["data_year"] is not None
    # embodied: NVIDIA HGX H100 PCF 1,312 kg per 8 GPUs, over 5.5 years of 8,766 h
    assert e["embodied"]["co2_t"] == pytest.approx(8 * 164 * (billed_h / 8) / (5.5 * 8766) / 1000)
    assert e["co2_total_t"] == pytest.approx(est.co2_t + e["embodied"]["co2_t"])


def test_measured_power_and_market_based_options():
    est = estimate(parse(**FITS, **{"site.accelerator_power_w": 600, "site.host_power_w_per_gpu": 200, "site.pue": 1.0,
                                    "site.carbon_intensity_g_per_kwh": 100, "site.market_based_g_per_kwh": 0}))
    billed_h = 8 * est.wall_days * 24
    assert est.energy_mwh == pytest.approx(billed_h * 800 / 1e6)
    assert est.co2_t == pytest.approx(est.energy_mwh * 0.1)
    assert est.energy["co2_market_t"] == 0


def test_tpu_energy_needs_a_power_figure():
    est = estimate(parse(**FITS, **{"cluster.accelerator": "TPU-v5p", "cluster.n_gpus": 8}))
    assert est.energy_mwh is None and est.co2_t is None
    assert "site.accelerator_power_w" in est.energy["missing"]
    est = estimate(parse(**FITS, **{"cluster.accelerator": "TPU-v5p", "cluster.n_gpus": 8,
                                    "site.accelerator_power_w": 500, "site.pue": 1.0}))
    assert est.energy_mwh == pytest.approx(8 * est.wall_days * 24 * 500 / 1e6)


def test_bad_site_values_are_named():
    with pytest.raises(ScenarioError) as err:
        parse(**{"site.region": "Narnia", "site.pue": 0.9, "site.carbon_intensity_g_per_kwh": -3})
    fields = {f for f, _ in err.value.problems}
    assert {"site.pue", "site.carbon_intensity_g_per_kwh"} <= fields
    with pytest.raises(ScenarioError) as err:
        parse(**{"site.region": "Narnia"})
    assert err.value.problems[0][0] == "site.region" and "US-VA" in err.value.problems[0][1]
    assert embodied_kg(8, 164, 8766, 5.5) == pytest.approx(8 * 164 / 5.5)
