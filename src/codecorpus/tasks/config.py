"""Config models of the repository-history stages (frozen pydantic, like ``codecorpus.config``).

Each stage of ``codecorpus.tasks`` reads one of these; a recipe's
``stages.commits`` / ``stages.commit_filters`` / ... validate into them. No
algorithm code lives here.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from codecorpus.model import Model

BOT_AUTHORS = (
    r"\[bot\]", r"\bdependabot", r"\brenovate", r"\bgithub-actions", r"\bgreenkeeper", r"\bsnyk-bot",
    r"\bpre-commit-ci", r"\bmergify", r"\bimgbot", r"\ballcontributors", r"\bcodecov", r"\bpyup-bot",
    r"\bweblate\b", r"\btranslate-bot", r"\bdeepsource", r"\bcopilot-swe-agent",
)  # fmt: skip
"""Regular expressions (case-insensitive) over ``name <email>`` of a commit's author."""


class CommitsConfig(Model):
    """The commits source: one streamed ``git log`` walk per repository slice."""

    first_parent: bool = Field(
        True, description="walk the first-parent chain only (the changes as they landed: tasks); false: every "
        "commit of every parent too (the edit set's small commits), the mainline's still marked as changes"
    )
    since: dt.datetime | None = Field(
        None, description="only commits committed at or after this time (git's --since; no timezone: UTC)"
    )
    until: dt.datetime | None = Field(
        None, description="only commits committed at or before this time (git's --until; no timezone: UTC)"
    )
    max_commits_per_repo: PositiveInt | dict[str, PositiveInt] | None = Field(
        None, description="newest mainline changes kept per repository (with first_parent: false, the commits "
        "they landed too), or {owner/name: N} to bound only the repositories named; null: the whole history. "
        "What a bound leaves out is counted per repository"
    )
    github_metadata: str | None = Field(
        None, description="folder (local or s3://) of GitHub REST JSON per repository (owner__name.json or "
        "owner__name/*.json, as `gh api --paginate` writes pulls, issues and comments): issue texts for tasks"
    )
    commits_per_slice: int = Field(
        5000, gt=0, description="commits per job: a long history is cut into slices of the walk, one job each; "
        "small histories of consecutive repositories share a job up to this many commits"
    )
    batch_rows: int = Field(256, gt=0, description="rows per Arrow record batch the walk yields")
    bot_authors: tuple[str, ...] = Field(BOT_AUTHORS, description="author patterns dropped as `bot_author`")
    max_diff_bytes: int = Field(1_000_000, gt=0, description="longer unified diffs are dropped (diff_too_large)")
    max_files_changed: int = Field(100, gt=0, description="commits changing more files are dropped (too_many_files)")
    max_before_file_bytes: int = Field(
        1_000_000, gt=0, description="before-images larger than this are left out (listed in before_skipped)"
    )
    max_before_bytes: int = Field(
        4_000_000, gt=0, description="cap of all before-images of one commit; files past it are left out"
    )
    max_record_bytes: int = Field(
        64_000_000, gt=0, description="git log output of one commit above this is never buffered (diff_too_large)"
    )
    vendored_dirs: tuple[str, ...] = Field(
        ("node_modules", "vendor", "third_party", "bower_components", "site-packages",
         ".venv", "dist", "build", ".tox", "jspm_packages", "Pods", "Carthage"),
        description="directories of vendored code or build output (as ingest's)",
    )  # fmt: skip
    min_encoding_evidence: int = Field(
        8, ge=1, description="non-UTF-8 bytes needed before a detected encoding is trusted (as ingest's)"
    )


class CommitFiltersConfig(Model):
    """CommitPackFT's rules as score columns with thresholds (annotate, or filter with reasons)."""

    mode: Literal["filter", "annotate"] = "filter"
    min_message_chars: int = Field(10, ge=0, description="shorter subject+body is dropped (message_too_short)")
    max_message_chars: int = Field(10_000, gt=0, description="longer messages are dropped (message_too_long)")
    min_message_words: int = Field(3, ge=0, description="fewer words in the subject: message_too_few_words")
    max_message_words: int = Field(
        10_000, gt=0, description="more words in the message: message_too_many_words"
    )
    require_imperative: bool = Field(True, description="the subject's first word must be an imperative verb")
    drop_boilerplate: bool = Field(True, description="drop merge / bump version / update readme subjects")
    drop_urls: bool = Field(False, description="drop messages holding a URL (always flagged in has_url)")
    drop_issue_refs: bool = Field(False, description="drop messages referring to issues (#12, GH-12, JIRA-12)")
    max_files_changed: int = Field(
        1, gt=0, description="CommitPackFT keeps single-file commits; raise for multi-file edit examples"
    )
    max_code_before_bytes: int = Field(
        50_000, gt=0, description="sum of the before-images' bytes above this is dropped (code_before_too_large)"
    )
    langs: tuple[str, ...] | None = Field(None, description="languages allowed (Linguist names); null: any")
    licenses: tuple[str, ...] | None = Field(
        None, description="SPDX ids allowed; null: codecorpus's permissive list (dedup.keep)"
    )
    permissive_only: bool = Field(True, description="drop commits whose repository license is not permissive")


class CommitDedupConfig(Model):
    """Exact (``git patch-id --stable``) and MinHash near-duplicate removal of commits."""

    exact: bool = True
    near: bool = True
    ngram: int = Field(5, ge=1, le=64, description="tokens per shingle of the diff")
    num_perm: int = Field(128, ge=2, le=4096, description="MinHash permutations")
    threshold: float = Field(0.85, gt=0, lt=1, description="estimated Jaccard that makes a near-duplicate")
    seed: int = Field(42, description="MinHash seed")
    buckets: int = Field(4, ge=1, le=4096, description="hash buckets the keys are shuffled into (one job each)")
    keep_policy: tuple[Literal["license", "oldest", "repo", "sha"], ...] = Field(
        ("license", "oldest", "repo", "sha"),
        description="order that picks a cluster's keeper: permissive license first, then the oldest commit "
        "(the original, not the cherry-pick), then repository and sha names (always the last tie-break)",
    )


class TaskCandidatesConfig(Model):
    """Mainline changes that change tests and code, split into patch and test_patch: the tasks' own rules."""

    test_dirs: tuple[str, ...] = Field(
        ("test", "tests", "testing", "__tests__", "spec", "specs", "t", "testdata", "test_data"),
        description="a path with one of these directories is a test file",
    )
    min_patch_lines: int = Field(1, ge=1, description="changed code lines a candidate needs at least")
    max_patch_lines: int | None = Field(None, gt=0, description="more changed code lines: patch_too_large")
    max_patch_files: int | None = Field(50, gt=0, description="more changed non-test files: too_many_files")
    max_patch_hunks: int | None = Field(None, gt=0, description="more hunks in the patch: too_many_hunks")
    min_statement_chars: int = Field(10, ge=0, description="shorter problem statement: statement_too_short")
    max_statement_chars: int = Field(100_000, gt=0, description="longer problem statement: statement_too_long")
    drop_generated: bool = Field(True, description="drop changes touching generated or minified files")
    binary: Literal["keep", "drop"] = Field(
        "keep", description="keep: binary changes as git binary patches (they apply); drop: binary_patch"
    )
    require_linked_issue: bool = Field(
        False, description="only pull requests that close an issue of the metadata (SWE-bench's rule): no_linked_issue"
    )
    check_apply: bool = Field(True, description="git apply --check every task at its base; failures are dropped")


class EditSetConfig(Model):
    """Editing SFT examples: the message and before-images -> the change."""

    target: Literal["diff", "files"] = Field(
        "diff", description="diff: the unified diff; files: every changed file's whole after-image"
    )
    system_prompt: str | None = Field(
        "You are a coding assistant. Apply the requested change to the files shown.",
        description="system message of each example (never trained on); null: none",
    )


class TaskSetConfig(Model):
    """``tasks.jsonl`` in SWE-bench's instance format, and the time split."""

    eval_after: dt.datetime | None = Field(
        None, description="tasks created after this time go to the evaluation file, never to training outputs"
    )
    version: str = Field("0.0", description="SWE-bench `version` of every task until an environment sets it")

    @model_validator(mode="after")
    def _aware(self) -> TaskSetConfig:
        if self.eval_after is not None and self.eval_after.tzinfo is None:
            raise ValueError("eval_after: give a timezone (e.g. 2024-06-01T00:00:00Z) so the split is unambiguous")
        return self
