"""The stateful scorer: metrics plus loaded models, reused across calls (like bert_score's
``BERTScorer``). Every entry point scores through here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import numbers
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from typing import Any

from faithgate.backends import ModelPool
from faithgate.cache import ScoreCache
from faithgate.errors import FaithgateError, InputError, Interrupted
from faithgate.metrics.base import Metric, ScoringContext, get_metric
from faithgate.safety.escape import clipped, exception_line, safe_line
from faithgate.threads import metric_blas_threads
from faithgate.types import Example, Score, is_blank

log = logging.getLogger(__name__)

# The metric of ``Scorer()``, ``score()`` and a gate configured without ``metrics``: ensemble
# (sentsim, overlap, harim_plus and ner voting with equal weight), measured best per summary of
# all offline metrics (docs/metrics/ensemble.md): mean pooled ROC AUC 0.793 over the six
# development sets of ../shared/data with each set's scales taken from the other five
# (sentsim, the previous default: 0.753; best single metric 0.764), and 0.708 on the only
# abstractive (XSum) data among them, where the best single metric gets 0.666; BUMP pair
# consistency 87.4% (sentsim 80.5%). It costs an LM pass per summary (SmolLM2-135M); for the
# fast default of earlier releases select ["sentsim"]. Beside it, facts (issue 47): every
# number, date and name of the summary found in the source, the changed facts a similarity
# score barely sees, with the unsupported span as evidence (docs/metrics/facts.md). It adds
# a spaCy pass, which ensemble's ner vote shares (cached parse), and no model.
DEFAULT_METRICS = ("ensemble", "facts")


def resolve_metrics(
    metrics: str | Metric | Iterable[str | Metric],
    metric_settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Metric]:
    """Metric instances for names (with their ``metric_settings``) or instances as given;
    ``InputError`` for none selected, or settings of a metric that is not selected."""
    if metric_settings is not None and not isinstance(metric_settings, Mapping):
        raise InputError(
            "metric_settings must be a mapping of metric name -> settings, got "
            f"{type(metric_settings).__name__}"
        )
    for name, value in (metric_settings or {}).items():
        if not isinstance(value, Mapping):
            raise InputError(
                f"settings of metric {name!r} must be a mapping of setting -> value, "
                f"got {type(value).__name__}"
            )
    settings = {k: dict(v) for k, v in (metric_settings or {}).items()}
    if isinstance(metrics, str | Metric):  # one metric: "sentsim" is not s, e, n, t, ...
        metrics = [metrics]
    if not isinstance(metrics, Iterable):
        raise InputError(f"metrics are names or Metrics, got {type(metrics).__name__}")
    metrics = list(metrics)
    for m in metrics:
        if not isinstance(m, str | Metric):
            raise InputError(f"a metric is a name or a Metric, got {type(m).__name__}")
    out = [m if isinstance(m, Metric) else get_metric(m, **settings.pop(m, {})) for m in metrics]
    if not out:
        raise InputError("no metric selected")
    if settings:
        raise InputError(f"settings given for metric(s) not selected: {', '.join(settings)}")
    return out


def check_scorer_options(
    models: Any, allow_download: Any, model_options: Any
) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """``models`` and ``model_options`` as plain dicts, after checking the types ``Scorer``
    takes; ``InputError`` in one line otherwise. ``allow_download`` must be a bool: the string
    ``"false"`` is truthy and would have allowed downloads (the configuration file refuses
    it too)."""
    if not isinstance(allow_download, bool):
        raise InputError(
            f"allow_download must be True or False, got {type(allow_download).__name__} "
            f"{safe_line(repr(allow_download))}"
        )
    if models is not None and not isinstance(models, Mapping):
        raise InputError(
            f"models must be a mapping of model role -> model name or path, got "
            f"{type(models).__name__}"
        )
    names: dict[str, str] = {}
    for role, name in (models or {}).items():
        if not isinstance(name, str | PathLike):
            raise InputError(
                f"models[{safe_line(repr(role))}] must be a model name or path, got "
                f"{type(name).__name__}"
            )
        names[role] = os.fspath(name)
    if model_options is not None and not isinstance(model_options, Mapping):
        raise InputError(
            f"model_options must be a mapping of model role -> loader options, got "
            f"{type(model_options).__name__}"
        )
    options: dict[str, dict[str, Any]] = {}
    for role, given in (model_options or {}).items():
        if not isinstance(given, Mapping):
            raise InputError(
                f"model_options[{safe_line(repr(role))}] must be a mapping of loader option -> "
                f"value, got {type(given).__name__}"
            )
        options[role] = dict(given)
    return names, options


def _with_components(metrics: Iterable[Metric]) -> list[Metric]:
    out: list[Metric] = []
    for metric in metrics:
        out.append(metric)
        out.extend(_with_components(metric.components))
    return out


def static_roles(metrics: Iterable[Metric]) -> set[str]:
    """The model roles ``metrics`` (and their components) declare, without a context."""
    return {role for m in _with_components(metrics) for role in m.roles}


def check_models_used(metrics: Sequence[Metric], ctx: ScoringContext, given: Iterable[str]) -> None:
    """``InputError`` (exit 2) for a model given for a role that no metric of the run uses:
    it would be silently ignored, and the run would score with other models than the user
    meant. A role counts as used when a metric (or a combination's component) declares it
    or scores with it under this configuration (``Metric.model_roles``)."""
    from faithgate.metrics.base import metric_class, metric_names

    used = static_roles(metrics)
    for metric in _with_components(metrics):
        # A role's model that cannot be resolved: scoring says so in its own words.
        with contextlib.suppress(FaithgateError):
            used.update(metric.model_roles(ctx))
    # spaCy splits sentences for metrics that do not declare it (the likelihood metrics).
    unused = [role for role in given if role not in used and role != "spacy"]
    if not unused:
        return
    role = unused[0]
    would = [n for n in metric_names() if role in metric_class(n).roles]
    hint = f"metrics that use it: {', '.join(would)}" if would else "no metric uses it"
    selected = ", ".join(m.name for m in metrics)
    raise InputError(
        f"a model is given for role {role!r}, but no selected metric ({selected}) uses that "
        f"role, so it would be ignored; {hint}: select one, or drop the model"
    )


# The longest source or summary scored, in characters (2 MB of ASCII; a 1,000-page book):
# past it a run is refused before anything is scored. Every metric's memory grows with its
# texts' lengths (docs/data-safety.md, section 4); a 5 MB summary made overlap allocate 12 GB.
MAX_TEXT_CHARS = 2_000_000


def refuse_oversized(examples: Iterable[Example]) -> None:
    """``InputError`` (exit 2) naming the first example whose source or summary is longer
    than ``MAX_TEXT_CHARS`` characters."""
    for ex in examples:
        for which, text in (("summary", ex.summary), ("source", ex.source)):
            if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
                raise InputError(
                    f"example {clipped(ex.id)}: its {which} is {len(text):,} characters, over "
                    f"the limit of {MAX_TEXT_CHARS:,} characters per text that faithgate "
                    "scores; shorten it or leave the example out"
                )


def blank_text(example: Example) -> str | None:
    """Why ``example`` cannot be scored by any metric (its source or summary is empty or only
    whitespace), or None."""
    if is_blank(example.source):
        return "empty source"
    if is_blank(example.summary):
        return "empty summary"
    return None


class Scorer:
    """Scores examples with a fixed set of metrics, keeping models loaded between calls.

    >>> scorer = Scorer(["bertscore", "ner"])              # doctest: +SKIP
    >>> scorer.score([Example("1", source, summary)])      # doctest: +SKIP
    [{'bertscore': Score(...), 'ner': Score(...)}]
    """

    def __init__(
        self,
        metrics: str | Metric | Iterable[str | Metric] = DEFAULT_METRICS,
        *,
        models: Mapping[str, str] | None = None,
        backend: str = "auto",
        allow_download: bool = False,
        metric_settings: Mapping[str, Mapping[str, Any]] | None = None,
        model_options: Mapping[str, Mapping[str, Any]] | None = None,
        pool: ModelPool | None = None,
        cache: ScoreCache | str | PathLike[str] | None = None,
        check_roles: bool = True,
    ) -> None:
        model_names, options = check_scorer_options(models, allow_download, model_options)
        self.metrics: list[Metric] = resolve_metrics(metrics, metric_settings)
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise InputError(f"a metric is selected twice: {', '.join(names)}")
        self.pool = pool or ModelPool(
            model_names,
            backend=backend,
            allow_download=allow_download,
            model_options=options,
        )
        self.context = ScoringContext(self.pool)
        if pool is None and check_roles:
            # Models given here (not a shared pool's): each must serve a selected metric.
            check_models_used(self.metrics, self.context, model_names)
        if isinstance(cache, str | PathLike):
            cache = ScoreCache(cache)
        if cache is not None and not isinstance(cache, ScoreCache):
            raise InputError(f"cache must be a path or a ScoreCache, got {type(cache).__name__}")
        self.cache = cache
        self.context.cache = cache
        # Seconds spent in each metric's prepare + score_batch (for bench's time per item).
        # Passes shared through an engine are charged to the metric that first reads them.
        self.seconds: dict[str, float] = dict.fromkeys(names, 0.0)
        # The same for a combination's components that no selected metric shares, by settings
        # hash: [seconds, items computed]. A combination's own seconds are its formula's only,
        # so its cost is its own plus its components' (``faithgate bench`` adds them up).
        self.component_seconds: dict[str, list[float]] = {}

    @property
    def metric_names(self) -> list[str]:
        return [m.name for m in self.metrics]

    def settings_hashes(self) -> dict[str, str]:
        return {m.name: m.settings_hash(self.context) for m in self.metrics}

    def score(self, examples: Sequence[Example]) -> list[dict[str, Score]]:
        """Scores of every metric for every example, aligned with ``examples``.

        A metric that fails on a batch is retried example by example, and an example it still
        cannot score gets a ``Score.failed`` carrying the reason (gates count it as a failure).
        Configuration problems (a missing model, a bad setting) are raised, not recorded.
        """
        examples = list(examples)
        for ex in examples:
            if not isinstance(ex, Example):
                raise InputError(
                    f"examples are faithgate.Example objects, got a {type(ex).__name__} (score "
                    "one source and summary with faithgate.score(source, summary))"
                )
        refuse_oversized(examples)  # before the cache: a cached score is no reason to take it
        if self.cache is None:
            return self.compute(examples)
        hashes = self.settings_hashes()
        # Cached scores first: only the (metric, example) cells that miss are computed.
        results, todo = lookup_cached(self.cache, hashes, self.metric_names, examples)
        computed = self.compute(examples, todo)
        store_computed(self.cache, hashes, examples, todo, computed, results)
        return results

    def compute(
        self, examples: Sequence[Example], todo: Mapping[str, Sequence[int]] | None = None
    ) -> list[dict[str, Score]]:
        """Compute scores without the cache: ``todo`` maps a metric name to the indices of
        ``examples`` it must score (default: every metric on every example); the result holds
        exactly those cells. This is what an executor's worker runs.

        A combination (``ensemble``) gets its components' scores from this run when a selected
        metric has the same settings hash, else from the score cache, and computes only the
        rest (then caches them): ``["ensemble", "harim_plus"]`` runs the LM once, and an
        ensemble after its components were scored costs nothing but the formula."""
        examples = list(examples)
        refuse_oversized(examples)
        results: list[dict[str, Score]] = [{} for _ in examples]
        if todo is None:
            todo = {m.name: range(len(examples)) for m in self.metrics}
        ctx = self.context
        # What to compute, keyed by settings hash: (metric, example indices, the selected
        # metric its time is charged to (None: a component's, kept by hash), the indices it was
        # selected for: the caller caches those; the others are a combination's, cached here).
        work: dict[str, tuple[Metric, set[int], str | None, frozenset[int]]] = {}
        for metric in self.metrics:
            if todo.get(metric.name) and not metric.components:
                own = frozenset(todo[metric.name])
                work[metric.settings_hash(ctx)] = (metric, set(own), metric.name, own)
        cached: dict[tuple[str, int], Score] = {}
        for combo in self.metrics:
            if not todo.get(combo.name) or not combo.components:
                continue
            for part in combo.components:
                h = part.settings_hash(ctx)
                entry = work.setdefault(h, (part, set(), None, frozenset()))
                for i in todo[combo.name]:
                    if i in entry[1] or (h, i) in cached:
                        continue
                    hit = None
                    if self.cache is not None:
                        hit = self.cache.get(h, examples[i].source, examples[i].summary)
                    if hit is not None:
                        cached[(h, i)] = hit
                    else:
                        entry[1].add(i)
        computed: dict[tuple[str, int], Score] = dict(cached)
        # A blank source or summary fails every metric here, before any metric sees it: a
        # likelihood metric scored a summary of spaces (pmi_mink above a faithful one).
        blank = {i: why for i, ex in enumerate(examples) if (why := blank_text(ex))}
        for h, (metric, idx_set, _, _) in work.items():
            for i in idx_set & blank.keys():
                computed[(h, i)] = Score.failed(metric.name, h, examples[i].id, blank[i])
            idx_set.difference_update(blank)
        work = {h: w for h, w in work.items() if w[1]}
        # Every metric announces its needs first, so engines shared between metrics (the
        # likelihood engine) plan one pass per distinct input for all of them.
        for h, (metric, idx_set, charged, _) in work.items():
            idx = sorted(idx_set)
            t0 = time.perf_counter()
            # An example whose preparation raises fails alone (as in ``score_batch``).
            for k, reason in self._prepare_metric(metric, [examples[i] for i in idx]).items():
                computed[(h, idx[k])] = Score.failed(metric.name, h, examples[idx[k]].id, reason)
                idx_set.discard(idx[k])
            self._charge(h, charged, time.perf_counter() - t0, 0)
        for h, (metric, idx_set, charged, own) in work.items():
            idx = sorted(idx_set)
            if not idx:
                continue
            batch = [examples[i] for i in idx]
            t0 = time.perf_counter()
            with metric_blas_threads():  # small products: one BLAS thread is faster
                scored = self._score_metric(metric, batch)
            self._charge(h, charged, time.perf_counter() - t0, len(idx))
            for i, score in zip(idx, scored, strict=True):
                computed[(h, i)] = score
            if self.cache is not None:
                self.cache.put_many(
                    (h, examples[i].source, examples[i].summary, computed[(h, i)])
                    for i in idx
                    if i not in own
                )
        for metric in self.metrics:
            idx = list(todo.get(metric.name, ()))
            if not idx:
                continue
            if metric.components:
                hashes = [part.settings_hash(ctx) for part in metric.components]
                t0 = time.perf_counter()
                scored = self._combine_metric(
                    metric,
                    [examples[i] for i in idx],
                    [[computed[(h, i)] for i in idx] for h in hashes],
                )
                self.seconds[metric.name] += time.perf_counter() - t0
            else:
                h = metric.settings_hash(ctx)
                scored = [computed[(h, i)] for i in idx]
            for i, score in zip(idx, scored, strict=True):
                score.example_id = examples[i].id
                results[i][metric.name] = score
        return results

    def _charge(self, settings_hash: str, name: str | None, seconds: float, items: int) -> None:
        if name is not None:
            self.seconds[name] += seconds
        else:
            entry = self.component_seconds.setdefault(settings_hash, [0.0, 0])
            entry[0] += seconds
            entry[1] += items

    def release(self) -> None:
        """Drop what the shared engines hold per input (likelihood passes, NLI and QA memos),
        keeping the models loaded: called at the end of a run (a gate, a bench, a plugin
        call), so a long-lived scorer's memory does not grow with every input it has seen."""
        self.context.release()

    def _prepare_metric(self, metric: Metric, examples: list[Example]) -> dict[int, str]:
        """``metric.prepare`` on ``examples`` (``_batch_or_alone``). Returns position -> why,
        for each example whose preparation fails alone (it then fails, as an exception in
        ``score_batch`` does; when all do, the gate's ``scorable`` rule fails)."""
        _, alone = _batch_or_alone(
            metric,
            "prepare",
            len(examples),
            lambda ks: metric.prepare([examples[k] for k in ks], self.context),
        )
        return {k: why for k, (_, why) in enumerate(alone or []) if why is not None}

    def _combine_metric(
        self,
        metric: Metric,
        examples: list[Example],
        component_scores: list[list[Score]],
    ) -> list[Score]:
        """``metric.combine`` with its checks (``_batch_or_alone``): an example it cannot
        combine alone gets a ``Score.failed`` naming the exception."""
        scored, alone = _batch_or_alone(
            metric,
            "combine",
            len(examples),
            lambda ks: metric.combine(
                [examples[k] for k in ks],
                [[part[k] for k in ks] for part in component_scores],
                self.context,
            ),
        )
        return self._checked_scores(metric, examples, scored, alone, "combined")

    def _score_metric(self, metric: Metric, examples: list[Example]) -> list[Score]:
        scores, alone = _batch_or_alone(
            metric,
            "score",
            len(examples),
            lambda ks: metric.score_batch([examples[k] for k in ks], self.context),
        )
        return self._checked_scores(metric, examples, scores, alone, "returned")

    def _checked_scores(
        self,
        metric: Metric,
        examples: list[Example],
        batch: Any,
        alone: list[tuple[Any, str | None]] | None,
        verb: str,
    ) -> list[Score]:
        """The scores of a batch (``batch``), or of its examples retried alone (``alone``:
        each one's own scores, or a ``Score.failed`` naming why it failed), one per example
        (else ``FaithgateError``), each ``_checked``."""
        if alone is None:
            scores = batch
        else:
            scores = []
            for ex, (got, why) in zip(examples, alone, strict=True):
                if why is None:
                    scores.extend(got)
                else:
                    scores.append(
                        Score.failed(metric.name, metric.settings_hash(self.context), ex.id, why)
                    )
        if len(scores) != len(examples):
            raise FaithgateError(
                f"metric {metric.name!r} {verb} {len(scores)} scores for {len(examples)} examples"
            )
        return [_checked(metric, score) for score in scores]


def _batch_or_alone(
    metric: Metric, what: str, n: int, run: Callable[[list[int]], Any]
) -> tuple[Any, list[tuple[Any, str | None]] | None]:
    """``run`` over all ``n`` examples (their positions) as one batch: ``(result, None)``.
    When that raises, ``run([k])`` for each example alone: ``(None, [(result, None) or (None,
    why), ...])``, so one example that breaks ``metric``'s ``what`` fails alone. A
    configuration problem or an interrupt still stops everything. BaseException: sys.exit()
    or pytest.skip() in a project's metric would end the gate with its code (0 passes a build)
    or skip it; an example it cannot score fails instead."""
    try:
        return run(list(range(n))), None
    except (FaithgateError, KeyboardInterrupt, Interrupted):
        raise
    except BaseException as batch_error:  # noqa: BLE001 - isolate the example that breaks it
        log.warning(
            "%s failed to %s a batch (%s); retrying one example at a time",
            metric.name,
            what,
            safe_line(batch_error),  # quotes input; the log's handler may be anyone's (pytest's)
        )
    alone: list[tuple[Any, str | None]] = []
    for k in range(n):
        try:
            alone.append((run([k]), None))
        except (FaithgateError, KeyboardInterrupt, Interrupted):
            raise
        except BaseException as one_exc:  # noqa: BLE001
            alone.append((None, _failure(one_exc)))
    return None, alone


def _failure(exc: BaseException) -> str:
    """Why an example failed, from the exception a metric raised on it (it may quote the
    example's text, and is printed and logged)."""
    return exception_line(exc)


def _checked(metric: Metric, score: Any) -> Score:
    """``score`` as a metric must give it: a ``Score`` whose value is a real number (NaN and
    inf then make it a failed score, ``Score.ok``). A value of another type is a failed score
    naming it, not a crash of a later sum or a report (a project's own metric may return one)."""
    if not isinstance(score, Score):
        raise FaithgateError(
            f"metric {metric.name!r} returned a {type(score).__name__}, not a faithgate Score"
        )
    value = score.value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return Score.failed(
            score.metric,
            score.settings_hash,
            score.example_id,
            f"metric returned a {type(value).__name__} value, not a number",
        )
    if not isinstance(value, float):  # a numpy or int value: reports and JSON want a float
        score = dataclasses.replace(score, value=float(value))
    return score


def score(
    source: str,
    summary: str,
    metrics: str | Iterable[str] = DEFAULT_METRICS,
    **scorer_options: Any,
) -> dict[str, Score]:
    """Score one summary against its source: ``{metric name: Score}``.

    Convenience wrapper; build a ``Scorer`` once to score many examples without reloading.
    """
    return Scorer(metrics, **scorer_options).score([Example("0", source, summary)])[0]


def lookup_cached(
    cache: ScoreCache,
    hashes: Mapping[str, str],
    metrics: Sequence[str],
    examples: Sequence[Example],
) -> tuple[list[dict[str, Score]], dict[str, list[int]]]:
    """Cached cells of (metric, example), and per metric the example indices that missed.

    Shared by ``Scorer.score`` and the driver-side cache of ``faithgate.scoring.execution``, so a score
    cached by one executor is a hit for every other.
    """
    results: list[dict[str, Score]] = [{} for _ in examples]
    todo: dict[str, list[int]] = {}
    for name in metrics:
        missing = []
        for i, ex in enumerate(examples):
            hit = cache.get(hashes[name], ex.source, ex.summary)
            if hit is None:
                missing.append(i)
            else:
                hit.example_id = ex.id
                results[i][name] = hit
        todo[name] = missing
    return results, todo


def store_computed(
    cache: ScoreCache,
    hashes: Mapping[str, str],
    examples: Sequence[Example],
    todo: Mapping[str, Sequence[int]],
    computed: Sequence[Mapping[str, Score]],
    results: list[dict[str, Score]],
) -> None:
    """Merge computed cells into ``results`` and write them to the cache (failed scores are
    never cached: ``ScoreCache.put`` skips them, so they are retried next run)."""
    for name, idx in todo.items():
        for i in idx:
            score = computed[i][name]
            results[i][name] = score
            cache.put(hashes[name], examples[i].source, examples[i].summary, score)
