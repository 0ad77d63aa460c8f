"""``llm_judge`` without a server: answer parsing, chunking, settings hash, structured-output
fallback and fail-closed paths, over httpx's MockTransport."""

from __future__ import annotations

import json

import httpx
import pytest

from faithgate.backends import chat
from faithgate.backends.chat import ChatError, ChatReply, OpenAIChat
from faithgate.errors import ConfigError
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.metrics.llm_judge import (
    chunk_source,
    parse_claims,
    parse_verdict,
    yes_probability,
)
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example


def test_verdicts_parse_from_json_fenced_json_or_a_bare_word():
    assert parse_verdict('{"verdict": "supported", "evidence": "x"}') == ("supported", "x")
    assert parse_verdict('Sure:\n```json\n{"verdict": "Contradicted"}\n```') == (
        "contradicted",
        "",
    )
    assert parse_verdict("The claim is not supported.") == ("unsupported", "")
    with pytest.raises(ValueError, match="no verdict"):
        parse_verdict("I cannot help with that.")


def test_claims_parse_from_an_object_or_a_list_and_refuse_anything_else():
    assert parse_claims('{"claims": ["A.", " ", "B."]}') == ["A.", "B."]
    assert parse_claims('["A."]') == ["A."]
    with pytest.raises(ValueError):
        parse_claims('{"claims": "A."}')
    with pytest.raises(ValueError):
        parse_claims("no json here")


def test_yes_probability_normalises_yes_against_no_else_reads_the_word():
    reply = ChatReply("Yes", first_token_logprobs={"Yes": -0.5, " no": -1.5, "The": -3.0})
    p, how = yes_probability(reply)
    assert how == "logprobs" and p == pytest.approx(1 / (1 + 2.718281828**-1))
    assert yes_probability(ChatReply("No.", first_token_logprobs={"The": -0.1})) == (
        0.0,
        "verdict",
    )
    with pytest.raises(ValueError, match="neither Yes nor No"):
        yes_probability(ChatReply("Maybe"))


def test_chunks_cover_the_whole_source_and_keep_to_the_budget():
    source = " ".join(f"Sentence number {i} is here." for i in range(60))
    chunks = chunk_source(source, 40, lambda t: t.split(". "))
    assert len(chunks) > 1 and all(len(c) <= 120 for c in chunks)
    words = [w.rstrip(".") for w in source.split()]
    assert [w.rstrip(".") for c in chunks for w in c.split()] == words
    assert chunk_source("short", 40, lambda t: [t]) == ["short"]
    assert "".join(chunk_source("x" * 500, 40, lambda t: [t])) == "x" * 500


def test_settings_hash_names_model_and_prompt_not_url_or_key_variable():
    a = get_metric("llm_judge", base_url="http://a/v1", model="m", api_key_env="KEY_A")
    b = get_metric("llm_judge", base_url="http://b/v1", model="m", api_key_env="KEY_B")
    c = get_metric("llm_judge", base_url="http://a/v1", model="m", mode="direct")
    ctx = ScoringContext()
    assert a.settings_hash(ctx) == b.settings_hash(ctx)
    assert a.settings_hash(ctx).startswith("llm_judge|m|claims-1|")
    assert c.settings_hash(ctx).startswith("llm_judge|m|direct-1|")


def test_bad_settings_and_a_missing_key_variable_are_config_errors(monkeypatch):
    with pytest.raises(ConfigError, match="mode"):
        get_metric("llm_judge", mode="vibes")
    with pytest.raises(ConfigError, match="http"):
        get_metric("llm_judge", base_url="127.0.0.1:8080")
    monkeypatch.delenv("FAITHGATE_NO_SUCH_KEY", raising=False)
    scorer = Scorer(
        ["llm_judge"],
        metric_settings={
            "llm_judge": {
                "base_url": "http://127.0.0.1:9/v1",
                "model": "m",
                "api_key_env": "FAITHGATE_NO_SUCH_KEY",
                "cache": "off",
            }
        },
    )
    with pytest.raises(ConfigError, match="FAITHGATE_NO_SUCH_KEY"):
        scorer.score([Example("1", "A source.", "A summary.")])


def _mock(monkeypatch, handler):
    original = OpenAIChat.__init__

    def init(self, *args, **kwargs):
        kwargs["transport"] = httpx.MockTransport(handler)
        original(self, *args, **kwargs)

    monkeypatch.setattr(chat.OpenAIChat, "__init__", init)


def _completion(text):
    return {
        "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2},
    }


def test_structured_output_falls_back_from_json_schema_to_json_object_to_none(monkeypatch):
    kinds = []

    def handler(request):
        body = json.loads(request.content)
        kind = (body.get("response_format") or {}).get("type", "off")
        kinds.append(kind)
        if kind != "off":
            return httpx.Response(400, json={"error": f"response_format {kind} unsupported"})
        prompt = body["messages"][-1]["content"]
        if "Split" in prompt:
            return httpx.Response(200, json=_completion('{"claims": ["A cat sat."]}'))
        return httpx.Response(200, json=_completion('{"verdict": "supported", "evidence": "x"}'))

    _mock(monkeypatch, handler)
    settings = {"base_url": "http://judge/v1", "model": "m", "cache": "off", "context_tokens": 900}
    score = Scorer(["llm_judge"], metric_settings={"llm_judge": settings}).score(
        [Example("1", "A cat sat.", "A cat sat.")]
    )[0]["llm_judge"]
    assert score.ok and score.value == 1.0
    # asked once in each shape, then kept to the one the server took
    assert kinds == ["json_schema", "json_object", "off", "off"]
    assert score.details["usage"] == {
        "requests": 2,
        "cached_answers": 0,
        "prompt_tokens": 14,
        "completion_tokens": 4,
    }


def test_too_many_claims_fail_closed_never_judged_in_part(monkeypatch):
    claims = json.dumps({"claims": [f"Claim {i}." for i in range(4)]})
    _mock(monkeypatch, lambda request: httpx.Response(200, json=_completion(claims)))
    settings = {"base_url": "http://judge/v1", "model": "m", "cache": "off", "max_claims": 3}
    score = Scorer(["llm_judge"], metric_settings={"llm_judge": settings}).score(
        [Example("1", "A cat sat.", "A cat sat.")]
    )[0]["llm_judge"]
    assert not score.ok and "4 claims, above llm_judge.max_claims=3" in score.error


def test_a_client_error_is_not_retried_and_names_the_status(monkeypatch):
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(401, json={"error": "bad key"})

    client = OpenAIChat("http://judge/v1", "m", transport=httpx.MockTransport(handler))
    with pytest.raises(ChatError, match="HTTP 401"):
        client.chat([{"role": "user", "content": "hi"}], max_tokens=1)
    assert len(calls) == 1


def test_retries_stop_at_the_total_time_bound(monkeypatch):
    calls = []

    def handler(request):
        calls.append(request)
        return httpx.Response(503)

    client = OpenAIChat(
        "http://judge/v1",
        "m",
        retries=100,
        max_seconds=0.3,
        backoff=0.05,
        transport=httpx.MockTransport(handler),
    )
    with pytest.raises(ChatError, match=r"HTTP 503 \(\d+ tries in 0\.\d s\)"):
        client.chat([{"role": "user", "content": "hi"}], max_tokens=1)
    assert 2 <= len(calls) < 100


def test_the_client_cannot_be_pickled_with_its_key():
    import pickle

    client = OpenAIChat("http://judge/v1", "m", api_key="sk-secret")
    assert "sk-secret" not in repr(client)
    with pytest.raises(TypeError):
        pickle.dumps(client)


def test_a_key_echoed_back_in_an_error_is_scrubbed():
    def handler(request):
        return httpx.Response(400, text=f"bad header {request.headers['authorization']}")

    client = OpenAIChat(
        "http://judge/v1", "m", api_key="sk-echoed", transport=httpx.MockTransport(handler)
    )
    with pytest.raises(ChatError) as caught:
        client.chat([{"role": "user", "content": "hi"}], max_tokens=1)
    assert "sk-echoed" not in str(caught.value) and "***" in str(caught.value)
