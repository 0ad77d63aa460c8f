"""QA-based faithfulness: ask the summary's questions of the source and compare the answers.

QGQA (Durmus et al., 2020, "FEQA: A Question Answering Evaluation Framework for Faithfulness
Assessment in Abstractive Summarization", ACL; Wang et al., 2020, "Asking and Answering
Questions to Evaluate the Factual Consistency of Summaries" (QAGS), ACL; the QGQA family
surveyed by Gabriel et al., 2021, "GO FIGURE"):

1. answer candidates ``a_k`` = named entities and noun chunks of the summary (spaCy);
2. one question ``q_k`` per candidate;
3. a QA model answers ``q_k`` from the source (``A_D(q_k)``) and from the summary
   (``A_S(q_k)``); duplicate questions and questions the summary itself cannot answer
   (no answer, or an answer sharing no token with ``a_k``) are dropped; at most
   ``max_questions`` (10) are kept, in summary order;
4. ``qgqa`` = 1/K sum_k F1(A_D(q_k), A_S(q_k)) and ``feqa`` = 1/K sum_k F1(A_D(q_k), a_k)
   (FEQA compares the source answer with the masked summary span), with F1 the SQuAD token F1
   and an unanswerable question (no source answer) scoring 0.

Models. ``faithgate.engines.qa`` generates and answers the questions: with ``qg`` and ``qa``
roles configured it uses them, else rules from the spaCy parse and the ``lm`` role (offline).

Details list every kept question with its summary span, both answers and the F1, so a user
sees *what* disagreed, plus how many questions were generated and dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from faithgate import text as textmod
from faithgate.engines.qa import QAEngine, Question
from faithgate.engines.spans import answer_f1
from faithgate.errors import InputError, ModelNotFoundError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.types import Example, Score, SentenceScore


class _QAMetric(Metric):
    family = "qa"
    # 2: answers keep a "." or "," between digits ("3.5 million" no longer equals "35 million")
    version = "2"
    bounds = (0.0, 1.0)  # a mean of answer F1s (faithgate.engines.spans.answer_f1), each in [0, 1]
    # The offline default; ``model_roles`` gives the roles actually used (settings hashes).
    roles = {"lm": "causal-lm", "spacy": "pipeline"}
    defaults = {
        "max_questions": 10,
        "question_generator": "auto",  # auto: the qg role when configured, else rules
        "answerer": "auto",  # auto: the qa role when configured, else the lm role
        "context_sentences": 2,
        "max_candidates": 10,
        "no_answer_logprob": -3.5,
        "qg_template": "answer: {answer}  context: {context}",
    }

    def validate_settings(self) -> None:
        s = self.settings
        for key in ("max_questions", "context_sentences", "max_candidates"):
            if not isinstance(s[key], int) or s[key] < 1:
                raise InputError(f"metric {self.name!r}: {key} must be an integer >= 1")
        if s["question_generator"] not in ("auto", "rules", "model"):
            raise InputError(
                f"metric {self.name!r}: question_generator must be auto, rules or model"
            )
        if s["answerer"] not in ("auto", "lm", "model"):
            raise InputError(f"metric {self.name!r}: answerer must be auto, lm or model")
        if not isinstance(s["no_answer_logprob"], int | float):
            raise InputError(f"metric {self.name!r}: no_answer_logprob must be a number")
        if "{answer}" not in s["qg_template"] or "{context}" not in s["qg_template"]:
            raise InputError(
                f"metric {self.name!r}: qg_template must contain {{answer}} and {{context}}"
            )

    def _uses(self, ctx: ScoringContext) -> tuple[bool, bool]:
        """(use the qg role, use the qa role), resolving ``auto`` by whether one is configured."""

        def configured(role: str, mode: str) -> bool:
            if mode == "model":
                ctx.pool.spec(role)  # raises the one-line "how to configure" error
                return True
            if mode in ("rules", "lm"):
                return False
            try:
                ctx.pool.spec(role)
            except ModelNotFoundError:
                return False
            return True

        return (
            configured("qg", self.settings["question_generator"]),
            configured("qa", self.settings["answerer"]),
        )

    def _active_roles(self, ctx: ScoringContext) -> dict[str, str]:
        use_qg, use_qa = self._uses(ctx)
        roles = {"spacy": "pipeline"}
        if use_qg:
            roles["qg"] = "text-generator"
        roles.update({"qa": "extractive-qa"} if use_qa else {"lm": "causal-lm"})
        return roles

    def model_roles(self, ctx: ScoringContext) -> dict[str, str]:
        return self._active_roles(ctx)

    def _engine(self, ctx: ScoringContext) -> QAEngine:
        use_qg, use_qa = self._uses(ctx)
        # Both QA metrics share one engine when their question/answer settings agree.
        shared = {k: v for k, v in sorted(self.settings.items())}
        key = f"qa-engine:{use_qg}:{use_qa}:{shared}"
        return ctx.shared(key, lambda: QAEngine(ctx, dict(self.settings), use_qg, use_qa))

    def compare(self, q: Question) -> float:
        raise NotImplementedError

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        shash = self.settings_hash(ctx)
        engine = self._engine(ctx)
        analyses = engine.analyse(examples)
        scores = []
        for ex, analysis in zip(examples, analyses, strict=True):
            questions: list[Question] = analysis["questions"]
            counts = {k: v for k, v in analysis.items() if k != "questions"}
            if not questions:
                scores.append(
                    Score.failed(
                        self.name,
                        shash,
                        ex.id,
                        "no question about the summary could be generated and answered from "
                        f"the summary ({counts['n_generated']} generated, "
                        f"{counts['n_unanswerable_by_summary']} unanswerable)",
                    )
                )
                continue
            f1s = [self.compare(q) for q in questions]
            rows = [
                {
                    "question": q.text,
                    "summary_span": q.span,
                    "answer_type": q.kind,
                    "summary_answer": q.summary_answer,
                    "source_answer": q.source_answer or None,
                    "f1": f,
                    "sentence": q.sentence,
                    **(
                        {"source_context_sentences": q.extra["source_context"]["context_sentences"]}
                        if "source_context" in q.extra
                        else {}
                    ),
                    **(
                        {"source_logprob": q.source_logprob} if q.source_logprob is not None else {}
                    ),
                    **(
                        {"rule_question": q.extra["rule_question"]}
                        if "rule_question" in q.extra
                        else {}
                    ),
                }
                for q, f in zip(questions, f1s, strict=True)
            ]
            sentences = []
            # Same sentence indices as the questions (``doc.sents``, blanks included).
            summary_sents = [
                x.text.strip() for x in textmod.parse(ex.summary, ctx.spacy_model).sents
            ]
            for si in sorted({q.sentence for q in questions}):
                vals = [f for q, f in zip(questions, f1s, strict=True) if q.sentence == si]
                worst = min((r for r in rows if r["sentence"] == si), key=lambda r: r["f1"])
                sentences.append(
                    SentenceScore(
                        si,
                        summary_sents[si] if si < len(summary_sents) else "",
                        float(np.mean(vals)),
                        evidence=worst["source_answer"],
                    )
                )
            details = {
                "questions": rows,
                **counts,
                "question_generator": "model" if engine.use_qg else "rules",
                "answerer": "model" if engine.use_qa else "lm",
            }
            scores.append(Score(self.name, float(np.mean(f1s)), shash, ex.id, sentences, details))
        return scores


@register
class QGQA(_QAMetric):
    """QGQA: mean token F1 between the source's and the summary's answers to questions
    generated from the summary (formula and models in the module docstring)."""

    name = "qgqa"
    description = "QA-based: F1 of source vs summary answers to questions about the summary"
    scale = "mean answer F1 (source vs summary answers to questions about the summary), 0..1"
    sentence_value = "mean answer F1 of the questions about the sentence (0..1)"

    def compare(self, q: Question) -> float:
        return answer_f1(q.source_answer, q.summary_answer) if q.source_answer else 0.0


@register
class FEQA(_QAMetric):
    """FEQA (Durmus et al., 2020): mean token F1 between the source's answer and the masked
    summary span of each question (formula and models in the module docstring)."""

    name = "feqa"
    description = "QA-based: F1 of source answers vs the masked summary spans (FEQA)"
    scale = "mean answer F1 of the masked summary spans answered from the source, 0..1"
    sentence_value = "mean answer F1 of the sentence's spans (0..1)"

    def compare(self, q: Question) -> float:
        return answer_f1(q.source_answer, q.span) if q.source_answer else 0.0
