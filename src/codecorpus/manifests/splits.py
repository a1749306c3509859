"""Megatron's ``--split`` arithmetic, and the shard floor it implies.

Megatron-Core splits every member of a ``--data-path`` blend on its own. For a
member with ``n`` elements and ``--split 99,1,0`` it normalizes the weights
(``parse_and_normalize_split``), turns them into book-ends
``[(0, .99), (.99, 1.0), None]`` (``convert_split_vector_to_split_matrix``) and
gives split ``i`` the elements ``round(lo * n) .. round(hi * n)``
(``BlendedMegatronDatasetBuilder._build_megatron_dataset_splits``, Python's
round, half to even). A split with a non-zero weight that gets no element
never finishes building: ``GPTDataset._get_num_epochs`` adds epochs of zero
tokens until it has the requested samples. So every member must hold enough
elements that every split of the launch command gets one.

For ``99,1,0`` that is 51 (50 gives the validation split ``round(49.5) = 50 ..
50``: nothing); for ``969,30,1`` and ``949,50,1`` it is 501 (the 0.1 % test
split needs ``0.001 * n > 0.5``). ``SHARD_FLOOR`` is the largest over
``LAUNCH_SPLITS``: 501. Every packed set emits shards of at least that many
packed sequences, merging a smaller shard into its neighbour; a set with fewer
in all is one shard, and its manifest says which splits it serves.

GPTDataset's elements are idx *sequences* (our document segments); the floor
counts *packed sequences*, which each hold at least one segment, so it holds for
GPTDataset and for a launcher that splits a pre-packed set by packed sequence.
Pure Python: importing this never pulls in megatron.
"""

from __future__ import annotations

import itertools
import math
import re

LAUNCH_SPLITS = ("99,1,0", "98,2,0", "969,30,1", "949,50,1", "100,0,0")
"""The ``--split`` values of the usual Megatron launch scripts (examples, NeMo defaults)."""

SPLIT_NAMES = ("train", "valid", "test")


def split_matrix(split: str) -> list[tuple[float, float] | None]:
    """Megatron's book-ends of ``split``: ``(lo, hi)`` per split, None for a zero weight.

    The float arithmetic is Megatron's own (numpy-free but the same IEEE sums),
    so the rounding below lands on the same element as Megatron's.

    >>> split_matrix("99,1,0")
    [(0, 0.99), (0.99, 1.0), None]
    """
    weights = [float(w) for w in re.findall(r"[.0-9]+", split)]
    weights += [0.0] * (len(SPLIT_NAMES) - len(weights))
    if len(weights) != len(SPLIT_NAMES) or not sum(weights) > 0:
        raise ValueError(f"split {split!r}: expected up to 3 non-negative weights, not all 0 (e.g. 99,1,0)")
    total = sum(weights)  # left to right, as numpy.sum adds three float64s
    ends: list[float] = [0]
    for w in weights:
        ends.append(ends[-1] + w / total)
    return [(lo, hi) if hi > lo else None for lo, hi in itertools.pairwise(ends)]


def elements_per_split(n: int, split: str) -> list[int | None]:
    """How many of a blend member's ``n`` elements Megatron gives each split (None: not built).

    >>> elements_per_split(50, "99,1,0"), elements_per_split(51, "99,1,0")
    ([50, 0, None], [50, 1, None])
    """
    return [
        None if bounds is None else round(bounds[1] * float(n)) - round(bounds[0] * float(n))
        for bounds in split_matrix(split)
    ]


def serves(n: int, split: str) -> bool:
    """True when a member of ``n`` elements gives every split with a weight at least one."""
    return all(count is None or count > 0 for count in elements_per_split(n, split))


def min_elements(split: str) -> int:
    """The smallest ``f`` such that every member of ``f`` or more elements serves ``split``.

    Beyond ``2 / w`` elements (``w`` the smallest non-zero weight) a split of
    weight ``w`` spans more than one element whatever the rounding, so the
    search stops there.

    >>> min_elements("99,1,0"), min_elements("969,30,1"), min_elements("100,0,0")
    (51, 501, 1)
    """
    widths = [hi - lo for lo, hi in filter(None, split_matrix(split))]
    bound = math.ceil(2 / min(widths)) + 2
    failing = [n for n in range(1, bound + 1) if not serves(n, split)]
    return failing[-1] + 1 if failing else 1


SHARD_FLOOR = 501
"""Packed sequences every emitted shard holds: all of ``LAUNCH_SPLITS`` get one in every shard.

It is ``max(min_elements(s) for s in LAUNCH_SPLITS)``, written out so that no importing
process runs that search; a test holds the two equal.
"""


def split_statement(member_sequences: list[int]) -> dict[str, object]:
    """What a set's blend can serve, for its manifest: the floor, its smallest member, the splits.

    ``min_split_weight`` is ``1 / smallest``: a split whose normalized weight is
    above it gets a sequence of every member wherever it sits in the split string.

    >>> split_statement([75])["serves"]["99,1,0"], split_statement([75])["serves"]["969,30,1"]
    (True, False)
    """
    smallest = min(member_sequences) if member_sequences else 0
    return {
        "floor": SHARD_FLOOR,
        "smallest_member_sequences": smallest,
        "min_split_weight": round(1 / smallest, 6) if smallest else None,
        "serves": {s: bool(smallest) and serves(smallest, s) for s in LAUNCH_SPLITS},
    }


def split_problems(members: dict[str, int], split: str) -> list[str]:
    """One message per blend member (prefix -> packed sequences) that leaves a split of ``split`` empty."""
    problems = []
    for prefix, n in sorted(members.items()):
        counts = elements_per_split(n, split)
        empty = [SPLIT_NAMES[i] for i, c in enumerate(counts) if c == 0]
        if empty:
            problems.append(
                f"shard {prefix}: {n} packed sequences give the {'/'.join(empty)} split of --split {split} "
                f"no sequence, and Megatron's GPTDataset would never finish building it; this set serves "
                f"splits whose every non-zero weight is above {1 / n:.6f} of the total "
                f"(at least {min_elements(split)} sequences per shard serve {split})"
            )
    return problems
