"""Per repository and extension: reconcile content labels that disagree.

Linguist decides a file alone. Where its rules run out (an extension it does not
list, or an ambiguous one whose heuristics matched nothing) the label comes from
content alone: Linguist's Bayesian classifier or magika. Those guesses scatter on
files of one format: numpy's 24 ``.f`` files are Fortran by the heuristics for 16,
and Fortran (5) or Forth (3) by the classifier. A person reads the set, not the file:
all of numpy's ``.f`` files are one language.

So the files of one repository that share such an extension vote:

- voters are rows whose extension is unlisted or ambiguous in Linguist and whose
  ``lang_method`` is content-based (``content``: a heuristic matched; ``classifier``;
  ``magika``; ``content_model``; or ``unknown``, content gave nothing);
- a group whose labels all agree is left alone;
- otherwise the most common label wins if it holds at least ``vote_min_share`` of the
  group's files and at least ``vote_min_files`` files, else the group is ``unknown``;
- the guesses (``classifier``, ``magika``, ``content_model``, ``unknown``) take the group's decision with
  ``lang_method = repo_extension_vote``. A matched heuristic is one of Linguist's rules,
  not a guess: it votes but keeps its own answer.

Ties go to the alphabetically first label, so the decision does not depend on row or
shard order. The counts are per (repository, extension, label): a few rows per
repository, so one reduce over the whole corpus is small.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pyarrow as pa

from codecorpus import schema
from codecorpus.langid import detect as detector

VOTE_METHOD = "repo_extension_vote"
VOTING_METHODS = frozenset({"content", "classifier", "magika", "content_model", schema.UNKNOWN})
REVISED_METHODS = frozenset({"classifier", "magika", "content_model", schema.UNKNOWN})
"""Methods whose label is a guess from content alone: the vote may overrule them."""

EXT = "ext"
FILES = "files"
COUNTS_SCHEMA = pa.schema([
    pa.field(schema.REPO, pa.string()), pa.field(EXT, pa.string()),
    pa.field(schema.LANG, pa.string()), pa.field(FILES, pa.int64()),
])
DECISIONS_SCHEMA = pa.schema([
    pa.field(schema.REPO, pa.string()), pa.field(EXT, pa.string()), pa.field(schema.LANG, pa.string()),
])


def voting_extension(path: str) -> str | None:
    """The extension a file votes under, or None when its extension decides alone.

    >>> voting_extension("a/abs.decTest"), voting_extension("a/x.f"), voting_extension("a/x.py")
    ('.dectest', '.f', None)
    >>> voting_extension("bin/tool") is None
    True
    """
    ext = detector.extension(path)
    if not ext or len(detector.extension_candidates(ext)) == 1:
        return None
    return ext


def count_labels(repos: Iterable[str], paths: Iterable[str], langs: Iterable[str],
                 methods: Iterable[str]) -> pa.Table:
    """(repo, ext, lang, files) over the voting rows of a table, sorted."""
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    for repo, path, lang, method in zip(repos, paths, langs, methods, strict=True):
        if method not in VOTING_METHODS:
            continue
        ext = voting_extension(path)
        if ext is not None:
            counts[(repo, ext, lang)] += 1
    keys = sorted(counts)
    return pa.table({
        schema.REPO: [k[0] for k in keys], EXT: [k[1] for k in keys],
        schema.LANG: [k[2] for k in keys], FILES: [counts[k] for k in keys],
    }, schema=COUNTS_SCHEMA)


def decide(counts: pa.Table, min_share: float, min_files: int) -> pa.Table:
    """One decision per (repo, ext) whose labels disagree: the majority, or ``unknown``.

    ``counts`` may hold one (repo, ext, lang) several times (one row per shard); they are summed.

    >>> c = pa.table({"repo": ["r"] * 3, "ext": [".f"] * 3, "lang": ["Fortran", "Forth", "Fortran"],
    ...               "files": [16, 3, 5]})
    >>> decide(c, 0.6, 3).to_pylist()
    [{'repo': 'r', 'ext': '.f', 'lang': 'Fortran'}]
    >>> decide(c, 0.9, 3).to_pylist()
    [{'repo': 'r', 'ext': '.f', 'lang': 'unknown'}]
    """
    groups: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cols = counts.select([schema.REPO, EXT, schema.LANG, FILES]).to_pydict()
    for repo, ext, lang, n in zip(*cols.values(), strict=True):
        groups[(repo, ext)][lang] += n
    rows = []
    for (repo, ext), labels in sorted(groups.items()):
        if len(labels) < 2:
            continue
        lang, n = min(labels.items(), key=lambda kv: (-kv[1], kv[0]))
        enough = n >= min_files and n >= min_share * sum(labels.values())
        rows.append((repo, ext, lang if enough else schema.UNKNOWN))
    return pa.table({
        schema.REPO: [r[0] for r in rows], EXT: [r[1] for r in rows], schema.LANG: [r[2] for r in rows],
    }, schema=DECISIONS_SCHEMA)


def revise(repos: list[str], paths: list[str], langs: list[str], methods: list[str],
           decisions: pa.Table) -> tuple[list[str], list[str], list[int]]:
    """Apply the decisions to one shard's rows: new langs, new methods, indices of rows revised.

    A revised row takes the group's language (or ``unknown``) and ``repo_extension_vote``,
    even where its own label already was the majority's: the vote decided it.
    """
    decided = {
        (repo, ext): lang
        for repo, ext, lang in zip(*decisions.select([schema.REPO, EXT, schema.LANG]).to_pydict().values(),
                                   strict=True)
    }
    if not decided:
        return langs, methods, []
    langs, methods, revised = list(langs), list(methods), []
    for i, (repo, path, method) in enumerate(zip(repos, paths, methods, strict=True)):
        if method not in REVISED_METHODS:
            continue
        lang = decided.get((repo, voting_extension(path) or ""))
        if lang is not None:
            langs[i], methods[i] = lang, VOTE_METHOD
            revised.append(i)
    return langs, methods, revised
