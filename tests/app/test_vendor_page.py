"""Vendor choice page: every accelerator compared by the engine, weights that change the decision, the
recommendation with its reasons."""
import json

import pytest

from engine.planning.plan import plan
from engine.presentation.edit import default_scenario
from engine.presentation.formatting import fmt_usd
from engine.planning.vendor import DEFAULT_WEIGHTS, compare
from tests.app.conftest import metric, on_page, run_app, texts
from tests.app.test_answer import ask, delta


def test_the_recommendation_and_table_are_the_engines_comparison():
    at = on_page(run_app(), "vendor")
    expected = compare(default_scenario(), weights=DEFAULT_WEIGHTS, calibrations={"H100-SXM5-80GB": {}})
    top = next(r for r in expected.rows if r.accelerator == expected.recommendation)
    assert any(top.name in s for s in texts(at.success))
    assert expected.why in texts(at.markdown)
    table = at.dataframe[0].value
    assert list(table["accelerator"]) == [r.accelerator for r in expected.rows]
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert charts[0]["data"][0]["y"][0] == expected.recommendation


def test_weights_change_the_decision_and_travel_in_the_link():
    at = on_page(run_app(), "vendor")
    weights = {c: 0.0 for c in DEFAULT_WEIGHTS} | {"memory_headroom": 1.0}
    for criterion, value in weights.items():
        at.slider(key="weight:" + criterion).set_value(value).run()
    expected = compare(default_scenario(), weights=weights, calibrations={"H100-SXM5-80GB": {}})
    assert at.session_state["options"].vendor_weights == weights
    assert at.dataframe[0].value.iloc[0]["accelerator"] == expected.recommendation
    assert expected.recommendation != compare(default_scenario()).recommendation
    from engine.presentation.share import decode
    assert decode(at.query_params["sc"]).options.vendor_weights == weights


def test_all_zero_weights_are_refused_with_a_message():
    at = on_page(run_app(), "vendor")
    for criterion in DEFAULT_WEIGHTS:
        at.slider(key="weight:" + criterion).set_value(0.0).run()
    assert not at.exception
    assert any("positive sum" in e for e in texts(at.error)), texts(at.error)


@pytest.mark.parametrize("question", [{"deadline_days": 60.0}, {"budget_usd": 15e6},
                                      {"deadline_days": 60.0, "max_gpus": 2048}])
def test_the_vendor_page_ranks_first_the_accelerator_the_answer_recommends(question):
    """Issue 19: with a deadline, a budget or 'at most N accelerators' asked on the Scenario page, the Vendor page
    sizes each accelerator for that question and ranks first the answer's accelerator, on the answer's cluster, with
    the answer's days and cost (the Scenario page's figures, as shown)."""
    kind, value = next(iter(question.items()))
    at = ask(run_app(), kind, value, **{k: v for k, v in question.items() if k != kind})
    asked = plan(default_scenario().model_copy(update={"layout": None}), **question).answer
    shown_gpus, shown_days, days_range = metric(at, "Accelerators"), metric(at, "Days (wall clock)"), \
        delta(at, "Days (wall clock)")
    assert texts(at.success)[0].startswith(f"{asked.n_gpus:,} x {asked.name} ")
    at = on_page(at, "vendor")
    table = at.dataframe[0].value
    first = table.iloc[0]
    assert (first["accelerator"], first["rank"]) == (asked.accelerator, 1)
    assert f"{int(first['GPUs']):,}" == shown_gpus
    assert (first["days (wall)"], first["cost USD"]) == (asked.wall_days, fmt_usd(asked.cost_usd))
    assert f"**Recommendation: {asked.name}** ({shown_days}, range {days_range}, on {shown_gpus} accelerators)" \
        in texts(at.success), texts(at.success)
    assert any("ranked by the answer's rule" in c for c in texts(at.caption))
