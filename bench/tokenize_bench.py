"""Tokenize stage throughput against the raw libraries and its bare engine, same documents, one thread.

    python bench/tokenize_bench.py [--mb 20] [--runs 5]

Documents: Python source files of this environment (sorted, first --mb MB).
For each vocabulary the stage (``tokenize.stage.run``: the fastokens engine, flat
buffers, EOS, the per-shard check, the Arrow column) is timed against:
- the library the vocabulary belongs to, called bare: tiktoken's
  ``encode_ordinary_batch`` (GPT-2 and Qwen2.5) or HF tokenizers'
  ``encode_batch_fast`` (a byte-level BPE trained here on the first 10%, so no
  download is needed);
- the bare engine (fastokens' ``encode_batch_flat``), to show what the stage adds.
Prints tokens/s of each and the ratios. Best of --runs interleaved runs each; every
pool is held to one thread, as in a Ray task. fastokens and HF tokenizers cache the
pieces they have encoded, so runs after the first over the same texts flatter them;
``bench/e2e_vs_datatrove.py`` measures text each worker sees once.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable

import pyarrow as pa
from corpus import stdlib_texts


def best_of_interleaved(fns: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Best time of each, taking turns so a noisy neighbour hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: min(ts) for name, ts in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--runs", type=int, default=5, help="best of this many (interleaved) runs each")
    args = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its pool
    os.environ["FASTOKENS_BPE_THREADS"] = "1"

    from codecorpus.config import TokenizeConfig, TokenizerConfig, TrainTokenizerConfig
    from codecorpus.tokenize import stage
    from codecorpus.tokenize.tokenizer import load_tokenizer, train_tokenizer

    texts = stdlib_texts(args.mb)
    table = pa.table({"text": pa.array(texts, pa.large_string())})
    print(f"{len(texts)} documents, {sum(len(t.encode()) for t in texts) / 1e6:.1f} MB, one thread")
    cfg = TokenizeConfig(batch_size=256)
    with tempfile.TemporaryDirectory() as tmp:
        trained = train_tokenizer(texts[: max(1, len(texts) // 10)], TrainTokenizerConfig(vocab_size=16384), tmp)
        for label, tok_cfg in (("gpt2", TokenizerConfig(builtin="gpt2")), ("qwen2.5", TokenizerConfig(builtin="qwen2.5")),
                               ("trained BPE", TokenizerConfig(path=str(trained)))):  # fmt: skip
            tok = load_tokenizer(tok_cfg)
            assert tok.engine == "fastokens", f"{label}: encoded by {tok.engine}"
            n_tokens = sum(map(len, tok.encoder.reference(texts)))
            library, engine, ours = best_of_interleaved(
                {
                    "library": lambda tok=tok: batched(tok.encoder.reference, texts),
                    "engine": lambda tok=tok: batched(tok.encode_flat, texts),
                    "stage": lambda tok_cfg=tok_cfg: stage.run(table, cfg, tok_cfg),
                },
                args.runs,
            ).values()
            print(f"{label} ({tok.encoder.library}): library {n_tokens / library / 1e6:.2f} M tok/s, "
                  f"engine {n_tokens / engine / 1e6:.2f}, stage {n_tokens / ours / 1e6:.2f}; "
                  f"stage / library {library / ours:.2f}x, stage / engine {engine / ours:.3f}")  # fmt: skip
            sys.stdout.flush()


def batched(encode, texts: list[str], size: int = 256) -> None:
    for i in range(0, len(texts), size):
        encode(texts[i : i + size])


if __name__ == "__main__":
    main()
