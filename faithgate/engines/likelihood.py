"""The likelihood engine: plans and runs each distinct teacher-forced pass once.

Likelihood metrics (``faithgate.metrics.likelihood``) are thin formulas over five per-token
log-probability arrays of a (source X, summary Y) pair (notation of HaRiM+, Son et al. 2022;
CoP, She et al. 2023; FFLM, Jia et al. 2023):

==========  ==========================================  ======================================
quantity    definition                                  decoder-only pass that yields it
==========  ==========================================  ======================================
``y_s2s``   log p(y_i | y_<i ; X)                       [bos X sep_y] + Y   (prefix cached)
``y_lm``    log p(y_i | y_<i ; {})                      [bos sep_y] + Y     (prompt, no source)
``y_pref``  log p(y_i | y_<i ; [Y, X])                  [bos Y sep_x X sep_y] + Y
``x_s2s``   log p(x_i | x_<i ; Y)                       same pass as ``y_pref``
``x_lm``    log p(x_i | x_<i)                           same pass as the ``y_s2s`` prefix
==========  ==========================================  ======================================

Metrics announce what they need (``request``) in ``Metric.prepare``; the first metric that
asks for results triggers one plan over *every* announced pair, so five metrics over a batch
cost each distinct pass once, and every summary of one source shares one run of the source
prefix (its key/value cache is reused: document-prefix caching).

Encoder-decoder models (``seq2seq`` role) use encoder inputs instead of prompts:
``y_s2s`` = enc(X) -> Y, ``y_lm`` = enc({}) = ``[bos, eos]`` -> Y (HaRiM+'s empty source),
``y_pref`` = enc(Y sep_x X) -> Y, ``x_s2s`` = enc(Y) -> X, ``x_lm`` = enc({}) -> X. With
``target_special_tokens`` every target is scored as the tokenizer encodes it, its special
tokens included (BART ``<s> Y </s>``, T5 and PEGASUS ``Y </s>``), as BARTScore (Yuan et al.
2021) and the HaRiM+ authors' scorer do; the arrays then hold those tokens too and
``PairLogprobs.y_text`` says where the summary's own tokens are.

Context cut policy. Every pass of one pair uses the same kept tokens of X and Y, fixed from
the pair alone (never from which metrics were asked), so scores do not depend on the metric
mix or the batch. The window must hold the largest pass, ``[bos Y sep_x X sep_y Y]``: when it
does not, the summary keeps at most a quarter of the window (from its start) and the source
keeps the rest: its sentences most relevant to the summary, whole and in source order
(``select``, the default; ``faithgate.text.relevant_sentences``), or its first tokens
(``keep_start``) or its last (``keep_end``). Tokens outside the window are never scored; the
cut is recorded in ``PairLogprobs.context``, and a summary that was cut (``summary_kept <
summary_tokens``) is failed by the likelihood metrics, never scored in part
(``faithgate.metrics.likelihood.summary_cut``). The likelihood metrics cap the window at 2,048
tokens by default (``max_length``): past about that, SmolLM2's log-probs of a summary fall with
the source's length alone, and time and memory grow quadratically (docs/metrics/likelihood.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faithgate import text as textmod
from faithgate.backends.base import LanguageModel
from faithgate.engines.context import EngineContext
from faithgate.errors import InputError

QUANTITIES = ("y_s2s", "y_lm", "y_pref", "x_s2s", "x_lm")
CUT_POLICIES = ("select", "keep_start", "keep_end")
ROLE_TASKS = {"lm": "causal-lm", "seq2seq": "seq2seq-lm"}


@dataclass(frozen=True)
class LikelihoodConfig:
    """How conditioning text and target are joined, and how long inputs are cut.

    ``separator`` joins a conditioning text and the summary in a decoder-only prompt (FFLM's
    "TL;DR"); with an empty source the prompt is the separator alone. ``x_separator`` joins
    Y and X in the [Y, X] conditioning. ``max_length`` caps the model window (tokens).
    """

    role: str = "lm"
    separator: str = "\nTL;DR:\n"
    x_separator: str = "\n"
    cut: str = "select"
    max_length: int | None = None
    prefix_cache: bool = True
    # Encoder-decoder targets with the tokenizer's special tokens (see the module docstring).
    target_special_tokens: bool = False

    def __post_init__(self) -> None:
        if self.role not in ROLE_TASKS:
            raise InputError(
                f"likelihood model role must be one of {', '.join(ROLE_TASKS)}, not {self.role!r}"
            )
        if self.cut not in CUT_POLICIES:
            raise InputError(
                f"cut policy must be one of {', '.join(CUT_POLICIES)}, not {self.cut!r}"
            )
        if self.max_length is not None and (
            not isinstance(self.max_length, int) or self.max_length < 16
        ):
            raise InputError(f"max_length must be an integer >= 16, not {self.max_length!r}")

    @property
    def task(self) -> str:
        return ROLE_TASKS[self.role]

    @property
    def key(self) -> str:
        """Shared-engine key: metrics with equal configs share one engine (and its passes)."""
        return (
            f"likelihood:{self.role}:{self.separator!r}:{self.x_separator!r}:{self.cut}:"
            f"{self.max_length}:{self.prefix_cache}:{self.target_special_tokens}"
        )


@dataclass
class PairLogprobs:
    """Per-token log-probabilities of one (source, summary) pair.

    Arrays hold one value per *kept* token; a value is NaN only for a decoder-only token with
    no context at all (no bos token and nothing before it), which formulas skip.
    ``y_offsets`` is the ``(start, end)`` character span of each kept summary token in the
    summary (``LanguageModel.token_offsets``): where a token is, also for the pieces of a
    character that ``y_tokens`` shows as U+FFFD.
    """

    y_tokens: list[str]
    # The kept source ids, read as text only when ``x_tokens`` is asked for: no metric reads
    # them, and decoding every source token of every pair (one tokenizer call per token) took
    # longer than a tiny BART's passes (cProfile; benchmarks/README.md, seq2seq).
    x_ids: tuple[int, ...]
    token_texts: Callable[[Sequence[int]], list[str]] = field(repr=False)
    context: dict[str, Any] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)
    y_offsets: list[tuple[int, int]] = field(default_factory=list)
    # (start, end) of the summary's own tokens in ``y_tokens`` and the y arrays: the rest are
    # the tokenizer's special tokens, scored as part of the target (``target_special_tokens``).
    y_text: tuple[int, int] = (0, 0)

    @property
    def x_tokens(self) -> list[str]:
        """Readable text of each kept source token (special tokens of a target included)."""
        return self.token_texts(self.x_ids)

    @property
    def text_tokens(self) -> int:
        """How many of the scored summary tokens are the summary's own (specials excluded)."""
        return self.y_text[1] - self.y_text[0]

    def __getitem__(self, quantity: str) -> np.ndarray:
        return self.values[quantity]


@dataclass
class _Pair:
    x: tuple[int, ...]  # kept source ids
    y: tuple[int, ...]  # kept summary ids
    context: dict[str, Any]


class LikelihoodEngine:
    """Collects requests from all likelihood metrics and runs each distinct pass once.

    >>> engine = LikelihoodEngine(lm, LikelihoodConfig())        # doctest: +SKIP
    >>> engine.request([(source, summary)], ["y_s2s", "y_lm"])   # doctest: +SKIP
    >>> engine.get(source, summary)["y_s2s"]                     # doctest: +SKIP
    """

    def __init__(
        self, model: LanguageModel, config: LikelihoodConfig, spacy_model: str | None = None
    ) -> None:
        self.model = model
        self.config = config
        self.spacy_model = spacy_model  # sentence splitting for the ``select`` cut
        self._lock = threading.RLock()
        self._tok: dict[str, tuple[int, ...]] = {}
        self._pairs: dict[tuple[str, str], _Pair] = {}
        self._pending: dict[tuple[str, str], set[str]] = {}
        self._done: dict[tuple[str, str], PairLogprobs] = {}
        # Tokens run through the model, for benchmarks ("passes" counts backend calls).
        self.stats = {"tokens": 0, "passes": 0}
        if model.is_encoder_decoder:
            self._sep_y: tuple[int, ...] = ()
        else:
            self._sep_y = tuple(model.tokenize(config.separator)) if config.separator else ()
        self._sep_x = tuple(model.tokenize(config.x_separator)) if config.x_separator else ()
        self._bos = () if model.bos_token_id is None else (int(model.bos_token_id),)
        self._eos = () if model.eos_token_id is None else (int(model.eos_token_id),)
        # Special tokens around every encoder-decoder target (none: the text's tokens alone).
        self._t_pre: tuple[int, ...] = ()
        self._t_suf: tuple[int, ...] = ()
        if model.is_encoder_decoder and config.target_special_tokens:
            pre, suf = model.special_tokens()
            self._t_pre, self._t_suf = tuple(pre), tuple(suf)

    # --- requests -------------------------------------------------------------------------
    def request(self, pairs: Iterable[tuple[str, str]], quantities: Iterable[str]) -> None:
        """Announce that ``quantities`` will be needed for each (source, summary)."""
        wanted = set(quantities)
        unknown = wanted - set(QUANTITIES)
        if unknown:
            raise ValueError(f"unknown likelihood quantities: {sorted(unknown)}")
        with self._lock:
            for source, summary in pairs:
                key = (source, summary)
                have = set(self._done[key].values) if key in self._done else set()
                missing = wanted - have
                if missing:
                    self._pending.setdefault(key, set()).update(missing)

    def get(self, source: str, summary: str) -> PairLogprobs:
        """Results for one pair (runs every pending pass first)."""
        with self._lock:
            if self._pending:
                self.run()
            return self._done[(source, summary)]

    def release(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Forget results no metric will read again (keeps long runs' memory flat)."""
        with self._lock:
            for key in pairs:
                self._done.pop(key, None)

    def release_all(self) -> None:
        """Forget every result, plan and tokenization (after a batch; ``stats`` are kept)."""
        with self._lock:
            self._done.clear()
            self._pairs.clear()
            self._tok.clear()
            self._pending.clear()

    # --- planning ---------------------------------------------------------------------------
    def _ids(self, text: str) -> tuple[int, ...]:
        ids = self._tok.get(text)
        if ids is None:
            ids = tuple(self.model.tokenize(text)) if text else ()
            self._tok[text] = ids
        return ids

    def _window(self) -> int:
        limit = self.model.max_length
        return min(limit, self.config.max_length) if self.config.max_length else limit

    def _pair(self, source: str, summary: str) -> _Pair:
        key = (source, summary)
        if key in self._pairs:
            return self._pairs[key]
        x, y = self._ids(source), self._ids(summary)
        window = self._window()
        if self.model.is_encoder_decoder:
            # Largest encoder input: [bos] Y sep_x X [eos]; X and Y are also decoder targets.
            fixed = len(self._bos) + len(self._eos) + len(self._sep_x)
            target_limit = self.model.max_target_length - len(self._t_pre) - len(self._t_suf)
            m = min(len(y), target_limit, max(1, (window - fixed) // 2))
            n = max(0, min(len(x), window - fixed - m, target_limit))
        else:
            # Largest sequence: [bos] Y sep_x X sep_y Y.
            fixed = len(self._bos) + len(self._sep_x) + len(self._sep_y)
            m = len(y)
            if fixed + 2 * len(y) + len(x) > window:
                m = min(len(y), max(1, (window - fixed) // 4))
            n = max(0, min(len(x), window - fixed - 2 * m))
        selected: dict[str, Any] = {}
        if n < len(x) and self.config.cut == "select":
            kept_x, selected = self._select(source, summary, n)
        else:
            kept_x = x[:n] if self.config.cut != "keep_end" else x[len(x) - n :]
        context = {
            "policy": self.config.cut,
            "window": window,
            "source_tokens": len(x),
            "source_kept": len(kept_x),
            "summary_tokens": len(y),
            "summary_kept": m,
            "cut": len(kept_x) < len(x) or m < len(y),
            **selected,
        }
        pair = _Pair(kept_x, y[:m], context)
        self._pairs[key] = pair
        return pair

    def _select(
        self, source: str, summary: str, budget: int
    ) -> tuple[tuple[int, ...], dict[str, Any]]:
        """The source's sentences most relevant to the summary that fit ``budget`` tokens, in
        source order: adjacent ones joined by a space, gaps by a paragraph break. Its first
        ``budget`` tokens when no sentence fits (one long run-on sentence).

        Selected sentences are kept whole. Sentences are chosen by their token counts apart,
        but the joined text also holds the separators (a paragraph break is a token of its
        own) and may tokenise differently at the joins; when it comes out longer than
        ``budget``, the sentences are chosen again for a budget smaller by the excess, until
        the joined text fits. (Cutting the joined tokens to ``budget`` chopped the end of the
        last selected sentence, often the one the summary needed.)"""
        sentences = textmod.split_sentences(source, self.spacy_model)
        queries = textmod.split_sentences(summary, self.spacy_model)
        limit = budget
        while limit > 0:
            keep = textmod.relevant_sentences(
                sentences, queries, limit, lambda s: len(self._ids(s))
            )
            if not keep:
                break
            parts: list[str] = []
            for a, k in enumerate(keep):
                if a:
                    parts.append(" " if k == keep[a - 1] + 1 else "\n\n")
                parts.append(sentences[k])
            kept = tuple(self.model.tokenize("".join(parts)))
            if len(kept) <= budget:
                return kept, {"sentences": len(sentences), "sentences_kept": len(keep)}
            limit -= len(kept) - budget
        return self._ids(source)[:budget], {"sentences": len(sentences), "sentences_kept": 0}

    def run(self) -> None:
        """Run every pending pass, each distinct one once."""
        with self._lock:
            pending, self._pending = self._pending, {}
            pairs = {key: self._pair(*key) for key in pending}
            if self.model.is_encoder_decoder:
                values = self._run_seq2seq(pending, pairs)
            else:
                values = self._run_causal(pending, pairs)
            pre, suf = self._t_pre, self._t_suf
            for key, wanted in pending.items():
                pair = pairs[key]
                result = self._done.get(key)
                if result is None:
                    result = PairLogprobs(
                        self.model.token_texts(pre + pair.y + suf),
                        pre + pair.x + suf,
                        self.model.token_texts,
                        dict(pair.context),
                        y_offsets=self.model.token_offsets(key[1])[: len(pair.y)] if pair.y else [],
                        y_text=(len(pre), len(pre) + len(pair.y)),
                    )
                    self._done[key] = result
                for q in wanted:
                    result.values[q] = values[(key, q)]

    def _run_causal(
        self, pending: dict[tuple[str, str], set[str]], pairs: dict[tuple[str, str], _Pair]
    ) -> dict[tuple[tuple[str, str], str], np.ndarray]:
        lm, bos, sx, sy = self.model, self._bos, self._sep_x, self._sep_y
        out: dict[tuple[tuple[str, str], str], np.ndarray] = {}

        # 1. Source prefix [bos X sep_y]: x_lm from the prefix itself, y_s2s continues it.
        by_prefix: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
        scored_prefixes: set[tuple[int, ...]] = set()  # sources whose x_lm is wanted
        for key, wanted in pending.items():
            p = pairs[key]
            if "y_s2s" in wanted or "x_lm" in wanted:
                conts = by_prefix.setdefault(p.x, set())
                if "y_s2s" in wanted:
                    conts.add(p.y)
                if "x_lm" in wanted:
                    scored_prefixes.add(p.x)
        prefix_res: dict[tuple[int, ...], tuple[np.ndarray, dict[tuple[int, ...], np.ndarray]]]
        prefix_res = {}
        for x, conts in by_prefix.items():
            prefix = bos + x + sy
            ys = sorted(conts)
            if self.config.prefix_cache:
                pre_lp, cont_lp = lm.prefix_logprobs(
                    prefix, [[y] for y in ys], score_prefix=x in scored_prefixes
                )
                self._count(len(prefix) + sum(len(y) for y in ys), 1)
                prefix_res[x] = (pre_lp, {y: c[0] for y, c in zip(ys, cont_lp, strict=True)})
            else:
                # Each summary re-runs the whole source (the uncached baseline).
                seqs = [[prefix, y] for y in ys] or [[prefix]]
                res = lm.segment_logprobs(seqs)
                self._count(sum(len(prefix) + len(y) for y in ys) or len(prefix), 1)
                conts_lp = {y: r[1] for y, r in zip(ys, res[: len(ys)], strict=True)}
                prefix_res[x] = (res[0][0], conts_lp)

        # 2. Prompt without the source [bos sep_y] + Y: y_lm.
        lm_ys = sorted({pairs[k].y for k, w in pending.items() if "y_lm" in w})
        y_lm: dict[tuple[int, ...], np.ndarray] = {}
        if lm_ys:
            prompt = bos + sy
            if prompt:
                _, res = lm.prefix_logprobs(prompt, [[y] for y in lm_ys], score_prefix=False)
                y_lm = {y: r[0] for y, r in zip(lm_ys, res, strict=True)}
            else:
                res = lm.segment_logprobs([[y] for y in lm_ys])
                y_lm = {y: r[0] for y, r in zip(lm_ys, res, strict=True)}
            self._count(sum(len(prompt) + len(y) for y in lm_ys), 1)

        # 3. [bos Y sep_x X sep_y Y]: x_s2s (segment 2) and y_pref (segment 4) in one pass.
        pref_keys = sorted(
            {(pairs[k].x, pairs[k].y) for k, w in pending.items() if w & {"y_pref", "x_s2s"}}
        )
        pref: dict[tuple[tuple[int, ...], tuple[int, ...]], list[np.ndarray]] = {}
        if pref_keys:
            seqs = [[bos + y + sx, x, sy, y] for x, y in pref_keys]
            res = lm.segment_logprobs(seqs)
            self._count(sum(sum(len(s) for s in seq) for seq in seqs), 1)
            pref = dict(zip(pref_keys, res, strict=True))

        for key, wanted in pending.items():
            p = pairs[key]
            for q in wanted:
                if q == "y_s2s":
                    value = prefix_res[p.x][1][p.y]
                elif q == "x_lm":
                    pre_lp = prefix_res[p.x][0]
                    value = pre_lp[len(bos) : len(bos) + len(p.x)]
                elif q == "y_lm":
                    value = y_lm[p.y]
                elif q == "x_s2s":
                    value = pref[(p.x, p.y)][1]
                else:  # y_pref
                    value = pref[(p.x, p.y)][3]
                out[(key, q)] = np.asarray(value, dtype=np.float64)
        return out

    def _run_seq2seq(
        self, pending: dict[tuple[str, str], set[str]], pairs: dict[tuple[str, str], _Pair]
    ) -> dict[tuple[tuple[str, str], str], np.ndarray]:
        bos, eos, sx = self._bos, self._eos, self._sep_x
        pre, suf = self._t_pre, self._t_suf

        def enc(ids: tuple[int, ...]) -> tuple[int, ...]:
            return bos + ids + eos  # empty source: [bos, eos] (HaRiM+)

        def tgt(ids: tuple[int, ...]) -> tuple[int, ...]:
            return pre + ids + suf

        jobs: dict[tuple[str, str], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for key, wanted in pending.items():
            p = pairs[key]
            for q in wanted:
                if q == "y_s2s":
                    jobs[(key, q)] = (enc(p.x), tgt(p.y))
                elif q == "y_lm":
                    jobs[(key, q)] = (enc(()), tgt(p.y))
                elif q == "y_pref":
                    jobs[(key, q)] = (enc(p.y + sx + p.x), tgt(p.y))
                elif q == "x_s2s":
                    jobs[(key, q)] = (enc(p.y), tgt(p.x))
                else:  # x_lm
                    jobs[(key, q)] = (enc(()), tgt(p.x))
        distinct = sorted(set(jobs.values()))
        res = self.model.seq2seq_logprobs(distinct) if distinct else []
        self._count(sum(len(e) + len(t) for e, t in distinct), 1)
        by_job = dict(zip(distinct, res, strict=True))
        return {k: np.asarray(by_job[j], dtype=np.float64) for k, j in jobs.items()}

    def _count(self, tokens: int, passes: int) -> None:
        self.stats["tokens"] += tokens
        self.stats["passes"] += passes


def engine_for(ctx: EngineContext, config: LikelihoodConfig) -> LikelihoodEngine:
    """The run's shared engine for ``config`` (one per scoring context and config)."""

    def factory() -> LikelihoodEngine:
        model = ctx.model(config.role, config.task)
        return LikelihoodEngine(model, config, ctx.spacy_model)

    return ctx.shared(config.key, factory)


def finite_mean(values: np.ndarray) -> float:
    """Mean over finite entries (NaN marks a token with no context); NaN when none."""
    values = np.asarray(values, dtype=np.float64)
    mask = np.isfinite(values)
    return float(values[mask].mean()) if mask.any() else float("nan")


def pairs_of(examples: Sequence[Any]) -> list[tuple[str, str]]:
    return [(ex.source, ex.summary) for ex in examples]
