"""Whole-dedup wall time against datatrove's four-stage MinHash pipeline, and scaling.

    python bench/dedup_e2e_bench.py [--docs 600] [--scale 1] [--workers 2] [--no-datatrove]

Corpus: real code, the Python stdlib's .py files under 64 KB (deterministic sample of
``--docs x --scale`` files). The scaled corpora (1x, 4x, 16x) add copies of every file
with small deterministic edits (a few lines changed, a comment appended), so each copy is
a near-duplicate, not an exact one.

codecorpus: ``Executor`` on local Ray (``--workers`` CPUs), recipe ``ingest -> dedup``
(exact + near, 5-gram shingles, 128 permutations as 16 bands x 8 rows); the time is the
dedup stage alone (its six phases, reading the ingested Parquet shards).
datatrove: ``MinhashDedupSignature -> MinhashDedupBuckets -> MinhashDedupCluster ->
MinhashDedupFilter`` with ``LocalPipelineExecutor(workers=--workers)``, 5-grams, 16
buckets x 8 hashes, a regex word tokenizer (``\\w+|[^\\w\\s]``, the tokens codecorpus
shingles; no spacy), reading the same documents from JSONL shards.
Peak memory: the sampled maximum of the summed RSS of the driver and every descendant
process (Ray's raylet/GCS and workers, or datatrove's pool), read from /proc every 50 ms.
Figures from a shared, loaded 2-core machine: compare the ratios, not the absolutes.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

STDLIB = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
NGRAM, BANDS, ROWS = 5, 16, 8
TOKEN = re.compile(r"\w+|[^\w\s]")


# --- corpus --------------------------------------------------------------------------------


def real_documents(n: int) -> list[tuple[str, str]]:
    files = sorted(p for p in STDLIB.rglob("*.py")
                   if 200 < p.stat().st_size < 64_000 and "site-packages" not in p.relative_to(STDLIB).parts)
    random.Random(0).shuffle(files)
    return [(str(f.relative_to(STDLIB)), f.read_text(encoding="utf-8", errors="replace")) for f in files[:n]]


def edited_copy(text: str, copy: int) -> str:
    """A near-duplicate: 3 lines replaced (positions seeded by the copy number) and a comment added."""
    rng = random.Random(copy * 7919 + len(text))
    lines = text.splitlines()
    for i in rng.sample(range(len(lines)), min(3, len(lines))):
        lines[i] = f"edited_{copy}_{i} = {rng.randrange(10**6)}"
    return "\n".join(lines) + f"\n# copy {copy}\n"


def scaled_corpus(base: list[tuple[str, str]], factor: int) -> list[tuple[str, str]]:
    docs = list(base)
    for copy in range(1, factor):
        docs += [(f"copy{copy}/{path}", edited_copy(text, copy)) for path, text in base]
    return docs


# --- peak memory of a process tree -----------------------------------------------------------


def _tree_rss(root: int) -> int:
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        parents[int(entry)] = int(fields.get("PPid", "0").strip())
        rss[int(entry)] = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
    total, stack = 0, [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


class PeakRss:
    """Samples the RSS of this process and all its descendants; ``peak`` after the block."""

    def __enter__(self) -> PeakRss:
        self.peak, self._stop = _tree_rss(os.getpid()), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, _tree_rss(os.getpid()))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


# --- codecorpus --------------------------------------------------------------------------------


def run_codecorpus(docs: list[tuple[str, str]], work: Path, workers: int, shards: int) -> tuple[float, int, dict]:
    from codecorpus.config import load_recipe_data
    from codecorpus.runtime.executor import Executor

    corpus = work / "corpus"
    for path, text in docs:
        (corpus / path).parent.mkdir(parents=True, exist_ok=True)
        (corpus / path).write_text(text)
    total = sum(len(t.encode()) for _, t in docs)
    recipe = {
        "name": "dedup-bench", "seed": 1, "out": str(work / "run"),
        "sources": [{"type": "local", "name": "stdlib", "path": str(corpus), "layout": "repo"}],
        "stages": {
            "ingest": {"shard_bytes": max(1, total // shards), "max_file_bytes": 1_000_000},
            "dedup": {"buckets": 16, "ngram": NGRAM, "num_perm": BANDS * ROWS, "bands": BANDS, "rows": ROWS},
        },
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [{"name": "short", "seq_len": 1024}],
    }
    ex = Executor(load_recipe_data(recipe), work / "run", quiet=True)
    ex.run_pipeline(until="ingest")
    with PeakRss() as mem:
        result = ex.run_pipeline(only="dedup")
    dedup = next(s for s in result.stages if s.name == "dedup")
    return dedup.seconds, mem.peak, dedup.stats


# --- datatrove ---------------------------------------------------------------------------------


class RegexWordTokenizer:
    """datatrove's word-tokenizer protocol with the regex codecorpus shingles (no spacy model)."""

    def word_tokenize(self, text: str, **_) -> list[str]:
        return TOKEN.findall(text)

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in TOKEN.finditer(text)]


def _regex_tokenizer(_lang: str) -> RegexWordTokenizer:
    return RegexWordTokenizer()


def _patch_tokenizer() -> None:
    """Applied in the driver and (via the reader) in every forkserver worker."""
    from datatrove.pipeline.dedup import minhash as dt_minhash

    dt_minhash.load_word_tokenizer = _regex_tokenizer


def run_datatrove(docs: list[tuple[str, str]], work: Path, workers: int, shards: int) -> tuple[float, int, int]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.utils.hashing import HashConfig

    data = work / "jsonl"
    data.mkdir(parents=True)
    for s in range(shards):
        with (data / f"{s:05d}.jsonl").open("w") as f:
            for i in range(s, len(docs), shards):
                f.write(json.dumps({"text": docs[i][1], "id": docs[i][0]}) + "\n")
    _patch_tokenizer()
    from loguru import logger

    logger.remove()  # datatrove logs every task's stats; the figures are printed below
    # sha1 / 32-bit: datatrove 0.10.1's xxhash path passes str to xxhash 4.x, which rejects it
    cfg = MinhashConfig(n_grams=NGRAM, num_buckets=BANDS, hashes_per_bucket=ROWS,
                        hash_config=HashConfig(precision=32, hash_fc="sha1"))
    base = work / "dt"

    def reader():
        return functools.partial(_read_jsonl_shard, folder=str(data))

    stages = [
        LocalPipelineExecutor([reader(), MinhashDedupSignature(str(base / "sigs"), config=cfg)],
                              tasks=shards, workers=workers, logging_dir=str(base / "logs1")),
        LocalPipelineExecutor([MinhashDedupBuckets(str(base / "sigs"), str(base / "buckets"), config=cfg)],
                              tasks=cfg.num_buckets, workers=workers, logging_dir=str(base / "logs2")),
        LocalPipelineExecutor([MinhashDedupCluster(str(base / "buckets"), str(base / "remove"), config=cfg)],
                              tasks=1, workers=1, logging_dir=str(base / "logs3")),
        LocalPipelineExecutor([reader(), MinhashDedupFilter(str(base / "remove"))],
                              tasks=shards, workers=workers, logging_dir=str(base / "logs4")),
    ]
    with PeakRss() as mem:
        t0 = time.perf_counter()
        for stage in stages:
            stage.run()
        seconds = time.perf_counter() - t0
    removed = sum(p.stat().st_size // 4 for p in (base / "remove").glob("*.remove"))
    return seconds, mem.peak, removed


def _read_jsonl_shard(data, rank: int = 0, world_size: int = 1, *, folder: str):
    """Task ``rank`` reads JSONL shard ``rank`` (datatrove's JsonlReader needs orjson, absent here).

    It also installs the regex tokenizer inside the worker process.
    """
    from datatrove.data import Document

    _patch_tokenizer()
    with open(Path(folder) / f"{rank:05d}.jsonl") as f:
        for line in f:
            row = json.loads(line)
            yield Document(text=row["text"], id=row["id"])


# --- main ----------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=600, help="stdlib files at 1x (before --scale)")
    ap.add_argument("--scale", type=int, default=1, help="multiply the base corpus (bigger runs)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--factors", default="1,4,16", help="corpus sizes of the scaling run")
    ap.add_argument("--no-datatrove", action="store_true")
    args = ap.parse_args()

    from codecorpus.runtime.executor import init_ray

    init_ray(args.workers, None)
    base = real_documents(args.docs * args.scale)
    shards = 4 * args.workers
    mb = sum(len(t.encode()) for _, t in base) / 1e6
    print(f"corpus 1x: {len(base)} stdlib files, {mb:.1f} MB; {args.workers} workers; "
          f"{NGRAM}-grams, {BANDS}x{ROWS} = {BANDS * ROWS} hashes; {shards} input shards")

    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_datatrove:
            print("\n== whole dedup vs datatrove (4 stages), same documents and cores ==")
            for factor in (1, 4):
                docs = scaled_corpus(base, factor)
                work = Path(tmp) / f"cmp{factor}"
                cc_s, cc_mem, stats = run_codecorpus(docs, work / "cc", args.workers, shards)
                dt_s, dt_mem, dt_removed = run_datatrove(docs, work / "dt", args.workers, shards)
                cc_removed = sum(stats["dropped"].values())
                print(f"{factor:2d}x {len(docs):6d} docs  codecorpus {cc_s:7.1f} s ({cc_mem / 2**20:6.0f} MiB peak, "
                      f"{cc_removed} removed)  datatrove {dt_s:7.1f} s ({dt_mem / 2**20:6.0f} MiB peak, "
                      f"{dt_removed} removed)  codecorpus is {dt_s / cc_s:5.2f}x faster")
                shutil.rmtree(work)
        print("\n== scaling: codecorpus whole dedup ==")
        print(f"{'size':>5} {'docs':>7} {'MB':>7} {'wall s':>8} {'docs/s':>8} {'peak RSS MiB':>13} {'removed':>8}")
        for factor in (int(f) for f in args.factors.split(",")):
            docs = scaled_corpus(base, factor)
            work = Path(tmp) / f"scale{factor}"
            size = sum(len(t.encode()) for _, t in docs) / 1e6
            seconds, peak, stats = run_codecorpus(docs, work, args.workers, shards * max(1, factor // 4))
            removed = sum(stats["dropped"].values())
            print(f"{factor:4d}x {len(docs):7d} {size:7.1f} {seconds:8.1f} {len(docs) / seconds:8.0f} "
                  f"{peak / 2**20:13.0f} {removed:8d}  {stats['dropped']}")
            shutil.rmtree(work)


if __name__ == "__main__":
    main()
