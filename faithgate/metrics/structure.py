"""Structure metrics: predicate-argument frames and (subject, relation, object) triples.

The faithfulness study these follow (its Table 2) scores summaries with semantic role labelling
(SRL) frames and Open IE triples. No SRL or Open IE model is available offline, so both are
built here on **spaCy's dependency parse** (the ``spacy`` role): arguments are read from the
dependents of each verb, which approximates PropBank roles but misses what a trained SRL / Open
IE model would find (implicit arguments, nominal predicates, long-range relations).

``frames``: for each verb, its dependents are labelled with merged role types
``who / what / whom / when / where / why / how`` (ARG0 -> who, ARG1 -> what, ARG2 -> whom,
ARGM-TMP -> when, ARGM-LOC -> where, ARGM-CAU/PRP -> why, ARGM-MNR -> how), each phrase carrying
its predicate (and negation) so that a changed verb lowers the match. With P_S,l / P_D,l the
summary / source phrases of label l::

    a_recall(l)    = 1/|P_S,l| sum_{p in P_S,l} max_{q in P_D,l} sim(p, q)
    a_precision(l) = 1/|P_D,l| sum_{q in P_D,l} max_{p in P_S,l} sim(q, p)
    F1(l) = 2 a_recall a_precision / (a_recall + a_precision)

score = mean over the labels present in the summary of the ``component`` (default F1).

``triples``: (subject, relation, object) from each verb's subject and its direct object /
attribute / prepositional objects (relation = verb + particle + preposition, negation kept);
pronoun arguments are resolved to the nearest preceding compatible entity. Triples are
linearised ``"subject relation object"``; score = 1/|T_S| sum_{t in T_S} max_{u in T_D} sim(t, u).

``sim`` = cosine of the ``embedder`` role's sentence embeddings (the study's best choice,
default) or SQuAD token F1 (``sim = "token_f1"``, no model).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faithgate import text as textmod
from faithgate.engines.spans import SimilarityCache, f1_matrix, resolve_pronoun
from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.metrics.embedding import check_sim
from faithgate.types import Example, Score, SentenceScore

LABELS = ("who", "what", "whom", "when", "where", "why", "how")
SIMS = ("cosine", "token_f1")
COMPONENTS = ("f1", "recall", "precision")

_TIME_ENTS = {"DATE", "TIME"}
_PLACE_ENTS = {"GPE", "LOC", "FAC"}
_AGENT_ENTS = {"PERSON", "ORG", "NORP"}
_TIME_PREPS = {"before", "after", "during", "since", "until", "till", "throughout", "by"}
_PLACE_PREPS = {
    "in",
    "at",
    "on",
    "near",
    "inside",
    "outside",
    "across",
    "into",
    "onto",
    "from",
    "around",
    "toward",
    "towards",
    "along",
    "within",
    "above",
    "below",
    "under",
    "over",
    "behind",
    "between",
    "beside",
    "out",
}
_CAUSE_PREPS = {"because", "due", "over", "amid", "for"}
_MANNER_PREPS = {"with", "without", "by", "via", "through", "like", "as"}
_TIME_ADVERBS = {
    "yesterday",
    "today",
    "tomorrow",
    "now",
    "then",
    "recently",
    "later",
    "soon",
    "already",
    "ago",
    "earlier",
    "once",
    "again",
    "still",
    "currently",
    "tonight",
}
_PLACE_ADVERBS = {"here", "there", "abroad", "home", "overseas", "nearby", "away", "back"}
_CAUSE_MARKS = {"because", "since", "as", "so"}
_TIME_MARKS = {"when", "after", "before", "until", "while", "once", "till", "whenever"}
# Dependents not kept inside a compact argument phrase.
_CUT_DEPS = {"relcl", "acl", "appos", "advcl", "punct", "cc", "conj", "parataxis", "prep"}
_MAX_PHRASE_TOKENS = 12


@dataclass(frozen=True)
class Frame:
    """One labelled argument phrase of one predicate."""

    label: str
    predicate: str
    argument: str
    sentence: int = field(default=0, compare=False)  # index in ``doc.sents``

    @property
    def text(self) -> str:
        # Agents read before their verb, everything else after it.
        if self.label == "who":
            return f"{self.argument} {self.predicate}"
        return f"{self.predicate} {self.argument}"


@dataclass(frozen=True)
class Triple:
    subject: str
    relation: str
    object: str
    sentence: int = field(default=0, compare=False)  # index in ``doc.sents``

    @property
    def text(self) -> str:
        return " ".join(p for p in (self.subject, self.relation, self.object) if p)


def _phrase(token: Any, resolve: bool = True) -> str:
    """A compact phrase for an argument headed by ``token``: its subtree without relative
    clauses, appositions, conjuncts and attached prepositional phrases (``of`` kept), at most
    12 tokens; a pronoun is replaced by its resolved antecedent when one is found."""
    if resolve and token.pos_ == "PRON":
        antecedent = resolve_pronoun(token)
        if antecedent:
            return antecedent
    keep = {token.i}
    stack = list(token.children)
    while stack:
        child = stack.pop()
        if child.dep_ in _CUT_DEPS and not (child.dep_ == "prep" and child.lower_ == "of"):
            continue
        keep.add(child.i)
        stack.extend(child.children)
    idx = sorted(keep)
    if len(idx) > _MAX_PHRASE_TOKENS:  # keep the head and the tokens closest to it
        idx = sorted(sorted(idx, key=lambda i: abs(i - token.i))[:_MAX_PHRASE_TOKENS])
    doc = token.doc
    return " ".join(doc[i].text for i in idx)


def _predicate(verb: Any) -> str:
    """The verb with its negation, passive auxiliary and particle ("was not arrested", "set up")."""
    parts = {verb.i: verb.text}
    for child in verb.children:
        if child.dep_ in {"neg", "auxpass", "prt"}:
            parts[child.i] = child.text
    return " ".join(parts[i] for i in sorted(parts)).lower()


def _is_predicate(token: Any) -> bool:
    if token.pos_ == "VERB":
        return True
    # Copular roots ("Keefe was an operator") carry their arguments on the auxiliary.
    return token.pos_ == "AUX" and token.dep_ in {"ROOT", "ccomp", "conj", "advcl", "relcl"}


def _prep_label(prep: Any, pobj: Any | None) -> str:
    word = prep.lower_
    ent = pobj.ent_type_ if pobj is not None else ""
    if ent in _TIME_ENTS or (word in _TIME_PREPS and word != "by"):
        return "when"
    if ent in _PLACE_ENTS:
        return "where"
    if word == "to":
        return (
            "whom" if ent in _AGENT_ENTS or (pobj is not None and pobj.pos_ == "PRON") else "where"
        )
    if word == "for":
        return "whom" if ent in _AGENT_ENTS or (pobj is not None and pobj.pos_ == "PRON") else "why"
    if word in _CAUSE_PREPS:
        return "why"
    if word in _MANNER_PREPS:
        return "how"
    if word in _PLACE_PREPS:
        return "where"
    return "what"


def _advcl_label(clause: Any) -> str:
    marks = {c.lower_ for c in clause.children if c.dep_ == "mark"}
    if marks & _CAUSE_MARKS:
        return "why"
    if marks & _TIME_MARKS:
        return "when"
    if any(c.dep_ == "aux" and c.lower_ == "to" for c in clause.children):
        return "why"  # purpose: "... to win the race"
    return "how"


def _subjects(verb: Any) -> list[Any]:
    subs = [c for c in verb.children if c.dep_ in {"nsubj", "nsubjpass", "csubj", "csubjpass"}]
    # A conjoined verb without its own subject shares its head's ("X came and saw").
    if not subs and verb.dep_ == "conj" and _is_predicate(verb.head):
        subs = [c for c in verb.head.children if c.dep_ in {"nsubj", "nsubjpass"}]
    # xcomp / relcl subjects: "the man who fled" -> the noun the relative clause modifies.
    if not subs and verb.dep_ == "relcl":
        subs = [verb.head]
    return subs


def _sentence_index(doc: Any) -> dict[int, int]:
    return {sent.start: i for i, sent in enumerate(doc.sents)}


def sentence_scores(doc: Any, items: Sequence[Any], values: Sequence[float]) -> list[SentenceScore]:
    """Mean value of the frames / triples of each summary sentence (sentences without any are
    left out), evidence = the weakest item's text."""
    sents = list(doc.sents)
    out = []
    for si in sorted({it.sentence for it in items}):
        mine = [(it, v) for it, v in zip(items, values, strict=True) if it.sentence == si]
        weakest = min(mine, key=lambda x: x[1])[0]
        out.append(
            SentenceScore(
                si, sents[si].text.strip(), float(np.mean([v for _, v in mine])), weakest.text
            )
        )
    return out


def extract_frames(doc: Any) -> list[Frame]:
    """Labelled argument phrases of every predicate of a spaCy ``Doc`` (see module docstring)."""
    frames: list[Frame] = []
    sent_index = _sentence_index(doc)
    for verb in doc:
        if not _is_predicate(verb):
            continue
        si = sent_index[verb.sent.start]
        pred = _predicate(verb)
        for sub in _subjects(verb):
            label = "what" if sub.dep_ in {"nsubjpass", "csubjpass"} else "who"
            frames.append(Frame(label, pred, _phrase(sub), si))
        for child in verb.children:
            dep = child.dep_
            label: str | None = None
            arg = child
            if dep == "agent":  # passive "by X": the agent
                pobj = next((c for c in child.children if c.dep_ == "pobj"), None)
                if pobj is not None:
                    frames.append(Frame("who", pred, _phrase(pobj), si))
                continue
            if dep in {"dobj", "attr", "oprd", "acomp", "ccomp", "xcomp"}:
                label = "what"
            elif dep in {"dative", "iobj"}:
                label = "whom"
            elif dep == "prep":
                pobj = next((c for c in child.children if c.dep_ in {"pobj", "pcomp"}), None)
                label = _prep_label(child, pobj)
                if pobj is None:
                    continue
                frames.append(Frame(label, pred, f"{child.text} {_phrase(pobj)}", si))
                continue
            elif dep in {"npadvmod", "tmod"}:
                label = "when" if child.ent_type_ in _TIME_ENTS else "how"
            elif dep == "advmod":
                word = child.lower_
                if child.ent_type_ in _TIME_ENTS or word in _TIME_ADVERBS:
                    label = "when"
                elif word in _PLACE_ADVERBS:
                    label = "where"
                elif word in {"why"}:
                    label = "why"
                else:
                    label = "how"
            elif dep == "advcl":
                label = _advcl_label(child)
            if label is not None:
                frames.append(Frame(label, pred, _phrase(arg), si))
    return frames


def extract_triples(doc: Any) -> list[Triple]:
    """(subject, relation, object) triples of a spaCy ``Doc``: for each predicate with a
    subject, one triple per direct object / attribute / complement / prepositional object
    (relation = predicate + preposition), or ``(subject, predicate, "")`` when it has none."""
    triples: list[Triple] = []
    sent_index = _sentence_index(doc)
    for verb in doc:
        if not _is_predicate(verb):
            continue
        subjects = _subjects(verb)
        if not subjects:
            continue
        si = sent_index[verb.sent.start]
        pred = _predicate(verb)
        objects: list[tuple[str, str]] = []
        for child in verb.children:
            if child.dep_ in {"dobj", "attr", "oprd", "acomp", "dative"}:
                objects.append((pred, _phrase(child)))
            elif child.dep_ in {"prep", "agent"}:
                for pobj in child.children:
                    if pobj.dep_ in {"pobj", "pcomp"}:
                        objects.append((f"{pred} {child.lower_}", _phrase(pobj)))
            elif child.dep_ in {"xcomp", "ccomp"}:
                objects.append((pred, _phrase(child)))
        for sub in subjects:
            subject = _phrase(sub)
            if not objects:
                triples.append(Triple(subject, pred, "", si))
            for relation, obj in objects:
                triples.append(Triple(subject, relation, obj, si))
    return list(dict.fromkeys(triples))


class _StructureMetric(Metric):
    family = "structure"
    # 2: token_f1 keeps a "." or "," between digits (``answer_f1``), cosines clipped to [-1, 1]
    version = "2"
    roles = {"embedder": "text-encoder", "spacy": "pipeline"}

    def validate_settings(self) -> None:
        check_sim(self, SIMS)

    @classmethod
    def value_range(cls, settings: Mapping[str, Any]) -> tuple[float | None, float | None]:
        """token_f1: F1s in [0, 1] and their means; cosine: cosines in [-1, 1] and their means
        (``Frames`` overrides it for its F1 component)."""
        return (0.0, 1.0) if settings.get("sim", cls.defaults["sim"]) == "token_f1" else (-1.0, 1.0)

    def _parse(self, examples: Sequence[Example], ctx: ScoringContext, extract: Callable):  # noqa: ANN202
        """Each distinct text's frames or triples (``extract``), and their phrases' similarity."""
        parsed = {
            t: extract(textmod.parse(t, ctx.spacy_model))
            for t in dict.fromkeys(x for ex in examples for x in (ex.source, ex.summary))
        }
        return parsed, self._similarity(ctx, [p.text for ps in parsed.values() for p in ps])

    def _similarity(self, ctx: ScoringContext, texts: list[str]):  # noqa: ANN202
        if self.settings["sim"] == "token_f1":
            return f1_matrix
        cache = SimilarityCache(ctx.model("embedder", "text-encoder"))
        cache.add(texts)  # every distinct phrase of the batch in one call
        return cache.matrix


@register
class Frames(_StructureMetric):
    """Frame (SRL-style) argument F1 from spaCy dependencies; formula in the module docstring."""

    name = "frames"
    description = (
        "predicate-argument frames (who/what/when/...) of the summary matched in the source"
    )
    defaults = {"sim": "cosine", "component": "f1"}
    scale = "share of summary predicate frames matched in the source, 0..1"
    sentence_value = "mean match of the sentence's frames (0..1; - = no frame)"

    @classmethod
    def value_range(cls, settings: Mapping[str, Any]) -> tuple[float | None, float | None]:
        """As the other structure metric, but the F1 of a cosine recall and precision, 2RP /
        (R + P), is at most 1 and unbounded below when one of them is negative (a mean of such
        F1s over the labels too)."""
        low, high = super().value_range(settings)
        component = settings.get("component", cls.defaults["component"])
        return (None, high) if low is not None and low < 0 and component == "f1" else (low, high)

    def validate_settings(self) -> None:
        super().validate_settings()
        if self.settings["component"] not in COMPONENTS:
            raise InputError(
                f"metric 'frames': component must be one of {', '.join(COMPONENTS)}, "
                f"got {self.settings['component']!r}"
            )

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        shash = self.settings_hash(ctx)
        model = ctx.spacy_model
        parsed, sim = self._parse(examples, ctx, extract_frames)
        scores = []
        for ex in examples:
            score = self._score(ex, parsed[ex.summary], parsed[ex.source], sim, shash)
            if score.ok:
                summ = parsed[ex.summary]
                best = score.details.pop("_best")
                doc = textmod.parse(ex.summary, model)
                score.sentences = sentence_scores(doc, summ, [best[f] for f in summ])
            scores.append(score)
        return scores

    def _score(self, ex: Example, summ: list[Frame], src: list[Frame], sim, shash: str) -> Score:
        if not summ:
            return Score.failed(
                self.name, shash, ex.id, "no predicate-argument frame found in the summary"
            )
        per_label: dict[str, dict[str, Any]] = {}
        best_of: dict[Frame, float] = {}  # each summary frame's best match (per sentence)
        for label in LABELS:
            frames = [f for f in summ if f.label == label]
            ps = [f.text for f in frames]
            if not ps:
                continue
            qs = [f.text for f in src if f.label == label]
            if qs:
                m = sim(ps, qs)
                recall = float(m.max(axis=1).mean())
                precision = float(m.max(axis=0).mean())
                best = [qs[j] for j in m.argmax(axis=1)]
                best_of.update(zip(frames, m.max(axis=1).tolist(), strict=True))
            else:
                recall = precision = 0.0
                best = [None] * len(ps)
                best_of.update((f, 0.0) for f in frames)
            f1 = 2 * recall * precision / (recall + precision) if recall + precision > 0 else 0.0
            per_label[label] = {
                "recall": recall,
                "precision": precision,
                "f1": f1,
                "summary_phrases": ps,
                "best_source_phrases": best,
                "n_source_phrases": len(qs),
            }
        component = self.settings["component"]
        value = float(np.mean([v[component] for v in per_label.values()]))
        return Score(
            self.name,
            value,
            shash,
            ex.id,
            details={
                "_best": best_of,
                "labels": per_label,
                "n_summary_frames": len(summ),
                "n_source_frames": len(src),
            },
        )


@register
class Triples(_StructureMetric):
    """Open-IE-style triple matching from spaCy dependencies; formula in the module docstring."""

    name = "triples"
    description = "(subject, relation, object) triples of the summary matched in the source"
    defaults = {"sim": "cosine"}
    scale = "share of summary (subject, relation, object) triples matched in the source, 0..1"
    sentence_value = "mean match of the sentence's triples (0..1; - = no triple)"

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        shash = self.settings_hash(ctx)
        model = ctx.spacy_model
        parsed, sim = self._parse(examples, ctx, extract_triples)
        scores = []
        for ex in examples:
            summ_triples = parsed[ex.summary]
            summ = [t.text for t in summ_triples]
            src = [t.text for t in parsed[ex.source]]
            if not summ:
                scores.append(
                    Score.failed(
                        self.name,
                        shash,
                        ex.id,
                        "no (subject, relation, object) triple found in the summary",
                    )
                )
                continue
            if src:
                m = sim(summ, src)
                best = m.max(axis=1)
                matches = [src[j] for j in m.argmax(axis=1)]
            else:
                best = np.zeros(len(summ))
                matches = [None] * len(summ)
            details = {
                "triples": [
                    {"summary": t, "best_source": s, "sim": float(b)}
                    for t, s, b in zip(summ, matches, best, strict=True)
                ],
                "n_source_triples": len(src),
            }
            sentences = sentence_scores(
                textmod.parse(ex.summary, model), summ_triples, best.tolist()
            )
            scores.append(Score(self.name, float(best.mean()), shash, ex.id, sentences, details))
        return scores
