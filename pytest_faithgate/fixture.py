"""The ``faithgate`` fixture: score summaries and assert faithfulness inside ordinary tests.

The fixture works with or without ``--faithgate``: a test that requests it asks for scoring, so
it always scores (the flag only adds the release-gate items, the terminal table and the gate
reports). Settings resolve in this order: the call's arguments, the test's
``@pytest.mark.faithgate(...)`` marker, the ``--faithgate-*`` options, the project configuration.

Every check is recorded on the test (``user_properties``, hence JUnit XML ``<property>``
elements) and in the terminal summary table under ``--faithgate``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from faithgate.errors import FaithgateError
from faithgate.numbers import at_least
from faithgate.safety.escape import safe_line
from faithgate.types import Example, Score
from pytest_faithgate.messages import plugin_line, skip_exceptions, skip_message
from pytest_faithgate.session import PluginSession, is_type_list, scoped_value

CHECKS_KEY = pytest.StashKey[list[dict[str, Any]]]()


class FaithgateScoringError(Exception):
    """A fixture check could not score a summary (the metric failed on it, returned NaN, or
    the summary is blank once normalised): nothing was compared with the threshold.

    Deliberately not an ``AssertionError``: a negative test,
    ``with pytest.raises(AssertionError): faithgate.assert_faithful(source, hallucination)``,
    must fail when the metric scored nothing, not pass as if the hallucination were caught.
    The message is one line naming the metric and the reason.
    """

    __module__ = "pytest_faithgate"  # as users import it: ``from pytest_faithgate import ...``


def _short(text: str, limit: int = 160) -> str:
    # User text in a failure message: one line, control characters and escapes made visible.
    text = safe_line(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _finite(value: Any, what: str, low: float | None = None, high: float | None = None) -> float:
    """``value`` as a float when it is a finite number (within ``low`` .. ``high`` when
    given); else the test fails in one line (a ``-inf`` threshold, a negative margin or a
    negative min_rate would pass anything, ``nan`` would fail everything without saying why,
    exactly as the command line and the configuration refuse them)."""
    __tracebackhide__ = True
    # A number only, as the configuration takes it: float("0.5"), float(b" 0.5\n") would
    # accept text (and bool is an int).
    number = float(value) if isinstance(value, numbers.Real) else math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        pytest.fail(
            safe_line(f"faithgate: {what} must be a finite number, got {value!r}"), pytrace=False
        )
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f">= {low:g}" if high is None else f"between {low:g} and {high:g}"
        pytest.fail(f"faithgate: {what} must be {bounds}, got {number:g}", pytrace=False)
    return number


def _metric_arg(metric: Any) -> str | None:
    """A call's ``metric=``: a metric name or None; else the test fails in one line."""
    __tracebackhide__ = True
    if metric is not None and (not isinstance(metric, str) or not metric.strip()):
        pytest.fail(
            safe_line(
                f"faithgate: metric= must be a metric name (str), got "
                f"{type(metric).__name__} {metric!r}"
            ),
            pytrace=False,
        )
    return metric


def _why_not_scored(result: Score) -> str:
    # The reason the gate's rules give too (a metric may give NaN without an error).
    return safe_line(result.failure)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return "nan" if math.isnan(value) else f"{value:.4f}"


def describe_least_supported(score: Score, label: str = "least supported sentence") -> str:
    """One line naming the summary sentence the metric supports least, if it scores sentences."""
    sent = score.least_supported()
    if sent is None:
        return f"  {label}: (metric {score.metric!r} does not score sentences)"
    return f'  {label} (#{sent.index + 1}, {_fmt(sent.value)}): "{_short(sent.text)}"'


class FaithgateFixture:
    """What the ``faithgate`` fixture returns; see the module docstring for settings order."""

    def __init__(
        self,
        session: PluginSession,
        node: pytest.Item,
        marker: Mapping[str, Any],
        markers: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        self._session = session
        self._node = node
        # Merged, closest marker winning per key (metric, margin, types, models ...).
        self._marker = dict(marker)
        # Each marker on its own, closest first: ``threshold`` and ``settings`` belong to
        # their own marker's metric, so they are looked up here, never in the merged dict.
        self._markers = [dict(m) for m in markers] if markers is not None else [self._marker]
        self._counter = 0

    # -- scoring -------------------------------------------------------------------------
    def _executor(self, metric: str) -> Any:
        # Marker settings belong to the marker's metric (or the default one when it names none).
        use = scoped_value(self._markers, "settings", metric)
        return self._session.executor(
            [metric],
            settings={metric: dict(use)} if use else None,
            models=self._marker.get("models"),
            backend=self._marker.get("backend"),
        )

    def _metric(self, metric: Any) -> str:
        __tracebackhide__ = True
        return self._session.metric_for(_metric_arg(metric), self._marker)

    def _score_many(self, metric: str | None, pairs: Sequence[tuple[str, str]]) -> list[Score]:
        __tracebackhide__ = True
        name = self._metric(metric)
        texts = []
        for source, summary in pairs:
            for field_name, value in (("source", source), ("summary", summary)):
                # A blank summary is a summarizer's output that cannot be scored (the scorer
                # says "empty summary": FaithgateScoringError, as documented), not bad usage.
                blank = not value.strip() if isinstance(value, str) else False
                if not isinstance(value, str) or (blank and field_name == "source"):
                    pytest.fail(
                        safe_line(f"faithgate: {field_name} must be non-empty text, got {value!r}"),
                        pytrace=False,
                    )
            self._counter += 1
            texts.append((f"{self._node.nodeid}#{self._counter}", source, summary))
        executor = None
        try:
            # Inside the try: a NUL character or a lone surrogate in the text is
            # ``Example``'s InputError, a one-line failure like every other bad input.
            examples = [Example(*text) for text in texts]
            # Inside the try: a marker's unknown metric or backend is a one-line failure too.
            executor = self._executor(name)
            rows = executor.score(examples)
        except FaithgateError as exc:
            # The message quotes user text (settings keys, model roles, configuration keys).
            raise pytest.fail.Exception(f"faithgate: {plugin_line(exc)}", pytrace=False) from None
        except skip_exceptions() as exc:
            # pytest.importorskip in a metric must not turn a check into a skipped test.
            raise pytest.fail.Exception(
                skip_message(f"metric {name!r}", exc, "check"), pytrace=False
            ) from None
        finally:
            # One call is one run: the session's scorer keeps its models, not every input's
            # engine state, so a long pytest session does not grow with each test.
            if executor is not None:
                getattr(executor, "inner", executor).scorer.release()
        return [row[name] for row in rows]

    def score(self, source: str, summary: str, metric: str | None = None) -> Score:
        """The ``Score`` of ``summary`` against ``source`` (higher = more faithful).

        A summary the metric could not score comes back with ``score.ok`` False and the reason
        in ``score.error`` (its value is NaN, so any comparison with it fails).
        """
        __tracebackhide__ = True
        result = self._score_many(metric, [(source, summary)])[0]
        self._record("score", result, None, None)
        return result

    # -- assertions ----------------------------------------------------------------------
    def assert_faithful(
        self,
        source: str,
        summary: str,
        threshold: float | None = None,
        metric: str | None = None,
    ) -> Score:
        """Fail the test unless ``summary`` scores at least ``threshold`` against ``source``.

        The failure message shows the metric, score, threshold and least supported sentence.
        A summary the metric could not score raises ``FaithgateScoringError`` (not an
        ``AssertionError``).
        """
        __tracebackhide__ = True
        name = self._metric(metric)
        given = self._session.threshold_for(name, threshold, self._markers)
        limit = None if given is None else _finite(given, "threshold")
        if limit is None:
            pytest.fail(self._no_threshold(name), pytrace=False)
        result = self._score_many(name, [(source, summary)])[0]
        passed = result.ok and at_least(float(result.value), limit)
        self._record("assert_faithful", result, limit, passed)
        if not result.ok:
            raise FaithgateScoringError(
                f"faithgate: {name} could not score the summary: {_why_not_scored(result)}"
            )
        if not passed:
            raise AssertionError(
                f"faithgate: summary not faithful enough: {name} = {_fmt(result.value)} < "
                f"threshold {_fmt(limit)}\n"
                f"{describe_least_supported(result)}\n"
                f'  summary: "{_short(summary)}"'
            )
        return result

    def _no_threshold(self, name: str) -> str:
        """Where a threshold for ``name`` can come from (``--faithgate-threshold`` is one only
        for the selected metrics: ``metrics`` or ``--faithgate-metric``)."""
        selected = self._session.gate_config.metrics
        where = f"thresholds.{name} in [tool.faithgate]"
        if name in selected:
            where = f"--faithgate-threshold, or {where}"
        else:
            where += (
                f" (--faithgate-threshold applies to the selected metrics only: "
                f"{', '.join(selected)})"
            )
        return safe_line(
            f"faithgate: no threshold for metric {name!r}: pass one to the call "
            f"(assert_faithful(..., threshold=X)), mark the test "
            f"@pytest.mark.faithgate(metric={name!r}, threshold=X), or set {where}"
        )

    def assert_consistent(
        self,
        source: str,
        faithful: str,
        unfaithful: str,
        metric: str | None = None,
        margin: float | None = None,
    ) -> tuple[Score, Score]:
        """Fail unless the faithful summary outscores the unfaithful one (by more than
        ``margin``, default 0): the minimal-pair consistency test of BUMP (Ma et al., 2023)."""
        __tracebackhide__ = True
        name = self._metric(metric)
        # A negative margin passes an unfaithful summary that scores higher.
        gap = _finite(
            margin if margin is not None else self._marker.get("margin", 0.0), "margin", low=0.0
        )
        good, bad = self._score_many(name, [(source, faithful), (source, unfaithful)])
        passed = good.ok and bad.ok and good.value - bad.value > gap
        # Recorded as "faithful score must exceed unfaithful score + margin".
        self._record(
            "assert_consistent",
            good,
            bad.value + gap,
            passed,
            extra={"unfaithful": bad.value, "margin": gap},
        )
        for label, result in (("faithful", good), ("unfaithful", bad)):
            if not result.ok:
                raise FaithgateScoringError(
                    f"faithgate: {name} could not score the {label} summary: "
                    f"{_why_not_scored(result)}"
                )
        if not passed:
            raise AssertionError(
                f"faithgate: {name} does not prefer the faithful summary: "
                f"faithful = {_fmt(good.value)}, unfaithful = {_fmt(bad.value)} "
                f"(needs faithful - unfaithful > {gap:g})\n"
                f"{describe_least_supported(bad, 'least supported sentence of the unfaithful summary')}\n"
                f'  faithful summary:   "{_short(faithful)}"\n'
                f'  unfaithful summary: "{_short(unfaithful)}"'
            )
        return good, bad

    def assert_consistent_under_perturbation(
        self,
        source: str,
        summary: str,
        types: Iterable[str] | None = None,
        min_rate: float | None = None,
        metric: str | None = None,
        seed: int = 0,
    ) -> float:
        """Edit ``summary`` with the perturbation engine (one minimal unfaithful edit per error
        type, BUMP taxonomy) and fail unless the metric scores the original above the edit in at
        least ``min_rate`` of the edits (default 1.0). ``types``: one type name or a non-empty
        list (None: all types); ``seed``: an integer. Returns the rate."""
        __tracebackhide__ = True
        from faithgate.perturb import perturb  # lazy: spaCy loads only when asked

        name = self._metric(metric)
        wanted = types if types is not None else self._marker.get("types")
        if wanted is not None and not is_type_list(wanted):
            pytest.fail(
                safe_line(
                    "faithgate: types= must be a perturbation type name or a list of them (str), "
                    f"got {type(wanted).__name__} {wanted!r}"
                ),
                pytrace=False,
            )
        wanted = (wanted,) if isinstance(wanted, str) else wanted
        if wanted is not None and not wanted:
            # An empty list (a filter that matched nothing) must not widen to every type.
            pytest.fail(
                "faithgate: types= is empty: name at least one perturbation type, or leave "
                "types out for all of them",
                pytrace=False,
            )
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            pytest.fail(
                safe_line(
                    f"faithgate: seed= must be an integer, got {type(seed).__name__} {seed!r}"
                ),
                pytrace=False,
            )
        rate_limit = _finite(
            min_rate if min_rate is not None else self._marker.get("min_rate", 1.0),
            "min_rate",
            low=0.0,
            high=1.0,
        )
        try:
            edits = perturb(
                source, summary, types=None if wanted is None else tuple(wanted), seed=int(seed)
            )
        except FaithgateError as exc:
            raise pytest.fail.Exception(f"faithgate: {plugin_line(exc)}", pytrace=False) from None
        if not edits:
            pytest.fail(
                safe_line(
                    "faithgate: the perturbation engine produced no edit of this summary "
                    f"(types: {', '.join(wanted) if wanted else 'all'})"
                ),
                pytrace=False,
            )
        scores = self._score_many(name, [(source, summary)] + [(source, e.summary) for e in edits])
        original, edited = scores[0], scores[1:]
        if not original.ok:
            # Recorded like the other checks (an ERROR row, JUnit properties) before it fails.
            self._record(
                "assert_consistent_under_perturbation",
                original,
                rate_limit,
                False,
                value=math.nan,
                extra={"edits": len(edits)},
            )
            raise FaithgateScoringError(
                f"faithgate: {name} could not score the original summary: "
                f"{_why_not_scored(original)}"
            )
        wins = [e.ok and original.value > e.value for e in edited]
        rate = sum(wins) / len(wins)
        passed = at_least(rate, rate_limit)
        self._record(
            "assert_consistent_under_perturbation",
            original,
            rate_limit,
            passed,
            value=rate,
            extra={"rate": rate, "edits": len(edits)},
        )
        if not passed:
            lines = [
                f"faithgate: {name} prefers the original summary in {sum(wins)}/{len(wins)} "
                f"edits (rate {rate:.2f} < min_rate {rate_limit:.2f})",
                f'  original ({_fmt(original.value)}): "{_short(summary)}"',
            ]
            for edit, result, won in zip(edits, edited, wins, strict=True):
                if not won:
                    why = (
                        f"error: {_why_not_scored(result)}" if not result.ok else _fmt(result.value)
                    )
                    lines.append(
                        f"  not caught [{edit.type}] {edit.original!r} -> {edit.replacement!r} "
                        f'({why}): "{_short(edit.summary)}"'
                    )
            raise AssertionError("\n".join(lines))
        return rate

    # -- bookkeeping ---------------------------------------------------------------------
    def _record(
        self,
        check: str,
        result: Score,
        limit: float | None,
        passed: bool | None,
        value: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Attach the check to the test: JUnit properties and the terminal summary table.

        ``value`` is the quantity compared with ``limit`` (default: the score's value); the
        check passed when ``passed`` is True.
        """
        raw = result.value if value is None else value
        shown = None if math.isnan(raw) else round(raw, 6)
        prefix = f"faithgate.{result.metric}"
        props = self._node.user_properties
        score_value = None if math.isnan(result.value) else round(result.value, 6)
        props.append((prefix, "nan" if score_value is None else score_value))
        if limit is not None:
            props.append((f"{prefix}.limit", round(limit, 6)))
        for key, item in (extra or {}).items():
            props.append((f"{prefix}.{key}", round(item, 6) if isinstance(item, float) else item))
        if passed is not None:
            props.append((f"{prefix}.passed", passed))
        sent = result.least_supported()
        record = {
            "test": self._node.nodeid,
            "check": check,
            "metric": result.metric,
            "value": shown,
            "limit": None if limit is None else round(limit, 6),
            "passed": passed,
            "error": result.error,
            "sentence": sent.text if sent is not None else None,
            "settings_hash": result.settings_hash,
        }
        self._node.stash.setdefault(CHECKS_KEY, []).append(record)
