"""Meta-evaluation and calibration on too few rows, and benchmark fields of the wrong type."""

from __future__ import annotations

import json
import math

import pytest

from faithgate.errors import InputError
from faithgate.evaluation.calibrate import calibrate, write_calibration
from faithgate.evaluation.meta import (
    MIN_CI_N,
    MIN_ZERO_WIDTH_CI_N,
    Item,
    evaluate_group,
    items_from_examples,
)
from faithgate.safety.escape import json_for_terminal
from faithgate.types import Example


def _pairs(n: int) -> tuple[list[Item], list[float]]:
    items, scores = [], []
    for k in range(n):
        items += [
            Item(key=("s", f"r{k}"), label=1, pair_id=str(k)),
            Item(key=("s", f"e{k}"), label=0, pair_id=str(k)),
        ]
        scores += [0.9 - k / 100, 0.1 + k / 100]
    return items, scores


def test_one_pair_gives_no_interval_but_the_figure() -> None:
    items, scores = _pairs(1)
    out = evaluate_group(items, scores, n_resamples=50)
    assert out["consistency"] == 1.0 and out["roc_auc"] == 1.0
    assert out["consistency_ci95"] == [None, None] and out["roc_auc_ci95"] == [None, None]
    assert out["ci_n_too_small"] == ["consistency", "roc_auc"]


def test_enough_pairs_keep_their_intervals() -> None:
    items, scores = _pairs(MIN_CI_N)
    out = evaluate_group(items, scores, n_resamples=50)
    # Every pair won: consistency's [1.0, 1.0] from 3 pairs reads as certainty, as ROC AUC's
    # [1.0, 1.0] from 3 items a class does: both too small (the rule is MIN_ZERO_WIDTH_CI_N,
    # pairs for consistency); an interval with a width is kept from as few as MIN_CI_N.
    assert out["consistency_ci95"] == [None, None] and "consistency" in out["ci_n_too_small"]
    assert out["roc_auc_ci95"] == [None, None] and "roc_auc" in out["ci_n_too_small"]
    scores[1], scores[2] = scores[2], scores[1]  # pair 0's unfaithful now above a faithful
    out = evaluate_group(items, scores, n_resamples=50)
    assert None not in out["roc_auc_ci95"] and out["roc_auc_ci95"][0] < out["roc_auc_ci95"][1]
    lo, hi = out["consistency_ci95"]  # pair 0 lost: 2 of 3 won, an interval with a width
    assert lo < hi and "consistency" not in out.get("ci_n_too_small", [])


def test_zero_width_consistency_interval_needs_ten_pairs() -> None:
    for n, kept in ((MIN_ZERO_WIDTH_CI_N - 1, False), (MIN_ZERO_WIDTH_CI_N, True)):
        items, scores = _pairs(n)  # every pair won: every resample gives 1.0
        out = evaluate_group(items, scores, n_resamples=50)
        assert out["n_pairs"] == n and out["consistency"] == 1.0
        if kept:
            assert out["consistency_ci95"] == [1.0, 1.0]
            assert "consistency" not in out.get("ci_n_too_small", [])
        else:
            assert out["consistency_ci95"] == [None, None]
            assert "consistency" in out["ci_n_too_small"]
    items, scores = _pairs(6)
    scores = [0.5] * len(scores)  # every pair tied (a failure): [0.0, 0.0] from 6 pairs
    out = evaluate_group(items, scores, n_resamples=50)
    assert out["consistency"] == 0.0 and out["consistency_ci95"] == [None, None]
    assert "consistency" in out["ci_n_too_small"]


@pytest.mark.parametrize("bad", ["5", True, math.inf, -math.inf, math.nan, [1]])
def test_human_score_must_be_a_finite_number(bad: object) -> None:
    ex = Example("a", "src", "sum", label=1, meta={"score": bad})
    with pytest.raises(InputError, match=r"^f\.jsonl:7: field 'score'"):
        items_from_examples([ex], lambda i: f"f.jsonl:{i + 7}")


def test_grouping_fields_are_text() -> None:
    ok = Example("a", "s", "y", label=1, meta={"score": 3, "pair_id": 4, "origin": "xsum"})
    item = items_from_examples([ok])[0]
    assert item.human == 3.0 and item.pair_id == "4" and item.origin == "xsum"
    for key, value in (("pair_id", {"a": 1}), ("origin", 2), ("error_type", 1.5)):
        bad = Example("b", "s", "y", label=0, meta={key: value})
        with pytest.raises(InputError, match=f"example 'b': field '{key}'"):
            items_from_examples([bad])


def test_calibration_minimum_per_class_and_no_degenerate_interval(tmp_path) -> None:
    with pytest.raises(InputError, match="at least 3 faithful .* got 1 faithful and 1 unfaithful"):
        calibrate([0.9, 0.1], [1, 0], min_per_class=3)
    cal = calibrate([0.9, 0.8, 0.2, 0.1], [1, 1, 0, 0], n_resamples=50)  # 2 per class
    assert all(math.isnan(v) for v in cal.ci95)
    path = write_calibration(tmp_path / "faithgate.toml", cal)
    assert "nan" not in path.read_text() and "ci95" not in path.read_text()


def test_json_for_terminal_escapes_unsafe_characters_only() -> None:
    obj = {"s": "caf\u00e9 \u4e2d \u202e\u009b[2J\x7f\u2028 \ud800", "n": [1.5, None]}
    text = json_for_terminal(obj, indent=1)
    assert json.loads(text) == obj
    assert "caf\u00e9 \u4e2d" in text  # readable text stays as it is
    for ch in "\u202e\u009b\x7f\u2028\ud800":
        assert ch not in text
