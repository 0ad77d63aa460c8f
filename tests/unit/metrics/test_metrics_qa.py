"""QGQA / FEQA: rule-based questions, the exact formulas with a fake language model, the
summary-answerability filter, configured qg/qa models (tiny random ones) and the offline
default end to end on a real BUMP article."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pytest

from faithgate.backends import ModelPool
from faithgate.backends.base import LanguageModel
from faithgate.engines.qa import rule_questions
from faithgate.errors import InputError, ModelNotFoundError
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.models import ModelSpec
from faithgate.types import Example

_PIECE = re.compile(r"\s*\S+|\s+")
_QUESTION = re.compile(r"Question: (.*)\nAnswer:$", re.S)


class FakeLM(LanguageModel):
    """A decoder-only 'model' whose candidate log-probs come from a table.

    Tokens are whitespace-led pieces (exactly reversible); every token of candidate ``c`` for
    question ``q`` gets log-prob ``table[(q, c)]`` (default -5), so the mean is that value.
    """

    def __init__(self, table: dict[tuple[str, str], float]) -> None:
        super().__init__(ModelSpec("lm", "fake-lm", "/nonexistent/lm", "path"), "fake")
        self.table = table
        self.vocab: dict[str, int] = {}
        self.pieces: list[str] = []
        self.calls: list[tuple[str, list[str]]] = []

    @property
    def max_length(self) -> int:
        return 4096

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def tokenize(self, text: str) -> list[int]:
        ids = []
        for piece in _PIECE.findall(text):
            if piece not in self.vocab:
                self.vocab[piece] = len(self.pieces)
                self.pieces.append(piece)
            ids.append(self.vocab[piece])
        return ids

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        return [self.pieces[i] for i in ids]

    @property
    def bos_token_id(self) -> int | None:
        return None

    @property
    def eos_token_id(self) -> int | None:
        return None

    def segment_logprobs(self, batch):
        out = []
        for segments in batch:
            prompt = "".join(self.token_texts(segments[0]))
            match = _QUESTION.search(prompt)
            rows = [np.full(len(segments[0]), np.nan)]
            if len(segments) > 1:
                cand = "".join(self.token_texts(segments[1])).strip()
                self.calls.append((match.group(1), [cand]))
                value = self.table.get((match.group(1), cand), -5.0)
                rows.append(np.full(len(segments[1]), value))
            out.append(rows)
        return out


class FakePool(ModelPool):
    def __init__(self, lm: FakeLM) -> None:
        super().__init__()
        self.add(lm, "lm", "causal-lm")


SOURCE = (
    "Alice Brown opened a bakery in Paris in 2019. "
    "Her brother Tom Brown sold cars in London in 2015."
)
SUMMARY = "Alice Brown opened a bakery in London in 2019."
Q_WHO = "Who opened a bakery in London in 2019?"
Q_WHERE = "Alice Brown opened a bakery where in 2019?"
Q_WHEN = "Alice Brown opened a bakery in London when?"
Q_WHAT = "Alice Brown opened what in London in 2019?"
TABLE = {
    (Q_WHO, "Alice Brown"): -0.5,  # source answers the summary's span: F1 1
    (Q_WHERE, "Paris"): -0.8,  # source answers another place: F1 0
    (Q_WHERE, "London"): -1.0,
    (Q_WHEN, "2015"): -4.0,  # best below the -3.5 threshold: no answer, scores 0
    (Q_WHAT, "London"): -0.1,  # the summary answers with another span: question dropped
}


def score(metric: str, lm: FakeLM, examples=None, **settings):
    ctx = ScoringContext(FakePool(lm))
    examples = examples or [Example("e", SOURCE, SUMMARY)]
    return get_metric(metric, **settings).score_batch(examples, ctx)


def test_rule_questions_use_the_entity_type_and_role():
    assert [(q.kind, q.span, q.text) for q in rule_questions(SUMMARY)] == [
        ("person", "Alice Brown", Q_WHO),
        ("place", "London", Q_WHERE),
        ("time", "2019", Q_WHEN),
        ("thing", "a bakery", Q_WHAT),
    ]
    qs = {q.span: q.text for q in rule_questions("The firm paid $10 million to its staff.")}
    assert qs["$10 million"] == "The firm paid how much to its staff?"
    qs = {q.span: q.text for q in rule_questions("Keefe was a 19-year-old operator.")}
    assert qs["19-year-old"] == "Keefe was a how old operator?"


def test_qgqa_and_feqa_formula_with_a_fake_lm():
    [qgqa] = score("qgqa", FakeLM(TABLE))
    rows = qgqa.details["questions"]
    assert [r["question"] for r in rows] == [Q_WHO, Q_WHERE, Q_WHEN]
    assert [r["source_answer"] for r in rows] == ["Alice Brown", "Paris", None]
    assert [r["summary_answer"] for r in rows] == ["Alice Brown", "London", "2019"]
    assert [r["f1"] for r in rows] == [1.0, 0.0, 0.0]
    assert qgqa.value == pytest.approx(1 / 3)
    assert qgqa.details["n_generated"] == 4
    assert qgqa.details["n_unanswerable_by_summary"] == 1
    assert qgqa.details["dropped_questions"][0]["question"] == Q_WHAT
    assert qgqa.details["answerer"] == "lm" and qgqa.details["question_generator"] == "rules"
    [feqa] = score("feqa", FakeLM(TABLE))
    assert feqa.value == pytest.approx(1 / 3)
    assert qgqa.sentences[0].value == pytest.approx(1 / 3)


def test_partial_answers_give_token_f1_and_feqa_compares_with_the_span():
    table = dict(TABLE)
    table[(Q_WHO, "Tom Brown")] = -0.2  # "Tom Brown" vs "Alice Brown": F1 1/2
    [qgqa] = score("qgqa", FakeLM(table))
    assert [r["f1"] for r in qgqa.details["questions"]] == [0.5, 0.0, 0.0]
    assert qgqa.value == pytest.approx(0.5 / 3)
    [feqa] = score("feqa", FakeLM(table))
    assert feqa.value == pytest.approx(0.5 / 3)


@pytest.mark.parametrize("metric", ["qgqa", "feqa"])
def test_a_decimal_point_is_not_dropped_from_answers(metric):
    """SQuAD's normalisation strips every punctuation mark, so "3.5 million dollars" became
    "35 million dollars" and a summary that turned 35 into 3.5 scored as the faithful one."""
    from faithgate.engines.spans import answer_f1, normalize_answer

    assert normalize_answer("The 3.5 million, 3,500 people.") == [
        "3.5",
        "million",
        "3,500",
        "people",
    ]
    assert answer_f1("35 million dollars", "35 million dollars.") == 1.0
    source = "The company earned 35 million dollars last year."
    values = {}
    for summary in (source, "The company earned 3.5 million dollars last year."):
        questions = {q.span: q.text for q in rule_questions(summary)}
        span = next(s for s in questions if "million" in s)
        lm = FakeLM({(questions[span], "35 million dollars"): -0.5})
        [got] = score(metric, lm, [Example("e", source, summary)])
        row = next(r for r in got.details["questions"] if r["question"] == questions[span])
        values[summary] = (row["f1"], got.value)
    faithful, changed = values.values()
    assert faithful[0] == 1.0 and changed[0] == pytest.approx(2 / 3)
    assert changed[1] < faithful[1]


def test_max_questions_and_threshold_settings():
    [capped] = score("qgqa", FakeLM(TABLE), max_questions=2)
    assert [r["question"] for r in capped.details["questions"]] == [Q_WHO, Q_WHERE]
    assert capped.value == pytest.approx(0.5)
    # A lower threshold accepts "2015" for the when-question (still F1 0 against 2019).
    [low] = score("qgqa", FakeLM(TABLE), no_answer_logprob=-4.5)
    assert low.details["questions"][2]["source_answer"] == "2015"


def test_source_answers_are_shared_between_metrics_and_summaries():
    lm = FakeLM(TABLE)
    ctx = ScoringContext(FakePool(lm))
    examples = [Example("a", SOURCE, SUMMARY), Example("b", SOURCE, SUMMARY)]
    get_metric("qgqa").score_batch(examples, ctx)
    n_calls = len(lm.calls)
    get_metric("feqa").score_batch(examples, ctx)
    assert len(lm.calls) == n_calls  # feqa reused qgqa's analysis


def test_summary_without_questions_fails_with_a_reason():
    [s] = score("qgqa", FakeLM(TABLE), examples=[Example("e", SOURCE, "It was good.")])
    assert not s.ok and "no question" in s.error


def test_settings_and_missing_roles():
    with pytest.raises(InputError):
        get_metric("qgqa", max_questions=0)
    with pytest.raises(InputError):
        get_metric("feqa", qg_template="no placeholders")
    ctx = ScoringContext(FakePool(FakeLM(TABLE)))
    with pytest.raises(ModelNotFoundError, match="qa"):
        get_metric("qgqa", answerer="model").score_batch([Example("e", SOURCE, SUMMARY)], ctx)


@pytest.fixture(scope="module")
def tiny_qa_models(tmp_path_factory):
    """A random 2-layer BERT extractive QA model and a random tiny T5 question generator,
    both with MiniLM's WordPiece tokenizer, saved like hub checkpoints."""
    torch = pytest.importorskip("torch")
    from tiny_models import MINILM_SIZED
    from transformers import (
        AutoTokenizer,
        BertConfig,
        BertForQuestionAnswering,
        T5Config,
        T5ForConditionalGeneration,
    )

    from faithgate import models

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(models.resolve("embedder").location)
    tok.model_max_length = 64
    qa_dir = tmp_path_factory.mktemp("tiny-qa")
    BertForQuestionAnswering(
        BertConfig(
            vocab_size=tok.vocab_size,
            **MINILM_SIZED,
            max_position_embeddings=64,
        )
    ).save_pretrained(qa_dir, safe_serialization=True)
    tok.save_pretrained(qa_dir)
    qg_dir = tmp_path_factory.mktemp("tiny-qg")
    T5ForConditionalGeneration(
        T5Config(
            vocab_size=tok.vocab_size,
            d_model=32,
            d_kv=8,
            d_ff=37,
            num_layers=1,
            num_heads=2,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.sep_token_id,
            decoder_start_token_id=tok.pad_token_id,
        )
    ).save_pretrained(qg_dir, safe_serialization=True)
    tok.save_pretrained(qg_dir)
    return qa_dir, qg_dir


def test_configured_qg_and_qa_models_through_the_torch_backend(tiny_qa_models):
    from faithgate.scoring.scorer import Scorer

    qa_dir, qg_dir = tiny_qa_models
    long_source = " ".join([SOURCE] * 6)  # longer than the 64-token window: windowed
    scorer = Scorer(
        ["qgqa", "feqa"], models={"qa": str(qa_dir), "qg": str(qg_dir)}, backend="torch"
    )
    qa = scorer.pool.get("qa", "extractive-qa")
    answers = qa.answer(["Where did Alice open a bakery?"] * 2, [SOURCE, long_source])
    for answer, context in zip(answers, [SOURCE, long_source], strict=True):
        assert answer.is_empty or context[answer.start : answer.end] == answer.text
    [result] = scorer.score([Example("e", long_source, SUMMARY)])
    for name in ("qgqa", "feqa"):
        s = result[name]
        if s.ok:
            assert s.details["question_generator"] == "model"
            assert s.details["answerer"] == "model"
            assert all("rule_question" in r for r in s.details["questions"])
            assert 0.0 <= s.value <= 1.0
        else:  # random weights may answer nothing: then it says so
            assert "no question" in s.error
    # The configured models, not the offline lm, identify these scores.
    assert scorer.settings_hashes()["qgqa"] != Scorer(["qgqa"]).settings_hashes()["qgqa"]


@pytest.mark.slow
def test_offline_qgqa_end_to_end_on_a_real_article(bump_rows):
    """SmolLM2 answers rule-based questions about a real BUMP summary (shortest source)."""
    from faithgate.scoring.scorer import Scorer

    ref = min((r for r in bump_rows if r["role"] == "reference"), key=lambda r: len(r["source"]))
    scorer = Scorer(["qgqa", "feqa"], model_options={"lm": {"threads": 1}})
    [result] = scorer.score([Example(ref["id"], ref["source"], ref["summary"])])
    s = result["qgqa"]
    assert s.ok, s.error
    questions = s.details["questions"]
    assert 1 <= len(questions) <= 10
    for row in questions:
        assert row["question"].endswith("?")
        assert row["summary_span"] and row["summary_answer"]
        assert 0.0 <= row["f1"] <= 1.0
    assert s.value == pytest.approx(np.mean([r["f1"] for r in questions]))
    assert result["feqa"].ok
