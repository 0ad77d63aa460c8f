"""The gate's rules: pure functions from examples + scores to a ``GateResult``.

Nothing here loads a model, reads a file or prints: ``evaluate`` applies the configured rules
(``RULES``: one function per rule; the pairs come from ``faithgate.gate.pairs``, the regression
rule from ``faithgate.gate.baseline``). ``faithgate.gate.Gate`` runs them after scoring.
A new rule is a configuration dataclass (a field of ``faithgate.config.Rules``) and a function
here, added to ``RULES``.

The rules, their settings and their messages are documented in docs/gate.md. Each judges the
outputs only (the unfaithful members of pairs are probes, scored for the pair rule), and an
example that could not be scored fails and says why: nothing passes by being skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from faithgate import __version__
from faithgate.config import GateConfig, PairConsistencyRule, per_metric
from faithgate.errors import InputError
from faithgate.gate.baseline import (
    BaselineMatch,
    BaselineRead,
    active_regression,
    apply_baseline_thresholds,
    match_baseline,
    regression_rules,
)
from faithgate.gate.pairs import Pair, describe_edit, given_pairs, no_pair, unpaired_rows
from faithgate.metrics.base import metric_class
from faithgate.numbers import at_least, mean_of, percent_against, shown_against
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


@dataclass(frozen=True)
class Judged:
    """What a rule reads: the configuration and its selected ``metrics``, every example's
    result (``results``; ``outputs`` leaves the probes out), the pairs and their results, and
    the baseline with each output's entry in it (``match``) and the per-example threshold
    counts (``held``)."""

    config: GateConfig
    metrics: list[str]
    examples: Sequence[Example]
    results: list[ExampleResult]
    outputs: list[ExampleResult]
    pairs: list[Pair]
    pair_results: list[PairResult]
    hashes: Mapping[str, str]
    baseline: BaselineRead
    match: BaselineMatch | None
    held: Mapping[str, Mapping[str, int]]


def evaluate(
    config: GateConfig,
    examples: Sequence[Example],
    scores: Sequence[Mapping[str, Score]],
    settings_hashes: Mapping[str, str],
    *,
    pairs: Sequence[Pair] | None = None,
    baseline: BaselineRead | GateResult | None = None,
) -> GateResult:
    """Apply the configured rules (``RULES``) to scored examples (no model is touched).

    ``scores`` is aligned with ``examples`` (``Scorer.score`` output). ``pairs`` defaults to
    ``given_pairs(config, examples)``; generated pairs are passed in by ``Gate.run``. Pairs
    (and with them probes) are used only when a pair rule is configured: without one, every
    example is an output. ``baseline`` is the previous result for the regression rule, or a
    ``BaselineRead`` that also says why there is none (the rule then fails, or is skipped on
    a first run) and which metrics ``--update-baseline`` replaces.
    """
    if len(scores) != len(examples):
        raise ValueError("scores must be aligned with examples")
    read = baseline if isinstance(baseline, BaselineRead) else BaselineRead(baseline)
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
    regression = active_regression(config)
    held: dict[str, dict[str, int]] = {}
    # Which baseline entry each output is compared with: same id and same source, or its
    # source's entry under another id (computed once: thresholds and means use the same pairs).
    match = match_baseline(outputs, read.result) if read.result is not None else None
    if regression is not None and regression.per_example_drop and read.result is not None:
        held = apply_baseline_thresholds(
            regression, outputs, metrics, settings_hashes, read.result, match
        )
    pair_results: list[PairResult] = []
    rule = config.rules.pair_consistency
    if pairs:
        # Consistency is judged for the rule's metrics only: a report must not list pairs
        # "inconsistent" by a metric no rule gates them on.
        judged = [m for m in pair_rule_metrics(rule, metrics) if m in metrics]
        pair_results = [_pair_result(p, examples, results, metrics, judged) for p in pairs]
    inputs = Judged(
        config,
        metrics,
        examples,
        results,
        outputs,
        pairs,
        pair_results,
        settings_hashes,
        read,
        match,
        held,
    )
    rules = [r for judge in RULES for r in judge(inputs)]
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


def scorable_rule(judged: Judged) -> list[RuleResult]:
    """``scorable``: something must have been scored, or the gate says nothing."""
    outputs = judged.outputs
    n_scored = sum(all(m.ok for m in r.scores.values()) for r in outputs)
    return [
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
    ]


def pass_rate_rule(judged: Judged) -> list[RuleResult]:
    """``pass_rate``: the share of outputs that pass ``>=`` ``rules.min_pass_rate``."""
    outputs = judged.outputs
    n = len(outputs)
    n_pass = sum(r.passed for r in outputs)
    rate = n_pass / n if n else 0.0
    limit = judged.config.rules.min_pass_rate
    n_unscorable = sum(not all(m.ok for m in r.scores.values()) for r in outputs)
    shown_rate, shown_limit = percent_against(rate, limit)
    msg = f"{n_pass}/{n} examples pass ({shown_rate}; need >= {shown_limit})"
    if n_unscorable:
        msg += f"; {n_unscorable} could not be scored"
    ok = n > 0 and at_least(rate, limit)
    return [RuleResult("pass_rate", "pass_rate", rate, limit, ok, msg)]


def min_mean_rules(judged: Judged) -> list[RuleResult]:
    """``min_mean[metric]``: the mean over the scored outputs ``>=`` the minimum."""
    metrics, outputs = judged.metrics, judged.outputs
    out = []
    for metric, minimum in per_metric(judged.config.rules.min_mean, metrics).items():
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
        out.append(
            RuleResult(f"min_mean[{metric}]", "min_mean", mean, minimum, ok, message, metric=metric)
        )
    return out


def pair_consistency_rules(judged: Judged) -> list[RuleResult]:
    """``pair_consistency[metric]`` (and per error type): see ``_pair_rules``."""
    rule = judged.config.rules.pair_consistency
    if rule is None:
        return []
    # Rows meant as pair members that pair with nothing: counted in the rule's message.
    unpaired = len(unpaired_rows(judged.examples, judged.pairs))
    return _pair_rules(rule, judged.pair_results, judged.metrics, unpaired)


def regression_rule(judged: Judged) -> list[RuleResult]:
    """``regression[metric]`` against the baseline (``faithgate.gate.baseline``)."""
    rule = active_regression(judged.config)
    if rule is None:
        return []
    return regression_rules(
        rule,
        judged.outputs,
        judged.metrics,
        judged.hashes,
        judged.baseline,
        judged.held,
        judged.match,
    )


# The rules, in the order of the result's table. A rule is a function of what was judged.
RULES: tuple[Callable[[Judged], list[RuleResult]], ...] = (
    scorable_rule,
    pass_rate_rule,
    min_mean_rules,
    pair_consistency_rules,
    regression_rule,
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


def pair_rule_metrics(rule: PairConsistencyRule | None, metrics: Sequence[str]) -> list[str]:
    """The metrics ``pair_consistency`` judges: those it names, else every selected metric that
    ranks pairs (``Metric.ranks_pairs``; all of them when none does)."""
    if rule is not None and rule.metrics:
        return list(rule.metrics)
    ranking = [m for m in metrics if _ranks_pairs(m)]
    return ranking or list(metrics)


def _ranks_pairs(name: str) -> bool:
    try:
        return metric_class(name).ranks_pairs
    except InputError:  # not registered (a metric object given to the gate): it may rank
        return True


def _pair_rules(
    rule: PairConsistencyRule, pairs: list[PairResult], metrics: list[str], unpaired: int = 0
) -> list[RuleResult]:
    selected = pair_rule_metrics(rule, metrics)
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
                    msg += f"; {no_pair(unpaired)}"
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
                msg += f"; {no_pair(unpaired)} (gated as outputs)"
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


def usage_totals(
    metrics: Sequence[str], scores: Sequence[Mapping[str, Score]]
) -> dict[str, dict[str, int]]:
    """Per metric (in ``metrics``' order), the sum of each counter its scores report in
    ``details["usage"]`` (a mapping of counter -> whole number, e.g. ``requests``,
    ``cached_answers``, ``prompt_tokens``, ``completion_tokens``): what a metric that calls a
    paid model spent on this run. Failed scores count (their requests were sent); a score read
    from the score cache carries none (``faithgate.cache``), as it cost nothing. A metric
    without usage is left out; a counter that is not a whole number of at least 0 is not added."""
    totals: dict[str, dict[str, int]] = {}
    for row in scores:
        for metric, score in row.items():
            usage = score.details.get("usage") if isinstance(score.details, Mapping) else None
            if not isinstance(usage, Mapping):
                continue
            into = totals.setdefault(metric, {})
            for key, n in usage.items():
                if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
                    into[str(key)] = into.get(str(key), 0) + n
    order = {m: i for i, m in enumerate(metrics)}
    ranked = sorted(totals, key=lambda m: (order.get(m, len(order)), m))
    return {m: totals[m] for m in ranked if totals[m]}
