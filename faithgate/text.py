"""Sentence splitting and windowing of long sources.

One spaCy pipeline is loaded per process (per model name) and reused. Windowing never cuts
silently: every function that drops or splits text returns what it did, and metrics copy that
into their score details.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from faithgate.errors import ModelNotFoundError

_SPACY_LOCK = threading.Lock()
_PIPELINES: dict[str, Any] = {}


def load_spacy(name: str | None = None) -> Any:
    """The spaCy pipeline for the ``spacy`` role, loaded once per process."""
    from faithgate import models

    spec = models.resolve("spacy", name)
    with _SPACY_LOCK:
        nlp = _PIPELINES.get(spec.location)
        if nlp is None:
            import spacy

            try:
                nlp = spacy.load(spec.location)
            except OSError as exc:
                raise ModelNotFoundError(
                    f"spaCy pipeline {spec.location!r} could not be loaded: {exc}"
                ) from exc
            _PIPELINES[spec.location] = nlp
    return nlp


def parse(text: str, spacy_model: str | None = None) -> Any:
    """A spaCy ``Doc`` of ``text`` (cached: metrics parse the same texts repeatedly)."""
    return _parse_cached(text, spacy_model)


@lru_cache(maxsize=4096)
def _parse_cached(text: str, spacy_model: str | None) -> Any:
    return load_spacy(spacy_model)(text)


def split_sentences(text: str, spacy_model: str | None = None) -> list[str]:
    """Sentences of ``text`` by spaCy's parser; empty sentences dropped, text kept verbatim."""
    return [s.text.strip() for s in parse(text, spacy_model).sents if s.text.strip()]


@dataclass(frozen=True)
class Window:
    """A contiguous run of sentences ``[start, end)`` that fits a model's context."""

    start: int
    end: int
    text: str
    n_tokens: int
    truncated: bool = False  # a single sentence longer than the limit was cut


def window_sentences(
    sentences: Sequence[str],
    max_tokens: int,
    count_tokens: Callable[[str], int],
    overlap: int = 1,
) -> list[Window]:
    """Pack sentences greedily into windows of at most ``max_tokens`` tokens.

    Consecutive windows share ``overlap`` sentences so that evidence spanning a boundary is
    seen whole by at least one window. A sentence longer than ``max_tokens`` forms its own window
    and is marked ``truncated`` (the model will cut it; the caller records that).
    """
    if max_tokens <= 0:
        raise ValueError("max_tokens must be positive")
    counts = [count_tokens(s) for s in sentences]
    windows: list[Window] = []
    start = 0
    n = len(sentences)
    while start < n:
        end, total = start, 0
        while end < n and (end == start or total + counts[end] <= max_tokens):
            total += counts[end]
            end += 1
        windows.append(
            Window(start, end, " ".join(sentences[start:end]), total, truncated=total > max_tokens)
        )
        if end >= n:
            break
        # Step back by the overlap but always make progress.
        start = max(end - overlap, start + 1)
    return windows
