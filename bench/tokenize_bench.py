"""Tokenize stage throughput vs the raw libraries on the same documents and threads.

    python bench/tokenize_bench.py [--mb 20] [--threads 1]

Documents: Python source files of this environment (sorted, first --mb MB).
Peers, measured in the same run:
- tiktoken ``Encoding.encode_ordinary_batch`` (qwen2.5 vocabulary) vs the stage with ``builtin: qwen2.5``;
- HF tokenizers ``Tokenizer.encode_batch_fast`` vs the stage with a tokenizer.json
  (a byte-level BPE trained here on the first 2 MB, so no download is needed).
Prints tokens/s of each and the ratio stage / raw (goal: >= 0.90). Best of --runs (5) interleaved runs each.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import pyarrow as pa
from corpus import stdlib_texts


def best_of_interleaved(raw, ours, runs: int = 3) -> tuple[float, float]:
    """Best time of each, alternating raw and ours so a noisy neighbour hits both alike."""
    times: dict[str, list[float]] = {"raw": [], "ours": []}
    for _ in range(runs):
        for name, fn in (("raw", raw), ("ours", ours)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return min(times["raw"]), min(times["ours"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5, help="best of this many (interleaved) runs each")
    args = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)  # before tokenizers starts its pool
    import tokenizers

    from codecorpus.config import TokenizeConfig, TokenizerConfig, TrainTokenizerConfig
    from codecorpus.tokenize import stage
    from codecorpus.tokenize.tokenizer import load_tokenizer, train_tokenizer

    texts = stdlib_texts(args.mb)
    table = pa.table({"text": pa.array(texts, pa.large_string())})
    print(f"{len(texts)} documents, {sum(len(t.encode()) for t in texts) / 1e6:.1f} MB, threads={args.threads}")
    cfg = TokenizeConfig(batch_size=256)

    qwen_cfg = TokenizerConfig(builtin="qwen2.5")
    qwen = load_tokenizer(qwen_cfg)
    enc = qwen.encode_fn.__closure__[0].cell_contents  # the bound encode_ordinary_batch
    n_tokens = sum(map(len, enc(texts, num_threads=args.threads)))
    raw, ours = best_of_interleaved(
        lambda: [enc(texts[i : i + 256], num_threads=args.threads) for i in range(0, len(texts), 256)],
        lambda: stage.run(table, cfg, qwen_cfg),
        args.runs,
    )
    report("tiktoken encode_ordinary_batch (qwen2.5)", n_tokens, raw, ours)

    with tempfile.TemporaryDirectory() as tmp:
        path = train_tokenizer(texts[: max(1, len(texts) // 10)], TrainTokenizerConfig(vocab_size=16384), tmp)
        hf = tokenizers.Tokenizer.from_file(str(path))
        hf.encode_special_tokens = True
        ours_tok = load_tokenizer(TokenizerConfig(path=str(path)))
        n_hf = sum(len(e.ids) for e in hf.encode_batch_fast(texts, add_special_tokens=False))
        raw, ours = best_of_interleaved(
            lambda: [hf.encode_batch_fast(texts[i : i + 256], add_special_tokens=False)
                     for i in range(0, len(texts), 256)],
            lambda: stage.run(table, cfg, TokenizerConfig(path=str(path))),
            args.runs,
        )  # fmt: skip
        del ours_tok
        report("tokenizers encode_batch_fast (trained BPE)", n_hf, raw, ours)


def report(peer: str, n_tokens: int, raw: float, ours: float) -> None:
    print(f"{peer}: raw {n_tokens / raw / 1e6:.2f} M tok/s, stage {n_tokens / ours / 1e6:.2f} M tok/s, "
          f"ratio stage/raw {raw / ours:.3f}")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
