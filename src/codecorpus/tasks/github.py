"""GitHub metadata of a repository: its pull requests and issues, as ``gh api --paginate`` writes them.

SWE-bench builds a task from a merged pull request and takes its problem statement from the
issue the pull request resolves. This module reads that text, when the user has it, from
GitHub's own REST API JSON, and links each pull request to its issues.

Where it lies (``stages.commits.github_metadata``): a folder, local or ``s3://``, holding per
repository ``owner/name`` either a file ``owner__name.json`` or a folder ``owner__name/`` of
``*.json`` files. A file holds what ``gh api --paginate`` printed: JSON arrays one after the
other (one per page), a single array, or an object ``{"pulls": [...], "issues": [...],
"comments": [...]}``. Records are told apart by their fields, so any mix of files works:

- a pull request (``repos/O/R/pulls?state=closed``): ``number``, ``title``, ``body``,
  ``merge_commit_sha``, ``created_at``, ``merged_at``; optionally ``commits`` (the list
  ``repos/O/R/pulls/N/commits`` gives: ``sha`` and ``commit.author.date``);
- an issue (``repos/O/R/issues?state=all``): ``number``, ``title``, ``body``, and ``comments``
  either as the list of comment records or as GitHub's count (then the comments come from
  ``repos/O/R/issues/comments`` records, matched by their ``issue_url``); an issue record with
  a ``pull_request`` key is a pull request's issue side and is not an issue;
- a comment: ``body``, ``created_at``, ``issue_url`` (``.../issues/N``).

A record that has none of these shapes, or whose fields have the wrong types, is a
``metadata_malformed`` drop; a merged pull request whose merge commit is not in the
repository is a ``metadata_missing_commit`` drop (the commits source counts both).

Linking follows GitHub's closing keywords (close, closes, closed, fix, fixes, fixed,
resolve, resolves, resolved, each optionally followed by a colon) before ``#N``,
``owner/repo#N`` or an issue URL, in the pull request's title and body and, as SWE-bench
reads them, its commits' messages: those the metadata lists, and the landed commit's own
(a squash commit's message holds its commits').
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+"
    r"(?:(?P<repo>[\w.-]+/[\w.-]+)?#(?P<n>\d+)\b"
    r"|https?://github\.com/(?P<urlrepo>[\w.-]+/[\w.-]+)/issues/(?P<urln>\d+)\b)",
    re.IGNORECASE,
)
_MERGE_PR = re.compile(r"^Merge pull request #(\d+)\b")
_SQUASH_PR = re.compile(r"\(#(\d+)\)\s*$")
_ISSUE_URL = re.compile(r"/issues/(\d+)$")
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})$")


def pr_number(subject: str, merge: bool) -> int | None:
    """The pull request a landed change names: "Merge pull request #N" on a merge, "(#N)" at the
    end of a squash or rebase commit's subject (GitHub's squash default).

    >>> pr_number("Merge pull request #12 from ann/fix", True), pr_number("Fix a crash (#345)", False)
    (12, 345)
    >>> pr_number("Revert \\"Fix a crash (#345)\\" (#350)", False), pr_number("Fix #3 again", False) is None
    (350, True)
    """
    m = _MERGE_PR.match(subject) if merge else None
    if m is None:
        m = _SQUASH_PR.search(subject)
    return int(m.group(1)) if m else None


def linked_issues(text: str, repo: str) -> list[tuple[str, int]]:
    """(repository, number) of each issue ``text`` closes, in order, without repeats.

    >>> linked_issues("Fixes #12, closes: acme/lib#3 and resolved https://github.com/acme/app/issues/9", "acme/app")
    [('acme/app', 12), ('acme/lib', 3), ('acme/app', 9)]
    >>> linked_issues("See #4; prefixes #5 are not keywords", "a/b")
    []
    """
    out: list[tuple[str, int]] = []
    for m in CLOSING.finditer(text or ""):
        ref = (m["repo"] or repo, int(m["n"])) if m["n"] else (m["urlrepo"], int(m["urln"]))
        if ref not in out:
            out.append(ref)
    return out


def parse_time(value: Any) -> dt.datetime | None:
    """GitHub's ISO 8601 time (``2024-05-01T12:00:00Z``) as an aware datetime; None when absent.
    Raises ValueError on anything else."""
    if value is None:
        return None
    if not isinstance(value, str) or not _ISO.match(value):
        raise ValueError(f"not an ISO 8601 time: {str(value)[:40]!r}")
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.timezone.utc)


@dataclass(frozen=True)
class Comment:
    created_at: dt.datetime
    body: str


@dataclass
class Issue:
    number: int
    title: str
    body: str
    comments: list[Comment] = field(default_factory=list)


@dataclass(frozen=True)
class Pull:
    number: int
    title: str
    body: str
    merge_commit_sha: str | None
    created_at: dt.datetime
    merged_at: dt.datetime | None
    first_commit_at: dt.datetime | None
    """The earliest author date of the pull request's commits, when the metadata lists them."""
    commit_messages: str = ""
    """The messages of those commits (closing keywords there link issues too, as SWE-bench reads them)."""


@dataclass
class Metadata:
    """One repository's pull requests (by merge commit) and issues (by number), and the records
    that could not be used: (record key, reason, detail)."""

    pulls: dict[str, Pull] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    bad: list[tuple[str, str, str]] = field(default_factory=list)


def _text(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{key} is {type(value).__name__}, not a string")
    return value


def _number(record: dict[str, Any]) -> int:
    n = record.get("number")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise ValueError(f"number is {n!r}, not a positive integer")
    return n


def _commits(commits: Any) -> tuple[dt.datetime | None, str]:
    """(the earliest author date, the messages) of a pull request's listed commits."""
    if commits is None:
        return None, ""
    if not isinstance(commits, list):
        raise ValueError("commits is not a list")
    times, messages = [], []
    for c in commits:
        inner = c.get("commit") if isinstance(c, dict) else None
        when = (inner.get("author") or {}).get("date") if isinstance(inner, dict) else None
        if when is None:
            raise ValueError("a commit without commit.author.date")
        times.append(parse_time(when))
        messages.append(_text(inner, "message"))
    return (min(times) if times else None), "\n".join(messages)


def _pull(record: dict[str, Any]) -> Pull:
    sha = record.get("merge_commit_sha")
    if sha is not None and not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40}", sha)):
        raise ValueError(f"merge_commit_sha is {str(sha)[:50]!r}, not a sha")
    created = parse_time(record.get("created_at"))
    if created is None:
        raise ValueError("no created_at")
    first, messages = _commits(record.get("commits"))
    return Pull(_number(record), _text(record, "title"), _text(record, "body"), sha, created,
                parse_time(record.get("merged_at")), first, messages)  # fmt: skip


def _comment(record: dict[str, Any]) -> Comment:
    when = parse_time(record.get("created_at"))
    if when is None:
        raise ValueError("comment without created_at")
    return Comment(when, _text(record, "body"))


def _issue(record: dict[str, Any]) -> Issue:
    comments = record.get("comments")
    listed = [_comment(c) if isinstance(c, dict) else _bad(c) for c in comments] if isinstance(comments, list) else []
    if comments is not None and not isinstance(comments, list | int):
        raise ValueError("comments is neither a list nor a count")
    return Issue(_number(record), _text(record, "title"), _text(record, "body"), listed)


def _bad(value: Any) -> Any:
    raise ValueError(f"a comment is {type(value).__name__}, not an object")


def kind_of(record: Any) -> str | None:
    """``pull``, ``issue_pull`` (a pull request seen through the issues API), ``issue``, ``comment``, or None."""
    if not isinstance(record, dict):
        return None
    if "merge_commit_sha" in record or "merged_at" in record:
        return "pull"
    if "issue_url" in record and "number" not in record:
        return "comment"
    if "pull_request" in record:
        return "issue_pull"
    if "number" in record and "title" in record:
        return "issue"
    return None


def build(records: list[tuple[str, Any]]) -> Metadata:
    """A repository's metadata from its records, each with a key naming where it was read (file and index)."""
    meta = Metadata()
    loose: list[tuple[int, Comment]] = []
    for key, record in records:
        try:
            _add(meta, loose, record)
        except (ValueError, TypeError, AttributeError) as err:
            meta.bad.append((key, "metadata_malformed", str(err)[:200]))
    for number, comment in loose:
        if number in meta.issues:
            meta.issues[number].comments.append(comment)
    for issue in meta.issues.values():
        issue.comments.sort(key=lambda c: c.created_at)
    return meta


def _add(meta: Metadata, loose: list[tuple[int, Comment]], record: Any) -> None:
    """One record into ``meta`` (a comment of the comments endpoint into ``loose``); raises on a malformed one."""
    kind = kind_of(record)
    if kind == "pull":
        pull = _pull(record)
        if pull.merged_at is not None and pull.merge_commit_sha is not None:
            meta.pulls[pull.merge_commit_sha] = pull
    elif kind == "issue":
        issue = _issue(record)
        old = meta.issues.get(issue.number)
        if old is not None:
            issue.comments = old.comments + issue.comments
        meta.issues[issue.number] = issue
    elif kind == "comment":
        m = _ISSUE_URL.search(str(record["issue_url"]))
        if m is None:
            raise ValueError(f"issue_url {str(record['issue_url'])[:80]!r} names no issue")
        loose.append((int(m.group(1)), _comment(record)))
    elif kind is None:
        raise ValueError("neither a pull request, an issue nor a comment")


def json_values(data: bytes) -> Iterator[Any]:
    """The JSON values of a file ``gh api --paginate`` wrote: arrays back to back (one per page),
    whitespace between; arrays are flattened, an object with ``pulls``/``issues``/``comments``
    lists yields their records. Raises ValueError when the bytes are not JSON.

    >>> list(json_values(b'[{"a": 1}]\\n[{"b": 2}]'))
    [{'a': 1}, {'b': 2}]
    """
    text = data.decode("utf-8")
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        value, pos = decoder.raw_decode(text, pos)
        if isinstance(value, list):
            yield from value
        elif isinstance(value, dict) and any(k in value for k in ("pulls", "issues", "comments")):
            for k in ("pulls", "issues", "comments"):
                yield from value.get(k) or []
        else:
            yield value


def repo_key(repo: str) -> str:
    return repo.replace("/", "__")


def _local_files(root: Path, repo: str) -> list[Path]:
    single = root / f"{repo_key(repo)}.json"
    folder = root / repo_key(repo)
    if single.is_file():
        return [single]
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _read_all(root: str, repo: str) -> list[tuple[str, bytes]]:
    """(name, bytes) of the repository's metadata files under ``root`` (a folder, or ``s3://`` prefix)."""
    if root.startswith("s3://"):
        from codecorpus.ingest import s3

        prefix = root.rstrip("/")
        keys = [k for k, _ in s3.list_objects(prefix, None)]
        key = repo_key(repo)
        wanted = [k for k in keys if k.endswith(f"/{key}.json")] or sorted(
            k for k in keys if f"/{key}/" in k and k.endswith(".json"))  # fmt: skip
        bucket = s3.split_url(prefix)[0]
        out = []
        for k in wanted:
            with s3.open_url(f"s3://{bucket}/{k}", None) as f:
                out.append((k.rsplit("/", 1)[-1], f.read()))
        return out
    return [(p.name, p.read_bytes()) for p in _local_files(Path(root), repo)]


def fingerprint(root: str, repo: str) -> list[Any]:
    """What the plan's hash holds of a repository's metadata: each file's name and sha256 (local),
    or key and size (S3), so that new metadata redoes the stages a rerun would otherwise skip."""
    if root.startswith("s3://"):
        from codecorpus.ingest import s3

        key = repo_key(repo)
        return [[k, size] for k, size in s3.list_objects(root.rstrip("/"), None)
                if k.endswith(f"/{key}.json") or (f"/{key}/" in k and k.endswith(".json"))]  # fmt: skip
    return [[p.name, hashlib.sha256(p.read_bytes()).hexdigest()] for p in _local_files(Path(root), repo)]


@functools.lru_cache(maxsize=4)
def load(root: str, repo: str) -> Metadata:
    """The metadata of ``repo`` under ``root`` (empty when it has none there); cached per process,
    since every slice of a long history asks for it."""
    records: list[tuple[str, Any]] = []
    bad: list[tuple[str, str, str]] = []
    for name, data in _read_all(root, repo):
        try:
            values = list(json_values(data))
        except (ValueError, UnicodeDecodeError) as err:
            bad.append((name, "metadata_malformed", f"not JSON: {str(err)[:150]}"))
            continue
        records += [(f"{name}#{i}", v) for i, v in enumerate(values)]
    meta = build(records)
    meta.bad = bad + meta.bad
    return meta


def hints(issue: Issue, before: dt.datetime | None) -> str:
    """SWE-bench's ``hints_text``: the issue's comments made before the pull request's first
    commit (before ``before``), oldest first, one blank line between."""
    if before is None:
        return ""
    return "\n\n".join(c.body.strip() for c in issue.comments if c.created_at < before and c.body.strip())


def issue_statement(issue: Issue) -> str:
    """SWE-bench's ``problem_statement``: the issue's title, then its body."""
    return f"{issue.title}\n{issue.body}".strip() + "\n"
