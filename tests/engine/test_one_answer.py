"""Issue 19, item 3: one recommendation, one set of figures. For the issue's scenario (Llama 3.1 70B, 15.6T tokens,
1,024 H100) and its questions, the plan's answer (Scenario page, `python -m engine plan`), the vendor comparison
(Vendor page, `python -m engine compare`) and the summary report name the same accelerator with the same cluster,
layout, days and cost, and that answer is the one its rule says: the cheapest that meets a deadline (priced before
unpriced), the fastest within a money budget (priced only), on at most the accelerators one has."""
import html
import json
from datetime import datetime

import pytest

from engine.__main__ import main
from engine.planning.estimate import estimate
from engine.planning.plan import plan
from engine.planning.vendor import compare
from engine.presentation.answer import answer_scenario, headline
from engine.presentation.edit import DEFAULT_SCENARIO, default_scenario
from engine.presentation.formatting import fmt_days, fmt_usd
from engine.presentation.summary import summary_html
from engine.scenario import Layout

QUESTIONS = {
    "within 60 days": {"deadline_days": 60.0},
    "at most $15M": {"budget_usd": 15e6},
    "within 60 days on at most 2,048": {"deadline_days": 60.0, "max_gpus": 2048},
}
CLI_FLAGS = {"deadline_days": "--deadline-days", "budget_usd": "--budget-usd", "max_gpus": "--max-gpus"}


def _figures(row) -> tuple:
    """(accelerator, GPUs, days, cost, layout) of an answer, an option or a comparison row, as data."""
    return (row["accelerator"], row["n_gpus"], row["wall_days"], row["cost_usd"], row["layout"])


def _cli(capsys, tmp_path, command: str, question: dict) -> dict:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(DEFAULT_SCENARIO))
    args = [command, str(path)]
    for key, value in question.items():
        args += [CLI_FLAGS[key], str(int(value) if key == "max_gpus" else value)]
    capsys.readouterr()
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("asked", list(QUESTIONS))
def test_the_answer_the_comparison_the_report_and_the_command_line_agree(asked, capsys, tmp_path):
    question = QUESTIONS[asked]
    sc = default_scenario().model_copy(update={"layout": None})
    planned = plan(sc, **question)
    compared = compare(sc, **question)
    a = planned.answer
    assert a is not None, planned.reason
    rows = {r.accelerator: r for r in compared.rows}
    answer = {**a.model_dump(), "layout": a.layout.model_dump()}
    # the comparison recommends the answer's accelerator, with its row's cluster, layout, days and cost
    assert compared.recommendation == a.accelerator and compared.rows[0].accelerator == a.accelerator
    top = rows[a.accelerator]
    assert _figures(answer) == _figures({**top.model_dump(), "layout": top.layout.model_dump()})
    assert top.ranges["wall_days"] == a.ranges["wall_days"] and top.ranges["cost_usd"] == a.ranges["cost_usd"]
    # every accelerator the plan sized for the question has the same cluster and figures in the comparison
    for o in planned.options:
        r = rows[o.accelerator]
        assert (o.met, o.n_gpus if o.met else None) == (bool(r.meets_target), r.n_gpus)
        if o.met:
            assert (o.wall_days, o.cost_usd, o.co2_t) == (r.wall_days, r.cost_usd, r.co2_t)

    # the rule, checked on the comparison's rows themselves
    ranked = [r for r in compared.rows if r.rank is not None]
    assert [r.cost_usd is None for r in ranked] == sorted(r.cost_usd is None for r in ranked)  # priced first
    if "max_gpus" in question:
        assert all(r.n_gpus <= question["max_gpus"] for r in ranked)
    if "deadline_days" in question:
        assert all(r.wall_days <= question["deadline_days"] for r in ranked)
        assert a.cost_usd == min(r.cost_usd for r in ranked if r.cost_usd is not None)     # the cheapest that meets
    else:
        assert all(r.cost_usd is not None and r.cost_usd <= question["budget_usd"] for r in ranked)
        assert a.wall_days == min(r.wall_days for r in ranked)                              # the fastest within it
        unpriced = [r for r in compared.rows if r.fits and r.rank is None and "enter one" in r.why]
        assert unpriced and all(r.cost_usd is None for r in unpriced)                  # listed apart: enter a price

    # the report: the answer's headline and the comparison's reason, the same GPUs, days and cost in both
    applied = answer_scenario(default_scenario(), a)
    est = estimate(applied)
    assert (est.n_gpus, est.wall_days, est.cost_usd) == (a.n_gpus, a.wall_days, a.cost_usd)   # its key figures
    report = html.unescape(summary_html(applied, est, datetime(2026, 1, 1), vendor=compared, answer=planned))
    assert headline(planned) in report and compared.why in report.replace("<b>", "").replace("</b>", "")
    assert "The scenario of this report is this answer" in report
    assert f"{top.wall_days:.1f} days on {top.n_gpus:,} GPUs" in compared.why
    assert fmt_days(top.wall_days) in headline(planned) and fmt_usd(top.cost_usd) in headline(planned)

    # the command line prints the same answer and the same comparison row, to the last digit
    cli_plan = _cli(capsys, tmp_path, "plan", question)["answer"]
    cli_compare = _cli(capsys, tmp_path, "compare", question)
    assert cli_compare["recommendation"] == a.accelerator
    cli_row = next(r for r in cli_compare["rows"] if r["accelerator"] == a.accelerator)
    for printed in (cli_plan, cli_row):
        assert _figures({**printed, "layout": Layout.model_validate(printed["layout"]).model_dump()}) == \
            _figures(answer)


def test_without_a_question_a_cost_weighted_score_never_ranks_an_unpriced_accelerator_first():
    sc = default_scenario().model_copy(update={"layout": None})
    compared = compare(sc)                      # the default weights: cost weighs 30%
    ranked = [r for r in compared.rows if r.rank is not None]
    assert any(r.cost_usd is None for r in ranked)          # there are unpriced ones to rank (GB300, TPU7x, ...)
    assert ranked[0].cost_usd is not None
    assert [bool(r.unknown) for r in ranked] == sorted(bool(r.unknown) for r in ranked)
