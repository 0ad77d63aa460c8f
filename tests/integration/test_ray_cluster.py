"""The Ray executor on a two-node cluster on this machine (``ray.cluster_utils.Cluster``):
scores bit-identical to the local executor with work on both nodes, and the cluster found
through ``address`` and through ``RAY_ADDRESS`` (a connection the executor opened is closed
with it; the cluster itself is left running)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster
from ray_helpers import RAY_METRICS, as_data, bump_sample, patient_ray_start, start_with_retries

from faithgate.scoring.execution import ExecutionSettings, LocalExecutor, ScorerRecipe
from faithgate.scoring.ray_executor import RayExecutor
from faithgate.types import Example

# Loads real models on BUMP data (the "slow" marker; still part of `make test`).
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    assert not ray.is_initialized()
    patient_ray_start()
    c = start_with_retries(
        lambda: Cluster(
            initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
        ),
        lambda: None,
    )
    start_with_retries(lambda: c.add_node(num_cpus=1), lambda: None)
    c.wait_for_nodes()
    yield c
    if ray.is_initialized():
        ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def sample(shared_data: Path) -> list[Example]:
    return bump_sample(shared_data, sources=2, per_source=3)


def test_two_nodes_bit_identical_to_local(cluster: Cluster, sample: list[Example]) -> None:
    want = as_data(LocalExecutor(ScorerRecipe(RAY_METRICS)).score(sample))
    ex = RayExecutor(
        ScorerRecipe(RAY_METRICS),
        ExecutionSettings(executor="ray", address=cluster.address, num_workers=2, batch_size=3),
    )
    try:
        got = ex.score(sample)
        assert len(ex.nodes) == 2  # one actor per node (each node has one CPU)
    finally:
        ex.close()
    assert as_data(got) == want
    assert ex.stats["passes"] == len({e.source for e in sample})  # one prefix pass per source
    assert not ray.is_initialized()  # it connected, so it disconnected; the cluster lives on
    assert len(cluster.list_all_nodes()) == 2


def test_cluster_found_through_ray_address(
    cluster: Cluster, sample: list[Example], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    want = as_data(LocalExecutor(ScorerRecipe(("overlap",))).score(sample))
    ex = RayExecutor(ScorerRecipe(("overlap",)), ExecutionSettings(executor="ray", batch_size=3))
    try:
        got = ex.score(sample)
        assert len(ex.actors) == 2  # as many workers as the cluster's free CPUs allow
        assert ray.get_runtime_context().gcs_address == cluster.address
    finally:
        ex.close()
    assert as_data(got) == want
    assert not ray.is_initialized()
