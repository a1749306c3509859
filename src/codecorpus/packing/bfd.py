"""Best-Fit-Decreasing bin packing over a capacity-indexed segment tree.

Best-Fit-Decreasing (Ding et al. 2024, "Fewer Truncations Improve Language
Modeling") packs documents into fixed-length sequences without cutting them:
take items longest first, and put each into the open bin whose remaining space
is the *smallest* that still holds it, opening a new bin only when none does.
Long items go in while bins are empty and short ones fill the gaps, so padding
stays close to the lower bound.

Done naively, "the tightest bin that fits" scans every open bin: O(N * bins).
Here bins are indexed by their remaining capacity instead. A segment tree has
one leaf per possible remaining capacity 0..C; leaf r is set while some bin has
exactly r tokens left, and each set leaf keeps a min-heap of those bin ids.
Finding the best bin for an item of length L is "the first set leaf >= L": walk
up from leaf L until a right sibling subtree has a set leaf, then walk down to
its leftmost set leaf. Placing the item moves one bin from leaf r to leaf r - L.
Each step is O(log C), so packing N items costs O(N log N) for the sort plus
O(N log C) for the placements (C = 8192: 13 levels), independent of how many
bins are open. Ties are deterministic: equal lengths keep input order, equally
tight bins go to the lowest bin index.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np


def best_fit_decreasing(lengths: Sequence[int] | np.ndarray, capacity: int) -> list[list[int]]:
    """Pack items of ``lengths`` into bins of ``capacity``; bins of item indices.

    Bins come in creation order, items within a bin in placement order (so
    longest first). Items longer than ``capacity`` are a ``ValueError``: the
    caller splits them first.

    >>> best_fit_decreasing([3, 5, 2, 4], capacity=7)
    [[1, 2], [3, 0]]
    """
    lens = np.asarray(lengths, dtype=np.int64)
    if lens.ndim != 1:
        raise ValueError(f"lengths must be one-dimensional, got shape {lens.shape}")
    if capacity <= 0:
        raise ValueError(f"capacity must be positive, got {capacity}")
    if lens.size and (int(lens.max()) > capacity or int(lens.min()) < 0):
        worst = int(lens.max()) if int(lens.max()) > capacity else int(lens.min())
        raise ValueError(
            f"item of length {worst} cannot go into bins of capacity {capacity}: "
            "split items longer than the capacity before packing"
        )
    order = np.argsort(-lens, kind="stable")  # decreasing, ties by index ascending
    tree = _RemainingCapacityTree(capacity)
    bins_left: dict[int, list[int]] = {}  # remaining capacity -> min-heap of bin ids
    bins: list[list[int]] = []
    for item, length in zip(order.tolist(), lens[order].tolist(), strict=True):
        left = tree.first_set_at_least(length)
        if left < 0:
            bin_id = len(bins)
            bins.append([item])
            left = capacity
        else:
            heap = bins_left[left]
            bin_id = heapq.heappop(heap)
            if not heap:
                del bins_left[left]
                tree.clear(left)
            bins[bin_id].append(item)
        left -= length
        heap = bins_left.get(left)
        if heap is None:
            bins_left[left] = [bin_id]
            tree.set(left)
        else:
            heapq.heappush(heap, bin_id)
    return bins


class _RemainingCapacityTree:
    """Set of integers 0..capacity with O(log C) insert, remove and successor query.

    A perfect binary tree stored in a flat list (root at 1, children of i at 2i
    and 2i + 1, leaves at ``size + r``); a node is true when any leaf below it
    is set.
    """

    def __init__(self, capacity: int) -> None:
        self.size = 1 << max(capacity, 1).bit_length()  # > capacity: leaves 0..capacity fit
        self.nodes = [False] * (2 * self.size)

    def set(self, value: int) -> None:
        nodes = self.nodes
        i = self.size + value
        while i and not nodes[i]:  # stop at the first ancestor that was already set
            nodes[i] = True
            i >>= 1

    def clear(self, value: int) -> None:
        nodes = self.nodes
        i = self.size + value
        nodes[i] = False
        i >>= 1
        while i and not (nodes[2 * i] or nodes[2 * i + 1]):
            nodes[i] = False
            i >>= 1

    def first_set_at_least(self, value: int) -> int:
        """Smallest set value >= ``value``, or -1 if there is none."""
        nodes = self.nodes
        i = self.size + value
        if nodes[i]:
            return value
        # climb until i is a left child whose right sibling holds a set leaf
        while i > 1 and (i & 1 or not nodes[i + 1]):
            i >>= 1
        if i <= 1:
            return -1
        i += 1
        while i < self.size:  # descend to the leftmost set leaf
            i = 2 * i if nodes[2 * i] else 2 * i + 1
        return i - self.size
