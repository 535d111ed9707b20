"""Collective communication times: alpha-beta model over a two-level topology (inside a node, across nodes).

A collective over n ranks moving S bytes costs steps*alpha + factor(n)*S/busbw with the ring factors of
nccl-tests (doc/PERFORMANCE.md): 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and
all-to-all. A group inside one node runs at the node link's achievable bus bandwidth; a group spanning
nodes with k members per node is limited by min(node link, k x per-GPU network), since NCCL spreads
rings over the k NICs (a node's NICs together carry the ring: 4x HDR per 8 A100 gives ~100 GB/s busbw,
nccl-tests #119). All-reduce takes the faster of ring and (double binary) tree, whose latency grows with
log2 n instead of n.
"""
from __future__ import annotations

import numpy as np

from engine.hardware import Hardware


def members_per_node(inner: np.ndarray, size: np.ndarray, gpus_per_node: int) -> np.ndarray:
    """Members of a group per node, for a group of `size` ranks at stride `inner` (ranks are packed tp-innermost)."""
    return np.maximum(1, np.gcd(inner * size, gpus_per_node) // inner)


def _link(n, k, hw: Hardware):
    inside = n <= k
    busbw = np.where(inside, hw.intra_busbw, np.minimum(hw.intra_busbw, k * hw.inter_busbw))
    alpha = np.where(inside, hw.intra_latency_s, hw.inter_latency_s)
    return busbw, alpha


def all_reduce_s(nbytes, n, k, hw: Hardware) -> np.ndarray:
    busbw, alpha = _link(n, k, hw)
    ring = 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / busbw
    tree = 2 * np.ceil(np.log2(np.maximum(n, 2))) * alpha + 2 * nbytes / busbw
    return np.where(n > 1, np.minimum(ring, tree), 0.0)


def all_gather_s(nbytes, n, k, hw: Hardware) -> np.ndarray:
    """Also the time of a reduce-scatter of the same (total) size; nbytes is the gathered size."""
    busbw, alpha = _link(n, k, hw)
    return np.where(n > 1, (n - 1) * alpha + (n - 1) / n * nbytes / busbw, 0.0)


reduce_scatter_s = all_gather_s


def all_to_all_s(nbytes, n, k, hw: Hardware) -> np.ndarray:
    """nbytes is what one rank holds before the exchange; (n-1)/n of it leaves the rank."""
    busbw, alpha = _link(n, k, hw)
    return np.where(n > 1, (n - 1) * alpha + (n - 1) / n * nbytes / busbw, 0.0)


def send_recv_s(nbytes, crosses_node, hw: Hardware) -> np.ndarray:
    """One point-to-point message (pipeline stage boundary, context-parallel ring step)."""
    bw = np.where(crosses_node, np.minimum(hw.intra_busbw, hw.inter_busbw), hw.intra_busbw)
    alpha = np.where(crosses_node, hw.inter_latency_s, hw.intra_latency_s)
    return alpha + nbytes / bw
