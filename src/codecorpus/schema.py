"""The formats two parts or more share, defined once: the document row and the columns stages
add to it that another part reads, the drop log, the run-directory paths (``RunPaths``), the
token shard files (Megatron's ``.bin``/``.idx``, segment tables, loss masks), the manifest kinds,
and the trace row the SFT and tasks parts both write. The environments' own run-directory names
(``envs/``, ``verified/``, ``env_cache/``) are in ``envs/config.py``.

A format only one part reads or writes is that part's, beside its code (``filters/columns.py``,
``sft/columns.py``, ``tasks/columns.py``, ``langid/stage.py``'s ``lang_method`` ...), and
``tests/test_schema_shared.py`` keeps it so. Everything else that names a column, a file in a
run directory or a shard file imports it from here (docs/ARCHITECTURE.md, "The run directory"
and "The document row"; docs/manifests.md), so a format changes in one place.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

# --- document row (docs/ARCHITECTURE.md, "The document row") -------------------------

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

UNKNOWN = "unknown"
KINDS = ("code", "docs", "notebook", "data", "config")  # values of KIND

# --- ingest provenance columns ----------------------------------------------
# added by ingest after the DOC_SCHEMA columns (``forks`` is ingest's own: ingest/repometa.py)
LICENSE_METHOD = "license_method"
STARS = "stars"
LAST_COMMIT = "last_commit"
# LICENSE_METHOD says where a row's SPDX id came from: spdx_tag, license_file, readme,
# package_metadata, dataset_column, recipe or unknown (ingest/license.py, ingest/plan.py)
EXPANDED_ROWS = "_expanded_rows"
"""MapResult counter of ingest: entries a read job enumerated beyond its planned units
(archive members, JSONL lines) so that rows_in = planned + expanded = rows_out + dropped."""
EXPANDED_BYTES = "_expanded_bytes"
"""MapResult counter of ingest: input bytes of the rows read out of units the plan could
not size per document (archive members, records), counted into the job's bytes_in."""

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

# --- columns stages add that another part reads -------------------------------------
# A column only its own part reads is that part's (langid/stage.py's lang_method,
# filters/columns.py's scores, sft/columns.py, tasks/columns.py).
PARSE_ERROR_FRAC = "parse_error_frac"  # langid writes it, a filters rule reads it
DECONTAM_OVERLAP = "decontam_overlap"  # the filters write it, the report reads it
DUP_COUNT = "dup_count"
DUP_CLUSTER = "dup_cluster"  # id of the cluster's keeper (a kept row's own id when it is unique)
DUP_CLUSTER_SIZE = "dup_cluster_size"  # documents in the cluster (exact + near copies), 1 if unique
TOKENS = "tokens"
NUM_TOKENS = "num_tokens"

STAGE_COLUMNS: dict[str, pa.DataType] = {
    # ingest provenance (nullable: unknown = null)
    LICENSE_METHOD: pa.string(),
    STARS: pa.int64(),
    LAST_COMMIT: pa.timestamp("s", tz="UTC"),
    # langid's, the filters', dedup's and tokenize's
    PARSE_ERROR_FRAC: pa.float32(),
    DECONTAM_OVERLAP: pa.float32(),  # best benchmark overlap (0 when none)
    DUP_COUNT: pa.int32(),
    DUP_CLUSTER: pa.string(),
    DUP_CLUSTER_SIZE: pa.int32(),
    TOKENS: pa.large_list(pa.uint32()),
    NUM_TOKENS: pa.int64(),
}
"""Types of the document row's columns that stages add. A stage appends its columns with these
types (``stage.with_column``) so every shard of a stage has the same schema whatever its
contents; a part's own columns have their own table, passed to ``stage.with_column``."""

DECONTAMINATED = "decontaminated"
"""Drop reason of the filters stage's benchmark decontamination."""


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


# --- run directory (docs/ARCHITECTURE.md, "The run directory") ----------------------



def shard_name(index: int) -> str:
    return f"part-{index:05d}"


@dataclass(frozen=True)
class RunPaths:
    """Every path inside a run directory. Nothing else spells these names."""

    root: Path

    def __reduce__(self) -> tuple:
        """Unpickled on another node (a Ray task's arguments), the paths name that node's
        mirror of an S3 run (``storage/mirror.py`` ``node_path``); elsewhere they are unchanged."""
        return (_node_run_paths, (str(self.root),))

    @property
    def recipe(self) -> Path:
        return self.root / "recipe.yaml"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    # mixing and report
    @property
    def mixing_dir(self) -> Path:
        return self.root / "mixing"

    @property
    def mix_plan(self) -> Path:
        """Every mixed set's plan (JSON); ``mix_plan_table`` is the same as a long-form table."""
        return self.mixing_dir / "plan.json"

    def mix_plan_table(self, suffix: str) -> Path:
        return self.mixing_dir / f"plan{suffix}"

    @property
    def report_index(self) -> Path:
        return self.report_dir / "index.html"

    @property
    def report_compare(self) -> Path:
        return self.report_dir / "compare.html"

    def report_table(self, name: str, suffix: str) -> Path:
        return self.report_dir / f"{name}{suffix}"

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / "tokenizer"

    @property
    def tokenizer_done(self) -> Path:
        """Holds the key (upstream hash + train config) a trained tokenizer was made under."""
        return self.tokenizer_dir / "_done"

    def stage_dir(self, stage: str) -> Path:
        return self.root / stage

    def stage_meta(self, stage: str) -> Path:
        """``{"hash": ...}`` of the recipe a stage directory's outputs were made under."""
        return self.stage_dir(stage) / "_stage.json"

    def part(self, stage: str, shard: int) -> Path:
        return self.stage_dir(stage) / f"{shard_name(shard)}.parquet"

    def dropped_dir(self, stage: str) -> Path:
        return self.stage_dir(stage) / "_dropped"

    def dropped(self, stage: str, shard: int) -> Path:
        return self.dropped_dir(stage) / f"{shard_name(shard)}.parquet"

    def skipped_dir(self, stage: str) -> Path:
        """Log of the entries a source stage stepped over that are not documents (drop-log layout)."""
        return self.stage_dir(stage) / "_skipped"

    def skipped(self, stage: str, shard: int) -> Path:
        return self.skipped_dir(stage) / f"{shard_name(shard)}.parquet"

    def stats(self, stage: str) -> Path:
        return self.stage_dir(stage) / "_stats.json"

    def done_dir(self, stage: str) -> Path:
        return self.stage_dir(stage) / "_done"

    def done(self, stage: str, job: str) -> Path:
        return self.done_dir(stage) / job

    def plan_dir(self, stage: str) -> Path:
        """Plan files of a source stage, made before its hash is known (so outside its folder)."""
        return self.root / "_plan" / stage

    def work_dir(self, stage: str, phase: str) -> Path:
        """Intermediate files of a global stage's phase (partitioned by bucket)."""
        return self.stage_dir(stage) / "_work" / phase

    def work_part(self, stage: str, phase: str, partition: int, shard: int) -> Path:
        return self.work_dir(stage, phase) / f"p{partition:05d}" / f"{shard_name(shard)}.parquet"

    def snapshot(self, stage: str, name: str) -> Path:
        """A plain folder committed into a one-commit git repository (``envs/repos.py``): a
        node-local git directory; what the run publishes is its bundle (``repos.snapshot_bundle``)."""
        return self.stage_dir(stage) / "repos" / name

    def task_file(self, split: str) -> Path:
        """A repository-tasks run's SWE-bench task file of ``split`` (``TASK_FILES``)."""
        return self.root / TASKS_DIR / TASK_FILES[split]

    def set_dir(self, set_name: str) -> Path:
        return self.root / SETS_DIR / set_name

    def set_manifest(self, set_name: str) -> Path:
        return self.set_dir(set_name) / "manifest.json"

    def set_shard_prefix(self, set_name: str, shard: int) -> Path:
        return self.set_dir(set_name) / shard_name(shard)


SETS_DIR = "shards"
"""``RUN/shards/``: the output sets, one folder each (token shards and the set's manifest); a
stage whose spec owns it (``output_dirs``) writes sets."""
TASKS_DIR = "tasks"
"""``RUN/tasks/``: the SWE-bench task files of a repository-tasks run."""
TASK_FILES = {"train": "tasks.jsonl", "eval": "tasks-eval.jsonl"}
"""The task file of each split in ``TASKS_DIR`` (``eval``: created after ``eval_after``)."""

def _node_run_paths(root: str) -> RunPaths:
    from codecorpus.storage.mirror import node_path

    return RunPaths(node_path(root))


# --- token shard files (docs/manifests.md) --------------------------------------------

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
MEGATRON_SEQUENCES_FILE = "megatron-sequences.json"
"""Per set: ``{prefix: [idx sequence count, document count]}``, Megatron's --per-dataset-sequences-path."""

# Loss mask of an SFT set (written by the SFT pack): ``<prefix>.mask.bin``
# holds one uint8 per token, in ``.bin`` order (0 = no loss, 1 = loss), no header;
# so its size in bytes equals the shard's token count.
LOSS_MASK_DTYPE = "uint8"

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

# --- manifests (docs/manifests.md) ------------------------------------------------------

SET_MANIFEST_KIND = "codecorpus.set"
RUN_MANIFEST_KIND = "codecorpus.run"
RL_MANIFEST_KIND = "codecorpus.rl"

# --- SFT / agent-trace rows --------------------------------------------------
# One canonical row per conversation or agent trajectory, whatever its input style.
# The DROP_SCHEMA columns (id, source, repo, path, lang, bytes) are present so drops
# and stats work unchanged: ``path`` is "FILE:LINE" of a JSONL record, "FILE" of a
# whole-file JSON trace (e.g. a SWE-agent .traj) and "FILE[i]" of an array's i-th trace,
# ``reader`` which of the two readers read the file, ``repo`` the
# task's repository (SWE-agent) or "", and ``lang`` holds the input format, so the
# per-language tables of the stats break a trace set down by format.

TRACE_FORMAT = "format"
TRACE_TASK_ID = "task_id"
TRACE_OUTCOME = "outcome"
TRACE_MESSAGES = "messages"
TRACE_TOOLS = "tools"
TRACE_METADATA = "metadata"
TRACE_READER = "reader"
EDIT_TRACE_FORMAT = "edit"  # an editing example made from a commit (tasks/edits.py)

TOOL_CALL_TYPE = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("name", pa.string()),
        pa.field("arguments", pa.string()),
    ]
)
MESSAGE_TYPE = pa.struct(
    [
        pa.field("role", pa.string()),
        pa.field("content", pa.string()),
        pa.field("reasoning", pa.string()),
        pa.field("tool_calls", pa.list_(TOOL_CALL_TYPE)),
        pa.field("tool_call_id", pa.string()),
        pa.field("name", pa.string()),
        pa.field("is_summary", pa.bool_()),
    ]
)

TRACE_SCHEMA = pa.schema(
    [
        pa.field(ID, pa.string(), nullable=False),
        pa.field(SOURCE, pa.string(), nullable=False),
        pa.field(REPO, pa.string(), nullable=False),
        pa.field(PATH, pa.string(), nullable=False),
        pa.field(LANG, pa.string(), nullable=False),
        pa.field(BYTES, pa.int64(), nullable=False),
        pa.field(TRACE_FORMAT, pa.string(), nullable=False),
        pa.field(TRACE_TASK_ID, pa.string(), nullable=False),
        pa.field(TRACE_OUTCOME, pa.string(), nullable=False),
        pa.field(TRACE_MESSAGES, pa.list_(MESSAGE_TYPE), nullable=False),
        pa.field(TRACE_TOOLS, pa.large_string(), nullable=True),
        pa.field(TRACE_METADATA, pa.large_string(), nullable=False),
        pa.field(CONTENT_HASH, pa.string(), nullable=False),
        pa.field(TRACE_READER, pa.string(), nullable=True),
    ]
)
"""``tools`` is the JSON tool-schema list (null when the trace gives none); ``metadata``
a JSON object of everything else the source carried (e.g. a SWE-agent final patch);
``content_hash`` the sha256 of the canonical messages and tools (exact dedup key)."""
