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
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, AllowInfNan, BeforeValidator, Field, Strict
from pydantic_core import ErrorDetails

from faithgate.errors import InputError
from faithgate.numbers import is_finite_number, mean_of
from faithgate.safety.atomic import atomic_write_text
from faithgate.safety.userjson import parse_json
from faithgate.schema import ValidationError, adapter, expect, first_error, item, none_as_empty
from faithgate.types import json_safe

RESULT_SCHEMA = 1
# Hex digits of a source digest: 64 bits tell the articles of any example set apart.
SOURCE_DIGEST_LENGTH = 16


def source_digest(source: str) -> str:
    """The digest a result records of an example's source (the start of the SHA-256 hex of
    its UTF-8 text, as scored): a baseline entry is compared only with an output of the same
    source, whatever their ids say (ids default to line numbers, which shift)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:SOURCE_DIGEST_LENGTH]


def is_recorded_number(value: Any) -> bool:
    """Whether ``value`` is a number a result records as it is: an int or a float (NaN and the
    infinities too: a rule's own overflow); never text or a bool, nor an int too large for a
    float (10**400), which every report turns into one."""
    return isinstance(value, float) or is_finite_number(value)


# ------------------------------------------------------------------ the shapes of a result JSON
# Each field's type below is its schema (faithgate.schema: pydantic checks the dataclasses), in
# the words its error uses. Scores, flags and ids are strict: ``bool("false")`` is True, and a
# baseline's ``"0.9"``, ``true`` or infinity compared with new scores made every drop look like
# noise to the bootstrap.
_FLOAT_MAX = int(sys.float_info.max)
Flag = Annotated[bool, Strict(), expect("true or false")]
Text = Annotated[str, Strict(), expect("text")]
OptionalText = Annotated[Annotated[str, Strict()] | None, expect("text or null")]
# A score read back: a finite number or null (unscorable).
Score = Annotated[
    Annotated[float, Strict(), AllowInfNan(False)] | None, expect("a finite number or null")
]
# A number recorded as it is (``is_recorded_number``: a rule's value or limit, a threshold).
_Int = Annotated[int, Strict(), Field(ge=-_FLOAT_MAX, le=_FLOAT_MAX)]
Number = Annotated[_Int | Annotated[float, Strict()] | None, expect("a number or null")]
# An object read back as empty when null.
Table = Annotated[dict[str, Any], BeforeValidator(none_as_empty)]


@dataclass
class SentenceRef:
    """The least supported summary sentence of one example under one metric."""

    metric: str
    index: int
    text: Text
    value: Annotated[float, Strict(), expect("a number")]


@dataclass
class MetricResult:
    """One metric on one example: its value (``None`` when unscorable), the threshold it was
    held to, whether it passed, and why not."""

    metric: Text
    value: Score
    passed: Flag
    threshold: Number = None
    error: OptionalText = None
    settings_hash: str = ""
    least_supported: SentenceRef | None = None
    # The baseline's score for this output when it was held to a threshold derived from it.
    baseline: Score = None

    @property
    def ok(self) -> bool:
        return self.value is not None and self.error is None


def _score_defaults(data: Any) -> Any:
    """A score read back: its value null (unscorable) when absent."""
    return {"value": None, **data} if isinstance(data, Mapping) else data


_ScoreRead = Annotated[MetricResult, BeforeValidator(_score_defaults)]


@dataclass
class ExampleResult:
    """Verdict on one example. ``probe`` marks the unfaithful member of a given minimal pair
    (used by pair consistency only, not counted by the per-example rules). ``source_digest``
    identifies the article summarized (``source_digest()``; ``None`` in a result written before
    it was recorded), so a baseline is never compared with another article's output."""

    # An id written as a number reads as its text.
    id: Annotated[
        Annotated[str, Strict()] | Annotated[int, Strict()], AfterValidator(str), expect("a string")
    ]
    summary: Annotated[str, Strict(), expect("a string")]  # compared word by word with outputs
    passed: Flag
    scores: dict[str, _ScoreRead] = field(default_factory=dict)
    reasons: Annotated[list[Annotated[str, Strict()]], expect("a list of text")] = field(
        default_factory=list
    )
    probe: Flag = False
    meta: Table = field(default_factory=dict)
    source_digest: Annotated[
        Annotated[str, Strict(), Field(min_length=1)] | None, expect("a string or null")
    ] = None

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
            "least_supported": asdict(ls) if ls else None,
            "scores": {k: asdict(v) for k, v in self.scores.items()},
            "meta": self.meta,
        }


@dataclass
class RuleResult:
    """One decision rule's outcome: ``value`` compared with ``limit``.

    ``name`` is unique in a result, e.g. ``pass_rate``, ``min_mean[bertscore]``,
    ``pair_consistency[bertscore]``, ``pair_consistency[bertscore|Intrinsic Entity]``,
    ``regression[bertscore]``, ``scorable``. For ``regression`` value is the mean drop and limit
    the tolerance; ``details`` holds the bootstrap bound and counts.
    """

    name: Annotated[str, Strict(), expect("a string")]
    kind: Text
    value: Number
    limit: Number
    passed: Flag
    message: Text
    metric: OptionalText = None
    details: Table = field(default_factory=dict)
    # Passed without being checked (e.g. regression on a first run without a baseline): reports
    # show it as SKIP with its message, so a pass never hides a rule that did not run.
    skipped: Flag = False


_Scores = Annotated[dict[str, Number], expect("an object", inside=False)]


@dataclass
class PairResult:
    """One minimal pair: did the faithful member outscore the unfaithful one, per metric?
    ``consistent[metric]`` is False for ties and for pairs a metric could not score."""

    pair_id: Text
    faithful_id: Text
    unfaithful_id: Text
    error_type: OptionalText
    generated: Flag
    unfaithful_summary: Text
    # The edit as "old words -> new words" (word-level diff of the two summaries), for reports.
    edit: Text = ""
    faithful_scores: _Scores = field(default_factory=dict)
    unfaithful_scores: _Scores = field(default_factory=dict)
    consistent: Annotated[dict[str, Flag], expect("an object", inside=False)] = field(
        default_factory=dict
    )


def _rule_defaults(data: Any) -> Any:
    """A rule read back: ``kind`` defaults to its name, a message to none."""
    if not isinstance(data, Mapping):
        return data
    return {"kind": data.get("name"), "value": None, "limit": None, "message": "", **data}


@dataclass
class _Written:
    """What an example's JSON holds besides its fields: shown by reports as it is, never read
    back (``message`` is made of the reasons)."""

    message: OptionalText = None


def _example_defaults(data: Any) -> Any:
    """An example read back: its ``message`` checked, its summary empty when absent."""
    if not isinstance(data, Mapping):
        return data
    adapter(_Written).validate_python(data)
    return {"summary": "", **data}


_RuleRead = Annotated[RuleResult, BeforeValidator(_rule_defaults)]
_ExampleRead = Annotated[ExampleResult, BeforeValidator(_example_defaults)]


@dataclass
class GateResult:
    """Everything a gate decided; JSON round-trip with ``to_dict`` / ``from_dict``.

    Saved as JSON it is also the next run's baseline (per-example values by id and source
    digest, plus the settings hash of every metric so incomparable baselines are detected).
    """

    passed: Flag
    metrics: Annotated[list[Annotated[str, Strict()]], expect("a list of metric names")]
    # Checked against the scores' own hashes too (``consistent_settings_hashes``).
    settings_hashes: Annotated[dict[str, str], BeforeValidator(none_as_empty)]
    thresholds: Annotated[
        dict[str, _Int | Annotated[float, Strict(), AllowInfNan(False)]],
        BeforeValidator(none_as_empty),
        expect("an object of finite numbers"),
    ]
    rules: list[_RuleRead]
    examples: list[_ExampleRead]
    pairs: list[PairResult] = field(default_factory=list)
    created: str = ""
    faithgate_version: str = ""
    input: OptionalText = None
    config: Table = field(default_factory=dict)
    seconds: Number = None
    cache: Annotated[dict[str, int], BeforeValidator(none_as_empty)] = field(default_factory=dict)
    # Metric -> counter -> this run's total of what its scores report costing
    # (``details["usage"]``: requests, tokens); empty when no metric reports any (or absent,
    # in a result written before usage was recorded).
    usage: Annotated[
        dict[str, dict[str, Annotated[int, Strict(), Field(ge=0)]]],
        BeforeValidator(none_as_empty),
        expect("an object of metric -> counter -> whole number"),
    ] = field(default_factory=dict)

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
            "rules": [asdict(r) for r in self.rules],
            "examples": [e.to_dict() for e in self.examples],
            "pairs": [asdict(p) for p in self.pairs],
            "config": self.config,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateResult:
        """A result read back from its JSON (``to_dict``); ``InputError`` naming the field
        when malformed."""
        if not isinstance(data, Mapping) or "examples" not in data or "metrics" not in data:
            raise InputError("not a faithgate result (expected keys 'metrics' and 'examples')")
        defaults = {"passed": False, "settings_hashes": {}, "thresholds": {}, "rules": []}
        try:
            result = adapter(GateResult).validate_python({**defaults, **data})
        except ValidationError as exc:
            raise InputError(_problem(first_error(exc), data)[:200]) from None
        result.settings_hashes = consistent_settings_hashes(result.settings_hashes, result.examples)
        return result

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


# Bool fields are named in quotes ("example 'a': 'passed' must be ..."), a score's by its metric.
_SCORE_FIELDS = {"passed": "'passed'", "baseline": "baseline value"}


def _problem(error: ErrorDetails, data: Any) -> str:
    """The one-line message of a result JSON's first error, naming where it lies as a reader
    knows it: by example id, rule name, pair id or metric, not by JSON path."""
    loc = error["loc"]
    if error["type"] == "missing":
        return f"malformed faithgate result (missing field {loc[-1]!r})"
    if error["type"] != "expected":
        where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in loc)
        return f"malformed faithgate result ({where.lstrip('.')}: {error['msg']})"
    flag = error["msg"] == "true or false"
    match loc:
        case ("examples", _, "scores", _, "least_supported", name):
            what = f"a least supported sentence's {name}"
        case ("examples", _, "scores", _, "metric"):
            what = "a score's metric"
        case ("examples", i, "scores", key, name):
            metric = item(data, "examples", i, "scores", key, "metric")
            what = f"the {metric} {_SCORE_FIELDS.get(str(name), name)}"
        case ("examples", _, "id"):
            what = "an example id"
        case ("rules", _, "name"):
            what = "a rule name"
        case (("examples" | "rules" | "pairs") as part, i, name, *key):
            owner = {"examples": ("example", "id"), "rules": ("rule", "name")}
            kind, id_key = owner.get(str(part), ("pair", "pair_id"))
            shown = item(data, part, i, id_key)
            shown = shown if isinstance(shown, str) else str(shown)
            field = f"{name!r}" if flag and not key else f"{name}{''.join(f'[{k!r}]' for k in key)}"
            what = f"{kind} {shown!r}"[:120] + f": {field}"
        case _:
            what = str(loc[0]) if loc else "the result"
    return f"{what} must be {error['msg']}, got {error['input']!r}"


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
