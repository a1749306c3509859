"""Commits per second per core: codecorpus's commits source against raw ``git log -p``.

Both walk the same commits of the same repositories: first-parent, as the
source does by default, or with ``--every-parent`` every commit (the shipped
recipe's walk, whose slices read their commits from the plan's walk file).
``--commits-per-slice`` cuts each history into slices of N (the source's default,
5,000, unless given), to show what slicing a long history costs. The peer is git alone writing its log with patches,
raw entries, renames, merges' first-parent diffs and binary patches to /dev/null: the stream
the source asks git for (``gitlog.LOG_ARGS``; before merges became changes it was
``git log -p --numstat --raw -M``), the least any miner of pull requests pays;
codecorpus parses that same stream into Arrow rows, reads before-images and
licenses, and applies its drop rules. CPU seconds (this process plus its git
children) give the per-core rate; wall seconds are printed too.

Repositories: the project's own history (cloned bare into a temp dir), any
given on the command line, and with ``--synthetic N`` a generated one of N
commits (``git fast-import``: a few files edited per commit, tests beside code).
Goal: codecorpus within 2x of git. Measure on an idle machine.

Two measures are printed, each side's best of ``--rounds`` rounds (5), the two sides taking
turns within a round so that a slow spell of the machine falls on both; the spread of the
rounds' own ratios is printed beside it. *One core*: one walk at a
time with this process and every child pinned to a single CPU (the others idle), so
codecorpus's Python and its git children take turns on that core as git alone does, and
wall seconds are CPU seconds of one core. Unpinned, the two would run at once on two vCPUs,
and on a VM whose vCPUs share a physical core (this one: a busy loop on the other vCPU slows
Python by about 1.6x) both would be slowed, inflating codecorpus's CPU seconds. *Every
core busy*: as many walks at once as the machine has CPUs (so each side is as contended as
in a corpus run, where every core has a task), commits per wall second of the whole
machine, divided by its CPUs.

Where codecorpus's time goes (one core) is printed too: its own process (Python: record
split and parse, decoding, ingest's exclusions, row building, Arrow) and its git
children (the git log that is the peer's work plus the ``cat-file`` reads of
before-images and license files, and ``rev-parse`` / ``rev-list`` of the
plan). A history of small commits (the synthetic one: two small files each) is
the hard case, since git's own work per commit is least there while the Python
per commit is fixed; on real histories with larger diffs the ratio is lower.

    python bench/commits_bench.py [--synthetic 2000] [--every-parent] [--commits-per-slice N] [REPO ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codecorpus.tasks.commits import Repository, plan_slices, read_slice, walk_args
from codecorpus.tasks.config import CommitsConfig
from codecorpus.tasks.gitlog import GIT_ENV, LOG_ARGS


def cpu_split() -> tuple[float, float]:
    """CPU seconds of this process and of its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def cpu_seconds() -> float:
    return sum(cpu_split())


def own_history(tmp: Path) -> Path:
    top = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--show-toplevel"],
                         capture_output=True, check=True).stdout.decode().strip()  # fmt: skip
    dest = tmp / "own.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", top, str(dest)], check=True)
    return dest


def synthetic(tmp: Path, commits: int) -> Path:
    """A repository of ``commits`` commits, each editing a code file and its test (git fast-import)."""
    dest = tmp / "synthetic.git"
    subprocess.run(["git", "init", "-q", "--bare", str(dest)], check=True)
    lines: list[bytes] = []
    files = {f"pkg/mod{i}.py": [f"def f{i}_{j}():\n    return {j}\n" for j in range(20)] for i in range(20)}
    for n in range(commits):
        i = n % 20
        code = files[f"pkg/mod{i}.py"]
        code[n % len(code)] = f"def f{i}_{n}():\n    return {n} * 2\n"
        test = f"from pkg.mod{i} import *\n\n\ndef test_{n}():\n    assert True\n"
        body = f"Change f{i} for case {n}\n\nMake the function return twice the value.\n".encode()
        lines.append(b"commit refs/heads/main\n")
        lines.append(f"committer Dev <dev@example.com> {1700000000 + n * 60} +0000\n".encode())
        lines.append(b"data %d\n%s\n" % (len(body), body))
        for path, text in ((f"pkg/mod{i}.py", "".join(code)), (f"tests/test_mod{i}.py", test)):
            data = text.encode()
            lines.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
    subprocess.run(["git", f"--git-dir={dest}", "fast-import", "--quiet"], input=b"".join(lines), check=True)
    subprocess.run(["git", f"--git-dir={dest}", "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
    return dest


def git_raw(gitdir: str, cfg: CommitsConfig) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), cpu_seconds()
    subprocess.run(["git", f"--git-dir={gitdir}", *LOG_ARGS, *walk_args(cfg), "HEAD"],
                   stdout=subprocess.DEVNULL, env=GIT_ENV, check=True)  # fmt: skip
    return time.perf_counter() - wall, cpu_seconds() - cpu


def codecorpus_walk(gitdir: str, cfg: CommitsConfig) -> tuple[float, float, int, int, float]:
    """(wall s, CPU s, commits, rows, CPU s of the Python process alone), the plan included."""
    wall, (own, kids) = time.perf_counter(), cpu_split()
    commits = rows = 0
    with tempfile.TemporaryDirectory() as plan_dir:
        for sl in plan_slices([Repository("bench", Path(gitdir).name, gitdir)], cfg, plan_dir=plan_dir):
            for batch in read_slice(sl, cfg):
                commits += batch.table.num_rows + batch.dropped.num_rows
                rows += batch.table.num_rows
    own_now, kids_now = cpu_split()
    return time.perf_counter() - wall, own_now + kids_now - own - kids, commits, rows, own_now - own


def _walk_child(gitdir: str, cfg: CommitsConfig) -> None:
    """One walker of the busy-machine measure: warm up, say so, wait for the go, walk, report."""
    codecorpus_walk(gitdir, cfg.model_copy(update={"max_commits_per_repo": 5}))
    print("ready", flush=True)
    sys.stdin.readline()
    _, _, commits, _, _ = codecorpus_walk(gitdir, cfg)
    print(commits, flush=True)


def busy_rates(gitdir: str, cfg: CommitsConfig, copies: int, rounds: int) -> tuple[float, float, int]:
    """(git, codecorpus) commits per wall second per CPU with ``copies`` walks at once, best of
    ``rounds``, and the walk's commits."""
    git_cmd = ["git", f"--git-dir={gitdir}", *LOG_ARGS, *walk_args(cfg), "HEAD"]
    commits = int(subprocess.run(["git", f"--git-dir={gitdir}", "rev-list", "--count", *walk_args(cfg), "HEAD"],
                                 capture_output=True, check=True).stdout)  # fmt: skip
    git_best = cc_best = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        procs = [subprocess.Popen(git_cmd, stdout=subprocess.DEVNULL, env=GIT_ENV) for _ in range(copies)]
        for p in procs:
            p.wait()
        git_best = max(git_best, commits / (time.perf_counter() - t0))
        child = [sys.executable, __file__, "--walk-child", gitdir, *_options(cfg)]
        walkers = [subprocess.Popen(child, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                   for _ in range(copies)]  # fmt: skip
        for w in walkers:
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        t0 = time.perf_counter()
        for w in walkers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
        walked = sum(int(w.stdout.readline()) for w in walkers if w.stdout is not None)
        cc_best = max(cc_best, walked / (time.perf_counter() - t0) / copies)
        for w in walkers:
            w.wait()
    return git_best, cc_best, commits


def _options(cfg: CommitsConfig) -> list[str]:
    return [*([] if cfg.first_parent else ["--every-parent"]), f"--commits-per-slice={cfg.commits_per_slice}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repos", nargs="*", help="more git directories to measure")
    parser.add_argument("--synthetic", type=int, default=0, help="also a generated repository of N commits")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per measure; each side's best counts")
    parser.add_argument("--every-parent", action="store_true", help="walk every parent, not the first-parent chain")
    parser.add_argument("--commits-per-slice", type=int, default=CommitsConfig().commits_per_slice,
                        help="cut each history into slices of N (the source's default)")
    parser.add_argument("--walk-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cfg = CommitsConfig(first_parent=not args.every_parent, commits_per_slice=args.commits_per_slice)
    if args.walk_child:
        return _walk_child(args.walk_child, cfg)
    with tempfile.TemporaryDirectory() as tmp:
        repos = [own_history(Path(tmp)), *map(Path, args.repos)]
        if args.synthetic:
            repos.append(synthetic(Path(tmp), args.synthetic))
        codecorpus_walk(str(repos[0]), cfg.model_copy(update={"max_commits_per_repo": 5}))  # imports and first-use costs are once per worker, not per commit
        cpus = os.cpu_count() or 1
        everywhere = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {max(everywhere)})  # children (git) inherit it
        total = {"git_cpu": 0.0, "cc_cpu": 0.0, "commits": 0}
        walk = "every parent" if args.every_parent else "first parent"
        print(f"walk: {walk}, {cfg.commits_per_slice} commits a slice at most")
        print(f"one core (this process and its children pinned to one CPU; best of {args.rounds}, taking turns):")
        print(f"{'repository':<24}{'commits':>9}{'rows':>7}{'git c/s/core':>15}{'codecorpus c/s/core':>22}{'ratio':>8}"
              f"{'rounds':>12}{'us/commit: git':>17}{'cc python':>11}{'cc git':>8}")  # fmt: skip
        for repo in repos:
            turns = [(git_raw(str(repo), cfg)[1], codecorpus_walk(str(repo), cfg)) for _ in range(args.rounds)]
            git_cpu = min(g for g, _ in turns)
            _, cc_cpu, commits, rows, cc_python = min((w for _, w in turns), key=lambda r: r[1])
            spread = sorted(w[1] / max(g, 1e-9) for g, w in turns)
            total["git_cpu"] += git_cpu
            total["cc_cpu"] += cc_cpu
            total["commits"] += commits
            us = 1e6 / max(commits, 1)
            print(f"{repo.name:<24}{commits:>9}{rows:>7}{commits / max(git_cpu, 1e-9):>15.0f}"
                  f"{commits / max(cc_cpu, 1e-9):>22.0f}{cc_cpu / max(git_cpu, 1e-9):>8.2f}"
                  f"{f'{spread[0]:.2f}-{spread[-1]:.2f}':>12}"
                  f"{git_cpu * us:>17.0f}{cc_python * us:>11.0f}{(cc_cpu - cc_python) * us:>8.0f}")  # fmt: skip
        os.sched_setaffinity(0, everywhere)
        ratio = total["cc_cpu"] / max(total["git_cpu"], 1e-9)
        print(f"all, one core: {total['commits']} commits; codecorpus costs {ratio:.2f}x git's CPU per commit (goal <= 2x)")
        print(f"\nevery core busy ({cpus} walks at once, best of {args.rounds}):")
        print(f"{'repository':<24}{'git c/s/core':>15}{'codecorpus c/s/core':>22}{'ratio':>8}")
        wall = {"git": 0.0, "cc": 0.0}
        for repo in repos:
            git_rate, cc_rate, n = busy_rates(str(repo), cfg, cpus, args.rounds)
            wall["git"] += n / git_rate
            wall["cc"] += n / cc_rate
            print(f"{repo.name:<24}{git_rate:>15.0f}{cc_rate:>22.0f}{git_rate / cc_rate:>8.2f}")
        print(f"all, every core busy: codecorpus costs {wall['cc'] / wall['git']:.2f}x git's time per commit (goal <= 2x)")


if __name__ == "__main__":
    main()
