"""A scripted policy on the shipped repo-envs recipe's example task: open a session, look
around, apply the gold patch through file writes, evaluate, print the reward.

    codecorpus run pipelines/repo-envs.yaml          # -> runs/repo-envs (the environments run)
    python examples/rollout.py runs/repo-envs        # prints the reward; exit 0 when it is 1.0

A trained policy would write its own edits where this one replays the task's gold patch.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from codecorpus.envs.manifest_tasks import run_cache_dir, tasks_of
from codecorpus.envs.session import Session, SessionConfig, open_session

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")


def edited(text: str, hunks: list[list[str]]) -> str:
    """``text`` with a file's unified-diff hunks applied at their line numbers (no fuzz)."""
    lines, out, at = text.splitlines(keepends=True), [], 0
    for hunk in hunks:
        start = int(_HUNK.match(hunk[0]).group(1)) - 1
        out += lines[at:start]
        at = start
        for line in hunk[1:]:
            if line.startswith(("-", " ")):
                assert lines[at].rstrip("\n") == line[1:].rstrip("\n"), f"context differs at line {at + 1}"
                at += 1
            if line.startswith(("+", " ")):
                out.append(line[1:] if line.endswith("\n") else line[1:] + "\n")
    return "".join(out + lines[at:])


def file_edits(patch: str) -> dict[str, list[list[str]]]:
    """A unified diff's hunks by the file they edit."""
    edits: dict[str, list[list[str]]] = {}
    name = None
    for line in patch.splitlines(keepends=True):
        if line.startswith("+++ b/"):
            name = line[6:].strip()
            edits[name] = []
        elif line.startswith("@@") and name:
            edits[name].append([line])
        elif name and edits[name] and line[:1] in ("+", "-", " ") and not line.startswith("--- "):
            edits[name][-1].append(line)
    return edits


def policy(s: Session, gold_patch: str) -> None:
    """Look at the tree, run the tests, then write the fix file by file."""
    print("files:", ", ".join(s.list_files()))
    tests = s.run(s.env.test, timeout=120)
    print(f"tests before the fix: exit {tests.exit_code} in {tests.seconds:.2f} s")
    for name, hunks in file_edits(gold_patch).items():
        s.write_file(name, edited(s.read_file(name), hunks))
    print("diff:\n" + s.diff())


def main(run_dir: str = "runs/repo-envs") -> int:
    manifest = Path(run_dir) / "manifest.json"
    tasks = tasks_of(manifest)
    entry = tasks[sorted(tasks)[0]]
    cfg = SessionConfig(cache_dir=run_cache_dir(manifest))
    with open_session(entry, cfg) as s:
        policy(s, entry.task["patch"])
        report = s.evaluate()
    print(f"{entry.task['instance_id']}: resolved={report['resolved']} reward={report['reward']}")
    return 0 if report["reward"] == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
