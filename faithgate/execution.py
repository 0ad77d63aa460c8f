"""Where scoring runs: the execution seam.

An **executor** scores examples with one fixed scorer *recipe* and returns plain ``Score``
data aligned with its input. The gate, ``bench`` and ``calibrate`` score through one, chosen by
``[tool.faithgate.execution] executor`` or ``--executor``:

``local``
    In this process, with one ``Scorer`` (models loaded once, kept between calls). Inside one
    machine, pytest-xdist parallelises the plugin on top of this.
``ray``
    On a Ray cluster (``faithgate[ray]``, ``faithgate.ray_executor``): a pool of actors, each
    building its own ``Scorer`` from the recipe once.

The pieces:

- ``ScorerRecipe``: what a worker needs to build its own ``Scorer`` (metric names and settings,
  model names, backend, loader options). Plain, picklable data: models are never shipped, each
  worker resolves and loads them where it runs.
- ``Executor``: the protocol (``score``, ``settings_hashes``, ``close``; optionally
  ``score_stream`` over an iterator of ``(examples, todo)`` chunks).
- ``LocalExecutor``: the in-process one.
- ``CachedExecutor``: the score cache as a wrapper that lives on the driver: it looks every
  (metric, example) cell up, sends only the misses to the executor it wraps, and writes what
  comes back, chunk by chunk (``CHUNK_EXAMPLES``; a lazy stream for an executor with
  ``score_stream``, such as Ray's). Workers never touch the cache, so a rerun anywhere is fully
  cached, and an interrupted run keeps the chunks it finished.
- ``ExecutionSettings``: the parsed ``[tool.faithgate.execution]`` table.
- ``make_executor``: settings + recipe -> an executor, wrapped in the cache when there is one.
"""

from __future__ import annotations

import contextlib
import importlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from faithgate.errors import ConfigError, InputError
from faithgate.escape import safe_line
from faithgate.numbers import is_finite_number
from faithgate.result import first_settings_mismatch
from faithgate.types import Example, Score

if TYPE_CHECKING:
    from faithgate.backends import ModelPool
    from faithgate.cache import ScoreCache
    from faithgate.metrics.base import Metric
    from faithgate.scorer import Scorer

# The registry of executors: CLI choices, the plugin option and the config key derive from it.
# Executors that score outside this process: name -> "module:class" (imported on use).
REMOTE_EXECUTORS = {"ray": "faithgate.ray_executor:RayExecutor"}
EXECUTOR_CHOICES = ("local", *REMOTE_EXECUTORS)
EXECUTION_KEYS = (
    "executor",
    "address",
    "num_workers",
    "batch_size",
    "num_cpus",
    "num_gpus",
    "max_retries",
    "runtime_env",
)

Progress = Callable[[int], None]

# Examples per chunk the driver-side cache feeds an executor: looked up, scored and written
# back before the next (``CachedExecutor``); big enough to keep a cluster's actors queued.
CHUNK_EXAMPLES = 1024


@dataclass(frozen=True)
class ExecutionSettings:
    """Where and how to score (``[tool.faithgate.execution]``).

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

    executor: str = "local"
    address: str | None = None
    num_workers: int | None = None
    batch_size: int = 16
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    max_retries: int = 2
    runtime_env: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "execution") -> ExecutionSettings:
        """Validate the ``[tool.faithgate.execution]`` table (errors name the key)."""
        for key in data:
            if key not in EXECUTION_KEYS:
                raise ConfigError(
                    f"{where}: unknown key 'execution.{key}'; allowed: {', '.join(EXECUTION_KEYS)}"
                )
        return cls().with_overrides(dict(data), where, numbers_as_text=False)

    def with_overrides(
        self, changes: Mapping[str, Any], where: str = "option", numbers_as_text: bool = True
    ) -> ExecutionSettings:
        """A copy with ``changes`` applied (``None`` values ignored), each one type-checked.
        Command-line values arrive as text, so numbers written as strings are accepted unless
        ``numbers_as_text`` is false (a configuration file, where ``"4"`` is a typing slip)."""

        def fail(key: str, problem: str) -> ConfigError:
            return ConfigError(f"{where}: execution.{key}: {problem}")

        def number(key: str, value: Any, minimum: float, integer: bool) -> Any:
            if isinstance(value, str) and numbers_as_text:
                with contextlib.suppress(ValueError):
                    value = int(value) if integer else float(value)
            ok_type = int if integer else (int, float)
            if isinstance(value, bool) or not isinstance(value, ok_type):
                kind = "an integer" if integer else "a number"
                raise fail(key, f"expected {kind}, got {value!r}")
            # is_finite_number: an integer beyond float range (TOML has them) made
            # math.isfinite raise OverflowError, an "internal error" instead of exit 2.
            if not is_finite_number(value):
                shown = "an integer too large for a float" if isinstance(value, int) else value
                raise fail(key, f"expected a finite number, got {shown}")
            if value < minimum:
                raise fail(key, f"expected a value >= {minimum:g}, got {value!r}")
            return value

        new: dict[str, Any] = {}
        for key, value in changes.items():
            if value is None:
                continue
            if key == "executor":
                if value not in EXECUTOR_CHOICES:
                    raise fail(key, f"expected one of {', '.join(EXECUTOR_CHOICES)}, got {value!r}")
                new[key] = value
            elif key == "address":
                if not isinstance(value, str) or not value.strip():
                    raise fail(key, f"expected a non-empty string, got {value!r}")
                new[key] = value.strip()
            elif key in ("num_workers", "batch_size"):
                new[key] = number(key, value, 1, integer=True)
            elif key == "max_retries":
                new[key] = number(key, value, 0, integer=True)
            elif key in ("num_cpus", "num_gpus"):
                new[key] = float(number(key, value, 0, integer=False))
            elif key == "runtime_env":
                if not isinstance(value, Mapping):
                    raise fail(key, f"expected a table, got {value!r}")
                new[key] = dict(value)
            else:
                raise fail(key, f"unknown setting; allowed: {', '.join(EXECUTION_KEYS)}")
        return replace(self, **new) if new else self


@dataclass(frozen=True)
class ScorerRecipe:
    """Everything needed to build a ``Scorer`` somewhere else (picklable, no models in it).

    ``metrics`` are registry names; a ``Metric`` instance is accepted too (its class must be
    importable on the workers, or pickled by value), which is how a project's own metric runs.
    """

    metrics: tuple[str | Metric, ...]
    metric_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)
    backend: str = "auto"
    allow_download: bool = False
    model_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Whether building it checks that every model serves a metric (``check_models_used``):
    # off for a part of a recipe (``select``), whose whole was checked.
    check_roles: bool = True

    @classmethod
    def from_config(cls, config: Any) -> ScorerRecipe:
        """The recipe of a ``GateConfig``: its metrics with their settings, models, backend."""
        return cls(
            metrics=tuple(config.metrics),
            metric_settings={
                k: dict(v) for k, v in config.metric_settings.items() if k in config.metrics
            },
            models=dict(config.models),
            backend=config.backend,
            allow_download=config.allow_download,
            model_options={k: dict(v) for k, v in config.model_options.items()},
        )

    @property
    def metric_names(self) -> list[str]:
        return [m if isinstance(m, str) else m.name for m in self.metrics]

    def select(self, metrics: Sequence[str]) -> ScorerRecipe:
        """The same recipe restricted to ``metrics`` (e.g. one metric at a time in bench)."""
        keep = [m for m in self.metrics if (m if isinstance(m, str) else m.name) in metrics]
        names = {m if isinstance(m, str) else m.name for m in keep}
        return replace(
            self,
            metrics=tuple(keep),
            metric_settings={k: v for k, v in self.metric_settings.items() if k in names},
            check_roles=False,
        )

    def build(self, *, pool: ModelPool | None = None, cache: ScoreCache | None = None) -> Scorer:
        """A ``Scorer`` for this recipe (``pool`` shares models already loaded here)."""
        from faithgate.scorer import Scorer

        named = {m for m in self.metrics if isinstance(m, str)}
        return Scorer(
            self.metrics,
            models=self.models,
            backend=self.backend,
            allow_download=self.allow_download,
            metric_settings={k: v for k, v in self.metric_settings.items() if k in named},
            model_options=self.model_options,
            pool=pool,
            cache=cache,
            check_roles=self.check_roles,
        )


@runtime_checkable
class Executor(Protocol):
    """Scores examples with one recipe, somewhere. ``score`` returns, aligned with
    ``examples``, one ``{metric: Score}`` per example; an example that could not be scored gets
    a ``Score.failed`` with the reason (gates fail closed on it). ``todo`` (metric -> example
    indices) restricts the cells computed; the result then holds only those. ``progress`` is
    called on the driver with the number of examples finished since the last call."""

    name: str

    def score(
        self,
        examples: Sequence[Example],
        *,
        todo: Mapping[str, Sequence[int]] | None = None,
        progress: Progress | None = None,
    ) -> list[dict[str, Score]]: ...

    def settings_hashes(self) -> dict[str, str]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Scores in this process with one ``Scorer`` (built from the recipe once, or given).

    ``cache``, for a scorer built here, is read and written only for the components of a
    combination (``ensemble``) that no selected metric shares: the selected metrics' cells are
    the ``CachedExecutor``'s around it. So ``ensemble`` after its components were scored costs
    only its formula.
    """

    name = "local"

    def __init__(
        self,
        recipe: ScorerRecipe | None = None,
        *,
        scorer: Scorer | None = None,
        pool: ModelPool | None = None,
        cache: ScoreCache | None = None,
    ) -> None:
        if scorer is None:
            if recipe is None:
                raise TypeError("LocalExecutor needs a recipe or a scorer")
            scorer = recipe.build(pool=pool, cache=cache)
        self.scorer = scorer

    def score(
        self,
        examples: Sequence[Example],
        *,
        todo: Mapping[str, Sequence[int]] | None = None,
        progress: Progress | None = None,
    ) -> list[dict[str, Score]]:
        examples = list(examples)
        # Always ``compute``: looking cells up in a cache and writing them back is the
        # ``CachedExecutor``'s job, so an unwrapped executor scores afresh even with a scorer
        # that carries a cache of its own (``Gate(use_cache=False)``).
        out = self.scorer.compute(examples, todo)
        if progress is not None and examples:
            progress(len(examples))
        return out

    def settings_hashes(self) -> dict[str, str]:
        return self.scorer.settings_hashes()

    def close(self) -> None:
        """Nothing to release: the scorer (and its models) stays usable by its owner."""


class CachedExecutor:
    """The score cache on the driver, around any executor: hits are read here, only missing
    cells travel to ``inner``, and every computed score is written back here. ``hashes`` are
    the driver's settings hashes (computed once; they key the cache).

    Big inputs are fed to ``inner`` in chunks of about ``chunk_size`` examples (cut where the
    source changes, so summaries of one article stay together): each chunk is looked up,
    scored and written to the cache before the next is sent, so only one chunk's payload is
    in flight at a time, and an interrupted run keeps every chunk it finished (a rerun reads
    them back). An inner executor with ``score_stream`` (Ray) is handed the chunks as a lazy
    stream and keeps its workers busy across chunk boundaries; any other is called per chunk.
    """

    def __init__(
        self,
        inner: Executor,
        cache: ScoreCache,
        hashes: Mapping[str, str] | None = None,
        *,
        chunk_size: int = CHUNK_EXAMPLES,
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.chunk_size = chunk_size
        self._hashes = dict(hashes) if hashes is not None else None

    def settings_hashes(self) -> dict[str, str]:
        if self._hashes is None:
            self._hashes = self.inner.settings_hashes()
        return dict(self._hashes)

    def score(
        self,
        examples: Sequence[Example],
        *,
        todo: Mapping[str, Sequence[int]] | None = None,
        progress: Progress | None = None,
    ) -> list[dict[str, Score]]:
        from faithgate.scorer import lookup_cached

        examples = list(examples)
        hashes = self.settings_hashes()
        names = list(hashes) if todo is None else [m for m in hashes if m in todo]
        wanted = None if todo is None else {m: set(todo[m]) for m in names}
        results: list[dict[str, Score]] = [{} for _ in examples]
        # Per chunk sent, in order: (offset, its examples, missing cells, indices sent).
        sent: deque[tuple[int, list[Example], dict[str, list[int]], list[int]]] = deque()

        def requests() -> Iterator[tuple[list[Example], dict[str, list[int]]]]:
            for lo, hi in chunk_bounds(examples, self.chunk_size):
                part = examples[lo:hi]
                hits, missing = lookup_cached(self.cache, hashes, names, part)
                results[lo:hi] = hits
                if wanted is not None:  # only the cells asked for
                    missing = {
                        m: [i for i in idx if lo + i in wanted[m]] for m, idx in missing.items()
                    }
                need = sorted({i for idx in missing.values() for i in idx})
                if progress is not None and len(need) < len(part):
                    progress(len(part) - len(need))  # fully cached examples are done already
                sent.append((lo, part, missing, need))
                # Only examples with a missing cell travel, re-indexed; todo says which cells.
                pos = {i: k for k, i in enumerate(need)}
                yield (
                    [part[i] for i in need],
                    {m: [pos[i] for i in idx] for m, idx in missing.items() if idx},
                )

        stream = getattr(self.inner, "score_stream", None)
        if callable(stream):
            computed_chunks: Iterator[list[dict[str, Score]]] = stream(
                requests(), progress=progress
            )
        else:
            computed_chunks = (
                self.inner.score(sub, todo=sub_todo, progress=progress) if sub else []
                for sub, sub_todo in requests()
            )
        for computed in computed_chunks:
            # A score made under other settings than the driver's (a worker with other model
            # files or library versions) must neither be cached under the driver's hash nor
            # gated as if this configuration had made it: the run stops.
            check_settings_hashes(computed, hashes, where=f"the {self.inner.name} executor")
            lo, part, missing, need = sent.popleft()
            full: list[dict[str, Score]] = [{} for _ in part]
            for k, i in enumerate(need):
                full[i] = computed[k]
            # One chunk's scores reach the cache (one transaction) before the next chunk's are
            # waited for; failed scores are not cached (they are retried next run).
            for m, idx in missing.items():
                for i in idx:
                    results[lo + i][m] = full[i][m]
            self.cache.put_many(
                (hashes[m], part[i].source, part[i].summary, full[i][m])
                for m, idx in missing.items()
                for i in idx
            )
        return results

    def close(self) -> None:
        self.inner.close()


def check_settings_hashes(
    rows: Sequence[Mapping[str, Score]], hashes: Mapping[str, str], where: str = ""
) -> None:
    """Raise ``InputError`` (one line, exit 2) when a score in ``rows`` carries another
    settings hash than ``hashes`` (the driver's) gives for its metric: it was made under
    another configuration (other model files, library versions or faithgate on a worker), so
    it may not be cached under the driver's hash nor compared as this configuration's score.
    ``where`` names the executor or the worker it came from."""
    mismatch = first_settings_mismatch(hashes, rows)
    if mismatch is None:
        return
    i, metric, made, expected = mismatch
    source = f" on {where}" if where else ""
    raise InputError(
        safe_line(
            f"the {metric} score of example {rows[i][metric].example_id!r} was made{source} "
            f"with settings {made}, but this run's {metric} settings are {expected}: the "
            "models, library versions or faithgate differ between the driver and where it "
            "scored (docs/scale-out.md); make them the same"
        )
    )


def chunk_bounds(examples: Sequence[Example], size: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of consecutive chunks of about ``size`` examples. A chunk is extended
    (up to ``2 * size``) while the next example has the same source as its last one, so a run
    of summaries of one article is not cut in two (prefix caching runs each source once per
    batch). Results never depend on where chunks are cut."""
    n = len(examples)
    lo = 0
    while lo < n:
        hi = min(lo + size, n)
        while hi < n and hi - lo < 2 * size and examples[hi].source == examples[hi - 1].source:
            hi += 1
        yield lo, hi
        lo = hi


# ``make_executor``'s default ``cache``: the given scorer's own (a sentinel, since None means
# "no cache at all").
SCORER_CACHE: Any = object()


def make_executor(
    settings: ExecutionSettings | None,
    recipe: ScorerRecipe,
    *,
    scorer: Scorer | None = None,
    pool: ModelPool | None = None,
    cache: Any = SCORER_CACHE,
) -> Executor:
    """The executor ``settings`` ask for, with ``cache`` (if any) on the driver.

    ``scorer`` (local only) is reused as is; for ``ray`` it only computes the settings hashes.
    ``cache`` is put around the executor; left out, it is the given scorer's own cache (if it
    has one), and ``cache=None`` scores every selected metric afresh whatever the scorer
    carries (``Gate(use_cache=False)``). ``pool`` shares loaded models between local
    executors. For ``ray``, the driver builds a ``Scorer`` (unless given) only to compute
    settings hashes (no model is loaded for that) and the actors build their own.
    """
    if cache is SCORER_CACHE:
        cache = getattr(scorer, "cache", None)
    settings = settings or ExecutionSettings()
    if settings.executor == "local":
        if scorer is not None:
            local = LocalExecutor(scorer=scorer)
        else:
            local = LocalExecutor(recipe, pool=pool, cache=cache)
        return CachedExecutor(local, cache) if cache is not None else local
    if settings.executor in REMOTE_EXECUTORS:
        # By dotted path, like the backends: the remote executors build on this module, and
        # this module must not import them back (no import cycle, lazy or not).
        module, attr = REMOTE_EXECUTORS[settings.executor].split(":")
        remote_cls = getattr(importlib.import_module(module), attr)
        driver = scorer or recipe.build(pool=pool)
        ray_exec = remote_cls(recipe, settings, hashes=driver.settings_hashes())
        return CachedExecutor(ray_exec, cache) if cache is not None else ray_exec
    raise InputError(
        f"unknown executor {settings.executor!r}; one of {', '.join(EXECUTOR_CHOICES)}"
    )
