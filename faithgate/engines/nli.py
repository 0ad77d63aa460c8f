"""The NLI engine: a deduplicating, caching front of the ``nli`` pair classifier.

Every NLI metric of a run (``faithgate.metrics.nli``) shares one ``NLIEngine`` per model: all
(premise, hypothesis) pairs of a batch are deduplicated, sorted by length and classified in one
call, and probabilities are cached for the run, so no pair is classified twice. The class order
is read from the model's labels (``entailment_index``, ``contradiction_index``; MiniCheck reads
its classes with them too).

A hypothesis is never cut: a summary sentence longer than ``hypothesis_limit`` tokens (the
window less the pair's special tokens and a quarter of the window kept for the premise) is
split at word boundaries into pieces that fit (``split_hypothesis``). ``premises_cut`` counts
the pairs whose premise the model sees cut (only_first truncation).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from faithgate.backends.base import PairClassifier
from faithgate.engines.context import EngineContext
from faithgate.errors import ConfigError, InputError
from faithgate.safety.escape import printable

_ENTAIL_NAMES = ("entailment", "entail", "entails", "entailed")


def entailment_index(
    labels: Sequence[str], model_name: str = "nli", supported: str | None = None
) -> int:
    """Index of the entailment class in ``labels`` (any casing); a one-line error if none.

    ``supported``: the class the user named as "supported" (loader option
    ``supported_label``), which wins over the names. ``not_entailment`` / ``non_entailment``
    (binary RTE-style heads) are not entailment.
    """
    lowered = [str(label).strip().lower() for label in labels]
    if supported is not None:
        wanted = supported.strip().lower()
        if wanted not in lowered:
            raise ConfigError(
                f"model_options.nli.supported_label = {printable(supported)!r} is not a class "
                f"of nli model {model_name!r}; its classes are {', '.join(lowered)}"
            )
        return lowered.index(wanted)
    for i, label in enumerate(lowered):
        if label in _ENTAIL_NAMES:
            return i
    for i, label in enumerate(lowered):
        if label.startswith("entail"):
            return i
    raise ConfigError(
        f"nli model {model_name!r} has classes {', '.join(lowered)} and none is 'entailment': "
        "say which one means supported with --set nli.supported_label=NAME (config: "
        "model_options.nli.supported_label; MiniCheck: LABEL_1), or name them all with "
        "nli.labels"
    )


def contradiction_index(labels: Sequence[str]) -> int | None:
    """Index of the contradiction class (``contradiction``, or FEVER's ``refutes``), or
    ``None`` for a two-class (entail / not) model."""
    for i, label in enumerate(labels):
        if str(label).strip().lower().startswith(("contradict", "refute")):
            return i
    return None


# Special tokens a pair takes at most: [CLS] a [SEP] b [SEP] (3) or <s> a </s></s> b </s> (4).
PAIR_SPECIALS = 4


def hypothesis_limit(max_length: int) -> int:
    """Longest hypothesis, in tokens, judged whole: the window less the pair's special tokens
    and a quarter of the window kept for the premise (entail_d2s's smallest premise window)."""
    return max(1, max_length - PAIR_SPECIALS - max_length // 4)


def _largest(lo: int, hi: int, fits: Callable[[int], bool]) -> int:
    """The largest ``k`` in ``[lo, hi]`` with ``fits(k)`` (``fits`` true up to some point,
    false after it); ``lo`` when none fits, so a caller always makes progress."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def split_hypothesis(text: str, limit: int, count_tokens: Callable[[str], int]) -> list[str]:
    """``text`` whole when it takes at most ``limit`` tokens, else consecutive pieces of it
    that each do, cut between words (a single word longer than the limit, between
    characters). Every character of ``text`` but the whitespace between pieces is in a
    piece, in order, so every part of a long summary sentence is judged."""
    if count_tokens(text) <= limit:
        return [text]
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    pieces: list[str] = []
    i = 0
    while i < len(words):
        start = words[i][0]
        word = text[start : words[i][1]]
        if count_tokens(word) > limit:
            while word:
                k = _largest(1, len(word), lambda k, w=word: count_tokens(w[:k]) <= limit)
                pieces.append(word[:k])
                word = word[k:]
            i += 1
            continue
        j = _largest(
            i + 1, len(words), lambda j, a=start: count_tokens(text[a : words[j - 1][1]]) <= limit
        )
        pieces.append(text[start : words[j - 1][1]])
        i = j
    return pieces


class NLIEngine:
    """Deduplicating, caching front of a ``PairClassifier`` shared by all NLI metrics of a run."""

    def __init__(self, model: PairClassifier) -> None:
        self.model = model
        self.labels = list(model.labels)
        self.entail = entailment_index(
            self.labels, model.spec.name, getattr(model, "supported_label", None)
        )
        self.contradict = contradiction_index(self.labels)
        self._cache: dict[tuple[str, str], np.ndarray] = {}
        self._tokens: dict[str, int] = {}
        self.n_classified = 0  # pairs actually sent to the model (for tests and benchmarks)

    def n_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in the model's tokenizer (memoised)."""
        n = self._tokens.get(text)
        if n is None:
            n = self._tokens[text] = int(self.model.count_tokens(text))
        return n

    @property
    def hypothesis_limit(self) -> int:
        return hypothesis_limit(self.model.max_length)

    def split(self, sentences: Sequence[str]) -> tuple[list[str], list[int], list[dict[str, Any]]]:
        """Hypotheses for summary ``sentences``: each sentence whole, or its pieces when it is
        longer than ``hypothesis_limit`` (``split_hypothesis``). Returns the hypotheses, the
        sentence index of each, and one record per split sentence."""
        hyps: list[str] = []
        owner: list[int] = []
        splits: list[dict[str, Any]] = []
        for i, sentence in enumerate(sentences):
            parts = split_hypothesis(sentence, self.hypothesis_limit, self.n_tokens)
            if len(parts) > 1:
                splits.append(
                    {"sentence": i, "tokens": self.n_tokens(sentence), "pieces": len(parts)}
                )
            hyps.extend(parts)
            owner.extend([i] * len(parts))
        return hyps, owner, splits

    def premises_cut(self, pairs: Sequence[tuple[str, str]]) -> int:
        """How many distinct (premise, hypothesis) pairs do not fit the window whole: the
        model sees their premise cut (only_first truncation)."""
        specials = int(getattr(self.model, "pair_special_tokens", PAIR_SPECIALS))
        limit = self.model.max_length
        return sum(
            1
            for p, h in dict.fromkeys(pairs)
            if self.n_tokens(p) + self.n_tokens(h) + specials > limit
        )

    def probs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Class probabilities of each (premise, hypothesis), shape (len(pairs), n_labels)."""
        missing = list(dict.fromkeys(p for p in pairs if p not in self._cache))
        if missing:
            # Similar lengths in one model batch waste less padding.
            missing.sort(key=lambda p: len(p[0]) + len(p[1]))
            out = np.asarray(
                self.model.predict_proba([p for p, _ in missing], [h for _, h in missing]),
                dtype=np.float64,
            )
            if out.shape != (len(missing), len(self.labels)):
                raise InputError(
                    f"nli model {self.model.spec.name!r} returned probabilities of shape "
                    f"{out.shape}, expected {(len(missing), len(self.labels))}"
                )
            self.n_classified += len(missing)
            for pair, row in zip(missing, out, strict=True):
                self._cache[pair] = row
        if not pairs:
            return np.zeros((0, len(self.labels)))
        return np.stack([self._cache[p] for p in pairs])

    def entailment(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """E(premise, hypothesis) for each pair."""
        return self.probs(pairs)[:, self.entail] if pairs else np.zeros(0)

    def contradiction(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """p_contradict for each pair (zeros for a model without a contradiction class)."""
        if not pairs:
            return np.zeros(0)
        if self.contradict is None:
            return np.zeros(len(pairs))
        return self.probs(pairs)[:, self.contradict]


def nli_engine(ctx: EngineContext) -> NLIEngine:
    """The run's shared engine for the ``nli`` role's model."""
    model = ctx.model("nli", "pair-classifier")
    return ctx.shared(f"nli-engine:{id(model)}", lambda: NLIEngine(model))
