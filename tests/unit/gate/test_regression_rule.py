"""The regression rule: a paired bootstrap of the drop against a baseline, and the
per-example thresholds of outputs that minimally edit their baseline output."""

from __future__ import annotations

import numpy as np
import pytest
from gate_cases import (
    M2,
    H,
    M,
    baseline_result,
    ex,
    gate,
    per_example_gate,
    rule,
    two_metric_gate,
)

from faithgate.config import GateConfig
from faithgate.errors import InputError
from faithgate.gate.baseline import BaselineRead, paired_bootstrap_drop
from faithgate.gate.evaluate import evaluate
from faithgate.types import Score


def test_paired_bootstrap_on_known_values():
    drop, lower, p = paired_bootstrap_drop([1.0] * 50, [0.9] * 50)
    assert drop == pytest.approx(0.1) and lower == pytest.approx(0.1) and p == 0.0
    drop, lower, _ = paired_bootstrap_drop([0.5, 0.5], [0.5, 0.5])
    assert drop == 0.0 and lower == 0.0


def test_regression_real_drop_fails():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.4, 0.9, 200)
    cur = base - 0.05 + rng.normal(0, 0.02, 200)  # a real drop of 0.05 on every example
    r = gate(
        list(cur),
        {"rules": {"regression": {"tolerance": 0.01, "confidence": 0.95}}},
        baseline=baseline_result(list(base)),
    )
    reg = rule(r, f"regression[{M}]")
    assert reg.value == pytest.approx(0.05, abs=0.005)
    assert reg.details["lower_bound"] > 0
    assert not reg.passed and not r.passed
    assert "real at 95%" in reg.message


def test_regression_noise_only_drop_passes():
    rng = np.random.default_rng(7)
    base = rng.uniform(0.4, 0.9, 12)
    noise = rng.normal(0, 0.2, 12)
    cur = base + noise - noise.mean() - 0.03  # mean drop exactly 0.03, but pure noise around it
    r = gate(
        list(cur),
        {"rules": {"regression": {"tolerance": 0.01, "confidence": 0.95}}},
        baseline=baseline_result(list(base)),
    )
    reg = rule(r, f"regression[{M}]")
    assert reg.value == pytest.approx(0.03)
    assert reg.value > 0.01  # above tolerance ...
    assert reg.details["lower_bound"] <= 0  # ... but not distinguishable from noise
    assert reg.passed and r.passed
    assert "cannot tell it from noise" in reg.message


def test_regression_drop_within_tolerance_passes():
    base = [0.8] * 30
    r = gate(
        [0.795] * 30, {"rules": {"regression": {"tolerance": 0.01}}}, baseline=baseline_result(base)
    )
    reg = rule(r, f"regression[{M}]")
    assert reg.details["lower_bound"] > 0  # real, but small
    assert reg.passed


def test_regression_drop_equal_to_the_tolerance_passes():
    """0.8 - 0.79 is 0.010000000000000009 in binary: a drop of exactly the tolerance failed
    and read "dropped by 0.0100 (> tolerance 0.01)"."""
    r = gate(
        [0.79] * 20,
        {"rules": {"regression": {"tolerance": 0.01}}},
        baseline=baseline_result([0.8] * 20),
    )
    assert rule(r, f"regression[{M}]").passed and r.passed
    r = gate(
        [0.78996] * 20,
        {"rules": {"regression": {"tolerance": 0.01}}},
        baseline=baseline_result([0.8] * 20),
    )
    reg = rule(r, f"regression[{M}]")
    assert not reg.passed
    assert reg.message.startswith(f"mean {M} dropped by 0.01004 (> tolerance 0.01000)")


def test_regression_nan_drop_fails_closed_without_numpy_warnings():
    """Scores near the float limit made the mean drop NaN, which is not > tolerance: the rule
    passed, and numpy's overflow warning reached stderr."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = gate(
            [-1e308, 1e308, 0.0, 0.0],
            {"rules": {"regression": {"tolerance": 0.01}, "min_pass_rate": 0}},
            baseline=baseline_result([1e308, -1e308, 5.0, 5.0]),
        )
    reg = rule(r, f"regression[{M}]")
    assert not reg.passed and not r.passed
    assert "not a number" in reg.message
    assert [str(w.message) for w in caught] == []


def test_regression_refuses_incomparable_settings_and_missing_baseline():
    r = gate([0.8], {"rules": {"regression": {}}}, baseline=baseline_result([0.8], "m:other"))
    assert not r.passed and "not comparable" in rule(r, f"regression[{M}]").message
    r = gate(
        [0.8],
        {"rules": {"regression": {}}},
        baseline=BaselineRead(error="baseline file x not found"),
    )
    assert not r.passed and "not found" in rule(r, f"regression[{M}]").message


def test_baseline_path_alone_enables_regression(tmp_path):
    r = gate([0.8], {"baseline": str(tmp_path / "b.json")}, baseline=baseline_result([0.8]))
    assert rule(r, f"regression[{M}]").passed


@pytest.mark.parametrize(("current", "passed"), [(0.75, True), (0.7499, False), (0.9, True)])
def test_per_example_drop_boundary_is_the_baseline_minus_the_drop(current, passed):
    r = per_example_gate([current], [0.8], drop=0.05)
    e = r.examples[0]
    assert e.scores[M].threshold == pytest.approx(0.75)
    assert e.scores[M].baseline == 0.8
    assert e.passed is passed and rule(r, "pass_rate").passed is passed


def test_per_example_drop_of_exactly_the_allowed_drop_passes():
    """0.4 - 0.1 is 0.30000000000000004 in binary: a score of 0.3 against a baseline of 0.4 and
    an allowed drop of 0.1 failed as "0.300000000000000 < its own threshold 0.300000000000000"."""
    r = per_example_gate([0.3, 0.3], [0.4, 0.4], drop=0.1, extra={"tolerance": 0.5})
    assert all(e.passed for e in r.examples) and r.passed
    assert rule(r, f"regression[{M}]").details["per_example"]["below"] == 0
    r = per_example_gate([0.2999], [0.4], drop=0.1)
    assert "m 0.2999 < its own threshold 0.3000" in r.examples[0].message


def test_per_example_drop_fails_one_output_even_when_the_mean_holds():
    # Nine outputs improve, one drops: the mean regression rule passes, the example does not.
    base = [0.6] * 10
    current = [0.65] * 9 + [0.5]
    r = per_example_gate(
        current, base, drop=0.02, texts=[f"summary {i}." for i in range(9)] + ["summary nine."]
    )
    assert rule(r, f"regression[{M}]").passed
    failing = [e for e in r.examples if not e.passed]
    assert [e.id for e in failing] == ["9"]
    assert "its own threshold 0.5800" in failing[0].message
    assert "baseline 0.6000" in failing[0].message and "'9.' -> 'nine.'" in failing[0].message
    assert not r.passed
    reg = rule(r, f"regression[{M}]")
    assert reg.details["per_example"] == {"held": 10, "below": 1, "rewritten": 0}
    assert "per example: 1 of 10 edited or unchanged outputs below their own thresholds" in (
        reg.message
    )


def test_per_example_drop_skips_rewritten_outputs_and_new_ids():
    base_texts = ["the cat sat on the mat today.", "a b c d e f g h i j."]
    texts = ["the cat sat on the mat today.", "z y x w v u t s r q."]  # 10 words changed
    r = per_example_gate([0.1, 0.1, 0.1], [0.9, 0.9], texts=texts + ["new"], base_texts=base_texts)
    first, rewritten, new = r.examples
    assert not first.passed and first.scores[M].threshold == pytest.approx(0.85)
    assert rewritten.passed and rewritten.scores[M].threshold is None
    assert new.passed and new.scores[M].baseline is None
    assert rule(r, f"regression[{M}]").details["per_example"] == {
        "held": 1,
        "below": 1,
        "rewritten": 1,
    }
    r = per_example_gate(
        [0.1, 0.1],
        [0.9, 0.9],
        texts=texts,
        base_texts=base_texts,
        extra={"max_changed_words": 10},
    )
    assert not any(e.passed for e in r.examples)


def test_per_example_drop_keeps_the_stricter_configured_threshold():
    cfg = GateConfig.from_dict(
        {
            "metrics": [M],
            "thresholds": {M: 0.7},
            "rules": {"regression": {"per_example_drop": {M: 0.5}}},
        }
    )
    baseline = baseline_result([0.9])
    r = evaluate(cfg, [ex(0)], [{M: Score(M, 0.6, H[M], "0")}], H, baseline=baseline)
    e = r.examples[0]
    assert e.scores[M].threshold == 0.7 and not e.passed
    assert e.reasons == [f"{M} 0.6000 < threshold 0.7"]


def test_per_example_drop_needs_comparable_scores_and_a_selected_metric():
    cfg = GateConfig.from_dict({"metrics": [M], "rules": {"regression": {"per_example_drop": 0.0}}})
    r = evaluate(
        cfg, [ex(0)], [{M: Score(M, 0.1, H[M], "0")}], H, baseline=baseline_result([0.9], "m:other")
    )
    assert r.examples[0].passed and r.examples[0].scores[M].threshold is None
    assert not rule(r, f"regression[{M}]").passed  # the incomparable baseline fails there
    cfg = GateConfig.from_dict(
        {"metrics": [M], "rules": {"regression": {"per_example_drop": {"other": 0.1}}}}
    )
    with pytest.raises(InputError, match="per_example_drop names 'other'"):
        evaluate(cfg, [ex(0)], [{M: Score(M, 0.1, H[M], "0")}], H, baseline=baseline_result([0.9]))
    from faithgate.gate.checks import check_rule_metrics

    with pytest.raises(InputError, match="per_example_drop: no metric is named 'other'"):
        check_rule_metrics(cfg)  # also without a baseline: checked when the gate is configured


def test_per_example_drop_outside_the_regression_metrics_is_never_silently_off():
    """A per_example_drop for a metric outside rules.regression.metrics was skipped without a
    word when the baseline lacked that metric or had scored it under other settings: the gate
    passed outputs that fail against a comparable baseline."""
    r = two_metric_gate(0.5, [M, M2])  # comparable: each output is below 0.9 - 0.05
    assert not r.passed and not rule(r, "pass_rate").passed
    assert [x.name for x in r.rules if x.kind == "regression"] == [f"regression[{M}]"]
    for baseline_metrics, other, says in (
        ([M], None, f"the baseline has no {M2} scores, so its per-example thresholds"),
        ([M, M2], "m2:old", f"baseline {M2} scores were made with other settings (m2:old vs"),
    ):
        r = two_metric_gate(0.5, baseline_metrics, other)
        drop = rule(r, f"per_example_drop[{M2}]")
        assert not drop.passed and not drop.skipped and not r.passed
        assert drop.message.startswith(says) and "update it with --update-baseline" in (
            drop.message
        )
        assert drop.kind == "regression" and drop.metric == M2 and drop.limit == 0.05
        assert rule(r, f"regression[{M}]").passed  # M is compared as before
    # A run that replaces the baseline (--update-baseline) skips it, naming the metric.
    why = f"the baseline at b.json holds no {M2} scores made with these settings (this run ...)"
    r = two_metric_gate(0.5, [M], replaced={M2: why})
    drop = rule(r, f"per_example_drop[{M2}]")
    assert drop.passed and drop.skipped and r.passed
    assert drop.message == f"{why}: no per-example threshold yet"
    # A metric with a regression rule says it there.
    r = per_example_gate([0.1], [0.9])  # comparable: 0.1 is below 0.9 - 0.05
    assert not r.passed
    r = evaluate(
        GateConfig.from_dict({"metrics": [M], "rules": {"regression": {"per_example_drop": 0.05}}}),
        [ex(0)],
        [{M: Score(M, 0.1, H[M], "0")}],
        H,
        baseline=BaselineRead(baseline_result([0.9], "m:other"), replaced={M: "replaced"}),
    )
    reg = rule(r, f"regression[{M}]")
    assert r.passed and reg.skipped
    assert reg.message == (
        "replaced: nothing to compare yet; its per-example thresholds (per_example_drop) are "
        "off too"
    )


def test_regression_says_apart_new_outputs_and_those_the_baseline_could_not_score():
    """Outputs in the baseline that it could not score were counted as "new since the
    baseline"."""
    b_cfg = GateConfig.from_dict({"metrics": [M]})
    b_exs = [ex(i) for i in range(4)]
    b_scores = [
        {M: Score(M, 0.8, H[M], str(i)) if i < 2 else Score.failed(M, H[M], str(i), "boom")}
        for i in range(4)
    ]
    baseline = evaluate(b_cfg, b_exs, b_scores, H)
    r = gate([0.8] * 5, {"rules": {"regression": {}}}, baseline=baseline)
    reg = rule(r, f"regression[{M}]")
    assert reg.passed and reg.details["paired"] == 2
    assert reg.message == (
        f"mean {M} change +0.0000 on 2 examples (tolerance 0.01); 1 examples are new since the "
        "baseline; 2 examples were not scored in the baseline"
    )
    r = gate([0.8] * 4, {"rules": {"regression": {}}}, baseline=baseline)
    assert rule(r, f"regression[{M}]").message.endswith(
        "; 2 examples were not scored in the baseline"
    )
