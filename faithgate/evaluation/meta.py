"""Meta-evaluation: how well a metric's scores agree with human faithfulness judgements.

Statistics (all oriented so that a metric is better when they are higher):

- **consistency** (BUMP, Ma et al. 2023): share of minimal pairs whose faithful member scores
  *strictly* higher than the unfaithful one; a tie or an unscored member counts as a failure.
- **ROC AUC** (scikit-learn) of the scores against binary labels, on items deduplicated by
  (source, summary): BUMP repeats each reference summary once per edit, and counting it several
  times would weight some references more than others. A (source, summary) that occurs with
  both labels has no label to keep (keeping the first row's would make the figure depend on the
  file's order): it is left out of the label-based statistics and counted (``n_conflicting``);
  so is a minimal pair whose two members are that one (source, summary) (consistency leaves it
  out, ``n_pairs_conflicting``: every metric would tie on it).
- **Pearson / Spearman / Kendall** correlations with graded human scores (scipy), as in
  SummEval (Fabbri et al. 2021) and QAGS (Wang et al. 2020).
- **balanced accuracy** held out, the method of SummaC (Laban et al. 2022): the distinct
  labelled items are split 50/50 by item, each class alike, with a seeded shuffle
  (``stratified_split``; SummaC's benchmark had fixed validation/test files or cuts, this is
  one seeded split of the given file); the threshold maximising balanced accuracy is chosen
  on one half (validation) and ``BA = (TPR + TNR) / 2`` is measured on the other (test),
  where "positive" means faithful and an item is predicted faithful when
  ``score >= threshold``. So BA rests on the test half only, about half of the distinct items.
- **bootstrap 95% confidence intervals** (percentile method, resampling items or pairs) and a
  **paired permutation test** between two metrics on the same items. The balanced accuracy
  interval (``split_balanced_accuracy_ci``) resamples both halves: each resample re-chooses
  the threshold on a resampled validation half and measures BA on a resampled test half, so
  it holds the threshold choice's uncertainty too. It is conditional on the one split: from
  split to split, BA's standard deviation was 0.015-0.025 (``overlap`` on the shared sets).
  An interval needs at least ``MIN_CI_N`` pairs (consistency) or items of each class (ROC
  AUC; balanced accuracy: in each half); below that it is null and the statistic is named in
  ``ci_n_too_small``; so is a zero-width interval from fewer than ``MIN_ZERO_WIDTH_CI_N`` pairs
  (consistency) or items of the smaller class (ROC AUC; balanced accuracy: in either half):
  every resample agreeing on so few is not certainty.

``evaluate`` computes all of them for one labelled set, overall and broken down by error type
and by ``origin`` (cnndm / xsum).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faithgate.errors import InputError
from faithgate.numbers import is_finite_number

NAN = float("nan")

# A bootstrap interval needs this many pairs (consistency) or items of each class (ROC AUC,
# balanced accuracy): below it the resamples can only repeat the one or two rows there are,
# and a degenerate ``[1.00, 1.00]`` would read as certainty. Such intervals are reported as
# null and listed under ``ci_n_too_small``.
MIN_CI_N = 3

# A zero-width interval (e.g. ``[1.00, 1.00]`` from 3 pairs, or with 3 vs 7 items) is reported
# as too small, like the intervals below ``MIN_CI_N``, when there are fewer pairs
# (consistency) or items in the smaller class (ROC AUC, balanced accuracy) than this.
MIN_ZERO_WIDTH_CI_N = 10


# ---------------------------------------------------------------- single statistics


def pair_wins(faithful: Sequence[float], unfaithful: Sequence[float]) -> np.ndarray:
    """1.0 where the faithful member scores strictly higher, else 0.0 (ties and NaN fail)."""
    a = np.asarray(faithful, dtype=float)
    b = np.asarray(unfaithful, dtype=float)
    if a.shape != b.shape:
        raise ValueError("faithful and unfaithful scores must be aligned pairs")
    with np.errstate(invalid="ignore"):
        return (a > b).astype(float)  # comparisons with NaN are False: a failure


def consistency(faithful: Sequence[float], unfaithful: Sequence[float]) -> float:
    """Share of pairs ranked correctly (strictly); NaN when there are no pairs."""
    wins = pair_wins(faithful, unfaithful)
    return float(wins.mean()) if wins.size else NAN


def _clean(scores: Sequence[float], labels: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    keep = ~np.isnan(s) & ~np.isnan(y)
    return s[keep], y[keep].astype(int)


def dedupe(keys: Sequence[Any]) -> np.ndarray:
    """Indices of the first occurrence of each key (order preserved)."""
    seen: set[Any] = set()
    out = []
    for i, k in enumerate(keys):
        if k not in seen:
            seen.add(k)
            out.append(i)
    return np.asarray(out, dtype=int)


def _unlabelled(label: Any) -> bool:
    return label is None or (isinstance(label, float | np.floating) and math.isnan(label))


def conflicting_keys(keys: Sequence[Any], labels: Sequence[Any]) -> set[Any]:
    """Keys that occur with two different labels (unlabelled rows, None or NaN, ignored)."""
    seen: dict[Any, Any] = {}
    out: set[Any] = set()
    for k, label in zip(keys, labels, strict=True):
        if _unlabelled(label):
            continue
        if seen.setdefault(k, label) != label:
            out.add(k)
    return out


def dedupe_labelled(
    keys: Sequence[Any], labels: Sequence[Any], conflicting: set[Any] | None = None
) -> tuple[np.ndarray, int]:
    """Indices of the first occurrence of each key, leaving out keys with conflicting labels
    (``conflicting``, by default ``conflicting_keys(keys, labels)``), and how many distinct
    keys were left out. Which label a conflicting key would keep depends on the rows' order,
    so no label-based statistic uses it."""
    keys = list(keys)
    bad = conflicting_keys(keys, labels) if conflicting is None else conflicting
    idx = dedupe(keys)
    kept = [int(i) for i in idx if keys[i] not in bad]
    return np.asarray(kept, dtype=int), len(idx) - len(kept)


def roc_auc(
    scores: Sequence[float], labels: Sequence[int], keys: Sequence[Any] | None = None
) -> float:
    """ROC AUC of ``scores`` for label 1 (faithful), via ``sklearn.metrics.roc_auc_score``.

    With ``keys`` (e.g. ``(source, summary)``), duplicated items are counted once and keys
    labelled both ways are left out (``dedupe_labelled``). Unscored (NaN) items are left out;
    NaN when one class is missing.
    """
    from sklearn.metrics import roc_auc_score

    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=float)
    if keys is not None:
        keys = list(keys)
        pos = np.flatnonzero(~np.isnan(y))
        idx, _ = dedupe_labelled([keys[i] for i in pos], y[pos].tolist())
        s, y = s[pos[idx]], y[pos[idx]]
    s, y = _clean(s, y)
    if len(set(y.tolist())) < 2:
        return NAN
    return float(roc_auc_score(y, s))


def _fast_auc(s: np.ndarray, y: np.ndarray) -> float:
    """Mann-Whitney AUC (ties count one half), equal to roc_auc_score; used in resampling."""
    from scipy.stats import rankdata

    n1 = int(y.sum())
    n0 = len(y) - n1
    if n1 == 0 or n0 == 0:
        return NAN
    ranks = rankdata(s)
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def correlations(scores: Sequence[float], human: Sequence[float]) -> dict[str, float]:
    """Pearson, Spearman and Kendall (tau-b) correlations, NaN pairs dropped (<3 left: NaN)."""
    from scipy import stats

    s = np.asarray(scores, dtype=float)
    h = np.asarray(human, dtype=float)
    keep = ~np.isnan(s) & ~np.isnan(h)
    s, h = s[keep], h[keep]
    if len(s) < 3 or np.all(s == s[0]) or np.all(h == h[0]):
        return {"pearson": NAN, "spearman": NAN, "kendall": NAN}
    return {
        "pearson": float(stats.pearsonr(s, h)[0]),
        "spearman": float(stats.spearmanr(s, h)[0]),
        "kendall": float(stats.kendalltau(s, h)[0]),
    }


def balanced_accuracy(scores: Sequence[float], labels: Sequence[int], threshold: float) -> float:
    """(TPR + TNR) / 2 when items with ``score >= threshold`` are predicted faithful.

    An unscored (NaN) item is predicted unfaithful, as a gate would fail it.
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    with np.errstate(invalid="ignore"):
        pred = s >= threshold
    pos, neg = y == 1, y == 0
    if not pos.any() or not neg.any():
        return NAN
    return float((pred[pos].mean() + (~pred[neg]).mean()) / 2)


def candidate_thresholds(scores: Sequence[float]) -> np.ndarray:
    """Midpoints between consecutive distinct scores, plus one below the lowest and one above
    the highest, so every distinct split of the sorted scores is tried exactly once. The end
    candidates lie four float steps (``np.nextafter``) outside the scores at least: at 1e12 a
    pad of 1e-6 is below one step, and the "above the highest" candidate was that score."""
    u = np.unique(np.asarray(scores, dtype=float)[~np.isnan(np.asarray(scores, dtype=float))])
    if u.size == 0:
        return np.asarray([0.0])
    mids = (u[:-1] + u[1:]) / 2
    pad = max(1e-6, float(u[-1] - u[0]) * 1e-3)
    low, high = u[0], u[-1]
    with np.errstate(over="ignore"):  # past the largest float: inf, still above every score
        for _ in range(4):  # four float steps outside the scores, where the pad is below one
            low, high = np.nextafter(low, -np.inf), np.nextafter(high, np.inf)
    return np.concatenate([[min(low, u[0] - pad)], mids, [max(high, u[-1] + pad)]])


def threshold_curve(scores: Sequence[float], labels: Sequence[int]) -> dict[str, np.ndarray]:
    """For every candidate threshold: TPR (faithful kept), TNR (unfaithful caught), balanced
    accuracy, precision and recall of the "unfaithful" prediction (``score < threshold``)."""
    s, y = _clean(scores, labels)
    t = candidate_thresholds(s)
    order = np.argsort(s)
    s_sorted, y_sorted = s[order], y[order]
    # number of items strictly below each threshold, and of unfaithful ones among them
    below = np.searchsorted(s_sorted, t, side="left")
    neg_cum = np.concatenate([[0], np.cumsum(y_sorted == 0)])
    n_neg_below = neg_cum[below]
    n_pos_below = below - n_neg_below
    n1, n0 = int((y == 1).sum()), int((y == 0).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        tpr = (n1 - n_pos_below) / n1 if n1 else np.full(t.shape, NAN)
        tnr = n_neg_below / n0 if n0 else np.full(t.shape, NAN)
        precision = np.where(below > 0, n_neg_below / np.maximum(below, 1), NAN)
    return {
        "threshold": t,
        "tpr": np.asarray(tpr, dtype=float),
        "tnr": np.asarray(tnr, dtype=float),
        "balanced_accuracy": (np.asarray(tpr) + np.asarray(tnr)) / 2,
        "precision_unfaithful": precision,
        "recall_unfaithful": np.asarray(tnr, dtype=float),
        "flagged": below,
    }


def best_threshold(scores: Sequence[float], labels: Sequence[int]) -> tuple[float, float]:
    """The threshold maximising balanced accuracy and that accuracy.

    Among equally good thresholds the middle one of the best run is taken, which keeps the
    choice away from the scores it separates. NaN scores are ignored for tuning.
    """
    curve = threshold_curve(scores, labels)
    ba = curve["balanced_accuracy"]
    if np.all(np.isnan(ba)):
        return NAN, NAN
    best = np.nanmax(ba)
    idx = np.flatnonzero(np.isclose(ba, best, rtol=0, atol=1e-12))
    i = int(idx[len(idx) // 2])
    return float(curve["threshold"][i]), float(best)


def stratified_split(
    labels: Sequence[int], val_fraction: float = 0.5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Indices (validation, test), each class split in the same proportion, reproducibly."""
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    val, test = [], []
    for cls in np.unique(y):
        idx = np.flatnonzero(y == cls)
        rng.shuffle(idx)
        k = int(round(len(idx) * val_fraction))
        val.extend(idx[:k].tolist())
        test.extend(idx[k:].tolist())
    return np.asarray(sorted(val), dtype=int), np.asarray(sorted(test), dtype=int)


def summac_balanced_accuracy(
    scores: Sequence[float], labels: Sequence[int], val_fraction: float = 0.5, seed: int = 0
) -> dict[str, float]:
    """Balanced accuracy on a held-out split at the threshold tuned on a validation split:
    the method of SummaC (Laban et al. 2022) on one seeded split of the given items by item
    (``stratified_split``), not SummaC's fixed validation/test cuts."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    val, test = stratified_split(y, val_fraction, seed)
    threshold, val_ba = best_threshold(s[val], y[val])
    return {
        "threshold": threshold,
        "validation_balanced_accuracy": val_ba,
        "balanced_accuracy": balanced_accuracy(s[test], y[test], threshold)
        if not math.isnan(threshold)
        else NAN,
        "n_validation": int(len(val)),
        "n_test": int(len(test)),
    }


# ---------------------------------------------------------------- resampling


def bootstrap_ci(
    statistic: Callable[..., float],
    *arrays: Sequence[Any],
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(*arrays)``, resampling aligned rows.

    Resamples on which the statistic is undefined (NaN, e.g. one class missing) are skipped.
    """
    arrs = [np.asarray(a) for a in arrays]
    n = len(arrs[0])
    if n == 0 or any(len(a) != n for a in arrs):
        return NAN, NAN
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        idx = rng.integers(0, n, n)
        v = statistic(*(a[idx] for a in arrs))
        if not math.isnan(v):
            values.append(v)
    return _percentile_interval(values, confidence)


def _percentile_interval(values: Sequence[float], confidence: float) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap ``values`` (NaN, NaN when none)."""
    if not len(values):
        return NAN, NAN
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(values, [alpha, 1 - alpha])
    return float(lo), float(hi)


def split_balanced_accuracy_ci(
    scores: Sequence[float],
    labels: Sequence[int],
    val: Sequence[int],
    test: Sequence[int],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``summac_balanced_accuracy``'s held-out balanced
    accuracy on the split (``val``, ``test``: indices into ``scores`` and ``labels``).

    Each resample draws the validation half and the test half with replacement (a pair of
    draws from one generator seeded ``seed``, as ``bootstrap_ci``), re-chooses the threshold on
    the resampled validation half (``best_threshold``, as ``calibrate`` does in its resamples)
    and measures balanced accuracy on the resampled test half at it. The interval so holds
    the threshold choice's uncertainty as well as the test items'; it is conditional on the
    split. The draws depend only on the halves' sizes, so metrics scored on the same items
    get the same resamples (paired). A resample with a class missing from either half is
    skipped; NaN scores are ignored for the threshold and predicted unfaithful on test.
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    v_idx = np.asarray(val, dtype=int)
    t_idx = np.asarray(test, dtype=int)
    if len(v_idx) == 0 or len(t_idx) == 0:
        return NAN, NAN
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        iv = v_idx[rng.integers(0, len(v_idx), len(v_idx))]
        it = t_idx[rng.integers(0, len(t_idx), len(t_idx))]
        threshold = best_threshold(s[iv], y[iv])[0]
        if math.isnan(threshold):  # one class only in the resampled validation half
            continue
        v = balanced_accuracy(s[it], y[it], threshold)
        if not math.isnan(v):
            values.append(v)
    return _percentile_interval(values, confidence)


def paired_permutation_test(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[np.ndarray], float] = np.mean,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, float]:
    """Two-sided paired permutation test of ``statistic(a) - statistic(b)``.

    ``a`` and ``b`` are per-item values of two metrics on the same items (e.g. pair wins for
    consistency, or ``rank_normalize``d scores for AUC so that the two scales are comparable);
    each resample swaps the two values of a random subset of items. p = (k + 1) / (n + 1).
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError("paired values must be aligned")
    observed = float(statistic(x) - statistic(y))
    rng = np.random.default_rng(seed)
    extreme = 0
    for _ in range(n_resamples):
        swap = rng.random(x.shape[0]) < 0.5
        xa = np.where(swap, y, x)
        ya = np.where(swap, x, y)
        if abs(float(statistic(xa) - statistic(ya))) >= abs(observed) - 1e-12:
            extreme += 1
    return {"difference": observed, "p_value": (extreme + 1) / (n_resamples + 1)}


def rank_normalize(scores: Sequence[float]) -> np.ndarray:
    """Scores mapped to average ranks in [0, 1] (NaN stays NaN), to compare metrics' scales."""
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=float)
    out = np.full(s.shape, NAN)
    keep = ~np.isnan(s)
    if keep.sum() > 1:
        out[keep] = (rankdata(s[keep]) - 1) / (keep.sum() - 1)
    elif keep.sum() == 1:
        out[keep] = 0.5
    return out


# ---------------------------------------------------------------- one labelled set


@dataclass
class Item:
    """What meta-evaluation needs to know about one benchmark row."""

    key: Any  # identity for deduplication, usually (source, summary)
    label: int | None
    human: float | None = None
    pair_id: str | None = None
    error_type: str | None = None
    origin: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _field(meta: dict[str, Any], key: str, where: Callable[[], str]) -> str | None:
    """A grouping field (``pair_id``, ``error_type``, ``origin``): text or null; ``pair_id``
    may also be an integer (read as its string, as ``limit_examples`` groups it). Anything
    else would be an unhashable group key or an unsortable mix, so it is refused."""
    value = meta.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if key == "pair_id" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    allowed = "text, an integer or null" if key == "pair_id" else "text or null"
    raise InputError(f"{where()}: field {key!r} must be {allowed}, got {type(value).__name__}")


def items_from_examples(
    examples: Sequence[Any], where: Callable[[int], str] | None = None
) -> list[Item]:
    """``Item``s from ``faithgate.types.Example``s read from the benchmark format
    (``score``, ``pair_id``, ``error_type``, ``origin`` are looked up in ``meta``).

    A field of the wrong type is an ``InputError`` naming ``where(i)`` (e.g. ``file:line``
    of the ``i``-th example; by default its id): a human ``score`` must be a finite number
    (not a bool, not a string), never silently ignored or read as 1.0."""

    def locate(i: int) -> Callable[[], str]:
        return lambda: where(i) if where is not None else f"example {examples[i].id!r}"

    out = []
    for i, ex in enumerate(examples):
        m = ex.meta or {}
        human = m.get("score")
        if human is not None and not is_finite_number(human):
            raise InputError(
                f"{locate(i)()}: field 'score' (the human judgement) must be a finite number "
                f"or null, got {human!r}"[:300]
            )
        out.append(
            Item(
                key=(ex.source, ex.summary),
                label=ex.label,
                human=None if human is None else float(human),
                pair_id=_field(m, "pair_id", locate(i)),
                error_type=_field(m, "error_type", locate(i)),
                origin=_field(m, "origin", locate(i)),
            )
        )
    return out


def _all_pairs(items: Sequence[Item]) -> list[tuple[int, int]]:
    """(faithful index, unfaithful index) for every combination inside each pair group."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        if it.pair_id is not None:
            groups[it.pair_id].append(i)
    out = []
    for idx in groups.values():
        pos = [i for i in idx if items[i].label == 1]
        neg = [i for i in idx if items[i].label == 0]
        out.extend((p, n) for p in pos for n in neg)
    return out


def pairs(items: Sequence[Item]) -> list[tuple[int, int]]:
    """(faithful index, unfaithful index) for every combination inside each pair group, less
    the conflicting pairs (``conflicting_pairs``)."""
    return [(p, n) for p, n in _all_pairs(items) if items[p].key != items[n].key]


def conflicting_pairs(items: Sequence[Item]) -> int:
    """Pairs whose faithful and unfaithful members are the same (source, summary): one text
    labelled both ways (falke2019 has three). Every metric ties on such a pair, so counting it
    as a failure would cap every metric's consistency; it is left out, as ROC AUC leaves the key
    out, and counted (``n_pairs_conflicting``)."""
    return sum(items[p].key == items[n].key for p, n in _all_pairs(items))


def _fmt_ci(ci: tuple[float, float]) -> list[float | None]:
    return [None if math.isnan(v) else round(v, 4) for v in ci]


def evaluate_group(
    items: Sequence[Item],
    scores: Sequence[float],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    conflicting: set[Any] | None = None,
) -> dict[str, Any]:
    """All statistics for one group of items (see the module docstring).

    Counts: ``n`` rows (``n_failed`` of them unscored); ``n_distinct`` distinct (source,
    summary) items, ``n_distinct_scored`` / ``n_distinct_failed`` of them scored / not;
    ``n_unique`` distinct labelled items the label-based statistics use, after leaving out
    ``n_conflicting`` items labelled both ways (``conflicting``: keys to treat so, by default
    those of ``items``); ``n_roc_auc`` of them scored (the n behind ROC AUC); ``n_graded``
    items with a human score and a metric score (the n behind the correlations); ``n_pairs``
    minimal pairs behind consistency, after leaving out ``n_pairs_conflicting`` pairs whose
    two members are one (source, summary)."""
    s = np.asarray(scores, dtype=float)
    keys = [it.key for it in items]
    distinct = dedupe(keys)
    out: dict[str, Any] = {
        "n": len(items),
        "n_failed": int(np.isnan(s).sum()),
        "n_distinct": int(len(distinct)),
        "n_distinct_scored": int((~np.isnan(s[distinct])).sum()),
        "n_distinct_failed": int(np.isnan(s[distinct]).sum()),
    }
    too_small: list[str] = []  # statistics whose interval is left out (see MIN_CI_N)

    def ci(
        name: str,
        enough: bool,
        compute: Callable[[], tuple[float, float]],
        small_n: int,
    ) -> None:
        """``small_n``: the pairs (consistency) or items of the smaller class behind it."""
        interval = compute() if enough else (NAN, NAN)
        if (
            enough
            and small_n < MIN_ZERO_WIDTH_CI_N
            and interval[0] == interval[1]  # zero width from few pairs or items: not certainty
        ):
            enough = False
        if enough:
            out[f"{name}_ci95"] = _fmt_ci(interval)
        else:
            out[f"{name}_ci95"] = [None, None]
            too_small.append(name)

    pr = pairs(items)
    n_pairs_conflicting = conflicting_pairs(items)
    if pr or n_pairs_conflicting:
        out["n_pairs"] = len(pr)
        out["n_pairs_conflicting"] = n_pairs_conflicting
    if pr:
        wins = pair_wins(s[[p for p, _ in pr]], s[[n for _, n in pr]])
        out["consistency"] = float(wins.mean())
        ci(
            "consistency",
            len(pr) >= MIN_CI_N,
            lambda: bootstrap_ci(
                lambda w: float(w.mean()), wins, n_resamples=n_resamples, seed=seed
            ),
            len(pr),
        )
    labelled = [i for i, it in enumerate(items) if it.label is not None]
    if labelled:
        kept, n_conflicting = dedupe_labelled(
            [keys[i] for i in labelled], [items[i].label for i in labelled], conflicting
        )
        uniq = [labelled[j] for j in kept]
        y = np.asarray([items[i].label for i in uniq], dtype=int)
        su = s[uniq]
        out["n_unique"] = len(uniq)
        out["n_conflicting"] = n_conflicting
        out["n_roc_auc"] = int((~np.isnan(su)).sum())
        out["roc_auc"] = roc_auc(su, y)
        if not math.isnan(out["roc_auc"]):
            keep = ~np.isnan(su)
            ci(
                "roc_auc",
                _min_class(y[keep]) >= MIN_CI_N,
                lambda: bootstrap_ci(
                    _fast_auc, su[keep], y[keep], n_resamples=n_resamples, seed=seed
                ),
                _min_class(y[keep]),
            )
            ba = summac_balanced_accuracy(su, y, seed=seed)
            out["balanced_accuracy"] = ba["balanced_accuracy"]
            out["threshold"] = ba["threshold"]
            val, test = stratified_split(y, 0.5, seed)
            if not math.isnan(ba["threshold"]):
                # The threshold is re-chosen in every resample: both halves count.
                halves_min = min(_min_class(y[val]), _min_class(y[test]))
                ci(
                    "balanced_accuracy",
                    halves_min >= MIN_CI_N,
                    lambda: split_balanced_accuracy_ci(
                        su, y, val, test, n_resamples=n_resamples, seed=seed
                    ),
                    halves_min,
                )
    graded = [i for i, it in enumerate(items) if it.human is not None]
    if len(graded) >= 3:
        out.update(correlations(s[graded], [items[i].human for i in graded]))
        out["n_graded"] = int((~np.isnan(s[graded])).sum())  # NaN pairs are dropped
    if too_small:
        out["ci_n_too_small"] = too_small
    return out


def _min_class(labels: np.ndarray) -> int:
    """Items in the smaller of the two classes (0 when one is missing)."""
    return int(min((labels == 1).sum(), (labels == 0).sum()))


def _error_type_groups(items: Sequence[Item]) -> dict[str, list[int]]:
    """Indices per error type: the items of that type plus their faithful counterparts (their
    pair partners when the data is paired, else every faithful item)."""
    by_pair: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        if it.pair_id is not None:
            by_pair[it.pair_id].append(i)
    faithful = [i for i, it in enumerate(items) if it.label == 1]
    groups: dict[str, set[int]] = defaultdict(set)
    for i, it in enumerate(items):
        if not it.error_type:
            continue
        groups[it.error_type].add(i)
        if it.pair_id is not None:
            groups[it.error_type].update(j for j in by_pair[it.pair_id] if items[j].label == 1)
        else:
            groups[it.error_type].update(faithful)
    return {k: sorted(v) for k, v in sorted(groups.items())}


def evaluate(
    items: Sequence[Item],
    scores: Sequence[float],
    *,
    n_resamples: int = 1000,
    seed: int = 0,
    breakdown: bool = True,
) -> dict[str, Any]:
    """Statistics overall, by error type and by origin: ``{"overall": {...},
    "by_error_type": {type: {...}}, "by_origin": {origin: {...}}}``."""
    s = np.asarray(scores, dtype=float)
    if len(s) != len(items):
        raise ValueError("one score per item is required")
    # Labelled both ways anywhere in the set: left out of every group, not only where both
    # rows happen to fall into the same group.
    conflicting = conflicting_keys([it.key for it in items], [it.label for it in items])
    kw: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed, "conflicting": conflicting}
    result: dict[str, Any] = {"overall": evaluate_group(items, s, **kw)}
    if breakdown:
        result["by_error_type"] = {
            t: evaluate_group([items[i] for i in idx], s[idx], **kw)
            for t, idx in _error_type_groups(items).items()
        }
        origins: dict[str, list[int]] = defaultdict(list)
        for i, it in enumerate(items):
            if it.origin:
                origins[it.origin].append(i)
        result["by_origin"] = (
            {
                o: evaluate_group([items[i] for i in idx], s[idx], **kw)
                for o, idx in sorted(origins.items())
            }
            if len(origins) > 1
            else {}
        )
    return result
