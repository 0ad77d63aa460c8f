"""The Ray executor on a two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``,
one CPU per node), started once for the module: scores bit-identical to the local executor with
work on both nodes and prefix caching on the workers, the driver-side cache filled by a Ray run
and hit by a local rerun, the cluster found through ``address`` and through ``RAY_ADDRESS`` (a
connection the executor opened is closed with it; the cluster lives on), a killed actor, a
poisoned example failing alone (and the gate failing closed on it), chunks streamed through the
actor pool, and a pool larger than the cluster's room (never a hang).

Real models load only in the first tests' pool (shared by them); the others score with the
model-free test metrics of ``ray_helpers``, which exercise the same executor paths.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs faithgate[ray]")

import ray_helpers  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray_helpers import (  # noqa: E402
    RAY_METRICS,
    EnvMetric,
    PoisonMetric,
    PreparePoisonMetric,
    WorkerDriftMetric,
    WorkerOnlyErrorMetric,
    as_data,
    bump_sample,
    fails_after,
    patient_ray_start,
    poison_examples,
    start_with_retries,
)

from faithgate.cache import ScoreCache  # noqa: E402
from faithgate.config import GateConfig  # noqa: E402
from faithgate.errors import InputError  # noqa: E402
from faithgate.gate import Gate  # noqa: E402
from faithgate.gate.evaluate import evaluate  # noqa: E402
from faithgate.report import render  # noqa: E402
from faithgate.scoring.execution import (  # noqa: E402
    CachedExecutor,
    ExecutionSettings,
    LocalExecutor,
    ScorerRecipe,
)
from faithgate.scoring.ray_executor import RayExecutor  # noqa: E402
from faithgate.types import Example  # noqa: E402

# One Ray at a time: every Ray module runs in the same xdist worker, one after another.
pytestmark = pytest.mark.xdist_group("ray")
loads_models = pytest.mark.slow  # real models on BUMP data; still part of `make test`


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Two nodes of one CPU each; this process is not connected to it (tests and fixtures
    connect as they need). Tests that need the driver unconnected come first in the file."""
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
    """Six BUMP rows of three articles, interleaved: three batches of two over two nodes."""
    return bump_sample(shared_data, sources=3, per_source=2)


@pytest.fixture(scope="module")
def local_run(sample: list[Example]) -> tuple[list[dict], dict[str, int]]:
    """Reference scores from the local executor, and its likelihood engine's pass counts."""
    local = LocalExecutor(ScorerRecipe(RAY_METRICS))
    rows = local.score(sample)
    [engine] = [e for e in local.scorer.context._shared.values() if hasattr(e, "stats")]
    return as_data(rows), dict(engine.stats)


@pytest.fixture(scope="module")
def ray_exec(cluster: Cluster) -> Iterator[RayExecutor]:
    """The real-model pool (two workers, one per node), shared by the tests that need one: it
    connects to the cluster itself (through ``address``), as ``faithgate check`` does."""
    ex = RayExecutor(
        ScorerRecipe(RAY_METRICS),
        ExecutionSettings(executor="ray", address=cluster.address, num_workers=2, batch_size=2),
    )
    yield ex
    ex.close()


@loads_models
def test_two_nodes_bit_identical_to_local_with_prefix_cache(
    ray_exec: RayExecutor, sample: list[Example], local_run: tuple[list[dict], dict[str, int]]
) -> None:
    want, local_stats = local_run
    done: list[int] = []
    got = ray_exec.score(sample, progress=done.append)
    assert as_data(got) == want  # every value, sentence and detail, bit for bit
    assert sum(done) == len(sample)
    assert len(ray_exec.actors) == 2 and ray_exec.stats["batches"] == 3
    assert len(ray_exec.nodes) == 2  # one actor per node (each node has one CPU)
    # Batches keep each source's summaries together (the sample interleaves sources), so the
    # workers run each source prefix once, as the local engine does: same passes, same tokens.
    sources = len({ex.source for ex in sample})
    assert ray_exec.stats["passes"] == local_stats["passes"] == sources
    assert ray_exec.stats["tokens"] == local_stats["tokens"]


@loads_models
def test_cache_filled_by_a_ray_run_is_hit_by_a_local_rerun(
    ray_exec: RayExecutor, sample: list[Example], tmp_path: Path
) -> None:
    """The driver writes what the workers computed; a local gate then reads every cell."""
    config = GateConfig.from_dict(
        {
            "metrics": list(RAY_METRICS),
            "cache_dir": str(tmp_path),
            "thresholds": dict.fromkeys(RAY_METRICS, 0.0),
        }
    )
    cache = ScoreCache(config.cache_path / "scores.sqlite")
    cached = CachedExecutor(ray_exec, cache, chunk_size=2)  # three chunks, streamed
    # One source per chunk: a batch never spans chunks, so each source prefix runs once.
    sample = sorted(sample, key=lambda ex: ex.source)
    batches = ray_exec.stats["batches"]
    from_ray = cached.score(sample)
    assert ray_exec.stats["batches"] > batches  # computed on the workers
    assert (cache.hits, cache.misses) == (0, len(sample) * len(RAY_METRICS))
    gate = Gate(config)  # local executor, the same cache file
    assert gate.config.execution.executor == "local"
    result = gate.run(sample)
    assert result.cache == {"hits": len(sample) * len(RAY_METRICS), "misses": 0}
    for i, ex in enumerate(sample):
        for m in RAY_METRICS:
            assert result.examples[i].scores[m].value == from_ray[i][m].value, (ex.id, m)


@pytest.fixture()
def helpers_by_value() -> Iterator[None]:
    """Ship ``ray_helpers`` (the test metric) to the workers inside the pickles, as
    ``runtime_env = { py_modules = [...] }`` would on a cluster."""
    ray.cloudpickle.register_pickle_by_value(ray_helpers)
    yield
    ray.cloudpickle.unregister_pickle_by_value(ray_helpers)


@pytest.mark.usefixtures("helpers_by_value")
def test_cluster_found_through_ray_address(
    cluster: Cluster, ray_exec: RayExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The shared pool connected through ``address``: closing it disconnects this process and
    # leaves the cluster running (and frees both CPUs for the pool below).
    ray_exec.start()  # a no-op after the tests above
    assert ray.is_initialized()
    ray_exec.close()
    assert not ray.is_initialized()
    assert len(cluster.list_all_nodes()) == 2

    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    examples = [e for e in poison_examples() if e.id not in ("c1", "p1")]
    recipe = ScorerRecipe((PoisonMetric(),))
    want = as_data(LocalExecutor(recipe).score(examples))
    ex = RayExecutor(recipe, ExecutionSettings(executor="ray", batch_size=2))
    try:
        got = ex.score(examples)
        assert len(ex.actors) == 2  # as many workers as the cluster's free CPUs allow
        assert ray.get_runtime_context().gcs_address == cluster.address
    finally:
        ex.close()
    assert as_data(got) == want
    assert not ray.is_initialized()
    assert len(cluster.list_all_nodes()) == 2


# The tests below share one driver connection to the cluster (Ray initialised in this process,
# as in a notebook), and score with the model-free test metrics of ``ray_helpers``.


@pytest.fixture(scope="module")
def ray_runtime(cluster: Cluster, ray_exec: RayExecutor) -> Iterator[None]:
    ray_exec.close()  # a connection of its own (when the tests above left it open)
    start_with_retries(lambda: ray.init(address=cluster.address, log_to_driver=False), ray.shutdown)
    yield
    ray.shutdown()


def test_worker_that_cannot_import_a_metric_stops_the_run_with_one_line(
    ray_runtime: None,
) -> None:
    """A project metric whose module the workers cannot import: the actors cannot be
    created, no batch is to blame, and the run stops with one line naming the module."""
    ex = RayExecutor(
        ScorerRecipe((PoisonMetric(),)), ExecutionSettings(executor="ray", num_workers=1)
    )
    try:
        with pytest.raises(InputError, match="a Ray worker could not start: .*ray_helpers") as err:
            ex.score(poison_examples())
    finally:
        ex.close()
    assert "\n" not in str(err.value) and ex.stats["failed"] == 0
    assert not ex.actors  # the pool is gone; Ray itself stays up (the fixture connected it)


@pytest.mark.usefixtures("helpers_by_value")
def test_killed_worker_is_replaced_and_its_batches_retried(ray_runtime: None) -> None:
    """An actor killed from outside (a node loss, an OOM kill) after it started: a fresh one
    takes its slot, the batch sent to the dead one is retried, and nothing is marked failed."""
    examples = [e for e in poison_examples() if e.id not in ("c1", "p1")]
    recipe = ScorerRecipe((PoisonMetric(),))
    want = as_data(LocalExecutor(recipe).score(examples))
    ex = RayExecutor(recipe, ExecutionSettings(executor="ray", num_workers=2, batch_size=2))
    try:
        ex.start()
        ray.get([actor.ping.remote() for actor in ex.actors], timeout=120)  # both run
        ray.kill(ex.actors[0])  # as a node loss or an OOM kill would
        got = ex.score(examples)
    finally:
        ex.close()
    stats = ex.stats
    assert stats["restarts"] == 1, stats
    assert stats["retries"] >= 1 and stats["failed"] == 0, stats
    assert as_data(got) == want  # complete, nothing marked failed


@pytest.mark.usefixtures("helpers_by_value")
def test_poisoned_example_fails_alone_and_the_gate_fails_closed(ray_runtime: None) -> None:
    """``c1`` kills the worker process scoring it, every time; ``p1`` makes the metric raise.
    Only those two are unscored; every other example is scored as locally, bit for bit."""
    examples = poison_examples()
    recipe = ScorerRecipe((PoisonMetric(),))
    want = as_data(LocalExecutor(recipe).score(examples))
    settings = ExecutionSettings(executor="ray", num_workers=2, batch_size=4, max_retries=1)
    ex = RayExecutor(recipe, settings)
    done: list[int] = []
    try:
        got = ex.score(examples, progress=done.append)
        hashes = ex.settings_hashes()
    finally:
        ex.close()
    ids = [e.id for e in examples]
    crash = ids.index("c1")
    reason = got[crash]["poison"].error or ""
    assert not got[crash]["poison"].ok
    assert reason.startswith("the Ray worker failed on this example 3 time(s)"), reason
    assert "ActorDiedError" in reason and "creation task" not in reason
    # The metric's own exception is handled inside the worker exactly as locally.
    assert as_data(got)[ids.index("p1")] == want[ids.index("p1")]
    assert "ValueError: poisoned summary in example p1" in (got[ids.index("p1")]["poison"].error)
    others = [i for i in range(len(examples)) if ids[i] not in ("c1", "p1")]
    assert [as_data(got)[i] for i in others] == [want[i] for i in others]
    assert all(got[i]["poison"].ok for i in others)
    assert sum(done) == len(examples)
    # c1's batch of 4 (one source) died, was retried once, died again and was isolated: its
    # three innocent examples scored alone, c1 killed its worker once more and was marked failed.
    stats = ex.stats
    assert (stats["restarts"], stats["isolated"], stats["failed"]) == (3, 4, 1), stats

    # The gate over these scores fails closed and names the unscorable example and why.
    config = GateConfig.from_dict({"metrics": ["poison"]})
    result = evaluate(config, examples, got, hashes)
    assert not result.passed
    assert {e.id for e in result.failed_examples} == {"c1", "p1"}
    [pass_rate] = [r for r in result.rules if r.name == "pass_rate"]
    assert "2 could not be scored" in pass_rate.message
    report = render("terminal", result)
    assert "c1: poison: could not score (the Ray worker failed on this example" in report


@pytest.mark.usefixtures("helpers_by_value")
def test_stream_pulls_chunks_lazily_and_yields_them_in_order(ray_runtime: None) -> None:
    """``score_stream``: chunks are pulled only as the actors' queues run low, and each
    chunk's results come back in input order, equal to scoring it alone."""
    examples = [e for e in poison_examples() if e.id not in ("c1", "p1")] * 3
    examples = [Example(f"{e.id}-{k}", e.source, e.summary) for k, e in enumerate(examples)]
    chunks = [examples[k : k + 4] for k in range(0, len(examples), 4)]
    recipe = ScorerRecipe((PoisonMetric(),))
    want = as_data(LocalExecutor(recipe).score(examples))
    ex = RayExecutor(recipe, ExecutionSettings(executor="ray", num_workers=1, batch_size=2))
    pulled: list[int] = []

    def feed():
        for k, chunk in enumerate(chunks):
            pulled.append(k)
            yield chunk, None

    got = []
    try:
        for k, rows in enumerate(ex.score_stream(feed())):
            # One actor, two batches in flight, two queued: never more than 2 chunks ahead.
            assert len(pulled) <= k + 3, (k, pulled)
            got.extend(rows)
    finally:
        ex.close()
    assert len(pulled) == len(chunks)
    assert as_data(got) == want


@pytest.mark.usefixtures("helpers_by_value")
def test_workers_the_cluster_has_no_room_for_never_hold_up_the_run(
    ray_runtime: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Three workers on a cluster (this module's Ray, not started by the executor) with room
    for two: a warning, and batches go only to the workers that run, so the run completes
    (the third, waiting for a CPU that never frees, is dropped at close)."""
    examples = [e for e in poison_examples() if e.id not in ("c1", "p1")]
    recipe = ScorerRecipe((PoisonMetric(),))
    want = as_data(LocalExecutor(recipe).score(examples))
    ex = RayExecutor(recipe, ExecutionSettings(executor="ray", num_workers=3, batch_size=2))
    try:
        with fails_after(60):
            got = ex.score(examples)
    finally:
        ex.close()
    assert as_data(got) == want
    assert "of 3 workers now" in caplog.text and "the others wait for resources" in caplog.text


@pytest.mark.usefixtures("helpers_by_value")
def test_a_pool_the_cluster_cannot_start_fails_after_a_bounded_wait(ray_runtime: None) -> None:
    """Every CPU of the cluster held by another job: no worker can start, so after
    ``placement_timeout_s`` the run stops with one line (exit 2), instead of waiting forever."""

    @ray.remote(num_cpus=1)
    class Hog:
        def ping(self) -> int:
            return 1

    hogs = [Hog.remote() for _ in range(2)]  # one per node
    ray.get([hog.ping.remote() for hog in hogs], timeout=120)
    ex = RayExecutor(
        ScorerRecipe((PoisonMetric(),)), ExecutionSettings(executor="ray", num_workers=1)
    )
    ex.placement_timeout_s = 2
    try:
        with (
            fails_after(60),
            pytest.raises(InputError, match="no Ray worker could start within 2 s") as err,
        ):
            ex.score(poison_examples())
    finally:
        ex.close()
        for hog in hogs:
            ray.kill(hog)
    message = str(err.value)
    assert "\n" not in message and "each needs 1 CPU(s), 0 GPU(s)" in message, message
    assert "the cluster has 0 CPU(s), 0 GPU(s) free" in message, message
    assert not ex.actors


@pytest.mark.usefixtures("helpers_by_value")
def test_a_worker_score_under_another_settings_hash_stops_the_run(
    ray_runtime: None, tmp_path: Path
) -> None:
    """Scores from a worker whose settings hash differs from the driver's (other model files or
    library versions) were cached under the driver's hash and gated as its scores."""
    recipe = ScorerRecipe((WorkerDriftMetric(),))
    examples = [e for e in poison_examples() if e.id not in ("c1", "p1")][:2]
    cache = ScoreCache(tmp_path / "scores.sqlite")
    ex = RayExecutor(recipe, ExecutionSettings(executor="ray", num_workers=1))
    try:
        with pytest.raises(InputError, match="the worker_drift score of example") as err:
            CachedExecutor(ex, cache).score(examples)
    finally:
        ex.close()
    message = str(err.value)
    assert "\n" not in message and "worker_drift|worker" in message, message
    assert "this run's worker_drift settings are worker_drift|driver" in message, message
    assert "on the Ray worker pid" in message and " on node " in message, message
    assert all(cache.get("worker_drift|driver", e.source, e.summary) is None for e in examples)


@pytest.mark.usefixtures("helpers_by_value")
def test_an_exception_in_prepare_fails_only_its_example_as_locally(ray_runtime: None) -> None:
    """A metric raising in ``prepare`` aborted a local run, and on Ray failed its example with
    Ray's ANSI-coloured header line as the reason."""
    examples = [
        Example("b1", "a b", "BOOM here"),
        Example("b2", "a b", "a b fine"),
    ]
    recipe = ScorerRecipe((PreparePoisonMetric(),))
    want = as_data(LocalExecutor(recipe).score(examples))
    ex = RayExecutor(recipe, ExecutionSettings(executor="ray", num_workers=1, max_retries=0))
    try:
        got = ex.score(examples)
    finally:
        ex.close()
    assert as_data(got) == want
    assert got[0]["prepare_poison"].error == "ValueError: prepare cannot handle\\nBOOM in b1"
    assert got[1]["prepare_poison"].ok


@pytest.mark.usefixtures("helpers_by_value")
def test_an_exception_reaching_ray_is_named_by_its_cause(ray_runtime: None) -> None:
    """An exception that escapes the scorer on a worker failed its example with Ray's first
    line (``RayTaskError(...): ray::ScoringWorker.score() (pid=...``, colour codes and all)."""
    ex = RayExecutor(
        ScorerRecipe((WorkerOnlyErrorMetric(),)),
        ExecutionSettings(executor="ray", num_workers=1, max_retries=0),
    )
    try:
        [row] = ex.score([Example("w1", "a b", "a b")])
    finally:
        ex.close()
    reason = row["worker_only_error"].error or ""
    assert reason.endswith("(RuntimeError: no settings hash on a worker)"), reason
    assert "\x1b" not in reason and "ray::" not in reason, reason


@pytest.mark.usefixtures("helpers_by_value")
def test_with_ray_already_initialised_runtime_env_reaches_the_actors(
    ray_runtime: None, caplog: pytest.LogCaptureFixture
) -> None:
    """With Ray initialised before (this module's runtime), ``runtime_env`` was not applied and
    ``address`` was ignored, both without a word."""
    settings = ExecutionSettings(
        executor="ray",
        num_workers=1,
        address="ray://nowhere:10001",
        runtime_env={"env_vars": {"FG_TEST_ENV": "1"}},
    )
    ex = RayExecutor(ScorerRecipe((EnvMetric(),)), settings)
    try:
        [row] = ex.score([Example("v1", "a b", "a b")])
    finally:
        ex.close()
    assert row["env_probe"].value == 1.0
    [warning] = [r.getMessage() for r in caplog.records if "is ignored" in r.getMessage()]
    assert "execution.address = ray://nowhere:10001 is ignored" in warning, warning
    assert "Ray is already initialised in this process (connected to " in warning, warning
    assert "\n" not in warning
