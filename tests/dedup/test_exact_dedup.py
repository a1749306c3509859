from __future__ import annotations

import pyarrow as pa

from codecorpus import schema
from codecorpus.config import DedupConfig
from codecorpus.dedup import exact


def _docs(texts: list[str], prefix: str) -> pa.Table:
    rows = []
    for i, t in enumerate(texts):
        data = t.encode()
        rows.append({
            "id": f"{prefix}{i:03d}", "source": "s", "repo": "r", "path": f"{prefix}{i}.py", "revision": "",
            "license": "MIT", "lang": "Python", "kind": "code", "text": t, "bytes": len(data),
            "content_hash": schema.content_hash(data), "encoding": "utf-8",
        })
    return pa.Table.from_pylist(rows, schema=schema.DOC_SCHEMA)


def _run(shards: list[pa.Table], buckets: int = 4):
    cfg = DedupConfig(buckets=buckets)
    scattered = [exact.keys(t, s, cfg) for s, t in enumerate(shards)]
    routed = [exact.resolve(pa.concat_tables([sc[b] for sc in scattered]), len(shards)) for b in range(buckets)]
    return [exact.apply(t, pa.concat_tables([r[s] for r in routed]), cfg) for s, t in enumerate(shards)]


def test_duplicates_across_shards_keep_smallest_id():
    s0 = _docs(["a = 1\n", "b = 2\n", "a = 1\n"], "x")  # x000 == x002
    s1 = _docs(["a = 1\n", "c = 3\n"], "w")  # w000 == x000 -> keeper is w000 (smallest id)
    out = _run([s0, s1])
    kept = [i for r in out for i in r.table.column("id").to_pylist()]
    assert sorted(kept) == ["w000", "w001", "x001"]
    dropped = pa.concat_tables([r.dropped for r in out])
    assert set(dropped.column("reason").to_pylist()) == {"exact_duplicate"}
    assert dict(zip(dropped["id"].to_pylist(), dropped["dup_of"].to_pylist(), strict=True)) == {"x000": "w000", "x002": "w000"}
    counts = {i: c for r in out for i, c in zip(r.table["id"].to_pylist(), r.table["dup_count"].to_pylist(), strict=True)}
    assert counts == {"w000": 3, "w001": 1, "x001": 1}
    for shard, r in zip([s0, s1], out, strict=True):
        assert shard.num_rows == r.table.num_rows + r.dropped.num_rows


def test_result_independent_of_bucket_count_and_shard_split():
    texts = [f"v = {i % 7}\n" for i in range(40)]
    whole = _docs(texts, "d")
    one = _run([whole], buckets=1)
    many = _run([whole.slice(0, 13), whole.slice(13, 20), whole.slice(33)], buckets=8)
    ids_one = sorted(i for r in one for i in r.table["id"].to_pylist())
    ids_many = sorted(i for r in many for i in r.table["id"].to_pylist())
    assert ids_one == ids_many == [f"d{i:03d}" for i in range(7)]


def test_empty_shard():
    out = _run([_docs([], "e")])
    assert out[0].table.num_rows == 0 and out[0].dropped.num_rows == 0
