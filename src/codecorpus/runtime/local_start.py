"""A private local Ray's start without the processes and idle waits a pipeline never needs.

``ray.init`` has options for none of this, so for the one call ``lean_local_start``
patches private parts of Ray (each restored after; a Ray without them starts as before,
and ``tests/runtime/test_ray_start.py`` fails when an upgrade renames one). What each
saves was measured on this project's 2-core machine; the README's Ray section has the
whole start.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator

SOCKET_RETRY_ENV = {
    "RAY_raylet_client_connect_timeout_milliseconds": "20",
    "RAY_raylet_client_num_connect_attempts": "500",
}
"""Ray's settings of how its processes retry a Unix socket that is not listening yet: every 20 ms
for 10 s, not Ray's every 1,000 ms for 10 s. A starting raylet connects to its own object store
this way, and when the store was not up at the first try (a race: 3 of 6 starts with planning
beside them) it slept a whole second before it started its agents. Each is left as set if set."""
PORT_POLL_MS = 5
"""How often the driver looks for the port file a starting GCS writes (Ray's default: 100 ms)."""
NODE_POLL_SECONDS = 0.01
"""How often a starting local Ray's driver asks the GCS whether its raylet has registered."""
NODE_WAIT_SECONDS = 30.0
"""How long it asks before leaving the wait to Ray's own (``Node``'s ``raylet_start_wait_time_s``)."""

AGENT_NICENESS = 19
"""The nice value a minimal install's two agents start at: they serve a local run nothing it
waits for, so they take the CPU the run leaves."""
AGENT_COMPONENTS = frozenset({"dashboard_agent", "runtime_env_agent"})
"""Ray's names of the raylet's two agent processes (``ray_constants.PROCESS_TYPE_*_AGENT``)."""
DASHBOARD_AGENT_PORTS = ("METRICS_AGENT_PORT_NAME", "METRICS_EXPORT_PORT_NAME", "DASHBOARD_AGENT_LISTEN_PORT_NAME")
"""``ray._raylet``'s names of the three ports a dashboard agent writes to files (-1 each in a minimal install)."""

_START_PATCH_LOCK = threading.Lock()
"""Held while Ray's start is patched (one ``ray.init`` at a time)."""


@contextlib.contextmanager
def lean_local_start() -> Iterator[None]:
    """Skip the head processes a private local ``ray.init`` starts but a pipeline never uses,
    and the start's fixed-interval waits.

    Measured with ``bench/ray_start.py`` (start = init + one task per CPU; medians of 5,
    2 cores, another job on the machine): 7.3 s start / 1.5 s shutdown by default,
    4.4 s / 0.4 s with the three processes skipped.

    - the autoscaler monitor (``RayParams.no_monitor``): a Python process importing Ray
      for a cluster that never scales. Ray's shutdown gives it 1 s to take SIGTERM, so
      skipping it saves ~1 s of shutdown, and CPU while the workers start. Lost:
      ``ray status``'s autoscaler report and the autoscaler's warnings on requests no
      node can fit.
    - the log monitor (``include_log_monitor``): tails the workers' logs to publish
      them to the driver, which ``log_to_driver=False`` never reads; CPU at start.
    - the API server (``start_api_server``): started even with ``include_dashboard=False``,
      and ``ray.init`` waits until it has published its URL; alone ~1.7 s of start.
      Lost: the dashboard URL and the APIs it serves (job submission, ``ray list``).

    Alone each of the first two is within the noise at start (the monitor's shutdown
    saving is not); together the three save ~3 s.

    The raylet's two agents, where the install is minimal (``ray`` without ``ray[default]``,
    as codecorpus depends on it): the raylet registers only once each agent has written
    its ports to a file, and each is a Python process importing Ray (0.4-0.6 s of CPU).
    A minimal dashboard agent loads no module and writes -1 for its three ports; the
    runtime-env agent serves only tasks with a runtime env, which a local run has none of.
    So ``background_agents`` writes those four files before the raylet starts (the
    runtime-env agent's port chosen ahead and passed to it, as Ray chose it before it had
    port files) and ``niced_agents`` starts both agents at nice ``AGENT_NICENESS``. The
    workers start at once instead of after the agents, and the agents import on the CPU the
    run leaves. Writing the files without the nice measured slower, since the workers then
    start while the two agents import on the same two cores. Where the dashboard's
    dependencies are installed, its agent serves metrics and both are left as Ray starts them.

    The waits, each on the way to the raylet's registration, which everything after waits on:

    - the GCS's port file is looked for every ``PORT_POLL_MS``, not every 100 ms
      (``wait_for_persisted_port``'s own ``poll_interval_ms``): 0.11 s -> 0.05 s from the
      GCS's start to the driver's connection to it;
    - whether the dashboard's optional dependencies are installed (it decides the
      agent's ``--minimal``) is first asked of the import system (``dashboard_dependency_error``),
      not answered by importing aiohttp and making its SSL context: 0.13 s of the
      driver's CPU before the raylet's start, where aiohttp is installed (the dev extra);
    - Ray's wait for its raylet to register is made prompt (``prompt_node_wait``).
    """
    try:
        from ray._private import node as ray_node
        from ray._private import services as ray_services
        from ray._private import utils as ray_utils
    except ImportError:
        yield
        return
    node_class = ray_node.Node
    originals = {name: node_class.__dict__.get(name) for name in ("start_head_processes", "start_api_server")}
    if not all(callable(fn) for fn in originals.values()):
        yield
        return

    agent_command = getattr(ray_services, "_build_python_executable_command_memory_profileable", None)
    background = callable(agent_command) and _agents_serve_nothing(ray_utils)

    def start_head_processes(self: ray_node.Node) -> None:
        self._ray_params.no_monitor = True
        self._ray_params.include_log_monitor = False  # read after this, in start_ray_processes
        if background:  # before start_ray_processes starts the raylet
            background_agents(self)
        originals["start_head_processes"](self)

    def start_api_server(self: ray_node.Node, *args: object, **kwargs: object) -> None:
        self._webui_url = None

    patches = [(node_class, "start_head_processes", start_head_processes),
               (node_class, "start_api_server", start_api_server)]
    for module, name, wrap in ((ray_services, "get_node", prompt_node_wait),
                               (ray_node, "wait_for_persisted_port", _prompt_port_wait),
                               (ray_utils, "get_dashboard_dependency_error", dashboard_dependency_error)):
        original = getattr(module, name, None)
        if callable(original):
            patches.append((module, name, wrap(original)))
    if background:
        patches.append((ray_services, "_build_python_executable_command_memory_profileable", niced_agents(agent_command)))
    with _START_PATCH_LOCK:
        saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
        for owner, name, fn in patches:
            setattr(owner, name, fn)
        try:
            yield
        finally:
            for owner, name, fn in saved:
                setattr(owner, name, fn)


def _agents_serve_nothing(ray_utils: object) -> bool:
    """Whether this install's agents serve a local run nothing it waits for (a minimal install),
    and this Ray and machine have what ``background_agents`` and ``niced_agents`` use."""
    try:
        from ray import _raylet
    except ImportError:
        return False
    names = ("persist_port", "RUNTIME_ENV_AGENT_PORT_NAME", *DASHBOARD_AGENT_PORTS)
    check = getattr(ray_utils, "get_dashboard_dependency_error", None)
    if not callable(check) or not all(hasattr(_raylet, name) for name in names) or shutil.which("nice") is None:
        return False
    return dashboard_dependency_error(check)() is not None


def background_agents(node: object) -> None:
    """Write the four port files a starting raylet waits on, as a minimal install's agents write them.

    The dashboard agent's three ports are -1 (no metrics, no HTTP server). The runtime-env
    agent's is a port free now, passed to the agent (``RayParams.runtime_env_agent_port``),
    which binds it with ``SO_REUSEADDR`` and writes the same number again once it is up.
    """
    from ray import _raylet

    params, session_dir, node_id = node._ray_params, node._session_dir, node._node_id  # type: ignore[attr-defined]
    if not params.runtime_env_agent_port:
        params.runtime_env_agent_port = free_port()
    _raylet.persist_port(session_dir, node_id, _raylet.RUNTIME_ENV_AGENT_PORT_NAME, params.runtime_env_agent_port)
    for name in DASHBOARD_AGENT_PORTS:
        _raylet.persist_port(session_dir, node_id, getattr(_raylet, name), -1)


def free_port() -> int:
    """A TCP port no socket of this machine listens on now (on any address)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def niced_agents(build: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """Ray's builder of a component's Python command, with ``nice -n AGENT_NICENESS`` before an agent's.

    The raylet runs the agents' commands itself; ``nice`` executes the interpreter in its own
    process, so the raylet still watches the agent's pid.
    """
    nice = shutil.which("nice") or "nice"

    def command(component: str, *args: object, **kwargs: object) -> list[str]:
        cmd = build(component, *args, **kwargs)
        return [nice, "-n", str(AGENT_NICENESS), *cmd] if component in AGENT_COMPONENTS else cmd

    return command


def _prompt_port_wait(wait_for_persisted_port: Callable[..., int]) -> Callable[..., int]:
    return functools.partial(wait_for_persisted_port, poll_interval_ms=PORT_POLL_MS)


def prompt_node_wait(get_node: Callable[[str, str], dict]) -> Callable[[str, str], dict]:
    """Ray's ``services.get_node``, called once the node is in the GCS's node table.

    ``Node`` calls it as soon as it has started the raylet, and the C++ accessor behind it
    retries once a second until the raylet has registered. The raylet registers about
    0.45 s after it starts (it waits on its two agents), so the start paid a whole second
    of that poll, or two: ``ray.init`` alone took 1.65 or 2.65 s, 3 runs each of 6 on this
    machine. Asking the node table (no retry of its own) every ``NODE_POLL_SECONDS``
    first, the same call returns at once: 1.06-1.25 s in 6 of 6 runs.
    """

    def prompt_get_node(gcs_address: str, node_id: str) -> dict:
        try:
            from ray._private import services as ray_services
            from ray._private import state as ray_state

            table = ray_state.GlobalState()
            table._initialize_global_state(ray_services._get_gcs_client_options(gcs_address))
            deadline = time.monotonic() + NODE_WAIT_SECONDS
            while not any(n.get("NodeID") == node_id for n in table.node_table()):
                if time.monotonic() > deadline:
                    break
                time.sleep(NODE_POLL_SECONDS)
            table.disconnect()
        except (AttributeError, TypeError, RuntimeError):  # a Ray whose private state API differs
            pass  # its own wait alone
        return get_node(gcs_address, node_id)

    return prompt_get_node


DASHBOARD_DEPS_MODULE = "ray.dashboard.optional_deps"
"""The module whose imports are Ray's test of an installation with the dashboard (``ray[default]``)."""


def dashboard_dependency_error(imported: Callable[[], ImportError | None]) -> Callable[[], ImportError | None]:
    """Ray's ``get_dashboard_dependency_error``, answered without importing where it can be.

    Ray imports ``DASHBOARD_DEPS_MODULE``, whose only content is imports, and reads a
    failure as a minimal installation. When one of the top-level modules it imports is not
    installed at all (``importlib.util.find_spec``), that import fails: the same answer
    without importing the rest. When all of them are installed, Ray's own import decides.
    """

    def dependency_error() -> ImportError | None:
        try:
            spec = importlib.util.find_spec(DASHBOARD_DEPS_MODULE)
            tree = ast.parse(spec.loader.get_source(DASHBOARD_DEPS_MODULE))  # type: ignore[union-attr]
        except (ImportError, AttributeError, ValueError, SyntaxError):
            return imported()
        for name in sorted(_top_level_imports(tree)):
            if importlib.util.find_spec(name) is None:
                return ImportError(f"No module named {name!r}", name=name)
        return imported()

    return dependency_error


def _top_level_imports(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names
