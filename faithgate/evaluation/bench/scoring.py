"""Every metric's scores on a file, through one executor, one model pool and one score cache,
with the seconds per item each metric took."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.cache import ScoreCache
from faithgate.errors import InputError
from faithgate.evaluation.bench.timings import Timings
from faithgate.scoring.execution import (
    ExecutionSettings,
    Executor,
    ScorerRecipe,
    executor_class,
    make_executor,
)
from faithgate.scoring.scorer import lookup_cached
from faithgate.types import Example


def default_cache_path() -> Path:
    from faithgate.models import faithgate_home

    return faithgate_home() / "bench" / "scores.sqlite"


@dataclass
class MetricRun:
    """One metric's scores on one file."""

    metric: str
    settings_hash: str
    scores: np.ndarray
    seconds_per_item: float | None
    computed: int
    cached: int
    errors: list[str] = field(default_factory=list)
    first_item_seconds: float | None = None  # includes loading models; not in seconds_per_item


class Bench:
    """Scores files with metrics through one model pool and one score cache."""

    def __init__(
        self,
        metrics: Sequence[str],
        *,
        cache: str | Path | None = "default",
        backend: str = "auto",
        models: Mapping[str, str] | None = None,
        metric_settings: Mapping[str, Mapping[str, Any]] | None = None,
        batch_size: int = 64,
        progress: bool = False,
        execution: ExecutionSettings | None = None,
    ) -> None:
        from faithgate.backends import ModelPool
        from faithgate.metrics.base import get_metric

        if not metrics:
            raise InputError("no metric selected: pass --metric NAME")
        if len(set(metrics)) != len(metrics):
            raise InputError(f"a metric is selected twice: {', '.join(metrics)}")
        settings = {k: dict(v) for k, v in (metric_settings or {}).items()}
        self.metrics = [get_metric(m, **settings.get(m, {})) for m in metrics]
        self.pool = ModelPool(dict(models or {}), backend=backend)
        # Where scoring runs (faithgate.scoring.execution); workers rebuild each metric from its recipe.
        self.execution = execution or ExecutionSettings()
        self.recipe = ScorerRecipe(
            tuple(metrics),
            metric_settings={m: settings[m] for m in metrics if m in settings},
            models=dict(models or {}),
            backend=backend,
        )
        cache_path = default_cache_path() if cache == "default" else cache
        self.cache = ScoreCache(cache_path) if cache_path else None
        self.timings = Timings(Path(cache_path) if cache_path else None)
        # A parallel executor gets bigger calls so every worker has batches queued.
        parallel = executor_class(self.execution.executor).parallel
        self.batch_size = max(batch_size, 256) if parallel else batch_size
        self.progress = progress

    def score(self, examples: Sequence[Example]) -> dict[str, MetricRun]:
        """Every metric's scores for ``examples`` (NaN where a metric could not score one).

        All metrics score together through one executor (``faithgate.scoring.execution``), so
        metrics that share an engine (the likelihood family) share its passes: one pass per
        distinct input for all of them. The score cache is read and written on the driver
        (``CachedExecutor``); the executor is closed, and its engines released, at the end.
        """
        # Duplicated (source, summary) rows (BUMP references) are scored once.
        uniq: dict[tuple[str, str], int] = {}
        for ex in examples:
            uniq.setdefault((ex.source, ex.summary), len(uniq))
        unique_examples = [Example(str(i), s, y) for (s, y), i in uniq.items()]
        where = [uniq[(ex.source, ex.summary)] for ex in examples]
        executor = self._executor()
        try:
            return self._score_all(executor, unique_examples, where)
        finally:
            executor.close()
            scorer = getattr(getattr(executor, "inner", executor), "scorer", None)
            if scorer is not None:
                scorer.release()  # the engines' per-input state ends with the run

    def _executor(self) -> Executor:
        """One executor for every metric: locally one ``Scorer`` on the bench's model pool
        (one scoring context, so engines are shared between metrics), remotely the recipe."""
        return make_executor(self.execution, self.recipe, pool=self.pool, cache=self.cache)

    def _missing(self, executor: Executor, batch: Sequence[Example]) -> dict[str, list[int]]:
        """Per metric, the indices of ``batch`` the cache does not hold (all without one)."""
        hashes = executor.settings_hashes()
        if self.cache is None:
            return {m: list(range(len(batch))) for m in hashes}
        return lookup_cached(self.cache, hashes, list(hashes), batch)[1]

    def _score_all(
        self, executor: Executor, unique_examples: list[Example], where: list[int]
    ) -> dict[str, MetricRun]:
        hashes = executor.settings_hashes()
        names = list(hashes)
        n = len(unique_examples)
        values = {m: np.full(n, np.nan) for m in names}
        errors: dict[str, list[str]] = {m: [] for m in names}
        computed = dict.fromkeys(names, 0)
        seconds = dict.fromkeys(names, 0.0)
        load_seconds: dict[str, float | None] = dict.fromkeys(names)
        scorer = getattr(getattr(executor, "inner", executor), "scorer", None)

        def run(batch: list[Example], start: int, timed: bool) -> None:
            missing = self._missing(executor, batch)
            before = dict(scorer.seconds) if scorer is not None else None
            parts_before = (
                {h: list(v) for h, v in scorer.component_seconds.items()} if scorer else {}
            )
            t0 = time.perf_counter()
            results = executor.score(batch)
            elapsed = time.perf_counter() - t0
            if timed and scorer is not None:
                # A combination's components, timed by settings hash like any metric.
                for h, (secs, items) in scorer.component_seconds.items():
                    old_secs, old_items = parts_before.get(h, (0.0, 0))
                    if items > old_items:
                        self.timings.add(h, secs - old_secs, int(items - old_items))
            busy = [m for m in names if missing[m]]
            for m in busy:
                # In process: the metric's own time; elsewhere: the batch's wall time, shared
                # by the metrics it computed.
                spent = scorer.seconds[m] - before[m] if before is not None else elapsed / len(busy)
                if timed:
                    seconds[m] += spent
                    computed[m] += len(missing[m])
                else:
                    load_seconds[m] = elapsed
            for j, res in enumerate(results):
                for m in names:
                    sc = res[m]
                    values[m][start + j] = sc.value if sc.ok else np.nan
                    if not sc.ok and sc.error and len(errors[m]) < 5:
                        errors[m].append(sc.error)

        # Loading models and pipelines is a one-time cost: the first item with an uncached
        # cell is scored alone, and its time kept out of the per-item figures.
        first_miss = next(
            (
                i
                for i, ex in enumerate(unique_examples)
                if any(self._missing(executor, [ex]).values())
            ),
            None,
        )
        warm: set[str] = set()  # metrics whose warm-up item was computed and cached
        if first_miss is not None:
            item = [unique_examples[first_miss]]
            needed = {m for m, idx in self._missing(executor, item).items() if idx}
            run(item, first_miss, timed=False)
            warm = needed - {m for m, idx in self._missing(executor, item).items() if idx}
        for start in range(0, n, self.batch_size):
            batch = unique_examples[start : start + self.batch_size]
            run(batch, start, timed=True)
            if self.progress:
                import click

                click.echo(f"  scoring: {min(start + self.batch_size, n)}/{n}", err=True)
        parts = self._component_hashes(scorer, hashes)
        runs: dict[str, MetricRun] = {}
        for m in names:
            timed = computed[m]  # items scored inside the timed batches
            if m not in parts:
                if timed:
                    self.timings.add(hashes[m], seconds[m], timed)
                per_item = (seconds[m] / timed) if timed else self.timings.per_item(hashes[m])
            elif scorer is None and timed:
                # Remotely a combination's seconds are the batch's wall time, its components'
                # included (computed on the worker): kept apart from the formula's own.
                self.timings.add(with_components(hashes[m]), seconds[m], timed)
                per_item = seconds[m] / timed
            else:
                if timed:  # in process: its formula's seconds only
                    self.timings.add(hashes[m], seconds[m], timed)
                per_item = self._combination_per_item(
                    hashes[m], parts[m], (seconds[m] / timed) if timed else None
                )
            total = timed + (1 if m in warm else 0)  # the warm-up item was computed too
            runs[m] = MetricRun(
                m,
                hashes[m],
                values[m][where],
                per_item,
                total,
                n - total,
                errors[m],
                load_seconds[m],
            )
        return runs

    def _component_hashes(
        self, scorer: Any, hashes: Mapping[str, str]
    ) -> dict[str, list[str] | None]:
        """Per selected combination (``ensemble``), its components' settings hashes: from the
        scorer in process, else from the bench's own metrics (a remote executor has no scorer
        here); None where they would not give the combination the executor's hash."""
        from faithgate.metrics.base import ScoringContext

        if scorer is not None:
            metrics, ctx = scorer.metrics, scorer.context
        else:
            metrics, ctx = self.metrics, ScoringContext(self.pool)
        return {
            m.name: [part.settings_hash(ctx) for part in m.components]
            if m.settings_hash(ctx) == hashes.get(m.name)
            else None
            for m in metrics
            if m.components and m.name in hashes
        }

    def _combination_per_item(
        self, settings_hash: str, parts: Sequence[str] | None, formula: float | None
    ) -> float | None:
        """A combination's seconds per item: its formula's (``formula``, this run's, else
        remembered) plus each component's (remembered by settings hash, wherever they were
        computed and timed in process); else, one of these unknown, the whole cost a remote
        run measured (``with_components``); else unknown. Its components count once."""
        if formula is None:
            formula = self.timings.per_item(settings_hash)
        costs = [self.timings.per_item(h) for h in parts] if parts is not None else [None]
        if formula is not None and None not in costs:
            return formula + sum(c for c in costs if c is not None)
        return self.timings.per_item(with_components(settings_hash))


def with_components(settings_hash: str) -> str:
    """The timings key of a combination's whole cost measured remotely (formula and
    components in one wall time), beside its formula's own under ``settings_hash``."""
    return f"{settings_hash}+components"
