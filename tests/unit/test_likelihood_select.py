"""The likelihood engine's ``select`` cut of a long source, planned with a word-level fake
language model (no weights, no torch): selected sentences are kept whole and the budget holds
although the joined text has separator tokens the selection did not count."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from fake_encoder import regex_split

from faithgate import text as textmod
from faithgate.backends.base import LanguageModel
from faithgate.engines.likelihood import LikelihoodConfig, LikelihoodEngine
from faithgate.models import ModelSpec


class WordLM(LanguageModel):
    """Tokens: whitespace-separated words, and a paragraph break as a token of its own (as
    byte-level BPE models such as SmolLM2 have it). Only planning is exercised."""

    def __init__(self) -> None:
        super().__init__(ModelSpec("lm", "word-lm", "/nonexistent/word-lm", "path"), "fake")
        self.vocab: dict[str, int] = {"<s>": 1, "</s>": 2}

    @property
    def max_length(self) -> int:
        return 512

    def tokenize(self, text: str) -> list[int]:
        words = re.findall(r"\n\n|\S+", text)
        return [self.vocab.setdefault(w, len(self.vocab) + 1) for w in words]

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        names = {i: w for w, i in self.vocab.items()}
        return [names[i] for i in ids]

    @property
    def bos_token_id(self) -> int:
        return 1

    @property
    def eos_token_id(self) -> int:
        return 2


# Eight 5-word sentences; the summary's three sentences ask for facts 1, 4 and 7.
SENTENCES = [f"Sentence{i} tells fact{i} plainly here." for i in range(8)]
SOURCE = " ".join(SENTENCES)
SUMMARY = "fact1 tells. fact4 tells. fact7 tells."


@pytest.mark.parametrize("window", range(30, 54))  # from 54 tokens on, nothing is cut
def test_select_keeps_sentences_whole_within_the_budget(monkeypatch, window: int) -> None:
    monkeypatch.setattr(textmod, "split_sentences", regex_split)
    lm = WordLM()
    engine = LikelihoodEngine(lm, LikelihoodConfig(max_length=window, cut="select"))
    pair = engine._pair(SOURCE, SUMMARY)
    ctx = pair.context
    # [bos Y sep_x X sep_y Y]: 1 + 6 + 0 + n + 1 ("TL;DR:") + 6 tokens.
    budget = window - 2 - 2 * ctx["summary_kept"]
    assert ctx["cut"] and ctx["sentences_kept"] > 0
    assert len(pair.x) == ctx["source_kept"] <= budget
    kept = " ".join(lm.token_texts(pair.x)).split(" \n\n ")
    sentences = [s for run in kept for s in regex_split(run)]
    assert len(sentences) == ctx["sentences_kept"]
    assert set(sentences) <= set(SENTENCES), "a selected sentence was cut"


def test_select_drops_a_sentence_rather_than_cut_the_last_one(monkeypatch) -> None:
    """Budget 39 - 2 - 2 * 6 = 25: sentences 0, 1, 3, 4 and 7 take 25 tokens apart, 27 with
    the two paragraph breaks; cutting the joined tokens to 25 kept "Sentence7 tells fact7"
    and lost the rest of it. Now the sentences are chosen again within 23 and kept whole."""
    monkeypatch.setattr(textmod, "split_sentences", regex_split)
    lm = WordLM()
    engine = LikelihoodEngine(lm, LikelihoodConfig(max_length=39, cut="select"))
    pair = engine._pair(SOURCE, SUMMARY)
    assert pair.context["summary_kept"] == 6
    assert len(pair.x) <= 25 and lm.token_texts(pair.x)[-1] == "here."
    assert pair.context == {
        "policy": "select",
        "window": 39,
        "source_tokens": 40,
        "source_kept": len(pair.x),
        "summary_tokens": 6,
        "summary_kept": 6,
        "cut": True,
        "sentences": 8,
        "sentences_kept": 4,
    }
