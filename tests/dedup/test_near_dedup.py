"""Near-dup phases on tiny tables, run in-process the way the executor chains them."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from codecorpus import schema
from codecorpus.config import DedupConfig
from codecorpus.dedup import near

BASE_LINES = [f"def function_{i}(alpha, beta):\n    return alpha * {i} + beta - compute(alpha, {i})\n" for i in range(40)]


def _text(lines: list[str]) -> str:
    return "".join(lines)


def _edited(lines: list[str], frac: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = list(lines)
    for i in rng.sample(range(len(out)), int(len(out) * frac)):
        out[i] = f"value_{seed}_{i} = other_call({seed}, {i})\n"
    return out


def _docs(rows: list[dict]) -> pa.Table:
    full = []
    for r in rows:
        data = r["text"].encode()
        full.append({
            "id": r["id"], "source": "s", "repo": r.get("repo", "r"), "path": r["id"] + ".py", "revision": "",
            "license": r.get("license", "MIT"), "lang": "Python", "kind": "code", "text": r["text"],
            "bytes": len(data), "content_hash": schema.content_hash(data), "encoding": "utf-8",
        })
    return pa.Table.from_pylist(full, schema=schema.DOC_SCHEMA)


def run_dedup(shards: list[pa.Table], cfg: DedupConfig, seed: int = 3):
    """sig -> pairs -> clusters -> members -> keep -> apply, exactly as the executor routes files."""
    n, b = len(shards), cfg.buckets
    sig = [near.candidates(t, s, cfg, seed) for s, t in enumerate(shards)]
    pairs = [near.pairs(pa.concat_tables([sig[s][p] for s in range(n)]), cfg) for p in range(b)]
    labels = near.components((pairs[p][0] for p in range(b)), [t.num_rows for t in shards])
    members = [near.members(t, labels[s], s, cfg) for s, t in enumerate(shards)]
    keep = [near.keep(pa.concat_tables([members[s][p] for s in range(n)]), cfg, n) for p in range(b)]
    return [near.apply(t, pa.concat_tables([keep[p][s] for p in range(b)]), cfg) for s, t in enumerate(shards)]


def _planted() -> list[dict]:
    base = _text(BASE_LINES)
    unrelated = _text([f"class Widget{i}:\n    size = {i * 7}\n    name = 'w{i}'\n" for i in range(30)])
    return [
        {"id": "a0", "text": base},
        {"id": "a1", "text": base, "license": "unknown"},  # exact copy
        {"id": "a2", "text": _text(_edited(BASE_LINES, 0.05, 1))},  # near copy
        {"id": "a3", "text": base.replace("    ", "\t")},  # whitespace-only change: same shingles
        {"id": "u0", "text": unrelated},
        {"id": "u1", "text": "x = 1\n"},
        {"id": "e0", "text": "   \n\n"},  # no tokens: nobody's duplicate
    ]


def _outcome(results):
    kept = {i for r in results for i in r.table.column("id").to_pylist()}
    drops = pa.concat_tables([r.dropped for r in results]).to_pylist()
    return kept, {d["id"]: (d["reason"], d["dup_of"]) for d in drops}


def test_planted_exact_and_near_copies_form_one_cluster():
    rows = _planted()
    results = run_dedup([_docs(rows[:4]), _docs(rows[4:])], DedupConfig(buckets=4))
    kept, drops = _outcome(results)
    assert kept == {"a0", "u0", "u1", "e0"}
    assert drops == {
        "a1": ("exact_duplicate", "a0"), "a2": ("near_duplicate", "a0"), "a3": ("near_duplicate", "a0"),
    }
    annotated = {r["id"]: r for res in results for r in res.table.to_pylist()}
    assert (annotated["a0"]["dup_cluster"], annotated["a0"]["dup_cluster_size"], annotated["a0"]["dup_count"]) == (
        "a0", 4, 2,
    )
    assert (annotated["u0"]["dup_cluster"], annotated["u0"]["dup_cluster_size"]) == ("u0", 1)
    for shard, res in zip([rows[:4], rows[4:]], results, strict=True):
        assert len(shard) == res.table.num_rows + res.dropped.num_rows


def test_chain_a_b_c_is_one_cluster_even_if_a_and_c_are_not_similar():
    a = BASE_LINES
    b = _edited(a, 0.12, 11)
    c = list(b)
    for i in range(len(c)):
        if c[i] == a[i] and i % 8 == 3:
            c[i] = f"chain_c_{i} = other({i})\n"
    docs = _docs([{"id": "c0", "text": _text(a)}, {"id": "c1", "text": _text(b)}, {"id": "c2", "text": _text(c)}])
    kept, drops = _outcome(run_dedup([docs], DedupConfig(buckets=2, verify="exact", threshold=0.6)))
    assert kept == {"c0"} and drops == {"c1": ("near_duplicate", "c0"), "c2": ("near_duplicate", "c0")}


def test_keep_policy_order_is_configurable():
    base = _text(BASE_LINES)
    longer = base + "# trailing comment\n"
    rows = [
        {"id": "k0", "text": base, "license": "GPL-3.0-only"},
        {"id": "k1", "text": longer, "license": "MIT"},
        {"id": "k2", "text": base + "#\n", "license": "unknown"},
    ]
    by_license = _outcome(run_dedup([_docs(rows)], DedupConfig(buckets=2)))[0]
    assert by_license == {"k1"}
    by_id = _outcome(run_dedup([_docs(rows)], DedupConfig(buckets=2, keep_policy=("id",))))[0]
    assert by_id == {"k0"}
    unknown_over_gpl = _outcome(run_dedup([_docs([rows[0], rows[2]])], DedupConfig(buckets=2)))[0]
    assert unknown_over_gpl == {"k2"}


def test_stars_and_last_commit_rank_when_present():
    base = _text(BASE_LINES)
    t = _docs([{"id": "s0", "text": base}, {"id": "s1", "text": base + "#\n"}, {"id": "s2", "text": base + "##\n"}])
    t = t.append_column(schema.STARS, pa.array([5, 50, 50], pa.int64()))
    t = t.append_column(schema.LAST_COMMIT, pa.array([3, 1, 2], pa.int64()).cast(pa.timestamp("s", tz="UTC")))
    assert _outcome(run_dedup([t], DedupConfig(buckets=2, keep_policy=("stars", "last_commit"))))[0] == {"s2"}
    assert _outcome(run_dedup([t], DedupConfig(buckets=2, keep_policy=("last_commit",))))[0] == {"s0"}


def test_same_result_for_any_shard_split_and_bucket_count():
    rng = random.Random(5)
    rows = []
    for g in range(6):
        lines = [f"def g{g}_{i}(x):\n    return helper_{g}(x, {i}) + {g * i}\n" for i in range(30)]
        for c in range(rng.randint(1, 4)):
            rows.append({"id": f"g{g}-{c}", "text": _text(_edited(lines, 0.04 * c, g * 10 + c))})
    whole = _docs(rows)
    one = run_dedup([whole], DedupConfig(buckets=1))
    many = run_dedup([whole.slice(0, 5), whole.slice(5, 4), whole.slice(9)], DedupConfig(buckets=7))
    assert _outcome(one) == _outcome(many)
    assert len(_outcome(one)[0]) == 6


@pytest.mark.parametrize("verify", ["none", "estimated", "exact"])
def test_unrelated_documents_survive_every_verify_mode(verify):
    rows = [{"id": f"d{i}", "text": _text([f"item_{i}_{j} = compute_{j}({i}, {j * i})\n" for j in range(25)])}
            for i in range(20)]
    kept, drops = _outcome(run_dedup([_docs(rows)], DedupConfig(buckets=3, verify=verify)))
    assert drops == {} and len(kept) == 20


def test_verification_cuts_a_forced_false_candidate():
    a = _text(BASE_LINES)
    b = _text(_edited(BASE_LINES, 0.6, 4))  # Jaccard far below 0.7
    cfg_loose = DedupConfig(buckets=1, bands=64, rows=1)  # any one equal value makes a candidate
    assert _outcome(run_dedup([_docs([{"id": "a", "text": a}, {"id": "b", "text": b}])], cfg_loose))[1] != {}
    for verify in ("estimated", "exact"):
        cfg = DedupConfig(buckets=1, bands=64, rows=1, verify=verify)
        assert _outcome(run_dedup([_docs([{"id": "a", "text": a}, {"id": "b", "text": b}])], cfg))[1] == {}


def test_exact_only_and_near_only():
    rows = _planted()
    exact_only = _outcome(run_dedup([_docs(rows)], DedupConfig(buckets=2, near=False)))[1]
    assert exact_only == {"a1": ("exact_duplicate", "a0")}
    near_only = _outcome(run_dedup([_docs(rows)], DedupConfig(buckets=2, exact=False)))[1]
    assert Counter(r for r, _ in near_only.values()) == {"exact_duplicate": 1, "near_duplicate": 2}


def test_empty_shards_and_config_errors():
    out = run_dedup([_docs([]), _docs([{"id": "z", "text": "z = 1\n"}])], DedupConfig(buckets=2))
    assert [r.table.num_rows for r in out] == [0, 1]
    with pytest.raises(ValidationError, match="bands and rows"):
        DedupConfig(bands=4)
    with pytest.raises(ValidationError, match="exceeds num_perm"):
        DedupConfig(bands=40, rows=10)


def test_gid_layout_roundtrip():
    g = near.gids(3, 5)
    assert (g >> near.ROW_BITS).tolist() == [3] * 5 and (g & 0xFFFFFFFF).tolist() == list(range(5))
    assert np.all(np.diff(g) == 1)


def test_estimated_payloads_are_each_documents_signature_bytes():
    from codecorpus.dedup import minhash
    from codecorpus.dedup.shingles import shingle_texts

    table = _docs(_planted())
    cfg = DedupConfig(buckets=2, verify="estimated", exact=False)
    sig = minhash.signatures(shingle_texts(table.column(schema.TEXT), cfg.ngram), cfg.num_perm, 3)
    rows = pa.concat_tables(near.candidates(table, 0, cfg, 3).values())
    assert rows.num_rows > 0
    for gid, payload in zip(rows.column(near.GID).to_pylist(), rows.column(near.PAYLOAD).to_pylist(), strict=True):
        assert payload == sig[gid].tobytes()
