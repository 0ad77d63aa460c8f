"""``ensemble``: the shipped equal-weight combination of sentsim, overlap, harim_plus and ner."""

from __future__ import annotations

import json
import math

import pytest

from faithgate.metrics.base import get_metric
from faithgate.metrics.combined import SHIPPED_ENSEMBLE
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example


def test_shipped_weights_are_equal_weights_fitted_without_bump() -> None:
    doc = json.loads(SHIPPED_ENSEMBLE.read_text())
    assert doc["metrics"] == ["sentsim", "overlap", "harim_plus", "ner"]
    assert doc["coef"] == [pytest.approx(1 / 4)] * 4
    assert doc["intercept"] == 0.0
    assert all(s > 0 for s in doc["scale"])
    # evaluation data is never where the scales come from
    assert doc["trained_on"] and "bump_task1" not in doc["trained_on"]
    assert all(len(v["sha256"]) == 64 and v["rows"] > 0 for v in doc["trained_on"].values())


def test_it_names_its_components_models_and_keeps_its_own_hash() -> None:
    from faithgate.metrics.base import ScoringContext

    ctx = ScoringContext()
    metric = get_metric("ensemble")
    roles = metric.model_roles(ctx)
    for component in ("sentsim", "overlap", "harim_plus", "ner"):
        assert get_metric(component).model_roles(ctx).items() <= roles.items()
    assert {"embedder", "lm", "spacy"} <= roles.keys()
    # the hash is its own (components' hashes and the weights' digest), not a model list
    assert metric.settings_hash(ctx).startswith("ensemble|sentsim+overlap+harim_plus+ner|")


def test_default_weights_are_the_shipped_file_and_another_file_is_taken(tmp_path) -> None:
    metric = get_metric("ensemble")
    assert [m.name for m in metric._components] == ["sentsim", "overlap", "harim_plus", "ner"]
    own = json.loads(SHIPPED_ENSEMBLE.read_text())
    own["metrics"], own["mean"], own["scale"], own["coef"] = ["overlap"], [0.5], [0.2], [1.0]
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(own))
    assert [m.name for m in get_metric("ensemble", weights=str(path))._components] == ["overlap"]


@pytest.mark.slow
def test_value_is_the_sigmoid_of_the_mean_z_score() -> None:
    source = (
        "The city council of Springfield approved a new budget on Monday after a long debate. "
        "The budget raises spending on schools by 4 percent."
    )
    examples = [
        Example("a", source, "Springfield approved a budget that raises school spending."),
        Example("b", source, "Springfield rejected a budget that cuts school spending."),
    ]
    doc = json.loads(SHIPPED_ENSEMBLE.read_text())
    rows = Scorer(["ensemble", *doc["metrics"]], cache=None).score(examples)
    for row in rows:
        z = [
            (row[m].value - mu) / sd
            for m, mu, sd in zip(doc["metrics"], doc["mean"], doc["scale"], strict=True)
        ]
        expected = 1 / (1 + math.exp(-sum(z) / len(z)))
        assert row["ensemble"].value == pytest.approx(expected, rel=1e-9)
        assert row["ensemble"].details["components"] == {m: row[m].value for m in doc["metrics"]}
    assert rows[0]["ensemble"].value > rows[1]["ensemble"].value  # the edit scores lower
