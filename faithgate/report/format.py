"""Small formatting helpers shared by the report writers."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from faithgate.numbers import decimals_apart, percent_against
from faithgate.safety.escape import printable

if TYPE_CHECKING:
    from faithgate.result import GateResult


def fmt_value(value: float | None, digits: int = 4) -> str:
    """A number for a table cell; ``-`` when absent, ``nan`` kept visible."""
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if float(value).is_integer() and abs(value) >= 1:
        return str(int(value))
    return f"{value:.{digits}f}" if value else "0"


def one_line(text: str, limit: int = 160) -> str:
    """Collapse whitespace, show control characters as escapes (``printable``: user text
    must not break lines or send escape sequences) and cut to ``limit`` characters."""
    text = printable(" ".join(str(text).split()))
    return text if len(text) <= limit else text[: max(1, limit - 1)] + "…"


# Terminal and CI-log reports keep every line within this many columns.
MAX_COLUMNS = 100


def fit_lines(lines: list[str], width: int = MAX_COLUMNS, indent: int | None = None) -> list[str]:
    """Each line of ``lines`` wrapped at word boundaries to ``width`` columns, whole: nothing is
    cut. A continuation is indented under the line's text (its own leading spaces plus two,
    or ``indent``)."""
    import textwrap

    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = len(line) - len(line.lstrip(" "))
        pad = " " * (lead + 2 if indent is None else indent)
        out.extend(
            textwrap.wrap(
                line,
                width,
                initial_indent="",
                subsequent_indent=pad,
                break_on_hyphens=False,
                drop_whitespace=True,
            )
            or [line]
        )
    return out


def fmt_against(value: float | None, limit: float | None, digits: int = 4) -> tuple[str, str]:
    """``fmt_value`` of a value and its limit, with more digits where they would read equal
    (a score of 0.49996 under threshold 0.5 is "0.49996" and "0.50000", never "0.5000 ❌").
    ``numbers.fixed_against`` is the same ``decimals_apart`` for the gate's messages; this one
    keeps a table's cells (``-``, ``nan``, 1 not 1.00000)."""
    if value is None or limit is None or math.isnan(value) or math.isnan(limit):
        return fmt_value(value, digits), fmt_value(limit, digits)
    d = decimals_apart(float(value), float(limit), digits)
    return fmt_value(value, d), fmt_value(limit, d)


def rule_limit(result: GateResult, name: str) -> float | None:
    """The limit of ``result``'s rule ``name`` (``pass_rate``, ``min_mean[m]``); None when the
    result has no such rule or its limit is not a number."""
    for r in result.rules:
        if r.name == name:
            ok = isinstance(r.limit, int | float) and math.isfinite(r.limit)
            return float(r.limit) if ok else None
    return None


def fmt_mean(result: GateResult, metric: str, value: float | None) -> str:
    """A metric's mean as the verdict lines show it: ``fmt_value``, with the digits that tell
    it from its ``min_mean`` where one is configured (0.74996 under 0.75 is never 0.7500)."""
    return fmt_against(value, rule_limit(result, f"min_mean[{metric}]"))[0]


def _share_decimals(rate: float, decimals: int, scale: float) -> int:
    """``decimals``, or more where a share short of all (or above none) would read as all
    (or none)."""
    return max(
        decimals_apart(rate, 1.0, decimals, scale), decimals_apart(rate, 0.0, decimals, scale)
    )


def fmt_rate(rate: float, limit: float | None = None) -> str:
    """A share as a percentage, one decimal, more where a share short of all (or above none)
    would read as 100.0% (or 0.0%): 1999 of 2000 is 99.95%; and more where it would read as
    its ``limit`` (``min_pass_rate``): 22499 of 25000 under 90% is 89.996%, never 90.0%."""
    decimals = _share_decimals(rate, 1, 100.0)
    if limit is None or math.isnan(rate):
        return f"{rate:.{decimals}%}"
    return percent_against(rate, limit, decimals)[0]


class RuleTally(NamedTuple):
    """How a result's rules came out. A skipped rule passed without being checked: it is
    counted apart, never as passing (a report must not read "3/3 rules pass" then)."""

    passed: int
    skipped: int
    failed: int

    @property
    def total(self) -> int:
        return self.passed + self.skipped + self.failed


def rule_tally(result: GateResult) -> RuleTally:
    """The rule counts every report shows (terminal, Markdown, HTML)."""
    failed, skipped = len(result.failed_rules), len(result.skipped_rules)
    return RuleTally(len(result.rules) - failed - skipped, skipped, failed)


def fmt_usage(counters: Mapping[str, int], escape: Callable[[str], str] = printable) -> str:
    """A metric's usage totals in words (``GateResult.usage``), e.g. "212 requests (40 cached),
    98,412 prompt + 3,120 completion tokens"; a counter without wording of its own is shown as
    "N name", its name (a metric's text) through ``escape`` (``printable`` for a terminal)."""
    left = dict(counters)
    parts = []
    if "requests" in left:
        n = left.pop("requests")
        part = f"{n:,} request{'' if n == 1 else 's'}"
        if "cached_answers" in left:
            part += f" ({left.pop('cached_answers'):,} cached)"
        parts.append(part)
    if "prompt_tokens" in left and "completion_tokens" in left:
        prompt, completion = left.pop("prompt_tokens"), left.pop("completion_tokens")
        parts.append(f"{prompt:,} prompt + {completion:,} completion tokens")
    parts += [f"{n:,} {escape(name.replace('_', ' '))}" for name, n in sorted(left.items())]
    return ", ".join(parts)
