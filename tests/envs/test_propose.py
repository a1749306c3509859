"""The proposer interface: a recipe's callable gets the listing, docs and failures; its
proposals become candidates, bad ones are rejected with a reason, its exchange a chat trace."""

from __future__ import annotations

import json

import pytest

from codecorpus.envs import propose
from codecorpus.model import RecipeError

MODULE = '''
seen = []

def plain(request, command="python -m unittest -v"):
    seen.append(request)
    return [{"install": ["pip install -e ."], "test": command, "toolchain": "python"},
            {"test": "make it so", "toolchain": "cobol"}]

def chatty(request):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"},
                {"role": "assistant", "content": "node --test"}]
    return {"proposals": [{"test": "node --test", "toolchain": "node"}], "messages": messages}

def nothing(request):
    return []
'''


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "props.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "README.md").write_text("run `python -m unittest`")
    (repo / "src" / "a.py").write_text("x = 1\n")
    return repo


def test_proposals_become_candidates_and_bad_ones_are_named(tree):
    failures = [{"phase": "test", "command": "pytest", "exit_code": 5, "violation": None, "output_tail": "no tests"}]
    req = propose.request_for(tree, "o/r", "abc", failures, [])
    assert req.listing == ("README.md", "src/a.py") and "unittest" in req.docs["README.md"]
    found, messages, problem = propose.propose("props:plain", {"command": "python -m unittest -v x"}, req, "d" * 64)
    assert [c.commands for c in found.tests] == [("python -m unittest -v x",)]
    assert found.tests[0].parser == "unittest" and found.tests[0].source == "proposer:props:plain"
    assert found.installs[0].commands == ("pip install -e .",) and found.dependency_hash == "d" * 64
    assert problem == "proposal 1: needs a known toolchain and a test command"
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert json.loads(messages[1]["content"])["failures"] == failures
    trace = propose.trace_record(messages, "o/r", "abc", "props:plain", "verified", found)
    assert trace["messages"][-1]["role"] == "user" and trace["metadata"]["outcome"] == "verified"


def test_a_proposers_own_transcript_is_kept(tree):
    req = propose.request_for(tree, "o/r", "abc", [], [])
    found, messages, problem = propose.propose("props:chatty", {}, req, "e" * 64)
    assert messages[0]["content"] == "be brief" and len(messages) == 3 and problem is None
    assert found.tests[0].parser == "tap"


def test_no_proposals_and_bad_names(tree):
    req = propose.request_for(tree, "o/r", "abc", [], [])
    found, _, problem = propose.propose("props:nothing", {}, req, "f" * 64)
    assert found is None and problem == "no proposals"
    with pytest.raises(RecipeError, match="cannot import module"):
        propose.resolve("no_such_module_here:fn")
    with pytest.raises(RecipeError, match="no function"):
        propose.resolve("props:missing")
