"""The one test of a number a user gave (a setting, a weight, a score read back from a file)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any


def is_finite_number(value: Any) -> bool:
    """A finite int or float, and not a bool: NaN and the infinities compare false or win every
    comparison, so a bound or weight made of them turns a check off. An int too large for a
    float (10**400) is not one either: every use of it as a float would raise."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


# A score, mean, rate or drop the gate computes is compared with a limit the user wrote as a
# decimal (0.7, 0.01, a baseline of 0.4 less a drop of 0.1). Such decimals are not exact in
# binary and the arithmetic on them rounds: the mean of three scores of 0.7 is
# 0.6999999999999998, 0.8 - 0.79 is 0.010000000000000009, and 0.3 is below 0.4 - 0.1. The gate
# prints at most 15 decimals, so a difference below that is float noise, not the user's: a
# value this close to its limit (relative to the operands' magnitude, a few thousand ulps) is
# at the limit, where the gate's `>=` passes and its `>` does not fail.
_NOISE = 1e-12


def _noise(value: float, limit: float) -> float:
    return _NOISE * max(1.0, abs(value), abs(limit))


def at_least(value: float, limit: float) -> bool:
    """``value >= limit`` up to float noise (see ``_NOISE``): the gate's test of a computed
    score, mean or rate against a user's limit. NaN fails; infinities compare exactly."""
    if not (math.isfinite(value) and math.isfinite(limit)):
        return bool(value >= limit)
    return bool(value >= limit - _noise(value, limit))


def above(value: float, limit: float) -> bool:
    """``value > limit`` by more than float noise (see ``_NOISE``): a drop past a tolerance.
    NaN is not above anything (a caller failing closed on it tests ``math.isnan``)."""
    if not (math.isfinite(value) and math.isfinite(limit)):
        return bool(value > limit)
    return bool(value > limit + _noise(value, limit))


def mean_of(values: Sequence[float]) -> float:
    """The mean of ``values`` (not empty), summed exactly (``math.fsum``): a plain sum of
    100,000 scores of 0.7 is off by more than the float noise ``at_least`` allows. Finite
    values whose sum passes the float range still get their finite mean (a plain sum of
    1.5e308, 1.5e308, -1.7e308, -1.7e308 is inf, and passed any ``min_mean``); NaN where
    ``values`` hold both infinities, inf where they hold one."""
    n = len(values)
    try:
        try:
            return math.fsum(values) / n
        except OverflowError:
            # Each value / n is finite, and so is their sum: its magnitude is at most the
            # largest value's. (An infinite value, which fsum also raises on here, stays inf.)
            return math.fsum(v / n for v in values)
    except ValueError:  # inf and -inf: no mean
        return math.nan


def reads_equal(value: float, limit: float, decimals: int, scale: float = 1.0) -> bool:
    """Whether two numbers that differ by more than float noise (``_NOISE``) print the same,
    ``* scale``, with ``decimals`` decimals. Numbers within noise of each other are equal to
    the gate (``at_least``), so printing them alike is right: 0.6999999999999998 as "0.7000"."""
    if value == limit or (
        math.isfinite(value) and math.isfinite(limit) and abs(value - limit) <= _noise(value, limit)
    ):
        return False
    return f"{value * scale:.{decimals}f}" == f"{limit * scale:.{decimals}f}"


def decimals_apart(value: float, limit: float, decimals: int = 4, scale: float = 1.0) -> int:
    """The decimals to print ``value * scale`` and ``limit * scale`` with: ``decimals``, or
    as many more as it takes for two numbers apart by more than float noise to read
    differently (at most 15, which always suffices for such numbers of a score's size).
    Rounding keeps order, so equal text is the only way a value failing its limit could
    read as passing it (0.49996 against 0.5 at four decimals: "0.5000" twice)."""
    while decimals < 15 and reads_equal(value, limit, decimals, scale):
        decimals += 1
    return decimals


def fixed_against(value: float, limit: float, decimals: int = 4) -> tuple[str, str]:
    """A value and its limit with ``decimals_apart`` decimals."""
    d = decimals_apart(value, limit, decimals)
    return f"{value:.{d}f}", f"{limit:.{d}f}"


def shown_against(value: float, limit: float) -> tuple[str, str]:
    """A score and its limit as the gate's messages print them (the score to four decimals,
    the limit as given, ``:g``), with more decimals for both where that would read equal."""
    if decimals_apart(value, limit) == 4:
        return f"{value:.4f}", f"{limit:g}"
    return fixed_against(value, limit)


def percent_against(rate: float, limit: float, decimals: int = 1) -> tuple[str, str]:
    """A rate and its limit as percentages (``decimals`` decimals, more where they would read
    equal)."""
    d = decimals_apart(rate, limit, decimals, 100.0)
    return f"{rate:.{d}%}", f"{limit:.{d}%}"


def shortest(value: float) -> str:
    """``value`` in full for a machine reader (a JUnit property, an Action output): the shortest
    digits that read back as the same float (``repr``), written without an exponent and
    without a trailing ``.0`` (1 of 1 is "1", 1 of 100000 is "0.00001")."""
    value = float(value)
    if not math.isfinite(value):
        return repr(value)
    text = format(Decimal(repr(value)), "f")
    return text[:-2] if text.endswith(".0") else text
