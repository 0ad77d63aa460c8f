"""Repetition inside the summary: the share of its word n-grams that are distinct.

Model-free and source-free: a guard beside the likelihood metrics (``loglik``, ``harim_plus``,
``cop``), whose per-token means reward a summary that repeats itself (a sentence repeated
eight times scores far above a faithful one-sentence summary; docs/metrics/harim.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.types import Example, Score
from faithgate.words import unsupported_script_error, words


def repetition_stats(tokens: Sequence[str], n: int) -> dict[str, Any]:
    """``value`` (distinct / total n-grams; 1.0 with no n-gram), ``ngrams`` (total),
    ``distinct`` and ``most_repeated`` ({``ngram``: its words joined by spaces, ``count``}
    of the most frequent n-gram, the earliest on a tie; None when no n-gram repeats)."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    counts = Counter(grams)
    most_repeated = None
    if counts:
        gram, count = counts.most_common(1)[0]  # ties: the first seen (Counter keeps order)
        if count > 1:
            most_repeated = {"ngram": " ".join(gram), "count": count}
    return {
        "value": len(counts) / len(grams) if grams else 1.0,
        "ngrams": len(grams),
        "distinct": len(counts),
        "most_repeated": most_repeated,
    }


@register
class Repetition(Metric):
    """Distinct n-grams over all n-grams of the summary's word tokens.

    ``value = |set(G)| / |G|`` where ``G`` is the list (with multiplicity) of the summary's
    word n-grams (``faithgate.words.words``, case-folded), i.e. ``1 - seq-rep-n`` of Welleck
    et al. (2020, "Neural Text Generation with Unlikelihood Training", ICLR), who measure
    ``seq-rep-n = 1 - |unique n-grams| / |n-grams|`` of a continuation. ``n`` defaults to 4,
    their headline order. Higher = less repetition; 1.0 when nothing repeats, and for a
    summary of fewer than ``n`` words (nothing can repeat). The value is never 0 (one n-gram
    at least is distinct): a summary of one n-gram repeated k times scores 1/k.

    The source is not read: this is no faithfulness score but a check for degenerate output
    (repetition loops of small decoders), to gate beside metrics that reward it. Per summary
    sentence: nothing (the repeats are between sentences).
    """

    name = "repetition"
    description = (
        "distinct / total word n-grams of the summary, 1 - seq-rep-n (n = 4); source not read"
    )
    family = "lexical"
    defaults = {"n": 4}
    bounds = (0.0, 1.0)  # 0 is the infimum (1/k for one n-gram repeated k times); 1 = no repeat
    version = "1"
    scale = "distinct / total word {n}-grams of the summary, 0..1 (1 = nothing repeats)"
    sentence_value = ""

    @classmethod
    def details_line(cls, details: Mapping[str, Any]) -> str:
        """The distinct share as counts, and the n-gram repeated most."""
        d = details
        text = f"{d.get('distinct')}/{d.get('ngrams')} word {d.get('n')}-grams distinct"
        top = d.get("most_repeated")
        if top:
            text += f"; most repeated: {top['ngram']!r} x{top['count']}"
        return text

    def validate_settings(self) -> None:
        n = self.settings["n"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InputError(f"metric 'repetition': n must be an integer >= 1, got {n!r}")

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        shash = self.settings_hash(ctx)
        n = self.settings["n"]
        scores = []
        for ex in examples:
            error = unsupported_script_error((ex.summary,), self.name)
            if error is not None:
                scores.append(Score.failed(self.name, shash, ex.id, error))
                continue
            tokens = [t.casefold() for t in words(ex.summary)]
            if not tokens:
                scores.append(
                    Score.failed(
                        self.name,
                        shash,
                        ex.id,
                        "the summary has no words to count (only symbols, emoji or punctuation)",
                    )
                )
                continue
            stats = repetition_stats(tokens, n)
            value = stats.pop("value")
            details = {"n": n, "tokens": len(tokens), **stats}
            scores.append(Score(self.name, value, shash, ex.id, [], details))
        return scores
