"""Minimal unfaithful edits of a faithful summary, in BUMP's error taxonomy.

BUMP (Ma et al., 2023, "BUMP: A Benchmark of Unfaithful Minimal Pairs for Meta-Evaluation of
Faithfulness Metrics", ACL) asks annotators to make *one* edit to a faithful reference summary so
that it becomes unfaithful, and labels the edit with a type:

- **predicate**: the main verb/relation is wrong (here: negation, antonym, or another verb),
- **entity**: a subject/object is swapped for another entity of the source (*intrinsic*) or for
  one that the source does not mention (*extrinsic*),
- **circumstance**: the time, duration or location of an event is wrong (intrinsic/extrinsic),
- **coreference**: a pronoun is replaced so that it points to a wrong antecedent,

to which faithgate adds **number** changes (a quantity the source does not state).

``perturb(source, summary)`` generates such edits automatically with spaCy: each variant differs
from the summary in exactly one span, records the original and the replacement span with their
character offsets, and is labelled with its BUMP ``error_type``. Generation is deterministic for
a given ``seed``. A candidate that would not contradict or go beyond the source is dropped: an
intrinsic swap must bring in a *different* referent (no word shared with the replaced mention), an
extrinsic replacement must not occur in the source at all, and no edited sentence may occur
verbatim in the source. A predicate edit (another verb, an antonym) is also dropped when the
replacement is a synonym of the original (``data/synonyms.json``: "hurt" -> "injured") or when
a source sentence of the same polarity already holds every content word of the edited
sentence ("No one was injured" makes "Nobody was injured" true, whatever verb it replaced).
These are heuristics: the edits are meant for meta-evaluation (does a
metric rank the faithful summary higher?), not as ground truth.

``rules=1`` gives the edits the first shipped checker was trained on, with the predicate
filter above, which came after its pairs were made (``drop_still_true=False`` leaves it out, as
``faithgate train --synthesis 1`` does to make those pairs again). ``rules=2`` also: moves
a bounded number past its bound ("more than 105" -> "more than 210", never "more than 63";
"up to 200" only lower); does not negate a sentence that already holds a negation
("Nobody was hurt"); leaves numbers in names ("Apollo 11", "Boeing 737") and lone multipliers
("hundred") alone; points no pronoun at a person named in its own sentence, nor (unless a
subject pronoun follows a subject person) at one the summary named before it; swaps no part of a
longer name ("Rosie the [Riveter]", "[Dalian] Wanda") and drops a pool mention's trailing
"'s"; keeps an article single ("The BBC" -> "The World Bank"), a sentence-final period after
"U.S." and a thousands separator in "1,200.5"; takes aliases and initialisms for the same
referent ("the U.S." / "America", "NASA" / its expansion); swaps no verb inside a hyphenated
word or a name, swaps an intrinsic verb only for one the source uses with the same subject or
object (but not with all of its arguments: the source's own wording), and an extrinsic one only
when the original is itself one of the listed event verbs; swaps no name beside a capitalised
word mid-sentence ("Made In [Chelsea]"); makes no swap that only says less (a bare part of the
day for a time, "6.15 pm" -> "evening"; a place the source puts the original in, "Buckingham
Palace" -> "London"); turns "old" into "young" only for the living (not "five years young", "the
young chapel"); and gives each edit the same type whichever types are asked for.

``rules=3`` (the default) keeps rules 2 and replaces its verb swaps, most of which a blind
reading judged garbage ("lost 1-0" -> "confessed 1-0", "raised odds" -> "closed odds"): a verb
is swapped only for another of its class in ``data/verb_frames.json`` (legal: "arrested" ->
"acquitted"; quantity: "rose 17%" -> "declined 17%"; trade, contest, motion, ...), never for
a class-mate that can say the same ("announced" -> "revealed"), and only in a frame both fit:
the same use (with an object or passive, or without), an object of the kind the class takes (a
person is arrested, a thing is sold: "released the ball" is not the legal sense), a that-clause
or to-infinitive only for verbs that take one; no phrasal verb ("selling off"), idiom ("joining
forces"), verb with its own preposition ("charged with"), participle modifying a noun ("three
years left") and no quantity verb without its amount ("fell down a cliff"). Intrinsic when the
source uses the class-mate as a verb, extrinsic when the source does not have the word at all.
Nor does it swap a place, organisation or other non-person mention for a name that is tagged a
person elsewhere in the texts ("trained in the Alps" -> "trained in Chebet"). Its rules are
English: a source that does not read as English (``reads_as_english``) gets no edit at all, where
rules 1 and 2 made garbage ("eröffnete am Montag" -> "eröffnete am not Montag"). An antonym of
a time or place word is filed as the circumstance it changes ("before the election" -> "after",
"north of Sydney" -> "south", "arrived late" -> "early"), and a bound's before a number
("more than 200" -> "fewer than 200") as a number edit; rules 1 and 2 call them all
``predicate_antonym``.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
import types as _pytypes
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from faithgate.errors import InputError

# Revisions of the edit rules (``perturb(..., rules=...)``): 1 = the rules the first shipped
# checker's contradiction pairs were made with (kept so that its build reproduces), 2 = the
# review fixes, 3 = verb swaps by class (see the module docstring). Each revision's edits stay
# reproducible; new code gets the latest.
RULES = 3

# variant type -> BUMP error type (intrinsic/extrinsic predicate edits are decided per edit)
TYPES: dict[str, str] = {
    "predicate_negation": "Intrinsic Predicate",
    "predicate_antonym": "Extrinsic Predicate",  # Intrinsic when the antonym occurs in the source
    "predicate_verb_intrinsic": "Intrinsic Predicate",
    "predicate_verb_extrinsic": "Extrinsic Predicate",
    "entity_intrinsic": "Intrinsic Entity",
    "entity_extrinsic": "Extrinsic Entity",
    "circumstance_intrinsic": "Intrinsic Circumstance",
    "circumstance_extrinsic": "Extrinsic Circumstance",
    "coreference": "Coreference",
    "number": "Number",
}

# Entity labels that name participants; GPE/LOC/FAC count as circumstance (location) when they
# are the object of a locative preposition ("in Paris"), and as entities otherwise.
_PARTICIPANT_LABELS = {
    "PERSON",
    "ORG",
    "NORP",
    "GPE",
    "LOC",
    "FAC",
    "PRODUCT",
    "EVENT",
    "WORK_OF_ART",
}
_PLACE_LABELS = {"GPE", "LOC", "FAC"}
_TIME_LABELS = {"DATE", "TIME"}
_NUMBER_LABELS = {"CARDINAL", "MONEY", "PERCENT", "QUANTITY"}
_STOP = {"the", "a", "an", "of", "and", "'s", "’s", "-", "mr", "mrs", "ms", "dr", "de", "la", "van"}


@dataclass(frozen=True)
class Perturbation:
    """One minimally edited variant of a summary.

    ``summary[start:start + len(replacement)]`` is the new span; ``original`` was at
    ``[start, end)`` in the unedited summary. ``type`` is one of ``TYPES``; ``error_type`` is the
    BUMP label ("Intrinsic Entity", ...); ``detail`` says which rule made the edit.
    """

    type: str
    error_type: str
    summary: str
    original: str
    replacement: str
    start: int
    end: int
    detail: str = ""

    @property
    def new_end(self) -> int:
        return self.start + len(self.replacement)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- word lists (package data)


@cache
def _data(name: str) -> dict[str, Any]:
    text = resources.files("faithgate").joinpath("data", name).read_text(encoding="utf-8")
    return json.loads(text)


def _verb_form(lemma: str, tag: str, table: str = "verb_forms.json") -> str | None:
    forms = _data(table)["verbs"].get(lemma)
    if forms is None:
        return None
    if tag in ("VB", "VBP"):
        return lemma
    return forms.get(tag)


# ---------------------------------------------------------------- helpers


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _content_words(text: str) -> set[str]:
    words = re.findall(r"[\w']+", text.lower())
    return {w.removesuffix("'s") for w in words if w not in _STOP}


def _word_in(word: str, text_lower: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(word.lower())}(?![\w])", text_lower) is not None


def _match_case(replacement: str, original: str, sentence_start: bool) -> str:
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if sentence_start and original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


@dataclass(frozen=True)
class _Candidate:
    type: str
    start: int
    end: int
    replacement: str
    detail: str
    error_type: str | None = None
    # Lemma of the replacement word (predicate edits), for the synonym and source checks.
    lemma: str | None = None


# Predicate edits whose truth depends on the replacement's meaning (negation flips polarity,
# so it is never a synonym of the original).
_MEANING_EDITS = {"predicate_antonym", "predicate_verb_intrinsic", "predicate_verb_extrinsic"}
_NEGATORS = {"not", "n't", "no", "never", "nobody", "none", "nothing", "neither", "nor", "nowhere"}


@cache
def _synonym_groups() -> dict[str, frozenset[str]]:
    """Verb lemma -> every lemma sharing a synonym group with it."""
    index: dict[str, set[str]] = {}
    for group in _data("synonyms.json")["verbs"]:
        for lemma in group:
            index.setdefault(lemma, set()).update(group)
    return {k: frozenset(v) for k, v in index.items()}


def _synonyms(a: str, b: str) -> bool:
    return b.lower() in _synonym_groups().get(a.lower(), frozenset())


def _negated(tokens: Iterable[Any]) -> bool:
    """Polarity of a sentence: an odd number of negators ("not", "no one", "nobody", ...)."""
    return sum(t.dep_ == "neg" or t.text.lower() in _NEGATORS for t in tokens) % 2 == 1


def _is_content(tok: Any) -> bool:
    return not (tok.is_stop or tok.is_punct or tok.is_space or tok.text.lower() in _NEGATORS)


class _Context:
    """Parsed source and summary plus the lookups every rule needs."""

    def __init__(
        self,
        source: str,
        summary: str,
        spacy_model: str | None,
        rules: int = RULES,
        drop_still_true: bool = True,
    ) -> None:
        from faithgate.text import parse

        self.rules = rules
        self.drop_still_true = drop_still_true
        self.source = source
        self.summary = summary
        self.src = parse(source, spacy_model)
        self.doc = parse(summary, spacy_model)
        self.src_lower = _norm(source)
        # Lower-cased corpora (SummEval, Polytope) cannot use capitalisation as evidence.
        self.cased = source != source.lower()
        self.src_lemmas = {t.lemma_.lower() for t in self.src}
        self.src_words = {t.text.lower() for t in self.src}
        self.src_numbers = {_number_value(t.text) for t in self.src if t.like_num} - {None}
        self.mention_words = [
            _content_words(e.text)
            for e in (*self.src.ents, *self.doc.ents)
            if e.label_ in _PARTICIPANT_LABELS
        ]
        self._src_sent_forms: list[tuple[bool, frozenset[str]]] | None = None
        # Words of every mention tagged a person: a name tagged a place elsewhere is no place.
        self.person_words = set().union(
            *(
                _content_words(e.text)
                for e in (*self.src.ents, *self.doc.ents)
                if e.label_ == "PERSON"
            )
        )

    def src_sent_forms(self) -> list[tuple[bool, frozenset[str]]]:
        """Polarity and word forms (texts and lemmas) of each source sentence, computed once:
        ``_still_true`` asks for them for every predicate candidate."""
        if self._src_sent_forms is None:
            self._src_sent_forms = [
                (
                    _negated(sent),
                    frozenset({t.text.lower() for t in sent} | {t.lemma_.lower() for t in sent}),
                )
                for sent in self.src.sents
            ]
        return self._src_sent_forms

    def src_ents(self, labels: set[str]) -> list[Any]:
        return [e for e in self.src.ents if e.label_ in labels]

    def sentence_of(self, token: Any) -> Any:
        return token.sent


# ---------------------------------------------------------------- rules


def _negation(ctx: _Context) -> Iterator[_Candidate]:
    """Negate the root predicate: 'was' -> 'was not', 'appeared' -> 'did not appear'."""
    for sent in ctx.doc.sents:
        root = sent.root
        if root.pos_ not in ("VERB", "AUX") or any(c.dep_ == "neg" for c in root.children):
            continue
        if ctx.rules >= 2 and _negated_anywhere(sent):
            continue  # 'Nobody was hurt' -> 'Nobody was not hurt' is no contradiction
        auxes = [c for c in root.children if c.dep_ in ("aux", "auxpass") and c.i < root.i]
        finite = [a for a in auxes if a.tag_ in ("MD", "VBD", "VBZ", "VBP")]
        if finite:
            aux = finite[0]
            yield _Candidate(
                "predicate_negation",
                aux.idx,
                aux.idx + len(aux.text),
                f"{aux.text} not",
                "negation",
            )
        elif root.lemma_ == "be" and root.tag_ in ("VBD", "VBZ", "VBP"):
            yield _Candidate(
                "predicate_negation",
                root.idx,
                root.idx + len(root.text),
                f"{root.text} not",
                "negation",
            )
        elif root.pos_ == "VERB" and root.tag_ in ("VBD", "VBZ", "VBP"):
            do = {"VBD": "did", "VBZ": "does", "VBP": "do"}[root.tag_]
            rep = _match_case(f"{do} not {root.lemma_.lower()}", root.text, root.is_sent_start)
            yield _Candidate(
                "predicate_negation", root.idx, root.idx + len(root.text), rep, "negation"
            )


def _negated_anywhere(sent: Any) -> bool:
    """A negation anywhere in the sentence: 'not', 'never', 'no one', 'nothing', ..."""
    return any(t.dep_ == "neg" or t.lower_ in _NEGATORS for t in sent)


def _antonym(ctx: _Context) -> Iterator[_Candidate]:
    """Replace a verb, adjective or adverb by its antonym from ``data/antonyms.json``."""
    lists = _data("antonyms.json")
    for tok in ctx.doc:
        if _in_compound(tok):
            continue
        rep = None
        if tok.pos_ == "VERB" and tok.lemma_.lower() in lists["verbs"]:
            other = lists["verbs"][tok.lemma_.lower()]
            rep = _verb_form(other, tok.tag_)
            lemma = other
        elif tok.pos_ in ("ADJ", "ADV", "NOUN", "ADP") and tok.text.lower() in lists["words"]:
            rep = lists["words"][tok.text.lower()]
            lemma = rep
        if not rep or rep.lower() == tok.text.lower():
            continue
        if ctx.rules >= 2 and (tok.ent_type_ or _not_an_age_antonym(tok, rep)):
            continue  # inside a name ('Black Fell'), or 'five years young', 'a young chapel'
        intrinsic = lemma in ctx.src_lemmas or rep.lower() in ctx.src_words
        kind = "predicate_antonym"
        error_type = "Intrinsic Predicate" if intrinsic else "Extrinsic Predicate"
        if ctx.rules >= 3 and tok.pos_ != "VERB":
            word = tok.lower_
            if word in _BOUND_ANTONYMS and _before_number(tok):
                kind, error_type = "number", None  # 'more than 200' -> 'fewer than 200'
            elif word in _TIME_ANTONYMS or word in _PLACE_ANTONYMS:
                # 'before the election' -> 'after', 'north of Sydney' -> 'south': when or
                # where, BUMP's circumstance, not the predicate
                kind = "circumstance_intrinsic" if intrinsic else "circumstance_extrinsic"
                error_type = None
        yield _Candidate(
            kind,
            tok.idx,
            tok.idx + len(tok.text),
            _match_case(rep, tok.text, tok.is_sent_start),
            "antonym",
            error_type,
            lemma=lemma,
        )


# Antonyms (rules 3) that change when or where something happened (circumstance), or a bound
# of a number (number); the other words of ``antonyms.json`` change the predicate. Rules 1
# and 2 file them all under predicate_antonym (their edits stay as they were).
_TIME_ANTONYMS = frozenset({"before", "after", "early", "late", "earlier", "later"})
_PLACE_ANTONYMS = frozenset(
    {"north", "south", "east", "west", "northern", "southern", "eastern", "western",
     "inside", "outside"}
)  # fmt: skip
_BOUND_ANTONYMS = frozenset({"more", "fewer", "most", "least"})


def _before_number(tok: Any) -> bool:
    """'more' in 'more than 200', 'more than $5m', 'at least 3': a number follows, past
    'than' and a currency sign."""
    doc = tok.doc
    i = tok.i + 1
    while i < len(doc) and (doc[i].lower_ == "than" or doc[i].tag_ == "$"):
        i += 1
    return i < len(doc) and doc[i].like_num


_AGE_UNITS = frozenset({"year", "month", "week", "day", "hour", "minute", "decade", "century"})
_LIVING = frozenset(
    {"man", "woman", "boy", "girl", "child", "person", "people", "player", "actor", "actress",
     "son", "daughter", "mother", "father", "star", "singer", "student", "fan", "team",
     "couple", "soldier", "worker", "animal", "dog", "cat", "horse", "tree", "plant"}
)  # fmt: skip


def _not_an_age_antonym(tok: Any, rep: str) -> bool:
    """'old' <-> 'young' where it is no antonym: an age ('five years old' -> 'five years
    young') or a thing that is not alive ('the old chapel' -> 'the young chapel')."""
    if {tok.lower_, rep.lower()} != {"old", "young"}:
        return False
    before = tok.doc[tok.i - 1] if tok.i > 0 else None
    if before is not None and before.lemma_.lower() in _AGE_UNITS:
        return True
    head = tok.head
    return head.i != tok.i and head.ent_type_ != "PERSON" and head.lemma_.lower() not in _LIVING


def _in_compound(tok: Any) -> bool:
    """Part of a hyphenated word such as '71-year-old'."""
    doc = tok.doc
    before = tok.i > 0 and doc[tok.i - 1].text in ("-", "–") and not doc[tok.i - 1].whitespace_
    after = tok.i + 1 < len(doc) and doc[tok.i + 1].text in ("-", "–") and not tok.whitespace_
    return bool(before or after)


def _content_verbs(doc: Any) -> list[Any]:
    light = set(_data("closed_classes.json")["light_verbs"])
    return [
        t
        for t in doc
        if t.pos_ == "VERB"
        and t.tag_ in ("VB", "VBD", "VBZ", "VBP", "VBG", "VBN")
        and t.lemma_.lower() not in light
        and t.text.isalpha()
    ]


def _has_object(tok: Any) -> bool:
    """Transitive use: a direct object, or a passive (its object is the subject)."""
    return any(c.dep_ in ("dobj", "obj", "auxpass", "nsubjpass") for c in tok.children)


def _changed_verb(ctx: _Context) -> Iterator[_Candidate]:
    """Replace a content verb by another verb of the source (intrinsic) or one absent from it
    (extrinsic), in the same inflection and with the same transitivity."""
    if ctx.rules >= 3:
        yield from _class_verb(ctx)
        return
    src_verbs = _content_verbs(ctx.src)
    forms = _data("verb_forms.json")["verbs"]
    v2 = ctx.rules >= 2
    names = {t.lower_ for t in ctx.src if t.pos_ == "PROPN" or t.ent_type_} if v2 else set()
    for tok in _content_verbs(ctx.doc):
        if v2 and _not_a_verb(tok, names):
            continue
        sent_lemmas = {t.lemma_.lower() for t in tok.sent}
        transitive = _has_object(tok)
        args = _arguments(tok)
        seen: set[str] = set()
        for sv in src_verbs:
            lemma = sv.lemma_.lower()
            if (
                sv.tag_ != tok.tag_
                or lemma in sent_lemmas
                or lemma in seen
                or _has_object(sv) != transitive
            ):
                continue
            if v2 and (not args & _arguments(sv) or args <= _arguments(sv)):
                # Only a verb the source uses with the same subject or object (else garbage),
                # and not with all of the summary verb's arguments: there it is the source's
                # own wording of the claim ('influence the election' / 'sway the election').
                continue
            seen.add(lemma)
            yield _Candidate(
                "predicate_verb_intrinsic",
                tok.idx,
                tok.idx + len(tok.text),
                _match_case(sv.text.lower(), tok.text, tok.is_sent_start),
                "verb",
                lemma=lemma,
            )
        if v2 and tok.lemma_.lower() not in forms:
            continue  # 'tear' -> 'admit': only swap one common event verb for another
        for lemma, info in forms.items():
            if lemma in ctx.src_lemmas or lemma in sent_lemmas or info["transitive"] != transitive:
                continue
            rep = _verb_form(lemma, tok.tag_)
            if rep and rep.lower() not in ctx.src_words:
                yield _Candidate(
                    "predicate_verb_extrinsic",
                    tok.idx,
                    tok.idx + len(tok.text),
                    _match_case(rep, tok.text, tok.is_sent_start),
                    "verb",
                    lemma=lemma,
                )


_PERSON_PRONOUNS = frozenset({"i", "me", "we", "us", "he", "him", "she", "her", "who", "whom"})


def _object_of(tok: Any) -> Any | None:
    """What a verb acts on: its direct object, or the subject of its passive."""
    passive = any(c.dep_ == "auxpass" for c in tok.children)
    for c in tok.children:
        if c.dep_ in ("dobj", "obj") or (passive and c.dep_ == "nsubjpass"):
            return c
    return None


def _object_kind(obj: Any) -> str | None:
    """'person', 'thing', or None when the mention could be either ('they', an organisation)."""
    if obj.ent_type_ in ("PERSON", "NORP") or obj.lower_ in _PERSON_PRONOUNS:
        return "person"
    if obj.lemma_.lower() in _data("verb_frames.json")["person_nouns"]:
        return "person"
    if obj.ent_type_ == "ORG" or obj.lower_ in ("they", "them", "you", "that", "which"):
        return None
    return "thing"


def _frame(tok: Any) -> tuple[str, str | None, bool, bool] | None:
    """The summary verb's use (t/i), object kind, and whether it takes a that-clause or a
    to-infinitive; None where no swap fits: a phrasal verb ('sell off'), a participle
    modifying a noun ('three years left', 'the man arrested'), an object of the wrong kind
    for the verb's class ('released the ball' is not the legal sense)."""
    frames = _data("verb_frames.json")
    info = frames["verbs"].get(tok.lemma_.lower())
    if info is None or tok.dep_ in ("acl", "amod", "compound"):
        return None
    if tok.dep_ == "conj" and tok.head.pos_ != "VERB":  # 'sexist or threatening behaviour'
        return None
    if any(c.dep_ == "prt" for c in tok.children):
        return None
    if any(c.dep_ == "prep" and c.lower_ in info["preps"] for c in tok.children):
        return None  # 'charged with', 'convicted of': a class-mate would need another preposition
    if any(c.dep_ in ("nsubj", "nsubjpass") and c.ent_type_ in _TIME_LABELS for c in tok.children):
        return None  # 'Anzac Day falls on a Saturday' is the calendar, not a quantity
    obj = _object_of(tok)
    if obj is None and any(c.dep_ == "auxpass" and c.lemma_ == "get" for c in tok.children):
        return None  # 'used to get lost': an adjective, and no patient to check
    if obj is not None and obj.lemma_.lower() in frames["idiom_objects"]:
        return None  # 'joining forces', 'lost his way'
    kind = _object_kind(obj) if obj is not None else None
    if obj is not None and info["object"] and kind and kind != info["object"]:
        return None
    use = "t" if obj is not None or _has_object(tok) else "i"
    if use not in info["uses"]:
        return None
    if info["class"] == "quantity" and use == "i" and not _measured(tok):
        return None  # 'fell down a cliff' is a body moving; 'rose 17 percent' a quantity
    clause = any(c.dep_ == "ccomp" for c in tok.children)
    if info["needs_clause"] and not (
        clause or (obj is not None and obj.lemma_.lower() in frames["propositions"])
    ):
        return None  # 'denied the claims', not 'denied an HD map' or 'denied as face of'
    infinitive = any(
        c.dep_ == "xcomp" and any(g.tag_ == "TO" for g in c.children) for c in tok.children
    )
    return use, kind, clause, infinitive


def _measured(tok: Any) -> bool:
    """A change of quantity with its amount: 'rose 17.2 percent', 'fell by 3%', 'grew to 5m'."""
    for c in tok.children:
        amount = any(t.like_num or t.ent_type_ in _NUMBER_LABELS for t in c.subtree)
        if amount and (c.dep_ in ("npadvmod", "dobj", "obj") or c.lower_ in ("by", "to", "from")):
            return True  # not 'fell to his death'
    return False


def _fits(info: dict[str, Any], frame: tuple[str, str | None, bool, bool]) -> bool:
    use, kind, clause, infinitive = frame
    return (
        use in info["uses"]
        and not (kind and info["object"] and kind != info["object"])
        and (info["clause"] or not clause)
        and (info["infinitive"] or not infinitive)
    )


def _class_verb(ctx: _Context) -> Iterator[_Candidate]:
    """Rules 3: swap a verb only for another of its class in ``data/verb_frames.json`` ('arrested'
    -> 'acquitted', 'raised' -> 'reduced', 'announced' -> 'denied'), one that fits the frame
    the sentence gives it (object or none, a person or a thing, a that-clause, a to-infinitive):
    a verb of another class makes garbage ('lost 1-0' -> 'confessed 1-0'). Intrinsic when the
    source uses the new verb (not with all of the summary verb's arguments: there it is the
    source's own wording), extrinsic when it does not."""
    frames = _data("verb_frames.json")["verbs"]
    same_groups = _data("verb_frames.json")["same"]
    names = {t.lower_ for t in ctx.src if t.pos_ == "PROPN" or t.ent_type_}
    src_uses: dict[str, list[Any]] = {}
    for sv in _content_verbs(ctx.src):
        src_uses.setdefault(sv.lemma_.lower(), []).append(sv)
    for tok in _content_verbs(ctx.doc):
        lemma = tok.lemma_.lower()
        if _not_a_verb(tok, names) or lemma not in frames:
            continue
        frame = _frame(tok)
        if frame is None:
            continue
        sent_lemmas = {t.lemma_.lower() for t in tok.sent}
        args = _arguments(tok)
        same = {v for group in same_groups if lemma in group for v in group}
        for other, info in frames.items():
            if info["class"] != frames[lemma]["class"] or other in sent_lemmas or other in same:
                continue
            if not _fits(info, frame):
                continue
            rep = _verb_form(other, tok.tag_, "verb_frames.json")
            if not rep:
                continue
            if other in src_uses:
                if args and any(args <= _arguments(sv) for sv in src_uses[other]):
                    continue
                kind = "predicate_verb_intrinsic"
            elif other in ctx.src_lemmas or rep.lower() in ctx.src_words:
                continue  # in the source, but not as a verb: neither kind is clean
            else:
                kind = "predicate_verb_extrinsic"
            yield _Candidate(
                kind,
                tok.idx,
                tok.idx + len(tok.text),
                _match_case(rep, tok.text, tok.is_sent_start),
                "verb",
                lemma=other,
            )


def _not_a_verb(tok: Any, names: set[str]) -> bool:
    """Tokens that a verb swap turns into garbage: part of a hyphenated word ('table-topping'),
    of a name ('Loganair Aberdeen to Shetland': a word between two proper nouns that takes no
    subject or object of its own), or a name in lower-cased text. Proper nouns on both sides
    of a verb are usually its subject and object ('Smith met Jones')."""
    doc = tok.doc
    return bool(
        _in_compound(tok)
        or tok.ent_type_
        or tok.dep_ in ("compound", "flat", "amod")
        or (
            all(0 <= i < len(doc) and doc[i].pos_ == "PROPN" for i in (tok.i - 1, tok.i + 1))
            and not _arguments(tok)
        )
        or tok.lower_ in names
    )


def _arguments(tok: Any) -> set[str]:
    """Lemmas of a verb's subject and object heads (pronouns left out: 'it' fits anything)."""
    return {
        c.lemma_.lower()
        for c in tok.children
        if c.dep_ in ("nsubj", "nsubjpass", "dobj", "obj") and c.pos_ in ("NOUN", "PROPN")
    }


def _is_location(ent: Any) -> bool:
    preps = set(_data("closed_classes.json")["location_preps"])
    head = ent.root.head
    return ent.label_ in _PLACE_LABELS and ent.root.dep_ == "pobj" and head.lower_ in preps


_TIME_WORDS = {
    "yesterday",
    "today",
    "tomorrow",
    "tonight",
    "weekend",
    "season",
    "spring",
    "summer",
    "autumn",
    "winter",
    "ago",
    "last",
    "next",
    "earlier",
    "later",
    "christmas",
    "easter",
}


def _time_like(ent: Any, specific: bool = False) -> bool:
    """A DATE/TIME entity that reads as a time expression (spaCy also tags ages, phone
    numbers and bare counts as DATE): it names a month, weekday, part of the day, a time unit
    or a year. ``specific``: a point in time, not just a unit ('Months' is no date)."""
    closed = _data("closed_classes.json")
    kinds = (
        ("months", "weekdays", "day_parts")
        if specific
        else ("months", "weekdays", "day_parts", "duration_units")
    )
    vocab = {w.lower() for k in kinds for w in closed[k]} | _TIME_WORDS
    for t in ent:
        if t.lower_ in vocab or t.lower_.rstrip("s") in vocab:
            return True
        if t.text.isdigit() and len(t.text) == 4 and 1800 <= int(t.text) <= 2100:
            return True
        if re.fullmatch(r"\d{1,2}[:.]\d{2}(am|pm)?|\d{1,2}(am|pm)", t.lower_):
            return True
    return False


def _prep(ent: Any) -> str:
    head = ent.root.head
    return head.lower_ if ent.root.dep_ == "pobj" else ""


def _is_age(ent: Any) -> bool:
    return "old" in ent.text.lower() or "aged" in ent.text.lower()


def _is_duration(ent: Any) -> bool:
    units = set(_data("closed_classes.json")["duration_units"])
    words = [t.lower_ for t in ent]
    return (
        any(w in units for w in words)
        and any(t.like_num for t in ent)
        and not _is_age(ent)
        and "ago" not in words
    )


def _words_overlap(wa: set[str], wb: set[str]) -> bool:
    """Shared word, counting a long prefix as shared ('Shirley' / 'Shirleys')."""
    return any(
        x == y or (min(len(x), len(y)) >= 4 and (x.startswith(y) or y.startswith(x)))
        for x in wa
        for y in wb
    )


def _different_referent(a: str, b: str, ctx: _Context | None = None) -> bool:
    """Two mentions that share no content word are taken to name different things
    ("Keefe" and "Mary Doyle Keefe" share one, so swapping them would still be true), unless
    one source mention contains words of both ("Gatewood" and "Galbraith" within
    "Gatewood Galbraith")."""
    wa, wb = _content_words(a), _content_words(b)
    if not wa or not wb or _words_overlap(wa, wb):
        return False
    if ctx is not None and ctx.rules >= 2 and _same_by_alias(a, b):
        return False
    if ctx is not None:
        for mention in ctx.mention_words:
            if _words_overlap(mention, wa) and _words_overlap(mention, wb):
                return False
    return True


# Names of one referent that share no word ('The U.S.' is not another country than 'America').
_ALIASES = (
    {"us", "usa", "america", "united states", "united states of america"},
    {"uk", "britain", "great britain", "united kingdom"},
    {"un", "united nations"},
    {"eu", "european union"},
)


def _alias_key(name: str) -> str:
    words = re.findall(r"[\w']+", name.replace(".", "").lower())
    words = [w.removesuffix("'s") for w in words]
    return " ".join(words[1:] if words[:1] == ["the"] else words)


def _same_by_alias(a: str, b: str) -> bool:
    """'U.S.' / 'the United States' / 'America'; an initialism and its expansion
    ('NASA' / 'National Aeronautics and Space Administration')."""
    ka, kb = _alias_key(a), _alias_key(b)
    if any(ka in group and kb in group for group in _ALIASES):
        return True
    for short, full in ((a, b), (b, a)):
        letters = re.sub(r"[.\s]", "", short.removesuffix("'s"))
        if 2 <= len(letters) <= 6 and letters.isalpha() and letters.isupper():
            initials = "".join(w[0] for w in _alias_key(full).split() if w not in _STOP)
            if initials == letters.lower():
                return True
    return False


def _partial_name(ent: Any) -> bool:
    """A mention that is only part of a longer name: a proper noun right beside it or tied
    to it ('Jodi [Arias]', '[Dalian] Wanda', 'Rosie the [Riveter]'), so that a swap would make
    a half-name ('Rosie the Rockwell') rather than another referent."""
    doc = ent.doc
    inside = range(ent.start, ent.end)
    neighbours = [doc[i] for i in (ent.start - 1, ent.end) if 0 <= i < len(doc)]
    if any(t.pos_ == "PROPN" for t in neighbours):
        return True
    # A capitalised word beside it mid-sentence is part of a title the parser did not tag
    # ('Made In [Chelsea]', '[Burger King] Bacon and Cheese Whopper').
    if any(t.is_title and t.is_alpha and not t.is_sent_start for t in neighbours):
        return True
    for tok in ent:
        if tok.head.i not in inside and tok.head.pos_ == "PROPN" and tok.dep_ != "pobj":
            return True
        if any(
            c.i not in inside and c.pos_ == "PROPN" and c.dep_ in ("compound", "flat", "dobj")
            for c in tok.children
        ):
            return True
    return False


def _mention_text(ctx: _Context, ent: Any) -> str:
    """A pool mention as a replacement: rules 2 drop a trailing possessive ('Travis
    Alexander's' would make "Jodi Travis Alexander's is sentenced")."""
    text = ent.text.strip()
    if ctx.rules >= 2:
        text = re.sub(r"\s*['’]s$", "", text)
    return text


def _swap_candidates(
    ctx: _Context, ent: Any, pool: list[Any], kind: str, detail: str
) -> Iterator[_Candidate]:
    sent_text = ent.sent.text
    # words of the other mentions in this sentence: 'Newman admired Galbraith' must not become
    # 'Newman admired Terrill Newman'
    others = set().union(*(_content_words(e.text) for e in ent.sent.ents if e != ent))
    seen: set[str] = set()
    if ctx.rules >= 2 and _partial_name(ent):
        return
    for other in pool:
        text = _mention_text(ctx, other)
        if ctx.rules >= 2 and (not text or _partial_name(other)):
            continue
        key = _norm(text)
        if ctx.cased and other.label_ in _PARTICIPANT_LABELS and not text[:1].isupper():
            continue  # a lower-case "name" in cased text is an NER error
        if detail in ("time", "duration") and _prep(other) != _prep(ent):
            continue  # 'on Tuesday' cannot become 'on daily': keep the same preposition
        if ctx.rules >= 2 and _generalises(ctx, ent.text, text, detail):
            continue
        if ctx.rules >= 3 and ent.label_ != "PERSON" and _content_words(text) <= ctx.person_words:
            continue  # 'trained in the Alps' -> 'in Chebet': a person the tagger took for a place
        if (
            key in seen
            or not _different_referent(ent.text, text, ctx)
            or _words_overlap(_content_words(text), others)
            or _norm(text) in _norm(sent_text)
        ):
            continue
        seen.add(key)
        yield _Candidate(kind, ent.start_char, ent.end_char, text, detail)


_DAY_PARTS = frozenset(
    {"morning", "afternoon", "evening", "night", "tonight", "midday", "noon", "midnight"}
)


def _generalises(ctx: _Context, original: str, replacement: str, detail: str) -> bool:
    """A swap that only says less, so the source may still support it: a bare part of the day
    for a clock time or a date ('6.15 pm' -> 'evening', 'Tuesday' -> 'evening': the source
    says 'Tuesday evening'), or a place the source puts the original in, or in the original
    ('Buckingham Palace' -> 'London' beside 'Buckingham Palace, London')."""
    if detail == "time":
        words = _norm(replacement).split()
        bare = bool(words) and words[-1] in _DAY_PARTS and len(words) <= 2
        return bare and not set(_norm(original).split()) & _DAY_PARTS
    if detail == "location":
        a = re.escape(_norm(original).removeprefix("the "))
        b = re.escape(_norm(replacement).removeprefix("the "))
        link = r"\s*(?:,|\bin\b|\bnear\b|\bof\b)\s*(?:the\s+)?"
        return bool(re.search(rf"\b{a}{link}{b}\b|\b{b}{link}{a}\b", ctx.src_lower))
    return False


def _extrinsic_candidates(
    ctx: _Context, ent: Any, names: Iterable[str], kind: str, detail: str
) -> Iterator[_Candidate]:
    summary_lower = _norm(ctx.summary)
    if ctx.rules >= 2 and _partial_name(ent):
        return
    for name in names:
        words = _content_words(name)
        if not words or any(
            _word_in(w, ctx.src_lower) or _word_in(w, summary_lower) for w in words
        ):
            continue
        yield _Candidate(kind, ent.start_char, ent.end_char, name, detail)


def _entity(ctx: _Context) -> Iterator[_Candidate]:
    """Swap a participant (person, organisation, group, place not used as a location, ...)."""
    fillers = _data("extrinsic_entities.json")
    for ent in ctx.doc.ents:
        if ent.label_ not in _PARTICIPANT_LABELS or _is_location(ent):
            continue
        labels = _PLACE_LABELS if ent.label_ in _PLACE_LABELS else {ent.label_}
        pool = [e for e in ctx.src_ents(labels) if not _is_location(e)] or ctx.src_ents(labels)
        yield from _swap_candidates(ctx, ent, pool, "entity_intrinsic", ent.label_)
        yield from _extrinsic_candidates(
            ctx, ent, fillers.get(ent.label_, []), "entity_extrinsic", ent.label_
        )


def _circumstance(ctx: _Context) -> Iterator[_Candidate]:
    """Change when, for how long or where something happened."""
    closed = _data("closed_classes.json")
    fillers = _data("extrinsic_entities.json")
    for ent in ctx.doc.ents:
        if _is_location(ent):
            pool = [e for e in ctx.src_ents(_PLACE_LABELS)]
            yield from _swap_candidates(ctx, ent, pool, "circumstance_intrinsic", "location")
            yield from _extrinsic_candidates(
                ctx, ent, fillers["GPE"], "circumstance_extrinsic", "location"
            )
        elif (
            ent.label_ in _TIME_LABELS
            and not _is_age(ent)
            and _time_like(ent)
            and ent.root.dep_ not in ("compound", "amod", "nmod", "poss")
        ):
            duration = _is_duration(ent)
            detail = "duration" if duration else "time"
            pool = [
                e
                for e in ctx.src_ents(_TIME_LABELS)
                if not _is_age(e)
                and _is_duration(e) == duration
                and (_is_duration(e) or _time_like(e, specific=True))
            ]
            yield from _swap_candidates(ctx, ent, pool, "circumstance_intrinsic", detail)
            yield from _time_edits(ctx, ent, closed, detail)


def _time_edits(
    ctx: _Context, ent: Any, closed: dict[str, Any], detail: str
) -> Iterator[_Candidate]:
    """Extrinsic time edits inside a DATE/TIME entity: another month, weekday, part of the day,
    year or duration count that the source never mentions."""
    for tok in ent:
        for cls in ("months", "weekdays", "day_parts"):
            words = closed[cls]
            if tok.text.lower() in {w.lower() for w in words}:
                for w in words:
                    if w.lower() != tok.text.lower() and not _word_in(w, ctx.src_lower):
                        rep = _match_case(w, tok.text, False)
                        yield _Candidate(
                            "circumstance_extrinsic", tok.idx, tok.idx + len(tok.text), rep, detail
                        )
        if not tok.like_num:
            continue
        value = _number_value(tok.text)
        months = {m.lower() for m in closed["months"]}
        if (
            detail == "time"
            and value is not None
            and value <= 31
            and tok.text.isdigit()
            and any(t.lower_ in months for t in ent)
        ):
            # a day of the month: stay a valid day
            days = [d for d in (value + 3, value - 4, value + 9, value - 11) if 1 <= d <= 28]
            reps = [str(int(d)) for d in days if d not in ctx.src_numbers]
        elif detail == "time" and value is not None and not (1800 <= value <= 2100):
            reps = []  # an unknown kind of number in a date: leave it alone
        else:
            reps = _new_numbers(ctx, tok.text, year=detail == "time")
        for rep in reps:
            yield _Candidate(
                "circumstance_extrinsic", tok.idx, tok.idx + len(tok.text), rep, detail
            )


def _coreference(ctx: _Context) -> Iterator[_Candidate]:
    """Point a personal pronoun at another person of the source: 'he' -> 'Rockwell'."""
    pronouns = _data("closed_classes.json")["pronouns"]
    people = ctx.src_ents({"PERSON"})
    for tok in ctx.doc:
        if tok.lower_ not in pronouns or tok.tag_ not in ("PRP", "PRP$"):
            continue
        before = [e for e in ctx.doc.ents if e.label_ == "PERSON" and e.end <= tok.i]
        # Antecedent heuristic: the nearest person that is a grammatical subject (centering
        # theory's preference), else the nearest person.
        subjects = [e for e in before if e.root.dep_ in ("nsubj", "nsubjpass")]
        antecedent = (subjects or before)[-1].text if before else None
        possessive = tok.tag_ == "PRP$"
        sent_words = _content_words(tok.sent.text)
        earlier_words = _content_words(ctx.doc[: tok.i].text)
        trusted = bool(subjects) and tok.dep_ in ("nsubj", "nsubjpass")
        seen: set[str] = set()
        for person in people:
            name = person.text.strip()
            if _norm(name) in seen or (ctx.cased and not name[:1].isupper()):
                continue
            if antecedent is not None and not _different_referent(antecedent, name, ctx):
                continue
            # Without an antecedent in the summary, any named person could be the right one.
            if antecedent is None:
                continue
            seen.add(_norm(name))
            name_words = _content_words(name)
            if ctx.rules >= 2 and _words_overlap(name_words, sent_words):
                continue  # 'Guardiola tore his trousers' -> 'tore Guardiola's trousers' is true
            if ctx.rules >= 2 and not trusted and _words_overlap(name_words, earlier_words):
                # Unless a subject pronoun follows a subject person (centering), a pronoun may
                # point at any person the summary named before it, tagged or not: 'Anna says
                # she suspects her' -> 'suspects Gemma' and 'Rockwell painted Keefe. He paid
                # her' -> 'Norman Rockwell paid' are still true.
                continue
            if possessive and (name.endswith("'s") or name.endswith("’s")):
                continue
            rep = (f"{name}'" if name.endswith("s") else f"{name}'s") if possessive else name
            yield _Candidate(
                "coreference",
                tok.idx,
                tok.idx + len(tok.text),
                rep,
                f"{tok.lower_} -> other person",
            )


_NUMBER_WORDS = {
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "hundred": 100,
    "thousand": 1000,
}


def _number_value(text: str) -> float | None:
    t = text.lower().replace(",", "")
    if t in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[t])
    try:
        return float(t)
    except ValueError:
        return None


def _new_numbers(ctx: _Context, text: str, year: bool = False) -> list[str]:
    """Other values for a number, formatted like it, none of which the source states."""
    value = _number_value(text)
    if value is None or not math.isfinite(value):
        return []  # "1" and 400 zeros reads as inf: no edit of it, rather than an OverflowError
    lower = text.lower()
    if lower in _NUMBER_WORDS:
        options = [w for w, v in _NUMBER_WORDS.items() if v != value and w not in ctx.src_words]
        return [w.capitalize() if text[:1].isupper() else w for w in options[:4]]
    decimals = len(text.split(".")[1]) if "." in text else 0
    if year and decimals == 0 and 1800 <= value <= 2100:
        steps = [value - 3, value + 2, value - 10, value + 5]
    else:
        steps = [value * 2, value + max(1.0, round(value * 0.5)), value * 3, value + 7]
        if value > 2:
            steps.append(value - max(1.0, round(value * 0.4)))
    out = []
    for new in steps:
        if new == value or new <= 0 or new in ctx.src_numbers or not math.isfinite(new):
            continue  # 1e308 * 2 overflows to inf, which int() cannot take
        if decimals:
            # rules 1 dropped the thousands separator: '1,200.5' -> '2401.0'
            sep = "," if "," in text and ctx.rules >= 2 else ""
            rep = f"{new:{sep}.{decimals}f}"
        elif "," in text:
            rep = f"{int(new):,}"
        else:
            rep = str(int(new))
        if rep not in out:
            out.append(rep)
    return out


def _number(ctx: _Context) -> Iterator[_Candidate]:
    """Change a count, amount, percentage or age to a value the source does not state."""
    for tok in ctx.doc:
        if not tok.like_num or tok.tag_ != "CD":
            continue
        if tok.ent_type_ in _TIME_LABELS:
            ent = next((e for e in ctx.doc.ents if e.start <= tok.i < e.end), None)
            if ent is None or not _is_age(ent):
                continue  # dates and durations are circumstance edits
        bound = 0
        if ctx.rules >= 2:
            if tok.lower_ in _MULTIPLIERS or _in_name(tok):
                continue
            bound = _bound(ctx, tok)
        value = _number_value(tok.text)
        for rep in _new_numbers(ctx, tok.text):
            new = _number_value(rep)
            if bound and (new is None or value is None or (new - value) * bound <= 0):
                continue  # 'more than 105' is not falsified by 'more than 63'
            yield _Candidate("number", tok.idx, tok.idx + len(tok.text), rep, "number")


# 'Two hundred' -> 'Two three': a multiplier is no number on its own
_MULTIPLIERS = {"hundred", "thousand", "million", "billion", "trillion", "dozen"}
_NAME_LABELS = {"PRODUCT", "ORG", "EVENT", "WORK_OF_ART", "FAC", "LAW"}
_LOWER_BOUND = re.compile(
    r"\b(more than|over|at least|above|upwards of|greater than|in excess of|exceeding|"
    r"no fewer than|no less than|not less than)\s*$"
)
_UPPER_BOUND = re.compile(
    r"\b(less than|fewer than|under|up to|at most|below|no more than|not more than|"
    r"a maximum of)\s*$"
)


def _in_name(tok: Any) -> bool:
    """A number that is part of a name ('Apollo 11', 'Boeing 737', 'Formula 1')."""
    doc = tok.doc
    if tok.ent_type_ in _NAME_LABELS and tok.i > next(
        e.start for e in doc.ents if e.start <= tok.i < e.end
    ):
        return True
    if (
        tok.i > 0
        and doc[tok.i - 1].pos_ == "PROPN"
        and doc[tok.i - 1].ent_type_ not in _TIME_LABELS
    ):
        return True
    return tok.dep_ in ("nummod", "compound") and tok.head.pos_ == "PROPN" and tok.head.i < tok.i


def _bound(ctx: _Context, tok: Any) -> int:
    """+1 when the number is a lower bound ('more than $105 million'): only a larger value
    makes the claim false; -1 for an upper bound ('up to 200'); 0 otherwise."""
    before = ctx.summary[tok.sent.start_char : tok.idx].lower()
    before = re.sub(r"[$€£¥]\s*$", "", before.rstrip()).rstrip()
    if _UPPER_BOUND.search(before):
        return -1
    if _LOWER_BOUND.search(before):
        return 1
    return 0


_RULES = (_negation, _antonym, _changed_verb, _entity, _circumstance, _coreference, _number)
# The types each rule makes: a later rule's edit is dropped when an earlier rule made the same
# text, so the rules after the last one that makes a wanted type need not run.
_RULE_TYPES = {
    rule.__name__: {t for t in TYPES if t.startswith(prefix)}
    for rule, prefix in zip(
        _RULES,
        (
            "predicate_negation",
            "predicate_antonym",
            "predicate_verb",
            "entity",
            "circumstance",
            "coreference",
            "number",
        ),
        strict=True,
    )
}
# rules 3 file a time or place antonym under circumstance and a bound's under number
_RULE_TYPES["_antonym"] |= {t for t in TYPES if t.startswith(("circumstance", "number"))}


# ---------------------------------------------------------------- public API


def resolve_types(types: Iterable[str] | None) -> list[str]:
    """Expand user type names: a full name (``entity_intrinsic``), a prefix (``entity``,
    ``predicate``) or a BUMP error type (``Intrinsic Entity``). ``None`` means all."""
    if types is None:
        return list(TYPES)
    if isinstance(types, str):  # one type: "entity" is not e, n, t, ...
        types = [types]
    if not isinstance(types, Iterable):
        raise InputError(f"perturbation types are a list of names, got {type(types).__name__}")
    out: list[str] = []
    for name in types:
        if not isinstance(name, str):
            raise InputError(f"perturbation types are names (strings), got {name!r}")
        key = name.strip()
        matches = [t for t in TYPES if t == key or t.startswith(key + "_")]
        matches += [t for t, bump in TYPES.items() if bump.lower() == key.lower()]
        if not matches:
            raise InputError(
                f"unknown perturbation type {name!r}; types: {', '.join(TYPES)} "
                "(a prefix such as 'entity' selects a family)"
            )
        out.extend(m for m in matches if m not in out)
    return out


def perturb(
    source: str,
    summary: str,
    types: Iterable[str] | None = None,
    seed: int = 0,
    max_per_type: int | None = 1,
    spacy_model: str | None = None,
    *,
    rules: int = RULES,
    drop_still_true: bool = True,
) -> list[Perturbation]:
    """Minimal unfaithful variants of ``summary`` given ``source`` (BUMP taxonomy).

    Returns at most ``max_per_type`` variants per type (``None``: all candidates), chosen with
    a ``random.Random`` seeded by ``seed`` and the type, so the output is reproducible. Types
    for which no safe edit exists are simply absent. Raises ``InputError`` for empty input.

    ``rules`` picks the revision of the edit rules: 1 reproduces the edits the first shipped
    checker was trained on (``SynthConfig.perturb_rules``) when ``drop_still_true`` is False
    (its pairs were made before the predicate filter that drops edits which stay true; ``faithgate
    train --synthesis 1`` turns it off), 2 adds the review fixes listed in the
    module docstring, 3 (the default, ``RULES``) swaps verbs only within their class and frame. The same ``rules`` and ``seed`` give the same edits.
    """
    if not isinstance(source, str) or not source.strip():
        raise InputError("perturb: the source is empty")
    if not isinstance(summary, str) or not summary.strip():
        raise InputError("perturb: the summary is empty")
    if max_per_type is not None and (
        isinstance(max_per_type, bool) or not isinstance(max_per_type, int) or max_per_type < 1
    ):  # -1 sliced off the last candidate instead of meaning anything
        raise InputError(
            f"perturb: max_per_type must be an integer >= 1 or None, not {max_per_type!r}"
        )
    if isinstance(rules, bool) or rules not in (1, 2, 3):
        raise InputError(f"perturb: rules must be 1, 2 or 3, not {rules!r}")
    if isinstance(seed, bool) or not hasattr(seed, "__index__"):  # None, "abc", 1.5: not seeds
        raise InputError(f"perturb: seed must be an integer, not {seed!r}"[:200])
    wanted = resolve_types(types)
    if not wanted:  # an empty list is no type, not every type (and max() below has none)
        raise InputError("perturb: types is empty: name at least one type, or pass None for all")
    if rules >= 3 and not reads_as_english(source):
        return []  # English rules on another language make garbage, which flatters a metric
    ctx = _Context(source, summary, spacy_model, rules, drop_still_true)
    by_type: dict[str, list[Perturbation]] = {t: [] for t in wanted}
    seen: set[str] = set()
    last = max(i for i, rule in enumerate(_RULES) if _RULE_TYPES[rule.__name__] & set(wanted))
    for rule in _RULES if rules == 1 else _RULES[: last + 1]:
        for cand in rule(ctx):
            # rules 1 skipped unrequested types before deduplicating, so an edit's type
            # depended on which types were asked for; rules 2 assigns it from all of them.
            if cand.type not in by_type and rules == 1:
                continue
            variant = _apply(ctx, cand)
            if variant is None or variant.summary in seen:
                continue
            seen.add(variant.summary)
            if cand.type in by_type:
                by_type[cand.type].append(variant)
    out: list[Perturbation] = []
    for t in wanted:
        cands = by_type[t]
        random.Random(f"{seed}:{t}").shuffle(cands)
        out.extend(cands if max_per_type is None else cands[:max_per_type])
    return out


_LETTER_WORD = re.compile(r"[^\W\d_]+")
# Share of English function words (spaCy's English stop list) below which a text of at least
# ENGLISH_MIN_WORDS words is not read as English. Measured (2026-11-25) on the sources of every
# file of ../shared/data: the lowest English share was 0.246 (QAGS), the first percentile 0.34;
# news sentences in German, French, Spanish, Italian, Dutch and Portuguese gave 0.00-0.09.
ENGLISH_MIN_SHARE = 0.15
ENGLISH_MIN_WORDS = 20


def reads_as_english(text: str) -> bool:
    """Whether ``text`` reads as English enough for perturb's English rules: at least
    ``ENGLISH_MIN_SHARE`` of its words are English function words ("the", "of", "was", ...).
    A text of fewer than ``ENGLISH_MIN_WORDS`` words is not judged (True)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    words = [w.lower() for w in _LETTER_WORD.findall(text)]
    if len(words) < ENGLISH_MIN_WORDS:
        return True
    return sum(w in STOP_WORDS for w in words) / len(words) >= ENGLISH_MIN_SHARE


def _still_true(ctx: _Context, cand: _Candidate) -> bool:
    """Would this predicate edit leave the sentence true? Either the new word is a synonym of
    the old, or one source sentence of the same polarity holds every content word of the
    edited sentence (text or lemma), so the source says it in its own words."""
    if cand.type not in _MEANING_EDITS and cand.detail != "antonym":
        return False  # an antonym filed under circumstance or number (rules 3) is checked too
    edited_tokens = [t for t in ctx.doc if cand.start <= t.idx < cand.end]
    if cand.lemma and any(_synonyms(t.lemma_, cand.lemma) for t in edited_tokens):
        return True
    sent = next((s for s in ctx.doc.sents if s.start_char <= cand.start < s.end_char), None)
    if sent is None:
        return False
    words = {
        (t.text.lower(), t.lemma_.lower())
        for t in sent
        if _is_content(t) and not cand.start <= t.idx < cand.end
    }
    words |= {
        (w.lower(), (cand.lemma or w).lower())
        for w in re.findall(r"[\w']+", cand.replacement)
        if w.lower() not in _NEGATORS
    }
    polarity = _negated(sent)
    for negated, forms in ctx.src_sent_forms():
        if negated != polarity:
            continue
        if all(text in forms or lemma in forms for text, lemma in words):
            return True
    return False


def _tidy(ctx: _Context, cand: _Candidate, original: str) -> _Candidate:
    """Keep the text around a name swap intact (rules 2): the sentence's final period that
    ends 'U.S.', one article ('The BBC' -> 'The World Bank', not 'The the World Bank') and a
    lower-case 'the' inside a sentence ('on the United States')."""
    rep, start = cand.replacement, cand.start
    if cand.type.startswith(("entity", "circumstance")) and cand.detail != "antonym":
        det = next(
            (
                t
                for t in ctx.doc
                if t.idx + len(t.text) < cand.start
                and t.lower_ == "the"
                and t.dep_ == "det"
                and cand.start <= t.head.idx < cand.end
                and not ctx.summary[t.idx + len(t.text) : cand.start].strip()
            ),
            None,
        )
        if det is not None and not re.match(r"the\s", rep, flags=re.IGNORECASE):
            # 'in the U.S.' -> 'in Mumbai', not 'in the Mumbai': the article goes with the name
            start = det.idx
            if rep[:1].islower() and det.text[:1].isupper():
                rep = rep[:1].upper() + rep[1:]
        before = ctx.summary[:start]
        sentence_start = not before.strip() or before.rstrip()[-1:] in ".!?\"'"
        if re.match(r"the\s", rep, flags=re.IGNORECASE):
            if re.search(r"\b(the|a|an|this|that|these|those)\s+$", before, flags=re.I):
                rep = rep[4:].lstrip()
            elif not sentence_start:
                rep = "t" + rep[1:]
            else:
                rep = "T" + rep[1:]
        if original.endswith(".") and not rep.endswith("."):
            rest = ctx.summary[cand.end :]
            if not rest.strip() or re.match(r"\s+[A-Z\"'“‘(]", rest):
                rep += "."  # 'in the U.S.' ends the sentence: its period is the sentence's
    if rep == cand.replacement and start == cand.start:
        return cand
    return replace(cand, replacement=rep, start=start)


def _apply(ctx: _Context, cand: _Candidate) -> Perturbation | None:
    original = ctx.summary[cand.start : cand.end]
    if not original or cand.replacement == original:
        return None
    if ctx.rules >= 2:
        cand = _tidy(ctx, cand, original)
        original = ctx.summary[cand.start : cand.end]
        if cand.replacement == original:
            return None
    if ctx.drop_still_true and _still_true(ctx, cand):
        return None
    edited = ctx.summary[: cand.start] + cand.replacement + ctx.summary[cand.end :]
    if edited == ctx.summary:
        return None
    # 'a new deal' -> 'a old deal' would be ungrammatical: keep the article in agreement.
    article = re.search(r"\b(a|an)\s+$", ctx.summary[: cand.start], flags=re.IGNORECASE)
    if article:
        vowel = cand.replacement[:1].lower() in "aeiou"
        if vowel != (article.group(1).lower() == "an"):
            return None
    # An edited sentence that the source states verbatim is not an error.
    new_end = cand.start + len(cand.replacement)
    for sent in ctx.doc.sents:
        if sent.start_char <= cand.start < sent.end_char:
            new_sentence = edited[sent.start_char : sent.end_char + new_end - cand.end]
            if len(new_sentence) > 20 and _norm(new_sentence) in ctx.src_lower:
                return None
    return Perturbation(
        type=cand.type,
        error_type=cand.error_type or TYPES[cand.type],
        summary=edited,
        original=original,
        replacement=cand.replacement,
        start=cand.start,
        end=cand.end,
        detail=cand.detail,
    )


class _CallableModule(_pytypes.ModuleType):
    """``faithgate.perturb`` is both this module and the public function: importing the module
    makes Python bind the package attribute ``faithgate.perturb`` to the module, so the module
    itself forwards calls to ``perturb()`` and ``from faithgate import perturb`` always works."""

    def __call__(self, *args: Any, **kwargs: Any) -> list[Perturbation]:
        return perturb(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
