"""Small formatting helpers shared by the report writers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from faithgate.escape import printable
from faithgate.numbers import decimals_apart

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


def fmt_against(value: float | None, limit: float | None, digits: int = 4) -> tuple[str, str]:
    """``fmt_value`` of a value and its limit, with more digits where they would read equal
    (a score of 0.49996 under threshold 0.5 is "0.49996" and "0.5", never "0.5000 ❌")."""
    if value is None or limit is None or math.isnan(value) or math.isnan(limit):
        return fmt_value(value, digits), fmt_value(limit, digits)
    d = decimals_apart(float(value), float(limit), digits)
    return fmt_value(value, d), fmt_value(limit, d)


def _share_decimals(rate: float, decimals: int, scale: float) -> int:
    """``decimals``, or more where a share short of all (or above none) would read as all
    (or none)."""
    return max(
        decimals_apart(rate, 1.0, decimals, scale), decimals_apart(rate, 0.0, decimals, scale)
    )


def fmt_rate(rate: float) -> str:
    """A share as a percentage, one decimal, more where a share short of all (or above none)
    would read as 100.0% (or 0.0%): 1999 of 2000 is 99.95%."""
    return f"{rate:.{_share_decimals(rate, 1, 100.0)}%}"


def fmt_share(rate: float) -> str:
    """A share as a plain number (a step output): four decimals without trailing zeros, more
    where a share short of all (or above none) would read as 1 (or 0): 20000 of 20001 is
    0.99995, never 1."""
    text = f"{rate:.{_share_decimals(rate, 4, 1.0)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


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
