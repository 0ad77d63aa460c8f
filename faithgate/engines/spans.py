"""Span helpers shared by the QA engine and the structure metrics.

- ``answer_f1``: SQuAD answer F1 (Rajpurkar et al., 2016): lower case, punctuation (but a "."
  or "," between digits) and articles dropped, bag-of-tokens F1.
- ``answer_type``: a coarse type of a span from its spaCy entity label (person / place / time /
  number / org / thing), used to pick wh-words and compatible answer candidates.
- ``resolve_pronoun``: the nearest preceding compatible entity of a pronoun (a cheap stand-in
  for coreference resolution: he/she -> person, it -> organisation/place/thing, they -> group).
- ``SimilarityCache``: cosine of pooled sentence embeddings of short phrases, each distinct
  phrase embedded once per batch.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

_AGE = re.compile(r"\b(\d+|\w+)[- ]years?[- ]old\b|\baged? \d+", re.IGNORECASE)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "\u2018\u2019\u201c\u201d")
# A decimal point or separator between digits, kept through the punctuation removal (as
# private-use characters, which no punctuation table holds).
_NUMBER_MARK = re.compile(r"(?<=\d)[.,](?=\d)")
_KEEP = {".": "\ue000", ",": "\ue001"}
_RESTORE = str.maketrans({v: k for k, v in _KEEP.items()})


def normalize_answer(text: str) -> list[str]:
    """SQuAD normalisation: lower case, no punctuation, no articles, whitespace tokens; except
    that a "." or "," between digits is kept, so "3.5 million" is not "35 million" (SQuAD's
    normalisation makes both "35")."""
    text = _NUMBER_MARK.sub(lambda m: _KEEP[m.group()], text.lower())
    text = text.translate(_PUNCT).translate(_RESTORE)
    return _ARTICLES.sub(" ", text).split()


def token_f1(a: Sequence[str], b: Sequence[str]) -> float:
    """SQuAD-style bag-of-tokens F1 between two token lists (0 when either is empty)."""
    if not a or not b:
        return 0.0
    common = sum((Counter(a) & Counter(b)).values())
    if common == 0:
        return 0.0
    p, r = common / len(a), common / len(b)
    return 2 * p * r / (p + r)


def answer_f1(a: str, b: str) -> float:
    """SQuAD token F1 between two answer strings; 0 when either is empty after normalising."""
    return token_f1(normalize_answer(a), normalize_answer(b))


# Coarse answer types from spaCy (OntoNotes) entity labels.
ENTITY_TYPES = {
    "PERSON": "person",
    "NORP": "group",
    "ORG": "org",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "DATE": "time",
    "TIME": "time",
    "CARDINAL": "number",
    "QUANTITY": "number",
    "MONEY": "money",
    "PERCENT": "percent",
    "ORDINAL": "ordinal",
    "EVENT": "thing",
    "PRODUCT": "thing",
    "WORK_OF_ART": "thing",
    "LAW": "thing",
    "LANGUAGE": "thing",
}
# Which candidate types may answer a question about a span of a given type. Organisations,
# groups and people are interchangeable as agents ("who"), places and organisations too
# ("Washington said"), plain noun phrases only answer "what" questions.
COMPATIBLE = {
    "person": {"person", "org", "group"},
    "org": {"org", "person", "group", "place"},
    "group": {"group", "org", "person"},
    "place": {"place", "org"},
    "time": {"time"},
    "number": {"number", "money", "percent"},
    "money": {"money", "number"},
    "percent": {"percent", "number"},
    "ordinal": {"ordinal"},
    "age": {"age", "number"},
    # "what" questions: plain noun phrases, and named things the NER typed differently in the
    # source than in the summary ("the Saturday Evening Post": ORG in one, untyped in the other).
    "thing": {"thing", "org", "place", "group"},
}

_PERSON_PRONOUNS = {"he", "him", "his", "she", "her", "hers", "himself", "herself"}
_THING_PRONOUNS = {"it", "its", "itself"}
_GROUP_PRONOUNS = {"they", "them", "their", "theirs", "themselves"}
PRONOUNS = _PERSON_PRONOUNS | _THING_PRONOUNS | _GROUP_PRONOUNS


def answer_type(span: Any) -> str:
    """Coarse type of a spaCy span: from its entity label, else ``thing``."""
    label = getattr(span, "label_", "") or ""
    if label == "DATE" and _AGE.search(span.text):
        return "age"  # "19-year-old" is a DATE to spaCy, but asks "how old"
    if label in ENTITY_TYPES:
        return ENTITY_TYPES[label]
    # A noun chunk whose root token is inside an entity takes that entity's type.
    root = getattr(span, "root", None)
    if root is not None and root.ent_type_ in ENTITY_TYPES:
        return ENTITY_TYPES[root.ent_type_]
    return "thing"


def resolve_pronoun(token: Any) -> str | None:
    """Text of the nearest entity before ``token`` (same Doc) that a pronoun can refer to.

    he/him/his/she/her -> the nearest PERSON; it/its -> the nearest ORG / GPE / PRODUCT /
    EVENT / FAC / WORK_OF_ART / LAW; they/them/their -> the nearest ORG / NORP / GPE or
    PERSON. ``None`` when the token is not such a pronoun or nothing fits.
    """
    word = token.lower_
    if word in _PERSON_PRONOUNS:
        wanted = {"PERSON"}
    elif word in _THING_PRONOUNS:
        wanted = {"ORG", "GPE", "PRODUCT", "EVENT", "FAC", "WORK_OF_ART", "LAW"}
    elif word in _GROUP_PRONOUNS:
        wanted = {"ORG", "NORP", "GPE", "PERSON"}
    else:
        return None
    for ent in reversed(token.doc.ents):
        if ent.end <= token.i and ent.label_ in wanted:
            return ent.text
    return None


class SimilarityCache:
    """Cosine similarity of short texts by the ``embedder`` role's pooled sentence embeddings;
    each distinct text is embedded once (call ``add`` with all texts of a batch first)."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self._vectors: dict[str, np.ndarray] = {}

    def add(self, texts: Iterable[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            vecs = np.asarray(self.encoder.sentence_embeddings(missing), dtype=np.float64)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = vecs / np.clip(norms, 1e-12, None)
            self._vectors.update(zip(missing, vecs, strict=True))

    def matrix(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """cos(a_i, b_j), shape (len(a), len(b))."""
        self.add([*a, *b])
        if not a or not b:
            return np.zeros((len(a), len(b)))
        va = np.stack([self._vectors[t] for t in a])
        vb = np.stack([self._vectors[t] for t in b])
        return np.clip(va @ vb.T, -1.0, 1.0)  # rounding: a self-cosine may pass 1


def f1_matrix(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """answer_f1(a_i, b_j), shape (len(a), len(b))."""
    out = np.zeros((len(a), len(b)))
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i, j] = answer_f1(x, y)
    return out
