"""NER overlap on two-sentence texts: entities set by hand on blank spaCy docs (no model), plus
one check with the real pipeline."""

from __future__ import annotations

import pytest
import spacy

from faithgate import text as textmod
from faithgate.errors import InputError
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.metrics.ner import normalise_entity
from faithgate.types import Example

SUMMARY = "Obama met Merkel in Berlin. He left on Monday."
SOURCE = "Barack Obama met Angela Merkel in Paris on Monday."
ENTS = {
    SUMMARY: [("Obama", "PERSON"), ("Merkel", "PERSON"), ("Berlin", "GPE"), ("Monday", "DATE")],
    SOURCE: [
        ("Barack Obama", "PERSON"),
        ("Angela Merkel", "PERSON"),
        ("Paris", "GPE"),
        ("Monday", "DATE"),
    ],
}


@pytest.fixture
def fake_parse(monkeypatch):
    """``textmod.parse`` returning blank-pipeline docs with hand-set entities and sentences."""
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    ents = dict(ENTS)

    def parse(text, spacy_model=None):
        doc = nlp(text)
        spans, start = [], 0
        for surface, label in ents.get(text, []):
            i = text.index(surface, start)
            spans.append(doc.char_span(i, i + len(surface), label=label))
            start = i + len(surface)
        doc.ents = spans
        return doc

    monkeypatch.setattr(textmod, "parse", parse)
    return ents


def run(metric, summary=SUMMARY, source=SOURCE):
    ctx = ScoringContext()
    return metric.score_batch([Example("1", source, summary)], ctx)[0]


def test_exact_match_by_hand(fake_parse):
    s = run(get_metric("ner"))
    # Obama != barack obama, Merkel != angela merkel, Berlin not in source; Monday found
    assert s.value == pytest.approx(1 / 4)
    assert s.details["unsupported"] == ["Obama", "Merkel", "Berlin"]
    assert [x.value for x in s.sentences] == [pytest.approx(0.0), pytest.approx(1.0)]
    assert s.sentences[1].evidence == "Monday ~ Monday"
    assert s.least_supported().index == 0
    assert s.details["no_entities"] is False


def test_token_f1_match_by_hand(fake_parse):
    s = run(get_metric("ner", match="token_f1"))
    # obama vs barack obama: P 1, R 1/2 -> 2/3 (same for merkel); berlin 0; monday 1
    assert s.value == pytest.approx((2 / 3 + 2 / 3 + 0 + 1) / 4)
    assert s.sentences[0].value == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    assert s.details["entities"][0]["match"] == "Barack Obama"


def test_entities_match_only_within_their_label(fake_parse):
    fake_parse[SUMMARY] = [
        ("Obama", "PERSON"),
        ("Merkel", "PERSON"),
        ("Berlin", "GPE"),
        ("Monday", "ORG"),
    ]
    s = run(get_metric("ner", match="token_f1"))
    assert s.details["entities"][3]["score"] == 0.0  # the source has Monday only as a DATE


def test_labels_setting_restricts_entity_types(fake_parse):
    s = run(get_metric("ner", labels="date"))
    assert s.value == pytest.approx(1.0)
    assert s.details["n_entities"] == 1


def test_no_entities_is_reported_not_silent(fake_parse):
    summary = "He left. She stayed."
    s = run(get_metric("ner"), summary=summary)
    assert s.value == 1.0 and s.ok
    assert s.details["no_entities"] is True and s.details["n_entities"] == 0
    assert all(x.value != x.value for x in s.sentences)  # NaN: no entity to judge
    failed = run(get_metric("ner", no_entity_value="nan"), summary=summary)
    assert not failed.ok and "no named entities" in failed.error
    zero = run(get_metric("ner", no_entity_value=0), summary=summary)
    assert zero.value == 0.0


def test_bad_settings():
    with pytest.raises(InputError, match="match"):
        get_metric("ner", match="fuzzy")
    with pytest.raises(InputError, match="no_entity_value"):
        get_metric("ner", no_entity_value=2)


@pytest.mark.parametrize(
    ("raw", "norm"),
    [("The U.S.'s", "us"), ("Mary  Doyle-Keefe", "mary doylekeefe"), ("Obama\u2019s", "obama")],
)
def test_normalise_entity(raw, norm):
    assert normalise_entity(raw) == norm


@pytest.mark.slow
def test_real_spacy_pipeline():
    s = run(get_metric("ner"))
    assert s.details["n_entities"] == 4
    assert s.value == pytest.approx(1 / 4)
    assert len(s.sentences) == 2
