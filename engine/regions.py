"""Named places for the site region (CO2): every code the vendored grid data knows, with a label people search by.

The codes are the ones scenarios already store (ISO 3166 alpha-3 country, US-XX state, gcp:NAME, aws:/azure: regions
of data/carbon/cloud_regions.json), so saved scenarios and links keep working.
"""
from __future__ import annotations

from functools import lru_cache

from engine.economics.energy import carbon_files, region_problem


@lru_cache(maxsize=1)
def region_choices() -> tuple[tuple[str, str], ...]:
    """(label, code) pairs sorted by label: countries ('France (FRA)'), US states ('US Virginia (US-VA)') and cloud
    regions ('gcp europe-west4: Eemshaven, Netherlands', 'aws us-east-1: US East (N. Virginia)')."""
    files = carbon_files()
    out = []
    for iso, row in files["mix"].items():
        if isinstance(row, dict) and row.get("country_name"):
            out.append((f"{row['country_name']} ({iso})", iso))
    for state, row in files["usa"].items():
        if isinstance(row, dict) and row.get("regionCode") and not state.startswith("_"):
            name = state.replace("_", " ").title()
            out.append((f"US {name} (US-{row['regionCode']})", f"US-{row['regionCode']}"))
    for region, row in files["gcp"].items():
        out.append((f"gcp {region}: {row['city']}, {row['country_name']}", f"gcp:{region}"))
    for code, row in files["cloud"].items():
        provider, _, name = code.partition(":")
        out.append((f"{provider} {name}: {row['name']}", code))
    usable = [(label, code) for label, code in set(out) if region_problem(code) is None]   # only codes the CO2 model reads
    return tuple(sorted(usable, key=lambda lc: lc[0].lower()))


def region_label(code: str | None) -> str | None:
    """The label of a stored region code (case as grid_intensity accepts it), or None when it is not in the list."""
    if code is None:
        return None
    key = code if ":" in code else code.strip().upper()
    return next((label for label, c in region_choices() if c == key), None)
