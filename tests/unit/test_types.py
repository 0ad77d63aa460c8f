"""Example / Score data model: JSON round trips, NaN handling, least supported sentence."""

from __future__ import annotations

import json
import math

import numpy as np

from faithgate.types import Example, Score, SentenceScore, json_safe


def test_example_round_trip_keeps_meta():
    ex = Example("a", "src", "sum", reference="ref", label=1, meta={"pair_id": "p1"})
    again = Example.from_dict(json.loads(json.dumps(ex.to_dict())))
    assert again == ex and again.meta == {"pair_id": "p1"}


def test_score_round_trip_and_strict_json_with_nan():
    s = Score(
        "m",
        float("nan"),
        "m:abc",
        "x",
        sentences=[SentenceScore(0, "One.", 0.5, "src"), SentenceScore(1, "Two.", float("nan"))],
        details={"p": np.float32(0.25), "n": np.int64(3), "flag": np.bool_(True), "v": [math.inf]},
        error="boom",
    )
    text = json.dumps(s.to_dict(), allow_nan=False)  # raises on any NaN left behind
    back = Score.from_dict(json.loads(text))
    assert math.isnan(back.value) and math.isnan(back.sentences[1].value)
    assert back.sentences[0] == SentenceScore(0, "One.", 0.5, "src")
    assert back.details == {"p": 0.25, "n": 3, "flag": True, "v": [None]}
    assert back.error == "boom" and not back.ok


def test_least_supported_ignores_nan_sentences():
    s = Score(
        "m",
        0.5,
        "h",
        sentences=[
            SentenceScore(0, "a", 0.7),
            SentenceScore(1, "b", float("nan")),
            SentenceScore(2, "c", 0.2),
        ],
    )
    assert s.least_supported().index == 2
    assert Score("m", 0.5, "h").least_supported() is None


def test_failed_score_is_not_ok_and_never_a_number():
    f = Score.failed("m", "h", "id1", "no tokens")
    assert not f.ok and math.isnan(f.value) and f.error == "no tokens"
    assert f.to_dict()["value"] is None


def test_json_safe_plain_values_untouched():
    assert json_safe({"a": [1, "x", None, True, 2.5]}) == {"a": [1, "x", None, True, 2.5]}


def test_texts_are_scored_in_one_form_nfc_without_surrounding_whitespace():
    """A trailing "\\r\\n" moved loglik from -2.33 to -4.05 (and `faithgate score`, which
    stripped, disagreed with `check`); "José" in NFD was an entity the NFC source lacked."""
    from faithgate.types import Example

    nfd = "Jose\u0301 Mu\u0308ller won.\r\n"
    ex = Example("1", "  Jos\u00e9 M\u00fcller won the race.\n", nfd, reference=" r ")
    assert (ex.source, ex.summary, ex.reference) == (
        "Jos\u00e9 M\u00fcller won the race.",
        "Jos\u00e9 M\u00fcller won.",
        "r",
    )


def test_invisible_characters_alone_are_a_blank_text():
    """A summary of one byte-order mark passed the empty check and outscored a faithful one."""
    from faithgate.scoring.scorer import blank_text
    from faithgate.types import Example, is_blank

    for text in ("\ufeff", "\u200b\u200b", " \u2060\u00ad\t", ""):
        assert is_blank(text)
        assert blank_text(Example("1", "A source.", text)) == "empty summary"
    assert not is_blank("a\u200b")


def test_example_label_is_one_zero_or_none_as_the_input_files_give():
    """``label="yes"`` and ``meta=[1]`` were accepted; bench and the gates would misread
    them. The input files give 1/0, true/false or nothing: the same values here (numpy's bool,
    which a labels column read through numpy or pandas gives, as Python's)."""
    import pytest

    from faithgate.errors import InputError

    numpy_kinds = ((np.int64(0), 0), (np.bool_(True), 1), (np.bool_(False), 0))
    for given, kept in ((1, 1), (0, 0), (True, 1), (False, 0), (1.0, 1), *numpy_kinds):
        label = Example("a", "s", "y", label=given).label
        assert label == kept and type(label) is int
    assert Example("a", "s", "y").label is None
    for bad in ("yes", "1", 2, -1, 0.5, float("nan"), [1]):
        with pytest.raises(InputError, match=r"Example 'a': label must be 1 \(faithful\), 0"):
            Example("a", "s", "y", label=bad)
    with pytest.raises(InputError, match="Example 'a': meta must be a dict of extra fields"):
        Example("a", "s", "y", meta=[1])  # type: ignore[arg-type]


def test_invisible_characters_inside_words_are_not_scored():
    """A soft hyphen (U+00AD), zero-width space, word joiner or a BOM mid-text cut a word in
    two ("Ob\\u00adama" was "ob" + "ama"): text that looks the same scored lower. ZWJ and ZWNJ
    are kept: they change how Indic and Persian words are written (review s23, F1)."""
    from faithgate.types import Example, normalized
    from faithgate.words import words

    shy = "Barack Ob\u00adama visited Ber\u00adlin.\u200b"
    ex = Example("1", "\ufeffA\u200bB\u2060C e\u00ad\u0301.", shy)
    assert ex.summary == "Barack Obama visited Berlin."
    assert ex.source == "ABC \u00e9."  # the mark after a soft hyphen composes with its letter
    assert words(ex.summary) == ["barack", "obama", "visited", "berlin"]
    for kept in ("\u0915\u094d\u200d\u0937", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"):
        assert normalized(kept) == kept
