"""PyTorch + transformers models for the QA-based metrics (``qg`` and ``qa`` roles).

- ``TorchTextGenerator`` (task ``text-generator``): any seq2seq model (T5 / BART question
  generators by hub id or local directory), greedy decoding, inputs truncated to the window.
- ``TorchExtractiveQA`` (task ``extractive-qa``): any ``AutoModelForQuestionAnswering`` model
  (SQuAD 2.0 style). The context is split into overlapping token windows (``stride``); in each
  window the best span (start <= end, at most ``max_answer_tokens``, inside the context) is
  scored ``start_logit + end_logit`` and compared with the no-answer score ``start[CLS] +
  end[CLS]``; the best span over windows wins unless the smallest no-answer score beats it
  (the SQuAD 2.0 rule of Devlin et al., 2019).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from faithgate.backends.base import Answer, ExtractiveQA, RoleModel, TextGenerator
from faithgate.backends.torch_common import import_torch, load_hf_model, load_tokenizer
from faithgate.backends.windowing import equal_length_batches
from faithgate.errors import BackendError
from faithgate.models import ModelSpec


def _limit(model: Any, tokenizer: Any, default: int = 512) -> int:
    cfg = model.config
    limit = None
    for attr in ("max_position_embeddings", "n_positions"):
        value = getattr(cfg, attr, None)
        if isinstance(value, int) and value > 0:
            limit = value
            break
    tok = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok, int) and 0 < tok < 1_000_000:
        limit = min(limit, tok) if limit else tok
    return limit or default


class TorchTextGenerator(TextGenerator):
    def __init__(self, spec: ModelSpec, batch_size: int = 8) -> None:
        super().__init__(spec, backend="torch")
        self.torch = import_torch()
        from transformers import AutoModelForSeq2SeqLM

        self.tokenizer = load_tokenizer(spec)
        self.model = load_hf_model(spec, AutoModelForSeq2SeqLM, self.task)
        self.batch_size = int(batch_size)

    @property
    def max_length(self) -> int:
        return _limit(self.model, self.tokenizer)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, inputs: Sequence[str], max_new_tokens: int = 32) -> list[str]:
        inputs = list(inputs)
        out: list[str] = [""] * len(inputs)
        # Inputs of equal token length share a batch: no padding, so an output does not
        # depend on what else is generated with it (see backends.windowing).
        tokenized = (
            self.tokenizer(inputs, truncation=True, max_length=self.max_length) if inputs else None
        )
        lengths = [len(ids) for ids in tokenized["input_ids"]] if tokenized else []
        for idx in equal_length_batches(lengths, self.batch_size):
            enc = self.tokenizer(
                [inputs[i] for i in idx],
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            )
            with self.torch.inference_mode():
                # Only ids and mask: BERT-style tokenizers add token_type_ids generate() rejects.
                ids = self.model.generate(
                    input_ids=enc["input_ids"],
                    attention_mask=enc["attention_mask"],
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    num_beams=1,
                )
            texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
            for i, text in zip(idx, texts, strict=True):
                out[i] = text.strip()
        return out


class TorchExtractiveQA(ExtractiveQA):
    def __init__(
        self, spec: ModelSpec, stride: int = 64, max_answer_tokens: int = 30, batch_size: int = 8
    ) -> None:
        super().__init__(spec, backend="torch")
        self.torch = import_torch()
        from transformers import AutoModelForQuestionAnswering

        self.tokenizer = load_tokenizer(spec)
        if not getattr(self.tokenizer, "is_fast", False):
            raise BackendError(
                f"qa model {spec.name!r} needs a fast tokenizer (character offsets of answers)"
            )
        self.model = load_hf_model(spec, AutoModelForQuestionAnswering, self.task)
        self.stride = int(stride)
        self.max_answer_tokens = int(max_answer_tokens)
        self.batch_size = int(batch_size)

    @property
    def max_length(self) -> int:
        return _limit(self.model, self.tokenizer)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def answer(self, questions: Sequence[str], contexts: Sequence[str]) -> list[Answer]:
        torch = self.torch
        answers: list[Answer] = []
        for question, context in zip(questions, contexts, strict=True):
            enc = self.tokenizer(
                question,
                context,
                truncation="only_second",
                max_length=self.max_length,
                stride=min(self.stride, self.max_length // 4),
                return_overflowing_tokens=True,
                return_offsets_mapping=True,
                padding=True,
                return_tensors="pt",
            )
            offsets = enc.pop("offset_mapping").tolist()
            enc.pop("overflow_to_sample_mapping", None)
            seq_ids = [enc.sequence_ids(i) for i in range(len(offsets))]
            with torch.inference_mode():
                out = self.model(**enc)
            start_all = out.start_logits.float().numpy()
            end_all = out.end_logits.float().numpy()
            best: tuple[float, int, int] | None = None
            null = float("inf")
            for w in range(len(offsets)):
                start, end = start_all[w], end_all[w]
                null = min(null, float(start[0] + end[0]))
                ctx_idx = [i for i, s in enumerate(seq_ids[w]) if s == 1]
                if not ctx_idx:
                    continue
                lo, hi = ctx_idx[0], ctx_idx[-1]
                # Top candidates only: O(k^2) instead of O(n^2) pairs.
                top_s = sorted(range(lo, hi + 1), key=lambda i: -start[i])[:20]
                top_e = sorted(range(lo, hi + 1), key=lambda i: -end[i])[:20]
                for s in top_s:
                    for e in top_e:
                        if e < s or e - s + 1 > self.max_answer_tokens:
                            continue
                        value = float(start[s] + end[e])
                        if best is None or value > best[0]:
                            best = (value, offsets[w][s][0], offsets[w][e][1])
            if best is None or null > best[0]:
                answers.append(Answer("", null))
            else:
                value, c0, c1 = best
                answers.append(Answer(context[c0:c1], value, c0, c1))
        return answers


def load_qa_model(spec: ModelSpec, task: str, **options: Any) -> RoleModel:
    """Load ``spec`` as a question generator (``text-generator``) or extractive QA model."""
    if task == "text-generator":
        return TorchTextGenerator(spec, **options)
    if task == "extractive-qa":
        return TorchExtractiveQA(spec, **options)
    raise BackendError(f"the torch QA loader has no task {task!r}")
