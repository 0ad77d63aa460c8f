"""NLI metrics: exact aggregation formulas with a fake classifier, label order, windowing,
deduplication, the missing-model error, and a tiny random BERT through the torch backend."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from faithgate.backends import ModelPool
from faithgate.backends.base import PairClassifier, TextEncoder
from faithgate.engines.nli import NLIEngine, contradiction_index, entailment_index, nli_engine
from faithgate.errors import InputError, ModelNotFoundError
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.models import ModelSpec
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

SOURCE = "The cat sat on the mat. The dog barked loudly. Rain fell in Paris on Monday."
S1, S2, S3 = SOURCE.split(". ")
S1, S2 = S1 + ".", S2 + "."
SUMMARY = "A cat sat. A dog barked."
H1, H2 = "A cat sat.", "A dog barked."


class FakeNLI(PairClassifier):
    """Fixed probabilities per (premise, hypothesis): ``table`` gives (entail, contradict);
    unknown pairs get (0.1, 0.2). Tokens are whitespace words."""

    def __init__(self, table=None, labels=("entailment", "neutral", "contradiction"), max_len=512):
        super().__init__(ModelSpec("nli", "fake-nli", "/nonexistent/fake-nli", "path"), "fake")
        self.table = dict(table or {})
        self._labels = [str(lbl) for lbl in labels]
        self._max = max_len
        self.calls: list[int] = []

    @property
    def labels(self) -> list[str]:
        return [lbl.lower() for lbl in self._labels]

    @property
    def max_length(self) -> int:
        return self._max

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def probs_for(self, premise: str, hypothesis: str) -> tuple[float, float]:
        return self.table.get((premise, hypothesis), (0.1, 0.2))

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        self.calls.append(len(premises))
        out = np.zeros((len(premises), len(self._labels)))
        e_i, c_i = entailment_index(self._labels), contradiction_index(self._labels)
        for row, (p, h) in enumerate(zip(premises, hypotheses, strict=True)):
            e, c = self.probs_for(p, h)
            out[row, e_i] = e
            if c_i is not None:
                out[row, c_i] = c
            rest = [k for k in range(len(self._labels)) if k not in (e_i, c_i)]
            for k in rest:
                out[row, k] = (1 - e - (c if c_i is not None else 0)) / len(rest)
        return out


class FakeEncoder(TextEncoder):
    """Sentence vectors from a dict (normalised); unknown texts get a fixed vector."""

    def __init__(self, vectors: dict[str, Sequence[float]]) -> None:
        super().__init__(ModelSpec("embedder", "fake-emb", "/nonexistent/emb", "path"), "fake")
        self.vectors = vectors

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
        self.calls = getattr(self, "calls", []) + [list(texts)]
        vecs = np.array([self.vectors.get(t, [0.0, 0.0, 1.0]) for t in texts], dtype=float)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


class FakePool(ModelPool):
    def __init__(self, **fakes) -> None:
        super().__init__()
        self.fakes = fakes

    def spec(self, role: str) -> ModelSpec:
        return self.fakes[role].spec if role in self.fakes else super().spec(role)

    def backend_for(self, role: str, task: str) -> str:
        return "fake"

    def get(self, role: str, task: str, **options):
        return self.fakes[role]


def run(metric: str, examples, nli, encoder=None, **settings):
    fakes = {"nli": nli} | ({"embedder": encoder} if encoder else {})
    ctx = ScoringContext(FakePool(**fakes))
    return get_metric(metric, **settings).score_batch(examples, ctx)


TABLE = {
    (S1, H1): (0.9, 0.05),
    (S2, H1): (0.2, 0.3),
    (S3, H1): (0.1, 0.6),
    (S1, H2): (0.3, 0.1),
    (S2, H2): (0.7, 0.2),
    (S3, H2): (0.05, 0.9),
}


def test_entail_s2s_is_mean_of_max_over_source_sentences():
    [score] = run("entail_s2s", [Example("e", SOURCE, SUMMARY)], FakeNLI(TABLE))
    assert score.value == pytest.approx((0.9 + 0.7) / 2)
    assert [s.value for s in score.sentences] == pytest.approx([0.9, 0.7])
    assert [s.evidence for s in score.sentences] == [S1, S2]
    assert score.details["best_premise"] == [0, 1]


@pytest.mark.parametrize(
    "labels",
    [
        ("entailment", "neutral", "contradiction"),
        ("CONTRADICTION", "Neutral", "ENTAILMENT"),
        ("neutral", "Entailment", "contradiction"),
    ],
)
def test_label_order_is_read_from_the_model(labels):
    [score] = run("summac_zs", [Example("e", SOURCE, SUMMARY)], FakeNLI(TABLE, labels))
    # column maxima of p_e - p_c: H1 -> 0.9-0.05 (S1), H2 -> 0.7-0.2 (S2)
    assert score.value == pytest.approx(((0.9 - 0.05) + (0.7 - 0.2)) / 2)


def test_labels_without_entailment_are_a_one_line_error():
    with pytest.raises(InputError, match="none is 'entailment'"):
        run("entail_s2s", [Example("e", SOURCE, SUMMARY)], FakeNLI(TABLE, ("LABEL_0", "LABEL_1")))
    assert entailment_index(["not_entailment", "entailment"]) == 1
    with pytest.raises(InputError):
        entailment_index(["not_entailment", "other"])


def test_summac_zs_matrix_is_kept_and_exact():
    [score] = run("summac_zs", [Example("e", SOURCE, SUMMARY)], FakeNLI(TABLE))
    expected = [[0.85, 0.2], [-0.1, 0.5], [-0.5, -0.85]]
    assert np.allclose(score.details["matrix"], expected)
    assert score.details["best_chunk"] == [0, 1]
    assert score.value == pytest.approx((0.85 + 0.5) / 2)
    # Two-sentence chunks: chunk 0 = S1 S2, chunk 1 = S3 (pairs unknown to the table -> 0.1-0.2)
    [score2] = run("summac_zs", [Example("e", SOURCE, SUMMARY)], FakeNLI(TABLE), chunk_sentences=2)
    assert np.allclose(score2.details["matrix"], [[-0.1, -0.1], [-0.5, -0.85]])


def test_two_class_model_uses_zero_contradiction():
    nli = FakeNLI(TABLE, labels=("not_entailment", "entailment"))
    [score] = run("summac_zs", [Example("e", SOURCE, SUMMARY)], nli)
    assert score.value == pytest.approx((0.9 + 0.7) / 2)
    assert score.details["has_contradiction_class"] is False


def test_entail_d2s_windows_long_sources_and_takes_the_max():
    # 3 source sentences of 5-6 words; max_len 14 leaves 14 - 3 (longest summary) - 4 = 7 tokens
    # per window -> one sentence per window (overlap cannot apply to single sentences).
    table = {(S1, H1): (0.8, 0.0), (S2, H2): (0.6, 0.0), (S3, H2): (0.65, 0.1)}
    nli = FakeNLI(table, max_len=14)
    [score] = run("entail_d2s", [Example("e", SOURCE, SUMMARY)], nli)
    assert score.details["windowed"] is True
    assert score.details["window_tokens"] == 7
    assert [(w["start"], w["end"]) for w in score.details["windows"]] == [(0, 1), (1, 2), (2, 3)]
    assert score.value == pytest.approx((0.8 + 0.65) / 2)
    assert score.details["best_premise"] == [0, 2]
    # A large context: one window holding the whole source.
    whole = " ".join([S1, S2, S3])
    nli_big = FakeNLI({(whole, H1): (0.4, 0.0), (whole, H2): (0.2, 0.0)}, max_len=512)
    [big] = run("entail_d2s", [Example("e", SOURCE, SUMMARY)], nli_big)
    assert big.details["windowed"] is False
    assert big.value == pytest.approx(0.3)


def test_entail_d2s_overlapping_windows():
    # Budget 20 - 3 - 4 = 13 tokens: S1 (6) + S2 (4) fit, S3 (6) does not -> windows [0,2) [1,3)
    nli = FakeNLI({}, max_len=20)
    [score] = run("entail_d2s", [Example("e", SOURCE, SUMMARY)], nli)
    assert [(w["start"], w["end"]) for w in score.details["windows"]] == [(0, 2), (1, 3)]


def test_entail_topk_uses_embedding_neighbours_in_document_order():
    vectors = {
        S1: [1.0, 0.0, 0.0],
        S2: [0.0, 1.0, 0.0],
        S3: [0.7, 0.7, 0.0],
        H1: [0.8, 0.6, 0.0],  # closest: S3, then S1
        H2: [0.0, 1.0, 0.1],  # closest: S2, then S3
    }
    p1, p2 = f"{S1} {S3}", f"{S2} {S3}"  # document order, not similarity order
    nli = FakeNLI({(p1, H1): (0.5, 0.0), (p2, H2): (0.9, 0.0)})
    [score] = run("entail_topk", [Example("e", SOURCE, SUMMARY)], nli, FakeEncoder(vectors), k=2)
    assert score.details["topk_sentences"] == [[0, 2], [1, 2]]
    assert score.value == pytest.approx(0.7)
    assert score.sentences[0].evidence == p1


def test_pairs_are_deduplicated_across_summaries_of_one_source():
    nli = FakeNLI(TABLE)
    examples = [Example("a", SOURCE, SUMMARY), Example("b", SOURCE, H1), Example("c", SOURCE, H2)]
    ctx = ScoringContext(FakePool(nli=nli))
    get_metric("entail_s2s").score_batch(examples, ctx)
    get_metric("summac_zs").score_batch(examples, ctx)  # same pairs: all cached
    assert nli.calls == [6]
    assert nli_engine(ctx).n_classified == 6


def test_unscorable_example_is_failed_not_silent():
    [score] = run("entail_s2s", [Example("e", SOURCE, "...")], FakeNLI(TABLE))
    assert score.ok or score.error  # "..." may split to one sentence; either way never silent
    engine = NLIEngine(FakeNLI(TABLE))
    assert engine.entailment([]).shape == (0,)


def test_without_an_nli_model_the_error_says_how_to_configure_one(tmp_path, monkeypatch):
    # The shipped checker removed (a broken install): the error says how to configure one.
    from faithgate import models

    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path))
    monkeypatch.setattr(models, "SHIPPED_DIR", tmp_path / "no-shipped-models")
    scorer = Scorer(["entail_s2s"])
    with pytest.raises(ModelNotFoundError) as err:
        scorer.score([Example("e", SOURCE, SUMMARY)])
    message = str(err.value)
    assert "nli" in message and "--model nli=" in message and "\n" not in message


def test_bad_settings_are_input_errors():
    with pytest.raises(InputError):
        get_metric("entail_topk", k=0)
    with pytest.raises(InputError):
        get_metric("summac_zs", chunk_sentences=0)
    with pytest.raises(InputError):
        get_metric("entail_d2s", overlap=-1)


@pytest.fixture(scope="module")
def tiny_nli_dir(tmp_path_factory):
    """A random 2-layer BERT NLI head with MiniLM's tokenizer, saved like a hub checkpoint."""
    torch = pytest.importorskip("torch")
    from tiny_models import MINILM_SIZED, save_minilm_bert

    torch.manual_seed(0)
    return save_minilm_bert(
        tmp_path_factory.mktemp("tiny-nli"),
        "BertForSequenceClassification",
        max_length=64,
        **MINILM_SIZED,
        max_position_embeddings=64,
        num_labels=3,
        id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
        label2id={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2},
    )


def test_tiny_random_bert_through_the_torch_backend(tiny_nli_dir):
    import torch

    path, model, tokenizer = tiny_nli_dir
    long_source = " ".join([SOURCE] * 4)  # 12 sentences, far beyond 64 tokens
    examples = [Example("a", SOURCE, SUMMARY), Example("b", long_source, SUMMARY)]
    scorer = Scorer(
        ["entail_s2s", "entail_d2s", "summac_zs"], models={"nli": str(path)}, backend="torch"
    )
    results = scorer.score(examples)

    def probs(premise: str, hypothesis: str) -> np.ndarray:
        enc = tokenizer(
            premise, hypothesis, truncation="only_first", max_length=64, return_tensors="pt"
        )
        with torch.inference_mode():
            return torch.softmax(model(**enc).logits, -1)[0].numpy()

    sources = [S1, S2, S3]
    expected_s2s = np.mean([max(probs(d, h)[2] for d in sources) for h in (H1, H2)])
    assert results[0]["entail_s2s"].value == pytest.approx(expected_s2s, abs=1e-5)
    expected_zs = np.mean([max(probs(d, h)[2] - probs(d, h)[0] for d in sources) for h in (H1, H2)])
    assert results[0]["summac_zs"].value == pytest.approx(expected_zs, abs=1e-5)
    d2s = results[1]["entail_d2s"]
    assert d2s.details["windowed"] is True and len(d2s.details["windows"]) > 1
    assert all(w["n_tokens"] <= d2s.details["window_tokens"] for w in d2s.details["windows"])
    assert 0.0 <= d2s.value <= 1.0


def test_topk_embeds_each_distinct_sentence_once_per_batch():
    encoder = FakeEncoder({})
    examples = [Example("a", SOURCE, SUMMARY), Example("b", SOURCE, H1), Example("c", SOURCE, H2)]
    run("entail_topk", examples, FakeNLI(TABLE), encoder)
    assert len(encoder.calls) == 1
    assert sorted(encoder.calls[0]) == sorted([S1, S2, S3, H1, H2])


# --- a summary sentence longer than the window: every part is judged ------------------------------

NLI_METRICS = ["entail_s2s", "entail_d2s", "entail_topk", "summac_zs"]
LONG_SOURCE = "The council approved the budget on Tuesday. The mayor praised the staff."
CLAUSE = "the council approved the budget on Tuesday"
# One 37-word sentence; its last clause is invented.
LONG_FAITHFUL = "In a busy week, " + ", ".join([CLAUSE] * 4) + ", and the mayor praised the staff."
LONG_HALLUC = "In a busy week, " + ", ".join([CLAUSE] * 4) + ", and the mayor was arrested."


class TruncatingNLI(FakeNLI):
    """Sees a pair as a window-bound model does: [CLS] p [SEP] h [SEP] in ``max_len`` words,
    the premise cut first (only_first), both sides when the hypothesis alone does not fit
    (longest_first, the backends' fallback). Entails anything but "arrested"."""

    hypotheses_cut = 0

    @property
    def pair_special_tokens(self) -> int:
        return 3

    def probs_for(self, premise: str, hypothesis: str) -> tuple[float, float]:
        p, h = premise.split(), hypothesis.split()
        room = self.max_length - self.pair_special_tokens
        if len(h) < room:
            p = p[: room - len(h)]
        while len(p) + len(h) > room:  # longest_first: cut the longer side's end
            if len(p) > len(h):
                p.pop()
            else:
                h.pop()
        self.hypotheses_cut += h != hypothesis.split()
        return (0.02, 0.9) if "arrested" in " ".join(h) else (0.95, 0.01)


def _vectors_for(*texts: str) -> FakeEncoder:
    return FakeEncoder({t: [1.0, 0.5, 0.2] for t in texts})


@pytest.mark.parametrize("metric", NLI_METRICS)
def test_a_hallucination_at_the_end_of_a_long_sentence_is_judged(metric):
    """A 37-word sentence, a 24-word window: the invented last clause used to be cut off by
    the backend's fallback truncation and the sentence scored as entailed."""
    nli = TruncatingNLI(max_len=24)
    examples = [Example("f", LONG_SOURCE, LONG_FAITHFUL), Example("h", LONG_SOURCE, LONG_HALLUC)]
    faithful, halluc = run(metric, examples, nli, FakeEncoder({}))
    assert faithful.ok and halluc.ok
    assert faithful.value > 0.9  # every piece entailed
    assert halluc.value < 0.05, halluc.details  # the weakest piece decides
    # No hypothesis the model saw was cut (the whole sentence was judged, in pieces).
    assert nli.hypotheses_cut == 0
    pieces = halluc.details["hypothesis_pieces"]
    limit = 24 - 4 - 24 // 4
    assert pieces["limit_tokens"] == limit == 14
    assert pieces["split"] == [{"sentence": 0, "tokens": 37, "pieces": 3}]
    texts = [p["text"] for p in pieces["pieces"]]
    assert " ".join(texts) == LONG_HALLUC and all(len(t.split()) <= limit for t in texts)
    assert [p["sentence"] for p in pieces["pieces"]] == [0, 0, 0] == pieces["piece_sentence"]
    # The summary's sentence is reported whole, with its weakest piece's support.
    [sentence] = halluc.sentences
    assert sentence.text == LONG_HALLUC and sentence.value == min(
        p["value"] for p in pieces["pieces"]
    )


def test_a_sentence_that_fits_is_not_split_and_premise_cuts_are_counted():
    nli = TruncatingNLI(max_len=24)
    long_premise = " ".join(["The council approved the budget on Tuesday"] * 3) + "."
    [score] = run("entail_s2s", [Example("e", f"{long_premise} {S2}", SUMMARY)], nli)
    assert "hypothesis_pieces" not in score.details
    # 22-word premise + 3-word hypothesis + 3 special tokens > 24: cut, for both hypotheses.
    assert score.details["premises_cut"] == 2
    [fits] = run("entail_s2s", [Example("e", SOURCE, SUMMARY)], FakeNLI(TABLE))
    assert fits.details["premises_cut"] == 0


def test_split_hypothesis_cuts_between_words_and_inside_an_overlong_word():
    from faithgate.engines.nli import hypothesis_limit, split_hypothesis

    words = len
    assert split_hypothesis("a b c", 3, lambda t: words(t.split())) == ["a b c"]
    assert split_hypothesis("a  b c d e", 2, lambda t: words(t.split())) == ["a  b", "c d", "e"]
    # Characters as tokens: an 11-character word in pieces of 4.
    assert split_hypothesis("abcdefghijk xy", 4, len) == ["abcd", "efgh", "ijk", "xy"]
    assert hypothesis_limit(256) == 188 and hypothesis_limit(512) == 380


def test_a_long_sentence_through_the_torch_backend_is_judged_in_fitting_pieces(tiny_nli_dir):
    """The real tokenizer measures the pieces: each fits beside a premise uncut, and the
    sentence's support is the weakest piece's entailment as the model gives it."""
    import torch

    path, model, tokenizer = tiny_nli_dir
    long_sentence = ", ".join(["the cat sat on the mat in Paris on Monday"] * 6) + "."
    scorer = Scorer(["entail_s2s"], models={"nli": str(path)}, backend="torch")
    [result] = scorer.score([Example("a", SOURCE, long_sentence)])
    score = result["entail_s2s"]
    pieces = [p["text"] for p in score.details["hypothesis_pieces"]["pieces"]]
    assert len(pieces) > 1 and " ".join(pieces) == long_sentence

    def n(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    assert all(n(p) <= 64 - 4 - 16 for p in pieces)

    def entail(premise: str, hypothesis: str) -> float:
        enc = tokenizer(premise, hypothesis, truncation="only_first", max_length=64)
        assert len(enc["input_ids"]) <= 64 and n(hypothesis) + n(premise) + 3 >= len(
            enc["input_ids"]
        )
        with torch.inference_mode():
            logits = model(**{k: torch.tensor([v]) for k, v in enc.items()}).logits
        return float(torch.softmax(logits, -1)[0, 2])

    want = min(max(entail(d, p) for d in (S1, S2, S3)) for p in pieces)
    assert score.value == pytest.approx(want, abs=1e-5)
