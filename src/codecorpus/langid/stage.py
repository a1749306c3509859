"""The langid annotator: sets ``lang`` and ``kind``, adds ``lang_method`` and
``parse_error_frac``; drops nothing.

Detection (:mod:`codecorpus.langid.detect`) follows GitHub Linguist through go-enry:
modeline, file name, shebang, extension, content heuristics for ambiguous
extensions, then Linguist's classifier; magika on the bytes when none of those
has an answer; codecorpus's own table (:mod:`languages`) last. ``lang_method``
records which of ``schema.LANG_METHODS`` decided.

``kind`` comes from the language (codecorpus's table, else Linguist's type). Ingest's
``docs`` and ``notebook`` kinds are kept: they record what the document *is*
(a page of a docs tree, a converted notebook) whatever its markup, and an
unknown language keeps the kind ingest gave it.

``parse_error_frac`` (float32, null for languages without a grammar or above
``parse_max_bytes``) comes from a tree-sitter parse (:mod:`codecorpus.langid.parse`).
"""

from __future__ import annotations

import pyarrow as pa

from codecorpus import schema
from codecorpus.config import LangidConfig
from codecorpus.langid import detect as detector
from codecorpus.langid import parse
from codecorpus.stage import MapResult, with_column

_KEEP_KINDS = ("docs", "notebook")


def detect(path: str, text: str, cfg: LangidConfig, *, fallback_kind: str = "data") -> tuple[str, str, str]:
    """(lang, kind, method) of one document.

    ``fallback_kind`` is the kind of an unknown language; the stage passes the
    row's existing kind.

    >>> detect("src/app/main.py", "", LangidConfig())
    ('Python', 'code', 'extension')
    >>> detect("bin/tool", "#!/usr/bin/env python3.11\\n", LangidConfig())
    ('Python', 'code', 'shebang')
    """
    lang, method = detector.detect(
        path, text, magika=cfg.magika, magika_min_score=cfg.magika_min_score, shebang=cfg.shebang
    )
    return lang, detector.kind_of(lang, fallback_kind), method


def run(table: pa.Table, cfg: LangidConfig) -> MapResult:
    """Annotate every row with ``lang``, ``kind``, ``lang_method`` and ``parse_error_frac``."""
    paths = table.column(schema.PATH).to_pylist()
    texts = table.column(schema.TEXT).to_pylist()
    old_kinds = table.column(schema.KIND).to_pylist()
    langs, kinds, methods, errors = [], [], [], []
    for path, text, old in zip(paths, texts, old_kinds, strict=True):
        lang, kind, method = detect(path, text or "", cfg, fallback_kind=old)
        langs.append(lang)
        kinds.append(old if old in _KEEP_KINDS else kind)
        methods.append(method)
        errors.append(_parse_errors(lang, text or "", cfg))
    table = _replace_doc_column(table, schema.LANG, langs)
    table = _replace_doc_column(table, schema.KIND, kinds)
    table = with_column(table, schema.LANG_METHOD, methods)
    table = with_column(table, schema.PARSE_ERROR_FRAC, errors)
    return MapResult(table)


def _parse_errors(lang: str, text: str, cfg: LangidConfig) -> float | None:
    if not cfg.parse_errors or len(text) > cfg.parse_max_bytes:
        return None
    return parse.parse_error_frac(lang, text)


def _replace_doc_column(table: pa.Table, name: str, values: list[str]) -> pa.Table:
    field = schema.DOC_SCHEMA.field(name)
    return table.set_column(table.column_names.index(name), field, pa.array(values, field.type))
