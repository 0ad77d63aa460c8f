"""frames and triples: extraction from spaCy parses, exact formulas with token F1 and with a
fake embedder, pronoun resolution, and failures that say why."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from faithgate.backends import ModelPool
from faithgate.backends.base import TextEncoder
from faithgate.engines.spans import answer_f1
from faithgate.errors import InputError
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.metrics.structure import Frame, extract_frames, extract_triples
from faithgate.models import ModelSpec
from faithgate.text import parse
from faithgate.types import Example


class FakeEncoder(TextEncoder):
    """One-hot-ish vectors: a text's vector counts a few marker words, so cosines are exact."""

    MARKERS = ("police", "arrested", "paris", "london", "monday", "thief", "released")

    def __init__(self) -> None:
        super().__init__(ModelSpec("embedder", "fake-emb", "/nonexistent/emb", "path"), "fake")

    @property
    def max_length(self) -> int:
        return 512

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def unknown_only(self, text: str) -> bool:
        return False

    def token_embeddings(self, texts, layer=None):  # pragma: no cover - unused
        raise NotImplementedError

    def sentence_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        vecs = np.array(
            [[t.lower().split().count(m) for m in self.MARKERS] + [0.01] for t in texts], float
        )
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


class FakePool(ModelPool):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = FakeEncoder()

    def backend_for(self, role: str, task: str) -> str:
        return "fake"

    def spec(self, role: str) -> ModelSpec:
        return self.encoder.spec if role == "embedder" else super().spec(role)

    def get(self, role: str, task: str, **options):
        assert role == "embedder"
        return self.encoder


def score(metric: str, source: str, summary: str, **settings):
    ctx = ScoringContext(FakePool())
    return get_metric(metric, **settings).score_batch([Example("e", source, summary)], ctx)[0]


def test_frame_labels_from_the_dependency_parse():
    doc = parse("The police arrested the thief in Paris on Monday because he stole a car.")
    frames = {(f.label, f.text) for f in extract_frames(doc)}
    assert ("who", "The police arrested") in frames
    assert ("what", "arrested the thief") in frames
    assert ("where", "arrested in Paris") in frames
    assert ("when", "arrested on Monday") in frames
    assert any(label == "why" and text.startswith("arrested because") for label, text in frames)


def test_negation_and_passive_stay_in_the_predicate():
    doc = parse("The thief was not arrested by the police.")
    frames = extract_frames(doc)
    assert Frame("who", "was not arrested", "the police") in frames
    assert Frame("what", "was not arrested", "The thief") in frames


def test_triples_and_pronoun_resolution():
    doc = parse("John Smith visited Paris. He met the mayor at the town hall.")
    triples = {t.text for t in extract_triples(doc)}
    assert "John Smith visited Paris" in triples
    assert "John Smith met the mayor" in triples  # "He" -> nearest preceding PERSON
    assert "John Smith met at the town hall" in triples


def test_frames_formula_with_token_f1():
    source = "The police arrested the thief in Paris."
    summary = "The police arrested the thief in London."
    s = score("frames", source, summary, sim="token_f1")
    labels = s.details["labels"]
    assert set(labels) == {"who", "what", "where"}
    assert labels["who"]["f1"] == pytest.approx(1.0)
    assert labels["what"]["f1"] == pytest.approx(1.0)
    # "arrested in london" vs "arrested in paris": 2 of 3 tokens shared -> F1 2/3
    where = answer_f1("arrested in London", "arrested in Paris")
    assert where == pytest.approx(2 / 3)
    assert labels["where"]["recall"] == pytest.approx(where)
    assert s.value == pytest.approx((1 + 1 + where) / 3)


def test_frames_precision_recall_components_and_missing_labels():
    source = "The police arrested the thief. The police released the thief on Monday."
    summary = "The police arrested the thief on Monday."
    # who: summary {police arrested}; source {police arrested, police released}
    #   recall = 1; precision = (1 + f1("police released","police arrested")) / 2
    # when: summary {arrested on Monday}, source {released on Monday}
    s = score("frames", source, summary, sim="token_f1", component="recall")
    labels = s.details["labels"]
    pr = (1 + answer_f1("police released", "police arrested")) / 2
    assert labels["who"]["precision"] == pytest.approx(pr)
    assert labels["who"]["recall"] == pytest.approx(1.0)
    when = answer_f1("arrested on Monday", "released on Monday")
    assert labels["when"]["recall"] == pytest.approx(when)
    assert s.value == pytest.approx(np.mean([labels[k]["recall"] for k in labels]))
    # A label absent from the source scores 0 for it.
    s2 = score(
        "frames",
        "The police arrested the thief.",
        "The police arrested him in Paris.",
        sim="token_f1",
    )
    assert s2.details["labels"]["where"]["f1"] == 0.0


def test_frames_cosine_uses_the_embedder():
    source = "The police arrested the thief in Paris."
    summary = "The police arrested the thief in London."
    s = score("frames", source, summary)
    # where: "arrested in London" -> (arrested, london) vs (arrested, paris): cos ~ 1/2
    v1 = np.array([0, 1, 0, 1, 0, 0, 0, 0.01])
    v2 = np.array([0, 1, 1, 0, 0, 0, 0, 0.01])
    cos = v1 @ v2 / (np.linalg.norm(v1) * np.linalg.norm(v2))
    assert s.details["labels"]["where"]["f1"] == pytest.approx(cos)
    assert s.value == pytest.approx((1 + 1 + cos) / 3, abs=1e-6)


def test_triples_formula():
    source = "The police arrested the thief in Paris. The thief stole a car."
    summary = "The police arrested the thief in London."
    s = score("triples", source, summary, sim="token_f1")
    rows = {r["summary"]: r for r in s.details["triples"]}
    assert rows["The police arrested the thief"]["sim"] == pytest.approx(1.0)
    london = rows["The police arrested in London"]
    assert london["best_source"] == "The police arrested in Paris"
    assert london["sim"] == pytest.approx(
        answer_f1("police arrested in London", "police arrested in Paris")
    )
    assert s.value == pytest.approx((1.0 + london["sim"]) / 2)


def test_unscorable_summary_fails_with_a_reason():
    s = score("triples", "The police arrested the thief.", "Paris.", sim="token_f1")
    assert not s.ok and "triple" in s.error
    f = score("frames", "The police arrested the thief.", "Paris.", sim="token_f1")
    assert not f.ok and "frame" in f.error


def test_bad_settings():
    with pytest.raises(InputError):
        get_metric("frames", sim="jaccard")
    with pytest.raises(InputError):
        get_metric("frames", component="mean")
    assert "embedder" not in get_metric("triples", sim="token_f1").roles


def test_sentence_scores_point_at_the_least_supported_sentence():
    source = "The police arrested the thief in Paris. The thief stole a car."
    summary = "The thief stole a car. The police arrested the thief in London."
    for metric in ("frames", "triples"):
        s = score(metric, source, summary, sim="token_f1")
        assert [x.index for x in s.sentences] == [0, 1]
        assert s.sentences[0].value == pytest.approx(1.0)
        worst = s.least_supported()
        assert worst.index == 1 and "London" in worst.evidence
