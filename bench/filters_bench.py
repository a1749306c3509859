"""Filters-stage throughput (MB/s per core) with and without redaction and decontamination.

Input: the Python standard library and installed site-packages sources of this machine
(``.py`` files, sorted, up to ``--mb`` MB), cut into shards of ~8 MB as ingest would.
Configurations, each timed on the same shards with ``codecorpus.filters.stage.run``:

- ``basic3``: StarCoder's three basic scores only (``basic.line_scores``): the
  previous filters stage, the in-run baseline the ratios are against;
- ``heuristics``: every score column and rule (redaction and decontamination off);
- ``+redact``: heuristics and PII/secret redaction;
- ``+decontam``: heuristics and HumanEval decontamination (index built once, outside the timing);
- ``all``: the default recipe (heuristics, decontamination, redaction).

Times are CPU seconds of this process (``time.process_time``): MB/s per core, which
holds on the shared, loaded 2-core machine the figures were taken on.
Run: ``python bench/filters_bench.py [--mb 40]``.
"""

from __future__ import annotations

import argparse
import sysconfig
import time
from pathlib import Path

import pyarrow as pa

from codecorpus import schema
from codecorpus.config import DecontamConfig, FiltersConfig
from codecorpus.filters import basic, decontam
from codecorpus.filters import stage as filters

SHARD_BYTES = 8_000_000


def load_shards(limit_mb: float) -> list[pa.Table]:
    roots = [Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])]
    files = sorted({p for root in roots for p in root.rglob("*.py")})
    shards, rows, size, total = [], [], 0, 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        data = text.encode()
        if not data.strip():
            continue  # ingest drops empty files (reason `empty`) before filters sees them
        rows.append((str(path), text, len(data), schema.content_hash(data)))
        size, total = size + len(data), total + len(data)
        if size >= SHARD_BYTES or total >= limit_mb * 1e6:
            shards.append(_table(rows))
            rows, size = [], 0
        if total >= limit_mb * 1e6:
            break
    if rows:
        shards.append(_table(rows))
    return shards


def _table(rows: list[tuple[str, str, int, str]]) -> pa.Table:
    n = len(rows)
    return pa.table({
        schema.ID: [f"d{i}" for i in range(n)], schema.SOURCE: ["pyenv"] * n, schema.REPO: ["r"] * n,
        schema.PATH: [r[0] for r in rows], schema.REVISION: ["v"] * n, schema.LICENSE: ["unknown"] * n,
        schema.LANG: ["Python"] * n, schema.KIND: ["code"] * n, schema.TEXT: [r[1] for r in rows],
        schema.BYTES: [r[2] for r in rows], schema.CONTENT_HASH: [r[3] for r in rows],
        schema.ENCODING: ["utf-8"] * n,
    }, schema=schema.DOC_SCHEMA)


def timed(fn, shards: list[pa.Table]) -> float:
    t0 = time.process_time()
    for shard in shards:
        fn(shard)
    return time.process_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=40)
    args = parser.parse_args()
    shards = load_shards(args.mb)
    mb = sum(pa.compute.sum(s.column(schema.BYTES)).as_py() for s in shards) / 1e6
    t0 = time.process_time()
    index = decontam.build_index(DecontamConfig())
    build = time.process_time() - t0
    configs = {
        "heuristics": FiltersConfig(redact=None, decontam=None),
        "+redact": FiltersConfig(decontam=None),
        "+decontam": FiltersConfig(redact=None),
        "all": FiltersConfig(),
    }
    base = timed(lambda s: basic.line_scores(s.column(schema.TEXT)), shards)
    print(f"{len(shards)} shards, {mb:.1f} MB of Python sources; HumanEval index: "
          f"{index.describe()} built in {build * 1000:.0f} ms CPU")
    print(f"{'config':<12}{'MB/s/core':>10}{'vs basic3':>11}{'rows kept':>11}")
    print(f"{'basic3':<12}{mb / base:>10.1f}{1.0:>11.2f}{'-':>11}")
    for name, cfg in configs.items():
        kept = []
        seconds = timed(lambda s, cfg=cfg, kept=kept: kept.append(filters.run(s, cfg, index=index).table.num_rows), shards)
        total = sum(s.num_rows for s in shards)
        print(f"{name:<12}{mb / seconds:>10.1f}{base / seconds:>11.2f}{f'{sum(kept)}/{total}':>11}")


if __name__ == "__main__":
    main()
