"""Click parameter types shared by the commands."""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses NaN and the infinities: FloatRange lets NaN
    through (every comparison with it is false), and ``--max-diff nan`` turned the export's
    parity gate off. Without bounds it is "any finite number"."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number
