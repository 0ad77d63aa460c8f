"""The baseline: how a run reads and replaces it, matching outputs to it, and the regression
rule (a paired bootstrap of the per-example drops) with its per-example thresholds.

Reading and writing follow a ``BaselinePolicy`` (the entry points' ``--baseline`` /
``--update-baseline`` / ``--force``); the rest is pure, like the other rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from faithgate.config import GateConfig, RegressionRule, Reports, per_metric
from faithgate.errors import InputError
from faithgate.gate.pairs import changed_words, describe_edit
from faithgate.numbers import above, at_least, decimals_apart, fixed_against, shown_against
from faithgate.result import ExampleResult, GateResult, RuleResult
from faithgate.safety.escape import printable
from faithgate.safety.paths import refuse_not_a_file, same_file


@dataclass(frozen=True)
class BaselinePolicy:
    """How a run treats its baseline file (``config.baseline``).

    ``update``: write this run's result as the new baseline, only when the gate passed (a
    failing run must not become the next release's reference) or with ``force``.
    ``explicit``: the path was named for this run (``--baseline``): a file that does not
    exist is an ``InputError`` (most likely a typo) unless this run creates it; a configured
    baseline that does not exist yet is a first run (the regression rule is skipped, warned).
    ``defer``: leave the write to the caller (``Gate.baseline_to_write``), who writes it with
    the reports as one set, so a report that cannot be written leaves the baseline as it was.
    """

    update: bool = False
    force: bool = False
    explicit: bool = False
    defer: bool = False


@dataclass(frozen=True)
class BaselineRead:
    """The baseline a run compares with (``result``), or why there is none (``error``).

    ``missing``: the file does not exist yet (a first run: the regression rule is skipped, or
    fails with ``require_baseline``); ``created``: this run writes the first one
    (``--update-baseline``); ``replaced`` (metric -> why): metrics whose scores the baseline
    does not hold under this run's settings while ``--update-baseline`` replaces it: only
    their comparisons are skipped, saying why.
    """

    result: GateResult | None = None
    error: str | None = None
    missing: bool = False
    created: bool = False
    replaced: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BaselineWrite:
    """What ``record_baseline`` decided: the ``note`` to print, the path the caller writes
    (``to_write``, with ``BaselinePolicy.defer``) and the ``reports`` still to be written."""

    note: str | None
    to_write: Path | None
    reports: Reports


def active_regression(config: GateConfig) -> RegressionRule | None:
    """The regression rule a run applies: the configured one, or the default one that a
    baseline turns on."""
    rule = config.rules.regression
    if rule is None and config.baseline is not None:
        rule = RegressionRule()
    return rule


def load_baseline(config: GateConfig, policy: BaselinePolicy) -> BaselineRead:
    """Read ``config.baseline`` before scoring (a broken one must not cost a scoring run). A
    missing file is a first run; one that cannot be read, or is not a file, an ``InputError``.
    (A missing file named with ``--baseline`` is refused before this, by
    ``faithgate.gate.checks.check_baseline_exists``.)"""
    path = config.baseline
    if path is None:
        return BaselineRead(created=policy.update)
    try:
        mode: int | None = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):  # nothing there: no baseline yet
        mode = None
    except OSError as exc:
        # Unreadable is not missing: taken for a missing baseline, it skipped the
        # regression rule (fail-open) for, e.g., a directory the runner cannot search.
        raise InputError(
            f"cannot read baseline {printable(str(config.display_path(path)))}: "
            f"{printable(exc.strerror or type(exc).__name__)}"
        ) from None
    where = config.display_path(path)
    if mode is None:
        if policy.update:
            why = f"no previous baseline at {where} (this run creates it)"
            return BaselineRead(error=why, missing=True, created=True)
        why = (
            f"no baseline yet at {where}; create it from a passing run with "
            "`faithgate check --update-baseline`"
        )
        return BaselineRead(error=why, missing=True)
    # A pipe (``--baseline <(git show main:base.json)``) is read like a file; a directory,
    # device or socket is refused (it was taken for a missing baseline, and the regression
    # rule skipped).
    refuse_not_a_file(where, mode, "baseline", pipe=True)
    return BaselineRead(GateResult.load(path))


def missing_baseline_warning(config: GateConfig, read: BaselineRead) -> str | None:
    """The warning of a first run (said on stderr too, so the Action annotates it: a mistyped
    baseline path reads exactly as a first run does): what a missing baseline turns off, the
    regression rule and the per-example thresholds when they are configured (the check that
    catches single-fact edits). None when the baseline is there, created or required."""
    rule = config.rules.regression
    if not read.missing or read.created or (rule is not None and rule.require_baseline):
        return None
    if rule is not None and rule.per_example_drop:
        return (
            f"{read.error}; the regression rule is skipped and the per-example thresholds "
            "(rules.regression.per_example_drop) are off"
        )
    return f"{read.error}; the regression rule is skipped"


def replaced_metrics(
    config: GateConfig, baseline: GateResult, hashes: Mapping[str, str]
) -> dict[str, str]:
    """With ``--update-baseline``: metric -> why, for the metrics whose scores ``baseline``
    does not hold under these settings (``hashes``). The regression rule says "update it with
    --update-baseline" for them; that run must not be refused for the same mismatch. Only
    those metrics: the others are still compared, or a run that regressed on them would pass
    and become the reference because another metric was added or re-configured."""
    where = config.display_path(config.baseline)  # type: ignore[arg-type]
    return {
        m: f"the baseline at {where} holds no {m} scores made with these settings "
        "(this run replaces it)"
        for m in config.metrics
        if m not in baseline.metrics or baseline.settings_hashes.get(m) != hashes.get(m)
    }


def record_baseline(
    result: GateResult, config: GateConfig, policy: BaselinePolicy
) -> BaselineWrite:
    """With ``policy.update``: write ``result`` as the new baseline when it passed (or with
    ``force``), else keep the old one, and say which; ``--json`` at the baseline path is the
    baseline, so it is withheld with it. With ``defer`` the caller writes it."""
    if not policy.update:
        return BaselineWrite(None, None, config.reports)
    if config.baseline is None:
        raise InputError("--update-baseline needs a baseline path (--baseline or 'baseline')")
    where = config.display_path(config.baseline)
    if result.passed or policy.force:
        if not policy.defer:
            result.save(config.baseline)
        note = f"baseline updated: {where}" + (
            " (forced: this run FAILED the gate, and is now the reference)"
            if not result.passed
            else ""
        )
        return BaselineWrite(note, config.baseline if policy.defer else None, config.reports)
    # A failing run must not silently become the next release's reference.
    note = (
        f"baseline NOT updated: the gate failed, so {where} keeps its previous "
        "content; fix the failures, or pass --force to record this failing run "
        "as the baseline"
    )
    reports = config.reports
    if reports.json is not None and same_file(reports.json, config.baseline):
        reports = reports.with_path("json", None)
        note += " (the json report is that file: not written either)"
    return BaselineWrite(note, None, reports)


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


def regression_rules(
    rule: RegressionRule,
    outputs: list[ExampleResult],
    metrics: list[str],
    hashes: Mapping[str, str],
    read: BaselineRead,
    per_example: Mapping[str, Mapping[str, int]] | None = None,
    match: BaselineMatch | None = None,
) -> list[RuleResult]:
    """``regression[m]`` per metric the rule covers: fails when the mean drops by more than
    ``tolerance`` and a paired bootstrap shows the drop is real; skipped on a first run (a
    missing baseline, unless ``require_baseline``) or for metrics ``--update-baseline``
    replaces; failed when the baseline cannot be compared (no scores, other settings)."""
    baseline, baseline_error = read.result, read.error
    baseline_created, baseline_missing = read.created, read.missing
    out = []
    replaced = read.replaced
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
