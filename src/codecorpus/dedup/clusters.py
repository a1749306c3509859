"""Connected components of the duplicate graph, streaming over edge shards.

The edges (candidate pairs that passed verification, plus exact-hash groups)
are read one shard at a time; only a label array over the corpus's documents
is held: ``labels[i]`` points to a smaller (or the same) document index, so
following pointers ends at the component's smallest index, its root.

Per edge shard: find both roots (vectorised pointer chasing), point the larger
root at the smaller with ``np.minimum.at``, repeat until every edge of the
shard joins equal roots. A merge that loses a race in ``minimum.at`` is seen
again in the next pass, so the loop always terminates (each pass strictly
lowers some label). A final pointer-jumping pass makes every label its root.

Memory: 8 bytes per document in the corpus (the label array) plus one edge
shard at a time (16 bytes per edge, ~3x that while sorting/finding). A billion
edges therefore never sit in memory together: with the default 16 buckets a
shard holds ~1/16 of them (1 GB per billion edges, ~3 GB peak), and a corpus
of a billion documents needs 8 GB for the labels. This is the one
single-process step of dedup; its size grows with documents, not edges.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def _roots(labels: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    roots = labels[nodes]
    while True:
        nxt = labels[roots]
        if np.array_equal(nxt, roots):
            return roots
        roots = nxt


def union_edges(labels: np.ndarray, u: np.ndarray, v: np.ndarray) -> int:
    """Merge the components of every edge ``(u[i], v[i])`` into ``labels``; returns the passes taken."""
    passes = 0
    while len(u):
        passes += 1
        ru, rv = _roots(labels, u), _roots(labels, v)
        differ = ru != rv
        if not differ.any():
            break
        lo, hi = np.minimum(ru, rv)[differ], np.maximum(ru, rv)[differ]
        np.minimum.at(labels, hi, lo)
        u, v = u[differ], v[differ]
    return passes


def flatten(labels: np.ndarray) -> np.ndarray:
    """Point every label at its root (pointer jumping until stable)."""
    while True:
        nxt = labels[labels]
        if np.array_equal(nxt, labels):
            return labels
        labels = nxt


def connected_components(n_nodes: int, edge_shards: Iterable[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Root (smallest member index) of every node's component, streaming the edge shards.

    >>> connected_components(6, [(np.array([0, 3]), np.array([1, 4])), (np.array([4]), np.array([1]))]).tolist()
    [0, 0, 2, 0, 0, 5]
    """
    labels = np.arange(n_nodes, dtype=np.int64)
    for u, v in edge_shards:
        union_edges(labels, np.asarray(u, np.int64), np.asarray(v, np.int64))
    return flatten(labels)
