"""``llm_judge`` against a real llama.cpp server (SmolLM2-135M), through a fault-injecting proxy.

SmolLM2 is far too small to judge: these tests check the protocol (requests, parsing, the
cache, retries, fail-closed behaviour, determinism, the key kept secret), never accuracy.
One server for the session (``tests/llm_server.py``); tiny prompts and few tokens.
"""

from __future__ import annotations

import json
import secrets

import pytest
from click.testing import CliRunner
from fake_encoder import regex_split
from llm_server import MODEL_NAME, FaultProxy, LlamaServer, free_port, why_no_server

from faithgate import text as textmod
from faithgate.cli import cli
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

pytestmark = [pytest.mark.xdist_group("llm_judge")]

KEY = "sk-fg-" + secrets.token_hex(12)
KEY_ENV = "FAITHGATE_TEST_JUDGE_KEY"
SOURCE = "The bridge opened in 2019. It cost 40 million euros."
SUMMARY = "The bridge opened in 2019."


@pytest.fixture(autouse=True)
def _no_spacy(monkeypatch):
    """Sentences split on punctuation: loading spaCy is not what these tests check."""
    monkeypatch.setattr(textmod, "split_sentences", regex_split)


@pytest.fixture(scope="session")
def llama_server():
    why = why_no_server()
    if why:
        pytest.skip(why)
    server = LlamaServer(KEY)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def proxy(llama_server):
    proxy = FaultProxy(llama_server.base_url)
    yield proxy
    proxy.stop()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


def settings(proxy, tmp_path, **more):
    base = {
        "base_url": proxy.base_url,
        "model": MODEL_NAME,
        "api_key_env": KEY_ENV,
        "cache": str(tmp_path / "scores.sqlite"),
        "context_tokens": 1024,  # no GET /models: each test counts its own requests
        "max_tokens": 96,
        "max_claims": 6,
        "backoff": 0.01,
        "concurrency": 1,
    }
    return {**base, **more}


def judge(examples, **s):
    return Scorer(["llm_judge"], metric_settings={"llm_judge": s}).score(examples)


def cli_args(s):
    args = ["score", "--metric", "llm_judge"]
    for k, v in s.items():
        args += ["--set", f"llm_judge.{k}={v}"]
    return args


def files_hold(folder, secret: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_score_lists_claims_then_a_rerun_sends_no_request(proxy, tmp_path, key, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "source.txt").write_text(SOURCE, encoding="utf-8")
    s = settings(proxy, tmp_path)
    args = [*cli_args(s), "--source", "source.txt", "--summary", SUMMARY]
    proxy.reset()
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert "claims supported" in first.stdout
    assert any(f"[{v}]" in first.stdout for v in ("supported", "unsupported", "contradicted"))
    # the key went to the server (it refuses requests without it), and nowhere else
    assert proxy.seen and all(h.get("Authorization") == f"Bearer {key}" for h in proxy.headers)
    proxy.reset()
    again = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert again.exit_code == 0, again.output
    assert proxy.seen == []  # every answer came from the score cache
    data = json.loads(again.stdout)["metrics"]["llm_judge"]
    assert data["details"]["usage"]["requests"] == 0
    assert data["details"]["usage"]["cached_answers"] >= 2
    assert f"{data['value']:.4f}" in first.stdout
    for text in (first.output, again.output, data["settings_hash"]):
        assert key not in text
    assert files_hold(tmp_path, key) == []


def test_direct_mode_is_deterministic_and_reads_yes_from_logprobs(proxy, tmp_path, key):
    s = settings(proxy, tmp_path, mode="direct", cache="off")
    example = [Example("1", SOURCE, "The bridge opened in 2019. It cost 40 million euros.")]
    first = judge(example, **s)[0]["llm_judge"]
    second = judge(example, **s)[0]["llm_judge"]
    assert first.ok, first.error
    assert first.details["read_from"] == ["logprobs"]
    assert len(first.sentences) == 2 and 0.0 <= first.value <= 1.0
    assert first.value == second.value
    assert [x.value for x in first.sentences] == [x.value for x in second.sentences]


def test_429_5xx_dropped_and_garbage_answers_are_retried(proxy, tmp_path, key):
    s = settings(proxy, tmp_path, mode="direct", cache="off")
    proxy.reset("429", "500", "drop", "garbage")
    score = judge([Example("1", SOURCE, SUMMARY)], **s)[0]["llm_judge"]
    assert score.ok, score.error
    assert len(proxy.seen) == 5  # four faults, then the answer


def test_a_judge_past_its_timeout_fails_closed_with_the_reason(proxy, tmp_path, key):
    s = settings(proxy, tmp_path, mode="direct", timeout=0.3, retries=2)
    proxy.reset("delay", "delay")
    score = judge([Example("1", SOURCE, SUMMARY)], **s)[0]["llm_judge"]
    assert not score.ok
    assert "timed out" in score.error and "2 tries" in score.error


def test_a_refused_or_malformed_answer_fails_closed(proxy, tmp_path, key):
    proxy.reset("refuse")
    score = judge([Example("1", SOURCE, SUMMARY)], **settings(proxy, tmp_path))[0]["llm_judge"]
    assert not score.ok and "malformed answer" in score.error
    assert len(proxy.seen) == 1  # an answer is not retried; nothing invented either


def test_a_wrong_key_fails_closed_and_is_never_printed(proxy, tmp_path, monkeypatch):
    wrong = "sk-wrong-" + secrets.token_hex(8)
    monkeypatch.setenv(KEY_ENV, wrong)
    proxy.reset()
    score = judge([Example("1", SOURCE, SUMMARY)], **settings(proxy, tmp_path))[0]["llm_judge"]
    assert not score.ok and "HTTP 401" in score.error and wrong not in score.error
    assert len(proxy.seen) == 1


def test_a_long_source_is_judged_in_chunks_not_cut(proxy, tmp_path, key):
    source = " ".join(f"Bridge fact number {i} is stated here." for i in range(12))
    s = settings(proxy, tmp_path, mode="direct", context_tokens=300, max_tokens=8, cache="off")
    proxy.reset()
    score = judge([Example("1", source, SUMMARY)], **s)[0]["llm_judge"]
    assert score.ok, score.error
    chunks = score.details["source_chunks"]
    assert chunks >= 2 and len(proxy.seen) == chunks
    asked = [json.loads(b)["messages"][-1]["content"] for b in proxy.bodies]
    assert all(f"fact number {i} " in "".join(asked) for i in range(12))


def test_server_down_exits_1_in_one_line_and_fails_the_verdict(tmp_path, monkeypatch):
    """No server needed: nothing listens on the port, as when the server was stopped."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, KEY)
    (tmp_path / "source.txt").write_text(SOURCE, encoding="utf-8")
    s = {
        "base_url": f"http://127.0.0.1:{free_port()}/v1",
        "model": MODEL_NAME,
        "api_key_env": KEY_ENV,
        "retries": 2,
        "backoff": 0.01,
    }
    args = [*cli_args(s), "--source", "source.txt", "--summary", SUMMARY, "--threshold", "0.5"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1
    assert "could not score with llm_judge" in err and "connection failed" in err
    assert "2 tries" in err
    assert "verdict: FAIL: llm_judge could not be scored" in result.stdout
    assert KEY not in result.output and files_hold(tmp_path, KEY) == []


def _gate_project(tmp_path, base_url: str, **more) -> None:
    rows = [{"id": "a", "source": SOURCE, "summary": SUMMARY}]
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in more.items())
    (tmp_path / "faithgate.toml").write_text(
        'metrics = ["llm_judge"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
        "[thresholds]\nllm_judge = 0.5\n"
        f'[metric_settings.llm_judge]\nbase_url = "{base_url}"\nmodel = "{MODEL_NAME}"\n'
        f'api_key_env = "{KEY_ENV}"\nbackoff = 0.01\ncontext_tokens = 1024\n{extra}'
    )


def test_check_fails_closed_when_the_judge_is_down(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, KEY)
    _gate_project(tmp_path, f"http://127.0.0.1:{free_port()}/v1", retries=2)
    result = CliRunner().invoke(cli, ["check", "--json", "out.json"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("faithgate: FAIL")
    assert "connection failed" in result.output
    assert KEY not in result.output and files_hold(tmp_path, KEY) == []


def test_check_scores_through_the_judge_and_a_rerun_sends_nothing(proxy, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, KEY)
    _gate_project(tmp_path, proxy.base_url, mode="direct")
    proxy.reset()
    first = CliRunner().invoke(cli, ["check", "--json", "out.json"])
    assert first.exit_code in (0, 1), first.output
    assert "could not" not in first.output and proxy.seen
    proxy.reset()
    again = CliRunner().invoke(cli, ["check", "--json", "out.json"])
    assert again.exit_code == first.exit_code and proxy.seen == []
    assert files_hold(tmp_path, KEY) == []
