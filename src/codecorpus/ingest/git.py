"""Git repositories read from the object store, without a checkout.

Planning runs ``git rev-parse`` (the revision's commit sha goes into ``revision``)
and ``git ls-tree -r -l -z`` (paths, modes, blob ids and sizes: no blob is read,
except the few top-level license/README files the license detector needs). The
read task streams its blobs through one ``git cat-file --batch`` process per
repository. Submodules (tree entries of type ``commit``) are recorded as
``submodule`` drops with their pinned commit and URL, never followed; symlinks
(mode 120000) are ``symlink`` drops.

A URL (anything git can clone) is cloned bare into ``cache_dir`` once, keyed by
the URL's hash; later runs reuse the clone.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from pathlib import Path

from codecorpus.config import GitSource, IngestConfig, RecipeError
from codecorpus.ingest import exclusions, license
from codecorpus.ingest.refs import FileRef

_GIT_ENV = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


def _git(gitdir: str, *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        ["git", f"--git-dir={gitdir}", *args], input=stdin, capture_output=True, env=_GIT_ENV, check=False
    )
    if proc.returncode != 0:
        raise RecipeError(
            f"git {' '.join(args[:2])} failed in {gitdir}: {proc.stderr.decode(errors='replace').strip()}"
        )
    return proc.stdout


def is_url(path: str) -> bool:
    return "://" in path or (":" in path and "@" in path.split(":", 1)[0])


def resolve_gitdir(src: GitSource) -> str:
    """The git directory to read: the repository's own, or a bare clone of a URL."""
    if is_url(src.path):
        cache = Path(os.path.expanduser(src.cache_dir)) / hashlib.sha256(src.path.encode()).hexdigest()[:20]
        if not (cache / "HEAD").exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(
                ["git", "clone", "--bare", "--quiet", src.path, str(cache)],
                capture_output=True, env=_GIT_ENV, check=False,
            )
            if proc.returncode != 0:
                raise RecipeError(
                    f"sources[{src.name}].path: cannot clone {src.path}: "
                    f"{proc.stderr.decode(errors='replace').strip()}"
                )
        return str(cache)
    root = Path(src.path)
    if not root.exists():
        raise RecipeError(f"sources[{src.name}].path: {root} does not exist; point it at a git repository")
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--absolute-git-dir"], capture_output=True, env=_GIT_ENV, check=False
    )
    if proc.returncode != 0:
        raise RecipeError(f"sources[{src.name}].path: {root} is not a git repository")
    return proc.stdout.decode().strip()


def repo_name(src: GitSource) -> str:
    if src.repo:
        return src.repo
    name = src.path.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return name.removesuffix(".git") or src.name


def plan(src: GitSource, cfg: IngestConfig) -> list[FileRef]:
    gitdir = resolve_gitdir(src)
    try:
        sha = _git(gitdir, "rev-parse", "--verify", "--quiet", f"{src.revision}^{{commit}}").decode().strip()
    except RecipeError:
        raise RecipeError(
            f"sources[{src.name}].revision: {src.revision!r} is not a commit of {src.path}; "
            "name a branch, tag or sha that exists"
        ) from None
    entries = list(ls_tree(gitdir, sha))
    spdx, method = _license(src, gitdir, entries)
    name = repo_name(src)
    vendored = frozenset(cfg.vendored_dirs)
    skip_dirs = set(cfg.skip_dirs)
    submodule_urls = _submodule_urls(gitdir, entries)
    refs = []
    for mode, kind, obj, size, path in entries:
        skip, detail = None, None
        if kind == "commit":
            skip, detail = "submodule", f"commit {obj} {submodule_urls.get(path, '')}".strip()
        elif mode == "120000":
            skip = "symlink"
        elif any(p in skip_dirs for p in path.split("/")[:-1]):
            skip = "skipped_dir"
        else:
            skip = exclusions.path_exclusion(path, vendored, cfg.exclude_generated)
            if skip is None and size > cfg.max_file_bytes:
                skip = "too_large"
        refs.append(
            FileRef(
                src.name, name, path, "", size if kind == "blob" else 0, sha, spdx, skip,
                store="git", container=gitdir, key=obj, license_method=method,
                meta=src.metadata or "", detail=detail,
            )
        )
    return refs


def ls_tree(gitdir: str, sha: str) -> list[tuple[str, str, str, int, str]]:
    """(mode, type, object id, size, path) of every entry of a commit's tree, sorted by path."""
    out = _git(gitdir, "ls-tree", "-r", "-l", "-z", "--full-tree", sha)
    entries = []
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, kind, obj, size = meta.decode().split()
        entries.append((mode, kind, obj, int(size) if size != "-" else 0, path.decode("utf-8", "surrogateescape")))
    entries.sort(key=lambda e: e[4])
    return entries


def _license(src: GitSource, gitdir: str, entries: list) -> tuple[str, str]:
    if src.license:
        return src.license, "recipe"
    wanted = {path: obj for _, kind, obj, size, path in entries
              if kind == "blob" and "/" not in path and license.is_candidate(path) and size < 200_000}
    blobs = cat_blobs(gitdir, list(wanted.values()))
    texts = {p: b.decode("utf-8", "replace") for p, o in wanted.items() if isinstance(b := blobs.get(o), bytes)}
    return license.detect(texts)


def _submodule_urls(gitdir: str, entries: list) -> dict[str, str]:
    obj = next((o for _, k, o, _, p in entries if p == ".gitmodules" and k == "blob"), None)
    if obj is None:
        return {}
    blob = cat_blobs(gitdir, [obj]).get(obj)
    if not isinstance(blob, bytes):
        return {}
    urls, path = {}, None
    for line in blob.decode("utf-8", "replace").splitlines():
        key, _, value = (s.strip() for s in line.partition("="))
        if key == "path":
            path = value
        elif key == "url" and path:
            urls[path] = value
    return urls


def cat_blobs(gitdir: str, shas: list[str]) -> dict[str, bytes | str]:
    """{sha: bytes} from one ``git cat-file --batch``; a missing object maps to ``"missing"``.

    The request list is written from a thread so that a large answer cannot
    deadlock against a full stdin pipe.
    """
    if not shas:
        return {}
    proc = subprocess.Popen(
        ["git", f"--git-dir={gitdir}", "cat-file", "--batch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_GIT_ENV,
    )
    assert proc.stdin is not None and proc.stdout is not None
    request = "".join(f"{s}\n" for s in shas).encode()

    def feed() -> None:
        try:
            proc.stdin.write(request)  # type: ignore[union-attr]
        finally:
            proc.stdin.close()  # type: ignore[union-attr]

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    blobs: dict[str, bytes | str] = {}
    for sha in shas:
        header = proc.stdout.readline().decode().split()
        if len(header) < 3 or header[-1] == "missing":
            blobs[sha] = "missing"
            continue
        size = int(header[2])
        data = proc.stdout.read(size)
        proc.stdout.read(1)
        blobs[sha] = data if header[1] == "blob" else "not_a_blob"
    writer.join()
    proc.stdout.close()
    proc.wait()
    return blobs
