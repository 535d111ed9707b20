"""Pipeline schedules: how layers split into stages, what each stage holds, and how long a step of m micro-batches
takes on p stages with v virtual stages (chunks) per GPU.

Time (1F1B and interleaved 1F1B, Narayanan et al. 2021 sec. 2.2): one micro-batch passes v*p chunks. With m >= p
micro-batches every GPU works m*v chunk-slots and the warm-up and cool-down add p-1 slots of idle time, which is the
familiar bubble (p-1)/v of a stage's micro-batch time. With m < p there are too few micro-batches to fill the
pipeline: each of the v rounds a micro-batch makes through the p stages keeps every GPU idle for p-m slots, so a
step takes v*p + m - 1 slots; both cases are v*max(m, p) + min(m, p) - 1 slots (m = 1: v*p slots, each GPU busy v).
Interleaving multiplies the stage-boundary crossings by v; each slot carries one activation forward and one
gradient backward.

Stages (Megatron-LM): the layers split evenly, or the first and last stage take a given number of transformer
layers (--decoder-first/last-pipeline-num-layers; the embedding shares the first stage, the output layer and loss
the last) and the other stages split the rest evenly. v divides the middle stages' layers, so their chunks are
equal, and a first or last stage a layer or two short has a chunk or two a layer short; with one layer per chunk
the short stage's spare chunk holds the embedding or the output layer and loss alone (Llama 3 405B ran interleaved
with 7 layers on its first and last stages and 8 on the others, Dubey et al. 2024 sec. 3.3.2).

Memory (Megatron-LM megatron/core/pipeline_parallel/schedules.py, get_pp_rank_microbatches and get_schedule_table,
https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/core/pipeline_parallel/schedules.py): stage r (0-based)
runs W forward chunk passes before its first backward, W = p - r - 1 under 1F1B and 2(p - r - 1) + (v - 1)p
interleaved (micro-batches grouped p at a time, the default group size), at most m*v (then every forward comes
first); from then on a forward and a backward alternate, so W + 1 chunks' activations are alive before each
backward. Forwards take chunks 0..v-1 group by group, backwards v-1..0, so which chunks are alive shifts through
the step; where a stage's chunks differ in size (an uneven first or last stage) its peak is counted pass by pass.
The first stage holds p(1 + (p - 1)/(pv)) micro-batches of even chunks (Korthikanti et al. 2022 sec. 4.2.3), the
last ((v - 1)p + 1)/v, and the second stage is the heaviest middle one: with one layer less on the first stage it
can be the heaviest of all.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


class SplitError(ValueError):
    """A pipeline split that cannot be built; the message says why and names the fields."""


def stage_layers(n_layers: int, pp: int, v: int = 1, first: int | None = None,
                 last: int | None = None) -> tuple[int, int, int]:
    """(first, middle, last) transformer layers per stage; raises SplitError with a reason a planner can act on."""
    if pp == 1:
        if v > 1:
            raise SplitError("virtual_stages > 1 (interleaved schedule) needs pp > 1")
        if first not in (None, n_layers) or last not in (None, n_layers):
            raise SplitError("first_stage_layers / last_stage_layers need pp > 1")
        return n_layers, n_layers, n_layers
    given = [x for x in (first, last) if x is not None]
    rest = n_layers - sum(given)
    others = pp - len(given)
    if rest < 0:
        raise SplitError(f"first_stage_layers + last_stage_layers = {sum(given)} exceeds n_layers = {n_layers}")
    if others == 0:
        if rest:
            raise SplitError(f"with pp=2 the first and last stage hold every layer: first_stage_layers + "
                             f"last_stage_layers must be {n_layers}, not {sum(given)}")
        each = 0
    elif rest % others:
        raise SplitError(f"{n_layers} layers do not split evenly over pp={pp} stages" if not given else
                         f"the {rest} layers left do not split evenly over the other {others} pipeline stages")
    else:
        each = rest // others
    f = first if first is not None else each
    l_ = last if last is not None else each
    if pp > 2 and each < 1:
        raise SplitError(f"the middle pipeline stages would hold no layers ({rest} layers for {others} stages)")
    counts = (f, l_) + ((each,) if pp > 2 else ())
    reference = each if pp > 2 else max(f, l_)
    # a first or last stage may leave one chunk without transformer layers: that chunk is the embedding or the
    # output layer and loss alone (Megatron-LM --account-for-embedding/loss-in-pipeline-split; Llama 3 405B: 7 layers
    # on its first and last stages, 8 on the others, one layer per chunk)
    if v > 1 and (min(counts) < v - 1 or reference < v or reference % v):
        raise SplitError(f"virtual_stages={v} must divide the layers of the {'middle' if pp > 2 else 'larger'} "
                         f"stages and no stage may hold fewer than {v - 1} layers (the first or last stage's "
                         f"embedding or output layer fills a chunk of its own); the stages hold {f} (first), "
                         f"{each if pp > 2 else '-'} (middle) and {l_} (last) layers")
    return f, (each if pp > 2 else f), l_


@lru_cache(maxsize=8192)
def split_options(n_layers: int, pp: int) -> list[tuple[int | None, int | None]]:
    """(first, last) splits the search tries for pp stages: the even split when the layers divide, and the splits
    that give the first and last stage (which also hold the embedding and the output layer) up to one layer less
    than the middle stages, as Llama 3 405B (126 layers on 16 stages: 7 + 14 x 8 + 7) and BLOOM (70 layers on 12:
    5 + 10 x 6 + 5) ran."""
    if pp == 1:
        return [(None, None)]
    out: list[tuple[int | None, int | None]] = []
    if n_layers % pp == 0:
        out.append((None, None))
    if pp > 2:
        for middle in sorted({-(-n_layers // pp), -(-n_layers // pp) + 1}):
            rest = n_layers - (pp - 2) * middle
            first, last = rest // 2, rest - rest // 2
            if 1 <= first <= middle and 1 <= last <= middle and (first, last) != (middle, middle):
                out.append((first, last))
    elif n_layers % 2:
        out.append((n_layers // 2, n_layers - n_layers // 2))
    return out


@dataclass(frozen=True)
class Stage:
    """What the GPU of one representative pipeline stage holds, as arrays over layouts: its dense-MLP and MoE
    layers, whether it has the token embedding or the output layer and loss, its 0-based place in the pipeline
    (`rank`), how many micro-batches of its activations it keeps alive at its peak (`in_flight`: layer-micro-batches
    alive over the stage's layers) and the share of the p stages it stands for (for averages)."""

    dense: np.ndarray
    moe: np.ndarray
    embedding: np.ndarray
    head: np.ndarray
    in_flight: np.ndarray
    weight: np.ndarray
    rank: np.ndarray


STAGE_NAMES = ("first", "middle", "last")


def chunk_layers(n_stage_layers: int, v: int, where: str = "first") -> tuple[int, ...]:
    """Transformer layers in each of a stage's v chunks, in schedule order. A stage whose layers v does not divide
    has chunks a layer short: on the first stage they come first (the embedding fills the model's first chunk), on
    the others last (the output layer and loss fill the model's last chunk), as Llama 3 405B's one-layer chunks."""
    base, extra = divmod(n_stage_layers, v)
    long_, short = [base + 1] * extra, [base] * (v - extra)
    return tuple(short + long_) if where == "first" else tuple(long_ + short)


def warmup_forwards(p, rank, v, m):
    """Forward chunk passes stage `rank` runs before its first backward (Megatron-LM get_pp_rank_microbatches, with
    the default of p micro-batches per interleaving group); all m*v of them when the warm-up would not end sooner.
    Integers or arrays alike."""
    w = np.where(np.equal(v, 1), p - rank - 1, 2 * (p - rank - 1) + (v - 1) * p)
    return np.minimum(w, m * v)


def forward_chunks(m: int, v: int, group: int) -> np.ndarray:
    """The chunk of each of a stage's m*v forward passes in order (Megatron-LM get_schedule_table): micro-batches in
    groups of `group`, each group through chunk 0, then chunk 1, ..., then chunk v-1. The k-th backward pass runs
    chunk v-1 minus the k-th forward's chunk."""
    out = []
    for start in range(0, m, group):
        size = min(group, m - start)
        out.extend(c for c in range(v) for _ in range(size))
    return np.array(out, dtype=np.int64)


@lru_cache(maxsize=65536)
def peak_layers_in_flight(chunks: tuple[int, ...], p: int, rank: int, m: int) -> int:
    """Most layer-micro-batches of activations stage `rank` holds at once in a step of m micro-batches, for a stage
    whose chunks hold `chunks` layers (module docstring): after W + 1 forwards and j backwards, before backward j."""
    v = len(chunks)
    sizes = np.asarray(chunks, dtype=np.int64)
    order = forward_chunks(m, v, p)
    done_fwd = np.concatenate([[0], np.cumsum(sizes[order])])            # layers forwarded after k passes
    done_bwd = np.concatenate([[0], np.cumsum(sizes[v - 1 - order])])    # layers freed after k backwards
    total, w = m * v, int(warmup_forwards(p, rank, v, m))
    if w == total:
        return int(done_fwd[total])
    j = np.arange(total - w)
    return int((done_fwd[w + 1 + j] - done_bwd[j]).max())


def _stage_moe_counts(moe_mask: np.ndarray, pp: int, v: int, first: int, middle: int, last: int) -> np.ndarray:
    """MoE layers on each of the pp stages, with layers assigned to chunks in order: round r of the interleaved
    schedule gives stage s its r-th chunk (chunk_layers)."""
    chunks = [chunk_layers(first, v, "first")] + [chunk_layers(middle, v, "middle")] * (pp - 2)
    chunks += [chunk_layers(last, v, "last")] if pp > 1 else []
    counts = np.zeros(pp, dtype=np.int64)
    pos = 0
    for r in range(v):
        for s in range(pp):
            counts[s] += moe_mask[pos:pos + chunks[s][r]].sum()
            pos += chunks[s][r]
    return counts


def stages_of(n_layers: int, moe_mask: tuple[bool, ...], pp: np.ndarray, v: np.ndarray, first: np.ndarray,
              last: np.ndarray, m: np.ndarray) -> dict[str, Stage]:
    """The first stage, the heaviest middle stage (the second: the most micro-batches in flight, with the most MoE
    layers of any middle stage) and the last stage of every layout (first/last stage layers as arrays, -1 where
    unset; m micro-batches per step). For pp == 1 all three are the single stage; for pp == 2 the middle stands for
    no stage and repeats the first.

    Exact per unique (pp, v, first, last) split: a search has few distinct splits."""
    mask = np.asarray(moe_mask, dtype=bool)
    key = ((pp.astype(np.int64) * 4096 + v) * 65536 + (first + 1)) * 65536 + (last + 1)   # one int per split
    uniq_keys, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    uniq = np.stack([uniq_keys // (4096 * 65536 * 65536), uniq_keys // (65536 * 65536) % 4096,
                     uniq_keys // 65536 % 65536 - 1, uniq_keys % 65536 - 1])
    table = np.zeros((uniq.shape[1], 6), dtype=np.int64)   # first/middle/last layers, first/middle/last MoE layers
    for j in range(uniq.shape[1]):
        p_, v_, f_, l_ = (int(x) for x in uniq[:, j])
        f, mid, last_n = stage_layers(n_layers, p_, v_, None if f_ < 0 else f_, None if l_ < 0 else l_)
        if p_ == 1:
            moe_n = int(mask.sum())
            table[j] = (f, f, f, moe_n, moe_n, moe_n)
            continue
        counts = _stage_moe_counts(mask, p_, v_, f, mid, last_n)
        mid_moe = counts[1:-1].max() if p_ > 2 else counts[0]
        table[j] = (f, mid if p_ > 2 else f, last_n, counts[0], mid_moe, counts[-1])
    t = table[inverse]
    single = pp == 1
    ones = np.ones(len(pp), dtype=bool)
    p = pp.astype(float)
    rank = {"first": np.zeros(len(pp), dtype=np.int64), "middle": np.where(pp > 2, 1, 0),
            "last": np.maximum(pp - 1, 0)}
    layers = {name: t[:, i] for i, name in enumerate(STAGE_NAMES)}
    flight = {name: in_flight(pp, v, m, layers[name], rank[name], name) for name in STAGE_NAMES}
    flight["middle"] = np.where(pp > 2, flight["middle"], flight["first"])
    weight = {"first": 1 / p, "middle": np.where(pp > 2, (p - 2) / p, 0.0), "last": np.where(single, 0.0, 1 / p)}
    embedding = {"first": ones, "middle": single, "last": single}
    head = {"first": single, "middle": single, "last": ones}
    return {name: Stage(dense=t[:, i] - t[:, 3 + i], moe=t[:, 3 + i], embedding=embedding[name], head=head[name],
                        in_flight=flight[name], weight=weight[name], rank=rank[name])
            for i, name in enumerate(STAGE_NAMES)}


def in_flight(pp: np.ndarray, v: np.ndarray, m: np.ndarray, layers: np.ndarray, rank: np.ndarray,
              where: str) -> np.ndarray:
    """Micro-batches of a stage's activations alive at its peak (module docstring): layer-micro-batches alive over
    the stage's layers, 1 without a pipeline. Even chunks keep W + 1 chunks (at most m*v), v chunks to a micro-batch;
    uneven ones (`where` names the stage, for the place of its short chunks) are counted pass by pass."""
    out = np.where(pp > 1, np.minimum(warmup_forwards(pp, rank, v, m) + 1, m * v) / v, 1.0)
    uneven = np.flatnonzero((pp > 1) & (layers % v != 0))
    if len(uneven):
        cols = [np.asarray(x)[uneven].astype(np.int64) for x in (pp, v, m, layers, rank)]
        key = np.zeros(len(uneven), dtype=np.int64)
        for col in cols:                                   # one integer per (p, v, m, layers, rank); radices are small
            key = key * (int(col.max()) + 1) + col
        uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        per = np.array([peak_layers_in_flight(chunk_layers(int(n), int(v_), where), int(p_), int(r), int(m_)) / n
                        for p_, v_, m_, n, r in zip(*(c[first] for c in cols))])
        out[uneven] = per[inverse.reshape(-1)]
    return out


def pipeline_slots(pp: np.ndarray, v: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Chunk-slots on a step's critical path (module docstring): v*max(m, p) + min(m, p) - 1."""
    return v * np.maximum(m, pp) + np.minimum(m, pp) - 1
