"""The tokenize stage: a map annotator (``tokens``, ``num_tokens``), and the run's tokenizer."""

from __future__ import annotations

import functools
from typing import Any

from codecorpus.model import config_hash
from codecorpus.pipeline.spec import StageRun, StageSpec
from codecorpus.storage.atomic import atomic_write_bytes
from codecorpus.storage.mirror import ensure_local
from codecorpus.tokenize.config import TokenizeConfig, TokenizerConfig


def set_tokenizer(recipe: Any) -> TokenizerConfig:
    """The recipe's tokenizer with the tokens its output sets need (FIM, repository markers)."""
    from codecorpus.tokenize.tokenizer import with_set_tokens

    return with_set_tokens(recipe.tokenizer, recipe.outputs)


def run_tokenizer(run: StageRun) -> TokenizerConfig:
    """``set_tokenizer``; a ``train:`` tokenizer is trained once, on a worker, into
    RUN/tokenizer/ from the shards that tokenize reads."""
    from codecorpus.tokenize import training

    cfg = set_tokenizer(run.recipe)
    if cfg.train is None:
        return cfg
    path = run.run.tokenizer_dir / "tokenizer.json"
    meta = run.run.tokenizer_done
    corpus = run.upstream_of("tokenize")
    key = config_hash(run.hashes[corpus], cfg)
    if not (ensure_local(path).exists() and ensure_local(meta).exists() and meta.read_text() == key):
        parts = [run.run.part(corpus, i) for i in range(run.shard_count(corpus))]
        run.call("tokenizer:train", training.train_from_parts, parts, cfg.train, run.run.tokenizer_dir)
        atomic_write_bytes(meta, key.encode())
    return cfg.model_copy(update={"train": None, "path": str(path)})


def tokenize_fn(run: StageRun) -> functools.partial:
    from codecorpus.tokenize import stage

    return functools.partial(stage.run, cfg=run.cfg, tokenizer_cfg=run_tokenizer(run))


def tokenizer_parts(recipe: Any) -> list[Any]:
    return [recipe.tokenizer]


TOKENIZE = StageSpec("tokenize", "annotator", TokenizeConfig, map_fn=tokenize_fn, hash_parts=tokenizer_parts)
