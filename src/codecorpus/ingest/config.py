"""Config of the sources and of the ingest stage (``sources:``, ``stages.ingest``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from codecorpus.model import Model


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


class IngestConfig(Model):
    max_file_bytes: int = Field(1_000_000, gt=0, description="larger files are dropped (too_large)")
    shard_bytes: int = Field(8_000_000, gt=0, description="target input bytes per shard")
    skip_dirs: tuple[str, ...] = Field(
        (".git", ".hg", ".svn", "__pycache__"),
        description="directories logged as one skipped_dir skipped entry each (not a drop) and not descended into",
    )
    # --- exclusions, each its own drop reason ---
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
