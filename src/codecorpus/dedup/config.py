"""Config of the dedup stage (``stages.dedup``): exact, near-duplicate and fork removal."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from codecorpus.model import Model


class ForksConfig(Model):
    """Repository-level removal of forks and vendored copies; see codecorpus/dedup/forks.py."""

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
    """Exact + MinHash-LSH near-duplicate removal; see codecorpus/dedup/near.py."""

    exact: bool = True
    exact_whitespace: bool = Field(
        False, description="exact grouping on a whitespace-normalised hash (runs of whitespace -> one space, "
        "trimmed): re-indented, CRLF or trailing-space copies count as exact duplicates",
    )
    forks: ForksConfig = Field(default_factory=ForksConfig)
    buckets: int = Field(16, gt=0, description="hash partitions of the dedup shuffles")
    # --- near-duplicates ---
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
