"""Set and run manifests: what a training launcher reads and trusts, and the check that earns it.

A set manifest (``shards/<set>/manifest.json``) describes one output set: the
tokenizer, token dtype, packing, every shard file with its size and sha256,
every count (tokens, documents, segments, packed sequences, loss and padding
tokens, tokens per language and source), provenance and the Megatron blend. The
run manifest lists the sets of a run. Both are JSON with sorted keys, no
timestamps and no absolute paths, so the same run gives the same bytes, and both
are written atomically and last: a manifest on disk means its files are complete.

``verify`` trusts nothing in a manifest: it re-hashes every file and re-counts
every number from the ``.idx`` and segment tables, then reports every
difference it finds (not just the first) with the file, the field, and the
expected and found values. It also reports every blend member below
``splits.SHARD_FLOOR`` packed sequences (Megatron's launch splits would leave
one of its splits empty) unless the whole set is that one shard, which the
manifest's ``megatron.split_floor`` then describes; given ``split``, it reports
every member that would leave a split of that ``--split`` empty.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.manifests import splits
from codecorpus.manifests.megatron import (
    FileInfo,
    IndexInfo,
    ShardFormatError,
    index_problems,
    open_tokens,
    read_index,
    read_segments,
    shard_file,
    token_dtype,
)
from codecorpus.manifests.version import codecorpus_version
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import atomic_write_bytes, sha256_file

FORMAT_VERSION = 1
"""The ``format_version`` of a set and a run manifest (what ``verify`` expects to read)."""

SHARD_COUNTS = ("tokens", "documents", "segments", "sequences", "loss_tokens", "padding_tokens")
REQUIRED_FILES = ("bin", "idx", "seg")
_SET_KEYS = (
    "format_version", "kind", "name", "codecorpus_version", "recipe_hash", "tokenizer",
    "token_dtype", "seq_len", "packing", "totals", "shards", "tokens_by_lang",
    "tokens_by_source", "provenance", "megatron",
)  # fmt: skip
_SHARD_KEYS = ("prefix", "files", *SHARD_COUNTS, "tokens_by_lang", "tokens_by_source")


@dataclass(frozen=True)
class ShardRecord:
    """One shard as its set manifest lists it. ``prefix`` is a file name in the set directory."""

    prefix: str
    files: dict[str, FileInfo]
    tokens: int
    documents: int
    segments: int
    sequences: int
    loss_tokens: int
    padding_tokens: int
    tokens_by_lang: dict[str, int] = field(default_factory=dict)
    tokens_by_source: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ShardCounts:
    """Everything about a shard that can be re-counted from its files."""

    tokens: int
    documents: int
    segments: int
    sequences: int
    padding_tokens: int
    tokens_by_lang: dict[str, int]
    tokens_by_source: dict[str, int]


# --- counting a shard from its files --------------------------------------------------


def _tokens_by(table: pa.Table, column: str) -> dict[str, int]:
    sums = table.group_by(column).aggregate([(schema.SEG_LENGTH, "sum")])
    pairs = zip(sums[column].to_pylist(), sums[f"{schema.SEG_LENGTH}_sum"].to_pylist(), strict=True)
    return dict(sorted((k, int(v)) for k, v in pairs))


def _bin_problems(prefix: Path, index: IndexInfo, vocab_size: int | None) -> list[str]:
    path = shard_file(prefix, "bin")
    size, need = path.stat().st_size, index.tokens * index.dtype.itemsize
    if size != need:
        return [
            f"{path.name}: size is {size} bytes, the idx needs {need} ({index.tokens} x {index.dtype})"
        ]
    if not vocab_size or not index.tokens:
        return []
    tokens = open_tokens(prefix, index.dtype)
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= vocab_size:
        return [
            f"{path.name}: token ids span [{lo}, {hi}], outside the vocabulary [0, {vocab_size})"
        ]
    return []


def _segment_problems(seg_name: str, table: pa.Table, index: IndexInfo) -> list[str]:
    lengths = table[schema.SEG_LENGTH].to_numpy()
    if len(lengths) != len(index.sequence_lengths):
        return [
            f"{seg_name}: rows: expected {len(index.sequence_lengths)} (idx sequences), found {len(lengths)}"
        ]
    bad = np.flatnonzero(lengths != index.sequence_lengths)
    if not bad.size:
        return []
    i = int(bad[0])
    return [
        f"{seg_name}: {schema.SEG_LENGTH}[{i}]: expected {index.sequence_lengths[i]} "
        f"(idx sequence_lengths), found {lengths[i]} ({bad.size} rows differ)"
    ]


def _packing_problems(idx_name: str, index: IndexInfo, seq_len: int) -> tuple[int, list[str]]:
    """Padding the loader will add, and any packed sequence longer than ``seq_len``.

    ``seq_len`` 0 means the set is not pre-packed: no limit and no padding.
    """
    if seq_len <= 0:
        return 0, []
    packed = index.packed_lengths
    over = np.flatnonzero(packed > seq_len)
    padding = int((seq_len - packed[packed <= seq_len]).sum())
    if not over.size:
        return padding, []
    j = int(over[0])
    return padding, [
        f"{idx_name}: packed sequence {j} has {packed[j]} tokens, more than seq_len {seq_len} "
        f"({over.size} sequences too long)"
    ]


def count_shard(
    prefix: Path | str,
    *,
    seq_len: int,
    dtype: str | None = None,
    vocab_size: int | None = None,
) -> tuple[ShardCounts | None, list[str]]:
    """Re-count a shard from its ``.idx``, ``.bin`` and segment table.

    Returns the counts (None when the idx or segment table cannot be read) and
    every problem found on the way; ``dtype`` and ``vocab_size`` add checks of
    the idx dtype and of the token id range (a full pass over the ``.bin``).
    """
    prefix = Path(prefix)
    idx_name, seg_name = shard_file(prefix, "idx").name, shard_file(prefix, "seg").name
    try:
        index = read_index(shard_file(prefix, "idx"))
        table = read_segments(prefix)
    except ShardFormatError as e:
        return None, [f"{Path(e.path).name}: {e.what}"]
    except (OSError, pa.ArrowInvalid) as e:
        return None, [f"{prefix.name}: cannot read: {e}"]
    problems = [f"{idx_name}: {p}" for p in index_problems(index)]
    if dtype is not None and index.dtype.name != dtype:
        problems.append(
            f"{idx_name}: dtype: expected {dtype} (manifest token_dtype), found {index.dtype.name}"
        )
    problems += _bin_problems(prefix, index, vocab_size)
    problems += _segment_problems(seg_name, table, index)
    padding, packing = _packing_problems(idx_name, index, seq_len)
    offsets = table[schema.SEG_DOC_OFFSET]
    counts = ShardCounts(
        tokens=index.tokens,
        documents=int(pc.sum(pc.equal(offsets, 0)).as_py() or 0),
        segments=len(index.sequence_lengths),
        sequences=len(index.document_indices) - 1,
        padding_tokens=padding,
        tokens_by_lang=_tokens_by(table, schema.LANG),
        tokens_by_source=_tokens_by(table, schema.SOURCE),
    )
    return counts, problems + packing


def record_shard(
    prefix: Path | str,
    files: dict[str, FileInfo],
    *,
    seq_len: int,
    loss_tokens: int | None = None,
) -> ShardRecord:
    """The manifest record of a freshly written shard, counted from its files.

    Counting from the files (with the same code ``verify`` uses) rather than
    trusting the writer's own tallies means a manifest that is written can be verified.
    ``loss_tokens`` defaults to every token (pretraining); SFT sets pass theirs.
    """
    counts, problems = count_shard(prefix, seq_len=seq_len)
    if counts is None or problems:
        raise ValueError(f"shard {prefix} is inconsistent: " + "; ".join(problems))
    return ShardRecord(
        prefix=Path(prefix).name,
        files=dict(files),
        loss_tokens=counts.tokens if loss_tokens is None else loss_tokens,
        **asdict(counts),
    )


# --- building and writing manifests ----------------------------------------------------


def megatron_data_path(shard_tokens: list[tuple[str, int]]) -> list[str]:
    """Megatron ``--data-path`` weight/prefix pairs, weights by tokens; empty shards left out.

    >>> megatron_data_path([("part-00000", 3), ("part-00001", 1), ("part-00002", 0)])
    ['0.750000', 'part-00000', '0.250000', 'part-00001']
    """
    total = sum(tokens for _, tokens in shard_tokens)
    pairs = [[f"{tokens / total:.6f}", prefix] for prefix, tokens in shard_tokens if tokens]
    return [item for pair in pairs for item in pair]


def _sum_by(dicts: list[dict[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for d in dicts:
        total.update(d)
    return dict(sorted(total.items()))


def _check_shard_records(set_dir: Path, shards: list[ShardRecord]) -> None:
    prefixes = [s.prefix for s in shards]
    if len(set(prefixes)) != len(prefixes):
        raise ValueError(f"duplicate shard prefixes in {prefixes}")
    for s in shards:
        if Path(s.prefix).name != s.prefix:
            raise ValueError(f"shard prefix {s.prefix!r} must be a file name inside {set_dir}")
        for key in REQUIRED_FILES:
            if key not in s.files:
                raise ValueError(f"shard {s.prefix} lists no {key!r} file")
        for key, info in s.files.items():
            if not store.exists(set_dir / info["path"]):  # on the driver: the shard may be another node's
                raise ValueError(
                    f"shard {s.prefix}: {key} file {set_dir / info['path']} does not exist"
                )


def build_set_manifest(
    *,
    name: str,
    set_dir: Path | str,
    shards: list[ShardRecord],
    tokenizer: dict[str, Any],
    token_dtype: str,
    seq_len: int,
    packing: dict[str, Any],
    recipe_hash: str,
    provenance: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest dict of one set; shards are listed in prefix order whatever order they came in.

    ``extra`` adds set-kind sections (e.g. ``long_context``); it cannot replace a standard key.

    ``packing`` must name ``algorithm`` and ``truncated_documents``; its
    ``sequences``, ``segments`` and ``padding_tokens`` are filled in from the
    shards (a conflicting value passed in is an error).
    """
    if token_dtype not in schema.MEGATRON_DTYPE_CODES.values():
        raise ValueError(
            f"token_dtype {token_dtype!r} is not a Megatron dtype: use uint16 or int32"
        )
    missing = {"algorithm", "truncated_documents"} - packing.keys()
    if missing:
        raise ValueError(f"packing lacks {sorted(missing)}")
    shards = sorted(shards, key=lambda s: s.prefix)
    _check_shard_records(Path(set_dir), shards)
    totals = {k: sum(getattr(s, k) for s in shards) for k in SHARD_COUNTS}
    filled = {k: totals[k] for k in ("sequences", "segments", "padding_tokens")}
    for k, v in filled.items():
        if k in packing and packing[k] != v:
            raise ValueError(f"packing.{k} is {packing[k]} but the shards add up to {v}")
    return {
        "format_version": FORMAT_VERSION,
        "kind": schema.SET_MANIFEST_KIND,
        "name": name,
        "codecorpus_version": codecorpus_version(),
        "recipe_hash": recipe_hash,
        "tokenizer": tokenizer,
        "token_dtype": token_dtype,
        "seq_len": seq_len,
        "packing": {**packing, **filled},
        "totals": totals,
        "shards": [s.to_json() for s in shards],
        "tokens_by_lang": _sum_by([s.tokens_by_lang for s in shards]),
        "tokens_by_source": _sum_by([s.tokens_by_source for s in shards]),
        "provenance": provenance,
        "megatron": megatron_section([(s.prefix, s.tokens, s.segments, s.sequences) for s in shards]),
        **_checked_extra(extra),
    }


def set_kind(m: dict[str, Any]) -> str:
    """The kind of set a set manifest describes: ``sft`` or ``edit`` (its ``kind_of_set``, written
    by the SFT and edit-set packers), ``long`` (its ``set_kind``, beside ``long_context``), else
    ``short``. Two keys for one fact, read here as they were written: renaming either would change
    every such manifest's bytes.

    >>> [set_kind(m) for m in ({"kind_of_set": "edit"}, {"set_kind": "long", "long_context": {}}, {})]
    ['edit', 'long', 'short']
    """
    return m.get("kind_of_set") or m.get("set_kind") or ("long" if "long_context" in m else "short")


def _checked_extra(extra: dict[str, Any] | None) -> dict[str, Any]:
    clash = sorted(set(extra or {}) & set(_SET_KEYS))
    if clash:
        raise ValueError(f"extra manifest sections {clash} would replace standard keys")
    return dict(extra or {})


def megatron_section(shards: list[tuple[str, int, int, int]]) -> dict[str, Any]:
    """Megatron launch data from (prefix, tokens, segments, packed sequences) of each shard.

    ``sequences_per_dataset`` is what Megatron-Core's ``--per-dataset-sequences-path``
    JSON holds: per prefix, the idx sequence count and document count
    (``len(document_indices)``), which lets it skip reading every ``.idx`` header.
    The same mapping is written to ``schema.MEGATRON_SEQUENCES_FILE`` beside the manifest.
    ``split_floor`` states which ``--split`` values every blend member can serve
    (``splits.split_statement``).

    >>> megatron_section([("part-00000", 10, 3, 2)])["sequences_per_dataset"]
    {'part-00000': [3, 3]}
    """
    return {
        "data_path": megatron_data_path([(p, t) for p, t, _, _ in shards]),
        "sequences_per_dataset": {p: [seg, seqs + 1] for p, t, seg, seqs in shards if t},
        "sequences_file": schema.MEGATRON_SEQUENCES_FILE,
        "split_floor": splits.split_statement([seqs for _, t, _, seqs in shards if t]),
    }


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, sort_keys=True, indent=2, allow_nan=False) + "\n").encode()


def write_manifest(path: Path | str, manifest: dict[str, Any]) -> None:
    """Write a manifest atomically; call it after every file it lists is in place.

    A set manifest's Megatron sequences JSON is written just before it.
    """
    if manifest.get("kind") == schema.SET_MANIFEST_KIND and "megatron" in manifest:
        sequences = manifest["megatron"].get("sequences_per_dataset", {})
        body = json.dumps(sequences, sort_keys=True, indent=2) + "\n"
        atomic_write_bytes(Path(path).parent / schema.MEGATRON_SEQUENCES_FILE, body.encode())
    atomic_write_bytes(path, manifest_bytes(manifest))


def build_run_manifest(
    run_dir: Path | str, set_manifest_paths: list[Path], files: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The run manifest: every set by name, with its manifest's path, sha256 and totals; and
    ``files``, other outputs by name (``{path, sha256, bytes, records}``, e.g. JSONL task files)."""
    run_dir = Path(run_dir).resolve()
    sets: dict[str, Any] = {}
    for path in sorted(Path(p).resolve() for p in set_manifest_paths):
        if not path.is_relative_to(run_dir):
            raise ValueError(f"set manifest {path} is outside the run directory {run_dir}")
        m = json.loads(path.read_text())
        if m["name"] in sets:
            raise ValueError(
                f"two sets are named {m['name']!r}: {sets[m['name']]['path']} and {path}"
            )
        sets[m["name"]] = {
            "path": path.relative_to(run_dir).as_posix(),
            "sha256": sha256_file(path),
            "totals": m["totals"],
        }
    return {
        "format_version": FORMAT_VERSION,
        "kind": schema.RUN_MANIFEST_KIND,
        "codecorpus_version": codecorpus_version(),
        "sets": sets,
        **({"files": dict(sorted(files.items()))} if files else {}),
    }


def write_run_manifest(run_dir: Path | str, manifest: dict[str, Any]) -> Path:
    path = schema.RunPaths(Path(run_dir)).manifest
    write_manifest(path, manifest)
    return path


# --- verification ------------------------------------------------------------------------


def _load(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return json.loads(path.read_text()), None
    except FileNotFoundError:
        return None, f"{path}: missing"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"{path}: not a readable JSON manifest: {e}"


def _structure_problems(m: dict[str, Any]) -> list[str]:
    problems = [f"{schema.MANIFEST_NAME}: field {k!r} is missing" for k in _SET_KEYS if k not in m]
    if m.get("kind") != schema.SET_MANIFEST_KIND:
        problems.append(
            f"{schema.MANIFEST_NAME}: kind: expected {schema.SET_MANIFEST_KIND!r}, found {m.get('kind')!r}"
        )
    if m.get("format_version") != FORMAT_VERSION:
        problems.append(
            f"{schema.MANIFEST_NAME}: format_version: expected {FORMAT_VERSION}, found {m.get('format_version')!r}"
        )
    for i, s in enumerate(m.get("shards") or []):
        problems += [
            f"{schema.MANIFEST_NAME}: shards[{i}] lacks {k!r}" for k in _SHARD_KEYS if k not in s
        ]
        files = s.get("files", {})
        problems += [
            f"{schema.MANIFEST_NAME}: shards[{i}].files lacks {k!r}"
            for k in REQUIRED_FILES
            if k not in files
        ]
    return problems


def _file_problems(set_dir: Path, prefix: str, files: dict[str, FileInfo]) -> list[str]:
    problems = []
    for key, info in sorted(files.items()):
        expected_name = shard_file(prefix, key).name if key in schema.SHARD_FILE_SUFFIXES else None
        if expected_name and info["path"] != expected_name:
            problems.append(
                f"shard {prefix}: files.{key}.path: expected {expected_name!r}, found {info['path']!r}"
            )
        path = set_dir / info["path"]
        if not path.is_file():
            problems.append(f"{info['path']}: missing (listed as shard {prefix} files.{key})")
            continue
        size = path.stat().st_size
        if size != info["bytes"]:
            problems.append(
                f"{info['path']}: bytes: expected {info['bytes']} (manifest), found {size}"
            )
        elif (digest := sha256_file(path)) != info["sha256"]:
            problems.append(
                f"{info['path']}: sha256: expected {info['sha256']} (manifest), found {digest}"
            )
    return problems


def _compare(where: str, claimed: dict[str, Any], actual: dict[str, Any], source: str) -> list[str]:
    return [
        f"{where}.{k}: expected {actual[k]!r} (recounted from {source}), found {claimed.get(k)!r}"
        for k in actual
        if claimed.get(k) != actual[k]
    ]


def _shard_problems(set_dir: Path, m: dict[str, Any], i: int) -> tuple[dict[str, Any], list[str]]:
    """Check one shard's files and record; return its counts (re-counted where possible)."""
    s = m["shards"][i]
    problems = _file_problems(set_dir, s["prefix"], s["files"])
    if any(not (set_dir / s["files"][k]["path"]).is_file() for k in REQUIRED_FILES):
        return {k: s[k] for k in _SHARD_KEYS[2:]}, problems
    counts, found = count_shard(
        set_dir / s["prefix"],
        seq_len=m["seq_len"],
        dtype=m["token_dtype"],
        vocab_size=m["tokenizer"].get("vocab_size"),
    )
    problems += found
    if counts is None:
        return {k: s[k] for k in _SHARD_KEYS[2:]}, problems
    actual = asdict(counts)
    if "mask" not in s["files"]:
        actual["loss_tokens"] = counts.tokens
    else:
        loss, mask_problems = _mask_count(set_dir / s["prefix"], counts.tokens)
        problems += mask_problems
        if loss is not None:
            actual["loss_tokens"] = loss
    where = f"{schema.MANIFEST_NAME} shards[{i}] ({s['prefix']})"
    problems += _compare(where, s, actual, f"{s['prefix']}.*")
    return {**{k: s[k] for k in _SHARD_KEYS[2:]}, **actual}, problems


def _mask_count(prefix: Path, tokens: int) -> tuple[int | None, list[str]]:
    """Loss tokens recounted from ``.mask.bin`` (one uint8 per token, 0 or 1)."""
    from codecorpus.manifests.megatron import open_loss_mask

    name = shard_file(prefix, "mask").name
    mask = open_loss_mask(prefix)
    if len(mask) != tokens:
        return None, [f"{name}: {len(mask)} mask bytes, expected one per token ({tokens})"]
    if len(mask) and int(mask.max()) > 1:
        return None, [f"{name}: mask values must be 0 or 1, found {int(mask.max())}"]
    return int(mask.sum(dtype=np.int64)), []


def _set_level_problems(m: dict[str, Any], per_shard: list[dict[str, Any]]) -> list[str]:
    src = "the shard files"
    totals = {k: sum(c[k] for c in per_shard) for k in SHARD_COUNTS}
    sums = {
        "tokens_by_lang": _sum_by([c["tokens_by_lang"] for c in per_shard]),
        "tokens_by_source": _sum_by([c["tokens_by_source"] for c in per_shard]),
        "megatron": megatron_section([
            (s["prefix"], c["tokens"], c["segments"], c["sequences"])
            for s, c in zip(m["shards"], per_shard, strict=True)
        ]),
    }  # fmt: skip
    packing = {k: totals[k] for k in ("sequences", "segments", "padding_tokens")}
    problems = _compare(f"{schema.MANIFEST_NAME} totals", m["totals"], totals, src)
    problems += _compare(f"{schema.MANIFEST_NAME} packing", m["packing"], packing, src)
    problems += _compare(schema.MANIFEST_NAME, m, sums, src)
    vocab = m["tokenizer"].get("vocab_size")
    if vocab is not None and token_dtype(vocab).name != m["token_dtype"]:
        problems.append(
            f"{schema.MANIFEST_NAME} token_dtype: expected {token_dtype(vocab).name} "
            f"for vocab_size {vocab}, found {m['token_dtype']!r}"
        )
    return problems


def _blend_members(m: dict[str, Any], per_shard: list[dict[str, Any]]) -> dict[str, int]:
    """Prefix -> packed sequences (recounted) of every shard in the Megatron blend."""
    return {s["prefix"]: c["sequences"] for s, c in zip(m["shards"], per_shard, strict=True) if c["tokens"]}


def _floor_problems(members: dict[str, int]) -> list[str]:
    """Blend members below the floor; a set that is one shard in all may be below it."""
    if len(members) < 2:
        return []
    problems = []
    for prefix, n in sorted(members.items()):
        if n < splits.SHARD_FLOOR:
            empty = [s for s in splits.LAUNCH_SPLITS if not splits.serves(n, s)]
            problems.append(
                f"shard {prefix}: {n} packed sequences, below the floor of {splits.SHARD_FLOOR} per shard: "
                f"Megatron's --split {' / '.join(empty)} would give one of its splits no sequence and never "
                "finish building; repack the set (codecorpus merges shards below the floor)"
            )
    return problems


def verify_set(manifest_path: Path | str, split: str | None = None) -> list[str]:
    """Every problem with a set: its manifest against its files, re-hashed and re-counted.

    ``split`` (a Megatron ``--split`` such as ``969,30,1``) adds a problem for
    every blend member that would leave one of its splits empty.
    """
    manifest_path = Path(manifest_path)
    m, error = _load(manifest_path)
    if m is None:
        return [error or f"{manifest_path}: unreadable"]
    problems = _structure_problems(m)
    if problems:
        return problems
    per_shard = []
    for i in range(len(m["shards"])):
        counts, found = _shard_problems(manifest_path.parent, m, i)
        per_shard.append(counts)
        problems += found
    problems += _set_level_problems(m, per_shard)
    problems += _sequences_file_problems(manifest_path.parent, m)
    members = _blend_members(m, per_shard)
    problems += _floor_problems(members)
    if split is not None:
        problems += splits.split_problems(members, split)
    if "long_context" in m:
        problems += long_context_problems(manifest_path.parent, m)
    return problems


def _sequences_file_problems(set_dir: Path, m: dict[str, Any]) -> list[str]:
    name = m["megatron"].get("sequences_file")
    if name is None:
        return [f"{schema.MANIFEST_NAME} megatron.sequences_file is missing"]
    found, error = _load(set_dir / name)
    if found is None:
        return [error or f"{name}: unreadable"]
    expected = m["megatron"].get("sequences_per_dataset")
    return [] if found == expected else [f"{name}: expected {expected} (manifest), found {found}"]


def recount_long_context(set_dir: Path, m: dict[str, Any]) -> dict[str, Any]:
    """Single-repository sequence counts and the sequence length histogram, from the shard files.

    A segment's repository is its ``doc_id`` without the ``#k`` of an upsampled copy.
    """
    single = single_tokens = 0
    hist: Counter[str] = Counter()
    for s in m["shards"]:
        index = read_index(shard_file(set_dir / s["prefix"], "idx"))
        repos = [d.split("#")[0] for d in read_segments(set_dir / s["prefix"])[schema.SEG_DOC_ID].to_pylist()]
        packed = index.packed_lengths
        for j in range(len(packed)):
            lo, hi = int(index.document_indices[j]), int(index.document_indices[j + 1])
            hist[f"<=2^{max(0, int(np.ceil(np.log2(max(int(packed[j]), 1)))))}"] += 1
            if len(set(repos[lo:hi])) == 1:
                single += 1
                single_tokens += int(packed[j])
    return {
        "sequences": int(sum(hist.values())),
        "single_repo_sequences": single,
        "single_repo_tokens": single_tokens,
        "sequence_tokens_histogram": dict(hist),
    }


def long_context_problems(set_dir: Path, m: dict[str, Any]) -> list[str]:
    try:
        actual = recount_long_context(set_dir, m)
    except (OSError, ValueError, KeyError, pa.ArrowInvalid) as e:
        return [f"{schema.MANIFEST_NAME} long_context: cannot recount from the shards: {e}"]
    claimed = dict(m["long_context"])
    claimed["sequence_tokens_histogram"] = dict(claimed.get("sequence_tokens_histogram", {}))
    return _compare(f"{schema.MANIFEST_NAME} long_context", claimed, actual, "the shard files")


def verify_run(run_manifest_path: Path | str, split: str | None = None) -> list[str]:
    """Every problem with a run: each listed set's manifest hash and totals, then the set itself."""
    path = Path(run_manifest_path)
    m, error = _load(path)
    if m is None:
        return [error or f"{path}: unreadable"]
    if m.get("kind") != schema.RUN_MANIFEST_KIND:
        return [f"{path}: kind: expected {schema.RUN_MANIFEST_KIND!r}, found {m.get('kind')!r}"]
    problems = []
    for name, entry in sorted(m.get("sets", {}).items()):
        set_path = store.ensure_local(path.parent / entry["path"])
        if not set_path.is_file():
            problems.append(f"{path.name}: sets.{name}: {entry['path']} is missing")
            continue
        if (digest := sha256_file(set_path)) != entry["sha256"]:
            problems.append(
                f"{entry['path']}: sha256: expected {entry['sha256']} (run manifest), found {digest}"
            )
        set_m, _ = _load(set_path)
        if set_m is not None and set_m.get("totals") != entry.get("totals"):
            problems.append(
                f"{path.name}: sets.{name}.totals: expected {set_m.get('totals')} ({entry['path']}), found {entry.get('totals')}"
            )
        problems += [f"set {name}: {p}" for p in verify_set(set_path, split)]
    for name, entry in sorted(m.get("files", {}).items()):
        problems += _listed_file_problems(path.parent, name, entry)
    return problems


def _listed_file_problems(root: Path, name: str, entry: dict[str, Any]) -> list[str]:
    """A file the run manifest lists: present, same sha256 and bytes, same count of JSON lines."""
    target = store.ensure_local(root / entry["path"])
    if not target.is_file():
        return [f"{schema.MANIFEST_NAME}: files.{name}: {entry['path']} is missing"]
    problems = []
    if (digest := sha256_file(target)) != entry["sha256"]:
        problems.append(f"{entry['path']}: sha256: expected {entry['sha256']} (run manifest), found {digest}")
    if (size := target.stat().st_size) != entry["bytes"]:
        problems.append(f"{entry['path']}: bytes: expected {entry['bytes']} (run manifest), found {size}")
    if "records" in entry:
        with target.open("rb") as f:
            lines = sum(1 for _ in f)
        if lines != entry["records"]:
            problems.append(f"{entry['path']}: records: expected {entry['records']} (run manifest), found {lines}")
    return problems


def _resolve(path: Path | str) -> Path:
    """The manifest a path names: a folder's ``manifest.json``, or an export folder's sidecar."""
    from codecorpus.manifests import hf

    path = Path(path)
    if not path.is_dir():
        return path
    if not (path / schema.MANIFEST_NAME).exists() and hf.is_export(path):
        return path / hf.EXPORT_NAME
    return path / schema.MANIFEST_NAME


def verify(path: Path | str, split: str | None = None) -> list[str]:
    """Verify a run, a set or an export: ``path`` is a run dir, a set dir, a manifest.json, or an
    ``export-hf`` folder (``hf.verify_export``).

    ``split``: also check that every blend member serves this Megatron ``--split``.
    """
    if split is not None:
        splits.split_matrix(split)  # a malformed split is the caller's error, not the set's
    path = _resolve(path)
    m, error = _load(path)
    if m is None:
        return [error or f"{path}: unreadable"]
    kind = m.get("kind")
    if kind == schema.RUN_MANIFEST_KIND:
        return verify_run(path, split)
    if kind == schema.SET_MANIFEST_KIND:
        return verify_set(path, split)
    if kind == schema.RL_MANIFEST_KIND:  # rl imports jsonschema and the environment spec: no job needs them
        from codecorpus.manifests import rl

        return rl.verify(path)
    from codecorpus.manifests import hf

    if kind == hf.EXPORT_KIND:  # an export-hf folder: re-counted against its set manifest
        return hf.verify_export(path)
    return [
        f"{path}: kind: expected {schema.RUN_MANIFEST_KIND!r} or {schema.SET_MANIFEST_KIND!r}, found {kind!r}"
    ]


def split_notes(path: Path | str) -> list[str]:
    """For each set that is one shard below the floor: which launch splits it serves, and which not.

    Not a problem (the set holds fewer packed sequences than the floor in all),
    but a launcher must not ask it for a split it cannot serve.
    """
    path = _resolve(path)
    m, _ = _load(path)
    if m is None:
        return []
    if m.get("kind") == schema.RUN_MANIFEST_KIND:
        return [note for entry in sorted(m.get("sets", {}).values(), key=lambda e: e["path"])
                for note in split_notes(path.parent / entry["path"])]  # fmt: skip
    statement = m.get("megatron", {}).get("split_floor")
    if not statement or not 0 < statement["smallest_member_sequences"] < statement["floor"]:
        return []
    order = [s for s in splits.LAUNCH_SPLITS if s in statement["serves"]]  # the JSON sorted its keys
    served = [s for s in order if statement["serves"][s]]
    unserved = [s for s in order if not statement["serves"][s]]
    return [
        f"set {m.get('name')}: one shard of {statement['smallest_member_sequences']} packed sequences, below "
        f"the floor of {statement['floor']} (the whole set): it serves --split {', '.join(served) or 'none'}; "
        f"not {', '.join(unserved)}; any split whose non-zero weights are all above "
        f"{statement['min_split_weight']} of the total"
    ]


# --- human summary -----------------------------------------------------------------------


def _show_set(m: dict[str, Any], top: int = 8) -> list[str]:
    t, tok, pack = m["totals"], m["tokenizer"], m["packing"]
    packed = t["tokens"] + t["padding_tokens"]
    langs = sorted(m["tokens_by_lang"].items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    share = ", ".join(f"{k} {v / max(t['tokens'], 1):.1%}" for k, v in langs)
    return [
        f"set {m['name']}  (format {m['format_version']}, codecorpus {m['codecorpus_version']}, recipe {m['recipe_hash']})",
        f"  tokenizer   {tok.get('name')}  vocab {tok.get('vocab_size')}  eos {tok.get('eos_id')}",
        f"  dtype       {m['token_dtype']}  seq_len {m['seq_len']}  packing {pack.get('algorithm')}",
        f"  tokens      {t['tokens']:,}  loss {t['loss_tokens']:,}",
        f"  documents   {t['documents']:,}  segments {t['segments']:,}  sequences {t['sequences']:,}  "
        f"truncated {pack.get('truncated_documents', 0):,}",
        f"  padding     {t['padding_tokens']:,} ({t['padding_tokens'] / max(packed, 1):.2%} of packed tokens)",
        f"  languages   {share}",
        f"  shards      {len(m['shards'])}",
        f"  data_path   {' '.join(m['megatron']['data_path'])}",
        *_show_extras(m),
    ]


def _show_extras(m: dict[str, Any]) -> list[str]:
    """The splits the blend serves, FIM counts and long-context statistics, when the set has them."""
    lines = []
    floor = m["megatron"].get("split_floor")
    if floor and floor["smallest_member_sequences"]:
        served = [s for s in splits.LAUNCH_SPLITS if floor["serves"].get(s)]
        lines.append(f"  splits      smallest shard {floor['smallest_member_sequences']:,} packed sequences "
                     f"(floor {floor['floor']}); serves --split {', '.join(served)}")  # fmt: skip
    fim = m["packing"].get("fim")
    if fim:
        lines.append(f"  fim         rate {fim['rate']}  documents {fim['fim_documents']:,} "
                     f"(PSM {fim['fim_psm']:,}, SPM {fim['fim_spm']:,})")  # fmt: skip
    lc = m.get("long_context")
    if lc:
        lines.append(
            f"  long        {lc['repositories']:,} repositories, {lc['sequences']:,} sequences, "
            f"{lc['single_repo_sequences']:,} single-repo ({lc['single_repo_token_share']:.1%} of tokens), "
            f"{lc['continuations']:,} continuations"
        )
        lines.append(f"  lengths     {lc['sequence_tokens_histogram']}")
    return lines


def show(path: Path | str) -> str:
    """A readable summary of a set or run manifest, for ``codecorpus manifest show``."""
    path = _resolve(path)
    m = json.loads(path.read_text())
    if m.get("kind") == schema.SET_MANIFEST_KIND:
        return "\n".join(_show_set(m))
    if m.get("kind") == schema.RL_MANIFEST_KIND:
        from codecorpus.manifests import rl

        return "\n".join(rl.show(m))
    from codecorpus.manifests import hf

    if m.get("kind") == hf.EXPORT_KIND:
        return "\n".join(hf.show_export(m))
    lines = [f"run {path.parent}  ({len(m.get('sets', {}))} sets)"]
    for name, entry in sorted(m.get("sets", {}).items()):
        set_m, error = _load(path.parent / entry["path"])
        lines += _show_set(set_m) if set_m else [f"set {name}: {error}"]
    return "\n".join(lines)
