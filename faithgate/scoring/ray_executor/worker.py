"""The Ray executor's actor (``ScoringWorker``), how examples are cut into its batches
(``source_batches``) and how a failed task is told in one line."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from faithgate.errors import FaithgateError
from faithgate.safety.escape import exception_line, safe_line
from faithgate.scoring.execution import ScorerRecipe
from faithgate.types import Example


def source_batches(
    examples: Sequence[Example], todo: Mapping[str, Sequence[int]], size: int
) -> list[list[int]]:
    """Indices of the examples with work to do, cut into batches of at most ``size`` that
    keep the summaries of one source together (a source with more than ``size`` summaries
    spans several batches). Sources keep their first-appearance order."""
    active = sorted({i for idx in todo.values() for i in idx})
    groups: dict[str, list[int]] = {}
    for i in active:
        groups.setdefault(examples[i].source, []).append(i)
    batches: list[list[int]] = []
    current: list[int] = []
    for group in groups.values():
        for start in range(0, len(group), size):
            chunk = group[start : start + size]
            if current and len(current) + len(chunk) > size:
                batches.append(current)
                current = []
            current.extend(chunk)
    if current:
        batches.append(current)
    return batches


class ScoringWorker:
    """The actor: one ``Scorer`` built from the recipe on first use, kept for the run."""

    def __init__(self, recipe: ScorerRecipe) -> None:
        self.recipe = recipe
        self.scorer: Any = None

    def ping(self) -> int:
        return os.getpid()

    def score(self, examples: list[Example], todo: dict[str, list[int]]) -> dict[str, Any]:
        """``{"scores": [...], "stats": {...}, "pid": ..., "node": ...}``; a configuration problem comes
        back as ``{"error": FaithgateError}`` (raised on the driver, not retried)."""
        try:
            if self.scorer is None:
                self.scorer = self.recipe.build()
                # Workers write no cache (the driver's serves them): llm_judge's answers too.
                self.scorer.context.cache = False
            before = self._engine_stats()
            scores = self.scorer.compute(examples, todo)
            after = self._engine_stats()
            # Engines (likelihood, NLI, QA) cache per-pair results; a batch's pairs are never
            # asked for again on this actor, so drop them and keep a long run's memory flat.
            self._release()
        except FaithgateError as exc:
            return {"error": exc}
        stats = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        import ray

        node = ray.get_runtime_context().get_node_id()
        return {"scores": scores, "stats": stats, "pid": os.getpid(), "node": node}

    def _engines(self) -> list[Any]:
        # ScoringContext keeps its shared engines privately; only their counters are read.
        return list(getattr(self.scorer.context, "_shared", {}).values())

    def _engine_stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for engine in self._engines():
            for k, v in (getattr(engine, "stats", None) or {}).items():
                total[k] = total.get(k, 0) + int(v)
        return total

    def _release(self) -> None:
        for engine in self._engines():
            done = getattr(engine, "_done", None)
            if isinstance(done, dict):
                done.clear()


def failure_line(exc: BaseException) -> str:
    """``Type: message`` of why a Ray task failed, as one escaped line (it quotes a worker's
    exception, and it is logged): for an exception raised in the task (``RayTaskError``), the
    underlying exception's, not Ray's header line (``ray::ScoringWorker.score() (pid=...)``,
    with terminal colour codes); else Ray's own first line (``ActorDiedError: The actor died
    unexpectedly ...``)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):  # as the scorer words a metric's exception locally
        return exception_line(cause)
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    first = text.splitlines()[0].strip() if text else ""
    return safe_line(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)


def last_line(exc: BaseException) -> str:
    """The last line of an error from a worker (its traceback ends with the exception),
    without terminal colour codes."""
    lines = [ln.strip() for ln in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines()]
    lines = [ln for ln in lines if ln]
    return lines[-1] if lines else type(exc).__name__
