"""codecorpus's content model: files with no name to go by, the shipped model and its training."""

from __future__ import annotations

import hashlib

import enry
import pytest

from codecorpus import schema
from codecorpus.config import LangidConfig
from codecorpus.langid import content_model
from codecorpus.langid import detect as detector
from codecorpus.langid import stage as langid
from codecorpus.langid.stage import LANG_METHODS

# Small files as their projects write them (lightly cut), which Linguist's chain cannot name
# without a file name.
LUA = b"""local M = {}

--- Split a string into a list of fields.
-- @param s the string
-- @param sep the separator (default whitespace)
function M.split(s, sep)
  local res = {}
  for field in string.gmatch(s, "([^" .. (sep or "%s") .. "]+)") do
    res[#res + 1] = field
  end
  return res
end

return M
"""
ERLANG = b"""-module(queue_server).
-behaviour(gen_server).

-export([start_link/0, push/1, pop/0]).
-export([init/1, handle_call/3, handle_cast/2]).

start_link() -> gen_server:start_link({local, ?MODULE}, ?MODULE, [], []).

push(Item) -> gen_server:cast(?MODULE, {push, Item}).
pop() -> gen_server:call(?MODULE, pop).

init([]) -> {ok, queue:new()}.

handle_call(pop, _From, Q) ->
    case queue:out(Q) of
        {{value, Item}, Q2} -> {reply, {ok, Item}, Q2};
        {empty, Q} -> {reply, empty, Q}
    end.

handle_cast({push, Item}, Q) -> {noreply, queue:in(Item, Q)}.
"""
OCAML = b"""let rec fold_left f acc = function
  | [] -> acc
  | x :: rest -> fold_left f (f acc x) rest

let sum l = fold_left ( + ) 0 l

module StringMap = Map.Make (String)

let count_words words =
  List.fold_left
    (fun m w ->
      let n = try StringMap.find w m with Not_found -> 0 in
      StringMap.add w (n + 1) m)
    StringMap.empty words
"""
MATLAB = b"""function [m, s] = mean_std (x)
  %% MEAN_STD  Mean and standard deviation of the columns of X.
  if (nargin != 1)
    print_usage ();
  endif
  n = rows (x);
  m = sum (x) / n;
  s = sqrt (sum ((x - m) .^ 2) / (n - 1));
endfunction

%!assert (mean_std ([1; 2; 3]), 2)
"""
PROSE = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this "
    "software and associated documentation files (the \"Software\"), to deal in the Software "
    "without restriction, including without limitation the rights to use, copy, modify, merge, "
    "publish, distribute, sublicense, and/or sell copies of the Software.\n\n"
    "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.\n"
)
CASES = [("Lua", LUA), ("Erlang", ERLANG), ("OCaml", OCAML), ("MATLAB", MATLAB)]


@pytest.mark.parametrize(("lang", "text"), CASES, ids=[c[0] for c in CASES])
def test_the_shipped_model_names_a_file_by_its_content(lang: str, text: bytes) -> None:
    model = content_model.load()
    guess, margin = model.predict(text)
    assert guess == lang
    assert margin >= detector.CONTENT_MODEL_MIN_MARGIN
    # the stage's chain: no name, no shebang, so the content decides
    got, method = detector.detect("file0", text.decode())
    assert got == lang and method in (detector.CONTENT_MODEL_METHOD, "magika")


OCTAVE_FA = """## fA.m
function y = fA (x, f)
  global gfun
  if (nargin < 2)
    y = fA (x, gfun);
  else
    w = feval (f, x);
    y = feval (@fB, w);
  endif
endfunction
"""
"""Octave 7.3's ``etc/tests/fixed/bug-35448/fA.m`` as Debian ships it: no ``%`` comment, so no
``.m`` heuristic of Linguist matches, and its classifier says M (MUMPS)."""


def test_an_ambiguous_extension_goes_to_the_model_where_linguists_classifier_picks_a_stranger() -> None:
    assert detector.detect("bug-35448/fA.m", OCTAVE_FA, use_content_model=False) == ("M", "classifier")
    # M is no language the model was shown; among the .m candidates it knows (MATLAB, Objective-C) it is sure
    assert "M" not in content_model.load().languages
    assert detector.detect("bug-35448/fA.m", OCTAVE_FA) == ("MATLAB", "content_model")


def test_where_linguists_classifier_picks_a_language_the_model_knows_it_stands() -> None:
    """``.f`` in eight-space indentation: Linguist's classifier says Forth; the model knows Fortran only
    among the candidates, so it cannot weigh them and Linguist's answer (and the vote after it) stands."""
    indented = "        subroutine subb(k)\n          real(8), intent(inout) :: k(:)\n          k=k+1\n        endsubroutine\n"
    assert detector.detect("src/indented.f", indented) == ("Forth", "classifier")
    assert content_model.load().predict_among(indented.encode(), detector.extension_candidates(".f")) is None


def test_the_stage_records_the_model_and_can_turn_it_off() -> None:
    assert langid.detect("bug-35448/fA.m", OCTAVE_FA, LangidConfig()) == ("MATLAB", "code", "content_model")
    off = langid.detect("bug-35448/fA.m", OCTAVE_FA, LangidConfig(content_model=False))
    assert off == ("M", "code", "classifier")
    assert "content_model" in LANG_METHODS


def test_an_unlisted_extension_gets_no_programming_language_from_the_model() -> None:
    """``.decTest``-like files: Linguist lists no language for the extension, so a content guess of
    a programming language is not trusted there (as for magika); without an extension it is."""
    assert content_model.load().predict(ERLANG)[0] == "Erlang"  # the premise
    assert detector.detect("data/queue.dectest", ERLANG.decode()) == (schema.UNKNOWN, schema.UNKNOWN)
    assert detector.detect("bin/queue", ERLANG.decode())[0] == "Erlang"


def test_prose_is_no_programming_language() -> None:
    """A licence without a name: the model names no programming language for it (its prose and data
    classes), so magika decides, and plain text is no language."""
    guess, _ = content_model.load().predict(PROSE.encode())
    assert guess in content_model.load().languages
    assert enry.get_language_type(guess) != "programming"
    assert detector.detect("file0", PROSE) == (schema.UNKNOWN, schema.UNKNOWN)
    # the same text with a Lua function below it is code again
    assert detector.detect("file0", "--[[\n" + PROSE + "]]\n" + LUA.decode())[0] == "Lua"


def test_combine_orders_magika_and_the_model() -> None:
    sure_json, unsure_sql = ("JSON", 0.99), ("SQL", 0.6)
    assert detector.combine("JavaScript", 0.9, sure_json, 0.2, 0.95) == ("JSON", "magika")
    assert detector.combine("Lua", 0.3, unsure_sql, 0.2, 0.95) == ("Lua", "content_model")
    assert detector.combine("Lua", 0.1, unsure_sql, 0.2, 0.95) == ("SQL", "magika")
    assert detector.combine("Lua", 0.1, ("SQL", 0.3), 0.2, 0.95) == (schema.UNKNOWN, schema.UNKNOWN)


def test_the_shipped_model_is_small_and_loads_from_the_package() -> None:
    assert content_model.MODEL_FILE.is_file()
    assert content_model.MODEL_FILE.stat().st_size < 5_000_000
    model = content_model.load()
    assert len(model.ids) == len(model.weights) > 1000
    assert list(model.ids) == sorted(model.ids)
    assert {"Python", "Lua", "Erlang", "OCaml", "MATLAB", "Kotlin", "Swift"} <= set(model.languages)


def test_training_is_deterministic_and_the_file_round_trips() -> None:
    docs = [(LUA, "Lua", "a"), (LUA.replace(b"split", b"fields"), "Lua", "b"),
            (ERLANG, "Erlang", "a"), (ERLANG.replace(b"queue", b"stack"), "Erlang", "b"),
            (OCAML, "OCaml", "a"), (OCAML.replace(b"sum", b"total"), "OCaml", "b")]
    one = content_model.train(docs, n_features=500).to_bytes()
    two = content_model.train(list(reversed(docs)), n_features=500).to_bytes()
    assert hashlib.sha256(one).digest() == hashlib.sha256(two).digest()
    model = content_model.ContentModel.from_bytes(one)
    assert model.languages == ("Erlang", "Lua", "OCaml")
    assert [model.predict(t)[0] for t, _, _ in docs] == [lang for _, lang, _ in docs]
    with pytest.raises(ValueError, match="not a content model"):
        content_model.ContentModel.from_bytes(content_model.gzip.compress(b"\x02\x00\x00\x00{}" ))


def _record_of_this_package() -> str:
    """The ``RECORD`` a wheel of codecorpus would hold: path, sha256 (urlsafe base64), size per file."""
    import base64
    from pathlib import Path

    root = Path(content_model.__file__).resolve().parents[2]
    lines = []
    for p in sorted(root.glob("codecorpus/**/*.py")):
        digest = base64.urlsafe_b64encode(hashlib.sha256(p.read_bytes()).digest()).rstrip(b"=").decode()
        lines.append(f"{p.relative_to(root).as_posix()},sha256={digest},{p.stat().st_size}")
    return "\n".join([*lines, "codecorpus-0.1.dist-info/RECORD,,"]) + "\n"


def test_a_wheel_record_is_text_not_code() -> None:
    """An extensionless CSV of paths and hashes: magika reads plain text (not sure enough to come first),
    the model would call it code; plain text wins, and no language is named."""
    record = _record_of_this_package()
    found = detector.magika_label(record[:16384].encode())
    assert found is not None and found[0] in (schema.UNKNOWN, "CSV")
    assert detector.detect("codecorpus-0.1.dist-info/RECORD", record)[0] in (schema.UNKNOWN, "CSV")
    assert detector.combine("CMake", 0.3, (schema.UNKNOWN, 0.6), 0.2, 0.8) == (schema.UNKNOWN, schema.UNKNOWN)
    assert detector.combine("CMake", 0.3, (schema.UNKNOWN, 0.4), 0.2, 0.8) == ("CMake", "content_model")
