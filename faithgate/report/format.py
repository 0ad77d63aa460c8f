"""Small formatting helpers shared by the report writers."""

from __future__ import annotations

import math

from faithgate.escape import printable


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
