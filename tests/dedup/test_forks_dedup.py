"""Repository-level fork / vendored-copy removal and the whitespace-normalised exact key, in-process."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import ValidationError
from test_near_dedup import BASE_LINES, _docs, _edited, _text, run_dedup

from codecorpus.config import DedupConfig, ForksConfig
from codecorpus.dedup import forks, near


def _file(tag: str, i: int) -> str:
    return _text([f"def {tag}_{i}_{j}(x):\n    return helper_{tag}(x, {i}, {j}) * {i + j}\n" for j in range(12)])


def _repo(name: str, texts: list[str], **extra) -> list[dict]:
    return [{"id": f"{name}-{k}", "repo": name, "text": t, **extra} for k, t in enumerate(texts)]


def _with_attrs(rows: list[dict]) -> pa.Table:
    t = _docs(rows)
    return t.append_column("stars", pa.array([r.get("stars", 0) for r in rows], pa.int64()))


def run_with_forks(shards: list[pa.Table], cfg: DedupConfig, seed: int = 3):
    """fkeys -> fcount -> fedges -> fdecide, then the file-level phases, as the executor routes files."""
    n, b = len(shards), cfg.buckets
    keys = [forks.keys(t, s, cfg) for s, t in enumerate(shards)]
    counts = [forks.count(pa.concat_tables([keys[s][p] for s in range(n)]), cfg) for p in range(b)]
    edges = [forks.edges(pa.concat_tables([counts[q][p] for q in range(b)]), cfg) for p in range(b)]
    decided = forks.decide(pa.concat_tables([edges[q][0] for q in range(b)]), cfg, n)
    sig = [near.candidates_without_forks(t, decided[s], s, cfg, seed) for s, t in enumerate(shards)]
    pairs = [near.pairs(pa.concat_tables([sig[s][p] for s in range(n)]), cfg) for p in range(b)]
    labels = near.components((pairs[p][0] for p in range(b)), [t.num_rows for t in shards])
    members = [near.members(t, labels[s], s, cfg) for s, t in enumerate(shards)]
    kept = [near.keep(pa.concat_tables([members[s][p] for s in range(n)]), cfg, n) for p in range(b)]
    return [
        near.apply_with_forks(t, pa.concat_tables([kept[p][s] for p in range(b)]), decided[s], cfg)
        for s, t in enumerate(shards)
    ]


def _summary(results):
    kept = {r for res in results for r in res.table.column("id").to_pylist()}
    drops = {d["id"]: d for res in results for d in res.dropped.to_pylist()}
    return kept, drops


FORKS = DedupConfig(buckets=3, forks=ForksConfig(enabled=True))


def test_fork_is_removed_as_a_whole_and_origin_keeps_all_files():
    origin = [_file("core", i) for i in range(6)]
    rows = (
        _repo("origin", origin, stars=40)
        + _repo("fork", [*origin[:5], _file("own", 0)], stars=1, license="unknown")  # 5 of 6 shared
        + _repo("other", [_file("x", i) for i in range(3)])
    )
    table = _with_attrs(rows)
    results = run_with_forks([table.slice(0, 7), table.slice(7)], FORKS)
    kept, drops = _summary(results)
    assert kept == {f"origin-{k}" for k in range(6)} | {f"other-{k}" for k in range(3)}
    assert set(drops) == {f"fork-{k}" for k in range(6)}  # its own file goes too: the repo is removed whole
    assert {(d["reason"], d["detail"]) for d in drops.values()} == {("fork_of", "s/origin")}
    assert drops["fork-5"]["score"] == pytest.approx(5 / 6) and drops["fork-5"]["threshold"] == 0.5
    assert sum(r.table.num_rows + r.dropped.num_rows for r in results) == table.num_rows


def test_mutual_copies_keep_the_repository_the_keep_policy_prefers():
    files = [_file("m", i) for i in range(4)]
    rows = _repo("aaa-gpl", files, license="GPL-3.0-only", stars=100) + _repo("zzz-mit", files, stars=0)
    kept, drops = _summary(run_with_forks([_with_attrs(rows)], FORKS))
    assert kept == {f"zzz-mit-{k}" for k in range(4)}
    assert {d["detail"] for d in drops.values()} == {"s/zzz-mit"}
    by_stars = DedupConfig(buckets=3, forks=ForksConfig(enabled=True), keep_policy=("stars",))
    kept, drops = _summary(run_with_forks([_with_attrs(rows)], by_stars))
    assert kept == {f"aaa-gpl-{k}" for k in range(4)}
    same = _repo("b", files) + _repo("a", files)  # all ties: the smaller name stays
    assert _summary(run_with_forks([_with_attrs(same)], FORKS))[0] == {f"a-{k}" for k in range(4)}


def test_vendored_copy_goes_and_a_small_overlap_stays():
    lib = [_file("lib", i) for i in range(4)]
    app = [_file("app", i) for i in range(10)]
    rows = (
        _repo("lib", lib, stars=500)
        + _repo("mirror", [*lib[:3], lib[3] + "# patched\n"], stars=0)  # a vendored copy with one patch
        + _repo("app", [*app, lib[0]])  # uses one lib file: 1/11 shared, kept whole
    )
    kept, drops = _summary(run_with_forks([_with_attrs(rows)], FORKS))
    assert {i for i, d in drops.items() if d["reason"] == "fork_of"} == {f"mirror-{k}" for k in range(4)}
    assert {d["detail"] for d in drops.values() if d["reason"] == "fork_of"} == {"s/lib"}
    assert {f"app-{k}" for k in range(11)} - kept == {"app-10"}  # the shared file: a file-level exact dup
    assert drops["app-10"]["reason"] == "exact_duplicate" and drops["app-10"]["dup_of"] == "lib-0"
    assert {f"lib-{k}" for k in range(4)} <= kept


def test_repository_contained_in_a_bigger_one_goes_in_its_favour():
    big = [_file("big", i) for i in range(8)]
    rows = _repo("small", big[:3], stars=9) + _repo("big", big)  # small: 3/3 in big; big: 3/8 in small
    kept, drops = _summary(run_with_forks([_with_attrs(rows)], FORKS))
    assert kept == {f"big-{k}" for k in range(8)}
    assert {d["detail"] for d in drops.values()} == {"s/big"}


def test_min_files_boilerplate_cap_and_disabled_forks():
    shared = [_file("s", i) for i in range(3)]
    rows = _repo("one", shared[:1]) + _repo("two", shared)  # one: 1/1 shared, but below min_files; two: 1/3
    _, drops = _summary(run_with_forks([_with_attrs(rows)], FORKS))
    assert {d["reason"] for d in drops.values()} == {"exact_duplicate"}
    boiler = [_file("lic", 0), _file("init", 0)]
    many = [r for k in range(5) for r in _repo(f"r{k}", [*boiler, _file(f"own{k}", 0)])]
    capped = DedupConfig(buckets=2, near=False, forks=ForksConfig(enabled=True, max_repos_per_hash=4))
    drops = _summary(run_with_forks([_with_attrs(many)], capped))[1]
    assert {d["reason"] for d in drops.values()} == {"exact_duplicate"}  # 2/3 shared, but only via boilerplate
    uncapped = DedupConfig(buckets=2, near=False, forks=ForksConfig(enabled=True, max_repos_per_hash=5))
    drops = _summary(run_with_forks([_with_attrs(many)], uncapped))[1]
    assert {d["detail"] for d in drops.values() if d["reason"] == "fork_of"} == {"s/r0"}
    with pytest.raises(ValidationError, match="min_shared_frac"):
        DedupConfig(forks={"enabled": True, "min_shared_frac": 1.5})


def test_chains_and_cycles_only_remove_in_favour_of_kept_repositories():
    def e(a, b, frac=0.9):
        return {"repo": a, "other": b, "frac": frac, "shared": 9}

    # a copies b copies c: b goes (c stays), so a stays (its content's home is gone)
    assert set(forks.resolve({"a": [e("a", "b")], "b": [e("b", "c")]}, {"a": (1,), "b": (2,)})) == {"b"}
    # a cycle keeps its best-ranked member and removes the rest in its favour
    cycle = {"a": [e("a", "b")], "b": [e("b", "c")], "c": [e("c", "a")]}
    removed = forks.resolve(cycle, {"a": (2,), "b": (0,), "c": (1,)})
    assert {k: v["other"] for k, v in removed.items()} == {"a": "b"}  # then c's only target is gone: c stays
    # several kept targets: the highest shared fraction wins
    assert forks.resolve({"a": [e("a", "b", 0.6), e("a", "c", 0.8)]}, {"a": (0,)})["a"]["other"] == "c"


def test_whitespace_normalised_exact_key():
    base = _text(BASE_LINES)
    variants = [base, base.replace("    ", "\t").replace("\n", "\r\n"), base + "   \n\n", _text(_edited(BASE_LINES, 0.1, 2))]
    rows = [{"id": f"w{i}", "text": t} for i, t in enumerate(variants)]
    plain = _summary(run_dedup([_docs(rows)], DedupConfig(buckets=2, near=False)))[1]
    assert plain == {}
    drops = _summary(run_dedup([_docs(rows)], DedupConfig(buckets=2, near=False, exact_whitespace=True, keep_policy=("id",))))[1]
    assert {i: (d["reason"], d["dup_of"]) for i, d in drops.items()} == {
        "w1": ("exact_duplicate", "w0"), "w2": ("exact_duplicate", "w0"),
    }
    both = _summary(run_dedup([_docs(rows)], DedupConfig(buckets=2, exact_whitespace=True, keep_policy=("id",))))[1]
    assert {i: d["reason"] for i, d in both.items()} == {
        "w1": "exact_duplicate", "w2": "exact_duplicate", "w3": "near_duplicate",
    }
