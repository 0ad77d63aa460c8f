"""Meaning-preserving rewrites of a document sentence: the abstractive positives that
FactCC-style synthetic pairs lack.

A checker trained only on copies and compressions of source sentences learns "supported means
near-verbatim" and gives low entailment to faithful summaries that name, count, fuse or report
differently from the source (``docs/models/checker.md``). Summaries rewrite in a few regular
ways (Jing & McKeown 2000, "Cut and paste based text summarization": reduction, combination,
lexical paraphrase, reference adjustment); each rewrite here is one of them, made by rule from
spaCy's parse so that it keeps what the sentence asserts:

- ``resolve_pronoun``: a subject "he"/"she" (or a possessive "his") becomes the one person the
  two sentences before name (reference adjustment: summaries name people); from synthesis 2
  only the subject of the sentence before, and only when a first name or title agrees;
- ``shorten_names`` / ``expand_names``: "Mary Doyle Keefe" -> "Keefe", and a surname back to
  the full name an earlier sentence gives;
- ``number_format``: "three" <-> "3";
- ``present_reporting``: "said" -> "says" (headline style);
- ``drop_attribution``: "Police said the man was arrested" -> "The man was arrested";
- ``fuse``: two sentences joined into one (combination).

Token rewrites are maps ``{token index: new text}`` ("" drops the token), so several combine on
one sentence; ``render`` turns a span and its maps into text. Each function returns ``None``
when its rewrite does not apply.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Rewrite = dict[int, str]

_NUMBER_WORDS = {
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
}
_DIGITS = {v: k for k, v in _NUMBER_WORDS.items()}
_REPORTING = {"say", "tell", "report", "announce", "add", "state"}
_SUBJECT = {"nsubj", "nsubjpass"}
_PLURAL_SUBJECTS = {"they", "we", "i", "you"}


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Synthesis 2's agreement check: a few first names and titles of unambiguous gender (the Lee
# news corpus's people and common English names). A name not listed is not guessed at: the
# pronoun stays.
_MALE = _word_set(
    "mr sir lord king prince father john peter simon alexander philip yasser ariel george "
    "osama tony pervez colin donald dick bill bob paul mark david michael james robert "
    "william richard thomas charles joseph daniel matthew andrew stephen steve christopher "
    "anthony kevin brian gary ian malcolm jim tim greg geoff graham hamid mohammed muhammad "
    "ahmed vladimir jacques gerhard helmut ben nick adam jack harry henry edward frank fred "
    "ted ron ronald ray neil bruce craig shane glenn wayne warren keith allan alan barry "
    "ricky gordon ken kenneth larry martin patrick scott jeff jeffrey eric roger ross steven"
)
_FEMALE = _word_set(
    "mrs ms miss dame lady queen princess mother sister mary elizabeth margaret sarah susan "
    "jennifer linda patricia barbara helen anne ann jane catherine kate karen lisa laura emma "
    "anna julia julie amanda natasha cheryl carmen jenny janet joan judith ruth rachel "
    "rebecca nicole michelle maria christine hillary condoleezza madeleine megawati benazir "
    "sonia angela emily sophie alice grace diana louise claire fiona jessica heather kylie"
)
_HUMAN_PRONOUNS = frozenset(["he", "she", "i", "we", "they", "you"])


def render(tokens: Iterable[Any], rewrite: Rewrite | None = None) -> str:
    """The text of ``tokens`` (spaCy tokens, in order) with ``rewrite`` applied, its first letter
    capitalised and a final full stop ensured."""
    rewrite = rewrite or {}
    parts: list[str] = []
    for tok in tokens:
        new = rewrite.get(tok.i, tok.text)
        if new:
            parts.append(new + tok.whitespace_)
    text = " ".join("".join(parts).split())
    for punct in (",", ".", ";", ":", "'s"):
        text = text.replace(" " + punct, punct)
    text = text.strip(" ,;:")
    if not text:
        return text
    if text[-1] not in ".!?\"'":
        text += "."
    return text[0].upper() + text[1:]


def _people(sents: Sequence[Any], lo: int, hi: int) -> dict[str, tuple[str, int]]:
    """Persons named in ``sents[lo:hi]``, by surname: (longest mention, first sentence index)."""
    found: dict[str, tuple[str, int]] = {}
    for j in range(max(0, lo), hi):
        for ent in sents[j].ents:
            if ent.label_ != "PERSON" or not ent[-1].is_alpha:
                continue
            key = ent[-1].text
            name, first = found.get(key, ("", j))
            found[key] = (ent.text if len(ent.text) > len(name) else name, min(first, j))
    return found


def resolve_pronoun(
    sents: Sequence[Any], i: int, agreeing: bool = False
) -> tuple[Rewrite, int] | None:
    """Sentence ``i``'s opening subject "he"/"she" (or possessive "his") -> the name of the one
    person named in the two sentences before it.
    Returns the rewrite and the index of the sentence naming the person (the premise must
    reach back to it). ``agreeing`` (synthesis 2): only when ``_agrees``."""
    sent = sents[i]
    # Only a sentence-initial pronoun: one later in the sentence may refer to a person the
    # sentence itself names ("Rockwell told her that he would paint her").
    lead = sent[0]
    subject = lead.lower_ in {"he", "she"} and lead.dep_ in _SUBJECT
    if not (subject or (lead.lower_ == "his" and lead.dep_ == "poss")):
        return None
    people = _people(sents, i - 2, i)
    if len(people) != 1:
        return None
    name, j = next(iter(people.values()))
    if agreeing and not _agrees(sents, i, name, "female" if lead.lower_ == "she" else "male"):
        return None
    return {lead.i: name if subject else name + "'s"}, j


def _agrees(sents: Sequence[Any], i: int, name: str, gender: str) -> bool:
    """Whether a pronoun of ``gender`` opening sentence ``i`` may safely stand for ``name``
    (the one person named in the two sentences before): that person is the main subject of
    sentence ``i - 1``, no other person or personal pronoun is a subject there, and a first
    name or title says ``gender`` ("Prime Minister John Howard met nurses. The union's head
    spoke. She said ..." is not Howard)."""
    if i < 1:
        return False
    prev = sents[i - 1]
    named = [
        e
        for e in prev.ents
        if e.label_ == "PERSON"
        and e[-1].text == name.split()[-1]
        and e.root.dep_ in _SUBJECT
        and e.root.head == prev.root
    ]
    if len(named) != 1:
        return False
    ent = named[0]
    for tok in prev:
        human = tok.ent_type_ == "PERSON" or tok.lower_ in _HUMAN_PRONOUNS
        if human and tok.dep_ in _SUBJECT and not ent.start <= tok.i < ent.end:
            return False
    words = [w.lower().rstrip(".") for w in name.split()]
    if ent.start > prev.start:  # a title just before the name: "Mrs Smith", "Sir John"
        words.insert(0, prev.doc[ent.start - 1].lower_.rstrip("."))
    listed, other = (_FEMALE, _MALE) if gender == "female" else (_MALE, _FEMALE)
    return any(w in listed for w in words[:2]) and not any(w in other for w in words)


def shorten_names(sent: Any) -> Rewrite | None:
    """Every multi-word person name in ``sent`` -> its last word ("Mary Doyle Keefe" -> "Keefe")."""
    rewrite: Rewrite = {}
    for ent in sent.ents:
        if (
            ent.label_ == "PERSON"
            and len(ent) >= 2
            and all(t.is_alpha or t.text in ".-" for t in ent)
        ):
            rewrite.update({t.i: "" for t in ent[:-1]})
    return rewrite or None


def expand_names(sents: Sequence[Any], i: int) -> tuple[Rewrite, int] | None:
    """A one-word person name in sentence ``i`` -> the full name that one of the three
    sentences before gives; returns the rewrite and that sentence's index."""
    people = _people(sents, i - 3, i)
    for ent in sents[i].ents:
        if ent.label_ == "PERSON" and len(ent) == 1 and ent.text in people:
            name, j = people[ent.text]
            if name != ent.text:
                return {ent[0].i: name}, j
    return None


def number_format(sent: Any) -> Rewrite | None:
    """Small counts written the other way: "three" <-> "3" (cardinals only, not dates or times)."""
    rewrite: Rewrite = {}
    for tok in sent:
        if tok.pos_ != "NUM" or tok.ent_type_ not in {"", "CARDINAL"}:
            continue
        if tok.lower_ in _NUMBER_WORDS:
            rewrite[tok.i] = _NUMBER_WORDS[tok.lower_]
        elif tok.text in _DIGITS:
            rewrite[tok.i] = _DIGITS[tok.text]
    return rewrite or None


def present_reporting(sent: Any) -> Rewrite | None:
    """The main verb "said" -> "says"/"say" (the present of news headlines and highlights)."""
    root = sent.root
    if root.lower_ != "said" or root.tag_ != "VBD":
        return None
    subject = next((c for c in root.children if c.dep_ == "nsubj"), None)
    if subject is None:
        return None
    plural = subject.tag_ in {"NNS", "NNPS"} or subject.lower_ in _PLURAL_SUBJECTS
    return {root.i: "say" if plural else "says"}


def drop_attribution(sent: Any) -> list[Any] | None:
    """The reported clause of "X said (that) Y" / "Y, X said": the tokens of Y, without its
    "that". ``None`` when the reporting verb is negated or Y has no subject of its own."""
    root = sent.root
    if root.lemma_ not in _REPORTING or any(c.dep_ == "neg" for c in root.children):
        return None
    clause = next((c for c in root.children if c.dep_ == "ccomp"), None)
    if clause is None or not any(c.dep_ in _SUBJECT for c in clause.children):
        return None
    tokens = [t for t in clause.subtree if not (t.dep_ == "mark" and t.head == clause)]
    if len(tokens) < 5:
        return None
    return tokens


def fuse(first: str, second: str, second_starts_with_name: bool) -> str | None:
    """Two sentences as one: "A. B." -> "A, and b." (combination)."""
    if not first.endswith(".") or not second.endswith("."):
        return None
    head = second if second_starts_with_name else second[0].lower() + second[1:]
    return f"{first[:-1]}, and {head}"


@dataclass
class _Draft:
    """A rewrite of ``sents[i]`` being built: token rewrites, the tokens kept, the sentence it
    fuses with, and the span of sentences ``[first, end)`` its premise must cover."""

    sents: Sequence[Any]
    i: int
    max_words: int
    synthesis: int = 1
    rewrite: Rewrite = field(default_factory=dict)
    fused_with: Any = None
    # Set from ``sents[i]`` by ``__post_init__``; the rewrites narrow or widen them.
    tokens: list[Any] = field(init=False)
    first: int = field(init=False)
    end: int = field(init=False)

    def __post_init__(self) -> None:
        self.tokens = list(self.sents[self.i])
        self.first, self.end = self.i, self.i + 1

    def widen(self, found: tuple[Rewrite, int]) -> bool:
        self.rewrite.update(found[0])
        self.first = min(self.first, found[1])
        return True

    def update(self, rewrite: Rewrite | None) -> bool:
        self.rewrite.update(rewrite or {})
        return bool(rewrite)


def _pronoun(d: _Draft, rng: random.Random) -> bool:
    found = resolve_pronoun(d.sents, d.i, agreeing=d.synthesis >= 2)
    return found is not None and d.widen(found)


def _names(d: _Draft, rng: random.Random) -> bool:
    expanded = expand_names(d.sents, d.i)
    if expanded and rng.random() < 0.5:
        return d.widen(expanded)
    return d.update(shorten_names(d.sents[d.i]))


def _attribution(d: _Draft, rng: random.Random) -> bool:
    clause = drop_attribution(d.sents[d.i])
    if clause:
        d.tokens = clause
    return bool(clause)


def _fuse(d: _Draft, rng: random.Random) -> bool:
    if d.i + 1 >= len(d.sents):
        return False
    sent, nxt = d.sents[d.i], d.sents[d.i + 1]
    # "..., and but ..." / "..., and "quote": a connective or quote does not fuse.
    if nxt[0].pos_ == "CCONJ" or nxt[0].is_quote:
        return False
    if len(sent.text.split()) + len(nxt.text.split()) > d.max_words:
        return False
    d.fused_with, d.end = nxt, d.i + 2
    return True


# The rewrites ``paraphrase`` draws from, in the order it shuffles them.
_REWRITES: dict[str, Callable[[_Draft, random.Random], bool]] = {
    "pronoun": _pronoun,
    "names": _names,
    "number": lambda d, rng: d.update(number_format(d.sents[d.i])),
    "tense": lambda d, rng: d.update(present_reporting(d.sents[d.i])),
    "attribution": _attribution,
    "fuse": _fuse,
}


def paraphrase(
    sents: Sequence[Any], i: int, rng: random.Random, max_words: int, synthesis: int = 1
) -> tuple[str, int, int, str] | None:
    """A rewrite of sentence ``i`` that keeps what it asserts: one to three rewrites chosen at
    random among those that apply. Returns (text, first sentence, end sentence the premise must
    span, the rewrites' names joined by "+"), or ``None`` when none applies. ``synthesis``:
    ``SynthConfig.synthesis`` (2 checks a resolved pronoun's antecedent)."""
    draft = _Draft(sents, i, max_words, synthesis)
    options = list(_REWRITES)
    rng.shuffle(options)
    wanted = rng.randint(1, 3)
    names: list[str] = []
    for option in options:
        if len(names) == wanted:
            break
        if _REWRITES[option](draft, rng):
            names.append(option)
    if not names:
        return None
    text = render(draft.tokens, draft.rewrite)
    if draft.fused_with is not None:
        nxt = draft.fused_with
        joined = fuse(text, render(nxt), nxt[0].pos_ == "PROPN" or nxt[0].text == "I")
        if joined is None:
            names.remove("fuse")
            draft.end = i + 1
        else:
            text = joined
    if not names or text == sents[i].text.strip():
        return None
    return text, draft.first, draft.end, "+".join(sorted(names))
