"""A chat model behind an OpenAI-compatible HTTP server: the ``ChatModel`` task interface and
its one implementation, ``OpenAIChat`` (httpx).

The same requests serve OpenAI, vLLM, Ollama, LM Studio and llama.cpp's server: ``POST
{base_url}/chat/completions`` with ``messages``, ``temperature`` 0 and a ``seed``, and ``GET
{base_url}/models`` for the served context length where the server says it.

Faults are retried with exponential backoff and full jitter (AWS's "Exponential Backoff And
Jitter", 2015): a connection error, a timeout, HTTP 429 or 5xx, or a reply body that is not
JSON. The retries stop at ``retries`` tries or ``max_seconds`` in all, whichever comes first;
then ``ChatError`` says why in one line (HTTP status, timeout, refused connection). Any other
4xx is not retried. The API key is sent as a bearer token and kept nowhere else: not in a
message, a ``repr``, a log line or an identity.

Structured output: OpenAI's ``response_format`` ``json_schema`` first; a server that refuses
it (HTTP 400/422, or a 500 naming it, as llama-cpp-python answers) is asked again with llama.cpp's ``json_object`` + ``schema``, then with no
``response_format``. The caller parses the answer tolerantly either way (``parse_json_answer``).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from faithgate.safety.escape import clipped

# The shapes of ``response_format`` tried in order under ``structured = "auto"``.
STRUCTURED_KINDS = ("json_schema", "json_object", "off")


class ChatError(Exception):
    """A request the server could not answer (after retries): one line saying why. Not a
    ``FaithgateError``: it fails the summary being scored, not the whole run."""


@dataclass
class ChatReply:
    """One answer of a chat model: its text, the top log-probabilities of its first token
    (``{token: logprob}``; None when the server returned none), token counts and how it was
    asked (``structured``: the ``response_format`` kind the server took, or "off")."""

    text: str
    first_token_logprobs: dict[str, float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    structured: str = "off"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatReply:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


class ChatModel(ABC):
    """A chat model the judge metrics ask: ``chat`` answers one conversation."""

    model: str = ""

    @abstractmethod
    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        max_tokens: int,
        json_schema: Mapping[str, Any] | None = None,
        top_logprobs: int = 0,
    ) -> ChatReply:
        """The model's answer to ``messages`` (temperature 0, fixed seed); ``ChatError`` when
        the server cannot give one. ``json_schema``: ask for JSON of that schema where the
        server supports it. ``top_logprobs``: ask for the first tokens' top log-probabilities."""

    @abstractmethod
    def context_tokens(self) -> int | None:
        """The served context length in tokens, when the server says it; else None."""


def _retry_after(response: Any) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: the backoff decides


class OpenAIChat(ChatModel):
    """``ChatModel`` over an OpenAI-compatible server with httpx (thread-safe: one client,
    shared by the metric's worker threads)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_seconds: float = 300.0,
        retries: int = 5,
        seed: int = 0,
        structured: str = "auto",
        backoff: float = 0.5,
        transport: Any = None,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.max_seconds = max_seconds
        self.retries = retries
        self.seed = seed
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # The key lives only in the client's headers: never in an attribute of ours, so no
        # repr, pickle of this object or error message holds it.
        self._client = httpx.Client(
            headers=headers, timeout=timeout, transport=transport, trust_env=False
        )
        self._lock = threading.Lock()
        self._kinds = list(STRUCTURED_KINDS) if structured == "auto" else [structured]
        self._context: int | None | bool = False  # False: not asked yet
        self.requests = 0  # HTTP requests sent, retries included

    def __repr__(self) -> str:
        return f"OpenAIChat({self.base_url!r}, {self.model!r})"

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("an OpenAIChat holds an open connection (and a key): make one per process")

    def close(self) -> None:
        self._client.close()

    # -- requests -------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        """``text`` without the key, should a server or proxy echo it back in an error."""
        auth = self._client.headers.get("authorization", "")
        key = auth.removeprefix("Bearer ")
        return text.replace(key, "***") if auth and key else text

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        """The JSON body of a 2xx answer to ``method path``, retrying faults (see the module
        docstring); ``ChatError`` once retries or time run out, or at once for another 4xx."""
        try:
            return self._request_once(method, path, payload)
        except ChatError as exc:
            raise ChatError(self._scrub(str(exc))) from None

    def _request_once(self, method: str, path: str, payload: Any = None) -> Any:
        import httpx

        url = f"{self.base_url}{path}"
        start = time.monotonic()
        deadline = start + self.max_seconds
        why = "no try made"
        tries = 0
        while True:
            tries += 1
            wait_at_least = 0.0
            remaining = deadline - time.monotonic()
            try:
                with self._lock:
                    self.requests += 1
                response = self._client.request(
                    method,
                    url,
                    json=payload,
                    timeout=max(0.001, min(self.timeout, remaining)),
                )
            except httpx.TimeoutException:
                why = f"timed out after {min(self.timeout, remaining):.0f} s"
            except httpx.TransportError as exc:
                why = f"connection failed ({type(exc).__name__}: {clipped(exc, 100)})"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    try:
                        return response.json()
                    except ValueError:
                        why = f"HTTP {status} with a body that is not JSON"
                elif status >= 500 and _names_response_format(response.text):
                    # llama-cpp-python answers an unknown response_format with HTTP 500 (its
                    # validation error): not a fault to retry, a format to drop (``chat``).
                    raise ChatError(
                        f"{self.base_url} answered HTTP {status} to {path}: "
                        f"{clipped(response.text, 160)}"
                    )
                elif status == 429 or status >= 500:
                    why = f"HTTP {status}"
                    wait_at_least = _retry_after(response) or 0.0
                else:
                    raise ChatError(
                        f"{self.base_url} answered HTTP {status} to {path}: "
                        f"{clipped(response.text, 160)}"
                    )
            elapsed = time.monotonic() - start
            # Full jitter: a random wait up to the exponential cap, so many clients that
            # failed together do not retry together.
            pause = max(wait_at_least, random.uniform(0, self.backoff * 2 ** (tries - 1)))
            if tries >= self.retries or elapsed + pause >= self.max_seconds:
                raise ChatError(
                    f"{self.base_url}{path}: {why} ({tries} tr{'y' if tries == 1 else 'ies'} "
                    f"in {elapsed:.1f} s)"
                )
            time.sleep(pause)

    def context_tokens(self) -> int | None:
        """From ``GET /models``: vLLM's ``max_model_len``, or a ``context_length`` /
        ``n_ctx`` field (LM Studio, llama.cpp's own server); None when the server names none
        (OpenAI, llama-cpp-python) or cannot be asked."""
        if self._context is False:
            found: int | None = None
            try:
                body = self._request("GET", "/models")
            except ChatError:
                body = None
            entries = body.get("data") if isinstance(body, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                if not isinstance(entry, dict) or entry.get("id") not in (self.model, None):
                    continue
                meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
                for key in ("max_model_len", "context_length", "n_ctx", "max_context_length"):
                    value = entry.get(key, meta.get(key))
                    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                        found = value
                        break
            self._context = found
        return self._context  # type: ignore[return-value]

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        max_tokens: int,
        json_schema: Mapping[str, Any] | None = None,
        top_logprobs: int = 0,
    ) -> ChatReply:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": 0,
            "seed": self.seed,
            "max_tokens": max_tokens,
        }
        if top_logprobs:
            payload["logprobs"] = True
            payload["top_logprobs"] = top_logprobs
        kind = "off"
        while True:
            kind = self._kinds[0] if json_schema is not None else "off"
            if kind == "json_schema":
                payload["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": dict(json_schema or {})},
                }
            elif kind == "json_object":
                payload["response_format"] = {"type": "json_object", "schema": dict(json_schema)}
            else:
                payload.pop("response_format", None)
            try:
                body = self._request("POST", "/chat/completions", payload)
                break
            except ChatError as exc:
                # A server that does not know this response_format says so with 400/422: ask
                # again with the next kind, and keep to it for this client's later requests.
                message = str(exc)
                refused = re.search(r"answered HTTP (400|422|500)", message) and (
                    _names_response_format(message.split(": ", 1)[-1])
                )
                if kind == "off" or not refused or len(self._kinds) == 1:
                    raise
                with self._lock:
                    if self._kinds and self._kinds[0] == kind:
                        self._kinds.pop(0)
        return _reply(body, kind)


def _names_response_format(text: str) -> bool:
    """Whether a server's error text is about the ``response_format`` asked for."""
    return re.search(r"(?i)response_format|json_schema|json_object", text) is not None


def _reply(body: Any, kind: str) -> ChatReply:
    """A ``ChatReply`` from a chat-completions body; ``ChatError`` for one without a message."""
    try:
        choice = body["choices"][0]
        text = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ChatError(
            f"the server's answer has no choices[0].message.content: {clipped(body, 160)}"
        ) from None
    if text is None:  # a refusal (OpenAI: message.refusal) or a tool call
        refusal = choice.get("message", {}).get("refusal")
        said = f" (refused: {clipped(refusal, 120)})" if refusal else ""
        raise ChatError(f"the model gave no answer{said}")
    if not isinstance(text, str):
        raise ChatError(f"the answer's content is a {type(text).__name__}, not text")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return ChatReply(
        text=text,
        first_token_logprobs=_first_token_logprobs(choice.get("logprobs")),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        finish_reason=choice.get("finish_reason"),
        structured=kind,
    )


def _first_token_logprobs(logprobs: Any) -> dict[str, float] | None:
    """``{token: logprob}`` of the first generated token's top alternatives (and the token
    itself), from OpenAI's ``logprobs.content[0]``; None when absent."""
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return None
    first = content[0]
    out: dict[str, float] = {}
    for entry in [first, *(first.get("top_logprobs") or [])]:
        if isinstance(entry, dict) and isinstance(entry.get("token"), str):
            value = entry.get("logprob")
            if isinstance(value, int | float) and not isinstance(value, bool):
                out.setdefault(entry["token"], float(value))
    return out or None


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_answer(text: str) -> Any:
    """The JSON value in a model's answer, tolerantly: the whole text, else a fenced
    ```json block, else the first ``{...}`` that parses. ``ValueError`` when none does."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(text[start:])
            return value
        except ValueError:
            continue
    raise ValueError(f"no JSON in the answer: {clipped(text, 120)}")
