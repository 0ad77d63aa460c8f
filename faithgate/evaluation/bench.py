"""``faithgate bench``: run metrics over labelled benchmark files and meta-evaluate them.

Input files are JSON Lines in the benchmark format of ``../shared/data/README.md`` (``label``,
``score``, ``pair_id``, ``role``, ``error_type``, ``origin`` per row; any JSONL or CSV file
that ``faithgate.io.load_examples`` reads works, with whatever of these fields it has). Scores
are kept in a ``ScoreCache`` keyed by settings hash, source and summary, so re-running with one
more metric computes only that metric; seconds per item are remembered next to the cache so
cached runs still report them.

``--combine`` is a learned linear combination of metrics (as in the faithfulness study's
Table 4): a logistic regression over standardised metric scores, its regularisation chosen by
cross-validation on one labelled set, reported on the others. The fitted weights are saved as
JSON and scored by the ``combined`` metric (``faithgate/metrics/combined.py``).
"""

from __future__ import annotations

import io
import json
import logging
import math
import random
import stat
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.atomic import atomic_write_bytes, atomic_write_text
from faithgate.cache import ScoreCache
from faithgate.errors import InputError
from faithgate.escape import markdown_literal, safe_line
from faithgate.evaluation.meta import (
    MIN_CI_N,
    MIN_ZERO_WIDTH_CI_N,
    Item,
    dedupe_labelled,
    evaluate,
    items_from_examples,
    roc_auc,
)
from faithgate.execution import (
    ExecutionSettings,
    Executor,
    ScorerRecipe,
    executor_class,
    make_executor,
)
from faithgate.io import load_examples, read_jsonl_rows

# The weights file format belongs to the ``combined`` metric that reads it; re-exported here.
from faithgate.metrics.combined import (  # noqa: F401
    COMBINATION_FORMAT,
    load_weights,
    weights_digest,
)
from faithgate.paths import input_mode, refuse_not_a_file
from faithgate.scorer import lookup_cached
from faithgate.types import Example

logger = logging.getLogger(__name__)


def default_cache_path() -> Path:
    from faithgate.models import faithgate_home

    return faithgate_home() / "bench" / "scores.sqlite"


# What bench reads from a directory, in any case (``.JSONL``): the formats ``load_examples``
# tells apart. A ``.json`` file there is as often a result (``--output``) or weights file
# (``--save-weights``) as JSON Lines: it is skipped with the others, by name (give it as a file).
DATA_SUFFIXES = (".jsonl", ".csv")
# Files a dataset directory holds besides its data, skipped without a word (../shared/data
# has a README.md and a licenses/ directory).
_DOC_SUFFIXES = (".md", ".txt", ".rst")
_DOC_NAMES = ("readme", "license", "licence", "copying", "notice", "citation")


def benchmark_files(path: str | Path, *, warn: bool = True) -> list[Path]:
    """The data files named by ``path``: the file itself, or every ``.jsonl`` and ``.csv`` file
    of a directory (any case; sorted by name). The directory's other files are skipped, with
    one warning naming them (``warn``) unless they are documentation (README, licences),
    hidden, or subdirectories: ``*.jsonl`` alone skipped ``.csv`` and ``.JSONL`` silently."""
    p = Path(path)
    mode = input_mode(p, p, f"{p}: no such file or directory")
    # A pipe (``--data <(cmd)``) is read once, as a file; a device (/dev/zero would never
    # end) or a socket is refused.
    refuse_not_a_file(p, mode, pipe=True, directory=True)
    if not stat.S_ISDIR(mode):
        return [p]
    files: list[Path] = []
    skipped: list[str] = []
    for f in sorted(p.iterdir(), key=lambda f: f.name):
        if f.suffix.lower() in DATA_SUFFIXES and not f.is_dir():
            files.append(f)
        elif not _quietly_skipped(f):
            skipped.append(f.name)
    if not files:
        raise InputError(f"{p}: no .jsonl or .csv files in this directory")
    if skipped and warn:
        shown = ", ".join(repr(n) for n in skipped[:5]) + (", ..." if len(skipped) > 5 else "")
        logger.warning(
            "%s: skipped %d file(s) that are not .jsonl or .csv: %s (to read one, give it as "
            "--data FILE: a file not named .csv is read as JSON Lines)",
            safe_line(str(p)),
            len(skipped),
            safe_line(shown),
        )
    return files


def _quietly_skipped(f: Path) -> bool:
    """A directory entry that is no data file by its nature: a subdirectory, a hidden file,
    or documentation."""
    name = f.name.lower()
    return (
        name.startswith(".")
        or f.suffix.lower() in _DOC_SUFFIXES
        or name.split(".")[0] in _DOC_NAMES
        or f.is_dir()
    )


def refuse_same_names(files: Sequence[Path]) -> None:
    """Results, the report's rows and ``--plots`` file names are keyed by a file's stem, so
    two files named alike (``a/d.jsonl``, ``b/d.jsonl``, or one file given twice) would
    overwrite each other's figures: refused, before any scoring, naming both."""
    seen: dict[str, Path] = {}
    for f in files:
        if f.stem in seen:
            raise InputError(
                f"two --data files are both named {f.stem!r} ({seen[f.stem]}, {f}): results and "
                "--plots files are named after the file, so one would overwrite the other; "
                "rename or copy one of them (or give it once)"
            )
        seen[f.stem] = f


def _locator(path: Path) -> Callable[[int], str]:
    """``where(i)`` for ``items_from_examples``: ``file:line`` of the ``i``-th record, found by
    reading the file again only when a record is refused (the error path)."""

    def where(i: int) -> str:
        if path.suffix.lower() != ".csv":
            for k, (line, _) in enumerate(read_jsonl_rows(path)):
                if k == i:
                    return f"{path}:{line}"
        return f"{path}: record {i + 1}"

    return where


def limit_examples(examples: Sequence[Example], limit: int | None, seed: int = 0) -> list[Example]:
    """A reproducible sample of about ``limit`` rows that keeps pair groups whole (a BUMP pair
    without its partner is useless for consistency) and the file order."""
    if limit is None or limit >= len(examples):
        return list(examples)
    if limit <= 0:
        raise InputError("--limit must be positive")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        pair = ex.meta.get("pair_id")  # an integer id 0 is a pair too (not "no pair")
        groups[f"id:{ex.id}" if pair is None or pair == "" else str(pair)].append(i)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    chosen: list[int] = []
    for k in keys:
        if len(chosen) >= limit:
            break
        chosen.extend(groups[k])
    return [examples[i] for i in sorted(chosen)]


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


def _valid_timings(data: Any) -> bool:
    """Whether ``data`` (a timings file's JSON) is an object of ``{seconds, items}`` entries."""

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    return isinstance(data, dict) and all(
        isinstance(e, dict) and number(e.get("seconds")) and number(e.get("items"))
        for e in data.values()
    )


class _Timings:
    """Seconds per scored item by settings hash, stored beside the score cache."""

    def __init__(self, cache_path: Path | None) -> None:
        self.path = cache_path.with_suffix(".timings.json") if cache_path else None
        self.data: dict[str, dict[str, float]] = {}
        if self.path and self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
            except OSError:
                return
            except ValueError:
                data = None
            if _valid_timings(data):
                self.data = data
            else:  # damaged: moved aside like a damaged cache (timings only inform)
                self._move_aside()

    def _move_aside(self) -> None:
        assert self.path is not None
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            self.path.replace(aside)
        except OSError as exc:
            logger.warning(
                "damaged timings file %s ignored (cannot move it aside: %s)",
                safe_line(self.path),
                safe_line(exc.strerror or exc),
            )
            return
        logger.warning(
            "damaged timings file %s moved aside to %s; starting a new one",
            safe_line(self.path),
            safe_line(aside.name),
        )

    def add(self, settings_hash: str, seconds: float, items: int) -> None:
        entry = self.data.setdefault(settings_hash, {"seconds": 0.0, "items": 0})
        entry["seconds"] += seconds
        entry["items"] += items
        if self.path:
            atomic_write_text(self.path, json.dumps(self.data, indent=1))

    def per_item(self, settings_hash: str) -> float | None:
        entry = self.data.get(settings_hash)
        if not entry or not entry["items"]:
            return None
        return entry["seconds"] / entry["items"]


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
        # Where scoring runs (faithgate.execution); workers rebuild each metric from its recipe.
        self.execution = execution or ExecutionSettings()
        self.recipe = ScorerRecipe(
            tuple(metrics),
            metric_settings={m: settings[m] for m in metrics if m in settings},
            models=dict(models or {}),
            backend=backend,
        )
        cache_path = default_cache_path() if cache == "default" else cache
        self.cache = ScoreCache(cache_path) if cache_path else None
        self.timings = _Timings(Path(cache_path) if cache_path else None)
        # A parallel executor gets bigger calls so every worker has batches queued.
        parallel = executor_class(self.execution.executor).parallel
        self.batch_size = max(batch_size, 256) if parallel else batch_size
        self.progress = progress

    def score(self, examples: Sequence[Example]) -> dict[str, MetricRun]:
        """Every metric's scores for ``examples`` (NaN where a metric could not score one).

        All metrics score together through one executor (``faithgate.execution``), so
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
                self.timings.add(_with_components(hashes[m]), seconds[m], timed)
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
        run measured (``_with_components``); else unknown. Its components count once."""
        if formula is None:
            formula = self.timings.per_item(settings_hash)
        costs = [self.timings.per_item(h) for h in parts] if parts is not None else [None]
        if formula is not None and None not in costs:
            return formula + sum(c for c in costs if c is not None)
        return self.timings.per_item(_with_components(settings_hash))


def _with_components(settings_hash: str) -> str:
    """The timings key of a combination's whole cost measured remotely (formula and
    components in one wall time), beside its formula's own under ``settings_hash``."""
    return f"{settings_hash}+components"


# ---------------------------------------------------------------- learned combination


def _features(runs: Mapping[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    missing = [n for n in names if n not in runs]
    if missing:
        raise InputError(f"combination needs scores of {', '.join(missing)}")
    return np.column_stack([np.asarray(runs[n], dtype=float) for n in names])


def fit_combination(
    runs: Mapping[str, np.ndarray],
    labels: Sequence[int],
    names: Sequence[str],
    *,
    keys: Sequence[Any] | None = None,
    folds: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """Logistic regression over standardised scores of ``names``; C chosen by ``folds``-fold
    cross-validated ROC AUC; returns the weights document (see ``COMBINATION_FORMAT``) with the
    out-of-fold ROC AUC of the chosen model."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    x = _features(runs, names)
    y = np.asarray(labels, dtype=float)
    # First row of each key, keys labelled both ways left out (as in the statistics).
    idx = np.arange(len(y)) if keys is None else dedupe_labelled(keys, y.tolist())[0]
    x, y = x[idx], y[idx]
    keep = ~np.isnan(x).any(axis=1) & ~np.isnan(y)
    x, y = x[keep], y[keep].astype(int)
    if len(set(y.tolist())) < 2 or min((y == 0).sum(), (y == 1).sum()) < folds:
        raise InputError(
            f"--combine needs at least {folds} faithful and {folds} unfaithful scored items"
        )
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    best: tuple[float, float, np.ndarray] | None = None
    for c in (0.01, 0.1, 1.0, 10.0):
        model = LogisticRegression(C=c, class_weight="balanced", max_iter=1000)
        oof = cross_val_predict(model, z, y, cv=cv, method="decision_function")
        auc = roc_auc(oof, y)
        if best is None or auc > best[0] + 1e-9:
            best = (auc, c, oof)
    assert best is not None
    auc, c, _ = best
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=1000).fit(z, y)
    return {
        "format": COMBINATION_FORMAT,
        "metrics": list(names),
        "mean": mean.tolist(),
        "scale": scale.tolist(),
        "coef": model.coef_[0].tolist(),
        "intercept": float(model.intercept_[0]),
        "C": c,
        "n_train": int(len(y)),
        "cv_folds": folds,
        "cv_roc_auc": auc,
    }


def apply_combination(weights: Mapping[str, Any], runs: Mapping[str, np.ndarray]) -> np.ndarray:
    """P(faithful) of the fitted logistic model; NaN where a component score is missing."""
    x = _features(runs, weights["metrics"])
    z = (x - np.asarray(weights["mean"])) / np.asarray(weights["scale"])
    logit = z @ np.asarray(weights["coef"]) + float(weights["intercept"])
    return 1.0 / (1.0 + np.exp(-logit))


# ---------------------------------------------------------------- the run


def _warn_without_figures(name: str, items: Sequence[Item]) -> None:
    """Warn (before scoring) when a file's rows cannot give the label-based figures (ROC AUC,
    balanced accuracy, consistency need both a faithful and an unfaithful row): a table row of
    "–" alone reads like a failure. A file of human ``score``s without labels is the
    correlations' kind of file and is not warned about. Still exit 0: the timing (s/item),
    the scores (``--output``, the cache) and any correlations remain meaningful."""
    # Counted as the figures count them: distinct rows, those labelled both ways left out (a
    # file whose one unfaithful row repeats a faithful one has no unfaithful item at all).
    kept, n_conflicting = dedupe_labelled([it.key for it in items], [it.label for it in items])
    n1 = sum(items[i].label == 1 for i in kept)
    n0 = sum(items[i].label == 0 for i in kept)
    if n1 and n0:
        return
    n_human = sum(it.human is not None for it in items)
    if not (n1 or n0) and not n_conflicting and n_human:
        return
    if n1 or n0 or n_conflicting:
        conflicting = f", {n_conflicting} labelled both ways" if n_conflicting else ""
        what = (
            f"only one class among its distinct rows ({n1} faithful, {n0} unfaithful{conflicting})"
        )
    else:
        what = "no labels (label 1 = faithful, 0 = unfaithful) and no human score field"
    rest = "correlations with the human scores" if n_human else "the timing (s/item)"
    logger.warning(
        "%s: %s: ROC AUC, balanced accuracy and consistency need both classes; only %s "
        "can be reported",
        safe_line(name),
        what,
        rest,
    )


def run_bench(
    data: Sequence[str | Path],
    metrics: Sequence[str],
    *,
    limit: int | None = None,
    seed: int = 0,
    n_resamples: int = 1000,
    cache: str | Path | None = "default",
    backend: str = "auto",
    models: Mapping[str, str] | None = None,
    metric_settings: Mapping[str, Mapping[str, Any]] | None = None,
    plots: str | Path | None = None,
    combine: str | Path | None = None,
    save_weights: str | Path | None = None,
    combine_limit: int | None = -1,
    progress: bool = False,
    execution: ExecutionSettings | None = None,
) -> dict[str, Any]:
    """Score every file with every metric and meta-evaluate; returns a JSON-ready dict.

    ``combine_limit`` caps the training file of ``combine`` (default: the same as ``limit``;
    ``None``: the whole file)."""
    files = [f for d in data for f in benchmark_files(d)]
    refuse_same_names(files)
    bench = Bench(
        metrics,
        cache=cache,
        backend=backend,
        models=models,
        metric_settings=metric_settings,
        progress=progress,
        execution=execution,
    )
    result: dict[str, Any] = {"metrics": list(metrics), "limit": limit, "datasets": {}}
    loaded: dict[str, tuple[list[Example], list[Item], dict[str, MetricRun]]] = {}
    train_key = None
    paths = list(files)
    if combine is not None:
        train_path = benchmark_files(combine)
        if len(train_path) != 1:
            raise InputError("--combine takes one labelled .jsonl file to fit on")
        train_key = str(train_path[0].resolve())
        if all(str(f.resolve()) != train_key for f in paths):
            paths.append(train_path[0])
    for path in paths:
        name = path.stem
        if progress:
            import click

            click.echo(f"{safe_line(name)}: scoring", err=True)  # a file name is user text
        file_limit = limit
        if combine is not None and str(path.resolve()) == train_key and combine_limit != -1:
            file_limit = combine_limit
        everything = load_examples(path)
        # Items of the whole file, so a field of the wrong type is refused (file:line) even
        # outside the sample; the sample's are picked from them (an item depends only on its
        # own example, and the sample holds the same example objects).
        all_items = items_from_examples(everything, _locator(path))
        item_of = {id(ex): item for ex, item in zip(everything, all_items, strict=True)}
        examples = limit_examples(everything, file_limit, seed)
        items = [item_of[id(ex)] for ex in examples]
        _warn_without_figures(name, items)
        runs = bench.score(examples)
        loaded[str(path.resolve())] = (examples, items, runs)
    combination = None
    if combine is not None:
        assert train_key is not None
        examples, items, runs = loaded[train_key]
        combination = fit_combination(
            {k: r.scores for k, r in runs.items()},
            [it.label if it.label is not None else np.nan for it in items],
            list(metrics),
            keys=[it.key for it in items],
            seed=seed,
        )
        combination["trained_on"] = str(combine)
        combination["settings_hashes"] = {k: r.settings_hash for k, r in runs.items()}
        combination["metric_settings"] = {m.name: m.settings for m in bench.metrics}
        result["combination"] = combination
        if save_weights:
            atomic_write_text(save_weights, json.dumps(combination, indent=1, default=str))
            result["combination_file"] = str(save_weights)
    for path in files:
        examples, items, runs = loaded[str(path.resolve())]
        name = path.stem
        entry: dict[str, Any] = {"file": str(path), "n": len(examples), "metrics": {}}
        all_scores = {k: r.scores for k, r in runs.items()}
        for mname, run in runs.items():
            entry["metrics"][mname] = {
                "settings_hash": run.settings_hash,
                "seconds_per_item": run.seconds_per_item,
                "computed": run.computed,
                "cached": run.cached,
                "first_item_seconds": run.first_item_seconds,
                "errors": run.errors,
                **evaluate(items, run.scores, n_resamples=n_resamples, seed=seed),
            }
        compared = dict(all_scores)
        if combination is not None:
            cscores = apply_combination(combination, all_scores)
            all_scores["combined"] = cscores
            in_sample = str(path.resolve()) == train_key
            ev = evaluate(items, cscores, n_resamples=n_resamples, seed=seed)
            ev["note"] = (
                "training set: cross-validated ROC AUC "
                f"{combination['cv_roc_auc']:.3f}; other figures are in-sample"
                if in_sample
                else f"fitted on {Path(str(combine)).name}"
            )
            ev["in_sample"] = in_sample
            entry["metrics"]["combined"] = {"seconds_per_item": None, **ev}
            if not in_sample:  # fitted on these items, it would win any test against them
                compared["combined"] = cscores
        for mname, m in entry["metrics"].items():
            small = m["overall"].get("ci_n_too_small")
            if small and n_resamples > 0:
                logger.warning(
                    "%s: %s: no 95%% CI for %s: fewer than %d pairs / items of each class, or "
                    "a zero-width interval from fewer than %d of a class (by error type and "
                    "origin too, where a group is that small)",
                    name,
                    mname,
                    ", ".join(small),
                    MIN_CI_N,
                    MIN_ZERO_WIDTH_CI_N,
                )
        if len(compared) > 1 and n_resamples > 0:
            entry["comparisons"] = compare_metrics(items, compared, n_resamples, seed)
        if plots:
            entry["plots"] = write_plots(plots, name, items, all_scores)
        result["datasets"][name] = entry
    return result


def compare_metrics(
    items: Sequence[Item],
    scores: Mapping[str, np.ndarray],
    n_resamples: int = 1000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Paired permutation tests of the best metric against each other one on the same items.

    Paired data: consistency (per-pair wins) over every pair but the conflicting ones, an
    unscored member failing, as in the main table. Else ROC AUC over the distinct labelled
    items (labelled both ways: left out, as in the main table) that *every* compared metric
    scored, scores mapped to ranks so two metrics' scales can be swapped: the difference is the
    difference of the metrics' ROC AUCs on those ``n`` items (equal to the main table's when no
    metric failed on any item)."""
    from faithgate.evaluation.meta import (
        _fast_auc,
        pair_wins,
        paired_permutation_test,
        pairs,
        rank_normalize,
    )

    pr = pairs(items)
    if pr:
        stat = "consistency"
        basis = "pairs; an unscored member fails"
        values = {
            m: pair_wins(np.asarray(s)[[a for a, _ in pr]], np.asarray(s)[[b for _, b in pr]])
            for m, s in scores.items()
        }
        n = len(pr)

        def fn(v: np.ndarray) -> float:
            return float(v.mean())
    else:
        labelled = [i for i, it in enumerate(items) if it.label is not None]
        if not labelled:
            return []
        kept, _ = dedupe_labelled(
            [items[i].key for i in labelled], [items[i].label for i in labelled]
        )
        idx = np.asarray([labelled[j] for j in kept], dtype=int)
        # Only the items every compared metric scored: no policy for failures to disagree on.
        scored = np.ones(len(idx), dtype=bool)
        for s in scores.values():
            scored &= ~np.isnan(np.asarray(s, dtype=float)[idx])
        idx = idx[scored]
        y = np.asarray([items[i].label for i in idx], dtype=int)
        if len(set(y.tolist())) < 2:
            return []
        stat = "roc_auc"
        basis = "distinct items every compared metric scored"
        values = {m: rank_normalize(np.asarray(s, dtype=float)[idx]) for m, s in scores.items()}
        n = len(idx)

        def fn(v: np.ndarray) -> float:
            return _fast_auc(v, y)

    best = max(values, key=lambda m: fn(values[m]))
    out = []
    for m in values:
        if m == best:
            continue
        res = paired_permutation_test(values[best], values[m], fn, n_resamples, seed)
        out.append({"statistic": stat, "a": best, "b": m, **res, "n": n, "items": basis})
    return out


# ---------------------------------------------------------------- reports


def _f(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}"


def _with_ci(value: Any, ci: Any, group: Mapping[str, Any] | None = None, stat: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if group is not None and stat in group.get("ci_n_too_small", ()):
        return f"{_f(value)} [n too small]"  # not a degenerate [1.00, 1.00]
    if not ci or ci[0] is None:
        return _f(value)
    return f"{_f(value)} [{_outward(ci[0], False)}, {_outward(ci[1], True)}]"


def _outward(bound: Any, up: bool, digits: int = 3) -> str:
    """A CI bound with the estimate's decimals, rounded outward (the lower end down, the upper
    up), so the shown interval holds the shown estimate and the unrounded interval."""
    if bound is None or (isinstance(bound, float) and math.isnan(bound)):
        return _f(bound, digits)
    rounding = ROUND_CEILING if up else ROUND_FLOOR
    return str(Decimal(repr(float(bound))).quantize(Decimal(1).scaleb(-digits), rounding))


def _stat(group: Mapping[str, Any], stat: str) -> str:
    """A statistic of ``group`` with its interval (``_with_ci``)."""
    return _with_ci(group.get(stat), group.get(f"{stat}_ci95"), group, stat)


def _md(text: Any) -> str:
    """User text (file, error type, origin names) as one literal Markdown table cell
    (``markdown_literal``, as ``check``'s report): no HTML, link, image, mention or code span
    of a user's making renders where the table is pasted (a job summary, a PR comment)."""
    return markdown_literal(text, keep_underscores=True)


def _n_cell(o: Mapping[str, Any]) -> str:
    """The n behind a row's figures, compact: distinct scored items behind ROC AUC (else the
    graded items behind the correlations, else rows), then what it leaves out, e.g. ``785
    distinct (1386 rows)``, ``470 (474 rows, 4 failed)``, ``1244 distinct (1268 rows, 1
    conflicting)``, ``1244 distinct (1268 rows, 3 conflicting, 3 conflicting pairs)``."""
    if "n_roc_auc" in o:
        n = o["n_roc_auc"]
        text = f"{n}" + (" distinct" if o.get("n_distinct", o["n"]) != o["n"] else "")
        failed = o.get("n_distinct_failed", 0)
    elif "n_graded" in o:
        n, text, failed = o["n_graded"], f"{o['n_graded']}", o.get("n_failed", 0)
    else:
        n, text, failed = o["n"], f"{o['n']}", o.get("n_failed", 0)
    parts = [f"{o['n']} rows"] if n != o["n"] else []
    if failed:
        parts.append(f"{failed} failed")
    if o.get("n_conflicting"):
        parts.append(f"{o['n_conflicting']} conflicting")
    if o.get("n_pairs_conflicting"):  # pairs of one text labelled both ways: not in consistency
        parts.append(f"{o['n_pairs_conflicting']} conflicting pairs")
    return text + (f" ({', '.join(parts)})" if parts else "")


def _metric_cell(name: str, m: Mapping[str, Any]) -> str:
    """A metric's name; a combination scored on its own training file is marked in-sample."""
    return _md(name) + (" (in-sample)" if m.get("in_sample") else "")


def markdown_report(result: Mapping[str, Any]) -> str:
    """Main table (one row per dataset x metric) plus breakdowns by error type and origin."""
    lines = [
        "| dataset | metric | n | consistency [95% CI] | ROC AUC [95% CI] "
        "| bal. acc., test half [95% CI] "
        "| Pearson | Spearman | Kendall | s/item |",
        "|---|---|---:|---|---|---|---:|---:|---:|---:|",
    ]
    by_type: list[str] = []
    by_origin: list[str] = []
    for dname, entry in result["datasets"].items():
        for mname, m in entry["metrics"].items():
            o = m["overall"]
            metric = _metric_cell(mname, m)
            lines.append(
                f"| {_md(dname)} | {metric} | {_n_cell(o)} | {_stat(o, 'consistency')} "
                f"| {_stat(o, 'roc_auc')} "
                f"| {_stat(o, 'balanced_accuracy')} "
                f"| {_f(o.get('pearson'))} | {_f(o.get('spearman'))} | {_f(o.get('kendall'))} "
                f"| {_f(m.get('seconds_per_item'), 4)} |"
            )
            for t, g in m.get("by_error_type", {}).items():
                by_type.append(
                    f"| {_md(dname)} | {_md(t)} | {metric} "
                    f"| {g.get('n_pairs', g.get('n_roc_auc', g['n']))} "
                    f"| {_stat(g, 'consistency')} "
                    f"| {_stat(g, 'roc_auc')} |"
                )
            for origin, g in m.get("by_origin", {}).items():
                by_origin.append(
                    f"| {_md(dname)} | {_md(origin)} | {metric} "
                    f"| {g.get('n_roc_auc', g.get('n_graded', g['n']))} "
                    f"| {_stat(g, 'roc_auc')} "
                    f"| {_f(g.get('pearson'))} | {_f(g.get('spearman'))} | {_f(g.get('kendall'))} |"
                )
    if by_type:
        lines += [
            "",
            "By error type (pairs for paired data, else items):",
            "",
            "| dataset | error type | metric | pairs / n | consistency [95% CI] | ROC AUC [95% CI] |",
            "|---|---|---|---:|---|---|",
            *by_type,
        ]
    if by_origin:
        lines += [
            "",
            "By origin:",
            "",
            "| dataset | origin | metric | n | ROC AUC [95% CI] | Pearson | Spearman | Kendall |",
            "|---|---|---|---:|---|---:|---:|---:|",
            *by_origin,
        ]
    comparisons = [
        f"| {_md(d)} | {c['statistic']} | {_md(c['a'])} | {_md(c['b'])} | {c.get('n', '–')} "
        f"| {c['difference']:+.3f} | {c['p_value']:.4f} |"
        for d, entry in result["datasets"].items()
        for c in entry.get("comparisons", [])
    ]
    if comparisons:
        lines += [
            "",
            "Paired permutation tests (best metric vs each other one; consistency over every "
            "pair, an unscored member failing; ROC AUC over the n distinct items every compared "
            "metric scored):",
            "",
            "| dataset | statistic | best | other | n | difference | p |",
            "|---|---|---|---|---:|---:|---:|",
            *comparisons,
        ]
    comb = result.get("combination")
    if comb:
        terms = ", ".join(
            f"{_md(m)}: {w:+.3f}" for m, w in zip(comb["metrics"], comb["coef"], strict=True)
        )
        lines += [
            "",
            f"Combination fitted on {_md(comb['trained_on'])} (n={comb['n_train']}, "
            f"C={comb['C']}, "
            f"{comb['cv_folds']}-fold CV ROC AUC {comb['cv_roc_auc']:.3f}); standardised "
            f"weights: {terms}.",
        ]
        if any(
            m.get("in_sample")
            for entry in result["datasets"].values()
            for m in entry["metrics"].values()
        ):
            lines.append(
                "Rows marked combined (in-sample) are its training file: their figures are "
                "in-sample (the cross-validated ROC AUC above is not), and it is left out of "
                "that file's permutation tests."
            )
    return "\n".join(lines)


def write_plots(
    directory: str | Path,
    dataset: str,
    items: Sequence[Item],
    scores: Mapping[str, np.ndarray],
) -> list[str]:
    """PNG figures per metric: ROC curves (overall and per error type) and score histograms of
    faithful vs unfaithful items. Returns the written paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plots needs matplotlib: pip install 'faithgate[full]'") from None
    from sklearn.metrics import roc_curve

    from faithgate.evaluation.meta import _error_type_groups, conflicting_keys, dedupe_labelled

    out_dir = Path(directory)  # created by the first atomic write
    written: list[str] = []

    def save(fig: Any, path: Path) -> None:
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=110)
        atomic_write_bytes(path, png.getvalue())
        written.append(str(path))

    groups = {"all": list(range(len(items))), **_error_type_groups(items)}
    # As in the statistics: each item once, one labelled both ways left out.
    bad = conflicting_keys([it.key for it in items], [it.label for it in items])

    def distinct(idx: Sequence[int]) -> list[int]:
        kept, _ = dedupe_labelled([items[i].key for i in idx], [items[i].label for i in idx], bad)
        return [idx[j] for j in kept]

    for mname, s in scores.items():
        s = np.asarray(s, dtype=float)
        fig, ax = plt.subplots(figsize=(5.5, 5))
        drew = False
        for gname, idx in groups.items():
            idx = distinct(idx)
            y = np.asarray([items[i].label if items[i].label is not None else -1 for i in idx])
            sv = s[idx]
            keep = (y >= 0) & ~np.isnan(sv)
            if len(set(y[keep].tolist())) < 2:
                continue
            fpr, tpr, _ = roc_curve(y[keep], sv[keep])
            auc = roc_auc(sv[keep], y[keep])
            ax.plot(fpr, tpr, lw=2.2 if gname == "all" else 1.2, label=f"{gname} (AUC {auc:.2f})")
            drew = True
        if drew:
            ax.plot([0, 1], [0, 1], ls=":", c="grey")
            ax.set_xlabel("false positive rate (unfaithful kept)")
            ax.set_ylabel("true positive rate (faithful kept)")
            ax.set_title(f"{dataset}: {mname}")
            ax.legend(fontsize=7, loc="lower right")
            fig.tight_layout()
            save(fig, out_dir / f"{dataset}__{mname}__roc.png")
        plt.close(fig)
        uniq = distinct(list(range(len(items))))
        y = np.asarray([items[i].label if items[i].label is not None else -1 for i in uniq])
        sv = s[uniq]
        if (y == 1).any() and (y == 0).any():
            fig, ax = plt.subplots(figsize=(6, 4))
            finite = sv[~np.isnan(sv)]
            bins = np.linspace(finite.min(), finite.max(), 31) if finite.size else 30
            ax.hist(
                sv[(y == 1) & ~np.isnan(sv)], bins=bins, alpha=0.6, label="faithful", density=True
            )
            ax.hist(
                sv[(y == 0) & ~np.isnan(sv)], bins=bins, alpha=0.6, label="unfaithful", density=True
            )
            ax.set_xlabel(f"{mname} score")
            ax.set_ylabel("density")
            ax.set_title(f"{dataset}: {mname}")
            ax.legend()
            fig.tight_layout()
            save(fig, out_dir / f"{dataset}__{mname}__hist.png")
            plt.close(fig)
    return written


def json_ready(obj: Any) -> Any:
    """NaN -> None and numpy -> Python, recursively (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_ready(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    return obj
