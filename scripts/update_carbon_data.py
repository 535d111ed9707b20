"""Vendor the grid carbon-intensity data files that ship inside the codecarbon wheel into data/carbon/.

codecarbon is not a runtime dependency: this script downloads its pinned wheel with pip (no dependencies), copies the
data files the engine reads, and writes data/carbon/SOURCE.json with the package version, the wheel's sha256, the
upstream sources the files cite and their data years. Run it to move to a newer codecarbon, then commit data/carbon/.

    .venv/bin/python scripts/update_carbon_data.py [--version 3.3.2]
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "data" / "carbon"
PINNED = "3.3.2"
FILES = {  # path inside the wheel -> name in data/carbon/
    "codecarbon/data/private_infra/global_energy_mix.json": "global_energy_mix.json",
    "codecarbon/data/private_infra/2023/usa_emissions.json": "usa_emissions.json",
    "codecarbon/data/cloud/impact.csv": "gcp_impact.csv",
    "codecarbon/data/private_infra/carbon_intensity_per_source.json": "carbon_intensity_per_source.json",
}
UPSTREAM = {
    "global_energy_mix.json": "Our World in Data, carbon intensity of electricity per country (Ember and Energy Institute), "
                              "https://ourworldindata.org/grapher/carbon-intensity-electricity; codecarbon docs/explanation/methodology.md",
    "usa_emissions.json": "US EPA eGRID2023, annual CO2-equivalent total output emission rate per state (lb/MWh), "
                          "https://www.epa.gov/egrid/download-data",
    "gcp_impact.csv": "Google Cloud region carbon data (grid carbon intensity, location-based, gCO2eq/kWh), "
                      "https://cloud.google.com/sustainability/region-carbon#data",
    "carbon_intensity_per_source.json": "world average 475 gCO2eq/kWh from IEA Global Energy & CO2 Status Report 2019, "
                                        "https://www.iea.org/reports/global-energy-co2-status-report-2019/emissions",
}


def download(version: str, into: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", f"codecarbon=={version}", "--no-deps", "--only-binary=:all:",
                    "-d", str(into), "-q"], check=True)
    wheels = list(into.glob(f"codecarbon-{version}-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one codecarbon {version} wheel in {into}, found {[w.name for w in wheels]}")
    return wheels[0]


def data_years(out: Path) -> dict:
    mix = json.loads((out / "global_energy_mix.json").read_text())
    usa = json.loads((out / "usa_emissions.json").read_text())
    return {"global_energy_mix.json": dict(sorted(collections.Counter(v["year"] for v in mix.values()).items())),
            "usa_emissions.json": usa["_source"]["year"],
            "gcp_impact.csv": None,
            "carbon_intensity_per_source.json": 2019}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=PINNED)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = download(args.version, Path(tmp))
        sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
        OUT.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as zf:
            for inner, name in FILES.items():
                (OUT / name).write_bytes(zf.read(inner))
            licence = next(n for n in zf.namelist() if n.endswith("LICENSE") or "/licenses/" in n)
            (OUT / "LICENSE.codecarbon").write_bytes(zf.read(licence))
    source = {"package": "codecarbon", "version": args.version, "wheel": wheel.name, "wheel_sha256": sha256,
              "licence": "MIT (LICENSE.codecarbon)", "files": {name: {"from": inner, "upstream": UPSTREAM[name]}
                                                                   for inner, name in FILES.items()},
              "data_years": data_years(OUT),
              "note": "gcp_impact.csv gives no data year; Google publishes the region figures on the linked page."}
    (OUT / "SOURCE.json").write_text(json.dumps(source, indent=1) + "\n")
    print(f"data/carbon/ updated from {wheel.name} (sha256 {sha256[:12]}...)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
