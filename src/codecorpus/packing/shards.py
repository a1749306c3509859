"""Which packed shards become one emitted shard, so none is too small for a launcher's split.

Packing is a map over input shards (or repository buckets), so a small input
shard, often the last one, makes a small packed shard; one holding 3 packed
sequences gives Megatron's ``--split 99,1,0`` an empty validation split, and
Megatron never finishes building it (``manifests/splits.py`` has the arithmetic
and the floor). ``merge_groups`` plans the cure: consecutive shards are grouped,
in shard order, until a group holds ``floor`` packed sequences; a shard that
reaches the floor alone stays alone, and a last group below the floor joins the
one before it. The plan reads only the packed sequence counts in shard order,
which the data and the recipe fix, so it is the same for any worker count.
"""

from __future__ import annotations

from collections.abc import Sequence


def merge_groups(sequences: Sequence[int], floor: int) -> list[list[int]]:
    """Consecutive groups of shard positions, each holding >= ``floor`` packed sequences.

    The only exception is a whole set below the floor: then it is one group.

    >>> merge_groups([600, 3, 700, 40, 10], floor=501)
    [[0], [1, 2, 3, 4]]
    >>> merge_groups([200, 200, 200, 200], floor=501)
    [[0, 1, 2, 3]]
    >>> merge_groups([20, 30], floor=501)
    [[0, 1]]
    """
    if floor < 1:
        raise ValueError(f"floor must be at least 1, got {floor}")
    groups: list[list[int]] = []
    current: list[int] = []
    held = 0
    for position, n in enumerate(sequences):
        current.append(position)
        held += n
        if held >= floor:
            groups.append(current)
            current, held = [], 0
    if current and groups:
        groups[-1].extend(current)
    elif current:
        groups.append(current)
    return groups
