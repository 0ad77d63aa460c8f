"""``llm_judge``: an LLM behind an OpenAI-compatible server judges the summary.

Two modes, each a versioned prompt (the version is in the settings hash, so a changed prompt
never reuses an old answer):

- ``claims`` (DeepEval's FaithfulnessMetric and Ragas' faithfulness, Es et al. 2024,
  "RAGAS", EACL demo): one call splits the summary into atomic claims; one call per claim asks
  whether the source supports it (``supported`` / ``unsupported`` / ``contradicted``, with a
  quote as evidence). Score = supported claims / claims.
- ``direct`` (the sentence-level yes/no question of G-Eval-style judges, Liu et al. 2023,
  "G-Eval", EMNLP): one call per summary sentence, "Is the sentence supported by the source?
  Yes or No". Where the server returns log-probabilities the sentence's score is
  P(Yes) / (P(Yes) + P(No)) over the first token's top alternatives; else 1 for a parsed
  "Yes", 0 for "No". Score = mean over sentences.

The metric never speaks HTTP itself: it asks a ``faithgate.backends.chat.ChatModel``. Every
answer is cached in the score cache under (model, prompt version, texts), so a re-run sends no
request. Anything it cannot score fails closed: a failed request, a malformed or refused
answer, no claims, more claims than ``max_claims``; the score then carries the reason.
A source longer than the server's context is judged chunk by chunk (never cut): a claim is
supported when a chunk supports it, else contradicted when one contradicts it; a sentence's
P(Yes) is its highest over chunks.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from faithgate.backends.chat import ChatError, ChatModel, ChatReply, OpenAIChat, parse_json_answer
from faithgate.cache import ScoreCache
from faithgate.errors import ConfigError
from faithgate.metrics.base import Metric, ScoringContext, hash_digest, register
from faithgate.safety.escape import clipped
from faithgate.types import Example, Score, SentenceScore

log = logging.getLogger(__name__)

# -- prompts (bump the version with any change of wording, schema or parsing) --------------

CLAIMS_VERSION = "claims-1"
DIRECT_VERSION = "direct-1"

SYSTEM = "You check whether a summary is faithful to its source. Answer only as asked."

EXTRACT_PROMPT = (
    "Split the summary below into short, self-contained factual claims, one fact each, in "
    'the order they appear. Answer with JSON only: {{"claims": ["...", "..."]}}.\n\n'
    "Summary:\n{summary}"
)
EXTRACT_SCHEMA = {
    "type": "object",
    "properties": {"claims": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    "required": ["claims"],
}

JUDGE_PROMPT = (
    "Source:\n{source}\n\nClaim: {claim}\n\n"
    "Does the source support the claim? Answer with JSON only: "
    '{{"verdict": "supported" | "unsupported" | "contradicted", '
    '"evidence": "a short quote from the source, or empty"}}.'
)
VERDICTS = ("supported", "unsupported", "contradicted")
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": list(VERDICTS)},
        "evidence": {"type": "string"},
    },
    "required": ["verdict", "evidence"],
}

DIRECT_PROMPT = (
    "Source:\n{source}\n\nSentence: {sentence}\n\n"
    "Is the sentence supported by the source? Answer Yes or No."
)

# Tokens a prompt's fixed wording and the chat template take, and characters per token when
# the server's tokenizer is not at hand: 3 is below English's ~4, so chunks err short.
PROMPT_OVERHEAD_TOKENS = 160
CHARS_PER_TOKEN = 3
DEFAULT_CONTEXT_TOKENS = 2048  # llama.cpp's server default; used when neither says one
# Settings that change how requests travel, not what is asked: left out of the settings hash.
TRANSPORT_SETTINGS = (
    "base_url",
    "api_key_env",
    "timeout",
    "max_seconds",
    "retries",
    "backoff",
    "concurrency",
    "cache",
)


def _estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def chunk_source(source: str, budget_tokens: int, split: Callable[[str], list[str]]) -> list[str]:
    """``source`` in consecutive chunks of at most ``budget_tokens`` (estimated) each, cut
    between sentences (``split``), a sentence longer than that between characters. Every
    character is in a chunk: nothing is cut away."""
    limit = max(1, budget_tokens) * CHARS_PER_TOKEN
    if len(source) <= limit:
        return [source]
    pieces: list[str] = []
    for sentence in split(source):
        pieces += [sentence[i : i + limit] for i in range(0, len(sentence), limit)] or [""]
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        joined = f"{current} {piece}" if current else piece
        if len(joined) <= limit:
            current = joined
        else:
            chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return [c for c in chunks if c]


def parse_verdict(text: str) -> tuple[str, str]:
    """(verdict, evidence) from a judge's answer: its JSON, else the first verdict word in the
    text ("not supported" counts as unsupported). ``ValueError`` when neither is there."""
    try:
        data = parse_json_answer(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("verdict"), str):
        verdict = data["verdict"].strip().lower().replace("not supported", "unsupported")
        evidence = data.get("evidence")
        if verdict in VERDICTS:
            return verdict, evidence if isinstance(evidence, str) else ""
    found = re.search(r"(?i)\b(contradicted|unsupported|not supported|supported)\b", text)
    if found is None:
        raise ValueError(f"the judge's answer names no verdict: {clipped(text, 120)}")
    word = found.group(1).lower()
    return ("unsupported" if word == "not supported" else word), ""


def parse_claims(text: str) -> list[str]:
    """The claims of an extraction answer (``{"claims": [...]}`` or a bare list), tolerantly;
    ``ValueError`` when the answer holds no list of strings."""
    data = parse_json_answer(text)
    if isinstance(data, dict):
        data = data.get("claims")
    if not isinstance(data, list) or not all(isinstance(c, str) for c in data):
        raise ValueError(f"the judge's answer is not a list of claims: {clipped(text, 120)}")
    return [c.strip() for c in data if c.strip()]


def yes_probability(reply: ChatReply) -> tuple[float, str]:
    """(P(Yes), how it was read) from a direct-mode answer: P(Yes) / (P(Yes) + P(No)) over the
    first token's top log-probabilities (tokens compared stripped and lower-cased) when either
    is among them; else 1.0 / 0.0 for an answer starting "yes" / "no". ``ValueError`` else."""
    if reply.first_token_logprobs:
        yes = no = 0.0
        for token, logprob in reply.first_token_logprobs.items():
            word = token.strip().lower()
            if word == "yes":
                yes += math.exp(logprob)
            elif word == "no":
                no += math.exp(logprob)
        if yes + no > 0:
            return yes / (yes + no), "logprobs"
    found = re.match(r"\W*(yes|no)\b", reply.text, re.IGNORECASE)
    if found is None:
        raise ValueError(f"the judge answered neither Yes nor No: {clipped(reply.text, 120)}")
    return (1.0 if found.group(1).lower() == "yes" else 0.0), "verdict"


class _Tally:
    """Requests and tokens of one summary (details ``usage``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the metric's worker threads add to one summary's tally
        self.requests = 0
        self.cached = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def add(self, reply: ChatReply, cached: bool) -> None:
        with self._lock:
            self._add(reply, cached)

    def _add(self, reply: ChatReply, cached: bool) -> None:
        if cached:
            self.cached += 1
        else:
            self.requests += 1
            self.prompt_tokens += reply.prompt_tokens
            self.completion_tokens += reply.completion_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "cached_answers": self.cached,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


@register
class LLMJudge(Metric):
    """An LLM judge over an OpenAI-compatible chat-completions server (module docstring)."""

    name = "llm_judge"
    description = "an LLM (OpenAI-compatible server) judges each claim or sentence; share supported"
    family = "llm"
    version = "1"
    roles: ClassVar[dict[str, str]] = {}
    bounds = (0.0, 1.0)
    defaults: ClassVar[dict[str, Any]] = {
        "base_url": "",  # e.g. http://127.0.0.1:8080/v1
        "model": "",  # the server's model name
        "api_key_env": "",  # name of the environment variable holding the key ("" = none)
        "mode": "claims",  # claims | direct
        "timeout": 60.0,  # seconds per request
        "max_seconds": 300.0,  # seconds per request, retries included
        "retries": 5,  # tries per request
        "backoff": 0.5,  # seconds: the first retry waits up to this, each next one twice as long
        "concurrency": 2,  # requests in flight at once
        "seed": 0,
        "structured": "auto",  # auto | json_schema | json_object | off
        "context_tokens": 0,  # 0: ask the server (GET /models), else 2048
        "max_tokens": 256,  # per answer (a direct answer takes 1)
        "max_claims": 20,  # a summary with more claims fails (raise it), never judged in part
        "top_logprobs": 10,  # direct mode: first-token alternatives asked for
        # auto: the run's score cache, else .faithgate/scores.sqlite (none on a Ray worker);
        # off; or a path
        "cache": "auto",
    }
    scale = "share of supported claims (claims) or mean P(Yes) of the sentences (direct), 0..1"
    sentence_value = "P(Yes) that the source supports the sentence (direct mode; 0..1)"

    @classmethod
    def details_line(cls, details: Mapping[str, Any]) -> str:
        """One line of a score's details for a report: the claims' tally (claims mode) or how P(Yes)
        was read (direct mode), then the requests and tokens it cost."""
        usage = details.get("usage") or {}
        if details.get("mode") == "claims":
            verdicts = [c.get("verdict") for c in details.get("claims") or []]
            others = ", ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS[1:] if v in verdicts)
            head = f"{details.get('supported')}/{details.get('n_claims')} claims supported"
            head += f" ({others})" if others else ""
        else:
            head = f"P(Yes) read from {'/'.join(details.get('read_from') or ['-'])}"
        chunks = details.get("source_chunks")
        if isinstance(chunks, int) and chunks > 1:
            head += f"; source judged in {chunks} chunks"
        return (
            f"{head}; {usage.get('requests', 0)} requests, {usage.get('cached_answers', 0)} cached "
            f"answers, {usage.get('prompt_tokens', 0)} prompt + {usage.get('completion_tokens', 0)} "
            "completion tokens"
        )

    @classmethod
    def detail_lines(cls, details: Mapping[str, Any]) -> list[str]:
        """The judged claims (claims mode), one a line, so a failing gate says which claim
        failed and why."""
        return [claim_line(claim) for claim in details.get("claims") or []]

    def validate_settings(self) -> None:
        s = self.settings
        if s["mode"] not in ("claims", "direct"):
            raise ConfigError(f"llm_judge.mode must be claims or direct, got {s['mode']!r}")
        if s["structured"] not in ("auto", "json_schema", "json_object", "off"):
            raise ConfigError(
                "llm_judge.structured must be auto, json_schema, json_object or off, got "
                f"{s['structured']!r}"
            )
        for key in ("base_url", "model", "api_key_env", "cache"):
            if not isinstance(s[key], str):
                raise ConfigError(f"llm_judge.{key} must be text, got {type(s[key]).__name__}")
        for key in ("timeout", "max_seconds", "backoff"):
            if isinstance(s[key], bool) or not isinstance(s[key], int | float) or s[key] <= 0:
                raise ConfigError(f"llm_judge.{key} must be a number of seconds above 0")
        for key in ("retries", "concurrency", "max_tokens", "max_claims", "top_logprobs"):
            if isinstance(s[key], bool) or not isinstance(s[key], int) or s[key] < 1:
                raise ConfigError(f"llm_judge.{key} must be a whole number of at least 1")
        for key in ("seed", "context_tokens"):
            if isinstance(s[key], bool) or not isinstance(s[key], int) or s[key] < 0:
                raise ConfigError(f"llm_judge.{key} must be a whole number of at least 0")
        if s["base_url"] and not re.match(r"(?i)https?://", s["base_url"]):
            raise ConfigError(
                f"llm_judge.base_url must start with http:// or https://, got {s['base_url']!r}"
            )

    @property
    def prompt_version(self) -> str:
        return CLAIMS_VERSION if self.settings["mode"] == "claims" else DIRECT_VERSION

    def compute_settings_hash(self, ctx: ScoringContext) -> str:
        """The judge's model, the prompt version and every setting that changes an answer or
        the formula; not the URL, the key's variable, time limits, concurrency or the cache
        (they change how requests travel, not what is asked). Never the key."""
        from faithgate import __version__

        settings = {k: v for k, v in self.settings.items() if k not in TRANSPORT_SETTINGS}
        payload = {
            "faithgate": __version__,
            "metric": self.name,
            "version": self.version,
            "prompt": self.prompt_version,
            "settings": settings,
        }
        model = re.sub(r"[|\s]", "_", self.settings["model"].rsplit("/", 1)[-1]) or "-"
        return f"{self.name}|{model}|{self.prompt_version}|{hash_digest(payload)}"

    # -- what the metric asks through ----------------------------------------------------------

    def _client(self, ctx: ScoringContext) -> ChatModel:
        s = self.settings
        if not s["base_url"] or not s["model"]:
            raise ConfigError(
                "llm_judge needs a server and a model: set llm_judge.base_url (e.g. "
                "http://127.0.0.1:8080/v1) and llm_judge.model"
            )
        key = None
        if s["api_key_env"]:
            key = os.environ.get(s["api_key_env"])
            if not key:
                raise ConfigError(
                    f"llm_judge.api_key_env names {s['api_key_env']!r}, but that environment "
                    "variable is not set or empty"
                )
        shared_key = "llm_judge.client|" + hash_digest(
            [s["base_url"], s["model"], s["api_key_env"], s["timeout"], s["max_seconds"]]
            + [s["retries"], s["backoff"], s["seed"], s["structured"]]
        )
        return ctx.shared(
            shared_key,
            lambda: OpenAIChat(
                s["base_url"],
                s["model"],
                api_key=key,
                timeout=float(s["timeout"]),
                max_seconds=float(s["max_seconds"]),
                retries=int(s["retries"]),
                backoff=float(s["backoff"]),
                seed=int(s["seed"]),
                structured=s["structured"],
            ),
        )

    def _cache(self, ctx: ScoringContext) -> ScoreCache | None:
        where = self.settings["cache"]
        if where == "off":
            return None
        if where == "auto":
            run_cache = getattr(ctx, "cache", None)
            if run_cache is False:  # a Ray worker: the driver's score cache serves the run
                return None
            if run_cache is not None:
                return run_cache
            where = str(Path(".faithgate") / "scores.sqlite")
        return ctx.shared(f"llm_judge.cache|{where}", lambda: ScoreCache(where))

    def _context_tokens(self, client: ChatModel) -> int:
        return self.settings["context_tokens"] or client.context_tokens() or DEFAULT_CONTEXT_TOKENS

    # -- scoring ---------------------------------------------------------------------------

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        client = self._client(ctx)
        asker = _Asker(self, client, self._cache(ctx))
        if self.settings["mode"] == "claims":
            return self._score_claims(examples, ctx, client, asker)
        return self._score_direct(examples, ctx, client, asker)

    def _chunks(self, ctx: ScoringContext, client: ChatModel, source: str, text: str) -> list[str]:
        from faithgate import text as textmod

        budget = (
            self._context_tokens(client)
            - self.settings["max_tokens"]
            - PROMPT_OVERHEAD_TOKENS
            - _estimate_tokens(text)
        )
        if budget < 64:
            raise ChatError(
                f"the server's context ({self._context_tokens(client)} tokens) leaves no room for "
                "the source beside the prompt and answer: raise llm_judge.context_tokens or lower "
                "llm_judge.max_tokens"
            )
        return chunk_source(
            source, budget, lambda t: textmod.split_sentences(t, ctx.spacy_model) or [t]
        )

    def _score_claims(
        self,
        examples: Sequence[Example],
        ctx: ScoringContext,
        client: ChatModel,
        asker: _Asker,
    ) -> list[Score]:
        h = self.settings_hash(ctx)
        tallies = [_Tally() for _ in examples]
        errors: dict[int, str] = {}

        def extract(i: int) -> list[str]:
            messages = _messages(EXTRACT_PROMPT.format(summary=examples[i].summary))
            # One more item than max_claims allowed: a grammar-constrained server then stops
            # there, and the summary fails as too long to judge, never judged in part.
            schema = json.loads(json.dumps(EXTRACT_SCHEMA))
            schema["properties"]["claims"]["maxItems"] = self.settings["max_claims"] + 1
            reply = asker.ask("extract", "", examples[i].summary, messages, schema, 0)
            tallies[i].add(*reply)
            return parse_claims(reply[0].text)

        claims = asker.run([(i, lambda i=i: extract(i)) for i in range(len(examples))], errors)
        for i, found in list(claims.items()):
            if not found:
                errors[i] = "the judge found no claim in the summary"
            elif len(found) > self.settings["max_claims"]:
                errors[i] = (
                    f"the judge split the summary into {len(found)} claims, above "
                    f"llm_judge.max_claims={self.settings['max_claims']}: raise it to judge them all"
                )
        jobs: list[tuple[int, Callable[[], Any]]] = []
        chunks_of: dict[int, list[str]] = {}
        for i, found in claims.items():
            if i in errors:
                continue
            try:
                longest = max(found, key=len)
                chunks_of[i] = self._chunks(ctx, client, examples[i].source, longest)
            except ChatError as exc:
                errors[i] = str(exc)
                continue
            for claim in found:
                for chunk in chunks_of[i]:

                    def judge(i: int = i, claim: str = claim, chunk: str = chunk) -> Any:
                        prompt = JUDGE_PROMPT.format(source=chunk, claim=claim)
                        reply = asker.ask("judge", chunk, claim, _messages(prompt), JUDGE_SCHEMA, 0)
                        tallies[i].add(*reply)
                        return parse_verdict(reply[0].text)

                    jobs.append((i, judge))
        verdicts = asker.run(jobs, errors, keep_all=True)
        scores: list[Score] = []
        for i, ex in enumerate(examples):
            usage = tallies[i].to_dict()
            if i in errors:
                scores.append(self._failed(h, ex, errors[i], usage))
                continue
            found = claims[i]
            n_chunks = len(chunks_of[i])
            answers = verdicts[i]
            listed = []
            for c, claim in enumerate(found):
                per_chunk = answers[c * n_chunks : (c + 1) * n_chunks]
                verdict, evidence = _combine_verdicts(per_chunk)
                listed.append({"claim": claim, "verdict": verdict, "evidence": evidence})
            supported = sum(1 for c in listed if c["verdict"] == "supported")
            scores.append(
                Score(
                    self.name,
                    supported / len(listed),
                    h,
                    ex.id,
                    details={
                        "mode": "claims",
                        "prompt_version": CLAIMS_VERSION,
                        "claims": listed,
                        "supported": supported,
                        "n_claims": len(listed),
                        "source_chunks": n_chunks,
                        "usage": usage,
                    },
                )
            )
        return scores

    def _score_direct(
        self,
        examples: Sequence[Example],
        ctx: ScoringContext,
        client: ChatModel,
        asker: _Asker,
    ) -> list[Score]:
        from faithgate import text as textmod

        h = self.settings_hash(ctx)
        tallies = [_Tally() for _ in examples]
        errors: dict[int, str] = {}
        sentences = {
            i: textmod.split_sentences(ex.summary, ctx.spacy_model) or [ex.summary]
            for i, ex in enumerate(examples)
        }
        jobs: list[tuple[int, Callable[[], Any]]] = []
        chunks_of: dict[int, list[str]] = {}
        for i, ex in enumerate(examples):
            try:
                chunks_of[i] = self._chunks(ctx, client, ex.source, max(sentences[i], key=len))
            except ChatError as exc:
                errors[i] = str(exc)
                continue
            for sentence in sentences[i]:
                for chunk in chunks_of[i]:

                    def ask(i: int = i, sentence: str = sentence, chunk: str = chunk) -> Any:
                        prompt = DIRECT_PROMPT.format(source=chunk, sentence=sentence)
                        reply = asker.ask(
                            "direct",
                            chunk,
                            sentence,
                            _messages(prompt),
                            None,
                            self.settings["top_logprobs"],
                            max_tokens=1,
                        )
                        tallies[i].add(*reply)
                        return yes_probability(reply[0])

                    jobs.append((i, ask))
        answers = asker.run(jobs, errors, keep_all=True)
        scores: list[Score] = []
        for i, ex in enumerate(examples):
            usage = tallies[i].to_dict()
            if i in errors:
                scores.append(self._failed(h, ex, errors[i], usage))
                continue
            n_chunks = len(chunks_of[i])
            per_sentence = []
            read_from = set()
            for s, sentence in enumerate(sentences[i]):
                got = answers[i][s * n_chunks : (s + 1) * n_chunks]
                read_from.update(how for _, how in got)
                per_sentence.append(
                    SentenceScore(s, sentence, max(p for p, _ in got), evidence=None)
                )
            value = sum(p.value for p in per_sentence) / len(per_sentence)
            scores.append(
                Score(
                    self.name,
                    value,
                    h,
                    ex.id,
                    sentences=per_sentence,
                    details={
                        "mode": "direct",
                        "prompt_version": DIRECT_VERSION,
                        "read_from": sorted(read_from),
                        "source_chunks": n_chunks,
                        "usage": usage,
                    },
                )
            )
        return scores

    def _failed(self, h: str, ex: Example, why: str, usage: dict[str, int]) -> Score:
        score = Score.failed(self.name, h, ex.id, f"llm_judge could not score: {why}")
        score.details = {"usage": usage}
        return score


def claim_line(claim: Mapping[str, Any]) -> str:
    """One judged claim: verdict, claim and the quoted evidence."""
    evidence = claim.get("evidence")
    quote = f' (evidence: "{str(evidence)[:120]}")' if evidence else ""
    return f"[{claim.get('verdict')}] {claim.get('claim')}{quote}"


def _messages(prompt: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def _combine_verdicts(per_chunk: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """A claim's verdict over the source's chunks: supported when one chunk supports it, else
    contradicted when one contradicts it, else unsupported; with that chunk's evidence."""
    for wanted in ("supported", "contradicted"):
        for verdict, evidence in per_chunk:
            if verdict == wanted:
                return verdict, evidence
    return "unsupported", ""


class _Asker:
    """Asks the chat model through the score cache, and runs many questions at once."""

    def __init__(self, metric: LLMJudge, client: ChatModel, cache: ScoreCache | None) -> None:
        self.metric = metric
        self.client = client
        self.cache = cache
        self.model = metric.settings["model"]

    def ask(
        self,
        kind: str,
        source: str,
        text: str,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None,
        top_logprobs: int,
        max_tokens: int | None = None,
    ) -> tuple[ChatReply, bool]:
        """(reply, whether it came from the cache) for one question. Cached under the model,
        the prompt version, the question's kind and limits, and the texts asked about."""
        s = self.metric.settings
        max_tokens = max_tokens or s["max_tokens"]
        key = "llm_judge.answer|" + hash_digest(
            {
                "model": self.model,
                "prompt": self.metric.prompt_version,
                "kind": kind,
                "seed": s["seed"],
                "structured": s["structured"],
                "max_tokens": max_tokens,
                "top_logprobs": top_logprobs,
            }
        )
        if self.cache is not None:
            hit = self.cache.get(key, source, text)
            if hit is not None and isinstance(hit.details.get("reply"), dict):
                return ChatReply.from_dict(hit.details["reply"]), True
        reply = self.client.chat(
            messages, max_tokens=max_tokens, json_schema=schema, top_logprobs=top_logprobs
        )
        if self.cache is not None:
            stored = Score("llm_judge.answer", 0.0, key, details={"reply": reply.to_dict()})
            self.cache.put(key, source, text, stored)
        return reply, False

    def run(
        self,
        jobs: Sequence[tuple[int, Callable[[], Any]]],
        errors: dict[int, str],
        keep_all: bool = False,
    ) -> dict[int, Any]:
        """Run ``jobs`` ((example index, question)) ``concurrency`` at a time. Returns example
        index -> the answer (``keep_all``: the list of its answers in job order); an example
        whose question fails (a ``ChatError``, an answer that does not parse) gets its first
        reason in ``errors`` instead."""
        results: dict[int, Any] = {}
        todo = [(i, job) for i, job in jobs if i not in errors]
        workers = max(1, min(self.metric.settings["concurrency"], len(todo)))

        def one(item: tuple[int, Callable[[], Any]]) -> tuple[Any, str | None]:
            i, job = item
            if i in errors:  # another question of this summary failed: it fails anyway
                return None, errors[i]
            try:
                return job(), None
            except ChatError as exc:
                why = str(exc)
            except ValueError as exc:  # a malformed answer
                why = f"malformed answer: {exc}"
            errors.setdefault(i, why)
            return None, why

        if workers == 1:
            outcomes = [one(item) for item in todo]
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="llm_judge") as pool:
                outcomes = list(pool.map(one, todo))
        for (i, _), (answer, why) in zip(todo, outcomes, strict=True):
            if why is not None:
                errors.setdefault(i, why)
            elif keep_all:
                results.setdefault(i, []).append(answer)
            else:
                results[i] = answer
        for i in errors:
            results.pop(i, None)
        return results
