"""LSH banding: bands x rows chosen from the threshold, and band keys of a signature matrix.

Two documents become candidates when all ``rows`` values of at least one of
``bands`` bands agree, which happens with probability ``1 - (1 - J^r)^b``
for Jaccard ``J``. ``optimal_params`` picks ``(b, r)`` with ``b*r <= num_perm``
minimising ``w_fp * FP + w_fn * FN``, the areas under that S-curve left and
right of the threshold, exactly as datasketch's ``MinHashLSH`` does
(``_optimal_param``), so a datasketch user gets the same banding.

A band key is the band's index and its ``rows`` uint32 values, as raw bytes:
equal keys mean exactly equal bands (no hash collisions to filter out later).
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from codecorpus.dedup.shingles import fmix64


def _integrate(f, a: float, b: float, steps: int = 1000) -> float:
    """Trapezoid rule on ``steps`` intervals (datasketch's ``_integration`` uses the same)."""
    xs = np.linspace(a, b, steps + 1)
    ys = f(xs)
    return float(np.sum((ys[1:] + ys[:-1]) * (xs[1] - xs[0]) / 2))


def false_positive_area(threshold: float, b: int, r: int) -> float:
    return _integrate(lambda s: 1 - (1 - s ** float(r)) ** float(b), 0.0, threshold)


def false_negative_area(threshold: float, b: int, r: int) -> float:
    return _integrate(lambda s: 1 - (1 - (1 - s ** float(r)) ** float(b)), threshold, 1.0)


@functools.lru_cache(maxsize=64)
def optimal_params(threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5) -> tuple[int, int]:
    """``(bands, rows)`` minimising the weighted false positive + false negative areas.

    >>> optimal_params(0.7, 256)
    (25, 10)
    >>> optimal_params(0.5, 128)
    (25, 5)
    """
    best, best_err = (1, num_perm), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            err = fp_weight * false_positive_area(threshold, b, r) + fn_weight * false_negative_area(threshold, b, r)
            if err < best_err:
                best, best_err = (b, r), err
    return best


def candidate_probability(jaccard: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """Probability that two documents with this Jaccard share at least one band."""
    return 1 - (1 - np.asarray(jaccard, float) ** rows) ** bands


def band_keys(sig: np.ndarray, band: int, rows: int) -> tuple[pa.Array, np.ndarray]:
    """Raw-bytes keys of one band for every row of ``sig``, and a 64-bit hash of each (for routing).

    The key is ``band`` (2 bytes, big-endian) followed by the band's uint32 values (little-endian).
    """
    n = sig.shape[0]
    values = np.ascontiguousarray(sig[:, band * rows : (band + 1) * rows])
    width = 2 + 4 * rows
    raw = np.empty((n, width), np.uint8)
    raw[:, 0], raw[:, 1] = band >> 8, band & 0xFF
    raw[:, 2:] = values.view(np.uint8).reshape(n, 4 * rows)
    keys = pa.Array.from_buffers(pa.binary(width), n, [None, pa.py_buffer(raw.tobytes())])
    with np.errstate(over="ignore"):
        mixed = np.full(n, np.uint64(band + 1), np.uint64)
        for j in range(rows):
            mixed = fmix64(mixed ^ values[:, j].astype(np.uint64))
    return keys, mixed
