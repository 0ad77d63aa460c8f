"""The Ray executor (``faithgate[ray]``): score on a Ray cluster with a pool of actors.

Each actor builds its own ``Scorer`` from the picklable ``ScorerRecipe`` on its first batch
(models resolved and loaded once per actor, on the node it runs on; ONNX sessions per actor)
and keeps it for the run. The driver

- cuts the examples into batches of ``batch_size`` that keep the summaries of one source
  together, so document-prefix caching (``faithgate.likelihood``) applies inside a batch;
- streams them: at most ``IN_FLIGHT`` batches per actor are submitted at a time, so the
  object store holds only what is being scored;
- collects plain ``Score`` objects back (workers never touch the score cache: the driver's
  ``CachedExecutor`` reads and writes it), calling ``progress`` as batches finish;
- handles failures as a Ray user expects: a batch whose actor died (crash, OOM kill, node
  loss) gets a fresh actor in that slot and is retried, up to ``max_retries`` times; a batch
  that keeps failing is split and each of its examples tried once alone, so a poisoned example
  fails alone, as a ``Score.failed`` naming the reason (the gate then fails closed on it);
- on Ctrl-C (or any error) kills its actors, and stops the Ray runtime if it started it.

Why actors driven from the driver rather than Ray Data ``map_batches`` with an
``ActorPoolStrategy``: Ray Data fails the whole dataset when a block keeps failing (or, with
``max_errored_blocks``, drops it after logging), without telling the driver *which* examples
were lost; a gate must instead record each lost example as a failed score with its reason.
The pattern is the same (an actor pool, the model loaded once per actor, batches streamed
through it); the bookkeeping is ours. See ``docs/scale-out.md``.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from faithgate.errors import FaithgateError, InputError
from faithgate.execution import ExecutionSettings, Progress, ScorerRecipe
from faithgate.types import Example, Score

log = logging.getLogger(__name__)

IN_FLIGHT = 2  # batches queued per actor: one running, one ready, so actors never wait


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(
            "the ray executor needs Ray: pip install 'faithgate[ray]' (or choose --executor local)"
        ) from None
    return ray


def source_batches(
    examples: Sequence[Example], todo: Mapping[str, Sequence[int]], size: int
) -> list[list[int]]:
    """Indices of the examples with work to do, cut into batches of at most ``size`` that
    keep the summaries of one source together (a source with more than ``size`` summaries
    spans several batches). Sources keep their first-appearance order."""
    active = sorted({i for idx in todo.values() for i in idx})
    groups: dict[str, list[int]] = {}
    for i in active:
        groups.setdefault(examples[i].source, []).append(i)
    batches: list[list[int]] = []
    current: list[int] = []
    for group in groups.values():
        for start in range(0, len(group), size):
            chunk = group[start : start + size]
            if current and len(current) + len(chunk) > size:
                batches.append(current)
                current = []
            current.extend(chunk)
    if current:
        batches.append(current)
    return batches


class ScoringWorker:
    """The actor: one ``Scorer`` built from the recipe on first use, kept for the run."""

    def __init__(self, recipe: ScorerRecipe) -> None:
        self.recipe = recipe
        self.scorer: Any = None

    def ping(self) -> int:
        return os.getpid()

    def score(self, examples: list[Example], todo: dict[str, list[int]]) -> dict[str, Any]:
        """``{"scores": [...], "stats": {...}, "pid": ..., "node": ...}``; a configuration problem comes
        back as ``{"error": FaithgateError}`` (raised on the driver, not retried)."""
        try:
            if self.scorer is None:
                self.scorer = self.recipe.build()
            before = self._engine_stats()
            scores = self.scorer.compute(examples, todo)
            after = self._engine_stats()
            # Engines (likelihood, NLI, QA) cache per-pair results; a batch's pairs are never
            # asked for again on this actor, so drop them and keep a long run's memory flat.
            self._release()
        except FaithgateError as exc:
            return {"error": exc}
        stats = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        import ray

        node = ray.get_runtime_context().get_node_id()
        return {"scores": scores, "stats": stats, "pid": os.getpid(), "node": node}

    def _engines(self) -> list[Any]:
        # ScoringContext keeps its shared engines privately; only their counters are read.
        return list(getattr(self.scorer.context, "_shared", {}).values())

    def _engine_stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for engine in self._engines():
            for k, v in (getattr(engine, "stats", None) or {}).items():
                total[k] = total.get(k, 0) + int(v)
        return total

    def _release(self) -> None:
        for engine in self._engines():
            done = getattr(engine, "_done", None)
            if isinstance(done, dict):
                done.clear()


class RayExecutor:
    """Scores on a Ray cluster (see the module docstring). ``stats`` counts batches, retries,
    actor restarts, examples isolated and failed, and the workers' engine passes/tokens;
    ``nodes`` the Ray node ids that returned scores."""

    name = "ray"

    def __init__(
        self,
        recipe: ScorerRecipe,
        settings: ExecutionSettings | None = None,
        *,
        hashes: Mapping[str, str] | None = None,
    ) -> None:
        self.recipe = recipe
        self.settings = settings or ExecutionSettings(executor="ray")
        self._hashes = dict(hashes) if hashes is not None else None
        self.actors: list[Any] = []
        self._generation: list[int] = []
        self._owns_ray = False
        self._actor_class: Any = None
        self.nodes: set[str] = set()
        self.stats: dict[str, int] = {
            "batches": 0,
            "retries": 0,
            "restarts": 0,
            "isolated": 0,
            "failed": 0,
            "passes": 0,
            "tokens": 0,
        }

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Connect to (or start) Ray and create the actor pool; idempotent."""
        if self.actors:
            return
        ray = _import_ray()
        s = self.settings
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "address": s.address,
                "include_dashboard": False,
                "logging_level": logging.WARNING,
            }
            if s.runtime_env:
                kwargs["runtime_env"] = dict(s.runtime_env)
            # When Ray starts a local instance here, a busy machine (a CI runner) can take longer
            # than Ray's defaults to bring its raylet and agents up; the raylet then aborts.
            # Environment variables set by the user win.
            os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
            os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise InputError(
                    f"cannot connect to the Ray cluster at {s.address or '$RAY_ADDRESS/local'}: "
                    f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                ) from None
            self._owns_ray = True
        total = ray.cluster_resources()
        if s.num_gpus and total.get("GPU", 0) < s.num_gpus:
            self._stop_ray()
            raise InputError(
                f"execution.num_gpus = {s.num_gpus:g} per worker, but the Ray cluster has "
                f"{total.get('GPU', 0):g} GPU(s)"
            )
        if total.get("CPU", 0) < s.num_cpus:
            self._stop_ray()
            raise InputError(
                f"execution.num_cpus = {s.num_cpus:g} per worker, but the Ray cluster has "
                f"{total.get('CPU', 0):g} CPU(s)"
            )
        n = s.num_workers or self._auto_workers(ray)
        # Restarts are done here, not by Ray (max_restarts=0): the driver then knows which
        # batch was lost with the actor and retries exactly that one, a bounded number of times.
        self._actor_class = ray.remote(
            num_cpus=s.num_cpus, num_gpus=s.num_gpus, max_restarts=0, max_task_retries=0
        )(ScoringWorker)
        self.actors = [self._actor_class.remote(self.recipe) for _ in range(n)]
        self._generation = [0] * n

    def _auto_workers(self, ray: Any) -> int:
        free = ray.available_resources()
        s = self.settings
        n = int(free.get("CPU", 0) // s.num_cpus) if s.num_cpus else 1
        if s.num_gpus:
            n = min(n, int(free.get("GPU", 0) // s.num_gpus))
        return max(1, n)

    def close(self) -> None:
        """Kill the actors; stop Ray when this executor started it."""
        if self.actors:
            ray = _import_ray()
            for actor in self.actors:
                try:
                    ray.kill(actor)
                except Exception:  # noqa: BLE001 - already gone, or the runtime is down
                    log.debug("actor already gone", exc_info=True)
            self.actors = []
        self._stop_ray()

    def _stop_ray(self) -> None:
        if self._owns_ray:
            _import_ray().shutdown()
            self._owns_ray = False

    def settings_hashes(self) -> dict[str, str]:
        if self._hashes is None:
            self._hashes = self.recipe.build().settings_hashes()
        return dict(self._hashes)

    # -- scoring ---------------------------------------------------------------------------
    def score(
        self,
        examples: Sequence[Example],
        *,
        todo: Mapping[str, Sequence[int]] | None = None,
        progress: Progress | None = None,
    ) -> list[dict[str, Score]]:
        """See ``faithgate.execution.Executor.score``."""
        examples = list(examples)
        if not examples:
            return []
        names = self.recipe.metric_names
        if todo is None:
            todo = {m: range(len(examples)) for m in names}
        wanted = {m: set(idx) for m, idx in todo.items()}
        results: list[dict[str, Score]] = [{} for _ in examples]
        queue: deque[tuple[list[int], int]] = deque(
            (b, 0) for b in source_batches(examples, todo, self.settings.batch_size)
        )
        if not queue:
            return results
        ray = _import_ray()
        try:
            self.start()
            self._run(ray, examples, wanted, queue, results, progress)
        except BaseException:
            # Ctrl-C (Interrupted / KeyboardInterrupt) or an error: nothing keeps running.
            self.close()
            raise
        return results

    def _run(
        self,
        ray: Any,
        examples: list[Example],
        wanted: dict[str, set[int]],
        queue: deque[tuple[list[int], int]],
        results: list[dict[str, Score]],
        progress: Progress | None,
    ) -> None:
        load = [0] * len(self.actors)
        inflight: dict[Any, tuple[int, int, list[int], int]] = {}
        while queue or inflight:
            while queue and min(load) < IN_FLIGHT:
                slot = load.index(min(load))
                idx, failures = queue.popleft()
                batch = [examples[i] for i in idx]
                batch_todo = {
                    m: [k for k, i in enumerate(idx) if i in w] for m, w in wanted.items()
                }
                ref = self.actors[slot].score.remote(batch, batch_todo)
                inflight[ref] = (slot, self._generation[slot], idx, failures)
                load[slot] += 1
            [ref], _ = ray.wait(list(inflight), num_returns=1)
            slot, generation, idx, failures = inflight.pop(ref)
            load[slot] -= 1
            try:
                out = ray.get(ref)
            except ray.exceptions.RayError as exc:
                self._failed_batch(
                    ray,
                    exc,
                    slot,
                    generation,
                    idx,
                    failures,
                    queue,
                    examples,
                    wanted,
                    results,
                    progress,
                )
                continue
            if "error" in out:
                raise out["error"]
            self.stats["batches"] += 1
            self.nodes.add(out["node"])
            for k, v in out["stats"].items():
                self.stats[k] = self.stats.get(k, 0) + v
            for i, scores in zip(idx, out["scores"], strict=True):
                results[i].update(scores)
            if progress is not None:
                progress(len(idx))

    def _failed_batch(
        self,
        ray: Any,
        exc: Exception,
        slot: int,
        generation: int,
        idx: list[int],
        failures: int,
        queue: deque[tuple[list[int], int]],
        examples: list[Example],
        wanted: dict[str, set[int]],
        results: list[dict[str, Score]],
        progress: Progress | None,
    ) -> None:
        if isinstance(exc, ray.exceptions.RayActorError) and generation == self._generation[slot]:
            # The actor died (crash, OOM kill, node loss): a fresh one takes its slot; every
            # other batch that was queued on the dead one fails too and is retried here.
            try:
                ray.kill(self.actors[slot])
            except Exception:  # noqa: BLE001 - it is dead already
                log.debug("dead actor could not be killed", exc_info=True)
            self.actors[slot] = self._actor_class.remote(self.recipe)
            self._generation[slot] += 1
            self.stats["restarts"] += 1
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        failures += 1
        if failures <= self.settings.max_retries:
            log.warning("a Ray batch of %d failed (%s); retrying", len(idx), reason)
            self.stats["retries"] += 1
            queue.appendleft((idx, failures))
        elif len(idx) > 1:
            # Kept failing: try each example once alone, so only a poisoned one fails.
            log.warning(
                "a Ray batch of %d kept failing (%s); isolating its examples", len(idx), reason
            )
            self.stats["isolated"] += len(idx)
            queue.extendleft(([i], failures) for i in reversed(idx))
        else:
            [i] = idx
            ex = examples[i]
            hashes = self.settings_hashes()
            why = (
                f"the Ray worker failed on this example {failures} time(s), alone and in its "
                f"batch ({type(exc).__name__}: {reason})"
            )
            for m, w in wanted.items():
                if i in w:
                    results[i][m] = Score.failed(m, hashes.get(m, ""), ex.id, why)
            self.stats["failed"] += 1
            if progress is not None:
                progress(1)
