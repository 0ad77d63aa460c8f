"""Declared score ranges (``Metric.bounds`` / ``value_range``) of the metrics whose formula is
bounded: a threshold at or below the lowest score judges nothing and one above the highest
fails every run, and the gate says so (``faithgate.gate.checks``). ``ensemble``, ``combined``,
``qgqa``, ``feqa`` and ``harim`` declared none, so ``ensemble = 0`` counted as a criterion and
``ensemble = 1.5`` failed every run unwarned."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from faithgate.config import GateConfig
from faithgate.errors import ConfigError
from faithgate.gate import Gate, checks
from faithgate.metrics.base import ScoringContext, get_metric, metric_class
from faithgate.metrics.combined import SHIPPED_ENSEMBLE
from faithgate.metrics.likelihood import harim_terms
from faithgate.types import Example, Score

BOUNDED = {
    "ensemble": (0.0, 1.0),
    "combined": (0.0, 1.0),
    "qgqa": (0.0, 1.0),
    "feqa": (0.0, 1.0),
    "harim": (-2.0, 0.0),
}


@pytest.mark.parametrize(("name", "expected"), BOUNDED.items())
def test_bounded_formulas_declare_their_range(name, expected):
    cls = metric_class(name)
    assert cls.bounds == expected
    assert cls.value_range({}) == expected


def test_harim_terms_span_exactly_zero_to_two():
    """-HaRiM in [-2, 0]: each term (1 - p_s2s)(1 - p_s2s + p_lm) is 0 at p_s2s = 1 and 2 at
    p_s2s = 0, p_lm = 1, and within [0, 2] everywhere between."""
    p = np.linspace(0.0, 1.0, 41)
    s2s, lm = (np.log(np.maximum(g, 1e-300)) for g in np.meshgrid(p, p))
    s2s[:, 0] = lm[0, :] = -np.inf  # probability 0 exactly
    terms = harim_terms(s2s.ravel(), lm.ravel())
    assert terms.min() == pytest.approx(0.0) and terms.max() == pytest.approx(2.0)
    assert (terms >= 0).all() and (terms <= 2 + 1e-12).all()


def test_a_combination_stays_in_its_range_at_the_logit_clamp(tmp_path):
    doc = json.loads(SHIPPED_ENSEMBLE.read_text())
    doc["metrics"], doc["mean"], doc["scale"], doc["coef"] = ["overlap"], [0.5], [1.0], [1e6]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    metric = get_metric("combined", weights=str(path))
    ex = [Example("a", "s", "t")]
    low, high = 0.0, 1.0
    for value in (0.0, 1.0):
        parts = [[Score("overlap", value, "h", "a")]]
        out = metric.combine(ex, parts, ScoringContext())[0].value
        assert low < out <= high and math.isfinite(out)


def _config(tmp_path, metric, **table):
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps({"id": "a", "source": "The cat sat.", "summary": "A cat."}) + "\n")
    return GateConfig.from_dict({"metrics": [metric], "outputs": str(out), **table}, root=tmp_path)


@pytest.mark.parametrize(
    ("metric", "floor"),
    [("overlap", 0), ("ensemble", 0), ("qgqa", 0), ("feqa", -1), ("harim", -2)],
)
def test_a_threshold_at_the_floor_is_no_criterion(tmp_path, metric, floor):
    """As ``overlap = 0`` already was: the gate refuses it as its only criterion."""
    cfg = _config(tmp_path, metric, thresholds={metric: floor})
    with pytest.raises(ConfigError, match=rf"threshold {metric} = {floor:.1f} cannot fail"):
        checks.check_has_criterion(cfg, checks.value_ranges(cfg))
    cfg = _config(tmp_path, metric, rules={"min_mean": floor})
    with pytest.raises(ConfigError, match=rf"rules.min_mean {metric} = {floor:.1f} cannot fail"):
        checks.check_has_criterion(cfg, checks.value_ranges(cfg))


def test_the_gate_refuses_an_idle_ensemble_threshold_before_scoring(tmp_path):
    cfg = _config(tmp_path, "ensemble", thresholds={"ensemble": 0})
    with pytest.raises(ConfigError, match="threshold ensemble = 0.0 cannot fail: ensemble sc"):
        Gate(cfg).run()


def test_limits_outside_the_range_are_warned():
    names = ("ensemble", "qgqa", "feqa", "harim", "repetition", "overlap")
    cfg = GateConfig(
        metrics=names,
        thresholds={
            "ensemble": 1.5,
            "qgqa": 0.0,
            "feqa": 1.01,
            "harim": 0.5,
            "repetition": 0.0,
            "overlap": 1.5,
        },
    )
    ranges = {m: metric_class(m).value_range({}) for m in names}
    assert checks.limits_outside_range(cfg, ranges) == [
        "threshold ensemble = 1.5 cannot be met: ensemble scores are <= 1, so it fails every run",
        "threshold qgqa = 0.0 cannot fail: qgqa scores are >= 0, so it judges nothing",
        "threshold feqa = 1.01 cannot be met: feqa scores are <= 1, so it fails every run",
        "threshold harim = 0.5 cannot be met: harim scores are <= 0, so it fails every run",
        "threshold repetition = 0.0 cannot fail: repetition scores are >= 0, so it judges nothing",
        "threshold overlap = 1.5 cannot be met: overlap scores are <= 1, so it fails every run",
    ]
    inside = GateConfig(metrics=names, thresholds={"ensemble": 0.5, "harim": -0.3, "qgqa": 1.0})
    assert checks.limits_outside_range(inside, ranges) == []


@pytest.mark.parametrize(
    ("metric", "settings", "expected"),
    [
        ("sentsim", {"sim": "token_f1"}, (0.0, 1.0)),
        ("sentsim", {"sim": "token_f1", "component": "f1"}, (0.0, 1.0)),
        ("sentsim", {}, (-1.0, 1.0)),
        ("triples", {"sim": "token_f1"}, (0.0, 1.0)),
        ("triples", {}, (-1.0, 1.0)),
        ("frames", {"sim": "token_f1"}, (0.0, 1.0)),
        ("frames", {"component": "recall"}, (-1.0, 1.0)),
        ("frames", {}, (None, 1.0)),  # F1 of a negative and a positive cosine mean
    ],
)
def test_similarity_metrics_declare_the_range_of_their_sim(metric, settings, expected):
    """sentsim with sim = token_f1 declared the cosine range (-1, 1), and frames and triples
    declared none, although token F1s lie in [0, 1]."""
    assert metric_class(metric).value_range(settings) == expected


@pytest.mark.parametrize("metric", ["sentsim", "frames", "triples"])
def test_a_token_f1_threshold_at_zero_is_no_criterion(tmp_path, metric):
    """``sentsim = 0`` (or ``frames``, ``triples``) under ``sim = "token_f1"`` was accepted as
    a gate's criterion, though no score can fall below 0, while ``overlap = 0`` was refused."""
    table = {"thresholds": {metric: 0}, "metric_settings": {metric: {"sim": "token_f1"}}}
    cfg = _config(tmp_path, metric, **table)
    with pytest.raises(ConfigError, match=rf"threshold {metric} = 0.0 cannot fail"):
        checks.check_has_criterion(cfg, checks.value_ranges(cfg))
    cfg = _config(
        tmp_path, metric, thresholds={metric: 0.1}, metric_settings=table["metric_settings"]
    )
    checks.check_has_criterion(cfg, checks.value_ranges(cfg))  # one that can fail is accepted


@pytest.mark.parametrize(
    ("regression", "idle"),
    [
        ({"tolerance": 5.0}, "rules.regression.tolerance = 5 cannot fail for overlap"),
        ({"tolerance": 1.0}, "rules.regression.tolerance = 1 cannot fail for overlap"),
        (
            {"tolerance": 1.0, "per_example_drop": {"overlap": 2.0}},
            "rules.regression.tolerance = 1 cannot fail for overlap",
        ),
    ],
)
def test_a_regression_drop_as_wide_as_the_range_is_no_criterion(tmp_path, regression, idle):
    """A tolerance (or per_example_drop) at or above the width of a bounded metric's range can
    never fail, yet counted as the gate's criterion: the mean fell from 1 to 0 and it passed."""
    cfg = _config(tmp_path, "overlap", baseline="b.json", rules={"regression": regression})
    ranges = checks.value_ranges(cfg)
    assert any(line.startswith(idle) for line in checks.limits_outside_range(cfg, ranges))
    with pytest.raises(ConfigError, match=idle):
        checks.check_has_criterion(cfg, ranges)
    # Within the range it judges (a per-example drop too); an unbounded metric takes any drop.
    ok = _config(tmp_path, "overlap", baseline="b.json", rules={"regression": {"tolerance": 0.5}})
    checks.check_has_criterion(ok, checks.value_ranges(ok))
    assert checks.limits_outside_range(ok, checks.value_ranges(ok)) == []
    per_example = {"tolerance": 5.0, "per_example_drop": 0.2}
    ok = _config(tmp_path, "overlap", baseline="b.json", rules={"regression": per_example})
    checks.check_has_criterion(ok, checks.value_ranges(ok))
    wide = _config(tmp_path, "harim_plus", rules={"regression": {"tolerance": 50.0}})
    checks.check_has_criterion(wide, checks.value_ranges(wide))


def test_a_limit_within_float_noise_of_the_range_edge_is_no_criterion(tmp_path):
    """The range checks compared exactly while the rules compare up to float noise
    (``numbers.at_least``): a threshold of 5e-13 on overlap, or a tolerance 5e-13 short of its
    width, could never fail yet counted as the gate's criterion."""
    almost = 1 - 5e-13
    for table, idle in (
        ({"thresholds": {"overlap": 5e-13}}, 1),
        ({"baseline": "b.json", "rules": {"regression": {"tolerance": almost}}}, 1),
        (
            {
                "baseline": "b.json",
                "rules": {"regression": {"tolerance": 2, "per_example_drop": almost}},
            },
            2,
        ),
    ):
        cfg = _config(tmp_path, "overlap", **table)
        ranges = checks.value_ranges(cfg)
        assert len(checks.limits_outside_range(cfg, ranges)) == idle, table
        with pytest.raises(ConfigError, match="no criterion"):
            checks.check_has_criterion(cfg, ranges)
