"""ROUGE precision, novel n-grams and FEQA abstractiveness categories on constructed sentences."""

from __future__ import annotations

import pytest
from fake_encoder import regex_split

from faithgate import text as textmod
from faithgate.errors import InputError
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.metrics.overlap import classify_sentence, novel_ngram_ratio, rouge_tokens
from faithgate.types import Example

SRC = [["the", "cat", "sat", "on", "the", "mat"], ["a", "dog", "barked", "loudly"]]


@pytest.mark.parametrize(
    ("sentence", "category", "support"),
    [
        (["the", "cat", "sat", "on", "the", "mat"], "sentence_extraction", [0]),
        (["cat", "sat", "on"], "span_extraction", [0]),
        (["the", "cat", "on", "mat"], "word_extraction", [0]),  # gaps, order kept
        (["the", "dog", "sat"], "perfect_fusion", [0, 1]),  # words from two sentences
        (["mat", "cat"], "perfect_fusion", [0]),  # reordered words of one sentence (k = 1)
        (["the", "bird", "sat"], "none", []),  # "bird" is nowhere in the source
    ],
)
def test_abstractiveness_categories(sentence, category, support):
    assert classify_sentence(sentence, SRC) == (category, support)


def test_novel_ngram_ratio_by_hand():
    assert novel_ngram_ratio(["a", "b", "c"], ["a", "b", "d"], 1) == pytest.approx(1 / 3)
    assert novel_ngram_ratio(["a", "b", "c"], ["a", "b", "d"], 2) == pytest.approx(1 / 2)
    assert novel_ngram_ratio(["a", "b", "c"], ["a", "b", "d"], 4) == 0.0  # no 4-gram at all
    assert rouge_tokens("The U.S. cat's mat!") == ["the", "u", "s", "cat", "s", "mat"]


@pytest.fixture
def overlap_score(monkeypatch):
    monkeypatch.setattr(textmod, "split_sentences", regex_split)

    def run(**settings):
        metric = get_metric("overlap", use_stemmer=False, **settings)
        ex = Example(
            "1", "The cat sat on the mat. A dog barked loudly.", "The cat sat. The dog sang."
        )
        return metric.score_batch([ex], ScoringContext())[0]

    return run


def test_rouge_precision_and_profile_by_hand(overlap_score):
    s = overlap_score()
    r = s.details["rouge_precision"]
    # summary tokens: the cat sat the dog sang; source: the cat sat on the mat a dog barked loudly
    assert r["rouge1"] == pytest.approx(5 / 6)  # all but "sang"
    assert r["rouge2"] == pytest.approx(2 / 5)  # "the cat", "cat sat" of 5 bigrams
    assert r["rougeL"] == pytest.approx(5 / 6)  # LCS "the cat sat the dog"
    assert s.value == pytest.approx(2 / 5)  # default component rouge2
    assert s.details["novel_ngrams"]["novel1"] == pytest.approx(1 / 6)
    assert s.details["sentence_categories"] == ["span_extraction", "none"]
    assert s.details["abstractiveness"]["span_extraction"] == 0.5
    assert s.details["abstractiveness"]["none"] == 0.5
    assert [x.value for x in s.sentences] == [pytest.approx(1.0), pytest.approx(0.0)]
    assert s.sentences[0].evidence.startswith("span extraction: The cat sat on the mat.")
    assert s.least_supported().index == 1


def test_novel_component_is_oriented_higher_is_better(overlap_score):
    s = overlap_score(component="novel1")
    assert s.value == pytest.approx(1 - 1 / 6)


def test_bad_component():
    with pytest.raises(InputError, match="component"):
        get_metric("overlap", component="bleu")
