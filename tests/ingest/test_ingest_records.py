"""parquet / jsonl (.gz, .zst) / hf sources with a column mapping, bad records planted."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from codecorpus import schema
from codecorpus.config import IngestConfig, RecordsSource
from codecorpus.ingest.plan import plan_shards
from codecorpus.ingest.read import read_shard

STACK_COLUMNS = {"text": "content", "path": "max_stars_repo_path", "repo": "max_stars_repo_name",
                 "license": "max_stars_repo_licenses"}


def _ingest(src: RecordsSource, **cfg) -> tuple[list[dict], Counter]:
    shards = plan_shards([src], IngestConfig(**cfg))
    results = [read_shard(s, IngestConfig(**cfg)) for s in shards]
    rows = pa.concat_tables([r.table for r in results]).to_pylist()
    drops = Counter(x for r in results for x in r.dropped.column(schema.REASON).to_pylist())
    planned = sum(len(s) for s in shards)
    expanded = sum(r.counters.get(schema.EXPANDED_ROWS, 0) for r in results)
    assert planned + expanded == len(rows) + sum(drops.values())
    return rows, drops


def _stack_rows() -> list[dict]:
    return [
        {"content": "def f():\n    return 1\n", "max_stars_repo_path": "a/f.py",
         "max_stars_repo_name": "o/r", "max_stars_repo_licenses": ["MIT", "Apache-2.0"]},
        {"content": "x" * 5000, "max_stars_repo_path": "big.py", "max_stars_repo_name": "o/r",
         "max_stars_repo_licenses": []},
        {"content": None, "max_stars_repo_path": "none.py", "max_stars_repo_name": "o/r",
         "max_stars_repo_licenses": []},
    ]


def test_parquet_the_stack_mapping(tmp_path: Path):
    pq.write_table(pa.Table.from_pylist(_stack_rows()), tmp_path / "part.parquet", row_group_size=1)
    rows, drops = _ingest(RecordsSource(type="parquet", name="stack", path=str(tmp_path),
                                        columns=STACK_COLUMNS, license="unknown"), max_file_bytes=1000)
    assert [(r["repo"], r["path"], r["license"], r[schema.LICENSE_METHOD]) for r in rows] == [
        ("o/r", "a/f.py", "MIT OR Apache-2.0", "dataset_column")]
    assert drops == {"too_large": 1, "bad_record": 1}


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_jsonl_compressed_with_a_malformed_line(tmp_path: Path, suffix: str):
    lines = [json.dumps(r) for r in _stack_rows()[:1]] + ['{"content": "unterminated', json.dumps(
        {"content": "print(2)\n", "max_stars_repo_path": "b.py", "max_stars_repo_name": "o/s"})]
    data = ("\n".join(lines) + "\n").encode()
    if suffix.endswith(".gz"):
        data = gzip.compress(data)
    elif suffix.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    (tmp_path / f"d{suffix}").write_bytes(data)
    rows, drops = _ingest(RecordsSource(type="jsonl", name="j", path=str(tmp_path / f"d{suffix}"),
                                        columns=STACK_COLUMNS))
    assert [r["path"] for r in rows] == ["a/f.py", "b.py"]
    assert drops == {"bad_json": 1}


def test_truncated_gzip_keeps_lines_before_the_damage(tmp_path: Path):
    lines = "".join(json.dumps({"content": f"v = {i}\n" * 20, "path": f"{i}.py"}) + "\n" for i in range(200))
    data = gzip.compress(lines.encode())
    (tmp_path / "t.jsonl.gz").write_bytes(data[: len(data) // 2])
    rows, drops = _ingest(RecordsSource(type="jsonl", name="j", path=str(tmp_path / "t.jsonl.gz")))
    assert drops == {"corrupt_file": 1}
    assert 0 < len(rows) < 200


def test_hf_dataset_saved_to_disk(tmp_path: Path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list([{"content": "fn main() {}\n", "path": "src/main.rs", "repo_name": "o/rs"},
                                     {"content": "", "path": "empty.rs", "repo_name": "o/rs"}])
    ds.save_to_disk(str(tmp_path / "ds"))
    rows, drops = _ingest(RecordsSource(type="hf", name="hf", path=str(tmp_path / "ds"), license="MIT"))
    assert [(r["repo"], r["path"], r["text"], r["license"], r[schema.LICENSE_METHOD]) for r in rows] == [
        ("o/rs", "src/main.rs", "fn main() {}\n", "MIT", "recipe")]
    assert drops == {"empty": 1}
