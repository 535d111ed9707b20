"""Shared links: the URL always carries the scenario; ?sc= tokens and ?s= saved ids open it in a fresh session;
bad or outdated links give a clear message and the defaults, never a traceback."""
import base64
import json
import zlib

import pytest

from benchmarks_db.scenarios import list_scenarios, scenario_id
from engine.presentation.edit import DEFAULT_SCENARIO, default_scenario
from engine.inputs import parse_scenario
from engine.presentation.share import ZDICT_V1, PlannerOptions, decode, encode
from tests.app.conftest import on_page, run_app, texts

def token_of(payload: dict) -> str:
    """A format-1 token for any payload, valid or not (what an old or hand-edited link may hold)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, ZDICT_V1)
    packed = packer.compress(json.dumps(payload).encode()) + packer.flush()
    return "1." + base64.urlsafe_b64encode(packed).rstrip(b"=").decode()


def save(at, name: str) -> None:
    at.text_input(key="save_name").input(name)
    at.button(key="FormSubmitter:save_scenario-Save scenario").click().run()


OTHER = parse_scenario({"model": {"preset": "mixtral-8x7b"},
                        "training": {"seq_len": 4096, "global_batch_size": 512, "total_tokens": 1e12},
                        "cluster": {"accelerator": "MI300X", "n_gpus": 64},
                        "layout": {"tp": 1, "pp": 1, "dp": 64, "micro_batch_size": 1, "zero_stage": 3},
                        "site": {"region": "FRA"}})


def test_a_token_link_opens_the_exact_scenario_and_options_in_a_new_session():
    options = PlannerOptions(objective="cost", deadline_days=45.0)
    at = run_app({"sc": encode(OTHER, options)})
    assert at.session_state["scenario"] == OTHER
    assert at.session_state["options"] == options
    assert not at.error
    assert at.selectbox(key="w:cluster.accelerator").value == "MI300X"
    assert decode(at.query_params["sc"]) == (OTHER, options)


@pytest.mark.parametrize("token, message", [
    ("1.this-is-not-a-scenario", "damaged"),
    ("7." + encode(OTHER).split(".", 1)[1], "format 7"),
    ("hello", "not a scenario link"),
    ("1." + "A" * 9000, "characters long"),
    (encode(OTHER)[:-12], "cut off"),
])
def test_a_bad_or_outdated_token_says_why_and_falls_back_to_the_defaults(token, message):
    at = run_app({"sc": token})
    assert not at.exception
    errors = texts(at.error)
    assert any("could not be opened" in e and message in e for e in errors), errors
    assert at.session_state["scenario"] == default_scenario()
    assert decode(at.query_params["sc"]).scenario == default_scenario()     # the address bar is repaired


def test_a_token_whose_scenario_no_longer_validates_names_the_field():
    data = {**DEFAULT_SCENARIO, "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 1024, "gpus_per_node": 0}}
    at = run_app({"sc": token_of({"scenario": data})})
    assert any("cluster.gpus_per_node" in e for e in texts(at.error)), texts(at.error)


def test_saving_gives_a_short_link_that_opens_the_same_scenario_in_a_fresh_session(app_store):
    at = run_app({"sc": encode(OTHER)})
    save(at, "Mixtral on MI300X")
    sid = scenario_id(OTHER)
    assert any("Saved 'Mixtral on MI300X'" in s for s in texts(at.success)), texts(at.success)
    assert any(f"?s={sid}" in c.value for c in at.code)
    assert at.query_params == {"s": sid}                       # unchanged since saved: the short form
    saved = list_scenarios(app_store)
    assert sid in set(saved.scenario_id)
    fresh = run_app({"s": sid})
    assert fresh.session_state["scenario"] == OTHER
    assert any("Mixtral on MI300X" in i for i in texts(fresh.info))
    fresh.number_input(key="w:cluster.n_gpus").set_value(128).run()      # edited: back to the full token
    assert decode(fresh.query_params["sc"]).scenario.cluster.n_gpus == 128


def test_saving_again_keeps_the_first_name_and_a_blank_name_is_refused():
    smaller = OTHER.model_copy(update={"cluster": OTHER.cluster.model_copy(update={"n_gpus": 32}),
                                       "layout": OTHER.layout.model_copy(update={"dp": 32})})
    at = run_app({"sc": encode(parse_scenario(smaller.model_dump()))})
    save(at, "   ")
    assert any("give the scenario a name" in e for e in texts(at.error))
    save(at, "first name")
    save(at, "second name")
    assert any("Already saved" in s and "first name" in s for s in texts(at.success)), texts(at.success)


@pytest.mark.parametrize("sid, message", [
    ("zzzzzzzzzz", "no scenario is saved under id zzzzzzzzzz"),
    ("x'); DROP TABLE saved_scenario; --", "is not a saved-scenario id"),
    ("", "is not a saved-scenario id"),
])
def test_an_unknown_or_malformed_saved_id_says_why(sid, message, app_store):
    at = run_app({"s": sid})
    assert not at.exception
    assert any(message in e for e in texts(at.error)), texts(at.error)
    assert at.session_state["scenario"] == default_scenario()
    assert app_store.rows("SELECT count(*) FROM saved_scenario")[0][0] >= 0     # the table survived


def test_the_scenario_and_the_link_survive_page_switches():
    at = run_app()
    at.number_input(key="w:cluster.n_gpus").set_value(512).run()
    for page in ("memory", "layout_search", "cost_carbon", "benchmarks", "report", "scenario"):
        on_page(at, page)
        assert at.session_state["scenario"].cluster.n_gpus == 512
        assert decode(at.query_params["sc"]).scenario.cluster.n_gpus == 512
    assert at.number_input(key="w:cluster.n_gpus").value == 512


def test_text_from_a_link_is_shown_as_text_not_markdown():
    crafted = token_of({"scenario": {**DEFAULT_SCENARIO, "site": {"region": "[click me](http://evil.example)"}}})
    at = run_app({"sc": crafted})
    raw = " ".join(e.value for e in at.error)
    assert "\\[click me\\]\\(http\\:\u2060//evil\\.example\\)" in raw  # escaped, no autolink: no link at all
    assert "[click me](http:\u2060//evil.example)" in " ".join(texts(at.error))
