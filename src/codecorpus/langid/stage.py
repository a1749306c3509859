"""The langid annotator: sets ``lang`` and ``kind``, adds ``lang_method`` and
``parse_error_frac``; drops nothing.

Two steps: each file is tagged alone (:func:`tag`), then files of one repository
that share an unlisted or ambiguous extension and got disagreeing content labels
are reconciled by a vote (:mod:`codecorpus.langid.vote`, ``repo_extension_vote``).
A repository may span several ingest shards, so on the runtime the stage runs in
phases: per shard :func:`scan` (tags + label counts) -> one :func:`decide_shards`
over every shard's counts -> per shard :func:`apply`. :func:`run` does all three
on one table (the whole corpus in one shard), for tests and the library.

Detection (:mod:`codecorpus.langid.detect`) follows GitHub Linguist through go-enry:
modeline, file name, shebang, extension, content heuristics for ambiguous
extensions, then Linguist's classifier; codecorpus's content model and magika on the
bytes when none of those has an answer (:mod:`codecorpus.langid.content_model`);
codecorpus's own table (:mod:`languages`) last. ``lang_method``
records which of :data:`LANG_METHODS` decided.

``kind`` comes from the language (codecorpus's table, else Linguist's type). Ingest's
``docs`` and ``notebook`` kinds are kept: they record what the document *is*
(a page of a docs tree, a converted notebook) whatever its markup, and an
unknown language keeps the kind ingest gave it.

``parse_error_frac`` (float32, null for languages without a grammar or above
``parse_max_bytes``) comes from a tree-sitter parse (:mod:`codecorpus.langid.parse`).
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from codecorpus import schema
from codecorpus.langid import detect as detector
from codecorpus.langid import parse
from codecorpus.langid import vote as voting
from codecorpus.langid.config import LangidConfig
from codecorpus.stage import MapResult, with_column

LANG_METHOD = "lang_method"
# values of LANG_METHOD: which rule of langid decided a row's language (Linguist's
# strategy order via enry, then codecorpus's content model and magika on content alone,
# then codecorpus's own table)
LANG_METHODS = (
    "modeline", "filename", "shebang", "extension", "content", "classifier", "magika", "content_model", "table",
    "repo_extension_vote", schema.UNKNOWN,
)
STAGE_COLUMNS: dict[str, pa.DataType] = {LANG_METHOD: pa.string()}
"""Types of the columns langid adds beside the document row's (``parse_error_frac`` is
in ``schema.STAGE_COLUMNS``, since the filters read it too)."""

_KEEP_KINDS = ("docs", "notebook")
COUNTS_PARTITION = 0
"""Partition of the scan phase that holds a shard's label counts (read by the one reduce)."""
TAGS_PARTITION = 1
"""Partition of the scan phase that holds a shard's own tags (read back by its apply)."""
SHARD = "shard"
_TAG_COLUMNS = (schema.LANG, schema.KIND, LANG_METHOD, schema.PARSE_ERROR_FRAC)


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
        path, text, magika=cfg.magika, magika_min_score=cfg.magika_min_score, shebang=cfg.shebang,
        magika_unlisted_code=cfg.magika_unlisted_code, use_content_model=cfg.content_model,
    )
    return lang, detector.kind_of(lang, fallback_kind), method


def run(table: pa.Table, cfg: LangidConfig) -> MapResult:
    """Annotate every row with ``lang``, ``kind``, ``lang_method`` and ``parse_error_frac``.

    The table is taken as the whole corpus: the per-repository vote sees all of it.
    """
    tags = tag(table, cfg)
    decisions = _decisions(_counts(table, tags), cfg)
    return apply(table, tags, decisions, cfg)


def tag(table: pa.Table, cfg: LangidConfig) -> pa.Table:
    """Each file's own tags (``lang``, ``kind``, ``lang_method``, ``parse_error_frac``), row-aligned."""
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
    return pa.table({
        schema.LANG: pa.array(langs, pa.string()), schema.KIND: pa.array(kinds, pa.string()),
        LANG_METHOD: pa.array(methods, pa.string()),
        schema.PARSE_ERROR_FRAC: pa.array(errors, schema.STAGE_COLUMNS[schema.PARSE_ERROR_FRAC]),
    })


def scan(table: pa.Table, shard: int, cfg: LangidConfig) -> dict[int, pa.Table]:
    """Phase 1, per shard: its tags (:data:`TAGS_PARTITION`) and its label counts with the
    shard number (:data:`COUNTS_PARTITION`)."""
    tags = tag(table, cfg)
    counts = _counts(table, tags)
    counts = counts.append_column(SHARD, pa.array([shard] * counts.num_rows, pa.int32()))
    return {COUNTS_PARTITION: counts, TAGS_PARTITION: tags}


def decide_shards(counts: pa.Table, cfg: LangidConfig, n_shards: int) -> dict[int, pa.Table]:
    """Phase 2, once over every shard's counts: each shard gets the decisions of its repositories."""
    decisions = _decisions(counts, cfg)
    keys = list(zip(*decisions.select([schema.REPO, voting.EXT]).to_pydict().values(), strict=True))
    where = counts.select([schema.REPO, voting.EXT, SHARD]).to_pydict()
    shards_of: dict[tuple[str, str], set[int]] = {}
    for repo, ext, shard in zip(*where.values(), strict=True):
        shards_of.setdefault((repo, ext), set()).add(shard)
    rows: dict[int, list[int]] = {i: [] for i in range(n_shards)}
    for row, key in enumerate(keys):
        for shard in sorted(shards_of[key]):
            rows[shard].append(row)
    return {i: decisions.take(pa.array(r, pa.int64())) for i, r in rows.items()}


def apply(table: pa.Table, tags: pa.Table, decisions: pa.Table, cfg: LangidConfig) -> MapResult:
    """Phase 3, per shard: the shard's own tags, revised by the vote's decisions, set on its rows.

    A revised row's ``kind`` and ``parse_error_frac`` follow its new language.
    """
    if tags.num_rows != table.num_rows:
        raise AssertionError(f"langid tags have {tags.num_rows} rows for a shard of {table.num_rows}")
    langs = tags.column(schema.LANG).to_pylist()
    kinds = tags.column(schema.KIND).to_pylist()
    methods = tags.column(LANG_METHOD).to_pylist()
    errors = tags.column(schema.PARSE_ERROR_FRAC).to_pylist()
    revised: list[int] = []
    if cfg.repo_vote:
        langs, methods, revised = voting.revise(
            table.column(schema.REPO).to_pylist(), table.column(schema.PATH).to_pylist(),
            langs, methods, decisions,
        )
    if revised:
        old_kinds = table.column(schema.KIND)
        texts = table.column(schema.TEXT)
        for i in revised:
            old, text = old_kinds[i].as_py(), texts[i].as_py() or ""
            kinds[i] = old if old in _KEEP_KINDS else detector.kind_of(langs[i], old)
            errors[i] = _parse_errors(langs[i], text, cfg)
    table = _replace_doc_column(table, schema.LANG, langs)
    table = _replace_doc_column(table, schema.KIND, kinds)
    table = with_column(table, LANG_METHOD, methods, types=STAGE_COLUMNS)
    table = with_column(table, schema.PARSE_ERROR_FRAC, errors)
    changed = sum(1 for i in revised if langs[i] != tags.column(schema.LANG)[i].as_py())
    return MapResult(table, counters=Counter({"repo_vote_rows": len(revised), "repo_vote_changed": changed}))


def _counts(table: pa.Table, tags: pa.Table) -> pa.Table:
    return voting.count_labels(
        table.column(schema.REPO).to_pylist(), table.column(schema.PATH).to_pylist(),
        tags.column(schema.LANG).to_pylist(), tags.column(LANG_METHOD).to_pylist(),
    )


def _decisions(counts: pa.Table, cfg: LangidConfig) -> pa.Table:
    return voting.decide(counts, cfg.vote_min_share, cfg.vote_min_files)


def _parse_errors(lang: str, text: str, cfg: LangidConfig) -> float | None:
    if not cfg.parse_errors or len(text) > cfg.parse_max_bytes:
        return None
    return parse.parse_error_frac(lang, text)


def _replace_doc_column(table: pa.Table, name: str, values: list[str]) -> pa.Table:
    field = schema.DOC_SCHEMA.field(name)
    return table.set_column(table.column_names.index(name), field, pa.array(values, field.type))
