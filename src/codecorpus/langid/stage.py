"""The langid annotator: sets ``lang`` and ``kind`` and adds ``lang_method``; drops nothing.

Rules, first match wins (each match names its ``lang_method``):

1. ``filename``: exact base names (``Makefile``, ``Dockerfile``, ``BUILD.bazel``, ``.bashrc``);
2. ``content``: ``.h`` and ``.m``, decided by markers in the text;
3. ``extension``: the longest known extension (``.gradle.kts`` before ``.kts``);
4. ``shebang``: the ``#!`` line, only when the name decided nothing (and ``cfg.shebang``);
5. ``unknown``: ``lang`` becomes ``"unknown"``.

``kind`` comes from the language's table row. For an unknown language the row keeps
the kind ingest gave it: langid has no better evidence, and overwriting it with a
guess would hide ingest's own (e.g. docs sources) choice.

Only the ``path`` column is read for every row; ``text`` is read just for the rows
the name left open (``.h``/``.m`` and extensionless or unknown names), so a shard
of ordinary source files never materialises its texts as Python strings.
"""

from __future__ import annotations

import pyarrow as pa

from codecorpus import schema
from codecorpus.config import LangidConfig
from codecorpus.langid import languages
from codecorpus.stage import MapResult, with_column

FILENAME, EXTENSION, CONTENT, SHEBANG = "filename", "extension", "content", "shebang"
assert (FILENAME, EXTENSION, CONTENT, SHEBANG, schema.UNKNOWN) == schema.LANG_METHODS

_FIRST_LINE_CHARS = 1024
"""A shebang line longer than this is not one we could use anyway."""


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _by_name(basename: str) -> tuple[str, str] | None:
    """(lang, method) from the file name alone; None when the text must decide."""
    lang = languages.language_from_filename(basename)
    if lang is not None:
        return lang, FILENAME
    if languages.content_checked_extension(basename) is not None:
        return None
    lang = languages.language_from_extension(basename)
    if lang is not None:
        return lang, EXTENSION
    return None


def _by_text(basename: str, text: str, cfg: LangidConfig) -> tuple[str, str]:
    """(lang, method) for a name :func:`_by_name` left open."""
    ext = languages.content_checked_extension(basename)
    if ext is not None:
        return languages.resolve_by_content(ext, text), CONTENT
    if cfg.shebang:
        first_line = text[:_FIRST_LINE_CHARS].partition("\n")[0]
        lang = languages.language_from_shebang(first_line)
        if lang is not None:
            return lang, SHEBANG
    return schema.UNKNOWN, schema.UNKNOWN


def detect(
    path: str, text: str, cfg: LangidConfig, *, fallback_kind: str = "data"
) -> tuple[str, str, str]:
    """(lang, kind, method) of one document.

    ``fallback_kind`` is the kind of an unknown language; the stage passes the
    row's existing kind.

    >>> detect("src/app/main.py", "", LangidConfig())
    ('Python', 'code', 'extension')
    >>> detect("bin/tool", "#!/usr/bin/env python3.11\\n", LangidConfig())
    ('Python', 'code', 'shebang')
    """
    basename = _basename(path)
    decided = _by_name(basename) or _by_text(basename, text, cfg)
    lang, method = decided
    return lang, languages.kind_of(lang, default=fallback_kind), method


def run(table: pa.Table, cfg: LangidConfig) -> MapResult:
    """Annotate every row with ``lang``, ``kind`` and ``lang_method``."""
    basenames = [_basename(p) for p in table.column(schema.PATH).to_pylist()]
    by_name = [_by_name(name) for name in basenames]
    open_rows = [i for i, d in enumerate(by_name) if d is None]
    by_text: dict[int, tuple[str, str]] = {}
    if open_rows:
        texts = table.column(schema.TEXT).take(pa.array(open_rows, pa.int64())).to_pylist()
        for i, text in zip(open_rows, texts, strict=True):
            by_text[i] = _by_text(basenames[i], text or "", cfg)
    decided = [d if d is not None else by_text[i] for i, d in enumerate(by_name)]

    old_kinds = table.column(schema.KIND).to_pylist()
    langs = [lang for lang, _ in decided]
    methods = [method for _, method in decided]
    kinds = [
        languages.kind_of(lang, default=old) for lang, old in zip(langs, old_kinds, strict=True)
    ]

    table = _replace_doc_column(table, schema.LANG, langs)
    table = _replace_doc_column(table, schema.KIND, kinds)
    table = with_column(table, schema.LANG_METHOD, methods)
    return MapResult(table)


def _replace_doc_column(table: pa.Table, name: str, values: list[str]) -> pa.Table:
    field = schema.DOC_SCHEMA.field(name)
    return table.set_column(table.column_names.index(name), field, pa.array(values, field.type))
