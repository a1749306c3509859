"""Environment yield on real packages: discovery + sandboxed verification of sdists.

Downloads the source distributions of popular pure-Python packages that ship their tests
(``pip download --no-binary :all: --no-deps``; this needs a package index at bench time),
makes each a one-commit git repository, and runs discovery and verification on it in the
sandbox. Prints the yield (goal: 16 of 20, Repo2Run's 86% on Python is the bar), the
failures by reason, CPU seconds per verified environment, and the median sandbox overhead
per command against the same command run bare (goal: under 100 ms).

Downloads are kept in ``--cache`` (default ``~/.cache/codecorpus/env-yield``; never in the
repository), and each package's verification record, every sandboxed step with its output
tail, is written to ``--logs`` so a failure can be read afterwards.

Timing figures need an idle machine: ``--overhead-only`` measures just the sandbox overhead,
so a shared timing lock is held only for that.

    python bench/env_yield.py                       # all 20 packages, then the overhead
    python bench/env_yield.py --only attrs,tomli    # some packages
    python bench/env_yield.py --overhead-only       # the timed part alone
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

from codecorpus.envs import sandbox as sb
from codecorpus.envs import verify

PACKAGES = (
    "iniconfig", "six", "attrs", "packaging", "pluggy", "more-itertools", "toolz", "idna",
    "python-dateutil", "tomli", "itsdangerous", "click", "pyparsing", "sortedcontainers",
    "cachetools", "decorator", "tabulate", "wcwidth", "jmespath", "boltons",
)
ALTERNATES = ("zipp", "platformdirs", "typing-extensions", "chardet", "termcolor", "mccabe")
"""Taken in this order, fixed before any was measured, for a package whose sdist ships no
tests (tomli and sortedcontainers publish theirs without): the bench measures packages that
ship tests, as its premise says, and prints which were passed over."""
_TEST_FILE = re.compile(r"(^|/)(tests?|testing)/|(^|/)(test_\w+|\w+_test|tests?)\.py$")


DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "codecorpus/env-yield"


def download(name: str, dest: Path, box: sb.SandboxConfig) -> Path | None:
    """The package's sdist, downloaded by pip into ``dest/name`` once (None when pip finds
    none). pip prepares an sdist's metadata by running its build backend, which is the
    package's code, so the download runs in the sandbox too (network on, as in an install)."""
    work = dest / name
    found = sorted(work.glob("*.tar.gz"))
    if found:
        return found[0]
    work.mkdir(parents=True, exist_ok=True)
    res = sb.run(f"python3 -m pip download --no-binary :all: --no-deps -q -d . {name}", work, box,
                 network=True, merge_stderr=True)
    found = sorted(work.glob("*.tar.gz"))
    if not res.ok or not found:
        print(f"  {name}: download failed: {res.violation or res.exit_code} "
              f"{res.stdout.strip()[-200:]}")
        return None
    return found[0]


def ships_tests(sdist: Path) -> bool:
    """Whether an sdist holds test files (a ``tests/`` folder, ``test_*.py``, ``*_test.py``)."""
    with tarfile.open(sdist) as tar:
        names = [m.name.split("/", 1)[-1] for m in tar.getmembers()]
    return any(_TEST_FILE.search(n) for n in names)


def as_repository(sdist: Path, dest: Path) -> tuple[Path, str]:
    """Extract an sdist and commit it as a git repository; its path and commit id."""
    with tarfile.open(sdist) as tar:
        tar.extractall(dest, filter="data")
    root = next(p for p in dest.iterdir() if p.is_dir())
    env = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
           "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "-m", sdist.name]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                            text=True, check=True).stdout.strip()
    return root, commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=len(PACKAGES))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated package names")
    parser.add_argument("--overhead-repeats", type=int, default=20)
    parser.add_argument("--overhead-only", action="store_true")
    parser.add_argument("--no-overhead", action="store_true")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="downloaded sdists")
    parser.add_argument("--logs", type=Path, default=DEFAULT_CACHE / "logs",
                        help="one verification record (steps, output tails) per package")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(PACKAGES)
    box = sb.SandboxConfig(toolchain_paths=sb.python_toolchain(),
                           path_dirs=(sb.python_toolchain()[0] + "/bin",))
    outcomes: dict[str, verify.Verification | None] = {}
    if not args.overhead_only:
        want = len(names) if args.only else args.packages
        queue = names if args.only else [*names, *ALTERNATES]
        outcomes = verify_packages(queue, want, box, args)
    costs = {}
    if not args.no_overhead:
        with tempfile.TemporaryDirectory(prefix="env-overhead-") as work:
            python = f"{sb.python_toolchain()[0]}/bin/python3"  # the same binary bare and boxed
            for label, argv in (("true", ("true",)), ("python3 -c pass", (python, "-c", "pass"))):
                costs[label] = sb.overhead(box, Path(work), argv, args.overhead_repeats)
    report(outcomes, costs)


def verify_packages(queue: list[str], want: int, box: sb.SandboxConfig,
                    args: argparse.Namespace) -> dict[str, verify.Verification | None]:
    """Download, commit and verify packages from ``queue`` until ``want`` that ship tests
    are measured; one line per package as it finishes."""
    outcomes: dict[str, verify.Verification | None] = {}
    args.logs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="env-yield-") as tmp:
        tmp_path = Path(tmp)
        cfg = verify.VerifyConfig(cache_dir=str(tmp_path / "cache"), runs=args.runs)
        for name in queue:
            if len(outcomes) >= want:
                break
            t0 = time.monotonic()
            sdist = download(name, args.cache / "sdists", box)
            if sdist is None:
                outcomes[name] = None
                continue
            if not ships_tests(sdist):
                print(f"  {name:18} passed over: its sdist ({sdist.name}) ships no tests")
                continue
            repo, commit = as_repository(sdist, tmp_path / "repos" / name)
            env = verify.verify_revision(repo, commit, cfg)
            outcomes[name] = env
            (args.logs / f"{name}.json").write_text(
                json.dumps(verify.verification_record(env), indent=1, default=str))
            status = "verified" if env.verified else env.reason
            passed = sum(s == "passed" for s in env.tests.values())
            print(f"  {name:18} {status:18} passed={passed:4d}/{len(env.tests):4d} "
                  f"parser={env.parser or '-':9} cpu={env.cpu_seconds:7.1f}s "
                  f"wall={time.monotonic() - t0:6.1f}s test={env.test[:70]!r}", flush=True)
    return outcomes


def report(outcomes: dict[str, verify.Verification | None],
           costs: dict[str, dict[str, float]]) -> None:
    """The yield, failures by reason, CPU per verified environment, sandbox overhead."""
    if outcomes:
        _yield(outcomes)
    for label, cost in costs.items():
        print(f"sandbox overhead per command ({label}): median {cost['overhead_ms']:.1f} ms "
              f"(bare {cost['bare_ms']:.1f} ms, sandboxed {cost['sandbox_ms']:.1f} ms; "
              "goal < 100 ms)")


def _yield(outcomes: dict[str, verify.Verification | None]) -> None:
    verified = [e for e in outcomes.values() if e and e.verified]
    reasons = Counter("download_failed" if e is None else e.reason
                      for e in outcomes.values() if e is None or not e.verified)
    print(f"\nyield: {len(verified)} of {len(outcomes)} verified "
          f"({100 * len(verified) / max(len(outcomes), 1):.0f}%; goal 80%, Repo2Run 86%)")
    print("failures by reason:", dict(sorted(reasons.items())) or "none")
    if verified:
        cpu = [e.cpu_seconds for e in verified]
        print(f"CPU seconds per verified environment: median {statistics.median(cpu):.1f}, "
              f"total {sum(cpu):.1f}")


if __name__ == "__main__":
    main()
