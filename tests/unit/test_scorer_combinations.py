"""A combination (``combined``, ``ensemble``) gets its components' scores from the same run or
the score cache, and computes only what neither has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faithgate.cache import ScoreCache
from faithgate.metrics.base import get_metric
from faithgate.metrics.overlap import Overlap
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

EXAMPLES = [
    Example("a", "The council approved the budget on Monday.", "The council approved the budget."),
    Example("b", "The council approved the budget on Monday.", "The council rejected a plan."),
]


@pytest.fixture
def weights(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(
        json.dumps(
            {
                "format": "faithgate-combination/1",
                "metrics": ["overlap"],
                "metric_settings": {},
                "mean": [0.5],
                "scale": [0.25],
                "coef": [1.0],
                "intercept": 0.0,
            }
        )
    )
    return str(path)


@pytest.fixture
def overlap_calls(monkeypatch):
    """Summaries the ``overlap`` metric scored, in order."""
    calls: list[str] = []
    original = Overlap.score_batch

    def counted(self, examples, ctx):
        calls.extend(ex.id for ex in examples)
        return original(self, examples, ctx)

    monkeypatch.setattr(Overlap, "score_batch", counted)
    return calls


def test_a_component_also_selected_is_scored_once(weights, overlap_calls) -> None:
    rows = Scorer(
        ["overlap", "combined"], metric_settings={"combined": {"weights": weights}}
    ).score(EXAMPLES)
    assert overlap_calls == ["a", "b"]
    direct = get_metric("combined", weights=weights).score_batch(
        EXAMPLES, Scorer(["overlap"]).context
    )
    for row, expected in zip(rows, direct, strict=True):
        assert row["combined"].value == pytest.approx(expected.value)
        assert row["combined"].details["components"]["overlap"] == row["overlap"].value
    assert [r["combined"].example_id for r in rows] == ["a", "b"]


def test_cached_component_scores_are_not_recomputed(tmp_path, weights, overlap_calls) -> None:
    cache = ScoreCache(str(tmp_path / "scores.sqlite"))
    Scorer(["overlap"], cache=cache).score(EXAMPLES[:1])
    assert overlap_calls == ["a"]
    combo = Scorer(["combined"], metric_settings={"combined": {"weights": weights}}, cache=cache)
    first = combo.score(EXAMPLES)
    assert overlap_calls == ["a", "b"]  # only the miss is computed ...
    # ... and cached: another combination over the same component needs no scoring at all
    other = tmp_path / "w2.json"
    doc = json.loads(Path(weights).read_text()) | {"mean": [0.4]}
    other.write_text(json.dumps(doc))
    again = Scorer(["combined"], metric_settings={"combined": {"weights": str(other)}}, cache=cache)
    second = again.score(EXAMPLES)
    assert overlap_calls == ["a", "b"]
    assert second[0]["combined"].value != first[0]["combined"].value
    assert second[0]["combined"].details["components"] == first[0]["combined"].details["components"]


def test_without_a_cache_the_components_are_computed(weights, overlap_calls) -> None:
    rows = Scorer(["combined"], metric_settings={"combined": {"weights": weights}}).score(EXAMPLES)
    assert overlap_calls == ["a", "b"]
    assert all(r["combined"].ok for r in rows)
    assert list(rows[0]) == ["combined"]  # the components are not reported as selected


def test_selected_and_combined_with_a_partly_warm_cache(tmp_path, weights, overlap_calls) -> None:
    cache = ScoreCache(str(tmp_path / "scores.sqlite"))
    Scorer(["overlap"], cache=cache).score(EXAMPLES[:1])
    both = Scorer(
        ["overlap", "combined"], metric_settings={"combined": {"weights": weights}}, cache=cache
    )
    rows = both.score(EXAMPLES)
    assert overlap_calls == ["a", "b"]  # "a" from the cache, "b" computed once for both
    assert [r["combined"].details["components"]["overlap"] for r in rows] == [
        r["overlap"].value for r in rows
    ]


GOOD = {
    "format": "faithgate-combination/1",
    "metrics": ["overlap", "sentsim"],
    "mean": [0.5, 0.5],
    "scale": [0.25, 0.25],
    "coef": [1.0, 1.0],
    "intercept": 0.0,
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # Twice the same metric: its votes shared one key and one was lost (sigmoid(1), not 2).
        ({"metrics": ["overlap", "overlap"]}, "metrics names a metric twice"),
        ({"metrics": []}, "metrics must be a non-empty list"),
        # A NaN mean gave every example 1.0; a zero scale raised ZeroDivisionError.
        ({"mean": [float("nan"), 0.5]}, "mean must hold finite numbers"),
        ({"scale": [0, 0.25]}, "every scale must be above 0"),
        ({"coef": ["a", 1.0]}, "coef must hold finite numbers"),
        ({"coef": [1.0]}, "coef must be a list with one number per metric"),
        ({"intercept": "x"}, "intercept must be a finite number"),
    ],
)
def test_a_weights_file_that_would_score_wrongly_is_refused(tmp_path, change, message) -> None:
    from faithgate.errors import InputError
    from faithgate.metrics.combined import load_weights

    path = tmp_path / "w.json"
    path.write_text(json.dumps({**GOOD, **change}))
    with pytest.raises(InputError, match=message):
        load_weights(path)
    with pytest.raises(InputError, match="cannot read the weights file"):
        load_weights(tmp_path)  # a directory
    assert load_weights(_write(tmp_path / "ok.json", GOOD))["metrics"] == ["overlap", "sentsim"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 200_000 + "]" * 200_000, r"w.json: not valid JSON \(nested too deeply\)"),
        (json.dumps({**GOOD, "metric_settings": {"overlap": [1, 2]}}), "metric_settings.overlap"),
        (json.dumps({**GOOD, "metric_settings": "x"}), "metric_settings must be an object"),
        (json.dumps({**GOOD, "metric_settings": {"ner": {}}}), "names 'ner', which is not one"),
    ],
    ids=["nested", "settings-a-list", "settings-a-string", "settings-of-another-metric"],
)
def test_a_malformed_weights_file_is_an_input_error_naming_it(tmp_path, text, message) -> None:
    """JSON nested too deeply (RecursionError) and metric_settings of the wrong shape (a list:
    TypeError, a string: AttributeError) were internal errors, exit 1."""
    from faithgate.errors import InputError
    from faithgate.metrics.base import get_metric

    path = tmp_path / "w.json"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as caught:
        get_metric("combined", weights=str(path))
    assert str(caught.value).startswith(f"{path}: ")


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path
