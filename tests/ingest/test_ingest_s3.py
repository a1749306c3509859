"""S3 source against a real SeaweedFS: repositories, an archive and a JSONL dataset."""

from __future__ import annotations

import io
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq

from codecorpus import schema
from codecorpus.config import IngestConfig, RecordsSource, S3Source
from codecorpus.ingest.plan import plan_fingerprint, plan_shards
from codecorpus.ingest.read import read_shard
from conftest import MAIN_PY, UTIL_JS, make_bucket, tar_gz


def _s3(info: dict) -> dict:
    return {k: info[k] for k in ("endpoint_url", "access_key_id", "secret_access_key")}


def test_s3_prefix_of_repos_archives_and_records(s3_server):
    client = make_bucket(s3_server, "corpus")
    client.put_object(Bucket="corpus", Key="code/alpha/main.py", Body=MAIN_PY.encode())
    client.put_object(Bucket="corpus", Key="code/alpha/LICENSE", Body=b"MIT License\n\nPermission is hereby granted, free of charge, to any person\nTHE SOFTWARE IS PROVIDED \"AS IS\"\n")
    client.put_object(Bucket="corpus", Key="code/beta/web/util.js", Body=UTIL_JS.encode())
    client.put_object(Bucket="corpus", Key="code/beta/node_modules/x/index.js", Body=b"module.exports = 1;\n")
    client.put_object(Bucket="corpus", Key="code/beta/logo.png", Body=b"\x89PNG\x00\x00")
    client.put_object(Bucket="corpus", Key="code/gamma.tar.gz", Body=tar_gz({"g/a.py": b"x = 1\n", "../evil.py": b"y = 2\n"}))
    lines = [json.dumps({"content": "print(1)\n", "path": "p.py", "repo_name": "r/one"}), "{bad json"]
    client.put_object(Bucket="corpus", Key="code/data.jsonl", Body=("\n".join(lines) + "\n").encode())
    src = S3Source(type="s3", name="s3", url="s3://corpus/code", s3=_s3(s3_server),
                   columns={"text": "content", "path": "path", "repo": "repo_name"})
    shards = plan_shards([src], IngestConfig())
    results = [read_shard(s) for s in shards]
    rows = pa.concat_tables([r.table for r in results]).to_pylist()
    got = {(r["repo"], r["path"]) for r in rows}
    assert got == {("alpha", "main.py"), ("alpha", "LICENSE"), ("beta", "web/util.js"),
                   ("gamma", "g/a.py"), ("r/one", "p.py")}
    drops = Counter(x for r in results for x in r.dropped.column(schema.REASON).to_pylist())
    assert drops == {"vendored": 1, "binary": 1, "unsafe_path": 1, "bad_json": 1}
    planned = sum(len(s) for s in shards)
    expanded = sum(r.counters.get(schema.EXPANDED_ROWS, 0) for r in results)
    assert planned + expanded == len(rows) + sum(drops.values())
    main = next(r for r in rows if r["path"] == "main.py")
    assert main["text"] == MAIN_PY
    assert (main["license"], main[schema.LICENSE_METHOD]) == ("MIT", "license_file")
    # the secret never reaches a plan fingerprint or a repr
    assert s3_server["secret_access_key"] not in repr(shards)
    assert plan_fingerprint(shards[0]) == plan_fingerprint(plan_shards([src], IngestConfig())[0])


def test_parquet_on_s3_is_read_by_ranges(s3_server):
    client = make_bucket(s3_server, "stack")
    table = pa.table({"content": ["a = 1\n", "b = 2\n", None], "path": ["a.py", "b.py", "c.py"],
                      "repo_name": ["o/r", "o/r", "o/r"], "license": ["MIT", "MIT", "MIT"]})
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=2)
    client.put_object(Bucket="stack", Key="data/train-0.parquet", Body=buf.getvalue())
    src = RecordsSource(type="parquet", name="stack", path="s3://stack/data", s3=_s3(s3_server),
                        columns={"license": "license"})
    shards = plan_shards([src], IngestConfig())
    assert sum(len(s) for s in shards) == 2  # two row groups
    results = [read_shard(s) for s in shards]
    rows = pa.concat_tables([r.table for r in results]).to_pylist()
    assert [(r["path"], r["license"], r[schema.LICENSE_METHOD]) for r in rows] == [
        ("a.py", "MIT", "dataset_column"), ("b.py", "MIT", "dataset_column")]
    assert [d for r in results for d in r.dropped.column(schema.REASON).to_pylist()] == ["bad_record"]
