"""The gate engine: each rule at its boundary, regression by paired bootstrap, unscorable
examples, the score cache, summarizers, generated pairs and the result JSON."""

from __future__ import annotations

import dataclasses
import json
import types

import numpy as np
import pytest
from gate_fakes import NAME, FakeMetric, summary

from faithgate import rules
from faithgate.config import GateConfig
from faithgate.errors import ConfigError, InputError
from faithgate.gate import (
    Gate,
    GateResult,
    evaluate,
    find_pairs,
    paired_bootstrap_drop,
)
from faithgate.summarize import run_summarizer
from faithgate.types import Example, Score, SentenceScore

M = "m"
H = {M: "m:abc"}


def ex(i, meta=None, text=None):
    return Example(str(i), "the source", text or f"summary {i}.", meta=meta or {})


def scored(values, sentences=None):
    out = []
    for i, v in enumerate(values):
        if v is None:
            out.append({M: Score.failed(M, H[M], str(i), "RuntimeError: model exploded")})
        else:
            sents = sentences[i] if sentences else []
            out.append({M: Score(M, v, H[M], str(i), sents)})
    return out


def gate(values, config=None, **kw):
    cfg = GateConfig.from_dict({"metrics": [M], **(config or {})})
    return evaluate(cfg, [ex(i) for i in range(len(values))], scored(values), H, **kw)


def rule(result, name):
    return next(r for r in result.rules if r.name == name)


# ------------------------------------------------------------------ per-example threshold


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


# ------------------------------------------------------------------ pass rate


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


# ------------------------------------------------------------------ min mean


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
        monkeypatch.setattr(rules, "mean_of", lambda values, value=value: value)
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


# ------------------------------------------------------------------ unscorable


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


# ------------------------------------------------------------------ minimal pairs


def pair_examples(n_pairs, etypes=None):
    exs = []
    for k in range(n_pairs):
        exs.append(ex(f"{k}r", {"pair_id": f"p{k}", "role": "reference"}))
        et = etypes[k] if etypes else "Intrinsic Entity"
        exs.append(ex(f"{k}e", {"pair_id": f"p{k}", "role": "edited", "error_type": et}))
    return exs


def pair_gate(pairs_values, config, etypes=None):
    exs = pair_examples(len(pairs_values), etypes)
    values = [v for pair in pairs_values for v in pair]
    cfg = GateConfig.from_dict({"metrics": [M], **config})
    return evaluate(cfg, exs, scored(values), H)


def test_find_pairs_reads_bump_and_falke_roles():
    exs = pair_examples(2) + [
        ex("fc", {"pair_id": "f", "role": "correct"}),
        ex("fi", {"pair_id": "f", "role": "incorrect"}),
        ex("lonely", {"pair_id": "z", "role": "edited"}),
    ]
    pairs = find_pairs(exs)
    assert [(exs[p.faithful].id, exs[p.unfaithful].id) for p in pairs] == [
        ("0r", "0e"),
        ("1r", "1e"),
        ("fc", "fi"),
    ]
    assert pairs[0].error_type == "Intrinsic Entity"


@pytest.mark.parametrize(("min_rate", "passed"), [(0.75, True), (0.76, False)])
def test_pair_consistency_boundary_and_ties_fail(min_rate, passed):
    # 3 of 4 consistent; the tie (0.5, 0.5) counts as inconsistent.
    values = [(0.9, 0.1), (0.8, 0.7), (0.6, 0.2), (0.5, 0.5)]
    r = pair_gate(values, {"rules": {"pair_consistency": {"min_rate": min_rate}}})
    pc = rule(r, f"pair_consistency[{M}]")
    assert pc.value == pytest.approx(0.75)
    assert pc.passed is passed and r.passed is passed
    assert pc.details["inconsistent_pairs"] == ["p3"]
    # edited members are probes: not counted by the per-example rules
    assert r.n_examples == 4 and all(e.probe for e in r.examples[1::2])


def test_pair_consistency_per_error_type():
    values = [(0.9, 0.1), (0.2, 0.8), (0.9, 0.1)]
    etypes = ["Intrinsic Entity", "Extrinsic Predicate", "Extrinsic Predicate"]
    r = pair_gate(
        values, {"rules": {"pair_consistency": {"min_rate": 0.6, "per_error_type": True}}}, etypes
    )
    assert rule(r, f"pair_consistency[{M}]").value == pytest.approx(2 / 3)
    assert rule(r, f"pair_consistency[{M}|Intrinsic Entity]").passed
    ep = rule(r, f"pair_consistency[{M}|Extrinsic Predicate]")
    assert ep.value == pytest.approx(0.5) and not ep.passed
    assert not r.passed


def test_pair_fields_without_a_pair_rule_are_gated_as_outputs():
    """Rows with pair_id and an unfaithful role used to leave the per-example gate as probes
    even with no pair rule, so an unfaithful output passed unseen."""
    values = [(0.9, 0.1)]
    r = pair_gate(values, {"thresholds": {M: 0.5}})
    assert not any(e.probe for e in r.examples) and r.pairs == []
    assert r.n_examples == 2 and not r.passed
    cfg = GateConfig.from_dict({"metrics": [M]})
    [line] = rules.ignored_pair_fields(cfg, pair_examples(1))
    assert "2 outputs carry pair_id and role fields, which are ignored" in line
    ruled = GateConfig.from_dict({"metrics": [M], "rules": {"pair_consistency": 0.5}})
    assert rules.ignored_pair_fields(ruled, pair_examples(1)) == []


def test_pair_rule_without_pairs_fails():
    r = gate([0.9], {"rules": {"pair_consistency": {"min_rate": 0.5}}})
    assert not rule(r, f"pair_consistency[{M}]").passed
    assert "no minimal pairs" in rule(r, f"pair_consistency[{M}]").message


def test_unscorable_pair_member_is_inconsistent():
    r = pair_gate([(0.9, None)], {"rules": {"pair_consistency": {"min_rate": 1.0}}})
    pc = rule(r, f"pair_consistency[{M}]")
    assert pc.value == 0.0 and "could not be scored" in pc.message


def test_pair_rows_that_form_no_pair_are_warned_about_and_counted():
    """Rows whose pair_id or role kept them from pairing (a trailing space, "Edited ", a missing
    partner) were gated as ordinary outputs with no word: the pair rule judged fewer pairs than
    given, the inconsistent one among the lost, and passed."""
    exs = [
        ex("1r", {"pair_id": "p1", "role": "reference"}),
        ex("1e", {"pair_id": "p1", "role": "edited"}),
        ex("2r", {"pair_id": "p2", "role": "reference"}),
        ex("2e", {"pair_id": "p2 ", "role": "edited"}),  # an export's stray space
        ex("3r", {"pair_id": "p3", "role": "Reference"}),
        ex("3e", {"pair_id": "p3", "role": "Edited "}),
        ex("lonely", {"pair_id": "z", "role": "edited"}),  # its reference was sampled away
        ex("no-role", {"pair_id": "p9"}),
        ex("no-id", {"role": "incorrect"}),
        ex("other", {"role": "summary"}),  # no pair field: an ordinary output
    ]
    pairs = find_pairs(exs)
    assert [(exs[p.faithful].id, exs[p.unfaithful].id) for p in pairs] == [
        ("1r", "1e"),
        ("2r", "2e"),
        ("3r", "3e"),
    ]
    cfg = GateConfig.from_dict({"metrics": [M], "rules": {"pair_consistency": 1.0}})
    values = [0.9, 0.1, 0.5, 0.8, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9]  # p2 is inconsistent
    r = evaluate(cfg, exs, scored(values), H)
    pc = rule(r, f"pair_consistency[{M}]")
    assert not pc.passed and pc.details["inconsistent_pairs"] == ["p2"]
    assert "2/3 pairs" in pc.message
    assert "3 rows with pair fields form no pair (gated as outputs)" in pc.message
    assert pc.details["unpaired_rows"] == 3
    assert {e.id for e in r.outputs} == {"1r", "2r", "3r", "lonely", "no-role", "no-id", "other"}
    orphans, merged = rules.ignored_pair_fields(cfg, exs)
    assert orphans.startswith("3 rows with pair fields form no pair")
    assert "'lonely' (pair_id 'z', role 'edited')" in orphans
    assert "'no-role' (pair_id 'p9')" in orphans and "'no-id' (role 'incorrect')" in orphans
    assert "'other'" not in orphans
    assert merged == (
        "pair_id values that differ only in surrounding whitespace are taken as one pair id: "
        "'p2', 'p2 '"
    )
    # Pairs of the rule's own making (generate = true) are passed in: their members are paired.
    assert rules.ignored_pair_fields(cfg, exs[:2], pairs=find_pairs(exs[:2])) == []


def test_an_unknown_role_in_a_pair_row_is_an_input_error():
    """A misspelt role ("edtied") made its row an ordinary output and its pair vanished from
    the rule; with a pair rule configured it is refused (exit 2) before scoring."""
    exs = pair_examples(1) + [
        ex("2r", {"pair_id": "p2", "role": "reference"}),
        ex("2e", {"pair_id": "p2", "role": "edtied"}),
    ]
    cfg = GateConfig.from_dict({"metrics": [M], "rules": {"pair_consistency": 1.0}})
    with pytest.raises(InputError) as err:
        rules.given_pairs(cfg, exs)
    message = str(err.value)
    assert message.startswith("1 row has a pair_id and a role that is neither faithful")
    assert "'2e' (pair_id 'p2', role 'edtied')" in message and "\n" not in message
    with pytest.raises(InputError, match="neither faithful"):
        evaluate(cfg, exs, scored([0.9, 0.1, 0.9, 0.1]), H)
    # Without a pair rule the fields are ignored (with their own warning), whatever the role.
    assert rules.given_pairs(GateConfig.from_dict({"metrics": [M]}), exs) == []


def test_a_pair_rule_whose_generation_made_no_edit_says_so():
    """With generate = true already set, the rule advised setting it."""
    cfg = {"rules": {"pair_consistency": {"min_rate": 0.5, "generate": True, "types": ["number"]}}}
    message = rule(gate([0.9], cfg), f"pair_consistency[{M}]").message
    assert message == (
        "no minimal pairs: generate = true made no edits of the selected types (number) of "
        "these outputs, and no rows with pair_id and role reference/edited pair up"
    )
    message = rule(gate([0.9], {"rules": {"pair_consistency": 0.5}}), f"pair_consistency[{M}]")
    assert "or set pair_consistency.generate = true" in message.message


def test_pairs_are_judged_only_by_the_pair_rules_metrics():
    """pair_consistency = { metrics = ["a"] } passed, yet the pair was listed as inconsistent
    by b, which no rule judges it on."""
    from faithgate.report import render

    hashes = {"a": "a:1", "b": "b:1"}
    exs = pair_examples(1)
    scores = [
        {"a": Score("a", 0.9, "a:1", "0r"), "b": Score("b", 0.1, "b:1", "0r")},
        {"a": Score("a", 0.2, "a:1", "0e"), "b": Score("b", 0.8, "b:1", "0e")},
    ]
    cfg = GateConfig.from_dict(
        {"metrics": ["a", "b"], "rules": {"pair_consistency": {"metrics": ["a"]}}}
    )
    r = evaluate(cfg, exs, scores, hashes)
    assert r.passed and [x.name for x in r.rules if x.kind == "pair_consistency"] == [
        "pair_consistency[a]"
    ]
    [pair] = r.pairs
    assert pair.consistent == {"a": True}  # b is shown, not judged
    assert pair.unfaithful_scores == {"a": 0.2, "b": 0.8}
    assert "inconsistent" not in render("terminal", r)
    assert "Inconsistent minimal pairs" not in render("markdown", r)
    html = render("html", r)
    assert "0.1000 / 0.8000 (not gated)" in html and 'class="fail-t">0.1000' not in html
    # An inconsistent pair lists the judged metric only.
    scores[0]["a"] = Score("a", 0.1, "a:1", "0r")
    bad = evaluate(cfg, exs, scores, hashes)
    text = render("terminal", bad)
    assert "p0 [Intrinsic Entity]: a 0.1000 faithful vs 0.2000 edited" in text
    assert "b 0.1000 faithful" not in text


def test_min_mean_does_not_say_unscored_outputs_fail_pass_rate():
    """ "(they fail pass_rate)" was printed beside a passing pass_rate."""
    r = gate([0.95, 0.95, None], {"rules": {"min_pass_rate": 0.5, "min_mean": 0.9}})
    assert rule(r, "pass_rate").passed
    message = rule(r, f"min_mean[{M}]").message
    assert "fail pass_rate" not in message
    assert message.endswith("(each counts as a failing example in pass_rate)")


@pytest.mark.parametrize(
    ("rules_table", "key"),
    [
        ({"min_mean": {"overlpa": 0.5}}, "rules.min_mean"),
        ({"pair_consistency": {"metrics": ["overlpa"]}}, "rules.pair_consistency.metrics"),
        ({"regression": {"metrics": ["overlpa"]}}, "rules.regression.metrics"),
        (
            {"regression": {"per_example_drop": {"overlpa": 0.1}}},
            "rules.regression.per_example_drop",
        ),
    ],
)
def test_a_misspelt_metric_in_a_rule_gets_a_suggestion(rules_table, key):
    """A typo in a rule's metric was "not selected", as if adding it to `metrics` would do."""
    cfg = GateConfig.from_dict({"metrics": [M], "rules": rules_table})
    with pytest.raises(InputError) as err:
        rules.check_rule_metrics(cfg)
    assert str(err.value) == f"{key}: no metric is named 'overlpa'; did you mean 'overlap'?"
    # A registered metric that is merely not selected keeps its message.
    text = str(rules_table).replace("overlpa", "overlap")
    cfg = GateConfig.from_dict({"metrics": [M], "rules": eval(text)})  # noqa: S307
    with pytest.raises(InputError, match=f"{key} names metric 'overlap', which is not selected"):
        rules.check_rule_metrics(cfg)


def test_a_limit_for_every_metric_on_the_default_metric_is_warned_about(tmp_path):
    """rules.min_mean = 0.6 (or --threshold 0.5) chosen for an old default metric was applied to
    the new default, with no `metrics` key and no warning."""
    bare = GateConfig.from_dict({})
    assert bare.default_metrics and rules.default_metric_limits(bare) == []
    cfg = GateConfig.from_dict({"rules": {"min_mean": 0.6}})
    [note] = rules.unused_thresholds(cfg)
    assert note.startswith(
        "rules.min_mean = 0.6 applies to ensemble, facts, the default metrics, as no"
    )
    assert "set `metrics` to the metric the limit was chosen for" in note
    flag = bare.override(threshold="0.5")
    assert rules.default_metric_limits(flag)[0].startswith(
        "the threshold 0.5 given for every metric applies to ensemble"
    )
    drop = GateConfig.from_dict({"rules": {"regression": {"per_example_drop": 0.05}}})
    assert (
        "rules.regression.per_example_drop = 0.05 applies" in rules.default_metric_limits(drop)[0]
    )
    # Named metrics, or a limit naming its metric, say nothing.
    for quiet in (
        GateConfig.from_dict({"metrics": ["ensemble"], "rules": {"min_mean": 0.6}}),
        cfg.override(metrics=["ensemble"]),
        bare.override(metrics=["ensemble"], threshold="0.5"),
        GateConfig.from_dict({"rules": {"min_mean": {"ensemble": 0.6}}}),
        GateConfig.from_dict({"thresholds": {"ensemble": 0.5}}),
        GateConfig(rules=cfg.rules),  # built in code: its metrics are the caller's choice
    ):
        assert rules.default_metric_limits(quiet) == []
    assert "default_metrics" not in cfg.to_dict() and "threshold_for_all" not in flag.to_dict()
    # Gate.run says it (the warning reaches check's stderr and the plugin's summary).
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": "0.9"}])
    fake = GateConfig.from_dict({"outputs": str(out), "rules": {"min_mean": 0.5}}, root=tmp_path)
    gate = Gate(dataclasses.replace(fake, metrics=(NAME,)))
    assert gate.run().passed
    assert gate.warnings == [rules.default_metric_limits(gate.config)[0]]
    assert gate.warnings[0].startswith(f"rules.min_mean = 0.5 applies to {NAME}, the default")


# ------------------------------------------------------------------ regression


def baseline_result(values, hash_=H[M]):
    cfg = GateConfig.from_dict({"metrics": [M]})
    exs = [ex(i) for i in range(len(values))]
    scores = [{M: Score(M, v, hash_, str(i))} for i, v in enumerate(values)]
    return evaluate(cfg, exs, scores, {M: hash_})


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
    r = gate([0.8], {"rules": {"regression": {}}}, baseline_error="baseline file x not found")
    assert not r.passed and "not found" in rule(r, f"regression[{M}]").message


def test_baseline_path_alone_enables_regression(tmp_path):
    r = gate([0.8], {"baseline": str(tmp_path / "b.json")}, baseline=baseline_result([0.8]))
    assert rule(r, f"regression[{M}]").passed


def per_example_gate(current, base, drop=0.05, extra=None, texts=None, base_texts=None):
    """Gate ``current`` values against a baseline of ``base`` values with per-example drops."""
    cfg = GateConfig.from_dict(
        {"metrics": [M], "rules": {"regression": {"per_example_drop": drop, **(extra or {})}}}
    )
    texts = texts or [f"summary {i}." for i in range(len(current))]
    base_texts = base_texts or [f"summary {i}." for i in range(len(base))]
    b_cfg = GateConfig.from_dict({"metrics": [M]})
    b_exs = [ex(i, text=t) for i, t in enumerate(base_texts)]
    b_scores = [{M: Score(M, v, H[M], str(i))} for i, v in enumerate(base)]
    baseline = evaluate(b_cfg, b_exs, b_scores, H)
    exs = [ex(i, text=t) for i, t in enumerate(texts)]
    scores = [{M: Score(M, v, H[M], str(i))} for i, v in enumerate(current)]
    return evaluate(cfg, exs, scores, H, baseline=baseline)


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
    from faithgate.rules import check_rule_metrics

    with pytest.raises(InputError, match="per_example_drop: no metric is named 'other'"):
        check_rule_metrics(cfg)  # also without a baseline: checked when the gate is configured


M2 = "m2"


def two_metric_gate(current, baseline_metrics, other_hash=None, **kw):
    """Gate 3 outputs scored 0.8 by ``M`` and ``current`` by ``M2`` (per_example_drop 0.05
    for ``M2`` only, which is outside ``rules.regression.metrics``) against a baseline that
    scored them 0.8 and 0.9 by ``baseline_metrics`` (``M2`` under ``other_hash`` if given)."""
    hashes = {M: H[M], M2: "m2:abc"}
    cfg = GateConfig.from_dict(
        {
            "metrics": [M, M2],
            "rules": {"regression": {"metrics": [M], "per_example_drop": {M2: 0.05}}},
        }
    )
    exs = [ex(i) for i in range(3)]
    base_hashes = {M: H[M], M2: other_hash or hashes[M2]}
    base_hashes = {m: h for m, h in base_hashes.items() if m in baseline_metrics}
    base_scores = [
        {m: Score(m, 0.8 if m == M else 0.9, base_hashes[m], str(i)) for m in baseline_metrics}
        for i in range(3)
    ]
    b_cfg = GateConfig.from_dict({"metrics": list(baseline_metrics)})
    baseline = evaluate(b_cfg, exs, base_scores, base_hashes)
    scores = [
        {M: Score(M, 0.8, H[M], str(i)), M2: Score(M2, current, hashes[M2], str(i))}
        for i in range(3)
    ]
    return evaluate(cfg, exs, scores, hashes, baseline=baseline, **kw)


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
    r = two_metric_gate(0.5, [M], baseline_replaced={M2: why})
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
        baseline=baseline_result([0.9], "m:other"),
        baseline_replaced={M: "replaced"},
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


def test_the_result_json_reference_in_gate_md_names_every_key():
    # docs/gate.md shows the result JSON a user's CI reads: the same keys, at every level.
    import re
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "gate.md").read_text(encoding="utf-8")
    block = re.search(r"## Result JSON.*?```json\n(.*?)```", page, re.S)
    assert block is not None
    doc = json.loads(block.group(1))
    r = pair_gate([(0.9, 0.1)], {"thresholds": {M: 0.5}, "rules": {"pair_consistency": 1.0}})
    real = json.loads(json.dumps(r.to_dict()))

    def keys(data: dict) -> list:
        return sorted(data)

    assert keys(doc) == keys(real)
    assert keys(doc["rules"][0]) == keys(real["rules"][0])
    assert keys(doc["examples"][0]) == keys(real["examples"][0])
    assert keys(doc["examples"][0]["scores"]["bertscore"]) == keys(real["examples"][0]["scores"][M])
    assert keys(doc["pairs"][0]) == keys(real["pairs"][0])


def test_changed_words():
    from faithgate.rules import changed_words

    assert changed_words("a b c", "a b c") == 0
    assert changed_words("a b c", "a x c") == 1
    assert changed_words("a b c", "a x y z c") == 3
    assert changed_words("a b c", "a c") == 1


# ------------------------------------------------------------------ result JSON


def test_result_json_round_trip_and_save(tmp_path):
    r = pair_gate([(0.9, 0.1)], {"thresholds": {M: 0.5}, "rules": {"pair_consistency": 1.0}})
    data = json.loads(json.dumps(r.to_dict()))
    back = GateResult.from_dict(data)
    assert back.to_dict() == r.to_dict()
    assert data["verdict"] == "pass" and data["pass_rate"] == 1.0
    assert data["settings_hashes"] == H and data["means"] == {M: 0.9}
    path = r.save(tmp_path / "x" / "result.json")
    assert GateResult.load(path).to_dict() == r.to_dict()
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="bad.json"):
        GateResult.load(tmp_path / "bad.json")


# ------------------------------------------------------------------ the Gate (with a metric)


def write_outputs(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_gate_run_uses_the_cache_so_unchanged_examples_are_not_rescored(tmp_path):
    rows = [{"id": f"e{i}", "source": "src", "summary": summary(0.5 + i / 10)} for i in range(4)]
    out = write_outputs(tmp_path / "outputs.jsonl", rows)
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "cache_dir": ".fg", "thresholds": {NAME: 0.55}},
        root=tmp_path,
    )
    FakeMetric.calls.clear()
    first = Gate(cfg).run()
    assert sorted(FakeMetric.calls) == ["e0", "e1", "e2", "e3"]
    assert first.cache == {"hits": 0, "misses": 4}
    assert [e.passed for e in first.examples] == [False, True, True, True]
    FakeMetric.calls.clear()
    second = Gate(cfg).run()  # a new Gate and Scorer: only the on-disk cache is shared
    assert FakeMetric.calls == []
    assert second.cache == {"hits": 4, "misses": 0}
    assert [e.to_dict() for e in second.examples] == [e.to_dict() for e in first.examples]
    # one changed summary is the only one rescored
    rows[2]["summary"] = summary(0.95)
    write_outputs(out, rows)
    FakeMetric.calls.clear()
    third = Gate(cfg).run()
    assert FakeMetric.calls == ["e2"]
    assert (tmp_path / ".fg" / "last-result.json").is_file()
    assert third.examples[2].scores[NAME].value == pytest.approx(0.95)


def test_gate_run_unscorable_and_update_baseline(tmp_path):
    rows = [
        {"id": "ok", "source": "src", "summary": summary(0.9)},
        {"id": "bad", "source": "src", "summary": "UNSCORABLE 0.9 x."},
    ]
    out = write_outputs(tmp_path / "o.jsonl", rows)
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "baseline": "base.json"}, root=tmp_path
    )
    gate = Gate(cfg, update_baseline=True)
    result = gate.run()
    assert not result.passed
    assert result.examples[1].message.startswith(f"{NAME}: could not score (ValueError")
    # A failing run is not written as the baseline unless forced (issue 16).
    assert not (tmp_path / "base.json").exists()
    assert gate.baseline_note.startswith("baseline NOT updated: the gate failed")
    forced = Gate(cfg, update_baseline=True, force_baseline=True)
    forced.run()
    assert "forced" in forced.baseline_note
    base = GateResult.load(tmp_path / "base.json")
    assert base.values(NAME) == {"ok": pytest.approx(0.9)}
    # without --update-baseline a missing baseline file skips the regression rule, saying how
    # to create the file; require_baseline makes it fail instead.
    cfg2 = cfg.override(baseline=str(tmp_path / "missing.json"), outputs=str(out))
    r2 = Gate(cfg2).run()
    reg = rule(r2, f"regression[{NAME}]")
    assert reg.passed and reg.skipped and "update-baseline" in reg.message
    strict = GateConfig.from_dict(
        {
            "metrics": [NAME],
            "outputs": str(out),
            "baseline": "missing.json",
            "rules": {"regression": {"require_baseline": True}},
        },
        root=tmp_path,
    )
    reg = rule(Gate(strict).run(), f"regression[{NAME}]")
    assert not reg.passed and not reg.skipped and "update-baseline" in reg.message


def test_update_baseline_adds_a_newly_selected_metric(tmp_path):
    """A baseline without a selected metric's scores (the metric was added since) is replaced
    by --update-baseline, as one made with other settings is, instead of failing the run."""
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": summary(0.9)}])
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "baseline": "base.json"}, root=tmp_path
    )
    Gate(cfg, update_baseline=True).run()
    data = json.loads((tmp_path / "base.json").read_text())
    data["metrics"], data["settings_hashes"] = [], {}
    for e in data["examples"]:
        e["scores"] = {}
    (tmp_path / "base.json").write_text(json.dumps(data))
    assert not Gate(cfg).run().passed  # "the baseline has no ... scores"
    gate = Gate(cfg, update_baseline=True)
    assert gate.run().passed
    assert GateResult.load(tmp_path / "base.json").values(NAME) == {"a": pytest.approx(0.9)}


def test_update_baseline_replaces_only_the_metrics_it_cannot_compare(tmp_path):
    """One re-configured (or newly selected) metric dropped the whole baseline under
    --update-baseline: the regression of every other metric was skipped, and a run that
    regressed on them passed and became the reference."""
    rows = [{"id": f"e{i}", "source": f"src {i}", "summary": summary(0.9)} for i in range(8)]
    out = write_outputs(tmp_path / "o.jsonl", rows)
    table = {
        "metrics": [NAME, "repetition"],
        "outputs": str(out),
        "baseline": "base.json",
        "thresholds": {NAME: 0.1},
    }
    assert Gate(GateConfig.from_dict(table, root=tmp_path), update_baseline=True).run().passed
    base = tmp_path / "base.json"
    recorded = base.read_text()
    # repetition re-configured: its baseline scores are no longer comparable; gate_fake's are.
    table["metric_settings"] = {"repetition": {"n": 3}}
    cfg = GateConfig.from_dict(table, root=tmp_path)
    write_outputs(out, [{**row, "summary": summary(0.5)} for row in rows])
    gate = Gate(cfg, update_baseline=True)
    result = gate.run()
    reg = rule(result, f"regression[{NAME}]")
    assert not reg.passed and not reg.skipped and "dropped by 0.4000" in reg.message
    replaced = rule(result, "regression[repetition]")
    assert replaced.passed and replaced.skipped
    assert replaced.message == (
        "the baseline at base.json holds no repetition scores made with these settings (this "
        "run replaces it): nothing to compare yet"
    )
    assert not result.passed
    assert gate.baseline_note.startswith("baseline NOT updated: the gate failed")
    assert base.read_text() == recorded  # the regressed run is not the reference
    # A run that did not regress replaces it, the re-configured metric's scores with it ...
    write_outputs(out, rows)
    result = Gate(cfg, update_baseline=True).run()
    assert result.passed and not rule(result, f"regression[{NAME}]").skipped
    assert rule(result, "regression[repetition]").skipped
    assert GateResult.load(base).settings_hashes == result.settings_hashes
    # ... which the next run compares, every metric of it.
    again = Gate(cfg).run()
    assert again.passed and not any(r.skipped for r in again.rules)


def test_regression_without_a_baseline_path_is_a_config_error_before_scoring(tmp_path):
    """rules.regression with no baseline path failed the gate ("no baseline given", exit 1)
    after a full scoring run, naming no key to set."""
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": summary(0.9)}])
    table = {"metrics": [NAME], "outputs": str(out), "thresholds": {NAME: 0.5}}
    for regression in (True, {"require_baseline": True}, {"per_example_drop": 0.1}):
        cfg = GateConfig.from_dict({**table, "rules": {"regression": regression}}, root=tmp_path)
        FakeMetric.calls.clear()
        with pytest.raises(ConfigError) as err:
            Gate(cfg).run()
        assert str(err.value) == (
            "rules.regression needs a baseline to compare with: set 'baseline' (the path of a "
            "previous result JSON) in the configuration, or pass --baseline"
        )
        assert err.value.exit_code == 2 and FakeMetric.calls == []
    # A configured path whose file does not exist yet is a first run: skipped, or failed with
    # require_baseline, as before.
    for require, skipped in ((False, True), (True, False)):
        cfg = GateConfig.from_dict(
            {
                **table,
                "baseline": "missing.json",
                "rules": {"regression": {"require_baseline": require}},
            },
            root=tmp_path,
        )
        reg = rule(Gate(cfg).run(), f"regression[{NAME}]")
        assert reg.skipped is skipped and reg.passed is skipped


def test_scores_made_under_other_settings_are_refused_before_anything_is_written(
    tmp_path, monkeypatch
):
    """A run whose scores carried another settings hash than it records was gated and written
    (baseline, result JSON), and every later run refused that file as a baseline."""
    original = FakeMetric.score_batch

    def elsewhere(self, examples, ctx):
        scores = original(self, examples, ctx)
        for score in scores:
            score.settings_hash += "-elsewhere"
        return scores

    monkeypatch.setattr(FakeMetric, "score_batch", elsewhere)
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": summary(0.9)}])
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "baseline": "base.json"}, root=tmp_path
    )
    with pytest.raises(InputError, match=r"example 'a': its gate_fake score was made with .*-else"):
        Gate(cfg, update_baseline=True, use_cache=False).run()
    assert not (tmp_path / "base.json").exists()
    # Nor is a result saved whose scores were changed after it was made.
    result = gate([0.9])
    result.examples[0].scores[M].settings_hash = "m:other"
    with pytest.raises(InputError, match="this result's m scores with m:abc"):
        result.save(tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()
    # Nor as a baseline written with the reports, a json report at its path included.
    from faithgate.config import Reports
    from faithgate.report import write_reports

    base = tmp_path / "base.json"
    for reports in (Reports(json=base), Reports(markdown=tmp_path / "r.md")):
        with pytest.raises(InputError, match="this result's m scores with m:abc"):
            write_reports(result, reports, baseline=base)
        assert not base.exists() and not (tmp_path / "r.md").exists()


def test_a_last_result_that_cannot_be_written_is_a_warning(tmp_path, monkeypatch):
    """A full cache directory failed a passing gate with exit 2 (no reports) when
    last-result.json, a convenience beside the cache, could not be written."""
    from faithgate import result as result_module
    from faithgate.errors import WriteError

    write = result_module.atomic_write_text

    def disk_full(path, text):
        if path.name == "last-result.json":
            raise WriteError(path, "No space left on device")
        return write(path, text)

    monkeypatch.setattr(result_module, "atomic_write_text", disk_full)
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": summary(0.9)}])
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "cache_dir": ".fg", "thresholds": {NAME: 0.5}},
        root=tmp_path,
    )
    stale = tmp_path / ".fg" / "last-result.json"
    stale.parent.mkdir()
    stale.write_text('{"verdict": "pass", "from": "the previous run"}')
    gate = Gate(cfg)
    result = gate.run()
    assert result.passed
    [warning] = [w for w in gate.warnings if "last-result.json" in w]
    assert warning.startswith("cannot write ") and "the verdict and reports of this run stand" in (
        warning
    )
    # The previous run's file would read as this run's result: it is gone, and the warning says so.
    assert not stale.exists() and "the previous run's file there is removed" in warning
    assert "left unchanged" not in warning  # it is not: the old file went


def test_no_cache_scores_afresh_with_a_scorer_that_has_its_own_cache(tmp_path):
    """Gate(use_cache=False) with a scorer carrying its own cache was served from that cache
    on the second run (and reported no cache use)."""
    from faithgate.cache import ScoreCache
    from faithgate.scorer import Scorer

    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": summary(0.9)}])
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "thresholds": {NAME: 0.5}}, root=tmp_path
    )
    own = ScoreCache(tmp_path / "own.sqlite")
    scorer = Scorer([NAME], cache=own)
    FakeMetric.calls.clear()
    for _ in range(2):
        assert Gate(cfg, scorer=scorer, use_cache=False).run().cache == {}
    assert FakeMetric.calls == ["a", "a"]
    assert (own.hits, own.misses) == (0, 0)
    assert not (tmp_path / ".faithgate").exists()


def test_duplicate_ids_given_to_run_are_refused(tmp_path):
    """load_examples refuses them in a file; a caller's list used to be gated with the last
    example of an id standing in for the others (a failing summary hidden by a good twin)."""
    cfg = GateConfig.from_dict({"metrics": [NAME], "thresholds": {NAME: 0.5}}, root=tmp_path)
    rows = [Example("1", "s", summary(0.1)), Example("1", "s", summary(0.9))]
    with pytest.raises(InputError, match="duplicate example id '1': ids must be unique"):
        Gate(cfg).run(rows)


def test_generated_variant_ids_never_take_a_users_id(tmp_path, monkeypatch):
    fake = types.ModuleType("faithgate.perturb")
    fake.perturb = lambda source, summary_text, types=None, seed=0: [
        types_ns(summary="0.1" + summary_text[3:], error_type="Intrinsic Entity")
    ]
    types_ns = types.SimpleNamespace
    monkeypatch.setitem(__import__("sys").modules, "faithgate.perturb", fake)
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "rules": {"pair_consistency": {"min_rate": 0.5, "generate": True}}},
        root=tmp_path,
    )
    rows = [Example("a", "s", summary(0.9)), Example("a~0", "s", summary(0.8))]
    result = Gate(cfg).run(rows)
    ids = [e.id for e in result.examples]
    assert len(ids) == len(set(ids)) == 4 and "a~0~" in ids


def test_gate_needs_something_to_gate(tmp_path):
    with pytest.raises(InputError, match="nothing to gate"):
        Gate(GateConfig.from_dict({"metrics": [NAME]}, root=tmp_path)).run()


def test_a_gate_without_any_criterion_is_refused_before_scoring(tmp_path):
    """No threshold, min_mean, pair consistency or regression: the gate would pass whatever the
    scores, so it is a configuration error (exit 2), raised before any example is scored. Any
    one criterion is enough."""
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": "0.1"}])
    FakeMetric.calls.clear()
    bare = {"metrics": [NAME], "outputs": str(out)}
    with pytest.raises(ConfigError, match="the gate has no criterion") as info:
        Gate(GateConfig.from_dict(bare, root=tmp_path)).run()
    assert info.value.exit_code == 2 and FakeMetric.calls == []
    # A threshold for another metric than the selected ones is no criterion either, and the
    # message says so (a configuration written for the default metric of an older faithgate).
    with pytest.raises(ConfigError, match="thresholds given are for overlap, which `metrics`"):
        Gate(GateConfig.from_dict({**bare, "thresholds": {"overlap": 0.5}}, root=tmp_path)).run()
    # Thresholds that min_pass_rate = 0 lets every example fail judge nothing either.
    never = {**bare, "thresholds": {NAME: 0.99}, "rules": {"min_pass_rate": 0.0}}
    with pytest.raises(ConfigError, match="min_pass_rate = 0 lets every example fail"):
        Gate(GateConfig.from_dict(never, root=tmp_path)).run()
    # Nor does pair consistency at min_rate 0: any ranking holds it.
    rate0 = {**bare, "rules": {"pair_consistency": {"min_rate": 0.0, "generate": True}}}
    with pytest.raises(ConfigError, match="the gate has no criterion"):
        Gate(GateConfig.from_dict(rate0, root=tmp_path)).run()
    # Beside a real criterion, an unselected metric's threshold is a warning, not ignored silently.
    cfg = GateConfig.from_dict({**bare, "thresholds": {NAME: 0.0, "overlap": 0.5}}, root=tmp_path)
    gate = Gate(cfg)
    assert gate.run().passed
    assert gate.warnings == [
        f"thresholds for overlap are not applied: not selected metrics (metrics: {NAME}); add "
        "them to `metrics` to gate on them"
    ]
    # Settings for a metric that is not selected were dropped unsaid (a mistyped name is an
    # error: test_a_threshold_for_no_registered_metric_is_an_error).
    cfg = GateConfig.from_dict(
        {**bare, "thresholds": {NAME: 0.0}, "metric_settings": {"overlap": {"n": 2}}},
        root=tmp_path,
    )
    gate = Gate(cfg)
    gate.run()
    assert gate.warnings == [
        f"metric_settings for overlap are not applied: not selected metrics (metrics: {NAME})"
    ]
    for criterion in (
        {"thresholds": {NAME: 0.5}},
        {"rules": {"min_mean": {NAME: 0.5}}},
        {"rules": {"pair_consistency": 0.5}},
        {"rules": {"regression": True}},
        {"baseline": str(tmp_path / "baseline.json")},
    ):
        rules.check_has_criterion(GateConfig.from_dict({**bare, **criterion}, root=tmp_path))


def test_limits_outside_a_metrics_range_are_no_criterion_and_are_warned(tmp_path):
    """A threshold or min_mean at or below the lowest score a metric can take passes every
    example: it used to count as the gate's criterion, so `overlap = -1` gated nothing."""
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": "0.1"}])
    bare = {"metrics": [NAME], "outputs": str(out)}
    unit = {NAME: (0.0, 1.0)}
    for idle in (
        {"thresholds": {NAME: -1}},
        {"thresholds": {NAME: 0.0}},
        {"rules": {"min_mean": 0}},
    ):
        cfg = GateConfig.from_dict({**bare, **idle}, root=tmp_path)
        rules.check_has_criterion(cfg)  # an unbounded metric: every limit can fail
        with pytest.raises(ConfigError, match=rf"cannot fail: {NAME} scores are >= 0, so it"):
            rules.check_has_criterion(cfg, unit)
    for judging in ({"thresholds": {NAME: 1e-9}}, {"rules": {"min_mean": {"*": 0.5}}}):
        cfg = GateConfig.from_dict({**bare, **judging}, root=tmp_path)
        rules.check_has_criterion(cfg, unit)
        assert rules.limits_outside_range(cfg, unit) == []
    cfg = GateConfig.from_dict(
        {**bare, "thresholds": {NAME: 1.5}, "rules": {"min_mean": -2}}, root=tmp_path
    )
    rules.check_has_criterion(cfg, unit)  # a threshold no score meets fails the run: it judges
    assert rules.limits_outside_range(cfg, unit) == [
        f"threshold {NAME} = 1.5 cannot be met: {NAME} scores are <= 1, so it fails every run",
        f"rules.min_mean {NAME} = -2.0 cannot fail: {NAME} scores are >= 0, so it judges nothing",
    ]


def test_a_real_metrics_range_refuses_an_idle_threshold_before_scoring(tmp_path):
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s t", "summary": "s"}])
    cfg = GateConfig.from_dict(
        {"metrics": ["overlap"], "outputs": str(out), "thresholds": {"overlap": -1}},
        root=tmp_path,
    )
    with pytest.raises(ConfigError, match="threshold overlap = -1.0 cannot fail: overlap scores"):
        Gate(cfg).run()


def test_generated_pairs_use_perturb(tmp_path, monkeypatch):
    def fake_perturb(source, summary_text, types=None, seed=0):
        # The "edit" lowers the first sentence's support, so the metric must rank it lower.
        edited = "0.1" + summary_text[3:]
        return [types_ns(summary=edited, error_type="Intrinsic Entity")]

    types_ns = types.SimpleNamespace
    fake = types.ModuleType("faithgate.perturb")
    fake.perturb = fake_perturb
    monkeypatch.setitem(__import__("sys").modules, "faithgate.perturb", fake)
    rows = [{"id": f"e{i}", "source": "src", "summary": summary(0.8)} for i in range(3)]
    out = write_outputs(tmp_path / "o.jsonl", rows)
    cfg = GateConfig.from_dict(
        {
            "metrics": [NAME],
            "outputs": str(out),
            "rules": {"pair_consistency": {"min_rate": 1.0, "generate": True}},
        },
        root=tmp_path,
    )
    r = Gate(cfg).run()
    assert len(r.pairs) == 3 and all(p.generated for p in r.pairs)
    assert r.n_examples == 3  # generated variants are probes, not outputs
    assert rule(r, f"pair_consistency[{NAME}]").value == 1.0 and r.passed


# ------------------------------------------------------------------ summarizer


def test_run_summarizer_and_its_errors(tmp_path):
    (tmp_path / "mysumm.py").write_text(
        "def lead(source):\n    return source.split('.')[0] + '.'\n"
        "def bad(source):\n    return 3\n"
        "def boom(source):\n    raise RuntimeError('no GPU')\n"
        "def bye(source):\n    import sys; sys.exit()\n"
        "def skips(source):\n    import pytest; pytest.importorskip('no_such_module_xyz')\n"
        "NOT_CALLABLE = 1\n"
    )
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "skips_on_import.py").write_text("import pytest\npytest.skip('later')\n")
    data = write_outputs(
        tmp_path / "sources.jsonl",
        [{"id": "a", "source": "First. Second."}, {"source": "Only one.", "label": 1}],
    )
    exs = run_summarizer("mysumm:lead", data, search_path=[tmp_path])
    assert [(e.id, e.summary) for e in exs] == [("a", "First."), ("2", "Only one.")]
    assert exs[1].label == 1
    with pytest.raises(InputError, match="returned int for record 'a'"):
        run_summarizer("mysumm:bad", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="raised RuntimeError on record 'a': no GPU"):
        run_summarizer("mysumm:boom", data, search_path=[tmp_path])
    # sys.exit() in a summarizer ended the gate with exit 0 and no verdict: a passing build.
    with pytest.raises(InputError, match=r"called sys.exit\(None\) on record 'a'"):
        run_summarizer("mysumm:bye", data, search_path=[tmp_path])
    with pytest.raises(InputError, match=r"importing 'exits_on_import' called sys.exit\(0\)"):
        run_summarizer("exits_on_import:f", data, search_path=[tmp_path])
    # pytest.skip() (a BaseException) skipped the gate item under the plugin: a passing build.
    with pytest.raises(InputError, match="raised Skipped on record 'a': could not import 'no_"):
        run_summarizer("mysumm:skips", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="importing 'skips_on_import' raised Skipped: later"):
        run_summarizer("skips_on_import:f", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="is not callable"):
        run_summarizer("mysumm:NOT_CALLABLE", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="has no 'nope'"):
        run_summarizer("mysumm:nope", data, search_path=[tmp_path])
    with pytest.raises(InputError, match="cannot import 'no_such_module_xyz'"):
        run_summarizer("no_such_module_xyz:f", data)
    with pytest.raises(InputError, match="sources.jsonl:1: missing required field 'source'"):
        run_summarizer(
            "mysumm:lead",
            write_outputs(tmp_path / "sources.jsonl", [{"id": 1}]),
            search_path=[tmp_path],
        )


def test_describe_edit():
    from faithgate.gate import describe_edit

    assert describe_edit("Rosie appeared on the cover.", "Rosie confessed on the cover.") == (
        "'appeared' -> 'confessed'"
    )
    assert describe_edit("He won.", "He never won.") == "+'never'"
    assert describe_edit("a b c", "a c") == "-'b'"


def test_default_cache_dir_no_cache_and_progress_bar(tmp_path, capsys):
    rows = [
        {"id": f"e{i}", "source": "src", "summary": summary(0.9, words=f"w{i}")} for i in range(40)
    ]
    out = write_outputs(tmp_path / "o.jsonl", rows)
    cfg = GateConfig.from_dict(
        {"metrics": [NAME], "outputs": str(out), "thresholds": {NAME: 0.5}}, root=tmp_path
    )
    assert cfg.cache_path == tmp_path / ".faithgate"
    FakeMetric.calls.clear()
    r = Gate(cfg, progress=True).run()  # scored in chunks behind a tqdm bar
    assert r.passed and r.n_examples == 40 and len(FakeMetric.calls) == 40
    assert "scoring" in capsys.readouterr().err
    assert (tmp_path / ".faithgate" / "scores.sqlite").is_file()
    FakeMetric.calls.clear()
    r = Gate(cfg, use_cache=False).run()
    assert len(FakeMetric.calls) == 40 and r.cache == {}


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


def test_a_source_that_does_not_read_as_english_gets_no_generated_pair_and_a_warning(tmp_path):
    """perturb's English rules made garbage edits of German summaries, which flattered the
    pair rule; such outputs now get no generated pair, the gate says why, and with no pair at
    all the rule fails."""
    german = (
        "Der Bürgermeister von Berlin, Klaus Wowereit, eröffnete am Montag den neuen Flughafen. "
        "Er sagte, das Projekt habe sechs Milliarden Euro gekostet und sei ein großer Erfolg für "
        "die Stadt, die lange darauf gewartet habe."
    )
    rows = [{"id": "de", "source": german, "summary": summary(0.8) + " Wowereit eröffnete ihn."}]
    out = write_outputs(tmp_path / "o.jsonl", rows)
    cfg = GateConfig.from_dict(
        {
            "metrics": [NAME],
            "outputs": str(out),
            "rules": {"pair_consistency": {"min_rate": 0.5, "generate": True}},
        },
        root=tmp_path,
    )
    g = Gate(cfg)
    r = g.run()
    assert r.pairs == [] and not r.passed
    [note] = [w for w in g.warnings if "minimal pair" in w]
    assert note.startswith("1 output(s) got no generated minimal pair: their source does not read")


def test_an_int_too_large_for_a_float_is_no_finite_number():
    # math.isfinite(10**400) raises OverflowError: a cache row or bound of that size must be
    # refused as "no number", not crash its reader.
    from faithgate.numbers import is_finite_number

    assert is_finite_number(3) and is_finite_number(0.5)
    assert not is_finite_number(10**400)
    assert not is_finite_number(-(10**400))
    assert not is_finite_number(True)
