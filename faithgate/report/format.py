"""Small formatting helpers shared by the report writers."""

from __future__ import annotations

import math

from faithgate.escape import printable
from faithgate.numbers import decimals_apart


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


def fmt_rate(rate: float) -> str:
    """A share as a percentage, one decimal, more where a share short of all (or above none)
    would read as 100.0% (or 0.0%): 1999 of 2000 is 99.95%."""
    d = max(decimals_apart(rate, 1.0, 1, 100.0), decimals_apart(rate, 0.0, 1, 100.0))
    return f"{rate:.{d}%}"
