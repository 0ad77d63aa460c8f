"""Test doubles for the foundation tests: a ``TextEncoder`` with hand-made word vectors and a
regex sentence splitter, so metric formulas can be checked by hand without loading a model.
"""

from __future__ import annotations

import re

import numpy as np

from faithgate.backends import ModelPool
from faithgate.backends.base import TextEncoder, TokenEmbeddings
from faithgate.metrics.base import ScoringContext
from faithgate.models import ModelSpec

WORD = re.compile(r"\w+")


class FakeEncoder(TextEncoder):
    """Tokens are lower-cased words; each word's vector comes from ``vectors`` (contextless)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        super().__init__(ModelSpec("embedder", "fake-encoder", "/nonexistent/fake", "path"), "fake")
        self.vectors = {k: np.asarray(v, dtype=np.float32) for k, v in vectors.items()}
        self.calls: list[list[str]] = []

    @property
    def max_length(self) -> int:
        return 512

    def count_tokens(self, text: str) -> int:
        return len(WORD.findall(text.lower()))

    def unknown_only(self, text: str) -> bool:
        # The word "unk" plays the tokenizer's unknown token.
        toks = WORD.findall(text.lower())
        return bool(toks) and all(t == "unk" for t in toks)

    def token_embeddings(self, texts, layer=None):
        self.calls.append(list(texts))
        out = []
        for t in texts:
            toks = WORD.findall(t.lower())
            dim = len(next(iter(self.vectors.values())))
            vecs = np.stack([self.vectors[w] for w in toks]) if toks else np.zeros((0, dim))
            out.append(TokenEmbeddings(toks, vecs))
        return out

    def sentence_embeddings(self, texts):
        self.calls.append(list(texts))
        rows = [e.vectors.mean(axis=0) for e in self.token_embeddings(texts)]
        self.calls.pop()
        m = np.stack(rows)
        return m / np.linalg.norm(m, axis=1, keepdims=True)


def fake_context(vectors: dict[str, list[float]]) -> tuple[ScoringContext, FakeEncoder]:
    encoder = FakeEncoder(vectors)
    pool = ModelPool()
    pool.add(encoder)
    return ScoringContext(pool), encoder


def regex_split(text: str, spacy_model: str | None = None) -> list[str]:
    """Sentences end at '.', '!' or '?' followed by space or end (stands in for spaCy)."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.strip()]
