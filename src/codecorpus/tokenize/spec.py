"""The tokenize stage: a map annotator (``tokens``, ``num_tokens``), and the run's tokenizer."""

from __future__ import annotations

import functools
from typing import Any

from codecorpus.model import config_hash
from codecorpus.pipeline.spec import StageRun, StageSpec
from codecorpus.storage.atomic import atomic_write_bytes
from codecorpus.storage.mirror import ensure_local
from codecorpus.tokenize.config import TokenizeConfig, TokenizerConfig

TASK_MODULES = ("codecorpus.tokenize.stage", "codecorpus.tokenize.tokenizer")
"""Imported when the stage runs, not when it is declared (``StageSpec.modules``)."""


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


def prefetch_tokenizer(cfg: TokenizerConfig) -> None:
    """Load a tokenizer into this process's cache (``load_tokenizer``); a ``train:`` one is
    trained by its run first, so it is left alone."""
    if cfg.train is None:
        from codecorpus.tokenize.tokenizer import load_tokenizer

        load_tokenizer(cfg)


def tokenize_fn(run: StageRun) -> functools.partial:
    from codecorpus.tokenize import stage

    return functools.partial(stage.run, cfg=run.cfg, tokenizer_cfg=run_tokenizer(run))


def tokenizer_parts(recipe: Any) -> list[Any]:
    return [recipe.tokenizer]


def trains_tokenizer(recipe: Any) -> bool:
    """A ``train:`` tokenizer is trained on the whole upstream before the stage's map is built."""
    return recipe.tokenizer.train is not None


TOKENIZE = StageSpec("tokenize", "annotator", TokenizeConfig, map_fn=tokenize_fn, hash_parts=tokenizer_parts,
                     map_needs_upstream=trains_tokenizer, modules=TASK_MODULES)
