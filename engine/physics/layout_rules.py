"""The rules a parallel layout must satisfy, each stated once as data (like scikit-learn's declared parameter
constraints): the layout columns it reads, a vectorised predicate (True where the rule holds, over numpy arrays of
any length, so one layout and the search's millions of candidates are checked by the same expression), the
scenario field a person sees it at, the message with what would be valid, and, for a setting that only applies
with another one, the reset an edit elsewhere applies.

Everything that decides whether a layout is valid derives from RULES: the scenario's validation
(engine.scenario.layout_problems), the layout search's candidate filters (engine.planning.search), the Memory page's
choices and the edit's resets (engine.presentation.edit).

Columns are those of engine.physics.layouts.Layouts: tp pp dp cp ep mbs v zero sp rc etp first last reshard shard
tpo off (index into OFFLOAD) a2ao, with the optional fields filled (expert tp = tp, first/last = UNSET for the even split, shard group = dp*cp).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import SimpleNamespace
from typing import Callable

import numpy as np

from engine.physics.model import ModelArch, shape_of
from engine.physics.schedule import SplitError, split_options, stage_layers

RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
OFFLOAD = ("none", "optimizer", "optimizer_and_params")
UNSET = -1            # first/last stage layers not given: even split

# column -> scenario layout field (engine.scenario.Layout)
FIELDS = {"tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep", "mbs": "micro_batch_size", "v": "virtual_stages",
          "zero": "zero_stage", "sp": "sequence_parallel", "rc": "recompute", "etp": "expert_tp",
          "first": "first_stage_layers", "last": "last_stage_layers", "reshard": "reshard_after_forward",
          "shard": "shard_group", "tpo": "tp_comm_overlap", "off": "offload", "a2ao": "moe_a2a_overlap"}
COLUMN = {field: column for column, field in FIELDS.items()}
FLAGS = ("sp", "reshard", "tpo", "a2ao")


@lru_cache(maxsize=65536)
def divisors(n: int) -> list[int]:
    """All divisors of n, ascending (pairs up to sqrt(n), so a batch of 10^8 costs 10^4 steps)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def listing(values) -> str:
    """Values for a message: at most 40, then '...'."""
    values = list(values)
    return ", ".join(str(v) for v in values[:40]) + (" ..." if len(values) > 40 else "")


def row(layout) -> dict[str, int | bool]:
    """One layout (anything with the scenario Layout's fields) as the rules' columns, optional fields filled."""
    unset = lambda value: UNSET if value is None else value
    return {"tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "cp": layout.cp, "ep": layout.ep,
            "mbs": layout.micro_batch_size, "v": layout.virtual_stages, "zero": layout.zero_stage,
            "sp": layout.sequence_parallel, "rc": RECOMPUTE.index(layout.recompute), "etp": layout.expert_tp or layout.tp,
            "first": unset(layout.first_stage_layers), "last": unset(layout.last_stage_layers),
            "reshard": layout.reshard_after_forward, "shard": layout.shard_group or layout.dp * layout.cp,
            "tpo": layout.tp_comm_overlap, "off": OFFLOAD.index(layout.offload), "a2ao": layout.moe_a2a_overlap}


def layout_fields(r: dict) -> dict:
    """The inverse of row: scenario layout fields, None where an optional field takes its default."""
    tp, dp, cp = int(r["tp"]), int(r["dp"]), int(r["cp"])
    optional = lambda value: None if int(value) == UNSET else int(value)
    return {"tp": tp, "pp": int(r["pp"]), "dp": dp, "cp": cp, "ep": int(r["ep"]), "micro_batch_size": int(r["mbs"]),
            "virtual_stages": int(r["v"]), "zero_stage": int(r["zero"]), "sequence_parallel": bool(r["sp"]),
            "recompute": RECOMPUTE[int(r["rc"])], "expert_tp": None if int(r["etp"]) == tp else int(r["etp"]),
            "first_stage_layers": optional(r["first"]), "last_stage_layers": optional(r["last"]),
            "reshard_after_forward": bool(r["reshard"]),
            "shard_group": None if int(r["shard"]) == dp * cp else int(r["shard"]), "tp_comm_overlap": bool(r["tpo"]),
            "offload": OFFLOAD[int(r.get("off", 0))], "moe_a2a_overlap": bool(r.get("a2ao", False))}


def columns(**cols) -> SimpleNamespace:
    """Columns as equal-length numpy arrays (scalars broadcast; the flags sp, reshard, tpo as bool), for the
    predicates."""
    arrays = {k: np.atleast_1d(np.asarray(v, dtype=bool if k in FLAGS else np.int64)) for k, v in cols.items()}
    n = max((len(a) for a in arrays.values()), default=1)
    if any(len(a) != n for a in arrays.values()):
        arrays = dict(zip(arrays, np.broadcast_arrays(*arrays.values())))
    return SimpleNamespace(**arrays)


@dataclass(frozen=True)
class Facts:
    """What the rules read from the scenario besides the layout."""

    n_gpus: int
    n_layers: int
    n_heads: int
    tp_widths: tuple[tuple[str, int, str], ...]   # (model field, width, what) that tensor parallelism splits
    n_experts: int
    expert_width: int                              # ffn_hidden_size of one routed expert
    global_batch: int
    seq_len: int
    zero_stages: tuple[int, ...] = ZERO_STAGES     # the software stack's data-parallel sharding modes
    # its name and its own words for them, for the message only: facts that differ in nothing else are equal (the
    # search's enumeration is cached per facts, shared by every stack with the same stages)
    stack: str = field(default="the stack", compare=False)
    zero_note: str = field(default="", compare=False)

    @property
    def moe(self) -> bool:
        return self.n_experts > 1

    def any_size(self) -> "Facts":
        """These facts for every cluster size (n_gpus ANY_SIZE): what the rules on a layout's other dimensions read,
        so the search's per-dimension choices are shared by every size it tries; a rule that reads the size
        (reads_size) refuses them (choices)."""
        return replace(self, n_gpus=ANY_SIZE)


ANY_SIZE = 0          # Facts.n_gpus of facts for no size in particular


def facts_of(arch: ModelArch, training, n_gpus: int, stack=None) -> Facts:
    """The scenario's side of the rules. Tensor parallelism splits the attention heads, the key/value heads, the
    dense MLP where the model has dense layers (all of a dense model; the leading or interleaved dense layers of an
    MoE model) and the shared experts; the routed experts follow expert_tp. stack (engine.frameworks.Stack, None:
    any) gives the ZeRO stages the software stack offers."""
    shape = shape_of(arch)
    widths = [("n_heads", arch.n_heads, "attention heads"), ("n_kv_heads", arch.kv_heads, "key/value heads")]
    if shape.n_dense_layers:
        widths.append(("dense_ffn_hidden_size" if arch.is_moe else "ffn_hidden_size", shape.dense_ffn, "MLP width"))
    if shape.shared_ffn:
        widths.append(("n_shared_experts*shared_expert_ffn_hidden_size", shape.shared_ffn, "shared-expert width"))
    return Facts(n_gpus=n_gpus, n_layers=arch.n_layers, n_heads=arch.n_heads, tp_widths=tuple(widths),
                 n_experts=arch.n_experts, expert_width=arch.ffn_hidden_size,
                 global_batch=training.global_batch_size, seq_len=training.seq_len,
                 **({} if stack is None else {"zero_stages": tuple(stack.zero_stages), "stack": stack.short_name,
                                              "zero_note": stack.zero_stages_note}))


@dataclass(frozen=True)
class LayoutRule:
    """One rule. holds(facts, cols) -> bool array; where(facts, r) the layout field a person sees it at and
    message(facts, r) what is wrong and what would be valid, for one layout r (a dict of columns); reason: the short
    form the search counts rejections under. reset(facts, cols, broken) -> {column: array}: the setting that
    follows when an edit of another field breaks the rule (None: the edit is refused), with the note that says so."""

    name: str
    reads: tuple[str, ...]
    holds: Callable
    where: Callable
    message: Callable
    reason: str
    reset: Callable | None = None
    resets: tuple[str, ...] = ()
    note: Callable | None = None
    reads_size: bool = False       # holds reads facts.n_gpus (not answerable for Facts.any_size)


def _valid(rule: LayoutRule, facts: Facts, r: dict, column: str, candidates) -> list[int]:
    """The candidate values of one column this rule allows, the layout's other columns fixed (its suggestion)."""
    candidates = list(candidates)
    if not candidates:
        return []
    ok = rule.holds(facts, columns(**{**r, column: np.array(candidates)}))
    return [c for c, good in zip(candidates, ok) if good]


# ---- tensor parallelism ---------------------------------------------------------------------------------------

def _widths_hold(f: Facts, L) -> np.ndarray:
    ok = np.ones(len(L.tp), bool)
    for _, width, _ in f.tp_widths:
        ok &= width % L.tp == 0
    return ok


def _widths_message(f: Facts, r: dict) -> str:
    field, value, what = next(w for w in f.tp_widths if w[1] % r["tp"])
    return (f"tp={r['tp']} does not divide {field}={value} ({what}); valid tp: "
            f"{listing(_valid(TP_WIDTHS, f, r, 'tp', divisors(f.n_heads)))}")


TP_WIDTHS = LayoutRule(
    "tp_widths", ("tp",), _widths_hold, lambda f, r: "layout.tp", _widths_message,
    "heads, KV heads or MLP width not divisible by tp")


# ---- the cluster ----------------------------------------------------------------------------------------------

def _gpus_message(f: Facts, r: dict) -> str:
    rest = r["tp"] * r["pp"] * r["cp"]
    hint = f"; with tp={r['tp']}, pp={r['pp']}, cp={r['cp']} use dp={f.n_gpus // rest}" if f.n_gpus % rest == 0 else ""
    return (f"tp*pp*dp*cp = {r['tp']}*{r['pp']}*{r['dp']}*{r['cp']} = {rest * r['dp']} but cluster.n_gpus = "
            f"{f.n_gpus}{hint}")


GPUS = LayoutRule(
    "gpus", ("tp", "pp", "dp", "cp"), lambda f, L: L.tp * L.pp * L.dp * L.cp == f.n_gpus,
    lambda f, r: "layout.dp", _gpus_message, "tp*pp*dp*cp != n_gpus", reads_size=True)


# ---- the pipeline split (engine.physics.schedule.stage_layers is the rule) ---------------------------------------

@lru_cache(maxsize=65536)
def split_error(n_layers: int, pp: int, v: int, first: int, last: int) -> str | None:
    """Why stage_layers refuses this split (first/last UNSET for even), None where it builds."""
    try:
        stage_layers(n_layers, pp, v, None if first == UNSET else first, None if last == UNSET else last)
        return None
    except SplitError as err:
        return str(err)


def _split_holds(f: Facts, L) -> np.ndarray:
    keys = np.stack([L.pp, L.v, L.first, L.last], axis=1).astype(np.int64)
    if len(keys) <= 64:                                  # one layout, or a page's choices: no sort needed
        return np.array([split_error(f.n_layers, *k) is None for k in keys.tolist()], dtype=bool).reshape(-1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    ok = np.array([split_error(f.n_layers, *(int(x) for x in k)) is None for k in uniq], dtype=bool)
    return ok[inverse.reshape(-1)]


def _split_where(f: Facts, r: dict) -> str:
    err = split_error(f.n_layers, r["pp"], r["v"], r["first"], r["last"])
    return ("layout.virtual_stages" if r["v"] > 1 and "virtual" in err else
            "layout.first_stage_layers" if r["first"] != UNSET or r["last"] != UNSET else "layout.pp")


def _split_message(f: Facts, r: dict) -> str:
    hint = ""
    if r["first"] == UNSET and r["last"] == UNSET and r["pp"] > 1:
        uneven = [(a, b) for a, b in split_options(f.n_layers, r["pp"]) if a is not None]
        hint = f"; even splits: pp*virtual_stages one of {listing(divisors(f.n_layers))}"
        if uneven:
            hint += f"; or split unevenly, e.g. first_stage_layers={uneven[0][0]}, last_stage_layers={uneven[0][1]}"
    return f"n_layers={f.n_layers}: {split_error(f.n_layers, r['pp'], r['v'], r['first'], r['last'])}{hint}"


def virtual_stage_options(n_layers: int, pp: int, first: int | None = None, last: int | None = None) -> list[int]:
    """The interleaving degrees the split rule accepts for this split ([] when the split itself cannot be built)."""
    f, l_ = (UNSET if x is None else x for x in (first, last))
    return [v for v in range(1, n_layers + 1) if split_error(n_layers, pp, v, f, l_) is None]


def split_choices(n_layers: int, pp: int) -> list[tuple[int, int]]:
    """(first, last) splits worth trying for pp stages, UNSET for even (schedule.split_options)."""
    return [(UNSET if a is None else a, UNSET if b is None else b) for a, b in split_options(n_layers, pp)]


def _split_reset(f: Facts, L, broken: np.ndarray) -> dict:
    """A new number of stages takes the first split that builds (the even one where the layers divide) with the
    interleaving kept, else without interleaving."""
    first, last, v = L.first.copy(), L.last.copy(), L.v.copy()
    for i in np.flatnonzero(broken):
        splits = split_choices(f.n_layers, int(L.pp[i]))
        for degree in (int(L.v[i]), 1):
            found = next(((a, b) for a, b in splits if split_error(f.n_layers, int(L.pp[i]), degree, a, b) is None), None)
            if found:
                first[i], last[i], v[i] = found[0], found[1], degree
                break
    return {"first": first, "last": last, "v": v}


def _split_note(f: Facts, before: dict, after: dict) -> str:
    notes = []
    if (after["first"], after["last"]) != (before["first"], before["last"]):
        split = ("even" if after["first"] == UNSET else
                 f"{after['first']} layers on the first stage and {after['last']} on the last")
        notes.append(f"Pipeline split set to {split} for the new number of stages.")
    if after["v"] != before["v"]:
        why = split_error(f.n_layers, after["pp"], before["v"], after["first"], after["last"])
        notes.append(f"Virtual stages set to {after['v']}: {why}.")
    return " ".join(notes)


SPLIT = LayoutRule(
    "split", ("pp", "v", "first", "last"), _split_holds, _split_where, _split_message,
    "layers do not split into the pipeline stages", reset=_split_reset, resets=("first", "last", "v"), note=_split_note)


# ---- the batch --------------------------------------------------------------------------------------------------

def _batch_message(f: Facts, r: dict) -> str:
    dp = r["dp"]
    valid = _valid(BATCH, f, r, "mbs", divisors(f.global_batch)) if f.global_batch % dp == 0 else []
    hint = (f"; with dp={dp} valid micro_batch_size: {listing(valid)}" if valid else
            f"; dp={dp} does not divide the global batch at all")
    return (f"global_batch_size={f.global_batch} is not divisible by dp*micro_batch_size = {dp}*{r['mbs']}{hint}")


BATCH = LayoutRule(
    "batch", ("dp", "mbs"), lambda f, L: f.global_batch % (L.dp * L.mbs) == 0,
    lambda f, r: "layout.micro_batch_size", _batch_message, "global batch not divisible by dp*micro_batch")


# ---- experts (Megatron-LM MoE parallel folding) -------------------------------------------------------------------

EXPERTS_NEED_MOE = LayoutRule(
    "experts_need_moe", ("ep", "etp", "tp"),
    lambda f, L: np.full(len(L.ep), f.moe) | ((L.ep == 1) & (L.etp == L.tp)),
    lambda f, r: "layout.ep" if r["ep"] > 1 else "layout.expert_tp",
    lambda f, r: "expert parallelism needs an MoE model (n_experts > 1)",
    "expert parallelism needs an MoE model")

EP_DIVIDES_EXPERTS = LayoutRule(
    "ep_divides_experts", ("ep",), lambda f, L: ~np.full(len(L.ep), f.moe) | (f.n_experts % L.ep == 0),
    lambda f, r: "layout.ep",
    lambda f, r: f"ep={r['ep']} does not divide n_experts={f.n_experts}; valid ep: {listing(divisors(f.n_experts))}",
    "experts not divisible by ep")

EXPERT_TP_WIDTH = LayoutRule(
    "expert_tp_width", ("etp",), lambda f, L: ~np.full(len(L.etp), f.moe) | (f.expert_width % L.etp == 0),
    lambda f, r: "layout.expert_tp",
    lambda f, r: (f"expert_tp={r['etp']} does not divide the expert width ffn_hidden_size={f.expert_width}"
                  + ("" if r["etp"] != r["tp"] else " (expert_tp defaults to tp)")
                  + f"; valid expert_tp: "
                    f"{listing(_valid(EXPERT_TP_WIDTH, f, r, 'etp', divisors(r['tp'] * r['cp'] * r['dp'])))}"),
    "expert width not divisible by expert_tp")

EXPERT_GROUPS_FOLD = LayoutRule(
    "expert_groups_fold", ("tp", "cp", "dp", "ep", "etp"),
    lambda f, L: ~np.full(len(L.ep), f.moe) | ((L.tp * L.cp * L.dp) % (L.ep * L.etp) == 0),
    lambda f, r: "layout.ep",
    lambda f, r: (f"ep*expert_tp = {r['ep']}*{r['etp']} must divide tp*cp*dp = {r['tp'] * r['cp'] * r['dp']} "
                  "(expert groups fold over the tensor-, context- and data-parallel ranks)"),
    "ep*expert_tp does not divide tp*cp*dp")


# ---- ZeRO ---------------------------------------------------------------------------------------------------------

def _whole_group(f: Facts, L, broken: np.ndarray) -> dict:
    return {"shard": np.where(broken, L.dp * L.cp, L.shard)}


SHARD_NEEDS_ZERO = LayoutRule(
    "shard_needs_zero", ("shard", "dp", "cp", "zero"), lambda f, L: (L.shard == L.dp * L.cp) | (L.zero > 0),
    lambda f, r: "layout.shard_group", lambda f, r: "a shard group needs zero_stage 1, 2 or 3",
    "a shard group needs ZeRO", reset=_whole_group, resets=("shard",),
    note=lambda f, before, after: "Shard groups (HSDP) removed: ZeRO-0 shards nothing.")

SHARD_DIVIDES = LayoutRule(
    "shard_divides", ("shard", "dp", "cp"), lambda f, L: (L.dp * L.cp) % L.shard == 0,
    lambda f, r: "layout.shard_group",
    lambda f, r: (f"shard_group={r['shard']} must divide dp*cp = {r['dp'] * r['cp']}; valid: "
                  f"{listing(divisors(r['dp'] * r['cp']))}"),
    "shard group does not divide dp*cp", reset=_whole_group, resets=("shard",),
    note=lambda f, before, after: "Shard groups (HSDP) reset to every data-parallel copy for the new layout.")

RESHARD_ZERO3 = LayoutRule(
    "reshard_zero3", ("reshard", "zero"), lambda f, L: L.reshard | (L.zero == 3),
    lambda f, r: "layout.reshard_after_forward",
    lambda f, r: "keeping gathered weights (false) applies to zero_stage 3 only",
    "kept weights need ZeRO-3", reset=lambda f, L, broken: {"reshard": L.reshard | broken}, resets=("reshard",),
    note=lambda f, before, after: ("Gathered weights are freed after the forward pass again: keeping them applies "
                                   "to ZeRO-3 only."))


def _stack_zero_reset(f: Facts, L, broken: np.ndarray) -> dict:
    """A stage the stack lacks becomes the next one it offers that shards at least as much (else its last)."""
    offered = np.asarray(f.zero_stages)
    above = offered[np.searchsorted(offered, L.zero).clip(max=len(offered) - 1)]
    return {"zero": np.where(broken, np.where(above >= L.zero, above, offered[-1]), L.zero)}


STACK_ZERO = LayoutRule(
    "stack_zero", ("zero",), lambda f, L: np.isin(L.zero, f.zero_stages), lambda f, r: "layout.zero_stage",
    lambda f, r: (f"{f.stack} has no zero_stage {r['zero']}; it offers zero_stage {listing(f.zero_stages)}"
                  + (f" ({f.zero_note})" if f.zero_note else "")),
    "the software stack has no such ZeRO stage", reset=_stack_zero_reset, resets=("zero",),
    note=lambda f, before, after: (f"ZeRO stage set to {after['zero']}: {f.stack} has no ZeRO-{before['zero']} "
                                   f"(it offers {listing(f.zero_stages)})."))


# ---- offload (ZeRO-Offload / ZeRO-Infinity) -------------------------------------------------------------------------

def _offload_holds(f: Facts, L) -> np.ndarray:
    return (L.off == 0) | ((L.off == 1) & (L.zero >= 1)) | ((L.off == 2) & (L.zero == 3))


def _offload_reset(f: Facts, L, broken: np.ndarray) -> dict:
    """A ZeRO stage that no longer allows the offload keeps what it still allows: the optimizer with ZeRO 1-2."""
    return {"off": np.where(broken, np.where(L.zero >= 1, 1, 0), L.off)}


OFFLOAD_ZERO = LayoutRule(
    "offload_zero", ("off", "zero"), _offload_holds, lambda f, r: "layout.offload",
    lambda f, r: (f"offload={OFFLOAD[r['off']]} needs zero_stage {'3' if r['off'] == 2 else '1, 2 or 3'} "
                  f"(zero_stage is {r['zero']}): DeepSpeed offloads the optimizer with ZeRO 1-3 (offload_optimizer) "
                  "and the parameters with ZeRO-3 only (offload_param)"),
    "offload needs a ZeRO stage that shards what it moves", reset=_offload_reset, resets=("off",),
    note=lambda f, before, after: (f"Offload set to {OFFLOAD[after['off']]}: with ZeRO-{after['zero']} DeepSpeed "
                                   "cannot offload " + ("the parameters." if after["off"] == 1 else "anything.")))


# ---- tensor-parallel overlap and context parallelism --------------------------------------------------------------

TP_OVERLAP = LayoutRule(
    "tp_overlap", ("tpo", "tp", "sp"), lambda f, L: ~L.tpo | ((L.tp > 1) & L.sp),
    lambda f, r: "layout.tp_comm_overlap", lambda f, r: "tensor-parallel overlap needs tp > 1 and sequence_parallel",
    "tensor-parallel overlap needs tp > 1 with sequence parallelism",
    reset=lambda f, L, broken: {"tpo": L.tpo & ~broken}, resets=("tpo",),
    note=lambda f, before, after: "Tensor-parallel overlap turned off: it needs TP above 1 and sequence parallel.")

def a2a_overlap_allowed(ep, pp, v) -> np.ndarray:
    """Where Megatron-Core can overlap the MoE all-to-all with another micro-batch's compute: expert parallelism, and
    either no pipelining (combined_1f1b_schedule_for_no_pipelining) or the interleaved schedule, whose forward and
    backward chunks of two micro-batches it pairs (megatron/core/pipeline_parallel/combined_1f1b.py)."""
    return (np.asarray(ep) > 1) & ((np.asarray(pp) == 1) | (np.asarray(v) > 1))


A2A_OVERLAP = LayoutRule(
    "a2a_overlap", ("a2ao", "ep", "pp", "v"), lambda f, L: ~L.a2ao | a2a_overlap_allowed(L.ep, L.pp, L.v),
    lambda f, r: "layout.moe_a2a_overlap",
    lambda f, r: (f"the all-to-all overlap needs expert parallelism (ep > 1, ep is {r['ep']}) and, with pp > 1, "
                  f"interleaved stages (virtual_stages > 1, pp is {r['pp']}, virtual_stages {r['v']})"),
    "all-to-all overlap needs ep > 1 and no pipeline or an interleaved one",
    reset=lambda f, L, broken: {"a2ao": L.a2ao & ~broken}, resets=("a2ao",),
    note=lambda f, before, after: ("All-to-all overlap turned off: it needs expert parallelism and, with pipelining, "
                                   "interleaved stages."))

CP_SEQUENCE = LayoutRule(
    "cp_sequence", ("cp",), lambda f, L: f.seq_len % L.cp == 0, lambda f, r: "layout.cp",
    lambda f, r: f"cp={r['cp']} does not divide seq_len={f.seq_len}; valid cp: {listing(divisors(f.seq_len)[:20])}",
    "sequence not divisible by cp")


RULES: tuple[LayoutRule, ...] = (GPUS, TP_WIDTHS, SPLIT, BATCH, EXPERTS_NEED_MOE, EP_DIVIDES_EXPERTS, EXPERT_TP_WIDTH,
                                 EXPERT_GROUPS_FOLD, STACK_ZERO, SHARD_NEEDS_ZERO, SHARD_DIVIDES, RESHARD_ZERO3,
                                 OFFLOAD_ZERO, TP_OVERLAP, A2A_OVERLAP, CP_SEQUENCE)


def reading(cols) -> tuple[LayoutRule, ...]:
    """The rules that read any of these columns."""
    return tuple(r for r in RULES if set(r.reads) & set(cols))


def within(cols) -> tuple[LayoutRule, ...]:
    """The rules that read nothing but these columns."""
    return tuple(r for r in RULES if set(r.reads) <= set(cols))


def allowed(facts: Facts, cols, rules=RULES) -> np.ndarray:
    """True where every one of the rules holds (cols: a namespace of equal-length arrays, see columns())."""
    ok = np.ones(len(next(iter(vars(cols).values()))), bool) if vars(cols) else np.ones(1, bool)
    for rule in rules:
        ok &= rule.holds(facts, cols)
    return ok


def choices(facts: Facts, fixed: dict, **varying) -> np.ndarray:
    """Indices of the candidate rows (varying: columns of equal length) that every rule reading a varying column
    allows with the fixed columns held; the search filters each dimension with this, the Memory page its choices."""
    rules, read = _rules_on(frozenset(fixed), frozenset(varying))
    if facts.n_gpus == ANY_SIZE and any(r.reads_size for r in rules):
        raise ValueError(f"the rules on {sorted(varying)} read the cluster size: ask with the scenario's facts")
    given = {**fixed, **varying}
    return np.flatnonzero(allowed(facts, columns(**{c: given[c] for c in read}), rules))


@lru_cache(maxsize=256)
def _rules_on(fixed: frozenset, varying: frozenset) -> tuple[tuple[LayoutRule, ...], tuple[str, ...]]:
    """choices' rules for these column names, and the columns they read (the search asks the same few questions
    thousands of times)."""
    # a rule on a flag not chosen here holds: the flag is off, which its rule always allows (the search leaves the MoE
    # all-to-all overlap off)
    unchosen = set(FLAGS) - fixed - varying
    rules = tuple(r for r in reading(varying) if not set(r.reads) & unchosen)
    read = {c for r in rules for c in r.reads}
    missing = read - fixed - varying
    if missing:
        raise ValueError(f"the rules on {sorted(varying)} also read {sorted(missing)}: fix them")
    return rules, tuple(sorted(read | varying))


def problems(facts: Facts, layout) -> list[tuple[str, str]]:
    """(field, message) for every rule this one layout breaks, in the order of RULES."""
    r = row(layout)
    cols = columns(**r)
    return [(rule.where(facts, r), rule.message(facts, r)) for rule in RULES if not rule.holds(facts, cols)[0]]


def follow(facts: Facts, cols, edited: set[str]) -> tuple[SimpleNamespace, list[LayoutRule]]:
    """After an edit of the columns `edited`, the settings that only apply with another one follow it: every broken
    rule with a reset that leaves the edited columns alone is reset (vectorised over rows). Returns the new columns
    and the rules that were reset somewhere."""
    out = SimpleNamespace(**{k: np.array(v) for k, v in vars(cols).items()})
    applied = []
    for rule in RULES:
        if rule.reset is None or set(rule.resets) & edited:
            continue
        broken = ~rule.holds(facts, out)
        if broken.any():
            for k, v in rule.reset(facts, out, broken).items():
                setattr(out, k, np.asarray(v, dtype=getattr(out, k).dtype))
            applied.append(rule)
    return out, applied
