"""The commits source gives the rows and drops it gave before its batch-level rewrite, field for field.

``data/commits_golden.json`` was written by the per-commit reader (one ``cat-file`` round trip
per commit for before-images and licenses, field-by-field parsing of ``--raw``/``--numstat``)
on ``build_project``'s repository, whose commits have fixed dates, so the same shas on every
machine: renames, a binary file, a non-UTF-8 path and messages (transcoded and dropped),
submodule bumps, a merge, a bot, vendored and lockfile changes, license changes. Three walks:
the first-parent chain and every commit with the default caps, and tiny caps (before-images skipped for size and the
commit cap, records over ``max_record_bytes``). The diffs are git's (2.39's algorithm): a
git whose diff output differs would need the file written again, by running this module:

    PYTHONPATH=src:tests/tasks python tests/tasks/test_commits_golden.py

Since the log is read without ``--numstat``, git's records are shorter: the tiny record cap
went from 600 to 580 bytes to keep the same records over it, and the two ``diff_too_large``
drops give those records' new sizes (``bytes``, ``detail``); every other field is the
per-commit reader's.

Written again when merges became changes (issue 38): a mainline merge is a row (its diff
against its first parent, ``mainline``, ``landed_at``, ``pr_number`` and the metadata columns;
a merge's before-images are not read), binary files are git binary patches (``--binary``); every
other field is unchanged.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pyarrow as pa
from tasks_repos import build_project, project, project_repo

from codecorpus.tasks.commits import Repository, plan_slices, read_slice
from codecorpus.tasks.config import CommitsConfig

__all__ = ["project", "project_repo"]  # fixtures

GOLDEN = Path(__file__).with_name("data") / "commits_golden.json"
WALKS = {
    "first_parent": CommitsConfig(),
    "all": CommitsConfig(first_parent=False),
    "tiny_caps": CommitsConfig(first_parent=False, max_record_bytes=580, max_before_bytes=300,
                               max_before_file_bytes=200, commits_per_slice=7, batch_rows=3),
}  # fmt: skip


def canonical(repo: Repository) -> dict[str, dict[str, list]]:
    """Rows and drops of each walk as JSON values (timestamps as ISO strings)."""
    out = {}
    for name, cfg in WALKS.items():
        with tempfile.TemporaryDirectory() as plan_dir:  # a walk of every parent is listed there
            batches = [b for sl in plan_slices([repo], cfg, plan_dir=plan_dir) for b in read_slice(sl, cfg)]
        rows = pa.concat_tables([b.table for b in batches]).to_pylist()
        drops = pa.concat_tables([b.dropped for b in batches]).to_pylist()
        out[name] = json.loads(json.dumps({"rows": rows, "drops": drops}, default=str, sort_keys=True))
    return out


def test_rows_and_drops_match_the_per_commit_reader(project_repo):
    golden = json.loads(GOLDEN.read_text())
    now = canonical(project_repo)
    for walk in WALKS:
        assert [r["sha"] for r in now[walk]["rows"]] == [r["sha"] for r in golden[walk]["rows"]], walk
        for mine, theirs in zip(now[walk]["rows"], golden[walk]["rows"], strict=True):
            assert mine == theirs, (walk, mine["subject"])
        assert now[walk]["drops"] == golden[walk]["drops"], walk


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        project = build_project(Path(tmp))
        GOLDEN.parent.mkdir(exist_ok=True)
        data = canonical(Repository("fixture", "acme/proj", str(project.path / ".git")))
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN}")
