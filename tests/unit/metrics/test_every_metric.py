"""One common test over every metric faithgate ships (as Hugging Face ``evaluate`` runs one
test over every metric module): each scores tiny examples on fake models and must keep the
metric contract of ``faithgate.metrics.base.Metric``.

- one score per example, in order, the same alone, in a batch, reversed and in a smaller batch;
- every score inside the range the metric declares (``value_range`` under its settings);
- per-sentence values only from a metric that says what they are (``sentence_value``);
- a scale in words (``scale``), and details that read as lines (``details_line``,
  ``detail_lines``), the way ``faithgate score`` prints them;
- a settings hash equal across two constructions and changed by a setting;
- a card, docs/metrics/<name>.md, with exactly the template's level-2 headings in order.

The models are the fakes of the metric tests (``fake_encoder``, ``test_metrics_nli``,
``test_metrics_qa``, ``test_llm_judge_protocol``) with answers drawn from the texts, so
faithful and unfaithful summaries score apart; spaCy is the real small pipeline. A metric
added to the registry is tested here at once; it needs an entry in ``CHANGED`` only when
``changed_setting`` cannot guess a setting that changes its hash, and a fake only for a model
role no metric used before.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fake_encoder import FakeEncoder
from test_llm_judge_protocol import _completion, _mock
from test_metrics_nli import FakeNLI
from test_metrics_qa import FakeLM

from faithgate.backends import ModelPool
from faithgate.backends.base import LanguageModel
from faithgate.metrics.base import ScoringContext, get_metric, metric_class, metric_names
from faithgate.metrics.combined import COMBINATION_FORMAT, SHIPPED_ENSEMBLE
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

CARDS = Path(__file__).resolve().parents[3] / "docs" / "metrics"
TEMPLATE = [
    "What it measures",
    "Formula and paper",
    "When to use it",
    "Settings",
    "Measured figures",
    "Limitations",
]

SOURCE_A = (
    "The city council of Springfield approved a new budget on Monday after a long debate. "
    "The budget raises spending on schools by 4 percent. Mayor Ann Lee said the vote was "
    "a victory for parents."
)
SOURCE_B = "Heavy rain flooded the main road near the river. Police closed it for two hours."
# Different sizes, faithful and not, one to three sentences, names, numbers and a repeat.
EXAMPLES = [
    Example("a1", SOURCE_A, "Springfield approved a new budget on Monday."),
    Example("b1", SOURCE_B, "Police closed the flooded road for two days. Rain fell in Paris."),
    Example(
        "a2",
        SOURCE_A,
        "Mayor Ann Lee praised the vote. School spending rises by 4 percent. It passed Monday.",
    ),
    Example("b2", SOURCE_B, "Rain flooded a road near the river. Rain flooded a road near it."),
]

# A setting whose change must change the metric's settings hash, where ``changed_setting``
# cannot guess one (its first whole-number or true/false setting, changed); ``weights`` files:
# a copy with one number changed, written by ``_settings``.
CHANGED: dict[str, dict[str, Any]] = {
    "combined": {"weights": "changed"},
    "ensemble": {"weights": "changed"},
    "entail_s2s": {"aggregate": "min"},
    "facts": {"no_fact_value": 0.0},
    "frames": {"component": "recall"},
    "hhem": {},  # no setting
    "llm_judge": {"mode": "direct"},  # its first numbers are how requests travel: not hashed
    "minicheck": {"aggregate": "mean"},
    "ner": {"match": "token_f1"},
    "sentsim": {"component": "f1"},
    "triples": {"sim": "token_f1"},
}


def changed_setting(name: str) -> dict[str, Any]:
    """``CHANGED[name]``, else the metric's first whole-number setting plus one, or its first
    true/false setting flipped; a new metric with neither needs an entry in ``CHANGED``."""
    if name in CHANGED:
        return dict(CHANGED[name])
    for key, value in metric_class(name).defaults.items():
        if isinstance(value, bool):
            return {key: not value}
        if isinstance(value, int):
            return {key: value + 1}
    raise AssertionError(f"add to CHANGED a setting of {name!r} that changes its hash")


WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def _support(premise: str, hypothesis: str) -> float:
    """Share of the hypothesis's words found in the premise: the fakes' notion of support."""
    words = _words(hypothesis)
    return len(words & _words(premise)) / len(words) if words else 0.0


class OverlapChecker(FakeNLI):
    """``test_metrics_nli``'s fake classifier, with the probability of its supporting class
    (entailment, or HHEM's "consistent") the share of the hypothesis's words in the premise;
    it also reads single texts ``chunk</s>claim``, as MiniCheck feeds them."""

    eos_text = "</s>"

    def __init__(self, labels: tuple[str, ...], supported: str) -> None:
        super().__init__(labels=labels)
        self.supported = labels.index(supported)

    def predict_proba(self, premises, hypotheses) -> np.ndarray:
        out = np.zeros((len(premises), len(self._labels)))
        for row, (p, h) in enumerate(zip(premises, hypotheses, strict=True)):
            share = _support(p, h)
            out[row] = (1 - share) / (len(self._labels) - 1)
            out[row, self.supported] = share
        return out

    def predict_proba_texts(self, texts) -> np.ndarray:
        pairs = [t.split(self.eos_text, 1) for t in texts]
        return self.predict_proba([p for p, _ in pairs], [h for _, h in pairs])


class CopyingLM(FakeLM):
    """``test_metrics_qa``'s fake LM (whitespace-led pieces as tokens) scoring any sequence:
    a token seen earlier in it gets log p -0.5, a new one -3, so a summary copied from its
    source is likelier than one that is not (``LanguageModel.segment_logprobs``)."""

    segment_logprobs = LanguageModel.segment_logprobs

    def __init__(self) -> None:
        super().__init__({})

    def _next_token_logprobs(self, rows: list[list[int]]) -> list[np.ndarray]:
        return [
            np.array([-0.5 if row[t + 1] in row[: t + 1] else -3.0 for t in range(len(row) - 1)])
            for row in rows
        ]


def _vector(word: str) -> list[float]:
    """A fixed 8-d vector per word (the same on every machine)."""
    return np.random.default_rng(zlib.crc32(word.encode())).normal(size=8).tolist()


def fake_pool() -> ModelPool:
    """Fakes for every model role a shipped metric scores with (spaCy: the real pipeline)."""
    texts = [t for ex in EXAMPLES for t in (ex.source, ex.summary)]
    words = set().union(*(_words(t) for t in texts))
    pool = ModelPool()
    pool.add(FakeEncoder({w: _vector(w) for w in words}))
    three_way = ("entailment", "neutral", "contradiction")
    pool.add(OverlapChecker(three_way, "entailment"), "nli", "pair-classifier")
    pool.add(OverlapChecker(three_way, "entailment"), "alignscore", "pair-classifier")
    pool.add(OverlapChecker(("hallucinated", "consistent"), "consistent"), "hhem")
    pool.add(CopyingLM(), "lm", "causal-lm")
    return pool


def judge_server(request: httpx.Request) -> httpx.Response:
    """An OpenAI-compatible judge: the summary's claims are its sentences; a claim is supported
    when the source holds all its words."""
    prompt = json.loads(request.content)["messages"][-1]["content"]
    if prompt.startswith("Split"):
        summary = prompt.split("Summary:\n", 1)[1]
        claims = [s for s in re.split(r"(?<=[.!?])\s+", summary.strip()) if s]
        return httpx.Response(200, json=_completion(json.dumps({"claims": claims})))
    source, claim = re.match(r"Source:\n(.*)\n\nClaim: (.*?)\n\n", prompt, re.S).groups()
    verdict = "supported" if _support(source, claim) == 1.0 else "unsupported"
    return httpx.Response(200, json=_completion(json.dumps({"verdict": verdict})))


def _weights(path: Path, metrics: list[str], mean: float) -> str:
    doc = {
        "format": COMBINATION_FORMAT,
        "metrics": metrics,
        "mean": [mean] * len(metrics),
        "scale": [0.2] * len(metrics),
        "coef": [1.5] * len(metrics),
        "intercept": 0.1,
    }
    path.write_text(json.dumps(doc))
    return str(path)


def _settings(name: str, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(settings to score with, the same with ``CHANGED``'s setting changed)."""
    base: dict[str, Any] = {}
    changed = changed_setting(name)
    if name == "llm_judge":
        base = {"base_url": "http://judge.test/v1", "model": "m", "cache": "off"}
        base["context_tokens"] = 2048  # else it asks the server (GET /models)
    elif name == "combined":
        base = {"weights": _weights(tmp_path / "w.json", ["overlap", "ner"], 0.5)}
        changed["weights"] = _weights(tmp_path / "w2.json", ["overlap", "ner"], 0.4)
    elif name == "ensemble":
        doc = json.loads(SHIPPED_ENSEMBLE.read_text())
        doc["intercept"] = float(doc.get("intercept", 0.0)) + 0.5
        (tmp_path / "e.json").write_text(json.dumps(doc))
        changed["weights"] = str(tmp_path / "e.json")
    return base, {**base, **changed}


def shipped_metrics() -> list[str]:
    """The registered metrics faithgate ships (a test's fake metric or a plugin's from another
    package registers too, and documents itself elsewhere)."""
    return [n for n in metric_names() if metric_class(n).__module__.startswith("faithgate.")]


def card_headings(text: str) -> list[str]:
    """The level-2 headings of a Markdown text, outside code blocks."""
    headings, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("## "):
            headings.append(line[3:].strip())
    return headings


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("name", shipped_metrics())
def test_every_metric_keeps_the_metric_contract(name, tmp_path, monkeypatch) -> None:
    _mock(monkeypatch, judge_server)
    base, changed = _settings(name, tmp_path)
    pool = fake_pool()
    metric = get_metric(name, **base)
    scorer = Scorer([metric], pool=pool, cache=None)

    # Values align with inputs: one per example, in order, whatever the batch.
    alone = [scorer.score([ex])[0][name] for ex in EXAMPLES]
    assert any(s.ok for s in alone), f"{name} scored nothing: the test would prove nothing"
    assert [s.example_id for s in alone] == [ex.id for ex in EXAMPLES]
    for batch in (EXAMPLES, EXAMPLES[::-1], EXAMPLES[1:]):
        scores = [row[name] for row in scorer.score(batch)]
        assert [s.example_id for s in scores] == [ex.id for ex in batch]
        expected = {s.example_id: s.value for s in alone}
        assert all(_same(s.value, expected[s.example_id]) for s in scores), batch

    # Values inside the declared range; per-sentence values only where the metric says so.
    low, high = type(metric).value_range(metric.settings)
    for score in alone:
        if score.ok:
            assert (low is None or score.value >= low) and (high is None or score.value <= high)
    scale, sentence_value = metric.how_to_read()
    assert scale.strip() and "{" not in scale, f"{name} declares no scale in words"
    if any(s.sentences for s in alone):
        assert sentence_value.strip(), f"{name} gives per-sentence values but not what they are"

    # Details read as ``faithgate score`` prints them: one line, then lines of their own.
    for score in alone:
        line = type(metric).details_line(score.details)
        assert isinstance(line, str) and "\n" not in line
        extra = type(metric).detail_lines(score.details)
        assert isinstance(extra, list) and all(isinstance(x, str) for x in extra)
    for score in alone:
        for sentence in score.sentences:
            if sentence.evidence:
                assert isinstance(type(metric).evidence_hint(sentence.evidence), str)

    # Settings hash: stable across constructions, changed by a setting.
    first = get_metric(name, **base).settings_hash(ScoringContext(pool))
    assert first == get_metric(name, **base).settings_hash(ScoringContext(pool))
    assert first == alone[0].settings_hash
    if changed != base:
        assert get_metric(name, **changed).settings_hash(ScoringContext(pool)) != first
    else:
        assert not metric_class(name).defaults, f"{name} has settings: name one in CHANGED"

    # A card with the template's sections, none empty.
    card = CARDS / f"{name}.md"
    assert card.is_file(), f"metric {name!r} has no card at docs/metrics/{name}.md"
    text = card.read_text(encoding="utf-8")
    assert card_headings(text) == TEMPLATE, f"docs/metrics/{name}.md: headings must be {TEMPLATE}"
    sections = text.split("\n## ")[1:]
    empty = [s.splitlines()[0] for s in sections if not "".join(s.splitlines()[1:]).strip()]
    assert not empty, f"docs/metrics/{name}.md: empty sections {empty}"


def test_the_card_heading_reader_skips_code_blocks() -> None:
    text = "# t\n## What it measures\n```\n## not a heading\n```\n## Limitations\n"
    assert card_headings(text) == ["What it measures", "Limitations"]
