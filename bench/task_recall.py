"""Recall of SWE-bench's pull requests among codecorpus's tasks, and the tasks path's speed against git.

Given a bare clone of a repository SWE-bench draws from and the SWE-bench instance ids of that
repository (``bench/data/swebench_requests.txt``: public ids, no code), this runs the tasks'
path as the shipped recipe does (``commits`` with ``first_parent: false``, then
``task_candidates`` with its defaults and the apply check) over the whole history, and asks
for each pull request ``N``:

- is its merge (``Merge pull request #N``) or squash commit (subject ending ``(#N)``) in the
  history? Those that are not (merged elsewhere, rebased under other shas) are listed and left
  out of the denominator, as the goal says;
- is it *recovered*: does one task carry its whole change, i.e. the changed lines of the task's
  ``patch`` + ``test_patch`` have a Jaccard of at least 0.9 against the changed lines of that
  commit's diff against its first parent (a line: file, sign, text)? An unrecovered one is
  printed with the drop reason of its commit, if any.

It prints recall, the statement sources of all tasks, tasks per 1,000 commits (and per 1,000
changes), and the commits per second of the source and of the whole tasks path against
``git log -p`` over the same commits: plain (what the issue names), and asked for the same
stream the source reads (merges' first-parent diffs, binary patches, raw entries, renames).
The machine is shared: the ratios are measured in the same run, the sides taking turns,
best of ``--rounds``. Goals: recall >= 95%, the source within 2x of git.

    python bench/task_recall.py /work/benchdata/requests.git --repo psf/requests \\
        --ids bench/data/swebench_requests.txt [--metadata DIR] [--rounds 2]
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from codecorpus.tasks import candidates, gitlog, unique
from codecorpus.tasks import columns as C
from codecorpus.tasks.commits import Repository, plan_slices, read_slice_table
from codecorpus.tasks.config import CommitsConfig, TaskCandidatesConfig

RECOVERED = 0.9


def cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, check=True,
                          env=gitlog.GIT_ENV).stdout.decode("utf-8", "replace")  # fmt: skip


def changed_lines(diff: str) -> set[tuple[str, str, str]]:
    """(file, sign, text) of every added or removed line of a unified diff."""
    out, path = set(), ""
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            path = line.rsplit(" b/", 1)[-1]
        elif line.startswith(("+++ ", "--- ")):
            continue
        elif line[:1] in "+-" and line:
            out.add((path, line[0], line[1:]))
    return out


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def read_ids(path: Path) -> dict[int, str]:
    """PR number -> the SWE-bench sets it is in, from the ids file."""
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            iid, *sets = line.split()
            out[int(iid.rsplit("-", 1)[1])] = ",".join(sets)
    return out


def landed_commits(gitdir: str, numbers: set[int]) -> dict[int, str]:
    """PR number -> its merge or squash commit anywhere in the history (the newest, if several)."""
    found: dict[int, str] = {}
    for line in git(gitdir, "log", "--format=%H %s", "HEAD").splitlines():
        sha, _, subject = line.partition(" ")
        m = re.match(r"Merge pull request #(\d+)\b", subject) or re.search(r"\(#(\d+)\)\s*$", subject)
        if m and int(m.group(1)) in numbers and int(m.group(1)) not in found:
            found[int(m.group(1))] = sha
    return found


def time_git(gitdir: str, same_stream: bool) -> tuple[float, float]:
    args = ["log", "-p", "HEAD"]
    if same_stream:
        args = [*gitlog.LOG_ARGS, "HEAD"]
    wall, c0 = time.perf_counter(), cpu()
    subprocess.run(["git", f"--git-dir={gitdir}", *args], stdout=subprocess.DEVNULL, env=gitlog.GIT_ENV, check=True)
    return time.perf_counter() - wall, cpu() - c0


def mine(repo: Repository, cfg: CommitsConfig, cand: TaskCandidatesConfig) -> dict:
    """The source over the whole history, then the candidates; their tables and times."""
    wall, c0 = time.perf_counter(), cpu()
    with tempfile.TemporaryDirectory() as plan_dir:
        results = [read_slice_table(sl, cfg) for sl in plan_slices([repo], cfg, plan_dir=plan_dir)]
    source_wall, source_cpu = time.perf_counter() - wall, cpu() - c0
    table = pa.concat_tables([r.table for r in results])
    dropped = pa.concat_tables([r.dropped for r in results])
    wall, c0 = time.perf_counter(), cpu()
    tasks = candidates.run(table, cand, {(repo.source, repo.repo): (repo.gitdir, "")})
    return {
        "table": table, "dropped": dropped, "tasks": tasks, "commits": sum(r.counters["commits"] for r in results),
        "source": (source_wall, source_cpu), "candidates": (time.perf_counter() - wall, cpu() - c0),
    }  # fmt: skip


def recall(gitdir: str, ids: dict[int, str], mined: dict) -> list[tuple[int, str, str | None, float, str]]:
    """(PR, sets, its commit or None, best Jaccard, why not recovered) per pull request."""
    landed = landed_commits(gitdir, set(ids))
    tasks = mined["tasks"].table.to_pylist()  # the candidates: a duplicate dropped later carries the same lines
    task_lines = [(t[C.SHA], changed_lines(t[C.PATCH] + t[C.TEST_PATCH])) for t in tasks]
    reasons = {}
    for table in (mined["dropped"], mined["tasks"].dropped):
        for path, reason in zip(table.column("path").to_pylist(), table.column("reason").to_pylist(), strict=True):
            reasons.setdefault(path, reason)
    out = []
    for number, sets in sorted(ids.items()):
        sha = landed.get(number)
        if sha is None:
            out.append((number, sets, None, 0.0, "not in the history"))
            continue
        parent = git(gitdir, "rev-parse", f"{sha}^1").strip()
        ref = changed_lines(git(gitdir, "diff", "-M", "--binary", parent, sha))
        best = max((jaccard(ref, lines) for _, lines in task_lines if lines & ref), default=0.0)
        why = "" if best >= RECOVERED else reasons.get(sha, "no task overlaps enough")
        out.append((number, sets, sha, best, why))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gitdir")
    ap.add_argument("--repo", required=True, help="owner/name, as SWE-bench names it")
    ap.add_argument("--ids", required=True, type=Path)
    ap.add_argument("--metadata", help="GitHub metadata folder (stages.commits.github_metadata)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    repo = Repository("bench", args.repo, args.gitdir)
    cfg = CommitsConfig(first_parent=False, github_metadata=args.metadata)
    cand = TaskCandidatesConfig()
    git_plain = git_same = (float("inf"), float("inf"))
    best_source = best_path = (float("inf"), float("inf"))
    mined = {}
    for _ in range(args.rounds):  # the sides take turns: a slow spell of the shared machine falls on both
        git_plain = min(git_plain, time_git(args.gitdir, False))
        git_same = min(git_same, time_git(args.gitdir, True))
        mined = mine(repo, cfg, cand)
        best_source = min(best_source, mined["source"])
        path = tuple(a + b for a, b in zip(mined["source"], mined["candidates"], strict=True))
        best_path = min(best_path, path)
    n, tasks = mined["commits"], mined["tasks"].table
    changes = sum(1 for r in mined["table"].select([C.MAINLINE, C.PARENTS, C.PR_NUMBER]).to_pylist()
                  if candidates.is_change(r))  # fmt: skip
    kept, duplicates = unique.split_duplicates(tasks, unique.decide(unique.task_keys(tasks, 0)[0], 1)[0])
    print(f"{args.repo}: {n:,} commits walked, {changes:,} changes as they landed, {tasks.num_rows:,} task "
          f"candidates, {kept.num_rows:,} tasks after task_outputs' exact dedup ({duplicates.num_rows} duplicates)")
    tasks = kept
    rows = recall(args.gitdir, read_ids(args.ids), mined)
    present = [r for r in rows if r[2] is not None]
    hit = [r for r in present if r[3] >= RECOVERED]
    print(f"\nrecall: {len(hit)}/{len(present)} = {len(hit) / max(len(present), 1):.1%} of the SWE-bench pull "
          f"requests whose merge or squash commit is in the history ({len(rows) - len(present)} not in it)")  # fmt: skip
    for number, sets, sha, best, why in rows:
        print(f"  #{number:<6} {sets:<14} {(sha or '-')[:10]:<10}  jaccard {best:4.2f}  {why}")
    sources = Counter(tasks.column(C.STATEMENT_SOURCE).to_pylist())
    print("\nstatement sources: " + ", ".join(f"{k} {v:,}" for k, v in sorted(sources.items())))
    print(f"tasks per 1,000 commits: {1000 * tasks.num_rows / max(n, 1):.1f}; per 1,000 changes: "
          f"{1000 * tasks.num_rows / max(changes, 1):.1f}")  # fmt: skip
    drops = Counter(mined["tasks"].dropped.column("reason").to_pylist())
    print("candidates' drops: " + ", ".join(f"{k} {v:,}" for k, v in drops.most_common()))
    print(f"\nspeed (best of {args.rounds}; wall s / CPU s; commits per CPU second):")
    for name, (wall, cpu_s) in (("git log -p (plain)", git_plain), ("git log, the source's stream", git_same),
                                ("codecorpus commits source", best_source),
                                ("codecorpus source + candidates", best_path)):  # fmt: skip
        print(f"  {name:<32} {wall:7.1f} s {cpu_s:7.1f} CPU-s {n / cpu_s:9.0f} commits/CPU-s")
    for name, t in (("source", best_source), ("source + candidates", best_path)):
        print(f"  {name} / git log -p: {t[1] / git_plain[1]:.2f}x CPU; / the same stream: {t[1] / git_same[1]:.2f}x CPU")


if __name__ == "__main__":
    main()
