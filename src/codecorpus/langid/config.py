"""Config of the langid stage (``stages.langid``)."""

from __future__ import annotations

from pydantic import Field

from codecorpus.model import Model


class LangidConfig(Model):
    shebang: bool = Field(True, description="read #! lines of files without a known extension")
    # --- issue 3: enry (Linguist) + magika + tree-sitter ---
    magika: bool = Field(True, description="magika on the bytes when name and Linguist's rules decide nothing")
    magika_min_score: float = Field(0.5, ge=0, le=1, description="magika guesses below this are unknown")
    parse_errors: bool = Field(True, description="tree-sitter parse_error_frac for the 13 grammar languages")
    parse_max_bytes: int = Field(
        1_000_000, gt=0, description="larger files get a null parse_error_frac (parse cost)"
    )
