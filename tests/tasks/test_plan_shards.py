"""The commits plan's shards: consecutive parts of the plan up to a slice of commits."""

from __future__ import annotations

from codecorpus.tasks import plan as tplan
from codecorpus.tasks.bodies import RepositoryProblem
from codecorpus.tasks.commits import CommitSlice, Repository


def test_shards_hold_consecutive_parts_up_to_a_slice_of_commits(monkeypatch):
    def part(name: str, count: int | None, skip: int = 0):
        repo = Repository("s", f"o/{name}", f"/g/{name}")
        return RepositoryProblem(repo, "bad_repository", "x") if count is None else CommitSlice(repo, "a" * 40, skip, count)

    parts = [part("big", 5), part("big", 5, 5), part("big", 2, 10), part("a", 1), part("b", 2), part("x", None),
             part("c", 5), part("d", 1), part("e", 1), part("f", 1)]  # fmt: skip
    monkeypatch.setattr(tplan, "SHARD_PARTS", 2)
    shards = [[(p.repository.repo, getattr(p, "count", None)) for p in sh.parts] for sh in tplan._grouped(parts, 5)]
    assert shards == [[("o/big", 5)], [("o/big", 5)], [("o/big", 2), ("o/a", 1)], [("o/b", 2), ("o/x", None)],
                      [("o/c", 5)], [("o/d", 1), ("o/e", 1)], [("o/f", 1)]]  # fmt: skip
