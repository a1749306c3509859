"""Best-fit-decreasing packing vs concatenate-and-chunk on the same documents.

    python bench/packing_bench.py [--mb 20] [--seq-len 8192]

Documents: Python files of the standard library, tokenized with the builtin
qwen2.5 vocabulary (EOS appended), packed per 2.5M-token shard like the pack stage.
Peer: concatenate-and-chunk (GPT-style streams: no padding, but every
document crossing a chunk boundary is cut). Prints padding, truncated
documents (documents cut into more than one piece) for both, and BFD time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from corpus import stdlib_texts


def concat_and_chunk_truncations(lengths: np.ndarray, seq_len: int) -> tuple[int, int]:
    """(documents cut by a chunk boundary, padding of the last chunk)."""
    ends = np.cumsum(lengths)
    starts = ends - lengths
    cut = np.count_nonzero(starts // seq_len != (ends - 1) // seq_len)
    return int(cut), int(-ends[-1] % seq_len)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--seq-len", type=int, default=8192)
    args = ap.parse_args()
    from codecorpus.config import TokenizerConfig
    from codecorpus.packing.pack import pack_documents
    from codecorpus.tokenize.tokenizer import load_tokenizer

    tok = load_tokenizer(TokenizerConfig(builtin="qwen2.5"))
    texts = stdlib_texts(args.mb)
    ids = [np.asarray([*t, tok.eos_id], np.int32) for t in tok.encode_batch(texts)]
    lengths = np.fromiter(map(len, ids), np.int64, len(ids))
    total = int(lengths.sum())
    print(f"{len(ids)} documents, {total:,} tokens, seq_len {args.seq_len}")
    t0 = time.perf_counter()
    packed = pack_documents([str(i) for i in range(len(ids))], ids, ["Python"] * len(ids),
                            ["stdlib"] * len(ids), args.seq_len)  # fmt: skip
    seconds = time.perf_counter() - t0
    bfd_pad = packed.padding_tokens
    cc_cut, cc_pad = concat_and_chunk_truncations(lengths, args.seq_len)
    longer = int(np.count_nonzero(lengths > args.seq_len))
    print(f"BFD:               {packed.sequences:,} sequences, padding {bfd_pad:,} "
          f"({bfd_pad / (total + bfd_pad):.2%}), truncated documents {packed.truncated_documents:,} "
          f"(= documents longer than seq_len: {longer}), {seconds:.2f} s")
    print(f"concat-and-chunk:  {-(-total // args.seq_len):,} sequences, padding {cc_pad:,}, "
          f"truncated documents {cc_cut:,}")
    print(f"truncations BFD / concat-and-chunk: {packed.truncated_documents / max(cc_cut, 1):.3f}")


if __name__ == "__main__":
    main()
