"""The checks of a configuration before a run: against the metric registry and the files.

``check_config`` is the one pass that the entry points (``Gate.run``, and ``pytest --faithgate``
as it starts) make: it runs every check and returns what they found (``Checks``: errors in
the order they are raised, warnings for the entry points to print), so nothing is scored,
summarized or read for a configuration that is refused. Each check is also a function that
raises, for callers that need one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faithgate.config import GateConfig, per_metric
from faithgate.errors import ConfigError, FaithgateError, InputError, no_metric_named
from faithgate.gate.baseline import BaselinePolicy, active_regression
from faithgate.metrics.base import metric_class, metric_names
from faithgate.numbers import above, at_least
from faithgate.safety.paths import refuse_overwriting_inputs, same_file

# The score cache's file in ``cache_dir`` (shared with `pytest --faithgate`).
CACHE_FILE = "scores.sqlite"
# The result of the last run with a cache, beside it: a convenience, faithgate's own file.
LAST_RESULT = "last-result.json"

ValueRange = tuple[float | None, float | None]


@dataclass(frozen=True)
class Checks:
    """What ``check_config`` found. ``errors``: in the order they are raised (``raise_errors``
    raises the first). ``no_criterion``: the gate judges nothing; raised by ``Gate.run`` once
    the inputs are read and the metrics resolved, so their own errors name the bad input
    first. ``warnings``: lines for the entry points to print. ``value_ranges``: metric -> the
    range its scores can take (``Metric.value_range``)."""

    errors: list[FaithgateError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    no_criterion: ConfigError | None = None
    value_ranges: dict[str, ValueRange] = field(default_factory=dict)

    def raise_errors(self) -> None:
        """Raise the first error, if any."""
        if self.errors:
            raise self.errors[0]


def check_config(
    config: GateConfig,
    baseline: BaselinePolicy | None = None,
    *,
    registry: bool = True,
    use_cache: bool = True,
) -> Checks:
    """Check ``config`` before a run: the metrics its rules and keys name, its baseline path,
    the files it writes against those it reads (``use_cache``: the score cache and the last
    result are among them), and whether it has a criterion at all.

    ``registry=False`` leaves out what needs the metric registry complete (the metric names,
    their score ranges, the criterion): pytest checks before collection, and a conftest
    collected later may still register a metric; the gate item checks them when it runs."""
    policy = baseline or BaselinePolicy()
    known = metric_names() if registry else None
    steps: list[Callable[[], object]] = []
    if known is not None:
        # Before any model loads: fail fast on a typo.
        steps.append(lambda: check_rule_metrics(config, known))
    steps.append(lambda: check_regression_baseline(config))  # not a failed gate after scoring
    if known is not None:
        steps.append(lambda: check_metric_keys(config, known))  # a threshold for no metric
    steps.append(lambda: check_paths(config, update_baseline=policy.update, use_cache=use_cache))
    if policy.explicit and not policy.update:
        steps.append(lambda: check_baseline_exists(config))
    errors: list[FaithgateError] = []
    for step in steps:
        try:
            step()
        except FaithgateError as exc:
            errors.append(exc)
    if known is None:
        return Checks(errors)
    ranges = value_ranges(config, known)
    warnings = unused_thresholds(config) + limits_outside_range(config, ranges)
    try:
        check_has_criterion(config, ranges)
        no_criterion = None
    except ConfigError as exc:
        no_criterion = exc
    return Checks(errors, warnings, no_criterion, ranges)


def value_ranges(config: GateConfig, known: Collection[str] | None = None) -> dict[str, ValueRange]:
    """Metric -> the range its scores can take under the configured settings (none loads a
    model); a limit outside it judges nothing or fails every run. Only the metrics in
    ``known`` (default: the registry's): an unknown one is refused when the scorer is built."""
    known = metric_names() if known is None else known
    return {
        m: metric_class(m).value_range(config.metric_settings.get(m, {}))
        for m in config.metrics
        if m in known
    }


def check_rule_metrics(config: GateConfig, known: Collection[str] | None = None) -> None:
    """Raise ``InputError`` when a rule names a metric that is not selected: for a name that
    is no metric at all (not in ``known``, default the registry's ``metric_names()``, nor
    selected) the message says so, with a "did you mean" as ``thresholds`` keys get
    (``check_metric_keys``), rather than advise selecting a metric that does not
    exist."""
    selected = set(config.metrics)
    named: list[tuple[str, str]] = [
        ("rules.min_mean", m) for m in config.rules.min_mean if m != "*"
    ]
    for key, rule in (
        ("rules.pair_consistency.metrics", config.rules.pair_consistency),
        ("rules.regression.metrics", config.rules.regression),
    ):
        if rule is not None and rule.metrics:
            named += [(key, m) for m in rule.metrics]
    if config.rules.regression is not None:
        key = "rules.regression.per_example_drop"
        named += [(key, m) for m in config.rules.regression.per_example_drop if m != "*"]
    names = sorted(selected | set(metric_names() if known is None else known))
    for key, m in named:
        if m in selected:
            continue
        if m not in names:
            raise InputError(f"{key}: {no_metric_named(m, names)}")
        raise InputError(
            f"{key} names metric {m!r}, which is not selected "
            f"(metrics: {', '.join(config.metrics)})"
        )


def check_metric_keys(config: GateConfig, known: Collection[str]) -> None:
    """Raise ``ConfigError`` for a ``thresholds`` or ``metric_settings`` key that names no
    metric in ``known`` (the registered metrics): a misspelled threshold was a warning, and
    the metric meant ran with no threshold at all. A registered metric that is merely not
    selected stays a warning (``unused_thresholds``)."""
    where = f"{config.display_path(config.source)}: " if config.source is not None else ""
    names = sorted(known)
    for key, table in (
        ("thresholds", config.thresholds),
        ("metric_settings", config.metric_settings),
    ):
        for name in sorted(table, key=str):
            if name in known:
                continue
            raise ConfigError(f"{where}{key}.{name}: {no_metric_named(name, names)}")


def check_paths(config: GateConfig, *, update_baseline: bool, use_cache: bool) -> None:
    """Refuse (``InputError``, exit 2) a report or baseline path that is one of this run's
    inputs (outputs, data, configuration, a baseline only read), before anything runs."""
    writes = output_files(config, update_baseline=update_baseline)
    # Every run with a cache writes its result there too (a cache "directory" that is a
    # file has its own error, from the cache): never over an input or a report, but as
    # faithgate's own bookkeeping, a directory or FIFO in its place does not stop the run
    # (``Gate.run`` warns that it cannot be written, and leaves it as it is).
    own: list[tuple[str, Any]] = []
    inputs = input_files(config, baseline=not update_baseline)
    if use_cache and not config.cache_path.is_file():
        own.append(("last result in the cache directory", config.cache_path / LAST_RESULT))
        # Read and written by the run in place: a report there would replace it.
        inputs.append(("score cache", config.cache_path / CACHE_FILE))
    refuse_overwriting_inputs(writes, inputs, bookkeeping=own)


def check_baseline_exists(config: GateConfig) -> None:
    """Raise ``InputError`` when ``config.baseline`` names no file: for a path named for this
    run (``--baseline``), which is far more likely a typo than a first run; skipping the
    comparison would pass what it should have caught (the per-example thresholds too). A path
    that cannot be looked at is left to the read (``load_baseline`` says why)."""
    path = config.baseline
    if path is None:
        return
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(
            f"no baseline at {config.display_path(path)} (given with --baseline); check the "
            "path, or run with --update-baseline to create it"
        ) from None
    except OSError:
        return


def check_regression_baseline(config: GateConfig) -> None:
    """Raise ``ConfigError`` when ``rules.regression`` is configured with no baseline path
    (``baseline`` in the configuration, ``--baseline``): the rule could only fail, after a
    full scoring run, as a failed gate. A path whose file does not exist yet is a first run
    (``load_baseline``), not this."""
    if config.rules.regression is not None and config.baseline is None:
        raise ConfigError(
            "rules.regression needs a baseline to compare with: set 'baseline' (the path of a "
            "previous result JSON) in the configuration, or pass --baseline"
        )


def _cannot_fail(limit: float, value_range: ValueRange | None) -> bool:
    """Whether ``score >= limit`` holds for every score in ``value_range`` (compared as the
    rule compares, ``at_least``: a limit within float noise of the floor is the floor)."""
    low = value_range[0] if value_range else None
    return low is not None and at_least(low, limit)


def _limits(config: GateConfig) -> list[tuple[str, str, float]]:
    """``(what, metric, limit)`` for every per-example threshold and ``min_mean`` applied."""
    found = [
        (f"threshold {m}", m, config.thresholds[m])
        for m in config.metrics
        if m in config.thresholds
    ]
    means = per_metric(config.rules.min_mean, config.metrics)
    found += [(f"rules.min_mean {m}", m, v) for m, v in means.items() if m in config.metrics]
    return found


def _width(value_range: ValueRange | None) -> float | None:
    """How far apart the lowest and highest score of a bounded metric are (None: unbounded)."""
    low, high = value_range or (None, None)
    return high - low if low is not None and high is not None else None


def _drop_limits(
    config: GateConfig, value_ranges: Mapping[str, ValueRange]
) -> list[tuple[str, str, float, bool]]:
    """``(what, metric, allowed drop, cannot fail)`` for the regression rule's ``tolerance``
    (per metric it covers) and every ``per_example_drop``. A score of a bounded metric cannot
    drop by more than the width of its range, so an allowed drop at or above that width can
    never fail: like a threshold at the lowest score, it judges nothing."""
    rule = active_regression(config)
    if rule is None:
        return []
    covered = [m for m in (rule.metrics or config.metrics) if m in config.metrics]
    found = []
    for m in covered:
        width = _width(value_ranges.get(m))
        idle = width is not None and not above(width, rule.tolerance)  # as the rule tests
        found.append(("rules.regression.tolerance", m, rule.tolerance, idle))
    for m, drop in per_metric(rule.per_example_drop, covered).items():
        if m in config.metrics:
            width = _width(value_ranges.get(m))
            idle = width is not None and not above(width, drop)
            found.append((f"rules.regression.per_example_drop {m}", m, drop, idle))
    return found


def limits_outside_range(
    config: GateConfig, value_ranges: Mapping[str, ValueRange] | None = None
) -> list[str]:
    """One line per threshold or ``min_mean`` outside the range its metric's scores can take
    (``Metric.value_range``): one at or below the lowest score judges nothing, one above the
    highest fails every example; and one per allowed regression drop (``tolerance``,
    ``per_example_drop``) at or above the width of that range, which can never fail either.
    Warnings: ``check_has_criterion`` refuses a gate whose only limits judge nothing."""
    notes = []
    for what, metric, drop, idle in _drop_limits(config, value_ranges or {}):
        if idle:
            low, high = (value_ranges or {})[metric]
            notes.append(
                f"{what} = {drop:g} cannot fail for {metric}: its scores lie in "
                f"[{low:g}, {high:g}], so no score drops by more than {high - low:g}; it "
                "judges nothing"
            )
    for what, metric, limit in _limits(config):
        low, high = (value_ranges or {}).get(metric) or (None, None)
        if _cannot_fail(limit, (low, high)):
            notes.append(
                f"{what} = {limit} cannot fail: {metric} scores are >= {low:g}, so it "
                "judges nothing"
            )
        elif high is not None and not at_least(high, limit):  # as the rule compares
            notes.append(
                f"{what} = {limit} cannot be met: {metric} scores are <= {high:g}, so it "
                "fails every run"
            )
    return notes


def check_has_criterion(
    config: GateConfig, value_ranges: Mapping[str, ValueRange] | None = None
) -> None:
    """Raise ``ConfigError`` when nothing in ``config`` can judge a score: no threshold for a
    selected metric, no ``min_mean``, ``pair_consistency`` or ``regression`` (nor a baseline,
    which turns the regression rule on). Such a gate would pass whatever the scores: it must
    not pass a build by saying nothing. A threshold or ``min_mean`` at or below the lowest
    score its metric can take (``value_ranges``: metric -> ``Metric.value_range()``) judges
    nothing either, nor does a regression ``tolerance`` or ``per_example_drop`` at or above
    the width of a bounded metric's range."""
    ranges = value_ranges or {}
    thresholds_judge = config.rules.min_pass_rate > 0  # at 0 every example may fail them
    judging = [
        (what, metric)
        for what, metric, limit in _limits(config)
        if not _cannot_fail(limit, ranges.get(metric))
    ]
    # The regression rule (on whenever a baseline is set) judges through an allowed drop below
    # its metric's range width: its mean's tolerance, or a per-example drop (a per-example
    # threshold, so only with min_pass_rate above 0).
    drops = [(what, idle) for what, _, _, idle in _drop_limits(config, ranges)]
    regression_judges = any(
        not idle and (what == "rules.regression.tolerance" or thresholds_judge)
        for what, idle in drops
    )
    if (
        (thresholds_judge and any(what.startswith("threshold ") for what, _ in judging))
        or any(what.startswith("rules.min_mean ") for what, _ in judging)
        # min_rate 0 holds for any ranking: like min_pass_rate 0, it judges nothing
        or (
            config.rules.pair_consistency is not None and config.rules.pair_consistency.min_rate > 0
        )
        or regression_judges
    ):
        return
    held = set(config.metrics) & set(config.thresholds)
    idle = limits_outside_range(config, ranges)
    if held and config.rules.min_pass_rate <= 0:
        why = " (min_pass_rate = 0 lets every example fail its threshold)"
    elif idle:  # limits at or below the lowest score: the first says why
        why = f" ({idle[0]})"
    elif config.thresholds:
        why = (
            f" (the thresholds given are for {', '.join(sorted(config.thresholds))}, which "
            "`metrics` does not select)"
        )
    else:
        why = ""
    raise ConfigError(
        f"the gate has no criterion, so it would pass whatever {', '.join(config.metrics)} "
        "scores: set a threshold (--threshold NAME=X, or [tool.faithgate.thresholds]; "
        "`faithgate calibrate` proposes one) with min_pass_rate above 0, rules.min_mean, "
        "rules.pair_consistency or a baseline for rules.regression" + why
    )


def stale_calibrations(config: GateConfig, settings_hashes: Mapping[str, str]) -> list[str]:
    """One line per threshold that ``faithgate calibrate`` chose under other settings (another
    model, backend, quantization or formula version) than this run scores with: the
    threshold is still applied, but was not calibrated for these scores."""
    notes = []
    for metric, entry in sorted(config.calibration.items()):
        if not isinstance(entry, Mapping) or metric not in config.metrics:
            continue
        recorded, current = entry.get("settings_hash"), settings_hashes.get(metric)
        threshold = config.thresholds.get(metric)
        if not recorded or current is None or recorded == current:
            continue
        if threshold is None or entry.get("threshold") != threshold:
            continue  # the threshold in use is not the calibrated one
        notes.append(
            f"the {metric} threshold {threshold:g} was calibrated under settings {recorded}, "
            f"but this run scores under {current}; re-run faithgate calibrate"
        )
    return notes


def unused_thresholds(config: GateConfig) -> list[str]:
    """One line when ``thresholds`` (and one when ``metric_settings``) name metrics that are not
    selected: they are not applied.
    A warning, not an error: one configuration may hold thresholds for more metrics than a run
    selects (``--metric``); more often a metric was left out of ``metrics``, or the
    configuration relied on an older default metric. A key that names no registered metric at
    all (a typo) is an error, raised before this (``check_metric_keys``)."""
    notes = []
    extra = sorted(m for m in config.thresholds if m not in config.metrics)
    if extra:
        notes.append(
            f"thresholds for {', '.join(extra)} are not applied: not selected metrics (metrics: "
            f"{', '.join(config.metrics)}); add them to `metrics` to gate on them"
        )
    # Likewise settings (a mistyped metric name is refused by check_metric_keys).
    unset = sorted(m for m in config.metric_settings if m not in config.metrics)
    if unset:
        notes.append(
            f"metric_settings for {', '.join(unset)} are not applied: not selected metrics "
            f"(metrics: {', '.join(config.metrics)})"
        )
    return notes + default_metric_limits(config)


def default_metric_limits(config: GateConfig) -> list[str]:
    """One line when a limit given for every metric (``--threshold X``, ``rules.min_mean = X``,
    ``rules.regression.per_example_drop = X`` without ``rules.regression.metrics``) applies
    to the default metric because neither a ``metrics`` key nor ``--metric`` chose one: a
    limit chosen for an older default (``sentsim``, ``bertscore``) would be applied to another
    metric's scores, unsaid. A limit that names its metric is checked by ``unused_thresholds``."""
    if not config.default_metrics:
        return []
    limits = []
    if config.threshold_for_all is not None:
        limits.append(f"the threshold {config.threshold_for_all:g} given for every metric")
    if "*" in config.rules.min_mean:
        limits.append(f"rules.min_mean = {config.rules.min_mean['*']:g}")
    rule = config.rules.regression
    if rule is not None and rule.metrics is None and "*" in rule.per_example_drop:
        limits.append(f"rules.regression.per_example_drop = {rule.per_example_drop['*']:g}")
    if not limits:
        return []
    return [
        f"{' and '.join(limits)} {'applies' if len(limits) == 1 else 'apply'} to "
        f"{', '.join(config.metrics)}, the default "
        f"{'metric' if len(config.metrics) == 1 else 'metrics'}, as no `metrics` key (or "
        "--metric) selects one; the default was ensemble alone before, sentsim before that, and "
        "bertscore before that: set `metrics` to the metric the limit was chosen for"
    ]


def output_files(config: GateConfig, *, update_baseline: bool) -> list[tuple[str, Any]]:
    """The reports a gate run of ``config`` writes and, with ``update_baseline``, the baseline,
    as ``(what, path)`` for ``faithgate.safety.paths.refuse_overwriting_inputs``. A json report at
    the baseline path writes the same result twice: allowed, so the baseline is not listed."""
    files: list[tuple[str, Any]] = [
        (f"{kind} report", path) for kind, path in config.reports.items()
    ]
    if update_baseline and config.baseline is not None:
        json_report = config.reports.json
        if json_report is None or not same_file(json_report, config.baseline):
            files.append(("baseline", config.baseline))
    return files


def input_files(config: GateConfig, *, baseline: bool = True) -> list[tuple[str, Any]]:
    """The files a gate run of ``config`` reads, as ``(what, path or None)`` for
    ``faithgate.safety.paths.refuse_overwriting_inputs``: the outputs, data and configuration files,
    and (``baseline``) the baseline, which a run reads unless it updates it."""
    files: list[tuple[str, Any]] = [
        ("outputs file", config.outputs),
        ("data file", config.data),
        ("configuration file", config.source),
    ]
    if config.summarizer:
        files += [("summarizer's module", path) for path in _module_files(config)]
    for metric, settings in config.metric_settings.items():
        for key, value in settings.items():  # e.g. a combination's weights file
            if isinstance(value, str):
                for base in (Path.cwd(), config.root):
                    if (base / value).is_file():
                        files.append((f"metric_settings.{metric}.{key} file", base / value))
    return files + ([("baseline", config.baseline)] if baseline else [])


def _module_files(config: GateConfig) -> list[Path]:
    """The source file of the summarizer's module where ``run_summarizer`` would find it
    first (the configuration's directory, then the current one), without importing it."""
    module = str(config.summarizer).partition(":")[0].replace(".", "/")
    found = []
    for base in (config.root, Path.cwd()):
        for candidate in (base / f"{module}.py", base / module / "__init__.py"):
            if module and candidate.is_file():
                found.append(candidate)
    return found
