"""The one interface every inference backend implements.

Metrics call these task interfaces and never import torch or onnxruntime. A backend turns a
resolved ``ModelSpec`` into one of them:

- ``TextEncoder``     contextual token embeddings and pooled sentence embeddings (``embedder``)
- ``PairClassifier``  class probabilities of (premise, hypothesis) pairs (``nli``)
- ``LanguageModel``   per-token log-probabilities of a target given a context (``lm``, ``seq2seq``)
- ``TextGenerator``   generated text from an input text (``qg``: a seq2seq question generator)
- ``ExtractiveQA``    answer spans of questions in contexts (``qa``)

Outputs are numpy arrays and plain Python; inputs are strings, so the same metric code runs on
torch fp32, onnxruntime fp32 or onnxruntime int8.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faithgate.backends.windowing import batches_by_token_budget, split_by_sizes
from faithgate.errors import BackendError
from faithgate.models import ModelSpec


class RoleModel(ABC):
    """A loaded model serving one role. Loaded once per process and reused."""

    task: str = ""

    def __init__(self, spec: ModelSpec, backend: str, quantization: str = "none") -> None:
        self.spec = spec
        self.backend = backend
        self.quantization = quantization

    @property
    def identity(self) -> dict[str, Any]:
        """What makes this model's outputs what they are; part of every score's settings hash."""
        return {
            "role": self.spec.role,
            "model": self.spec.name,
            "fingerprint": self.spec.fingerprint,
            "backend": self.backend,
            "quantization": self.quantization,
        }

    @property
    @abstractmethod
    def max_length(self) -> int:
        """Longest input in tokens the model accepts."""

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` takes in this model's tokenizer, without special tokens."""


@dataclass
class TokenEmbeddings:
    """Contextual embeddings of one text's tokens (special tokens removed)."""

    tokens: list[str]
    vectors: np.ndarray  # (n_tokens, dim), float32, not normalised
    # True when the text was longer than the model's context and was embedded window by window.
    windowed: bool = False


class TextEncoder(RoleModel):
    task = "text-encoder"

    @abstractmethod
    def token_embeddings(
        self, texts: Sequence[str], layer: int | None = None
    ) -> list[TokenEmbeddings]:
        """Per-token vectors from hidden layer ``layer`` (default: the last).

        Texts longer than ``max_length`` are embedded in overlapping token windows and the
        windows' vectors concatenated (overlap dropped), so no token is lost.
        """

    @abstractmethod
    def sentence_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """Pooled (model's own pooling, e.g. mean) and L2-normalised vectors, (n, dim)."""

    @abstractmethod
    def unknown_only(self, text: str) -> bool:
        """Whether every token of ``text`` is the tokenizer's unknown token (MiniLM's
        vocabulary has no Thai, nor most emoji): the model then sees nothing of the text, and
        two such texts embed identically, so a similarity between them would be invented."""


class PairClassifier(RoleModel):
    task = "pair-classifier"

    # The label override (loader options ``labels`` and ``supported_label`` of the role,
    # ``--set nli.labels=[...]`` / ``--set nli.supported_label=NAME``): class names in output
    # order to use instead of ``config.id2label``, and the class that means "supported" when
    # none is named entailment (two-way heads: LABEL_0/LABEL_1; FEVER: SUPPORTS ...). Both are
    # loader options, so they are part of the model's identity and of every settings hash.
    label_override: list[str] | None = None
    supported_label: str | None = None

    def set_label_override(
        self, labels: Sequence[str] | None, supported_label: str | None, native: Sequence[str]
    ) -> None:
        """Keep the override after checking it against the model's ``native`` class names:
        ``labels`` must name each class once (``ConfigError``, exit 2, otherwise)."""
        from faithgate.errors import ConfigError

        if labels is not None:
            names = [str(n).strip().lower() for n in labels]
            if len(names) != len(native):
                raise ConfigError(
                    f"model_options.{self.spec.role}.labels names {len(names)} classes, but "
                    f"model {self.spec.name!r} has {len(native)} ({', '.join(native)})"
                )
            if len(set(names)) != len(names):
                raise ConfigError(
                    f"model_options.{self.spec.role}.labels names a class twice: {names}"
                )
            self.label_override = names
        if supported_label is not None:
            self.supported_label = str(supported_label).strip().lower()

    def apply_label_override(self, native: list[str]) -> list[str]:
        """``native`` (from the model's config), or the ``labels`` override when one is set."""
        return list(self.label_override) if self.label_override is not None else native

    @property
    @abstractmethod
    def labels(self) -> list[str]:
        """Lower-cased class names in output order, read from ``config.id2label`` (or the
        ``labels`` override, ``apply_label_override``)."""

    @property
    def pair_special_tokens(self) -> int:
        """Special tokens a (premise, hypothesis) pair adds: 3 for [CLS] a [SEP] b [SEP], 4
        for <s> a </s></s> b </s>. A pair fits the window whole when ``count_tokens(premise)
        + count_tokens(hypothesis) + pair_special_tokens <= max_length``. Backends read it from
        their tokenizer; this default, 4, is an upper bound."""
        return 4

    @abstractmethod
    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        """Softmax probabilities, shape (n, len(labels)). Premises are truncated to fit; a
        hypothesis alone longer than the window is cut too, and the model never sees its end:
        callers that must judge all of it split it first (``faithgate.engines.nli`` does)."""

    @property
    def eos_text(self) -> str:
        """The tokenizer's end-of-sequence token as text (RoBERTa ``</s>``, DeBERTa-v3
        ``[SEP]``; a tokenizer without one: its separator), which MiniCheck writes between a
        document chunk and a claim (``predict_proba_texts``)."""
        raise NotImplementedError(f"{type(self).__name__} does not say its eos token")

    def predict_proba_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Softmax probabilities of single texts, shape (n, len(labels)): each encoded as one
        sequence with the tokenizer's special tokens (``<s> text </s>``), cut at its end to the
        window, as MiniCheck's reference code feeds ``chunk + eos_text + claim``."""
        raise NotImplementedError(f"{type(self).__name__} cannot classify single texts")


@dataclass
class TokenLogprobs:
    """log p(target token | context, earlier target tokens) for each target token."""

    tokens: list[str]
    logprobs: np.ndarray  # (n_target_tokens,), float64
    # How the context was cut to fit the window, for the score details.
    context_policy: dict[str, Any] = field(default_factory=dict)


class LanguageModel(RoleModel):
    """Teacher-forced scoring of targets (decoder-only or encoder-decoder).

    Two levels. ``target_logprobs`` is the string-level convenience (QA answer selection).
    The token-level methods below are what the likelihood engine (``faithgate.engines.likelihood``)
    plans its passes with; they take *already tokenized* id sequences so the engine owns
    templates, tokenization and context cutting, and every backend scores the same ids.

    Conventions for all token-level methods:

    - ids are plain ``int`` lists; no special tokens are added by the backend;
    - a returned log-prob array is float64 with one entry per input token of that segment:
      entry ``j`` is ``log p(token_j | every earlier token of the sequence)``;
    - the very first token of a decoder-only sequence has no context: its entry is NaN;
    - padding, batching and prefix caching must not change any value (beyond float noise,
      about 1e-5): backends pad with attention masks and correct position ids.

    Decoder-only models (``is_encoder_decoder`` False) implement ``segment_logprobs`` and may
    override ``prefix_logprobs`` with a real key/value-cache reuse (the default re-runs the
    prefix for every continuation). Encoder-decoder models implement ``seq2seq_logprobs``.
    """

    task = "causal-lm"

    @property
    def is_encoder_decoder(self) -> bool:
        return self.task == "seq2seq-lm"

    # --- tokenizer facts the engine needs ---------------------------------------------
    @abstractmethod
    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` without any special token."""

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    @abstractmethod
    def token_texts(self, ids: Sequence[int]) -> list[str]:
        """Readable text of each id (for per-token details), e.g. ``[" cat", " sat"]``. An id
        that is part of a character (byte-level BPE, byte fallback) reads as U+FFFD: do not
        add these up to find where a token is; ``token_offsets`` says that."""

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """The ``(start, end)`` character span in ``text`` of each id of ``tokenize(text)``.

        The pieces of one character (an emoji or a Cyrillic letter in byte-level BPE) each
        span that whole character. Both backends read the spans from their tokenizer's
        offsets; this default decodes growing prefixes of the ids with ``token_texts``, which
        is right only for a tokenizer whose ids are whole characters (test doubles)."""
        ids = self.tokenize(text)
        return offsets_by_decoding(text, ids, lambda part: "".join(self.token_texts(part)))

    @property
    @abstractmethod
    def bos_token_id(self) -> int | None:
        """Id prepended to a decoder-only sequence / an encoder input; None if the model has
        none (then a decoder-only sequence starts with its first real token)."""

    @property
    @abstractmethod
    def eos_token_id(self) -> int | None:
        """End-of-sequence id (closes an encoder input: BART ``<s> X </s>``, T5 ``X </s>``)."""

    def special_tokens(self) -> tuple[list[int], list[int]]:
        """The ids the tokenizer puts before and after one encoded text (BART ``<s>`` and
        ``</s>``, T5 and PEGASUS ``</s>`` after it): how a reference scorer that calls the
        tokenizer sees a target. ``([], [])`` when it adds none."""
        return [], []

    @property
    def decoder_start_token_id(self) -> int | None:
        """First decoder input of an encoder-decoder (BART: ``</s>``, T5: pad); None for a
        decoder-only model."""
        return None

    @property
    def max_target_length(self) -> int:
        """Longest decoder sequence (encoder-decoder); equals ``max_length`` otherwise."""
        return self.max_length

    # --- decoder-only ----------------------------------------------------------------
    def segment_logprobs(self, batch: Sequence[Sequence[Sequence[int]]]) -> list[list[np.ndarray]]:
        """Decoder-only teacher forcing of concatenated segments, one pass per sequence.

        ``batch[b]`` is a list of id segments, run as one sequence ``seg_0 + seg_1 + ...``.
        Returns ``out[b][k]``: for each token of segment ``k``, its log-prob given all earlier
        tokens of the sequence (NaN for the sequence's first token). So one pass over
        ``[[bos], Y, sep, X, sep2, Y]`` yields log p(X | Y) and log p(Y | Y, X) together.
        Sequences are batched by ``batch_tokens`` (padded size) and each batch is one call of
        the backend's ``_next_token_logprobs``.
        """
        flat = self._flat_within_window(batch)
        results: list[list[np.ndarray]] = [[] for _ in batch]
        for idx in batches_by_token_budget([len(ids) for ids in flat], self.batch_tokens):
            rows = [flat[i] for i in idx]
            # A batch of only empty sequences has nothing to run.
            next_lps = self._next_token_logprobs(rows) if any(rows) else [np.zeros(0)] * len(rows)
            for i, row, lp in zip(idx, rows, next_lps, strict=True):
                seq_lp = np.concatenate([[math.nan], lp]) if row else np.zeros(0)
                results[i] = split_by_sizes(seq_lp, [len(s) for s in batch[i]])
        return results

    #: padded tokens per forward pass (longest sequence x batch size)
    batch_tokens: int = 4096

    def _flat_within_window(
        self, batch: Sequence[Sequence[Sequence[int]]], prefix_length: int = 0
    ) -> list[list[int]]:
        """Each sequence's segments joined into one id list; ``BackendError`` where one, after
        a shared prefix of ``prefix_length`` tokens, exceeds ``max_length``."""
        flat = [[int(t) for seg in segs for t in seg] for segs in batch]
        for ids in flat:
            if prefix_length + len(ids) > self.max_length:
                raise BackendError(
                    f"sequence of {prefix_length + len(ids)} tokens exceeds the model window "
                    f"{self.max_length}"
                )
        return flat

    def _next_token_logprobs(self, rows: list[list[int]]) -> list[np.ndarray]:
        """One padded forward pass over ``rows``: for each row, log p(row[t+1] | row[:t+1])
        for t = 0 .. len(row) - 2 (empty for a row of fewer than two tokens)."""
        raise NotImplementedError(f"{type(self).__name__} is not a decoder-only model")

    def prefix_logprobs(
        self,
        prefix: Sequence[int],
        continuations: Sequence[Sequence[Sequence[int]]],
        score_prefix: bool = True,
    ) -> tuple[np.ndarray, list[list[np.ndarray]]]:
        """Score a shared prefix once and many continuations of it.

        Returns ``(prefix_lp, out)``: ``prefix_lp`` as ``segment_logprobs([[prefix]])[0][0]``
        (empty when ``score_prefix`` is False: the caller needs only the continuations, and
        a backend may skip the LM head on the prefix) and ``out[c][k]`` the log-probs of
        segment ``k`` of continuation ``c`` given ``prefix + earlier segments of c``;
        identical to ``segment_logprobs([[prefix, *c]])`` without its prefix part. Backends
        with a key/value cache run the prefix once and reuse its cache for every continuation
        (a source shared by many summaries); this default re-runs the prefix and is correct
        for any backend.
        """
        alone = [[prefix]] if score_prefix else []
        full = self.segment_logprobs(alone + [[prefix, *c] for c in continuations])
        prefix_lp = full[0][0] if score_prefix else np.zeros(0)
        return prefix_lp, [segs[1:] for segs in full[len(alone) :]]

    # --- encoder-decoder -------------------------------------------------------------
    def seq2seq_logprobs(
        self, batch: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[np.ndarray]:
        """Encoder-decoder teacher forcing: for each ``(encoder_ids, target_ids)`` the
        log-prob of every target token given the encoder input and earlier target tokens.

        ``encoder_ids`` is complete (special tokens included, e.g. ``[bos, eos]`` for an
        empty source); the decoder input is ``[decoder_start] + target_ids[:-1]``.
        """
        raise NotImplementedError(f"{type(self).__name__} is not an encoder-decoder model")

    # --- string-level convenience --------------------------------------------------------
    def target_logprobs(self, pairs: Sequence[tuple[str, str]]) -> list[TokenLogprobs]:
        """For each (context, target): the target's per-token log-probabilities.

        Decoder-only: ``[bos] + context + target``; encoder-decoder: encoder
        ``[bos] context [eos]``, decoder ``target``. The target is kept whole (cut only when
        it alone exceeds the window); the context loses tokens from its end to fit, which
        ``context_policy`` records.
        """
        results: list[TokenLogprobs] = []
        for context, target in pairs:
            tgt = self.tokenize(target)
            ctx = self.tokenize(context)
            specials = [t for t in (self.bos_token_id,) if t is not None]
            if self.is_encoder_decoder:
                tgt = tgt[: self.max_target_length - 1]
                enc_specials = specials + [t for t in (self.eos_token_id,) if t is not None]
                room = self.max_length - len(enc_specials)
            else:
                tgt = tgt[: self.max_length - len(specials) - (0 if specials else 1)]
                room = self.max_length - len(specials) - len(tgt)
            kept = ctx[: max(0, room)]
            policy = {"policy": "keep_start", "context_tokens": len(ctx), "kept": len(kept)}
            if not tgt:
                lp = np.zeros(0, dtype=np.float64)
            elif self.is_encoder_decoder:
                enc = specials + kept + [t for t in (self.eos_token_id,) if t is not None]
                lp = self.seq2seq_logprobs([(enc, tgt)])[0]
            else:
                lp = self.segment_logprobs([[specials + kept, tgt]])[0][1]
            results.append(TokenLogprobs(self.token_texts(tgt), lp, policy))
        return results


def special_wrap(
    with_specials: Sequence[int], without: Sequence[int]
) -> tuple[list[int], list[int]]:
    """``(before, after)``: the ids around ``without`` (a text's ids) in ``with_specials`` (the
    same text encoded with its special tokens); ``([], [])`` when ``without`` is not found
    whole in it (a tokenizer that re-tokenizes the text when it adds them)."""
    w, t = [int(i) for i in with_specials], [int(i) for i in without]
    for start in range(len(w) - len(t) + 1):
        if w[start : start + len(t)] == t:
            return w[:start], w[start + len(t) :]
    return [], []


def offsets_by_decoding(
    text: str, ids: Sequence[int], decode: Callable[[Sequence[int]], str]
) -> list[tuple[int, int]]:
    """``LanguageModel.token_offsets`` for a tokenizer that keeps no offsets: token ``k``
    starts after the characters that ``decode(ids[:k])`` gives, counted without whitespace
    (a decoder may add or drop spaces), so that a prefix ending inside a character, which
    decodes to a trailing U+FFFD, does not count that character yet. Quadratic in the number
    of ids (a fallback). A token's span runs to the next token's start."""
    chars = [i for i, c in enumerate(text) if not c.isspace()]  # non-space positions
    starts = []
    for k in range(len(ids)):
        done = "".join(decode(ids[:k]).split()) if k else ""
        n = len(done)
        while n and done[n - 1] == "\ufffd" and (n > len(chars) or text[chars[n - 1]] != "\ufffd"):
            n -= 1  # the bytes of a character not complete yet
        starts.append(chars[n] if n < len(chars) else len(text))
    ends = [*starts[1:], len(text)]
    return [(a, max(a, b)) for a, b in zip(starts, ends, strict=True)]


class TextGenerator(RoleModel):
    """Generates text from an input text (e.g. a seq2seq question generator, ``qg`` role)."""

    task = "text-generator"

    @abstractmethod
    def generate(self, inputs: Sequence[str], max_new_tokens: int = 32) -> list[str]:
        """Greedy (deterministic) output for each input; inputs are truncated to fit."""


@dataclass
class Answer:
    """An extractive answer: the span text (``""`` for no answer) and the model's confidence."""

    text: str
    score: float
    start: int = -1  # character offsets in the context, -1 when there is no answer
    end: int = -1

    @property
    def is_empty(self) -> bool:
        return not self.text.strip()


class ExtractiveQA(RoleModel):
    """Answers questions with spans of a context (SQuAD-style models, ``qa`` role)."""

    task = "extractive-qa"

    @abstractmethod
    def answer(self, questions: Sequence[str], contexts: Sequence[str]) -> list[Answer]:
        """Best span per (question, context); an empty ``Answer`` when the model's
        no-answer score beats every span. Long contexts are windowed, best span kept."""


class Backend(ABC):
    """Factory of task models for one inference runtime; it also says what identifies a
    model it runs (``identity``, ``precision``): the settings hash asks it, never its name."""

    name: str = ""

    @abstractmethod
    def load(self, spec: ModelSpec, task: str, **options: Any) -> RoleModel:
        """Load ``spec`` for ``task``; raise ``BackendError`` with one line on failure."""

    def identity(self, spec: ModelSpec, task: str, options: dict[str, Any]) -> dict[str, Any]:
        """The fields this backend adds to the identity of ``spec`` loaded for ``task`` with
        ``options`` (the loader options that can move a score), without loading it: the
        settings hash holds them. By default the options, absent when there are none (so the
        hashes of default runs stay as they were)."""
        return {"options": dict(sorted(options.items()))} if options else {}

    def precision(self, identity: dict[str, Any]) -> str:
        """How the readable prefix of a settings hash names the precision of the weights in
        ``identity`` (one this backend made): ``-`` when it cannot tell."""
        return "-"
