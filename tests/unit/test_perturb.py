"""Perturbation engine: each BUMP type on constructed sentences."""

from __future__ import annotations

import re

import pytest

from faithgate.errors import InputError
from faithgate.perturb import TYPES, Perturbation, perturb, resolve_types

SOURCE = (
    "Barack Obama met Angela Merkel in Berlin on Monday. The two leaders discussed trade and "
    "signed an agreement. Merkel said the talks were successful. Obama later flew to Paris on "
    "Tuesday. The deal is worth 300 million dollars. Nicolas Sarkozy welcomed it."
)
SUMMARY = (
    "Obama met Merkel in Berlin on Monday. He said the talks were successful and signed a deal "
    "worth 300 million dollars."
)


def words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[\w']+", text)}


def assert_single_edit(original: str, v: Perturbation) -> None:
    """The variant differs from the original in exactly the recorded span."""
    assert v.summary != original
    assert original[v.start : v.end] == v.original
    assert v.summary[: v.start] == original[: v.start]
    assert v.summary[v.new_end :] == original[v.end :]
    assert v.summary[v.start : v.new_end] == v.replacement
    assert v.error_type


@pytest.fixture(scope="module")
def all_variants() -> list[Perturbation]:
    return perturb(SOURCE, SUMMARY, max_per_type=None, seed=0)


def by_type(variants: list[Perturbation], t: str) -> list[Perturbation]:
    return [v for v in variants if v.type == t]


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_every_variant_is_one_edit_and_distinct(all_variants) -> None:
    assert all_variants
    for v in all_variants:
        assert_single_edit(SUMMARY, v)
    assert len({v.summary for v in all_variants}) == len(all_variants)


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_negation(all_variants) -> None:
    neg = {(v.original, v.replacement) for v in by_type(all_variants, "predicate_negation")}
    assert ("met", "did not meet") in neg
    assert ("said", "did not say") in neg
    for v in by_type(all_variants, "predicate_negation"):
        assert v.error_type == "Intrinsic Predicate"


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_negation_of_auxiliary_and_copula() -> None:
    out = perturb(
        "The bridge was closed by the police. It is old.",
        "The bridge was closed by the police.",
        types=["predicate_negation"],
    )
    assert [(v.original, v.replacement) for v in out] == [("was", "was not")]
    assert out[0].summary == "The bridge was not closed by the police."


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_antonym(all_variants) -> None:
    ant = by_type(all_variants, "predicate_antonym")
    assert [(v.original, v.replacement) for v in ant] == [("successful", "unsuccessful")]
    assert ant[0].error_type == "Extrinsic Predicate"  # 'unsuccessful' is not in the source


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_changed_verb_intrinsic_and_extrinsic() -> None:
    # rules 1: rules 2 swap an intrinsic verb only for one the source uses with the same
    # subject or object, and an extrinsic one only for a listed event verb (test_perturb_rules)
    all_variants = perturb(SOURCE, SUMMARY, max_per_type=None, seed=0, rules=1)
    src_words = words(SOURCE)
    intrinsic = by_type(all_variants, "predicate_verb_intrinsic")
    extrinsic = by_type(all_variants, "predicate_verb_extrinsic")
    assert intrinsic and extrinsic
    for v in intrinsic:
        assert v.replacement.lower() in src_words
        assert v.original in ("met", "signed")
    for v in extrinsic:
        assert v.replacement.lower() not in src_words
        assert v.replacement.endswith("ed") or v.replacement in {
            "lost",
            "sold",
            "won",
            "left",
            "stole",
            "hid",
            "lent",
            "forgot",
            "bought",
        }


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_entity_swaps_use_source_or_outside_entities(all_variants) -> None:
    intrinsic = by_type(all_variants, "entity_intrinsic")
    # 'Obama met Merkel' -> 'Angela Merkel met Merkel' is refused (same sentence)
    assert {(v.original, v.replacement) for v in intrinsic} == {
        ("Obama", "Nicolas Sarkozy"),
        ("Merkel", "Nicolas Sarkozy"),
    }
    src_words = words(SOURCE)
    extrinsic = by_type(all_variants, "entity_extrinsic")
    assert extrinsic
    for v in extrinsic:
        assert v.original in ("Obama", "Merkel")
        assert not (words(v.replacement) & src_words), v.replacement
        assert v.error_type == "Extrinsic Entity"


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_circumstance_time_and_location(all_variants) -> None:
    intrinsic = {
        (v.original, v.replacement, v.detail)
        for v in by_type(all_variants, "circumstance_intrinsic")
    }
    assert intrinsic == {("Monday", "Tuesday", "time"), ("Berlin", "Paris", "location")}
    src_words = words(SOURCE)
    extrinsic = by_type(all_variants, "circumstance_extrinsic")
    details = {v.detail for v in extrinsic}
    assert details == {"time", "location"}
    for v in extrinsic:
        assert v.original in ("Monday", "Berlin")
        assert not (words(v.replacement) & src_words)


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_duration_changes_count() -> None:
    src = "The strike lasted three weeks and ended in May."
    out = perturb(src, "The strike lasted three weeks.", types=["circumstance"], max_per_type=None)
    durations = [v for v in out if v.detail == "duration"]
    assert durations
    for v in durations:
        assert v.original == "three" and v.replacement.lower() not in words(src)


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_coreference_points_to_another_person(all_variants) -> None:
    coref = by_type(all_variants, "coreference")
    # 'He' refers to Obama (the subject before it); the edit names the other person.
    assert {(v.original, v.replacement) for v in coref} == {
        ("He", "Angela Merkel"),
        ("He", "Merkel"),
        ("He", "Nicolas Sarkozy"),
    }


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_number_is_a_value_the_source_does_not_state(all_variants) -> None:
    nums = by_type(all_variants, "number")
    assert nums
    for v in nums:
        assert v.original == "300"
        assert v.replacement.isdigit() and v.replacement not in SOURCE


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_true_swap_is_not_emitted() -> None:
    # Merkel also visited Paris: swapping Obama for Merkel would still be faithful.
    src = "Obama visited Paris. Merkel visited Paris. Both were happy."
    out = perturb(src, "Obama visited Paris.", types=["entity_intrinsic"], max_per_type=None)
    assert out == []
    # A mention of the same person ('Keefe' vs 'Mary Doyle Keefe') is no swap either.
    src2 = "Mary Doyle Keefe posed for Norman Rockwell. Keefe was 19."
    out2 = perturb(src2, "Keefe posed for Rockwell.", types=["entity_intrinsic"], max_per_type=None)
    assert all("Keefe" not in v.replacement for v in out2 if v.original == "Keefe")


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_seeded_and_limited() -> None:
    a = perturb(SOURCE, SUMMARY, seed=1)
    b = perturb(SOURCE, SUMMARY, seed=1)
    assert a == b
    assert len({v.type for v in a}) == len(a)  # one per type by default
    assert {v.type for v in a} <= set(TYPES)
    seeds = {tuple(v.summary for v in perturb(SOURCE, SUMMARY, seed=s)) for s in range(5)}
    assert len(seeds) > 1  # the seed does choose among candidates


def test_resolve_types() -> None:
    assert resolve_types(["entity"]) == ["entity_intrinsic", "entity_extrinsic"]
    assert resolve_types(["Intrinsic Circumstance"]) == ["circumstance_intrinsic"]
    assert resolve_types(None) == list(TYPES)
    with pytest.raises(InputError, match="unknown perturbation type"):
        resolve_types(["entities"])


def test_empty_input_is_an_input_error() -> None:
    with pytest.raises(InputError, match="summary is empty"):
        perturb("A source.", "   ")
    with pytest.raises(InputError, match="source is empty"):
        perturb("", "A summary.")


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_grammar_guards() -> None:
    src = "The 71-year-old player signed a new deal on Monday. Talks took months."
    out = perturb(
        src,
        "The 71-year-old player signed a new deal on Monday.",
        types=["predicate_antonym", "circumstance_intrinsic"],
        max_per_type=None,
    )
    # no antonym inside '71-year-old', no 'a old deal', 'Monday' never becomes 'months'
    assert out == []


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_same_person_by_partial_name_is_not_a_swap() -> None:
    src = (
        "Gatewood Galbraith ran for governor five times. Terrill Newman admired Galbraith. "
        "Newman lives in Kentucky."
    )
    # 'Galbraith' -> 'Gatewood Galbraith' is the same man; 'Terrill Newman' -> 'Gatewood
    # Galbraith' would make him admire himself: nothing safe is left
    out = perturb(
        src, "Terrill Newman admired Galbraith.", types=["entity_intrinsic"], max_per_type=None
    )
    assert out == []
    out = perturb(
        src + " Kentucky voters admired Galbraith.",
        "Kentucky voters admired Galbraith.",
        types=["entity_intrinsic"],
        max_per_type=None,
    )
    assert ("Galbraith", "Terrill Newman") in {(v.original, v.replacement) for v in out}
    assert all(v.replacement != "Gatewood Galbraith" for v in out)


# -- issue 16, point 9: no synonym substitutions posing as predicate errors -------------------

PREDICATE_EDITS = ["predicate_verb_intrinsic", "predicate_verb_extrinsic", "predicate_antonym"]


def predicate_edits(source: str, summary: str) -> list[tuple[str, str]]:
    out = perturb(source, summary, types=PREDICATE_EDITS, max_per_type=None)
    return [(v.original.lower(), v.replacement.lower()) for v in out]


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_synonym_of_the_source_under_negation_is_not_an_error() -> None:
    # The case: the source says "No one was injured"; "Nobody was injured" is true.
    edits = predicate_edits("No one was injured when a shelf fell.", "Nobody was hurt.")
    assert ("hurt", "injured") not in edits
    assert ("hurt", "wounded") not in edits  # a synonym the source does not use either


@pytest.mark.parametrize(
    ("source", "summary", "forbidden"),
    [
        # an intrinsic verb that is a synonym of the summary's
        (
            "The company bought a rival firm in 2019.",
            "The company purchased a rival firm.",
            ("purchased", "bought"),
        ),
        # the source's own wording, negated on both sides ("charge" and "prosecute" are no
        # synonym group: the source sentence holding every edited word with the same polarity
        # is what drops it)
        (
            "After the match, no one was charged, police said.",
            "Nobody was prosecuted after the match.",
            ("prosecuted", "charged"),
        ),
        # an extrinsic verb from the synonym list
        (
            "Police seized the drugs at the port.",
            "Police confiscated drugs.",
            ("confiscated", "seized"),
        ),
        ("The team began the season in May.", "The team started the season.", ("started", "began")),
        (
            "Officials delayed the vote until June.",
            "Officials postponed the vote.",
            ("postponed", "delayed"),
        ),
    ],
)
@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_edits_the_source_states_are_not_emitted(source, summary, forbidden) -> None:
    assert forbidden not in predicate_edits(source, summary)


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_real_predicate_errors_survive_the_checks() -> None:
    source = "The mayor opened the library. Nobody was injured."
    opened = perturb(source, "The mayor opened the library.", max_per_type=None)
    assert any(v.replacement == "did not open" for v in opened)  # negation flips polarity
    # 'closed' is the antonym rule's edit; the verb rule adds a class-mate the source lacks
    arrested = perturb(
        "Police arrested the thief. Nobody was injured.", "Police arrested the thief."
    )
    assert any(v.type == "predicate_verb_extrinsic" for v in arrested)
    # Under negation, removing the negative's support is still an error: "was not hurt"
    # (double negation) contradicts "Nobody was injured".
    # Rules 1 made it; rules 2 leave an already negated sentence alone (unnatural English).
    hurt = perturb(
        source, "Nobody was hurt.", types=["predicate_negation"], max_per_type=None, rules=1
    )
    assert [v.replacement for v in hurt] == ["was not"]
    assert perturb(source, "Nobody was hurt.", types=["predicate_negation"]) == []


def test_bad_arguments_are_input_errors():
    """max_per_type=-1 silently dropped the last candidate; a non-string type raised
    AttributeError."""
    from faithgate.errors import InputError

    src, summ = "Anna Lee met Tom Ray in Paris on Monday.", "Anna Lee met Tom Ray in Paris."
    for bad in (-1, 0, "a", True):
        with pytest.raises(InputError, match="max_per_type must be an integer >= 1 or None"):
            perturb(src, summ, max_per_type=bad)
    with pytest.raises(InputError, match="perturbation types are names"):
        perturb(src, summ, types=[5])


def test_empty_types_and_a_seed_that_is_no_integer_are_input_errors() -> None:
    """``types=[]`` was a ValueError from ``max()``; ``seed=None`` / ``"abc"`` were used by
    their string. Checked before spaCy is asked for anything."""
    with pytest.raises(InputError, match="perturb: types is empty"):
        perturb(SOURCE, SUMMARY, types=[])
    for seed in (None, "abc", 1.5, True):
        with pytest.raises(InputError, match="perturb: seed must be an integer"):
            perturb(SOURCE, SUMMARY, seed=seed)
