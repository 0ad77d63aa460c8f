"""The result of a gate: plain data, JSON round-trip, no model and no rule in here.

``GateResult`` (schema ``RESULT_SCHEMA``) is what the JSON report, the baseline and the GitHub
Action read: ``passed``, ``verdict``, ``pass_rate``, ``means``, ``settings_hashes``, ``rules``
(name/value/limit/passed/message), ``examples`` (id, source digest, passed, message,
per-metric value/threshold/error, least supported sentence), ``pairs`` and ``usage`` (what
the run's scoring cost per metric: requests, tokens). Reports import this module only; the
rules (``faithgate.gate.evaluate``) build it and the gate (``faithgate.gate.run``) runs them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faithgate.atomic import atomic_write_text
from faithgate.errors import InputError
from faithgate.numbers import is_finite_number, mean_of
from faithgate.types import json_safe
from faithgate.userjson import parse_json

RESULT_SCHEMA = 1
# Hex digits of a source digest: 64 bits tell the articles of any example set apart.
SOURCE_DIGEST_LENGTH = 16


def source_digest(source: str) -> str:
    """The digest a result records of an example's source (the start of the SHA-256 hex of
    its UTF-8 text, as scored): a baseline entry is compared only with an output of the same
    source, whatever their ids say (ids default to line numbers, which shift)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:SOURCE_DIGEST_LENGTH]


def _digest_value(value: Any, example_id: str) -> str | None:
    """A source digest read back from a result JSON: a string or null (a result written before
    sources were recorded)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(
            f"example {example_id!r}: source_digest must be a string or null, got {value!r}"[:200]
        )
    return value


def _flag(value: Any, what: str) -> bool:
    """A true/false field read back from a result JSON: a JSON boolean, never coerced
    (``bool("false")`` is True: every baseline example would read as a pair's probe)."""
    if not isinstance(value, bool):
        raise InputError(f"{what} must be true or false, got {value!r}"[:200])
    return value


def _score_value(value: Any, what: str) -> float | None:
    """A score read back from a result JSON: a finite number or null (unscorable). A baseline
    is compared with new scores, so ``"0.9"``, ``true``, NaN or infinity is malformed, never
    coerced: an infinite baseline value made every drop look like noise to the bootstrap."""
    if value is None:
        return None
    if not is_finite_number(value):
        raise InputError(f"{what} must be a finite number or null, got {value!r}"[:200])
    return float(value)


def is_recorded_number(value: Any) -> bool:
    """Whether ``value`` is a number a result records as it is: an int or a float (NaN and the
    infinities too: a rule's own overflow); never text or a bool, nor an int too large for a
    float (10**400), which every report turns into one."""
    return isinstance(value, float) or is_finite_number(value)


def _number(value: Any, what: str) -> float | int | None:
    """A number a result records (a rule's value or limit, a threshold:
    ``is_recorded_number``), or null."""
    if value is None or is_recorded_number(value):
        return value
    raise InputError(f"{what} must be a number or null, got {value!r}"[:200])


def _text(value: Any, what: str, *, null: bool = False) -> Any:
    """A text field read back from a result JSON (``null`` allowed when ``null``)."""
    if isinstance(value, str) or (null and value is None):
        return value
    raise InputError(f"{what} must be text{' or null' if null else ''}, got {value!r}"[:200])


def _usage(value: Any) -> dict[str, dict[str, int]]:
    """A result's ``usage`` read back: metric -> counter -> a whole number of at least 0 (absent
    or null in a result written before usage was recorded)."""
    if value is None:
        return {}
    ok = isinstance(value, dict) and all(
        isinstance(counters, dict)
        and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counters.values()
        )
        for counters in value.values()
    )
    if not ok:
        raise InputError(
            f"usage must be an object of metric -> counter -> whole number, got {value!r}"[:200]
        )
    return {str(m): {str(k): n for k, n in c.items()} for m, c in value.items()}


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
        value = _number(data["value"], "a least supported sentence's value")
        if value is None:
            raise InputError("a least supported sentence's value must be a number, got null")
        text = _text(data["text"], "a least supported sentence's text")
        return cls(data["metric"], int(data["index"]), text, float(value))


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
    # The baseline's score for this output when it was held to a threshold derived from it.
    baseline: float | None = None

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
        metric = _text(data["metric"], "a score's metric")
        return cls(
            metric=metric,
            value=_score_value(data.get("value"), f"the {metric} value"),
            passed=_flag(data["passed"], f"the {metric} 'passed'"),
            threshold=_number(data.get("threshold"), f"the {metric} threshold"),
            error=_text(data.get("error"), f"the {metric} error", null=True),
            settings_hash=data.get("settings_hash", ""),
            least_supported=SentenceRef.from_dict(ls) if ls else None,
            baseline=_score_value(data.get("baseline"), f"the {metric} baseline value"),
        )


@dataclass
class ExampleResult:
    """Verdict on one example. ``probe`` marks the unfaithful member of a given minimal pair
    (used by pair consistency only, not counted by the per-example rules). ``source_digest``
    identifies the article summarized (``source_digest()``; ``None`` in a result written before
    it was recorded), so a baseline is never compared with another article's output."""

    id: str
    summary: str
    passed: bool
    scores: dict[str, MetricResult] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    probe: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    source_digest: str | None = None

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
            "source_digest": self.source_digest,
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
        raw_id = data["id"]
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
            raise InputError(f"an example id must be a string, got {raw_id!r}"[:200])
        where = f"example {str(raw_id)!r}"[:120]
        summary = data.get("summary", "")
        if not isinstance(summary, str):  # compared word by word with new outputs
            raise InputError(f"{where}: summary must be a string, got {summary!r}"[:200])
        # Not read back (``message`` is made of the reasons), but shown as it is by reports.
        _text(data.get("message"), f"{where}: message", null=True)
        reasons = data.get("reasons", [])
        if not isinstance(reasons, list) or not all(isinstance(r, str) for r in reasons):
            raise InputError(f"{where}: reasons must be a list of text, got {reasons!r}"[:200])
        return cls(
            id=str(raw_id),
            summary=summary,
            passed=_flag(data["passed"], f"{where}: 'passed'"),
            scores={k: MetricResult.from_dict(v) for k, v in data.get("scores", {}).items()},
            reasons=list(reasons),
            probe=_flag(data.get("probe", False), f"{where}: 'probe'"),
            meta=dict(data.get("meta") or {}),
            source_digest=_digest_value(data.get("source_digest"), str(raw_id)),
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
        name = data["name"]
        if not isinstance(name, str):
            raise InputError(f"a rule name must be a string, got {name!r}"[:200])
        where = f"rule {name!r}"[:120]
        return cls(
            name=name,
            kind=_text(data.get("kind", name), f"{where}: kind"),
            value=_number(data.get("value"), f"{where}: value"),
            limit=_number(data.get("limit"), f"{where}: limit"),
            passed=_flag(data["passed"], f"{where}: 'passed'"),
            message=_text(data.get("message", ""), f"{where}: message"),
            metric=_text(data.get("metric"), f"{where}: metric", null=True),
            details=dict(data.get("details") or {}),
            skipped=_flag(data.get("skipped", False), f"{where}: 'skipped'"),
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
        where = f"pair {str(data.get('pair_id'))!r}"[:120]
        for key in ("pair_id", "faithful_id", "unfaithful_id", "unfaithful_summary", "edit"):
            if key in data:
                _text(data[key], f"{where}: {key}")
        _text(data.get("error_type"), f"{where}: error_type", null=True)
        _flag(data.get("generated", False), f"{where}: 'generated'")
        for key in ("faithful_scores", "unfaithful_scores", "consistent"):
            values = data.get(key, {})
            if not isinstance(values, dict):
                raise InputError(f"{where}: {key} must be an object, got {values!r}"[:200])
            for metric, value in values.items():
                what = f"{where}: {key}[{metric!r}]"
                if key == "consistent":
                    _flag(value, what)
                else:
                    _number(value, what)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class GateResult:
    """Everything a gate decided; JSON round-trip with ``to_dict`` / ``from_dict``.

    Saved as JSON it is also the next run's baseline (per-example values by id and source
    digest, plus the settings hash of every metric so incomparable baselines are detected).
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
    # Metric -> counter -> this run's total of what its scores report costing
    # (``details["usage"]``: requests, tokens); empty when no metric reports any.
    usage: dict[str, dict[str, int]] = field(default_factory=dict)

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
            out[name] = mean_of(values) if values else None  # as min_mean computes it
        return out

    def worst_examples(self, k: int = 5) -> list[ExampleResult]:
        """Failing examples first, then the lowest margins to threshold."""
        ranked = sorted(self.outputs, key=lambda e: (e.passed, e.margin()))
        return ranked[:k]

    @property
    def records_sources(self) -> bool:
        """Whether the outputs record their source's digest (results since source checks);
        an older baseline can only be matched to outputs by id."""
        return any(e.source_digest is not None for e in self.outputs)

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
            "usage": {m: dict(c) for m, c in self.usage.items()},
            "rules": [r.to_dict() for r in self.rules],
            "examples": [e.to_dict() for e in self.examples],
            "pairs": [p.to_dict() for p in self.pairs],
            "config": self.config,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateResult:
        if not isinstance(data, Mapping) or "examples" not in data or "metrics" not in data:
            raise InputError("not a faithgate result (expected keys 'metrics' and 'examples')")
        examples = [ExampleResult.from_dict(e) for e in data["examples"]]
        return cls(
            passed=bool(data.get("passed", False)),
            metrics=list(data["metrics"]),
            settings_hashes=consistent_settings_hashes(data.get("settings_hashes") or {}, examples),
            thresholds=dict(data.get("thresholds") or {}),
            rules=[RuleResult.from_dict(r) for r in data.get("rules", [])],
            examples=examples,
            pairs=[PairResult.from_dict(p) for p in data.get("pairs", [])],
            created=data.get("created", ""),
            faithgate_version=data.get("faithgate_version", ""),
            input=data.get("input"),
            config=dict(data.get("config") or {}),
            seconds=data.get("seconds"),
            cache=dict(data.get("cache") or {}),
            usage=_usage(data.get("usage")),
        )

    def save(self, path: str | Path) -> Path:
        """Write the result JSON atomically (a failed write leaves the previous file). A
        result whose scores carry other settings hashes than it records is refused first
        (``InputError``): ``load`` would refuse the file, so it is never written."""
        path = Path(path)
        # A refused write is WriteError (exit 2); the previous file survives.
        atomic_write_text(path, self.json_text())
        return path

    def json_text(self, check: bool = True) -> str:
        """The JSON ``save`` writes; with ``check``, a result whose scores carry other settings
        hashes than it records is refused (``InputError``): ``load`` would refuse the file.
        Strict JSON: a non-finite number (a rule's overflowed drop) is written as null, since a
        bare ``NaN`` or ``Infinity`` breaks every other JSON reader (``fromJSON`` in a
        workflow, ``JSON.parse``)."""
        if check:
            consistent_settings_hashes(self.settings_hashes, self.examples, whose="this result's")
        data = json_safe(self.to_dict())
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def load(cls, path: str | Path) -> GateResult:
        """Read a result JSON (a baseline); one-line ``InputError`` naming the file if bad."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not a faithgate result JSON ({exc})") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
        # Bad JSON, nested too deeply, a number too long to read, a field given twice.
        data = parse_json(text, path, "not a faithgate result JSON")
        return cls.from_checked_dict(data, path)

    @classmethod
    def from_checked_dict(cls, data: Any, where: object) -> GateResult:
        """``from_dict`` of JSON read from ``where``: a malformed result is one ``InputError``
        naming ``where`` (exit 2), never a ``KeyError`` from deep inside."""
        try:
            return cls.from_dict(data)
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        except KeyError as exc:
            raise InputError(f"{where}: malformed faithgate result (missing field {exc})") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{where}: malformed faithgate result ({exc})") from None


def consistent_settings_hashes(
    recorded: Mapping[str, Any],
    examples: Sequence[ExampleResult],
    *,
    whose: str = "the result's",
) -> dict[str, str]:
    """The result's settings hash per metric, checked against every score's own: a result
    whose scores were made under other settings than it records (an edited or merged file) is
    malformed, and a metric it records no hash for takes its scores' (one hash, or none).
    Checked when a result is read, made (``rules.evaluate``) and saved, so faithgate never
    writes a result it refuses to read. ``whose`` names the recorded hashes in the error."""
    hashes = {str(k): str(v) for k, v in dict(recorded).items() if v}
    for ex in examples:  # an unrecorded metric: its first score's hash, the others checked
        for metric, score in ex.scores.items():
            if score.settings_hash:
                hashes.setdefault(metric, score.settings_hash)
    mismatch = first_settings_mismatch(hashes, [ex.scores for ex in examples])
    if mismatch is not None:
        i, metric, made, known = mismatch
        raise InputError(
            f"example {examples[i].id!r}: its {metric} score was made with settings "
            f"{made}, {whose} {metric} scores with {known}"[:300]
        )
    return hashes


def first_settings_mismatch(
    hashes: Mapping[str, str], rows: Iterable[Mapping[str, Any]]
) -> tuple[int, str, str, str] | None:
    """The first score in ``rows`` (each metric -> ``Score`` or ``MetricResult``) made under
    another settings hash than ``hashes`` gives for its metric, as (its row's index, metric,
    its hash, the expected hash); None when there is none. A score without a hash, or of a
    metric ``hashes`` has none for, is not compared. The one comparison behind both checks:
    a result's recorded hashes against its scores (``consistent_settings_hashes``) and the
    scores an executor returns against the driver's (``execution.check_settings_hashes``)."""
    for i, row in enumerate(rows):
        for metric, score in row.items():
            expected = hashes.get(metric)
            if expected and score.settings_hash and score.settings_hash != expected:
                return i, metric, score.settings_hash, expected
    return None
