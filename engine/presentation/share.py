"""Shareable scenario links: a scenario (and the planner's page options) as one compact, versioned URL token.

Token format 1: ``"1." + base64url(raw deflate(canonical JSON))`` without padding. The JSON is
``{"scenario": <fields that differ from their defaults>, "options": <non-default options>}`` with sorted keys and no
spaces, and the deflate stream uses a fixed preset dictionary of the schema's field names (ZDICT_V1), which shrinks a
typical link from ~290 to ~100 characters. ZDICT_V1 is part of the format: never edit it; a new dictionary needs a
new format version.

`decode` never trusts its input: it caps the token's length and the inflated size, and raises ScenarioError with a
message a planner can act on for a corrupt, oversized, other-version or invalid token.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
import zlib
from typing import Annotated, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine import json_input
from engine.economics.ranges import CHANCES
from engine.scenario import Scenario, ScenarioError
from engine.inputs import parse_scenario

FORMAT_VERSION = 1
MAX_TOKEN_CHARS = 8_000          # a browser address bar holds far more; proxies refuse request lines over ~8 KB
MAX_JSON_BYTES = 64_000          # inflated size cap (a scenario with a custom architecture is < 2 KB)
LINK_FIELD = "link"              # the field path ScenarioError names for problems with the token itself

ZDICT_V1 = (
    b'{"options":{"allow_span_nodes":true,"deadline_days":"gpu_hour_budget":"objective":"cost","energy","time",'
    b'"vendor_weights":{}},"scenario":{"cluster":{"accelerator":"H100-SXM5-80GB","gpus_per_node":8,'
    b'"inter_node_busbw_gbs":"inter_node_bw_gbs":"intra_node_busbw_gbs":"intra_node_bw_gbs":"matmul_efficiency":'
    b'"n_gpus":},"layout":{"cp":"dp":"ep":"micro_batch_size":"pp":"recompute":"selective","full",'
    b'"sequence_parallel":true,"tp":"virtual_stages":"zero_stage":},"model":{"dense_ffn_hidden_size":'
    b'"experts_per_token":"ffn_hidden_size":"ffn_type":"swiglu","hidden_size":"learned_position_embeddings":'
    b'"mla":{"kv_lora_rank":"q_lora_rank":"qk_nope_head_dim":"qk_rope_head_dim":"v_head_dim":},"n_dense_layers":'
    b'"n_experts":"n_heads":"n_kv_heads":"n_layers":"n_shared_experts":"tied_embeddings":true,"vocab_size":'
    b'"preset":"llama3.1-","training":{"attention":"standard","global_batch_size":"optimizer":"sgd",'
    b'"precision":"fp8","seq_len":"total_tokens":},"cost":{"basis":"on_prem","on_prem":{"depreciation_years":'
    b'"gpus_per_server":"network_fraction":"ops_usd_per_gpu_year":"power_usd_per_kwh":"server_capex_usd":'
    b'"storage_capex_usd_per_gpu":"utilisation":},"price_usd_per_gpu_hour":"pricing":"reserved_1y","spot",'
    b'"provider":"aws","gcp","azure","region":"us-east-1"},"reliability":{"checkpoint_interval_s":'
    b'"checkpoint_write_s":"mtbf_gpu_hours":"restart_s":"storage_write_gb_per_s":},"site":{"accelerator_power_w":'
    b'"carbon_intensity_g_per_kwh":"host_power_w_per_gpu":"market_based_g_per_kwh":"pue":"region":'
    b'"utilisation_factor":}},"options":{"budget_usd":"budget_warn_gpu_hours":'
)
_TOKEN_RE = re.compile(r"^(\d{1,4})\.([A-Za-z0-9_-]+)$")


class PlannerOptions(BaseModel):
    """Page options that are not part of the scenario but belong to what a shared link shows."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    objective: Literal["time", "cost", "energy"] = Field(
        default="time", description="what the layout search ranks by: wall-clock time, cost or energy")
    deadline_days: float | None = Field(default=None, gt=0, le=36_500,
                                        description="find the cheapest cluster that trains within this many days")
    gpu_hour_budget: float | None = Field(default=None, gt=0, le=1e12,
                                          description="find the fastest cluster within this many GPU-hours")
    allow_span_nodes: bool = Field(default=False, description="let tensor/context/expert-parallel groups span nodes")
    budget_usd: float | None = Field(default=None, gt=0, le=1e13, description="money budget of the budget planner")
    budget_warn_gpu_hours: float | None = Field(default=None, gt=0, le=1e12,
                                                description="warn when one run needs more GPU-hours than this")
    vendor_weights: dict[str, Annotated[float, Field(ge=0, le=100)]] | None = Field(
        default=None, max_length=20, description="decision-score weights of the vendor comparison (relative)")
    vendor: str = Field(default="any", min_length=2, max_length=40, pattern=r"^[A-Za-z0-9 ._-]+$",
                        description="which accelerators the answer may use: any, same (the scenario's) or one vendor")
    efficiency: Literal["tuned", "typical"] = Field(
        default="tuned", description="software stack the figures assume: tuned (the engine's figure) or typical "
                                     "(as published whole-run GPU-hours were)")
    batch_min: int | None = Field(default=None, ge=1, le=100_000_000,
                                  description="smallest global batch (sequences) the answer may use")
    batch_max: int | None = Field(default=None, ge=1, le=100_000_000,
                                  description="largest global batch (sequences) the answer may use")
    max_gpus: int | None = Field(default=None, ge=1, le=1 << 20,
                                 description="the answer uses at most this many accelerators (what one has)")
    confidence: float | None = Field(default=None, ge=CHANCES[0], le=CHANCES[1],
                                     description="meet the target with this chance, read off each option's range "
                                                 "(None: on the engine's own figures)")

    def question(self, global_batch_size: int) -> dict:
        """The question every page asks the engine (engine.planning.plan and engine.planning.vendor.compare take it
        as keywords): the deadline, money and GPU-hour budgets (each None when not set; all set are met together),
        at most max_gpus, with the chance `confidence` (None: on the engine's own figures), and the global batch free
        within batch_min-batch_max (None: fixed at the scenario's)."""
        free = self.batch_min is not None or self.batch_max is not None
        return {"deadline_days": self.deadline_days, "budget_usd": self.budget_usd, "gpu_hours": self.gpu_hour_budget,
                "max_gpus": self.max_gpus, "confidence": self.confidence,
                "batch_range": (self.batch_min or global_batch_size, self.batch_max or global_batch_size)
                if free else None}


class Shared(NamedTuple):
    scenario: Scenario
    options: PlannerOptions


def _canonical(scenario: Scenario, options: PlannerOptions | None) -> bytes:
    payload = {"scenario": scenario.model_dump(mode="json", exclude_defaults=True)}
    opts = (options or PlannerOptions()).model_dump(mode="json", exclude_defaults=True)
    if opts:
        payload["options"] = opts
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def encode(scenario: Scenario, options: PlannerOptions | None = None) -> str:
    """The compact token for a scenario and the page options (deterministic: equal inputs give equal tokens)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, ZDICT_V1)
    packed = packer.compress(_canonical(scenario, options)) + packer.flush()
    return f"{FORMAT_VERSION}." + base64.urlsafe_b64encode(packed).rstrip(b"=").decode()


def _link_error(message: str) -> ScenarioError:
    return ScenarioError([(LINK_FIELD, message)])


def _inflate(body: str) -> bytes:
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise _link_error("the link is damaged (its scenario part is not valid base64url); copy the whole address "
                          "again") from None
    unpacker = zlib.decompressobj(-15, ZDICT_V1)
    try:
        raw = unpacker.decompress(packed, MAX_JSON_BYTES + 1)
    except zlib.error:
        raise _link_error("the link is damaged (it does not unpack); copy the whole address again") from None
    if len(raw) > MAX_JSON_BYTES or unpacker.unconsumed_tail:
        raise _link_error(f"the link unpacks to more than {MAX_JSON_BYTES:,} bytes, far more than any scenario; "
                          "it was not made by this planner")
    if not unpacker.eof:
        raise _link_error("the link is cut off; copy the whole address again")
    return raw


def decode(token: str) -> Shared:
    """Scenario and options from a token; raises ScenarioError (field `link` for problems with the token itself,
    the scenario's own field paths when the scenario it holds is no longer valid)."""
    if not isinstance(token, str) or not token.strip():
        raise _link_error("the link holds no scenario")
    token = token.strip()
    if len(token) > MAX_TOKEN_CHARS:
        raise _link_error(f"the link is {len(token):,} characters long, over the {MAX_TOKEN_CHARS:,} a scenario "
                          "link can have; save long scenarios and share their short ?s= link instead")
    match = _TOKEN_RE.match(token)
    if match is None:
        raise _link_error("this is not a scenario link from this planner (expected a format number, a dot and "
                          "letters, digits, - or _)")
    version = int(match.group(1))
    if version != FORMAT_VERSION:
        raise _link_error(f"the link uses format {version}, and this version of the planner reads format "
                          f"{FORMAT_VERSION} only; ask the sender for a saved scenario (?s=) or its JSON file")
    try:
        payload = json_input.loads(_inflate(match.group(2)))
    except json_input.JsonInputError as err:
        raise _link_error(f"the link is damaged: its content is not JSON this planner writes ({err}); copy the "
                          "whole address again") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("scenario"), dict) \
            or set(payload) - {"scenario", "options"}:
        raise _link_error("the link's content is not a planner scenario")
    try:
        options = PlannerOptions.model_validate(payload.get("options") or {})
    except ValidationError as err:
        problems = [("options." + ".".join(str(x) for x in e["loc"]), e["msg"])
                    for e in err.errors(include_url=False, include_input=False)]
        raise ScenarioError(problems) from None
    return Shared(parse_scenario(payload["scenario"]), options)
