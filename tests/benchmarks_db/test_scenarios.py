"""Saved scenarios (benchmarks_db/scenarios.py): short content-addressed ids in the DuckDB store."""
import pytest

from benchmarks_db.scenarios import ID_CHARS, clean_name, list_scenarios, load_scenario, save_scenario, scenario_id
from engine.presentation.edit import DEFAULT_SCENARIO, default_scenario
from engine.scenario import ScenarioError
from engine.inputs import parse_scenario


def test_save_and_load_round_trip(store):
    sc = default_scenario()
    saved = save_scenario(store, sc, "  70B   plan ")
    assert saved.new and saved.name == "70B plan" and len(saved.scenario_id) == ID_CHARS
    loaded, record = load_scenario(store, saved.scenario_id)
    assert loaded == sc and record.name == "70B plan" and record.created_at == saved.created_at


def test_the_id_is_content_addressed(store):
    sc = default_scenario()
    first = save_scenario(store, sc, "first")
    again = save_scenario(store, parse_scenario(dict(reversed(list(DEFAULT_SCENARIO.items())))), "second")
    assert again.scenario_id == first.scenario_id == scenario_id(sc)
    assert not again.new and again.name == "first"
    assert len(list_scenarios(store)) == 1
    other = sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"n_gpus": 2048}),
                                  "layout": sc.layout.model_copy(update={"dp": 64})})
    assert scenario_id(parse_scenario(other.model_dump())) != first.scenario_id


def test_the_migration_is_registered(store):
    assert store.schema_version() >= 2
    assert store.rows("SELECT count(*) FROM saved_scenario")[0][0] == 0


@pytest.mark.parametrize("name, words", [("", "give the scenario a name"), ("x" * 121, "keep it to 120"),
                                         ("bad\x00name", "control characters")])
def test_names_are_checked(name, words):
    with pytest.raises(ScenarioError) as err:
        clean_name(name)
    assert words in err.value.problems[0][1]


@pytest.mark.parametrize("sid, words", [("abc", "is not a saved-scenario id"),
                                        ("x'); DROP TABLE saved_scenario; --", "is not a saved-scenario id"),
                                        ("aaaaaaaaaa", "no scenario is saved under id aaaaaaaaaa")])
def test_unknown_or_malformed_ids_are_refused(store, sid, words):
    with pytest.raises(ScenarioError) as err:
        load_scenario(store, sid)
    assert words in err.value.problems[0][1]
    assert store.rows("SELECT count(*) FROM saved_scenario")[0][0] == 0


def test_a_name_with_sql_in_it_is_stored_as_text(store):
    saved = save_scenario(store, default_scenario(), "'); DROP TABLE saved_scenario; --")
    assert load_scenario(store, saved.scenario_id)[1].name == "'); DROP TABLE saved_scenario; --"


def test_a_saved_scenario_the_catalog_no_longer_accepts_says_so(store):
    with store.transaction() as cur:
        cur.execute("INSERT INTO saved_scenario VALUES ('oldoldoldo', 'old plan', now()::TIMESTAMP, ?)",
                    ['{"model": {"preset": "llama3.1-70b"}, "training": {"seq_len": 8192, "global_batch_size": 1024, '
                     '"total_tokens": 1e12}, "cluster": {"accelerator": "H900-Retired", "n_gpus": 8}}'])
    with pytest.raises(ScenarioError) as err:
        load_scenario(store, "oldoldoldo")
    assert "'old plan' no longer validates" in err.value.problems[0][1] and "H900-Retired" in err.value.problems[0][1]
