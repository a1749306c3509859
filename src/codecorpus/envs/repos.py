"""The repositories an environments run reads, and where a job finds them.

- ``repositories``: every repository of the recipe's ``git`` or ``local`` sources (``RepoRef``),
  in source order then by name; ``plan_repositories`` fingerprints them (each one's resolved
  revision, a plain folder's file digests) for the stage hash.
- ``snapshot``: a plain folder committed into a one-commit git repository in the run directory,
  with fixed author and dates, so the same files give the same commit; ``publish_snapshot``
  writes it beside itself as one ``git bundle`` file (``snapshot_bundle``), the run file an S3
  run publishes (git writes the repository, not the atomic writer).
- ``repository_of``: the git directory a version row names, on this node: a source repository
  where it is, a snapshot cloned from its bundle when this node's mirror lacks it.

A snapshot is made in a temporary folder and renamed into place once complete
(``SNAPSHOT_MARKER``), so two jobs on one node, or a job that crashed, never leave half a
repository behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codecorpus.envs import verify
from codecorpus.ingest import git as ingest_git
from codecorpus.ingest.config import GitSource, LocalSource
from codecorpus.model import config_hash
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import atomic_write_bytes

SNAPSHOT_DATE = "1980-01-01T00:00:00Z"
SNAPSHOT_MARKER = "codecorpus-snapshot"
"""In a snapshot's ``.git``: the repository is complete (written last, before the rename)."""
SNAPSHOT_BUNDLE_SUFFIX = ".bundle"
"""A snapshot repository as one file (``git bundle``), beside the repository's folder."""
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_AUTHOR_NAME": "codecorpus",
           "GIT_AUTHOR_EMAIL": "codecorpus@localhost", "GIT_COMMITTER_NAME": "codecorpus",
           "GIT_COMMITTER_EMAIL": "codecorpus@localhost", "GIT_AUTHOR_DATE": SNAPSHOT_DATE,
           "GIT_COMMITTER_DATE": SNAPSHOT_DATE}
"""git's environment for the run's own git calls: no system config, no prompt, fixed identity."""


def snapshot_bundle(snapshot: Path | str) -> Path:
    """The bundle file of a snapshot repository (``RunPaths.snapshot``)."""
    return Path(snapshot).with_name(Path(snapshot).name + SNAPSHOT_BUNDLE_SUFFIX)


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """``git args`` in ``repo`` with ``GIT_ENV``."""
    return verify.run_git(repo, *args, env=GIT_ENV)


@dataclass(frozen=True)
class RepoRef:
    """One repository of the recipe's sources: a git repository, or a plain folder to snapshot."""

    source: str
    name: str
    location: str
    kind: str  # "git" | "folder"
    revision: str = "HEAD"
    problem: str = ""


def _git_refs(src: GitSource) -> list[RepoRef]:
    form = ingest_git.source_form(src)
    if form == "repository":
        return [RepoRef(src.name, ingest_git.repo_name(src), ingest_git.resolve_gitdir(src), "git", src.revision)]
    found = (ingest_git.find_repositories(Path(src.path)) if form == "folder"
             else ingest_git.listed_repositories(Path(src.path)))
    refs = []
    for f in ingest_git.name_repositories(list(found)):
        location = f.location
        if not f.problem and ingest_git.is_url(location):
            location = ingest_git.resolve_gitdir(src.model_copy(update={"path": location}))
        refs.append(RepoRef(src.name, f.name, location, "git", src.revision,
                            f"{f.problem[0]}: {f.problem[1]}" if f.problem else ""))
    return refs


def _local_refs(src: LocalSource) -> list[RepoRef]:
    root = Path(src.path)
    one = src.layout == "repo" or (src.layout == "auto" and (
        (root / ".git").exists() or any(p.is_file() for p in root.iterdir())))
    dirs = [root] if one else sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    return [RepoRef(src.name, d.name, str(d), "git" if (d / ".git").exists() else "folder")
            for d in dirs]


def repositories(recipe: Any) -> list[RepoRef]:
    """Every repository of the recipe's sources, in source order then by name."""
    refs: list[RepoRef] = []
    for src in recipe.sources:
        refs += _git_refs(src) if isinstance(src, GitSource) else _local_refs(src)
    return refs


def _folder_digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts):
        h.update(str(path.relative_to(root)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _fingerprint(ref: RepoRef) -> list[str]:
    if ref.problem:
        return [ref.name, ref.problem]
    if ref.kind == "folder":
        return [ref.name, _folder_digest(Path(ref.location))]
    proc = git(Path(ref.location), "rev-parse", "--verify", "-q", f"{ref.revision}^{{commit}}")
    return [ref.name, proc.stdout.decode().strip() or "unresolved"]


def plan_repositories(recipe: Any, _tasks: Any = None) -> tuple[list[RepoRef], str]:
    """One shard per repository, and the plan's hash (each repository's resolved revision)."""
    refs = repositories(recipe)
    return refs, config_hash([_fingerprint(r) for r in refs])


def _is_snapshot(path: Path) -> bool:
    return (path / ".git" / SNAPSHOT_MARKER).is_file()


def _made_once(dest: Path, make: Callable[[Path], None], source: str) -> Path:
    """``dest``, a repository ``make`` builds in a temporary folder beside it, marked complete
    (``SNAPSHOT_MARKER``, naming ``source``) and renamed into place; one already there is kept
    (made before, or by another job on this node meanwhile), a half-made one replaced."""
    if _is_snapshot(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        make(tmp)
        (tmp / ".git" / SNAPSHOT_MARKER).write_text(source)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if dest.exists() and not _is_snapshot(dest):
        shutil.rmtree(dest, ignore_errors=True)  # left by a job that crashed before its marker
    try:
        os.rename(tmp, dest)
    except OSError:  # another job on this node made it first
        shutil.rmtree(tmp, ignore_errors=True)
        if not _is_snapshot(dest):
            raise
    return dest


def _git_or_fail(repo: Path, what: str, *args: str) -> None:
    proc = git(repo, *args)
    if proc.returncode != 0:
        raise ValueError(f"git {args[0]} {what}: {proc.stderr.decode()[:300]}")


def snapshot(folder: Path, dest: Path) -> Path:
    """A one-commit git repository of a plain folder's files (fixed author and dates: the same
    files give the same commit id), made once under ``dest``."""

    def make(tmp: Path) -> None:
        shutil.copytree(folder, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
        for args in (("init", "-q"), ("add", "-A"), ("commit", "-q", "--no-verify", "-m", "snapshot")):
            _git_or_fail(tmp, f"in a snapshot of {folder}", *args)

    return _made_once(dest, make, str(folder))


def publish_snapshot(folder: Path, dest: Path) -> Path:
    """``snapshot(folder, dest)``, and the repository written beside it as one ``git bundle``
    file (``snapshot_bundle``), the run file a job on another node clones it from."""
    snapshot(folder, dest)
    with tempfile.TemporaryDirectory(prefix="bundle-") as tmp:
        bundle = Path(tmp) / "snapshot.bundle"
        _git_or_fail(dest, f"of the snapshot of {folder}", "bundle", "create", str(bundle), "--all")
        atomic_write_bytes(snapshot_bundle(dest), bundle.read_bytes())
    return dest


def repository_of(row: dict[str, Any]) -> Path:
    """The git directory a version row names, on this node.

    A source repository is an input and is used where it is. A snapshot is a run file: when
    this node's mirror of an S3 run lacks it (another node discovered the repository), it is
    cloned from its published bundle, without a checkout (``verify.fresh_tree`` reads the objects).
    Nothing outside the run's mirror is ever replaced.
    """
    path = store.node_path(row["git_dir"])
    run = store.active()
    if run is None or run.key(path) is None or _is_snapshot(path):
        return path  # a local run's snapshot, an input repository, or one this node holds
    bundle = store.ensure_local(snapshot_bundle(path))
    clone = ("clone", "-q", "--no-checkout", str(bundle))
    return _made_once(path, lambda tmp: _git_or_fail(path.parent, f"of the snapshot bundle {bundle}", *clone, str(tmp)),
                      str(bundle))
