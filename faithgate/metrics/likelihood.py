"""Likelihood metrics: thin formulas over the shared likelihood engine.

Notation (X source, Y = y_1..y_m summary, teacher-forced token probabilities):
p_s2s(y_i) = p(y_i | y_<i; X), p_lm(y_i) = p(y_i | y_<i; {}), p_pref(y_i) = p(y_i | y_<i; [Y, X]),
p_s2s(x_i) = p(x_i | x_<i; Y), p_lm(x_i) = p(x_i | x_<i). See ``faithgate.engines.likelihood`` for the
passes that produce them; five metrics over one batch run each distinct pass once.

All values are oriented higher = more faithful. The scorer model follows the ``model``
setting: ``"auto"`` (the default) is the ``seq2seq`` role (any encoder-decoder: point it at the
summarizer under test, as HaRiM+ intends) when one is configured, else the ``lm`` role
(decoder-only, default SmolLM2-135M-Instruct); ``"lm"`` or ``"seq2seq"`` pins the role.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from faithgate import text as textmod
from faithgate.engines.likelihood import (
    CUT_POLICIES,
    ROLE_TASKS,
    LikelihoodConfig,
    LikelihoodEngine,
    PairLogprobs,
    engine_for,
    pairs_of,
)
from faithgate.errors import InputError, ModelNotFoundError
from faithgate.metrics.base import Metric, ScoringContext, register
from faithgate.numbers import is_finite_number
from faithgate.types import Example, Score, SentenceScore

MODEL_CHOICES = ("auto", *ROLE_TASKS)
TARGET_TOKENS = ("tokenizer", "text")

_COMMON_DEFAULTS: dict[str, Any] = {
    # Role of the scorer model: "auto" (seq2seq when a seq2seq model is configured, else lm),
    # "lm" (decoder-only) or "seq2seq" (encoder-decoder).
    "model": "auto",
    # Encoder-decoder targets: "tokenizer" scores them as the tokenizer encodes them, with the
    # special tokens it adds (BART's <s> and </s>, T5's and PEGASUS's </s>), as BARTScore and
    # HaRiM+ do; "text" scores the text's own tokens only. Decoder-only targets are always
    # the text's tokens (the setting is not read, nor hashed, for them).
    "target_tokens": "tokenizer",
    "separator": "\nTL;DR:\n",  # decoder-only: between conditioning text and summary
    "x_separator": "\n",  # between Y and X in the [Y, X] conditioning
    # Which source text survives when the window is too small: "select" keeps the sentences
    # most relevant to the summary; "keep_start" / "keep_end" the first / last tokens.
    "cut": "select",
    # Cap on the model window in tokens (None: the model's own, 8,192 for SmolLM2). Past about
    # 2,048, SmolLM2's log-probs of a summary fall with the source's length alone.
    "max_length": 2048,
    "prefix_cache": True,  # reuse a source's key/value cache across its summaries
    "token_details": True,  # per-token log-probs in Score.details["tokens"]
}

# Settings added after scores were recorded, left out of the settings hash at the value that
# reproduces those scores (``LikelihoodMetric.hashed_settings``).
_HASHED_ONLY_OFF: dict[str, Any] = {"harim_form": "paper"}
HARIM_FORMS = ("paper", "released")

_SHORT = {"y_s2s": "s2s", "y_lm": "lm", "y_pref": "pref"}

# What every likelihood metric's per-sentence value is (``Score.sentences``).
_LOGP = "mean log p(token | source) of the sentence's tokens (<= 0; 0 = certain)"


def context_cut_text(context: Mapping[str, Any]) -> str:
    """What the model read of a source and summary too long for its window
    (``details["context"]``, faithgate.engines.likelihood), in words."""
    window = f"{context.get('window')}-token window"
    if context.get("policy") == "select" and context.get("sentences"):
        text = (
            f"read {context.get('sentences_kept')} of {context['sentences']} source sentences, "
            f"those most relevant to the summary ({window})"
        )
    else:
        where = "last" if context.get("policy") == "keep_end" else "first"
        text = (
            f"read the {where} {context.get('source_kept')} of {context.get('source_tokens')} "
            f"source tokens ({window})"
        )
    if context.get("summary_kept", 0) < context.get("summary_tokens", 0):
        text += (
            f"; scored the first {context['summary_kept']} of {context['summary_tokens']} "
            "summary tokens"
        )
    return text


class LikelihoodMetric(Metric):
    """Base of the likelihood family: settings, engine requests, per-token details."""

    family: ClassVar[str] = "likelihood"
    # 2: per-sentence support in Score.sentences; 3: a long source is cut to its sentences
    # most relevant to the summary within a 2,048-token window (was its first 8,192 tokens);
    # 4: the selected sentences kept whole (the last was chopped), and a summary the window
    # cannot hold whole fails (its tail was left unscored); 5: summary tokens placed in
    # Score.sentences by the tokenizer's character offsets (after an emoji or a non-Latin
    # letter every later token went to the wrong sentence); 6: a line break ends a sentence (faithgate.text.line_breaks): highlights and bullets were merged
    # (sentence details, and the sentences a long source is cut to); 7: a break inside a sentence
    # (a wrapped line, a bullet going on indented) no longer ends it, CRLF/CR/U+2028 are breaks,
    # "2." stays with its item.
    version: ClassVar[str] = "7"
    roles: ClassVar[dict[str, str]] = {"lm": "causal-lm"}
    defaults: ClassVar[dict[str, Any]] = dict(_COMMON_DEFAULTS)
    needs: ClassVar[tuple[str, ...]] = ("y_s2s",)
    sentence_value: ClassVar[str] = _LOGP + "; not the headline formula"

    @classmethod
    def details_line(cls, details: Mapping[str, Any]) -> str:
        """The formula's numbers, and what was read of a source cut to fit the window."""
        text = super().details_line(details)
        context = details.get("context")
        if isinstance(context, dict) and context.get("cut"):
            text += "; " + context_cut_text(context)
        return text

    def validate_settings(self) -> None:
        s = self.settings
        if s["model"] not in MODEL_CHOICES:
            raise InputError(
                f"{self.name}: model must be one of {', '.join(MODEL_CHOICES)}, not {s['model']!r}"
            )
        if s["target_tokens"] not in TARGET_TOKENS:
            raise InputError(
                f"{self.name}: target_tokens must be one of {', '.join(TARGET_TOKENS)}, "
                f"not {s['target_tokens']!r}"
            )
        if s["cut"] not in CUT_POLICIES:
            raise InputError(
                f"{self.name}: cut must be one of {', '.join(CUT_POLICIES)}, not {s['cut']!r}"
            )
        for key in ("separator", "x_separator"):
            if not isinstance(s[key], str):
                raise InputError(f"{self.name}: {key} must be a string")
        if not isinstance(s["prefix_cache"], bool):  # "no" read as true
            raise InputError(f"{self.name}: prefix_cache must be true or false")
        # The role follows the setting, so the settings hash names the right model; "auto"
        # is resolved per scoring context (``role``), its offline default (lm) named here.
        # spaCy splits sentences: the summary's for Score.sentences, a long source's to cut.
        role = "lm" if s["model"] == "auto" else s["model"]
        self.roles = {role: ROLE_TASKS[role], "spacy": "pipeline"}
        # Raises InputError for a bad cut or max_length now, not at the first batch.
        self.config_for(role)

    def role(self, ctx: ScoringContext) -> str:
        """The scorer model's role under ``ctx``: the ``model`` setting, or for ``"auto"`` the
        seq2seq role when a seq2seq model is configured (``--model seq2seq=...``, the
        configuration, or a model added to the pool), else the lm role."""
        if self.settings["model"] != "auto":
            return str(self.settings["model"])
        if ctx.pool.model_names.get("seq2seq"):
            # Named by the user: it is used, and a name that does not resolve is an error
            # when it loads, never a silent fall back to the lm role.
            return "seq2seq"
        try:
            ctx.pool.spec("seq2seq")
        except ModelNotFoundError:
            return "lm"
        return "seq2seq"

    def config_for(self, role: str) -> LikelihoodConfig:
        s = self.settings
        return LikelihoodConfig(
            role=role,
            separator=s["separator"],
            x_separator=s["x_separator"],
            cut=s["cut"],
            max_length=s["max_length"],
            prefix_cache=bool(s["prefix_cache"]),
            target_special_tokens=role == "seq2seq" and s["target_tokens"] == "tokenizer",
        )

    def model_roles(self, ctx: ScoringContext) -> dict[str, str]:
        role = self.role(ctx)
        return {role: ROLE_TASKS[role], "spacy": "pipeline"}

    def hashed_settings(self, ctx: ScoringContext) -> dict[str, Any]:
        """The settings as scored under ``ctx``: ``model`` is the role resolved (``"auto"``
        that resolves to lm hashes as ``"lm"`` did before the setting existed), and settings
        the role's passes never read, or that are at the value reproducing the scores from
        before they existed, are left out, so caches and baselines made then stay valid."""
        role = self.role(ctx)
        hashed = {**self.settings, "model": role}
        if role != "seq2seq":
            hashed.pop("target_tokens", None)
        for key, same_as_before in _HASHED_ONLY_OFF.items():
            if key in hashed and hashed[key] == same_as_before:
                del hashed[key]
        return hashed

    def engine(self, ctx: ScoringContext) -> LikelihoodEngine:
        return engine_for(ctx, self.config_for(self.role(ctx)))

    def prepare(self, examples: Sequence[Example], ctx: ScoringContext) -> None:
        self.engine(ctx).request(pairs_of(examples), self.needs)

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        engine = self.engine(ctx)
        engine.request(pairs_of(examples), self.needs)  # no-op when prepare() announced them
        settings_hash = self.settings_hash(ctx)
        scores = []
        for ex in examples:
            lp = engine.get(ex.source, ex.summary)
            if not lp.text_tokens:
                scores.append(Score.failed(self.name, settings_hash, ex.id, "empty summary"))
                continue
            cut = summary_cut(lp.context)
            if cut is not None:
                # Scoring the kept start would pass a summary whose end no one read.
                failed = Score.failed(self.name, settings_hash, ex.id, cut)
                failed.details = {"context": lp.context}
                scores.append(failed)
                continue
            try:
                value, components = self.formula(lp)
            except _CannotScore as exc:
                scores.append(Score.failed(self.name, settings_hash, ex.id, str(exc)))
                continue
            details: dict[str, Any] = {
                **components,
                "context": lp.context,
                "scored_tokens": len(lp.y_tokens),
            }
            if self.settings["token_details"]:
                details["tokens"] = self.token_rows(lp)
            if not math.isfinite(value):
                scores.append(
                    Score.failed(self.name, settings_hash, ex.id, "no token could be scored")
                )
                continue
            sentences = (
                sentence_support(
                    textmod.split_sentences(ex.summary, ctx.spacy_model),
                    ex.summary,
                    lp.y_offsets,
                    lp["y_s2s"][lp.y_text[0] : lp.y_text[1]],
                )
                if "y_s2s" in lp.values
                else []
            )
            scores.append(
                Score(self.name, float(value), settings_hash, ex.id, sentences, details=details)
            )
        return scores

    def token_rows(self, lp: PairLogprobs) -> list[dict[str, Any]]:
        """Summary tokens with every log-prob this metric used (for span highlighting)."""
        rows = []
        for i, tok in enumerate(lp.y_tokens):
            row: dict[str, Any] = {"token": tok}
            for q in self.needs:
                if q in _SHORT:
                    v = float(lp[q][i])
                    row[_SHORT[q]] = v if math.isfinite(v) else None
            rows.append(row)
        return rows

    def formula(self, lp: PairLogprobs) -> tuple[float, dict[str, Any]]:
        raise NotImplementedError


class _CannotScore(Exception):
    pass


def summary_cut(context: dict[str, Any]) -> str | None:
    """Why a summary could not be scored whole (``None`` when it was). When source and
    summary do not fit the window together, the engine keeps at most the summary's first
    quarter-window of tokens (decoder-only: the largest pass ``[bos Y sep_x X sep_y Y]`` holds
    it twice) or half the encoder window and the decoder's own limit (encoder-decoder). The
    tail past that was never scored and must not count as supported, so the metrics fail such
    a summary instead of scoring its start."""
    kept, total = context.get("summary_kept", 0), context.get("summary_tokens", 0)
    if kept >= total:
        return None
    window = context.get("window")
    return (
        f"summary too long for the LM window: {kept} of {total} tokens could be scored "
        f"beside the source in a {window}-token window, and a summary is never scored in "
        "part (raise the metric's max_length setting, up to the model's own window, or "
        "shorten the summary)"
    )


def sentence_support(
    sentences: Sequence[str],
    text: str,
    offsets: Sequence[tuple[int, int]],
    s2s: np.ndarray,
) -> list[SentenceScore]:
    """Per summary sentence: the mean log p_s2s of its tokens (the same quantity as ``loglik``,
    restricted to the sentence), so reports can name the sentence the source supports least.

    ``sentences`` are the sentences of ``text`` and ``offsets`` each token's character span in
    ``text`` (``PairLogprobs.y_offsets``). A token belongs to the sentence its first character
    is in, counted in ``text`` without whitespace (a token that starts with the space before a
    sentence belongs to that sentence); one that straddles a boundary belongs to the sentence
    where it starts. A sentence with no finite token is left out. (Adding up the lengths of
    the tokens' texts put every token after an emoji or a non-Latin letter in the wrong
    sentence: each byte piece of such a character reads as one U+FFFD.)
    """
    if not sentences:
        return []
    bounds, end = [], 0
    for sentence in sentences:
        end += len("".join(sentence.split()))
        bounds.append(end)
    # Non-space characters before each character position of the text.
    before = np.concatenate([[0], np.cumsum([not c.isspace() for c in text], dtype=np.int64)])
    sums = np.zeros(len(sentences))
    counts = np.zeros(len(sentences), dtype=int)
    for (start, _), value in zip(offsets, s2s, strict=True):
        if not math.isfinite(float(value)):
            continue
        pos = int(before[min(max(int(start), 0), len(text))])
        k = min(bisect.bisect_right(bounds, pos), len(bounds) - 1)
        sums[k] += float(value)
        counts[k] += 1
    return [
        SentenceScore(i, sentence, float(sums[i] / counts[i]))
        for i, sentence in enumerate(sentences)
        if counts[i]
    ]


def _finite(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The arrays restricted to tokens finite in all of them (NaN: token without context)."""
    mask = np.ones(len(arrays[0]), dtype=bool)
    for a in arrays:
        mask &= np.isfinite(a)
    if not mask.any():
        raise _CannotScore("no token could be scored")
    return tuple(np.asarray(a, dtype=np.float64)[mask] for a in arrays)


@register
class LogLik(LikelihoodMetric):
    """BARTScore-style faithfulness (Yuan et al. 2021, "BARTScore", source -> hypothesis).

    loglik = 1/m * sum_i log p_s2s(y_i), the mean log-probability of the summary tokens given
    the source. Range (-inf, 0]; higher = more faithful.
    """

    name = "loglik"
    description = "mean log p(summary token | source) (BARTScore-style)"
    bounds = (None, 0.0)
    scale = "mean log p(summary token | source), <= 0 (0 = certain)"
    sentence_value = _LOGP
    needs = ("y_s2s",)

    def formula(self, lp: PairLogprobs) -> tuple[float, dict[str, Any]]:
        (s2s,) = _finite(lp["y_s2s"])
        return float(s2s.mean()), {}


def harim_terms(s2s: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """Per-token HaRiM terms (1 - p_s2s) * (1 - (p_s2s - p_lm)) (Son et al. 2022, eq. 3)."""
    p_s2s, p_lm = np.exp(s2s), np.exp(lm)
    return (1.0 - p_s2s) * (1.0 - (p_s2s - p_lm))


@register
class HaRiM(LikelihoodMetric):
    """HaRiM (Son et al. 2022, "HaRiM+: Evaluating Summary Quality with Hallucination Risk").

    HaRiM = 1/m * sum_i (1 - p_s2s(y_i)) * (1 - (p_s2s(y_i) - p_lm(y_i))), a hallucination
    risk: *lower* is better in the paper. faithgate reports ``value = -HaRiM`` (range [-2, 0],
    higher = more faithful); the unflipped number is ``details["harim"]``.
    """

    name = "harim"
    description = "-HaRiM: hallucination risk from p(summary|source) vs p(summary) (sign flipped)"
    # Each term (1 - p_s2s) * (1 - p_s2s + p_lm), with p_s2s, p_lm in [0, 1], lies in [0, 2]
    # (0 at p_s2s = 1, 2 at p_s2s = 0 and p_lm = 1): their mean too, so -HaRiM is in [-2, 0].
    bounds = (-2.0, 0.0)
    needs = ("y_s2s", "y_lm")
    scale = "-HaRiM, <= 0 (0 = no hallucination risk)"
    sentence_value = _LOGP + "; not -HaRiM"

    def formula(self, lp: PairLogprobs) -> tuple[float, dict[str, Any]]:
        s2s, lm = _finite(lp["y_s2s"], lp["y_lm"])
        harim = float(harim_terms(s2s, lm).mean())
        return -harim, {"harim": harim}


@register
class HaRiMPlus(LikelihoodMetric):
    """HaRiM+ (Son et al. 2022): 1/m * sum_i log p_s2s(y_i) - lambda * HaRiM, lambda = 7.

    The log-likelihood term rewards fluent, source-supported tokens; the HaRiM term penalises
    tokens the source does not make more likely than the empty source does (encoder input
    ``[bos, eos]`` for an encoder-decoder; the prompt without the document for a decoder-only
    model). Higher = more faithful.

    ``harim_form = "released"`` gives the authors' released scorer (github NCSOFT/HaRiM+, the
    ``evaluate`` metric "NCSOFT/harim_plus"): its per-token term is 1 - (1 - p_s2s)(1 - delta)/2,
    so its value is loglik + lambda * (1 - HaRiM / 2): half the weight on HaRiM (lambda 7
    there is lambda 3.5 in the paper form) plus the constant lambda. ``"paper"`` (default)
    keeps the form above, the one every recorded harim_plus threshold was set on.
    """

    name = "harim_plus"
    description = "HaRiM+: mean log p(summary|source) - 7 * HaRiM"
    scale = "mean log p(token | source) - 7 HaRiM, unbounded below (news, SmolLM2: about -5..-1)"
    needs = ("y_s2s", "y_lm")
    defaults = {**_COMMON_DEFAULTS, "lambda": 7.0, "harim_form": "paper"}

    def validate_settings(self) -> None:
        if not is_finite_number(self.settings["lambda"]):  # inf / NaN: every example unscorable
            raise InputError(f"{self.name}: lambda must be a finite number")
        if self.settings["harim_form"] not in HARIM_FORMS:
            raise InputError(
                f"{self.name}: harim_form must be one of {', '.join(HARIM_FORMS)}, "
                f"not {self.settings['harim_form']!r}"
            )
        super().validate_settings()

    def formula(self, lp: PairLogprobs) -> tuple[float, dict[str, Any]]:
        s2s, lm = _finite(lp["y_s2s"], lp["y_lm"])
        loglik = float(s2s.mean())
        harim = float(harim_terms(s2s, lm).mean())
        lam = float(self.settings["lambda"])
        if self.settings["harim_form"] == "released":
            # The released scorer's "harim": 1 - risk/2 per token (its margin is (1-delta)/2).
            released = 1.0 - harim / 2.0
            return loglik + lam * released, {
                "loglik": loglik,
                "harim": harim,
                "harim_released": released,
            }
        return loglik - lam * harim, {"loglik": loglik, "harim": harim}


@register
class CoP(LikelihoodMetric):
    """CoP, controlling the preference (She et al. 2023, "CoP: Factual Inconsistency Detection
    by Controlling the Preference").

    cop = 1/m * sum_i (log p_s2s(y_i) - log p_pref(y_i)) with p_pref conditioned on the source
    prefixed by the summary itself, [Y, X]: the summary's own copy removes the preference for
    fluent text, so what remains is how much the source alone supports each token. Usually
    <= 0; higher = more faithful.
    """

    name = "cop"
    description = "CoP: mean log p(summary|source) - log p(summary|[summary, source])"
    scale = "mean log p(summary | source) - log p(summary | [summary, source]), unbounded"
    needs = ("y_s2s", "y_pref")

    def formula(self, lp: PairLogprobs) -> tuple[float, dict[str, Any]]:
        s2s, pref = _finite(lp["y_s2s"], lp["y_pref"])
        return float((s2s - pref).mean()), {}


@register
class FFLM(LikelihoodMetric):
    """FFLM (Jia et al. 2023, "Zero-shot Faithfulness Evaluation for Text Summarization with
    Foundation Language Model").

    With w(p) = e^p (the exponential of the *probability*):
    dY_prior = 1/m sum_i w(p_s2s(y_i)) (log p_s2s(y_i) - log p_lm(y_i)),
    dX_prior = 1/n sum_i w(p_s2s(x_i)) (log p_s2s(x_i) - log p_lm(x_i)),
    dY_cond  = 1/m sum_i w(p_s2s(y_i)) (log p_s2s(y_i) - log p_pref(y_i)),
    FFLM = a dY_prior + b dX_prior + d dY_cond, (a, b, d) = (0.25, 0.25, 0.5) by default.
    Decoder-only prompts use the "TL;DR" separator as in the paper. Higher = more faithful.
    Every component is in ``details``.
    """

    name = "fflm"
    description = "FFLM: weighted prior/conditional probability changes (Jia et al. 2023)"
    scale = "weighted log-probability changes with and without the source, unbounded"
    needs = ("y_s2s", "y_lm", "y_pref", "x_s2s", "x_lm")
    defaults = {**_COMMON_DEFAULTS, "weights": (0.25, 0.25, 0.5)}

    def validate_settings(self) -> None:
        w = self.settings["weights"]
        if (
            not isinstance(w, (list, tuple))
            or len(w) != 3
            or not all(is_finite_number(v) for v in w)
        ):
            raise InputError(f"{self.name}: weights must be three finite numbers (a, b, d)")
        super().validate_settings()

    def formula(self, lp: PairLogprobs) -> tuple[float, dict[str, Any]]:
        y_s2s, y_lm, y_pref = _finite(lp["y_s2s"], lp["y_lm"], lp["y_pref"])
        if not len(lp["x_s2s"]):
            raise _CannotScore("empty source: dX_prior is undefined")
        try:
            x_s2s, x_lm = _finite(lp["x_s2s"], lp["x_lm"])
        except _CannotScore:
            raise _CannotScore("no source token could be scored") from None
        w_y = np.exp(np.exp(y_s2s))
        w_x = np.exp(np.exp(x_s2s))
        dy_prior = float((w_y * (y_s2s - y_lm)).mean())
        dx_prior = float((w_x * (x_s2s - x_lm)).mean())
        dy_cond = float((w_y * (y_s2s - y_pref)).mean())
        a, b, d = (float(v) for v in self.settings["weights"])
        value = a * dy_prior + b * dx_prior + d * dy_cond
        return value, {"dY_prior": dy_prior, "dX_prior": dx_prior, "dY_cond": dy_cond}


@register
class PMIMinK(LikelihoodMetric):
    """Lowest-k pointwise mutual information: span-level evidence from the likelihood passes.

    pmi_i = log p_s2s(y_i) - log p_lm(y_i), how much the source raises the probability of
    summary token y_i (the per-token quantity behind HaRiM, Son et al. 2022, and the prior
    change of FFLM, Jia et al. 2023); pmi_mink = the mean of the k smallest pmi_i (k = 3).
    One unsupported name or number is a few tokens the source does not make likelier; a mean
    over the whole summary dilutes them, the lowest few do not. Higher = more faithful.
    ``details["lowest"]`` lists those tokens with their PMI.
    """

    name = "pmi_mink"
    description = "mean of the k lowest token PMIs log p(y_i|source) - log p(y_i) (k = 3)"
    scale = (
        "mean of the {k} lowest token PMIs, log p(token | source) - log p(token), unbounded "
        "(below 0: the source makes those tokens less likely)"
    )
    needs = ("y_s2s", "y_lm")
    defaults = {**_COMMON_DEFAULTS, "k": 3}

    def validate_settings(self) -> None:
        k = self.settings["k"]
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise InputError(f"{self.name}: k must be an integer >= 1")
        super().validate_settings()

    def formula(self, lp: PairLogprobs) -> tuple[float, dict[str, Any]]:
        mask = np.isfinite(lp["y_s2s"]) & np.isfinite(lp["y_lm"])
        if not mask.any():
            raise _CannotScore("no token could be scored")
        pmi = (np.asarray(lp["y_s2s"], dtype=np.float64) - lp["y_lm"])[mask]
        tokens = [t for t, keep in zip(lp.y_tokens, mask, strict=True) if keep]
        order = np.argsort(pmi, kind="stable")[: self.settings["k"]]
        lowest = [{"token": tokens[i], "pmi": float(pmi[i])} for i in order]
        return float(pmi[order].mean()), {"lowest": lowest}
