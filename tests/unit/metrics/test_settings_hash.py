"""Settings hashes: a readable prefix (metric, model@fingerprint, backend, quantization, the
versions of transformers / onnxruntime) before a digest of everything a score depends on
(library versions included), computed once per run."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from fake_encoder import fake_context

from faithgate.backends import BACKEND_TABLE, library_version
from faithgate.metrics.base import Metric, ScoringContext, get_metric, readable_hash
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example, Score

DIGEST = r"[0-9a-f]{12}"

TORCH = {
    "role": "embedder",
    "model": "sentence-transformers/all-MiniLM-L6-v2",
    "fingerprint": "3f2a1b9c8d7e",
    "backend": "torch",
    "libraries": {"torch": "2.13.0", "transformers": "4.57.1"},
}
ONNX_W8 = {
    "role": "nli",
    "model": "/home/me/models/checker",
    "fingerprint": "0123456789ab",
    "backend": "onnx",
    "quantization": "w8",
    "libraries": {"onnxruntime": "1.31.0", "tokenizers": "0.22.1"},
}
SPACY = {
    "role": "spacy",
    "model": "en_core_web_sm",
    "fingerprint": "abcdef012345",
    "libraries": {"spacy": "3.8.7"},
}


def test_prefix_names_metric_model_backend_quantization_and_library_versions() -> None:
    h = readable_hash("bertscore", [TORCH], {"x": 1})
    assert re.fullmatch(
        rf"bertscore\|all-MiniLM-L6-v2@3f2a1b\|torch\|fp32\|tf4\.57\.1\|{DIGEST}", h
    )
    h = readable_hash("entail_s2s", [ONNX_W8], {"x": 1})
    assert re.fullmatch(rf"entail_s2s\|checker@012345\|onnx\|w8\|ort1\.31\.0\|{DIGEST}", h)
    none = readable_hash("entail_s2s", [{**ONNX_W8, "quantization": "none"}], {"x": 1})
    assert none.split("|")[3] == "fp32"
    # Several models: fields joined with '+', one entry per distinct value.
    h = readable_hash("m", [TORCH, ONNX_W8, {**TORCH, "role": "lm", "model": "SmolLM2"}], {})
    assert h.split("|")[:6] == [
        "m",
        "all-MiniLM-L6-v2@3f2a1b+checker@012345+SmolLM2@3f2a1b",
        "torch+onnx",
        "fp32+w8",
        "tf4.57.1",
        "ort1.31.0",
    ]
    # The spaCy pipeline beside a model is in the digest only; alone, it is named.
    with_spacy = readable_hash("bertscore", [TORCH, SPACY], {"x": 1})
    assert with_spacy.rsplit("|", 1)[0] == readable_hash("bertscore", [TORCH], {}).rsplit("|", 1)[0]
    assert re.fullmatch(
        rf"ner\|en_core_web_sm@abcdef\|spacy\|-\|{DIGEST}", readable_hash("ner", [SPACY], {})
    )
    # No model: the metric and the digest.
    assert re.fullmatch(rf"rouge_p\|{DIGEST}", readable_hash("rouge_p", [], {"x": 1}))


def test_separator_and_whitespace_in_a_model_name_keep_the_fields_apart() -> None:
    h = readable_hash("m", [{**TORCH, "model": "/tmp/my model|v2/"}], {"x": 1})
    assert h.split("|")[1] == "my_model_v2@3f2a1b"
    assert len(h.split("|")) == 6


def test_the_digest_decides_and_covers_every_library_version() -> None:
    payload = {"models": [TORCH]}
    base = readable_hash("bertscore", [TORCH], payload)
    # torch is not in the prefix but its version is in the digest.
    newer_torch = {**TORCH, "libraries": {**TORCH["libraries"], "torch": "2.14.0"}}
    changed = readable_hash("bertscore", [newer_torch], {"models": [newer_torch]})
    assert changed.rsplit("|", 1)[0] == base.rsplit("|", 1)[0]
    assert changed.rsplit("|", 1)[1] != base.rsplit("|", 1)[1]


def test_backend_versions_come_from_the_backend_table() -> None:
    for entry in BACKEND_TABLE.values():
        assert entry.versions() == {
            m: library_version(m) for m in entry.requires if library_version(m) is not None
        }
    assert library_version("faithgate-no-such-distribution") is None


class CountingMetric(Metric):
    """Model-free; counts how often its settings hash is computed."""

    name = "counting"
    defaults = {}

    def __init__(self) -> None:
        super().__init__()
        self.computed = 0

    def compute_settings_hash(self, ctx: ScoringContext) -> str:
        self.computed += 1
        return super().compute_settings_hash(ctx)

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        return [Score(self.name, 1.0, self.settings_hash(ctx), ex.id) for ex in examples]


def test_computed_once_per_run_not_per_batch() -> None:
    metric = CountingMetric()
    scorer = Scorer([metric])
    examples = [Example(str(i), "a source.", "a summary.") for i in range(3)]
    for ex in examples:  # three batches of one run
        scorer.score([ex])
    hashes = scorer.settings_hashes()
    assert metric.computed == 1
    assert re.fullmatch(rf"counting\|{DIGEST}", hashes["counting"])
    scorer.release()  # the end of the run: the next run computes it afresh
    assert scorer.settings_hashes() == hashes
    assert metric.computed == 2


def test_a_scorer_names_the_injected_model_in_the_prefix() -> None:
    ctx, _ = fake_context({"a": [1.0, 0.0]})
    hashes = Scorer(["bertscore", "sentsim"], pool=ctx.pool).settings_hashes()
    for name, h in hashes.items():
        assert re.fullmatch(rf"{name}\|fake-encoder@[0-9a-f]{{6}}\|fake\|-\|{DIGEST}", h), h
    assert hashes["bertscore"].rsplit("|", 1)[1] != hashes["sentsim"].rsplit("|", 1)[1]


@pytest.mark.parametrize("metric", ["qgqa", "feqa"])
def test_qa_metrics_hash_the_roles_they_use_without_changing_their_roles(
    metric: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = get_metric(metric)
    ctx = ScoringContext()
    hashed: list[tuple[str, str]] = []

    def identity(role: str, task: str) -> dict:
        hashed.append((role, task))
        return {"role": role, "model": role, "fingerprint": "0" * 12}

    monkeypatch.setattr(ctx, "model_identity", identity)
    declared = dict(m.roles)
    m.settings_hash(ctx)
    assert m.roles == declared  # hashing used to overwrite them
    assert hashed == sorted(m.model_roles(ctx).items())
    assert ("lm", "causal-lm") in hashed  # offline default: rule questions, the lm answers
