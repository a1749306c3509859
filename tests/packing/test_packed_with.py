"""A set manifest names the tokenizer its shard tasks packed with, from the tasks' own
fingerprints; the driver loads the tokenizer only for shards that sent none."""

from __future__ import annotations

import pytest

from codecorpus.packing import bodies as pack_bodies
from codecorpus.pipeline.bodies import InvariantError
from codecorpus.tokenize.config import TokenizerConfig
from codecorpus.tokenize.tokenizer import load_tokenizer

GPT2 = TokenizerConfig(builtin="gpt2")


def _shard(fingerprint: dict | None) -> dict:
    return {"set": {"record": None, **({"tokenizer": fingerprint} if fingerprint is not None else {})}}


def test_the_shards_fingerprint_is_the_sets():
    fingerprint = {"name": "t", "files": {}, "vocab_size": 7, "special_tokens": {}, "eos_id": 6}
    assert pack_bodies.packed_with([_shard(fingerprint), _shard(dict(fingerprint))], GPT2) == fingerprint


def test_shards_packed_with_different_tokenizers_stop_the_set():
    one = {"name": "t", "files": {}, "vocab_size": 7, "special_tokens": {}, "eos_id": 6}
    with pytest.raises(InvariantError, match="different tokenizers"):
        pack_bodies.packed_with([_shard(one), _shard({**one, "vocab_size": 8})], GPT2)


def test_a_shard_without_one_has_the_driver_load_the_tokenizer():
    fingerprint = load_tokenizer(GPT2).fingerprint()
    assert pack_bodies.packed_with([_shard(fingerprint), _shard(None)], GPT2) == fingerprint
    assert pack_bodies.packed_with([], GPT2) == fingerprint
