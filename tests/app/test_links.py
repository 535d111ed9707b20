"""Shared links: the URL always carries the scenario; ?sc= tokens and ?s= saved ids open it in a fresh session;
bad or outdated links give a clear message and the defaults, never a traceback."""
import base64
import json
import zlib

import pytest

from benchmarks_db.scenarios import list_scenarios, load_scenario, save_scenario, scenario_id
from engine.presentation.edit import DEFAULT_SCENARIO, default_scenario
from engine.inputs import parse_scenario
from engine.presentation.share import ZDICT_V1, PlannerOptions, decode, encode
from ui import background
from tests.app.conftest import button, metric, on_page, run_app, texts
from tests.app.test_answer import ask
from tests.app.test_benchmarks_page import upload
from tests.benchmarks_db.helpers import matmul_result, runner_file

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
    saved_before = app_store.rows("SELECT count(*) FROM saved_scenario")[0][0]
    at = run_app({"s": sid})
    assert not at.exception
    assert any(message in e for e in texts(at.error)), texts(at.error)
    assert at.session_state["scenario"] == default_scenario()
    # the table survived the injection string with every saved scenario in it, and nothing was added
    assert app_store.rows("SELECT count(*) FROM saved_scenario")[0][0] == saved_before


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


QUESTION = PlannerOptions(deadline_days=30.0, vendor="AMD", efficiency="typical", batch_min=512, batch_max=4096,
                          max_gpus=8192)
ASKED = {"deadline_days": 30.0, "budget_usd": None, "gpu_hour_budget": None, "max_gpus": 8192, "vendor": "AMD",
         "efficiency": "typical", "batch_min": 512, "batch_max": 4096}
ANSWER_FIGURES = ("Accelerators", "Days (wall clock)", "Cost", "GPU-hours (billed)", "Energy", "CO2e")


def asked(at) -> dict:
    """The question in the Scenario page's form."""
    return {k: (at.selectbox if k in ("vendor", "efficiency") else at.number_input)(key="ask:" + k).value
            for k in ("deadline_days", "budget_usd", "gpu_hour_budget", "max_gpus", "vendor", "efficiency",
                      "batch_min", "batch_max")}


def answered(at) -> tuple:
    """The answer once worked out: its headline and figures."""
    background.wait_all()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return texts(at.success)[0], {label: metric(at, label) for label in ANSWER_FIGURES}


def test_a_token_link_carries_the_whole_question():
    at = run_app({"sc": encode(OTHER, QUESTION)})
    assert at.session_state["options"] == QUESTION
    assert asked(at) == ASKED


def test_a_short_link_restores_the_question_and_shows_the_same_answer_as_asking_it(app_store):
    sc = default_scenario()
    sid = save_scenario(app_store, sc, "70B within 30 days on AMD", QUESTION).scenario_id
    opened = run_app({"s": sid})                              # the answer is worked out for this session ...
    assert opened.session_state["options"] == QUESTION and opened.query_params == {"s": sid}
    assert asked(opened) == ASKED
    headline, figures = answered(opened)
    assert "within 30 days on at most 8,192 accelerators" in headline and "MI" in headline     # an AMD Instinct part
    assert float(figures["Days (wall clock)"].split()[0]) <= 30
    direct = ask(run_app(), "deadline_days", 30.0, vendor="AMD", efficiency="typical", batch_min=512, batch_max=4096,
                 max_gpus=8192)
    assert answered(direct) == (headline, figures)             # ... and asking it directly gives the same figures
    assert direct.query_params["sc"] == encode(sc, QUESTION)
    save(direct, "the same, asked directly")                  # saving it again names the link opened above
    assert direct.query_params == {"s": sid}
    assert any("Already saved" in s and "70B within 30 days on AMD" in s for s in texts(direct.success))


def listed(at) -> list[str]:
    return [t for t in texts(at.markdown) if "(?s=" in t]


MINE = parse_scenario({**OTHER.model_dump(), "cluster": {**OTHER.cluster.model_dump(), "n_gpus": 16},
                       "layout": {**OTHER.layout.model_dump(), "dp": 16}})


def test_a_signed_on_user_owns_saved_scenarios_and_private_ones_are_listed_to_them_only(signed_in, app_store):
    signed_in.who = "alice@example.com"
    alice = run_app({"sc": encode(MINE)})
    alice.checkbox(key="save_private").check()
    save(alice, "Alice's private plan")
    sid = alice.query_params["s"]
    assert sid == scenario_id(MINE, owner="alice@example.com") != scenario_id(MINE)
    assert any("not listed to others: anyone you give its link can still open it" in c for c in texts(alice.caption))
    record = load_scenario(app_store, sid).saved
    assert (record.owner, record.visibility) == ("alice@example.com", "private")

    signed_in.who = "bob@example.com"
    bob = run_app()
    assert not any(sid in line for line in listed(bob))
    assert not any(b.key and sid in b.key for b in bob.button)                  # nothing of Alice's to change
    assert run_app({"s": sid}).session_state["scenario"] == MINE                # the link opens it for Bob

    signed_in.who = "alice@example.com"
    alice = run_app()
    assert any(sid in line and "yours, private" in line for line in listed(alice)), listed(alice)
    button(alice, "Share").click().run()                                          # Alice lists it to everybody
    assert load_scenario(app_store, sid).saved.visibility == "shared"
    signed_in.who = "bob@example.com"
    assert any(sid in line and "Alice's private plan" in line and "yours" not in line for line in listed(run_app()))

    signed_in.who = "alice@example.com"
    alice = run_app({"s": sid})
    alice.button(key=f"saved:delete:{sid}").click().run()
    assert not any(sid in line for line in listed(alice))
    assert alice.query_params["sc"] == encode(MINE)                              # the short link is gone
    gone = run_app({"s": sid})
    assert any(f"no scenario is saved under id {sid}" in e for e in texts(gone.error))


def test_without_the_header_scenarios_are_unowned_and_listed_to_everybody(signed_in, app_store):
    at = run_app({"sc": encode(MINE)})                  # the setting is there, the header is not
    assert not [c for c in at.checkbox if c.key == "save_private"]
    save(at, "Nobody's plan")
    sid = at.query_params["s"]
    assert sid == scenario_id(MINE)
    assert load_scenario(app_store, sid).saved.owner is None
    signed_in.who = "bob@example.com"
    bob = run_app()
    assert any(sid in line and "yours" not in line for line in listed(bob))
    assert not any(b.key and sid in b.key for b in bob.button)


def test_the_uploader_is_the_same_signed_on_user(signed_in, app_store):
    signed_in.who = "carol@example.com"
    data = runner_file([matmul_result(4096, 4096, 4096, "bf16", [2 * 4096**3 / 500e12] * 5)],
                       started="2026-11-21T08:00:00Z")
    at = upload(on_page(run_app(), "benchmarks"), "carol.json", data)
    assert app_store.rows("SELECT uploaded_by, trusted_by FROM source WHERE filename = 'carol.json'") == \
        [("carol@example.com", None)]
    button(at, "Remove this upload").click().run()
    assert app_store.rows("SELECT count(*) FROM source WHERE filename = 'carol.json'")[0][0] == 0


def test_a_user_name_no_proxy_would_send_is_refused_with_a_message(signed_in, app_store):
    signed_in.who = "x" * 300 + "@example.com"
    before = app_store.rows("SELECT count(*) FROM saved_scenario")[0][0]
    at = run_app({"sc": encode(MINE)})
    save(at, "too long a user")
    assert any("is not plain text of at most 254 characters" in e and "APP_IDENTITY_HEADER" in e
               for e in texts(at.error)), texts(at.error)
    assert app_store.rows("SELECT count(*) FROM saved_scenario")[0][0] == before
