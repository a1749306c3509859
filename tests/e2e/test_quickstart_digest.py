"""The quickstart's outputs are byte-identical at another commit and at this tree.

A refactor must not change one byte a launcher or analyst reads: shards, manifests, stage
parts and drop logs, stats (without timings) and the report. The test runs the quickstart
recipe twice through the real CLI on a local Ray, once with the source of a base commit
(``CODECORPUS_DIGEST_BASE``, default: the merge base with ``main``) and once with this
tree's, and compares ``run_digest`` of the two run directories (both digests are printed).

By default the corpus is cut to the standard library's ``json`` and two distributions
(``--set``), so the test takes seconds; ``CODECORPUS_DIGEST_FULL=1`` runs the quickstart
as it ships.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from run_digest import file_digests, run_digest

REPO = Path(__file__).resolve().parents[2]
SMALL = ['sources=[{type: python-env, name: pyenv, stdlib: false, distributions: [click, pyyaml]}]']


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def _base_commit() -> str:
    try:
        base = os.environ.get("CODECORPUS_DIGEST_BASE") or _git("merge-base", "HEAD", "main")
        base, head = _git("rev-parse", base), _git("rev-parse", "HEAD")
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"no git history to compare against: {err}")
    if base == head and not os.environ.get("CODECORPUS_DIGEST_BASE"):
        pytest.skip("HEAD is the merge base with main: set CODECORPUS_DIGEST_BASE to a commit to compare")
    return base


def _checkout_src(commit: str, dest: Path) -> Path:
    data = subprocess.run(["git", "-C", str(REPO), "archive", commit, "src"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "src"


def _run_quickstart(src: Path, out: Path) -> None:
    args = [] if os.environ.get("CODECORPUS_DIGEST_FULL") else [a for s in SMALL for a in ("--set", s)]
    env = {**os.environ, "PYTHONPATH": str(src), "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [sys.executable, "-c", "from codecorpus.cli import app; app()", "run",
           str(REPO / "pipelines" / "quickstart.yaml"), "--out", str(out), "--quiet", *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=out.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_quickstart_outputs_identical_to_base_commit(tmp_path):
    base = _base_commit()
    before, after = tmp_path / "before", tmp_path / "after"
    _run_quickstart(_checkout_src(base, tmp_path / "base"), before)
    _run_quickstart(REPO / "src", after)
    digest_before, digest_after = run_digest(before), run_digest(after)
    print(f"\nbase {base[:12]}: {digest_before}\nthis tree:    {digest_after}")
    files_before, files_after = file_digests(before), file_digests(after)
    assert any(k.startswith("shards/") for k in files_after) and "report/funnel.parquet" in files_after
    changed = sorted(k for k in files_before.keys() | files_after.keys() if files_before.get(k) != files_after.get(k))
    assert not changed, f"outputs differ from {base[:12]}: {changed[:20]}"
    assert digest_before == digest_after
