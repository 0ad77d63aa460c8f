"""Lexical overlap with the source: ROUGE precision, novel n-grams, FEQA abstractiveness.

Model-free except for spaCy sentence splitting: the cheapest signal of how much a summary
copies (and so how little room it leaves for unsupported content). Abstractive summaries score
low here without being unfaithful, so this is a baseline and a diagnostic, not a verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from faithgate import text as textmod
from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, fmt_detail, register
from faithgate.types import Example, Score, SentenceScore
from faithgate.words import stemmed_words, unsupported_script_error, words

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
NOVEL = ("novel1", "novel2", "novel3", "novel4")
# The abstractiveness categories (Durmus et al. 2020) of ``classify_sentence``, as a reader
# needs them.
CATEGORY_WORDS = {
    "sentence_extraction": "copied whole",
    "span_extraction": "copied span",
    "word_extraction": "words picked from one source sentence",
    "perfect_fusion": "fused from source sentences",
    "none": "with a word not in the source",
}
# Examples whose texts are split into sentences at once (``faithgate.text.presplit``).
PRESPLIT_EXAMPLES = 1024
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


def ngram_counts(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """Each n-gram of ``tokens`` with its count (rouge-score's ``_create_ngrams``)."""
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def rouge_n_precision(summary: Counter[tuple[str, ...]], source: Counter[tuple[str, ...]]) -> float:
    """ROUGE-N precision from n-gram counts: ``sum_g min(c_summary(g), c_source(g)) /
    max(sum_g c_summary(g), 1)``, as rouge-score's ``_score_ngrams`` gives it (the same
    integers divided), summed over the summary's n-grams rather than the source's: a
    sentence against a long source costs its own length."""
    overlap = sum(min(count, source.get(g, 0)) for g, count in summary.items())
    return overlap / max(sum(summary.values()), 1)


class TokenBits:
    """A token sequence as bit masks (bit i of ``mask(t)``: token i is ``t``), for the
    bit-parallel LCS (``lcs_length``). Masks are made on demand from an array of token ids
    and the last ``_MASKS`` kept: a long source costs its length in bytes per mask."""

    _MASKS = 256

    def __init__(self, tokens: Sequence[str]) -> None:
        self.n = len(tokens)
        self._tokens = tokens
        self._ids: Any = None
        self._vocab: dict[str, int] = {}
        self._masks: dict[str, int] = {}

    def mask(self, token: str) -> int:
        found = self._masks.get(token)
        if found is not None:
            return found
        if self.n <= 512:
            bits = 0
            for i, t in enumerate(self._tokens):
                if t == token:
                    bits |= 1 << i
        else:
            import numpy as np

            if self._ids is None:
                vocab = self._vocab
                self._ids = np.fromiter(
                    (vocab.setdefault(t, len(vocab)) for t in self._tokens), np.int64, self.n
                )
            k = self._vocab.get(token)
            bits = 0
            if k is not None:
                packed = np.packbits(self._ids == k, bitorder="little")
                bits = int.from_bytes(packed.tobytes(), "little")
        if len(self._masks) >= self._MASKS:
            self._masks.pop(next(iter(self._masks)))
        self._masks[token] = bits
        return bits


def lcs_length(tokens: Sequence[str], other: TokenBits) -> int:
    """Length of the longest common subsequence of ``tokens`` and ``other``, by the
    bit-parallel algorithm of Crochemore, Iliopoulos, Pinzon and Reid (2001, "A fast and
    practical bit-vector algorithm for the longest common subsequence problem"): a bit per
    token of ``other``, a step per token of ``tokens``; memory O(len(other)) bits, where
    rouge-score's table is len(tokens) x len(other) Python integers (a 5 MB summary against
    a short source: gigabytes). The same integer as rouge-score's ``_lcs_table``."""
    full = (1 << other.n) - 1
    v = full
    for t in tokens:
        m = other.mask(t)
        if m:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return other.n - v.bit_count()


def rouge_l_precision(summary: Sequence[str], source: TokenBits) -> float:
    """ROUGE-L precision ``LCS(summary, source) / |summary|`` (0 when either is empty), as
    rouge-score's ``_score_lcs`` gives it."""
    if not summary or not source.n:
        return 0.0
    return lcs_length(summary, source) / len(summary)


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


class _Source:
    """One source as overlap reads it, with what every summary (and summary sentence) is
    compared with made once: stemmed n-gram counts, LCS bit masks, plain n-gram sets."""

    def __init__(
        self,
        stemmed: list[str],
        plain: list[str],
        sentence_tokens: list[list[str]],
        sentences: list[str],
    ) -> None:
        self.stemmed, self.plain = stemmed, plain
        self.sentence_tokens, self.sentences = sentence_tokens, sentences
        self._counts: dict[int, Counter[tuple[str, ...]]] = {}
        self._seen: dict[int, set[tuple[str, ...]]] = {}
        self._bits: TokenBits | None = None

    def counts(self, n: int) -> Counter[tuple[str, ...]]:
        if n not in self._counts:
            self._counts[n] = ngram_counts(self.stemmed, n)
        return self._counts[n]

    def lcs_bits(self) -> TokenBits:
        if self._bits is None:
            self._bits = TokenBits(self.stemmed)
        return self._bits

    def novel_ratio(self, summary: Sequence[str], n: int) -> float:
        """``novel_ngram_ratio(summary, plain tokens, n)``, the source's n-grams kept."""
        grams = ngrams(summary, n)
        if not grams:
            return 0.0
        if n not in self._seen:
            self._seen[n] = set(ngrams(self.plain, n))
        seen = self._seen[n]
        return sum(g not in seen for g in grams) / len(grams)


@register
class Overlap(Metric):
    """ROUGE precision of the summary against the source, novel n-grams and the FEQA
    abstractiveness profile.

    - ROUGE-N precision (Lin, 2004; rouge-score's values, Porter stemmer by default):
      ``P_N = sum_g min(c_summary(g), c_source(g)) / sum_g c_summary(g)`` over n-grams g of the
      summary; ROUGE-L precision ``LCS(summary, source) / |summary|``, the LCS by a
      bit-parallel algorithm (``lcs_length``: memory linear in the texts' lengths).
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
    scale = "{component} precision against the source, 0..1 (1 = every n-gram copied)"
    sentence_value = "the same {component} precision for the sentence alone (0..1)"
    # 2: Unicode word tokens (faithgate.words) instead of rouge-score's [a-z0-9]+ runs;
    # 3 (sentence details): a line break ends a sentence (faithgate.text.line_breaks): highlights and bullets were merged; 4: a break inside a sentence (a wrapped line, a bullet
    # going on indented) no longer ends it, CRLF/CR/U+2028 are breaks, "2." stays with its item.
    version = "4"

    @classmethod
    def details_line(cls, details: Mapping[str, Any]) -> str:
        """ROUGE precisions, the novel n-gram shares and the sentences' abstractiveness."""
        r = details.get("rouge_precision", {})
        nov = details.get("novel_ngrams", {})
        prof = details.get("abstractiveness", {})
        # FEQA's sentence categories, named for a reader: "none" alone reads as "no problem".
        top = ", ".join(f"{v:.0%} {CATEGORY_WORDS.get(k, k)}" for k, v in prof.items() if v)
        return (
            f"ROUGE precision R1 {fmt_detail(r.get('rouge1'), 3)} "
            f"R2 {fmt_detail(r.get('rouge2'), 3)} RL {fmt_detail(r.get('rougeL'), 3)} | share "
            "of summary n-grams not in the source, n=1-4: "
            + "/".join(fmt_detail(nov.get(f"novel{n}"), 2) for n in range(1, 5))
            + (f" | sentences: {top}" if top else "")
        )

    @classmethod
    def evidence_hint(cls, evidence: str) -> str:
        """A sentence's evidence starts with its abstractiveness category: "none" means a word
        of it is not in the source."""
        if evidence.startswith("none"):
            return "it has a word that is not in the source"
        return super().evidence_hint(evidence)

    def validate_settings(self) -> None:
        allowed = (*ROUGE_TYPES, *NOVEL)
        if self.settings["component"] not in allowed:
            raise InputError(
                f"metric 'overlap': component must be one of {', '.join(allowed)}, "
                f"got {self.settings['component']!r}"
            )
        if not isinstance(self.settings["use_stemmer"], bool):
            raise InputError("metric 'overlap': use_stemmer must be true or false")

    def _rouge_precision(self, summ: list[str], src: _Source) -> dict[str, float]:
        # ROUGE-1/2 from n-gram counts (the source's counted once per source, not per
        # summary sentence) and ROUGE-L by a bit-parallel LCS: rouge-score's scores, in
        # memory that grows with the texts' lengths, not with their product.
        out = {}
        for rt in ROUGE_TYPES:
            if rt == "rougeL":
                out[rt] = float(rouge_l_precision(summ, src.lcs_bits()))
            else:
                n = int(rt[-1])
                out[rt] = float(rouge_n_precision(ngram_counts(summ, n), src.counts(n)))
        return out

    def _component(self, rouge: dict[str, float], summ: list[str], src: _Source) -> float:
        comp = self.settings["component"]
        if comp in rouge:
            return rouge[comp]
        return 1.0 - src.novel_ratio(summ, int(comp[-1]))

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        shash = self.settings_hash(ctx)
        # Stemmed tokens for ROUGE (Porter, English words only, as rouge-score stems).
        stem = stemmed_words if self.settings["use_stemmer"] else words
        cache: dict[str, _Source] = {}

        def source_view(source: str) -> _Source:
            if source not in cache:
                sents = textmod.split_sentences(source, ctx.spacy_model)
                cache[source] = _Source(
                    stem(source), rouge_tokens(source), [rouge_tokens(s) for s in sents], sents
                )
            return cache[source]

        scores = []
        for at, ex in enumerate(examples):
            if at % PRESPLIT_EXAMPLES == 0:
                # The texts of the next examples split at once (spaCy's nlp.pipe): per text,
                # the pipeline's own overhead was most of overlap's time on short examples.
                # The same sentences as one at a time.
                textmod.presplit(
                    (
                        t
                        for x in examples[at : at + PRESPLIT_EXAMPLES]
                        for t in (x.source, x.summary)
                    ),
                    ctx.spacy_model,
                )
            error = unsupported_script_error((ex.summary, ex.source), self.name)
            if error is not None:
                scores.append(Score.failed(self.name, shash, ex.id, error))
                continue
            src = source_view(ex.source)
            src_plain, src_sent_tokens, src_sents = src.plain, src.sentence_tokens, src.sentences
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
            rouge = self._rouge_precision(summ_stemmed, src)
            novel = {f"novel{n}": src.novel_ratio(summ_plain, n) for n in range(1, 5)}

            sentences, categories, fusion_k = [], [], []
            for i, sent in enumerate(textmod.split_sentences(ex.summary, ctx.spacy_model)):
                plain = rouge_tokens(sent)
                stemmed = stem(sent)
                category, support = classify_sentence(plain, src_sent_tokens)
                categories.append(category)
                if category == "perfect_fusion":
                    fusion_k.append(len(support))
                value = (
                    self._component(self._rouge_precision(stemmed, src), plain, src)
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
            value = self._component(rouge, summ_plain, src)
            scores.append(Score(self.name, value, shash, ex.id, sentences, details))
        return scores
