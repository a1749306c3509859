"""MinHash signatures of a batch of documents from their flat shingle hashes.

Two engines, one contract (``num_perm`` uint32 values per document, seeded
from the recipe seed, empty documents get all-``EMPTY`` rows):

- ``rensa`` (default): rensa's ``RMinHash`` kernel (Rust) over the flat
  uint64 shingle buffer and row offsets, no Python object per token. The
  kernel is a few percent of the signature step; the matrix leaves through
  ``to_rows`` (one list per document, the only exit rensa 0.5 has), which
  costs about as much again.
- ``numpy``: datasketch's ``affine32`` scheme re-done in numpy: the low 32
  bits of each shingle hash, MurmurHash3's fmix32, then ``a*h + b mod 2^32``
  with datasketch's own permutation parameters for the seed. Bit-for-bit
  equal to ``datasketch.MinHash(num_perm, seed).update_batch`` fed the same
  32-bit values (the tests check it); far slower than rensa, kept as the
  reference the fast engine is checked against.

rensa parallelises with rayon; a Ray task owns one CPU, so the pool is
pinned to one thread (``RAYON_NUM_THREADS``) unless the caller set it.
"""

from __future__ import annotations

import itertools
import os
from typing import Literal

import numpy as np

from codecorpus.dedup.shingles import Shingles

os.environ.setdefault("RAYON_NUM_THREADS", "1")

EMPTY = np.uint32(0xFFFFFFFF)
"""Signature value of a document with no shingles (nothing to compare; never a candidate)."""

Engine = Literal["rensa", "numpy"]
_NUMPY_CHUNK_CELLS = 1 << 22  # shingles x permutations per numpy step (16 MiB of uint32)


def signatures(shingles: Shingles, num_perm: int, seed: int, engine: Engine = "rensa") -> np.ndarray:
    """``(documents, num_perm)`` uint32 MinHash matrix; rows of empty documents are all ``EMPTY``."""
    if engine == "rensa":
        sig = _rensa_signatures(shingles, num_perm, seed)
    else:
        sig = _numpy_signatures(shingles, num_perm, seed)
    sig[shingles.counts() == 0] = EMPTY
    return sig


def _rensa_signatures(shingles: Shingles, num_perm: int, seed: int) -> np.ndarray:
    import rensa

    n_docs = len(shingles.offsets) - 1
    if n_docs == 0:
        return np.zeros((0, num_perm), np.uint32)
    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(
        np.ascontiguousarray(shingles.hashes, np.uint64), shingles.offsets.astype(np.uint64), num_perm, seed
    )
    # to_rows is the matrix's only exit (a list per row); fromiter skips numpy's nested-list parsing
    flat = np.fromiter(itertools.chain.from_iterable(matrix.to_rows()), np.uint32, n_docs * num_perm)
    return flat.reshape(n_docs, num_perm)


def datasketch_permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` exactly as ``datasketch.MinHash(num_perm, seed)`` draws them for ``affine32``."""
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def fmix32(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def _numpy_signatures(shingles: Shingles, num_perm: int, seed: int) -> np.ndarray:
    a, b = datasketch_permutations(num_perm, seed)
    offsets = shingles.offsets
    n_docs = len(offsets) - 1
    out = np.full((n_docs, num_perm), EMPTY, np.uint32)
    with np.errstate(over="ignore"):
        hv = fmix32((shingles.hashes & np.uint64(0xFFFFFFFF)).astype(np.uint32))
        step = max(1, _NUMPY_CHUNK_CELLS // num_perm)
        d0 = 0
        while d0 < n_docs:
            d1 = int(min(n_docs, max(d0 + 1, np.searchsorted(offsets, offsets[d0] + step, side="right") - 1)))
            lo, hi = offsets[d0], offsets[d1]
            if hi > lo:
                phv = hv[lo:hi, None] * a[None, :] + b[None, :]
                starts = offsets[d0:d1] - lo
                nonempty = np.diff(offsets[d0 : d1 + 1]) > 0
                mins = np.minimum.reduceat(phv, np.minimum(starts, hi - lo - 1), axis=0)
                out[d0:d1][nonempty] = mins[nonempty]
            d0 = d1
    return out


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Share of equal signature values, row by row (the MinHash Jaccard estimate)."""
    return (sig_a == sig_b).mean(axis=-1)
