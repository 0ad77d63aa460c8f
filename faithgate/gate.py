"""The gate engine: configuration + scores -> a verdict per example and per rule.

One engine for every entry point (``faithgate check``, ``pytest --faithgate``, the Action)::

    from faithgate import Gate, load_config
    gate = Gate(load_config())            # [tool.faithgate] / faithgate.toml
    result = gate.run()                   # loads outputs, scores (cached), evaluates
    gate.write_reports(result)            # JUnit / Markdown / JSON / HTML as configured
    raise SystemExit(0 if result.passed else 1)

Scoring and deciding are separate: ``Gate.score`` returns scores (through
``faithgate.scorer.Scorer`` with a ``ScoreCache`` under ``cache_dir``, default ``.faithgate``), and the pure function
``evaluate`` turns examples + scores into a ``GateResult`` without touching a model (the pytest
plugin can score on workers and evaluate on the controller).

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
  ``edited``/``incorrect`` (unfaithful). The unfaithful member of a pair whose faithful member
  is present is a *probe*: it is scored and used for pairs only, not for the per-example rules
  (it is unfaithful on purpose). With ``generate = true`` pairs are also made from every output
  by ``faithgate.perturb``.
- **regression[metric]**: against the baseline (a previous result JSON), on example ids present
  in both: fails when ``mean(baseline) - mean(current) > tolerance`` AND a paired bootstrap of
  the per-example differences puts the one-sided ``confidence`` lower bound of the drop above 0.
  Active when ``baseline`` is set (or ``rules.regression`` is configured). A missing baseline
  file (a project's first run) skips the rule with a warning that says how to create it
  (``--update-baseline``), unless ``require_baseline = true``, which fails it. Scores are only
  compared when the baseline's settings hash equals the current one.

``Gate.run`` with ``update_baseline`` writes the result as the new baseline only when the gate
passed (a failing run must not become the next release's reference) or when ``force_baseline``
says so; ``GateResult.baseline_written`` records what happened.

The result JSON (``GateResult.to_dict``, schema ``RESULT_SCHEMA``) is what the JSON report, the
baseline and the GitHub Action read: ``passed``, ``verdict``, ``pass_rate``, ``means``,
``settings_hashes``, ``rules`` (name/value/limit/passed/message), ``examples`` (id, passed,
message, per-metric value/threshold/error, least supported sentence) and ``pairs``.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from faithgate.config import GateConfig, RegressionRule
from faithgate.errors import InputError
from faithgate.types import Example, Score

RESULT_SCHEMA = 1
FAITHFUL_ROLES = ("reference", "correct", "faithful", "original")
UNFAITHFUL_ROLES = ("edited", "incorrect", "unfaithful", "perturbed")
# Runs with more examples than this show a progress bar on a terminal.
PROGRESS_MIN_EXAMPLES = 50
SCORE_CHUNK = 16


# ---------------------------------------------------------------------- result data model


@dataclass
class SentenceRef:
    """The least supported summary sentence of one example under one metric."""

    metric: str
    index: int
    text: str
    value: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SentenceRef:
        return cls(data["metric"], int(data["index"]), data["text"], float(data["value"]))


@dataclass
class MetricResult:
    """One metric on one example: its value (``None`` when unscorable), the threshold it was
    held to, whether it passed, and why not."""

    metric: str
    value: float | None
    passed: bool
    threshold: float | None = None
    error: str | None = None
    settings_hash: str = ""
    least_supported: SentenceRef | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None and self.error is None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["least_supported"] = self.least_supported.to_dict() if self.least_supported else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricResult:
        ls = data.get("least_supported")
        return cls(
            metric=data["metric"],
            value=None if data.get("value") is None else float(data["value"]),
            passed=bool(data["passed"]),
            threshold=data.get("threshold"),
            error=data.get("error"),
            settings_hash=data.get("settings_hash", ""),
            least_supported=SentenceRef.from_dict(ls) if ls else None,
        )


@dataclass
class ExampleResult:
    """Verdict on one example. ``probe`` marks the unfaithful member of a given minimal pair
    (used by pair consistency only, not counted by the per-example rules)."""

    id: str
    summary: str
    passed: bool
    scores: dict[str, MetricResult] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    probe: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """One line: why the example failed (empty when it passed)."""
        return "; ".join(self.reasons)

    @property
    def least_supported(self) -> SentenceRef | None:
        """Least supported sentence: from the first failing metric, else the first metric
        that scores sentences."""
        failing = [m for m in self.scores.values() if not m.passed and m.least_supported]
        pool = failing or [m for m in self.scores.values() if m.least_supported]
        return pool[0].least_supported if pool else None

    def margin(self) -> float:
        """Smallest (value - threshold) over metrics; -inf when unscorable (sort key)."""
        margins = []
        for m in self.scores.values():
            if not m.ok:
                return -math.inf
            margins.append(m.value - (m.threshold or 0.0) if m.threshold is not None else m.value)
        return min(margins) if margins else -math.inf

    def to_dict(self) -> dict[str, Any]:
        ls = self.least_supported
        return {
            "id": self.id,
            "summary": self.summary,
            "passed": self.passed,
            "message": self.message,
            "reasons": list(self.reasons),
            "probe": self.probe,
            "least_supported": ls.to_dict() if ls else None,
            "scores": {k: v.to_dict() for k, v in self.scores.items()},
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExampleResult:
        return cls(
            id=str(data["id"]),
            summary=data.get("summary", ""),
            passed=bool(data["passed"]),
            scores={k: MetricResult.from_dict(v) for k, v in data.get("scores", {}).items()},
            reasons=list(data.get("reasons", [])),
            probe=bool(data.get("probe", False)),
            meta=dict(data.get("meta") or {}),
        )


@dataclass
class RuleResult:
    """One decision rule's outcome: ``value`` compared with ``limit``.

    ``name`` is unique in a result, e.g. ``pass_rate``, ``min_mean[bertscore]``,
    ``pair_consistency[bertscore]``, ``pair_consistency[bertscore|Intrinsic Entity]``,
    ``regression[bertscore]``, ``scorable``. For ``regression`` value is the mean drop and limit
    the tolerance; ``details`` holds the bootstrap bound and counts.
    """

    name: str
    kind: str
    value: float | None
    limit: float | None
    passed: bool
    message: str
    metric: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    # Passed without being checked (e.g. regression on a first run without a baseline): reports
    # show it as SKIP with its message, so a pass never hides a rule that did not run.
    skipped: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RuleResult:
        return cls(
            name=data["name"],
            kind=data.get("kind", data["name"]),
            value=data.get("value"),
            limit=data.get("limit"),
            passed=bool(data["passed"]),
            message=data.get("message", ""),
            metric=data.get("metric"),
            details=dict(data.get("details") or {}),
            skipped=bool(data.get("skipped", False)),
        )


@dataclass
class PairResult:
    """One minimal pair: did the faithful member outscore the unfaithful one, per metric?
    ``consistent[metric]`` is False for ties and for pairs a metric could not score."""

    pair_id: str
    faithful_id: str
    unfaithful_id: str
    error_type: str | None
    generated: bool
    unfaithful_summary: str
    # The edit as "old words -> new words" (word-level diff of the two summaries), for reports.
    edit: str = ""
    faithful_scores: dict[str, float | None] = field(default_factory=dict)
    unfaithful_scores: dict[str, float | None] = field(default_factory=dict)
    consistent: dict[str, bool] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class GateResult:
    """Everything a gate decided; JSON round-trip with ``to_dict`` / ``from_dict``.

    Saved as JSON it is also the next run's baseline (per-example values by id, plus the
    settings hash of every metric so incomparable baselines are detected).
    """

    passed: bool
    metrics: list[str]
    settings_hashes: dict[str, str]
    thresholds: dict[str, float]
    rules: list[RuleResult]
    examples: list[ExampleResult]
    pairs: list[PairResult] = field(default_factory=list)
    created: str = ""
    faithgate_version: str = ""
    input: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    seconds: float | None = None
    cache: dict[str, int] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    @property
    def outputs(self) -> list[ExampleResult]:
        """Examples the per-example rules apply to (everything but pair probes)."""
        return [e for e in self.examples if not e.probe]

    @property
    def n_examples(self) -> int:
        return len(self.outputs)

    @property
    def n_passed(self) -> int:
        return sum(e.passed for e in self.outputs)

    @property
    def pass_rate(self) -> float | None:
        n = self.n_examples
        return self.n_passed / n if n else None

    @property
    def failed_examples(self) -> list[ExampleResult]:
        return [e for e in self.outputs if not e.passed]

    @property
    def failed_rules(self) -> list[RuleResult]:
        return [r for r in self.rules if not r.passed]

    @property
    def skipped_rules(self) -> list[RuleResult]:
        """Rules that passed without being checked (each says why in its message)."""
        return [r for r in self.rules if r.passed and r.skipped]

    def means(self) -> dict[str, float | None]:
        """Mean value per metric over the scored outputs (``None`` when none scored)."""
        out: dict[str, float | None] = {}
        for name in self.metrics:
            values = [e.scores[name].value for e in self.outputs if name in e.scores]
            values = [v for v in values if v is not None]
            out[name] = sum(values) / len(values) if values else None
        return out

    def worst_examples(self, k: int = 5) -> list[ExampleResult]:
        """Failing examples first, then the lowest margins to threshold."""
        ranked = sorted(self.outputs, key=lambda e: (e.passed, e.margin()))
        return ranked[:k]

    def values(self, metric: str) -> dict[str, float]:
        """Scored values of one metric by example id (outputs only): what a baseline holds."""
        return {
            e.id: e.scores[metric].value  # type: ignore[misc]
            for e in self.outputs
            if metric in e.scores and e.scores[metric].ok
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RESULT_SCHEMA,
            "faithgate_version": self.faithgate_version,
            "created": self.created,
            "passed": self.passed,
            "verdict": self.verdict,
            "input": self.input,
            "metrics": list(self.metrics),
            "settings_hashes": dict(self.settings_hashes),
            "thresholds": dict(self.thresholds),
            "n_examples": self.n_examples,
            "n_passed": self.n_passed,
            "pass_rate": self.pass_rate,
            "means": self.means(),
            "seconds": self.seconds,
            "cache": dict(self.cache),
            "rules": [r.to_dict() for r in self.rules],
            "examples": [e.to_dict() for e in self.examples],
            "pairs": [p.to_dict() for p in self.pairs],
            "config": self.config,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateResult:
        if not isinstance(data, Mapping) or "examples" not in data or "metrics" not in data:
            raise InputError("not a faithgate result (expected keys 'metrics' and 'examples')")
        return cls(
            passed=bool(data.get("passed", False)),
            metrics=list(data["metrics"]),
            settings_hashes=dict(data.get("settings_hashes") or {}),
            thresholds=dict(data.get("thresholds") or {}),
            rules=[RuleResult.from_dict(r) for r in data.get("rules", [])],
            examples=[ExampleResult.from_dict(e) for e in data["examples"]],
            pairs=[PairResult.from_dict(p) for p in data.get("pairs", [])],
            created=data.get("created", ""),
            faithgate_version=data.get("faithgate_version", ""),
            input=data.get("input"),
            config=dict(data.get("config") or {}),
            seconds=data.get("seconds"),
            cache=dict(data.get("cache") or {}),
        )

    def save(self, path: str | Path) -> Path:
        from faithgate.atomic import atomic_write_text

        path = Path(path)
        try:
            atomic_write_text(path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:  # the previous file survives (atomic write): say so
            raise InputError(f"cannot write {path} (left unchanged): {exc}") from None
        return path

    @classmethod
    def load(cls, path: str | Path) -> GateResult:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: not a faithgate result JSON ({exc})") from None
        except RecursionError:
            raise InputError(f"{path}: not a faithgate result JSON (nested too deeply)") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
        try:
            return cls.from_dict(data)
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{path}: malformed faithgate result ({exc})") from None


# ---------------------------------------------------------------------- pairs


@dataclass(frozen=True)
class Pair:
    """Indices (into the examples list) of a faithful member and its unfaithful edit."""

    faithful: int
    unfaithful: int
    pair_id: str
    error_type: str | None = None
    generated: bool = False


def find_pairs(examples: Sequence[Example]) -> list[Pair]:
    """Minimal pairs given in the data: rows sharing ``meta['pair_id']`` with a faithful
    ``role`` (reference/correct/...) and an unfaithful one (edited/incorrect/...). A group with
    several members of each kind yields every faithful x unfaithful combination."""
    groups: dict[str, tuple[list[int], list[int]]] = {}
    for i, ex in enumerate(examples):
        pid = ex.meta.get("pair_id")
        role = str(ex.meta.get("role") or "").lower()
        if pid is None or pid == "":
            continue
        good, bad = groups.setdefault(str(pid), ([], []))
        if role in FAITHFUL_ROLES:
            good.append(i)
        elif role in UNFAITHFUL_ROLES:
            bad.append(i)
    pairs = []
    for pid, (good, bad) in groups.items():
        for g in good:
            for b in bad:
                etype = examples[b].meta.get("error_type")
                pairs.append(Pair(g, b, pid, str(etype) if etype else None))
    return pairs


# ---------------------------------------------------------------------- evaluation


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
) -> GateResult:
    """Apply the configured rules to scored examples (no model is touched).

    ``scores`` is aligned with ``examples`` (``Scorer.score`` output). ``pairs`` defaults to
    ``find_pairs(examples)``; generated pairs are passed in by ``Gate.run``. ``baseline`` is
    the previous result for the regression rule; ``baseline_error`` explains why there is none
    (the rule then fails), unless ``baseline_created`` says this run writes the first baseline
    (``--update-baseline``) or ``baseline_missing`` says the file does not exist yet (a first
    run): the rule is then skipped and says so (or fails with ``require_baseline``).
    """
    from faithgate import __version__

    if len(scores) != len(examples):
        raise ValueError("scores must be aligned with examples")
    metrics = list(config.metrics)
    pairs = list(find_pairs(examples) if pairs is None else pairs)
    # The unfaithful member of every pair (given or generated) is a probe, not an output.
    probes = {p.unfaithful for p in pairs}
    thresholds = {m: t for m, t in config.thresholds.items() if m in metrics}

    results = [
        _example_result(ex, sc, metrics, thresholds, probe=i in probes)
        for i, (ex, sc) in enumerate(zip(examples, scores, strict=True))
    ]
    outputs = [r for r in results if not r.probe]
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
    msg = f"{n_pass}/{n} examples pass ({rate:.1%}; need >= {limit:.1%})"
    if n_unscorable:
        msg += f"; {n_unscorable} could not be scored"
    rules.append(RuleResult("pass_rate", "pass_rate", rate, limit, n > 0 and rate >= limit, msg))

    min_mean = dict(config.rules.min_mean)
    if "*" in min_mean:
        star = min_mean.pop("*")
        min_mean = {**dict.fromkeys(metrics, star), **min_mean}
    for metric, minimum in min_mean.items():
        if metric not in metrics:
            raise InputError(f"rules.min_mean names metric {metric!r}, which is not selected")
        values = [r.scores[metric].value for r in outputs if r.scores[metric].ok]
        mean = sum(values) / len(values) if values else None  # type: ignore[arg-type]
        ok = mean is not None and mean >= minimum
        rules.append(
            RuleResult(
                f"min_mean[{metric}]",
                "min_mean",
                mean,
                minimum,
                ok,
                f"mean {metric} {mean:.4f} over {len(values)} scored examples (need >= {minimum:g})"
                if mean is not None
                else f"no example scored by {metric}",
                metric=metric,
            )
        )

    pair_results: list[PairResult] = []
    if pairs:
        pair_results = [_pair_result(p, examples, results, metrics) for p in pairs]
    rule = config.rules.pair_consistency
    if rule is not None:
        rules.extend(_pair_rules(rule, pair_results, metrics))

    regression = config.rules.regression
    if regression is None and config.baseline is not None:
        regression = RegressionRule()
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


def check_rule_metrics(config: GateConfig) -> None:
    """Raise ``InputError`` when a rule names a metric that is not selected."""
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
    for key, m in named:
        if m not in selected:
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
            why = score.error or "metric returned NaN"
            per_metric[name] = MetricResult(
                name, None, False, threshold, why, score.settings_hash, ref
            )
            reasons.append(f"{name}: could not score ({why})")
            continue
        value = float(score.value)
        ok = threshold is None or value >= threshold
        per_metric[name] = MetricResult(name, value, ok, threshold, None, score.settings_hash, ref)
        if not ok:
            why = f"{name} {value:.4f} < threshold {threshold:g}"
            if ref is not None:
                why += f"; least supported sentence: {_quote(ref.text)} ({ref.value:.3f})"
            reasons.append(why)
    keep = {k: ex.meta[k] for k in ("pair_id", "role", "error_type", "generated") if k in ex.meta}
    return ExampleResult(
        id=ex.id,
        summary=ex.summary,
        passed=not reasons,
        scores=per_metric,
        reasons=reasons,
        probe=probe,
        meta=keep,
    )


def _quote(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return f'"{text[: limit - 1]}…"' if len(text) > limit else f'"{text}"'


def _pair_result(
    pair: Pair, examples: Sequence[Example], results: Sequence[ExampleResult], metrics: list[str]
) -> PairResult:
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
        # Ties fail (BUMP): a metric that cannot tell the two apart is not consistent.
        pr.consistent[m] = g is not None and b is not None and g > b
    return pr


def describe_edit(before: str, after: str, limit: int = 120) -> str:
    """The word-level difference between two summaries, e.g. ``'appeared' -> 'confessed'``
    (several changed spans are joined with ``; ``)."""
    import difflib

    a, b = before.split(), after.split()
    parts = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        old, new = " ".join(a[i1:i2]), " ".join(b[j1:j2])
        if op == "delete":
            parts.append(f"-'{old}'")
        elif op == "insert":
            parts.append(f"+'{new}'")
        else:
            parts.append(f"'{old}' -> '{new}'")
    text = "; ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pair_rules(rule: Any, pairs: list[PairResult], metrics: list[str]) -> list[RuleResult]:
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
                msg = (
                    "no minimal pairs: give rows with pair_id and role reference/edited, "
                    "or set pair_consistency.generate = true"
                )
                out.append(RuleResult(name, "pair_consistency", None, rule.min_rate, False, msg, m))
                continue
            rate = k / n
            msg = f"{k}/{n} pairs ranked faithful > edited by {m} ({rate:.1%}; need >= {rule.min_rate:.1%})"
            if unscored:
                msg += f"; {unscored} pairs could not be scored"
            inconsistent = [p for p in members if not p.consistent.get(m, False)]
            details: dict[str, Any] = {
                "pairs": n,
                "consistent": k,
                "error_type": etype,
                "inconsistent_pairs": [p.pair_id for p in inconsistent[:20]],
            }
            out.append(
                RuleResult(
                    name,
                    "pair_consistency",
                    rate,
                    rule.min_rate,
                    rate >= rule.min_rate,
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
    import numpy as np

    d = np.asarray(baseline, dtype=float) - np.asarray(current, dtype=float)
    n = len(d)
    if n == 0:
        raise ValueError("no paired values")
    rng = np.random.default_rng(seed)
    boots = np.empty(resamples)
    chunk = max(1, 2_000_000 // n)  # bounded memory for large example sets
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
) -> list[RuleResult]:
    out = []
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
            out.append(
                RuleResult(name, "regression", None, rule.tolerance, True, msg, m, skipped=True)
            )
            continue
        if baseline is None:
            out.append(fail(baseline_error or "no baseline given"))
            continue
        if m not in baseline.metrics:
            out.append(fail(f"the baseline has no {m} scores; update it with --update-baseline"))
            continue
        old_hash, new_hash = baseline.settings_hashes.get(m), hashes.get(m)
        if old_hash and new_hash and old_hash != new_hash:
            out.append(
                fail(
                    f"baseline {m} scores were made with other settings ({old_hash} vs "
                    f"{new_hash}) and are not comparable; update it with --update-baseline"
                )
            )
            continue
        old = baseline.values(m)
        new = {e.id: e.scores[m].value for e in outputs if e.scores[m].ok}
        ids = [i for i in old if i in new]
        if not ids:
            out.append(fail(f"no example id is scored in both the baseline and this run ({m})"))
            continue
        drop, lower, p_no_drop = paired_bootstrap_drop(
            [old[i] for i in ids],
            [new[i] for i in ids],  # type: ignore[misc]
            rule.confidence,
            rule.resamples,
            rule.seed,
        )
        real = lower > 0
        failed = drop > rule.tolerance and real
        conf = f"{rule.confidence:.0%}"
        if failed:
            msg = (
                f"mean {m} dropped by {drop:.4f} (> tolerance {rule.tolerance:g}) on {len(ids)} "
                f"examples; the drop is real at {conf} (bootstrap lower bound {lower:.4f})"
            )
        elif drop > rule.tolerance:
            msg = (
                f"mean {m} dropped by {drop:.4f} (> tolerance {rule.tolerance:g}) on {len(ids)} "
                f"examples, but the bootstrap cannot tell it from noise at {conf} "
                f"(lower bound {lower:.4f})"
            )
        else:
            msg = f"mean {m} change {0.0 - drop:+.4f} on {len(ids)} examples (tolerance {rule.tolerance:g})"
        missing = len(new) - len(ids)
        if missing:
            msg += f"; {missing} examples are new since the baseline"
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
                    "paired": len(ids),
                    "lower_bound": lower,
                    "confidence": rule.confidence,
                    "p_no_drop": p_no_drop,
                    "baseline_mean": sum(old[i] for i in ids) / len(ids),
                    "current_mean": sum(new[i] for i in ids) / len(ids),  # type: ignore[misc]
                },
            )
        )
    return out


# ---------------------------------------------------------------------- the gate


class Gate:
    """A configured gate: loads its examples, scores them (cached) and evaluates the rules.

    ``scorer`` may be given to share loaded models (the pytest plugin keeps one per session);
    otherwise one is built from the configuration with a ``ScoreCache`` at
    ``<cache_dir>/scores.sqlite`` (``cache_dir`` defaults to ``.faithgate`` next to the
    configuration; ``use_cache=False`` scores everything afresh and writes nothing there).
    Scoring runs through the executor of ``config.execution`` (``faithgate.execution``: in
    process by default, or on a Ray cluster), with the cache kept here on the driver.
    """

    def __init__(
        self,
        config: GateConfig,
        *,
        scorer: Any | None = None,
        progress: bool | None = None,
        update_baseline: bool = False,
        force_baseline: bool = False,
        use_cache: bool = True,
    ) -> None:
        self.config = config
        self.use_cache = use_cache
        self._scorer = scorer
        self._executor: Any | None = None
        self.progress = progress
        self.update_baseline = update_baseline
        self.force_baseline = force_baseline
        # After ``run`` with ``update_baseline``: one line saying whether the baseline was
        # written or refused (and why), for the entry points to print.
        self.baseline_note: str | None = None

    # -- scoring ---------------------------------------------------------------------------
    @property
    def scorer(self) -> Any:
        if self._scorer is None:
            from faithgate.cache import ScoreCache
            from faithgate.scorer import Scorer

            cfg = self.config
            cache = ScoreCache(cfg.cache_path / "scores.sqlite") if self.use_cache else None
            self._scorer = Scorer(
                cfg.metrics,
                models=cfg.models,
                backend=cfg.backend,
                allow_download=cfg.allow_download,
                metric_settings={k: v for k, v in cfg.metric_settings.items() if k in cfg.metrics},
                model_options=cfg.model_options,
                cache=cache,
            )
        return self._scorer

    @property
    def executor(self) -> Any:
        """Where scoring runs (``faithgate.execution``), built on first use; the local one
        scores with ``self.scorer`` exactly as before."""
        if self._executor is None:
            from faithgate.execution import ScorerRecipe, make_executor

            self._executor = make_executor(
                self.config.execution,
                ScorerRecipe.from_config(self.config),
                scorer=self.scorer,
            )
        return self._executor

    def close(self) -> None:
        """Release the executor's workers (a Ray actor pool; nothing for the local one)."""
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def load_examples(self) -> list[Example]:
        """The outputs to gate: the ``outputs`` file, or the summarizer run over ``data``."""
        cfg = self.config
        if cfg.outputs is not None:
            from faithgate.io import load_examples

            return load_examples(cfg.outputs)
        if cfg.summarizer is not None and cfg.data is not None:
            from faithgate.summarize import run_summarizer

            return run_summarizer(cfg.summarizer, cfg.data, search_path=[cfg.root])
        raise InputError(
            "nothing to gate: set 'outputs' (a JSONL of summaries) or 'summarizer' + 'data' "
            "in [tool.faithgate], or pass --outputs / --summarizer and --data"
        )

    def score(self, examples: Sequence[Example]) -> list[dict[str, Score]]:
        """Scores of every metric for every example, in chunks with a progress bar on long
        runs (auto: a terminal and more than ``PROGRESS_MIN_EXAMPLES`` examples)."""
        examples = list(examples)
        show = self.progress
        if show is None:
            show = len(examples) > PROGRESS_MIN_EXAMPLES and sys.stderr.isatty()
        executor = self.executor
        if not show:
            return executor.score(examples)
        from faithgate.report.terminal import progress_bar

        out: list[dict[str, Score]] = []
        with progress_bar(len(examples), "scoring") as bar:
            if executor.name != "local":
                # One call keeps every worker busy; the bar moves as batches come back.
                return executor.score(examples, progress=bar.update)
            for start in range(0, len(examples), SCORE_CHUNK):
                chunk = examples[start : start + SCORE_CHUNK]
                out.extend(executor.score(chunk))
                bar.update(len(chunk))
        return out

    def generate_pairs(self, examples: Sequence[Example]) -> tuple[list[Example], list[Pair]]:
        """Perturbed variants of every output (``faithgate.perturb``) as extra examples and
        the pairs linking them to their originals (indices offset by ``len(examples)``)."""
        rule = self.config.rules.pair_consistency
        assert rule is not None
        try:
            # import_module, not ``from faithgate import perturb``: the package's lazy public
            # API maps that name to the function, not the module.
            import importlib

            perturb_module = importlib.import_module("faithgate.perturb")
        except ImportError as exc:
            raise InputError(
                f"pair_consistency.generate needs faithgate.perturb, which cannot be imported ({exc})"
            ) from None
        variants: list[Example] = []
        pairs: list[Pair] = []
        base = len(examples)
        for i, ex in enumerate(examples):
            role = str(ex.meta.get("role") or "").lower()
            if role in UNFAITHFUL_ROLES:
                continue
            made = _call_perturb(perturb_module, ex, rule)
            for k, (text, etype) in enumerate(made[: rule.per_example]):
                vid = f"{ex.id}~{k}"
                variants.append(
                    Example(
                        vid,
                        ex.source,
                        text,
                        meta={
                            "pair_id": f"gen:{vid}",
                            "role": "edited",
                            "error_type": etype,
                            "generated": True,
                        },
                    )
                )
                pairs.append(Pair(i, base + len(variants) - 1, f"gen:{vid}", etype, True))
        return variants, pairs

    # -- running ---------------------------------------------------------------------------
    def run(self, examples: Sequence[Example] | None = None) -> GateResult:
        """Load (unless given), score and evaluate; also writes the baseline when asked."""
        import time

        start = time.perf_counter()
        check_rule_metrics(self.config)  # before any model loads: fail fast on a typo
        self.check_paths()
        # The baseline is read before scoring: a broken one must not cost a scoring run.
        baseline, baseline_error, baseline_missing = self._load_baseline()
        examples = list(self.load_examples() if examples is None else examples)
        if not examples:
            raise InputError("no examples to gate")
        pairs = find_pairs(examples)
        rule = self.config.rules.pair_consistency
        if rule is not None and rule.generate:
            variants, generated = self.generate_pairs(examples)
            examples = examples + variants
            pairs = pairs + generated
        scorer = self.scorer
        cache = getattr(scorer, "cache", None)
        hits0, misses0 = (cache.hits, cache.misses) if cache is not None else (0, 0)
        try:
            scores = self.score(examples)
        finally:
            self.close()  # a Ray run's actors (and a Ray runtime it started) end with scoring
        hashes = scorer.settings_hashes()
        if self.update_baseline and baseline is not None:
            stale = sorted(
                m
                for m in self.config.metrics
                if baseline.settings_hashes.get(m) not in (None, hashes.get(m))
            )
            if stale:
                # The regression rule says "update it with --update-baseline" for scores made
                # with other settings; that run must not be refused for the same mismatch.
                where = self.config.display_path(self.config.baseline)  # type: ignore[arg-type]
                baseline, baseline_error = None, (
                    f"the baseline at {where} holds {', '.join(stale)} scores made with other "
                    "settings (this run replaces it)"
                )
        result = evaluate(
            self.config,
            examples,
            scores,
            hashes,
            pairs=pairs,
            baseline=baseline,
            baseline_error=baseline_error,
            baseline_created=baseline is None and self.update_baseline,
            baseline_missing=baseline_missing,
        )
        cfg = self.config
        if cfg.outputs is not None:
            result.input = cfg.display_path(cfg.outputs)
        elif cfg.summarizer and cfg.data is not None:
            result.input = f"{cfg.summarizer} over {cfg.display_path(cfg.data)}"
        if cache is not None:
            result.cache = {"hits": cache.hits - hits0, "misses": cache.misses - misses0}
        result.seconds = round(time.perf_counter() - start, 3)
        if self.update_baseline:
            if self.config.baseline is None:
                raise InputError(
                    "--update-baseline needs a baseline path (--baseline or 'baseline')"
                )
            where = cfg.display_path(self.config.baseline)
            if result.passed or self.force_baseline:
                result.save(self.config.baseline)
                self.baseline_note = f"baseline updated: {where}" + (
                    " (forced: this run FAILED the gate, and is now the reference)"
                    if not result.passed
                    else ""
                )
            else:
                # A failing run must not silently become the next release's reference.
                self.baseline_note = (
                    f"baseline NOT updated: the gate failed, so {where} keeps its previous "
                    "content; fix the failures, or pass --force to record this failing run "
                    "as the baseline"
                )
        if self.use_cache:
            result.save(self.config.cache_path / "last-result.json")
        return result

    def check_paths(self) -> None:
        """Refuse (``InputError``, exit 2) a report or baseline path that is one of this run's
        inputs (outputs, data, configuration, a baseline only read), before anything runs."""
        from faithgate.paths import refuse_overwriting_inputs, same_file

        cfg = self.config
        writes = [(f"{kind} report", path) for kind, path in cfg.reports.items()]
        reads = [
            ("outputs file", cfg.outputs),
            ("data file", cfg.data),
            ("configuration file", cfg.source),
        ]
        if self.update_baseline:
            # ``--json`` at the baseline path writes the same result twice: allowed.
            if cfg.baseline is not None and not (
                cfg.reports.json is not None and same_file(cfg.reports.json, cfg.baseline)
            ):
                writes.append(("baseline", cfg.baseline))
        else:
            reads.append(("baseline", cfg.baseline))
        refuse_overwriting_inputs(writes, reads)

    def _load_baseline(self) -> tuple[GateResult | None, str | None, bool]:
        """(baseline, why there is none, whether the file is simply missing)."""
        path = self.config.baseline
        if path is None:
            return None, None, False
        if path.is_dir():
            raise InputError(f"baseline {path} is a directory, not a result JSON file")
        if not path.is_file():
            if self.update_baseline:
                where = self.config.display_path(path)
                return None, f"no previous baseline at {where} (this run creates it)", True
            return (
                None,
                f"no baseline yet at {self.config.display_path(path)}; create it from a "
                "passing run with `faithgate check --update-baseline`",
                True,
            )
        return GateResult.load(path), None, False

    def write_reports(self, result: GateResult) -> dict[str, Path]:
        """Write every configured report; returns kind -> path written."""
        from faithgate.report import write_reports

        return write_reports(result, self.config.reports)


def _call_perturb(module: Any, ex: Example, rule: Any) -> list[tuple[str, str | None]]:
    """Adapter over ``faithgate.perturb.perturb``: variants as (text, error type)."""
    func: Callable[..., Any] = module.perturb
    kwargs: dict[str, Any] = {"seed": rule.seed}
    if rule.types:
        kwargs["types"] = tuple(rule.types)  # hashable: perturb caches type resolution
    made = list(func(ex.source, ex.summary, **kwargs))
    # One variant per type comes back in a fixed type order; shuffle (seeded per example) so
    # ``per_example`` keeps a mix of error types rather than always the first types.
    random.Random(f"{rule.seed}:{ex.id}").shuffle(made)
    out: list[tuple[str, str | None]] = []
    for v in made:
        if isinstance(v, str):
            out.append((v, None))
        elif isinstance(v, Mapping):
            out.append((v.get("summary") or v.get("text"), v.get("error_type") or v.get("type")))
        else:
            text = getattr(v, "summary", None) or getattr(v, "text", None)
            etype = getattr(v, "error_type", None) or getattr(v, "type", None)
            out.append((text, etype))
    return [(t, e) for t, e in out if isinstance(t, str) and t.strip() and t != ex.summary]
