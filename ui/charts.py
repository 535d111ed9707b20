"""Plotly settings every chart shares: a legend above the plot (clear of the axis titles), log axes labelled 1-2-5
in words ('100', '200', '500', '1,000') instead of plotly's '3 4 5 ... 1000 2' (a linear axis where the values span
less than a factor of three), and point labels placed where they overlap least."""
from __future__ import annotations

import math

from engine.presentation.formatting import fmt_num

LEGEND_ABOVE = {"legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "left", "x": 0}}
MAX_TICKS = 8
LOG_MIN_SPAN = 3.0              # below this max/min ratio a linear axis reads better
POSITIONS = ("top center", "bottom center", "middle right", "middle left", "top right", "bottom left", "top left",
             "bottom right")


def _positive(values) -> list[float]:
    return [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]


def log_ticks(values, pad_decades: float = 0.0) -> tuple[list[float], list[str], list[float]]:
    """Tick values and labels on a 1-2-5 ladder (finer over narrow ranges, 1-10-100 over wide ones, at most
    MAX_TICKS) covering the positive values, and the axis range in log10 units with pad_decades on each side."""
    positive = _positive(values)
    if not positive:
        return [], [], [0.0, 1.0]
    lo, hi = math.log10(min(positive)) - pad_decades, math.log10(max(positive)) + pad_decades
    ladder = lambda steps: [m * 10 ** e for e in range(math.floor(lo), math.ceil(hi) + 1) for m in steps
                            if lo <= math.log10(m * 10 ** e) <= hi]
    for steps in ((1, 1.5, 2, 3, 4, 5, 7), (1, 2, 5), (1, 3), (1,)):
        ticks = ladder(steps)
        if len(ticks) <= MAX_TICKS:
            break
    if len(ticks) > MAX_TICKS:          # many decades: every second or third power of ten
        ticks = ticks[::math.ceil(len(ticks) / MAX_TICKS)]
    return ticks, [fmt_num(t) for t in ticks], [lo, hi]


def axis_settings(values, pad_decades: float = 0.08) -> dict:
    """Plotly axis settings for positive values: log with 1-2-5 labels, or linear with a 8% margin where they span
    less than LOG_MIN_SPAN. The range is in plotly's units (log10 for a log axis)."""
    positive = _positive(values)
    if positive and max(positive) / min(positive) < LOG_MIN_SPAN:
        lo, hi = min(positive), max(positive)
        pad = 0.08 * (hi - lo) or 0.1 * hi
        return {"type": "linear", "range": [max(0.0, lo - pad), hi + pad]}
    ticks, labels, span = log_ticks(positive, pad_decades)
    return {"type": "log", "tickmode": "array", "tickvals": ticks, "ticktext": labels, "range": span}


def log_axis(fig, axis: str, values, pad_decades: float = 0.08, title: str | None = None) -> dict:
    """Make `axis` ('x' or 'y') a readable log axis over `values` (see axis_settings); returns the settings."""
    settings = axis_settings(values, pad_decades)
    (fig.update_xaxes if axis == "x" else fig.update_yaxes)(**settings, **({"title": title} if title else {}))
    return settings


def label_positions(xs, ys, texts, x_axis: dict, y_axis: dict, width_px: float = 420, height_px: float = 360,
                    char_px: float = 6.2, line_px: float = 13.0, marker_px: float = 7.0) -> list[str]:
    """A plotly textposition per point, chosen greedily so that labels overlap each other and the points least
    (an estimate in pixels from the axis ranges and the plot size)."""
    def to_px(v, axis, size, flip):
        lo, hi = axis["range"]
        u = math.log10(v) if axis["type"] == "log" else v
        f = (u - lo) / (hi - lo) if hi != lo else 0.5
        return (1 - f) * size if flip else f * size

    points = [(to_px(x, x_axis, width_px, False), to_px(y, y_axis, height_px, True)) for x, y in zip(xs, ys)]
    placed: list[tuple[float, float, float, float]] = [(px - marker_px, py - marker_px, px + marker_px, py + marker_px)
                                                       for px, py in points]

    def box(px, py, w, position):
        vertical, horizontal = position.split()
        top = {"top": py - marker_px - line_px, "bottom": py + marker_px, "middle": py - line_px / 2}[vertical]
        left = {"center": px - w / 2, "right": px + marker_px, "left": px - marker_px - w}[horizontal]
        return left, top, left + w, top + line_px

    def overlap(a, b):
        return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))

    def outside(b):
        return max(0.0, -b[0]) + max(0.0, b[2] - width_px) + max(0.0, -b[1]) + max(0.0, b[3] - height_px)

    out = []
    for (px, py), text in zip(points, texts):
        w = len(str(text)) * char_px
        best = min(POSITIONS, key=lambda p: sum(overlap(box(px, py, w, p), q) for q in placed)
                   + 10 * outside(box(px, py, w, p)))
        placed.append(box(px, py, w, best))
        out.append(best)
    return out
