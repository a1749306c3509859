"""Config of the langid stage (``stages.langid``)."""

from __future__ import annotations

from pydantic import Field

from codecorpus.model import Model


class LangidConfig(Model):
    shebang: bool = Field(True, description="read #! lines of files without a known extension")
    # --- enry (Linguist) + magika + tree-sitter ---
    magika: bool = Field(True, description="magika on the bytes when name and Linguist's rules decide nothing")
    content_model: bool = Field(
        True, description="codecorpus's token model (with magika) on files whose name and Linguist's rules decide nothing"
    )
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
