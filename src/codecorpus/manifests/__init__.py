"""Token shards (Megatron ``.bin``/``.idx`` + segment tables), set and run manifests, verify.

Numpy and pyarrow only: importing this package never imports torch, megatron or ray.
"""

from codecorpus.manifests.loader import PackedLoader
from codecorpus.manifests.manifest import (
    ShardRecord,
    build_run_manifest,
    build_set_manifest,
    count_shard,
    record_shard,
    show,
    verify,
    verify_run,
    verify_set,
    write_manifest,
    write_run_manifest,
)
from codecorpus.manifests.megatron import (
    DTYPE_CODES,
    FileInfo,
    IndexInfo,
    ShardFormatError,
    open_tokens,
    read_index,
    read_segments,
    shard_file,
    token_dtype,
    write_indexed_dataset,
    write_segments,
)

__all__ = [
    "DTYPE_CODES",
    "FileInfo",
    "IndexInfo",
    "PackedLoader",
    "ShardFormatError",
    "ShardRecord",
    "build_run_manifest",
    "build_set_manifest",
    "count_shard",
    "open_tokens",
    "read_index",
    "read_segments",
    "record_shard",
    "shard_file",
    "show",
    "token_dtype",
    "verify",
    "verify_run",
    "verify_set",
    "write_indexed_dataset",
    "write_manifest",
    "write_run_manifest",
    "write_segments",
]
