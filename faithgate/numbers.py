"""The one test of a number a user gave (a setting, a weight, a score read back from a file)."""

from __future__ import annotations

import math
from typing import Any


def is_finite_number(value: Any) -> bool:
    """A finite int or float, and not a bool: NaN and the infinities compare false or win every
    comparison, so a bound or weight made of them turns a check off."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
