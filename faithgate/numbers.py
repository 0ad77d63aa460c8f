"""The one test of a number a user gave (a setting, a weight, a score read back from a file)."""

from __future__ import annotations

import math
from typing import Any


def is_finite_number(value: Any) -> bool:
    """A finite int or float, and not a bool: NaN and the infinities compare false or win every
    comparison, so a bound or weight made of them turns a check off."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def decimals_apart(value: float, limit: float, decimals: int = 4, scale: float = 1.0) -> int:
    """The decimals to print ``value * scale`` and ``limit * scale`` with: ``decimals``, or
    as many more as it takes for two different numbers to read differently (at most 15).
    Rounding keeps order, so equal text is the only way a value failing its limit could
    read as passing it (0.49996 against 0.5 at four decimals: "0.5000" twice)."""
    while (
        decimals < 15
        and value != limit
        and f"{value * scale:.{decimals}f}" == f"{limit * scale:.{decimals}f}"
    ):
        decimals += 1
    return decimals


def shown_against(value: float, limit: float) -> tuple[str, str]:
    """A score and its limit as the gate's messages print them (the score to four decimals,
    the limit as given, ``:g``), with more decimals for both where that would read equal."""
    d = decimals_apart(value, limit)
    return (f"{value:.4f}", f"{limit:g}") if d == 4 else (f"{value:.{d}f}", f"{limit:.{d}f}")


def percent_against(rate: float, limit: float) -> tuple[str, str]:
    """A rate and its limit as percentages (one decimal, more where they would read equal)."""
    d = decimals_apart(rate, limit, 1, 100.0)
    return f"{rate:.{d}%}", f"{limit:.{d}%}"
