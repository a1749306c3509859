"""Peak memory of a quickstart-style run on 1x and 8x the corpus: bounded by configuration?

    python bench/memory_scaling.py [--factors 1,8] [--workers 2] [--shard-mb 8] [--full-base]
                                   [--interval 0.2] [--keep DIR]

Corpus: the quickstart's ``python-env`` source, copied into a directory tree under a temp
dir (one folder per repository) and read back as a ``type: local`` source. The base
(1x) is the quickstart source without the standard library, numpy and pyarrow (~12 MB,
~890 files; ``--full-base`` takes the whole ~95 MB quickstart, whose 8x is too slow for
a shared 2-core machine). Copies are renamed so that dedup keeps them
(``bench/corpus.py``): every stage after dedup really processes 8x the data.

Pipeline: ``pipelines/quickstart.yaml``'s stages, tokenizer (qwen2.5) and outputs
(short-8k with FIM, long-256k) with ``--shard-mb`` as ``ingest.shard_bytes``; run as
``codecorpus run --workers N`` in a subprocess.

Memory: the process tree of that subprocess is sampled every ``--interval`` seconds from
/proc: the driver (the ``codecorpus run`` process), Ray's workers (``ray::`` processes:
they run the tasks) and Ray's own daemons (raylet, GCS, agents). Peaks reported: driver
RSS, the largest single worker RSS, the sum over workers, the daemons, and the PSS of the
whole tree (proportional set size: shared pages such as the object store's mapping and
imported libraries are split between the processes that map them, so the sum is not
inflated). Figures from a shared, loaded 2-core machine; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from corpus import base_files, build_corpus

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "pipelines" / "quickstart.yaml"
SMALL_EXCLUDE = ("numpy", "pyarrow")
# --- the corpus ------------------------------------------------------------------------------


def base_source(full: bool) -> dict[str, Any]:
    src = dict(yaml.safe_load(QUICKSTART.read_text())["sources"][0])
    if not full:
        src["stdlib"] = False
        src["distributions"] = [d for d in src["distributions"] if d not in SMALL_EXCLUDE]
    return src


def recipe_for(corpus: Path, out: Path, shard_bytes: int) -> dict[str, Any]:
    recipe = yaml.safe_load(QUICKSTART.read_text())
    recipe["sources"] = [{"type": "local", "name": "corpus", "path": str(corpus), "layout": "repos"}]
    recipe["out"] = str(out)
    recipe["stages"]["ingest"]["shard_bytes"] = shard_bytes
    return recipe


# --- sampling the process tree ---------------------------------------------------------------


def _status(pid: int) -> dict[str, str] | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _kb(fields: dict[str, str], key: str) -> int:
    return int(fields.get(key, "0 kB").split()[0]) * 1024


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _status(int(entry))) is not None:
            children.setdefault(int(fields.get("PPid", "0").strip()), []).append(int(entry))
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, []))
    return out


def _worker_title(pid: int, fields: dict[str, str]) -> str | None:
    """``ray::<task>`` of a Ray worker, else None. A worker is told by its command line or, while
    it is being (re)titled, by its process name (the command line is briefly the interpreter's)."""
    title = _cmdline(pid)
    if title.startswith("ray::"):
        return title
    name = fields.get("Name", "").strip()
    return name if name.startswith("ray::") else None


@dataclass
class Peaks:
    driver: int = 0
    worker_max: int = 0
    workers_sum: int = 0
    daemons_sum: int = 0
    tree_pss: int = 0
    workers_seen: set[int] = field(default_factory=set)
    daemons: dict[str, int] = field(default_factory=dict)
    """Largest RSS of each non-worker process, by command name."""
    by_stage: dict[str, int] = field(default_factory=dict)
    """Largest worker RSS seen while running a task of each stage (Ray titles a worker
    process ``ray::<task name>``, and codecorpus names tasks ``<stage>:<task>``)."""

    def sample(self, root: int) -> None:
        workers = daemons = pss = 0
        for pid in descendants(root):
            fields = _status(pid)
            if fields is None:
                continue
            rss = _kb(fields, "VmRSS")
            pss += _pss(pid)
            if pid == root:
                self.driver = max(self.driver, rss)
            elif (title := _worker_title(pid, fields)) is not None:
                self.workers_seen.add(pid)
                self.worker_max = max(self.worker_max, rss)
                workers += rss
                stage = title[5:].split(":", 1)[0].split()[0] if ":" in title[5:] else "idle"
                self.by_stage[stage] = max(self.by_stage.get(stage, 0), rss)
            else:
                daemons += rss
                name = fields.get("Name", "?").strip()
                self.daemons[name] = max(self.daemons.get(name, 0), rss)
        self.workers_sum = max(self.workers_sum, workers)
        self.daemons_sum = max(self.daemons_sum, daemons)
        self.tree_pss = max(self.tree_pss, pss)


def run_sampled(cmd: list[str], interval: float) -> tuple[float, Peaks]:
    peaks = Peaks()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    stop = threading.Event()

    def sampler() -> None:
        while not stop.wait(interval):
            peaks.sample(proc.pid)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    output, _ = proc.communicate()
    seconds = time.perf_counter() - t0
    stop.set()
    thread.join()
    if proc.returncode != 0:
        sys.exit(f"codecorpus run failed ({proc.returncode}):\n{output.decode(errors='replace')[-4000:]}")
    return seconds, peaks


def task_peaks(run: Path) -> dict[str, tuple[int, str, int]]:
    """Each step's largest task peak RSS, measured inside the task (``runtime/memory.py``):
    step label -> (bytes, task, the worker's RSS when that task started). Exact per task,
    unlike the process-tree samples."""
    out = {}
    for stats_file in sorted(run.glob("*/_stats.json")):
        steps = json.loads(stats_file.read_text()).get("memory", {}).get("steps", {})
        for step, m in steps.items():
            out[step] = (m["peak_rss"], m["task"], m["rss_before"])
    return out


def documents(run: Path) -> str:
    """Documents out of every stage, and tokens, from the run's stats (the work really scaled)."""
    parts = []
    for stage in ("ingest", "langid", "filters", "dedup", "tokenize"):
        stats = json.loads((run / stage / "_stats.json").read_text())
        parts.append(f"{stage} {stats['rows_out']}")
    tokens = json.loads((run / "tokenize" / "_stats.json").read_text())["tokens_out"]
    return ", ".join(parts) + f"; {tokens:,} tokens"


# --- main ------------------------------------------------------------------------------------


def mib(n: int) -> str:
    return f"{n / 2**20:8.0f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--factors", default="1,8")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-mb", type=float, default=8.0, help="ingest.shard_bytes in MB (quickstart: 8)")
    ap.add_argument("--full-base", action="store_true", help="1x = the whole quickstart corpus (~95 MB)")
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    ap.add_argument("--keep", help="keep the work directory here (else a temp dir)")
    args = ap.parse_args()

    files = base_files(base_source(args.full_base))
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="memscale-"))
    tmp.mkdir(parents=True, exist_ok=True)
    shard_bytes = int(args.shard_mb * 1e6)
    print(f"base corpus: {len(files)} files of the quickstart source{' (full)' if args.full_base else ''}; "
          f"{args.workers} workers; shard_bytes {shard_bytes:,}; quickstart stages, qwen2.5, short-8k + long-256k")
    print(f"{'size':>5} {'MB':>7} {'wall s':>7} {'driver':>8} {'worker':>8} {'workers':>8} {'ray':>8} "
          f"{'tree PSS':>8}  (peak MiB: driver RSS, largest worker RSS, sum of workers RSS, "
          f"Ray daemons RSS, whole tree PSS)")
    results = {}
    try:
        for factor in (int(f) for f in args.factors.split(",")):
            corpus, run = tmp / f"corpus-{factor}x", tmp / f"run-{factor}x"
            size = build_corpus(files, factor, corpus)
            path = tmp / f"recipe-{factor}x.yaml"
            path.write_text(yaml.safe_dump(recipe_for(corpus, run, shard_bytes), sort_keys=False))
            cmd = [sys.executable, "-m", "codecorpus", "run", str(path), "--workers", str(args.workers), "--quiet"]
            seconds, p = run_sampled(cmd, args.interval)
            results[factor] = (size, seconds, p)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"{factor:4d}x {size / 1e6:7.1f} {seconds:7.1f} {mib(p.driver)} {mib(p.worker_max)} "
                  f"{mib(p.workers_sum)} {mib(p.daemons_sum)} {mib(p.tree_pss)}  "
                  f"({len(p.workers_seen)} worker processes; load avg {load})", flush=True)
            print(f"      documents: {documents(run)}")
            print("      largest worker RSS while running each stage (MiB): "
                  + ", ".join(f"{k} {v / 2**20:.0f}" for k, v in sorted(p.by_stage.items())))
            print("      largest non-worker processes (MiB): " + ", ".join(
                f"{k} {v / 2**20:.0f}" for k, v in sorted(p.daemons.items(), key=lambda kv: -kv[1])[:6]))
            peaks = task_peaks(run)
            results[factor] += (peaks,)
            print("      largest task peak RSS per step, measured in the task (MiB): "
                  + ", ".join(f"{k} {v[0] / 2**20:.0f}" for k, v in peaks.items()))
            shutil.rmtree(corpus, ignore_errors=True)
            if not args.keep:
                shutil.rmtree(run, ignore_errors=True)
        lo, hi = min(results), max(results)
        if lo != hi:
            (s0, t0, a, pa_), (s1, t1, b, pb) = results[lo], results[hi]
            print(f"task peak RSS per step, {lo}x -> {hi}x (MiB; in brackets the worker's RSS when the task "
                  "started, which a reused worker carries over from earlier tasks):")
            for step, (peak, task, before) in pb.items():
                lo_peak, _, lo_before = pa_.get(step, (0, "", 0))
                print(f"  {step:<28} {lo_peak / 2**20:6.0f} [{lo_before / 2**20:4.0f}] -> "
                      f"{peak / 2**20:6.0f} [{before / 2**20:4.0f}]  ({task})")
            print(f"{hi}x / {lo}x: corpus {s1 / s0:.1f}x, wall {t1 / t0:.1f}x, driver RSS {b.driver / a.driver:.2f}x, "
                  f"largest worker RSS {b.worker_max / a.worker_max:.2f}x, tree PSS {b.tree_pss / a.tree_pss:.2f}x")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
