"""Saved scenarios: a scenario stored under a short content-addressed id (the same scenario always gets the same id,
so saving twice adds nothing), with a name and the UTC time it was first saved. Links take the form ?s=<id>.

    saved = save_scenario(store, scenario, "70B on 1,024 H100")   # SavedScenario(scenario_id, name, created_at, new)
    scenario = load_scenario(store, saved.scenario_id)             # ScenarioError when unknown or no longer valid
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from benchmarks_db.store import Store, utc_now
from engine.scenario import Scenario, ScenarioError
from engine.inputs import parse_scenario

ID_CHARS = 10                         # base32: 50 bits, collisions negligible for any realistic number of saves
ID_RE = re.compile(r"^[a-z2-7]{%d}$" % ID_CHARS)
MAX_NAME_CHARS = 120
LINK_FIELD = "saved scenario"         # the field path ScenarioError names for an unusable id


@dataclass(frozen=True)
class SavedScenario:
    scenario_id: str
    name: str
    created_at: datetime              # UTC
    new: bool                         # False when this scenario had been saved before (under its first name)


def canonical_json(sc: Scenario) -> str:
    """The scenario's identity: its non-default fields, sorted, without spaces."""
    return json.dumps(sc.model_dump(mode="json", exclude_defaults=True), sort_keys=True, separators=(",", ":"))


def scenario_id(sc: Scenario) -> str:
    """Short id of a scenario: the first 10 base32 characters of the SHA-256 of its canonical JSON."""
    digest = hashlib.sha256(canonical_json(sc).encode()).digest()
    return base64.b32encode(digest).decode().lower()[:ID_CHARS]


def clean_name(name: str) -> str:
    """The name as stored: whitespace collapsed; ScenarioError when empty, too long or holding control characters."""
    if not isinstance(name, str):
        raise ScenarioError([("name", "a name is text")])
    text = " ".join(name.split())
    if not text:
        raise ScenarioError([("name", "give the scenario a name, e.g. '70B on 1,024 H100, 90 days'")])
    if len(text) > MAX_NAME_CHARS:
        raise ScenarioError([("name", f"the name has {len(text)} characters; keep it to {MAX_NAME_CHARS}")])
    if any(not ch.isprintable() for ch in text):
        raise ScenarioError([("name", "the name holds control characters; use plain text")])
    return text


def save_scenario(store: Store, sc: Scenario, name: str) -> SavedScenario:
    """Store the scenario (one transaction); a scenario saved before keeps its first name and time."""
    text = clean_name(name)
    sid = scenario_id(sc)
    with store.transaction() as cur:
        before = cur.execute("SELECT name, created_at FROM saved_scenario WHERE scenario_id = ?", [sid]).fetchall()
        if before:
            return SavedScenario(sid, before[0][0], before[0][1], new=False)
        created_at = utc_now()
        cur.execute("INSERT INTO saved_scenario (scenario_id, name, created_at, scenario_json) VALUES (?, ?, ?, ?)",
                    [sid, text, created_at, canonical_json(sc)])
    return SavedScenario(sid, text, created_at, new=True)


def load_scenario(store: Store, sid: str) -> tuple[Scenario, SavedScenario]:
    """The saved scenario and its record; ScenarioError for a malformed or unknown id, or a scenario the current
    catalog and schema no longer accept."""
    if not isinstance(sid, str) or not ID_RE.match(sid.strip().lower()):
        raise ScenarioError([(LINK_FIELD, f"'{str(sid)[:40]}' is not a saved-scenario id (ids are {ID_CHARS} "
                                          "letters and digits, like ?s=k3j5x2m7qa); check the link")])
    sid = sid.strip().lower()
    found = store.rows("SELECT name, created_at, scenario_json FROM saved_scenario WHERE scenario_id = ?", [sid])
    if not found:
        raise ScenarioError([(LINK_FIELD, f"no scenario is saved under id {sid} in this planner's store; the link "
                                          "may come from another installation, or the store was reset")])
    name, created_at, body = found[0]
    try:
        sc = parse_scenario(body)
    except ScenarioError as err:
        raise ScenarioError([(LINK_FIELD, f"the scenario saved as '{name}' no longer validates with the current "
                                          "catalog: " + "; ".join(f"{f}: {m}" for f, m in err.problems))]) from None
    return sc, SavedScenario(sid, name, created_at, new=False)


def list_scenarios(store: Store, limit: int = 200) -> pd.DataFrame:
    """The most recently saved scenarios: scenario_id, name, created_at (UTC)."""
    return store.df("SELECT scenario_id, name, created_at FROM saved_scenario ORDER BY created_at DESC, name "
                    "LIMIT ?", [int(limit)])
