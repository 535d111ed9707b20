"""Collective communication times, dependent on message size and on how many ranks and nodes take part.

time = latency(ranks, nodes) + factor(n) * bytes / bus bandwidth, with the ring factors of nccl-tests
(doc/PERFORMANCE.md): 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter. The latency follows
NCCL's own tuning model (src/graph/tuning.cc, NCCL 2.19, commit b647562): a ring collective pays a base latency plus
one step latency per ring step, n-1 steps for all-gather/reduce-scatter and 2(n-1) for all-reduce, the steps that
cross nodes at the network's step latency and the others at the scale-up link's; all-reduce can instead take the
(double binary) tree, 2((n/nodes - 1) intra + log2(nodes) inter) steps at half the bus bandwidth. Small messages
and large groups are therefore latency-bound: a 384-rank ring over 48 nodes costs ~1.8 ms before any byte moves.

Bus bandwidth: a group inside one scale-up domain runs at that link's achievable bus bandwidth; a group spanning
nodes with k members per node at min(scale-up link, k x per-GPU network), since NCCL spreads its rings over the k
NICs (4x HDR per 8 A100 gives ~100 GB/s busbw, nccl-tests #119). All-to-all is different: every rank's data goes to
every other rank, so the bytes for other nodes leave through the rank's own NIC, not the node's k NICs together.
"""
from __future__ import annotations

import numpy as np

from engine.physics.hardware import Hardware


def placed_domain(gpus_per_node: int) -> int:
    """The ranks of one scale-up domain a job's power-of-two groups are placed in: the domain itself when its size
    is a power of two, else the largest power of two within it. An NVL72 rack (18 trays of 4 GPUs) runs 64-GPU groups
    in one rack (NVIDIA's GB200/GB300 NeMo runs use multiples of 64 GPUs, 16 trays per rack), not 8 of them, which
    is what the greatest common divisor of 64 and 72 would say."""
    return 1 << (int(gpus_per_node).bit_length() - 1)


def members_per_node(inner: np.ndarray, size: np.ndarray, gpus_per_node: int) -> np.ndarray:
    """Members of a group per node, for a group of `size` ranks at stride `inner` (ranks are packed tp-innermost)."""
    return np.maximum(1, np.minimum(size, np.gcd(inner * size, placed_domain(gpus_per_node)) // inner))


def _ring_bw(k, n, hw: Hardware):
    inside = n <= k
    return np.where(inside, hw.intra_busbw, np.minimum(hw.intra_busbw, k * hw.inter_busbw))


def _ring_latency(steps_per_rank: int, n, k, hw: Hardware):
    """NCCL tuning.cc ring latency: base + (steps - inter-node steps) x intra + inter-node steps x inter."""
    nodes = np.maximum(1, np.ceil(n / k))
    steps = steps_per_rank * (n - 1)
    inter = steps_per_rank * (nodes - 1)
    return hw.collective_base_latency_s + (steps - inter) * hw.intra_latency_s + inter * hw.inter_latency_s


def _tree_latency(n, k, hw: Hardware):
    """NCCL tuning.cc double binary tree: base + 2 ((ranks per node - 1) x intra + log2(nodes) x inter)."""
    nodes = np.maximum(1, np.ceil(n / k))
    return hw.collective_base_latency_s + 2 * ((np.minimum(n, k) - 1) * hw.intra_latency_s
                                               + np.log2(nodes) * hw.inter_latency_s)


class Collective:
    """One collective's time model: `terms(n, k, hw)` gives each algorithm NCCL may pick as (latency seconds, seconds
    per byte) for groups of n ranks with k per node. Called as collective(nbytes, n, k, hw) it is the seconds of
    nbytes; on(n, k, hw) keeps the terms for several message sizes on the same groups (buckets, their last one)."""

    def __init__(self, terms):
        self.terms = terms

    def on(self, n, k, hw: Hardware) -> OnGroups:
        return OnGroups(self.terms(n, k, hw), np.asarray(n) > 1)

    def __call__(self, nbytes, n, k, hw: Hardware) -> np.ndarray:
        return self.on(n, k, hw).seconds(nbytes)


class OnGroups:
    """A collective's algorithms on given groups: the fastest one's seconds for a message size, 0 on one rank."""

    def __init__(self, terms, active):
        self.terms, self.active = terms, active

    def seconds(self, nbytes) -> np.ndarray:
        (latency, per_byte), *others = self.terms
        t = latency + per_byte * nbytes
        for latency, per_byte in others:
            t = np.minimum(t, latency + per_byte * nbytes)
        return np.where(self.active, t, 0.0)

    def in_calls_s(self, nbytes, calls) -> np.ndarray:
        """nbytes issued as `calls` separate calls (buckets, per-module gathers): every call pays the library's
        latency, the bytes move once. calls may be fractional: a bucket larger than the unit it is counted per (a
        layer) fires once every several units, so a unit pays that share of one latency:
        time = calls x latency + bytes / bus bandwidth."""
        return self.seconds(nbytes) + (calls - 1.0) * self.seconds(0.0)


def _all_reduce_terms(n, k, hw: Hardware):
    """Ring: 2(n-1) steps, 2(n-1)/n of the bytes over the bus bandwidth; (double binary) tree: its latency, twice
    the bytes at the bus bandwidth."""
    bw = _ring_bw(k, n, hw)
    return (_ring_latency(2, n, k, hw), 2 * (n - 1) / n / bw), (_tree_latency(n, k, hw), 2 / bw)


all_reduce_s = Collective(_all_reduce_terms)


def step_latencies_from(latency_s: float, op: str, n: int, k: int, hw: Hardware) -> tuple[str, float]:
    """Invert the latency model: the per-step latency (intra-node for a one-node group, else across nodes, with the
    other kind at hw's figure) that gives a measured collective latency. Returns (which, seconds per step)."""
    nodes = max(1, -(-n // k))
    base = hw.collective_base_latency_s
    per_rank = 2 if op == "all_reduce" else 1
    if nodes == 1:
        return "intra", (latency_s - base) / (per_rank * (n - 1))
    steps, inter = per_rank * (n - 1), per_rank * (nodes - 1)
    ring = (latency_s - base - (steps - inter) * hw.intra_latency_s) / inter
    if op != "all_reduce":
        return "inter", ring
    tree = (latency_s - base - 2 * (min(n, k) - 1) * hw.intra_latency_s) / (2 * np.log2(nodes))
    tree_default = float(_tree_latency(np.array(n), np.array(k), hw))
    ring_default = float(_ring_latency(2, np.array(n), np.array(k), hw))
    return "inter", tree if tree_default < ring_default else ring       # the algorithm the model picks at these sizes


def _all_gather_terms(n, k, hw: Hardware):
    """Ring: n-1 steps, (n-1)/n of the (gathered) bytes over the bus bandwidth."""
    return ((_ring_latency(1, n, k, hw), (n - 1) / n / _ring_bw(k, n, hw)),)


all_gather_s = Collective(_all_gather_terms)   # nbytes: the gathered size; a reduce-scatter of that total size takes
                                               # the same time (the same ring steps and bytes), so it is timed by it


def all_to_all_s(nbytes, n, k, hw: Hardware) -> np.ndarray:
    """nbytes is what one rank holds before the exchange; it keeps 1/n, sends (k-1)/n to ranks in its node over
    the scale-up link and (n-k)/n to other nodes through its own network interface."""
    k = np.minimum(k, n)
    inside = nbytes * (k - 1) / n / hw.intra_busbw
    outside = nbytes * (n - k) / n / hw.inter_busbw
    latency = hw.collective_base_latency_s + np.where(n > k, hw.inter_latency_s, hw.intra_latency_s)
    return np.where(n > 1, latency + np.maximum(inside, outside), 0.0)


def send_recv_s(nbytes, crosses_node, hw: Hardware) -> np.ndarray:
    """One point-to-point message (pipeline stage boundary, context-parallel ring step)."""
    bw = np.where(crosses_node, np.minimum(hw.intra_busbw, hw.inter_busbw), hw.intra_busbw)
    alpha = np.where(crosses_node, hw.inter_latency_s, hw.intra_latency_s)
    return alpha + nbytes / bw


def overlapped_s(compute, comm, slowdown: float) -> tuple[np.ndarray, np.ndarray]:
    """(window, exposed) seconds when `comm` runs concurrently with `compute`: the compute slows down by `slowdown`
    while the collective runs beside it (its kernels take SMs and memory bandwidth), and whatever part of the
    collective outlasts the compute is exposed. exposed = window - compute, the price of the communication."""
    window = np.maximum(compute + slowdown * np.minimum(compute, comm), comm)
    return window, window - compute
