"""Numbers, durations and money as people read them ('1.23M', '3.2 hours', '$4.5M'): pure functions with no engine
imports, so every layer words its figures alike (engine.presentation.formatting adds names and the glossary)."""
from __future__ import annotations

import math


def fmt_num(x: float | None, digits: int = 3) -> str:
    """1234567 -> '1.23M', 6754 -> '6,750'; None or NaN -> 'n/a'."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if abs(x) >= size:
            return f"{x / size:.{digits}g}{suffix}"
    if abs(x) >= 1e3:
        return f"{float(f'{x:.{digits}g}'):,.0f}"
    return f"{x:.{digits}g}"


def fmt_rate(x: float) -> str:
    """A rate in k or M units: 822,345 -> '822k', 1.2e6 -> '1.2M'."""
    return f"{x / 1e3:.3g}k" if 1e3 <= abs(x) < 1e6 else fmt_num(x)


def fmt_usd(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else "$" + fmt_num(x)


def fmt_days(days: float | None) -> str:
    if days is None or (isinstance(days, float) and math.isnan(days)):
        return "n/a"
    if days < 1:
        return f"{days * 24:.1f} hours"
    return f"{days:,.1f} days" if days < 100 else f"{days:,.0f} days"


def fmt_seconds(seconds: float | None) -> str:
    """A duration in the largest fitting unit: '45 s', '26 minutes', '3.2 hours'."""
    if seconds is None:
        return "n/a"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    return fmt_days(seconds / 86400)


def fmt_pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x * 100:.{digits}f}%"
