"""Shared by the Ray test modules: a small BUMP sample, score comparison, patient startup."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from faithgate.types import Example, Score

RAY_METRICS = ("overlap", "sentsim", "loglik")
T = TypeVar("T")


def patient_ray_start() -> None:
    """A loaded CI machine can take longer than Ray's defaults to start a raylet."""
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    os.environ.setdefault("RAY_agent_register_timeout_ms", "180000")


def start_with_retries(start: Callable[[], T], stop: Callable[[], None], attempts: int = 3) -> T:
    """``start()``, tried again after ``stop()`` when it fails: on a machine loaded by other
    jobs Ray 2.60's raylet aborts when its dashboard agent is not up within ~15 s, a startup
    failure of the test environment, not of faithgate."""
    for attempt in range(attempts):
        try:
            return start()
        except Exception:
            stop()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def bump_sample(shared_data: Path, sources: int = 3, per_source: int = 4) -> list[Example]:
    """``per_source`` rows of each of the first ``sources`` BUMP articles, interleaved by
    source (so batches only keep a source together if the executor groups them)."""
    groups: dict[str, list[Example]] = {}
    with (shared_data / "bump_task1.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            group = groups.setdefault(row["source"], [])
            if len(groups) > sources:
                break
            if len(group) < per_source:
                group.append(Example(row["id"], row["source"], row["summary"]))
    chosen = list(groups.values())[:sources]
    return [g[k] for k in range(per_source) for g in chosen]


def as_data(rows: Sequence[dict[str, Score]]) -> list[dict[str, dict]]:
    """Scores as plain dicts: equal iff every value, sentence and detail is equal."""
    return [{k: s.to_dict() for k, s in r.items()} for r in rows]
