"""Two Ray nodes on this machine (CPUs split between them) give the single-node bytes."""

from __future__ import annotations

import pytest

from codecorpus.config import load_recipe_data
from codecorpus.manifests.manifest import verify
from codecorpus.runtime.executor import Executor, init_ray
from conftest import fixture_recipe, run_outputs, write_repos


def test_two_node_cluster_gives_single_node_bytes(tmp_path):
    import ray
    from ray.cluster_utils import Cluster

    corpus = write_repos(tmp_path / "corpus")
    recipe = load_recipe_data(fixture_recipe(corpus))
    single = tmp_path / "single"
    init_ray(2, None)
    Executor(recipe, single, quiet=True).run_pipeline()

    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        init_ray(None, cluster.address)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        multi = tmp_path / "multi"
        result = Executor(recipe, multi, quiet=True).run_pipeline()
        assert max(s.stats["nodes"] for s in result.stages) == 2  # tasks ran on both nodes
    finally:
        ray.shutdown()
        cluster.shutdown()
    a, b = run_outputs(single), run_outputs(multi)
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []
    assert verify(multi) == []


@pytest.fixture(autouse=True)
def _restore_local_ray():
    yield
    init_ray(2, None)
