"""Cheap metrics parse what they need, in batches, with the same results (issue 49).

``overlap`` on 50,000 tiny examples took 115 s idle: each text went through ``nlp(text)``, a
pipeline call per text (about 1 ms of spaCy's own overhead each). Texts are now split and
parsed with ``nlp.pipe`` in batches; sentences and entities are those of one text at a time.
"""

from __future__ import annotations

import pytest
from spacy.language import Language

from faithgate import text as textmod
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.types import Example

TEXTS = [
    "The council approved plan 7 on Monday. It will cost 49 dollars, officials said.",
    "Highlights:\n- Mayor Anne Visser opened the library\n- 12,000 residents served",
    "Dr. Smith arrived at 5 p.m. in Washington. He left at once!",
    "1. First item of the list\n2. Second one, which goes on\n   over two lines",
    "no capital letters here and no full stop",
    "Le conseil a approuvé le plan. Il coûtera cher.",
]


def _examples(n: int) -> list[Example]:
    return [
        Example(
            f"t{i}",
            f"The council in Boston approved plan {i} on Monday. It will cost {i * 7} dollars.",
            f"The council approved plan {i} in Boston.",
        )
        for i in range(n)
    ]


@pytest.fixture()
def pipeline_calls(monkeypatch):
    """How many times a spaCy pipeline was called on one text (``nlp(text)``)."""
    calls = []
    real = Language.__call__

    def counted(self, text, *args, **kwargs):
        calls.append(text)
        return real(self, text, *args, **kwargs)

    textmod.load_spacy(None)  # loaded (and checked, on one call) before counting
    monkeypatch.setattr(Language, "__call__", counted)
    return calls


def test_presplit_gives_the_sentences_of_one_text_at_a_time():
    alone = [textmod._sentences_alone.__wrapped__(t, None) for t in TEXTS]
    textmod.presplit(TEXTS, None)
    assert [textmod._BATCH_SPLIT[(t, None)] for t in TEXTS] == alone
    assert [tuple(textmod.split_sentences(t)) for t in TEXTS] == alone


def test_overlap_splits_a_batch_without_a_pipeline_call_per_text(pipeline_calls):
    metric = get_metric("overlap")
    scores = metric.score_batch(_examples(40), ScoringContext())
    assert all(s.error is None for s in scores)
    assert pipeline_calls == []


def test_ner_parses_a_batch_without_a_pipeline_call_per_text(pipeline_calls, monkeypatch):
    metric = get_metric("ner")
    examples = _examples(12) + [Example(f"x{i}", TEXTS[0], t) for i, t in enumerate(TEXTS)]
    batched = metric.score_batch(examples, ScoringContext())
    assert pipeline_calls == []
    # The same scores as parsing one text at a time.
    textmod._BATCH_PARSED.clear()
    textmod._parse_cached.cache_clear()
    monkeypatch.setattr(textmod, "preparse", lambda texts, model=None: None)
    alone = get_metric("ner").score_batch(examples, ScoringContext())
    assert [(s.value, s.error, s.details) for s in batched] == [
        (s.value, s.error, s.details) for s in alone
    ]
    assert len(pipeline_calls) == len({t for ex in examples for t in (ex.source, ex.summary)})


def test_clear_caches_makes_the_next_parse_and_split_run_again(pipeline_calls):
    """Benchmarks time cold parses and tests swap pipelines: nothing kept survives the clear."""
    text = "A text for the caches. It has two sentences."
    textmod.presplit([text, TEXTS[0]], None)
    textmod.preparse([text, TEXTS[0]], None)
    textmod.split_sentences(text)
    textmod.parse(text)
    assert pipeline_calls == []  # all four answered from what the batch calls kept
    textmod.clear_caches()
    textmod.split_sentences(text)
    textmod.parse(text)
    assert pipeline_calls == [text, text]
