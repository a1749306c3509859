"""Real files for langid's bench and for training its content model, from packages nobody here wrote.

Two roles, disjoint by package: ``train`` archives feed ``bench/langid_train.py`` (the model
shipped in ``codecorpus/langid/``), ``test`` archives feed ``bench/langid_bench.py`` beside the
trees this machine already holds. No package is in both, and the bench also drops any test file
whose bytes equal a training file's (``train-manifest.txt``, written by the training run).

Every archive is pinned (name and version) and fetched with the registry's ordinary client into
``$CODECORPUS_LANGID_CACHE`` (default ``~/.cache/codecorpus/langid/<role>/``), never installed:
Debian binary packages (``apt-get download``), Debian source packages (``apt-get source
--download-only``, its upstream tarball only; needs a ``deb-src`` line for bookworm), npm
tarballs (``npm pack``) and PyPI sdists (``pip download --no-binary``). Members are read
from the archives as they are (a ``.deb``'s data tarball, a ``.jar`` inside one).

    python bench/langid_sources.py fetch [--role train|test]   # what is missing
    python bench/langid_sources.py list                          # what is there

Scala has no second package here (Debian's scala-xml and scala-parser-combinators sources were not
served), so the model is not trained on Scala (magika names it); Dart and Julia have none at all.

Labels: Linguist's language for a member's extension where Linguist lists it under one
language (the bench's :func:`truth`), or the archive's own rule for an extension that is
ambiguous in Linguist but not in that package (``.m`` is MATLAB in Octave's packages and
Objective-C in GNUstep's, ``.f`` is Fortran in LAPACK, ``.pm`` is Perl in a Perl library,
``.ml`` OCaml in OCaml's, bash-completion's extensionless scripts are Shell).
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import lzma
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("CODECORPUS_LANGID_CACHE", Path.home() / ".cache" / "codecorpus" / "langid"))
MAX_BYTES = 200_000
MIN_BYTES = 16
MAX_JAR_BYTES = 64_000_000
ARCHIVE_SUFFIXES = (".deb", ".tgz", ".tar.gz", ".tar.xz", ".tar.bz2", ".zip", ".jar")
MANIFEST = "train-manifest.txt"
"""sha1 of every training file's text (one a line), written by the training run."""


@dataclass(frozen=True)
class Archive:
    """One pinned package of a registry, with the label rules its files need."""

    role: str  # "train" or "test"
    registry: str  # "deb", "deb-src", "npm", "pypi"
    name: str
    version: str
    labels: tuple[tuple[str, str], ...] = ()
    """(fnmatch pattern on the member path, Linguist language) for extensions Linguist finds ambiguous."""

    @property
    def folder(self) -> Path:
        return CACHE / self.role / f"{self.registry}-{self.name.replace('/', '_').lstrip('@')}"

    def label(self, member: str) -> str | None:
        return next((lang for pattern, lang in self.labels if fnmatch.fnmatch(member, pattern)), None)


_TS = (("*.ts", "TypeScript"), ("*.tsx", "TSX"))  # npm packages: never Qt's translation files
_OBJC = (("*.m", "Objective-C"),)
_NPM_OBJC = _TS + _OBJC
_PERL = (("*.pm", "Perl"), ("*.pl", "Perl"))
_MATLAB = (("*.m", "MATLAB"),)
_OCAML = (("*.ml", "OCaml"),)
_CPP_HEADERS = (("*.h", "C++"),)
_PHP = (("*.php", "PHP"),)
_R = (("*.R", "R"), ("*.r", "R"))
_RUST = (("*.rs", "Rust"),)
_ELIXIR = (("*.ex", "Elixir"),)
_CSHARP = (("*.cs", "C#"),)

ARCHIVES: tuple[Archive, ...] = (
    # --- train -----------------------------------------------------------------------------
    Archive("train", "npm", "expo-modules-core", "58.1.0", _NPM_OBJC),  # Kotlin, Swift, Java, TS, C++
    Archive("train", "npm", "@capacitor/ios", "8.5.2", _NPM_OBJC),  # Swift, Objective-C
    Archive("train", "npm", "@capacitor/android", "8.5.2"),  # Java
    Archive("train", "npm", "cordova-android", "15.1.0"),  # Java, JavaScript
    Archive("train", "npm", "rxjs", "7.8.2", _TS),  # TypeScript
    Archive("train", "npm", "moment", "2.30.1"),  # JavaScript
    Archive("train", "pypi", "Django", "4.2.16"),  # Python, JavaScript, HTML, CSS
    Archive("train", "deb", "ruby-rack", "2.2.22-0+deb12u2"),
    Archive("train", "deb", "ruby-thor", "1.2.1-2"),
    Archive("train", "deb", "ruby-rspec-core", "3.12.0c0e1m1s0-1"),
    Archive("train", "deb", "ruby-activesupport", "2:6.1.7.10+dfsg-1~deb12u4"),
    Archive("train", "deb", "php-symfony-console", "5.4.53+dfsg-0+deb12u1", _PHP),
    Archive("train", "deb", "php-twig", "3.5.1-1+deb12u3", _PHP),
    Archive("train", "deb", "lua-penlight", "1.13.1-3"),
    Archive("train", "deb", "lua-ldoc", "1.4.6-2"),
    Archive("train", "deb", "r-cran-ggplot2", "3.4.1+dfsg-1", _R),
    Archive("train", "deb", "octave-statistics", "1.5.3-2", _MATLAB),
    Archive("train", "deb", "octave-signal", "1.4.3-1", _MATLAB),
    Archive("train", "deb", "librust-serde-dev", "1.0.152-2", _RUST),
    Archive("train", "deb", "librust-regex-dev", "1.7.1-1", _RUST),
    Archive("train", "deb", "golang-github-spf13-cobra-dev", "1.6.1-1"),
    Archive("train", "deb", "golang-github-stretchr-testify-dev", "1.8.1-1"),
    Archive("train", "deb", "golang-golang-x-net-dev", "1:0.7.0+dfsg-1"),
    Archive("train", "deb", "librust-tokio-dev", "1.24.2-1", _RUST),
    Archive("train", "deb", "librust-syn-dev", "1.0.107-1", _RUST),
    Archive("train", "deb", "libtools-reader-clojure", "1.3.6-1"),
    Archive("train", "deb", "libdata-json-clojure", "2.4.0-2"),
    Archive("train", "deb", "libtools-analyzer-clojure", "1.1.1-1"),
    Archive("train", "deb", "libcore-async-clojure", "1.5.648-1"),
    Archive("train", "deb", "bash-completion", "1:2.11-6", (("*/bash-completion/completions/*", "Shell"),)),
    Archive("train", "deb", "libdbix-class-perl", "0.082843-1", _PERL),
    Archive("train", "deb", "libmoose-perl", "2.2203-1", _PERL),
    Archive("train", "deb", "libfmt-dev", "9.1.0+ds1-2", _CPP_HEADERS),
    Archive("train", "deb-src", "lapack", "3.11.0-2", (("*.f", "Fortran"),)),
    Archive("train", "deb-src", "lua5.4", "5.4.4-3+deb12u1"),  # C
    Archive("train", "deb-src", "haskell-aeson", "2.0.3.0-1"),
    Archive("train", "deb-src", "haskell-optparse-applicative", "0.16.1.0-1"),
    Archive("train", "deb-src", "haskell-quickcheck", "2.14.2-1"),
    Archive("train", "deb-src", "gmetrics", "0.7-4.1"),  # Groovy
    Archive("train", "deb-src", "groovycsv", "1.3-3"),  # Groovy
    Archive("train", "deb-src", "rabbitmq-server", "3.10.8-1.1+deb12u1", _ELIXIR),  # Erlang, Elixir
    Archive("train", "deb-src", "nunit", "2.6.4+dfsg-1.1", _CSHARP),  # C#
    Archive("train", "deb-src", "cmdliner", "1.1.1-1", _OCAML),
    Archive("train", "deb-src", "menhir", "20220210+ds-2", _OCAML),
    # --- test ------------------------------------------------------------------------------
    Archive("test", "npm", "react-native", "0.86.3", _NPM_OBJC),  # Kotlin, Objective-C, TS, C++, Java
    Archive("test", "npm", "@stripe/stripe-react-native", "0.78.0", _NPM_OBJC),  # Swift, Kotlin, TS
    Archive("test", "npm", "zod", "4.6.7", _TS),  # TypeScript
    Archive("test", "deb", "libruby3.1", "3.1.7+really3.1.2-0+deb12u1"),  # Ruby's standard library
    Archive("test", "deb", "php-pear", "1:1.10.13+submodules+notgz+2022032202-2", _PHP),
    Archive("test", "deb", "php-league-commonmark", "2.3.9-1+deb12u1", _PHP),
    Archive("test", "deb", "luarocks", "3.8.0+dfsg1-1"),
    Archive("test", "deb", "octave-common", "7.3.0-2", _MATLAB),
    Archive("test", "deb", "rust-src", "1.63.0+dfsg1-2", _RUST),
    Archive("test", "deb", "erlang-src", "1:25.2.3+dfsg-1+deb12u4"),
    Archive("test", "deb", "libclojure-java", "1.11.1-2"),
    Archive("test", "deb-src", "r-cran-dplyr", "1.0.10-1", _R),
    Archive("test", "deb-src", "elixir-lang", "1.14.0.dfsg-2", _ELIXIR),
    Archive("test", "deb-src", "scala", "2.11.12-5"),
    Archive("test", "deb-src", "groovy", "2.4.21-8"),
    Archive("test", "deb-src", "haskell-lens", "5.0.1-2"),
    Archive("test", "deb-src", "haskell-megaparsec", "9.2.2-1"),
    Archive("test", "deb-src", "dbus-sharp", "0.8.1-2.1", _CSHARP),
    Archive("test", "deb-src", "ocaml", "4.13.1-4", _OCAML),
    Archive("test", "deb-src", "gnustep-base", "1.28.1+really1.28.0-5", _OBJC),
)


def archives(role: str) -> list[Archive]:
    return [a for a in ARCHIVES if a.role == role]


def linguist_label(path: str) -> str | None:
    """Linguist's language for a path by its extension where Linguist lists it under one language only;
    None for file-name rules (``Makefile``), minified JavaScript and ambiguous or unlisted extensions."""
    import enry

    from codecorpus.langid import detect as detector

    name = path.rsplit("/", 1)[-1]
    ext = detector.extension(name)
    if not ext or name.endswith(".min.js") or enry.get_language_by_filename(name).language:
        return None
    candidates = detector.extension_candidates(ext)
    return candidates[0] if len(candidates) == 1 else None


PROSE_AND_DATA = {".txt": "Text", ".md": "Markdown", ".json": "JSON", ".yml": "YAML", ".yaml": "YAML"}
"""Extensions Linguist lists under several languages whose common one is not code (``.md`` is also
GCC Machine Description, ``.txt`` an Adblock filter list): in packages they are that one. They teach
the content model what is *not* code; the bench scores programming languages only."""


def label(archive: Archive, member: str) -> str | None:
    """A member's language: the archive's own rule, else Linguist's unambiguous extension, else the
    usual prose or data language of the extension (:data:`PROSE_AND_DATA`)."""
    import enry

    from codecorpus.langid import detect as detector

    path = member.rsplit("!", 1)[-1]
    found = archive.label(member) or linguist_label(path)
    if found is None and not enry.get_language_by_filename(path.rsplit("/", 1)[-1]).language:
        found = PROSE_AND_DATA.get(detector.extension(path))
    return found


def decode(data: bytes) -> str | None:
    """A file's text as the bench and the training read it: None if (nearly) empty, binary or not UTF-8."""
    data = data[:MAX_BYTES]
    if len(data.strip()) < MIN_BYTES or b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def fetch(archive: Archive) -> None:
    """Download one archive into its folder (nothing if already there)."""
    if archive.folder.is_dir() and any(archive.folder.iterdir()):
        return
    archive.folder.mkdir(parents=True, exist_ok=True)
    cwd = str(archive.folder)
    if archive.registry == "deb":
        cmd = ["apt-get", "download", f"{archive.name}={archive.version}"]
    elif archive.registry == "deb-src":
        cmd = ["apt-get", "source", "--download-only", f"{archive.name}={archive.version}"]
    elif archive.registry == "npm":
        cmd = ["npm", "pack", "--silent", f"{archive.name}@{archive.version}"]
    else:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
               "-d", cwd, f"{archive.name}=={archive.version}"]
    done = subprocess.run(cmd, cwd=cwd, check=False, stdout=subprocess.DEVNULL)
    if archive.registry == "deb-src":  # keep the upstream tarball(s): Debian's packaging is not the project
        for f in archive.folder.iterdir():
            if ".orig" not in f.name or not f.name.endswith(ARCHIVE_SUFFIXES):
                f.unlink()
    elif done.returncode != 0:
        for f in archive.folder.iterdir():
            f.unlink()
    if not any(archive.folder.iterdir()):
        archive.folder.rmdir()
        raise subprocess.CalledProcessError(done.returncode, cmd)


def _ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Members of a Unix ``ar`` archive (a ``.deb``)."""
    pos = 8  # b"!<arch>\n"
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        yield name, data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)


def _tar_members(fileobj: io.BufferedIOBase | io.BytesIO) -> Iterator[tuple[str, bytes]]:
    with tarfile.open(fileobj=fileobj, mode="r|*") as tar:
        for info in tar:
            if info.isfile() and info.size > 0:
                f = tar.extractfile(info)
                if f is not None:  # a jar is read whole, to open its members
                    whole = info.name.endswith(".jar") and info.size <= MAX_JAR_BYTES
                    yield info.name.removeprefix("./"), f.read() if whole else f.read(MAX_BYTES)


def _zip_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            if not info.is_dir():
                with z.open(info) as f:
                    yield info.filename, f.read(MAX_BYTES)


def members(path: Path) -> Iterator[tuple[str, bytes]]:
    """(member path, first ``MAX_BYTES``) of every file in one archive; ``.jar`` members are opened too."""
    name = path.name
    if name.endswith(".deb"):
        for member, data in _ar_members(path.read_bytes()):
            if member.startswith("data.tar"):
                raw = lzma.decompress(data) if member.endswith(".xz") else data
                yield from _expand(_tar_members(io.BytesIO(raw)))
    elif name.endswith((".zip", ".jar", ".whl")):
        yield from _zip_members(path.read_bytes())
    else:
        with open(path, "rb") as f:
            yield from _expand(_tar_members(f))


def _expand(items: Iterator[tuple[str, bytes]]) -> Iterator[tuple[str, bytes]]:
    for member, data in items:
        if member.endswith(".jar") and len(data) <= MAX_JAR_BYTES:
            for inner, inner_data in _zip_members(data):
                yield f"{member}!{inner}", inner_data
        elif not member.endswith(".jar"):
            yield member, data


def archive_files(archive: Archive) -> Iterator[tuple[str, bytes]]:
    """Every member of an archive's downloaded file(s), as ``<file>!<member>`` keys."""
    if not archive.folder.is_dir():
        return
    for f in sorted(archive.folder.iterdir()):
        if not f.name.endswith(ARCHIVE_SUFFIXES):  # a signature (.asc) beside a tarball
            continue
        for member, data in members(f):
            yield f"{f}!{member}", data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=("fetch", "list"))
    ap.add_argument("--role", choices=("train", "test"))
    args = ap.parse_args()
    for archive in ARCHIVES:
        if args.role and archive.role != args.role:
            continue
        if args.action == "fetch":
            try:
                fetch(archive)
            except subprocess.CalledProcessError as e:
                print(f"{archive.registry} {archive.name}: failed ({e})", file=sys.stderr)
        there = archive.folder.is_dir() and any(archive.folder.iterdir())
        print(f"{archive.role:<6}{archive.registry:<8}{archive.name:<32}{archive.version:<36}"
              f"{'present' if there else 'absent'}")


if __name__ == "__main__":
    main()
