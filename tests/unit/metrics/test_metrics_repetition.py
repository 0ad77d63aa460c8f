"""The ``repetition`` metric: distinct / total word n-grams of the summary (1 - seq-rep-n),
by hand on constructed summaries."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from faithgate.cli import cli
from faithgate.errors import InputError
from faithgate.metrics.base import ScoringContext, get_metric, metric_class, metric_names
from faithgate.metrics.repetition import repetition_stats
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example, Score

SOURCE = "The actor died in Connecticut on Sunday. He was 80. His family was with him."
UNFAITHFUL = "The actor was arrested in New York."


def score(summary: str, source: str = SOURCE, **settings) -> Score:
    metric = get_metric("repetition", **settings)
    return metric.score_batch([Example("1", source, summary)], ScoringContext())[0]


def test_registered_model_free_and_listed():
    assert "repetition" in metric_names()
    cls = metric_class("repetition")
    assert cls.roles == {}
    assert get_metric("repetition").model_roles(ScoringContext()) == {}
    # No model: the settings hash is the metric's name and a digest.
    assert get_metric("repetition").settings_hash(ScoringContext()).startswith("repetition|")
    out = CliRunner().invoke(cli, ["metrics", "--format", "json"])
    assert out.exit_code == 0, out.output
    entry = next(e for e in json.loads(out.output) if e["name"] == "repetition")
    assert entry["roles"] == [] and entry["settings"] == {"n": 4} and not entry["default"]


def test_nothing_repeats_is_one():
    s = score("The actor died in Connecticut on Sunday at the age of 80.")
    assert s.ok and s.value == 1.0
    assert s.details == {"n": 4, "tokens": 12, "ngrams": 9, "distinct": 9, "most_repeated": None}


def test_values_by_hand():
    # 4-grams of a b c d a b c d: abcd bcda cdab dabc abcd -> 4 distinct of 5
    s = score("a b c d a b c d")
    assert s.value == pytest.approx(4 / 5)
    assert s.details["ngrams"] == 5 and s.details["distinct"] == 4
    assert s.details["most_repeated"] == {"ngram": "a b c d", "count": 2}
    # bigrams: ab bc cd da ab bc cd -> 4 distinct of 7; the earliest of the tied ones
    s = score("a b c d a b c d", n=2)
    assert s.value == pytest.approx(4 / 7)
    assert s.details["most_repeated"] == {"ngram": "a b", "count": 2}
    # unigrams: one word 5 times -> 1/5
    assert score("go go go go go", n=1).value == pytest.approx(1 / 5)
    assert repetition_stats(["x", "y", "x", "y", "x"], 2) == {
        "value": 2 / 4,
        "ngrams": 4,
        "distinct": 2,
        "most_repeated": {"ngram": "x y", "count": 2},
    }


def test_casefolded_and_punctuation_is_not_a_word():
    # "The Cat" / "the cat" / "THE CAT" and "Straße" / "STRASSE" are one n-gram each.
    assert score("The Cat sat. the cat SAT! THE CAT sat?", n=3).value == pytest.approx(
        score("the cat sat the cat sat the cat sat", n=3).value
    )
    s = score("Straße gesperrt. STRASSE GESPERRT.", n=2)
    assert s.details["most_repeated"] == {"ngram": "strasse gesperrt", "count": 2}
    assert s.value == pytest.approx(2 / 3)


def test_shorter_than_n_cannot_repeat():
    s = score("Actor died.")  # 2 words, n = 4
    assert s.ok and s.value == 1.0
    assert s.details["ngrams"] == 0 and s.details["distinct"] == 0
    assert s.details["most_repeated"] is None
    assert score("die die die", n=4).value == 1.0
    assert score("die die die", n=3).value == 1.0  # one trigram, once
    assert score("die die die", n=2).value == pytest.approx(1 / 2)


@pytest.mark.parametrize("bad", [0, -1, 2.5, 4.0, "4", True, None])
def test_n_must_be_an_integer_of_at_least_one(bad):
    with pytest.raises(InputError) as info:
        get_metric("repetition", n=bad)
    assert str(info.value) == f"metric 'repetition': n must be an integer >= 1, got {bad!r}"
    assert "\n" not in str(info.value)


def test_unknown_setting():
    with pytest.raises(InputError, match="no setting"):
        get_metric("repetition", k=3)


def test_the_source_is_not_read():
    summary = "a b c d a b c d"
    assert score(summary, source="a b c d").to_dict() == score(summary, source="x").to_dict()
    # a Thai source does not matter either (overlap fails it; this metric never reads it)
    assert score(summary, source="ภาษาไทยเป็นภาษาที่สวยงาม").ok


def test_unsupported_script_fails_with_the_reason():
    s = score("ภาษาไทยเป็นภาษาที่สวยงาม ภาษาไทยเป็นภาษาที่สวยงาม")
    assert not s.ok and math.isnan(s.value)
    assert s.error is not None and "Thai text is not supported" in s.error
    assert "repetition cannot split it into words" in s.error


def test_no_words_fails_and_blank_summary_fails_in_the_scorer():
    s = score("!!! ??? ...")
    assert not s.ok and "no words" in (s.error or "")
    row = Scorer(["repetition"], cache=None).score([Example("1", SOURCE, "   ")])[0]
    assert row["repetition"].error == "empty summary"


def test_other_scripts_are_counted():
    # Cyrillic words and CJK characters are tokens, like overlap's.
    assert score("кошка сидит кошка сидит", n=2).value == pytest.approx(2 / 3)
    assert score("猫猫猫猫", n=1).value == pytest.approx(1 / 4)


def test_details_are_json_safe():
    s = score(" ".join([UNFAITHFUL] * 3))
    back = Score.from_dict(json.loads(json.dumps(s.to_dict(), allow_nan=False)))
    assert back.value == s.value and back.details == s.details
    assert s.sentences == []


def test_bounds_and_value_range():
    cls = metric_class("repetition")
    assert cls.bounds == (0.0, 1.0)
    assert cls.value_range({"n": 4}) == (0.0, 1.0)
    assert cls.value_range({"n": 1}) == (0.0, 1.0)


def test_scale_names_the_order():
    scale, sentence = get_metric("repetition", n=3).how_to_read()
    assert "3-grams" in scale and "0..1" in scale
    assert sentence == ""


def test_degenerate_summaries_score_far_below_a_normal_one():
    """The cases of docs/metrics/harim.md, where the likelihood metrics prefer the
    degenerate output (harim_plus -3.02 for the repeated sentence, -8.03 for the faithful)."""
    faithful = score("The actor died in Connecticut.").value
    normal = score(
        "The actor died in Connecticut on Sunday. He was 80, and his family was with him."
    ).value
    repeated = score(" ".join([UNFAITHFUL] * 8))
    the = score("the " * 100)
    assert faithful == normal == 1.0
    assert repeated.value == pytest.approx(7 / 53)  # 56 words: 53 4-grams, 7 distinct
    assert repeated.details["most_repeated"] == {"ngram": "the actor was arrested", "count": 8}
    assert the.value == pytest.approx(1 / 97)
    assert the.details["most_repeated"] == {"ngram": "the the the the", "count": 97}
    assert max(repeated.value, the.value) < 0.2 < 0.8 < normal
