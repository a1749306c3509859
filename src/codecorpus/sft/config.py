"""Config of the SFT / agent-trace pipeline: its source and its six stages."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from codecorpus.filters.config import DecontamConfig, RedactConfig
from codecorpus.model import Model


class TracesSource(Model):
    """Conversation / agent-trace files: JSONL, whole-file JSON (an object or an array of
    traces) and SWE-agent ``.traj`` files; a file, a folder of them, or a glob.

    ``path`` may be local or ``s3://bucket/prefix``; ``.gz`` and ``.zst`` files are
    decompressed on the fly. ``format: auto`` detects each record's style from its keys.
    """

    type: Literal["traces"]
    name: str = Field(min_length=1)
    path: str
    format: Literal["auto", "openai", "sharegpt", "swe-agent"] = "auto"
    license: str = "unknown"


class SftIngestConfig(Model):
    """Read JSONL trace files into canonical trace rows; bad records are counted drops."""

    shard_bytes: int = Field(64_000_000, gt=0, description="small files are grouped into shards of about this many bytes")
    max_record_bytes: int = Field(16_000_000, gt=0, description="longer JSONL lines are dropped (record_too_large)")
    max_json_depth: int = Field(64, ge=4, le=10_000, description="deeper-nested records are dropped (too_deep)")


class SftValidateConfig(Model):
    """Structural checks; every rule is always on (a broken trace cannot be rendered)."""

    allow_trailing_tool_calls: bool = Field(
        True, description="a trace may end with tool calls that got no result (e.g. a final submit)"
    )


class SftSelectConfig(Model):
    """Selection, decontamination and redaction of valid traces."""

    outcomes: tuple[Literal["resolved", "unresolved", "submitted", "incomplete", "unknown"], ...] | None = Field(
        None, description="keep only these outcomes (e.g. [resolved]); null keeps all"
    )
    min_chars: int = Field(1, ge=0)
    max_chars: int = Field(2_000_000, gt=0)
    min_assistant_turns: int = Field(1, ge=0)
    max_assistant_turns: int = Field(1000, gt=0)
    max_tool_error_rate: float = Field(1.0, ge=0, le=1, description="share of tool results that are errors")
    tool_error_patterns: tuple[str, ...] = Field(
        (r"Traceback \(most recent call last\)", r"(?m)^\w*Error: ", r"command not found",
         r"No such file or directory", r"(?i)exit (?:code|status):? *[1-9]"),
        description="regexes; a tool result matching any is an error",
    )
    decontam_task_ids: tuple[str, ...] = Field(
        (), description="files of benchmark task ids (one per line, e.g. SWE-bench instance ids)"
    )
    decontam: DecontamConfig | None = Field(
        default_factory=DecontamConfig,
        description="benchmark n-gram decontamination of the conversation text, the filters' keys "
        "(humaneval, files, ngram, threshold, min_exact_tokens); null: none",
    )
    redact: RedactConfig | None = Field(
        default_factory=RedactConfig,
        description="PII and secrets redaction of every message and tool-call argument, the filters' keys; null: none",
    )

    @model_validator(mode="before")
    @classmethod
    def _replaced_keys(cls, data: Any) -> Any:
        """Keys of the first SFT selection, replaced by the filters' config models."""
        replaced = {
            "decontam_texts": "decontam.files (a list of {name, path, text_fields, id_field})",
            "decontam_ngram": "decontam.ngram (token n-grams) and decontam.threshold",
            "redact_pii": "redact (a mapping of the filters' redaction keys, {} for defaults, or null for none)",
        }
        old = sorted(set(data) & set(replaced)) if isinstance(data, dict) else []
        if old:
            raise ValueError(f"sft_select.{old[0]} was replaced: use sft_select.{replaced[old[0]]}")
        return data


class SftDedupConfig(Model):
    """Exact and MinHash-LSH near-duplicate removal over the conversation text."""

    exact: bool = True
    near: bool = True
    threshold: float = Field(0.8, gt=0, le=1, description="estimated Jaccard at or above which traces are near-duplicates")
    num_perm: int = Field(128, ge=16, le=1024)
    bands: int = Field(16, ge=1, description="LSH bands; num_perm must be a multiple")
    ngram: int = Field(5, ge=1, description="word shingle size")
    buckets: int = Field(8, gt=0, description="hash partitions of the band shuffle")

    @model_validator(mode="after")
    def _bands_divide(self) -> SftDedupConfig:
        if self.num_perm % self.bands:
            raise ValueError(f"num_perm ({self.num_perm}) must be a multiple of bands ({self.bands})")
        return self


class SftRenderConfig(Model):
    """Chat template, loss-mask switches and splitting of traces longer than the context."""

    chat_template: str | None = Field(
        None, description="a Jinja chat template file; default: the tokenizer's own, else built-in ChatML"
    )
    train_on_tool_calls: bool = True
    train_on_reasoning: bool = True
    train_on_system: bool = False
    split_long: bool = Field(True, description="split traces longer than seq_len at turn boundaries")
    special_tokens: Literal["escape", "drop"] | None = Field(
        None,
        description="a special-token string in the data (e.g. '<|im_start|>' in code): escape renders it as "
        "plain text (never the special id, counted in special_tokens_escaped), drop drops the trace "
        "(special_token_text); null: escape for edit examples, drop for conversations and agent traces",
    )
    summary_max_chars: int = Field(2000, ge=100, description="cap of an extractive continuation summary")


class SftPackConfig(Model):
    algorithm: Literal["bfd"] = "bfd"
