"""langid accuracy on real files, with names and on content alone, over the 30 most used languages.

The languages (``POPULAR``): the 30 programming languages most used on GitHub, by GitHub's
Octoverse reports (2022-2024: top 10 JavaScript, Python, TypeScript, Java, C#, C++, PHP,
Shell, C, Go) and, below those, by GitHut 2.0's pull-request and push ranking of the Linguist
languages (Ruby, Rust, Kotlin, Swift, Scala, Dart, Lua, Perl, R, Haskell, Objective-C,
PowerShell, Groovy, Julia, Elixir, Clojure, Erlang, OCaml, Fortran, MATLAB). Names are
Linguist's; a language is scored with its Linguist group (Fortran Free Form counts as Fortran,
TSX as TypeScript), as Linguist's language bar does.

Corpus: files nobody wrote for codecorpus, from many sources (each a ``source``):
- this machine's trees: the venv's site-packages, the system Python's dist-packages,
  /usr/share, /usr/lib (node's npm, Go's standard library under /usr/lib/go*, tcl, llvm ...),
  /usr/include, cargo's registry sources and the JDK's src.zip, where they exist;
- the ``test`` archives of ``bench/langid_sources.py`` where fetched (``python
  bench/langid_sources.py fetch --role test``): pinned Debian, npm and PyPI packages, read
  in place, never installed. Per language (test packages; * = this machine already):
  JavaScript* (npm's tree, /usr/share/javascript), Python* (site-packages), Java* (JDK src.zip),
  TypeScript (zod, react-native, stripe-react-native), C# (dbus-sharp), C++* (/usr/include/c++,
  LLVM; react-native), PHP (php-pear, league/commonmark), Shell* (/usr/share, /usr/lib), C*
  (/usr/include, /usr/lib), Ruby (Ruby 3.1's standard library), Go* (Go's standard library),
  Rust (rust-src), Kotlin and Objective-C (react-native, stripe-react-native; GNUstep base),
  Swift (stripe-react-native), Scala (Scala 2.11's sources), Lua (luarocks), Perl*
  (/usr/share/perl), R (dplyr), Haskell (lens, megaparsec), PowerShell* (venv and npm
  scripts), Groovy (Groovy 2.4's sources), Elixir (Elixir 1.14's sources), Clojure (Clojure
  1.11's jar), Erlang (Erlang/OTP 25's sources), OCaml (OCaml 4.13's sources), Fortran*
  (numpy's and f2py's files), MATLAB (Octave 7.3's m-files).
  Dart and Julia: no package of Debian bookworm, npm or PyPI found here ships their
  sources; they are listed, counted as absent, and not scored.
At most ``--per-lang`` files per language, spread over its sources (round robin in path-hash
order, so no one source dominates), deduplicated by content, and none whose bytes are a file
the content model was trained on (``train-manifest.txt``; the training packages are others).

Ground truth, independent of codecorpus's detector: GitHub Linguist's extension map
(its ``languages.yml`` as go-enry ships it) where it lists the file's extension under one
language only, or the package's own rule for an extension ambiguous in Linguist
(``langid_sources.Archive.labels``: Octave's ``.m`` is MATLAB, GNUstep's Objective-C).
On this machine: ``.h`` headers under /usr/include are C, except under ``c++/`` and LLVM's
C++ API (``llvm-N/`` outside ``llvm-c/``), where they (and extensionless headers) are C++;
``.pm``/``.pl`` under /usr/share/perl* are Perl; numpy's ``.f`` files are Fortran. Files of other
ambiguous or unlisted extensions, minified JavaScript, empty and non-UTF-8 files are left out.

Two modes, of ``codecorpus.langid.detect.detect`` (the per-file chain the stage runs):
- ``named``: path and content, as the pipeline sees files;
- ``content``: the file name replaced by ``fileN`` (content only; a ``#!`` line is content).

Goals: named >= 0.99, content >= 0.90, over the popular languages with at least
``MIN_FILES`` files. The confusion pairs (truth -> answer) show where the misses go; other
programming languages of the corpus are listed apart. Accuracy does not depend on the
machine's load; the docs/s printed are informational, not a timed benchmark.

    python bench/langid_bench.py [--per-lang 200] [--no-content-model]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import site
import sys
import sysconfig
import time
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import enry
import langid_sources
from langid_sources import MAX_BYTES, decode

from codecorpus import schema
from codecorpus.langid import detect as detector

POPULAR = (
    "JavaScript", "Python", "TypeScript", "Java", "C#", "C++", "PHP", "Shell", "C", "Go",
    "Ruby", "Rust", "Kotlin", "Swift", "Scala", "Dart", "Lua", "Perl", "R", "Haskell",
    "Objective-C", "PowerShell", "Groovy", "Julia", "Elixir", "Clojure", "Erlang", "OCaml",
    "Fortran", "MATLAB",
)
"""The 30 most used programming languages on GitHub (module doc), Linguist's names."""
GROUP = {"Fortran Free Form": "Fortran", "TSX": "TypeScript"}
"""Linguist's ``group`` of a language where it is another popular language (languages.yml)."""
MIN_FILES = 5
"""A language needs this many sampled files to be scored (a share of 1 or 2 files says little)."""
GOALS = {"named": 0.99, "content": 0.90}


def sources() -> list[tuple[str, Path]]:
    """(source name, root) of every tree this machine holds that the corpus draws from."""
    roots: list[tuple[str, Path]] = []
    for p in sorted({Path(p) for p in site.getsitepackages()} | {Path(sysconfig.get_paths()["purelib"])}):
        roots.append(("venv-site-packages", p))
    roots += [
        ("dist-packages", Path("/usr/lib/python3/dist-packages")),
        ("usr-share", Path("/usr/share")),
        ("node-npm", Path("/usr/lib/node_modules")),
        ("usr-lib", Path("/usr/lib")),
        ("usr-include", Path("/usr/include")),
        ("cargo-registry", Path.home() / ".cargo" / "registry" / "src"),
    ]
    roots += [(f"go-{p.name}", p / "src") for p in sorted(Path("/usr/lib").glob("go*"))]
    out, seen = [], set()
    for name, root in roots:
        real = root.resolve()
        if root.is_dir() and real not in seen:  # /usr/lib/go is a link to /usr/lib/go-1.19
            seen.add(real)
            out.append((name, root))
    return out


def _skip_dir(path: Path, name: str) -> bool:
    """Subtrees already walked as their own source, or not worth walking."""
    full = str(path / name)
    return full in ("/usr/lib/node_modules", "/usr/lib/python3", "/usr/lib/jvm") or (
        full.startswith("/usr/lib/go") or name in ("__pycache__", ".git", "node_modules", "site-packages")
    )


def walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _skip_dir(here, d))
        for f in sorted(filenames):
            yield here / f


def truth(path: str) -> str | None:
    """Linguist's language for a path on this machine; see the module doc."""
    name = path.rsplit("/", 1)[-1]
    ext = detector.extension(name)
    if path.startswith("/usr/include/"):
        if "/c++/" in path or (path.startswith("/usr/include/llvm-") and "/llvm-c/" not in path):
            return "C++" if ext in ("", ".h", ".hpp", ".tcc") else None
        if ext == ".h":
            return "C"
    if path.startswith("/usr/share/perl") and ext in (".pm", ".pl"):
        return "Perl"
    if "-packages/numpy/" in path and ext == ".f":
        return "Fortran"
    return langid_sources.linguist_label(path)


def group(lang: str) -> str:
    return GROUP.get(lang, lang)


Candidates = dict[str, dict[str, list[tuple[str, str, bytes | None]]]]
"""language -> source -> [(path hash, key, bytes if read already)]."""


def _candidates(trained: set[str]) -> Candidates:
    """Every labelled file of every tree and test archive (the JDK's src.zip and archives as members)."""
    found: Candidates = defaultdict(lambda: defaultdict(list))
    seen: set[str] = set()
    for source, root in sources():
        for p in walk(root):
            s = str(p)
            if s in seen or p.is_symlink():
                continue
            seen.add(s)
            lang = truth(s)
            if lang is not None:
                found[lang][source].append((hashlib.sha1(s.encode()).hexdigest(), s, None))
    for src_zip in sorted(Path("/usr/lib/jvm").glob("*/lib/src.zip"))[:1]:
        with zipfile.ZipFile(src_zip) as z:
            for member in z.namelist():
                if member.endswith(".java"):
                    key = f"{src_zip}!{member}"
                    found["Java"]["jdk-src.zip"].append((hashlib.sha1(key.encode()).hexdigest(), key, None))
    for archive in langid_sources.archives("test"):
        for key, data in langid_sources.archive_files(archive):
            lang = langid_sources.label(archive, key)
            if lang is not None and group(lang) in POPULAR and hashlib.sha1(data).hexdigest() not in trained:
                found[lang][archive.name].append((hashlib.sha1(key.encode()).hexdigest(), key, data))
    return found


def _load(key: str, data: bytes | None) -> str | None:
    if data is not None:
        return decode(data)
    if "!" in key:
        archive, member = key.split("!", 1)
        with zipfile.ZipFile(archive) as z:
            return decode(z.read(member))
    try:
        with open(key, "rb") as f:
            return decode(f.read(MAX_BYTES))
    except OSError:
        return None


def _trained() -> set[str]:
    """sha1 of the content model's training files, if the training run left its manifest here."""
    manifest = langid_sources.CACHE / langid_sources.MANIFEST
    return set(manifest.read_text().split()) if manifest.is_file() else set()


def collect(per_lang: int) -> tuple[list[tuple[str, str, str, str]], Counter[str], int]:
    """(key, text, truth, source): up to ``per_lang`` files per language, round robin over sources;
    every language's file count in the corpus; and how many training files were left out."""
    out, hashes = [], set()
    trained = _trained()
    candidates = _candidates(trained)
    on_machine = Counter({lang: sum(map(len, by_source.values())) for lang, by_source in candidates.items()})
    left_out = 0
    for lang, by_source in sorted(candidates.items()):
        queues = {src: sorted(items, key=lambda t: t[:2]) for src, items in sorted(by_source.items())}
        taken = 0
        while taken < per_lang and any(queues.values()):
            for src, queue in queues.items():
                while queue and taken < per_lang:
                    _, key, data = queue.pop(0)
                    text = _load(key, data)
                    raw = text.encode("utf-8") if text is not None else b""
                    digest = hashlib.sha1(raw).hexdigest()
                    if digest in trained:
                        left_out += 1
                        continue
                    if text is None or digest in hashes:
                        continue
                    hashes.add(digest)
                    out.append((key, text, lang, src))
                    taken += 1
                    break
    return out, on_machine, left_out


def evaluate(files: list[tuple[str, str, str, str]], mode: str, model: bool = True) -> tuple[list[str], float]:
    """The detector's answer per file in ``mode`` (with or without the content model), and files per second."""
    answers = []
    t0 = time.perf_counter()
    for i, (path, text, _, _) in enumerate(files):
        shown = path if mode == "named" else f"file{i}"
        answers.append(detector.detect(shown, text, use_content_model=model)[0])
    return answers, len(files) / max(time.perf_counter() - t0, 1e-9)


def _table(files, langs: list[str], on_machine: Counter[str], answers: dict[str, list[str]]) -> dict[str, float]:
    """Per-language rows and the overall accuracy per mode, languages and answers by Linguist group."""
    count = Counter(group(t) for _, _, t, _ in files)
    src_of = defaultdict(set)
    for _, _, t, src in files:
        src_of[group(t)].add(src)
    totals: dict[str, list[int]] = {m: [0, 0] for m in answers}
    for lang in langs:
        machine = sum(n for name, n in on_machine.items() if group(name) == lang)
        row = f"{lang:<18}{machine:>8}{count[lang]:>6}{len(src_of[lang]):>8}"
        idx = [i for i, f in enumerate(files) if group(f[2]) == lang]
        for mode, got in answers.items():
            ok = sum(group(got[i]) == lang for i in idx)
            totals[mode][0] += ok
            totals[mode][1] += len(idx)
            row += f"{ok / max(1, len(idx)):>10.3f}"
        print(row)
    accuracy = {m: ok / max(1, n) for m, (ok, n) in totals.items()}
    n_all = sum(count[lang] for lang in langs)
    print(f"{'ALL (files)':<18}{'':>8}{n_all:>6}{'':>8}" + "".join(f"{accuracy[m]:>10.3f}" for m in answers))
    return accuracy


def report(files, on_machine: Counter[str], answers: dict[str, list[str]]) -> dict[str, float]:
    """Accuracy on the popular languages with at least ``MIN_FILES`` files, the confusion pairs,
    then the other programming languages of the corpus, apart."""
    count = Counter(group(t) for _, _, t, _ in files)
    langs = [lang for lang in POPULAR if count[lang] >= MIN_FILES]
    absent = [lang for lang in POPULAR if count[lang] < MIN_FILES]
    print(f"{'language':<18}{'corpus':>8}{'files':>6}{'sources':>8}" + "".join(f"{m:>10}" for m in answers))
    accuracy = _table(files, langs, on_machine, answers)
    print(f"not scored (fewer than {MIN_FILES} files): "
          + ", ".join(f"{lang} ({count[lang]})" for lang in absent))
    chosen = set(langs)
    for mode, got in answers.items():
        pairs = Counter((f[2], got[i]) for i, f in enumerate(files)
                        if group(f[2]) in chosen and group(got[i]) != group(f[2]))
        print(f"\nconfusion pairs, {mode} (truth -> answer: files), {sum(pairs.values())} misses:")
        for (want, have), n in pairs.most_common(20):
            print(f"  {want} -> {have}: {n}")
    others = sorted({group(t) for _, _, t, _ in files} - set(POPULAR))
    others = [lang for lang in others if enry.get_language_type(lang) == "programming" and count[lang] >= MIN_FILES]
    if others:
        print("\nother programming languages of the corpus (not in the goal):")
        _table(files, others, on_machine, answers)
    print()
    for mode, acc in accuracy.items():
        verdict = "meets" if acc >= GOALS[mode] else "below"
        print(f"{mode:<8} accuracy {acc:.3f} on {len(langs)} languages ({verdict} the goal {GOALS[mode]:.2f})")
    return accuracy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-lang", type=int, default=200)
    ap.add_argument("--no-content-model", action="store_true",
                    help="the chain without codecorpus's content model (magika alone on content), to compare")
    args = ap.parse_args()
    t0 = time.perf_counter()
    files, on_machine, left_out = collect(args.per_lang)
    sources_used = sorted({src for *_, src in files})
    print(f"corpus: {len(files)} files, {len({f[2] for f in files})} languages, "
          f"{len(sources_used)} sources ({', '.join(sources_used)}), {left_out} training files left out, "
          f"collected in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    answers, speed = {}, {}
    for mode in ("named", "content"):
        answers[mode], speed[mode] = evaluate(files, mode, model=not args.no_content_model)
    report(files, on_machine, answers)
    unknown = sum(a == schema.UNKNOWN for a in answers["content"])
    print(f"content mode: {unknown} of {len(files)} files unknown")
    print("speed (informational, load " + os.getloadavg().__repr__() + "): "
          + ", ".join(f"{m} {v:.0f} docs/s" for m, v in speed.items()))


if __name__ == "__main__":
    main()
