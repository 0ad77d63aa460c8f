"""The checks of a configuration before a run: rules naming metrics, limits for the default
metric, a regression rule without a baseline, and a gate without any criterion."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest
from gate_cases import (
    M,
    rule,
    write_outputs,
)
from gate_fakes import NAME, FakeMetric, summary

from faithgate.config import GateConfig, _check
from faithgate.errors import ConfigError, InputError
from faithgate.gate import Gate, checks


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
        checks.check_rule_metrics(cfg)
    assert str(err.value) == f"{key}: no metric is named 'overlpa'; did you mean 'overlap'?"
    # A registered metric that is merely not selected keeps its message.
    text = str(rules_table).replace("overlpa", "overlap")
    cfg = GateConfig.from_dict({"metrics": [M], "rules": eval(text)})  # noqa: S307
    with pytest.raises(InputError, match=f"{key} names metric 'overlap', which is not selected"):
        checks.check_rule_metrics(cfg)


def test_a_limit_for_every_metric_on_the_default_metric_is_warned_about(tmp_path):
    """rules.min_mean = 0.6 (or --threshold 0.5) chosen for an old default metric was applied to
    the new default, with no `metrics` key and no warning."""
    bare = GateConfig.from_dict({})
    assert bare.default_metrics and checks.default_metric_limits(bare) == []
    cfg = GateConfig.from_dict({"rules": {"min_mean": 0.6}})
    [note] = checks.unused_thresholds(cfg)
    assert note.startswith(
        "rules.min_mean = 0.6 applies to ensemble, facts, the default metrics, as no"
    )
    assert "set `metrics` to the metric the limit was chosen for" in note
    flag = bare.override(threshold="0.5")
    assert checks.default_metric_limits(flag)[0].startswith(
        "the threshold 0.5 given for every metric applies to ensemble"
    )
    drop = GateConfig.from_dict({"rules": {"regression": {"per_example_drop": 0.05}}})
    assert (
        "rules.regression.per_example_drop = 0.05 applies" in checks.default_metric_limits(drop)[0]
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
        assert checks.default_metric_limits(quiet) == []
    assert "default_metrics" not in cfg.to_dict() and "threshold_for_all" not in flag.to_dict()
    # Gate.run says it (the warning reaches check's stderr and the plugin's summary).
    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": "0.9"}])
    fake = GateConfig.from_dict({"outputs": str(out), "rules": {"min_mean": 0.5}}, root=tmp_path)
    gate = Gate(dataclasses.replace(fake, metrics=(NAME,)))
    assert gate.run().passed
    assert gate.warnings == [checks.default_metric_limits(gate.config)[0]]
    assert gate.warnings[0].startswith(f"rules.min_mean = 0.5 applies to {NAME}, the default")


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
        checks.check_has_criterion(GateConfig.from_dict({**bare, **criterion}, root=tmp_path))


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
        checks.check_has_criterion(cfg)  # an unbounded metric: every limit can fail
        with pytest.raises(ConfigError, match=rf"cannot fail: {NAME} scores are >= 0, so it"):
            checks.check_has_criterion(cfg, unit)
    for judging in ({"thresholds": {NAME: 1e-9}}, {"rules": {"min_mean": {"*": 0.5}}}):
        cfg = GateConfig.from_dict({**bare, **judging}, root=tmp_path)
        checks.check_has_criterion(cfg, unit)
        assert checks.limits_outside_range(cfg, unit) == []
    cfg = GateConfig.from_dict(
        {**bare, "thresholds": {NAME: 1.5}, "rules": {"min_mean": -2}}, root=tmp_path
    )
    checks.check_has_criterion(cfg, unit)  # a threshold no score meets fails the run: it judges
    assert checks.limits_outside_range(cfg, unit) == [
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


def test_an_int_too_large_for_a_float_is_no_finite_number():
    # math.isfinite(10**400) raises OverflowError: a cache row or bound of that size must be
    # refused as "no number", not crash its reader.
    from faithgate.numbers import is_finite_number

    assert is_finite_number(3) and is_finite_number(0.5)
    assert not is_finite_number(10**400)
    assert not is_finite_number(-(10**400))
    assert not is_finite_number(True)


def test_check_config_makes_one_pass_and_keeps_the_order_of_its_errors(tmp_path):
    """Every check runs once, and its errors come back in the order ``Gate.run`` raises them:
    a rule naming an unselected metric, rules.regression without a baseline, a threshold for
    no metric, and a --baseline that does not exist."""
    from faithgate.gate import BaselinePolicy, check_config

    out = write_outputs(tmp_path / "o.jsonl", [{"id": "a", "source": "s", "summary": "x"}])
    table = {
        "metrics": [NAME],
        "outputs": str(out),
        "thresholds": {"overlpa": 0.5},
        "rules": {"min_mean": {"repetition": 0.5}, "regression": True},
    }
    found = check_config(GateConfig.from_dict(table, root=tmp_path), BaselinePolicy())
    assert [type(e) for e in found.errors] == [InputError, ConfigError, ConfigError]
    assert "rules.min_mean names metric 'repetition', which is not selected" in str(found.errors[0])
    assert str(found.errors[1]).startswith("rules.regression needs a baseline to compare with")
    assert "thresholds.overlpa" in str(found.errors[2])
    with pytest.raises(InputError, match="rules.min_mean names metric"):
        found.raise_errors()
    explicit = BaselinePolicy(explicit=True)
    cfg = GateConfig.from_dict({"metrics": [NAME], "baseline": "typo.json"}, root=tmp_path)
    [missing] = check_config(cfg, explicit).errors
    assert str(missing).startswith("no baseline at typo.json (given with --baseline)")
    # This run creates it: no error.
    assert check_config(cfg, BaselinePolicy(update=True, explicit=True)).errors == []


def test_check_config_without_the_registry_leaves_metric_names_to_the_run(tmp_path):
    """pytest checks before collection, when a conftest may still register a metric: the
    checks that need the registry (metric names, ranges, the criterion) wait for the gate."""
    from faithgate.gate import check_config

    cfg = GateConfig.from_dict({"metrics": [NAME], "thresholds": {"overlpa": 0.5}}, root=tmp_path)
    assert check_config(cfg, registry=False).errors == []
    assert check_config(cfg, registry=False).no_criterion is None
    found = check_config(cfg)
    assert "thresholds.overlpa" in str(found.errors[0])
    assert found.no_criterion is not None  # nothing judges NAME
    # rules.regression without a baseline needs no registry: refused before collection too.
    bare = GateConfig.from_dict({"metrics": [NAME], "rules": {"regression": True}}, root=tmp_path)
    [error] = check_config(bare, registry=False).errors
    assert str(error).startswith("rules.regression needs a baseline to compare with")


@dataclass(frozen=True)
class ToyRule:
    """A throwaway rule's configuration: what a newcomer writes to add a rule."""

    limit: Annotated[float, _check("number")] = 0.5
    strict: Annotated[bool, _check("boolean")] = False
    window: Annotated[int, _check("integer")] = 3
    metrics: Annotated[tuple[str, ...] | None, _check("string_list")] = None


def test_a_rule_table_is_read_by_its_dataclass_fields():
    """A rule added to ``Rules`` needs no parser of its own: its table is read by the annotated
    types of its fields (the schema), with the same messages as the other keys."""
    from faithgate.config import _config_error, _fields, _Parser
    from faithgate.schema import ValidationError, adapter

    shape = Annotated[ToyRule, _check("keys", _fields(ToyRule))]
    parser = _Parser("config", Path.cwd())

    def read(table):
        try:
            return adapter(shape).validate_python(table, context=parser)
        except ValidationError as exc:
            raise _config_error(exc, "config") from None

    assert read({"limit": 1, "strict": True, "window": 4, "metrics": "m"}) == ToyRule(
        1.0, True, 4, ("m",)
    )
    assert read({}) == ToyRule()
    with pytest.raises(ConfigError, match=r"config: window: expected an integer, got"):
        read({"window": 1.5})
    with pytest.raises(ConfigError, match=r"unknown key 'limt'; allowed: limit"):
        read({"limt": 1})
