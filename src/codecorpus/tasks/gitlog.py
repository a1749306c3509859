"""One streamed ``git log`` over a slice of a walk, parsed record by record.

The commits body asks git for every commit of a slice in one process: git walks a
first-parent slice itself from the slice's first commit; a slice of a walk of every
parent (or what is left of a slice after a failure) is given on stdin::

    git log -z --raw -p -M --format=<LOG_FORMAT> <walk> --max-count=N <start> --
    git log -z --raw -p -M --format=<LOG_FORMAT> --no-walk=unsorted --stdin

and reads its output in 1 MiB chunks. A merge is shown as its diff against its first parent
(``--diff-merges=first-parent``: the change the merge landed on the mainline), binary files
as git's binary patches with full indexes (``--binary``), so that a task's patch applies.
Each commit's output starts with
:data:`MARKER`; the bytes up to the next marker are one record: the header
(sha, parents, author, dates, encoding, message: NUL-separated, ``%B`` cannot
hold a NUL), then ``--raw -z`` entries (modes, blob ids, status, paths), then
the patch text. Only one record is buffered at a
time; a record growing past ``max_record_bytes`` is not kept (only its first
64 KiB, for the sha) and comes out as :class:`Oversized`, so neither a long
history nor one huge commit is ever held in memory.

Why a marker instead of counting: patch text is free-form, but a line of a
unified diff begins with `` ``, ``+``, ``-``, ``\\`` or a header word, and the
marker starts with a NUL, which git only emits in a text diff for a file whose
first NUL lies past its 8000-byte binary sniff; the marker's sha check below
makes even that harmless in practice.

Why no ``--numstat``: git computes each file's diff once for the counts and again
for the patch, which costs it about a fifth of its log time on a history of small
commits; the counts are read from the patch instead (:func:`line_counts`).

Objects (before-images, root trees for the license) are read through one
``git cat-file --batch-command --buffer`` process per slice (``--batch`` on a git
before 2.36), requested a batch of commits at a time and answered one object at a
time, so a blob larger than the cap is skipped in chunks without being held.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import AnyStr, BinaryIO

from codecorpus.ingest.git import GIT_ENV

MARKER = b"\x00\x01codecorpus-commit\x02"
LOG_FORMAT = "%x00%x01codecorpus-commit%x02%H%x00%P%x00%an%x00%ae%x00%at%x00%ct%x00%e%x00%B%x00%x03"
_HEADER_END = b"\x00\x03\x00"
_READ_CHUNK = 1 << 20
_PIPE_READ = 1 << 16  # a pipe holds 64 KiB by default
_OVERSIZED_HEAD = 1 << 16
_SHA_FIELD = re.compile(rb"[0-9a-f]{40}\x00")  # a record's first field
ZERO_OID = "0" * 40

LOG_ARGS = (
    "-c", "core.quotePath=false", "-c", "log.showSignature=false", "log", "-z", "--no-abbrev", "-M", "--raw", "-p", "--binary", "--diff-merges=first-parent", "--no-color", "--no-ext-diff",
    "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/", "--encoding=UTF-8", f"--format={LOG_FORMAT}",
)  # fmt: skip

_STATUS = {"A": "add", "M": "modify", "D": "delete", "R": "rename", "C": "copy", "T": "mode"}


class UnparsableRecord(ValueError):
    """git's output for one commit does not have the expected layout."""


@dataclass(slots=True)
class RawFile:
    """One changed file as ``--raw`` describes it (paths still bytes)."""

    path: bytes
    old_path: bytes
    status: str
    old_mode: str
    new_mode: str
    old_oid: str
    new_oid: str


@dataclass(slots=True)
class RawCommit:
    """One commit record: header fields, changed files and the patch, all undecoded."""

    sha: str
    parents: list[str]
    author_name: bytes
    author_email: bytes
    author_time: int
    committer_time: int
    encoding: str
    message: bytes
    files: list[RawFile] = field(default_factory=list)
    patch: bytes = b""


@dataclass
class Oversized:
    """A record over ``max_record_bytes``: only its sha is known."""

    sha: str
    nbytes: int


def git_log_args(gitdir: str, walk: list[str] | None = None) -> list[str]:
    """The git log command: over ``walk`` (revision options and revisions), else over the commits on stdin."""
    revisions = [*walk, "--"] if walk is not None else ["--no-walk=unsorted", "--stdin"]
    return ["git", f"--git-dir={gitdir}", *LOG_ARGS, *revisions]


def split_records(stream: BinaryIO, max_record_bytes: int) -> Iterator[bytes | Oversized]:
    """Records of a ``git log`` stream (marker stripped); oversized ones as :class:`Oversized`.

    >>> import io
    >>> out = MARKER + b"a" * 40 + b"\\x00x" + MARKER + b"b" * 40 + b"\\x00y"
    >>> [r[:41] for r in split_records(io.BytesIO(out), 1000)] == [b"a" * 40 + b"\\x00", b"b" * 40 + b"\\x00"]
    True
    """
    buf = bytearray()
    scan_from = len(MARKER)
    dropped = 0  # bytes of the current record thrown away (oversized)
    head = b""
    while True:
        chunk = stream.read(_READ_CHUNK)
        if chunk:
            buf += chunk
        while True:
            at = _next_marker(buf, scan_from)
            if at < 0:
                break
            if dropped:
                yield Oversized(_sha_of(head), dropped + at)
                dropped, head = 0, b""
            elif buf.startswith(MARKER):
                yield bytes(buf[len(MARKER) : at])
            del buf[:at]
            scan_from = len(MARKER)
        if not chunk:
            break
        if dropped or len(buf) > max_record_bytes:
            if not dropped:
                head = bytes(buf[:_OVERSIZED_HEAD])
            keep = len(MARKER) - 1
            dropped += len(buf) - keep
            del buf[: len(buf) - keep]
            scan_from = 0
        else:
            scan_from = max(len(MARKER), len(buf) - len(MARKER) + 1)
    if dropped:
        yield Oversized(_sha_of(head), dropped + len(buf))
    elif buf.startswith(MARKER):
        yield bytes(buf[len(MARKER) :])


def _next_marker(buf: bytearray, start: int) -> int:
    """Position of the next marker that is followed by a sha (a genuine record start), or -1.
    A marker too near the end of the buffer for its sha to be seen counts as genuine."""
    at = buf.find(MARKER, start)
    while at >= 0:
        sha_at = at + len(MARKER)
        if len(buf) - sha_at < 41 or _SHA_FIELD.match(buf, sha_at):
            return at
        at = buf.find(MARKER, at + 1)
    return -1


def _sha_of(head: bytes) -> str:
    body = head[len(MARKER) :] if head.startswith(MARKER) else head
    return body.split(b"\x00", 1)[0].decode("ascii", "replace")


def parse_record(record: bytes) -> RawCommit:
    """Header, files and patch of one record (see the module docstring for the layout)."""
    end = record.find(_HEADER_END)
    if end < 0:
        raise UnparsableRecord("no end of header")
    fields = record[:end].split(b"\x00")
    if len(fields) != 8:
        raise UnparsableRecord(f"{len(fields)} header fields, expected 8")
    sha, parents, an, ae, at, ct, enc, message = fields
    commit = RawCommit(
        sha.decode("ascii"), parents.decode("ascii").split(), an, ae, int(at or 0), int(ct or 0),
        enc.decode("ascii", "replace"), message,
    )
    start = end + len(_HEADER_END)
    if record.startswith(b"\n", start):
        start += 1
    if start < len(record):
        commit.files, pos = _parse_raw(record, start)
        commit.patch = record[pos:]
    return commit


_TWO_PATHS = frozenset("RC")  # a rename or copy names its old path, then its new one


def _parse_raw(data: bytes, pos: int) -> tuple[list[RawFile], int]:
    """The changed files of the ``--raw -z`` section at ``pos`` of a record, and where its patch starts.

    The section is NUL-separated tokens: per file, ``:old_mode new_mode old_oid new_oid status``
    and its path (two paths for a rename or copy, whose status carries a score); an empty token
    (two NULs: a path is never empty) ends it. One split of the section, not a match per entry.
    """
    files: list[RawFile] = []
    if data.startswith(b":", pos):
        end = data.find(b"\x00\x00", pos)
        if end < 0:
            end = len(data) - 1 if data.endswith(b"\x00") else len(data)
        tokens = data[pos:end].split(b"\x00")
        i = 0
        try:
            while i < len(tokens):
                old_mode, new_mode, old_oid, new_oid, status = tokens[i][1:].decode("ascii").split(" ")
                kind = status[:1]
                if kind in _TWO_PATHS:
                    files.append(RawFile(tokens[i + 2], tokens[i + 1], _STATUS[kind], old_mode, new_mode, old_oid, new_oid))
                    i += 3
                else:
                    path = tokens[i + 1]
                    files.append(RawFile(path, path, _STATUS.get(kind, "modify"), old_mode, new_mode, old_oid, new_oid))
                    i += 2
        except (ValueError, IndexError, UnicodeDecodeError):
            raise UnparsableRecord(f"raw entry {tokens[i][:80]!r}") from None
        pos = min(end + 2, len(data))
    if pos < len(data) and not data.startswith(b"diff --git ", pos):
        raise UnparsableRecord(f"unexpected bytes after the raw entries at {pos}")
    return files, pos


def line_counts(section: str) -> tuple[int, int, bool]:
    """(lines added, lines deleted, binary) of one file's patch, as ``--numstat`` counts them.

    A hunk's lines start with ``+``, ``-``, `` `` or ``\\``, and the header lines above the
    first hunk (``--- a/x``, ``+++ b/x``) are not counted; git marks a binary file's patch
    with a ``GIT binary patch`` (``--binary``, which a task's patch needs to apply) or a
    ``Binary files ... differ`` line, and no hunk.

    >>> line_counts("diff --git a/x b/x\\n--- a/x\\n+++ b/x\\n@@ -1 +1,2 @@\\n-a\\n+b\\n+--c\\n")
    (2, 1, False)
    >>> line_counts("diff --git a/x b/x\\nindex 1..2 100644\\nBinary files a/x and b/x differ\\n")
    (0, 0, True)
    >>> line_counts("diff --git a/x b/x\\nindex 1..2 100644\\nGIT binary patch\\nliteral 3\\nKcmZ?\\n")
    (0, 0, True)
    """
    hunks = section.find("\n@@ ")
    if hunks < 0:
        return 0, 0, "\nGIT binary patch\n" in section or "\nBinary files " in section
    return section.count("\n+", hunks), section.count("\n-", hunks), False


def patch_sections(patch: AnyStr) -> list[AnyStr]:
    """The patch of each file (``diff --git`` header to the next), in git's file order; bytes or text.
    Bytes before the first header belong to no file.

    >>> patch_sections(b"diff --git a/x b/x\\n+1\\ndiff --git a/y b/y\\n-2\\n")
    [b'diff --git a/x b/x\\n+1\\n', b'diff --git a/y b/y\\n-2\\n']
    >>> patch_sections("diff --git a/x b/x\\n+1\\n")
    ['diff --git a/x b/x\\n+1\\n']
    """
    header, sep, nl = ("diff --git ", "\ndiff --git ", "\n") if isinstance(patch, str) else (b"diff --git ", b"\ndiff --git ", b"\n")
    parts = patch.split(sep)  # one pass; each part after the first lost its header and the newline before it
    last = parts.pop()
    if not parts:
        return [last] if last.startswith(header) else []
    first = [parts[0] + nl] if parts[0].startswith(header) else []
    return [*first, *[header + p + nl for p in parts[1:]], header + last]


class LogFailed(RuntimeError):
    """git log exited with an error (a corrupt or missing object); ``stderr`` says which."""

    def __init__(self, stderr: str) -> None:
        super().__init__(stderr)
        self.stderr = stderr


def stream_log(
    gitdir: str, max_record_bytes: int, *, shas: list[str] | None = None, walk: list[str] | None = None
) -> Iterator[bytes | Oversized]:
    """Records of ``shas`` in order, or of the commits of ``walk`` (``git log``'s revision arguments) in
    walk order; raises :class:`LogFailed` after the last record git wrote."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            git_log_args(gitdir, walk), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=GIT_ENV
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write("".join(f"{s}\n" for s in shas or ()).encode())  # git reads all of stdin first
            proc.stdin.close()
            yield from split_records(proc.stdout, max_record_bytes)
        finally:
            proc.stdout.close()
            rc = proc.wait()
        if rc != 0:
            err.seek(0)
            raise LogFailed(err.read().decode("utf-8", "replace").strip()[:500])


_BUFFERED = ("--batch-command", "--buffer")
_PER_OBJECT = ("--batch",)


@functools.lru_cache(maxsize=1)
def batch_command() -> bool:
    """Whether this git's ``cat-file`` has ``--batch-command`` (git 2.36 and later)."""
    out = subprocess.run(["git", "version"], capture_output=True, env=GIT_ENV, check=False).stdout
    m = re.search(rb"(\d+)\.(\d+)", out)
    return m is not None and (int(m[1]), int(m[2])) >= (2, 36)


class ObjectReader:
    """One ``git cat-file`` process: objects read one at a time, large ones skipped in chunks.

    With ``--batch-command --buffer`` git holds its answers to a group of requests until the
    group's ``flush`` and writes them in large writes; plain ``--batch`` (git before 2.36)
    writes and flushes each object on its own, a write and a wake-up of this process per object
    (about 5% of the walk's CPU on a history of small commits). The answers are parsed
    from a buffer filled by large reads of the pipe (one read takes every answer git has written
    so far), not by a readline and two reads per object.
    """

    def __init__(self, gitdir: str) -> None:
        self._buffered = batch_command()
        self.proc = subprocess.Popen(
            ["git", f"--git-dir={gitdir}", "cat-file", *(_BUFFERED if self._buffered else _PER_OBJECT)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=GIT_ENV,
        )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()  # read with os.read only: its buffered reader stays empty
        self._buf = b""
        self._pos = 0

    def iter_many(self, names: list[str], cap: int) -> Iterator[tuple[str, bytes | None, int]]:
        """(type or "missing", content or None when larger than ``cap``, size) of each of ``names``,
        in order, requested in groups (one wake-up of git per group, not per object). Consume
        it to the end before the next request.

        A group is small enough for the pipe buffer, so the write never waits on git while git
        waits on us to read its answers; answers are yielded as they are read, so only one
        object is held at a time.
        """
        stdin = self.proc.stdin
        assert stdin is not None
        for start in range(0, len(names), 256):
            group = names[start : start + 256]
            if self._buffered:
                stdin.write("".join(f"contents {n}\n" for n in group).encode() + b"flush\n")
            else:
                stdin.write("".join(f"{n}\n" for n in group).encode())
            stdin.flush()
            for _ in group:
                yield self._answer(cap)

    def _answer(self, cap: int) -> tuple[str, bytes | None, int]:
        end = self._buf.find(b"\n", self._pos)
        while end < 0:
            if not self._fill(len(self._buf) - self._pos + 1):
                return "missing", None, 0
            end = self._buf.find(b"\n", self._pos)
        header = self._buf[self._pos : end].split()
        self._pos = end + 1
        if len(header) != 3:
            return "missing", None, 0
        kind, size = header[1].decode(), int(header[2])
        if size > cap:
            self._skip(size + 1)
            return kind, None, size
        if len(self._buf) - self._pos < size + 1:
            self._fill(size + 1)
        data = self._buf[self._pos : self._pos + size]
        self._pos += size + 1
        return kind, data, size

    def _fill(self, want: int) -> bool:
        """Read until ``want`` unread bytes are buffered; False at the end of git's output."""
        parts = [self._buf[self._pos :]]
        have = len(parts[0])
        while have < want:
            chunk = os.read(self._fd, max(want - have, _PIPE_READ))
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
        self._buf, self._pos = b"".join(parts), 0
        return have >= want

    def _skip(self, n: int) -> None:
        """Pass over ``n`` bytes of git's output, holding at most a chunk of them."""
        have = len(self._buf) - self._pos
        if n <= have:
            self._pos += n
            return
        n -= have
        self._buf, self._pos = b"", 0
        while n > 0:
            chunk = os.read(self._fd, min(n, _READ_CHUNK))
            if not chunk:
                break
            n -= len(chunk)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc.wait()

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tree_entries(data: bytes) -> list[tuple[str, bytes, str]]:
    """(mode, name, object id) of a raw tree object (``mode SP name NUL 20-byte id``)."""
    out, pos = [], 0
    while pos < len(data):
        sp = data.index(b" ", pos)
        nul = data.index(b"\x00", sp)
        out.append((data[pos:sp].decode("ascii"), data[sp + 1 : nul], data[nul + 1 : nul + 21].hex()))
        pos = nul + 21
    return out
