"""MiniCheck (Tang, Laban and Durrett, 2024, "MiniCheck: Efficient Fact-Checking of LLMs on
Grounding Documents", EMNLP), as its released inference code (github.com/Liyan06/MiniCheck,
``minicheck/inference.py``) runs it.

The document is cut into chunks of whole sentences: sentences are split per line, a line break
is kept as a pseudo-sentence, and sentences are packed greedily into a chunk while their
lengths add up to at most ``chunk_size`` (tokens of the model's tokenizer for a classifier,
default 400; whitespace words for Flan-T5, default 500). Each chunk ``c_j`` is checked against
a claim ``s``:

- a two-way classifier (MiniCheck-RoBERTa / -DeBERTa) reads the one sequence
  ``chunk + eos + claim`` (``<s> chunk </s> claim </s>`` for RoBERTa: one ``</s>`` between
  them, not a sentence pair's two) and ``p(s | c_j)`` is the softmax probability of its
  "supported" class (``supported_label``, MiniCheck's LABEL_1);
- a generative classifier (MiniCheck-Flan-T5) encodes ``"predict: " + chunk + eos + claim``
  and ``p(s | c_j)`` is the softmax over the first decoder step's logits of the first tokens
  of ``"0"`` and ``"1"`` (ids 3 and 209 in T5's vocabulary), taken at ``"1"``.

A claim's support is ``max_j p(s | c_j)``. With ``claim = "whole"`` the summary is one claim,
as the reference's ``MiniCheck.score`` does; with ``claim = "sentences"`` (default) each
summary sentence is a claim and the score aggregates them (``aggregate``, default ``min``: as
the authors' Bespoke-MiniCheck scorer, ``LLMCheck.score``, fuses sentences; their README
reports sentence-level checking beats whole-response checking).

Every (chunk, claim) text of a batch is deduplicated and classified in one batched call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from faithgate.engines.nli import entailment_index
from faithgate.errors import InputError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.metrics.nli import combine_sentences
from faithgate.text import split_sentences
from faithgate.types import Example, Score, SentenceScore

# Hub ids of the released checkpoints (``--model nli=ID --allow-download``).
HUB_IDS = {
    "roberta": "lytang/MiniCheck-RoBERTa-Large",
    "deberta": "lytang/MiniCheck-DeBERTa-v3-Large",
    "flan-t5": "lytang/MiniCheck-Flan-T5-Large",
}
FORMS = ("auto", "classifier", "seq2seq")
CLAIMS = ("sentences", "whole")


def reference_sentences(text: str, split: Callable[[str], list[str]]) -> list[str]:
    """MiniCheck's ``sent_tokenize_with_newlines``: sentences of each line, with ``"\\n"``
    between the lines' sentences (an empty line adds only its ``"\\n"``)."""
    out: list[str] = []
    for block in text.split("\n"):
        out.extend(split(block))
        out.append("\n")
    return out[:-1]


def reference_chunks(
    sentences: Sequence[str], size: int, length: Callable[[str], int]
) -> list[str]:
    """MiniCheck's ``chunks`` then its clean-up: sentences packed greedily while their
    ``length`` adds up to at most ``size``, joined by spaces, ``" \\n "`` read back as a line
    break, stripped; empty chunks dropped."""
    raw: list[str] = []
    current: list[str] = []
    count = 0
    for sentence in sentences or [""]:
        n = length(sentence)
        if count + n > size:
            raw.append(" ".join(current))
            current, count = [sentence], n
        else:
            current.append(sentence)
            count += n
    if current:
        raw.append(" ".join(current))
    chunks = [c.replace(" \n ", "\n").strip() for c in raw]
    return [c for c in chunks if c != ""]


def _model_config(location: Any) -> dict[str, Any]:
    """The ``config.json`` (or an ONNX export's manifest) of a local model directory."""
    import json

    root = Path(str(location))
    for name in ("faithgate_onnx.json", "config.json"):
        try:
            data = json.loads((root / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return data
    return {}


@register
class MiniCheck(Metric):
    """MiniCheck: a claim's support is the max over document chunks of a fact-checking
    model's probability that the chunk supports it (Tang et al., 2024; see the module)."""

    name = "minicheck"
    family = "nli"
    description = "MiniCheck: max over document chunks of a checker's p(supported) per claim"
    version = "1"
    bounds = (0.0, 1.0)
    scale = "{aggregate} over the claims of the best source chunk's support probability, 0..1"
    sentence_value = "support probability of the claim by the best source chunk (0..1)"
    roles = {"nli": "pair-classifier", "spacy": "pipeline"}
    defaults: ClassVar[dict[str, Any]] = {
        "form": "auto",
        "chunk_size": None,
        "claim": "sentences",
        "aggregate": "min",
        "label_tokens": ["0", "1"],
    }

    def validate_settings(self) -> None:
        s = self.settings
        if s["form"] not in FORMS:
            raise InputError(f"minicheck setting 'form' must be one of: {', '.join(FORMS)}")
        if s["claim"] not in CLAIMS:
            raise InputError(f"minicheck setting 'claim' must be one of: {', '.join(CLAIMS)}")
        if s["aggregate"] not in ("min", "mean", "product"):
            raise InputError("minicheck setting 'aggregate' must be one of: min, mean, product")
        size = s["chunk_size"]
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
            raise InputError("minicheck setting 'chunk_size' must be a positive integer or null")
        tokens = s["label_tokens"]
        if (
            not isinstance(tokens, list)
            or len(tokens) != 2
            or not all(isinstance(t, str) and t for t in tokens)
        ):
            raise InputError(
                "minicheck setting 'label_tokens' must be two texts: [unsupported, supported]"
            )

    # --- which form ------------------------------------------------------------------------
    def form(self, ctx: ScoringContext) -> str:
        """``classifier`` or ``seq2seq``: the setting, or (``auto``) what the nli model's
        ``config.json`` says it is (an encoder-decoder: seq2seq)."""
        if self.settings["form"] != "auto":
            return str(self.settings["form"])
        spec = ctx.pool.spec("nli")
        config = _model_config(spec.location)
        if config.get("task") == "seq2seq-lm" or config.get("is_encoder_decoder") is True:
            return "seq2seq"
        if not config and "t5" in str(spec.name).lower():
            return "seq2seq"  # a hub id not downloaded yet: MiniCheck-Flan-T5 by its name
        return "classifier"

    def model_roles(self, ctx: ScoringContext) -> dict[str, str]:
        task = "seq2seq-lm" if self.form(ctx) == "seq2seq" else "pair-classifier"
        return {"nli": task, "spacy": "pipeline"}

    # --- scoring ---------------------------------------------------------------------------
    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        settings_hash = self.settings_hash(ctx)
        form = self.form(ctx)
        if form == "seq2seq":
            model = ctx.model("nli", "seq2seq-lm")
            eos = (
                model.token_texts([model.eos_token_id])[0] if model.eos_token_id is not None else ""
            )
            size = self.settings["chunk_size"] or 500
            length: Callable[[str], int] = lambda s: len(s.split())  # noqa: E731
            prefix = "predict: "
        else:
            model = ctx.model("nli", "pair-classifier")
            supported = entailment_index(
                model.labels, model.spec.name, getattr(model, "supported_label", None)
            )
            eos = model.eos_text
            size = self.settings["chunk_size"] or 400
            window = model.max_length
            memo: dict[str, int] = {}

            def length(s: str) -> int:
                if s not in memo:
                    memo[s] = min(int(model.count_tokens(s)), window)
                return memo[s]

            prefix = ""
        split_memo: dict[str, list[str]] = {}

        def split(text: str) -> list[str]:
            if text not in split_memo:
                split_memo[text] = [s.strip() for s in split_sentences(text, ctx.spacy_model)]
                split_memo[text] = [s for s in split_memo[text] if s]
            return split_memo[text]

        plans: list[Any] = []
        texts: list[str] = []
        chunk_memo: dict[str, list[str]] = {}
        for ex in examples:
            if ex.source not in chunk_memo:
                sents = reference_sentences(ex.source, split)
                chunk_memo[ex.source] = reference_chunks(sents, size, length)
            chunks = chunk_memo[ex.source]
            claims = (
                [ex.summary.strip()] if self.settings["claim"] == "whole" else split(ex.summary)
            )
            if not chunks or not claims:
                plans.append(None)
                continue
            plan_texts = [[prefix + c + eos + s for c in chunks] for s in claims]
            plans.append((chunks, claims, plan_texts))
            texts.extend(t for row in plan_texts for t in row)
        unique = list(dict.fromkeys(texts))
        if form == "seq2seq":
            probs = self._generative(model, unique)
        else:
            probs = (
                np.asarray(model.predict_proba_texts(unique), dtype=np.float64)[:, supported]
                if unique
                else np.zeros(0)
            )
        p_of = dict(zip(unique, probs.tolist(), strict=True))
        scores = []
        for ex, plan in zip(examples, plans, strict=True):
            if plan is None:
                scores.append(Score.failed(self.name, settings_hash, ex.id, "no text to check"))
                continue
            chunks, claims, plan_texts = plan
            matrix = np.array([[p_of[t] for t in row] for row in plan_texts])  # claims x chunks
            best = matrix.argmax(axis=1)
            sentences = [
                SentenceScore(i, claim, float(matrix[i, best[i]]), evidence=chunks[best[i]])
                for i, claim in enumerate(claims)
            ]
            value = combine_sentences(matrix.max(axis=1), self.settings["aggregate"])
            details = {
                "form": form,
                "n_chunks": len(chunks),
                "chunk_size": size,
                "support_per_chunk": np.round(matrix, 6).tolist(),
                "best_chunk": best.tolist(),
            }
            scores.append(Score(self.name, value, settings_hash, ex.id, sentences, details))
        return scores

    def _generative(self, model: Any, texts: list[str]) -> np.ndarray:
        """p("1") / (p("0") + p("1")) at the first decoder step of each encoded text: the
        softmax over the two label tokens' logits (the full softmax's normaliser cancels)."""
        if not texts:
            return np.zeros(0)
        neg, pos = (model.tokenize(t)[:1] for t in self.settings["label_tokens"])
        if not neg or not pos or neg == pos:
            raise InputError(
                f"minicheck label_tokens {self.settings['label_tokens']} do not tokenize to two "
                f"distinct first tokens in nli model {model.spec.name!r}"
            )
        eos = model.eos_token_id
        room = model.max_length - (1 if eos is not None else 0)
        encoded = [model.tokenize(t)[:room] + ([eos] if eos is not None else []) for t in texts]
        batch = [(e, neg) for e in encoded] + [(e, pos) for e in encoded]
        lps = np.array([float(lp[0]) for lp in model.seq2seq_logprobs(batch)])
        lp_neg, lp_pos = lps[: len(texts)], lps[len(texts) :]
        return 1.0 / (1.0 + np.exp(lp_neg - lp_pos))
