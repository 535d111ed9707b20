"""The one-page summary report a manager can print or forward: one headline from the scenario's own layout, the
answer to the deadline or budget when one was asked, the key figures with their ranges, the accelerator comparison
(each accelerator on its own best layout, said so), charts and sources. Self-contained HTML: inline CSS and SVG, no
scripts, nothing fetched. Pure: no Streamlit."""
from __future__ import annotations

import html
from datetime import datetime

from engine.economics import ranges
from engine.planning.results import Comparison, Estimate, Plan
from engine.presentation.answer import alternative_rows, answer_scenario, headline, stack_text
from engine.presentation.edit import describe_layout, layout_words
from engine.presentation.figures import headline_bands, key_figures, published_training_note, range_text
from engine.presentation.formatting import fmt_days, fmt_num, fmt_usd, scenario_title
from engine.presentation.tables import MEMORY_PARTS, WORST_STAGE, breakdown_rows, scenario_rows
from engine.scenario import Scenario

REPORT_CSS = """
@page { size: A4; margin: 14mm; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: #1b1b1b;
       margin: 0 auto; max-width: 190mm; font-size: 10.5pt; line-height: 1.35; }
h1 { font-size: 17pt; margin: 0 0 2pt; } h2 { font-size: 12pt; margin: 12pt 0 4pt; border-bottom: 1px solid #ccc; }
.sub { color: #555; font-size: 9pt; margin: 0 0 8pt; }
.rec { background: #eef6ee; border-left: 4px solid #2e7d32; padding: 6pt 9pt; margin: 6pt 0; }
.warn { background: #fdecea; border-left: 4px solid #c62828; padding: 6pt 9pt; margin: 6pt 0; }
.figs { display: grid; grid-template-columns: repeat(3, 1fr); gap: 4pt 10pt; }
.fig { border: 1px solid #ddd; border-radius: 4px; padding: 4pt 6pt; }
.fig b { display: block; font-size: 13pt; } .fig span { color: #555; font-size: 8.5pt; }
.fig span.range { display: block; color: #333; font-size: 9pt; margin-bottom: 2pt; }
table { border-collapse: collapse; width: 100%; font-size: 9pt; }
td, th { border-bottom: 1px solid #e5e5e5; padding: 2pt 4pt; text-align: left; vertical-align: top; }
.charts { display: grid; grid-template-columns: 1fr 1fr; gap: 8pt; }
section, .charts, table { break-inside: avoid; }
.src { color: #555; font-size: 8pt; word-break: break-all; }
"""
SVG_COLORS = ("#4C78A8", "#72B7B2", "#F58518", "#E45756", "#BAB0AC", "#54A24B", "#B279A2", "#9D755D")


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def svg_stacked_bar(parts: list[tuple[str, float]], capacity: float, unit: str, title: str) -> str:
    """One vertical stacked bar (parts bottom-up) against a dashed capacity line, with a legend; inline SVG."""
    width, height, top, bottom, bar_x, bar_w = 330, 210, 18, 190, 40, 70
    scale_max = max(capacity, sum(v for _, v in parts)) * 1.08 or 1.0
    y_of = lambda v: bottom - (bottom - top) * v / scale_max
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" '
           f'aria-label="{_e(title)}"><title>{_e(title)}</title>']
    base = 0.0
    for i, (label, value) in enumerate(parts):
        y0, y1 = y_of(base + value), y_of(base)
        out.append(f'<rect x="{bar_x}" y="{y0:.1f}" width="{bar_w}" height="{max(y1 - y0, 0):.1f}" '
                   f'fill="{SVG_COLORS[i % len(SVG_COLORS)]}"><title>{_e(label)}: {value:.1f} {unit}</title></rect>')
        out.append(f'<rect x="150" y="{top + 16 * i}" width="10" height="10" fill="{SVG_COLORS[i % len(SVG_COLORS)]}"/>'
                   f'<text x="165" y="{top + 9 + 16 * i}" font-size="10">{_e(label)}: {value:.1f} {unit}</text>')
        base += value
    cy = y_of(capacity)
    out.append(f'<line x1="30" x2="{bar_x + bar_w + 10}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="#222" '
               f'stroke-dasharray="4 3"/><text x="150" y="{top + 16 * len(parts) + 12}" font-size="10">'
               f'- - capacity {capacity:.0f} {unit}</text>')
    out.append(f'<line x1="30" x2="30" y1="{top}" y2="{bottom}" stroke="#888"/>'
               f'<text x="26" y="{bottom}" font-size="9" text-anchor="end">0</text>'
               f'<text x="26" y="{cy + 3:.1f}" font-size="9" text-anchor="end">{capacity:.0f}</text></svg>')
    return "".join(out)


def svg_hbars(items: list[tuple[str, float]], value_text, title: str, highlight: str | None = None) -> str:
    """Horizontal bars, one per (label, value), longest scaled to the width; inline SVG."""
    row_h, label_w, bar_w = 18, 240, 120
    height = row_h * len(items) + 8
    top = max((v for _, v in items), default=0) or 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {label_w + bar_w + 70} {height}" '
           f'width="{label_w + bar_w + 70}" height="{height}" role="img" '
           f'aria-label="{_e(title)}"><title>{_e(title)}</title>']
    for i, (label, value) in enumerate(items):
        y = 4 + i * row_h
        color = "#2e7d32" if label == highlight else SVG_COLORS[0]
        out.append(f'<text x="{label_w - 4}" y="{y + 12}" font-size="10" text-anchor="end">{_e(label[:46])}</text>'
                   f'<rect x="{label_w}" y="{y + 2}" width="{bar_w * max(value, 0) / top:.1f}" height="{row_h - 6}" '
                   f'fill="{color}"/><text x="{label_w + bar_w * max(value, 0) / top + 4:.1f}" y="{y + 12}" '
                   f'font-size="10">{_e(value_text(value))}</text>')
    out.append("</svg>")
    return "".join(out)



def plan_sentence(sc: Scenario, est: Estimate, efficiency: str = "tuned") -> str:
    """The report's headline: what the scenario as laid out takes, with ranges; or that its layout does not fit."""
    if not est.fits:
        return (f"This layout does not fit: {est.memory_gib.total:.1f} GiB needed per accelerator, "
                f"{est.memory_capacity_gib:.0f} GiB available, so no time or cost is given. The Scenario page shows "
                "a layout or a cluster size that fits.")
    b = headline_bands(est, efficiency)
    parts = [f"{fmt_days(b['wall_days'].value)} (range {range_text(b['wall_days'], 'wall_days')})"]
    if b["cost_usd"]:
        parts.append(f"{fmt_usd(b['cost_usd'].value)} ({range_text(b['cost_usd'], 'cost_usd')})")
    if b["energy_mwh"]:
        parts.append(f"{fmt_num(b['energy_mwh'].value)} MWh")
    if b["co2_t"]:
        parts.append(f"{fmt_num(b['co2_t'].value)} t CO2e")
    return (f"{scenario_title(sc)}: " + ", ".join(parts) + f", with the layout {describe_layout(sc.layout.model_dump())}.")


def _answer_section(sc: Scenario, result: Plan) -> str:
    if result.answer is None:
        return (f'<section><h2>Answer: {_e(result.target)}</h2><p class="warn">{_e(result.reason or "")}'
                "</p></section>")
    a = result.answer
    same = answer_scenario(sc, a) == sc
    note = ("The scenario of this report is this answer: the figures below are the answer's." if same else
            "The scenario of this report is not this answer (its figures follow below); \u201cUse this answer\u201d on "
            "the Scenario page makes them one.")
    alternatives = "".join(f"<li><b>{_e(r['alternative'])}:</b> {_e(r['what it takes'])}</li>"
                           for r in alternative_rows(result))
    return (f'<section><h2>Answer: {_e(result.target)}</h2><p class="rec">{_e(headline(result))}</p>'
            f"<p><b>Software stack:</b> {_e(stack_text(a.stack))}</p>"
            f"<p><b>Layout:</b> {_e(layout_words(a.layout.model_dump(), a.gpus_per_node))}</p>"
            f"<p><b>Nearest alternatives</b></p><ul>{alternatives}</ul><p class=\"sub\">{_e(note)}</p></section>")


def _vendor_section(sc: Scenario, est: Estimate, vendor: Comparison) -> str:
    top = vendor.top
    ranked = [r for r in vendor.rows if r.rank is not None][:8]
    basis = (f"the cluster of each that the answer gives for the question ({vendor.target}), ranked by the answer's "
             "rule" if vendor.target else f"{vendor.n_gpus:,} accelerators of each kind")
    own = ""
    if top.accelerator == sc.cluster.accelerator and top.layout and sc.layout is not None \
            and top.layout.model_dump() != sc.layout.model_dump() and top.n_gpus == sc.cluster.n_gpus:
        mine = est.wall_days
        better = top.wall_days < est.days
        own = (f'<p class="sub">For this scenario\'s accelerator the comparison used another layout '
               f"({_e(describe_layout(top.layout.model_dump()))}: {_e(fmt_days(top.wall_days))}); the headline and key "
               f"figures are for the scenario's own layout ({_e(fmt_days(mine))})"
               + (". Layout search can apply the faster one.</p>" if better else ".</p>"))
    # the comparison's reason opens with the accelerator's name: that name in bold, not said twice
    why = vendor.why
    recommendation = (f"<b>{_e(top.name)}</b>{_e(why[len(top.name):])}" if why.startswith(top.name)
                      else f"<b>{_e(top.name)}</b> ranks first. {_e(why)}")
    return (f"<section><h2>Accelerator comparison</h2><p class=\"sub\">Each accelerator with its own best layout, on "
            f"{_e(basis)}, scored with weights "
            + ", ".join(f"{_e(k.replace('_', ' '))} {v:.0%}" for k, v in vendor.weights.items() if v)
            + f'.</p><p class="rec">{recommendation}</p>'
            + svg_hbars([(r.accelerator, r.decision_score) for r in ranked], lambda v: f"{v:.2f}",
                        "Decision score by accelerator", highlight=top.accelerator)
            + own + "</section>")


def summary_html(sc: Scenario, est: Estimate, generated_at: datetime, link: str = "", vendor: Comparison | None = None,
                 answer: Plan | None = None, efficiency: str = "tuned") -> str:
    """See the module docstring. answer: an engine.planning.plan result for the target asked on the Scenario page."""
    title = scenario_title(sc)
    figures = "".join(f'<div class="fig"><span>{_e(f.label)}</span><b>{_e(f.value)}</b>'
                      + (f'<span class="range">{_e(f.range)}</span>' if f.range else "")
                      + f"<span>{_e(f.what)}</span></div>" for f in key_figures(est, efficiency))
    head = f'<p class="{"rec" if est.fits else "warn"}">{_e(plan_sentence(sc, est, efficiency))}</p>'
    published = published_training_note(sc, est, efficiency)
    stack = (f'<p class="sub">{_e(ranges.explain(efficiency, est.time_range))}</p>'
             + (f'<p class="sub">{_e(published)}</p>' if published else ""))
    answer_part = _answer_section(sc, answer) if answer is not None else ""
    vendor_part = _vendor_section(sc, est, vendor) if vendor is not None and vendor.recommendation else ""
    memory_svg = svg_stacked_bar([(label, getattr(est.memory_gib, key)) for key, label in MEMORY_PARTS.items()],
                                 est.memory_capacity_gib, "GiB", "Memory per accelerator by component")
    steps = [(r["component"], r["seconds per step"]) for r in breakdown_rows(est) if r["seconds per step"] > 0]
    time_svg = svg_hbars(steps, lambda v: f"{v:.2f} s", "Time per optimizer step by component") if est.fits else ""
    scenario_table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in scenario_rows(sc))
    sources = [("Matmul efficiency", est.assumptions["matmul_efficiency_source"]),
               ("Network inside a node", est.assumptions["intra_node"]),
               ("Network between nodes", est.assumptions["inter_node"]),
               ("Price", est.cost["price_source"] or est.cost["missing"]),
               ("Grid carbon intensity", est.energy["grid"]["source"]),
               ("Failure rate", est.reliability["mtbf_source"])]
    source_list = "".join(f"<li><b>{_e(k)}:</b> {_e(v)}</li>" for k, v in sources if v)
    link_line = f'<p class="src">Open this scenario in the planner: {_e(link)}</p>' if link else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Training plan: {_e(title)}</title>'
            f"<style>{REPORT_CSS}</style></head><body>"
            f"<h1>Training plan: {_e(title)}</h1>"
            f'<p class="sub">Generated {generated_at:%Y-%m-%d %H:%M} UTC by the LLM training capacity planner. '
            f"Estimates, not measurements: see the sources below.</p>"
            f"{head}{stack}{answer_part}"
            f"<section><h2>Key figures</h2><div class=\"figs\">{figures}</div></section>"
            f'<section><h2>Where memory and time go</h2><div class="charts"><div>{memory_svg}</div>'
            f"<div>{time_svg}</div></div><p class=\"sub\">Worst pipeline stage: {_e(WORST_STAGE[est.worst_stage])}"
            f".</p></section>"
            f"{vendor_part}"
            f"<section><h2>Scenario</h2><table>{scenario_table}</table></section>"
            f"<section><h2>Sources and assumptions</h2><ul class=\"src\">{source_list}</ul>{link_line}</section>"
            "</body></html>")
