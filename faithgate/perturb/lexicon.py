"""The word lists the edit rules read (``faithgate/data``) and the text helpers they share."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any

# Entity labels that name participants; GPE/LOC/FAC count as circumstance (location) when they
# are the object of a locative preposition ("in Paris"), and as entities otherwise.
PARTICIPANT_LABELS = {
    "PERSON", "ORG", "NORP", "GPE", "LOC", "FAC", "PRODUCT", "EVENT", "WORK_OF_ART",
}  # fmt: skip
PLACE_LABELS = {"GPE", "LOC", "FAC"}
TIME_LABELS = {"DATE", "TIME"}
NUMBER_LABELS = {"CARDINAL", "MONEY", "PERCENT", "QUANTITY"}
# Words that do not tell one mention from another ("the", titles, name particles).
MENTION_STOP_WORDS = {
    "the", "a", "an", "of", "and", "'s", "’s", "-", "mr", "mrs", "ms", "dr", "de", "la", "van",
}  # fmt: skip


@cache
def package_data(name: str) -> dict[str, Any]:
    """A word list of ``faithgate/data`` (read once)."""
    text = resources.files("faithgate").joinpath("data", name).read_text(encoding="utf-8")
    return json.loads(text)


def verb_form(lemma: str, tag: str, table: str = "verb_forms.json") -> str | None:
    """``lemma`` inflected for the Penn ``tag`` (None where ``table`` does not list it)."""
    forms = package_data(table)["verbs"].get(lemma)
    if forms is None:
        return None
    if tag in ("VB", "VBP"):
        return lemma
    return forms.get(tag)


def norm_text(text: str) -> str:
    """Lower case, white space folded: the form texts are compared in."""
    return re.sub(r"\s+", " ", text).strip().lower()


def content_words(text: str) -> set[str]:
    """The words that identify a mention (no articles, titles or possessive 's)."""
    words = re.findall(r"[\w']+", text.lower())
    return {w.removesuffix("'s") for w in words if w not in MENTION_STOP_WORDS}


def word_in(word: str, text_lower: str) -> bool:
    """Whether ``word`` occurs as a whole word in ``text_lower``."""
    return re.search(rf"(?<![\w]){re.escape(word.lower())}(?![\w])", text_lower) is not None


def match_case(replacement: str, original: str, sentence_start: bool) -> str:
    """``replacement`` in the case of ``original`` (an acronym's, a sentence start's)."""
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if sentence_start and original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


NEGATORS = {"not", "n't", "no", "never", "nobody", "none", "nothing", "neither", "nor", "nowhere"}


@cache
def synonym_groups() -> dict[str, frozenset[str]]:
    """Verb lemma -> every lemma sharing a synonym group with it."""
    index: dict[str, set[str]] = {}
    for group in package_data("synonyms.json")["verbs"]:
        for lemma in group:
            index.setdefault(lemma, set()).update(group)
    return {k: frozenset(v) for k, v in index.items()}


def synonyms(a: str, b: str) -> bool:
    """Whether the verb lemmas share a group of ``data/synonyms.json``."""
    return b.lower() in synonym_groups().get(a.lower(), frozenset())


def is_negated(tokens: Iterable[Any]) -> bool:
    """Polarity of a sentence: an odd number of negators ("not", "no one", "nobody", ...)."""
    return sum(t.dep_ == "neg" or t.text.lower() in NEGATORS for t in tokens) % 2 == 1


def is_content(tok: Any) -> bool:
    """A token that carries meaning: no stop word, punctuation, space or negator."""
    return not (tok.is_stop or tok.is_punct or tok.is_space or tok.text.lower() in NEGATORS)


NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "hundred": 100, "thousand": 1000,
}  # fmt: skip


def number_value(text: str) -> float | None:
    """The value of a numeral or number word ('1,200', 'five'); None for other text."""
    t = text.lower().replace(",", "")
    if t in NUMBER_WORDS:
        return float(NUMBER_WORDS[t])
    try:
        return float(t)
    except ValueError:
        return None
