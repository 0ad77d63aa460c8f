"""Shared by the Ray test modules: a small BUMP sample, score comparison, patient startup."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from faithgate.metrics.base import Metric, ScoringContext
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


@contextlib.contextmanager
def fails_after(seconds: float) -> Iterator[None]:
    """Fail the block with ``TimeoutError`` once it has run ``seconds`` (main thread only),
    instead of hanging the suite: SIGALRM raises at the next of the Ray executor's one-second
    waits (raised inside Ray's ``wait`` it surfaces as a ``SystemError``), and the executor then
    closes its pool as on any error."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds:g} s: it would wait forever")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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


class PoisonMetric(Metric):
    """A model-free test metric (share of summary words found in the source) with two poisoned
    inputs: a summary containing ``POISON`` makes it raise (an ordinary metric bug, handled by
    the scorer on any executor), and one containing ``CRASH`` kills the Ray worker process
    scoring it (a segfault, an OOM kill), which only the Ray executor's retries and isolation
    can handle. Outside a Ray worker ``CRASH`` raises instead of exiting, so a local run in the
    test process is safe. Instances pickle by reference: Ray workers import this module."""

    name = "poison"
    description = "test metric: word overlap, poisoned by POISON / CRASH"

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        out = []
        for ex in examples:
            if "POISON" in ex.summary:
                raise ValueError(f"poisoned summary in example {ex.id}")
            if "CRASH" in ex.summary:
                if in_ray_worker():
                    # The worker process dies mid-batch, as on a segfault: after working a
                    # moment, as a real batch does (a process that dies the instant a task
                    # starts can take the unsent reply of the task before it along; Ray then
                    # reports that finished task as failed too, and blames it for the crash).
                    time.sleep(0.5)
                    os._exit(3)
                raise RuntimeError(f"example {ex.id} would crash a worker")
            words = ex.summary.lower().split()
            source = set(ex.source.lower().split())
            value = sum(w in source for w in words) / len(words)
            out.append(Score(self.name, value, self.settings_hash(ctx), ex.id))
        return out


def in_ray_worker() -> bool:
    """Whether this process is a Ray worker (not the driver, not a plain test process)."""
    try:
        import ray
    except ImportError:
        return False
    return ray.is_initialized() and ray.get_runtime_context().worker.mode == ray.WORKER_MODE


def poison_examples() -> list[Example]:
    """Ten examples over three sources (interleaved); ``p1`` raises, ``c1`` crashes a worker."""
    sources = [
        "The mayor opened the new bridge in Leeds on Monday. It cost 40 million pounds.",
        "A storm closed three schools in Cork. Classes resume on Friday, the council said.",
        "The club signed a striker from Porto for two seasons after a medical on Tuesday.",
    ]
    summaries = [
        "The mayor opened a bridge in Leeds.",
        "A storm closed schools in Cork.",
        "The club signed a striker.",
        "The bridge cost 40 million pounds.",
        "Classes resume on Friday.",
        "The striker came from Porto.",
        "The mayor opened a bridge in York.",
        "Classes resume on Monday.",
    ]
    examples = [Example(f"e{k}", sources[k % 3], s) for k, s in enumerate(summaries)]
    examples.insert(4, Example("c1", sources[1], "A CRASH closed schools in Cork."))
    examples.insert(7, Example("p1", sources[2], "The POISON striker signed."))
    return examples


class PreparePoisonMetric(PoisonMetric):
    """``PoisonMetric`` whose ``prepare`` raises on a summary containing ``BOOM``."""

    name = "prepare_poison"

    def prepare(self, examples: Sequence[Example], ctx: ScoringContext) -> None:
        for ex in examples:
            if "BOOM" in ex.summary:
                raise ValueError(f"prepare cannot handle\nBOOM in {ex.id}")


class WorkerDriftMetric(PoisonMetric):
    """``PoisonMetric`` whose settings hash differs on a Ray worker, as on a node with other
    model files or library versions than the driver."""

    name = "worker_drift"

    def compute_settings_hash(self, ctx: ScoringContext) -> str:
        return f"{self.name}|{'worker' if in_ray_worker() else 'driver'}"


class WorkerOnlyErrorMetric(PoisonMetric):
    """``PoisonMetric`` whose settings hash cannot be computed on a Ray worker: the exception
    escapes the scorer's guards and reaches Ray (a ``RayTaskError``)."""

    name = "worker_only_error"

    def compute_settings_hash(self, ctx: ScoringContext) -> str:
        if in_ray_worker():
            raise RuntimeError("no settings hash on a worker")
        return super().compute_settings_hash(ctx)


class EnvMetric(PoisonMetric):
    """Scores 1.0 where the environment variable ``FG_TEST_ENV`` is ``"1"`` (a runtime
    environment reached the worker), else 0.0."""

    name = "env_probe"

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        value = 1.0 if os.environ.get("FG_TEST_ENV") == "1" else 0.0
        return [Score(self.name, value, self.settings_hash(ctx), ex.id) for ex in examples]
