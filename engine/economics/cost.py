"""What a training run costs: cloud prices from the dated table in data/prices.json, on-premises cost from a TCO
model (data/tco_defaults.json), the break-even between buying and renting, and the GPU-hour budget planner."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.catalog import DATA_DIR, Source, load_catalog
from engine.economics.energy import HOURS_PER_YEAR, Power, energy_defaults

PRICING = ("on_demand", "reserved_1y", "reserved_3y", "reserved", "spot")


def gpu_hours(n_gpus, seconds):
    """GPU-hours = GPUs x wall hours."""
    return n_gpus * np.asarray(seconds) / 3600.0


def cost_usd(gpu_hours_, usd_per_gpu_hour):
    """Rented cost: GPU-hours x price per GPU-hour."""
    return np.asarray(gpu_hours_) * usd_per_gpu_hour


# ---- cloud price table ------------------------------------------------------------------------------------------

class PriceRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    accelerator: str
    provider: str = Field(pattern=r"^[a-z0-9-]+$")
    region: str | None
    pricing: Literal["on_demand", "reserved_1y", "reserved_3y", "reserved", "spot"]
    instance: str
    gpus_per_instance: int = Field(ge=1)
    slice_of: Literal["rack", "pod"] | None = None     # a slice of a rack-scale NVLink domain or a TPU pod, one rate
    usd_per_gpu_hour: float | None = Field(default=None, gt=0)
    usd_per_instance_hour: float | None = Field(default=None, gt=0)
    note: str = ""
    source: Source

    @model_validator(mode="after")
    def _one_price(self):
        if (self.usd_per_gpu_hour is None) == (self.usd_per_instance_hour is None):
            raise ValueError("give exactly one of usd_per_gpu_hour and usd_per_instance_hour")
        return self

    @property
    def price(self) -> float:
        return self.usd_per_gpu_hour if self.usd_per_gpu_hour is not None else self.usd_per_instance_hour / self.gpus_per_instance

    def describe(self) -> dict:
        return {"provider": self.provider, "region": self.region, "pricing": self.pricing, "instance": self.instance,
                "gpus_per_instance": self.gpus_per_instance, **({"slice_of": self.slice_of} if self.slice_of else {}),
                "usd_per_gpu_hour": round(self.price, 4), "date": self.source.date, "source": self.source.url,
                "source_document": self.source.document, **({"note": self.note} if self.note else {})}

    def cite(self) -> str:
        """Provider, instance, term, price, source document and date in one line, to stand beside a cost (a caption:
        the address is in describe()'s source, so a printed report shows no link outside its source list)."""
        return (f"{self.provider} {self.instance} ({self.gpus_per_instance} GPU{'s' if self.gpus_per_instance > 1 else ''}"
                f"{', a slice of a ' + self.slice_of if self.slice_of else ''}), {self.pricing}, "
                f"{_fmt_usd(self.price)} per GPU-hour; {self.source.document}, {self.source.date}")


class NoPublishedPrice(BaseModel):
    """An accelerator for which the sources read give no cloud rate: which providers were checked, and when."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    accelerator: str
    providers_checked: list[str] = Field(min_length=1)
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    note: str = Field(min_length=3)

    def describe(self) -> str:
        return (f"no published price for {self.accelerator} in the sources read (providers checked: "
                f"{', '.join(self.providers_checked)}; {self.date}): {self.note}")


@lru_cache(maxsize=1)
def _price_doc() -> tuple[tuple[PriceRow, ...], dict[str, NoPublishedPrice]]:
    doc = json.loads((DATA_DIR / "prices.json").read_text())
    if doc.get("schema_version") != 2:
        raise ValueError(f"data/prices.json: unsupported schema_version {doc.get('schema_version')!r}")
    rows = tuple(PriceRow(**r) for r in doc["rows"])
    none = [NoPublishedPrice(**r) for r in doc["no_published_price"]]
    known = load_catalog().accelerators
    unknown = sorted(({r.accelerator for r in rows} | {n.accelerator for n in none}) - set(known))
    if unknown:
        raise ValueError(f"data/prices.json: unknown accelerator ids {unknown}")
    both = sorted({r.accelerator for r in rows} & {n.accelerator for n in none})
    if both:
        raise ValueError(f"data/prices.json: {both} have prices and a no_published_price entry")
    return rows, {n.accelerator: n for n in none}


def price_table() -> tuple[PriceRow, ...]:
    """Every published cloud price (data/prices.json rows)."""
    return _price_doc()[0]


def no_published_price(accelerator: str) -> NoPublishedPrice | None:
    """The record that no price for this accelerator was found in the sources read (None when it has one, or when
    nobody looked)."""
    return _price_doc()[1].get(accelerator)


def sold_for_a_cluster(row: PriceRow, n_gpus: int, gpus_per_node: int) -> bool:
    """Whether a price row can price this cluster: the instance holds the scenario's node, min(n_gpus, gpus per node)
    GPUs, or is a slice of a rack or pod sold at one rate. The reason: the layout assumes GPUs joined by the node's
    NVLink and nodes joined by a scale-out network (InfiniBand, RoCE, EFA); clouds sell that network with whole
    8-GPU (or rack, or pod) instances, so a 1-GPU instance's rate, applied to thousands of GPUs, prices a cluster that
    cannot be rented. A 1-GPU row therefore prices only a 1-GPU scenario."""
    return row.slice_of is not None or row.gpus_per_instance >= min(n_gpus, gpus_per_node)


def cluster_price(rows: list[PriceRow], n_gpus: int, gpus_per_node: int) -> tuple[PriceRow | None, bool]:
    """The cheapest of `rows` (cheapest first, as prices_for returns them) sold for this cluster, and True; when none
    is, the cheapest row of any size and False, so the cost can say so; (None, False) without rows."""
    fit = next((r for r in rows if sold_for_a_cluster(r, n_gpus, gpus_per_node)), None)
    return (fit, True) if fit is not None else (rows[0] if rows else None, False)


def prices_for(accelerator: str, provider: str | None = None, region: str | None = None,
               pricing: str | None = None) -> list[PriceRow]:
    """Published prices of an accelerator, cheapest first, filtered by whatever is given."""
    rows = [r for r in price_table() if r.accelerator == accelerator
            and (provider is None or r.provider == provider)
            and (region is None or r.region in (region, None))
            and (pricing is None or r.pricing == pricing)]
    return sorted(rows, key=lambda r: r.price)


def price_problems(accelerator: str, cost) -> list[tuple[str, str]]:
    """Names in the cost block that the price table does not know (empty when all resolve or none are given)."""
    if cost is None or cost.price_usd_per_gpu_hour is not None:
        return []
    rows = prices_for(accelerator)
    providers = sorted({r.provider for r in rows})
    if cost.provider is not None and cost.provider not in providers:
        return [("cost.provider", f"no published {accelerator} price from {cost.provider!r}; providers with one: "
                                  f"{', '.join(providers) or 'none'}; or give cost.price_usd_per_gpu_hour")]
    known_regions = sorted({r.region for r in price_table() if r.region})
    if cost.region is not None and cost.region not in known_regions:
        return [("cost.region", f"unknown price region {cost.region!r}; regions in the price table: {', '.join(known_regions)}")]
    if cost.region is not None and not prices_for(accelerator, cost.provider, cost.region):
        regions = sorted({r.region for r in prices_for(accelerator, cost.provider) if r.region})
        return [("cost.region", f"no published {accelerator} price in {cost.region!r}"
                                f"{' from ' + cost.provider if cost.provider else ''}; regions with one: "
                                f"{', '.join(regions) or 'none (the providers publish one price for all regions)'}")]
    if (cost.provider or cost.region or cost.pricing != "on_demand") and not prices_for(
            accelerator, cost.provider, cost.region, cost.pricing):
        models = sorted({r.pricing for r in prices_for(accelerator, cost.provider, cost.region)})
        return [("cost.pricing", f"no published {cost.pricing} price for {accelerator} with these filters; "
                                 f"published pricing models: {', '.join(models) or 'none'}")]
    return []


# ---- on-premises TCO --------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def tco_defaults() -> dict:
    doc = json.loads((DATA_DIR / "tco_defaults.json").read_text())
    if doc.get("schema_version") != 2:
        raise ValueError(f"data/tco_defaults.json: unsupported schema_version {doc.get('schema_version')!r}")
    return doc


class ServerPrice(BaseModel):
    """One published purchase price: a whole server or rack, the accelerators on their baseboard, or one accelerator."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    accelerator: str
    price_usd: float = Field(gt=0)
    priced_unit: Literal["server", "rack", "gpu_baseboard", "accelerator"]
    gpus_per_server: int = Field(ge=1)
    derivation: str = Field(min_length=3)
    source: Source


@lru_cache(maxsize=1)
def server_prices() -> dict[str, ServerPrice]:
    """Published on-premises server prices by accelerator id (data/tco_defaults.json servers)."""
    rows = [ServerPrice(**r) for r in tco_defaults()["servers"]]
    ids = [r.accelerator for r in rows]
    unknown = sorted(set(ids) - set(load_catalog().accelerators))
    if unknown:
        raise ValueError(f"data/tco_defaults.json: unknown accelerator ids {unknown}")
    if len(ids) != len(set(ids)):
        raise ValueError("data/tco_defaults.json: more than one server price for an accelerator")
    return {r.accelerator: r for r in rows}


def server_capex_usd(price_usd: float, priced_unit: str, gpus_per_server: int, host_usd_per_gpu: float) -> float:
    """Price of one whole server: a server or rack price as published; a baseboard price plus the host share of its GPUs;
    a per-accelerator price times the GPUs plus their host share."""
    if priced_unit in ("server", "rack"):
        return price_usd
    if priced_unit == "gpu_baseboard":
        return price_usd + host_usd_per_gpu * gpus_per_server
    if priced_unit == "accelerator":
        return (price_usd + host_usd_per_gpu) * gpus_per_server
    raise ValueError(f"unknown priced_unit {priced_unit!r}")


def colocation_usd_per_gpu_year(usd_per_kw_month: float, contracted_kw_per_gpu: float) -> float:
    """Wholesale colocation rent of one GPU's share of contracted IT capacity for a year (CBRE quotes USD per kW-month)."""
    return usd_per_kw_month * 12.0 * contracted_kw_per_gpu


@dataclass(frozen=True)
class OnPrem:
    """Resolved TCO inputs; capex_usd_per_gpu None when no server price is published or given."""
    capex_usd_per_gpu: float | None
    inputs: dict                    # name -> {"value", "unit", "derivation", "source"} for the output


def _fmt_usd(usd: float) -> str:
    """Dollars to the cent, or to the hundredth of a cent where the price has more digits ($6.88, $1.1088)."""
    return f"${usd:,.2f}" if abs(usd * 100 - round(usd * 100)) < 1e-9 else f"${usd:,.4f}"


def _fmt_source(s) -> str:
    s = s if isinstance(s, Source) else Source(**s)
    return f"{s.document} ({s.url}, {s.date})"


def _term(value, unit: str, derivation: str, source: str) -> dict:
    return {"value": value, "unit": unit, "derivation": derivation, "source": source}


def _default(d: dict, name: str, value=None, derivation: str | None = None) -> dict:
    """A data-file term as an input: its value (or a computed one), unit, derivation and source (or its note)."""
    t = d[name]
    src = _fmt_source(t["source"]) if "source" in t else t["note"]
    return _term(t["value"] if value is None else value, t["unit"], derivation or t["derivation"], src)


def _onprem(sc, power: Power) -> OnPrem:
    d = tco_defaults()
    acc = sc.cluster.accelerator
    given = sc.cost.on_prem if sc.cost is not None else None
    has = lambda name: given is not None and getattr(given, name) is not None
    mine = lambda name, unit: _term(getattr(given, name), unit, "your value", f"given in cost.on_prem.{name}")
    row = server_prices().get(acc)
    inputs = {}
    if has("server_capex_usd"):
        inputs["server_capex_usd"] = mine("server_capex_usd", "USD per server")
    elif row is None:
        inputs["server_capex_usd"] = _term(None, "USD per server", "no published price",
                                           f"no published server price for {acc}; enter cost.on_prem.server_capex_usd")
    else:
        host = d["host_capex_usd_per_gpu"]["value"]
        capex = server_capex_usd(row.price_usd, row.priced_unit, row.gpus_per_server, host)
        how = {"server": "as published", "rack": "as published (one rack)",
               "gpu_baseboard": f"+ host share {row.gpus_per_server} x ${host:,.2f}",
               "accelerator": f"(per accelerator + host share ${host:,.2f}) x {row.gpus_per_server}"}[row.priced_unit]
        inputs["server_capex_usd"] = _term(capex, "USD per server",
                                           f"{row.derivation}: ${row.price_usd:,.2f} per {row.priced_unit} {how}",
                                           _fmt_source(row.source))
        if row.priced_unit in ("gpu_baseboard", "accelerator"):
            inputs["host_capex_usd_per_gpu"] = _default(d, "host_capex_usd_per_gpu")
    if has("gpus_per_server"):
        inputs["gpus_per_server"] = mine("gpus_per_server", "GPUs")
    elif row is not None:
        inputs["gpus_per_server"] = _term(row.gpus_per_server, "GPUs", f"GPUs covered by the {acc} server price",
                                          _fmt_source(row.source))
    else:
        inputs["gpus_per_server"] = _term(sc.gpus_per_node, "GPUs", "the cluster's GPUs per node", "the scenario's cluster")
    for name in ("network_fraction", "storage_capex_usd_per_gpu", "depreciation_years", "utilisation",
                 "power_usd_per_kwh"):
        inputs[name] = mine(name, d[name]["unit"]) if has(name) else _default(d, name)
    if has("ops_usd_per_gpu_year"):
        inputs["ops_usd_per_gpu_year"] = mine("ops_usd_per_gpu_year", "USD per GPU-year")
    else:
        factor = (sc.site.utilisation_factor if sc.site is not None and sc.site.utilisation_factor is not None
                  else energy_defaults().utilisation_factor.value)
        kw = None if power.node_w_per_gpu is None else power.node_w_per_gpu / factor / 1000.0
        colo = d["colocation_usd_per_kw_month"]["value"]
        inputs["colocation_usd_per_kw_month"] = _default(d, "colocation_usd_per_kw_month")
        inputs["contracted_kw_per_gpu"] = _term(
            kw, "kW of IT capacity per GPU",
            "unknown: no power figure" if kw is None else
            f"{power.node_w_per_gpu:,.1f} W average node power per GPU / average-to-peak factor {factor:g}",
            f"energy model: accelerator {power.accelerator_w_source}; host {power.host_w_source}")
        inputs["ops_usd_per_gpu_year"] = _default(
            d, "ops_usd_per_gpu_year", None if kw is None else colocation_usd_per_gpu_year(colo, kw),
            None if kw is None else f"colocation ${colo:g} per kW-month x 12 x {kw:.4f} kW per GPU")
        inputs["ops_usd_per_gpu_year"]["source"] = (f"{_fmt_source(d['colocation_usd_per_kw_month']['source'])}; "
                                                    f"{d['ops_usd_per_gpu_year']['note']}")
    v = {k: x["value"] for k, x in inputs.items()}
    capex = None if v["server_capex_usd"] is None else capex_per_gpu_usd(
        v["server_capex_usd"], v["gpus_per_server"], v["network_fraction"], v["storage_capex_usd_per_gpu"])
    return OnPrem(capex_usd_per_gpu=capex, inputs=inputs)


def capex_per_gpu_usd(server_usd: float, gpus_per_server: int, network_fraction: float, storage_usd_per_gpu: float) -> float:
    """Server share per GPU grossed up so the network is network_fraction of the cluster's hardware cost (Cottier et al. 2024)."""
    return server_usd / gpus_per_server / (1.0 - network_fraction) + storage_usd_per_gpu


def fixed_usd_per_gpu_year(capex_usd_per_gpu: float, depreciation_years: float, ops_usd_per_gpu_year: float) -> float:
    """Owning one GPU for a year: straight-line depreciation plus operations."""
    return capex_usd_per_gpu / depreciation_years + ops_usd_per_gpu_year


def power_usd_per_gpu_hour(node_w_per_gpu: float, pue: float, usd_per_kwh: float) -> float:
    """Electricity of one running GPU (with its host share) for one hour, at the facility meter."""
    return node_w_per_gpu / 1000.0 * pue * usd_per_kwh


def onprem_usd_per_gpu_hour(fixed_usd_per_year: float, utilisation, power_usd_per_hour: float):
    """Cost per used GPU-hour of owned hardware: the fixed yearly cost spread over the hours it is used, plus power."""
    return fixed_usd_per_year / (HOURS_PER_YEAR * np.asarray(utilisation)) + power_usd_per_hour


def break_even_utilisation(fixed_usd_per_year: float, power_usd_per_hour: float, rent_usd_per_gpu_hour: float) -> float | None:
    """Utilisation above which owning is cheaper per used GPU-hour than renting (None: renting is always cheaper)."""
    margin = rent_usd_per_gpu_hour - power_usd_per_hour
    return fixed_usd_per_year / (HOURS_PER_YEAR * margin) if margin > 0 else None


def break_even_years(capex_usd_per_gpu: float, ops_usd_per_gpu_year: float, power_usd_per_hour: float,
                     rent_usd_per_gpu_hour: float, utilisation: float) -> float | None:
    """Years of use at `utilisation` after which buying (capex + operations + power) has cost less than renting the same
    GPU-hours (None: never)."""
    saving_per_year = HOURS_PER_YEAR * utilisation * (rent_usd_per_gpu_hour - power_usd_per_hour) - ops_usd_per_gpu_year
    return capex_usd_per_gpu / saving_per_year if saving_per_year > 0 else None


def break_even_curves(cost_detail: dict, energy_detail: dict, n_gpus: int, points: int = 41) -> dict | None:
    """Cumulative cost of the cluster's accelerators over the years, bought (capex, then operations and power) against
    rented at the cloud price, both at the on-premises utilisation; they cross at cost.detail's break-even years.
    None when no server price, power figure or cloud price is known. cost_detail and energy_detail: an estimate's
    cost and energy blocks (detail above, engine.economics.energy.detail)."""
    onprem, power = cost_detail["on_prem"], energy_detail
    rent = (onprem.get("break_even") or {}).get("against_usd_per_gpu_hour")
    if onprem.get("capex_usd_per_gpu") is None or rent is None or power.get("node_power_w_per_gpu") is None:
        return None
    v = {k: x["value"] for k, x in onprem["inputs"].items()}
    power_h = power_usd_per_gpu_hour(power["node_power_w_per_gpu"], power["pue"], v["power_usd_per_kwh"])
    used_hours_per_year = HOURS_PER_YEAR * v["utilisation"]
    horizon = max(v["depreciation_years"], 1.5 * (onprem["break_even"]["years_at_utilisation"] or 0))
    years = [horizon * i / (points - 1) for i in range(points)]
    buy = [n_gpus * (onprem["capex_usd_per_gpu"] + y * (v["ops_usd_per_gpu_year"] + used_hours_per_year * power_h))
           for y in years]
    return {"years": years, "buy_usd": buy, "rent_usd": [n_gpus * y * used_hours_per_year * rent for y in years],
            "rent_usd_per_gpu_hour": rent, "utilisation": v["utilisation"],
            "break_even_years": onprem["break_even"]["years_at_utilisation"],
            "break_even_utilisation": onprem["break_even"]["utilisation"]}



# ---- the scenario's price --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Price:
    """The price per GPU-hour the run's cost uses, with its origin; usd_per_gpu_hour None when none is known."""
    basis: str
    usd_per_gpu_hour: float | None
    source: str
    row: PriceRow | None
    on_prem: OnPrem
    onprem_usd_per_gpu_hour: float | None
    onprem_fixed_usd_per_gpu_year: float | None
    onprem_power_usd_per_gpu_hour: float | None
    missing: str | None
    n_gpus: int                         # the cluster the price was chosen for (see sold_for_a_cluster)
    gpus_per_node: int
    scale_warning: str | None = None    # set when no row is sold for a cluster this size and a smaller one prices it


def resolve(sc, power: Power) -> Price:
    """Cloud price (explicit, or the cheapest published row matching the cost block among those sold for a cluster of
    this size, see sold_for_a_cluster) or on-premises TCO per GPU-hour."""
    c = sc.cost
    acc = sc.cluster.accelerator
    op = _onprem(sc, power)
    v = {k: x["value"] for k, x in op.inputs.items()}
    onprem = fixed = power_h = None
    if op.capex_usd_per_gpu is not None and power.node_w_per_gpu is not None:
        fixed = fixed_usd_per_gpu_year(op.capex_usd_per_gpu, v["depreciation_years"], v["ops_usd_per_gpu_year"])
        power_h = power_usd_per_gpu_hour(power.node_w_per_gpu, power.pue, v["power_usd_per_kwh"])
        onprem = float(onprem_usd_per_gpu_hour(fixed, v["utilisation"], power_h))
    n, per_node = sc.cluster.n_gpus, sc.gpus_per_node
    tco = dict(on_prem=op, onprem_usd_per_gpu_hour=onprem, onprem_fixed_usd_per_gpu_year=fixed,
               onprem_power_usd_per_gpu_hour=power_h, n_gpus=n, gpus_per_node=per_node)
    if c is not None and c.basis == "on_prem":
        missing = None if onprem is not None else (
            f"no published server price for {acc}; enter cost.on_prem.server_capex_usd" if op.capex_usd_per_gpu is None
            else power.missing)
        return Price("on_prem", onprem, "on-premises TCO (see cost.on_prem)", None, missing=missing, **tco)
    if c is not None and c.price_usd_per_gpu_hour is not None:
        return Price("cloud", c.price_usd_per_gpu_hour, "given in cost.price_usd_per_gpu_hour", None, missing=None, **tco)
    pricing = c.pricing if c else "on_demand"
    rows = prices_for(acc, c.provider if c else None, c.region if c else None, pricing)
    if not rows:
        none = no_published_price(acc)
        why = none.describe() if none is not None else f"no published {pricing} price for {acc} in data/prices.json"
        return Price("cloud", None, "", None, missing=f"{why}; enter one in cost.price_usd_per_gpu_hour", **tco)
    row, fits = cluster_price(rows, n, per_node)
    warning = None if fits else (
        f"no published {pricing} {acc} price for an instance of {min(n, per_node)} GPUs or a rack or pod slice, "
        f"the unit sold with the scale-out network the layout assumes; priced at a {row.gpus_per_instance}-GPU "
        "instance's rate, which may not be on offer for a cluster")
    source = (f"cheapest published {pricing} price sold for {n:,} GPU{'s' if n > 1 else ''}: {row.cite()}" if fits else
              f"cheapest published {pricing} price: {row.cite()}; {warning}")
    return Price("cloud", row.price, source, row, missing=None, scale_warning=warning, **tco)


def onprem_terms(capex_usd_per_gpu: float | None, v: dict, power_usd_per_hour: float | None) -> list[dict] | None:
    """The owned cost per used GPU-hour split into hardware, operations and electricity (they sum to
    onprem_usd_per_gpu_hour); None until a server price and a power figure are known."""
    if capex_usd_per_gpu is None or power_usd_per_hour is None:
        return None
    used_h = HOURS_PER_YEAR * v["utilisation"]
    return [{"term": "hardware", "usd_per_gpu_hour": capex_usd_per_gpu / v["depreciation_years"] / used_h,
             "from": "capex per GPU / depreciation years / used hours per year"},
            {"term": "operations", "usd_per_gpu_hour": v["ops_usd_per_gpu_year"] / used_h,
             "from": "operations per GPU-year / used hours per year"},
            {"term": "electricity", "usd_per_gpu_hour": power_usd_per_hour,
             "from": "node power per GPU x PUE x electricity price"}]


def detail(price: Price, accelerator: str, billed_gpu_hours: float) -> dict:
    """The cost block of an estimate: the price used, every published alternative, the on-premises TCO and break-even."""
    finite = bool(np.isfinite(billed_gpu_hours))
    cost = lambda p: float(cost_usd(billed_gpu_hours, p)) if finite and p is not None else None
    op = price.on_prem
    v = {k: x["value"] for k, x in op.inputs.items()}
    rent = price.row.price if price.row is not None else (price.usd_per_gpu_hour if price.basis == "cloud" else None)
    if rent is None:
        row, _ = cluster_price(prices_for(accelerator, pricing="on_demand"), price.n_gpus, price.gpus_per_node)
        rent = row.price if row is not None else None
    onprem_block = {"usd_per_gpu_hour": price.onprem_usd_per_gpu_hour, "cost_usd": cost(price.onprem_usd_per_gpu_hour),
                    "capex_usd_per_gpu": op.capex_usd_per_gpu, "inputs": op.inputs,
                    "per_gpu_hour_terms": onprem_terms(op.capex_usd_per_gpu, v, price.onprem_power_usd_per_gpu_hour)}
    if op.capex_usd_per_gpu is None:
        onprem_block["missing"] = f"no published server price for {accelerator}; enter cost.on_prem.server_capex_usd"
    elif price.onprem_usd_per_gpu_hour is not None and rent is not None:
        fixed, power_h = price.onprem_fixed_usd_per_gpu_year, price.onprem_power_usd_per_gpu_hour
        onprem_block["break_even"] = {
            "against_usd_per_gpu_hour": rent,
            "utilisation": break_even_utilisation(fixed, power_h, rent),
            "years_at_utilisation": break_even_years(op.capex_usd_per_gpu, v["ops_usd_per_gpu_year"], power_h, rent,
                                                     v["utilisation"]),
            "reading": "buying is cheaper per used GPU-hour above this utilisation; at the stated utilisation it pays "
                       "for itself after this many years (None: renting stays cheaper)"}
    return {
        "basis": price.basis,
        "usd_per_gpu_hour": price.usd_per_gpu_hour,
        "price_source": price.source or None,
        "price_row": price.row.describe() if price.row is not None else None,
        "scale_warning": price.scale_warning,
        "billed_gpu_hours": billed_gpu_hours if finite else None,
        "cost_usd": cost(price.usd_per_gpu_hour),
        "missing": price.missing,
        "cloud_prices": [dict(r.describe(), cost_usd=cost(r.price),
                              sold_for_this_cluster=sold_for_a_cluster(r, price.n_gpus, price.gpus_per_node))
                         for r in prices_for(accelerator)],
        "on_prem": onprem_block,
    }


# ---- budget planner ---------------------------------------------------------------------------------------------

def plan_budget(run_gpu_hours: float, budget_gpu_hours: float | None = None, budget_usd: float | None = None,
                usd_per_gpu_hour: float | None = None, warn_above_gpu_hours: float | None = None) -> dict:
    """How many runs of this size a GPU-hour and/or money budget pays for: max_runs = floor(budget / cost per run),
    where both are given both apply (as the plan meets them together) and the smaller in GPU-hours binds
    (`binding`: 'GPU-hours' or 'USD'), with a warning when one run exceeds a per-job threshold of the user's
    allocation policy (no threshold unless one is given). ValueError on bad input."""
    if not (run_gpu_hours > 0 and math.isfinite(run_gpu_hours)):
        raise ValueError("run_gpu_hours must be a positive, finite number of GPU-hours")
    if budget_gpu_hours is None and budget_usd is None:
        raise ValueError("give a budget: budget_gpu_hours, budget_usd or both")
    limits = {}                                    # each budget in GPU-hours
    if budget_gpu_hours is not None:
        limits["GPU-hours"] = budget_gpu_hours
    if budget_usd is not None:
        if usd_per_gpu_hour is None or not usd_per_gpu_hour > 0:
            raise ValueError("a money budget needs a positive usd_per_gpu_hour")
        limits["USD"] = budget_usd / usd_per_gpu_hour
    if not all(v >= 0 and math.isfinite(v) for v in limits.values()):
        raise ValueError("the budget must be a non-negative, finite amount")
    binding = min(limits, key=limits.get)
    budget_gpu_hours = limits[binding]
    if warn_above_gpu_hours is not None and not warn_above_gpu_hours > 0:
        raise ValueError("warn_above_gpu_hours must be positive")
    runs = math.floor(budget_gpu_hours / run_gpu_hours * (1 + 1e-12))   # tolerate float rounding at exact multiples
    warnings = []
    if warn_above_gpu_hours is not None and run_gpu_hours > warn_above_gpu_hours:
        warnings.append(f"one run needs {run_gpu_hours:,.0f} GPU-hours, above the {warn_above_gpu_hours:,.0f} GPU-hour "
                        "per-job threshold: pilot a smaller run first")
    if runs == 0:
        warnings.append(f"the budget of {budget_gpu_hours:,.0f} GPU-hours does not cover one run of {run_gpu_hours:,.0f}")
    return {"max_runs": runs, "run_gpu_hours": run_gpu_hours, "budget_gpu_hours": budget_gpu_hours, "binding": binding,
            "left_over_gpu_hours": budget_gpu_hours - runs * run_gpu_hours,
            "run_usd": run_gpu_hours * usd_per_gpu_hour if usd_per_gpu_hour else None,
            "warn_above_gpu_hours": warn_above_gpu_hours, "warnings": warnings}
