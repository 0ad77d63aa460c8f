"""AlignScore (Zha et al., 2023, "AlignScore: Evaluating Factual Consistency with a Unified
Alignment Function", ACL): a RoBERTa alignment model judging claim sentences against chunks of
the context, in the chunking and aggregation of the authors' ``alignscore`` package
(``Inferencer.inference_per_example``, ``nli_sp`` mode):

- the context's sentences are joined into chunks of ``k`` consecutive sentences, where
  ``n = words(context) // chunk_words + 1`` and ``k = max(len(sentences) // n, 1)`` (about
  ``chunk_words`` = 350 words a chunk);
- the summary is split into claim sentences ``s_1..s_m``;
- ``A[j, i] = p_aligned(c_j, s_i)``: the three-way head's ALIGNED probability (its first
  class; or the binary head's aligned class for a ``bin`` conversion);
- score = 1/m sum_i max_j A[j, i], in [0, 1].

The model is the ``alignscore`` role: a directory made by ``faithgate convert alignscore``
from a released ``.ckpt`` (default hub id ``yzha/AlignScore``, AlignScore-large, converted
into the cache on first use with ``--allow-download``). Every (chunk, claim) pair of a batch is
deduplicated and classified in one call, batched by length. Sentences are split by faithgate's
spaCy splitter (``sentences = "spacy"``, the default); ``sentences = "nltk"`` splits with NLTK's
punkt as the reference does (the two can cut differently on abbreviations and lists).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.text import split_sentences
from faithgate.types import Example, Score, SentenceScore

# The class AlignScore's score reads, by head: the three-way head's first class (ALIGNED,
# labelled entailment by the converter) or the binary head's aligned class.
ALIGNED_LABELS = ("entailment", "aligned")


def aligned_index(labels: Sequence[str], model: str) -> int:
    """Index of the ALIGNED class among a converted AlignScore model's labels."""
    lowered = [str(label).strip().lower() for label in labels]
    for name in ALIGNED_LABELS:
        if name in lowered:
            return lowered.index(name)
    raise InputError(
        f"alignscore model {model!r} has labels {list(labels)}, none of "
        f"{', '.join(ALIGNED_LABELS)}: convert an AlignScore checkpoint with "
        "`faithgate convert alignscore` and pass --model alignscore=DIR"
    )


# How sentences are split: faithgate's spaCy splitter (the default, as every faithgate metric),
# or NLTK's punkt, the reference's (``sent_tokenize``; needs nltk and its punkt_tab data).
SPLITTERS = ("spacy", "nltk")


def nltk_sentences(text: str) -> list[str]:
    """The reference's splitter, ``nltk.tokenize.sent_tokenize``; one clear line when NLTK or
    its punkt data is missing."""
    try:
        from nltk.tokenize import sent_tokenize
    except ImportError:
        raise InputError(
            "alignscore sentences = 'nltk' needs NLTK: pip install nltk, then "
            "python -m nltk.downloader punkt_tab"
        ) from None
    try:
        return [s for s in sent_tokenize(text) if s.strip()]
    except LookupError:
        raise InputError(
            "alignscore sentences = 'nltk' needs NLTK's punkt data: "
            "python -m nltk.downloader punkt_tab"
        ) from None


def context_chunks(sentences: Sequence[str], n_words: int, chunk_words: int) -> list[str]:
    """AlignScore's chunks: ``k = max(len(sentences) // (n_words // chunk_words + 1), 1)``
    consecutive sentences joined by a space; ``[""]`` for a context without a sentence."""
    sentences = list(sentences) or [""]
    n_chunks = n_words // chunk_words + 1
    k = max(len(sentences) // n_chunks, 1)
    return [" ".join(sentences[i : i + k]) for i in range(0, len(sentences), k)]


@register
class AlignScore(Metric):
    """AlignScore: mean over claim sentences of the max ALIGNED probability over context
    chunks of about ``chunk_words`` words (Zha et al., 2023)."""

    name = "alignscore"
    family = "nli"
    description = "AlignScore: mean over summary sentences of max aligned probability over chunks"
    roles = {"alignscore": "pair-classifier", "spacy": "pipeline"}
    defaults: ClassVar[dict[str, Any]] = {"chunk_words": 350, "sentences": "spacy"}
    bounds = (0.0, 1.0)
    scale = "mean over summary sentences of the best source chunk's ALIGNED probability, 0..1"
    sentence_value = "ALIGNED probability by the best source chunk (0..1)"

    def validate_settings(self) -> None:
        n = self.settings["chunk_words"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InputError("alignscore setting 'chunk_words' must be an integer >= 1")
        if self.settings["sentences"] not in SPLITTERS:
            raise InputError(
                f"alignscore setting 'sentences' must be one of: {', '.join(SPLITTERS)}"
            )

    def _splitter(self, ctx: ScoringContext) -> Callable[[str], list[str]]:
        if self.settings["sentences"] == "nltk":
            return nltk_sentences
        spacy_model = ctx.spacy_model
        return lambda text: split_sentences(text, spacy_model)

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        settings_hash = self.settings_hash(ctx)
        split = self._splitter(ctx)
        plans: list[tuple[list[str], list[str]] | None] = []
        pairs: dict[tuple[str, str], int] = {}
        for ex in examples:
            claims = split(ex.summary)
            if not claims:
                plans.append(None)
                continue
            source = split(ex.source)
            chunks = context_chunks(
                source, len(ex.source.strip().split()), self.settings["chunk_words"]
            )
            plans.append((chunks, claims))
            for c in chunks:
                for s in claims:
                    pairs.setdefault((c, s), len(pairs))
        probs = np.zeros(0)
        if pairs:
            model = ctx.model("alignscore", "pair-classifier")
            col = aligned_index(model.labels, model.spec.name)
            # One call for the whole batch (every chunk of every source), batched by length.
            keys = list(pairs)
            probs = np.asarray(
                model.predict_proba([p for p, _ in keys], [h for _, h in keys]), dtype=np.float64
            )[:, col]
        scores = []
        for ex, plan in zip(examples, plans, strict=True):
            if plan is None:
                scores.append(Score.failed(self.name, settings_hash, ex.id, "no sentence to score"))
                continue
            chunks, claims = plan
            matrix = np.array([[probs[pairs[(c, s)]] for s in claims] for c in chunks])
            best = matrix.argmax(axis=0)
            sentences = [
                SentenceScore(i, s, float(matrix[best[i], i]), evidence=chunks[best[i]])
                for i, s in enumerate(claims)
            ]
            details = {
                "n_chunks": len(chunks),
                "matrix": np.round(matrix, 4).tolist(),
                "best_chunk": best.tolist(),
            }
            value = float(matrix.max(axis=0).mean())
            scores.append(Score(self.name, value, settings_hash, ex.id, sentences, details))
        return scores
