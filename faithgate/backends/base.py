"""The one interface every inference backend implements.

Metrics call these task interfaces and never import torch or onnxruntime. A backend turns a
resolved ``ModelSpec`` into one of them:

- ``TextEncoder``     contextual token embeddings and pooled sentence embeddings (``embedder``)
- ``PairClassifier``  class probabilities of (premise, hypothesis) pairs (``nli``)
- ``LanguageModel``   per-token log-probabilities of a target given a context (``lm``, ``seq2seq``)
- ``TextGenerator``   generated text from an input text (``qg``: a seq2seq question generator)
- ``ExtractiveQA``    answer spans of questions in contexts (``qa``)

Outputs are numpy arrays and plain Python; inputs are strings, so the same metric code runs on
torch fp32, onnxruntime fp32 or onnxruntime int8.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faithgate.models import ModelSpec

TASKS = (
    "text-encoder",
    "pair-classifier",
    "causal-lm",
    "seq2seq-lm",
    "text-generator",
    "extractive-qa",
)


class RoleModel(ABC):
    """A loaded model serving one role. Loaded once per process and reused."""

    task: str = ""

    def __init__(self, spec: ModelSpec, backend: str, quantization: str = "none") -> None:
        self.spec = spec
        self.backend = backend
        self.quantization = quantization

    @property
    def identity(self) -> dict[str, Any]:
        """What makes this model's outputs what they are; part of every score's settings hash."""
        return {
            "role": self.spec.role,
            "model": self.spec.name,
            "fingerprint": self.spec.fingerprint,
            "backend": self.backend,
            "quantization": self.quantization,
        }

    @property
    @abstractmethod
    def max_length(self) -> int:
        """Longest input in tokens the model accepts."""

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this model's tokenizer, without special tokens."""


@dataclass
class TokenEmbeddings:
    """Contextual embeddings of one text's tokens (special tokens removed)."""

    tokens: list[str]
    vectors: np.ndarray  # (n_tokens, dim), float32, not normalised
    # True when the text was longer than the model's context and was embedded window by window.
    windowed: bool = False


class TextEncoder(RoleModel):
    task = "text-encoder"

    @abstractmethod
    def token_embeddings(
        self, texts: Sequence[str], layer: int | None = None
    ) -> list[TokenEmbeddings]:
        """Per-token vectors from hidden layer ``layer`` (default: the last).

        Texts longer than ``max_length`` are embedded in overlapping token windows and the
        windows' vectors concatenated (overlap dropped), so no token is lost.
        """

    @abstractmethod
    def sentence_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """Pooled (model's own pooling, e.g. mean) and L2-normalised vectors, (n, dim)."""


class PairClassifier(RoleModel):
    task = "pair-classifier"

    @property
    @abstractmethod
    def labels(self) -> list[str]:
        """Lower-cased class names in output order, read from ``config.id2label``."""

    @abstractmethod
    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        """Softmax probabilities, shape (n, len(labels)). Premises are truncated to fit."""


@dataclass
class TokenLogprobs:
    """log p(target token | context, earlier target tokens) for each target token."""

    tokens: list[str]
    logprobs: np.ndarray  # (n_target_tokens,), float64
    # How the context was cut to fit the window, for the score details.
    context_policy: dict[str, Any] = field(default_factory=dict)


class LanguageModel(RoleModel):
    """Teacher-forced scoring of targets (decoder-only or encoder-decoder)."""

    @abstractmethod
    def target_logprobs(self, pairs: Sequence[tuple[str, str]]) -> list[TokenLogprobs]:
        """For each (context, target): the target's per-token log-probabilities."""


class TextGenerator(RoleModel):
    """Generates text from an input text (e.g. a seq2seq question generator, ``qg`` role)."""

    task = "text-generator"

    @abstractmethod
    def generate(self, inputs: Sequence[str], max_new_tokens: int = 32) -> list[str]:
        """Greedy (deterministic) output for each input; inputs are truncated to fit."""


@dataclass
class Answer:
    """An extractive answer: the span text (``""`` for no answer) and the model's confidence."""

    text: str
    score: float
    start: int = -1  # character offsets in the context, -1 when there is no answer
    end: int = -1

    @property
    def is_empty(self) -> bool:
        return not self.text.strip()


class ExtractiveQA(RoleModel):
    """Answers questions with spans of a context (SQuAD-style models, ``qa`` role)."""

    task = "extractive-qa"

    @abstractmethod
    def answer(self, questions: Sequence[str], contexts: Sequence[str]) -> list[Answer]:
        """Best span per (question, context); an empty ``Answer`` when the model's
        no-answer score beats every span. Long contexts are windowed, best span kept."""


class Backend(ABC):
    """Factory of task models for one inference runtime."""

    name: str = ""

    @abstractmethod
    def load(self, spec: ModelSpec, task: str, **options: Any) -> RoleModel:
        """Load ``spec`` for ``task``; raise ``BackendError`` with one line on failure."""
