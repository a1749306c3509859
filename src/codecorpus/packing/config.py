"""Config of the pack stage and of the output sets (``stages.pack``, ``outputs:``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from codecorpus.mixing.config import MixConfig
from codecorpus.model import Model
from codecorpus.tokenize.config import FimConfig

DEFAULT_SEQ_LEN = {"short": 8192, "long": 262144}


class PackConfig(Model):
    algorithm: Literal["bfd"] = "bfd"


class LongContextConfig(Model):
    """Repository-level documents for a ``kind: long`` set."""

    markers: Literal["special", "text"] = Field(
        "special", description="special: <|repo_name|>/<|file_sep|> tokens; text: path comments"
    )
    repo_token: str = "<|repo_name|>"
    file_token: str = "<|file_sep|>"
    dependency_order: bool = Field(True, description="files after the in-repo files they import")
    buckets: int = Field(16, gt=0, description="at least this many repository hash partitions (one shard each, small ones merged)")
    bucket_tokens: int = Field(
        8_000_000, gt=0,
        description="more partitions when the set holds more than buckets x this many tokens: "
        "an assemble job needs about 25 bytes per token of its partition",
    )
    short_doc_tokens: int = Field(
        8192, ge=0, description="a repository document below this many tokens is a short document"
    )
    short_doc_share: float | None = Field(
        None, ge=0, lt=1, description="at most this token share of short documents; null keeps all"
    )
    upsample: dict[str, float] = Field(
        default_factory=dict,
        description="source name -> factor for repository documents of >= upsample_min_tokens",
    )
    upsample_min_tokens: int = Field(32768, ge=0)

    @model_validator(mode="after")
    def _factors(self) -> LongContextConfig:
        bad = {k: v for k, v in self.upsample.items() if not 0 < v <= 64}
        if bad:
            raise ValueError(f"upsample factors must be in (0, 64], got {bad}")
        return self


class OutputSet(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["short", "long", "sft"] = "short"
    seq_len: int = Field(8192, ge=16, le=1 << 24, description="default 8192 (short), 262144 (long)")
    fim: FimConfig | None = Field(None, description="FIM per file document (long: per file in a repo)")
    long: LongContextConfig | None = Field(None, description="settings of a kind: long set")
    mix: MixConfig | None = Field(None, description="target mixture and token budget")

    @model_validator(mode="before")
    @classmethod
    def _kind_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            kind = data.get("kind", "short")
            data = dict(data)
            if "seq_len" not in data and kind in DEFAULT_SEQ_LEN:
                data["seq_len"] = DEFAULT_SEQ_LEN[kind]
            if kind == "long" and data.get("long") is None:
                data["long"] = {}
        return data

    @model_validator(mode="after")
    def _long_only(self) -> OutputSet:
        if self.long is not None and self.kind != "long":
            raise ValueError(f"outputs {self.name}: `long:` settings need kind: long")
        return self
