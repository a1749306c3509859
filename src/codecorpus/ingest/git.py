"""Git repositories read from the object store, without a checkout.

A ``git`` source names one repository, a folder of them, or a list file of paths
and URLs (see :func:`source_form`). Planning runs, per repository, ``git rev-parse``
(the revision's commit sha goes into ``revision``) and ``git ls-tree -r -l -z``
(paths, modes, blob ids and sizes: no blob is read, except in one ``cat-file``
call the few top-level license/README files the license detector needs and
``.gitmodules``). The read job streams its blobs through one ``git cat-file
--batch`` process per repository. Submodules (tree entries of type ``commit``)
are recorded as ``submodule`` drops with their pinned commit and URL, never
followed; symlinks (mode 120000) are ``symlink`` drops.

A URL (anything git can clone) is cloned bare into ``cache_dir`` once, keyed by
the URL's hash; later runs reuse the clone.

In a folder or a list, a repository git cannot read is one drop row (path ``.``)
with its reason, and the other repositories are planned as usual:
``bad_repository`` (not a repository, a clone that failed, a corrupt object
store; git's message is the detail), ``missing_revision``, ``empty_repository``
(no commit at all), ``duplicate_repository`` (the object store of a repository
already planned: a linked worktree, a list naming a repository twice),
``symlink`` and ``unreadable`` (a folder entry not followed). A source that is
one repository fails with a RecipeError instead: it has nothing else to read.
A blob git cannot inflate (a corrupt pack) is found only when it is read: that
file is a ``corrupt_object`` drop and the repository's other files are read. A git
directory that is gone when the read job runs (removed since planning, or a URL's
clone that lives on another node of a cluster without a shared file system) makes each
of its files a ``missing_repository`` drop.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from codecorpus.ingest import exclusions, license
from codecorpus.ingest.config import GitSource, IngestConfig, git_list_entries, is_git_url
from codecorpus.ingest.refs import FileRef
from codecorpus.model import RecipeError

NO_GRAFT_FILE = "/nonexistent/codecorpus-reads-no-grafts"
"""``GIT_GRAFT_FILE`` for every git run here: a path that is not there, so a repository's
``info/grafts`` is not read (an empty file such as /dev/null would be, with a deprecation hint)."""
GIT_ENV = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C", "GIT_FLUSH": "0",
           "GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": NO_GRAFT_FILE}
"""The environment of every git this package and the commits source run: no prompt, no system
config, byte-exact C locale, output written in large writes (``GIT_FLUSH=0``: into a pipe,
``git log`` and ``rev-list`` otherwise flush after every commit, a write each; that was about
a sixth of git log's time on a history of small commits), and the objects a commit names,
never the ones ``git replace`` or a repository's ``info/grafts`` puts in their place (a row's
``revision`` then vouches for its bytes, and a history is walked as its commits record it)."""
_log = logging.getLogger(__name__)
PLAN_THREADS = min(8, 2 * (os.cpu_count() or 1))
"""Repositories planned at once: each is a few short git processes, mostly waiting on disk."""
REPOSITORY_PATH = "."
"""The ``path`` of a drop row that stands for a whole repository."""


@contextlib.contextmanager
def batch_scheduling() -> Iterator[None]:
    """Run the calling thread, and the git processes it starts meanwhile, as batch work (Linux's
    ``SCHED_BATCH``); the thread's policy is restored after.

    A reader and its git child trade data through a pipe. Under the default policy each write
    of git wakes the reader, which then takes the CPU from git to read that one write: on a
    busy core, a read and two switches per object git answers (``cat-file`` wrote about 1 KB
    per read, one small blob). A batch task is not preferred on waking, so git fills the pipe
    first: reads of about 40 KB, and half the reader's CPU per blob. Elsewhere (no such
    policy, or not allowed) nothing changes.
    """
    try:
        before = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        before = None
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, *before)


class UnreadableRepository(RecipeError):
    """A repository git cannot read: ``reason`` and ``detail`` become its drop row in a folder
    or list source; for a one-repository source it is the recipe error (the message)."""

    def __init__(self, reason: str, detail: str, message: str | None = None):
        super().__init__(message or detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Found:
    """A repository a folder or list source names, before git has opened it."""

    name: str
    location: str
    """A local path (work tree, bare repository or git directory) or a URL."""
    problem: tuple[str, str] | None = None
    """(reason, detail) when the entry cannot be a repository (a symlink, an unreadable folder)."""


def _git(gitdir: str, *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        ["git", f"--git-dir={gitdir}", *args], input=stdin, capture_output=True, env=GIT_ENV, check=False
    )
    if proc.returncode != 0:
        error = proc.stderr.decode(errors="replace").strip()
        raise UnreadableRepository(
            "bad_repository", f"git {' '.join(args[:2])}: {error}",
            f"git {' '.join(args[:2])} failed in {gitdir}: {error}",
        )
    return proc.stdout


def is_url(path: str) -> bool:
    return is_git_url(path)


def source_form(src: GitSource) -> str:
    """``repository`` (a URL, a work tree or a bare repository), ``folder`` or ``list`` (a file)."""
    if is_url(src.path):
        return "repository"
    root = Path(src.path)
    if root.is_file():
        return "list"
    if root.is_dir() and not _is_repository_root(root):
        return "folder"
    return "repository"


def _is_repository_root(d: Path) -> bool:
    """A work tree (``.git`` inside) or a bare repository (a ``HEAD`` file and ``objects/``)."""
    return os.path.lexists(d / ".git") or ((d / "HEAD").is_file() and (d / "objects").is_dir())


def _clone(url: str, src: GitSource) -> str:
    """A bare clone of ``url`` in the source's ``cache_dir`` (made once, atomically, reused after)."""
    cache = Path(os.path.expanduser(src.cache_dir)) / hashlib.sha256(url.encode()).hexdigest()[:20]
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RecipeError(
            f"sources[{src.name}].cache_dir: cannot create {cache.parent} ({err.strerror}); "
            "set cache_dir to a writable folder"
        ) from None
    return clone_at(url, cache)


def clone_at(url: str, gitdir: Path) -> str:
    """A bare clone of ``url`` at ``gitdir`` (whose folder exists), unless one is there: made under a
    temporary name and renamed, so a clone another process (a planner, a read job) finished first wins."""
    if (gitdir / "HEAD").exists():
        return str(gitdir)
    tmp = gitdir.with_name(f"{gitdir.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    proc = subprocess.run(
        ["git", "clone", "--bare", "--quiet", url, str(tmp)], capture_output=True, env=GIT_ENV, check=False,
    )
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UnreadableRepository("bad_repository", f"cannot clone {url}: {proc.stderr.decode(errors='replace').strip()}")
    try:
        os.rename(tmp, gitdir)
    except OSError:  # another process cloned it first
        shutil.rmtree(tmp, ignore_errors=True)
        if not (gitdir / "HEAD").exists():
            raise
    return str(gitdir)


def clone_here(url: str, gitdir: str) -> None:
    """The planner's clone of ``url`` at ``gitdir``, on this node too: on a cluster whose nodes share
    no file system the planner's clone is on its node alone. Objects are read by the ids the plan
    recorded, so a clone made now gives the same bytes while the remote still holds the planned
    revision. Where none can be made (logged with git's message), ``gitdir`` stays missing and
    its reader says so: each file of an ingest shard is a ``missing_repository`` drop, and a
    commit slice fails its job with git's error, naming the repository."""
    try:
        os.makedirs(os.path.dirname(gitdir), exist_ok=True)
        clone_at(url, Path(gitdir))
    except (OSError, UnreadableRepository) as err:
        _log.warning("cannot clone %s to %s on this node: %s", url, gitdir, getattr(err, "detail", err))


def resolve_gitdir(src: GitSource) -> str:
    """The git directory of a one-repository source: the repository's own, or a bare clone of a URL."""
    if is_url(src.path):
        try:
            return _clone(src.path, src)
        except UnreadableRepository as err:
            raise RecipeError(f"sources[{src.name}].path: {err.detail}") from None
    root = Path(src.path)
    if not root.exists():
        raise RecipeError(f"sources[{src.name}].path: {root} does not exist; point it at a git repository")
    proc = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--absolute-git-dir"], capture_output=True, env=GIT_ENV, check=False
    )
    if proc.returncode != 0:
        raise RecipeError(f"sources[{src.name}].path: {root} is not a git repository")
    return proc.stdout.decode().strip()


def repo_name(src: GitSource) -> str:
    if src.repo:
        return src.repo
    name = src.path.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return name.removesuffix(".git") or src.name


# --- planning ---------------------------------------------------------------------


def plan(src: GitSource, cfg: IngestConfig) -> list[FileRef]:
    """Every entry of every repository of the source, sorted by (repository, path)."""
    form = source_form(src)
    if form == "repository":
        return plan_repository(src, cfg, repo_name(src), resolve_gitdir(src), url_of(src.path))
    with ThreadPoolExecutor(PLAN_THREADS) as pool:
        planned = list(pool.map(lambda f: _plan_found(src, cfg, f), _found(src, form)))
    return [ref for refs in _without_duplicates(src, planned) for ref in refs]


@dataclass(frozen=True)
class GitListing:
    """One repository of a git source, planned on its own (by a planning task, or inline).

    ``found`` is None when the source is this one repository (``gitdir`` resolved).
    A folder's or list's repositories sharing an object store are found only once all
    are planned: :func:`duplicate_keepers` over their ``Planned.store`` says which.
    """

    src: GitSource
    name: str
    found: Found | None = None
    gitdir: str = ""

    @property
    def location(self) -> str:
        """The repository's path or URL, for messages (``Found.location``'s name)."""
        return self.gitdir if self.found is None else self.found.location

    def plan(self, cfg: IngestConfig) -> Planned:
        if self.found is None:
            return Planned(self.name, plan_repository(self.src, cfg, self.name, self.gitdir, url_of(self.src.path)))
        return _plan_found(self.src, cfg, self.found)

    def duplicate_drop(self, keeper: str) -> FileRef:
        """The one drop row that stands for this repository when ``keeper`` reads its object store."""
        return _repository_drop(self.src, self.name, "duplicate_repository", f"same object store as {keeper}")


def listings(src: GitSource) -> list[GitListing]:
    """The repositories of a git source, each to be planned by itself, in plan order."""
    form = source_form(src)
    if form == "repository":
        return [GitListing(src, repo_name(src), gitdir=resolve_gitdir(src))]
    return [GitListing(src, f.name, f) for f in _found(src, form)]


def _found(src: GitSource, form: str) -> list[Found]:
    if src.repo:
        raise RecipeError(
            f"sources[{src.name}].repo: names a single repository, but {src.path} is a {form} "
            "of them, each named by its own path: remove repo"
        )
    found = name_repositories(list(find_repositories(Path(src.path))) if form == "folder"
                              else listed_repositories(Path(src.path)))
    if not found:
        raise RecipeError(
            f"sources[{src.name}].path: no git repository under {src.path}; point path at a repository's "
            "top folder, a folder of repositories, or a list file of repository paths/URLs"
        )
    return found


def url_of(location: str) -> str:
    """``location`` when it is a URL git clones, else ''."""
    return location if is_url(location) else ""


def plan_repository(src: GitSource, cfg: IngestConfig, name: str, gitdir: str, url: str = "") -> list[FileRef]:
    """One planned entry per tree entry of the repository at ``src.revision``; ``url``, the URL
    ``gitdir`` is a clone of, goes into each entry's ``abspath`` so a node without the clone
    makes its own (``read.py``)."""
    sha = _resolve_revision(src, gitdir)
    entries = list(ls_tree(gitdir, sha))
    blobs = cat_blobs(gitdir, _plan_blob_ids(entries, want_license=not src.license))
    spdx, method = _license(src, entries, blobs)
    vendored = frozenset(cfg.vendored_dirs)
    skip_dirs = set(cfg.skip_dirs)
    submodule_urls = _submodule_urls(entries, blobs)
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
                src.name, name, path, url, size if kind == "blob" else 0, sha, spdx, skip,
                store="git", container=gitdir, key=obj, license_method=method,
                meta=src.metadata or "", detail=detail,
            )
        )
    return refs


def _resolve_revision(src: GitSource, gitdir: str) -> str:
    """The commit sha of ``src.revision`` in the repository, or why there is none."""
    proc = subprocess.run(
        ["git", f"--git-dir={gitdir}", "rev-parse", "--verify", "--quiet", f"{src.revision}^{{commit}}"],
        capture_output=True, env=GIT_ENV, check=False,
    )
    if proc.returncode == 0:
        return proc.stdout.decode().strip()
    error = proc.stderr.decode(errors="replace").strip()
    if error:  # --quiet silences "no such revision": anything said is a broken object store
        raise UnreadableRepository("bad_repository", f"git rev-parse {src.revision}: {error}")
    if not _git(gitdir, "for-each-ref", "--count=1").strip():
        raise UnreadableRepository(
            "empty_repository", "no commit in the repository",
            f"sources[{src.name}].path: {src.path} has no commit yet; commit something or point path elsewhere",
        )
    raise UnreadableRepository(
        "missing_revision", f"{src.revision!r} is not a commit here",
        f"sources[{src.name}].revision: {src.revision!r} is not a commit of {src.path}; "
        "name a branch, tag or sha that exists",
    )


@dataclass(frozen=True)
class Planned:
    """One repository of a folder or list source, planned: its entries, or its one drop row."""

    name: str
    refs: list[FileRef]
    store: str = ""
    """Real path of the object store ('' when git could not open it)."""
    main: bool = True
    """The git directory is the object store itself (a main work tree or a bare repository)."""


def _plan_found(src: GitSource, cfg: IngestConfig, found: Found) -> Planned:
    gitdir = ""
    try:
        if found.problem is not None:
            raise UnreadableRepository(*found.problem)
        gitdir, store = _open(found.location, src)
        refs = plan_repository(src, cfg, found.name, gitdir, url_of(found.location))
        return Planned(found.name, refs, store, os.path.realpath(gitdir) == store)
    except UnreadableRepository as err:
        return Planned(found.name, [_repository_drop(src, found.name, err.reason, err.detail, gitdir)])


def _open(location: str, src: GitSource) -> tuple[str, str]:
    """(git directory, real path of its object store) of a path or URL, as git itself opens it."""
    if is_url(location):
        gitdir = _clone(location, src)
    elif not os.path.lexists(location):
        raise UnreadableRepository("bad_repository", f"{location}: no such file or directory")
    else:  # a work tree's .git (a directory or a gitfile), else the git directory itself
        dotgit = os.path.join(location, ".git")
        gitdir = dotgit if os.path.lexists(dotgit) else location
    out = _git(gitdir, "rev-parse", "--path-format=absolute", "--absolute-git-dir", "--git-common-dir")
    absolute, common = out.decode().splitlines()[:2]
    return absolute, os.path.realpath(common)


def _repository_drop(src: GitSource, name: str, reason: str, detail: str, gitdir: str = "") -> FileRef:
    """The one drop row of a repository that is not read (``path`` is ``.``)."""
    return FileRef(
        src.name, name, REPOSITORY_PATH, "", 0, "", src.license or "unknown", reason,
        store="git", container=gitdir, license_method="recipe" if src.license else "unknown",
        meta=src.metadata or "", detail=detail,
    )


def _without_duplicates(src: GitSource, planned: list[Planned]) -> Iterator[list[FileRef]]:
    """Each object store is read once: another repository sharing it is a ``duplicate_repository`` drop."""
    keepers = duplicate_keepers([(p.name, p.store, p.main) for p in planned])
    for p in planned:
        if p.name in keepers:
            yield [_repository_drop(src, p.name, "duplicate_repository", f"same object store as {keepers[p.name]}")]
        else:
            yield p.refs


def duplicate_keepers(stores: list[tuple[str, str, bool]]) -> dict[str, str]:
    """{name: the repository read instead} for each (name, object store, main) whose store another reads.

    The repository whose git directory is the object store (a main work tree or a
    bare repository, not a linked worktree of it) is kept, else the first by name.

    >>> duplicate_keepers([("b", "/s", True), ("a", "/s", False), ("c", "", True)])
    {'a': 'b'}
    """
    keeper: dict[str, str] = {}
    for name, store, _ in sorted(stores, key=lambda s: (not s[2], s[0])):
        if store:
            keeper.setdefault(store, name)
    return {name: keeper[store] for name, store, _ in stores if store and keeper[store] != name}


# --- the repositories of a folder or a list ------------------------------------------


def find_repositories(root: Path) -> Iterator[Found]:
    """Every repository under ``root``, recursively, by relative path (a bare ``x.git`` is ``x``).

    A repository is not searched further: its ``.git`` internals (linked worktrees,
    submodule git directories) and the nested repositories and submodule checkouts
    of its work tree are its own, never separate repositories. Symlinks are not
    followed (each is a ``symlink`` drop); an unreadable folder is an ``unreadable`` drop.
    """
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as err:
            yield Found(rel_dir or ".", str(root / rel_dir), ("unreadable", err.strerror or str(err)))
            continue
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            if e.is_symlink() and e.is_dir():
                yield Found(rel, e.path, ("symlink", f"-> {os.readlink(e.path)}"))
            elif not e.is_dir(follow_symlinks=False) or e.name == ".git":
                continue
            elif os.path.lexists(os.path.join(e.path, ".git")):
                yield Found(rel, e.path)
            elif _is_repository_root(Path(e.path)):
                yield Found(rel.removesuffix(".git") or rel, e.path)
            else:
                stack.append(rel)


def listed_repositories(list_file: Path) -> list[Found]:
    """The repositories of a list file, each named by its last two path parts (``owner/name``).

    Relative paths are relative to the list file's folder.
    """
    found = []
    for entry in git_list_entries(list_file):
        location = entry if is_url(entry) else str(list_file.parent / os.path.expanduser(entry))
        found.append(Found(location_name(entry), location))
    return found


def location_name(location: str) -> str:
    """``owner/name`` of a URL or path: its last two path parts, without ``.git``.

    >>> location_name("https://github.com/psf/requests.git"), location_name("git@github.com:psf/black")
    ('psf/requests', 'psf/black')
    >>> location_name("file:///srv/mirror/owner/name.git/"), location_name("clones/x/.git"), location_name("r")
    ('owner/name', 'clones/x', 'r')
    """
    path = location.split("://", 1)[1].split("/", 1)[-1] if "://" in location else location
    if not location.startswith(("/", ".")) and ":" in path and "://" not in location:
        path = path.split(":", 1)[1]  # scp-like user@host:owner/name
    parts = [p for p in path.split("/") if p and p != ".git"]
    parts = [*parts[:-1], parts[-1].removesuffix(".git")] if parts else [location]
    return "/".join(parts[-2:])


def name_repositories(found: list[Found]) -> list[Found]:
    """Sorted by name; names shared by several locations get a suffix, all but the first by location.

    The suffix is ``~`` and 8 hex digits of the location's sha256, so it does not
    depend on what else the folder or list holds.

    >>> [f.name for f in name_repositories([Found("o/r", "/b/o/r"), Found("o/r", "/a/o/r"), Found("x", "x")])]
    ['o/r', 'o/r~870bb47f', 'x']
    """
    by_name: dict[str, list[Found]] = {}
    for f in found:
        by_name.setdefault(f.name, []).append(f)
    named = []
    for name, group in by_name.items():
        group.sort(key=lambda f: f.location)
        named.append(group[0])
        for f in group[1:]:
            suffix = hashlib.sha256(f.location.encode()).hexdigest()[:8]
            named.append(Found(f"{name}~{suffix}", f.location, f.problem))
    return sorted(named, key=lambda f: (f.name, f.location))


# --- git plumbing --------------------------------------------------------------------


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


def _plan_blob_ids(entries: list, want_license: bool) -> list[str]:
    """The blobs planning reads: top-level license/README candidates (if detecting) and ``.gitmodules``."""
    ids = [obj for _, kind, obj, size, path in entries if want_license and _license_candidate(kind, size, path)]
    ids += [obj for _, kind, obj, _, path in entries if path == ".gitmodules" and kind == "blob"]
    return ids


def _license_candidate(kind: str, size: int, path: str) -> bool:
    return kind == "blob" and "/" not in path and license.is_candidate(path) and size < 200_000


def _license(src: GitSource, entries: list, blobs: dict[str, bytes | str]) -> tuple[str, str]:
    if src.license:
        return src.license, "recipe"
    wanted = {path: obj for _, kind, obj, size, path in entries if _license_candidate(kind, size, path)}
    texts = {p: b.decode("utf-8", "replace") for p, o in wanted.items() if isinstance(b := blobs.get(o), bytes)}
    return license.detect(texts)


def _submodule_urls(entries: list, blobs: dict[str, bytes | str]) -> dict[str, str]:
    obj = next((o for _, k, o, _, p in entries if p == ".gitmodules" and k == "blob"), None)
    blob = blobs.get(obj) if obj is not None else None
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
    """{sha: bytes} from ``git cat-file --batch``; else a drop reason: ``missing``, ``not_a_blob``,
    ``corrupt_object``, or ``missing_repository`` for every sha when ``gitdir`` is not a git directory.

    git ends the batch at an object it cannot inflate (a corrupt pack): that object
    is ``corrupt_object`` and a new batch goes on with the objects after it.
    """
    if not os.path.isfile(os.path.join(gitdir, "HEAD")):  # not on this node (a URL's clone made on another
        return dict.fromkeys(shas, "missing_repository")  # node and not made here), or removed since planning
    blobs: dict[str, bytes | str] = {}
    pending = list(shas)
    with batch_scheduling():
        while pending:
            answered = _cat_batch(gitdir, pending, blobs)
            if answered == len(pending):
                break
            blobs[pending[answered]] = "corrupt_object"
            pending = pending[answered + 1:]
    return blobs


def _cat_batch(gitdir: str, shas: list[str], blobs: dict[str, bytes | str]) -> int:
    """Answers of one ``git cat-file --batch`` into ``blobs``; how many shas it answered before it stopped.

    The request list is written from a thread so that a large answer cannot
    deadlock against a full stdin pipe.
    """
    proc = subprocess.Popen(
        ["git", f"--git-dir={gitdir}", "cat-file", "--batch", "--buffer"],  # answers in large writes, not one per object
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=GIT_ENV,
    )
    assert proc.stdin is not None and proc.stdout is not None
    request = "".join(f"{s}\n" for s in shas).encode()

    def feed() -> None:  # git may stop reading (a corrupt object): the answers say where
        with contextlib.suppress(OSError):
            proc.stdin.write(request)  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    answered = 0
    for sha in shas:
        header = proc.stdout.readline().decode().split()
        if len(header) == 2 and header[-1] == "missing":
            blobs[sha] = "missing"
        elif len(header) < 3:
            break
        else:
            data = proc.stdout.read(int(header[2]))
            if len(data) < int(header[2]) or proc.stdout.read(1) != b"\n":
                break
            blobs[sha] = data if header[1] == "blob" else "not_a_blob"
        answered += 1
    proc.stdout.close()  # first: a git still writing gets EPIPE and stops, so the writer can end
    writer.join()
    proc.wait()
    return answered
