"""The commit_filters stage: CommitPackFT's rules as typed score columns and thresholds.

CommitPackFT (OctoPack, Muennighoff et al. 2023) kept commits whose message reads
like an instruction: long enough, starting with an imperative verb, not
boilerplate ("Merge branch", "Bump version", "Update README"), changing one file
of an allowed language under a permissive license, with a small code-before.
Each rule here is a score column (:data:`codecorpus.tasks.columns.STAGE_COLUMNS`)
and a threshold from :class:`~codecorpus.tasks.config.CommitFiltersConfig`.
``annotate`` adds the columns and drops nothing; ``filter`` drops a row on the
first rule it fails, in :data:`RULES` order, with the score and threshold in the
drop log. These rules are the edit set's alone: a merge (a whole pull request, which the
commits source shows as one change against its first parent) is dropped as ``merge``, since
the edit set wants small commits; the task candidates read the commits source directly.
URLs and issue references are always flagged and dropped only when asked.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.dedup.keep import PERMISSIVE_LICENSES
from codecorpus.stage import MapResult
from codecorpus.tasks import columns as C
from codecorpus.tasks.config import CommitFiltersConfig

STAGE = "commit_filters"

_VERBS = """add adjust allow append apply avoid break bring build bump call catch change check clarify clean cleanup
    clear close collapse combine comment compute configure convert copy correct create declare decouple default
    define delete deprecate detect disable display document drop dump emit enable enforce ensure escape exclude
    expand expose extend extract factor fetch filter finish fix flag flatten force format generate get guard
    handle hide hook ignore implement import improve include increase initialize inline insert install
    introduce invert keep let limit load lock log lower make mark merge migrate minimize modify move normalize
    open optimize override parse pass patch pin polish port prefer prepare prevent print process protect
    provide publish pull push put raise read rebuild record reduce refactor reformat register reimplement
    release reload remove rename reorder reorganize repair replace require reset resolve restore restrict
    restructure retry return reuse revert review rework rewrite run save schedule select send separate
    serialize set shorten show silence simplify skip sort specify speed split squash standardize start stop
    store strip support switch sync tidy track translate trim truncate try tune turn tweak unify unpin update
    upgrade use validate verify warn wrap write"""
IMPERATIVE_VERBS = frozenset(_VERBS.split())
"""First words that make an imperative subject (CommitPackFT used a verb list of this kind)."""

_PREFIX = re.compile(r"^(?:\[[^\]]{0,40}\]\s*|[\w-]{1,20}(?:\([^)]{0,40}\))?!?:\s+)+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
BOILERPLATE = (
    ("merge", re.compile(r"^merge\b(?: (?:branch|pull request|remote|tag|commit)\b|\s*$)", re.IGNORECASE)),
    ("bump_version", re.compile(
        r"^(?:bump(?:ed)?\b.*\bversion|(?:release|version|bump)\s+v?\d+(?:\.\d+)+\S*\s*$|v?\d+(?:\.\d+)+\s*$)",
        re.IGNORECASE)),
    ("update_readme", re.compile(r"^(?:update|edit|modify)d?\s+(?:the\s+)?readme(?:\.\w+)?\s*$", re.IGNORECASE)),
    ("initial_commit", re.compile(r"^(?:initial|first) commit\s*$", re.IGNORECASE)),
    ("wip", re.compile(r"^(?:wip|tmp|temp|todo|fixup!|squash!)\b", re.IGNORECASE)),
)  # fmt: skip
_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+\.\w+", re.IGNORECASE)
_ISSUE = re.compile(r"(?<![\w&])#\d+\b|\bGH-\d+\b|\b[A-Z][A-Z0-9]+-\d+\b")

RULES = (
    "merge", "message_too_short", "message_too_long", "message_too_few_words", "message_too_many_words",
    "not_imperative", "boilerplate", "has_url", "issue_refs", "too_many_files", "code_before_too_large",
    "lang_not_allowed", "license_not_allowed",
)  # fmt: skip


def first_word(subject: str) -> str:
    """The subject's first word after tags (``[core]``) and conventional-commit types (``fix(x):``).

    >>> first_word("fix(parser): Handle empty input"), first_word("[docs] Added a note")
    ('handle', 'added')
    """
    m = _WORD.search(_PREFIX.sub("", subject.strip()))
    return m.group(0).lower() if m else ""


def boilerplate_kind(subject: str) -> str | None:
    """Which boilerplate the subject is, or None.

    >>> boilerplate_kind("Merge branch 'main' into dev"), boilerplate_kind("Bump version to 1.2.3")
    ('merge', 'bump_version')
    >>> boilerplate_kind("Update README.md"), boilerplate_kind("Fix crash on empty input") is None
    ('update_readme', True)
    """
    s = subject.strip()
    return next((kind for kind, pattern in BOILERPLATE if pattern.search(s)), None)


def message_scores(subject: str, body: str) -> dict[str, Any]:
    message = f"{subject}\n\n{body}".strip()
    return {
        C.MESSAGE_CHARS: len(message),
        C.MESSAGE_WORDS: len(_WORD.findall(message)),
        C.IMPERATIVE: first_word(subject) in IMPERATIVE_VERBS,
        C.BOILERPLATE: boilerplate_kind(subject),
        C.HAS_URL: bool(_URL.search(message)),
        C.ISSUE_REFS: len(_ISSUE.findall(message)),
    }


def allowed_licenses(cfg: CommitFiltersConfig) -> frozenset[str]:
    return frozenset(s.lower() for s in cfg.licenses) if cfg.licenses is not None else PERMISSIVE_LICENSES


def score_table(table: pa.Table, cfg: CommitFiltersConfig) -> pa.Table:
    """The table with every score column added."""
    subjects = table.column(C.SUBJECT).to_pylist()
    bodies = table.column(C.BODY).to_pylist()
    scores = [message_scores(s, b) for s, b in zip(subjects, bodies, strict=True)]
    allowed = allowed_licenses(cfg)
    out = table
    for name in (C.MESSAGE_CHARS, C.MESSAGE_WORDS, C.IMPERATIVE, C.BOILERPLATE, C.HAS_URL, C.ISSUE_REFS):
        out = C.with_column(out, name, [s[name] for s in scores])
    files = table.column(C.FILES).to_pylist()
    out = C.with_column(out, C.FILES_CHANGED, [len(f) for f in files])
    before = table.column(C.BEFORE).to_pylist()
    out = C.with_column(out, C.CODE_BEFORE_BYTES, [sum(len(b["text"].encode()) for b in bs) for bs in before])
    licenses = table.column(schema.LICENSE).to_pylist()
    return C.with_column(out, C.LICENSE_PERMISSIVE, [lic.lower() in allowed for lic in licenses])


def _failed_rule(row: dict[str, Any], cfg: CommitFiltersConfig) -> tuple[str, float | None, float | None] | None:
    """(rule, score, threshold) of the first rule the row fails, or None."""
    chars, words = row[C.MESSAGE_CHARS], row[C.MESSAGE_WORDS]
    checks = (
        ("merge", row["_parents"] > 1, row["_parents"], 1),
        ("message_too_short", chars < cfg.min_message_chars, chars, cfg.min_message_chars),
        ("message_too_long", chars > cfg.max_message_chars, chars, cfg.max_message_chars),
        ("message_too_few_words", words < cfg.min_message_words, words, cfg.min_message_words),
        ("message_too_many_words", words > cfg.max_message_words, words, cfg.max_message_words),
        ("not_imperative", cfg.require_imperative and not row[C.IMPERATIVE], None, None),
        ("boilerplate", cfg.drop_boilerplate and row[C.BOILERPLATE] is not None, None, None),
        ("has_url", cfg.drop_urls and row[C.HAS_URL], None, None),
        ("issue_refs", cfg.drop_issue_refs and row[C.ISSUE_REFS] > 0, row[C.ISSUE_REFS], 0),
        ("too_many_files", row[C.FILES_CHANGED] > cfg.max_files_changed, row[C.FILES_CHANGED], cfg.max_files_changed),
        ("code_before_too_large", row[C.CODE_BEFORE_BYTES] > cfg.max_code_before_bytes, row[C.CODE_BEFORE_BYTES],
         cfg.max_code_before_bytes),
        ("lang_not_allowed", cfg.langs is not None and row[schema.LANG] not in cfg.langs, None, None),
        ("license_not_allowed", cfg.permissive_only and not row[C.LICENSE_PERMISSIVE], None, None),
    )  # fmt: skip
    return next(((name, score, threshold) for name, failed, score, threshold in checks if failed), None)


def run(table: pa.Table, cfg: CommitFiltersConfig) -> MapResult:
    """Score every commit; in filter mode drop each on its first failed rule."""
    scored = score_table(table, cfg)
    if cfg.mode == "annotate":
        return MapResult(scored)
    wanted = [C.MESSAGE_CHARS, C.MESSAGE_WORDS, C.IMPERATIVE, C.BOILERPLATE, C.HAS_URL, C.ISSUE_REFS,
              C.FILES_CHANGED, C.CODE_BEFORE_BYTES, C.LICENSE_PERMISSIVE, schema.LANG]  # fmt: skip
    keep, drops = [], []
    parents = pc.list_value_length(scored.column(C.PARENTS)).to_pylist()
    for i, row in enumerate(scored.select(wanted).to_pylist()):
        row["_parents"] = parents[i]
        failed = _failed_rule(row, cfg)
        if failed is None:
            keep.append(i)
        else:
            drops.append((i, *failed))
    dropped = schema.drops_from_rows(
        scored.take(pa.array([d[0] for d in drops], pa.int64())), STAGE, [d[1] for d in drops],
        detail=[_detail(scored, d[0], d[1]) for d in drops],
        score=[None if d[2] is None else float(d[2]) for d in drops],
        threshold=[None if d[3] is None else float(d[3]) for d in drops],
    )
    return MapResult(scored.take(pa.array(keep, pa.int64())), dropped)


def _detail(table: pa.Table, i: int, rule: str) -> str | None:
    if rule in ("not_imperative", "boilerplate", "has_url"):
        return table.column(C.SUBJECT)[i].as_py()[:200]
    if rule == "lang_not_allowed":
        return table.column(schema.LANG)[i].as_py()
    if rule == "license_not_allowed":
        return table.column(schema.LICENSE)[i].as_py()
    return None
