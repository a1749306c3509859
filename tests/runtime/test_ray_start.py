"""The private local Ray's lean start: what it patches exists in the installed Ray, is restored
after the start, and a Ray whose private APIs differ falls back to its own waits and checks."""

from __future__ import annotations

import pytest

from codecorpus.runtime import local_start


def test_the_patched_ray_internals_exist_in_the_installed_ray():
    """A Ray upgrade that renames one would start slower without failing: this fails instead."""
    import inspect

    from ray._private import node, services, state, utils

    assert callable(node.Node.__dict__.get("start_head_processes"))
    assert callable(node.Node.__dict__.get("start_api_server"))
    assert callable(services.get_node) and callable(services._get_gcs_client_options)
    assert callable(state.GlobalState.node_table) and callable(state.GlobalState.disconnect)
    assert callable(utils.get_dashboard_dependency_error)
    assert "poll_interval_ms" in (node.wait_for_persisted_port.__doc__ or str(inspect.signature(node.wait_for_persisted_port)))


def test_ray_internals_are_restored_after_the_start():
    from ray._private import node, services

    before = (services.get_node, node.Node.start_head_processes, node.Node.start_api_server)
    with local_start.lean_local_start():
        assert services.get_node is not before[0]
        assert node.Node.start_api_server is not before[2]
    assert (services.get_node, node.Node.start_head_processes, node.Node.start_api_server) == before


def test_the_node_wait_falls_back_to_rays_own(monkeypatch: pytest.MonkeyPatch):
    from ray._private import state

    class OtherGlobalState:  # a Ray whose private state API differs
        def _initialize_global_state(self, options: object) -> None:
            raise AttributeError("no such accessor")

    monkeypatch.setattr(state, "GlobalState", OtherGlobalState)
    calls = []

    def get_node(gcs_address: str, node_id: str) -> dict:
        calls.append((gcs_address, node_id))
        return {"NodeID": node_id}

    wait = local_start.prompt_node_wait(get_node)
    assert wait("127.0.0.1:1", "ab12") == {"NodeID": "ab12"}
    assert calls == [("127.0.0.1:1", "ab12")]


def test_the_node_wait_asks_the_node_table_until_the_node_is_there(monkeypatch: pytest.MonkeyPatch):
    from ray._private import services, state

    tables = iter([[], [{"NodeID": "other"}], [{"NodeID": "other"}, {"NodeID": "ab12"}]])
    asked = []

    class Table:
        def _initialize_global_state(self, options: object) -> None:
            pass

        def node_table(self) -> list[dict]:
            asked.append(1)
            return next(tables)

        def disconnect(self) -> None:
            pass

    monkeypatch.setattr(state, "GlobalState", Table)
    monkeypatch.setattr(services, "_get_gcs_client_options", lambda address: address)
    monkeypatch.setattr(local_start, "NODE_POLL_SECONDS", 0.0)
    wait = local_start.prompt_node_wait(lambda address, node_id: {"NodeID": node_id, "asked": len(asked)})
    assert wait("127.0.0.1:1", "ab12") == {"NodeID": "ab12", "asked": 3}


def test_the_dashboard_check_gives_rays_answer_without_importing_aiohttp():
    """In a fresh interpreter (nothing imported before): the same answer as Ray's own check,
    and aiohttp, which Ray's check imports where it is installed (the dev extra), not imported."""
    import json
    import subprocess
    import sys

    def ask(code: str) -> list:
        out = subprocess.run([sys.executable, "-c", "import json, sys\n" + code + "\n"
                              "print(json.dumps([error is None, 'aiohttp' in sys.modules]))"],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out.splitlines()[-1])

    ours = ask("from ray._private import utils\nfrom codecorpus.runtime import local_start\n"
               "error = local_start.dashboard_dependency_error(utils.get_dashboard_dependency_error)()")
    rays = ask("from ray._private import utils\nerror = utils.get_dashboard_dependency_error()")
    assert ours[0] == rays[0]
    if not ours[0]:  # a minimal install, as the dev extra is: answered by the import system
        assert ours[1] is False


def test_the_dashboard_check_imports_when_every_module_is_there(monkeypatch: pytest.MonkeyPatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    asked = []

    def every_module_found(name: str, package: str | None = None) -> object:
        if name == local_start.DASHBOARD_DEPS_MODULE:
            return find_spec(name)
        asked.append(name)
        return object()

    monkeypatch.setattr(importlib.util, "find_spec", every_module_found)
    imported = []
    check = local_start.dashboard_dependency_error(lambda: imported.append(1))
    assert check() is None and imported == [1]
    assert {"aiohttp", "grpc", "pydantic"} <= set(asked)


def test_the_top_level_imports_of_a_module():
    import ast

    tree = ast.parse("import a.b\nimport c as d\nfrom e.f import g\nfrom . import h\nfrom .i import j\n")
    assert local_start._top_level_imports(tree) == {"a", "c", "e"}
