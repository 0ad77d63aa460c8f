"""The gate's rules: pure functions from examples + scores to a ``GateResult``.

Nothing here loads a model, reads a file or prints: ``find_pairs`` finds the minimal pairs
given in the data, ``evaluate`` applies the configured rules, and the regression rule compares
with a baseline result by paired bootstrap. ``faithgate.gate.Gate`` runs them after scoring;
the pytest plugin can score on workers and evaluate on the controller.

Decision rules (see ``faithgate.config`` for their settings):

- **per-example threshold**: an example passes when every metric scored it and each score is
  ``>=`` that metric's threshold (a metric without threshold only has to score it). An example
  that could not be scored fails and says why; nothing passes by being skipped.
- **pass_rate**: share of passing examples ``>=`` ``rules.min_pass_rate`` (default 1.0). A gate
  with zero scorable examples fails (rule ``scorable``).
- **min_mean[metric]**: mean over scored examples ``>=`` the minimum.
- **pair_consistency[metric]** (and ``[metric, error type]`` with ``per_error_type``): share of
  minimal pairs in which the faithful member scores strictly higher (BUMP, Ma et al. 2023;
  ties and unscorable pairs count as inconsistent) ``>=`` ``min_rate``. Pairs are rows sharing
  ``pair_id`` with ``role`` in ``reference``/``correct`` (faithful) and
  ``edited``/``incorrect`` (unfaithful). With the rule configured, the unfaithful member of a
  pair whose faithful member is present is a *probe*: it is scored and used for pairs only, not
  for the per-example rules (it is unfaithful on purpose). Without the rule, pair fields are
  ignored (with a warning, ``ignored_pair_fields``) and every row is gated as an output. With ``generate = true`` pairs are also made from every output
  by ``faithgate.perturb``. With the rule, roles are compared stripped and case-folded; an
  unknown role on a row with ``pair_id`` is an ``InputError``, and rows with pair fields that
  form no pair are named in a warning and counted in the rule's message (``unpaired_rows``).
  Consistency is judged by the rule's ``metrics`` only.
- **regression[metric]**: against the baseline (a previous result JSON), on outputs matched to
  a baseline entry of the same source (``match_baseline``: within a source the closest
  summaries first, the same id breaking ties; a baseline without digests is matched by id):
  fails when
  ``mean(baseline) - mean(current) > tolerance`` AND a paired bootstrap of the per-example
  differences puts the one-sided ``confidence`` lower bound of the drop above 0.
  Active when ``baseline`` is set (or ``rules.regression`` is configured). A missing baseline
  file (a project's first run) skips the rule with a warning that says how to create it
  (``--update-baseline``), unless ``require_baseline = true``, which fails it. Scores are only
  compared when the baseline's settings hash equals the current one.
- **per-example baseline threshold** (``rules.regression.per_example_drop``): an output that is a
  minimal edit of its matched baseline output (at most ``max_changed_words`` words changed)
  is held to its own threshold, its baseline score minus the allowed drop; below it the
  example fails like any other. Identical outputs score identically; rewritten ones (more words
  changed) are not compared per example, since different faithful summaries of one article
  differ in score as much as faithful and unfaithful ones do.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from faithgate import __version__
from faithgate.config import GateConfig, RegressionRule
from faithgate.errors import ConfigError, InputError, no_metric_named
from faithgate.metrics.base import metric_names
from faithgate.numbers import (
    above,
    at_least,
    decimals_apart,
    fixed_against,
    mean_of,
    percent_against,
    shown_against,
)
from faithgate.result import (
    ExampleResult,
    GateResult,
    MetricResult,
    PairResult,
    RuleResult,
    SentenceRef,
    consistent_settings_hashes,
    source_digest,
)
from faithgate.types import Example, Score, is_blank

# The reason an output with an empty (or blank) summary fails: nothing to score.
EMPTY_SUMMARY = "empty summary: the output has no text to score"
FAITHFUL_ROLES = ("reference", "correct", "faithful", "original")
UNFAITHFUL_ROLES = ("edited", "incorrect", "unfaithful", "perturbed")


@dataclass(frozen=True)
class Pair:
    """Indices (into the examples list) of a faithful member and its unfaithful edit."""

    faithful: int
    unfaithful: int
    pair_id: str
    error_type: str | None = None
    generated: bool = False


def pair_role(meta: Mapping[str, Any]) -> str:
    """A row's ``role`` as pairs are read: stripped and case-folded, so a spreadsheet's
    ``"Edited "`` is ``edited`` ("" when there is none)."""
    role = meta.get("role")
    return "" if role is None else str(role).strip().casefold()


def _pair_key(meta: Mapping[str, Any]) -> str | None:
    """A row's ``pair_id`` as rows are grouped by it, surrounding whitespace stripped (an
    exported ``"p2 "`` is ``p2``; ``scan_pairs`` reports ids it merged); None when blank."""
    pid = meta.get("pair_id")
    key = "" if pid is None else str(pid).strip()
    return key or None


def _carries_pair_fields(meta: Mapping[str, Any]) -> bool:
    """Whether a row was meant as a pair member: a ``pair_id``, or a faithful/unfaithful
    ``role`` (a role such as ``"summary"`` with no pair_id is no pair field)."""
    return _pair_key(meta) is not None or pair_role(meta) in FAITHFUL_ROLES + UNFAITHFUL_ROLES


@dataclass(frozen=True)
class PairScan:
    """What the pair fields of a set of rows make: the ``pairs``; ``unknown_roles``, rows with
    a ``pair_id`` whose ``role`` is neither faithful nor unfaithful; and ``merged_ids``, the
    spellings of one ``pair_id`` that differed only in surrounding whitespace."""

    pairs: list[Pair]
    unknown_roles: list[int]
    merged_ids: list[list[str]]


def scan_pairs(examples: Sequence[Example]) -> PairScan:
    """Minimal pairs given in the data (``PairScan.pairs``; see ``find_pairs``) and what kept
    rows from pairing."""
    groups: dict[str, tuple[list[int], list[int]]] = {}
    spellings: dict[str, set[str]] = {}
    unknown: list[int] = []
    for i, ex in enumerate(examples):
        key = _pair_key(ex.meta)
        if key is None:
            continue
        role = pair_role(ex.meta)
        spellings.setdefault(key, set()).add(str(ex.meta["pair_id"]))
        good, bad = groups.setdefault(key, ([], []))
        if role in FAITHFUL_ROLES:
            good.append(i)
        elif role in UNFAITHFUL_ROLES:
            bad.append(i)
        elif role:
            unknown.append(i)
    pairs = []
    for pid, (good, bad) in groups.items():
        for g in good:
            for b in bad:
                etype = examples[b].meta.get("error_type")
                pairs.append(Pair(g, b, pid, str(etype) if etype else None))
    merged = [sorted(s) for s in spellings.values() if len(s) > 1]
    return PairScan(pairs, unknown, merged)


def find_pairs(examples: Sequence[Example]) -> list[Pair]:
    """Minimal pairs given in the data: rows sharing ``meta['pair_id']`` with a faithful
    ``role`` (reference/correct/...) and an unfaithful one (edited/incorrect/...). A group with
    several members of each kind yields every faithful x unfaithful combination. Roles are
    compared stripped and case-folded, pair ids stripped (``pair_role``, ``_pair_key``)."""
    return scan_pairs(examples).pairs


def unpaired_rows(examples: Sequence[Example], pairs: Sequence[Pair]) -> list[int]:
    """Rows that carry pair fields (a ``pair_id``, or a faithful/unfaithful ``role``) but are
    a member of none of ``pairs``: a missing partner, a row without ``pair_id`` or ``role``.
    They are gated as ordinary outputs, and no pair rule judges them."""
    members = {i for p in pairs for i in (p.faithful, p.unfaithful)}
    return [
        i for i, ex in enumerate(examples) if i not in members and _carries_pair_fields(ex.meta)
    ]


def _rows_named(examples: Sequence[Example], rows: Sequence[int], limit: int = 5) -> str:
    """The first rows of ``rows`` as ``'id' (pair_id 'p', role 'edited')``, for messages."""
    named = []
    for i in rows[:limit]:
        meta = examples[i].meta
        fields = [f"{k} {str(meta[k])[:40]!r}" for k in ("pair_id", "role") if k in meta]
        named.append(f"{examples[i].id[:60]!r} ({', '.join(fields) or 'no pair fields'})")
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return ", ".join(named) + more


def _rows(n: int, one: str, many: str) -> str:
    """``"1 row has"`` / ``"2 rows have"``: a count of rows with its verb."""
    return f"1 row {one}" if n == 1 else f"{n} rows {many}"


def _no_pair(n: int) -> str:
    """``"2 rows with pair fields form no pair"``, in the singular for one."""
    return (
        "1 row with pair fields forms no pair"
        if n == 1
        else f"{n} rows with pair fields form no pair"
    )


def given_pairs(config: GateConfig, examples: Sequence[Example]) -> list[Pair]:
    """The minimal pairs given in the data, when a pair rule (``rules.pair_consistency``) is
    configured to use them; none otherwise. Without a pair rule a row with ``pair_id`` and an
    unfaithful ``role`` is an ordinary output, gated like the others: ``role`` values such as
    ``unfaithful`` or ``perturbed`` must not take a row out of the gate on their own.

    With the rule, a row with a ``pair_id`` and a ``role`` that is neither faithful nor
    unfaithful (a misspelt ``edtied``) is an ``InputError``: it would pair with nothing and be
    gated as an output, its pair silently missing from the rule."""
    if config.rules.pair_consistency is None:
        return []
    scan = scan_pairs(examples)
    if scan.unknown_roles:
        raise InputError(
            f"{_rows(len(scan.unknown_roles), 'has', 'have')} a pair_id and a role that is "
            "neither faithful "
            f"({', '.join(FAITHFUL_ROLES)}) nor unfaithful ({', '.join(UNFAITHFUL_ROLES)}): "
            f"{_rows_named(examples, scan.unknown_roles)}; rules.pair_consistency pairs rows "
            "by these roles (correct the role, or remove the pair_id of a row that is no pair "
            "member)"
        )
    return scan.pairs


def ignored_pair_fields(
    config: GateConfig, examples: Sequence[Example], pairs: Sequence[Pair] | None = None
) -> list[str]:
    """Warnings about pair fields that pair nothing. Without a pair rule: one line when rows
    carry ``pair_id`` and ``role``, gated as ordinary outputs (the unfaithful members too).
    With one: a line naming the rows with pair fields that are in none of ``pairs`` (default:
    the pairs given in ``examples``; ``Gate.run`` passes the generated ones too), and one
    naming ``pair_id`` spellings taken as one id."""
    if config.rules.pair_consistency is not None:
        scan = scan_pairs(examples)
        notes = []
        orphans = unpaired_rows(examples, scan.pairs if pairs is None else pairs)
        if orphans:
            notes.append(
                f"{_no_pair(len(orphans))} (no partner of the other "
                "role under the same pair_id, or no pair_id): "
                f"{_rows_named(examples, orphans)}; they are gated as ordinary outputs and "
                "rules.pair_consistency does not judge them"
            )
        for spellings in scan.merged_ids:
            notes.append(
                "pair_id values that differ only in surrounding whitespace are taken as one "
                f"pair id: {', '.join(repr(s[:40]) for s in spellings[:5])}"
            )
        return notes
    marked = [
        ex
        for ex in examples
        if ex.meta.get("pair_id") not in (None, "") and ex.meta.get("role") not in (None, "")
    ]
    if not marked:
        return []
    return [
        f"{len(marked)} outputs carry pair_id and role fields, which are ignored: no pair rule "
        "(rules.pair_consistency) is configured, so they are gated as ordinary outputs, "
        "the edited members of pairs too"
    ]


def evaluate(
    config: GateConfig,
    examples: Sequence[Example],
    scores: Sequence[Mapping[str, Score]],
    settings_hashes: Mapping[str, str],
    *,
    pairs: Sequence[Pair] | None = None,
    baseline: GateResult | None = None,
    baseline_error: str | None = None,
    baseline_created: bool = False,
    baseline_missing: bool = False,
    baseline_replaced: Mapping[str, str] | None = None,
) -> GateResult:
    """Apply the configured rules to scored examples (no model is touched).

    ``scores`` is aligned with ``examples`` (``Scorer.score`` output). ``pairs`` defaults to
    ``given_pairs(config, examples)``; generated pairs are passed in by ``Gate.run``. Pairs
    (and with them probes) are used only when a pair rule is configured: without one, every
    example is an output. ``baseline`` is
    the previous result for the regression rule; ``baseline_error`` explains why there is none
    (the rule then fails), unless ``baseline_created`` says this run writes the first baseline
    (``--update-baseline``) or ``baseline_missing`` says the file does not exist yet (a first
    run): the rule is then skipped and says so (or fails with ``require_baseline``).
    ``baseline_replaced`` (metric -> why) names the metrics whose scores ``baseline`` does not
    hold under this run's settings while ``--update-baseline`` replaces it: only their
    comparisons (``regression[m]``, ``per_example_drop``) are skipped, saying why; every other
    metric is still compared with ``baseline``.
    """
    if len(scores) != len(examples):
        raise ValueError("scores must be aligned with examples")
    metrics = list(config.metrics)
    pairs = list(given_pairs(config, examples) if pairs is None else pairs)
    if config.rules.pair_consistency is None:
        pairs = []  # no rule uses them: nothing may leave the per-example gate as a probe
    # The unfaithful member of every pair (given or generated) is a probe, not an output.
    probes = {p.unfaithful for p in pairs}
    thresholds = {m: t for m, t in config.thresholds.items() if m in metrics}

    results = [
        _example_result(ex, sc, metrics, thresholds, probe=i in probes)
        for i, (ex, sc) in enumerate(zip(examples, scores, strict=True))
    ]
    # A score made under other settings than this run's is not this configuration's score:
    # no rule may judge it (the regression rule would compare it), and the result would be
    # written but refused when read back (as a baseline).
    consistent_settings_hashes(settings_hashes, results, whose="this run's")
    outputs = [r for r in results if not r.probe]
    regression = config.rules.regression
    if regression is None and config.baseline is not None:
        regression = RegressionRule()
    per_example: dict[str, dict[str, int]] = {}
    # Which baseline entry each output is compared with: same id and same source, or its
    # source's entry under another id (computed once: thresholds and means use the same pairs).
    match = match_baseline(outputs, baseline) if baseline is not None else None
    if regression is not None and regression.per_example_drop and baseline is not None:
        per_example = apply_baseline_thresholds(
            regression, outputs, metrics, settings_hashes, baseline, match
        )
    rules: list[RuleResult] = []

    # Something must have been scored, or the gate says nothing.
    n_scored = sum(all(m.ok for m in r.scores.values()) for r in outputs)
    rules.append(
        RuleResult(
            "scorable",
            "scorable",
            float(n_scored),
            1.0,
            n_scored >= 1,
            f"{n_scored} of {len(outputs)} examples scored by every metric"
            if n_scored
            else f"no example could be scored ({len(outputs)} given): the gate cannot pass",
        )
    )

    n = len(outputs)
    n_pass = sum(r.passed for r in outputs)
    rate = n_pass / n if n else 0.0
    limit = config.rules.min_pass_rate
    n_unscorable = sum(not all(m.ok for m in r.scores.values()) for r in outputs)
    shown_rate, shown_limit = percent_against(rate, limit)
    msg = f"{n_pass}/{n} examples pass ({shown_rate}; need >= {shown_limit})"
    if n_unscorable:
        msg += f"; {n_unscorable} could not be scored"
    ok = n > 0 and at_least(rate, limit)
    rules.append(RuleResult("pass_rate", "pass_rate", rate, limit, ok, msg))

    for metric, minimum in per_metric(config.rules.min_mean, metrics).items():
        if metric not in metrics:
            raise InputError(f"rules.min_mean names metric {metric!r}, which is not selected")
        values = [r.scores[metric].value for r in outputs if r.scores[metric].ok]
        mean = mean_of(values) if values else None  # type: ignore[arg-type]
        # A mean that is not finite (inf passed any minimum) is not shown to be above it:
        # it fails, as the regression rule fails a NaN drop.
        ok = mean is not None and math.isfinite(mean) and at_least(mean, minimum)
        message = f"no example scored by {metric}"
        if mean is not None and not math.isfinite(mean):
            message = (
                f"mean {metric} over {len(values)} scored examples is not a finite number "
                f"({mean}), so it is not shown to be >= {minimum:g}"
            )
        elif mean is not None:
            shown, need = shown_against(mean, minimum)
            message = f"mean {metric} {shown} over {len(values)} scored examples (need >= {need})"
            if len(values) < len(outputs):
                # They fail their own examples (pass_rate); the mean cannot speak for them.
                message += (
                    f"; {len(outputs) - len(values)} of {len(outputs)} could not be scored by "
                    f"{metric} and are not in the mean (each counts as a failing example in "
                    "pass_rate)"
                )
        rules.append(
            RuleResult(f"min_mean[{metric}]", "min_mean", mean, minimum, ok, message, metric=metric)
        )

    pair_results: list[PairResult] = []
    rule = config.rules.pair_consistency
    if pairs:
        # Consistency is judged for the rule's metrics only: a report must not list pairs
        # "inconsistent" by a metric no rule gates them on.
        judged = [m for m in (rule.metrics if rule and rule.metrics else metrics) if m in metrics]
        pair_results = [_pair_result(p, examples, results, metrics, judged) for p in pairs]
    if rule is not None:
        # Rows meant as pair members that pair with nothing: counted in the rule's message.
        unpaired = len(unpaired_rows(examples, pairs))
        rules.extend(_pair_rules(rule, pair_results, metrics, unpaired))

    if regression is not None:
        rules.extend(
            _regression_rules(
                regression,
                outputs,
                metrics,
                settings_hashes,
                baseline,
                baseline_error,
                baseline_created,
                baseline_missing,
                per_example,
                match,
                baseline_replaced,
            )
        )

    return GateResult(
        passed=all(r.passed for r in rules),
        metrics=metrics,
        settings_hashes=dict(settings_hashes),
        thresholds=thresholds,
        rules=rules,
        examples=results,
        pairs=pair_results,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        faithgate_version=__version__,
        config=config.to_dict(),
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
    all (a typo) is an error, raised before this (``GateConfig.check_metric_keys``)."""
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


ValueRange = tuple[float | None, float | None]


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


def _active_regression(config: GateConfig) -> RegressionRule | None:
    """The regression rule a run applies: the configured one, or the default one that a
    baseline turns on."""
    rule = config.rules.regression
    if rule is None and config.baseline is not None:
        rule = RegressionRule()
    return rule


def _drop_limits(
    config: GateConfig, value_ranges: Mapping[str, ValueRange]
) -> list[tuple[str, str, float, bool]]:
    """``(what, metric, allowed drop, cannot fail)`` for the regression rule's ``tolerance``
    (per metric it covers) and every ``per_example_drop``. A score of a bounded metric cannot
    drop by more than the width of its range, so an allowed drop at or above that width can
    never fail: like a threshold at the lowest score, it judges nothing."""
    rule = _active_regression(config)
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


def check_rule_metrics(config: GateConfig, known: Collection[str] | None = None) -> None:
    """Raise ``InputError`` when a rule names a metric that is not selected: for a name that
    is no metric at all (not in ``known``, default the registry's ``metric_names()``, nor
    selected) the message says so, with a "did you mean" as ``thresholds`` keys get
    (``GateConfig.check_metric_keys``), rather than advise selecting a metric that does not
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


def _example_result(
    ex: Example,
    scores: Mapping[str, Score],
    metrics: list[str],
    thresholds: Mapping[str, float],
    probe: bool,
) -> ExampleResult:
    per_metric: dict[str, MetricResult] = {}
    reasons: list[str] = []
    for name in metrics:
        score = scores.get(name)
        threshold = thresholds.get(name)
        if score is None:
            per_metric[name] = MetricResult(name, None, False, threshold, "not scored")
            reasons.append(f"{name}: not scored")
            continue
        ls = score.least_supported()
        ref = SentenceRef(name, ls.index, ls.text, float(ls.value)) if ls else None
        if not score.ok:
            why = score.failure
            per_metric[name] = MetricResult(
                name, None, False, threshold, why, score.settings_hash, ref
            )
            reasons.append(f"{name}: could not score ({why})")
            continue
        value = float(score.value)
        ok = threshold is None or at_least(value, threshold)
        per_metric[name] = MetricResult(name, value, ok, threshold, None, score.settings_hash, ref)
        if not ok:
            shown, limit = shown_against(value, threshold)  # type: ignore[arg-type]
            why = f"{name} {shown} < threshold {limit}"
            if ref is not None:
                why += f"; least supported sentence: {_quote(ref.text)} ({ref.value:.3f})"
            reasons.append(why + _evidence(score) + _lowest_vote(score))
    if is_blank(ex.summary):
        # A summarizer's empty output fails here, whatever a metric made of it, with one
        # reason rather than one "could not score" per metric.
        reasons = [EMPTY_SUMMARY]
    keep = {k: ex.meta[k] for k in ("pair_id", "role", "error_type", "generated") if k in ex.meta}
    return ExampleResult(
        id=ex.id,
        summary=ex.summary,
        passed=not reasons,
        scores=per_metric,
        reasons=reasons,
        probe=probe,
        meta=keep,
        source_digest=source_digest(ex.source),
    )


def per_metric(table: Mapping[str, float], metrics: Sequence[str]) -> dict[str, float]:
    """A rule's ``{metric: value}`` table with ``"*"`` expanded to every metric in ``metrics``
    (a metric named explicitly keeps its own value)."""
    values = dict(table)
    star = values.pop("*", None)
    return {**dict.fromkeys(metrics, star), **values} if star is not None else values


def changed_words(before: str, after: str) -> int:
    """Words changed between two summaries (word-level diff: replaced, inserted or deleted
    words, the longer side of each changed span)."""
    return sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2, _, _ in _word_changes(before, after))


@dataclass(frozen=True)
class BaselineMatch:
    """Which baseline entry each output (by id) is compared with.

    ``by_source``: outputs matched to their source's entry under another id (ids that default
    to line numbers shift when a row is inserted); ``other_source``: outputs whose id names
    another source in the baseline, so they are not compared with that entry; ``checked``:
    whether the baseline records sources (one written before that is matched by id only).
    """

    entries: Mapping[str, ExampleResult] = field(default_factory=dict)
    by_source: int = 0
    other_source: int = 0
    checked: bool = True

    def note(self) -> str:
        """What the matching did beyond plain id matching ("" when nothing), for messages."""
        if not self.checked:
            return (
                "the baseline predates source checks: outputs are matched to it by id only "
                "(update it with --update-baseline)"
            )
        parts = []
        if self.other_source:
            parts.append(
                f"{self.other_source} output ids name another source in the baseline (not "
                "compared with that entry)"
            )
        if self.by_source:
            parts.append(
                f"{self.by_source} outputs matched to the baseline by source instead of id"
            )
        return "; ".join(parts)


def _same_source(entry: ExampleResult, output: ExampleResult) -> bool:
    """Whether a baseline entry and an output summarize one source (an entry or output that
    records none is taken at its id's word)."""
    return None in (entry.source_digest, output.source_digest) or (
        entry.source_digest == output.source_digest
    )


# Above this many (output, entry) pairs of one source, summaries are compared for identity only
# (changed_words on every pair would cost minutes for thousands of summaries of one article).
_MAX_WORD_DIFFS = 2500


def match_baseline(outputs: Sequence[ExampleResult], baseline: GateResult) -> BaselineMatch:
    """Pair each output with a baseline entry of the same source: within one source, the
    closest summaries first (fewest changed words; identical ones at 0), the same id breaking
    ties, then file order. An output left without an entry of its source is new.

    Ids alone are not enough: ids default to line numbers, so inserting a row made every
    output be compared with another article's baseline entry (or with another summary of the
    same article), called "rewritten" and skipped, or its scores paired with another's in the
    means. A baseline that records no source digests (written before they were) is matched by
    id, as before; so is an entry or output that records none."""
    previous = baseline.outputs
    by_id = {e.id: i for i, e in enumerate(previous)}
    if not baseline.records_sources:
        entries = {o.id: previous[by_id[o.id]] for o in outputs if o.id in by_id}
        return BaselineMatch(entries, checked=False)
    entries: dict[str, ExampleResult] = {}
    claimed: set[int] = set()
    seeking: dict[str, list[ExampleResult]] = {}
    other_source = 0
    for o in outputs:
        i = by_id.get(o.id)
        if o.source_digest is None or (i is not None and previous[i].source_digest is None):
            if i is not None:  # no digest on one side: taken at the id's word
                entries[o.id] = previous[i]
                claimed.add(i)
            continue
        other_source += i is not None and previous[i].source_digest != o.source_digest
        seeking.setdefault(o.source_digest, []).append(o)
    free: dict[str, list[int]] = {}
    for i, e in enumerate(previous):
        if i not in claimed and e.source_digest is not None:
            free.setdefault(e.source_digest, []).append(i)
    by_source = 0
    for digest, outs in seeking.items():
        cands = free.get(digest, [])
        if not cands:
            continue
        exact_only = len(outs) * len(cands) > _MAX_WORD_DIFFS
        ranked = []
        for k, o in enumerate(outs):
            for i in cands:
                e = previous[i]
                if e.summary == o.summary:
                    cost = 0
                elif exact_only:
                    cost = 1 << 30
                else:
                    cost = changed_words(e.summary, o.summary)
                ranked.append((cost, e.id != o.id, k, i))
        ranked.sort()
        taken_outs: set[int] = set()
        for _cost, other_id, k, i in ranked:
            if k in taken_outs or i in claimed:
                continue
            taken_outs.add(k)
            claimed.add(i)
            entries[outs[k].id] = previous[i]
            by_source += other_id
    return BaselineMatch(entries, by_source, other_source)


def baseline_notes(result: GateResult, baseline: GateResult | None, where: str) -> list[str]:
    """Warnings about how ``result``'s outputs were matched to ``baseline`` (at ``where``): one
    that predates source checks, or outputs whose ids name other sources there."""
    if baseline is None:
        return []
    match = match_baseline(result.outputs, baseline)
    if not match.checked:
        return [
            f"the baseline at {where} predates source checks: outputs are matched to it by id "
            "only, so an id that now names another article (ids default to line numbers) is "
            "compared with that article's scores; update it with --update-baseline from a "
            "passing run"
        ]
    note = match.note()
    return [f"baseline {where}: {note}"] if note else []


def _baseline_score(match: BaselineMatch, ex: ExampleResult, metric: str) -> float | None:
    """The baseline's ``metric`` value of the entry ``ex`` is matched with (None: none)."""
    entry = match.entries.get(ex.id)
    score = entry.scores.get(metric) if entry is not None else None
    return score.value if score is not None and score.ok else None


def apply_baseline_thresholds(
    rule: RegressionRule,
    outputs: Sequence[ExampleResult],
    metrics: list[str],
    hashes: Mapping[str, str],
    baseline: GateResult,
    match: BaselineMatch | None = None,
) -> dict[str, dict[str, int]]:
    """Hold each output that minimally edits its baseline output to its own threshold.

    For metric m with allowed drop d: threshold = baseline value - d, combined with the
    configured threshold (the higher one holds). Only scores made under the baseline's settings
    hash are compared (the regression rule reports any mismatch), and only with the baseline
    entry of the same source (``match_baseline``). Updates ``outputs`` in place and returns,
    per metric, how many outputs were ``held`` to such a threshold, how many of them fell
    ``below`` it, and how many were ``rewritten`` (too many words changed).
    """
    counts: dict[str, dict[str, int]] = {}
    for m in rule.per_example_drop:
        if m != "*" and m not in metrics:
            raise InputError(
                f"rules.regression.per_example_drop names {m!r}, which is not a selected metric"
            )
    drops = per_metric(rule.per_example_drop, rule.metrics or metrics)
    match = match if match is not None else match_baseline(outputs, baseline)
    for m, drop in drops.items():
        if m not in baseline.metrics or baseline.settings_hashes.get(m) != hashes.get(m):
            continue
        count = counts[m] = {"held": 0, "below": 0, "rewritten": 0}
        for ex in outputs:
            score = ex.scores.get(m)
            old = _baseline_score(match, ex, m)
            if score is None or not score.ok or old is None:
                continue
            before = match.entries[ex.id].summary
            if changed_words(before, ex.summary) > rule.max_changed_words:
                count["rewritten"] += 1
                continue
            count["held"] += 1
            own = old - drop
            below = not at_least(score.value, own)  # type: ignore[arg-type]
            count["below"] += below
            score.baseline = old
            if score.threshold is not None and at_least(score.threshold, own):
                continue  # the configured threshold is the stricter one
            score.threshold = own
            if not below:
                continue
            shown, limit = fixed_against(score.value, own)  # type: ignore[arg-type]
            why = (
                f"{m} {shown} < its own threshold {limit} (baseline "
                f"{old:.4f} - allowed drop {drop:g}; edit: "
                f"{describe_edit(before, ex.summary) or 'none'})"
            )
            if score.passed:  # not already failing on the configured threshold
                score.passed = False
                ex.reasons.append(why)
            ex.passed = False
    return counts


def _signed(value: float, digits: int = 4) -> str:
    """A change with its sign, and no "-0.0000": float noise below the shown digits (a mean
    drop of 1e-17) reads as "+0.0000", as an exact zero does."""
    shown = f"{value:+.{digits}f}"
    return f"{0.0:+.{digits}f}" if float(shown) == 0 else shown


def _evidence(score: Score) -> str:
    """What a metric names as the reason of a low score, e.g. '; not in the source: "9
    million"' (``details.evidence``, set by ``facts``); "" for a metric that sets none."""
    evidence = (score.details or {}).get("evidence")
    return f"; {evidence}" if isinstance(evidence, str) and evidence else ""


def _lowest_vote(score: Score) -> str:
    """For a combination (``ensemble``): which component's vote pulled it down most, e.g.
    "; lowest vote: ner -1.92" (its term of the logit); "" for any other metric."""
    votes = (score.details or {}).get("votes")
    if not isinstance(votes, dict) or not votes:
        return ""
    name = min(votes, key=votes.get)
    return f"; lowest vote: {name} {votes[name]:+.2f}"


def _quote(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return f'"{text[: limit - 1]}…"' if len(text) > limit else f'"{text}"'


def _pair_result(
    pair: Pair,
    examples: Sequence[Example],
    results: Sequence[ExampleResult],
    metrics: list[str],
    judged: Sequence[str],
) -> PairResult:
    """One pair's scores by every selected metric, and its consistency by the ``judged``
    ones (the pair rule's metrics; the other scores are shown, not judged)."""
    good, bad = results[pair.faithful], results[pair.unfaithful]
    pr = PairResult(
        pair_id=pair.pair_id,
        faithful_id=good.id,
        unfaithful_id=bad.id,
        error_type=pair.error_type,
        generated=pair.generated,
        unfaithful_summary=examples[pair.unfaithful].summary,
        edit=describe_edit(examples[pair.faithful].summary, examples[pair.unfaithful].summary),
    )
    for m in metrics:
        g, b = good.scores[m].value, bad.scores[m].value
        pr.faithful_scores[m] = g
        pr.unfaithful_scores[m] = b
        if m in judged:
            # Ties fail (BUMP): a metric that cannot tell the two apart is not consistent.
            pr.consistent[m] = g is not None and b is not None and g > b
    return pr


def _word_changes(before: str, after: str) -> list[tuple[str, int, int, int, int, str, str]]:
    """The changed spans of a word-level diff: (op, i1, i2, j1, j2, old words, new words)."""
    a, b = before.split(), after.split()
    return [
        (op, i1, i2, j1, j2, " ".join(a[i1:i2]), " ".join(b[j1:j2]))
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
        if op != "equal"
    ]


def describe_edit(before: str, after: str, limit: int = 120) -> str:
    """The word-level difference between two summaries, e.g. ``'appeared' -> 'confessed'``
    (several changed spans are joined with ``; ``)."""
    parts = []
    for op, _, _, _, _, old, new in _word_changes(before, after):
        if op == "delete":
            parts.append(f"-'{old}'")
        elif op == "insert":
            parts.append(f"+'{new}'")
        else:
            parts.append(f"'{old}' -> '{new}'")
    text = "; ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pair_rules(
    rule: Any, pairs: list[PairResult], metrics: list[str], unpaired: int = 0
) -> list[RuleResult]:
    selected = list(rule.metrics or metrics)
    for m in selected:
        if m not in metrics:
            raise InputError(
                f"rules.pair_consistency.metrics names {m!r}, which is not a selected metric"
            )
    out = []
    for m in selected:
        groups: list[tuple[str, str | None, list[PairResult]]] = [
            (f"pair_consistency[{m}]", None, pairs)
        ]
        if rule.per_error_type:
            types = sorted({p.error_type or "unknown" for p in pairs})
            for t in types:
                members = [p for p in pairs if (p.error_type or "unknown") == t]
                groups.append((f"pair_consistency[{m}|{t}]", t, members))
        for name, etype, members in groups:
            n = len(members)
            k = sum(p.consistent.get(m, False) for p in members)
            unscored = sum(
                p.faithful_scores.get(m) is None or p.unfaithful_scores.get(m) is None
                for p in members
            )
            if n == 0:
                if rule.generate:  # the advice to turn generation on would be no advice
                    kinds = (
                        f" of the selected types ({', '.join(rule.types)})" if rule.types else ""
                    )
                    msg = (
                        f"no minimal pairs: generate = true made no edits{kinds} of these "
                        "outputs, and no rows with pair_id and role reference/edited pair up"
                    )
                else:
                    msg = (
                        "no minimal pairs: give rows with pair_id and role reference/edited, "
                        "or set pair_consistency.generate = true"
                    )
                if unpaired:
                    msg += f"; {_no_pair(unpaired)}"
                info = {"unpaired_rows": unpaired} if unpaired else {}
                out.append(
                    RuleResult(name, "pair_consistency", None, rule.min_rate, False, msg, m, info)
                )
                continue
            rate = k / n
            shown_rate, shown_limit = percent_against(rate, rule.min_rate)
            msg = f"{k}/{n} pairs ranked faithful > edited by {m} ({shown_rate}; need >= {shown_limit})"
            if unscored:
                msg += f"; {unscored} pairs could not be scored"
            if unpaired and etype is None:
                # Not judged, so not in the rate: said, since pairs the data meant are missing.
                msg += f"; {_no_pair(unpaired)} (gated as outputs)"
            inconsistent = [p for p in members if not p.consistent.get(m, False)]
            details: dict[str, Any] = {
                "pairs": n,
                "consistent": k,
                "error_type": etype,
                "inconsistent_pairs": [p.pair_id for p in inconsistent[:20]],
                **({"unpaired_rows": unpaired} if unpaired and etype is None else {}),
            }
            out.append(
                RuleResult(
                    name,
                    "pair_consistency",
                    rate,
                    rule.min_rate,
                    at_least(rate, rule.min_rate),
                    msg,
                    m,
                    details,
                )
            )
    return out


def paired_bootstrap_drop(
    baseline: Sequence[float],
    current: Sequence[float],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Paired bootstrap of the mean drop ``mean(baseline - current)`` (Efron & Tibshirani 1993).

    Resamples example indices with replacement ``resamples`` times and returns
    ``(observed drop, one-sided lower bound at confidence, share of resamples with drop <= 0)``.
    The drop is "real" at ``confidence`` when the lower bound is above 0.
    """
    # Values near the float limit overflow to inf / NaN here (the difference itself, then its
    # means); the caller fails closed on them (no numpy warning lines on stderr).
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.asarray(baseline, dtype=float) - np.asarray(current, dtype=float)
    n = len(d)
    if n == 0:
        raise ValueError("no paired values")
    rng = np.random.default_rng(seed)
    boots = np.empty(resamples)
    chunk = max(1, 2_000_000 // n)  # bounded memory for large example sets
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, resamples, chunk):
            stop = min(resamples, start + chunk)
            idx = rng.integers(0, n, size=(stop - start, n))
            boots[start:stop] = d[idx].mean(axis=1)
        lower = float(np.quantile(boots, 1.0 - confidence))
        return float(d.mean()), lower, float((boots <= 0).mean())


def _regression_rules(
    rule: RegressionRule,
    outputs: list[ExampleResult],
    metrics: list[str],
    hashes: Mapping[str, str],
    baseline: GateResult | None,
    baseline_error: str | None,
    baseline_created: bool = False,
    baseline_missing: bool = False,
    per_example: Mapping[str, Mapping[str, int]] | None = None,
    match: BaselineMatch | None = None,
    replaced: Mapping[str, str] | None = None,
) -> list[RuleResult]:
    out = []
    replaced = replaced or {}
    if baseline is not None and match is None:
        match = match_baseline(outputs, baseline)
    drops = per_metric(rule.per_example_drop, rule.metrics or metrics)
    for m in rule.metrics or metrics:
        if m not in metrics:
            raise InputError(
                f"rules.regression.metrics names {m!r}, which is not a selected metric"
            )
        name = f"regression[{m}]"

        def fail(msg: str, metric: str = m, rule_name: str = name) -> RuleResult:
            return RuleResult(rule_name, "regression", None, rule.tolerance, False, msg, metric)

        if baseline is None and baseline_created:
            msg = f"{baseline_error or 'no previous baseline'}: nothing to compare yet"
            out.append(
                RuleResult(name, "regression", None, rule.tolerance, True, msg, m, skipped=True)
            )
            continue
        if baseline is None and baseline_missing and not rule.require_baseline:
            # A first run: nothing to regress from. Skipped loudly rather than failed, as a
            # snapshot tool treats a missing snapshot; require_baseline makes it fail instead.
            msg = (
                f"skipped: {baseline_error}; not checked on this run "
                "(rules.regression.require_baseline = true makes this fail)"
            )
            if rule.per_example_drop:
                msg += "; the per-example thresholds (per_example_drop) are off too"
            out.append(
                RuleResult(name, "regression", None, rule.tolerance, True, msg, m, skipped=True)
            )
            continue
        if baseline is None:
            out.append(fail(baseline_error or "no baseline given"))
            continue
        if m in replaced:
            # --update-baseline replaces scores made under other settings (or none): only this
            # metric has nothing to compare; the others still are (a regressed run fails).
            msg = f"{replaced[m]}: nothing to compare yet"
            if m in drops:
                msg += "; its per-example thresholds (per_example_drop) are off too"
            out.append(
                RuleResult(name, "regression", None, rule.tolerance, True, msg, m, skipped=True)
            )
            continue
        if m not in baseline.metrics:
            out.append(fail(f"the baseline has no {m} scores; update it with --update-baseline"))
            continue
        old_hash, new_hash = baseline.settings_hashes.get(m), hashes.get(m)
        if old_hash != new_hash:  # a baseline recording no hash is not known to be comparable
            made = old_hash or "none recorded"
            out.append(
                fail(
                    f"baseline {m} scores were made with other settings ({made} vs {new_hash}) "
                    "and are not comparable; update it with --update-baseline"
                )
            )
            continue
        assert match is not None  # set above whenever there is a baseline
        note = match.note()
        # Pairs of (baseline, current) values of the same source: a mean over other articles'
        # baseline scores compares nothing.
        new = [e for e in outputs if e.scores[m].ok]
        paired = [
            (old, e.scores[m].value)
            for e in new
            if (old := _baseline_score(match, e, m)) is not None
        ]
        if not paired:
            msg = f"no example is scored in both the baseline and this run ({m})"
            out.append(fail(msg + (f"; {note}" if note else "")))
            continue
        olds = [b for b, _ in paired]
        news = [float(c) for _, c in paired]  # type: ignore[arg-type]
        drop, lower, p_no_drop = paired_bootstrap_drop(
            olds, news, rule.confidence, rule.resamples, rule.seed
        )
        real = lower > 0 or math.isnan(lower)  # NaN (overflow): not shown to be noise
        past = above(drop, rule.tolerance)  # a drop of 0.8 - 0.79 is at a tolerance of 0.01
        # A NaN drop (scores overflowing) is not shown to be within tolerance: it fails.
        failed = math.isnan(drop) or (past and real)
        conf = f"{rule.confidence:.0%}"
        n = len(paired)
        shown, tolerance = shown_against(drop, rule.tolerance)
        bound = f"{lower:.{decimals_apart(lower, 0.0)}f}"  # never 0.0000 for a real drop
        if math.isnan(drop):
            msg = (
                f"mean {m} change on {n} examples is not a number (the scores overflow float "
                f"arithmetic), so it is not shown to be within tolerance {rule.tolerance:g}"
            )
        elif failed:
            msg = (
                f"mean {m} dropped by {shown} (> tolerance {tolerance}) on {n} "
                f"examples; the drop is real at {conf} (bootstrap lower bound {bound})"
            )
        elif past:
            msg = (
                f"mean {m} dropped by {shown} (> tolerance {tolerance}) on {n} "
                f"examples, but the bootstrap cannot tell it from noise at {conf} "
                f"(lower bound {bound})"
            )
        else:
            msg = (
                f"mean {m} change {_signed(0.0 - drop)} on {n} examples "
                f"(tolerance {rule.tolerance:g})"
            )
        # Outputs with no baseline entry of their source are new; those matched to an entry
        # the baseline could not score are not (they were in it).
        unscored = sum(1 for e in new if e.id in match.entries) - n
        missing = len(new) - n - unscored
        if missing:
            msg += f"; {missing} examples are new since the baseline"
        if unscored:
            msg += f"; {unscored} examples were not scored in the baseline"
        if note:
            msg += f"; {note}"
        held = (per_example or {}).get(m)
        if held is not None:
            msg += (
                f"; per example: {held['below']} of {held['held']} edited or unchanged outputs "
                f"below their own thresholds, {held['rewritten']} rewritten (not compared)"
            )
        out.append(
            RuleResult(
                name,
                "regression",
                drop,
                rule.tolerance,
                not failed,
                msg,
                m,
                {
                    "paired": n,
                    "lower_bound": lower,
                    "confidence": rule.confidence,
                    "p_no_drop": p_no_drop,
                    "baseline_mean": sum(olds) / n,
                    "current_mean": sum(news) / n,
                    "matched_by_source": match.by_source,
                    "ids_naming_other_source": match.other_source,
                    "source_checked": match.checked,
                    **({"per_example": dict(held)} if held is not None else {}),
                },
            )
        )
    if baseline is not None:
        out += _uncompared_drops(rule, drops, metrics, hashes, baseline, replaced)
    return out


def _uncompared_drops(
    rule: RegressionRule,
    drops: Mapping[str, float],
    metrics: list[str],
    hashes: Mapping[str, str],
    baseline: GateResult,
    replaced: Mapping[str, str],
) -> list[RuleResult]:
    """A rule ``per_example_drop[m]`` for each metric given a per-example drop but no
    regression rule (not in ``rules.regression.metrics``) whose baseline scores are missing or
    were made with other settings: ``apply_baseline_thresholds`` cannot apply its thresholds,
    and no ``regression[m]`` says so. It fails, as ``regression[m]`` does, or is skipped when
    ``--update-baseline`` replaces that metric's scores (``replaced``)."""
    out = []
    covered = set(rule.metrics or metrics)
    for m, drop in drops.items():
        if m in covered or m not in metrics:
            continue
        name = f"per_example_drop[{m}]"
        off = "so its per-example thresholds (rules.regression.per_example_drop) are not applied"
        old_hash, new_hash = baseline.settings_hashes.get(m), hashes.get(m)
        if m in replaced:
            msg = f"{replaced[m]}: no per-example threshold yet"
        elif m not in baseline.metrics:
            msg = f"the baseline has no {m} scores, {off}; update it with --update-baseline"
        elif old_hash != new_hash:
            msg = (
                f"baseline {m} scores were made with other settings ({old_hash or 'none recorded'}"
                f" vs {new_hash}) and are not comparable, {off}; update it with --update-baseline"
            )
        else:
            continue  # applied (apply_baseline_thresholds)
        skipped = m in replaced
        out.append(RuleResult(name, "regression", None, drop, skipped, msg, m, skipped=skipped))
    return out
