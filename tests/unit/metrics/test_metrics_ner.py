"""NER overlap on two-sentence texts: entities set by hand on blank spaCy docs (no model), plus
one check with the real pipeline."""

from __future__ import annotations

import pytest

from faithgate import text as textmod
from faithgate.errors import InputError
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.metrics.ner import EntityOverlap, normalise_entity
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
    import spacy  # here, not at collection: spaCy (and the torch it loads) cost each process

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
    # The entities are set by hand: no pipeline to check (and none loaded).
    monkeypatch.setattr(EntityOverlap, "_check_pipeline", lambda self, spacy_model: None)
    return ents


def run(metric, summary=SUMMARY, source=SOURCE):
    ctx = ScoringContext()
    return metric.score_batch([Example("1", source, summary)], ctx)[0]


def test_exact_match_by_hand(fake_parse):
    s = run(get_metric("ner"))
    # Obama and Merkel occur in the source text ("Barack Obama", "Angela Merkel"); Berlin does
    # not; Monday does.
    assert s.value == pytest.approx(3 / 4)
    assert s.details["unsupported"] == ["Berlin"]
    assert [x.value for x in s.sentences] == [pytest.approx(2 / 3), pytest.approx(1.0)]
    assert s.sentences[1].evidence == "Monday ~ Monday"
    assert s.least_supported().index == 0
    assert s.details["no_entities"] is False
    assert [e["found_in"] for e in s.details["entities"]] == ["text", "text", None, "text"]


LONG = "Barack Hussein Obama met Merkel in Berlin."


def test_token_f1_match_by_hand(fake_parse):
    fake_parse[LONG] = [("Barack Hussein Obama", "PERSON"), ("Merkel", "PERSON"), ("Berlin", "GPE")]
    s = run(get_metric("ner", match="token_f1"), summary=LONG)
    # "barack hussein obama" is not in the source text; vs the entity "barack obama":
    # P 2/3, R 1 -> 0.8. Merkel is in the text (1); Berlin nowhere (0).
    assert s.value == pytest.approx((0.8 + 1 + 0) / 3)
    assert s.details["entities"][0]["match"] == "Barack Obama"
    assert s.details["entities"][0]["found_in"] == "entity"
    exact = run(get_metric("ner"), summary=LONG)
    assert exact.value == pytest.approx(1 / 3)


def test_entity_fallback_matches_only_within_its_label(fake_parse):
    fake_parse[LONG] = [("Barack Hussein Obama", "ORG"), ("Merkel", "PERSON"), ("Berlin", "GPE")]
    s = run(get_metric("ner", match="token_f1"), summary=LONG)
    assert s.details["entities"][0]["score"] == 0.0  # the source has Barack Obama as a PERSON


def test_a_verbatim_mention_counts_whatever_its_label(fake_parse):
    fake_parse[SUMMARY] = [("Monday", "ORG")]
    s = run(get_metric("ner"))
    assert s.details["entities"][0]["score"] == 1.0  # labelled DATE in the source: still there


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


@pytest.mark.parametrize(
    ("summary", "script"),
    [("北京是中国的首都。", "Han"), ("مرحبا بالعالم", "Arabic"), ("Москва — столица.", "Cyrillic")],
)
def test_text_the_pipeline_cannot_read_fails_instead_of_scoring_no_entity(
    fake_parse, summary, script
):
    # Under the English pipeline such a summary has no entity it can find: it scored
    # no_entity_value (1.0) and passed any gate.
    s = run(get_metric("ner"), summary=summary)
    assert not s.ok and s.value != s.value
    assert f"mostly in {script} script" in s.error and "'en'" in s.error


@pytest.mark.parametrize("summary", ["社長は四月にトヨタをやめる", "ગુજરાતી ભાષામાં સારાંશ"])
def test_text_with_no_majority_script_or_an_unnamed_one_fails_too(fake_parse, summary):
    # Japanese mixes three scripts (none holds a majority); Gujarati is not a named script.
    s = run(get_metric("ner"), summary=summary)
    assert not s.ok and "not mostly in Latin script" in s.error


def test_a_pipeline_for_the_summarys_script_scores_it(fake_parse, monkeypatch):
    import spacy as spacy_mod

    ru = spacy_mod.blank("ru")
    ru.add_pipe("sentencizer")
    monkeypatch.setattr(textmod, "parse", lambda text, spacy_model=None: ru(text))
    s = run(get_metric("ner"), summary="Москва — столица.")
    assert s.ok and s.details["no_entities"] is True
    # A Latin summary under a Cyrillic pipeline is refused the same way.
    assert "mostly in Latin script" in run(get_metric("ner"), summary="He left.").error


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
    assert s.value == pytest.approx(3 / 4)  # only Berlin is not in the source
    assert len(s.sentences) == 2


# -- issue 16, point 8: no false alarms on faithful mentions ---------------------------------


@pytest.fixture
def pipeline_as(monkeypatch):
    """Score with ``nlp`` as the spacy role's pipeline; the parse caches (keyed by text, not
    pipeline) are emptied around the test so that no other pipeline's parse leaks in."""

    def use(nlp) -> None:
        monkeypatch.setattr(textmod, "load_spacy", lambda name=None: nlp)

    textmod.clear_caches()
    yield use
    textmod.clear_caches()


def _blank(*components: str):
    import spacy

    nlp = spacy.blank("en")
    for name in ("sentencizer", *components):
        nlp.add_pipe(name)
    return nlp


def test_labels_the_pipeline_never_assigns_are_refused(pipeline_as) -> None:
    """A misspelled label ("PERSONS") matched no entity: every summary scored 1.0, so a gate
    passed invented names. The pipeline's own labels are listed in the error."""
    nlp = _blank()
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "PERSON", "pattern": "Obama"}])
    pipeline_as(nlp)
    with pytest.raises(InputError, match=r"'GPE_', 'PERSONS' \(it has: PERSON\)"):
        run(get_metric("ner", labels=["persons", "GPE_"]), summary="Obama slept.")
    found = run(get_metric("ner", labels=["person"]), "Obama slept.", "Nobody came.")
    assert found.value == 0.0  # the label it has finds the invented name


def test_a_pipeline_without_an_entity_recognizer_is_refused(pipeline_as) -> None:
    pipeline_as(_blank("attribute_ruler"))
    with pytest.raises(InputError, match="has no entity recognizer.*sentencizer, attribute_ruler"):
        run(get_metric("ner"))
    quiet_ruler = _blank()
    quiet_ruler.add_pipe("span_ruler")  # annotate_ents is off: it sets doc.spans only
    pipeline_as(quiet_ruler)
    with pytest.raises(InputError, match="has no entity recognizer"):
        run(get_metric("ner"), "Obama slept.", "Nobody came.")


def test_entity_finders_that_do_not_declare_or_list_labels_are_trusted(pipeline_as) -> None:
    from spacy.language import Language

    @Language.component("faithgate_test_undeclared")  # sets doc.ents, says nothing of it
    def undeclared(doc):
        doc.ents = [doc.char_span(0, 5, label="PERSON")] if doc.text.startswith("Obama") else []
        return doc

    nlp = _blank("faithgate_test_undeclared")
    pipeline_as(nlp)
    assert run(get_metric("ner", labels=["ANY"]), "Obama slept.", "Nobody came.").value == 1.0
    assert run(get_metric("ner"), "Obama slept.", "Nobody came.").value == 0.0
    ruler = _blank()
    ruler.add_pipe("span_ruler", config={"annotate_ents": True}).add_patterns(
        [{"label": "PERSON", "pattern": "Obama"}]
    )
    pipeline_as(ruler)
    assert run(get_metric("ner"), "Obama slept.", "Nobody came.").value == 0.0


@pytest.mark.parametrize(
    ("mention", "source", "found"),
    [
        # the two cases
        ("Rotterdam", "The ship docked near the port of Rotterdam on Friday.", "Rotterdam"),
        ("Millbrook's", "The town of Millbrook opened a library.", "Millbrook"),
        # five more: case, punctuation, inflection, a leading article, a possessive in the source
        ("MILLBROOK", "The town of Millbrook opened a library.", "Millbrook"),
        ("the U.S.", "Talks with the U.S were held.", "U.S"),
        ("Americans", "An American tourist was rescued.", "American"),
        ("The Hague", "Judges in Hague ruled on Monday.", "Hague"),
        ("Anne Visser", "Mayor Anne Visser's speech was short.", "Anne Visser"),
        ("Doyle-Keefe", "Mary Doyle-Keefe, 92, died.", "Doyle-Keefe"),
        # a tokenised source (CNN/DM as QAGS gives it): words cut at inner punctuation
        ("al-Shabaab's", "the attack is al - shabaab 's fifth", "al - shabaab"),
        ("13-year-old", "a 13 - year - old girl", "13 - year - old"),
        ("1,100", "it fell to just 1,100ft above the ocean", "1,100"),
        ("$25 million", "a bid of $25million", "25million"),
        ("3,000", "a village of 3, 000 people", "3, 000"),
        ("around 7.8 per cent", "prices fell by around 7. 8 per cent", "around 7. 8 per cent"),
        ("O'Malley", "talks with martin o' malley's people", "o' malley"),
        ("US", "Talks with the U.S. were held.", "U.S"),
        ("3,500", "more than 3500 soldiers", "3500"),
    ],
)
def test_mentions_found_in_the_source_text(mention, source, found):
    from faithgate.metrics.ner import SourceText

    assert SourceText(source).find(mention) == found


@pytest.mark.parametrize(
    ("mention", "source"),
    [
        ("Berlin", "Obama met Merkel in Paris."),
        ("Anne Visser", "Anne met Mr Visser."),  # words present, not together
        ("Rotter", "near the port of Rotterdam"),  # a prefix is not a word
        ("2027", "It opened in 2026."),
        ("Millbrook Council", "The Millbrook library opened."),
        ("7.8 million", "It rose to 78 million."),  # a decimal point is not punctuation
        ("100", "It fell to 1,100 feet."),  # a number is never cut
        ("8 per cent", "Prices rose 7.8 per cent."),
        ("12", "Items 1, 2 and 3."),  # a thousands group has three digits
        ("al-Shabaab", "al-Qaeda and Shabaab"),  # cut words must still be consecutive
    ],
)
def test_mentions_not_in_the_source_text_are_still_missing(mention, source):
    from faithgate.metrics.ner import SourceText

    assert SourceText(source).find(mention) is None


@pytest.mark.slow
def test_real_pipeline_no_false_alarm_on_faithful_mentions():
    """The issue's cases through spaCy: a possessive and an entity spaCy does not recognise as
    one in the source."""
    source = (
        "The town of Millbrook opened a new library on Saturday, near the port of Rotterdam. "
        "Mayor Anne Visser said it would serve 12,000 residents."
    )
    summary = "Millbrook's library opened near Rotterdam. Anne Visser spoke."
    s = run(get_metric("ner"), summary=summary, source=source)
    assert s.details["unsupported"] == [], s.details["entities"]
    assert s.value == 1.0


def test_an_empty_label_list_is_refused() -> None:
    """No label means no entity anywhere: every summary scored 1.0."""
    from faithgate.errors import InputError
    from faithgate.metrics.base import get_metric

    for labels in ([], "", " , "):
        with pytest.raises(InputError, match="labels is empty"):
            get_metric("ner", labels=labels)


@pytest.mark.parametrize(
    ("mention", "source", "found"),
    [
        ("the 1990s", "Prices rose in 1990.", None),
        ("1990", "Prices rose in the 1990s.", None),
        ("1980", "It happened in the 1980's.", None),
        ("the 1990s", "Prices rose in the 1990s.", "1990s"),
        ("Americans", "An American tourist was rescued.", "American"),
        ("\u20ac5 million", "The city spent $5 million on roads.", None),
        ("$5 million", "It cost 5 million euros.", None),
        ("$5 million", "The city spent $5 million on roads.", "5 million"),
        ("$5 million", "It cost 5 million dollars.", "5 million"),
        ("$5 million", "It cost 5 million.", "5 million"),
    ],
)
def test_decades_and_currencies_are_part_of_a_mention(mention, source, found):
    """A plural "s" was cut from digits too, so "the 1990s" was found in "1990" (and "1990" in
    "the 1980s"), and currency signs were dropped, so "€5 million" was found in "$5 million"."""
    from faithgate.metrics.ner import SourceText

    assert SourceText(source).find(mention) == found


def test_a_currency_swap_is_not_matched_through_the_source_entities(fake_parse):
    """The normalised entities dropped the currency sign: "€5 million" equalled the source's
    MONEY entity "$5 million" when the text search missed it."""
    summary, source = "The city spent \u20ac5 million.", "The city spent $5 million."
    fake_parse[summary] = [("\u20ac5 million", "MONEY")]
    fake_parse[source] = [("$5 million", "MONEY")]
    s = run(get_metric("ner"), summary=summary, source=source)
    assert s.value == 0.0 and s.details["unsupported"] == ["\u20ac5 million"]
    assert normalise_entity("\u20ac5 million") == "\u20ac 5 million"
    same = "The city spent $5 million."
    fake_parse[same] = [("$5 million", "MONEY")]
    assert run(get_metric("ner"), summary=same, source=source).value == 1.0


@pytest.mark.parametrize(
    ("mention", "source", "found"),
    [
        (
            "\u0930\u094b\u092e",
            "\u0930\u093e\u092e \u0926\u093f\u0932\u094d\u0932\u0940 \u0917\u092f\u093e\u0964",
            None,
        ),
        (
            "\u0930\u093e\u092e",
            "\u0930\u093e\u092e \u0926\u093f\u0932\u094d\u0932\u0940 \u0917\u092f\u093e\u0964",
            "\u0930\u093e\u092e",
        ),
    ],
)
def test_words_keep_their_combining_marks(mention, source, found):
    """Python ``re``'s \\w drops combining marks, so the Hindi "Rome" (रोम) and "Ram" (राम)
    were both the letters र, म, and "Rome" was found in a text about Ram."""
    from faithgate.metrics.ner import SourceText

    assert SourceText(source).find(mention) == found
