"""BERTScore and SentSim formulas on hand-made embeddings (a fake TextEncoder in the pool)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fake_encoder import fake_context, regex_split

from faithgate import text as textmod
from faithgate.errors import InputError
from faithgate.metrics.base import get_metric
from faithgate.metrics.embedding import align_sentences, idf_weights, token_f1
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

E1, E2, E3, E4 = np.eye(4).tolist()
VECTORS = {
    "cats": E1,
    "sleep": E2,
    "all": E3,
    "day": E3,
    "birds": E4,
    "sing": E4,
    "dogs": [0.6, 0, 0, 0.8],  # cos 0.6 with cats, 0.8 with birds
    "bark": E4,
}
SOURCE = "Cats sleep all day. Birds sing."
SUMMARY = "Cats sleep. Dogs bark."


@pytest.fixture(autouse=True)
def _regex_sentences(monkeypatch):
    monkeypatch.setattr(textmod, "split_sentences", regex_split)


def score(metric, examples, vectors=VECTORS):
    ctx, encoder = fake_context(vectors)
    return metric.score_batch(examples, ctx), encoder


def test_bertscore_precision_recall_f1_by_hand():
    (s,), _ = score(get_metric("bertscore"), [Example("1", SOURCE, SUMMARY)])
    # summary tokens' best matches: cats 1, sleep 1, dogs 0.8 (birds), bark 1
    p = (1 + 1 + 0.8 + 1) / 4
    # source tokens' best matches: cats 1, sleep 1, all 0, day 0, birds 1, sing 1
    r = 4 / 6
    f = 2 * p * r / (p + r)
    assert s.details["precision"] == pytest.approx(p)
    assert s.details["recall"] == pytest.approx(r)
    assert s.value == pytest.approx(p)  # default component: precision (issue 16)
    (f1,), _ = score(get_metric("bertscore", component="f1"), [Example("1", SOURCE, SUMMARY)])
    assert f1.value == pytest.approx(f)
    assert f1.settings_hash != s.settings_hash  # the component is part of the hash
    assert s.details["n_summary_tokens"] == 4 and s.details["n_source_tokens"] == 6


def test_bertscore_per_sentence_precision_and_evidence():
    (s,), _ = score(get_metric("bertscore"), [Example("1", SOURCE, SUMMARY)])
    assert [x.text for x in s.sentences] == ["Cats sleep.", "Dogs bark."]
    assert s.sentences[0].value == pytest.approx(1.0)
    assert s.sentences[1].value == pytest.approx(0.9)
    assert s.sentences[0].evidence == "Cats sleep all day."
    assert s.sentences[1].evidence == "Birds sing."
    assert s.least_supported().index == 1
    assert s.details["sentence_alignment"] == "exact"
    assert s.details["tokens"][2] == {"token": "dogs", "similarity": 0.8, "match": "birds"}


def test_bertscore_component_setting():
    ex = [Example("1", SOURCE, SUMMARY)]
    (p,), _ = score(get_metric("bertscore", component="precision"), ex)
    (r,), _ = score(get_metric("bertscore", component="recall"), ex)
    assert p.value == pytest.approx(0.95)
    assert r.value == pytest.approx(4 / 6)


def test_bertscore_idf_over_the_source_sentences():
    ex = Example("1", SOURCE, SUMMARY)
    (s,), _ = score(get_metric("bertscore", idf=True), [ex])
    # M = 2 source sentences, every source word in one of them: idf log(3/2); unseen log 3.
    lo, un = math.log(3 / 2), math.log(3)
    # summary: cats (lo, 1), sleep (lo, 1), dogs (un, 0.8 to birds), bark (un, 1)
    assert s.details["precision"] == pytest.approx((2 * lo + un * 1.8) / (2 * lo + 2 * un))
    assert s.details["recall"] == pytest.approx(4 / 6)  # equal weights on the source side
    assert "idf_fallback" not in s.details
    # The weights come from this example alone: other examples in the batch change nothing.
    other = Example("2", "Cats sing. Cats sleep. Cats bark.", "Cats sing.")
    (t, _), _ = score(get_metric("bertscore", idf=True), [ex, other])
    assert t.value == s.value and t.details["precision"] == s.details["precision"]


def test_bertscore_idf_single_sentence_source_falls_back_to_uniform():
    (s,), _ = score(get_metric("bertscore", idf=True), [Example("1", "Cats sing.", "Cats sing.")])
    # M = 1: every token has idf log(2/2) = 0 -> uniform weights, reported
    assert s.details["idf_fallback"] is True
    assert s.details["precision"] == pytest.approx(1.0)
    assert s.details["recall"] == pytest.approx(1.0)


def test_idf_weights_formula():
    idf, unseen = idf_weights([["a", "b"], ["a"], ["c", "a", "a"]])
    assert idf["a"] == pytest.approx(math.log(4 / 4))
    assert idf["b"] == pytest.approx(math.log(4 / 2))
    assert unseen == pytest.approx(math.log(4))


def test_each_distinct_source_encoded_once_per_batch():
    examples = [Example(str(i), SOURCE, s) for i, s in enumerate([SUMMARY, "Cats sleep.", SUMMARY])]
    scores, encoder = score(get_metric("bertscore"), examples)
    assert len(encoder.calls) == 1
    assert sorted(encoder.calls[0]) == sorted([SOURCE, SUMMARY, "Cats sleep."])
    assert scores[0].value == pytest.approx(scores[2].value)


def test_bertscore_bad_settings_are_input_errors():
    with pytest.raises(InputError, match="component"):
        get_metric("bertscore", component="f2")
    with pytest.raises(InputError, match="layer"):
        get_metric("bertscore", layer="last")
    with pytest.raises(InputError, match="no setting"):
        get_metric("bertscore", bogus=1)


def test_align_sentences_exact_and_approximate():
    spans, exact = align_sentences(["a b", "c"], 3, lambda s: len(s.split()))
    assert spans == [(0, 2), (2, 3)] and exact
    spans, exact = align_sentences(["a b", "c d"], 6, lambda s: len(s.split()))
    assert spans == [(0, 3), (3, 6)] and not exact


def test_sentsim_cosine_by_hand():
    (s,), _ = score(get_metric("sentsim"), [Example("1", SOURCE, SUMMARY)])
    # sentence vectors are normalised means of word vectors
    s1 = np.array([1, 1, 0, 0]) / math.sqrt(2)
    s2 = np.array([0.6, 0, 0, 1.8]) / math.sqrt(3.6)
    d1 = np.array([1, 1, 2, 0]) / math.sqrt(6)
    d2 = np.array([0, 0, 0, 1.0])
    best = [max(s1 @ d1, s1 @ d2), max(s2 @ d1, s2 @ d2)]  # 2/sqrt(12), 1.8/sqrt(3.6)
    assert best[0] == pytest.approx(2 / math.sqrt(12))
    p = sum(best) / 2
    r = (max(d1 @ s1, d1 @ s2) + max(d2 @ s1, d2 @ s2)) / 2
    assert s.value == pytest.approx(p)  # default component: precision
    assert s.details["recall"] == pytest.approx(r)
    assert s.details["f1"] == pytest.approx(2 * p * r / (p + r))
    assert [x.evidence for x in s.sentences] == ["Cats sleep all day.", "Birds sing."]
    assert s.details["best_source_sentence"] == [0, 1]


def test_sentsim_reports_sentences_cut_by_the_encoder(monkeypatch):
    (ok,), encoder = score(get_metric("sentsim"), [Example("1", SOURCE, SUMMARY)])
    assert "truncated_sentences" not in ok.details
    monkeypatch.setattr(type(encoder), "max_length", property(lambda self: 5))  # 3 inner tokens
    (s,), _ = score(get_metric("sentsim"), [Example("1", SOURCE, SUMMARY)])
    assert s.details["truncated_sentences"] == 1  # "Cats sleep all day." has 4 tokens


def test_sentsim_token_f1_by_hand_needs_no_model():
    metric = get_metric("sentsim", sim="token_f1")
    assert metric.roles == {"spacy": "pipeline"}
    (s,), encoder = score(metric, [Example("1", SOURCE, SUMMARY)])
    assert encoder.calls == []
    # "cats sleep" vs "cats sleep all day": P 1, R 1/2 -> F 2/3; "dogs bark" shares nothing
    assert s.sentences[0].value == pytest.approx(2 / 3)
    assert s.sentences[1].value == pytest.approx(0.0)
    assert s.details["precision"] == pytest.approx(1 / 3)
    assert s.details["recall"] == pytest.approx(1 / 3)  # (2/3 + 0) / 2


@pytest.mark.parametrize("name", ["bertscore", "sentsim"])
def test_text_the_embedder_cannot_read_fails_instead_of_matching(name):
    """All-unknown text (MiniLM on Thai) embeds like any other all-unknown text: Thai against
    unrelated Thai scored 1.0. It fails with the reason; a readable pair in the same batch
    scores as alone."""
    vectors = {**VECTORS, "unk": E1}
    examples = [Example("u", "Unk unk.", "Unk."), Example("s", "Cats sleep. Unk.", "Unk unk.")]
    scores, _ = score(get_metric(name), [*examples, Example("1", SOURCE, SUMMARY)], vectors)
    assert [s.error for s in scores[:2]] == [
        "the embedder's vocabulary knows none of the summary's characters "
        "(every token is unknown to it)"
    ] * 2
    (alone,), _ = score(get_metric(name), [Example("1", SOURCE, SUMMARY)], vectors)
    assert scores[2].value == alone.value and scores[2].ok
    # A source the embedder cannot read at all fails too; some unknown words do not.
    (src,), _ = score(get_metric(name), [Example("x", "Unk unk.", "Cats sleep.")], vectors)
    assert "none of the source's characters" in src.error
    (mixed,), _ = score(get_metric(name), [Example("m", "Cats unk.", "Cats unk.")], vectors)
    assert mixed.ok


def test_token_f1():
    assert token_f1(["a", "b", "b"], ["b", "c"]) == pytest.approx(2 * (1 / 3) * (1 / 2) / (5 / 6))
    assert token_f1([], ["a"]) == 0.0


def test_scorer_with_injected_encoder_names_it_in_settings_hash():
    ctx, _ = fake_context(VECTORS)
    scorer = Scorer(["bertscore", "sentsim"], pool=ctx.pool)
    res = scorer.score([Example("1", SOURCE, SUMMARY)])[0]
    assert res["bertscore"].settings_hash.startswith("bertscore|fake-encoder@")
    assert res["bertscore"].settings_hash != res["sentsim"].settings_hash
    other = Scorer([get_metric("bertscore", layer=2)], pool=ctx.pool)
    assert other.settings_hashes()["bertscore"] != res["bertscore"].settings_hash


@pytest.mark.slow
def test_real_minilm_prefers_bump_reference(bump_rows):
    ref, edit = bump_rows[0], bump_rows[1]
    assert ref["pair_id"] == edit["pair_id"]
    scorer = Scorer(["bertscore"])
    a, b = scorer.score(
        [Example("r", ref["source"], ref["summary"]), Example("e", edit["source"], edit["summary"])]
    )
    assert a["bertscore"].ok and b["bertscore"].ok
    assert a["bertscore"].value != b["bertscore"].value
    assert a["bertscore"].details["source_windowed"] in (True, False)
    assert len(a["bertscore"].sentences) >= 1


@pytest.mark.parametrize("name", ["bertscore", "sentsim"])
def test_cosines_never_pass_one(name):
    """Unit vectors in float32 give a self-cosine of 1 + 2^-23 for some vectors: a verbatim
    copy scored 1.0000001, above the documented maximum of 1."""
    vectors = {"cats": [0.9, 0.1, -0.7, -0.9], "sleep": E2}
    (s,), _ = score(get_metric(name), [Example("1", "Cats. Sleep.", "Cats.")], vectors)
    assert s.value == 1.0 and s.sentences[0].value == 1.0
    assert all(x.value <= 1.0 for x in s.sentences) and s.details["recall"] <= 1.0


def test_bertscore_idf_sentence_with_zero_weights_is_weighted_uniformly():
    """With idf, a summary sentence copied from a one-sentence source has only idf-0 tokens:
    its value was 0/0 -> 0.0 and it was named the least supported sentence."""
    ex = Example("1", "Cats sleep.", "Cats sleep. Dogs bark.")
    (s,), _ = score(get_metric("bertscore", idf=True), [ex])
    # Sentence 0: cats 1, sleep 1, uniformly; sentence 1: dogs 0.6 (cats), bark 0 (log 2 each).
    assert [x.value for x in s.sentences] == [pytest.approx(1.0), pytest.approx(0.3)]
    assert s.least_supported().index == 1
    assert s.details["idf_fallback_sentences"] == [0]
    # The headline keeps bert_score's weights: only the novel tokens count on the summary side.
    assert s.details["precision"] == pytest.approx(0.3)


def test_sentsim_token_f1_keeps_combining_marks_and_refuses_unsegmented_scripts():
    """Python ``re``'s \\w drops the vowel signs of Devanagari, so "रोम" (Rome) and "राम" (Ram)
    were the same word and token_f1 scored 1.0; Thai, written without spaces, was scored as
    long runs of letters instead of failing as ``overlap`` does."""
    metric = get_metric("sentsim", sim="token_f1")
    hindi = Example(
        "h",
        "\u0930\u093e\u092e \u0926\u093f\u0932\u094d\u0932\u0940 \u0917\u092f\u093e\u0964",
        "\u0930\u094b\u092e \u0926\u093f\u0932\u094d\u0932\u0940 \u0917\u092f\u093e\u0964",
    )
    thai = Example(
        "t",
        "\u0e1b\u0e23\u0e30\u0e40\u0e17\u0e28\u0e44\u0e17\u0e22\u0e21\u0e35\u0e40\u0e21\u0e37\u0e2d\u0e07\u0e2b\u0e25\u0e27\u0e07",
        "\u0e1b\u0e23\u0e30\u0e40\u0e17\u0e28\u0e44\u0e17\u0e22\u0e21\u0e35\u0e40\u0e21\u0e37\u0e2d\u0e07",
    )
    (h, t), _ = score(metric, [hindi, thai])
    assert h.value == pytest.approx(2 / 3)  # two of three words shared
    assert not t.ok and t.error.startswith("Thai text is not supported")
    (o,), _ = score(get_metric("overlap"), [thai])
    assert t.error == o.error.replace("overlap", "sentsim")
