"""Shingles, MinHash engines against datasketch, and LSH banding against datasketch's optimum."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
from datasketch import MinHash
from datasketch.lsh import _optimal_param

from codecorpus.dedup import lsh, minhash
from codecorpus.dedup.shingles import shingle_texts

SOURCE = re.sub(r"\n\s*\n", "\n", Path(re.__file__).read_text(encoding="utf-8"))


def _lines_variant(seed: int, frac: float) -> str:
    rng = np.random.default_rng(seed)
    lines = SOURCE.splitlines()[:400]
    for i in rng.choice(len(lines), int(len(lines) * frac), replace=False):
        lines[i] = f"edited_{seed}_{i} = {i}"
    return "\n".join(lines)


def test_tokens_match_the_reference_regex_and_ignore_whitespace():
    texts = ["foo_bar(x1, 2.5) != ÿname", "foo_bar ( x1 ,2.5)!=  ÿname\n"]
    s = shingle_texts(texts, ngram=3)
    assert s.counts().tolist() == [9, 9]  # foo_bar ( x1 , 2 . 5 ) ! = ÿname: 11 tokens, 9 trigrams
    assert np.array_equal(s.hashes[: s.offsets[1]], s.hashes[s.offsets[1] :])


def test_shingles_do_not_depend_on_batching():
    texts = [_lines_variant(i, 0.1) for i in range(5)]
    whole = shingle_texts(pa.array(texts, pa.large_string()))
    for i, t in enumerate(texts):
        alone = shingle_texts([t])
        assert np.array_equal(alone.hashes, whole.hashes[whole.offsets[i] : whole.offsets[i + 1]])
    sliced = shingle_texts(pa.array(texts, pa.large_string()).slice(2, 2))
    assert np.array_equal(sliced.hashes, whole.hashes[whole.offsets[2] : whole.offsets[4]])


def test_numpy_engine_is_bit_identical_to_datasketch():
    s = shingle_texts([_lines_variant(1, 0.2), "a = 1"])
    sig = minhash.signatures(s, 128, seed=9, engine="numpy")
    for d in range(2):
        values = (s.hashes[s.offsets[d] : s.offsets[d + 1]] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        ref = MinHash(num_perm=128, seed=9, hashfunc=lambda x: x)
        ref.update_batch([int(v) for v in values])
        assert np.array_equal(ref.hashvalues, sig[d])


def test_rensa_engine_estimates_agree_with_datasketch_statistically():
    """Over many pairs, both engines' estimates sit on the true Jaccard with MinHash's variance."""
    base = _lines_variant(0, 0.0)
    variants = [_lines_variant(i, f) for i, f in enumerate(np.linspace(0.02, 0.6, 30), start=1)]
    s = shingle_texts([base, *variants])
    fast = minhash.signatures(s, 256, seed=4, engine="rensa")
    ref = minhash.signatures(s, 256, seed=4, engine="numpy")  # == datasketch (test above)
    sets = [set(s.hashes[s.offsets[d] : s.offsets[d + 1]].tolist()) for d in range(len(variants) + 1)]
    true = np.array([len(sets[0] & x) / len(sets[0] | x) for x in sets[1:]])
    est_fast = minhash.estimated_jaccard(fast[0], fast[1:])
    est_ref = minhash.estimated_jaccard(ref[0], ref[1:])
    sd = np.sqrt(true * (1 - true) / 256)
    for est in (est_fast, est_ref):
        z = (est - true) / np.maximum(sd, 1e-3)
        assert np.abs(z).max() < 4.5
        assert abs(z.mean()) < 4.5 / np.sqrt(len(z)) * 2  # no bias beyond sampling noise
    assert np.abs(est_fast - est_ref).mean() < 0.05


def test_empty_documents_have_empty_rows_and_seeds_matter():
    s = shingle_texts(["", "x = 1", "  \n"])
    sig = minhash.signatures(s, 16, seed=1)
    assert (sig[0] == minhash.EMPTY).all() and (sig[2] == minhash.EMPTY).all()
    assert not np.array_equal(sig[1], minhash.signatures(s, 16, seed=2)[1])
    assert np.array_equal(sig, minhash.signatures(s, 16, seed=1))


def test_banding_matches_datasketch_and_keys_are_exact_band_bytes():
    for threshold, num_perm in [(0.7, 256), (0.5, 128), (0.85, 64), (0.3, 32)]:
        assert lsh.optimal_params(threshold, num_perm) == _optimal_param(threshold, num_perm, 0.5, 0.5)
    sig = np.array([[1, 2, 3, 4], [1, 2, 9, 4], [1, 2, 3, 4]], np.uint32)
    keys, routes = lsh.band_keys(sig, 0, 2)
    assert keys[0] == keys[1] == keys[2] and routes[0] == routes[1]
    keys1, _ = lsh.band_keys(sig, 1, 2)
    assert keys1[0] != keys1[1] and keys1[0] == keys1[2] and keys1[0] != keys[0]
    assert lsh.candidate_probability(0.8, 25, 10) > 0.9 and lsh.candidate_probability(0.3, 25, 10) < 0.01
