"""Layout search: every combination of tp, cp, pp (+ interleaving), ep, dp, micro-batch, ZeRO stage, sequence
parallelism and recompute for a cluster, evaluated at once with the same vectorised formulas as the single
estimate; the rejected space summarised by reason, the best layouts ranked by an objective, a Pareto front over
cluster sizes. The best layout per scenario and cluster size is cached for the process (best_at): the whole run's
phases (context), the Pareto front, the cluster sizing (engine.planning.sizing), the plan and the vendor comparison
reuse each other's searches. The software stack is one more choice where the scenario names none (stacks,
choose_stack): each stack that runs on the accelerator's vendor with a level fitted for it is searched, the best by
the same objective kept, and its row says which and by how much; the stack is part of the cache key only there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from engine import frameworks
from engine.catalog import load_catalog
from engine.economics import whole_run
from engine.physics import layout_rules
from engine.planning import evaluation
from engine.planning.evaluation import Context, evaluate, memory, row
from engine.planning.results import Estimate, ParetoPoint, SearchResult
from engine.physics.layouts import RECOMPUTE, Layouts
from engine.physics.memory import headroom_fraction
from engine.planning.evaluation import host_memory_bytes
from engine.scenario import Scenario, ScenarioError, divisors, rule_facts

OBJECTIVES = {"time": "wall_s", "cost": "cost_usd", "energy": "energy_mwh"}
SPAN_REASON = "tensor-parallel group would span nodes (allow_span_nodes to permit)"
MEMORY_REASON = "does not fit in accelerator memory"
HOST_REASON = "offloaded states do not fit in the host's memory (cluster.host_memory_gb_per_gpu)"
HEADROOM_REASON = ("fits, but only by using the {:.1%} of memory kept free for the allocator's reserve and transient "
                   "peaks (training.memory_headroom_fraction)")
MIN_TOKENS_PER_CP_RANK = 512     # context parallelism finer than this is not enumerated
# Micro-batches larger than this many tokens per GPU are not enumerated: matmul efficiency has saturated long before
# (engine.physics.kernels: a 16k-token GEMM is within 1% of the rate), so a larger one only costs memory and pipeline bubble.
MAX_MICRO_BATCH_TOKENS = 65_536
DOMINATED_REASON = "a layout differing only in recompute fits with less recompute (faster)"
MAX_CANDIDATES = 5_000_000       # bounds memory (~1 GB of layout arrays) and time
CACHE_SIZE = 4096                # best layouts kept per process (scenario, size, objective, quick)
HSDP_GROWTH = (1, 2, 4, 8)       # HSDP shard groups tried: one node's data-parallel ranks times these


@dataclass(frozen=True)
class Block:
    """The enumerated choices for one (tp, cp, pp) and how many layouts they make."""

    tp: int
    cp: int
    pp: int
    dp: int
    splits: list            # (first, last, v) with -1 for an even stage
    mbs: list
    experts: list           # (ep, expert_tp)
    zero: list              # (zero stage, reshard after forward, shard group, offload)
    rc: list

    @property
    def count(self) -> int:
        return len(self.splits) * len(self.mbs) * len(self.experts) * len(self.zero) * len(self.rc)


@lru_cache(maxsize=8192)
def _zero_options(facts, dp: int, cp: int, tp: int, gpus_per_node: int, quick: bool = False,
                  offload: bool = False) -> list[tuple[int, bool, int, int]]:
    """(zero stage, reshard, shard group, offload) choices: ZeRO 0-3 over the whole data-parallel group, FSDP without
    resharding, and hybrid sharding (HSDP) over groups of one or a few nodes' data-parallel ranks, replicated across
    groups (quick: ZeRO-1, or plain data parallelism where the stack has no ZeRO-1, and ZeRO-3 only); with offload,
    each also with the optimizer offloaded and ZeRO-3 with the parameters too; those the rules allow (the stack's
    stages among them)."""
    dp_group = dp * cp
    if quick:
        out = [(1 if 1 in facts.zero_stages else 0, True, dp_group), (3, True, dp_group)]
    else:
        out = [(0, True, dp_group), (1, True, dp_group), (2, True, dp_group), (3, True, dp_group), (3, False, dp_group)]
        per_node = max(1, gpus_per_node // tp)
        for growth in HSDP_GROWTH:
            group = per_node * growth
            if 1 < group < dp_group:
                out += [(1, True, group), (3, True, group)]
    # offload: only the offloading variants (the search's second pass, after none of the others fit)
    out = [(z, r, g, off) for z, r, g in out for off in ((1, 2) if offload else (0,))]
    return [(z, bool(r), g, off) for z, r, g, off in
            _allowed(facts, {"dp": dp, "cp": cp}, out, ("zero", "reshard", "shard", "off"))]


QUICK_MICRO_BATCHES = (1, 2, 4)
QUICK_VIRTUAL_STAGES = 4         # quick: no interleaving, or the largest degree up to this


def _blocks(sc: Scenario, n_gpus: int, gpus_per_node: int, allow_span_nodes: bool, software_stack: str,
            quick: bool = False, offload: bool = False):
    """(blocks of valid choices, rejected (tp, cp, pp) groups as (values, layouts, reason)). quick keeps the choices
    tuned runs use (ZeRO-1/3, micro-batches 1-4, one interleaving degree, one split, experts without expert TP): a
    few percent of the space, for sizing clusters; the full search then runs on the size chosen.

    Validity is engine.physics.layout_rules: no rule reads the choices of two different dimensions of a block
    (GROUP and each of BLOCK_DIMENSIONS), so a block is the product of each dimension's choices that the rules allow
    with the group (tp, cp, pp, dp) held; a group whose own rules fail, or where a dimension has no valid choice,
    is counted as rejected under that rule's reason. The search space itself is bounded here (enumeration limits
    and dominated choices, each named where it is set). The enumeration reads only the rules' facts, so it is cached
    per facts and size: every accelerator with the same node size shares it (the plan sizes them all)."""
    blocks, rejected = _blocks_of(rule_facts(sc, n_gpus), sc.training.attention, n_gpus,
                                  gpus_per_node, allow_span_nodes, quick, offload)
    return list(blocks), list(rejected)          # the cached tuples stay as they are


@lru_cache(maxsize=CACHE_SIZE)
def _blocks_of(facts, attention: str, n_gpus: int, gpus_per_node: int, allow_span_nodes: bool, quick: bool,
               offload: bool = False):
    divs = divisors(n_gpus)
    tps = [d for d in divs if d <= facts.n_heads]
    cp_space = [d for d in divs if d == 1 or facts.seq_len // d >= MIN_TOKENS_PER_CP_RANK]
    cp_alone = layout_rules.allowed(facts, layout_rules.columns(cp=cp_space), layout_rules.within(("cp",)))
    cps = [c for c, ok in zip(cp_space, cp_alone) if ok]
    pps = [d for d in divs if d <= facts.n_layers]
    rcs = [0, 1, 2] if attention == "standard" else [0, 2]   # flash attention already recomputes its scores
    gbs = facts.global_batch
    n_batch_divs = len(divisors(gbs))
    groups = np.array([(t, c, p, n_gpus // (t * c * p)) for t in tps for c in cps for p in pps
                       if n_gpus % (t * c * p) == 0], dtype=np.int64).reshape(-1, 4)
    group_rules = layout_rules.within(GROUP)
    cols = layout_rules.columns(**dict(zip(GROUP, groups.T))) if len(groups) else None
    bad = np.array([np.zeros(len(groups), bool) if cols is None else ~rule.holds(facts, cols)
                    for rule in group_rules]).reshape(len(group_rules), len(groups))
    first_bad = np.where(bad.any(axis=0), bad.argmax(axis=0), -1).tolist()   # the first group rule each breaks
    any_size = facts.any_size()          # each dimension's choices, cached for every size the planner tries
    blocks, rejected = [], []
    for j, (t, c, p, d) in enumerate(groups.tolist()):
        if quick and first_bad[j] >= 0:  # the quick space is for sizing; nobody reads its rejections
            continue
        span_bad = not allow_span_nodes and (t > gpus_per_node or gpus_per_node % t)
        splits = _splits(any_size, p, quick)
        mbss = _micro_batches(any_size, d, facts.seq_len // c, quick)
        reason = group_rules[first_bad[j]].reason if first_bad[j] >= 0 else (
            layout_rules.BATCH.reason if not mbss else SPAN_REASON if span_bad
            else layout_rules.SPLIT.reason if not splits else None)
        if reason is not None:
            if not quick:                    # the quick space is for sizing; nobody reads its rejections
                count = max(len(splits), 1) * n_batch_divs * len(rcs) * 5 * (2 if facts.moe else 1)
                rejected.append(({"tp": t, "cp": c, "pp": p, "dp": d}, count, reason))
            continue
        blocks.append(Block(tp=t, cp=c, pp=p, dp=d, splits=splits, mbs=mbss, experts=_experts(any_size, t, c, d, quick),
                            zero=_zero_options(any_size, d, c, t, gpus_per_node, quick, offload), rc=rcs))
    return tuple(blocks), tuple(rejected)


GROUP = ("tp", "cp", "pp", "dp")
# Flags the search leaves off (a rule on them constrains no dimension): the MoE all-to-all overlap, which NeMo's tuned
# recipes mostly leave off (on for 1 of its 4 H100 MoE presets; with it on, the search rated GPT-OSS-120B on 64 H100
# 1.45x NeMo's published run, at ep64 across nodes); a scenario or the Memory page turns it on
UNSEARCHED = ("a2ao",)
BLOCK_DIMENSIONS = (("first", "last", "v"), ("mbs",), ("ep", "etp"), ("zero", "reshard", "shard", "off"), ("rc",),
                    ("sp", "tpo"))      # sequence parallelism and TP overlap: one value per block (search_cluster)


def _allowed(facts, fixed: dict, options: list[tuple], names: tuple[str, ...]) -> list[tuple]:
    """The options (tuples of the named columns) the rules allow with the fixed columns held."""
    if not options:
        return []
    values = np.array(options, dtype=np.int64).T
    return [options[i] for i in layout_rules.choices(facts, fixed, **dict(zip(names, values)))]


@lru_cache(maxsize=8192)
def _splits(facts, pp: int, quick: bool) -> list[tuple[int, int, int]]:
    """(first, last, v) pipeline splits the search tries for pp stages (-1: even): the splits of
    schedule.split_options (quick: the first only) with every interleaving degree the rules allow (quick: none, or
    the largest up to QUICK_VIRTUAL_STAGES)."""
    out = []
    for first, last in layout_rules.split_choices(facts.n_layers, pp)[:1 if quick else None]:
        vs = layout_rules.virtual_stage_options(facts.n_layers, pp, None if first < 0 else first,
                                                None if last < 0 else last)
        if quick and vs:
            vs = sorted({1, max(v for v in vs if v <= QUICK_VIRTUAL_STAGES)})
        out += [(first, last, v) for v in vs]
    return out


@lru_cache(maxsize=8192)
def _micro_batches(facts, dp: int, tokens: int, quick: bool) -> list[int]:
    """Micro-batch sizes the rules allow with dp, up to MAX_MICRO_BATCH_TOKENS tokens (quick: 1, 2, 4)."""
    space = [b for b in divisors(facts.global_batch)
             if (b == 1 or b * tokens <= MAX_MICRO_BATCH_TOKENS) and (not quick or b in QUICK_MICRO_BATCHES)]
    return [b for (b,) in _allowed(facts, {"dp": dp}, [(b,) for b in space], ("mbs",))]


@lru_cache(maxsize=8192)
def _experts(facts, tp: int, cp: int, dp: int, quick: bool) -> list[tuple[int, int]]:
    """(ep, expert_tp) the rules allow: expert tensor parallelism none or tp (quick: none); (1, tp) for a dense
    model."""
    if not facts.moe:
        return [(1, tp)]
    options = [(e, et) for e in divisors(facts.n_experts) for et in ([1] if quick else sorted({1, tp}))]
    return _allowed(facts, {"tp": tp, "cp": cp, "dp": dp}, options, ("ep", "etp"))


def _layouts(blocks: list[Block], tp_overlap: bool) -> Layouts:
    """Every block's product of choices as columns, block after block, each in the order (split, micro-batch,
    experts, ZeRO option, recompute), recompute innermost; tensor-parallel overlap on wherever tp > 1 on a CUDA
    stack, the flags of UNSEARCHED off. One pass over all blocks: each layout's block and its index in every
    choice list, read from the blocks' choices laid end to end."""
    dims = np.array([(len(b.splits), len(b.mbs), len(b.experts), len(b.zero), len(b.rc)) for b in blocks],
                    dtype=np.int64).reshape(-1, 5)
    counts = dims.prod(axis=1)
    block = np.repeat(np.arange(len(blocks)), counts)
    local = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    step = np.cumprod(dims[:, :0:-1], axis=1)[:, ::-1]         # layouts per step of each choice but the innermost
    starts = np.cumsum(dims, axis=0) - dims                     # where each block's list starts in the joined lists

    def chosen(j: int, field: str, width: int) -> np.ndarray:
        """Each layout's choice of the block's j-th list (its index there, read from the lists laid end to end)."""
        index = (local // step[:, j][block] if j < 4 else local) % dims[:, j][block]
        table = np.array([v for b in blocks for v in getattr(b, field)], dtype=np.int64).reshape(-1, width)
        return table[index + starts[:, j][block]]
    split, mbs, expert = chosen(0, "splits", 3), chosen(1, "mbs", 1)[:, 0], chosen(2, "experts", 2)
    zero, rc = chosen(3, "zero", 4), chosen(4, "rc", 1)[:, 0]
    group = np.array([(b.tp, b.pp, b.dp, b.cp) for b in blocks], dtype=np.int64).reshape(-1, 4)[block]
    tp = group[:, 0]
    return Layouts(tp=tp, pp=group[:, 1], dp=group[:, 2], cp=group[:, 3], ep=expert[:, 0], mbs=mbs, v=split[:, 2],
                   zero=zero[:, 0], sp=tp > 1, rc=rc, etp=expert[:, 1], first=split[:, 0], last=split[:, 1],
                   reshard=zero[:, 1].astype(bool), shard=zero[:, 2], tpo=(tp > 1) & tp_overlap, off=zero[:, 3],
                   a2ao=np.zeros(len(tp), dtype=bool))


def enumerate_layouts(sc: Scenario, n_gpus: int, allow_span_nodes: bool = False) -> Layouts:
    """Every layout for n_gpus that the rules allow (see search_cluster)."""
    return search_cluster(sc, n_gpus, allow_span_nodes, evaluate_model=False).layouts


def _scenario_for(sc: Scenario, n_gpus: int) -> Scenario:
    return sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"n_gpus": n_gpus}), "layout": None})


def _objective(ev: dict, objective: str) -> np.ndarray:
    if "step_time_s" not in ev:                     # nothing was timed: no layout fits
        return np.full(len(ev.get("fits", ())), np.inf)
    key = OBJECTIVES[objective]
    if key not in ev:
        key = "train_s" if objective == "time" else key
    if key not in ev:
        raise ScenarioError([("objective", f"ranking by {objective} needs the {objective} model, which is not available")])
    return ev[key]


@dataclass(frozen=True)
class ClusterSearch:
    """Every layout the rules allow for one cluster size, evaluated, and what the rules rejected (counted by group:
    a (tp, cp, pp) that breaks a rule rejects every layout built on it)."""

    ctx: Context
    layouts: Layouts          # every candidate that passed the rules (all went through the memory/time model)
    reason: np.ndarray        # index into `reasons` where a candidate is not ranked (does not fit, dominated, in the
                              # headroom), -1 where it is
    reasons: list[str]
    ev: dict                  # evaluation of `layouts`
    rejected_groups: list     # ({"tp", "cp", "pp", "dp"}, layouts, reason) rejected before evaluation

    @property
    def valid(self) -> np.ndarray:
        return np.arange(len(self.layouts))

    @property
    def valid_layouts(self) -> Layouts:
        return self.layouts

    @property
    def feasible(self) -> np.ndarray:
        """Layouts that fit and went through the time model (the fastest recompute choice of each)."""
        return self.reason < 0 if self.ev else np.zeros(len(self.layouts), bool)

    @property
    def candidates(self) -> int:
        return len(self.layouts) + sum(count for _, count, _ in self.rejected_groups)

    def rejected(self, mask: np.ndarray | None = None, fixed: dict | None = None) -> dict[str, int]:
        """Rejections by reason, among the layouts selected by mask (and groups matching the fixed values)."""
        codes = self.reason if mask is None else self.reason[mask]
        out = {r: int(c) for r, c in zip(self.reasons, np.bincount(codes[codes >= 0], minlength=len(self.reasons))) if c}
        for values, count, reason in self.rejected_groups:
            if fixed and any(k in values and values[k] != v for k, v in fixed.items()):
                continue
            if fixed and any(k not in values for k in fixed):
                continue
            out[reason] = out.get(reason, 0) + count
        return out


def search_cluster(sc: Scenario, n_gpus: int, allow_span_nodes: bool = False, evaluate_model: bool = True,
                   quick: bool = False) -> ClusterSearch:
    """Enumerate the layouts the rules allow for one cluster size and evaluate their memory and time. The rules are
    applied per dimension before the product is built (tensor parallelism divides the heads and widths, data
    parallelism the batch, the layers split into the pipeline stages and virtual stages, the experts into expert
    groups), so only valid layouts are built; dominated choices are not enumerated (sequence parallelism is on
    wherever tp > 1, and tensor-parallel overlap wherever the software stack has it). Offload (ZeRO-Offload,
    ZeRO-Infinity) is enumerated only where no layout fits without it: it moves states to CPU memory and never makes
    a step faster, so it is the choice of last resort for memory (DeepSpeed's tutorial: for models that do not fit)."""
    cs = _search_cluster(sc, n_gpus, allow_span_nodes, evaluate_model, quick, offload=False)
    if evaluate_model and not cs.feasible.any() and host_memory_bytes(cs.ctx.scenario) > 0:
        return _joined(cs, _search_cluster(sc, n_gpus, allow_span_nodes, evaluate_model, quick, offload=True))
    return cs


def _joined(first: ClusterSearch, offloading: ClusterSearch) -> ClusterSearch:
    """The first pass (nothing fits) and the offloading variants as one search; figures a pass did not compute NaN."""
    n1, n2 = len(first.layouts), len(offloading.layouts)
    lay = Layouts(**{f: np.concatenate([getattr(first.layouts, f), getattr(offloading.layouts, f)])
                     for f in Layouts.__dataclass_fields__})
    pad = lambda ev, key, n: ev[key] if key in ev else np.full(n, np.nan)
    ev = {k: np.concatenate([pad(first.ev, k, n1), pad(offloading.ev, k, n2)])
          for k in {**first.ev, **offloading.ev}} if first.ev or offloading.ev else {}
    return ClusterSearch(ctx=offloading.ctx, layouts=lay, reason=np.concatenate([first.reason, offloading.reason]),
                         reasons=offloading.reasons, ev=ev, rejected_groups=first.rejected_groups)


def _search_cluster(sc: Scenario, n_gpus: int, allow_span_nodes: bool, evaluate_model: bool, quick: bool,
                    offload: bool) -> ClusterSearch:
    scn = _scenario_for(sc, n_gpus)
    ctx = context(scn)
    acc = load_catalog().accelerator(scn.cluster.accelerator)
    blocks, rejected = _blocks(scn, n_gpus, ctx.hw.gpus_per_node, allow_span_nodes, acc.software_stack, quick, offload)
    if problems := _over_limit(scn, n_gpus, blocks, rejected):
        raise ScenarioError(problems)
    lay = _layouts(blocks, tp_overlap=acc.software_stack == "CUDA")
    reasons = [MEMORY_REASON, DOMINATED_REASON, HEADROOM_REASON.format(headroom_fraction(scn.training)), HOST_REASON]
    reason = np.full(len(lay), -1)
    ev: dict = {}
    if evaluate_model and len(lay):
        mem = memory(ctx, lay)
        fits = mem["fits_with_headroom"]          # only layouts that leave the headroom free are recommended
        # recompute is the innermost enumerated choice: of the variants of one layout that fit, keep the one that
        # recomputes least (it is the fastest; the others are counted as dominated, not evaluated)
        n_rc = len(blocks[0].rc)
        grouped = fits.reshape(-1, n_rc)
        first = np.argmax(grouped, axis=1)
        keep = np.zeros_like(grouped)
        keep[np.arange(len(grouped)), first] = grouped.any(axis=1)
        timed = keep.reshape(-1)
        ev = evaluate(ctx, lay, timed=timed, mem=mem)
        reason[~mem["fits"]] = 0
        reason[mem["fits_gpu"] & ~mem["fits_host"]] = 3
        reason[mem["fits"] & ~fits] = 2
        reason[fits & ~timed] = 1
    return ClusterSearch(ctx=ctx, layouts=lay, reason=reason, reasons=reasons, ev=ev, rejected_groups=rejected)


def _over_limit(sc: Scenario, n_gpus: int, blocks, rejected) -> list[tuple[str, str]]:
    total = sum(b.count for b in blocks) + sum(count for _, count, _ in rejected)
    if total <= MAX_CANDIDATES:
        return []
    return [("cluster.n_gpus", f"{n_gpus:,} GPUs with a global batch of {sc.training.global_batch_size:,} give "
                               f"{total:,} layouts to try, over the search's limit of {MAX_CANDIDATES:,}; choose a "
                               "cluster size and batch with fewer divisors (powers of two)")]


def candidate_problems(sc: Scenario, allow_span_nodes: bool = False) -> list[tuple[str, str]]:
    """Why search_cluster would refuse the scenario's own cluster size (more layouts than MAX_CANDIDATES), found by
    counting the layouts, without the model: milliseconds, so a caller can refuse before it queues for the search."""
    n_gpus = sc.cluster.n_gpus
    scn = _scenario_for(sc, n_gpus)
    stack = load_catalog().accelerator(scn.cluster.accelerator).software_stack
    return _over_limit(scn, n_gpus, *_blocks(scn, n_gpus, scn.gpus_per_node, allow_span_nodes, stack))


def _best(cs: ClusterSearch, objective: str, k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Indices into cs.valid of the k best feasible layouts (optionally among valid layouts selected by mask)."""
    ok = cs.feasible if mask is None else cs.feasible & mask
    if not ok.any():
        return np.array([], dtype=int)
    score = np.where(ok, _objective(cs.ev, objective), np.inf)
    near = np.arange(len(score))
    if k < len(score):          # only the k lowest scores (and any tied with the k-th) need the ordering's sort
        near = np.flatnonzero(score <= np.partition(score, k - 1)[k - 1])
    order = near[np.lexsort((cs.ev["mem_total"][near], score[near]))][:k]
    return order[np.isfinite(score[order])]


DIMENSIONS = {"tp": "tp", "pp": "pp", "cp": "cp", "ep": "ep", "dp": "dp", "zero_stage": "zero",
              "micro_batch_size": "mbs", "virtual_stages": "v", "sequence_parallel": "sp", "recompute": "rc",
              "expert_tp": "etp"}
GROUP_DIMENSIONS = ("tp", "cp", "pp", "dp")     # the dimensions whose rejected groups are counted arithmetically


def _value(name: str, value):
    return RECOMPUTE.index(value) if name == "recompute" else value


def explain(cs: ClusterSearch, objective: str = "time", **fixed) -> dict:
    """Why not a layout with these values (e.g. tp=16)? Counts, rejection reasons and the best such layout."""
    mask = np.ones(len(cs.layouts), bool)
    for name, value in fixed.items():
        if name not in DIMENSIONS:
            raise ScenarioError([(name, f"unknown layout dimension; choose from {', '.join(DIMENSIONS)}")])
        mask &= getattr(cs.layouts, DIMENSIONS[name]) == _value(name, value)
    groups = {k: _value(k, v) for k, v in fixed.items()}
    rejected = cs.rejected(mask, fixed=groups if set(groups) <= set(GROUP_DIMENSIONS) else {"none": -1})
    out = {"candidates": int(mask.sum()) + sum(rejected.get(r, 0) for r in rejected if r not in cs.reasons),
           "feasible": int((cs.reason[mask] < 0).sum()), "rejected": rejected}
    if out["candidates"] == 0:
        out["note"] = "no candidate has these values: they do not divide the cluster or are outside the enumerated space"
    best = _best(cs, objective, 1, mask)
    if len(best):
        out["best"] = row(cs.ctx, cs.ev, cs.layouts, int(best[0]))
    return out


def _groups(column) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(column, return_inverse=True) for a column of small integers (a layout dimension), counted instead
    of sorted: a sort is 3 ms a column of the 60k layouts of a large search, a count 0.3 ms."""
    col = np.asarray(column).reshape(-1).astype(np.int64)
    if col.size == 0 or int(col.max()) - int(col.min()) > 4 * col.size:
        values, inverse = np.unique(col, return_inverse=True)
        return values, inverse.reshape(-1)
    lo = int(col.min())
    present = np.bincount(col - lo) > 0
    return np.flatnonzero(present) + lo, (np.cumsum(present) - 1)[col - lo]


def _by_dimension(cs: ClusterSearch, objective: str) -> dict:
    """For every value of every dimension: candidates, feasible, best objective value and rejection reasons
    (one pass per dimension over the evaluated layouts, plus the rejected groups)."""
    score = np.where(cs.feasible, _objective(cs.ev, objective), np.inf) if len(cs.layouts) else np.zeros(0)
    out = {}
    for name, attr in DIMENSIONS.items():
        values, inverse = _groups(getattr(cs.layouts, attr))
        count = np.bincount(inverse, minlength=len(values))
        fits = np.bincount(inverse, weights=cs.reason < 0, minlength=len(values))
        best = np.full(len(values), np.inf)
        np.minimum.at(best, inverse, score)
        rows = {}
        for j, value in enumerate(values):
            key = RECOMPUTE[int(value)] if name == "recompute" else (bool(value) if name == "sequence_parallel" else int(value))
            memory = int(count[j] - fits[j])
            rows[str(key)] = {"candidates": int(count[j]), "feasible": int(fits[j]),
                              "best": float(best[j]) if np.isfinite(best[j]) else None,
                              "rejected": {MEMORY_REASON: memory} if memory else {}}
        if name in GROUP_DIMENSIONS:
            for values_, n, reason in cs.rejected_groups:
                r = rows.setdefault(str(values_[name]), {"candidates": 0, "feasible": 0, "best": None, "rejected": {}})
                r["candidates"] += n
                r["rejected"][reason] = r["rejected"].get(reason, 0) + n
        out[name] = rows
    return out


def context(sc: Scenario) -> Context:
    """Everything about the scenario but its layout, with each whole-run phase trained on the scenario's cluster with
    its own best layout (best_at: cached, so an estimate, the search and the sizing search each phase once)."""
    phases = sc.schedule.phases if sc.schedule is not None else []
    return evaluation.context(sc, tuple(_phase_run(sc, phase) for phase in phases))


def _phase_run(sc: Scenario, phase) -> whole_run.PhaseRun:
    phase_sc = whole_run.phase_scenario(sc, phase)
    n, tr = sc.cluster.n_gpus, phase_sc.training
    named = {"name": phase.name, "tokens": phase.tokens, "seq_len": tr.seq_len, "global_batch_size": tr.global_batch_size}
    best = _best_on_stack(phase_sc, n, "time", False)      # the run's own stack, as its main phase
    if best is None:
        return whole_run.PhaseRun(**named, seconds=float("inf"), problem=f"no layout on {n} GPUs fits sequence "
                                                                         f"{tr.seq_len} with batch {tr.global_batch_size}")
    return whole_run.PhaseRun(**named, seconds=best.whole_run["steps_days"] * 86400.0,
                              layout=best.layout.model_dump(),
                              mfu=best.mfu)


@lru_cache(maxsize=CACHE_SIZE)
def _best_json(scenario_json: str, n_gpus: int, objective: str, quick: bool) -> Estimate | None:
    sc = Scenario.model_validate_json(scenario_json)
    try:
        cs = search_cluster(sc, n_gpus, quick=quick)
    except ScenarioError:                     # a size whose candidate space is over the search's limit
        return None
    idx = _best(cs, objective, 1)
    return row(cs.ctx, cs.ev, cs.layouts, int(idx[0])) if len(idx) else None


def _best_on_stack(sc: Scenario, n_gpus: int, objective: str, quick: bool) -> Estimate | None:
    return _best_json(_scenario_for(sc, n_gpus).model_dump_json(), n_gpus, objective, quick)


def stacks(sc: Scenario) -> tuple[str | None, ...]:
    """The software stacks a search weighs for the scenario: the one it names; without one, the stacks that run on
    its accelerator's vendor with a level fitted for it, and for a MoE model a MoE fitted on published MoE runs
    (engine.frameworks.candidates). Where that is the vendor's default alone the scenario is searched as it is (None:
    the cache key and the answer do not change); the stack becomes part of the key only where there is a choice."""
    if sc.training.framework is not None:
        return (sc.training.framework,)
    acc = load_catalog().accelerator(sc.cluster.accelerator)
    found = frameworks.candidates(acc.vendor, acc.id, sc.training.precision, sc.arch.is_moe)
    return (None,) if found == (frameworks.stack_id(None, acc.vendor),) else found


def on_stack(sc: Scenario, framework: str | None) -> Scenario:
    """The scenario trained on this stack (None: as it is)."""
    if framework is None or framework == sc.training.framework:
        return sc
    return sc.model_copy(update={"training": sc.training.model_copy(update={"framework": framework})})


def _rank_value(r: Estimate | None, objective: str) -> tuple[float, float]:
    """What the layouts are ranked by (OBJECTIVES), for a stack's best row: the stack is one more layout choice."""
    if r is None:
        return math.inf, math.inf
    value = {"time": r.days, "cost": r.cost_usd, "energy": r.energy_mwh}[objective]
    return (math.inf if value is None else value), r.days


def _chosen(rows: dict[str, Estimate | None], objective: str) -> str | None:
    return min(rows, key=lambda fw: _rank_value(rows[fw], objective))


def _only_stack(sc: Scenario) -> str:
    """Why the planner's only candidate is the vendor's default (engine.frameworks.candidates)."""
    acc = load_catalog().accelerator(sc.cluster.accelerator)
    fw = frameworks.resolve(None, acc.vendor, acc.id, sc.training.precision)
    where = f"{acc.name} at {frameworks.precision_class(sc.training.precision)} precision"
    if fw.calibrated:
        return (f"{fw.stack.short_name}: {acc.vendor}'s MLPerf default, the only stack that runs on "
                f"{acc.vendor} with a level fitted for {where}")
    return (f"{fw.stack.short_name}: {acc.vendor}'s MLPerf default; no stack that runs on {acc.vendor} has a "
            f"level fitted for {where}")


def choose_stack(rows: dict[str | None, Estimate | None], objective: str, sc: Scenario) -> Estimate | None:
    """Of each candidate stack's best row on one cluster (in engine.frameworks.candidates' order, the vendor's
    default first, which wins a tie), the best by the objective, its framework block saying that the planner chose
    it, over which stacks and by how much (a scenario that names its stack gets that stack's row as it is)."""
    chosen_id = _chosen(rows, objective)
    chosen = rows[chosen_id]
    if chosen is None or sc.training.framework is not None:
        return chosen
    if len(rows) == 1:
        return chosen.model_copy(update={"framework": _planner_block(chosen, _only_stack(sc), [])})
    word = {"time": ("faster", "slower"), "cost": ("cheaper", "dearer"), "energy": ("less energy", "more energy")}
    name = lambda fw: frameworks.stack(fw).short_name
    mine = _rank_value(chosen, objective)[0]
    compared, parts = [], []
    for fw, r in rows.items():
        if fw == chosen_id:
            continue
        compared.append({"id": fw, "name": name(fw), "wall_days": None if r is None else r.wall_days,
                         "cost_usd": None if r is None else r.cost_usd})
        theirs = _rank_value(r, objective)[0]
        if r is None:
            parts.append(f"no layout of {name(fw)} fits")
        elif not math.isfinite(theirs) or not math.isfinite(mine) or mine <= 0:
            parts.append(f"{name(fw)} is not ranked on {objective}")
        else:
            gap = 1 - mine / theirs
            parts.append(f"{abs(gap):.0%} {word[objective][0 if gap >= 0 else 1]} than {name(fw)}"
                         if abs(gap) >= 0.005 else f"within 0.5% of {name(fw)}")
    why = f"{name(chosen_id)}: {', '.join(parts)} on this job ({chosen.n_gpus:,} GPUs, each stack at its best layout)"
    return chosen.model_copy(update={"framework": _planner_block(chosen, why, compared)})


def _planner_block(chosen: Estimate, why: str, compared: list[dict]) -> dict:
    """The row's framework block (engine.frameworks.Resolved.detail) as the planner's choice, with why."""
    fw = chosen.framework or {}
    return {**fw, "text": f"framework: {fw.get('id')}, chosen by the planner", "chosen_by": f"the planner: {why}",
            "planner_choice": {"why": why, "compared": compared}}


def pinned(sc: Scenario, best: Estimate | None) -> Scenario:
    """The scenario on the stack its best row was found on, where the planner chose one other than the vendor's
    default (which a scenario naming no stack already gets): its estimate, launch configuration and levers are then
    that stack's."""
    fw = (best.framework or {}).get("id") if best is not None else None
    if sc.training.framework is not None or fw is None:
        return sc
    default = frameworks.stack_id(None, load_catalog().accelerator(sc.cluster.accelerator).vendor)
    return sc if fw == default else on_stack(sc, fw)


def best_at(sc: Scenario, n_gpus: int, objective: str = "time", quick: bool = False) -> Estimate | None:
    """The best layout's estimate on n_gpus (None if no layout fits), over the stacks the scenario allows (stacks,
    choose_stack); each stack's search cached for the process."""
    return choose_stack({fw: _best_on_stack(on_stack(sc, fw), n_gpus, objective, quick) for fw in stacks(sc)},
                        objective, sc)


def _best_row(cs: ClusterSearch, objective: str) -> Estimate | None:
    idx = _best(cs, objective, 1)
    return row(cs.ctx, cs.ev, cs.layouts, int(idx[0])) if len(idx) else None


def search(sc: Scenario, top: int = 10, objective: str = "time", allow_span_nodes: bool = False,
           pareto_sizes: list[int] | None = None, progress=None, summaries: bool = True) -> SearchResult:
    """Search the scenario's cluster (its layout is ignored); see the module docstring.

    progress: optional callable(fraction, message) for the UI."""
    if objective not in OBJECTIVES:
        raise ScenarioError([("objective", f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")])
    note = progress or (lambda fraction, message: None)
    n = sc.cluster.n_gpus
    note(0.0, f"evaluating layouts for {n} GPUs")
    tops, cs = {}, None
    for fw in stacks(sc):              # one stack's evaluated layouts held at a time (up to ~1 GB each)
        found = search_cluster(on_stack(sc, fw), n, allow_span_nodes)
        tops[fw] = _best_row(found, objective)
        if _chosen(tops, objective) == fw:
            cs = found
    chosen = choose_stack(tops, objective, sc)       # the best row, with the stack choice in its framework block
    sc = on_stack(sc, _chosen(tops, objective))
    missing = {"cost": cs.ctx.price.missing, "energy": cs.ctx.power.missing}.get(objective)
    if missing:
        raise ScenarioError([("objective", f"cannot rank by {objective}: {missing}")])
    best = _best(cs, objective, top)
    rows = [row(cs.ctx, cs.ev, cs.layouts, int(i)) for i in best]
    if chosen is not None and chosen.framework != (rows[0].framework if rows else None):
        rows = [r.model_copy(update={"framework": chosen.framework}) for r in rows]
    feasible = int(cs.feasible.sum())
    out = {
        "n_gpus": n,
        "objective": objective,
        "candidates_evaluated": cs.candidates,
        "model_evaluated": len(cs.layouts),
        "feasible": feasible,
        "best": rows,
        "rejected": cs.rejected(),
        "stack": (chosen.framework if chosen is not None else cs.ctx.hw.framework_detail),
        **({"by_dimension": _by_dimension(cs, objective)} if summaries else {}),
    }
    if not rows and feasible:                          # layouts fit, but on this cluster no run finishes
        out["problem"] = row(cs.ctx, cs.ev, cs.layouts, int(np.flatnonzero(cs.feasible)[0])).problem
    sizes = pareto_sizes if pareto_sizes is not None else sorted({s for s in (n // 4, n // 2, n, 2 * n) if s >= 1})
    front = []
    for k, size in enumerate(sizes):
        note(0.2 + 0.5 * k / max(len(sizes), 1), f"Pareto front: {size} GPUs")
        r = (rows[0] if rows else None) if size == n else (
            _best_row(search_cluster(sc, size, True), objective) if allow_span_nodes else best_at(sc, size, objective))
        if r and r.wall_days is not None:              # a size whose run never finishes is on no time front
            front.append(ParetoPoint(n_gpus=size, train_days=r.train_days, wall_days=r.wall_days,
                                     gpu_hours=r.gpu_hours, cost_usd=r.cost_usd, layout=r.layout))
    front.sort(key=lambda p: p.n_gpus)
    out["pareto"] = [p for i, p in enumerate(front) if all(q.wall_days > p.wall_days for q in front[:i])]
    note(1.0, "done")
    return SearchResult.model_validate(out)
