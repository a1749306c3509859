"""Environment yield on real repositories: the shipped recipe on public clones, newest commits.

Runs ``pipelines/repo-envs.yaml`` as shipped, its sources pointed at one repository clone at
a time (bare or not) and its discovery at the newest dependency version only
(``env_discover.max_versions=1``), up to ``env_verify``: discovery reads the tree, the
candidates install and run in the sandbox, and each repository ends verified or dropped with
a reason. The repositories are listed in ``bench/env_repos.txt`` (owner/name and language);
their clones live outside the repository (``--clones``), their code is never committed.

Per repository it prints the verdict (verified, or the drop reason), the parser, tests
passed/failed/skipped, the sandboxed CPU seconds and the wall seconds of the run; then per
language the honest yield against the goals (85% Python, 70% JavaScript, median CPU under 60
s per verified environment). An environment counts as honest when its results are per test
(any parser but ``exit-code``), at least 5 tests pass, at least 80% of the tests that ran
pass, and a fresh tree reproduced it (when the verification records that; "unchecked" when
the pipeline does not).

Each repository's run is a folder under ``--out`` (the pipeline resumes it when rerun) with a
``bench.json`` summary; a repository with a summary is not run again unless ``--fresh``, so
the bench is incremental: ``--repos`` runs some, and the report covers every summary of the
listed repositories found under ``--out``.

    python bench/env_yield.py --clones /work/benchdata/env-repos              # all, 1 at a time
    python bench/env_yield.py --clones DIR --repos pallets/click,vercel/ms --jobs 2
    python bench/env_yield.py --clones DIR --report-only                      # the table again
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "pipelines" / "repo-envs.yaml"
REPOS = Path(__file__).with_name("env_repos.txt")
DEFAULT_OUT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "codecorpus/env-yield"
GOALS = {"python": 0.85, "node": 0.70}
MIN_PASSED, MIN_PASS_RATE, MEDIAN_CPU_GOAL = 5, 0.8, 60.0
SUMMARY = "bench.json"


def listed(path: Path = REPOS) -> list[tuple[str, str]]:
    """(owner/name, language) of each listed repository."""
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, lang = line.split()
            out.append((name, lang))
    return out


def clone_of(clones: Path, name: str) -> Path | None:
    """The clone of ``owner/name`` in ``clones``: ``owner+name.git``, ``owner+name``,
    ``name.git`` or ``name``."""
    owner, short = name.split("/")
    for candidate in (f"{owner}+{short}.git", f"{owner}+{short}", f"{short}.git", short):
        if (clones / candidate).exists():
            return clones / candidate
    return None


def run_dir(out: Path, name: str) -> Path:
    return out / name.replace("/", "+")


def write_recipe(clone: Path, name: str, dest: Path) -> Path:
    """The shipped recipe with its sources replaced by one git repository and its outputs in
    ``dest``; every other setting as shipped. Relative paths of the shipped recipe are made
    absolute (the copy lives elsewhere)."""
    recipe = yaml.safe_load(RECIPE.read_text())
    recipe["sources"] = [{"type": "git", "name": name.replace("/", "+"), "path": str(clone)}]
    recipe["out"] = str(dest / "run")
    tasks = (recipe.get("stages") or {}).get("task_validate") or {}
    if isinstance(tasks.get("tasks"), str) and not Path(tasks["tasks"]).is_absolute():
        tasks["tasks"] = str((RECIPE.parent / tasks["tasks"]).resolve())
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def run_one(name: str, lang: str, clones: Path, out: Path, fresh: bool) -> dict:
    """Run the recipe on one repository (or read its summary) and return the summary."""
    dest = run_dir(out, name)
    summary_file = dest / SUMMARY
    if summary_file.is_file() and not fresh:
        return json.loads(summary_file.read_text())
    clone = clone_of(clones, name)
    if clone is None:
        return {"repo": name, "lang": lang, "verdict": "no_clone", "ran": False}
    if fresh:  # the pipeline would resume the old run: start it anew
        shutil.rmtree(dest / "run", ignore_errors=True)
    recipe = write_recipe(clone, name, dest)
    cmd = [sys.executable, "-m", "codecorpus", "run", str(recipe), "--quiet", "--workers", "1",
           "--until", "env_verify", "--set", "env_discover.max_versions=1"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    (dest / "run.log").write_text(proc.stdout[-200_000:] + "\n--- stderr\n" + proc.stderr[-200_000:])
    summary = summarize(dest / "run", name, lang)
    summary.update(wall_seconds=round(wall, 1), exit_code=proc.returncode,
                   process_cpu_seconds=round((after.ru_utime + after.ru_stime)
                                             - (before.ru_utime + before.ru_stime), 1))
    if proc.returncode != 0 and summary["verdict"] == "no_result":
        summary["verdict"] = f"pipeline_error: {(proc.stderr or proc.stdout).strip()[-300:]}"
    summary_file.write_text(json.dumps(summary, indent=1, sort_keys=True))
    return summary


def summarize(run: Path, name: str, lang: str) -> dict:
    """What the run says of the repository: its verified environment or its drop."""
    base = {"repo": name, "lang": lang, "ran": True}
    kept = [r for p in sorted((run / "env_verify").glob("part-*.parquet"))
            for r in pq.read_table(p).to_pylist()]
    if kept:
        record = json.loads(kept[0]["verification"])
        tests = record.get("tests") or {}
        counts = Counter(tests.values())
        return {**base, "verdict": "verified", "parser": record.get("parser", ""),
                "test": record.get("test", ""), "install": record.get("install", []),
                "passed": counts.get("passed", 0), "failed": counts.get("failed", 0),
                "skipped": counts.get("skipped", 0), "flaky": len(record.get("flaky") or []),
                "cpu_seconds": float(kept[0].get("cpu_seconds") or 0.0),
                "fresh_tree": fresh_tree_of(record)}
    drops = [r for p in sorted(run.glob("*/_dropped/*.parquet")) for r in pq.read_table(p).to_pylist()
             if r["reason"] != "over_max_versions"]  # older dependency versions: not measured
    drops.sort(key=lambda r: r.get("stage") != "env_verify")
    if drops:
        drop = drops[0]
        detail = {}
        try:
            detail = json.loads(drop.get("detail") or "{}")
        except ValueError:
            detail = {"text": drop.get("detail")}
        return {**base, "verdict": drop["reason"], "stage": drop.get("stage"),
                "cpu_seconds": float(detail.get("cpu_seconds") or 0.0), "detail": detail}
    return {**base, "verdict": "no_result"}


def fresh_tree_of(record: dict) -> bool | None:
    """Whether the verification reproduced its counts in a fresh tree, when it records that
    (the statuses of the fresh tree's run, ``fresh_tests``, against the install tree's
    ``tests``; or a ``fresh_tree``/``reproduced`` field); None when it does not say."""
    fresh = record.get("fresh_tests")
    if isinstance(fresh, dict) and fresh:
        flaky = set(record.get("flaky") or [])
        counts = [Counter(s for t, s in d.items() if t not in flaky)
                  for d in (record.get("tests") or {}, fresh)]
        return counts[0] == counts[1]
    for key in ("fresh_tree", "reproduced", "fresh"):
        value = record.get(key)
        if isinstance(value, bool):
            return value
        if isinstance(value, dict):
            for inner in ("reproduced", "ok", "same", "verified"):
                if isinstance(value.get(inner), bool):
                    return value[inner]
    return None


def honest(summary: dict) -> tuple[bool, str]:
    """Whether a verified environment meets the bar, and the first criterion it misses."""
    if summary.get("verdict") != "verified":
        return False, summary.get("verdict", "")
    passed, failed = summary.get("passed", 0), summary.get("failed", 0)
    if summary.get("parser") in ("", "exit-code"):
        return False, "no per-test parser"
    if passed < MIN_PASSED:
        return False, f"{passed} passed < {MIN_PASSED}"
    if passed / max(passed + failed, 1) < MIN_PASS_RATE:
        return False, f"pass rate {passed / (passed + failed):.0%} < {MIN_PASS_RATE:.0%}"
    if summary.get("fresh_tree") is False:
        return False, "fresh tree differs"
    return True, "" if summary.get("fresh_tree") else "fresh tree unchecked"


def print_row(s: dict) -> None:
    ok, why = honest(s)
    tests = (f"{s.get('passed', 0):5d} {s.get('failed', 0):5d} {s.get('skipped', 0):5d}"
             if s.get("verdict") == "verified" else f"{'-':>5} {'-':>5} {'-':>5}")
    verdict = str(s.get("verdict", ""))[:30]
    print(f"{s['repo']:32} {s['lang']:6} {verdict:30} {s.get('parser', '-') or '-':9} {tests} "
          f"{s.get('cpu_seconds', 0.0):8.1f} {s.get('wall_seconds', 0.0):7.1f}  "
          f"{'honest' if ok else '-':6} {why}", flush=True)


def report(summaries: list[dict]) -> None:
    """Per language: the honest yield against its goal, the failures by reason, and the
    median CPU seconds per verified environment."""
    print()
    for lang in sorted({s["lang"] for s in summaries}):
        rows = [s for s in summaries if s["lang"] == lang and s.get("ran")]
        if not rows:
            continue
        verified = [s for s in rows if s["verdict"] == "verified"]
        honest_rows = [s for s in rows if honest(s)[0]]
        goal = GOALS.get(lang, 0.0)
        share = len(honest_rows) / len(rows)
        print(f"{lang}: {len(honest_rows)} of {len(rows)} honest ({share:.0%}; goal {goal:.0%}: "
              f"{'met' if share >= goal else 'missed'}), {len(verified)} verified by the pipeline")
        unchecked = sum(1 for s in honest_rows if s.get("fresh_tree") is None)
        if unchecked:
            print(f"  {unchecked} of them without a fresh-tree check recorded by the pipeline")
        misses = Counter(honest(s)[1].split(":")[0] for s in rows if not honest(s)[0])
        print("  not honest, by reason:", dict(sorted(misses.items())) or "none")
        cpu = [s.get("cpu_seconds", 0.0) for s in honest_rows]
        if cpu:
            median = statistics.median(cpu)
            print(f"  CPU seconds per honest environment: median {median:.1f} (goal < "
                  f"{MEDIAN_CPU_GOAL:.0f}: {'met' if median < MEDIAN_CPU_GOAL else 'missed'}), "
                  f"total {sum(cpu):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clones", type=Path, required=True,
                        help="folder of repository clones (owner+name.git, name, ...)")
    parser.add_argument("--repos", default="", help="comma-separated owner/name (default: all listed)")
    parser.add_argument("--list", type=Path, default=REPOS, help="repository list")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="run folders and summaries")
    parser.add_argument("--jobs", type=int, default=1, help="repositories run at once")
    parser.add_argument("--fresh", action="store_true", help="run again those already summarized")
    parser.add_argument("--report-only", action="store_true", help="print the summaries found")
    args = parser.parse_args()
    repos = listed(args.list)
    wanted = {r for r in args.repos.split(",") if r}
    unknown = wanted - {n for n, _ in repos}
    if unknown:
        parser.error(f"not in {args.list}: {', '.join(sorted(unknown))}")
    chosen = [(n, lang) for n, lang in repos if not wanted or n in wanted]
    print(f"{'repository':32} {'lang':6} {'verdict':30} {'parser':9} {'pass':>5} {'fail':>5} "
          f"{'skip':>5} {'CPU-s':>8} {'wall-s':>7}  honest")
    if not args.report_only:
        with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
            futures = [pool.submit(run_one, n, lang, args.clones, args.out, args.fresh)
                       for n, lang in chosen]
            for future in futures:
                print_row(future.result())
    summaries = []
    for name, _lang in repos:  # every summary found, so that partial runs add up
        path = run_dir(args.out, name) / SUMMARY
        if path.is_file():
            summaries.append(json.loads(path.read_text()))
    if args.report_only:
        for s in summaries:
            print_row(s)
    report(summaries)


if __name__ == "__main__":
    main()
