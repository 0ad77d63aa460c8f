"""Where scoring runs: the execution seam.

An **executor** scores examples with one fixed scorer *recipe* and returns plain ``Score``
data aligned with its input. The gate, ``bench`` and ``calibrate`` score through one, chosen by
``[tool.faithgate.execution] executor`` or ``--executor``:

``local``
    In this process, with one ``Scorer`` (models loaded once, kept between calls). Inside one
    machine, pytest-xdist parallelises the plugin on top of this.
``ray``
    On a Ray cluster (``faithgate[ray]``, ``faithgate.scoring.ray_executor``): a pool of actors, each
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
- ``EXECUTORS``: the registry (name -> class, imported on use). Each executor class owns its
  ``Options`` (an ``ExecutorOptions`` dataclass: its keys of the table, with their checks),
  says whether it is ``parallel`` and builds itself in ``create``.
- ``ExecutionSettings``: the parsed ``[tool.faithgate.execution]`` table: the executor's name
  and the other keys, checked by the options declaring them (``options_for`` types them).
- ``make_executor``: the one factory: settings + recipe -> the registered executor, wrapped in
  the cache when there is one. The gate, bench, calibrate and the pytest plugin ask it.
"""

from __future__ import annotations

import contextlib
import importlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, runtime_checkable

from faithgate.errors import ConfigError, InputError
from faithgate.numbers import is_finite_number
from faithgate.result import first_settings_mismatch
from faithgate.safety.escape import safe_line
from faithgate.types import Example, Score

if TYPE_CHECKING:
    from faithgate.backends import ModelPool
    from faithgate.cache import ScoreCache
    from faithgate.metrics.base import Metric
    from faithgate.scoring.scorer import Scorer


@dataclass(frozen=True)
class RegisteredExecutor:
    """An entry of ``EXECUTORS``: the class as ``"module:Class"`` (imported on use) and where
    it scores, in a few words (the help of ``--executor``)."""

    path: str
    where: str


# The executor registry (the Ray executor builds on this module, which must not import it
# back). CLI choices and help, the plugin option, the keys of ``[tool.faithgate.execution]`` and
# ``make_executor`` all derive from it: adding an executor is its module plus one line here.
EXECUTORS: dict[str, RegisteredExecutor] = {
    "local": RegisteredExecutor("faithgate.scoring.execution:LocalExecutor", "this process"),
    "ray": RegisteredExecutor(
        "faithgate.scoring.ray_executor:RayExecutor", "a Ray cluster; faithgate[ray]"
    ),
}
EXECUTOR_CHOICES = tuple(EXECUTORS)


def executors_help() -> str:
    """``local (this process) or ray (a Ray cluster; faithgate[ray])``, from the registry."""
    named = [f"{name} ({entry.where})" for name, entry in EXECUTORS.items()]
    return " or ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)


Progress = Callable[[int], None]

# Examples per chunk the driver-side cache feeds an executor: looked up, scored and written
# back before the next (``CachedExecutor``); big enough to keep a cluster's actors queued.
CHUNK_EXAMPLES = 1024


def executor_class(name: str) -> type[Executor]:
    """The class registered as ``name`` (``EXECUTORS``); ``InputError`` for an unknown one."""
    if name not in EXECUTORS:
        raise InputError(f"unknown executor {name!r}; one of {', '.join(EXECUTORS)}")
    module, attr = EXECUTORS[name].path.split(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


# One check of an option's value: the value to keep, or ``ValueError`` saying what is wrong.
# ``numbers_as_text``: command-line values arrive as text, so "4" is read as a number there.
OptionCheck = Callable[[Any, bool], Any]


def number_option(minimum: float, *, integer: bool) -> OptionCheck:
    """A check for a number (an integer when ``integer``) of at least ``minimum``."""

    def check(value: Any, numbers_as_text: bool) -> Any:
        if isinstance(value, str) and numbers_as_text:
            with contextlib.suppress(ValueError):
                value = int(value) if integer else float(value)
        ok_type = int if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type):
            raise ValueError(f"expected {'an integer' if integer else 'a number'}, got {value!r}")
        # is_finite_number: an integer beyond float range (TOML has them) made
        # math.isfinite raise OverflowError, an "internal error" instead of exit 2.
        if not is_finite_number(value):
            shown = "an integer too large for a float" if isinstance(value, int) else value
            raise ValueError(f"expected a finite number, got {shown}")
        if value < minimum:
            raise ValueError(f"expected a value >= {minimum:g}, got {value!r}")
        return value if integer else float(value)

    return check


def text_option(value: Any, numbers_as_text: bool) -> str:
    """A check for a non-empty string (kept stripped)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value.strip()


def table_option(value: Any, numbers_as_text: bool) -> dict[str, Any]:
    """A check for a table (a mapping, kept as a dict)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a table, got {value!r}")
    return dict(value)


@dataclass(frozen=True)
class ExecutorOptions:
    """Base of an executor's options: a frozen dataclass whose fields are its keys of
    ``[tool.faithgate.execution]`` (and ``ExecutionSettings`` keywords), with ``CHECKS``
    (key -> ``OptionCheck``) saying what each value must be. The local executor has none."""

    CHECKS: ClassVar[Mapping[str, OptionCheck]] = {}

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> Self:
        """These options from the execution table (checked already), ignoring other keys."""
        return cls(**{k: v for k, v in table.items() if k in cls.names()})


def _option_classes() -> list[type[ExecutorOptions]]:
    return [executor_class(name).Options for name in EXECUTORS]


def execution_keys() -> tuple[str, ...]:
    """Every key ``[tool.faithgate.execution]`` takes: ``executor``, then each registered
    executor's options, in registry order."""
    keys = {"executor": None}
    for options in _option_classes():
        keys.update(dict.fromkeys(options.names()))
    return tuple(keys)


def executors_taking(*keys: str) -> list[str]:
    """The registered executors whose options include every one of ``keys``."""
    return [n for n in EXECUTORS if set(keys) <= set(executor_class(n).Options.names())]


@dataclass(frozen=True, init=False)
class ExecutionSettings:
    """Where and how to score (``[tool.faithgate.execution]``): the ``executor`` to use and
    the table's other keys (``options``), each checked by the options of the executor(s)
    declaring it (``ExecutorOptions``). A key of another executor than the chosen one is kept
    (a file may configure Ray while ``--executor local`` runs); ``options_for`` gives one
    executor its own, typed. Keywords are the table's keys:
    ``ExecutionSettings(executor="ray", num_workers=2)``."""

    executor: str
    options: Mapping[str, Any]

    def __init__(self, executor: str = "local", **options: Any) -> None:
        if options:
            unknown = sorted(set(options) - set(execution_keys()))
            if unknown:
                raise TypeError(f"ExecutionSettings() got an unexpected keyword {unknown[0]!r}")
        object.__setattr__(self, "executor", executor)
        object.__setattr__(self, "options", dict(options))

    def options_for(self, name: str | None = None) -> Any:
        """The options of executor ``name`` (default: the chosen one), its dataclass."""
        return executor_class(name or self.executor).Options.from_table(self.options)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "execution") -> ExecutionSettings:
        """Validate the ``[tool.faithgate.execution]`` table (errors name the key)."""
        for key in data:
            if key not in execution_keys():
                raise ConfigError(
                    f"{where}: unknown key 'execution.{key}'; "
                    f"allowed: {', '.join(execution_keys())}"
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

        executor, options = self.executor, dict(self.options)
        for key, value in changes.items():
            if value is None:
                continue
            if key == "executor":
                if value not in EXECUTORS:
                    raise fail(key, f"expected one of {', '.join(EXECUTORS)}, got {value!r}")
                executor = value
                continue
            checks = [c.CHECKS[key] for c in _option_classes() if key in c.CHECKS]
            if not checks:
                raise fail(key, f"unknown setting; allowed: {', '.join(execution_keys())}")
            try:
                for check in checks:
                    value = check(value, numbers_as_text)
            except ValueError as exc:
                raise fail(key, str(exc)) from None
            options[key] = value
        return ExecutionSettings(executor, **options)


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
        from faithgate.scoring.scorer import Scorer

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
    called on the driver with the number of examples finished since the last call.

    A registered executor (``EXECUTORS``) also has ``Options`` (its ``ExecutorOptions``
    dataclass), ``parallel`` (whether one call is spread over workers: callers then hand it
    big calls, and it reports progress as batches finish) and ``create``, which
    ``make_executor`` calls."""

    name: str
    parallel: bool

    def score(
        self,
        examples: Sequence[Example],
        *,
        todo: Mapping[str, Sequence[int]] | None = None,
        progress: Progress | None = None,
    ) -> list[dict[str, Score]]: ...

    def settings_hashes(self) -> dict[str, str]: ...

    def close(self) -> None: ...

    # The registered executor's class side (``make_executor``).
    Options: ClassVar[type[ExecutorOptions]]

    @classmethod
    def create(
        cls,
        recipe: ScorerRecipe | None,
        options: Any,
        *,
        scorer: Scorer | None = None,
        pool: ModelPool | None = None,
        cache: ScoreCache | None = None,
    ) -> Executor: ...


class LocalExecutor:
    """Scores in this process with one ``Scorer`` (built from the recipe once, or given).

    ``cache``, for a scorer built here, is read and written only for the components of a
    combination (``ensemble``) that no selected metric shares: the selected metrics' cells are
    the ``CachedExecutor``'s around it. So ``ensemble`` after its components were scored costs
    only its formula.
    """

    name = "local"
    parallel = False
    Options = ExecutorOptions  # none

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

    @classmethod
    def create(
        cls,
        recipe: ScorerRecipe | None,
        options: ExecutorOptions,
        *,
        scorer: Scorer | None = None,
        pool: ModelPool | None = None,
        cache: ScoreCache | None = None,
    ) -> LocalExecutor:
        """``scorer`` reused as is, else one built from ``recipe`` (``pool``, and ``cache``
        for a combination's components)."""
        if scorer is not None:
            return cls(scorer=scorer)
        return cls(recipe, pool=pool, cache=cache)

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
        self.parallel = getattr(inner, "parallel", False)
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
        from faithgate.scoring.scorer import lookup_cached

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
    recipe: ScorerRecipe | None = None,
    *,
    scorer: Scorer | None = None,
    pool: ModelPool | None = None,
    cache: Any = SCORER_CACHE,
) -> Executor:
    """The executor ``settings`` ask for (default: local), with ``cache`` (if any) around it
    on the driver. The one place executors are built: the gate, bench, calibrate and the
    pytest plugin all ask here.

    ``scorer`` (local) is reused as is; a remote executor uses it only for the settings
    hashes (built from ``recipe`` when not given; no model is loaded for that) and its
    workers build their own from ``recipe``. ``cache`` is put around the executor; left out,
    it is the given scorer's own cache (if it has one), and ``cache=None`` scores every
    selected metric afresh whatever the scorer carries (``Gate(use_cache=False)``). ``pool``
    shares loaded models with a scorer built here.
    """
    if cache is SCORER_CACHE:
        cache = getattr(scorer, "cache", None)
    settings = settings or ExecutionSettings()
    inner = executor_class(settings.executor).create(
        recipe, settings.options_for(), scorer=scorer, pool=pool, cache=cache
    )
    return CachedExecutor(inner, cache) if cache is not None else inner
