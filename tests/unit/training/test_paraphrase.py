"""Meaning-preserving rewrites (``faithgate.training.paraphrase``) and the supported /
unsupported pairs ``synth`` builds from them."""

from __future__ import annotations

import random
import re

import pytest

from faithgate.text import load_spacy
from faithgate.training import paraphrase as para
from faithgate.training import synth
from faithgate.training.corpora import Document
from faithgate.training.recipe import TrainConfig


def _sents(text: str) -> list:
    return list(load_spacy()(text).sents)


def _apply(sents: list, i: int, rewrite: dict[int, str]) -> str:
    return para.render(sents[i], rewrite)


def test_an_opening_pronoun_becomes_the_one_person_named_before():
    sents = _sents(
        "Mary Doyle Keefe posed for the painting in 1943. She was a telephone operator at the time."
    )
    rewrite, named_in = para.resolve_pronoun(sents, 1)
    assert _apply(sents, 1, rewrite) == "Mary Doyle Keefe was a telephone operator at the time."
    assert named_in == 0  # the premise has to reach back to the sentence that names her


def test_a_pronoun_is_left_alone_when_two_people_could_be_meant():
    sents = _sents("John Carter met Anna Berg in Oslo on Monday. He said the talks had gone well.")
    assert para.resolve_pronoun(sents, 1) is None


def test_a_pronoun_inside_the_sentence_is_left_alone():
    sents = _sents("Mary Keefe posed for the painting. Rockwell told her that he would pay.")
    assert para.resolve_pronoun(sents, 1) is None


def test_names_are_shortened_to_the_surname_and_expanded_from_an_earlier_sentence():
    sents = _sents(
        "The mayor, John Carter, opened the library on Monday. Carter said it cost a lot."
    )
    assert _apply(sents, 0, para.shorten_names(sents[0])) == (
        "The mayor, Carter, opened the library on Monday."
    )
    rewrite, named_in = para.expand_names(sents, 1)
    assert _apply(sents, 1, rewrite) == "John Carter said it cost a lot."
    assert named_in == 0


def test_small_counts_change_form_but_dates_and_years_do_not():
    sents = _sents("Three men were arrested on May 3 and 2 others fled in 2015.")
    text = _apply(sents, 0, para.number_format(sents[0]))
    assert text == "3 men were arrested on May 3 and two others fled in 2015."


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Police said the road was closed.", "Police say the road was closed."),
        ("The minister said the plan was ready.", "The minister says the plan was ready."),
    ],
)
def test_said_becomes_present_in_agreement_with_its_subject(sentence, expected):
    sents = _sents(sentence)
    assert _apply(sents, 0, para.present_reporting(sents[0])) == expected


def test_attribution_is_dropped_only_when_the_report_is_not_negated():
    said = _sents("Police said that three men were arrested near the station.")[0]
    assert para.render(para.drop_attribution(said)) == "Three men were arrested near the station."
    denied = _sents("Police did not say that three men were arrested near the station.")[0]
    assert para.drop_attribution(denied) is None


def test_two_sentences_fuse_but_not_across_a_connective():
    assert para.fuse("The bridge opened.", "Traffic was light.", False) == (
        "The bridge opened, and traffic was light."
    )
    sents = _sents(
        "The bridge opened on Monday after years of work. But traffic was light all day."
    )
    for seed in range(20):
        found = para.paraphrase(sents, 0, random.Random(seed), 45)
        assert found is None or "fuse" not in found[3]


DOC = Document(
    "hand-para",
    "The mayor of Springfield, John Carter, opened a new public library on Monday. "
    "He said the building cost four million dollars and holds 20,000 books. "
    "Carter said the library would stay open until 9 pm every weekday. "
    "Local students had campaigned for the library since 2015. "
    "Police said that two men were arrested after the opening ceremony.",
    "hand",
)
_NUMBERS = {v: k for k, v in para._NUMBER_WORDS.items()} | para._NUMBER_WORDS


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def test_paraphrased_positives_say_only_what_their_premise_states():
    pairs = synth.document_pairs(DOC, synth.SynthConfig(seed=1, paraphrase_probability=1.0))
    rewritten = [p for p in pairs if p.kind.startswith("supported:paraphrase:")]
    assert len({p.kind for p in rewritten}) >= 3, [p.kind for p in rewritten]
    for p in rewritten:
        assert p.label == synth.ENTAILMENT
        # Every word is the premise's, but for the glue a rewrite adds ("and", "says"/"say")
        # and a count written the other way.
        extra = _words(p.hypothesis) - _words(p.premise) - {"and", "says", "say"}
        assert {_NUMBERS.get(w, w) for w in extra} <= _words(p.premise), p
    edited = [p for p in pairs if p.kind.startswith("paraphrased:")]
    assert edited and all(p.label == synth.CONTRADICTION for p in edited)
    assert all(p.hypothesis not in p.premise for p in edited)


def test_paraphrases_off_leave_the_first_recipe_and_its_hash_unchanged():
    off = synth.SynthConfig(seed=1)
    pairs = synth.document_pairs(DOC, off)
    assert not any("paraphrase" in p.kind for p in pairs)
    on = synth.SynthConfig(seed=1, paraphrase_probability=0.5)
    assert "paraphrase_probability" not in off.recipe()
    assert on.recipe()["paraphrase_probability"] == 0.5
    hashes = {TrainConfig(output="x", synth=c).recipe_hash() for c in (off, on)}
    assert len(hashes) == 2
