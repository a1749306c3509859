"""The private local Ray's lean start: what it patches exists in the installed Ray, is restored
after the start, and a Ray whose private APIs differ falls back to its own waits and checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from codecorpus.runtime import local_start
from conftest import processes_left_under


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
    assert next(iter(inspect.signature(services._build_python_executable_command_memory_profileable).parameters)) == "component"


def test_the_agents_names_and_port_files_exist_in_the_installed_ray():
    """What the agents' start in the background writes and wraps (``background_agents``, ``niced_agents``)."""
    from ray import _raylet
    from ray._private import ray_constants

    assert {ray_constants.PROCESS_TYPE_DASHBOARD_AGENT, ray_constants.PROCESS_TYPE_RUNTIME_ENV_AGENT} == local_start.AGENT_COMPONENTS
    assert callable(_raylet.persist_port) and callable(_raylet.get_port_filename)
    for name in ("RUNTIME_ENV_AGENT_PORT_NAME", "METRICS_AGENT_PORT_NAME", "METRICS_EXPORT_PORT_NAME",
                 "DASHBOARD_AGENT_LISTEN_PORT_NAME"):
        assert isinstance(getattr(_raylet, name), str)


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


def test_only_the_agents_commands_are_niced():
    def build(component: str, session_dir: str, unbuffered: bool = True) -> list[str]:
        return ["python", "-u"] if unbuffered else ["python"]

    command = local_start.niced_agents(build)
    for agent in sorted(local_start.AGENT_COMPONENTS):
        cmd = command(agent, "/tmp/session")
        assert cmd[1:3] == ["-n", str(local_start.AGENT_NICENESS)] and cmd[0].endswith("nice") and cmd[3:] == ["python", "-u"]
    assert command("dashboard", "/tmp/session", unbuffered=False) == ["python"]
    assert command("log_monitor", "/tmp/session") == ["python", "-u"]


def test_the_agents_port_files_are_written_as_a_minimal_install_writes_them(tmp_path):
    from types import SimpleNamespace

    from ray import _raylet

    node_id = "ab" * 28
    params = SimpleNamespace(runtime_env_agent_port=None)
    local_start.background_agents(SimpleNamespace(_ray_params=params, _session_dir=str(tmp_path), _node_id=node_id))
    assert isinstance(params.runtime_env_agent_port, int) and params.runtime_env_agent_port > 0

    def written(name: str) -> int:
        return int((tmp_path / _raylet.get_port_filename(node_id, name)).read_text())

    assert written(_raylet.RUNTIME_ENV_AGENT_PORT_NAME) == params.runtime_env_agent_port
    assert [written(name) for name in (_raylet.METRICS_AGENT_PORT_NAME, _raylet.METRICS_EXPORT_PORT_NAME,
                                       _raylet.DASHBOARD_AGENT_LISTEN_PORT_NAME)] == [-1, -1, -1]

    params.runtime_env_agent_port = 40123  # a port set by the caller is kept
    local_start.background_agents(SimpleNamespace(_ray_params=params, _session_dir=str(tmp_path), _node_id=node_id))
    assert written(_raylet.RUNTIME_ENV_AGENT_PORT_NAME) == 40123


def test_agents_that_serve_metrics_keep_rays_own_start(monkeypatch: pytest.MonkeyPatch):
    """Where the dashboard's dependencies are installed its agent picks and serves its ports: the
    raylet must wait for them, so nothing is written ahead and no agent is niced."""
    from ray._private import services, utils

    monkeypatch.setattr(local_start, "dashboard_dependency_error", lambda imported: lambda: None)
    assert local_start._agents_serve_nothing(utils) is False
    before = services._build_python_executable_command_memory_profileable
    with local_start.lean_local_start():
        assert services._build_python_executable_command_memory_profileable is before


AGENTS_PROBE = """
import json, os, time, ray
from codecorpus.runtime.session import init_ray

init_ray(1, None)
session = ray._private.worker._global_node.get_session_dir_path()


def agents_now():
    # each agent's nice value once its process runs Python: the raylet no longer waits for the
    # agents, so one may not be started yet, or its nice may not have executed the interpreter yet.
    # An agent has its script as an argument of its own; the raylet names both scripts inside
    # its --*_agent_command arguments, and runs at the driver's nice value
    agents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\\0")
            title = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            continue
        for script, name in (("dashboard/agent.py", "dashboard"), ("runtime_env/agent/main.py", "runtime_env")):
            if any(arg.endswith(script) for arg in argv) and any(session in arg for arg in argv) and title != "nice":
                agents[name] = os.getpriority(os.PRIO_PROCESS, int(pid))
    return agents


deadline = time.monotonic() + 30
while len(agents := agents_now()) < 2 and time.monotonic() < deadline:
    time.sleep(0.05)

@ray.remote
def env_var():
    return os.environ.get("CODECORPUS_PROBE")

plain = ray.get(env_var.remote())
with_env = ray.get(env_var.options(runtime_env={"env_vars": {"CODECORPUS_PROBE": "set"}}).remote())
ray.shutdown()
print(json.dumps({"agents": agents, "driver": os.getpriority(os.PRIO_PROCESS, 0), "plain": plain,
                  "with_env": with_env, "session": session}))
"""


def test_a_minimal_installs_agents_run_niced_and_still_serve_a_runtime_env():
    """A real start: both agents run at ``AGENT_NICENESS`` above the driver's nice value, a task
    runs, a task with a runtime env gets it from the niced runtime-env agent, and nothing is
    left of the Ray after its shutdown."""
    from ray._private import utils

    if not local_start._agents_serve_nothing(utils):
        pytest.skip("the dashboard's dependencies are installed: its agent serves metrics and starts as Ray starts it")
    ray_tmp = Path(tempfile.mkdtemp(prefix="rn", dir="/tmp"))  # short: Ray's socket paths have a length limit
    try:
        out = subprocess.run([sys.executable, "-c", AGENTS_PROBE], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "RAY_TMPDIR": str(ray_tmp)})
        assert out.returncode == 0, out.stderr[-3000:]
        probe = json.loads(out.stdout.splitlines()[-1])
        niced = min(probe["driver"] + local_start.AGENT_NICENESS, 19)
        assert probe["agents"] == {"dashboard": niced, "runtime_env": niced}
        assert probe["plain"] is None and probe["with_env"] == "set"
        assert processes_left_under(ray_tmp) == []
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
