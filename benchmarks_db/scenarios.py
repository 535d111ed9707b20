"""Saved scenarios: a scenario and the page options it was saved with (the question the Scenario page answers)
stored under a short content-addressed id, with a name, the UTC time it was first saved, its owner and who it is
listed to. Links take the form ?s=<id>; anyone holding a link can open it.

The owner is the signed-on user the reverse proxy names (APP_IDENTITY_HEADER), None without one. The owner is part
of the id, so two users saving the same scenario get two rows, each theirs; the same user saving it twice adds
nothing. 'shared' scenarios are listed to everybody, 'private' ones only to their owner (the link still opens them);
scenarios without an owner are always shared, and only an owner can delete a scenario or change its visibility.

    saved = save_scenario(store, scenario, "70B on 1,024 H100", options, owner="ann@example.com")
    opened = load_scenario(store, saved.scenario_id)   # Opened(scenario, options, saved); ScenarioError when unusable
    list_scenarios(store, viewer="ann@example.com")     # Ann's own and everybody's shared ones
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import pandas as pd
from pydantic import ValidationError

from benchmarks_db import audit
from benchmarks_db.audit import VISIBILITIES
from benchmarks_db.store import Store, utc_now
from engine.inputs import parse_scenario
from engine.presentation.share import PlannerOptions
from engine.scenario import Scenario, ScenarioError

ID_CHARS = 10                         # base32: 50 bits, collisions negligible for any realistic number of saves
ID_RE = re.compile(r"^[a-z2-7]{%d}$" % ID_CHARS)
MAX_NAME_CHARS = 120
MAX_OWNER_CHARS = 254                 # the longest e-mail address (RFC 5321 path limit)
LINK_FIELD = "saved scenario"         # the field path ScenarioError names for an unusable id


@dataclass(frozen=True)
class SavedScenario:
    scenario_id: str
    name: str
    created_at: datetime              # UTC
    new: bool                         # False when this scenario had been saved before (under its first name)
    owner: str | None = None          # the signed-on user who saved it; None: saved without one
    visibility: str = "shared"        # one of VISIBILITIES


class Opened(NamedTuple):
    scenario: Scenario
    options: PlannerOptions
    saved: SavedScenario


def canonical_json(sc: Scenario) -> str:
    """The scenario's identity: its non-default fields, sorted, without spaces."""
    return json.dumps(sc.model_dump(mode="json", exclude_defaults=True), sort_keys=True, separators=(",", ":"))


def options_json(options: PlannerOptions | None) -> str:
    """The page options' identity, like canonical_json: '{}' for the defaults."""
    return json.dumps((options or PlannerOptions()).model_dump(mode="json", exclude_defaults=True), sort_keys=True,
                      separators=(",", ":"))


def scenario_id(sc: Scenario, options: PlannerOptions | None = None, owner: str | None = None) -> str:
    """Short id of a saved scenario: the first 10 base32 characters of the SHA-256 of its canonical JSON, followed
    by a line with the non-default options and one with the owner where there are (so a scenario saved before
    options and owners were stored keeps its id)."""
    text = canonical_json(sc)
    if (opts := options_json(options)) != "{}":
        text += "\noptions " + opts
    if owner is not None:
        text += "\nowner " + owner
    digest = hashlib.sha256(text.encode()).digest()
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


def clean_owner(owner: str | None) -> str | None:
    """The owner as stored (None when blank); ScenarioError for one no reverse proxy would send."""
    if owner is None:
        return None
    if not isinstance(owner, str):
        raise ScenarioError([("owner", "the signed-on user is named by text")])
    text = owner.strip()
    if len(text) > MAX_OWNER_CHARS or any(not ch.isprintable() for ch in text):
        raise ScenarioError([("owner", f"the signed-on user's name from the reverse proxy ('{text[:40]}') is not "
                                       f"plain text of at most {MAX_OWNER_CHARS} characters; ask the operator to "
                                       "check APP_IDENTITY_HEADER")])
    return text or None


def _visibility(visibility: str, owner: str | None) -> str:
    if visibility not in VISIBILITIES:
        raise ScenarioError([("visibility", f"'{str(visibility)[:40]}' is not a visibility: shared (listed to "
                                            "everybody) or private (listed to you only)")])
    if visibility == "private" and owner is None:
        raise ScenarioError([("visibility", "only a signed-on user's scenario can be private; this planner names "
                                            "no user (APP_IDENTITY_HEADER), so its scenarios are listed to everybody")])
    return visibility


def _checked_id(sid: str) -> str:
    if not isinstance(sid, str) or not ID_RE.match(sid.strip().lower()):
        raise ScenarioError([(LINK_FIELD, f"'{str(sid)[:40]}' is not a saved-scenario id (ids are {ID_CHARS} "
                                          "letters and digits, like ?s=k3j5x2m7qa); check the link")])
    return sid.strip().lower()


def _not_saved(sid: str) -> ScenarioError:
    return ScenarioError([(LINK_FIELD, f"no scenario is saved under id {sid} in this planner's store; the link may "
                                       "come from another installation, or the store was reset")])


def save_scenario(store: Store, sc: Scenario, name: str, options: PlannerOptions | None = None,
                  owner: str | None = None, visibility: str = "shared") -> SavedScenario:
    """Store the scenario with its options for its owner, and its audit row (one transaction); one saved before by
    the same owner keeps its first name, time and visibility (nothing is written)."""
    text, who = clean_name(name), clean_owner(owner)
    visibility = _visibility(visibility, who)
    sid = scenario_id(sc, options, who)
    with store.transaction() as cur:
        before = cur.execute("SELECT name, created_at, visibility FROM saved_scenario WHERE scenario_id = ?",
                             [sid]).fetchall()
        if before:
            return SavedScenario(sid, before[0][0], before[0][1], new=False, owner=who, visibility=before[0][2])
        created_at = utc_now()
        cur.execute("INSERT INTO saved_scenario (scenario_id, name, created_at, scenario_json, options_json, owner, "
                    "visibility) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [sid, text, created_at, canonical_json(sc), options_json(options), who, visibility])
        audit.record(cur, who, "save_scenario", "saved_scenario", sid, name=text, visibility=visibility)
    return SavedScenario(sid, text, created_at, new=True, owner=who, visibility=visibility)


def load_scenario(store: Store, sid: str) -> Opened:
    """The saved scenario, its options and its record, whoever asks (a link is meant to be shared); ScenarioError for
    a malformed or unknown id, or a scenario or options the current catalog and schema no longer accept."""
    sid = _checked_id(sid)
    found = store.rows("SELECT name, created_at, scenario_json, options_json, owner, visibility FROM saved_scenario "
                       "WHERE scenario_id = ?", [sid])
    if not found:
        raise _not_saved(sid)
    name, created_at, body, opts, owner, visibility = found[0]
    try:
        sc = parse_scenario(body)
    except ScenarioError as err:
        raise ScenarioError([(LINK_FIELD, f"the scenario saved as '{name}' no longer validates with the current "
                                          "catalog: " + "; ".join(f"{f}: {m}" for f, m in err.problems))]) from None
    try:
        options = PlannerOptions.model_validate_json(opts)
    except ValidationError as err:
        raise ScenarioError([(LINK_FIELD, f"the question saved with '{name}' no longer validates: " + "; ".join(
            f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}"
            for e in err.errors(include_url=False, include_input=False)))]) from None
    return Opened(sc, options, SavedScenario(sid, name, created_at, new=False, owner=owner, visibility=visibility))


def list_scenarios(store: Store, viewer: str | None = None, limit: int = 200) -> pd.DataFrame:
    """The most recently saved scenarios listed to `viewer` (the signed-on user, None without one): the shared ones
    and the viewer's own; columns scenario_id, name, created_at (UTC), owner, visibility."""
    return store.df("SELECT scenario_id, name, created_at, owner, visibility FROM saved_scenario "
                    "WHERE visibility = 'shared' OR owner = ? ORDER BY created_at DESC, name LIMIT ?",
                    [viewer or None, int(limit)])


def _owned(cur, sid: str, owner: str | None, doing: str) -> tuple[str, str, str]:
    """The id, name and visibility of a scenario `owner` may change; ScenarioError when there is no such scenario or
    it is not theirs."""
    sid, who = _checked_id(sid), clean_owner(owner)
    found = cur.execute("SELECT name, owner, visibility FROM saved_scenario WHERE scenario_id = ?", [sid]).fetchall()
    if not found:
        raise _not_saved(sid)
    name, saved_by, visibility = found[0]
    if who is None or saved_by != who:
        whose = "was saved without a signed-on user" if saved_by is None else "belongs to another user"
        raise ScenarioError([(LINK_FIELD, f"'{name}' {whose}: only its owner can {doing}")])
    return sid, name, visibility


def set_visibility(store: Store, sid: str, owner: str | None, visibility: str) -> None:
    """List the owner's scenario to everybody ('shared') or to its owner only ('private'), with its audit row."""
    visibility = _visibility(visibility, clean_owner(owner))
    with store.transaction() as cur:
        sid, name, before = _owned(cur, sid, owner, "change who it is listed to")
        if before == visibility:
            return
        cur.execute("UPDATE saved_scenario SET visibility = ? WHERE scenario_id = ?", [visibility, sid])
        audit.record(cur, clean_owner(owner), "share" if visibility == "shared" else "unshare", "saved_scenario",
                     sid, name=name, visibility=visibility)


def delete_scenario(store: Store, sid: str, owner: str | None) -> None:
    """Delete the owner's scenario (its link stops working), with its audit row."""
    with store.transaction() as cur:
        sid, name, visibility = _owned(cur, sid, owner, "delete it")
        cur.execute("DELETE FROM saved_scenario WHERE scenario_id = ?", [sid])
        audit.record(cur, clean_owner(owner), "delete_scenario", "saved_scenario", sid, name=name,
                     visibility=visibility)
