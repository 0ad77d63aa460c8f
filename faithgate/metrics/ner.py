"""Named-entity overlap: are the summary's entities found in the source?

Entity hallucination is the most frequent factual error of abstractive summarizers (Nan et al.,
2021, "Entity-level Factual Consistency of Abstractive Text Summarization", EACL, who measure
the share of summary entities that appear in the source). spaCy runs through
``faithgate.text`` (one pipeline per process, the ``spacy`` role). No torch import here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from faithgate import text as textmod
from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.metrics.embedding import token_f1
from faithgate.types import Example, Score, SentenceScore

_LEADING = re.compile(r"^(the|a|an)\s+")
_POSSESSIVE = re.compile(r"['\u2019]s$")
_NONWORD = re.compile(r"[^\w\s]+")


def normalise_entity(text: str) -> str:
    """Lower case, no leading article, no trailing possessive, punctuation dropped, spaces
    collapsed: "The U.S.'s" -> "us", "Mary  Doyle-Keefe" -> "mary doylekeefe"."""
    t = text.strip().lower()
    t = _POSSESSIVE.sub("", t)
    t = _LEADING.sub("", t)
    t = _NONWORD.sub("", t)
    return " ".join(t.split())


@register
class EntityOverlap(Metric):
    """Entity precision of the summary against the source, grouped by entity label.

    For each entity e of the summary (spaCy NER, label L(e)) and the source entities E_L of the
    same label:

        s(e) = max_{f in E_L} match(e, f)      (0 when the source has no entity of label L)
        value = 1/|E| sum_{e in E} s(e)

    ``match = exact``: 1 when the normalised texts are equal (case, leading article, possessive
    and punctuation ignored), else 0 -- Nan et al.'s (2021) precision-source. ``match =
    token_f1``: bag-of-words F1 of the normalised texts, so "Keefe" partly matches "Mary Doyle
    Keefe". ``labels`` restricts the entity types considered (default: all of spaCy's).

    A summary with no entity (of the selected labels) has nothing this metric can check: its
    value is the ``no_entity_value`` setting (default 1.0: no entity, so no hallucinated entity)
    and ``details.no_entities`` is true, so reports and gates can tell "no entity" from "every
    entity found"; set ``no_entity_value = "nan"`` to make such summaries unscorable (a gate
    then fails them) or ``0.0`` to count them against the summary. Per summary sentence: the
    mean of its entities' s(e) (NaN for a sentence without entities), with the matched source
    entities as evidence.
    """

    name = "ner"
    description = "share of summary named entities found in the source (same label; exact/token F1)"
    family = "structure"
    roles = {"spacy": "pipeline"}
    defaults = {"match": "exact", "labels": None, "no_entity_value": 1.0}
    MATCHES = ("exact", "token_f1")

    def validate_settings(self) -> None:
        if self.settings["match"] not in self.MATCHES:
            raise InputError(
                f"metric 'ner': match must be one of {', '.join(self.MATCHES)}, "
                f"got {self.settings['match']!r}"
            )
        labels = self.settings["labels"]
        if labels is not None:
            if isinstance(labels, str):
                labels = [x.strip() for x in labels.split(",") if x.strip()]
            if not isinstance(labels, list | tuple) or not all(isinstance(x, str) for x in labels):
                raise InputError("metric 'ner': labels must be a list of spaCy entity labels")
            self.settings["labels"] = sorted({x.upper() for x in labels})
        empty = self.settings["no_entity_value"]
        if isinstance(empty, str) and empty.lower() == "nan":
            self.settings["no_entity_value"] = "nan"
        elif isinstance(empty, bool) or not isinstance(empty, int | float) or not 0 <= empty <= 1:
            raise InputError("metric 'ner': no_entity_value must be a number in [0, 1] or 'nan'")
        else:
            self.settings["no_entity_value"] = float(empty)

    def _entities(self, doc: Any) -> list[Any]:
        labels = self.settings["labels"]
        return [e for e in doc.ents if labels is None or e.label_ in labels]

    def _match(self, a: str, b: str) -> float:
        if self.settings["match"] == "exact":
            return 1.0 if a == b else 0.0
        return token_f1(a.split(), b.split())

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        shash = self.settings_hash(ctx)
        return [self._one(ex, ctx, shash) for ex in examples]

    def _one(self, ex: Example, ctx: ScoringContext, shash: str) -> Score:
        summary_doc = textmod.parse(ex.summary, ctx.spacy_model)
        source_doc = textmod.parse(ex.source, ctx.spacy_model)
        by_label: dict[str, dict[str, str]] = {}  # label -> normalised -> first surface form
        for ent in self._entities(source_doc):
            by_label.setdefault(ent.label_, {}).setdefault(normalise_entity(ent.text), ent.text)

        entities = []
        for ent in self._entities(summary_doc):
            norm = normalise_entity(ent.text)
            best, best_text = 0.0, None
            for cand, surface in by_label.get(ent.label_, {}).items():
                m = self._match(norm, cand)
                if m > best:
                    best, best_text = m, surface
                    if m == 1.0:
                        break
            entities.append(
                {
                    "text": ent.text,
                    "label": ent.label_,
                    "score": best,
                    "match": best_text,
                    "start_char": ent.start_char,
                    "end_char": ent.end_char,
                }
            )

        sentences = []
        for i, sent in enumerate(s for s in summary_doc.sents if s.text.strip()):
            inside = [e for e in entities if sent.start_char <= e["start_char"] < sent.end_char]
            value = sum(e["score"] for e in inside) / len(inside) if inside else float("nan")
            found = [f"{e['text']} ~ {e['match']}" for e in inside if e["match"]]
            sentences.append(SentenceScore(i, sent.text.strip(), value, "; ".join(found) or None))

        details: dict[str, Any] = {
            "match": self.settings["match"],
            "n_entities": len(entities),
            "n_source_entities": sum(len(v) for v in by_label.values()),
            "no_entities": not entities,
            "entities": entities,
            "unsupported": [e["text"] for e in entities if e["score"] < 1.0],
        }
        if not entities:
            empty = self.settings["no_entity_value"]
            if empty == "nan":
                score = Score.failed(self.name, shash, ex.id, "the summary has no named entities")
                score.details, score.sentences = details, sentences
                return score
            return Score(self.name, float(empty), shash, ex.id, sentences, details)
        value = sum(e["score"] for e in entities) / len(entities)
        return Score(self.name, value, shash, ex.id, sentences, details)
