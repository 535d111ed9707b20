"""Energy, operational CO2 (location- and market-based) and embodied carbon of a training run.

Energy = GPUs x hours x average power per GPU (accelerator + its share of the host) x PUE; CO2 = energy x grid carbon
intensity. Grid intensities are the data files vendored from the codecarbon wheel (data/carbon/, see
scripts/update_carbon_data.py): Our World in Data per country, EPA eGRID per US state, Google Cloud per region.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from engine.catalog import DATA_DIR, Source, load_catalog

CARBON_DIR = DATA_DIR / "carbon"
G_PER_LB = 453.59237                      # avoirdupois pound (NIST SP 811); eGRID rates are lb/MWh = lb per 1000 kWh
HOURS_PER_YEAR = 8766.0                   # 365.25 days x 24 h


def energy_kwh(gpu_hours, power_w_per_gpu, pue):
    """Facility energy: GPU-hours x average power per GPU (W) x PUE (the Patterson et al. 2021 / Luccioni et al. 2023 convention)."""
    return np.asarray(gpu_hours) * np.asarray(power_w_per_gpu) / 1000.0 * np.asarray(pue)


def co2_kg(kwh, g_per_kwh):
    """Operational emissions: energy x grid carbon intensity."""
    return np.asarray(kwh) * np.asarray(g_per_kwh) / 1000.0


def embodied_kg(n_gpus, kg_per_gpu, hours, lifetime_years):
    """Manufacturing emissions charged to the run: the share of each accelerator's lifetime the run occupies (GSF SCI)."""
    return n_gpus * kg_per_gpu * np.asarray(hours) / (lifetime_years * HOURS_PER_YEAR)


# ---- data -------------------------------------------------------------------------------------------------------

class Valued(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float = Field(gt=0)
    source: Source


class EnergyDefaults(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_version: int
    updated: str
    about: str
    utilisation_factor: Valued
    server_power_per_accelerator_w: dict[str, Valued]
    server_to_accelerator_power_ratio: Valued
    pue: Valued


class EmbodiedRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    accelerator: str
    kg_co2e_per_accelerator: float = Field(gt=0)
    kind: str
    source: Source


class EmbodiedData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_version: int
    updated: str
    about: str
    rows: list[EmbodiedRow]
    hardware_lifetime_years: Valued


@dataclass(frozen=True)
class Grid:
    """Carbon intensity of the electricity at a site, with where it comes from."""
    region: str
    label: str
    g_per_kwh: float
    year: int | None
    source: str


@lru_cache(maxsize=1)
def energy_defaults() -> EnergyDefaults:
    return EnergyDefaults(**json.loads((DATA_DIR / "energy_defaults.json").read_text()))


@lru_cache(maxsize=1)
def embodied_data() -> EmbodiedData:
    data = EmbodiedData(**json.loads((DATA_DIR / "embodied_carbon.json").read_text()))
    unknown = {r.accelerator for r in data.rows} - set(load_catalog().accelerators)
    if unknown:
        raise ValueError(f"data/embodied_carbon.json: unknown accelerator ids {sorted(unknown)}")
    return data


@lru_cache(maxsize=1)
def carbon_files() -> dict:
    source = json.loads((CARBON_DIR / "SOURCE.json").read_text())
    mix = json.loads((CARBON_DIR / "global_energy_mix.json").read_text())
    usa = json.loads((CARBON_DIR / "usa_emissions.json").read_text())
    with open(CARBON_DIR / "gcp_impact.csv", encoding="utf-8-sig", newline="") as f:
        gcp = {row["region"]: row for row in csv.DictReader(f) if row["provider"] == "gcp"}
    world = json.loads((CARBON_DIR / "carbon_intensity_per_source.json").read_text())
    regions = json.loads((CARBON_DIR / "cloud_regions.json").read_text())["rows"]
    return {"source": source, "mix": mix, "usa": usa, "gcp": gcp, "world": world,
            "cloud": {r["region"]: r for r in regions}}


def _via(name: str) -> str:
    files = carbon_files()["source"]
    return f"{files['files'][name]['upstream']} (codecarbon {files['version']} data file {name})"


def _us_state(code: str) -> Grid | None:
    usa = carbon_files()["usa"]
    for state, row in usa.items():
        if isinstance(row, dict) and row.get("regionCode") == code:
            return Grid(f"US-{code}", state.replace("_", " ").title(), row["emissions"] * G_PER_LB / 1000.0,
                        usa["_source"]["year"], _via("usa_emissions.json"))
    return None


def _country(iso3: str) -> Grid | None:
    row = carbon_files()["mix"].get(iso3)
    if row is None:
        return None
    return Grid(iso3, row["country_name"], float(row["carbon_intensity"]), int(row["year"]), _via("global_energy_mix.json"))


def grid_intensity(region: str | None) -> Grid:
    """Location-based intensity of a site: ISO 3166 alpha-3 country (FRA), US state (US-VA), or cloud region
    (gcp:us-central1, aws:us-east-1, azure:eastus); the world average when no site is given. KeyError if unknown."""
    files = carbon_files()
    if region is not None and ":" not in region:
        region = region.strip().upper()
    if region is None:
        return Grid("world", "world average (no site given)", float(files["world"]["world_average"]), 2019,
                    _via("carbon_intensity_per_source.json"))
    if region.startswith("gcp:"):
        row = files["gcp"].get(region[4:])
        if row:
            return Grid(region, f"Google Cloud {row['region']} ({row['city']}, {row['country_name']})", float(row["impact"]),
                        None, _via("gcp_impact.csv"))
    elif region in files["cloud"]:
        where = files["cloud"][region]
        grid = _us_state(where["us_state"]) if where["us_state"] else _country(where["country"])
        return Grid(region, f"{where['name']}: {grid.label}", grid.g_per_kwh, grid.year, grid.source)
    elif region.startswith("US-"):
        grid = _us_state(region[3:])
        if grid:
            return grid
    else:
        grid = _country(region)
        if grid:
            return grid
    raise KeyError(region)


def region_examples() -> list[str]:
    files = carbon_files()
    return (["FRA", "DEU", "USA", "US-VA", "US-OR"] + [f"gcp:{r}" for r in list(files["gcp"])[:4]]
            + list(files["cloud"])[:4])


def region_problem(region: str) -> str | None:
    """Why a site region cannot be used (None when it can)."""
    try:
        grid_intensity(region)
        return None
    except KeyError:
        files = carbon_files()
        return (f"unknown region {region!r}; use an ISO 3166 alpha-3 country code ({len(files['mix'])} known, e.g. FRA, "
                f"DEU, USA), a US state as US-XX (e.g. US-VA), a Google Cloud region as gcp:NAME ({len(files['gcp'])} "
                f"known), or one of {', '.join(files['cloud'])}")


# ---- the scenario's energy inputs ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Power:
    """Everything the energy figures of one scenario need, resolved once; node_w_per_gpu None when no power is known."""
    accelerator: str
    accelerator_w: float | None
    accelerator_w_source: str
    host_w_per_gpu: float | None
    host_w_source: str
    node_w_per_gpu: float | None
    pue: float
    pue_source: str
    grid: Grid
    market_g_per_kwh: float | None
    embodied_kg_per_gpu: float | None
    embodied_source: str
    lifetime_years: float
    lifetime_source: str
    missing: str | None             # why energy cannot be computed


def _src(source: Source) -> str:
    return f"{source.document} ({source.url}, {source.date})"


def resolve(sc) -> Power:
    """The scenario's power, PUE, grid and embodied-carbon inputs: the site block where given, sourced defaults otherwise."""
    d = energy_defaults()
    acc = load_catalog().accelerator(sc.cluster.accelerator)
    site = sc.site
    factor = site.utilisation_factor if site and site.utilisation_factor is not None else d.utilisation_factor.value
    factor_src = "site.utilisation_factor" if site and site.utilisation_factor is not None else _src(d.utilisation_factor.source)
    missing = None
    if site and site.accelerator_power_w is not None:
        acc_w, acc_src = site.accelerator_power_w, "measured, given in site.accelerator_power_w"
    elif acc.tdp_w is not None:
        acc_w, acc_src = acc.tdp_w * factor, f"TDP {acc.tdp_w:g} W x utilisation factor {factor:g} ({factor_src})"
    else:
        acc_w, acc_src = None, f"{acc.vendor} publishes no TDP for {acc.id}"
        missing = f"{acc.vendor} publishes no power figure for {acc.id}; enter site.accelerator_power_w (measured W per accelerator)"
    if site and site.host_power_w_per_gpu is not None:
        host_w, host_src = site.host_power_w_per_gpu, "given in site.host_power_w_per_gpu"
    elif acc.tdp_w is None:
        host_w, host_src = (0.0, "not estimated: no TDP to scale from; include it in site.accelerator_power_w") if acc_w else (None, "unknown")
    elif acc.id in d.server_power_per_accelerator_w:
        server = d.server_power_per_accelerator_w[acc.id]
        host_w = (server.value - acc.tdp_w) * factor
        host_src = f"({server.value:g} W server share - {acc.tdp_w:g} W TDP) x {factor:g}: {_src(server.source)}"
    else:
        ratio = d.server_to_accelerator_power_ratio
        host_w = (ratio.value - 1.0) * acc.tdp_w * factor
        host_src = f"({ratio.value:g} - 1) x TDP {acc.tdp_w:g} W x {factor:g}: {_src(ratio.source)}"
    pue = site.pue if site and site.pue is not None else d.pue.value
    pue_src = "given in site.pue" if site and site.pue is not None else _src(d.pue.source)
    grid = grid_intensity(site.region if site else None)
    if site and site.carbon_intensity_g_per_kwh is not None:
        grid = Grid(grid.region, f"{grid.label}, overridden", site.carbon_intensity_g_per_kwh, None,
                    "given in site.carbon_intensity_g_per_kwh")
    emb = embodied_data()
    row = next((r for r in emb.rows if r.accelerator == acc.id), None)
    return Power(
        accelerator=acc.id, accelerator_w=acc_w, accelerator_w_source=acc_src, host_w_per_gpu=host_w, host_w_source=host_src,
        node_w_per_gpu=None if acc_w is None or host_w is None else acc_w + host_w,
        pue=pue, pue_source=pue_src, grid=grid, market_g_per_kwh=site.market_based_g_per_kwh if site else None,
        embodied_kg_per_gpu=row.kg_co2e_per_accelerator if row else None,
        embodied_source=f"{row.kind}: {_src(row.source)}" if row else f"no published embodied-carbon figure for {acc.id}",
        lifetime_years=emb.hardware_lifetime_years.value, lifetime_source=_src(emb.hardware_lifetime_years.source),
        missing=missing)


def detail(p: Power, n_gpus: int, gpu_hours: float, kwh: float | None) -> dict:
    """The energy block of an estimate: inputs with their sources and the resulting energy and emissions."""
    t = lambda kg: None if kg is None else float(kg) / 1000.0
    wall_h = gpu_hours / n_gpus if n_gpus else 0.0
    embodied = (embodied_kg(n_gpus, p.embodied_kg_per_gpu, wall_h, p.lifetime_years)
                if p.embodied_kg_per_gpu is not None and np.isfinite(wall_h) else None)
    location = None if kwh is None else co2_kg(kwh, p.grid.g_per_kwh)
    return {
        "accelerator_power_w": p.accelerator_w, "accelerator_power_source": p.accelerator_w_source,
        "host_power_w_per_gpu": p.host_w_per_gpu, "host_power_source": p.host_w_source,
        "node_power_w_per_gpu": p.node_w_per_gpu,
        "pue": p.pue, "pue_source": p.pue_source,
        "gpu_hours": gpu_hours if np.isfinite(gpu_hours) else None,
        "energy_mwh": None if kwh is None else float(kwh) / 1000.0,
        "grid": {"region": p.grid.region, "where": p.grid.label, "g_co2e_per_kwh": round(p.grid.g_per_kwh, 3),
                 "data_year": p.grid.year, "source": p.grid.source},
        "co2_location_t": t(location),
        "co2_market_t": t(None if kwh is None or p.market_g_per_kwh is None else co2_kg(kwh, p.market_g_per_kwh)),
        "embodied": {"kg_co2e_per_gpu": p.embodied_kg_per_gpu, "source": p.embodied_source,
                     "lifetime_years": p.lifetime_years, "lifetime_source": p.lifetime_source,
                     "co2_t": t(embodied)},
        "co2_total_t": None if location is None or embodied is None else t(location + embodied),
        "missing": p.missing,
    }


# ---- quick calculator for a run that already happened --------------------------------------------------------------

def calculator_problems(gpu_hours: float, power_w: float, pue: float | None, region: str | None,
                        carbon_intensity_g_per_kwh: float | None, price_usd_per_gpu_hour: float | None) -> list[tuple[str, str]]:
    """What is wrong with the calculator's inputs, as (option, message) pairs."""
    finite = lambda x: x is not None and np.isfinite(x)
    out = []
    if not (finite(gpu_hours) and 0 < gpu_hours <= 1e12):
        out.append(("--gpu-hours", "must be a positive number of GPU-hours (at most 1e12)"))
    if not (finite(power_w) and 0 < power_w <= 5000):
        out.append(("--power-w", "must be the average power per GPU in watts, between 0 and 5000 (e.g. 400 for an A100 at TDP)"))
    if pue is not None and not (finite(pue) and 1.0 <= pue <= 3.0):
        out.append(("--pue", "must be between 1.0 and 3.0 (PUE is facility energy over IT energy, never below 1)"))
    if carbon_intensity_g_per_kwh is not None and not (finite(carbon_intensity_g_per_kwh) and 0 <= carbon_intensity_g_per_kwh <= 2000):
        out.append(("--carbon-intensity-g-per-kwh", "must be between 0 and 2000 gCO2e/kWh (in grams, not kilograms)"))
    if region is not None and (msg := region_problem(region)):
        out.append(("--region", msg))
    if price_usd_per_gpu_hour is not None and not (finite(price_usd_per_gpu_hour) and 0 < price_usd_per_gpu_hour <= 1000):
        out.append(("--price-usd-per-gpu-hour", "must be a positive price in USD per GPU-hour (at most 1000)"))
    return out


def energy_calculator(gpu_hours: float, power_w: float, pue: float | None = None, region: str | None = None,
                      carbon_intensity_g_per_kwh: float | None = None, price_usd_per_gpu_hour: float | None = None) -> dict:
    """energy_mwh, co2_t and cost_usd of a finished run, with the inputs used and their sources (inputs already checked
    with calculator_problems)."""
    if pue is None:
        pue, pue_src = energy_defaults().pue.value, _src(energy_defaults().pue.source)
    else:
        pue_src = "given"
    if carbon_intensity_g_per_kwh is not None:
        grid = Grid("given", "given", carbon_intensity_g_per_kwh, None, "given")
    else:
        grid = grid_intensity(region)
    kwh = float(energy_kwh(gpu_hours, power_w, pue))
    return {
        "energy_mwh": kwh / 1000.0,
        "co2_t": float(co2_kg(kwh, grid.g_per_kwh)) / 1000.0,
        "cost_usd": None if price_usd_per_gpu_hour is None else gpu_hours * price_usd_per_gpu_hour,
        "inputs": {"gpu_hours": gpu_hours, "power_w": power_w, "pue": pue, "pue_source": pue_src,
                   "grid": {"region": grid.region, "where": grid.label, "g_co2e_per_kwh": grid.g_per_kwh,
                            "data_year": grid.year, "source": grid.source},
                   "price_usd_per_gpu_hour": price_usd_per_gpu_hour},
        "formula": "energy = GPU-hours x power x PUE; CO2 = energy x grid intensity; cost = GPU-hours x price",
    }
