"""Export a set as Parquet that Hugging Face ``datasets`` and TRL's ``SFTTrainer`` read as they are.

    codecorpus manifest export-hf RUN/shards/sft EXPORT          # one row per packed sequence
    load_dataset("parquet", data_files="EXPORT/data/*.parquet")  # or load_dataset("EXPORT")

The columns follow TRL's conventions for pre-tokenized data:

- ``input_ids``: the tokens of one packed sequence (no padding: TRL's padding-free
  collator concatenates rows, so padding would only cost compute);
- ``completion_mask``: 1 where the loss counts, the set's ``.mask.bin`` as it is
  (``SFTTrainer`` turns it into labels, -100 where it is 0, when
  ``completion_only_loss=True``);
- ``position_ids``: restarting at 0 at every segment (one example, or one
  continuation segment of a split trace), so attention never crosses two examples;
- ``seq_lengths``: the segments' lengths, from which TRL's collator derives the
  same positions and the varlen boundaries (``cu_seq_lens``);
- ``doc_ids``: the segment table's ``doc_id`` of each segment, for tracing a row back.

``per_example=True`` writes one row per segment instead (``doc_id`` and
``doc_offset`` in place of ``doc_ids``), for trainers that pack by themselves.

One Parquet file per shard, ``data/train-KKKKK-of-NNNNN.parquet`` (the split
name and numbering ``datasets`` recognises in a folder), rows in shard order,
so the same set gives the same bytes. Beside the data, ``codecorpus-export.json``
holds the provenance (the set manifest's sha256 and totals, the tokenizer with
its special ids, the chat template's hash and render settings), every file's
sha256 and counts, and the TRL settings the rows assume. It is written last and
the folder is renamed into place whole, so an export on disk is complete. Among
the counts, ``trained_segment_starts``: segments whose first token the mask
trains, which TRL's padding-free collator never trains (none in a set rendered
with ``train_on_system: false``).

``verify_export`` re-reads every file: sha256, the row invariants (equal list
lengths, positions derived from ``seq_lengths``, a 0/1 mask, ids inside the
vocabulary), and rows, tokens, segments and loss tokens against the set
manifest's totals; where the set is still at its recorded path, its manifest's
hash and the exported tokens and masks against its shards.

pyarrow and numpy only: ``datasets`` is not needed to write or verify an export.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from codecorpus import schema
from codecorpus.manifests.megatron import (
    open_loss_mask,
    open_tokens,
    read_index,
    read_segments,
    shard_file,
)
from codecorpus.storage.atomic import atomic_write_bytes, atomic_writer, fsync_dir, sha256_file
from codecorpus.storage.parquet import PARQUET_COMPRESSION, PARQUET_COMPRESSION_LEVEL

EXPORT_KIND = "codecorpus.hf-export"
EXPORT_FORMAT_VERSION = 1
EXPORT_NAME = "codecorpus-export.json"
DATA_DIR = "data"
PACKED, PER_EXAMPLE = "packed", "per-example"

INPUT_IDS, COMPLETION_MASK, POSITION_IDS, SEQ_LENGTHS = "input_ids", "completion_mask", "position_ids", "seq_lengths"
DOC_IDS, DOC_ID, DOC_OFFSET = "doc_ids", "doc_id", "doc_offset"

ID_TYPES = ("int32", "int64", "uint16", "uint32")
"""Integer types ``input_ids`` may take; int32 (the default) holds every vocabulary codecorpus writes."""

BATCH_TOKENS = 1 << 22
"""Tokens per Parquet row group (at least one row): bounds the memory of a reader's batch."""

COUNTS = ("rows", "tokens", "segments", "loss_tokens", "trained_segment_starts")
"""What an export counts, per file and in all; verify recounts every one from the files."""

TRL_SETTINGS = {"completion_only_loss": True, "padding_free": True, "packing": False, "max_length": None}
"""The ``SFTConfig`` settings the packed rows assume: the mask becomes the labels, rows are
concatenated without padding, TRL neither repacks nor truncates them."""


class ExportError(ValueError):
    """An export that cannot be made as asked; the message names the set or folder and the fix."""


@dataclass(frozen=True)
class _Shard:
    """One shard's arrays, flat, in file order."""

    tokens: np.ndarray
    mask: np.ndarray
    lengths: np.ndarray  # int64, one per segment
    starts: np.ndarray  # int64, each segment's first token; one more entry: the shard's token count
    doc_index: np.ndarray  # int64, packed-sequence boundaries in segment space
    segments: pa.Table


# --- the checks before any byte is written -------------------------------------------


def _load_set(set_dir: Path) -> dict[str, Any]:
    path = set_dir / schema.MANIFEST_NAME
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError:
        raise ExportError(f"{path} does not exist: pass a set directory, e.g. RUN/shards/<set>") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExportError(f"{path} is not a readable manifest: {e}") from None
    if m.get("kind") != schema.SET_MANIFEST_KIND:
        raise ExportError(f"{path} is a {m.get('kind')!r} manifest, not a set's: pass RUN/shards/<set>")
    return m


def export_problems(m: dict[str, Any], set_dir: Path, *, per_example: bool, all_ones_mask: bool,
                    id_dtype: str) -> list[str]:  # fmt: skip
    """Why this set cannot be exported as asked (empty when it can)."""
    problems = []
    unmasked = [s["prefix"] for s in m["shards"] if "mask" not in s["files"]]
    if unmasked and not all_ones_mask:
        problems.append(
            f"{set_dir}: shard(s) {', '.join(unmasked[:3])}{' ...' if len(unmasked) > 3 else ''} have no loss mask "
            "(.mask.bin): this is not an SFT or edit set; pass --all-ones-mask to train on every token"
        )
    vocab = int(m["tokenizer"].get("vocab_size") or 0)
    if id_dtype not in ID_TYPES:
        problems.append(f"id dtype {id_dtype!r} is not one of {', '.join(ID_TYPES)}")
    else:
        holds = int(np.iinfo(np.dtype(id_dtype)).max) + 1
        if vocab > holds:
            problems.append(f"{set_dir}: the vocabulary has {vocab:,} ids, more than {id_dtype} holds "
                            f"({holds:,}): export with --id-dtype int32")  # fmt: skip
    set_holds = int(np.iinfo(np.dtype(m["token_dtype"])).max) + 1
    if vocab > set_holds:
        problems.append(f"{set_dir}: the vocabulary has {vocab:,} ids, more than the set's {m['token_dtype']} "
                        f"tokens hold ({set_holds:,}): the set is damaged; rebuild it")  # fmt: skip
    if not per_example and int(m["seq_len"]) <= 0:
        problems.append(f"{set_dir}: not a pre-packed set (seq_len {m['seq_len']}): export it with --per-example")
    return problems


def _identity(sidecar: dict[str, Any]) -> dict[str, Any]:
    """What makes two exports the same: the set's manifest and the options."""
    return {k: sidecar.get(k) for k in ("kind", "mode", "id_dtype", "all_ones_mask")} | {
        "manifest_sha256": sidecar.get("set", {}).get("manifest_sha256")
    }


def _check_out_dir(out_dir: Path, identity: dict[str, Any]) -> None:
    """Refuse a folder that holds anything but an empty folder or this very export."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ExportError(f"{out_dir} exists and is not a folder: choose another output folder")
    entries = sorted(p.name for p in out_dir.iterdir())
    if not entries:
        return
    sidecar = out_dir / EXPORT_NAME
    if not sidecar.is_file():
        raise ExportError(f"{out_dir} exists and holds {len(entries)} entries ({', '.join(entries[:3])}"
                          f"{' ...' if len(entries) > 3 else ''}) but no export: choose an empty or new folder")  # fmt: skip
    try:
        found = json.loads(sidecar.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ExportError(f"{sidecar} is unreadable ({e}): remove {out_dir} or choose another folder") from None
    if _identity(found) != identity:
        theirs = found.get("set", {})
        raise ExportError(
            f"{out_dir} holds another export (set {theirs.get('name')!r}, manifest "
            f"{str(theirs.get('manifest_sha256'))[:12]}, {found.get('mode')}, {found.get('id_dtype')}): "
            "remove it or choose another folder"
        )


# --- reading a shard and building its rows -------------------------------------------------


def _read_shard(set_dir: Path, record: dict[str, Any]) -> _Shard:
    prefix = set_dir / record["prefix"]
    index = read_index(shard_file(prefix, "idx"))
    lengths = index.sequence_lengths.astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    if not np.array_equal(index.sequence_pointers // index.dtype.itemsize, starts[:-1]):
        raise ExportError(f"{prefix}: segments are not stored one after another: run `codecorpus manifest verify`")
    tokens = open_tokens(prefix, index.dtype)
    mask = open_loss_mask(prefix) if "mask" in record["files"] else np.ones(len(tokens), np.uint8)
    if len(mask) != len(tokens):
        raise ExportError(f"{prefix}: {len(mask)} mask bytes for {len(tokens)} tokens: run `codecorpus manifest verify`")
    return _Shard(tokens, mask, lengths, starts, index.document_indices.astype(np.int64), read_segments(prefix))


def _list(offsets: np.ndarray, values: pa.Array) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


def _positions(lengths: np.ndarray) -> np.ndarray:
    """0, 1, ... restarting at every segment.

    >>> _positions(np.array([3, 2])).tolist(), _positions(np.array([], np.int64)).tolist()
    ([0, 1, 2, 0, 1], [])
    """
    starts = (np.cumsum(lengths) - lengths).astype(np.int64)
    return (np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths)).astype(np.int32)


def _row_batch(shard: _Shard, rows: slice, per_example: bool, id_type: np.dtype) -> pa.RecordBatch:
    """Rows ``rows`` (packed sequences, or segments with ``per_example``) of a shard as one batch."""
    seg_lo, seg_hi = (rows.start, rows.stop) if per_example else (int(shard.doc_index[rows.start]),
                                                                   int(shard.doc_index[rows.stop]))  # fmt: skip
    lengths = shard.lengths[seg_lo:seg_hi]
    tok = slice(int(shard.starts[seg_lo]), int(shard.starts[seg_hi]))
    ids = pa.array(np.asarray(shard.tokens[tok]).astype(id_type))  # numpy's dtype: no pandas import
    mask = pa.array(np.asarray(shard.mask[tok]).astype(np.int8), pa.int8())
    positions = pa.array(_positions(lengths), pa.int32())
    seg_lens = pa.array(lengths.astype(np.int32), pa.int32())
    if per_example:
        token_offsets = np.concatenate([[0], np.cumsum(lengths)])
        seg_offsets = np.arange(len(lengths) + 1)
    else:
        bounds = shard.doc_index[rows.start : rows.stop + 1] - seg_lo
        token_offsets = np.concatenate([[0], np.cumsum(lengths)])[bounds]
        seg_offsets = bounds
    segments = shard.segments.slice(seg_lo, seg_hi - seg_lo)
    columns = {
        INPUT_IDS: _list(token_offsets, ids),
        COMPLETION_MASK: _list(token_offsets, mask),
        POSITION_IDS: _list(token_offsets, positions),
        SEQ_LENGTHS: _list(seg_offsets, seg_lens),
    }
    if per_example:
        columns[DOC_ID] = segments[schema.SEG_DOC_ID].combine_chunks()
        columns[DOC_OFFSET] = segments[schema.SEG_DOC_OFFSET].combine_chunks()
    else:
        columns[DOC_IDS] = _list(seg_offsets, segments[schema.SEG_DOC_ID].combine_chunks())
    return pa.RecordBatch.from_pydict(columns)


def _row_groups(row_tokens: np.ndarray) -> list[slice]:
    """Consecutive rows of at most ``BATCH_TOKENS`` tokens each (a longer row alone)."""
    groups, start, acc = [], 0, 0
    for i, n in enumerate(row_tokens.tolist()):
        if i > start and acc + n > BATCH_TOKENS:
            groups.append(slice(start, i))
            start, acc = i, 0
        acc += n
    groups.append(slice(start, len(row_tokens)))
    return groups


def _write_shard(shard: _Shard, path: Path, per_example: bool, id_type: np.dtype,
                 provenance: bytes) -> dict[str, Any]:  # fmt: skip
    row_tokens = shard.lengths if per_example else np.diff(shard.starts[shard.doc_index])
    table_schema = _row_batch(shard, slice(0, 0), per_example, id_type).schema
    table_schema = table_schema.with_metadata({b"codecorpus": provenance})
    with atomic_writer(path) as f, pq.ParquetWriter(
        f, table_schema, compression=PARQUET_COMPRESSION,
        compression_level=PARQUET_COMPRESSION_LEVEL, write_statistics=False,
    ) as writer:  # fmt: skip
        for group in _row_groups(row_tokens):  # one row group at a time: a shard is never whole in memory
            if group.stop > group.start:
                batch = _row_batch(shard, group, per_example, id_type)
                writer.write_batch(batch.replace_schema_metadata(table_schema.metadata), row_group_size=batch.num_rows)
    return {
        "rows": len(row_tokens),
        "tokens": int(shard.lengths.sum()),
        "segments": len(shard.lengths),
        "loss_tokens": int(np.asarray(shard.mask).sum(dtype=np.int64)),
        "trained_segment_starts": trained_segment_starts(shard.mask, shard.lengths),
    }


def trained_segment_starts(mask: np.ndarray, lengths: np.ndarray) -> int:
    """Segments whose first token the mask trains: TRL's padding-free collator never does.

    Its labels are -100 at every position 0 (nothing inside the segment predicts
    that token), so TRL trains ``loss_tokens`` less this many tokens. A set rendered
    with ``train_on_system: false`` has none: every segment opens with a role header.

    >>> trained_segment_starts(np.array([0, 1, 1, 1, 0], np.uint8), np.array([2, 2, 1]))
    1
    """
    starts = (np.cumsum(lengths) - lengths).astype(np.int64)
    nonempty = starts[lengths > 0]
    return int(np.asarray(mask)[nonempty].sum(dtype=np.int64)) if len(nonempty) else 0


# --- the export -------------------------------------------------------------------------------


def data_file_name(k: int, n: int) -> str:
    """The k-th of n data files, named as ``datasets`` finds a ``train`` split in a folder.

    >>> data_file_name(0, 2)
    'data/train-00000-of-00002.parquet'
    """
    return f"{DATA_DIR}/train-{k:05d}-of-{n:05d}.parquet"


def _sidecar_head(m: dict[str, Any], set_dir: Path, out_dir: Path, *, per_example: bool, all_ones_mask: bool,
                  id_dtype: str) -> dict[str, Any]:  # fmt: skip
    from codecorpus.manifests.version import codecorpus_version

    sft = m.get("sft", {})
    return {
        "kind": EXPORT_KIND,
        "format_version": EXPORT_FORMAT_VERSION,
        "codecorpus_version": codecorpus_version(),
        "mode": PER_EXAMPLE if per_example else PACKED,
        "id_dtype": id_dtype,
        "all_ones_mask": bool(all_ones_mask),
        "set": {
            "name": m["name"],
            "path": os.path.relpath(set_dir.resolve(), out_dir.resolve()),
            "manifest_sha256": sha256_file(set_dir / schema.MANIFEST_NAME),
            "recipe_hash": m["recipe_hash"],
            "kind_of_set": m.get("kind_of_set"),
            "seq_len": m["seq_len"],
            "token_dtype": m["token_dtype"],
            "totals": m["totals"],
        },
        "tokenizer": m["tokenizer"],
        "chat_template": sft.get("chat_template"),
        "render": sft.get("render"),
        "trl": dict(TRL_SETTINGS) if not per_example else {"completion_only_loss": True},
    }


def export_hf(set_dir: Path | str, out_dir: Path | str, *, per_example: bool = False, all_ones_mask: bool = False,
              id_dtype: str = "int32") -> dict[str, Any]:  # fmt: skip
    """Write a set as Parquet rows for ``datasets`` / TRL; returns the sidecar written beside them.

    Raises :class:`ExportError`, before writing anything, for a set without masks
    (unless ``all_ones_mask``), a vocabulary its dtypes cannot hold, or an output
    folder that holds something other than this same export (which is rewritten).
    """
    set_dir, out_dir = Path(set_dir), Path(out_dir)
    m = _load_set(set_dir)
    problems = export_problems(m, set_dir, per_example=per_example, all_ones_mask=all_ones_mask, id_dtype=id_dtype)
    if problems:
        raise ExportError("; ".join(problems))
    sidecar = _sidecar_head(m, set_dir, out_dir, per_example=per_example, all_ones_mask=all_ones_mask,
                            id_dtype=id_dtype)  # fmt: skip
    _check_out_dir(out_dir, _identity(sidecar))
    provenance = json.dumps({k: sidecar[k] for k in ("set", "tokenizer", "chat_template", "mode")},
                            sort_keys=True).encode()  # fmt: skip
    staging = out_dir.parent / f".{out_dir.name}.partial-{secrets.token_hex(6)}"
    try:
        files, n = [], len(m["shards"])
        for k, record in enumerate(m["shards"]):
            name = data_file_name(k, n)
            counts = _write_shard(_read_shard(set_dir, record), staging / name, per_example, np.dtype(id_dtype),
                                  provenance)  # fmt: skip
            path = staging / name
            files.append({"path": name, "shard": record["prefix"], "bytes": path.stat().st_size,
                          "sha256": sha256_file(path), **counts})  # fmt: skip
        sidecar["files"] = files
        sidecar["counts"] = {k: sum(f[k] for f in files) for k in COUNTS}
        atomic_write_bytes(staging / EXPORT_NAME, _json_bytes(sidecar))
        if out_dir.exists():  # empty, or this same export (checked above): replaced whole
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
        fsync_dir(out_dir.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return sidecar


def _json_bytes(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, sort_keys=True, indent=2, allow_nan=False) + "\n").encode()


# --- verify ----------------------------------------------------------------------------------------


def is_export(path: Path | str) -> bool:
    """Whether ``path`` is an export folder or its sidecar."""
    path = Path(path)
    return (path / EXPORT_NAME).is_file() if path.is_dir() else path.name == EXPORT_NAME


def _file_counts(path: Path, vocab: int) -> tuple[dict[str, int], list[str], pa.Table]:
    """Rows, tokens, segments and loss tokens of one data file, and every broken row invariant."""
    table = pq.read_table(path, columns=[INPUT_IDS, COMPLETION_MASK, POSITION_IDS, SEQ_LENGTHS])
    name, problems = path.name, []
    row_len = pc.list_value_length(table[INPUT_IDS])
    row_len = row_len.to_numpy(zero_copy_only=False).astype(np.int64)
    for column in (COMPLETION_MASK, POSITION_IDS):
        other = pc.list_value_length(table[column]).to_numpy(zero_copy_only=False)
        if not np.array_equal(other, row_len):
            problems.append(f"{name}: {column} and {INPUT_IDS} differ in length in some row")
    seg_column = table[SEQ_LENGTHS].combine_chunks()
    lengths = pc.list_flatten(seg_column).to_numpy(zero_copy_only=False).astype(np.int64)
    parents = pc.list_parent_indices(seg_column).to_numpy(zero_copy_only=False)
    seg_sums = np.bincount(parents, weights=lengths, minlength=table.num_rows).astype(np.int64)
    if not np.array_equal(seg_sums, row_len):
        problems.append(f"{name}: {SEQ_LENGTHS} do not add up to the row's length in some row")
    ids = pc.list_flatten(table[INPUT_IDS]).to_numpy(zero_copy_only=False).astype(np.int64)
    mask = pc.list_flatten(table[COMPLETION_MASK]).to_numpy(zero_copy_only=False)
    positions = pc.list_flatten(table[POSITION_IDS]).to_numpy(zero_copy_only=False)
    if not problems and not np.array_equal(positions, _positions(lengths)):
        problems.append(f"{name}: {POSITION_IDS} do not restart at every segment of {SEQ_LENGTHS}")
    if len(mask) and (int(mask.min()) < 0 or int(mask.max()) > 1):
        problems.append(f"{name}: {COMPLETION_MASK} values must be 0 or 1")
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        problems.append(f"{name}: token ids span [{ids.min()}, {ids.max()}], outside the vocabulary [0, {vocab})")
    counts = {"rows": table.num_rows, "tokens": len(ids), "segments": len(lengths),
              "loss_tokens": int(mask.sum(dtype=np.int64)) if len(mask) else 0,
              "trained_segment_starts": trained_segment_starts(mask, lengths) if not problems else 0}  # fmt: skip
    return counts, problems, table


def _expected_counts(sidecar: dict[str, Any]) -> dict[str, int]:
    """Rows, tokens, segments and loss tokens the set manifest's totals call for."""
    t = sidecar["set"]["totals"]
    return {
        "rows": t["segments"] if sidecar["mode"] == PER_EXAMPLE else t["sequences"],
        "tokens": t["tokens"],
        "segments": t["segments"],
        "loss_tokens": t["tokens"] if sidecar.get("all_ones_mask") else t["loss_tokens"],
    }


def _content_problems(set_dir: Path, record: dict[str, Any], table: pa.Table, name: str) -> list[str]:
    """The exported tokens and mask of one file against its shard's ``.bin`` and ``.mask.bin``."""
    try:
        shard = _read_shard(set_dir, record)
    except (OSError, ValueError) as e:
        return [f"{name}: cannot read its shard {record['prefix']} to compare: {e}"]
    ids = pc.list_flatten(table[INPUT_IDS]).to_numpy(zero_copy_only=False).astype(np.int64)
    mask = pc.list_flatten(table[COMPLETION_MASK]).to_numpy(zero_copy_only=False)
    problems = []
    if not np.array_equal(ids, np.asarray(shard.tokens, np.int64)):
        problems.append(f"{name}: {INPUT_IDS} differ from the tokens of shard {record['prefix']}")
    if not np.array_equal(mask.astype(np.uint8), np.asarray(shard.mask)):
        problems.append(f"{name}: {COMPLETION_MASK} differs from the loss mask of shard {record['prefix']}")
    return problems


def verify_export(path: Path | str) -> list[str]:
    """Every problem with an export: its files against its sidecar, its counts against the set manifest's."""
    path = Path(path)
    sidecar_path = path / EXPORT_NAME if path.is_dir() else path
    root = sidecar_path.parent
    try:
        sidecar = json.loads(sidecar_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return [f"{sidecar_path}: not a readable export sidecar: {e}"]
    if sidecar.get("kind") != EXPORT_KIND:
        return [f"{sidecar_path}: kind: expected {EXPORT_KIND!r}, found {sidecar.get('kind')!r}"]
    vocab = int(sidecar["tokenizer"].get("vocab_size") or 2**63 - 1)
    set_dir = (root / sidecar["set"]["path"]).resolve()
    set_m = _set_manifest_if_present(set_dir, sidecar)
    problems = list(set_m) if isinstance(set_m, list) else []
    found = dict.fromkeys(COUNTS, 0)
    for entry in sidecar["files"]:
        file_path = root / entry["path"]
        if not file_path.is_file():
            problems.append(f"{entry['path']}: missing (listed in {EXPORT_NAME})")
            continue
        if (size := file_path.stat().st_size) != entry["bytes"]:
            problems.append(f"{entry['path']}: bytes: expected {entry['bytes']} ({EXPORT_NAME}), found {size}")
        elif (digest := sha256_file(file_path)) != entry["sha256"]:
            problems.append(f"{entry['path']}: sha256: expected {entry['sha256']} ({EXPORT_NAME}), found {digest}")
        try:
            counts, broken, table = _file_counts(file_path, vocab)
        except (OSError, pa.ArrowException) as e:
            problems.append(f"{entry['path']}: cannot read: {e}")
            continue
        problems += broken
        problems += [f"{entry['path']}: {k}: expected {entry[k]} ({EXPORT_NAME}), found {v}"
                     for k, v in counts.items() if entry.get(k) != v]  # fmt: skip
        for k, v in counts.items():
            found[k] += v
        if isinstance(set_m, dict):
            record = next((s for s in set_m["shards"] if s["prefix"] == entry["shard"]), None)
            problems += (_content_problems(set_dir, record, table, entry["path"]) if record is not None
                         else [f"{entry['path']}: its shard {entry['shard']} is not in the set manifest"])  # fmt: skip
    expected = _expected_counts(sidecar)
    problems += [f"export {k}: expected {v} (set manifest totals), found {found[k]} (recounted from the files)"
                 for k, v in expected.items() if found[k] != v]  # fmt: skip
    problems += [f"{EXPORT_NAME} counts.{k}: expected {found[k]} (recounted), found {sidecar['counts'].get(k)}"
                 for k in found if sidecar.get("counts", {}).get(k) != found[k]]  # fmt: skip
    return problems


def _set_manifest_if_present(set_dir: Path, sidecar: dict[str, Any]) -> dict[str, Any] | list[str] | None:
    """The set manifest where the sidecar says the set is (None when it has moved), or its mismatches."""
    path = set_dir / schema.MANIFEST_NAME
    if not path.is_file():
        return None
    want = sidecar["set"]["manifest_sha256"]
    if (digest := sha256_file(path)) != want:
        return [f"{path}: sha256: expected {want} (the set this was exported from), found {digest}: "
                "the set changed since; export it again"]  # fmt: skip
    m = json.loads(path.read_text())
    if m.get("totals") != sidecar["set"]["totals"]:
        return [f"{EXPORT_NAME} set.totals: expected {m.get('totals')} ({path}), found {sidecar['set']['totals']}"]
    return m


def show_export(sidecar: dict[str, Any]) -> list[str]:
    """A readable summary of an export, for ``codecorpus manifest show``."""
    c, s, tok = sidecar["counts"], sidecar["set"], sidecar["tokenizer"]
    template = (sidecar.get("chat_template") or {}).get("sha256") or tok.get("chat_template_sha256")
    return [
        f"export of set {s['name']} ({sidecar['mode']}, input_ids {sidecar['id_dtype']}) from {s['path']}",
        f"  set manifest {s['manifest_sha256']}  recipe {s['recipe_hash']}",
        f"  tokenizer   {tok.get('name')}  vocab {tok.get('vocab_size')}  eos {tok.get('eos_id')}  "
        f"chat template {str(template)[:12] if template else 'none'}",
        f"  rows        {c['rows']:,}  segments {c['segments']:,}  tokens {c['tokens']:,}  loss {c['loss_tokens']:,}"
        f"{'  (all-ones mask)' if sidecar.get('all_ones_mask') else ''}",
        f"  TRL trains  {c['loss_tokens'] - c.get('trained_segment_starts', 0):,} of them "
        f"(never a segment's first token: {c.get('trained_segment_starts', 0):,} here)",
        f"  files       {len(sidecar['files'])}  TRL settings {sidecar['trl']}",
    ]
