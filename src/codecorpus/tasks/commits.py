"""The commits source: repositories -> slices of their history -> one row per commit.

A row is a commit as git shows it, and a change as it landed when it is on the mainline
(the first-parent chain from the tip: a merge's diff is against its first parent, the whole
pull request) or is GitHub's merge of a pull request into another branch; its pull request's
number comes from the subject, and with ``github_metadata`` the pull request and the issues it
closes are joined to it (:mod:`codecorpus.tasks.github`). The tasks are made of the changes,
the edit set of the single commits.

Plan (:func:`plan_slices`): per repository, the tip is resolved to a sha and
the walk (``git rev-list``, first-parent by default; ``since`` / ``until`` /
``max_commits_per_repo`` select mainline changes, and a walk of every parent is then the
commits those changes landed) counted; the changes a bound left out are counted for the
repository's first slice (``left_out``). The walk is cut into slices of
``commits_per_slice`` commits (the spec gives each slice of a long history a
job, and consecutive small histories one job together). A slice is a few strings, so the
plan is small for any history. No slice makes git walk the commits before it:

- a first-parent walk from any of its commits is the rest of the chain, so each
  slice of it starts at its own first commit (read from the listed walk at its offset);
- a walk of every parent cannot be resumed from one commit: one that fits in a
  slice is walked from the tip; a longer one is written by the plan, as ``git
  rev-list`` prints it, to a file of the run (``RUN/_plan/commits/<key>.walk``,
  through the run store; its sha256 is in the plan's hash), and each slice reads
  its own lines of it and hands them to git.

Read (:func:`read_slice`): one streamed ``git log`` over the slice
(:mod:`codecorpus.tasks.gitlog`) and one ``git cat-file`` asked for the
before-images and license files of a whole batch of rows at once; rows come out
as Arrow tables of ``batch_rows`` rows, so a 100k-commit history is never in
memory at once.
Every listed commit is a row or a drop (``rows_in = rows_out + dropped``):

- ``merge`` (a merge off the mainline that lands no pull request, e.g. main merged into a
  branch: its changes land with a mainline change), ``missing_parent`` (the boundary of a
  shallow clone: git shows it parentless), ``bot_author``, ``empty``;
- ``too_many_files``, ``diff_too_large`` (the diff, or git's whole record, over its cap);
- ``undecodable_message`` / ``undecodable_path`` / ``undecodable_diff``: not
  UTF-8 and no encoding detected with enough evidence (ingest's rule; with the
  evidence they are transcoded and the encoding recorded);
- ``submodule_bump``, and ``binary_only`` / ``vendored_only`` / ``lockfile_only`` /
  ``generated_only`` / ``symlink_only`` (``excluded_only`` for a mix), from
  ingest's exclusions applied to each changed file;
- ``corrupt_object``: git log failed on the commit (a missing or corrupt
  object); the walk restarts after it. ``unparsable``: git's output for the
  commit did not parse.

The repository's GitHub metadata records that cannot be used are drops of its first slice
(``metadata_malformed``, ``metadata_missing_commit``), counted in ``rows_in`` beside the
commits (counter ``metadata_records``). A merge's before-images are not read (the edit set,
their only reader, drops merges).

The license at each commit is detected (ingest's detector) from the top-level
license/README files of its tree; the root tree is read only when the walk
leaves the first-parent chain or the previous commit touched such a file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import os
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import pyarrow as pa

from codecorpus import schema
from codecorpus.ingest import exclusions, license
from codecorpus.ingest.git import batch_scheduling, clone_here
from codecorpus.langid import languages
from codecorpus.stage import MapResult
from codecorpus.storage import mirror
from codecorpus.storage.atomic import atomic_writer
from codecorpus.tasks import columns as C
from codecorpus.tasks import github, gitlog
from codecorpus.tasks.config import CommitsConfig

STAGE = "commits"
_LICENSE_BLOB_CAP = 200_000
_CONTENT_SNIFF_CHARS = 16_384  # of a file's diff, for ingest's generated/minified markers
_EXCLUDED_ONLY = {
    "binary": "binary_only", "vendored": "vendored_only", "lockfile": "lockfile_only",
    "protobuf_generated": "generated_only", "minified": "generated_only", "generated": "generated_only",
    "symlink": "symlink_only", "submodule": "submodule_bump",
}  # fmt: skip

PLAN_WALK_SUFFIX = ".walk"
"""A repository's listed history walk: ``git rev-list``'s own output, an object id and a newline per
commit (fixed width, ``walk_line_bytes``, so a slice reads its commits at ``skip * width``)."""


def walk_line_bytes(oid: str) -> int:
    """The width of a walk file's lines in a repository whose object ids are like ``oid``."""
    return len(oid) + 1


def plan_walk_file(plan_dir: Path | str, key: str) -> Path:
    """The listed walk of one repository in the commits stage's plan folder (``RunPaths.plan_dir``)."""
    return Path(plan_dir) / f"{key}{PLAN_WALK_SUFFIX}"


class GitError(RuntimeError):
    """A git command of the plan failed; the message names the repository and the fix."""


@dataclass(frozen=True)
class Repository:
    """A repository to mine: its source name, its name (``owner/name`` for SWE-bench ids), its git dir."""

    source: str
    repo: str
    gitdir: str
    url: str = ""
    """The URL ``gitdir`` is a clone of ('' for a local repository): a slice read on a node without
    the planner's clone makes its own there (``git.clone_here``)."""


@dataclass(frozen=True)
class CommitSlice:
    """``count`` commits of ``repository``'s walk from ``tip``, after its first ``skip``.

    How git is given them, so that it never walks (without diffing) the commits of the slices
    before, which is quadratic over a long history: ``start`` is the sha from which git walks
    the slice itself (a slice of a first-parent walk, or the only slice of a walk of every
    parent); ``listing``, in a walk of every parent cut into slices, is the plan's file of the
    whole walk (``plan_walk_file``, whose sha256 is ``walk_sha256``), of which the slice
    reads its ``count`` lines after ``skip`` and hands them to git."""

    repository: Repository
    tip: str
    skip: int
    count: int
    start: str | None = None
    listing: str | None = None
    walk_sha256: str | None = None
    stop: str | None = None
    """A bounded walk of every parent: the commit whose history is left out (``^stop``)."""
    left_out: int = 0
    """The repository's first slice: how many mainline changes the bounds left out."""

    def revisions(self, cfg: CommitsConfig) -> list[str]:
        """The walk options and revision of a slice git walks itself, for ``git log`` / ``git rev-list``."""
        if self.start is None:
            raise ValueError("this slice of a walk of every parent is listed in the plan's walk file")
        if not cfg.first_parent:  # the bounds are in the range (plan_slices)
            return [f"--max-count={self.count}", self.start, *([f"^{self.stop}"] if self.stop else [])]
        return [*walk_args(cfg), f"--max-count={self.count}", self.start]


def _git(gitdir: str, *args: str) -> str:
    proc = subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, env=gitlog.GIT_ENV, check=False)
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args[:2])} failed in {gitdir}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode()


def walk_args(cfg: CommitsConfig) -> list[str]:
    """``git rev-list`` options of the walk (first-parent, since, until)."""
    return (["--first-parent"] if cfg.first_parent else []) + _time_args(cfg)


def _time_args(cfg: CommitsConfig) -> list[str]:
    args = []
    if cfg.since is not None:
        args.append(f"--since={_epoch(cfg.since)}")
    if cfg.until is not None:
        args.append(f"--until={_epoch(cfg.until)}")
    return args


def _epoch(when: dt.datetime) -> int:
    return int((when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp())


def repo_cap(cfg: CommitsConfig, repo: str) -> int | None:
    """The newest changes kept of ``repo``: ``max_commits_per_repo``, or its entry for the
    repository when it names repositories (a recipe's bound for one history, not for others).

    >>> repo_cap(CommitsConfig(max_commits_per_repo={"a/b": 3}), "a/b"), repo_cap(CommitsConfig(), "a/b")
    (3, None)
    """
    cap = cfg.max_commits_per_repo
    return cap.get(repo) if isinstance(cap, dict) else cap


def _bounded(cfg: CommitsConfig, repo: str) -> bool:
    return cfg.since is not None or cfg.until is not None or repo_cap(cfg, repo) is not None


def _cap_args(cfg: CommitsConfig, repo: str) -> list[str]:
    cap = repo_cap(cfg, repo)
    return [f"--max-count={cap}"] if cap is not None else []


def _mainline_bounds(repo: Repository, cfg: CommitsConfig, tip: str) -> tuple[list[str], int]:
    """(the bounded mainline's first and last change, how many changes the bounds left out)."""
    bound = _cap_args(cfg, repo.repo)
    kept = _git(repo.gitdir, "rev-list", "--first-parent", *_time_args(cfg), *bound, tip).split()
    total = int(_git(repo.gitdir, "rev-list", "--first-parent", "--count", tip).strip())
    return ([kept[0], kept[-1]] if kept else []), total - len(kept)


def _all_parents_range(repo: Repository, ends: list[str]) -> tuple[str, str | None]:
    """(start, stop) of the commits that landed with a bounded mainline's changes: reachable from
    its newest change and not from the first parent of its oldest (each merge's side included)."""
    parents = _git(repo.gitdir, "rev-list", "--parents", "-n", "1", ends[1]).split()
    return ends[0], (parents[1] if len(parents) > 1 else None)


def plan_slices(
    repositories: list[Repository], cfg: CommitsConfig, revision: str = "HEAD", plan_dir: Path | str | None = None
) -> list[CommitSlice]:
    """Slices of every repository's walk, in repository order then newest first. A walk of
    every parent longer than a slice is written to ``plan_dir`` (the run's ``plan_dir("commits")``).

    The bounds (``since``, ``until``, ``max_commits_per_repo``) select changes of the mainline;
    a walk of every parent then reads the commits those changes landed. How many changes they
    left out is carried by the repository's first slice (``left_out``), for the report."""
    if not cfg.first_parent and plan_dir is None:
        raise ValueError("a walk of every parent (first_parent: false) is listed in a plan folder: pass plan_dir")
    out: list[CommitSlice] = []
    n = cfg.commits_per_slice
    for repo in repositories:
        try:
            tip = _git(repo.gitdir, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").strip()
        except GitError:
            raise GitError(f"{repo.repo}: {revision!r} is not a commit of {repo.gitdir}; name a branch, tag or sha") from None
        if len(tip) != len(gitlog.ZERO_OID):
            raise GitError(f"{repo.repo}: {repo.gitdir} names its objects by {len(tip) * 4}-bit ids (sha256); "
                           "only sha1 repositories are read")  # fmt: skip
        ends, left_out = _mainline_bounds(repo, cfg, tip) if _bounded(cfg, repo.repo) else ([], 0)
        width = walk_line_bytes(tip)
        if cfg.first_parent:
            revisions, stop = [*walk_args(cfg), *_cap_args(cfg, repo.repo), tip], None
        elif _bounded(cfg, repo.repo):
            if not ends:
                continue
            start, stop = _all_parents_range(repo, ends)
            revisions = [start, *([f"^{stop}"] if stop else [])]
        else:
            revisions, stop = [tip], None
        first = len(out)
        with _listed_walk(repo.gitdir, revisions, width) as (walk, total):
            skips = range(0, total, n)
            if cfg.first_parent:  # each slice walks the rest of the chain from its first commit
                out += [CommitSlice(repo, tip, skip, min(n, total - skip), start=_walk_lines(walk, skip, 1, width)[0])
                        for skip in skips]  # fmt: skip
            elif total <= n:  # one slice: git walks it from its first commit
                start = revisions[0]
                out += [CommitSlice(repo, tip, 0, total, start=start, stop=stop)] if total else []
            else:
                assert plan_dir is not None
                listing = plan_walk_file(plan_dir, _walk_key(repo))
                digest = _copy_walk(walk, listing)
                out += [CommitSlice(repo, tip, skip, min(n, total - skip), listing=str(listing), walk_sha256=digest)
                        for skip in skips]  # fmt: skip
        if left_out and len(out) > first:
            out[first] = dataclasses.replace(out[first], left_out=left_out)
    return out


def _walk_key(repo: Repository) -> str:
    """The walk file's name: the repository's identity in the run (as its document ids), not where it lies."""
    return hashlib.sha256(f"{repo.source}\0{repo.repo}".encode()).hexdigest()[:20]


@contextlib.contextmanager
def _listed_walk(gitdir: str, revisions: list[str], width: int) -> Iterator[tuple[BinaryIO, int]]:
    """(a temporary file holding ``git rev-list revisions`` as git prints it, how many commits it
    lists): the plan reads only the lines it needs (Python never splits the walk)."""
    with tempfile.TemporaryFile() as walk, tempfile.TemporaryFile() as err:
        proc = subprocess.run(["git", f"--git-dir={gitdir}", "rev-list", *revisions], stdout=walk, stderr=err,
                              env=gitlog.GIT_ENV, check=False)  # fmt: skip
        if proc.returncode != 0:
            err.seek(0)
            raise GitError(f"git rev-list failed in {gitdir}: {err.read().decode(errors='replace').strip()}")
        size = walk.seek(0, os.SEEK_END)
        if size % width:
            raise GitError(f"git rev-list in {gitdir} printed {size} bytes, not lines of {width}")
        yield walk, size // width


def _walk_lines(walk: BinaryIO, skip: int, count: int, width: int) -> list[str]:
    """The shas of lines ``skip`` to ``skip + count`` of a walk listing."""
    walk.seek(skip * width)
    return walk.read(count * width).decode("ascii").split()


def _copy_walk(walk: BinaryIO, listing: Path) -> str:
    """Copy a walk listing to the run file ``listing`` (published to the run store); its sha256."""
    walk.seek(0)
    digest = hashlib.sha256()
    with atomic_writer(listing) as out:
        while chunk := walk.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def slice_shas(sl: CommitSlice, cfg: CommitsConfig) -> list[str]:
    """The slice's commits in walk order: its lines of the plan's walk file, else ``git rev-list``."""
    if sl.listing is None:
        return _git(sl.repository.gitdir, "rev-list", *sl.revisions(cfg)).split()
    try:
        with open(mirror.ensure_local(sl.listing), "rb") as f:
            shas = _walk_lines(f, sl.skip, sl.count, walk_line_bytes(sl.tip))
    except OSError as err:
        raise GitError(f"{sl.repository.repo}: the plan's walk file cannot be read ({err}); run again: "
                       "the plan writes it anew") from None  # fmt: skip
    if len(shas) != sl.count:
        raise GitError(f"{sl.repository.repo}: the plan's walk file {sl.listing} holds {len(shas)} commits after "
                       f"{sl.skip} where the slice has {sl.count}; the plan folder was changed during the run")  # fmt: skip
    return shas


def shallow_commits(gitdir: str) -> frozenset[str]:
    """Commits whose parents a shallow clone does not have (git lists them in ``shallow``)."""
    path = Path(gitdir) / "shallow"
    return frozenset(path.read_text().split()) if path.exists() else frozenset()


# --- one slice -------------------------------------------------------------------------


@dataclass
class _License:
    """The license of ``sha``'s tree: read when its batch is finished, shared along a first-parent chain."""

    sha: str
    value: tuple[str, str] | None = None


class FileEntry(NamedTuple):
    """A changed file of a commit row: ``columns.FILE_TYPE``'s fields in its order (Arrow converts it by position)."""

    path: str
    old_path: str
    status: str
    old_mode: str
    new_mode: str
    old_oid: str
    new_oid: str
    added: int
    deleted: int
    binary: bool
    lang: str
    excluded: str | None


_ROW_TYPE = pa.struct(list(C.COMMIT_SCHEMA))
_ROW_TAIL = (C.BEFORE, C.BEFORE_SKIPPED, schema.LICENSE, schema.LICENSE_METHOD, C.PR_NUMBER, C.PULL, C.ISSUES)
"""The columns a batch adds to each row when its objects are read: the last ones of ``COMMIT_SCHEMA``."""
assert tuple(C.COMMIT_SCHEMA.names[-len(_ROW_TAIL) :]) == _ROW_TAIL


@dataclass
class _Row:
    """A commit's row before its objects are read: its values (``COMMIT_SCHEMA``'s columns in order, up to
    ``_ROW_TAIL``), the before-images it wants (blob id, old path), its license."""

    row: tuple[Any, ...]
    wanted: list[tuple[str, str]]
    license: _License
    pr_number: int | None = None
    change: bool = False
    """A change as it landed: on the mainline, or a merge of a pull request into another branch."""


class _Slice:
    """State of one slice's read: rows and drops of the current batch, the license tracker, per-slice caches.

    Objects are read per batch, not per commit: a finished batch asks ``git cat-file``
    for every tree and before-image its rows need in one stream of requests (a round trip per
    commit would cost more CPU, in both processes, than the parse).
    """

    def __init__(self, sl: CommitSlice, cfg: CommitsConfig, objects: gitlog.ObjectReader) -> None:
        self.sl, self.cfg, self.objects = sl, cfg, objects
        self.repo = sl.repository
        self.bots = re.compile("|".join(cfg.bot_authors), re.IGNORECASE) if cfg.bot_authors else None
        self.vendored = frozenset(cfg.vendored_dirs)
        self.shallow = shallow_commits(self.repo.gitdir)
        self.rows: list[_Row] = []
        self.pending: tuple[str, Any] | None = None
        self.drops: list[dict[str, Any]] = []
        self.counters: Counter[str] = Counter()
        self.licenses: dict[tuple, tuple[str, str]] = {}
        # (sha, its license if known): the next commit of a first-parent walk and the license it must have
        self.chain: tuple[str | None, _License | None] = (None, None)
        self.authors: dict[str, str | None] = {}  # name <email> -> the bot pattern it matches
        self.paths: dict[str, tuple[str, str | None]] = {}  # path -> (language, path exclusion)
        self.read = 0  # commits of the slice read (rows, drops, and the pending one)
        self.last: str | None = None  # the sha of the last of them
        self._mainline: frozenset[str] | None = None
        self._landing: dict[str, int] = {}
        self.meta = github.load(cfg.github_metadata, self.repo.repo) if cfg.github_metadata else None

    def on_mainline(self, sha: str) -> bool:
        """Whether ``sha`` is on the first-parent chain from the tip: a change as it landed."""
        return self.cfg.first_parent or sha in self.mainline()

    def mainline(self) -> frozenset[str]:
        """The whole first-parent chain from the tip (a walk of every parent asks; read once per process)."""
        if self._mainline is None:
            self._mainline, self._landing = landing_times(self.repo.gitdir, self.sl.tip)
        return self._mainline

    def landed_at(self, sha: str, committed: int) -> int:
        """When the commit reached the mainline: its own commit time on the mainline, else the commit
        time of the mainline merge that landed it (the time split's key for the edit set)."""
        if self.cfg.first_parent or sha in self.mainline():
            return committed
        return self._landing.get(sha, committed)

    def drop(self, sha: str, reason: str, detail: str | None = None, nbytes: int = 0, lang: str = schema.UNKNOWN) -> None:
        self.add("drop", {
            schema.ID: commit_id(self.repo, sha), schema.STAGE: STAGE, schema.REASON: reason, schema.LANG: lang,
            schema.BYTES: nbytes, schema.SOURCE: self.repo.source, schema.REPO: self.repo.repo, schema.PATH: sha,
            schema.DETAIL: detail, schema.SCORE: None, schema.THRESHOLD: None, schema.DUP_OF: None,
        })  # fmt: skip

    def add(self, kind: str, item: dict[str, Any] | _Row) -> None:
        """Record one commit's outcome; the newest is held back until the next (git may yet disown it)."""
        self.settle()
        self.pending = (kind, item)

    def settle(self) -> None:
        if self.pending is not None:
            kind, item = self.pending
            (self.rows if kind == "row" else self.drops).append(item)
            self.pending = None

    def take_back(self) -> None:
        """Forget the newest outcome: git failed on that commit after all."""
        self.pending = None
        self.chain = (None, None)

    def batch(self) -> MapResult:
        """The settled rows, finished with their licenses and before-images, and the drops."""
        _read_licenses(self, [r.license for r in self.rows])
        blobs = self.objects.iter_many([oid for r in self.rows for oid, _ in r.wanted], self.cfg.max_before_file_bytes)
        rows = []
        for r in self.rows:
            before, skipped = _before_images(self.cfg, r.wanted, blobs)
            assert r.license.value is not None  # _read_licenses filled in every one
            rows.append((*r.row, before, skipped, *r.license.value, *_pull_fields(self, r)))
        # one struct array from the rows' tuples (by position): faster than Table.from_pylist's dicts
        table = pa.Table.from_batches([pa.RecordBatch.from_struct_array(pa.array(rows, type=_ROW_TYPE))])
        dropped = pa.Table.from_pylist(self.drops, schema=schema.DROP_SCHEMA)
        result = MapResult(table, dropped, self.counters)
        self.rows, self.drops, self.counters = [], [], Counter()
        return result

    def full(self) -> bool:
        return len(self.rows) + len(self.drops) >= self.cfg.batch_rows

    def bot(self, author: str) -> str | None:
        """The bot pattern ``author`` (``name <email>``) matches, or None."""
        if author not in self.authors:
            m = self.bots.search(author) if self.bots is not None else None
            self.authors[author] = m.group(0) if m else None
        return self.authors[author]

    def path_info(self, path: str) -> tuple[str, str | None]:
        """(language, ingest's path exclusion) of a changed file's path."""
        info = self.paths.get(path)
        if info is None:
            info = self.paths[path] = (file_language(path), exclusions.path_exclusion(path, self.vendored, True))
        return info


@functools.lru_cache(maxsize=2)
def landing_times(gitdir: str, tip: str) -> tuple[frozenset[str], dict[str, int]]:
    """(the first-parent chain from ``tip``, and for every other commit the commit time of the
    mainline merge that landed it). The mainline's merges are taken oldest first, each claiming
    the commits its other parents reach that no older merge claimed: one pass over the graph
    (``git rev-list --parents``), however many merges. Cached per process: a worker reads many
    slices of one history, each of which asks."""
    chain = _git(gitdir, "log", "--first-parent", "--format=%H %ct", tip).split()
    times = dict(zip(chain[::2], map(int, chain[1::2]), strict=True))
    graph = {}
    for line in _git(gitdir, "rev-list", "--parents", tip).splitlines():
        sha, *parents = line.split()
        graph[sha] = parents
    landing: dict[str, int] = {}
    for merge in reversed(chain[::2]):
        stack = [p for p in graph.get(merge, ())[1:] if p not in times and p not in landing]
        while stack:
            sha = stack.pop()
            if sha in times or sha in landing:
                continue
            landing[sha] = times[merge]
            stack += [p for p in graph.get(sha, ()) if p not in times and p not in landing]
    return frozenset(times), landing


def _pull_fields(state: _Slice, r: _Row) -> tuple[Any, ...]:
    """(pr_number, pull, issues) of a row: the metadata's pull request whose merge commit the row
    is, and the issues it closes (this repository's, with their comments, for the hints)."""
    sha = r.row[_SHA_AT]
    pull = state.meta.pulls.get(sha) if state.meta is not None and r.change else None
    if pull is None:
        return r.pr_number, None, []
    issues = []
    message = f"{r.row[_SUBJECT_AT]}\n{r.row[_SUBJECT_AT + 1]}"  # the landed commit's own (a squash: its commits')
    text = f"{pull.title}\n{pull.body}\n{pull.commit_messages}\n{message}"
    for repo, number in github.linked_issues(text, state.repo.repo):
        issue = state.meta.issues.get(number) if repo.lower() == state.repo.repo.lower() else None
        if issue is not None:
            comments = [(c.created_at, c.body) for c in issue.comments]
            issues.append((repo, number, issue.title, issue.body, comments))
    fields = (pull.number, pull.title, pull.body, pull.created_at, pull.merged_at, pull.first_commit_at)
    return pull.number, fields, issues


_SHA_AT = C.COMMIT_SCHEMA.names.index(C.SHA)
_SUBJECT_AT = C.COMMIT_SCHEMA.names.index(C.SUBJECT)
assert C.COMMIT_SCHEMA.names[_SUBJECT_AT + 1] == C.BODY
_MAINLINE_AT = C.COMMIT_SCHEMA.names.index(C.MAINLINE)


def _metadata_drops(state: _Slice) -> None:
    """The repository's unusable metadata records, as drops of its first slice: malformed ones,
    and merged pull requests whose merge commit the repository does not have."""
    assert state.meta is not None
    shas = sorted(state.meta.pulls)
    kinds = [kind for kind, _, _ in state.objects.iter_many(shas, 0)]
    missing = [(f"pull/{state.meta.pulls[sha].number}", "metadata_missing_commit", f"merge_commit_sha {sha}")
               for sha, kind in zip(shas, kinds, strict=True) if kind != "commit"]  # fmt: skip
    for key, reason, detail in [*state.meta.bad, *missing]:
        state.drops.append({
            schema.ID: schema.document_id(state.repo.source, state.repo.repo, key, "github"), schema.STAGE: STAGE,
            schema.REASON: reason, schema.LANG: schema.UNKNOWN, schema.BYTES: 0, schema.SOURCE: state.repo.source,
            schema.REPO: state.repo.repo, schema.PATH: key, schema.DETAIL: detail, schema.SCORE: None,
            schema.THRESHOLD: None, schema.DUP_OF: None,
        })  # fmt: skip
        state.counters[METADATA_RECORDS] += 1


PULL_MERGE = b"Merge pull request #"
"""GitHub's merge message: such a merge off the mainline landed a pull request on another branch."""
METADATA_RECORDS = "metadata_records"
"""Counter of the metadata records a commits job dropped: inputs besides its commits (``rows_in``)."""
LEFT_OUT = "changes_left_out/"
"""Counter prefix, then the repository: mainline changes the walk's bounds left out."""


def commit_id(repo: Repository, sha: str) -> str:
    return schema.document_id(repo.source, repo.repo, sha, "commit")


def read_slice(sl: CommitSlice, cfg: CommitsConfig) -> Iterator[MapResult]:
    """Batches (rows, drops) of one slice, in walk order; every listed commit is in exactly one.

    A slice with a ``start``: git walks it itself (one process, no list of shas). Only when it
    fails on a commit are the slice's shas listed (``git rev-list``), the culprit dropped, and
    the rest read from the list, one git log per failure. A slice of a listed walk is read
    from its lines of the plan's walk file from the start.
    """
    if sl.repository.url:
        clone_here(sl.repository.url, sl.repository.gitdir)
    with batch_scheduling(), gitlog.ObjectReader(sl.repository.gitdir) as objects:  # the order: git inherits it
        state = _Slice(sl, cfg, objects)
        state.counters["commits"] = sl.count
        if sl.left_out:
            state.counters[LEFT_OUT + state.repo.repo] = sl.left_out
        if sl.skip == 0 and state.meta is not None:
            _metadata_drops(state)
        shas = None
        if sl.listing is not None:
            shas = slice_shas(sl, cfg)
        else:
            try:
                records = gitlog.stream_log(state.repo.gitdir, cfg.max_record_bytes, walk=sl.revisions(cfg))
                yield from _read_records(state, records)
            except gitlog.LogFailed as err:
                shas = slice_shas(sl, cfg)
                _drop_culprit(state, shas, err)
            if shas is None and state.read != sl.count:  # the walk and its count disagree: go by the list
                shas = slice_shas(sl, cfg)
        while shas is not None and state.read < len(shas):
            try:
                yield from _read_records(state, gitlog.stream_log(state.repo.gitdir, cfg.max_record_bytes,
                                                                  shas=shas[state.read :]), shas)  # fmt: skip
            except gitlog.LogFailed as err:
                _drop_culprit(state, shas, err)
        if shas is not None and len(shas) != sl.count:  # the list is the truth; a batch may have counted sl.count
            state.counters["commits"] += len(shas) - sl.count
        state.settle()
        if state.rows or state.drops or state.counters:
            yield state.batch()


def _read_records(
    state: _Slice, records: Iterator[bytes | gitlog.Oversized], shas: list[str] | None = None
) -> Iterator[MapResult]:
    """Every record of one git log into the slice state (``state.read`` counts them), yielding full
    batches; with ``shas``, each record must be the next listed commit."""
    for record in records:
        sha = record.sha if isinstance(record, gitlog.Oversized) else record[:40].decode("ascii", "replace")
        if shas is not None and (state.read >= len(shas) or sha != shas[state.read]):
            due = shas[state.read] if state.read < len(shas) else "nothing"
            raise gitlog.LogFailed(f"git log gave {sha} where {due} was due")  # --no-walk=unsorted keeps the order
        _one_record(state, record)
        state.read += 1
        state.last = sha
        if state.full():
            yield state.batch()


def _drop_culprit(state: _Slice, shas: list[str], err: gitlog.LogFailed) -> None:
    """Drop the commit git log failed on as ``corrupt_object``; the read goes on after it.

    git may die before or after writing the failing commit's header (rename detection reads blobs
    before it): the last commit read is the culprit if it fails alone, else the next one is.
    """
    if state.read and shas[state.read - 1] != state.last:
        raise GitError(f"{state.repo.repo}: git log's walk and git rev-list disagree at commit {state.read}")
    if state.read > 0 and _fails_alone(state, shas[state.read - 1]):
        state.read -= 1
        state.take_back()
    state.drop(shas[state.read], "corrupt_object", err.stderr[:300])
    state.read += 1
    state.last = shas[state.read - 1]


def _fails_alone(state: _Slice, sha: str) -> bool:
    try:
        for _ in gitlog.stream_log(state.repo.gitdir, state.cfg.max_record_bytes, shas=[sha]):
            pass
    except gitlog.LogFailed:
        return True
    return False


def _one_record(state: _Slice, record: bytes | gitlog.Oversized) -> None:
    if isinstance(record, gitlog.Oversized):
        state.chain = (None, None)
        state.drop(record.sha, "diff_too_large", f"git log record of {record.nbytes} bytes", record.nbytes)
        return
    try:
        raw = gitlog.parse_record(record)
    except (gitlog.UnparsableRecord, ValueError, UnicodeDecodeError) as err:
        state.chain = (None, None)
        state.drop(record[:40].decode("ascii", "replace"), "unparsable", str(err)[:300], len(record))
        return
    known = state.chain[1] if state.chain[0] == raw.sha else None
    reason, detail = _commit_drop(state, raw)
    built = _build_row(state, raw, known) if reason is None else (reason, detail)
    if isinstance(built, _Row):
        known = built.license
        state.add("row", built)
    else:
        state.drop(raw.sha, built[0] or "unparsable", built[1], len(raw.patch))
    state.chain = (raw.parents[0] if raw.parents else None, known if _keeps_license(raw) else None)


def _keeps_license(raw: gitlog.RawCommit) -> bool:
    """Whether ``raw``'s parent has its license: one parent, and no top-level license file changed."""
    if len(raw.parents) != 1 or not raw.files:
        return False
    return not any(_is_license_path(f.path) or _is_license_path(f.old_path) for f in raw.files)


@functools.lru_cache(maxsize=1 << 16)
def _is_license_path(path: bytes) -> bool:
    return b"/" not in path and license.is_candidate(path.decode("utf-8", "replace"))


def _commit_drop(state: _Slice, raw: gitlog.RawCommit) -> tuple[str | None, str | None]:
    """Drop reason decided from the header and the file list alone (before any decoding)."""
    if len(raw.parents) > 1 and not state.on_mainline(raw.sha) and not raw.message.startswith(PULL_MERGE):
        return "merge", f"{len(raw.parents)} parents, off the mainline (its changes land with a mainline change)"
    if raw.sha in state.shallow:
        return "missing_parent", "shallow clone boundary: parents not in the repository"
    author = raw.author_name.decode("utf-8", "replace") + " <" + raw.author_email.decode("utf-8", "replace") + ">"
    if (bot := state.bot(author)) is not None:
        return "bot_author", f"{author[:120]} matches {bot!r}"
    if not raw.files:
        return "empty", None
    if len(raw.files) > state.cfg.max_files_changed:
        return "too_many_files", f"{len(raw.files)} files > {state.cfg.max_files_changed}"
    if len(raw.patch) > state.cfg.max_diff_bytes:
        return "diff_too_large", f"{len(raw.patch)} bytes > {state.cfg.max_diff_bytes}"
    return None, None


def _decode_paths(files: list[gitlog.RawFile], min_evidence: int) -> dict[bytes, str] | None:
    """{raw path: text}; non-UTF-8 paths are decoded together, so their bytes are one body of evidence."""
    out: dict[bytes, str] = {}
    try:
        for f in files:
            out[f.path] = f.path.decode("utf-8")
            if f.old_path is not f.path:  # a rename or copy (else git's one path serves both)
                out[f.old_path] = f.old_path.decode("utf-8")
        return out
    except UnicodeDecodeError:
        pass
    out, bad = {}, []
    for p in {f.path for f in files} | {f.old_path for f in files}:
        try:
            out[p] = p.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(p)
    bad.sort()
    text, _, _ = exclusions.decode(b"\n".join(bad), min_evidence)
    if text is None or len(text.split("\n")) != len(bad):
        return None
    out.update(zip(bad, text.split("\n"), strict=True))
    return out


def _decode_message(raw: gitlog.RawCommit, min_evidence: int) -> tuple[str | None, str]:
    text, encoding, _ = exclusions.decode(raw.message, min_evidence)
    if encoding == "utf-8" and raw.encoding and raw.encoding.lower() not in ("utf-8", "utf8"):
        encoding = raw.encoding.lower()  # git re-encoded the message from its declared encoding
    return text, encoding or schema.UNKNOWN


def _build_row(state: _Slice, raw: gitlog.RawCommit, known: _License | None) -> _Row | tuple[str, str | None]:
    """The row of a commit (before-images and license still to read; ``known``: its license when the
    chain gives it), or (reason, detail) when its contents decide a drop."""
    cfg = state.cfg
    message, encoding = _decode_message(raw, cfg.min_encoding_evidence)
    if message is None:
        return "undecodable_message", f"{len(raw.message)} bytes, not UTF-8, too little evidence for an encoding"
    paths = _decode_paths(raw.files, cfg.min_encoding_evidence)
    if paths is None:
        return "undecodable_path", "non-UTF-8 path bytes, too little evidence for an encoding"
    diff, diffs = _decode_diff(raw.patch, cfg.min_encoding_evidence)
    if isinstance(diffs, str):
        return diff, diffs
    if len(diffs) != len(raw.files):
        return "unparsable", f"{len(diffs)} patch sections for {len(raw.files)} files"
    files = []
    excluded: set[str | None] = set()
    added = deleted = 0
    lines: dict[str, int] = {}  # changed lines (+1 per file) per language, of the code files
    wanted = []  # before-images of the changed code files (not added, not copied, not excluded)
    for f, d in zip(raw.files, diffs, strict=True):
        entry = _file_entry(state, f, paths, d)
        files.append(entry)
        excluded.add(entry.excluded)
        added += entry.added
        deleted += entry.deleted
        if entry.excluded is None:
            lines[entry.lang] = lines.get(entry.lang, 0) + entry.added + entry.deleted + 1
            if f.old_oid != gitlog.ZERO_OID and entry.status != "copy" and len(raw.parents) == 1:
                wanted.append((f.old_oid, entry.old_path))  # a merge's are not read: the edit set drops merges
    if None not in excluded:
        return _excluded_only(excluded), ", ".join(sorted(excluded))  # type: ignore[arg-type]
    subject, _, body = message.strip("\n").partition("\n")
    mainline = state.on_mainline(raw.sha)
    row = (  # COMMIT_SCHEMA's columns in order, up to _ROW_TAIL
        commit_id(state.repo, raw.sha), state.repo.source, state.repo.repo,  # id, source, repo
        raw.sha, _main_language(lines), len(raw.patch),  # path, lang, bytes
        raw.sha, raw.parents,  # sha, parents
        raw.author_name.decode("utf-8", "replace"), raw.author_email.decode("utf-8", "replace"),  # author_name, _email
        raw.author_time, raw.committer_time,  # author and committer dates: epoch seconds, Arrow's timestamp("s")
        subject.strip(), body.strip("\n"), encoding,  # subject, body, message_encoding
        files, added, deleted, diff, mainline,  # files, lines_added, lines_deleted, diff, mainline
        state.landed_at(raw.sha, raw.committer_time),  # landed_at
    )  # fmt: skip
    merge = len(raw.parents) > 1
    number = github.pr_number(subject.strip(), merge) if mainline or merge else None
    change = mainline or (merge and number is not None)  # a pull request merged into another branch is one too
    return _Row(row, wanted, known or _License(raw.sha), number, change)


def _decode_diff(patch: bytes, min_evidence: int) -> tuple[str, list[str]] | tuple[str, str]:
    """(the diff as text, each file's part of it): the whole patch at once when it is UTF-8, else
    file by file (a diff may mix files in different encodings); or (reason, detail) of a drop."""
    try:
        text = patch.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return text, gitlog.patch_sections(text)
    out = []
    for section in gitlog.patch_sections(patch):
        decoded = exclusions.decode(section, min_evidence)[0]
        if decoded is None:
            return "undecodable_diff", "a file's diff is not UTF-8 and no encoding was detected"
        out.append(decoded)
    return "".join(out), out


def file_language(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return languages.language_from_filename(name) or languages.language_from_extension(name) or schema.UNKNOWN


def _file_entry(state: _Slice, f: gitlog.RawFile, paths: dict[bytes, str], diff: str) -> FileEntry:
    path = paths[f.path]
    lang, path_excluded = state.path_info(path)
    status = f.status
    if status == "modify" and f.old_mode != f.new_mode and f.old_oid == f.new_oid:
        status = "mode"
    added, deleted, binary = gitlog.line_counts(diff)
    return FileEntry(path, paths[f.old_path], status, f.old_mode, f.new_mode, f.old_oid, f.new_oid, added, deleted,
                     binary, lang, _file_exclusion(f, binary, path_excluded, diff))  # fmt: skip


def _file_exclusion(f: gitlog.RawFile, binary: bool, path_excluded: str | None, diff: str) -> str | None:
    if "160000" in (f.old_mode, f.new_mode):
        return "submodule"
    if "120000" in (f.old_mode, f.new_mode):
        return "symlink"
    if binary:
        return "binary"
    if path_excluded:
        return path_excluded
    # the head of the file's diff holds its first lines when they changed (a marker sits there) and a
    # bundle's long lines either way; the diff's "+"/" " prefixes only make it look less indented
    found = exclusions.content_exclusion(diff[:_CONTENT_SNIFF_CHARS], True)
    return found[0] if found else None


def _excluded_only(kinds: set[str | None]) -> str:
    """The drop reason of a commit whose every file is excluded, ``kinds`` being their exclusions (no None)."""
    reasons = {_EXCLUDED_ONLY.get(k, "excluded_only") for k in kinds}  # type: ignore[arg-type]
    return reasons.pop() if len(reasons) == 1 else "excluded_only"


def _main_language(lines: dict[str, int]) -> str:
    """The language with the most changed lines (+1 per file, as ``lines`` counts them) among the
    code files; ties by name."""
    if len(lines) == 1:
        return next(iter(lines))
    return min(lines, key=lambda lang: (-lines[lang], lang)) if lines else schema.UNKNOWN


def _before_images(
    cfg: CommitsConfig, wanted: list[tuple[str, str]], blobs: Iterator[tuple[str, bytes | None, int]]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(before-images as (path, text), skipped files as (path, why)) of one commit, its wanted blobs
    taken from ``blobs`` in order, within the caps."""
    before, skipped, total = [], [], 0
    for _, path in wanted:
        kind, data, size = next(blobs)
        if kind != "blob":
            skipped.append((path, "missing"))
        elif data is None:
            skipped.append((path, "too_large"))
        elif total + size > cfg.max_before_bytes:
            skipped.append((path, "commit_cap"))
        else:
            text = exclusions.decode(data, cfg.min_encoding_evidence)[0]
            if text is None:
                skipped.append((path, "undecodable"))
            else:
                before.append((path, text))
                total += size
    return before, skipped


def _read_licenses(state: _Slice, holders: list[_License]) -> None:
    """Fill in each unread license: (SPDX id, method) of its commit's tree from the top-level license and
    README files, detected once per set of those files' blob ids (one request stream for all trees)."""
    todo = list({id(h): h for h in holders if h.value is None}.values())
    trees = state.objects.iter_many([f"{h.sha}^{{tree}}" for h in todo], 1 << 26)
    keys = [_license_key(kind, data) for kind, data, _ in trees]
    new = sorted({key for key in keys if key not in state.licenses})
    oids = sorted({oid for key in new for _, oid in key})
    blobs = dict(zip(oids, state.objects.iter_many(oids, _LICENSE_BLOB_CAP), strict=True))
    for key in new:
        texts = {}
        for name, oid in key:
            kind, blob, _ = blobs[oid]
            if kind == "blob" and blob is not None:
                texts[name.decode("utf-8", "replace")] = blob.decode("utf-8", "replace")
        state.licenses[key] = license.detect(texts)
    for h, key in zip(todo, keys, strict=True):
        h.value = state.licenses[key]


def _license_key(kind: str, tree: bytes | None) -> tuple[tuple[bytes, str], ...]:
    """(name, blob id) of a root tree's top-level license and README files."""
    if kind != "tree" or tree is None:
        return ()
    return tuple(
        (name, oid) for mode, name, oid in gitlog.tree_entries(tree) if mode.startswith("100") and _is_license_path(name)
    )  # fmt: skip


def read_slice_table(sl: CommitSlice, cfg: CommitsConfig) -> MapResult:
    """All batches of a slice concatenated: the commits job (a slice is at most
    ``commits_per_slice`` commits) and tests."""
    tables, drops, counters = [], [], Counter()
    for batch in read_slice(sl, cfg):
        tables.append(batch.table)
        drops.append(batch.dropped)
        counters.update(batch.counters)
    table = pa.concat_tables(tables) if tables else C.COMMIT_SCHEMA.empty_table()
    dropped = pa.concat_tables(drops) if drops else schema.empty_drops()
    return MapResult(table, dropped, counters)
