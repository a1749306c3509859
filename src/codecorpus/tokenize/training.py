"""Train the run's tokenizer on a deterministic sample of the tokenize stage's input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

from codecorpus import schema
from codecorpus.tokenize.config import TrainTokenizerConfig
from codecorpus.tokenize.tokenizer import sample_for_training, train_tokenizer


def texts_of_parts(parts: list[Path]) -> Iterator[str]:
    """Texts in shard order, then row order: the same corpus gives the same sequence."""
    for part in parts:
        pf = pq.ParquetFile(part)
        for batch in pf.iter_batches(columns=[schema.TEXT], batch_size=1024):
            yield from batch.column(0).to_pylist()


def train_from_parts(parts: list[Path], cfg: TrainTokenizerConfig, out_dir: Path) -> Path:
    return train_tokenizer(sample_for_training(texts_of_parts(parts), cfg.sample_bytes), cfg, out_dir)
