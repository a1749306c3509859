"""Cost of exact loss masks: part-by-part rendering vs. one render + one encode.

Peer: what ``tokenizer.apply_chat_template(messages, tokenize=True)`` does, i.e.
render the whole conversation once with the same Jinja template and encode it
once (no masks). Ours, two paths: ``exact`` renders every prefix (O(turns^2)
template work), ``fast`` (the default on prefix-stable, composable templates
such as the built-in ChatML) renders each message once plus one whole render
to check composability; both tokenize part by part, which is the price of
masks that decode exactly to the assistant turns. Traces of many turns are
where the exact path hurts, so besides the shipped fixtures the bench renders
them concatenated into long traces. Run: ``python bench/sft_render.py [repeats]``.
"""

from __future__ import annotations

import json
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


def _timed(fn, traces) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = sum(fn(m, t) for m, t in traces)
    return time.perf_counter() - t0, n


def _long_traces(traces: list, turns: int) -> list:
    """Each distinct fixture trace with its turns after the system head repeated to ~``turns`` messages."""
    out, seen = [], set()
    for m, t in traces:
        if id(m) in seen:
            continue
        seen.add(id(m))
        n_sys = next((i for i, x in enumerate(m) if x["role"] != "system"), len(m))
        body = m[n_sys:]
        if body:
            out.append((m[:n_sys] + body * max(1, turns // len(body)), t))
    return out


def _compare(label: str, traces: list, tok, template) -> None:
    def exact(m, t):
        return len(render_example(template, m, t, tok, Switches(), path="exact"))

    def fast(m, t):
        return len(render_example(template, m, t, tok, Switches(), path="auto"))

    def peer(m, t):
        return len(encode_with_specials(tok, render(template, m, json.loads(t) if t else None)))

    t_exact, n_exact = _timed(exact, traces)
    t_fast, n_fast = _timed(fast, traces)
    t_peer, n_peer = _timed(peer, traces)
    assert n_exact == n_fast, (n_exact, n_fast)
    print(f"{label}: traces {len(traces)}, messages {sum(len(m) for m, _ in traces)}, tokens {n_fast} (peer {n_peer})")
    for name, t in (("exact path", t_exact), ("fast path", t_fast), ("peer", t_peer)):
        print(f"  {name:11s} {t:7.3f} s ({n_fast / t:>10,.0f} tokens/s)  ratio to peer {t / t_peer:5.2f}x")
    print(f"  fast path speed-up over exact path: {t_exact / t_fast:.2f}x")


def main(repeats: int = 5) -> None:
    files = list_trace_files(TracesSource(type="traces", name="bench", path=str(DATA)))
    rows = validate.run(read_shard(files, SftIngestConfig()).table, SftValidateConfig()).table.to_pylist()
    traces = [(r["messages"], r["tools"]) for r in rows] * repeats
    tok = load_tokenizer(TokenizerConfig(builtin="qwen2.5"))
    template = compile_template(BUILTIN_CHATML)
    _compare("fixture traces", traces, tok, template)
    _compare("long traces (~200 messages)", _long_traces(traces, 200), tok, template)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
