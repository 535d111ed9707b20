"""Vendor choice page: every accelerator compared by the engine, weights that change the decision, the
recommendation with its reasons."""
import json

from engine.presentation.edit import default_scenario
from engine.planning.vendor import DEFAULT_WEIGHTS, compare
from tests.app.conftest import on_page, run_app, texts


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
