"""Paired permutation tests of the best metric against each other one on the same items."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from faithgate.evaluation.meta import Item, dedupe_labelled


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
