"""Plain data passed between the layers: examples in, scores out.

Everything here round-trips through JSON (``to_dict`` / ``from_dict``) so that results can be
cached, saved as a baseline and read by reports without touching a model.
"""

from __future__ import annotations

import math
import numbers
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from faithgate.errors import InputError
from faithgate.safety.escape import safe_line

_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(value: str, where: str) -> str:
    """``value`` when it is Unicode text faithgate can score and print; ``InputError`` naming
    ``where`` for a NUL character (binary data) or a lone surrogate (JSON's ``"\\ud800"``
    is not a character: it cannot be encoded, tokenised or written back)."""
    if "\x00" in value:
        raise InputError(f"{where} contains NUL characters: binary data is not text")
    bad = _SURROGATE.search(value)
    if bad is not None:
        raise InputError(
            f"{where} contains a lone surrogate (U+{ord(bad.group()):04X}), which is not "
            "valid Unicode text"
        )
    return value


def is_blank(text: str) -> bool:
    """Whether ``text`` has nothing to read: only whitespace and invisible format characters
    (byte-order mark, zero-width space and joiners, word joiner, soft hyphen: Unicode's Cf),
    which ``str.strip`` keeps. A summary of one BOM scored better than a faithful one."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)


# Invisible characters that sit inside words without changing them: soft hyphen (web pages,
# hyphenated PDFs), zero-width space (LLM output), word joiner, and a byte-order mark left
# mid-text by concatenated files. Each split a word in two for every metric ("Ob\u00adama" was
# "ob" + "ama"). ZWJ / ZWNJ (U+200D / U+200C) are kept: they change how Indic and Persian
# words are written, and emoji sequences.
INVISIBLE_IN_WORDS = "\u00ad\u200b\u2060\ufeff"
_DROP_INVISIBLE = dict.fromkeys(map(ord, INVISIBLE_IN_WORDS))


# Line ends written otherwise than "\n": CR (alone, or in Windows' CRLF: CSV cells, files saved
# on Windows), Unicode's line and paragraph separators and NEL. ``normalized`` makes each a
# "\n" (the paragraph separator a blank line); ``text.line_breaks`` reads them as "\n" in place.
OTHER_LINE_ENDS = "\r\u2028\u2029\x85"
_LINE_END = re.compile(f"\r\n|[{OTHER_LINE_ENDS}]")


def normalized(text: str) -> str:
    """The form every text is scored in: without the invisible characters of
    ``INVISIBLE_IN_WORDS`` (text that looks the same scores the same), every line end a "\n"
    (a CRLF file scored as its LF copy: sentences end at line breaks, ``text.line_breaks``),
    Unicode NFC (an accent written as a letter plus a combining mark is the accented letter,
    as sources usually write it; "José" in NFD was an unsupported entity and a lower overlap)
    and no surrounding whitespace (a summarizer's trailing newline moved an LM's
    log-likelihood by more than a wrong fact did)."""
    # Removed before NFC, so a mark after a soft hyphen composes with its letter.
    text = _LINE_END.sub(
        lambda m: "\n\n" if m.group() == "\u2029" else "\n", text.translate(_DROP_INVISIBLE)
    )
    return unicodedata.normalize("NFC", text).strip()


@dataclass(frozen=True)
class Example:
    """One (source, summary) item to score.

    ``reference`` is an optional human summary; ``label`` is 1 (faithful) / 0 (unfaithful) when
    known. ``meta`` keeps every other field of the input record (pair ids, error types, ...)
    so nothing a user gave is lost on the way to a report.
    """

    id: str
    source: str
    summary: str
    reference: str | None = None
    label: int | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        # Built by library users too, not only by load_examples: a wrong type is a one-line
        # InputError here, not a tokenizer's TypeError inside some metric. An integer id is
        # the same id as its string (as load_examples reads it).
        if isinstance(self.id, int) and not isinstance(self.id, bool):
            object.__setattr__(self, "id", str(self.id))
        if not isinstance(self.id, str):
            raise InputError(f"Example id must be a string, got {type(self.id).__name__}")
        for name in ("source", "summary"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InputError(
                    f"Example {self.id!r}: {name} must be a string, got {type(value).__name__}"
                )
        if self.reference is not None and not isinstance(self.reference, str):
            raise InputError(f"Example {self.id!r}: reference must be a string or None")
        object.__setattr__(self, "label", _check_label(self.label, self.id))
        if not isinstance(self.meta, Mapping):
            raise InputError(
                f"Example {self.id!r}: meta must be a dict of extra fields, got "
                f"{type(self.meta).__name__}"
            )
        if not isinstance(self.meta, dict):
            object.__setattr__(self, "meta", dict(self.meta))
        # A lone surrogate cannot be tokenised, encoded or written back: say so here, once,
        # rather than as a UnicodeEncodeError from every metric.
        for name in ("id", "source", "summary", "reference"):
            value = getattr(self, name)
            if value is not None:
                check_text(value, f"Example {self.id!r}: {name}" if name != "id" else "Example id")
        # Scored (and cached, and reported) in one form, whichever way the text arrived.
        for name in ("source", "summary", "reference"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, normalized(value))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Example:
        return cls(
            id=str(data["id"]),
            source=data["source"],
            summary=data["summary"],
            reference=data.get("reference"),
            label=data.get("label"),
            meta=dict(data.get("meta") or {}),
        )


def _check_label(label: Any, example_id: str) -> int | None:
    """``label`` as 1 (faithful), 0 (unfaithful) or None (unknown): what the input files give
    (``faithgate.io`` reads 1/0, true/false, or empty, into these). A bool is 1/0; any other
    value, text included (``"yes"``, ``"0"``), is an ``InputError``: a label the gates and
    ``bench`` would misread."""
    if label is None:
        return None
    if isinstance(label, numbers.Real) and not isinstance(label, complex) and label in (0, 1):
        return int(label)
    # numpy's bool is no numbers.Real, but a labels column read through numpy or pandas gives it
    if type(label).__name__ == "bool" and type(label).__module__ == "numpy":
        return int(bool(label))
    shown = safe_line(repr(label))
    raise InputError(
        f"Example {example_id!r}: label must be 1 (faithful), 0 (unfaithful) or None, got "
        f"{type(label).__name__} {shown if len(shown) <= 80 else shown[:77] + '...'}"
    )


@dataclass
class SentenceScore:
    """A metric's support for one summary sentence (higher = better supported)."""

    index: int
    text: str
    value: float
    # Where in the source the support came from, when the metric knows (sentence index, span).
    evidence: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Score:
    """One metric's score of one example.

    ``value`` is the headline number, oriented so that higher means more faithful (a metric
    that is naturally "lower is better" documents its sign flip). ``settings_hash`` identifies
    metric, models, backend and settings, like bert_score's hash string, so two scores are
    comparable only when their hashes match. ``details`` holds metric-specific structure
    (components, matrices, questions asked, per-token log-probs) for reports.
    """

    metric: str
    value: float
    settings_hash: str
    example_id: str = ""
    sentences: list[SentenceScore] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    # Set when the metric could not score this example; value is then NaN and gates fail it.
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Scored: no error and a finite value (an infinite one would pass any threshold, or
        fail every one, and a report cannot hold it)."""
        return self.error is None and math.isfinite(self.value)

    @property
    def failure(self) -> str | None:
        """Why the score is not ``ok`` (a metric may give NaN or inf without an error), else
        None."""
        if self.ok:
            return None
        if self.error is not None:
            return self.error
        return "metric returned NaN" if math.isnan(self.value) else f"metric returned {self.value}"

    def least_supported(self) -> SentenceScore | None:
        """The summary sentence with the lowest support, if the metric scores sentences."""
        scored = [s for s in self.sentences if not math.isnan(s.value)]
        return min(scored, key=lambda s: s.value) if scored else None

    def to_dict(self) -> dict[str, Any]:
        """Plain, strictly JSON-valid data: every NaN/inf (value, sentence values, details)
        becomes ``None`` (JSON has no NaN); ``from_dict`` turns the numeric ones back."""
        return json_safe(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Score:
        value = data.get("value")
        return cls(
            metric=data["metric"],
            value=float("nan") if value is None else float(value),
            settings_hash=data["settings_hash"],
            example_id=data.get("example_id", ""),
            sentences=[
                SentenceScore(
                    **{**s, "value": float("nan") if s.get("value") is None else s["value"]}
                )
                for s in data.get("sentences", [])
            ],
            details=dict(data.get("details") or {}),
            error=data.get("error"),
        )

    @classmethod
    def failed(cls, metric: str, settings_hash: str, example_id: str, error: str) -> Score:
        """A score that records why an example could not be scored (never a silent 0 or 1)."""
        return cls(metric, float("nan"), settings_hash, example_id, error=error)


def json_safe(obj: Any) -> Any:
    """``obj`` with NaN and infinite floats replaced by ``None`` (recursively, also inside numpy
    scalars and tuples), so ``json.dumps(..., allow_nan=False)`` accepts it."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str | int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    # numpy scalars and anything else number-like
    try:
        value = float(obj)
    except (TypeError, ValueError):
        return obj
    kind = getattr(getattr(obj, "dtype", None), "kind", "")
    if kind == "b":
        return bool(obj)
    if kind in ("i", "u"):
        return int(obj)
    return value if math.isfinite(value) else None
