"""The one-page summary report a manager can print or forward: one headline from the scenario's own layout, the
answer to the deadline or budget when one was asked, the key figures with their ranges, the accelerator comparison
(each accelerator on its own best layout, said so), charts and sources. Self-contained HTML: inline CSS and SVG, no
scripts, nothing fetched. Pure: no Streamlit."""
from __future__ import annotations

from datetime import datetime

from engine.economics import ranges
from engine.planning.evaluation import Row
from engine.presentation.answer import alternative_rows, answer_scenario, headline
from engine.presentation.edit import describe_layout, layout_words
from engine.presentation.report import (MEMORY_PARTS, REPORT_CSS, WORST_STAGE, _e, breakdown_rows,
                                        fmt_days, fmt_num, fmt_usd, headline_bands, key_figures,
                                        published_training_note, range_text, scenario_rows, scenario_title,
                                        svg_hbars, svg_stacked_bar)
from engine.scenario import Scenario


def plan_sentence(sc: Scenario, est: dict, efficiency: str = "tuned") -> str:
    """The report's headline: what the scenario as laid out takes, with ranges; or that its layout does not fit."""
    if not est["fits"]:
        return (f"This layout does not fit: {est['memory_gib']['total']:.1f} GiB needed per accelerator, "
                f"{est['memory_capacity_gib']:.0f} GiB available, so no time or cost is given. The Scenario page shows "
                "a layout or a cluster size that fits.")
    b = headline_bands(est, efficiency)
    parts = [f"{fmt_days(b['wall_days']['value'])} (range {range_text(b['wall_days'], 'wall_days')})"]
    if b["cost_usd"]:
        parts.append(f"{fmt_usd(b['cost_usd']['value'])} ({range_text(b['cost_usd'], 'cost_usd')})")
    if b["energy_mwh"]:
        parts.append(f"{fmt_num(b['energy_mwh']['value'])} MWh")
    if b["co2_t"]:
        parts.append(f"{fmt_num(b['co2_t']['value'])} t CO2e")
    return (f"{scenario_title(sc)}: " + ", ".join(parts) + f", with the layout {describe_layout(sc.layout.model_dump())}.")


def _answer_section(sc: Scenario, result: dict) -> str:
    if result.get("answer") is None:
        return (f'<section><h2>Answer: {_e(result["target"])}</h2><p class="warn">{_e(result.get("reason", ""))}'
                "</p></section>")
    a = result["answer"]
    same = answer_scenario(sc, a) == sc
    note = ("The scenario of this report is this answer: the figures below are the answer's." if same else
            "The scenario of this report is not this answer (its figures follow below); \u201cUse this answer\u201d on "
            "the Scenario page makes them one.")
    alternatives = "".join(f"<li><b>{_e(r['alternative'])}:</b> {_e(r['what it takes'])}</li>"
                           for r in alternative_rows(result))
    return (f'<section><h2>Answer: {_e(result["target"])}</h2><p class="rec">{_e(headline(result))}</p>'
            f"<p><b>Layout:</b> {_e(layout_words(a['layout'], a['gpus_per_node']))}</p>"
            f"<p><b>Nearest alternatives</b></p><ul>{alternatives}</ul><p class=\"sub\">{_e(note)}</p></section>")


def _vendor_section(sc: Scenario, est: dict, vendor: dict) -> str:
    top = next(r for r in vendor["rows"] if r["accelerator"] == vendor["recommendation"])
    ranked = [r for r in vendor["rows"] if r["rank"] is not None][:8]
    basis = (f"the smallest cluster of each that trains within {vendor['deadline_days']:g} days"
             if vendor.get("deadline_days") else f"{vendor['n_gpus']:,} accelerators of each kind")
    own = ""
    if top["accelerator"] == sc.cluster.accelerator and top.get("layout") and sc.layout is not None \
            and top["layout"] != sc.layout.model_dump() and top.get("n_gpus") == sc.cluster.n_gpus:
        mine = est["wall_days"]
        better = top["wall_days"] < Row.of(est).days
        own = (f'<p class="sub">For this scenario\'s accelerator the comparison used another layout '
               f"({_e(describe_layout(top['layout']))}: {_e(fmt_days(top['wall_days']))}); the headline and key "
               f"figures are for the scenario's own layout ({_e(fmt_days(mine))})"
               + (". Layout search can apply the faster one.</p>" if better else ".</p>"))
    return (f"<section><h2>Accelerator comparison</h2><p class=\"sub\">Each accelerator with its own best layout, on "
            f"{_e(basis)}, scored with weights "
            + ", ".join(f"{_e(k.replace('_', ' '))} {v:.0%}" for k, v in vendor["weights"].items() if v)
            + f'.</p><p class="rec"><b>{_e(top["name"])}</b> ranks first. {_e(vendor["why"])}</p>'
            + svg_hbars([(r["accelerator"], r["decision_score"]) for r in ranked], lambda v: f"{v:.2f}",
                        "Decision score by accelerator", highlight=top["accelerator"])
            + own + "</section>")


def summary_html(sc: Scenario, est: dict, generated_at: datetime, link: str = "", vendor: dict | None = None,
                 answer: dict | None = None, efficiency: str = "tuned") -> str:
    """See the module docstring. answer: an engine.planning.plan result for the target asked on the Scenario page."""
    title = scenario_title(sc)
    figures = "".join(f'<div class="fig"><span>{_e(f.label)}</span><b>{_e(f.value)}</b>'
                      + (f'<span class="range">{_e(f.range)}</span>' if f.range else "")
                      + f"<span>{_e(f.what)}</span></div>" for f in key_figures(est, efficiency))
    head = f'<p class="{"rec" if est["fits"] else "warn"}">{_e(plan_sentence(sc, est, efficiency))}</p>'
    published = published_training_note(sc, est, efficiency)
    stack = f'<p class="sub">{_e(ranges.explain(efficiency))}</p>' + (f'<p class="sub">{_e(published)}</p>'
                                                                      if published else "")
    answer_part = _answer_section(sc, answer) if answer is not None else ""
    vendor_part = _vendor_section(sc, est, vendor) if vendor is not None and vendor.get("recommendation") else ""
    memory_svg = svg_stacked_bar([(label, est["memory_gib"][key]) for key, (label, _) in MEMORY_PARTS.items()],
                                 est["memory_capacity_gib"], "GiB", "Memory per accelerator by component")
    steps = [(r["component"], r["seconds per step"]) for r in breakdown_rows(est) if r["seconds per step"] > 0]
    time_svg = svg_hbars(steps, lambda v: f"{v:.2f} s", "Time per optimizer step by component") if est["fits"] else ""
    scenario_table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in scenario_rows(sc))
    sources = [("Matmul efficiency", est["assumptions"]["matmul_efficiency_source"]),
               ("Network inside a node", est["assumptions"]["intra_node"]),
               ("Network between nodes", est["assumptions"]["inter_node"])]
    if "cost" in est:
        sources += [("Price", est["cost"]["price_source"] or est["cost"]["missing"]),
                    ("Grid carbon intensity", est["energy"]["grid"]["source"]),
                    ("Failure rate", est["reliability"]["mtbf_source"])]
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
            f"<div>{time_svg}</div></div><p class=\"sub\">Worst pipeline stage: {_e(WORST_STAGE[est['worst_stage']])}"
            f".</p></section>"
            f"{vendor_part}"
            f"<section><h2>Scenario</h2><table>{scenario_table}</table></section>"
            f"<section><h2>Sources and assumptions</h2><ul class=\"src\">{source_list}</ul>{link_line}</section>"
            "</body></html>")
