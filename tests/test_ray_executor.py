"""The Ray executor on a local Ray runtime (``ray.init(num_cpus=2)``, shared by this module):
bit-identical scores vs the local executor, prefix caching on workers, a killed actor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from ray_helpers import (
    RAY_METRICS,
    as_data,
    bump_sample,
    patient_ray_start,
    start_with_retries,
)

from faithgate.execution import ExecutionSettings, LocalExecutor, ScorerRecipe
from faithgate.ray_executor import RayExecutor
from faithgate.types import Example

# One Ray runtime at a time: both Ray modules run in the same xdist worker, one after another.
pytestmark = pytest.mark.xdist_group("ray")
loads_models = pytest.mark.slow  # real models on BUMP data; still part of `make test`


@pytest.fixture(scope="module")
def ray_runtime() -> Iterator[None]:
    patient_ray_start()
    start_with_retries(
        lambda: ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False), ray.shutdown
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def sample(shared_data: Path) -> list[Example]:
    return bump_sample(shared_data, sources=3, per_source=2)


@pytest.fixture(scope="module")
def local_run(sample: list[Example]) -> tuple[list[dict], dict[str, int]]:
    """Reference scores from the local executor, and its likelihood engine's pass counts."""
    local = LocalExecutor(ScorerRecipe(RAY_METRICS))
    rows = local.score(sample)
    [engine] = [e for e in local.scorer.context._shared.values() if hasattr(e, "stats")]
    return as_data(rows), dict(engine.stats)


@pytest.fixture(scope="module")
def ray_exec(ray_runtime: None) -> Iterator[RayExecutor]:
    ex = RayExecutor(
        ScorerRecipe(RAY_METRICS),
        ExecutionSettings(executor="ray", num_workers=2, batch_size=2),
    )
    yield ex
    ex.close()


@loads_models
def test_ray_scores_bit_identical_to_local_with_prefix_cache(
    ray_exec: RayExecutor, sample: list[Example], local_run: tuple[list[dict], dict[str, int]]
) -> None:
    want, local_stats = local_run
    done: list[int] = []
    got = ray_exec.score(sample, progress=done.append)
    assert as_data(got) == want  # every value, sentence and detail, bit for bit
    assert sum(done) == len(sample)
    assert len(ray_exec.nodes) == 1 and ray_exec.stats["batches"] == 3
    # Batches keep each source's summaries together (the sample interleaves sources), so the
    # workers run each source prefix once, as the local engine does: same passes, same tokens.
    sources = len({ex.source for ex in sample})
    assert ray_exec.stats["passes"] == local_stats["passes"] == sources
    assert ray_exec.stats["tokens"] == local_stats["tokens"]


@loads_models
def test_killed_worker_is_replaced_and_its_batches_retried(
    ray_exec: RayExecutor, sample: list[Example], local_run: tuple[list[dict], dict[str, int]]
) -> None:
    ray_exec.start()
    restarts = ray_exec.stats["restarts"]
    ray.kill(ray_exec.actors[0])  # as a node loss or an OOM kill would
    got = ray_exec.score(sample)
    stats = ray_exec.stats
    assert stats["restarts"] == restarts + 1, stats
    assert stats["retries"] >= 1 and stats["failed"] == 0, stats
    assert as_data(got) == local_run[0]  # complete, nothing marked failed
