"""Lexical overlap with the source: ROUGE precision, novel n-grams, FEQA abstractiveness.

Model-free except for spaCy sentence splitting: the cheapest signal of how much a summary
copies (and so how little room it leaves for unsupported content). Abstractive summaries score
low here without being unfaithful, so this is a baseline and a diagnostic, not a verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from faithgate import text as textmod
from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.types import Example, Score, SentenceScore
from faithgate.words import stemmed_words, unsupported_script_error, words

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
NOVEL = ("novel1", "novel2", "novel3", "novel4")
CATEGORIES = (
    "sentence_extraction",
    "span_extraction",
    "word_extraction",
    "perfect_fusion",
    "none",
)


def rouge_tokens(text: str) -> list[str]:
    """Word tokens without stemming (``faithgate.words.words``: Unicode word boundaries, so
    every language with words is tokenised; for ASCII text the same as rouge-score's)."""
    return words(text)


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def novel_ngram_ratio(summary: Sequence[str], source: Sequence[str], n: int) -> float:
    """Share of the summary's n-grams (with multiplicity) that never occur in the source;
    0.0 for a summary shorter than n tokens (it has nothing novel)."""
    grams = ngrams(summary, n)
    if not grams:
        return 0.0
    seen = set(ngrams(source, n))
    return sum(g not in seen for g in grams) / len(grams)


def _is_subsequence(needle: Sequence[str], haystack: Sequence[str]) -> bool:
    it = iter(haystack)
    return all(tok in it for tok in needle)


def _greedy_cover(words: set[str], sets: Sequence[set[str]]) -> list[int] | None:
    """Indices of source sentences whose words cover ``words`` (greedy set cover: at each step
    the sentence covering most of what is left), or None when even all of them do not."""
    left, chosen = set(words), []
    while left:
        best = max(range(len(sets)), key=lambda j: len(left & sets[j]), default=None)
        if best is None or not left & sets[best]:
            return None
        chosen.append(best)
        left -= sets[best]
    return chosen


def classify_sentence(
    sentence: Sequence[str], source_sentences: Sequence[Sequence[str]]
) -> tuple[str, list[int]]:
    """FEQA abstractiveness category of one summary sentence (Durmus et al., 2020, sec. 6),
    over word tokens, first rule that holds:

    - ``sentence_extraction``: equal to a source sentence;
    - ``span_extraction``: a contiguous span of one source sentence;
    - ``word_extraction``: its tokens are a subsequence (order kept, gaps allowed) of one source
      sentence;
    - ``perfect_fusion``: every token occurs in the union of k source sentences (k from a
      greedy set cover, so an upper bound on the least k). FEQA's fusion has k > 1; k = 1 here
      means one sentence's words reordered (not a subsequence), kept apart from ``none``
      because nothing in it is new;
    - ``none``: some token occurs nowhere in the source.

    Returns the category and the source sentence indices that support it.
    """
    if not sentence:
        return "none", []
    joined = " " + " ".join(sentence) + " "
    for j, src in enumerate(source_sentences):
        if list(sentence) == list(src):
            return "sentence_extraction", [j]
    for j, src in enumerate(source_sentences):
        if joined in " " + " ".join(src) + " ":
            return "span_extraction", [j]
    for j, src in enumerate(source_sentences):
        if _is_subsequence(sentence, src):
            return "word_extraction", [j]
    cover = _greedy_cover(set(sentence), [set(s) for s in source_sentences])
    if cover is not None:
        return "perfect_fusion", sorted(cover)
    return "none", []


@register
class Overlap(Metric):
    """ROUGE precision of the summary against the source, novel n-grams and the FEQA
    abstractiveness profile.

    - ROUGE-N precision (Lin, 2004; via ``rouge-score``, Porter stemmer by default):
      ``P_N = sum_g min(c_summary(g), c_source(g)) / sum_g c_summary(g)`` over n-grams g of the
      summary; ROUGE-L precision ``LCS(summary, source) / |summary|``.
    - Novel n-gram ratio, n = 1..4: share of summary n-grams absent from the source (See et al.,
      2017, and most abstractiveness studies).
    - Abstractiveness profile (Durmus et al., 2020, "FEQA", ACL): share of summary sentences that
      are sentence / span / word extractions, perfect fusions of k source sentences (k > 1 in
      FEQA; ``details.fusion_k`` counts them by k), or none of these (``classify_sentence``).

    ``value`` is the ``component`` setting: ``rouge1``, ``rouge2`` (default) or ``rougeL``
    precision, or ``novel1``..``novel4`` reported as ``1 - novel ratio`` so that higher means
    more copied (more faithful, all else equal). Per summary sentence: the same component for
    that sentence alone, with its abstractiveness category and source sentences as evidence.
    """

    name = "overlap"
    description = "ROUGE-1/2/L precision vs source, novel n-grams, FEQA abstractiveness profile"
    family = "overlap"
    roles = {"spacy": "pipeline"}
    defaults = {"component": "rouge2", "use_stemmer": True}
    bounds = (0.0, 1.0)  # a precision, or 1 - a novel-n-gram ratio
    # 2: Unicode word tokens (faithgate.words) instead of rouge-score's [a-z0-9]+ runs;
    # 3 (sentence details): a line break ends a sentence (faithgate.text.line_breaks): highlights and bullets were merged; 4: a break inside a sentence (a wrapped line, a bullet
    # going on indented) no longer ends it, CRLF/CR/U+2028 are breaks, "2." stays with its item.
    version = "4"

    def validate_settings(self) -> None:
        allowed = (*ROUGE_TYPES, *NOVEL)
        if self.settings["component"] not in allowed:
            raise InputError(
                f"metric 'overlap': component must be one of {', '.join(allowed)}, "
                f"got {self.settings['component']!r}"
            )
        if not isinstance(self.settings["use_stemmer"], bool):
            raise InputError("metric 'overlap': use_stemmer must be true or false")

    def _rouge_precision(self, summ: list[str], src: list[str]) -> dict[str, float]:
        # Imported here: rouge-score pulls in nltk and scipy.stats (seconds), and the registry
        # imports every metric module even when overlap is not used.
        from rouge_score import rouge_scorer

        out = {}
        for rt in ROUGE_TYPES:
            if rt == "rougeL":
                s = rouge_scorer._score_lcs(src, summ)
            else:
                n = int(rt[-1])
                s = rouge_scorer._score_ngrams(
                    rouge_scorer._create_ngrams(src, n), rouge_scorer._create_ngrams(summ, n)
                )
            out[rt] = float(s.precision)
        return out

    def _component(self, rouge: dict[str, float], summ: list[str], src: list[str]) -> float:
        comp = self.settings["component"]
        if comp in rouge:
            return rouge[comp]
        return 1.0 - novel_ngram_ratio(summ, src, int(comp[-1]))

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        shash = self.settings_hash(ctx)
        # Stemmed tokens for ROUGE (Porter, English words only, as rouge-score stems).
        stem = stemmed_words if self.settings["use_stemmer"] else words
        cache: dict[str, Any] = {}

        def source_view(source: str) -> tuple[list[str], list[str], list[list[str]], list[str]]:
            if source not in cache:
                sents = textmod.split_sentences(source, ctx.spacy_model)
                cache[source] = (
                    stem(source),
                    rouge_tokens(source),
                    [rouge_tokens(s) for s in sents],
                    sents,
                )
            return cache[source]

        scores = []
        for ex in examples:
            error = unsupported_script_error((ex.summary, ex.source), self.name)
            if error is not None:
                scores.append(Score.failed(self.name, shash, ex.id, error))
                continue
            src_stemmed, src_plain, src_sent_tokens, src_sents = source_view(ex.source)
            summ_stemmed, summ_plain = stem(ex.summary), rouge_tokens(ex.summary)
            if not summ_plain or not src_plain:
                which = "summary" if not summ_plain else "source"
                scores.append(
                    Score.failed(
                        self.name,
                        shash,
                        ex.id,
                        f"the {which} has no words to compare (only symbols, emoji or punctuation)",
                    )
                )
                continue
            rouge = self._rouge_precision(summ_stemmed, src_stemmed)
            novel = {f"novel{n}": novel_ngram_ratio(summ_plain, src_plain, n) for n in range(1, 5)}

            sentences, categories, fusion_k = [], [], []
            for i, sent in enumerate(textmod.split_sentences(ex.summary, ctx.spacy_model)):
                plain = rouge_tokens(sent)
                stemmed = stem(sent)
                category, support = classify_sentence(plain, src_sent_tokens)
                categories.append(category)
                if category == "perfect_fusion":
                    fusion_k.append(len(support))
                value = (
                    self._component(self._rouge_precision(stemmed, src_stemmed), plain, src_plain)
                    if plain
                    else float("nan")
                )
                label = category.replace("_", " ")
                if category == "perfect_fusion":
                    label += f" (k={len(support)})"
                evidence = label
                if support:
                    evidence += ": " + " | ".join(src_sents[j] for j in support[:3])
                sentences.append(SentenceScore(i, sent, value, evidence))
            n_sent = max(len(categories), 1)
            profile = {c: categories.count(c) / n_sent for c in CATEGORIES}
            details = {
                "component": self.settings["component"],
                "rouge_precision": rouge,
                "novel_ngrams": novel,
                "abstractiveness": profile,
                "sentence_categories": categories,
                "fusion_k": dict(sorted(Counter(fusion_k).items())),
            }
            value = self._component(rouge, summ_plain, src_plain)
            scores.append(Score(self.name, value, shash, ex.id, sentences, details))
        return scores
