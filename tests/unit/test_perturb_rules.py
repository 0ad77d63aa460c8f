"""``perturb(..., rules=...)``: rules 1 reproduces the edits the shipped checker was trained
on; rules 2 fixes the defects found by review (each test below fails under rules 1)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from faithgate.errors import InputError
from faithgate.perturb import apply, context, lexicon, mentions, perturb, predicates

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spacy")]

ROOT = Path(__file__).resolve().parents[2]


def edits(source: str, summary: str, types, rules: int = 2, **kw) -> list[str]:
    return [
        p.summary
        for p in perturb(source, summary, types=types, max_per_type=None, rules=rules, **kw)
    ]


# --- rules 1: exactly the edits of the first shipped checker ------------------------------


def test_rules_1_gives_the_first_checkers_edits_on_the_example_project() -> None:
    """Digest of the edits the rules made before ``rules`` existed (computed with that
    code) on examples/news/outputs.jsonl: all types, and some type subsets."""
    rows = [json.loads(line) for line in (ROOT / "examples/news/outputs.jsonl").open()]
    out = []
    for r in rows:
        out.append(
            [p.to_dict() for p in perturb(r["source"], r["summary"], max_per_type=None, rules=1)]
        )
        for t in (["entity"], ["predicate"], ["number", "circumstance"], ["coreference"]):
            found = perturb(r["source"], r["summary"], types=t, max_per_type=2, seed=3, rules=1)
            out.append([p.to_dict() for p in found])
    digest = hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()
    assert (digest, sum(map(len, out))) == (
        "256667f7699ebe8604a54fa619420315100708314fde4585e18fe9a548c679d4",
        1161,
    )


def test_rules_1_without_the_later_predicate_filter_gives_the_shipped_checkers_edits() -> None:
    """The edits of the code that made the shipped checker's pairs (commit ea83d0c, before
    f4224a5's filter of predicate edits that stay true), on examples/news/outputs.jsonl,
    computed with that code: ``faithgate train --synthesis 1`` makes them again."""
    rows = [json.loads(line) for line in (ROOT / "examples/news/outputs.jsonl").open()]
    out = []
    for r in rows:
        kw = {"rules": 1, "drop_still_true": False}
        out.append(
            [p.to_dict() for p in perturb(r["source"], r["summary"], max_per_type=None, **kw)]
        )
        for t in (["entity"], ["predicate"], ["number", "circumstance"], ["coreference"]):
            found = perturb(r["source"], r["summary"], types=t, max_per_type=2, seed=3, **kw)
            out.append([p.to_dict() for p in found])
    digest = hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()
    assert (digest, sum(map(len, out))) == (
        "22b4efc99406e17ab374338366f1386d1e6264915f6d9e76b2fbf153540d348b",
        1162,
    )


def test_rules_1_keeps_the_reviewed_defects() -> None:
    assert "Police seized cocaine worth more than $63 million." in edits(
        "Police seized cocaine worth more than $105 million.",
        "Police seized cocaine worth more than $105 million.",
        ["number"],
        rules=1,
    )
    assert edits(
        "Nobody was hurt in the blaze, firefighters said.",
        "Nobody was hurt in the blaze.",
        ["predicate_negation"],
        rules=1,
    ) == ["Nobody was not hurt in the blaze."]


def test_rules_must_be_a_known_revision() -> None:
    for bad in (0, 4, True, "2"):
        with pytest.raises(InputError):
            perturb("A man ate.", "A man ate.", rules=bad)


def test_the_shipped_synth_recipe_keeps_its_hash() -> None:
    from faithgate.training.recipe import TrainConfig
    from faithgate.training.synth import SynthConfig

    assert "perturb_rules" not in SynthConfig().recipe()
    assert SynthConfig(perturb_rules=2).recipe()["perturb_rules"] == 2
    shipped = SynthConfig(synthesis=1)  # onnx_models/build_checker.sh: --synthesis 1
    built = TrainConfig(output="x", snli_pairs=15000, max_steps=1200, seed=0, synth=shipped)
    assert built.recipe_hash() == "9a2ffc29a8d5"
    newer = TrainConfig(
        output="x",
        snli_pairs=15000,
        max_steps=1200,
        seed=0,
        synth=SynthConfig(perturb_rules=2, synthesis=1),
    )
    assert newer.recipe_hash() != "9a2ffc29a8d5"


def test_synth_passes_its_perturb_rules(monkeypatch) -> None:
    import random

    from faithgate.training import synth

    seen = []
    monkeypatch.setattr(synth, "perturb", lambda *a, **kw: seen.append(kw["rules"]) or [])
    synth._edits("p", "c", random.Random(0))
    synth._edits("p", "c", random.Random(0), 2)
    assert seen == [1, 2]


# --- 1. speed: source sentences are analysed once -----------------------------------------


def test_source_sentences_are_analysed_once_per_call(monkeypatch) -> None:
    source = " ".join(f"Team {i} beat rival {i + 1} at home and won the cup." for i in range(60))
    calls = []
    real = context.is_negated
    monkeypatch.setattr(context, "is_negated", lambda toks: calls.append(toks) or real(toks))
    perturb(source, "Team 3 beat rival 4 at home.", types=["predicate"], max_per_type=None, rules=2)
    on_source = [c for c in calls if getattr(c, "doc", None) is not None and c.doc.text == source]
    assert 0 < len(on_source) <= 60


# --- 2. numbers under a bound ---------------------------------------------------------------


def test_a_bounded_number_moves_past_its_bound() -> None:
    src = "Police seized cocaine worth more than $105 million. Up to 200 jobs may go."
    lower = edits(src, "Police seized cocaine worth more than $105 million.", ["number"])
    assert lower and all(float(e.split("$")[1].split()[0].replace(",", "")) > 105 for e in lower)
    upper = edits(src, "Up to 200 jobs may go.", ["number"])
    assert upper and all(int(e.split()[2]) < 200 for e in upper)


# --- 3. double negation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "summary", ["Nobody was hurt in the blaze.", "No one was hurt.", "The fire never spread."]
)
def test_a_negated_sentence_is_not_negated_again(summary) -> None:
    src = "Nobody was hurt in the blaze, firefighters said. The fire never spread."
    assert edits(src, summary, ["predicate_negation"]) == []


# --- 4. numbers inside names ----------------------------------------------------------------


def test_numbers_in_names_are_left_alone() -> None:
    found = edits(
        "NASA celebrated Apollo 11 and Boeing 737 jets.", "NASA celebrated Apollo 11.", ["number"]
    )
    assert found == []
    found = edits("Three Britons died in the crash.", "Three Britons died.", ["number"])
    assert found  # a count before a name is still a number


# --- 5. coreference to the true referent ----------------------------------------------------


def test_a_pronoun_is_not_pointed_at_a_person_of_its_own_sentence() -> None:
    src = (
        "Bayern Munich manager Pep Guardiola tore his trousers. Porto lost 6-1 in Munich. "
        "Jerome Boateng scored. Thomas Muller scored twice."
    )
    found = edits(
        src,
        "Thomas Muller scored twice as manager Pep Guardiola tore his trousers.",
        ["coreference"],
    )
    assert not any("Guardiola tore Pep Guardiola's" in e for e in found)
    assert any("Jerome Boateng's trousers" in e for e in found)


# --- 6. partial names -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "original"), [("news-5", "Arias"), ("news-1", "Riveter"), ("news-3", "Wanda")]
)
def test_no_half_names(row, original) -> None:
    rows = {
        json.loads(line)["id"]: json.loads(line)
        for line in (ROOT / "examples/news/outputs.jsonl").open()
    }
    r = rows[row]
    found = [
        p
        for p in perturb(r["source"], r["summary"], types=["entity"], max_per_type=None)
        if p.original == original
    ]
    assert not any(p.replacement.endswith(("'s", "’s")) for p in found)
    if row != "news-5":  # 'Jodi [Arias]', 'Rosie the [Riveter]', '[Dalian] Wanda'
        assert found == []


# --- 7. text corruption ---------------------------------------------------------------------


def test_name_and_number_swaps_keep_the_text_intact() -> None:
    src = "Revenue rose 3.5% to 1,200.5 million euros in the U.S. last year."
    summ = "Revenue rose 3.5% to 1,200.5 million euros in the U.S."
    found = perturb(src, summ, types=["number", "circumstance_extrinsic"], max_per_type=None)
    assert "Revenue rose 3.5% to 2,401.0 million euros in the U.S." in [p.summary for p in found]
    places = [p.summary for p in found if p.type == "circumstance_extrinsic"]
    assert places and all(e.endswith(".") and " the " not in e.split("euros")[1] for e in places)
    hundred = edits(
        "About two hundred people attended the rally in the town.",
        "Two hundred people attended the rally.",
        ["number"],
    )
    assert hundred and not any(e.startswith("Two ") for e in hundred)
    bbc = edits(
        "The BBC reported the strike. Workers walked out on Monday.",
        "The BBC reported the strike.",
        ["entity_extrinsic"],
    )
    assert bbc and not any("the the" in e.lower() for e in bbc)


# --- 8. verb swaps --------------------------------------------------------------------------


def test_no_verb_swaps_inside_words_or_names() -> None:
    found = perturb(
        "The table-topping side won again. Fans celebrated and sang.",
        "The table-topping side won again.",
        types=["predicate_verb"],
        max_per_type=None,
        rules=2,
    )
    assert found and all(p.original == "won" for p in found)
    text = "Loganair Aberdeen to Shetland flight struck by lightning on approach."
    found = perturb(text, text, types=["predicate_verb"], max_per_type=None, rules=2)
    assert not any(p.original == "Shetland" for p in found)


def test_an_intrinsic_verb_is_one_the_source_uses_with_the_same_argument() -> None:
    src = "The police arrested a man. The police questioned a woman. Fans bought tickets."
    summ = "The police arrested a man."
    old = perturb(src, summ, types=["predicate_verb_intrinsic"], max_per_type=None, rules=1)
    assert "bought" in [p.replacement for p in old]
    found = perturb(src, summ, types=["predicate_verb_intrinsic"], max_per_type=None, rules=2)
    assert [p.replacement for p in found] == ["questioned"]
    # A verb between two names is a verb when they are its subject and object.
    src = "Alice Smith met Bob Jones in Paris on Monday. Alice Smith attended the summit."
    found = perturb(
        src, "Alice Smith met Bob Jones in Paris.", types=["predicate_verb_intrinsic"], rules=2
    )
    assert [(p.original, p.replacement) for p in found] == [("met", "attended")]


def test_an_intrinsic_verb_the_source_uses_with_all_the_same_arguments_is_no_edit() -> None:
    # The source's own wording of the claim: the swap would still be true.
    src = "Branson converted the old chapel into a home. He sold it in 2010."
    summ = "Branson brought the old chapel back to life."
    old = perturb(src, summ, types=["predicate_verb_intrinsic"], max_per_type=None, rules=1)
    assert ("brought", "converted") in [(p.original, p.replacement) for p in old]
    assert perturb(src, summ, types=["predicate_verb_intrinsic"], max_per_type=None) == []


# --- 9. aliases -----------------------------------------------------------------------------


def test_an_alias_is_not_another_referent() -> None:
    found = edits(
        "The United States imposed new tariffs on China. America's trade deficit widened.",
        "The U.S. imposed new tariffs on China.",
        ["entity_intrinsic"],
    )
    assert not any(
        e.startswith(("The America", "The The", "America imposed", "The United")) for e in found
    )
    assert mentions._same_by_alias("NASA", "National Aeronautics and Space Administration")
    assert mentions._same_by_alias("the U.K.", "Britain")
    assert not mentions._same_by_alias("France", "Britain")


# --- 10. an edit's type does not depend on the types asked for ------------------------------


def test_types_asked_for_do_not_change_an_edits_type() -> None:
    rows = [json.loads(line) for line in (ROOT / "examples/news/outputs.jsonl").open()]
    for r in rows[:3]:
        everything = perturb(r["source"], r["summary"], max_per_type=None)
        for t in (
            "predicate_antonym",
            "predicate_verb_intrinsic",
            "predicate_verb_extrinsic",
            "number",
        ):
            alone = perturb(r["source"], r["summary"], types=[t], max_per_type=None)
            assert sorted(p.summary for p in alone) == sorted(
                p.summary for p in everything if p.type == t
            )


def test_no_swaps_inside_a_capitalised_title() -> None:
    src = "The Made In Chelsea star left the show. The United Nations said nothing."
    summary = "The Made In Chelsea star left the show."
    old = perturb(src, summary, types=["entity"], max_per_type=None, rules=1)
    assert any(p.original == "Chelsea" for p in old)
    assert not any(
        p.original == "Chelsea" for p in perturb(src, summary, types=["entity"], max_per_type=None)
    )


# --- 11. swaps that only say less; antonyms that are none ---------------------------------


@pytest.mark.parametrize(
    ("source", "summary", "original", "general"),
    [
        (
            "The Queen hosted a party at Buckingham Palace, London, on Friday. Guests came "
            "from Paris.",
            "The Queen hosted a party at Buckingham Palace.",
            "Buckingham Palace",
            "London",
        ),
        ("He lives in Arlington, Virginia. He was born in Ohio.", "He lives in Virginia.",
         "Virginia", "Arlington"),
        (
            "A ferry ran aground near Rotterdam on Tuesday evening. It was towed on Thursday "
            "morning.",
            "A ferry ran aground near Rotterdam on Tuesday.",
            "Tuesday",
            "evening",
        ),
    ],
)  # fmt: skip
def test_a_circumstance_swap_that_only_says_less_is_no_edit(source, summary, original, general):
    swaps = lambda rules: [  # noqa: E731
        (p.original, p.replacement)
        for p in perturb(source, summary, types=["circumstance_intrinsic"], max_per_type=None,
                         rules=rules)
    ]  # fmt: skip
    assert (original, general) in swaps(1)
    assert (original, general) not in swaps(2)


@pytest.mark.parametrize(
    ("summary", "kept"),
    [
        ("The boy is five years old.", False),  # an age: 'five years young'
        ("Branson bought the old chapel.", False),  # not alive: 'the young chapel'
        ("The old man walked home.", True),
    ],
)
def test_old_and_young_are_antonyms_only_of_the_living(summary, kept) -> None:
    def young(rules: int) -> bool:
        found = perturb(summary, summary, types=["predicate_antonym"], max_per_type=None,
                        rules=rules)  # fmt: skip
        return ("old", "young") in [(p.original, p.replacement) for p in found]

    assert young(1)
    assert young(2) is kept


def test_a_pronoun_is_not_pointed_at_a_person_the_summary_named_before_it() -> None:
    # 'He' is Rockwell (the parser does not tag him a person here, so no subject person leads)
    # and 'her' is Keefe: naming either is still true. A person the summary never named is
    # another referent. ('Obama met Merkel. He ...' -> 'Merkel' stays: test_perturb.py.)
    src = (
        "Norman Rockwell painted Mary Keefe in 1943. He paid her ten dollars. Keefe died this "
        "week. Ben Hale ran the magazine."
    )
    summary = "Rockwell painted Mary Keefe in 1943. He paid her ten dollars."

    def swaps(rules: int) -> set[tuple[str, str]]:
        found = perturb(src, summary, types=["coreference"], max_per_type=None, rules=rules)
        return {(p.original, p.replacement) for p in found}

    assert ("He", "Norman Rockwell") in swaps(1)
    assert swaps(2) == {("He", "Ben Hale"), ("her", "Ben Hale")}


# --- rules 3: an antonym of a time, place or bound word is filed under what it changes -----


@pytest.mark.parametrize(
    ("source", "summary", "swap", "kind"),
    [
        (
            "The talks were held in Geneva before the election in May. Officials from both "
            "parties attended the talks and said progress had been made.",
            "The talks were held before the election.",
            ("before", "after"),
            ("circumstance_extrinsic", "Extrinsic Circumstance"),
        ),
        (
            "The storm hit the coast north of Sydney on Monday, cutting power to thousands of "
            "homes. Emergency crews worked through the night to restore supplies.",
            "The storm hit the coast north of Sydney.",
            ("north", "south"),
            ("circumstance_extrinsic", "Extrinsic Circumstance"),
        ),
        (
            "Rebels control the north of the country. The army holds the south.",
            "Rebels control the north of the country.",
            ("north", "south"),  # 'the north' keeps its article: 'the south', not 'south'
            ("circumstance_intrinsic", "Intrinsic Circumstance"),
        ),
        (
            "The train arrived late on Friday. The team was happy.",
            "The train arrived late and the team was happy.",
            ("late", "early"),
            ("circumstance_extrinsic", "Extrinsic Circumstance"),
        ),
        (
            "The train arrived late on Friday. The team was happy.",
            "The train arrived late and the team was happy.",
            ("happy", "sad"),
            ("predicate_antonym", "Extrinsic Predicate"),  # a state, not when or where
        ),
    ],
)
def test_a_time_or_place_antonym_is_a_circumstance_edit(source, summary, swap, kind) -> None:
    def found(rules: int) -> dict[tuple[str, str], tuple[str, str, str]]:
        return {
            (p.original, p.replacement): (p.type, p.error_type, p.summary)
            for p in perturb(source, summary, max_per_type=None, rules=rules)
            if p.detail == "antonym"
        }

    old, new = found(1)[swap], found(3)[swap]
    assert old[0] == "predicate_antonym"  # rules 1 and 2 unchanged
    assert old[1] == kind[1].split()[0] + " Predicate"  # intrinsic or extrinsic alike
    assert found(2)[swap] == old
    assert new[:2] == kind
    assert new[2] == old[2]  # the same edit, under another type
    everything = perturb(source, summary, max_per_type=None)
    alone = perturb(source, summary, types=[kind[0]], max_per_type=None)
    assert new[2] in {p.summary for p in alone} and new[2] in {p.summary for p in everything}
    predicate = perturb(source, summary, types=["predicate"], max_per_type=None)
    assert (new[2] in {p.summary for p in predicate}) == (kind[0] == "predicate_antonym")


def test_a_bound_antonym_before_a_number_is_a_number_edit() -> None:
    # The tagger folds 'More than 200' into a CARDINAL, whose words rules 2 leave alone; where
    # it does not, 'more' -> 'fewer' changes the number's bound, not the predicate.
    source = (
        "More than 200 people attended the rally in the city centre on Saturday. Police said "
        "the crowd was peaceful."
    )
    summary = "More than 200 people attended the rally."

    def edits_without_entities(rules: int) -> list[tuple[str, str, str]]:
        ctx = context.Context(source, summary, None, rules)
        doc = ctx.doc.copy()  # parses are cached: leave the shared one alone
        doc.ents = []
        ctx.doc = doc
        made = [apply.apply_candidate(ctx, c) for c in predicates.antonym_edits(ctx)]
        return [(p.type, p.error_type, p.summary) for p in made if p is not None]

    fewer = "Fewer than 200 people attended the rally."
    assert edits_without_entities(2) == [("predicate_antonym", "Extrinsic Predicate", fewer)]
    assert edits_without_entities(3) == [("number", "Number", fewer)]
    assert predicates._before_number(context.Context(source, summary, None).doc[0])


# --- rules 3: a verb is swapped only for a class-mate that fits its frame ------------------


def verb_swaps(source: str, summary: str, rules: int = 3) -> set[tuple[str, str]]:
    found = perturb(source, summary, types=["predicate_verb"], max_per_type=None, rules=rules)
    return {(p.original, p.replacement) for p in found}


@pytest.mark.parametrize(
    ("summary", "garbage"),
    [
        ("The team lost 1-0 to Reading on Saturday.", ("lost", "acquitted")),
        ("A woman was arrested in China.", ("arrested", "approved")),
        ("The prescriptions also raised the odds of obesity.", ("raised", "closed")),
    ],
)
def test_a_verb_of_another_class_is_no_edit(summary, garbage) -> None:
    source = "The report came out on Monday. Officials spoke to reporters about it."
    assert garbage in verb_swaps(source, summary, rules=2)  # what rules 2 made
    swaps = verb_swaps(source, summary)
    assert garbage not in swaps
    frames = lexicon.package_data("verb_frames.json")["verbs"]
    lemma_of = {form: v for v, info in frames.items() for form in (v, info["VBD"], info["VBN"])}
    assert swaps and {frames[lemma_of[o]]["class"] for pair in swaps for o in pair} == {
        frames[lemma_of[garbage[0]]]["class"]
    }


def test_class_swaps_contrast() -> None:
    source = "The report came out on Monday. Officials spoke to reporters about it."
    assert ("arrested", "acquitted") in verb_swaps(source, "A woman was arrested in China.")
    assert ("lost", "won") in verb_swaps(source, "She lost the phone at a party.") or (
        # the antonym rule makes 'won' first; the verb rule then adds nothing new
        verb_swaps(source, "She lost the phone at a party.") == set()
    )
    # Reporting verbs that can say the same are never swapped for each other: only 'denied'.
    assert verb_swaps(source, "The couple announced they are expecting a child.") == {
        ("announced", "denied")
    }


@pytest.mark.parametrize(
    "summary",
    [
        "Fabregas collected the loose ball and released it to Oscar.",  # a thing, not a person
        "Jacob Phillips fell down a 70ft cliff to his death.",  # a body, not a quantity
        "The committee and the public are joining forces.",  # an idiom
        "The actor is selling off his collection.",  # a phrasal verb
        "They have each been charged with animal cruelty.",  # the class-mates need 'of'/'for'
        "The poll led to calls to stem sexist or threatening behaviour.",  # an adjective
        "The flat has just three years left on the lease.",  # a participle modifying a noun
        "Researchers have revealed an HD dark matter map.",  # a reporting verb needs a claim
        "His mother used to get lost when she was alone.",  # an adjective after 'get'
        "He said he was unsure when he will return to action.",  # 'return to' is its own
    ],
)
def test_no_verb_swap_outside_the_verbs_frame(summary) -> None:
    source = "The report came out on Monday. Officials spoke to reporters about it."
    assert verb_swaps(source, summary) == set()


def test_a_quantity_verb_with_its_amount_is_swapped() -> None:
    source = "The report came out on Monday. Officials spoke to reporters about it."
    swaps = verb_swaps(source, "Heavy drinking rose 17.2 percent between 2005 and 2012.")
    assert ("rose", "declined") in swaps and all(o == "rose" for o, _ in swaps)


def test_an_intrinsic_class_swap_is_a_verb_the_source_uses() -> None:
    src = "Police arrested two men on Friday. A third man was convicted in May."
    found = perturb(src, "Police arrested two men.", types=["predicate_verb"], max_per_type=None)
    kinds = {(p.replacement, p.type) for p in found}
    assert ("convicted", "predicate_verb_intrinsic") in kinds
    assert ("acquitted", "predicate_verb_extrinsic") in kinds
    assert ("convicted", "predicate_verb_extrinsic") not in kinds


def test_aspect_and_schedule_verbs_are_separate_classes() -> None:
    source = "The report came out on Monday. Officials spoke to reporters about it."
    swaps = verb_swaps(source, "It is not known what started the blaze.")
    assert swaps and {r for _, r in swaps} <= {"ended", "stopped"}
    assert ("denied", "confirmed") in verb_swaps(source, "The club denied the claims.")


def test_a_place_is_not_swapped_for_a_name_tagged_a_person_elsewhere() -> None:
    src = (
        "Kenyan runner Ruth Chebet won the Valencia marathon on Sunday in 2 hours 17 minutes. "
        "Chebet, 29, pulled away after 35 kilometres. Her coach said she had trained in the "
        "Alps for a year."
    )
    summary = "Ruth Chebet won the Valencia marathon. She had trained in the Alps for a year."

    def swaps(rules: int) -> set[tuple[str, str]]:
        found = perturb(
            src, summary, types=["circumstance_intrinsic"], max_per_type=None, rules=rules
        )
        return {(p.original, p.replacement) for p in found}

    assert ("the Alps", "Chebet") in swaps(2)
    assert ("the Alps", "Chebet") not in swaps(3)


GERMAN_SOURCE = (
    "Der Bürgermeister von Berlin, Klaus Wowereit, eröffnete am Montag den neuen Flughafen. "
    "Er sagte, das Projekt habe sechs Milliarden Euro gekostet und sei ein großer Erfolg für die "
    "Stadt, die lange darauf gewartet habe."
)
GERMAN_SUMMARY = "Klaus Wowereit eröffnete am Montag den Flughafen, der 6 Milliarden Euro kostete."


def test_rules_3_makes_no_edit_of_a_text_that_does_not_read_as_english() -> None:
    """English rules on German made garbage ("eröffnete am not Montag", a person swapped in for
    "den Flughafen") that any fluency-sensitive metric ranks below the original."""
    from faithgate.perturb import reads_as_english

    assert not reads_as_english(GERMAN_SOURCE)
    assert perturb(GERMAN_SOURCE, GERMAN_SUMMARY) == []
    assert perturb(GERMAN_SOURCE, GERMAN_SUMMARY, rules=2)  # revision 2 is kept as it was
    english = (
        "The mayor of Berlin, Klaus Wowereit, opened the new airport on Monday. He said the "
        "project had cost six billion euros and was a great success for the city."
    )
    assert reads_as_english(english) and reads_as_english("Wowereit eröffnete ihn.")  # too short
