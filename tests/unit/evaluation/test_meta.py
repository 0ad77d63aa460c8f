"""Meta-evaluation statistics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from faithgate.evaluation import meta
from faithgate.evaluation.meta import Item


def test_consistency_ties_and_nan_fail() -> None:
    # pairs: win, tie, loss, NaN faithful, NaN unfaithful -> 1 of 5
    faithful = [0.9, 0.5, 0.2, float("nan"), 0.8]
    unfaithful = [0.1, 0.5, 0.3, 0.1, float("nan")]
    assert meta.pair_wins(faithful, unfaithful).tolist() == [1, 0, 0, 0, 0]
    assert meta.consistency(faithful, unfaithful) == pytest.approx(0.2)
    assert math.isnan(meta.consistency([], []))


def test_roc_auc_by_hand_and_deduplicated() -> None:
    # positives 0.8, 0.6 ; negatives 0.7, 0.2 -> pairs (p>n): 0.8>0.7, 0.8>0.2, 0.6>0.2,
    # 0.6<0.7 -> 3/4
    scores = [0.8, 0.6, 0.7, 0.2]
    labels = [1, 1, 0, 0]
    assert meta.roc_auc(scores, labels) == pytest.approx(0.75)
    # a tie counts one half: positives 0.5 ; negatives 0.5, 0.1 -> (0.5 + 1) / 2
    assert meta.roc_auc([0.5, 0.5, 0.1], [1, 0, 0]) == pytest.approx(0.75)
    # the first positive repeated 3 times: without dedup the AUC changes, with keys it does not
    dup_scores = scores + [0.8, 0.8]
    dup_labels = labels + [1, 1]
    keys = ["a", "b", "c", "d", "a", "a"]
    assert meta.roc_auc(dup_scores, dup_labels) != pytest.approx(0.75)
    assert meta.roc_auc(dup_scores, dup_labels, keys=keys) == pytest.approx(0.75)
    # one class only -> undefined
    assert math.isnan(meta.roc_auc([0.1, 0.2], [1, 1]))


def test_fast_auc_equals_sklearn() -> None:
    from sklearn.metrics import roc_auc_score  # here: a second of imports at collection

    rng = np.random.default_rng(3)
    s = np.round(rng.random(200), 2)  # many ties
    y = (rng.random(200) < 0.4).astype(int)
    assert meta._fast_auc(s, y) == pytest.approx(roc_auc_score(y, s))


def test_correlations() -> None:
    s = [1.0, 2.0, 3.0, 4.0]
    h = [1.0, 3.0, 2.0, 4.0]
    c = meta.correlations(s, h)
    assert c["pearson"] == pytest.approx(0.8)
    assert c["spearman"] == pytest.approx(0.8)
    # Kendall: 6 pairs, 5 concordant, 1 discordant -> (5 - 1) / 6
    assert c["kendall"] == pytest.approx(4 / 6)
    assert all(math.isnan(v) for v in meta.correlations([1, 2], [1, 2]).values())


def test_best_threshold_and_balanced_accuracy() -> None:
    scores = [0.1, 0.2, 0.3, 0.6, 0.7, 0.9]
    labels = [0, 0, 1, 0, 1, 1]
    # thresholds between sorted scores: best split at 0.25 -> TPR 3/3, TNR 2/3 -> BA 5/6;
    # also 0.65 -> TPR 2/3, TNR 3/3 -> 5/6; the middle of the tied best run is taken
    thr, ba = meta.best_threshold(scores, labels)
    assert ba == pytest.approx(5 / 6)
    assert thr in (pytest.approx(0.25), pytest.approx(0.65))
    assert meta.balanced_accuracy(scores, labels, 0.25) == pytest.approx(5 / 6)
    assert meta.balanced_accuracy(scores, labels, 0.45) == pytest.approx((2 / 3 + 2 / 3) / 2)
    # NaN is predicted unfaithful
    assert meta.balanced_accuracy([float("nan"), 0.1], [1, 0], 0.5) == pytest.approx(0.5)


def test_threshold_curve_counts() -> None:
    curve = meta.threshold_curve([0.1, 0.2, 0.3], [0, 1, 0])
    assert curve["threshold"].tolist() == pytest.approx([0.1 - 2e-4, 0.15, 0.25, 0.3 + 2e-4])
    assert curve["flagged"].tolist() == [0, 1, 2, 3]
    assert curve["precision_unfaithful"][1:].tolist() == pytest.approx([1.0, 0.5, 2 / 3])


def test_summac_split_is_stratified_and_reproducible() -> None:
    labels = [1] * 10 + [0] * 6
    val, test = meta.stratified_split(labels, 0.5, seed=1)
    assert sorted(val.tolist() + test.tolist()) == list(range(16))
    assert sum(labels[i] for i in val) == 5 and len(val) == 8
    val2, _ = meta.stratified_split(labels, 0.5, seed=1)
    assert val.tolist() == val2.tolist()
    # separable scores: tuned threshold transfers perfectly
    scores = [0.9] * 10 + [0.1] * 6
    res = meta.summac_balanced_accuracy(scores, labels, seed=1)
    assert res["balanced_accuracy"] == pytest.approx(1.0)
    assert 0.1 < res["threshold"] < 0.9


def _split_scores(n_per_class: int, seed: int = 0) -> tuple[list[int], np.ndarray]:
    """Labels and scores laid out on ``stratified_split``'s halves: the validation half is
    separated widely (0.40 | 0.60, steps of 0.05), so its threshold is 0.5, and the test half
    narrowly around it (0.499 | 0.501, steps of 0.001): separated at 0.5, not at a threshold
    chosen on a resampled validation half that lacks its lowest positive or highest negative."""
    labels = [1] * (2 * n_per_class) + [0] * (2 * n_per_class)
    val, test = meta.stratified_split(labels, 0.5, seed)
    y = np.asarray(labels)
    scores = np.zeros(len(labels))
    for half, gap, step in ((val, 0.1, 0.05), (test, 0.001, 0.001)):
        pos, neg = half[y[half] == 1], half[y[half] == 0]
        scores[pos] = 0.5 + gap + step * np.arange(len(pos))
        scores[neg] = 0.5 - gap - step * np.arange(len(neg))
    return labels, scores


def test_balanced_accuracy_ci_re_chooses_the_threshold_in_every_resample() -> None:
    """The interval holds the threshold choice's uncertainty: resampled at the one threshold
    chosen on the validation half, a test half it separates perfectly gave [1.0, 1.0]; each
    resample re-chooses it on a resampled validation half, which moves it off 0.5 often."""
    labels, scores = _split_scores(12)
    items = [Item(("src", f"s{i}"), y) for i, y in enumerate(labels)]
    out = meta.evaluate_group(items, scores, n_resamples=500, seed=0)
    assert out["threshold"] == pytest.approx(0.5)
    assert out["balanced_accuracy"] == 1.0  # the point estimate is as before
    lo, hi = out["balanced_accuracy_ci95"]
    assert hi == 1.0 and lo <= 0.75
    # the same draws as a hand-written loop over best_threshold (seeded like bootstrap_ci)
    val, test = meta.stratified_split(labels, 0.5, 0)
    y = np.asarray(labels)
    rng = np.random.default_rng(0)
    values = []
    for _ in range(200):
        iv = val[rng.integers(0, len(val), len(val))]
        it = test[rng.integers(0, len(test), len(test))]
        t = meta.best_threshold(scores[iv], y[iv])[0]
        if not math.isnan(t):
            values.append(meta.balanced_accuracy(scores[it], y[it], t))
    expected = tuple(np.quantile(values, [0.025, 0.975]))
    got = meta.split_balanced_accuracy_ci(scores, labels, val, test, n_resamples=200, seed=0)
    assert got == pytest.approx(expected)


def test_balanced_accuracy_ci_needs_three_of_each_class_in_each_half() -> None:
    """Five of a class split 2 / 3: the threshold is re-chosen on the half holding two."""
    labels = [1] * 5 + [0] * 8
    val, test = meta.stratified_split(labels, 0.5, 0)
    y = np.asarray(labels)
    assert (y[val] == 1).sum() == 2 and (y[test] == 1).sum() == 3
    scores = np.random.default_rng(1).random(len(labels)) + 0.3 * y  # overlapping classes
    items = [Item(("src", f"s{i}"), v) for i, v in enumerate(labels)]
    out = meta.evaluate_group(items, scores, n_resamples=100, seed=0)
    assert not math.isnan(out["balanced_accuracy"])
    assert out["balanced_accuracy_ci95"] == [None, None]
    assert "balanced_accuracy" in out["ci_n_too_small"]


def test_bootstrap_ci_bounds_the_estimate() -> None:
    rng = np.random.default_rng(0)
    wins = (rng.random(300) < 0.7).astype(float)
    lo, hi = meta.bootstrap_ci(lambda w: float(w.mean()), wins, n_resamples=500, seed=0)
    est = wins.mean()
    assert 0 <= lo < est < hi <= 1
    # normal approximation: half-width about 1.96 * sqrt(p(1-p)/n) = 0.052
    assert (hi - lo) / 2 == pytest.approx(1.96 * math.sqrt(est * (1 - est) / 300), rel=0.25)
    # constant data -> degenerate interval
    assert meta.bootstrap_ci(lambda w: float(w.mean()), np.ones(20), n_resamples=50) == (1.0, 1.0)


def test_paired_permutation_test() -> None:
    a = np.ones(40)
    b = np.zeros(40)
    res = meta.paired_permutation_test(a, b, n_resamples=999, seed=0)
    assert res["difference"] == pytest.approx(1.0)
    # only the identity/all-swapped labelings are as extreme: p = (k + 1) / 1000, tiny
    assert res["p_value"] < 0.01
    same = meta.paired_permutation_test(a, a.copy(), n_resamples=99, seed=0)
    assert same["p_value"] == pytest.approx(1.0)


def test_rank_normalize() -> None:
    out = meta.rank_normalize([10.0, float("nan"), 30.0, 20.0])
    assert out[0] == 0.0 and out[2] == 1.0 and out[3] == 0.5 and math.isnan(out[1])


def bump_like() -> tuple[list[Item], list[float]]:
    """Two references, each with two edits of different types (references repeat per pair)."""
    ref_a, ref_b = ("src a", "ref a"), ("src b", "ref b")
    items = [
        Item(ref_a, 1, pair_id="p1", origin="cnndm"),
        Item(("src a", "edit a1"), 0, pair_id="p1", error_type="Intrinsic Entity", origin="cnndm"),
        Item(ref_a, 1, pair_id="p2", origin="cnndm"),
        Item(("src a", "edit a2"), 0, pair_id="p2", error_type="Coreference", origin="cnndm"),
        Item(ref_b, 1, pair_id="p3", origin="xsum"),
        Item(("src b", "edit b1"), 0, pair_id="p3", error_type="Intrinsic Entity", origin="xsum"),
        Item(ref_b, 1, pair_id="p4", origin="xsum"),
        Item(("src b", "edit b2"), 0, pair_id="p4", error_type="Coreference", origin="xsum"),
    ]
    scores = [0.8, 0.3, 0.8, 0.8, 0.5, 0.6, 0.5, 0.1]
    return items, scores


def test_evaluate_pairs_dedup_and_breakdowns() -> None:
    items, scores = bump_like()
    res = meta.evaluate(items, scores, n_resamples=100)
    o = res["overall"]
    # pairs: 0.8>0.3 win, 0.8=0.8 tie (fail), 0.5<0.6 loss, 0.5>0.1 win -> 2/4
    assert o["n_pairs"] == 4 and o["consistency"] == pytest.approx(0.5)
    lo, hi = o["consistency_ci95"]
    assert 0 <= lo <= 0.5 <= hi <= 1
    # unique items: refs 0.8, 0.5; edits 0.3, 0.8, 0.6, 0.1
    # positive 0.8 beats 0.3, ties 0.8, beats 0.6, 0.1 -> 3.5; 0.5 beats 0.3, 0.1 -> 2 ; /8
    assert o["n_unique"] == 6
    assert o["roc_auc"] == pytest.approx(5.5 / 8)
    ent = res["by_error_type"]["Intrinsic Entity"]
    assert ent["n_pairs"] == 2 and ent["consistency"] == pytest.approx(0.5)
    # refs 0.8, 0.5 vs edits 0.3, 0.6: 0.8 beats both, 0.5 beats 0.3 -> 3/4
    assert ent["roc_auc"] == pytest.approx(0.75)
    coref = res["by_error_type"]["Coreference"]
    assert coref["consistency"] == pytest.approx(0.5)
    assert set(res["by_origin"]) == {"cnndm", "xsum"}
    assert res["by_origin"]["xsum"]["consistency"] == pytest.approx(0.5)


def test_evaluate_graded_scores() -> None:
    items = [Item(("s", str(i)), None, human=h) for i, h in enumerate([1.0, 3.0, 2.0, 4.0])]
    res = meta.evaluate(items, [1.0, 2.0, 3.0, 4.0], n_resamples=10)
    assert res["overall"]["spearman"] == pytest.approx(0.8)
    assert "roc_auc" not in res["overall"] and "consistency" not in res["overall"]
