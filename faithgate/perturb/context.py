"""The parsed source and summary, with the lookups every rule needs."""

from __future__ import annotations

from typing import Any

from faithgate.perturb.edits import RULES
from faithgate.perturb.lexicon import (
    PARTICIPANT_LABELS,
    content_words,
    is_negated,
    norm_text,
    number_value,
)


class Context:
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
        self.src_lower = norm_text(source)
        # Lower-cased corpora (SummEval, Polytope) cannot use capitalisation as evidence.
        self.cased = source != source.lower()
        self.src_lemmas = {t.lemma_.lower() for t in self.src}
        self.src_words = {t.text.lower() for t in self.src}
        self.src_numbers = {number_value(t.text) for t in self.src if t.like_num} - {None}
        self.mention_words = [
            content_words(e.text)
            for e in (*self.src.ents, *self.doc.ents)
            if e.label_ in PARTICIPANT_LABELS
        ]
        self._src_sent_forms: list[tuple[bool, frozenset[str]]] | None = None
        # Words of every mention tagged a person: a name tagged a place elsewhere is no place.
        self.person_words = set().union(
            *(
                content_words(e.text)
                for e in (*self.src.ents, *self.doc.ents)
                if e.label_ == "PERSON"
            )
        )

    def src_sent_forms(self) -> list[tuple[bool, frozenset[str]]]:
        """Polarity and word forms (texts and lemmas) of each source sentence, computed once:
        ``apply._still_true`` asks for them for every predicate candidate."""
        if self._src_sent_forms is None:
            self._src_sent_forms = [
                (
                    is_negated(sent),
                    frozenset({t.text.lower() for t in sent} | {t.lemma_.lower() for t in sent}),
                )
                for sent in self.src.sents
            ]
        return self._src_sent_forms

    def src_ents(self, labels: set[str]) -> list[Any]:
        return [e for e in self.src.ents if e.label_ in labels]

    def sentence_of(self, token: Any) -> Any:
        return token.sent
