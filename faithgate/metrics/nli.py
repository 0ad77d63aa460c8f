"""Entailment metrics: an NLI model's belief that the source entails each summary sentence.

Let ``E(a, b)`` be an NLI model's probability that premise ``a`` entails hypothesis ``b``,
``s_1..s_n`` the summary sentences and ``D`` the source sentences.

- ``entail_s2s``  = 1/n sum_i max_{d in D} E(d, s_i)                 (sentence vs sentence)
- ``entail_d2s``  = 1/n sum_i max_{w in W(D)} E(w, s_i)              (document vs sentence;
  ``W(D)`` are windows of whole sentences that fit the model's context with the hypothesis)
- ``entail_topk`` = 1/n sum_i E(P_i, s_i), ``P_i`` = the ``k`` source sentences most similar to
  ``s_i`` by sentence-embedding cosine, joined in document order
- ``summac_zs``   (Laban et al., 2022, "SummaC: Re-Visiting NLI-based Models for Inconsistency
  Detection in Summarization", TACL): ``M[j, i] = p_entail(c_j, s_i) - p_contradict(c_j, s_i)``
  over source chunks ``c_j`` x summary sentences ``s_i``; score = 1/n sum_i max_j M[j, i]
  (range [-1, 1]); the matrix is kept in the details.

Any sequence-classification NLI model (hub id or local directory, ``nli`` role) works; its class
order is read from ``config.id2label`` (entailment / neutral / contradiction in any order and
casing). Without ``--model nli=...`` the role resolves to the shipped offline checker
(``onnx_models/checker``, docs/models/checker.md); if its files are missing or damaged the role
resolution stops with one line saying how to restore them or configure another model. The NLI
engine (``faithgate.engines.nli``) deduplicates all (premise, hypothesis) pairs of a batch,
sorts them by length and classifies them in one batched call; probabilities are cached per
run, so several NLI metrics (or several summaries of one source) never classify a pair twice.

Limits. A pair that does not fit the model's window is cut by the tokenizer from the premise
side only. A hypothesis is never cut: a summary sentence longer than ``hypothesis_limit``
tokens (the window less the pair's special tokens and a quarter of the window kept for the
premise) is split at word boundaries into consecutive pieces that fit, each piece is judged as
its own hypothesis, and the sentence's support is its weakest piece's (a hallucination at the
end of a long sentence is judged like one at its start). ``details["hypothesis_pieces"]``
records a split; ``details["premises_cut"]`` counts the (premise, hypothesis) pairs whose
premise the model saw cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from faithgate.engines.nli import PAIR_SPECIALS, NLIEngine, nli_engine
from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.text import split_sentences, window_sentences
from faithgate.types import Example, Score, SentenceScore


class _Sentences:
    """Sentence splits memoised per batch: a source shared by several summaries is split (and
    later embedded) once."""

    def __init__(self, spacy_model: str | None = None) -> None:
        self._memo: dict[str, list[str]] = {}
        self.spacy_model = spacy_model

    def __call__(self, text: str) -> list[str]:
        if text not in self._memo:
            sents = split_sentences(text, self.spacy_model)
            self._memo[text] = sents or ([text.strip()] if text.strip() else [])
        return self._memo[text]


AGGREGATES = ("mean", "min", "product")


def combine_sentences(values: Sequence[float], how: str) -> float:
    """One summary score from its sentences' support: ``mean`` (every sentence counts
    equally), ``min`` (the weakest sentence decides) or ``product`` (for probabilities: the
    probability that every sentence is supported, treating sentences as independent)."""
    arr = np.asarray(values, dtype=np.float64)
    if how == "min":
        return float(arr.min())
    if how == "product":
        return float(np.exp(np.log(np.clip(arr, 1e-12, 1.0)).sum()))
    return float(arr.mean())


class _NLIMetric(Metric):
    """Shared plumbing: plan every (premise, hypothesis) pair of the batch, classify them in
    one deduplicated call, then aggregate per example (``aggregate`` setting: how sentence
    scores become the summary's score)."""

    family = "nli"
    # 2: a summary sentence too long for the model is judged in pieces (it was cut silently);
    # 3: a line break ends a sentence (faithgate.text.line_breaks): highlights and bullets were merged; 4: a break inside a sentence (a wrapped line, a bullet
    # going on indented) no longer ends it, CRLF/CR/U+2028 are breaks, "2." stays with its item.
    version = "4"
    roles = {"nli": "pair-classifier", "spacy": "pipeline"}
    defaults: ClassVar[dict[str, Any]] = {"aggregate": "mean"}
    aggregates: ClassVar[tuple[str, ...]] = AGGREGATES

    def validate_settings(self) -> None:
        if self.settings["aggregate"] not in self.aggregates:
            raise InputError(
                f"{self.name} setting 'aggregate' must be one of: {', '.join(self.aggregates)}"
            )

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        engine = nli_engine(ctx)
        settings_hash = self.settings_hash(ctx)
        sents = _Sentences(ctx.spacy_model)
        plans: list[Any] = []
        all_pairs: list[tuple[str, str]] = []
        for ex in examples:
            source, summary = sents(ex.source), sents(ex.summary)
            if not source or not summary:
                plans.append(None)
                continue
            # Hypotheses: the summary sentences, a long one as pieces that fit the window.
            hyps, owner, splits = engine.split(summary)
            plan = self.plan(ex, source, hyps, engine, ctx)
            plan.update(sentences=summary, owner=owner, splits=splits)
            plans.append(plan)
            all_pairs.extend(plan["pairs"])
        engine.probs(all_pairs)  # one batched, deduplicated pass; aggregation reads the cache
        scores = []
        for ex, plan in zip(examples, plans, strict=True):
            if plan is None:
                scores.append(Score.failed(self.name, settings_hash, ex.id, "no sentence to score"))
                continue
            value, sentences, details = self.aggregate(plan, engine)
            if plan["splits"]:
                value, sentences, details = self._join_pieces(plan, engine, sentences, details)
            details["premises_cut"] = engine.premises_cut(plan["pairs"])
            scores.append(Score(self.name, value, settings_hash, ex.id, sentences, details))
        return scores

    def _join_pieces(
        self,
        plan: dict[str, Any],
        engine: NLIEngine,
        pieces: list[SentenceScore],
        details: dict[str, Any],
    ) -> tuple[float, list[SentenceScore], dict[str, Any]]:
        """Per-piece scores back to summary sentences: a split sentence is supported as much
        as its weakest piece (every part of it must be entailed)."""
        owner = plan["owner"]
        sentences = []
        for i, text in enumerate(plan["sentences"]):
            weakest = min(
                (p for p, o in zip(pieces, owner, strict=True) if o == i), key=lambda p: p.value
            )
            sentences.append(SentenceScore(i, text, weakest.value, evidence=weakest.evidence))
        value = combine_sentences([s.value for s in sentences], self.settings["aggregate"])
        split = {r["sentence"] for r in plan["splits"]}
        details = {
            **details,
            "hypothesis_pieces": {
                "limit_tokens": engine.hypothesis_limit,
                "split": plan["splits"],
                # Per-piece results (best_premise, a matrix's columns) follow this order.
                "piece_sentence": owner,
                "pieces": [
                    {"sentence": o, "text": p.text, "value": p.value}
                    for p, o in zip(pieces, owner, strict=True)
                    if o in split
                ],
            },
        }
        return value, sentences, details

    def plan(
        self,
        ex: Example,
        source: list[str],
        summary: list[str],
        engine: NLIEngine,
        ctx: ScoringContext,
    ) -> dict[str, Any]:
        """Premises per summary sentence: ``{"pairs", "premises": [[str]], ...}``."""
        raise NotImplementedError

    def aggregate(
        self, plan: dict[str, Any], engine: NLIEngine
    ) -> tuple[float, list[SentenceScore], dict[str, Any]]:
        """Default: each sentence's support is its max E over its premises."""
        sentences, best = [], []
        for i, (hyp, premises) in enumerate(zip(plan["summary"], plan["premises"], strict=True)):
            probs = engine.entailment([(p, hyp) for p in premises])
            j = int(np.argmax(probs))
            best.append(j)
            sentences.append(SentenceScore(i, hyp, float(probs[j]), evidence=premises[j]))
        value = combine_sentences([s.value for s in sentences], self.settings["aggregate"])
        return value, sentences, {**plan.get("details", {}), "best_premise": best}


def _pairs(summary: list[str], premises: list[list[str]]) -> list[tuple[str, str]]:
    return [(p, hyp) for hyp, ps in zip(summary, premises, strict=True) for p in ps]


@register
class EntailS2S(_NLIMetric):
    """``entail_s2s`` = 1/n sum_i max_{d in D} E(d, s_i): each summary sentence against its most
    entailing source sentence (sentence-level NLI, as in Laban et al. 2022's zero-shot baseline
    and Falke et al. 2019's re-ranking)."""

    name = "entail_s2s"
    bounds = (0.0, 1.0)  # aggregates of probabilities
    description = "NLI: mean over summary sentences of the max entailment by one source sentence"
    scale = "mean entailment probability of the summary sentences, 0..1"
    sentence_value = "entailment probability by the best source sentence (0..1)"

    def plan(self, ex, source, summary, engine, ctx):  # type: ignore[override]
        premises = [list(source) for _ in summary]
        return {
            "summary": summary,
            "premises": premises,
            "pairs": _pairs(summary, premises),
            "details": {"n_source_sentences": len(source)},
        }


@register
class EntailD2S(_NLIMetric):
    """``entail_d2s`` = 1/n sum_i max_{w in W(D)} E(w, s_i): each summary sentence against the
    whole source. A source longer than the model's context is packed into windows of whole
    sentences (``overlap`` sentences shared by neighbours) that fit together with the longest
    summary sentence; the max over windows is taken and the windowing recorded in details."""

    name = "entail_d2s"
    bounds = (0.0, 1.0)
    description = "NLI: mean over summary sentences of the entailment by the (windowed) source"
    scale = "mean entailment probability of the summary sentences by the source, 0..1"
    sentence_value = "entailment probability by the (windowed) source (0..1)"
    defaults: ClassVar[dict[str, Any]] = {**_NLIMetric.defaults, "overlap": 1}

    def validate_settings(self) -> None:
        super().validate_settings()
        if not isinstance(self.settings["overlap"], int) or self.settings["overlap"] < 0:
            raise InputError("entail_d2s setting 'overlap' must be an integer >= 0")

    def plan(self, ex, source, summary, engine, ctx):  # type: ignore[override]
        model = engine.model
        # ``summary``: hypotheses, each at most ``hypothesis_limit`` tokens (long sentences
        # come split), so every window below fits with every hypothesis uncut.
        longest = max(engine.n_tokens(s) for s in summary)
        # Room for the pair's special tokens ([CLS] a [SEP] b [SEP] or <s> a </s></s> b </s>).
        budget = model.max_length - longest - PAIR_SPECIALS
        # Never below the quarter of the window ``hypothesis_limit`` keeps for the premise.
        budget = max(budget, model.max_length // 4, 1)
        windows = window_sentences(
            source, budget, model.count_tokens, overlap=self.settings["overlap"]
        )
        texts = [w.text for w in windows]
        premises = [texts for _ in summary]
        return {
            "summary": summary,
            "premises": premises,
            "pairs": _pairs(summary, premises),
            "details": {
                "window_tokens": budget,
                "windowed": len(windows) > 1,
                "windows": [
                    {
                        "start": w.start,
                        "end": w.end,
                        "n_tokens": w.n_tokens,
                        "truncated": w.truncated,
                    }
                    for w in windows
                ],
            },
        }


@register
class EntailTopK(_NLIMetric):
    """``entail_topk`` = 1/n sum_i E(P_i, s_i), with ``P_i`` the ``k`` source sentences most
    similar to ``s_i`` by cosine of sentence embeddings (``embedder`` role), joined in document
    order so the premise reads as the source does."""

    name = "entail_topk"
    bounds = (0.0, 1.0)
    description = (
        "NLI: mean entailment of each summary sentence by its k most similar source sentences"
    )
    scale = "mean entailment probability by the top-k most similar source sentences, 0..1"
    sentence_value = "entailment probability by its top-k source sentences (0..1)"
    roles = {"nli": "pair-classifier", "embedder": "text-encoder", "spacy": "pipeline"}
    defaults: ClassVar[dict[str, Any]] = {**_NLIMetric.defaults, "k": 3}
    # 3: a hub embedder is pooled as its 1_Pooling says (it was always mean pooling), which
    # picks the top-k sentences (2: the family's version before); 4: a line break ends a sentence (faithgate.text.line_breaks): highlights and bullets were merged; 5: a break inside a sentence (a wrapped line, a bullet
    # going on indented) no longer ends it, CRLF/CR/U+2028 are breaks, "2." stays with its item.
    version = "5"

    def validate_settings(self) -> None:
        super().validate_settings()
        if not isinstance(self.settings["k"], int) or self.settings["k"] < 1:
            raise InputError("entail_topk setting 'k' must be an integer >= 1")

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        # Embed every distinct sentence of the batch once (a source's sentences once for all
        # its summaries) before planning.
        sents = _Sentences(ctx.spacy_model)
        engine = nli_engine(ctx)
        texts: list[str] = []
        for ex in examples:
            texts.extend(sents(ex.source))
            texts.extend(engine.split(sents(ex.summary))[0])  # hypotheses: pieces of long ones
        unique = list(dict.fromkeys(texts))
        self._vectors: dict[str, np.ndarray] = {}
        if unique:
            encoder = ctx.model("embedder", "text-encoder")
            vecs = np.asarray(encoder.sentence_embeddings(unique), dtype=np.float64)
            self._vectors = dict(zip(unique, vecs, strict=True))
        try:
            return super().score_batch(examples, ctx)
        finally:
            self._vectors = {}

    def plan(self, ex, source, summary, engine, ctx):  # type: ignore[override]
        src = np.stack([self._vectors[s] for s in source])
        k = min(self.settings["k"], len(source))
        chosen, premises = [], []
        for hyp in summary:
            sims = src @ self._vectors[hyp]
            # Stable sort: ties keep document order; then back to document order.
            top = sorted(np.argsort(-sims, kind="stable")[:k].tolist())
            chosen.append(top)
            premises.append([" ".join(source[j] for j in top)])
        return {
            "summary": summary,
            "premises": premises,
            "pairs": _pairs(summary, premises),
            "details": {"k": k, "topk_sentences": chosen},
        }


@register
class SummaCZS(_NLIMetric):
    """SummaC-ZS (Laban et al., 2022): ``M[j, i] = p_entail(c_j, s_i) - p_contradict(c_j, s_i)``
    over source chunks ``c_j`` (``chunk_sentences`` consecutive sentences, default 1) x summary
    sentences ``s_i``; score = 1/n sum_i max_j M[j, i], in [-1, 1]. ``details["matrix"]`` keeps
    M (rows: chunks, columns: summary sentences) so a report can show which chunk supports which
    sentence. A two-class model (no contradiction class) uses p_contradict = 0."""

    name = "summac_zs"
    bounds = (-1.0, 1.0)  # aggregates of p_e - p_c
    description = "SummaC-ZS: mean over summary sentences of max over source chunks of p_e - p_c"
    scale = "mean of max(p_entail - p_contradict) over source chunks, -1..1"
    sentence_value = "p_entail - p_contradict by the best source chunk (-1..1)"
    defaults: ClassVar[dict[str, Any]] = {**_NLIMetric.defaults, "chunk_sentences": 1}
    aggregates = ("mean", "min")  # p_e - p_c is not a probability: no product

    def validate_settings(self) -> None:
        super().validate_settings()
        n = self.settings["chunk_sentences"]
        if not isinstance(n, int) or n < 1:
            raise InputError("summac_zs setting 'chunk_sentences' must be an integer >= 1")

    def plan(self, ex, source, summary, engine, ctx):  # type: ignore[override]
        n = self.settings["chunk_sentences"]
        chunks = [" ".join(source[j : j + n]) for j in range(0, len(source), n)]
        premises = [chunks for _ in summary]
        return {
            "summary": summary,
            "premises": premises,
            "chunks": chunks,
            "pairs": _pairs(summary, premises),
            "details": {"n_chunks": len(chunks), "chunk_sentences": n},
        }

    def aggregate(self, plan, engine):  # type: ignore[override]
        chunks, summary = plan["chunks"], plan["summary"]
        pairs = [(c, s) for c in chunks for s in summary]  # row-major: chunk j, sentence i
        matrix = (engine.entailment(pairs) - engine.contradiction(pairs)).reshape(
            len(chunks), len(summary)
        )
        best = matrix.argmax(axis=0)
        sentences = [
            SentenceScore(i, s, float(matrix[best[i], i]), evidence=chunks[best[i]])
            for i, s in enumerate(summary)
        ]
        value = combine_sentences(matrix.max(axis=0), self.settings["aggregate"])
        details = {
            **plan["details"],
            "matrix": np.round(matrix, 4).tolist(),
            "best_chunk": best.tolist(),
            "has_contradiction_class": engine.contradict is not None,
        }
        return value, sentences, details
