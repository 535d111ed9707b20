"""Scenario links (engine/presentation/share.py): compact, versioned, deterministic, and safe against anything in a URL."""
import base64
import hashlib
import json
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.catalog import load_catalog
from engine.scenario import ScenarioError
from engine.inputs import parse_scenario
from engine.presentation.share import FORMAT_VERSION, MAX_JSON_BYTES, MAX_TOKEN_CHARS, ZDICT_V1, PlannerOptions, decode, encode
from tests.engine.helpers import BASE, scenario

README_EXAMPLE = {
    "model": {"preset": "llama3.1-70b"},
    "training": {"seq_len": 8192, "global_batch_size": 1024, "total_tokens": 15.6e12, "precision": "bf16"},
    "cluster": {"accelerator": "H100-SXM5-80GB", "n_gpus": 1024},
    "layout": {"tp": 8, "pp": 4, "dp": 32, "micro_batch_size": 1, "virtual_stages": 5, "zero_stage": 1,
               "sequence_parallel": True, "recompute": "selective"},
}


def raw_token(payload, version: int = 1) -> str:
    """A token for any payload (what a hand-edited or foreign link may hold)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, ZDICT_V1)
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return f"{version}." + base64.urlsafe_b64encode(packer.compress(body) + packer.flush()).rstrip(b"=").decode()


def problems(token) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as err:
        decode(token)
    return err.value.problems


def test_round_trip_with_options():
    sc = parse_scenario(README_EXAMPLE)
    opts = PlannerOptions(objective="cost", deadline_days=90, vendor_weights={"cost": 0.7, "time": 0.3})
    assert decode(encode(sc, opts)) == (sc, opts)
    assert decode(encode(sc)) == (sc, PlannerOptions())


def test_token_is_compact_url_safe_and_versioned():
    token = encode(parse_scenario(README_EXAMPLE))
    assert token.startswith(f"{FORMAT_VERSION}.")
    assert len(token) < 130            # the README scenario: 293 bytes of JSON -> ~110 characters
    assert set(token[2:]) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_equal_scenarios_give_equal_tokens_whatever_the_key_order():
    a = parse_scenario(README_EXAMPLE)
    b = parse_scenario(json.loads(json.dumps(README_EXAMPLE, sort_keys=True)))
    assert encode(a) == encode(b)
    assert encode(a) != encode(parse_scenario(scenario(**{"cluster.n_gpus": 16, "layout.dp": 16})))


def test_the_format_1_dictionary_never_changes():
    # ZDICT_V1 is part of format 1: changing it breaks every link ever shared. A new dictionary needs format 2.
    assert hashlib.sha256(ZDICT_V1).hexdigest()[:16] == "7b7533ab4bf6fef2"


presets = st.sampled_from(sorted(load_catalog().models))
accelerators = st.sampled_from(sorted(a for a, acc in load_catalog().accelerators.items() if acc.peak("bf16")))


@settings(max_examples=60, deadline=None)
@given(preset=presets, accelerator=accelerators, n_gpus=st.integers(1, 100_000), seq=st.integers(1, 1 << 20),
       batch=st.integers(1, 1 << 20), tokens=st.floats(1, 1e16), pue=st.none() | st.floats(1.0, 3.0),
       objective=st.sampled_from(["time", "cost", "energy"]))
def test_any_valid_scenario_round_trips(preset, accelerator, n_gpus, seq, batch, tokens, pue, objective):
    data = {"model": {"preset": preset}, "training": {"seq_len": seq, "global_batch_size": batch, "total_tokens": tokens},
            "cluster": {"accelerator": accelerator, "n_gpus": n_gpus}}
    if pue is not None:
        data["site"] = {"pue": pue}
    sc = parse_scenario(data)
    opts = PlannerOptions(objective=objective)
    assert decode(encode(sc, opts)) == (sc, opts)


@pytest.mark.parametrize("token, words", [
    ("", "holds no scenario"),
    ("   ", "holds no scenario"),
    ("no-dot", "not a scenario link"),
    ("1.abc$%", "not a scenario link"),
    ("1.", "not a scenario link"),
    ("x.abcd", "not a scenario link"),
    ("2.abcd", "format 2"),
    ("0.abcd", "format 0"),
    ("1.a", "damaged"),                                   # not valid base64
    ("1.AAAA", "cut off"),                                # valid base64, an unfinished deflate stream
    ("1." + "A" * (MAX_TOKEN_CHARS + 1), "characters long"),
])
def test_malformed_tokens_are_refused_with_a_clear_message(token, words):
    found = problems(token)
    assert found[0][0] == "link"
    assert words in found[0][1], found


def test_a_cut_off_link_is_detected():
    token = encode(parse_scenario(README_EXAMPLE))
    assert any(w in problems(token[:-10])[0][1] for w in ("cut off", "damaged"))


def test_a_compression_bomb_is_stopped_at_the_size_cap():
    bomb = raw_token(b'{"scenario": {"x": "' + b"A" * (MAX_JSON_BYTES * 20) + b'"}}')
    assert len(bomb) < MAX_TOKEN_CHARS                     # small in the URL, huge once inflated
    assert "more than" in problems(bomb)[0][1]


@pytest.mark.parametrize("payload, words", [
    ([1, 2, 3], "not a planner scenario"),
    ({"scenario": "text"}, "not a planner scenario"),
    ({"scenario": BASE, "extra": 1}, "not a planner scenario"),
    (b"\xff\xfe not json", "not JSON"),
])
def test_tokens_with_foreign_content_are_refused(payload, words):
    assert words in problems(raw_token(payload))[0][1]


def test_a_scenario_the_catalog_no_longer_accepts_names_its_field():
    found = problems(raw_token({"scenario": scenario(**{"cluster.accelerator": "H900-Imaginary"})}))
    assert found[0][0] == "cluster.accelerator" and "unknown accelerator" in found[0][1]


def test_bad_options_name_the_option():
    found = problems(raw_token({"scenario": BASE, "options": {"objective": "speed", "deadline_days": -1}}))
    fields = {f for f, _ in found}
    assert fields == {"options.objective", "options.deadline_days"}


def test_injection_strings_are_just_invalid_links():
    for token in ("1.'); DROP TABLE saved_scenario; --", "<script>alert(1)</script>", "1.../../etc/passwd",
                  "1.%00%0d%0a"):
        assert problems(token)[0][0] == "link"
