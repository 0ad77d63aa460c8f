"""The Ray executor (``faithgate[ray]``): score on a Ray cluster with a pool of actors.

Each actor builds its own ``Scorer`` from the picklable ``ScorerRecipe`` on its first batch
(models resolved and loaded once per actor, on the node it runs on; ONNX sessions per actor)
and keeps it for the run. The driver

- cuts the examples into batches of ``batch_size`` that keep the summaries of one source
  together, so document-prefix caching (``faithgate.engines.likelihood``) applies inside a batch;
- streams them: at most ``IN_FLIGHT`` batches per actor are submitted at a time, so the
  object store holds only what is being scored; ``score_stream`` takes the examples as a lazy
  stream of chunks (the driver-side cache feeds it chunk by chunk) and pulls the next chunk
  only when the actors' queues run low;
- collects plain ``Score`` objects back (workers never touch the score cache: the driver's
  ``CachedExecutor`` reads and writes it), calling ``progress`` as batches finish;
- handles failures as a Ray user expects: when an actor dies (crash, OOM kill, node loss) a
  fresh one takes its slot; the batch it was running is retried, up to ``max_retries`` times,
  and the batches queued behind it are re-sent without being charged; a batch that keeps
  failing is split and each of its examples tried once alone, so a poisoned example fails
  alone, as a ``Score.failed`` naming the reason (the gate then fails closed on it);
- sends batches only to actors that run (each answers a ping once Ray has placed it), so an
  actor waiting for resources holds nothing up; a run in which no actor can start for
  ``placement_timeout_s`` stops with one line instead of waiting forever, and a local Ray
  started for the run gets no more actors than it has room for;
- before ``ray.init`` opens a TCP connection to the address it will use, so an address nothing
  answers at fails in seconds (Ray's own retries take ~14 minutes);
- on Ctrl-C (or any error) kills its actors, and stops the Ray runtime if it started it. Ray
  only notices a Ctrl-C during its blocking calls as a ``KeyboardInterrupt``, so around them
  SIGINT raises that, and the caller's own SIGINT handler (the CLI's) is run afterwards.

Why actors driven from the driver rather than Ray Data ``map_batches`` with an
``ActorPoolStrategy``: Ray Data fails the whole dataset when a block keeps failing (or, with
``max_errored_blocks``, drops it after logging), without telling the driver *which* examples
were lost; a gate must instead record each lost example as a failed score with its reason.
The pattern is the same (an actor pool, the model loaded once per actor, batches streamed
through it); the bookkeeping is ours. See ``docs/scale-out.md``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from faithgate.backends import ModelPool
    from faithgate.cache import ScoreCache
    from faithgate.scoring.scorer import Scorer

from faithgate.errors import InputError
from faithgate.safety.escape import safe_line
from faithgate.scoring.execution import (
    ExecutionSettings,
    ExecutorOptions,
    OptionCheck,
    Progress,
    ScorerRecipe,
    check_settings_hashes,
    number_option,
    table_option,
    text_option,
)
from faithgate.scoring.ray_executor.cluster import (
    GCS_CONNECT_ATTEMPTS,
    PROBE_TIMEOUT_S,
    env_default,
    import_ray,
    resolve_connection,
    room_for,
    same_cluster,
    sigint_as_keyboard_interrupt,
    unreachable,
)
from faithgate.scoring.ray_executor.worker import (
    ScoringWorker,
    failure_line,
    last_line,
    source_batches,
)
from faithgate.types import Example, Score

log = logging.getLogger(__name__)

IN_FLIGHT = 2  # batches queued per actor: one running, one ready, so actors never wait
WAIT_SLICE_S = 1.0  # the driver waits for results in slices, so Ctrl-C is never stuck in Ray
PLACEMENT_TIMEOUT_S = 600.0  # the longest a run waits with no worker able to start


@dataclass(frozen=True)
class RayOptions(ExecutorOptions):
    """The Ray executor's keys of ``[tool.faithgate.execution]``.

    ``address`` is handed to ``ray.init`` as Ray users expect: ``None`` follows Ray's own
    resolution (``RAY_ADDRESS``, else a cluster started with ``ray start`` on this machine, else
    a local one started on demand and stopped afterwards), ``"auto"`` requires a running
    cluster, ``"ray://host:10001"`` connects through Ray Client, ``"local"`` always starts a
    fresh local one. ``num_workers`` defaults to as many actors as the cluster's free CPUs (or
    GPUs, when ``num_gpus`` is set) allow. ``batch_size`` is the number of examples per task
    sent to an actor (summaries of one source are kept together). ``max_retries`` bounds how
    often a batch whose worker died is retried before its examples are isolated.
    ``runtime_env`` is passed to ``ray.init`` (e.g. ``{pip = ["faithgate[full] @ ..."]}``), or,
    when Ray is already initialised in this process, to the actors (``address`` is then ignored,
    with a warning).
    """

    address: str | None = None
    num_workers: int | None = None
    batch_size: int = 16
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    max_retries: int = 2
    runtime_env: dict[str, Any] = field(default_factory=dict)

    CHECKS: ClassVar[Mapping[str, OptionCheck]] = {
        "address": text_option,
        "num_workers": number_option(1, integer=True),
        "batch_size": number_option(1, integer=True),
        "num_cpus": number_option(0, integer=False),
        "num_gpus": number_option(0, integer=False),
        "max_retries": number_option(0, integer=True),
        "runtime_env": table_option,
    }


class RayExecutor:
    """Scores on a Ray cluster (see the module docstring). ``stats`` counts batches, retries
    (charged to the batch a dead actor was running), batches re-sent uncharged (queued behind
    it), actor restarts, examples isolated and failed, and the workers' engine passes/tokens;
    ``nodes`` the Ray node ids that returned scores."""

    name = "ray"
    parallel = True
    Options = RayOptions
    placement_timeout_s = PLACEMENT_TIMEOUT_S

    def __init__(
        self,
        recipe: ScorerRecipe,
        options: RayOptions | ExecutionSettings | None = None,
        *,
        hashes: Mapping[str, str] | None = None,
    ) -> None:
        self.recipe = recipe
        if isinstance(options, ExecutionSettings):  # the whole table: its Ray keys
            options = options.options_for(self.name)
        self.options = options or RayOptions()
        self._hashes = dict(hashes) if hashes is not None else None
        self.actors: list[Any] = []
        self._generation: list[int] = []
        self._owns_ray = False
        self._local = False  # this executor started the Ray instance (not a cluster's)
        self._actor_class: Any = None
        self._placed: list[bool] = []  # per slot: its actor has answered a ping (it runs)
        self._pings: dict[Any, tuple[int, int]] = {}  # ping ref -> (slot, generation)
        self._stalled_since: float | None = None  # since when no worker has been running
        self.nodes: set[str] = set()
        self.stats: dict[str, int] = {
            "batches": 0,
            "retries": 0,
            "restarts": 0,
            "isolated": 0,
            "failed": 0,
            "requeued": 0,
            "passes": 0,
            "tokens": 0,
        }

    @classmethod
    def create(
        cls,
        recipe: ScorerRecipe | None,
        options: RayOptions,
        *,
        scorer: Scorer | None = None,
        pool: ModelPool | None = None,
        cache: ScoreCache | None = None,
    ) -> RayExecutor:
        """The executor of ``make_executor``: the driver's settings hashes come from
        ``scorer``, else from a ``Scorer`` built from ``recipe`` (no model is loaded for
        that); the actors build their own. ``cache`` is the driver's (around this one)."""
        if recipe is None:
            raise TypeError("the ray executor needs a ScorerRecipe (its workers build from it)")
        driver = scorer or recipe.build(pool=pool)
        return cls(recipe, options, hashes=driver.settings_hashes())

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Connect to (or start) Ray and create the actor pool; idempotent."""
        if self.actors:
            return
        ray = import_ray()
        s = self.options
        if not ray.is_initialized():
            # Where ray.init will go, found as Ray finds it: an address that takes no connection
            # fails here in seconds (Ray itself retries for ~14 minutes before it gives up).
            target = resolve_connection(s.address)
            if target.endpoint is not None:
                reason = unreachable(target.endpoint, PROBE_TIMEOUT_S)
                if reason is not None:
                    raise InputError(
                        f"cannot connect to the Ray cluster at {target.name}: {reason}; check "
                        "the address (--address, execution.address or $RAY_ADDRESS; "
                        "docs/scale-out.md)"
                    )
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
                # A port that takes connections but is no GCS (another service): Ray tries 20
                # times, ~40 s each; a few tries bound that (unless the user set the variable).
                with env_default(
                    "RAY_gcs_server_port_wait_time_s", GCS_CONNECT_ATTEMPTS, target.kind == "gcs"
                ):
                    ray.init(**kwargs)
            except Exception as exc:  # noqa: BLE001 - Ray raises bare Exception on startup
                # No cluster at that address, or a local Ray that did not come up ("The
                # current node timed out during startup" on an overloaded machine): one line.
                raise InputError(
                    f"cannot connect to the Ray cluster at {s.address or '$RAY_ADDRESS/local'}: "
                    f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                ) from None
            except BaseException:
                # Ctrl-C while Ray was starting: stop whatever it started, then go on out.
                with contextlib.suppress(Exception):
                    ray.shutdown()
                raise
            self._owns_ray = True
            self._local = target.kind == "local"
        else:
            # Ray is already up in this process (a notebook, a test session, an earlier
            # library call): ``ray.init`` is not called again, so the runtime environment goes
            # to the actors themselves (below), and ``address`` cannot be honoured.
            self._warn_address_ignored(ray)
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
        if self._local:
            # A Ray started for this run has only this machine's CPUs (GPUs), and nothing will
            # ever add more: actors beyond them could never start. Use the workers that fit.
            fit = room_for(total, s.num_cpus, s.num_gpus, n)
            if fit < n:
                log.warning(
                    "execution.num_workers = %d, but the local Ray started for this run has "
                    "room for %d (%g CPU(s), %g GPU(s); each worker needs %g CPU(s), %g GPU(s)): "
                    "using %d worker(s) (pass --address to use a cluster)",
                    n,
                    fit,
                    total.get("CPU", 0),
                    total.get("GPU", 0),
                    s.num_cpus,
                    s.num_gpus,
                    fit,
                )
                n = fit
        free = ray.available_resources()
        room = room_for(free, s.num_cpus, s.num_gpus, n)
        if room < n:
            # Not an error (an autoscaler may add nodes, another job may finish): batches go
            # to the workers that started, the others join when resources free up. If none can
            # start within ``placement_timeout_s`` the run stops (see ``_check_placement``).
            log.warning(
                "the Ray cluster has room for %d of %d workers now (%g CPU(s), %g GPU(s) free; "
                "each needs %g CPU(s), %g GPU(s)); the others wait for resources, and the run "
                "stops if no worker can start within %g s",
                room,
                n,
                free.get("CPU", 0),
                free.get("GPU", 0),
                s.num_cpus,
                s.num_gpus,
                self.placement_timeout_s,
            )
        # Restarts are done here, not by Ray (max_restarts=0): the driver then knows which
        # batch was lost with the actor and retries exactly that one, a bounded number of times.
        options: dict[str, Any] = {}
        if s.runtime_env and not self._owns_ray:
            # Given to ``ray.init`` when faithgate connects; with Ray already initialised, Ray
            # honours it per actor (over the job's own runtime environment).
            options["runtime_env"] = dict(s.runtime_env)
        self._actor_class = ray.remote(
            num_cpus=s.num_cpus, num_gpus=s.num_gpus, max_restarts=0, max_task_retries=0, **options
        )(ScoringWorker)
        self.actors = [self._actor_class.remote(self.recipe) for _ in range(n)]
        self._generation = [0] * n
        self._placed = [False] * n
        self._pings = {}
        self._stalled_since = None
        for slot in range(n):
            self._ping(slot)

    def _warn_address_ignored(self, ray: Any) -> None:
        """One warning when ``address`` is configured but Ray was initialised in this process
        before: the run scores on the cluster Ray is connected to (named when Ray says)."""
        address = self.options.address
        if address is None or address == "auto":  # "auto": whichever cluster is there, as now
            return
        connected = None
        with contextlib.suppress(Exception):  # Ray Client, an older or newer Ray
            connected = ray.get_runtime_context().gcs_address
        if connected and same_cluster(address, connected):
            return
        log.warning(
            "execution.address = %s is ignored: Ray is already initialised in this process%s, "
            "and faithgate scores there (call ray.shutdown() first to connect to %s)",
            safe_line(address),
            f" (connected to {safe_line(connected)})" if connected else "",
            safe_line(address),
        )

    def _ping(self, slot: int) -> None:
        """Ask the actor in ``slot`` to answer once it runs: until it does (it may wait for
        resources that never come), no batch is sent to it."""
        self._placed[slot] = False
        self._pings[self.actors[slot].ping.remote()] = (slot, self._generation[slot])

    def _check_placement(self, ray: Any) -> None:
        """Stop the run when no worker has been able to start for ``placement_timeout_s``
        (the cluster lacks the resources they ask for and nothing frees them): waiting longer
        would hang, and a run that cannot score must fail."""
        if any(self._placed):
            self._stalled_since = None
            return
        now = time.monotonic()
        if self._stalled_since is None:
            self._stalled_since = now
            return
        if now - self._stalled_since < self.placement_timeout_s:
            return
        s = self.options
        free = ray.available_resources()
        raise InputError(
            f"no Ray worker could start within {self.placement_timeout_s:g} s: each needs "
            f"{s.num_cpus:g} CPU(s), {s.num_gpus:g} GPU(s) and the cluster has "
            f"{free.get('CPU', 0):g} CPU(s), {free.get('GPU', 0):g} GPU(s) free; free or add "
            "resources, or lower execution.num_cpus / num_gpus"
        )

    def _auto_workers(self, ray: Any) -> int:
        free = ray.available_resources()
        s = self.options
        n = int(free.get("CPU", 0) // s.num_cpus) if s.num_cpus else 1
        if s.num_gpus:
            n = min(n, int(free.get("GPU", 0) // s.num_gpus))
        return max(1, n)

    def close(self) -> None:
        """Kill the actors; stop Ray when this executor started it."""
        if self.actors:
            ray = import_ray()
            for actor in self.actors:
                try:
                    ray.kill(actor)
                except Exception:  # noqa: BLE001 - already gone, or the runtime is down
                    log.debug("actor already gone", exc_info=True)
            self.actors = []
        self._placed, self._pings, self._stalled_since = [], {}, None
        self._stop_ray()

    def _stop_ray(self) -> None:
        if self._owns_ray:
            import_ray().shutdown()
            self._owns_ray = False
            self._local = False

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
        """See ``faithgate.scoring.execution.Executor.score``."""
        examples = list(examples)
        if not examples:
            return []
        [results] = self.score_stream([(examples, todo)], progress=progress)
        return results

    def score_stream(
        self,
        chunks: Iterable[tuple[Sequence[Example], Mapping[str, Sequence[int]] | None]],
        *,
        progress: Progress | None = None,
    ) -> Iterator[list[dict[str, Score]]]:
        """Score a stream of ``(examples, todo)`` chunks; yields each chunk's results (as
        ``score`` would return them) in input order, as soon as it and every chunk before it
        are complete. Chunks are pulled lazily, only when fewer than ``IN_FLIGHT`` batches per
        actor are waiting, so the actors stay busy across chunk boundaries while the driver
        holds no more than the chunks being scored (plus what the caller keeps)."""
        source = iter(chunks)
        exhausted = False
        self._stalled_since = None
        order: deque[_Chunk] = deque()  # chunks not yet yielded, in input order
        queue: deque[tuple[_Chunk, list[int], int]] = deque()  # (chunk, indices, failures)
        inflight: dict[Any, _Task] = {}
        load: list[int] = []
        seq = 0
        ray: Any = None
        try:
            while True:
                while not exhausted and len(queue) < IN_FLIGHT * max(1, len(self.actors)):
                    try:
                        examples, todo = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    chunk = self._chunk(examples, todo)
                    order.append(chunk)
                    queue.extend((chunk, b, 0) for b in chunk.batches)
                while order and order[0].pending == 0:
                    yield order.popleft().results
                if not queue and not inflight:
                    if exhausted:
                        return
                    continue
                if ray is None:
                    ray = import_ray()
                    self.start()
                    load = [0] * len(self.actors)
                while queue:
                    # Only to workers that run: one still waiting for resources may never start.
                    # While some wait, the others take one batch at a time, so the work spreads
                    # over the pool as its workers come up (instead of queueing on the first).
                    # An example on its last try goes to an idle worker and nothing is queued
                    # behind it: when a worker dies, the reply of the task it had just finished
                    # can be lost with it, and that task would be blamed for the crash.
                    depth = IN_FLIGHT if all(self._placed) else 1
                    cost = self._cost(queue[0][2])
                    open_slots = [
                        k
                        for k, up in enumerate(self._placed)
                        if up and (load[k] == 0 if cost == IN_FLIGHT else load[k] < depth)
                    ]
                    if not open_slots:
                        break
                    slot = min(open_slots, key=load.__getitem__)
                    chunk, idx, failures = queue.popleft()
                    batch = [chunk.examples[i] for i in idx]
                    batch_todo = {
                        m: [k for k, i in enumerate(idx) if i in w] for m, w in chunk.wanted.items()
                    }
                    ref = self.actors[slot].score.remote(batch, batch_todo)
                    seq += 1
                    inflight[ref] = _Task(
                        ref, slot, self._generation[slot], seq, chunk, idx, failures
                    )
                    load[slot] += cost
                ready: list[Any] = []
                while not ready:
                    self._check_placement(ray)
                    # In slices of a second: a Ctrl-C is then acted on promptly even while no
                    # batch returns (actors waiting for resources, a hung node).
                    with sigint_as_keyboard_interrupt():
                        ready, _ = ray.wait(
                            [*inflight, *self._pings], num_returns=1, timeout=WAIT_SLICE_S
                        )
                [ref] = ready
                if ref in self._pings:
                    # A worker runs (or could not be created: its batches then say why).
                    slot, generation = self._pings.pop(ref)
                    if generation == self._generation[slot]:
                        self._placed[slot] = True
                    continue
                task = inflight.pop(ref)
                load[task.slot] -= self._cost(task.failures)
                outcome = self._fetch(ray, ref)
                if not isinstance(outcome, ray.exceptions.RayError):
                    self._accept(task, outcome, progress)
                    continue
                if getattr(outcome, "actor_init_failed", False):
                    # The actor could not even be created (the recipe does not unpickle on
                    # the worker: faithgate, or a project's metric module, is missing there).
                    # No batch is to blame and every retry would fail the same way.
                    raise InputError(
                        "a Ray worker could not start: "
                        f"{last_line(outcome)}; faithgate and every metric's module must be "
                        "importable on each node (runtime_env, docs/scale-out.md)"
                    )
                if not (
                    isinstance(outcome, ray.exceptions.RayActorError)
                    and task.generation == self._generation[task.slot]
                ):
                    self._failed_batch(ray, outcome, task, queue, progress)
                    continue
                # The actor died (crash, OOM kill, node loss). It ran its batches one after
                # another, so of those it held, the first that failed was running when it died
                # and is charged a failure; the ones queued behind it are re-sent as they were
                # (an innocent batch never pays for a poisoned one). A fresh actor takes the slot.
                held = [task]
                for other in [t for t in inflight.values() if t.slot == task.slot]:
                    del inflight[other.ref]
                    load[task.slot] -= self._cost(other.failures)
                    held.append(other)
                self._replace_actor(ray, task.slot)
                charged = False
                for t in sorted(held, key=lambda t: t.seq):
                    result = outcome if t is task else self._fetch(ray, t.ref)
                    if not isinstance(result, ray.exceptions.RayError):
                        self._accept(t, result, progress)
                    elif not charged:
                        charged = True
                        self._failed_batch(ray, result, t, queue, progress)
                    else:
                        self.stats["requeued"] += 1
                        queue.appendleft((t.chunk, t.idx, t.failures))
        except BaseException:
            # Ctrl-C (the CLI's Interrupted, KeyboardInterrupt), an error, or the caller
            # abandoning the stream: nothing keeps running on the cluster.
            self.close()
            raise

    def _cost(self, failures: int) -> int:
        """A task's share of its worker's queue: a whole queue for an example on its last
        try (it runs alone on an idle worker), else one of ``IN_FLIGHT`` places."""
        return IN_FLIGHT if failures > self.options.max_retries else 1

    @staticmethod
    def _fetch(ray: Any, ref: Any) -> Any:
        """A finished task's result, or the ``RayError`` it failed with."""
        try:
            with sigint_as_keyboard_interrupt():
                return ray.get(ref)
        except ray.exceptions.RayError as exc:
            return exc

    def _accept(self, task: _Task, out: dict[str, Any], progress: Progress | None) -> None:
        if "error" in out:
            raise out["error"]  # a configuration problem: the run stops with its message
        # A worker whose models or library versions differ from the driver's: its scores
        # carry another settings hash, and the run stops naming it (``check_settings_hashes``).
        check_settings_hashes(
            out["scores"],
            self.settings_hashes(),
            where=f"the Ray worker pid {out.get('pid')} on node {out.get('node')}",
        )
        self.stats["batches"] += 1
        self.nodes.add(out["node"])
        for k, v in out["stats"].items():
            self.stats[k] = self.stats.get(k, 0) + v
        for i, scores in zip(task.idx, out["scores"], strict=True):
            task.chunk.results[i].update(scores)
        task.chunk.pending -= 1
        if progress is not None:
            progress(len(task.idx))

    def _replace_actor(self, ray: Any, slot: int) -> None:
        try:
            ray.kill(self.actors[slot])
        except Exception:  # noqa: BLE001 - it is dead already
            log.debug("dead actor could not be killed", exc_info=True)
        self.actors[slot] = self._actor_class.remote(self.recipe)
        self._generation[slot] += 1
        self._ping(slot)
        self.stats["restarts"] += 1

    def _chunk(
        self, examples: Sequence[Example], todo: Mapping[str, Sequence[int]] | None
    ) -> _Chunk:
        examples = list(examples)
        if todo is None:
            todo = {m: range(len(examples)) for m in self.recipe.metric_names}
        batches = source_batches(examples, todo, self.options.batch_size) if examples else []
        return _Chunk(
            examples=examples,
            wanted={m: set(idx) for m, idx in todo.items()},
            results=[{} for _ in examples],
            batches=batches,
            pending=len(batches),
        )

    def _failed_batch(
        self,
        ray: Any,
        exc: Exception,
        task: _Task,
        queue: deque[tuple[_Chunk, list[int], int]],
        progress: Progress | None,
    ) -> None:
        """A batch failed (its actor died while running it, or the task raised): retry it,
        up to ``max_retries`` times; then try each of its examples once alone; an example
        that fails alone too is marked failed with the reason."""
        chunk, idx = task.chunk, task.idx
        reason = failure_line(exc)
        failures = task.failures + 1
        if failures <= self.options.max_retries:
            log.warning("a Ray batch of %d failed (%s); retrying", len(idx), reason)
            self.stats["retries"] += 1
            queue.appendleft((chunk, idx, failures))
        elif len(idx) > 1:
            # Kept failing: try each example once alone, so only a poisoned one fails.
            log.warning(
                "a Ray batch of %d kept failing (%s); isolating its examples", len(idx), reason
            )
            self.stats["isolated"] += len(idx)
            chunk.pending += len(idx) - 1
            queue.extendleft((chunk, [i], failures) for i in reversed(idx))
        else:
            [i] = idx
            ex = chunk.examples[i]
            hashes = self.settings_hashes()
            why = (
                f"the Ray worker failed on this example {failures} time(s), alone and in its "
                f"batch ({reason})"
            )
            for m, w in chunk.wanted.items():
                if i in w:
                    chunk.results[i][m] = Score.failed(m, hashes.get(m, ""), ex.id, why)
            self.stats["failed"] += 1
            chunk.pending -= 1
            if progress is not None:
                progress(1)


@dataclass
class _Task:
    """A batch submitted to an actor: where it went (slot, the actor's generation there),
    its submission number, and what it scores."""

    ref: Any
    slot: int
    generation: int
    seq: int
    chunk: _Chunk
    idx: list[int]
    failures: int


@dataclass
class _Chunk:
    """One ``score_stream`` chunk on the driver: its examples, the cells asked for, the
    results filled in as batches return, and how many of its batches are still out."""

    examples: list[Example]
    wanted: dict[str, set[int]]
    results: list[dict[str, Score]]
    batches: list[list[int]]
    pending: int
