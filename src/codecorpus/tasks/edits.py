"""Editing SFT examples from commits, as canonical trace rows the SFT renderer consumes.

One commit becomes one conversation (``schema.TRACE_SCHEMA``, format ``edit``):

- system (optional, never trained on): the assistant's role;
- user: the commit message, then the before-image of every changed code file
  with its path, then what to reply with;
- assistant (the only trained turn): the change, either the unified diff of
  the code files (``target: diff``) or every changed file's whole after-image
  (``target: files``; a deleted file says so).

Files ingest excludes (binaries, lockfiles, vendored, generated) are neither
shown nor asked for; they are listed in the row's metadata. After-images are
the before-images with the commit's hunks applied (:func:`apply_patch`), so no
repository is read here. Drops: ``before_missing`` (a changed file's
before-image was over the commits cap, so the prompt would be incomplete),
``no_code_change`` (only excluded files changed), ``patch_mismatch`` (a hunk
does not apply to its before-image: a broken invariant of the commits row,
counted rather than raised); in the pipeline (:func:`run_training`) also
``eval_holdout``: landed on the mainline after ``eval_after`` (``landed_at``), so kept out of training.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pyarrow as pa

from codecorpus import schema
from codecorpus.sft.normalize import message, trace_content_hash
from codecorpus.stage import MapResult
from codecorpus.tasks import columns as C
from codecorpus.tasks import gitlog
from codecorpus.tasks.config import EditSetConfig
from codecorpus.tasks.swebench import instance_id, time_split

STAGE = "edit_set"
FORMAT = schema.EDIT_TRACE_FORMAT
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
ASK = {
    "diff": "Reply with the change as a unified diff (git format) of the files above.",
    "files": "Reply with the whole new content of every file the change touches.",
}


class PatchMismatch(ValueError):
    """A hunk's context or removed lines are not in the before-image."""


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` (only ``\\n`` ends a line, as in a diff).

    >>> split_lines("a\\r\\nb\\x0cc\\nlast")
    ['a\\r\\n', 'b\\x0cc\\n', 'last']
    """
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    return [*out, parts[-1]] if parts[-1] else out


def apply_patch(before: str, section: str) -> str:
    """The after-image: ``before`` with the hunks of one file's unified diff applied.

    >>> apply_patch("a\\nb\\nc\\n", "diff --git a/x b/x\\n--- a/x\\n+++ b/x\\n@@ -2 +2,2 @@\\n-b\\n+B\\n+b2\\n")
    'a\\nB\\nb2\\nc\\n'
    """
    src = split_lines(before)
    out: list[str] = []
    pos = 0
    lines = split_lines(section)
    i = next((k for k, line in enumerate(lines) if line.startswith("@@ ")), len(lines))
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if m is None:
            raise PatchMismatch(f"not a hunk header: {lines[i][:80]!r}")
        old_start, old_len = int(m.group(1)), int(m.group(2) or 1)
        start = old_start - 1 if old_len else old_start
        if start < pos:
            raise PatchMismatch(f"hunk at line {old_start} overlaps the previous one")
        out += src[pos:start]
        pos, i = start, i + 1
        last = ""
        while i < len(lines) and not lines[i].startswith("@@ "):
            pos, last = _apply_line(lines[i], src, out, pos, last)
            i += 1
    return "".join(out + src[pos:])


def _apply_line(line: str, src: list[str], out: list[str], pos: int, last: str) -> tuple[int, str]:
    op, body = line[:1], line[1:]
    if op == "\\":  # "\ No newline at end of file" after a line of the new side
        if last in (" ", "+") and out:
            out[-1] = out[-1].removesuffix("\n")
        return pos, last
    if op in (" ", "-"):
        if pos >= len(src) or src[pos].removesuffix("\n") != body.removesuffix("\n"):
            raise PatchMismatch(f"line {pos + 1} is not {body[:60]!r}")
        if op == " ":
            out.append(src[pos])
        return pos + 1, op
    if op == "+":
        out.append(body)
        return pos, op
    raise PatchMismatch(f"unexpected diff line {line[:60]!r}")


def fence(text: str) -> str:
    """A Markdown code fence longer than any backtick run in ``text``."""
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    return "`" * (longest + 1)


def _file_block(path: str, text: str) -> str:
    f = fence(text)
    return f"### {path}\n{f}\n{text}{'' if text.endswith(chr(10)) or not text else chr(10)}{f}\n"


def edit_prompt(subject: str, body: str, before: list[dict[str, str]], new_files: list[str], target: str) -> str:
    parts = [f"{subject}\n\n{body}".strip(), ""]
    if before:
        parts += ["The files before the change:", ""] + [_file_block(b["path"], b["text"]) for b in before]
    if new_files:
        parts += ["New files to create: " + ", ".join(new_files), ""]
    parts.append(ASK[target])
    return "\n".join(parts)


def _code_changes(row: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    sections = gitlog.patch_sections(row[C.DIFF])
    return [(f, s) for f, s in zip(row[C.FILES], sections, strict=True) if f["excluded"] is None]


def edit_example(row: dict[str, Any], cfg: EditSetConfig) -> tuple[list[dict[str, Any]] | None, str, str | None]:
    """(messages, "", None) of one commit row, or (None, reason, detail)."""
    changes = _code_changes(row)
    if not changes:
        return None, "no_code_change", None
    before = {b["path"]: b["text"] for b in row[C.BEFORE]}
    needed = [f["old_path"] for f, _ in changes if f["status"] != "add"]
    missing = [p for p in needed if p not in before]
    if missing:
        return None, "before_missing", ", ".join(missing)[:300]
    shown = [{"path": p, "text": before[p]} for p in dict.fromkeys(needed)]
    new_files = [f["path"] for f, _ in changes if f["status"] == "add"]
    if cfg.target == "diff":
        target = "".join(s for _, s in changes)
    else:
        try:
            target = "".join(_after_block(f, s, before) for f, s in changes)
        except PatchMismatch as err:
            return None, "patch_mismatch", str(err)[:300]
    prompt = edit_prompt(row[C.SUBJECT], row[C.BODY], shown, new_files, cfg.target)
    msgs = ([message("system", cfg.system_prompt)] if cfg.system_prompt else [])
    return [*msgs, message("user", prompt), message("assistant", target)], "", None


def _after_block(f: dict[str, Any], section: str, before: dict[str, str]) -> str:
    if f["status"] == "delete":
        return f"### {f['path']}\n(deleted)\n"
    return _file_block(f["path"], apply_patch(before.get(f["old_path"], "") if f["status"] != "add" else "", section))


def after_files(row: dict[str, Any]) -> dict[str, str | None]:
    """{path: after-image, or None when deleted} of the changed code files of one commit row."""
    before = {b["path"]: b["text"] for b in row[C.BEFORE]}
    out: dict[str, str | None] = {}
    for f, section in _code_changes(row):
        if f["status"] == "delete":
            out[f["path"]] = None
        else:
            out[f["path"]] = apply_patch(before.get(f["old_path"], "") if f["status"] != "add" else "", section)
    return out


def run(table: pa.Table, cfg: EditSetConfig) -> MapResult:
    """Commit rows -> canonical trace rows (``schema.TRACE_SCHEMA``) of editing examples."""
    rows, drops = [], []
    for i, row in enumerate(table.to_pylist()):
        msgs, reason, detail = edit_example(row, cfg)
        if msgs is None:
            drops.append((i, reason, detail))
            continue
        meta = {"sha": row[C.SHA], "license": row[schema.LICENSE], "target": cfg.target,
                "excluded_files": [f["path"] for f in row[C.FILES] if f["excluded"] is not None]}  # fmt: skip
        rows.append({
            schema.ID: schema.document_id(row[schema.SOURCE], row[schema.REPO], row[C.SHA], f"edit-{cfg.target}"),
            schema.SOURCE: row[schema.SOURCE], schema.REPO: row[schema.REPO], schema.PATH: row[C.SHA],
            schema.LANG: row[schema.LANG], schema.BYTES: sum(len(m["content"].encode()) for m in msgs),
            schema.TRACE_FORMAT: FORMAT, schema.TRACE_TASK_ID: instance_id(row[schema.REPO], row[C.SHA]),
            schema.TRACE_OUTCOME: schema.UNKNOWN, schema.TRACE_MESSAGES: msgs, schema.TRACE_TOOLS: None,
            schema.TRACE_METADATA: json.dumps(meta, sort_keys=True, ensure_ascii=False),
            schema.CONTENT_HASH: trace_content_hash(msgs, None),
        })  # fmt: skip
    out = pa.Table.from_pylist(rows, schema=schema.TRACE_SCHEMA)
    dropped = schema.drops_from_rows(
        table.take(pa.array([d[0] for d in drops], pa.int64())), STAGE, [d[1] for d in drops],
        detail=[d[2] for d in drops],
    )
    # a commit's bytes are its diff's, an example's its messages': the conversion changes them
    converted = sum(table.column(schema.BYTES).to_pylist()) - sum(dropped.column(schema.BYTES).to_pylist())
    return MapResult(out, dropped, bytes_changed=sum(r[schema.BYTES] for r in rows) - converted)


def run_training(table: pa.Table, cfg: EditSetConfig, eval_after: dt.datetime | None) -> MapResult:
    """:func:`run` on the commits that reached the mainline up to ``eval_after`` (``landed_at``: a
    pull request's own commits by their merge's time, so no commit of an evaluation task is a
    training example); later ones are dropped as ``eval_holdout``."""
    train, held = time_split(table, eval_after, C.LANDED_AT)
    result = run(train, cfg)
    holdout = schema.drops_from_rows(held, STAGE, "eval_holdout", detail=[f"landed after {eval_after}"] * held.num_rows)
    return MapResult(result.table, pa.concat_tables([result.dropped, holdout]), result.counters,
                     bytes_changed=result.bytes_changed)
