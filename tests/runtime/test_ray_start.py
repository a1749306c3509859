"""The private local Ray's lean start: what it patches exists in the installed Ray, is restored
after the start, and a Ray whose private state API differs falls back to its own wait."""

from __future__ import annotations

import pytest

from codecorpus.runtime import executor


def test_the_patched_ray_internals_exist_in_the_installed_ray():
    """A Ray upgrade that renames one would start slower without failing: this fails instead."""
    from ray._private import node, services, state

    assert callable(node.Node.__dict__.get("start_head_processes"))
    assert callable(node.Node.__dict__.get("start_api_server"))
    assert callable(services.get_node) and callable(services._get_gcs_client_options)
    assert callable(state.GlobalState.node_table) and callable(state.GlobalState.disconnect)


def test_ray_internals_are_restored_after_the_start():
    from ray._private import node, services

    before = (services.get_node, node.Node.start_head_processes, node.Node.start_api_server)
    with executor._lean_local_start():
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

    wait = executor._prompt_node_wait(get_node)
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
    monkeypatch.setattr(executor, "NODE_POLL_SECONDS", 0.0)
    wait = executor._prompt_node_wait(lambda address, node_id: {"NodeID": node_id, "asked": len(asked)})
    assert wait("127.0.0.1:1", "ab12") == {"NodeID": "ab12", "asked": 3}
