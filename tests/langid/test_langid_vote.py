"""The per repository and extension vote, and Linguist's heuristics in their rule order."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codecorpus import schema
from codecorpus.config import LangidConfig, load_recipe_data
from codecorpus.langid import detect as detector
from codecorpus.langid import stage as langid
from codecorpus.langid import vote
from codecorpus.langid.stage import LANG_METHOD

FIXED_FORM = "c     fixed-form Fortran {i}\n      subroutine s{i}(a)\n      real a\n      a = a + {i}\n      end\n"
"""Matches Linguist's ``fortran`` named pattern (``^c``, six spaces then ``subroutine``)."""
INDENTED = (
    "        subroutine subb(k)\n          real(8), intent(inout) :: k(:)\n          k=k+1\n"
    "        endsubroutine\n"
)
"""Fortran indented eight spaces: no ``.f`` heuristic matches, and Linguist's classifier says Forth
(numpy's f2py tests hold such files)."""


def _docs(rows: list[tuple[str, str, str]]) -> pa.Table:
    """A DOC_SCHEMA table of (repo, path, text) rows, as ingest leaves it."""
    n = len(rows)
    return pa.table({
        schema.ID: [f"id{i}" for i in range(n)], schema.SOURCE: ["s"] * n,
        schema.REPO: [r for r, _, _ in rows], schema.PATH: [p for _, p, _ in rows],
        schema.REVISION: [""] * n, schema.LICENSE: ["MIT"] * n, schema.LANG: [schema.UNKNOWN] * n,
        schema.KIND: ["code"] * n, schema.TEXT: [t for _, _, t in rows],
        schema.BYTES: [len(t) for _, _, t in rows], schema.CONTENT_HASH: ["h"] * n,
        schema.ENCODING: ["utf-8"] * n,
    }, schema=schema.DOC_SCHEMA)


def _fortran_repo(repo: str, fixed: int) -> list[tuple[str, str, str]]:
    rows = [(repo, f"src/f{i}.f", FIXED_FORM.format(i=i)) for i in range(fixed)]
    return [*rows, (repo, "src/indented.f", INDENTED)]


def _tags(out: pa.Table) -> list[tuple[str, str, str]]:
    cols = out.select([schema.PATH, schema.LANG, LANG_METHOD]).to_pydict().values()
    return list(zip(*cols, strict=True))


def test_the_indented_file_alone_is_forth_by_linguist() -> None:
    """The premise of the vote tests: Linguist's own chain mislabels this file."""
    assert detector.detect("src/indented.f", INDENTED) == ("Forth", "classifier")
    assert detector.detect("src/f0.f", FIXED_FORM.format(i=0)) == ("Fortran", "content")


def test_disagreeing_extension_goes_to_the_majority() -> None:
    out = langid.run(_docs(_fortran_repo("numpy", 4)), LangidConfig()).table
    tags = _tags(out)
    assert tags[-1] == ("src/indented.f", "Fortran", vote.VOTE_METHOD)
    # the heuristics' answers vote but keep their own method
    assert all(t[1:] == ("Fortran", "content") for t in tags[:-1])
    assert out.column(schema.KIND).to_pylist() == ["code"] * 5


def test_vote_is_per_repository() -> None:
    rows = [*_fortran_repo("numpy", 4), ("forth-lib", "src/indented.f", INDENTED)]
    out = langid.run(_docs(rows), LangidConfig()).table
    by_repo = dict(zip(out.column(schema.REPO).to_pylist(), out.column(schema.LANG).to_pylist(), strict=False))
    assert out.column(schema.LANG).to_pylist()[4] == "Fortran"
    # alone in its repository, the file keeps Linguist's answer: no group, no vote
    assert by_repo["forth-lib"] == "Forth"
    assert out.column(LANG_METHOD).to_pylist()[-1] == "classifier"


def test_below_the_floor_the_group_is_unknown() -> None:
    rows = _fortran_repo("numpy", 2)  # Fortran 2 of 3: below vote_min_files=3
    out = langid.run(_docs(rows), LangidConfig()).table
    assert _tags(out)[-1] == ("src/indented.f", schema.UNKNOWN, vote.VOTE_METHOD)
    assert out.column(schema.LANG).to_pylist()[:2] == ["Fortran", "Fortran"]
    lenient = langid.run(_docs(rows), LangidConfig(vote_min_files=2)).table
    assert _tags(lenient)[-1] == ("src/indented.f", "Fortran", vote.VOTE_METHOD)
    off = langid.run(_docs(rows), LangidConfig(repo_vote=False)).table
    assert _tags(off)[-1] == ("src/indented.f", "Forth", "classifier")


def test_decide_share_floor_ties_and_agreement() -> None:
    counts = pa.table({
        schema.REPO: ["r", "r", "r", "r", "s", "t", "t"],
        vote.EXT: [".x", ".x", ".y", ".y", ".x", ".z", ".z"],
        schema.LANG: ["A", "B", "A", "B", "A", "B", "A"],
        vote.FILES: [6, 4, 5, 5, 9, 3, 3],
    })
    got = {(d["repo"], d["ext"]): d["lang"] for d in vote.decide(counts, 0.6, 3).to_pylist()}
    assert got[("r", ".x")] == "A"  # 6 of 10
    assert got[("r", ".y")] == schema.UNKNOWN  # 5 of 10: below the share
    assert got[("t", ".z")] == schema.UNKNOWN  # a tie is no majority
    assert ("s", ".x") not in got  # one label: nothing to reconcile
    assert vote.decide(counts, 0.5 + 1e-9, 3).to_pylist()[0]["lang"] == "A"


def test_only_unlisted_or_ambiguous_extensions_vote() -> None:
    assert vote.voting_extension("a/x.f") == ".f"
    assert vote.voting_extension("a/abs.decTest") == ".dectest"
    assert vote.voting_extension("a/x.py") is None  # Linguist lists .py for Python alone
    assert vote.voting_extension("bin/tool") is None  # no extension: files have nothing in common


def test_a_repository_spanning_two_shards_decides_as_one() -> None:
    rows = _fortran_repo("numpy", 4)
    shards = [_docs(rows[:2] + rows[-1:]), _docs(rows[2:4])]  # shard 0 alone: Fortran 2 of 3
    cfg = LangidConfig()
    alone = langid.run(shards[0], cfg).table
    assert _tags(alone)[-1][1] == schema.UNKNOWN  # one shard's view is below the floor
    scans = [langid.scan(t, i, cfg) for i, t in enumerate(shards)]
    counts = pa.concat_tables([s[langid.COUNTS_PARTITION] for s in scans])
    routed = langid.decide_shards(counts, cfg, n_shards=2)
    outs = [
        langid.apply(t, s[langid.TAGS_PARTITION], routed[i], cfg).table
        for i, (t, s) in enumerate(zip(shards, scans, strict=True))
    ]
    whole = langid.run(_docs(rows[:2] + rows[-1:] + rows[2:4]), cfg).table
    assert _tags(pa.concat_tables(outs)) == _tags(whole)
    assert _tags(outs[0])[-1] == ("src/indented.f", "Fortran", vote.VOTE_METHOD)


def test_pipeline_vote_spans_shards(tmp_path: Path, ray_local) -> None:
    """The executor's phases (scan -> vote -> apply) on a repository cut into several shards."""
    from codecorpus.runtime.executor import Executor

    repo = tmp_path / "corpus" / "numpy"
    (repo / "src").mkdir(parents=True)
    for _, path, text in _fortran_repo("numpy", 4):
        (repo / path).write_text(text)
    recipe = {
        "sources": [{"type": "local", "name": "fixture", "path": str(tmp_path / "corpus")}],
        "stages": {"ingest": {"shard_bytes": 150}, "langid": {}},
    }
    run_dir = tmp_path / "run"
    Executor(load_recipe_data(recipe), run_dir, quiet=True).run_pipeline(until="langid")
    parts = sorted((run_dir / "langid").glob("part-*.parquet"))
    assert len(parts) >= 2
    out = pa.concat_tables([pq.read_table(p) for p in parts])
    tags = {Path(p).name: (lang, m) for p, lang, m in _tags(out)}
    assert tags["indented.f"] == ("Fortran", vote.VOTE_METHOD)
    assert {lang for lang, _ in tags.values()} == {"Fortran"}


# --- Linguist's heuristics (heuristics.yml through go-enry), in their rule order ------------


@pytest.mark.parametrize(
    ("path", "text", "lang"),
    [
        # .f: Forth (^: ), then Filebench WML (flowop), then Fortran (named pattern "fortran")
        ("x.f", ": square ( n -- n*n ) dup * ;\n", "Forth"),
        ("x.f", ": square dup * ;\n      program main\n      end\n", "Forth"),  # Forth's rule is first
        ("x.f", "define file name=bigfile\nflowop read name=r1\n", "Filebench WML"),
        ("x.f", "c     a comment\n      program main\n      print *, 1\n      end\n", "Fortran"),
        ("x.f", "      subroutine s(a)\n      real a\n      end\n", "Fortran"),
        ("x.f", "! free-form comment\nprogram p\nend program p\n", "Fortran"),
        ("x.for", "C     comment\n      PROGRAM P\n      END\n", "Fortran"),
        # .h: Objective-C, then C++, then C
        ("x.h", "@interface A : NSObject\nstd::string s;\n@end\n", "Objective-C"),  # Objective-C first
        ("x.h", "#include <vector>\nint f();\n", "C++"),
        ("x.h", "template <typename T> T id(T x);\n", "C++"),
        ("x.h", "int f(void);\n", "C"),
        # .m: Objective-C, Mercury, MUF, M, Wolfram Language, MATLAB, Limbo
        ("x.m", "#import <Foundation/Foundation.h>\n% not MATLAB\n", "Objective-C"),
        ("x.m", ":- module m.\n", "Mercury"),
        ("x.m", ": main 1 2 + ;\n", "MUF"),
        ("x.m", "  ; an M comment\n", "M"),
        ("x.m", "(* Wolfram *)\nf[x_] := x^2 (* square *)\n", "Wolfram Language"),
        ("x.m", "% MATLAB\nx = 1;\n", "MATLAB"),
        # .pl: Prolog, then Perl (not use v6), then Raku
        ("x.pl", "use strict;\nfoo :- bar.\n", "Prolog"),  # Prolog's rule is first
        ("x.pl", "use strict;\nmy $x = 1;\n", "Perl"),
        ("x.pl", "use v6;\nuse strict;\n", "Raku"),  # Perl's rule excludes use v6
        ("x.pl", "use v6;\nclass A {}\n", "Raku"),
        # .inc and .cls: first matching rule
        ("x.inc", "<?php\necho 1;\n", "PHP"),
        ("x.cls", "\\NeedsTeXFormat{LaTeX2e}\n\\ProvidesClass{mine}\n", "TeX"),
        ("x.cls", "VERSION 1.0 CLASS\nBEGIN\n  MultiUse = -1\nEND\n", "VBA"),
    ],
)
def test_linguist_heuristics_in_rule_order(path: str, text: str, lang: str) -> None:
    assert detector.detect(path, text) == (lang, "content")


def test_heuristics_run_after_shebang_and_before_classifier() -> None:
    # Linguist's order: a #! line outranks the extension and its heuristics
    assert detector.detect("x.pl", "#!/usr/bin/env swipl\nuse strict;\n")[0] == "Prolog"
    assert detector.detect("x.pl", "#!/usr/bin/perl\nfoo :- bar.\n") == ("Perl", "shebang")
    # no heuristic matches: Linguist's classifier picks among the extension's candidates only
    lang, method = detector.detect("x.f", INDENTED)
    assert method == "classifier" and lang in detector.extension_candidates(".f")


def test_ml_is_ambiguous_in_linguist() -> None:
    """Linguist lists .ml for OCaml and Standard ML: its heuristics run (no shortcut by extension)."""
    assert detector.detect("a.ml", "fun f x = case x of 0 => 1 | _ => x\n")[0] == "Standard ML"
    assert detector.detect("a.ml", "let rec f x = match x with 0 -> 1 | _ -> x\n")[0] == "OCaml"


HASKELL = (
    "module Main where\n\nimport Data.List (sortBy)\nimport qualified Data.Map as M\n\n"
    "main :: IO ()\nmain = do\n  let xs = [3, 1, 2] :: [Int]\n  print (sortBy compare xs)\n"
    "  mapM_ print (M.toList (M.fromList (zip xs xs)))\n"
)


def test_unlisted_extension_gets_no_programming_language_from_magika() -> None:
    assert detector._magika_guess(HASKELL.encode(), 0.5) == "Haskell"  # the premise
    # an extension Linguist does not list: Linguist names no language, and neither does magika
    assert detector.detect("data/abs.decTest", HASKELL) == (schema.UNKNOWN, schema.UNKNOWN)
    assert detector.detect("data/abs.decTest", HASKELL, magika_unlisted_code=True) == ("Haskell", "magika")
    # without an extension the name says nothing, and magika's guess stands
    assert detector.detect("bin/main", HASKELL) == ("Haskell", "magika")
    # magika's data labels are kept on unlisted extensions
    ini = "# defaults\n[section]\nkey = value\nother = 2\n\n[more]\nname = x\nsize = 10\n" * 3
    assert detector.detect("idlelib/config-main.def", ini)[0] == "INI"
