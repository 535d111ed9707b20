"""Saved scenarios (benchmarks_db/scenarios.py): short content-addressed ids in the DuckDB store, saved with the
question (the page options), owned by the signed-on user and listed to everybody or to their owner only."""
import base64
import hashlib
import json

import duckdb
import pytest

from benchmarks_db.migrations import MIGRATIONS
from benchmarks_db.scenarios import (ID_CHARS, clean_name, delete_scenario, list_scenarios, load_scenario,
                                     save_scenario, scenario_id, set_visibility)
from benchmarks_db.store import open_store
from engine.presentation.edit import DEFAULT_SCENARIO, default_scenario
from engine.inputs import parse_scenario
from engine.presentation.share import PlannerOptions
from engine.scenario import ScenarioError

ALICE, BOB = "alice@example.com", "bob@example.com"
QUESTION = PlannerOptions(deadline_days=30.0, vendor="AMD", efficiency="typical", batch_min=512, batch_max=4096)


def test_save_and_load_round_trip(store):
    sc = default_scenario()
    saved = save_scenario(store, sc, "  70B   plan ")
    assert saved.new and saved.name == "70B plan" and len(saved.scenario_id) == ID_CHARS
    loaded, options, record = load_scenario(store, saved.scenario_id)
    assert loaded == sc and record.name == "70B plan" and record.created_at == saved.created_at
    assert options == PlannerOptions() and record.owner is None and record.visibility == "shared"


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
    assert load_scenario(store, saved.scenario_id).saved.name == "'); DROP TABLE saved_scenario; --"


def test_a_saved_scenario_the_catalog_no_longer_accepts_says_so(store):
    with store.transaction() as cur:
        cur.execute("INSERT INTO saved_scenario (scenario_id, name, created_at, scenario_json) "
                    "VALUES ('oldoldoldo', 'old plan', now()::TIMESTAMP, ?)",
                    ['{"model": {"preset": "llama3.1-70b"}, "training": {"seq_len": 8192, "global_batch_size": 1024, '
                     '"total_tokens": 1e12}, "cluster": {"accelerator": "H900-Retired", "n_gpus": 8}}'])
    with pytest.raises(ScenarioError) as err:
        load_scenario(store, "oldoldoldo")
    assert "'old plan' no longer validates" in err.value.problems[0][1] and "H900-Retired" in err.value.problems[0][1]


def test_the_question_is_saved_with_the_scenario(store):
    sc = default_scenario()
    asked = save_scenario(store, sc, "70B in 30 days on AMD", QUESTION)
    plain = save_scenario(store, sc, "70B")
    assert asked.scenario_id != plain.scenario_id and asked.new and plain.new    # another question, another link
    assert load_scenario(store, asked.scenario_id).options == QUESTION
    assert load_scenario(store, plain.scenario_id).options == PlannerOptions()
    assert not save_scenario(store, sc, "again", QUESTION).new


def test_two_owners_saving_the_same_scenario_get_a_row_each(store):
    sc = default_scenario()
    alice, bob, nobody = (save_scenario(store, sc, f"plan of {who}", QUESTION, owner=who) for who in (ALICE, BOB, None))
    assert len({alice.scenario_id, bob.scenario_id, nobody.scenario_id}) == 3
    assert [load_scenario(store, s.scenario_id).saved.owner for s in (alice, bob, nobody)] == [ALICE, BOB, None]
    again = save_scenario(store, sc, "renamed", QUESTION, owner=f"  {ALICE} ")        # the header's blanks go
    assert again.scenario_id == alice.scenario_id and not again.new and again.name == "plan of alice@example.com"
    delete_scenario(store, bob.scenario_id, BOB)                                       # Bob's delete leaves Alice's
    assert load_scenario(store, alice.scenario_id).scenario == sc
    assert store.rows("SELECT count(*) FROM saved_scenario")[0][0] == 2


def _four(store) -> dict[str, str]:
    sc = default_scenario()
    sizes = {"alice private": 1, "alice shared": 2, "bob private": 4, "nobody": 8}     # data-parallel replicas
    owners = {"alice private": (ALICE, "private"), "alice shared": (ALICE, "shared"), "bob private": (BOB, "private"),
              "nobody": (None, "shared")}
    ids = {}
    for name, dp in sizes.items():
        n_gpus = sc.layout.tp * sc.layout.pp * dp
        other = parse_scenario({**sc.model_dump(), "cluster": {**sc.cluster.model_dump(), "n_gpus": n_gpus},
                                "layout": {**sc.layout.model_dump(), "dp": dp}})
        owner, visibility = owners[name]
        ids[name] = save_scenario(store, other, name, owner=owner, visibility=visibility).scenario_id
    return ids


def test_the_list_shows_a_user_their_own_and_the_shared_ones(store):
    ids = _four(store)
    listed = {who: set(list_scenarios(store, viewer=who).name) for who in (ALICE, BOB, None)}
    assert listed[ALICE] == {"alice private", "alice shared", "nobody"}
    assert listed[BOB] == {"alice shared", "bob private", "nobody"}
    assert listed[None] == {"alice shared", "nobody"}
    # a link is meant to be shared: anybody holding it opens a private scenario
    assert load_scenario(store, ids["bob private"]).saved.visibility == "private"
    set_visibility(store, ids["alice private"], ALICE, "shared")
    set_visibility(store, ids["alice shared"], ALICE, "private")
    assert set(list_scenarios(store, viewer=BOB).name) == {"alice private", "bob private", "nobody"}
    delete_scenario(store, ids["alice private"], ALICE)
    assert set(list_scenarios(store, viewer=BOB).name) == {"bob private", "nobody"}
    with pytest.raises(ScenarioError, match=f"no scenario is saved under id {ids['alice private']}"):
        load_scenario(store, ids["alice private"])


@pytest.mark.parametrize("name, owner, words", [
    ("alice private", BOB, "'alice private' belongs to another user: only its owner can"),
    ("alice private", None, "'alice private' belongs to another user: only its owner can"),
    ("nobody", ALICE, "'nobody' was saved without a signed-on user: only its owner can"),
    ("nobody", None, "'nobody' was saved without a signed-on user: only its owner can"),
])
def test_only_the_owner_deletes_a_scenario_or_changes_who_it_is_listed_to(store, name, owner, words):
    ids = _four(store)
    with pytest.raises(ScenarioError) as err:
        delete_scenario(store, ids[name], owner)
    assert words in err.value.problems[0][1] and "delete it" in err.value.problems[0][1]
    with pytest.raises(ScenarioError) as err:
        set_visibility(store, ids[name], owner, "shared")
    assert words in err.value.problems[0][1] and "change who it is listed to" in err.value.problems[0][1]
    assert store.rows("SELECT count(*) FROM saved_scenario WHERE visibility = 'private'")[0][0] == 2
    assert store.rows("SELECT count(*) FROM saved_scenario")[0][0] == 4


@pytest.mark.parametrize("call, words", [
    (lambda s: save_scenario(s, default_scenario(), "x", visibility="private"),
     "only a signed-on user's scenario can be private"),
    (lambda s: save_scenario(s, default_scenario(), "x", owner=ALICE, visibility="public'); DROP TABLE x; --"),
     "is not a visibility: shared (listed to everybody) or private"),
    (lambda s: save_scenario(s, default_scenario(), "x", owner="alice\x00@example.com"),
     "is not plain text of at most 254 characters"),
    (lambda s: save_scenario(s, default_scenario(), "x", owner="a" * 255), "is not plain text"),
    (lambda s: delete_scenario(s, "x'); DROP TABLE saved_scenario; --", ALICE), "is not a saved-scenario id"),
    (lambda s: set_visibility(s, "zzzzzzzzzz", ALICE, "private"), "no scenario is saved under id zzzzzzzzzz"),
])
def test_bad_owners_visibilities_and_ids_are_refused_with_a_message(store, call, words):
    with pytest.raises(ScenarioError) as err:
        call(store)
    assert words in err.value.problems[0][1]
    assert store.rows("SELECT count(*) FROM saved_scenario")[0][0] == 0


def test_an_owner_with_sql_in_it_is_stored_as_text(store):
    owner = "'); DROP TABLE saved_scenario; --"
    saved = save_scenario(store, default_scenario(), "mine", owner=owner, visibility="private")
    assert set(list_scenarios(store, viewer=owner).scenario_id) == {saved.scenario_id}
    assert list_scenarios(store, viewer=ALICE).empty
    delete_scenario(store, saved.scenario_id, owner)
    assert store.rows("SELECT count(*) FROM saved_scenario")[0][0] == 0


def test_a_store_of_the_old_schema_keeps_its_scenarios_unowned_shared_and_under_their_ids(tmp_path):
    """A real DuckDB file at schema version 3 (saved scenarios without options or owner), then opened by this code."""
    path = tmp_path / "old.duckdb"
    sc = default_scenario()
    body = json.dumps(sc.model_dump(mode="json", exclude_defaults=True), sort_keys=True, separators=(",", ":"))
    old_id = base64.b32encode(hashlib.sha256(body.encode()).digest()).decode().lower()[:10]   # the old ids' rule
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
                "applied_at TIMESTAMP NOT NULL)")
    for version, (description, sql) in enumerate(MIGRATIONS[:3], start=1):
        con.execute(sql)
        con.execute("INSERT INTO schema_version VALUES (?, ?, now()::TIMESTAMP)", [version, description])
    con.execute("INSERT INTO saved_scenario VALUES (?, 'the old plan', TIMESTAMP '2026-03-01 12:00:00', ?)",
                [old_id, body])
    con.close()
    store = open_store(path)
    try:
        assert store.schema_version() == len(MIGRATIONS)
        assert store.rows("SELECT scenario_id, name, owner, visibility, options_json FROM saved_scenario") == \
            [(old_id, "the old plan", None, "shared", "{}")]
        opened = load_scenario(store, old_id)
        assert opened.scenario == sc and opened.options == PlannerOptions()
        assert str(opened.saved.created_at) == "2026-03-01 12:00:00"
        assert set(list_scenarios(store, viewer=ALICE).scenario_id) == {old_id} == \
            set(list_scenarios(store).scenario_id)
        again = save_scenario(store, sc, "saved again without an owner")       # the old link is this scenario's
        assert again.scenario_id == old_id and not again.new and again.name == "the old plan"
        with pytest.raises(ScenarioError, match="was saved without a signed-on user"):
            delete_scenario(store, old_id, ALICE)
    finally:
        store.close()
