"""``run_bench``: score every file with every metric, fit ``--combine``, and meta-evaluate."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.errors import InputError
from faithgate.evaluation.bench.combination import apply_combination, fit_combination
from faithgate.evaluation.bench.comparisons import compare_metrics
from faithgate.evaluation.bench.files import (
    benchmark_files,
    limit_examples,
    record_locator,
    refuse_same_names,
)
from faithgate.evaluation.bench.plots import write_plots
from faithgate.evaluation.bench.scoring import Bench, MetricRun
from faithgate.evaluation.meta import (
    MIN_CI_N,
    MIN_ZERO_WIDTH_CI_N,
    Item,
    dedupe_labelled,
    evaluate,
    items_from_examples,
)
from faithgate.io import load_examples
from faithgate.safety.atomic import atomic_write_text
from faithgate.safety.escape import safe_line
from faithgate.scoring.execution import ExecutionSettings
from faithgate.types import Example

logger = logging.getLogger(__name__)


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
        all_items = items_from_examples(everything, record_locator(path))
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
