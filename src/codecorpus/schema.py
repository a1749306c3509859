"""Formats defined once: the document row, the drop log, and every run-directory path.

Everything that names a column, a file in a run directory or a shard file
imports it from here (DESIGN sections 3 and 4), so a format changes in one place.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

FORMAT_VERSION = 1

# --- document row (DESIGN section 4) -------------------------------------------------

ID = "id"
SOURCE = "source"
REPO = "repo"
PATH = "path"
REVISION = "revision"
LICENSE = "license"
LANG = "lang"
KIND = "kind"
TEXT = "text"
BYTES = "bytes"
CONTENT_HASH = "content_hash"
ENCODING = "encoding"

# columns added by stages (typed, so analysts can query them)
LANG_METHOD = "lang_method"
MAX_LINE_LEN = "max_line_len"
MEAN_LINE_LEN = "mean_line_len"
ALNUM_FRAC = "alnum_frac"
DUP_COUNT = "dup_count"
TOKENS = "tokens"
NUM_TOKENS = "num_tokens"

UNKNOWN = "unknown"
KINDS = ("code", "docs", "notebook", "data", "config")
# values of LANG_METHOD: which rule of langid decided a row's language
LANG_METHODS = ("filename", "extension", "content", "shebang", UNKNOWN)

DOC_SCHEMA = pa.schema(
    [
        pa.field(ID, pa.string(), nullable=False),
        pa.field(SOURCE, pa.string(), nullable=False),
        pa.field(REPO, pa.string(), nullable=False),
        pa.field(PATH, pa.string(), nullable=False),
        pa.field(REVISION, pa.string(), nullable=False),
        pa.field(LICENSE, pa.string(), nullable=False),
        pa.field(LANG, pa.string(), nullable=False),
        pa.field(KIND, pa.string(), nullable=False),
        pa.field(TEXT, pa.large_string(), nullable=False),
        pa.field(BYTES, pa.int64(), nullable=False),
        pa.field(CONTENT_HASH, pa.string(), nullable=False),
        pa.field(ENCODING, pa.string(), nullable=False),
    ]
)

# Typed columns that stages add. A stage appends its columns with these types so
# every shard of a stage has the same schema whatever its contents.
STAGE_COLUMNS: dict[str, pa.DataType] = {
    LANG_METHOD: pa.string(),
    MAX_LINE_LEN: pa.int32(),
    MEAN_LINE_LEN: pa.float32(),
    ALNUM_FRAC: pa.float32(),
    DUP_COUNT: pa.int32(),
    TOKENS: pa.large_list(pa.uint32()),
    NUM_TOKENS: pa.int64(),
}


def document_id(source: str, repo: str, path: str, revision: str) -> str:
    """Stable id of a document: 32 hex chars of sha256 over its provenance.

    >>> document_id("s", "r", "a.py", "v1") == document_id("s", "r", "a.py", "v1")
    True
    >>> len(document_id("s", "r", "a.py", "v1"))
    32
    """
    key = "\x00".join((source, repo, path, revision)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:32]


def content_hash(data: bytes) -> str:
    """sha256 hex of the exact UTF-8 bytes of a document's text."""
    return hashlib.sha256(data).hexdigest()


# --- drop log ------------------------------------------------------------------------

REASON = "reason"
STAGE = "stage"
DETAIL = "detail"
SCORE = "score"
THRESHOLD = "threshold"
DUP_OF = "dup_of"

DROP_SCHEMA = pa.schema(
    [
        pa.field(ID, pa.string(), nullable=False),
        pa.field(STAGE, pa.string(), nullable=False),
        pa.field(REASON, pa.string(), nullable=False),
        pa.field(LANG, pa.string(), nullable=False),
        pa.field(BYTES, pa.int64(), nullable=False),
        pa.field(SOURCE, pa.string(), nullable=False),
        pa.field(REPO, pa.string(), nullable=False),
        pa.field(PATH, pa.string(), nullable=False),
        pa.field(DETAIL, pa.string(), nullable=True),
        pa.field(SCORE, pa.float64(), nullable=True),
        pa.field(THRESHOLD, pa.float64(), nullable=True),
        pa.field(DUP_OF, pa.string(), nullable=True),
    ]
)


def empty_drops() -> pa.Table:
    return DROP_SCHEMA.empty_table()


def drops_from_rows(
    rows: pa.Table,
    stage: str,
    reason: str | Sequence[str],
    *,
    detail: Sequence[str | None] | None = None,
    score: Sequence[float | None] | None = None,
    threshold: Sequence[float | None] | None = None,
    dup_of: Sequence[str | None] | None = None,
) -> pa.Table:
    """Drop-log rows for the document rows ``rows`` (which carry the DOC_SCHEMA columns)."""
    n = rows.num_rows
    reasons = [reason] * n if isinstance(reason, str) else list(reason)
    nones: list[None] = [None] * n
    lang = rows.column(LANG) if LANG in rows.column_names else pa.array([UNKNOWN] * n)
    return pa.table(
        {
            ID: rows.column(ID),
            STAGE: pa.array([stage] * n, pa.string()),
            REASON: pa.array(reasons, pa.string()),
            LANG: lang,
            BYTES: rows.column(BYTES),
            SOURCE: rows.column(SOURCE),
            REPO: rows.column(REPO),
            PATH: rows.column(PATH),
            DETAIL: pa.array(detail if detail is not None else nones, pa.string()),
            SCORE: pa.array(score if score is not None else nones, pa.float64()),
            THRESHOLD: pa.array(threshold if threshold is not None else nones, pa.float64()),
            DUP_OF: pa.array(dup_of if dup_of is not None else nones, pa.string()),
        },
        schema=DROP_SCHEMA,
    )


# --- run directory (DESIGN section 3) -----------------------------------------------

PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 3
PARQUET_ROW_GROUP_ROWS = 4096


def shard_name(index: int) -> str:
    return f"part-{index:05d}"


@dataclass(frozen=True)
class RunPaths:
    """Every path inside a run directory. Nothing else spells these names."""

    root: Path

    @property
    def recipe(self) -> Path:
        return self.root / "recipe.yaml"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / "tokenizer"

    def stage_dir(self, stage: str) -> Path:
        return self.root / stage

    def part(self, stage: str, shard: int) -> Path:
        return self.stage_dir(stage) / f"{shard_name(shard)}.parquet"

    def dropped_dir(self, stage: str) -> Path:
        return self.stage_dir(stage) / "_dropped"

    def dropped(self, stage: str, shard: int) -> Path:
        return self.dropped_dir(stage) / f"{shard_name(shard)}.parquet"

    def stats(self, stage: str) -> Path:
        return self.stage_dir(stage) / "_stats.json"

    def done_dir(self, stage: str) -> Path:
        return self.stage_dir(stage) / "_done"

    def done(self, stage: str, task: str) -> Path:
        return self.done_dir(stage) / task

    def work_dir(self, stage: str, phase: str) -> Path:
        """Intermediate files of a global stage's phase (partitioned by bucket)."""
        return self.stage_dir(stage) / "_work" / phase

    def work_part(self, stage: str, phase: str, partition: int, shard: int) -> Path:
        return self.work_dir(stage, phase) / f"p{partition:05d}" / f"{shard_name(shard)}.parquet"

    def set_dir(self, set_name: str) -> Path:
        return self.root / "shards" / set_name

    def set_manifest(self, set_name: str) -> Path:
        return self.set_dir(set_name) / "manifest.json"

    def set_shard_prefix(self, set_name: str, shard: int) -> Path:
        return self.set_dir(set_name) / shard_name(shard)


# --- token shard files (DESIGN section 5) --------------------------------------------

BIN_SUFFIX = ".bin"
IDX_SUFFIX = ".idx"
SEGMENTS_SUFFIX = ".seg.parquet"
LOSS_MASK_SUFFIX = ".mask.bin"

# per-shard segment table: one row per document segment, in the order of the .bin
SEG_DOC_ID = "doc_id"
SEG_DOC_OFFSET = "doc_offset"
SEG_LENGTH = "length"
SEGMENT_SCHEMA = pa.schema(
    [
        pa.field(SEG_DOC_ID, pa.string(), nullable=False),
        pa.field(SEG_DOC_OFFSET, pa.int64(), nullable=False),
        pa.field(SEG_LENGTH, pa.int32(), nullable=False),
        pa.field(LANG, pa.string(), nullable=False),
        pa.field(SOURCE, pa.string(), nullable=False),
    ]
)

MANIFEST_NAME = "manifest.json"

# files of one shard, by the key a set manifest lists them under
SHARD_FILE_SUFFIXES = {
    "bin": BIN_SUFFIX,
    "idx": IDX_SUFFIX,
    "seg": SEGMENTS_SUFFIX,
    "mask": LOSS_MASK_SUFFIX,
}

# Megatron-Core indexed dataset, exactly as megatron/core/datasets/indexed_dataset.py
# reads it: header, <Q version, <B dtype code, <Q sequence count, <Q document count,
# int32 sequence_lengths, int64 sequence_pointers (bytes), int64 document_indices.
MEGATRON_INDEX_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_INDEX_VERSION = 1
MEGATRON_DTYPE_CODES: dict[int, str] = {
    1: "uint8",
    2: "int8",
    3: "int16",
    4: "int32",
    5: "int64",
    6: "float64",
    7: "float32",
    8: "uint16",
}
# Megatron's DType.optimal_dtype: uint16 below this vocabulary size, else int32
MEGATRON_UINT16_VOCAB_LIMIT = 65500

# --- manifests (DESIGN section 5) ------------------------------------------------------

SET_MANIFEST_KIND = "codecorpus.set"
RUN_MANIFEST_KIND = "codecorpus.run"

# --- tokenizer files -----------------------------------------------------------------

TOKENIZER_FILE = "tokenizer.json"
"""File name of a trained tokenizer inside ``RunPaths.tokenizer_dir`` (HF tokenizers JSON)."""
