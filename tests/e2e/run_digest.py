"""A digest of a run's outputs, for "byte-identical before and after" claims.

Covers what a launcher or an analyst reads: ``shards/`` (every file), ``manifest.json``,
every stage's ``part-*.parquet`` and ``_dropped/part-*.parquet``, its ``_stats.json`` and
``_stage.json``, and ``report/*.parquet|csv|html``. ``_stats.json`` describes a run as well
as its outputs, so the fields that measure the run (``task_seconds``, ``memory``, ``nodes``)
are left out of it; everything else is hashed byte for byte.

    python tests/e2e/run_digest.py RUN_DIR [--files]
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

RUN_FIELDS = ("task_seconds", "memory", "nodes")
"""``_stats.json`` keys that measure the run (time, memory, which nodes), not its outputs."""


def _stats_bytes(path: Path) -> bytes:
    stats = json.loads(path.read_text())
    for key in RUN_FIELDS:
        stats.pop(key, None)
    return json.dumps(stats, sort_keys=True).encode()


def _covered(rel: Path) -> bool:
    parts = rel.parts
    if parts[0] == "shards" or rel.as_posix() == "manifest.json":
        return True
    if parts[0] == "report":
        return rel.suffix in (".parquet", ".csv", ".html")
    if len(parts) == 2 and (parts[1].startswith("part-") or parts[1] in ("_stats.json", "_stage.json")):
        return True
    return len(parts) == 3 and parts[1] == "_dropped" and parts[2].startswith("part-")


def file_digests(run_dir: Path | str) -> dict[str, str]:
    """Relative path -> sha256 of every covered file of a run, in path order."""
    root = Path(run_dir)
    out: dict[str, str] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if not _covered(rel) or any(part.startswith(".") for part in rel.parts):
            continue
        data = _stats_bytes(path) if path.name == "_stats.json" else path.read_bytes()
        out[rel.as_posix()] = hashlib.sha256(data).hexdigest()
    return out


def run_digest(run_dir: Path | str) -> str:
    """One sha256 over the sorted (path, file digest) pairs of ``file_digests``."""
    h = hashlib.sha256()
    for rel, digest in file_digests(run_dir).items():
        h.update(f"{rel}\0{digest}\n".encode())
    return h.hexdigest()


if __name__ == "__main__":
    files = file_digests(sys.argv[1])
    if "--files" in sys.argv:
        for rel, digest in files.items():
            print(digest, rel)
    print(f"{run_digest(sys.argv[1])}  ({len(files)} files)")
