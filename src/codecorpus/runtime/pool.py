"""Rollout sessions on the nodes of a Ray cluster, placed by the capacity each node declares.

A node declares how many sessions it holds as a Ray custom resource (``ray start
--resources '{"rollout_slots": 8}'``, or ``Cluster.add_node(resources=...)``); each
session is an actor asking for one slot, so Ray places it on a node with a free one.
A trainer asks for N sessions at once; more than the cluster's slots is refused at once
(an actor Ray cannot place would wait forever).

On its node a session opens from that node's files only: the manifest, specs, tasks and
repository snapshot come through the run's storage (an S3 run's bucket, fetched into the
node's mirror, as stage outputs reach a task), and the installed environment is the
node's own cache (``RUN/env_cache`` in its mirror), built once per node whatever the
number of sessions (``envs/session.py`` locks the install).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import ray

from codecorpus.envs.manifest_tasks import run_cache_dir, tasks_of
from codecorpus.envs.session import CommandResult, Session, SessionConfig

SLOT = "rollout_slots"
"""The custom resource a node declares: how many sessions it holds at once."""


@ray.remote(num_cpus=0)
class SessionActor:
    """One session on the node Ray placed it on."""

    def __init__(self, manifest: str, instance_id: str, cfg: dict | None) -> None:
        entry = tasks_of(manifest)[instance_id]
        base = {"cache_dir": run_cache_dir(manifest), **(cfg or {})}
        self.session = Session(entry, SessionConfig(**base))

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def cache_dir(self) -> str:
        return self.session.cfg.cache_dir

    def run(self, command: str, timeout: float = 60.0) -> CommandResult:
        return self.session.run(command, timeout)

    def read_file(self, rel: str) -> str:
        return self.session.read_file(rel)

    def write_file(self, rel: str, text: str) -> None:
        self.session.write_file(rel, text)

    def list_files(self, rel: str = ".") -> list[str]:
        return self.session.list_files(rel)

    def diff(self) -> str:
        return self.session.diff()

    def evaluate(self, patch: str | None = None) -> dict:
        return self.session.evaluate(patch)

    def close(self) -> str | None:
        self.session.close()
        return self.session.closed_reason


class SessionPool:
    """Sessions of an RL manifest's tasks on a Ray cluster (Ray must be started or joined:
    ``runtime.session.init_ray``)."""

    def __init__(self, manifest: str, cfg: dict | None = None, slot: str = SLOT) -> None:
        """``slot``: the resource a session takes one of (``"CPU"``: a core each, for a
        local Ray whose nodes declare no slots)."""
        self.manifest, self.cfg, self.slot = str(manifest), cfg, slot
        self.actors: list[Any] = []

    def capacity(self) -> int:
        """Sessions the cluster holds at once: the nodes' declared slots."""
        return int(ray.cluster_resources().get(self.slot, 0))

    def open(self, instance_id: str, n: int) -> list[Any]:
        """``n`` new sessions of one task (actor handles: ``ray.get(h.run.remote(...))``)."""
        free = self.capacity() - len(self.actors)
        if n > free:
            raise ValueError(f"{n} sessions asked, {free} of {self.capacity()} '{self.slot}' slots free: "
                             f"declare more on a node (ray start --resources '{{\"{self.slot}\": N}}')")
        ask = {"num_cpus": 1} if self.slot == "CPU" else {"resources": {self.slot: 1}}
        made = [SessionActor.options(**ask).remote(self.manifest, instance_id, self.cfg) for _ in range(n)]
        ray.get([a.node.remote() for a in made])  # each session open (its constructor ran) on its node
        self.actors += made
        return made

    def placement(self) -> Counter:
        """How many of the pool's sessions each node holds."""
        return Counter(ray.get([a.node.remote() for a in self.actors]))

    def close(self) -> None:
        """Close every session and end its actor."""
        ray.get([a.close.remote() for a in self.actors])
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
