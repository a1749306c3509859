"""Cost of exact loss masks: part-by-part rendering vs. one render + one encode.

Peer: what ``tokenizer.apply_chat_template(messages, tokenize=True)`` does, i.e.
render the whole conversation once with the same Jinja template and encode it
once (no masks). Ours renders every prefix (O(turns^2) template work) and
tokenizes part by part, which is the price of masks that decode exactly to
the assistant turns. Run: ``python bench/sft_render.py [repeats]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from codecorpus.config import SftIngestConfig, SftValidateConfig, TokenizerConfig, TracesSource
from codecorpus.sft import validate
from codecorpus.sft.ingest import list_trace_files, read_shard
from codecorpus.sft.render import Switches, encode_with_specials, render_example
from codecorpus.sft.template import BUILTIN_CHATML, compile_template, render
from codecorpus.tokenize.tokenizer import load_tokenizer

DATA = Path(__file__).resolve().parents[1] / "pipelines" / "data" / "traces"


def main(repeats: int = 5) -> None:
    files = list_trace_files(TracesSource(type="traces", name="bench", path=str(DATA)))
    rows = validate.run(read_shard(files, SftIngestConfig()).table, SftValidateConfig()).table.to_pylist()
    traces = [(r["messages"], r["tools"]) for r in rows] * repeats
    tok = load_tokenizer(TokenizerConfig(builtin="qwen2.5"))
    template = compile_template(BUILTIN_CHATML)
    import json

    t0 = time.perf_counter()
    n_tokens = sum(len(render_example(template, m, t, tok, Switches())) for m, t in traces)
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    peer_tokens = sum(
        len(encode_with_specials(tok, render(template, m, json.loads(t) if t else None))) for m, t in traces
    )
    peer = time.perf_counter() - t0
    print(f"traces {len(traces)}, messages {sum(len(m) for m, _ in traces)}, tokens {n_tokens} (peer {peer_tokens})")
    print(f"part-by-part with masks: {ours:.3f} s ({n_tokens / ours:,.0f} tokens/s)")
    print(f"peer (one render + one encode, no masks): {peer:.3f} s ({peer_tokens / peer:,.0f} tokens/s)")
    print(f"ratio ours/peer time: {ours / peer:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
