"""How to read a metric's numbers: its scale and what its per-sentence values hold.

Every metric is oriented so that higher = more faithful, but the scales differ (a probability,
a cosine, a mean log-probability that is never above 0) and a metric's per-sentence value is
not always the quantity of its headline (``harim_plus`` is ``mean log p - 7 HaRiM`` for the
summary; per sentence it is the sentence's mean log p). ``faithgate score`` prints both, so a
reader does not compare a -3.62 headline with a -1.18 sentence value as if they were one
quantity.

A metric class may say it itself with the class attributes ``scale`` and ``sentence_value``
(``str.format`` templates over its settings, e.g. ``"BERTScore {component}"``); the table below
covers the built-in metrics, kept in one place so the wording stays consistent across families.
"""

from __future__ import annotations

from typing import Any

_LOGP = "mean log p(token | source) of the sentence's tokens (<= 0; 0 = certain)"

# name -> (scale of the headline value, what a per-sentence value is)
_BUILTIN: dict[str, tuple[str, str]] = {
    "bertscore": (
        "BERTScore {component}: mean best cosine match of token embeddings, at most 1 "
        "(MiniLM on news: precision ~0.75-0.95, F1 ~0.45-0.75)",
        "precision of the sentence's tokens against the source (cosine, at most 1)",
    ),
    "sentsim": (
        "{component} of the best source-sentence similarity ({sim}), at most 1",
        "similarity to the most similar source sentence",
    ),
    "ner": (
        "share of the summary's named entities found in the source, 0..1 "
        "(no entity: {no_entity_value})",
        "share of the sentence's entities found in the source (0..1; - = no entity)",
    ),
    "overlap": (
        "{component} precision against the source, 0..1 (1 = every n-gram copied)",
        "the same {component} precision for the sentence alone (0..1)",
    ),
    "frames": (
        "share of summary predicate frames matched in the source, 0..1",
        "mean match of the sentence's frames (0..1; - = no frame)",
    ),
    "triples": (
        "share of summary (subject, relation, object) triples matched in the source, 0..1",
        "mean match of the sentence's triples (0..1; - = no triple)",
    ),
    "qgqa": (
        "mean answer F1 (source vs summary answers to questions about the summary), 0..1",
        "mean answer F1 of the questions about the sentence (0..1)",
    ),
    "feqa": (
        "mean answer F1 of the masked summary spans answered from the source, 0..1",
        "mean answer F1 of the sentence's spans (0..1)",
    ),
    "loglik": ("mean log p(summary token | source), <= 0 (0 = certain)", _LOGP),
    "harim": ("-HaRiM, <= 0 (0 = no hallucination risk)", _LOGP + "; not -HaRiM"),
    "harim_plus": (
        "mean log p(token | source) - 7 HaRiM, unbounded below (news, SmolLM2: about -5..-1)",
        _LOGP + "; not the headline formula",
    ),
    "cop": (
        "mean log p(summary | source) - log p(summary | [summary, source]), unbounded",
        _LOGP + "; not the headline formula",
    ),
    "fflm": (
        "weighted log-probability changes with and without the source, unbounded",
        _LOGP + "; not the headline formula",
    ),
    "entail_s2s": (
        "mean entailment probability of the summary sentences, 0..1",
        "entailment probability by the best source sentence (0..1)",
    ),
    "entail_d2s": (
        "mean entailment probability of the summary sentences by the source, 0..1",
        "entailment probability by the (windowed) source (0..1)",
    ),
    "entail_topk": (
        "mean entailment probability by the top-k most similar source sentences, 0..1",
        "entailment probability by its top-k source sentences (0..1)",
    ),
    "summac_zs": (
        "mean of max(p_entail - p_contradict) over source chunks, -1..1",
        "p_entail - p_contradict by the best source chunk (-1..1)",
    ),
    "combined": ("probability of faithful from a fitted logistic combination, 0..1", ""),
    "ensemble": (
        "sigmoid of the mean z-score of sentsim, overlap, harim_plus and ner, 0..1 (0.5 = typical)",
        "",
    ),
}


def _fill(template: str, settings: dict[str, Any]) -> str:
    try:
        return template.format(**settings)
    except (KeyError, IndexError, ValueError):
        return template  # a template naming a setting the metric lacks: show it unformatted


def how_to_read(metric: Any) -> tuple[str, str]:
    """(scale of the value, what a per-sentence value is) for a metric instance; empty
    strings when nothing is known (a user's metric that says nothing about itself)."""
    cls = type(metric)
    settings = dict(getattr(metric, "settings", {}) or {})
    scale = getattr(cls, "scale", None)
    sentence = getattr(cls, "sentence_value", None)
    builtin = _BUILTIN.get(getattr(metric, "name", ""), ("", ""))
    return (
        _fill(scale if scale is not None else builtin[0], settings),
        _fill(sentence if sentence is not None else builtin[1], settings),
    )
