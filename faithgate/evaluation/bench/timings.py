"""Seconds per scored item by settings hash, kept beside the score cache so that cached runs
still report them."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

from faithgate.safety.atomic import atomic_write_text
from faithgate.safety.escape import safe_line

logger = logging.getLogger(__name__)


def _valid_timings(data: Any) -> bool:
    """Whether ``data`` (a timings file's JSON) is an object of ``{seconds, items}`` entries."""

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    return isinstance(data, dict) and all(
        isinstance(e, dict) and number(e.get("seconds")) and number(e.get("items"))
        for e in data.values()
    )


class Timings:
    """Seconds per scored item by settings hash, stored beside the score cache."""

    def __init__(self, cache_path: Path | None) -> None:
        self.path = cache_path.with_suffix(".timings.json") if cache_path else None
        self.data: dict[str, dict[str, float]] = {}
        if self.path and self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
            except OSError:
                return
            except ValueError:
                data = None
            if _valid_timings(data):
                self.data = data
            else:  # damaged: moved aside like a damaged cache (timings only inform)
                self._move_aside()

    def _move_aside(self) -> None:
        assert self.path is not None
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            self.path.replace(aside)
        except OSError as exc:
            logger.warning(
                "damaged timings file %s ignored (cannot move it aside: %s)",
                safe_line(self.path),
                safe_line(exc.strerror or exc),
            )
            return
        logger.warning(
            "damaged timings file %s moved aside to %s; starting a new one",
            safe_line(self.path),
            safe_line(aside.name),
        )

    def add(self, settings_hash: str, seconds: float, items: int) -> None:
        entry = self.data.setdefault(settings_hash, {"seconds": 0.0, "items": 0})
        entry["seconds"] += seconds
        entry["items"] += items
        if self.path:
            atomic_write_text(self.path, json.dumps(self.data, indent=1))

    def per_item(self, settings_hash: str) -> float | None:
        entry = self.data.get(settings_hash)
        if not entry or not entry["items"]:
            return None
        return entry["seconds"] / entry["items"]
