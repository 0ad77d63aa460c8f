"""The per-example rules at their boundaries: thresholds, the pass rate, min_mean, and the
examples that could not be scored (they fail, never pass by being skipped)."""

from __future__ import annotations

import pytest
from gate_cases import (
    H,
    M,
    ex,
    gate,
    pair_gate,
    rule,
    scored,
)

from faithgate.config import GateConfig
from faithgate.errors import InputError
from faithgate.gate import evaluate as evaluate_module
from faithgate.gate.evaluate import evaluate
from faithgate.types import Score, SentenceScore


def test_threshold_boundary_is_inclusive():
    r = gate([0.5, 0.5 - 1e-9], {"thresholds": {M: 0.5}, "rules": {"min_pass_rate": 0.5}})
    assert [e.passed for e in r.examples] == [True, False]
    assert r.passed
    # never "0.5000 < threshold 0.5": a failing score is shown with the digits that tell it
    # from its threshold
    assert "m 0.499999999 < threshold 0.500000000" in r.examples[1].message


def test_a_value_at_its_limit_up_to_float_noise_passes():
    """0.1 + 0.7 (0.7999999999999999) failed a threshold of 0.8, and 7 of 10 passing failed a
    min_pass_rate (or min_rate) computed as 1 - 0.3 (0.7000000000000001)."""
    assert gate([0.1 + 0.7], {"thresholds": {M: 0.8}}).passed
    assert not gate([0.8 - 1e-9], {"thresholds": {M: 0.8}}).passed
    values = [0.9] * 7 + [0.1] * 3
    assert gate(values, {"thresholds": {M: 0.5}, "rules": {"min_pass_rate": 1 - 0.3}}).passed
    pairs = [(0.9, 0.1)] * 7 + [(0.1, 0.9)] * 3
    r = pair_gate(pairs, {"rules": {"pair_consistency": {"min_rate": 1 - 0.3}}})
    assert rule(r, f"pair_consistency[{M}]").passed


def test_a_value_within_float_noise_of_its_limit_passes_and_reads_as_it():
    """A score one float step below 0.75 failed and printed as 0.750000000000000 against
    0.750000000000000; it is at the limit (passes, reads alike), while 1e-9 below fails and
    reads apart."""
    from faithgate.numbers import at_least, fixed_against, percent_against, shown_against

    step_below = 0.7499999999999999
    assert at_least(step_below, 0.75) and shown_against(step_below, 0.75) == ("0.7500", "0.75")
    assert fixed_against(step_below, 0.75) == ("0.7500", "0.7500")
    r = gate([step_below], {"thresholds": {M: 0.75}})
    assert r.passed
    below = 0.75 - 1e-9
    assert not at_least(below, 0.75)
    assert shown_against(below, 0.75) == ("0.749999999", "0.750000000")
    assert fixed_against(below, 0.75) == ("0.749999999", "0.750000000")
    assert percent_against(0.9 - 1e-9, 0.9) == ("89.9999999%", "90.0000000%")
    assert not gate([below], {"thresholds": {M: 0.75}}).passed
    assert shown_against(0.49996, 0.5) == ("0.49996", "0.50000")  # as before


def test_a_failing_rate_or_mean_never_reads_as_its_limit():
    """1999 of 2000 under min_pass_rate 1 read "100.0%; need >= 100.0%"; a mean 2e-5 short of
    min_mean read "0.6553 (need >= 0.65532)"-style equal text in every report."""
    values = [0.9] * 1999 + [0.1]
    r = gate(values, {"thresholds": {M: 0.5}, "rules": {"min_pass_rate": 1.0}})
    [rate_rule] = [rule for rule in r.rules if rule.name == "pass_rate"]
    assert "1999/2000 examples pass (99.95%; need >= 100.00%)" in rate_rule.message
    r = gate([0.49996, 0.49996], {"rules": {"min_mean": {M: 0.5}}})
    assert "mean m 0.49996 over 2 scored examples (need >= 0.50000)" in r.failed_rules[0].message
    from faithgate.report import render

    for kind in ("terminal", "markdown", "html", "junit"):
        text = render(kind, r)
        assert "0.49996" in text and "0.50000" in text, kind  # the rule's value and limit


def test_failure_message_names_the_least_supported_sentence():
    sents = [[SentenceScore(0, "Fine sentence.", 0.9), SentenceScore(1, "Made up claim.", 0.1)]]
    cfg = GateConfig.from_dict({"metrics": [M], "thresholds": {M: 0.5}})
    r = evaluate(cfg, [ex(0)], scored([0.1], sents), H)
    e = r.examples[0]
    assert not e.passed and not r.passed
    assert '"Made up claim."' in e.message
    assert e.least_supported.text == "Made up claim." and e.least_supported.index == 1


def test_failure_message_of_a_combination_names_its_lowest_vote():
    cfg = GateConfig.from_dict({"metrics": [M], "thresholds": {M: 0.5}})
    score = Score(M, 0.2, H[M], "0", details={"votes": {"sentsim": -0.1, "ner": -1.92}})
    r = evaluate(cfg, [ex(0)], [{M: score}], H)
    assert "m 0.2000 < threshold 0.5; lowest vote: ner -1.92" in r.examples[0].message
    plain = gate([0.2], {"thresholds": {M: 0.5}})  # no votes: nothing added
    assert "lowest vote" not in plain.examples[0].message


@pytest.mark.parametrize(("limit", "passed"), [(0.9, True), (0.91, False)])
def test_min_pass_rate_boundary(limit, passed):
    values = [0.9] * 9 + [0.1]
    r = gate(values, {"thresholds": {M: 0.5}, "rules": {"min_pass_rate": limit}})
    pr = rule(r, "pass_rate")
    assert pr.value == pytest.approx(0.9)
    assert pr.passed is passed and r.passed is passed


def test_default_pass_rate_requires_every_example():
    assert gate([0.6, 0.7], {"thresholds": {M: 0.5}}).passed
    assert not gate([0.6, 0.4], {"thresholds": {M: 0.5}}).passed


@pytest.mark.parametrize(("minimum", "passed"), [(0.5, True), (0.5001, False)])
def test_min_mean_boundary(minimum, passed):
    r = gate([0.25, 0.75], {"rules": {"min_mean": {M: minimum}}})
    mm = rule(r, f"min_mean[{M}]")
    assert mm.value == pytest.approx(0.5)
    assert mm.passed is passed and r.passed is passed


def test_min_mean_single_number_applies_to_every_metric():
    r = gate([0.2, 0.4], {"rules": {"min_mean": 0.35}})
    assert rule(r, f"min_mean[{M}]").value == pytest.approx(0.3)
    assert not r.passed


def test_min_mean_of_scores_all_at_the_minimum_passes():
    """Three scores of 0.7 have a float mean of 0.6999999999999998 and failed min_mean 0.7; a
    plain sum of 100,000 of them is off by more than the float noise allowed."""
    for value, n in ((0.7, 3), (0.1, 10)):
        r = gate([value] * n, {"rules": {"min_mean": value}})
        assert rule(r, f"min_mean[{M}]").passed and r.passed, value
    from faithgate.numbers import at_least, mean_of

    assert at_least(mean_of([0.7] * 100_000), 0.7)
    assert not gate([0.7 - 1e-9] * 3, {"rules": {"min_mean": 0.7}}).passed


def test_min_mean_of_scores_overflowing_a_plain_sum_is_their_true_mean():
    """The mean fell back to a plain sum, inf for these scores, and inf passed min_mean although
    the true mean is -1e307."""
    r = gate(
        [1.5e308, 1.5e308, -1.7e308, -1.7e308],
        {"rules": {"min_mean": {M: 0.5}, "min_pass_rate": 0}},
    )
    mean = rule(r, f"min_mean[{M}]")
    assert mean.value == pytest.approx(-1e307) and not mean.passed and not r.passed


def test_a_mean_that_is_not_finite_fails_min_mean(monkeypatch):
    """Like the regression rule on a NaN drop: a mean that is not finite is not shown to be
    above the minimum (inf passed it)."""
    for value in (float("inf"), float("nan")):
        monkeypatch.setattr(evaluate_module, "mean_of", lambda values, value=value: value)
        r = gate([0.9, 0.9], {"rules": {"min_mean": {M: 0.5}}})
        mean = rule(r, f"min_mean[{M}]")
        assert not mean.passed and not r.passed
        assert mean.message == (
            f"mean {M} over 2 scored examples is not a finite number ({value}), so it is not "
            "shown to be >= 0.5"
        )


def test_min_mean_on_unselected_metric_is_an_input_error():
    with pytest.raises(InputError, match="not selected"):
        gate([0.2], {"rules": {"min_mean": {"other": 0.1}}})


def test_unscorable_example_fails_the_gate_and_says_why():
    r = gate([0.9, None, 0.8])
    bad = r.examples[1]
    assert not bad.passed
    assert "could not score (RuntimeError: model exploded)" in bad.message
    assert not r.passed
    assert "1 could not be scored" in rule(r, "pass_rate").message


def test_unscorable_counts_as_a_failure_in_the_pass_rate():
    r = gate([0.9, 0.9, 0.9, None], {"rules": {"min_pass_rate": 0.75}})
    assert rule(r, "pass_rate").value == pytest.approx(0.75)
    assert r.passed  # the user allowed one failure in four; the unscorable one is that failure
    r = gate([0.9, 0.9, 0.9, None], {"rules": {"min_pass_rate": 0.76}})
    assert not r.passed


def test_zero_scorable_examples_fail_even_when_rules_would_allow_it():
    r = gate([None, None], {"rules": {"min_pass_rate": 0.0}})
    assert not rule(r, "scorable").passed
    assert not r.passed
    assert "no example could be scored" in rule(r, "scorable").message


def test_min_mean_does_not_say_unscored_outputs_fail_pass_rate():
    """ "(they fail pass_rate)" was printed beside a passing pass_rate."""
    r = gate([0.95, 0.95, None], {"rules": {"min_pass_rate": 0.5, "min_mean": 0.9}})
    assert rule(r, "pass_rate").passed
    message = rule(r, f"min_mean[{M}]").message
    assert "fail pass_rate" not in message
    assert message.endswith("(each counts as a failing example in pass_rate)")


def test_score_verdicts_compare_at_the_limit_as_the_gate_does():
    """`faithgate score` compared strictly: a score one float step below its threshold failed
    there while the gate passed it."""
    from faithgate.cli.score import threshold_verdicts
    from faithgate.types import Score

    scores = {M: Score(M, 0.7499999999999999, "h", "1"), "n": Score("n", 0.75 - 1e-9, "h", "1")}
    assert threshold_verdicts(scores, {M: 0.75, "n": 0.75}) == {M: True, "n": False}


def test_min_mean_says_how_many_outputs_it_could_not_score():
    """With ``min_pass_rate = 0`` a min_mean gate passed on the one output of ten a metric could
    score, and its message did not say that nine were left out."""
    values = [0.9] + [float("nan")] * 9
    r = gate(values, {"rules": {"min_pass_rate": 0.0, "min_mean": {M: 0.5}}})
    [rule] = [x for x in r.rules if x.name == f"min_mean[{M}]"]
    assert "9 of 10 could not be scored by m and are not in the mean" in rule.message
