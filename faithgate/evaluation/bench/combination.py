"""``--combine``: a learned linear combination of metrics (as in the faithfulness study's
Table 4), a logistic regression over standardised scores, its regularisation chosen by
cross-validation. The ``combined`` metric scores with its weights file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from faithgate.errors import InputError
from faithgate.evaluation.meta import dedupe_labelled, roc_auc
from faithgate.metrics.combined import COMBINATION_FORMAT


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
