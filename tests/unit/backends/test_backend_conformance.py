"""Backend conformance: every backend of ``faithgate.backends.BACKENDS`` behaves like the torch
reference on the same tiny random models.

Each test is parametrized over the backends; a backend whose runtime is not installed is
skipped with the reason. Adding a backend is one class (registered in ``BACKENDS``) plus one
entry in ``LOADERS`` below (how to put a tiny model into it): these tests then hold it to
padding invariance, window stitching, log-prob equality and embedding equality.
``test_every_backend_has_a_conformance_loader`` fails until that entry exists.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tiny_models import save_tiny_models

from faithgate import models
from faithgate.backends import BACKENDS

pytestmark = pytest.mark.xdist_group("onnx")

CORPUS = [
    "The council voted to build a new library in the city park.",
    "Police said two men were arrested after the fire.",
    "Profits fell by ten percent in March, the minister told reporters.",
]
SHORT = "The council voted to build a library."
MEDIUM = "Two men were arrested by police after a fire in the old house."
LONG = " ".join(CORPUS * 6)  # longer than the tiny encoder's 64-token window: stitched
ATOL = 1e-4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny random models, saved like local checkpoints: a BERT encoder, a BERT NLI
    classifier and a Llama causal LM. (Skipped without torch: the reference is built with it;
    the torch-free test above still runs.)"""
    torch = pytest.importorskip("torch", reason="the tiny reference models are built with torch")
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("conformance")
    saved, _ = save_tiny_models(root, CORPUS)
    return {
        "text-encoder": saved["bert"],
        "pair-classifier": saved["nli"],
        "causal-lm": saved["llama"],
    }


ROLES = {"text-encoder": "embedder", "pair-classifier": "nli", "causal-lm": "lm"}


def _need(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"backend runtime not installed: {', '.join(missing)}")


def _load_torch(path: Path, task: str, workdir: Path) -> Any:
    from faithgate.backends.torch_backend import TorchBackend

    return TorchBackend().load(models.resolve(ROLES[task], str(path)), task)


def _load_onnx(path: Path, task: str, workdir: Path) -> Any:
    _need("onnxruntime", "optimum")
    from faithgate.backends.export import export_model
    from faithgate.backends.onnx_backend import OnnxBackend

    out = workdir / f"onnx-{task}"
    if not out.is_dir():  # exported once per module
        export_model(models.resolve(ROLES[task], str(path)), task, out=out, quantize="none")
    return OnnxBackend().load(models.resolve(ROLES[task], str(out)), task)


# Backend name -> how a tiny model gets into it: (checkpoint dir, task, work dir) -> model.
LOADERS: dict[str, Callable[[Path, str, Path], Any]] = {
    "torch": _load_torch,
    "onnx": _load_onnx,
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("backend-work")


@pytest.fixture(params=sorted(BACKENDS))
def load(request: pytest.FixtureRequest, tiny, workdir) -> Callable[[str], Any]:
    """``load(task)``: the tiny model of ``task`` in the parametrized backend."""
    name = request.param
    if name not in LOADERS:
        pytest.fail(f"backend {name!r} has no conformance loader (add one to LOADERS)")
    return lambda task: LOADERS[name](tiny[task], task, workdir)


@pytest.fixture(scope="module")
def reference(tiny, workdir) -> Callable[[str], Any]:
    """The torch reference models (what every backend must match)."""
    cache: dict[str, Any] = {}

    def get(task: str) -> Any:
        if task not in cache:
            cache[task] = _load_torch(tiny[task], task, workdir)
        return cache[task]

    return get


def test_every_backend_has_a_conformance_loader() -> None:
    assert set(BACKENDS) <= set(LOADERS), "a registered backend has no conformance loader"


# --- text encoder ------------------------------------------------------------------------------


def test_embeddings_equal_the_reference(load, reference) -> None:
    model, ref = load("text-encoder"), reference("text-encoder")
    texts = [SHORT, MEDIUM, LONG]
    assert model.max_length == ref.max_length
    assert [model.count_tokens(t) for t in texts] == [ref.count_tokens(t) for t in texts]
    # Text the vocabulary cannot read (Thai, for a Latin-only word piece vocabulary): both
    # backends say so, and never of readable text.
    unreadable = ["\u0e41\u0e21\u0e27\u0e19\u0e31\u0e48\u0e07", SHORT, "\u0e41\u0e21\u0e27 cat"]
    assert [model.unknown_only(t) for t in unreadable] == [ref.unknown_only(t) for t in unreadable]
    assert not ref.unknown_only(SHORT) and not ref.unknown_only(MEDIUM)
    for layer in (None, 1):
        for got, want in zip(
            model.token_embeddings(texts, layer=layer),
            ref.token_embeddings(texts, layer=layer),
            strict=True,
        ):
            assert got.tokens == want.tokens
            np.testing.assert_allclose(got.vectors, want.vectors, atol=ATOL)
    np.testing.assert_allclose(
        model.sentence_embeddings(texts), ref.sentence_embeddings(texts), atol=ATOL
    )


def test_encoder_padding_invariance(load) -> None:
    """A text's vectors do not depend on what it is batched (padded) with."""
    model = load("text-encoder")
    alone = model.token_embeddings([SHORT])[0]
    padded = model.token_embeddings([MEDIUM, SHORT, LONG])[1]
    assert alone.tokens == padded.tokens
    np.testing.assert_allclose(alone.vectors, padded.vectors, atol=1e-5)
    np.testing.assert_allclose(
        model.sentence_embeddings([SHORT])[0],
        model.sentence_embeddings([LONG, SHORT])[1],
        atol=1e-5,
    )


def test_window_stitching(load, reference) -> None:
    """A text longer than the window is cut into windows and stitched back: one vector per
    token of the whole text, in order, equal to the reference's stitching."""
    model, ref = load("text-encoder"), reference("text-encoder")
    n = model.count_tokens(LONG)
    assert n > model.max_length
    [got] = model.token_embeddings([LONG])
    [want] = ref.token_embeddings([LONG])
    assert got.windowed and len(got.tokens) == len(got.vectors) == len(want.tokens)
    assert got.tokens == want.tokens
    assert np.isfinite(got.vectors).all()
    np.testing.assert_allclose(got.vectors, want.vectors, atol=ATOL)


# --- pair classifier -----------------------------------------------------------------------------


def test_classifier_probabilities_equal_the_reference_and_ignore_padding(load, reference) -> None:
    model, ref = load("pair-classifier"), reference("pair-classifier")
    prem = [SHORT, LONG, MEDIUM]  # the long premise is truncated (only_first)
    hyp = ["A library will be built.", "Rain fell.", "Nobody was arrested."]
    probs = model.predict_proba(prem, hyp)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(probs, ref.predict_proba(prem, hyp), atol=ATOL)
    np.testing.assert_allclose(model.predict_proba([SHORT], [hyp[0]])[0], probs[0], atol=1e-5)


def test_classifier_counts_a_pairs_tokens_like_the_reference(load, reference) -> None:
    """What the NLI metrics measure to keep a hypothesis whole: the tokens of premise and
    hypothesis plus the pair's special tokens are the pair's length, untruncated."""
    model, ref = load("pair-classifier"), reference("pair-classifier")
    assert model.pair_special_tokens == ref.pair_special_tokens == 3  # [CLS] a [SEP] b [SEP]
    for premise, hypothesis in [(SHORT, MEDIUM), (MEDIUM, "Rain fell."), (SHORT, LONG)]:
        n = len(ref.tokenizer(premise, hypothesis)["input_ids"])
        got = model.count_tokens(premise) + model.count_tokens(hypothesis)
        assert got + model.pair_special_tokens == n


# --- language model -------------------------------------------------------------------------------


def test_logprobs_equal_the_reference(load, reference) -> None:
    model, ref = load("causal-lm"), reference("causal-lm")
    a, b = ref.tokenize(CORPUS[0]), ref.tokenize(CORPUS[1])
    assert model.tokenize(CORPUS[0]) == a and model.token_texts(a) == ref.token_texts(a)
    batch = [[a, b], [b], [a[:3], [], b[:5]]]
    for got_row, want_row in zip(
        model.segment_logprobs(batch), ref.segment_logprobs(batch), strict=True
    ):
        for got, want in zip(got_row, want_row, strict=True):
            np.testing.assert_allclose(got, want, atol=ATOL)  # NaN in the same places
    conts = [[b], [b[:4], a[:2]]]
    got_prefix, got_conts = model.prefix_logprobs(a, conts)
    want_prefix, want_conts = ref.prefix_logprobs(a, conts)
    np.testing.assert_allclose(got_prefix, want_prefix, atol=ATOL)
    for got_row, want_row in zip(got_conts, want_conts, strict=True):
        for got, want in zip(got_row, want_row, strict=True):
            np.testing.assert_allclose(got, want, atol=ATOL)
    # Prefix caching equals scoring prefix + continuation in one pass.
    np.testing.assert_allclose(got_conts[0][0], model.segment_logprobs([[a, b]])[0][1], atol=ATOL)
    # A prefix run only for its continuations: no prefix log-probs, the same continuations.
    no_prefix, same_conts = model.prefix_logprobs(a, conts, score_prefix=False)
    assert no_prefix.shape == (0,)
    for got_row, want_row in zip(same_conts, got_conts, strict=True):
        for got, want in zip(got_row, want_row, strict=True):
            np.testing.assert_allclose(got, want, atol=1e-6)


def test_token_offsets_place_every_token_in_its_characters(load, reference) -> None:
    """``token_offsets`` (where each summary token is, for per-sentence support): one span per
    id of ``tokenize``, the reference's, and the byte pieces of an emoji or a Cyrillic letter
    each span that whole character; adding up ``token_texts`` lengths placed them wrong."""
    model, ref = load("causal-lm"), reference("causal-lm")
    for text in [CORPUS[0], "\U0001f622\U0001f622 The council voted.", "Совет проголосовал."]:
        spans = model.token_offsets(text)
        assert len(spans) == len(model.tokenize(text)) and spans == ref.token_offsets(text)
        assert all(0 <= a <= b <= len(text) for a, b in spans)
        assert [a for a, _ in spans] == sorted(a for a, _ in spans)
        covered = {i for a, b in spans for i in range(a, b)}
        assert covered >= {i for i, c in enumerate(text) if not c.isspace()}
    emoji = model.token_offsets("\U0001f622 The")
    assert len(emoji) > 2 and emoji[:4] == [(0, 1)] * 4  # four byte tokens, one character


def test_logprobs_padding_invariance(load) -> None:
    """A sequence's log-probs do not depend on the longer sequences padded beside it."""
    model = load("causal-lm")
    a, b = model.tokenize(CORPUS[0]), model.tokenize(CORPUS[2])
    alone = model.segment_logprobs([[a[:4], b[:3]]])[0]
    padded = model.segment_logprobs([[a, b], [a[:4], b[:3]]])[1]
    for x, y in zip(alone, padded, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-5)
