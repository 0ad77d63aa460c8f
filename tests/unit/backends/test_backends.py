"""Backend choice and option handling shared by the torch and onnxruntime backends."""

from __future__ import annotations

import numpy as np
import pytest

from faithgate.backends import ModelPool
from faithgate.errors import ConfigError, InputError


def test_unknown_backend_and_role_are_input_errors() -> None:
    with pytest.raises(InputError, match="unknown backend"):
        ModelPool(backend="tensorflow")
    with pytest.raises(InputError, match="unknown model role"):
        ModelPool({"summarizer": "x"})
    with pytest.raises(InputError, match="unknown model role.s. embeder"):
        ModelPool(model_options={"embeder": {"stride": 8}})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"embedder": {"bogus": 1}}, "unknown loader option model_options.embedder.bogus; opt"),
        ({"nli": {"batch_size": "8"}}, "model_options.nli.batch_size must be a positive integ"),
        ({"lm": {"threads": 0}}, "model_options.lm.threads must be a positive integer, got 0"),
        ({"lm": {"threads": True}}, "model_options.lm.threads must be a positive integer, go"),
        ({"qa": {"stride": -1}}, "model_options.qa.stride must be a non-negative integer"),
        ({"nli": {"provider": ""}}, "model_options.nli.provider must be an onnxruntime exec"),
        ({"nli": 3}, "model_options.nli must be a table of loader options, got int"),
        ({"spacy": {"batch_size": 8}}, "model_options.spacy: the spacy role takes no loader"),
    ],
)
def test_bad_loader_options_are_configuration_errors_before_any_model_loads(
    options: dict, message: str
) -> None:
    """They used to fail every example of the metric (exit 1, "unscorable"), or pass silently
    (spaCy ignored them)."""
    with pytest.raises(InputError, match=message.replace(".", r"\.")):
        ModelPool(model_options=options)


@pytest.mark.slow
def test_an_option_the_model_class_does_not_take_is_a_configuration_error() -> None:
    pool = ModelPool(backend="torch", model_options={"embedder": {"max_answer_tokens": 3}})
    with pytest.raises(ConfigError, match="model_options.embedder: the torch text-encoder model"):
        pool.get("embedder", "text-encoder")


def test_loader_options_that_can_move_a_score_are_in_the_models_identity() -> None:
    """An encoder's window stride changes bertscore on a long source (0.77 / 0.86 / 0.72 for
    the default 64 / 8 / 200) and shared one settings hash; batch sizes and threads do not
    change scores and stay out, so default runs keep their hashes."""

    def identity(options: dict) -> dict:
        pool = ModelPool(backend="torch", model_options={"embedder": options})
        return pool.identity("embedder", "text-encoder")

    default = identity({})
    assert "options" not in default
    assert identity({"batch_size": 4, "threads": 2}) == default
    assert identity({"stride": 8})["options"] == {"stride": 8}
    assert identity({"stride": 8, "batch_size": 4})["options"] == {"stride": 8}


@pytest.mark.slow
def test_torch_accepts_onnx_session_options() -> None:
    """A role configured with onnxruntime options still loads when auto falls back to torch."""
    pool = ModelPool(backend="torch", model_options={"embedder": {"threads": 2, "provider": "cpu"}})
    vectors = pool.get("embedder", "text-encoder").sentence_embeddings(["A man eats food."])
    assert vectors.shape == (1, 384)
    assert np.isclose(np.linalg.norm(vectors[0]), 1.0, atol=1e-5)


@pytest.mark.slow
def test_torch_classifier_fits_a_hypothesis_longer_than_the_window(tmp_path) -> None:
    """only_first truncation cannot fit such a pair; the classifier cuts both sides instead."""
    from tiny_models import save_minilm_bert

    save_minilm_bert(
        tmp_path / "nli",
        "BertForSequenceClassification",
        max_length=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=3,
        id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
        label2id={"entailment": 0, "neutral": 1, "contradiction": 2},
    )
    pool = ModelPool({"nli": str(tmp_path / "nli")}, backend="torch")
    classifier = pool.get("nli", "pair-classifier")
    long_hypothesis = " ".join(["the cat sat on the mat"] * 20)
    probs = classifier.predict_proba(["A short premise.", "Another one."], [long_hypothesis, "Ok."])
    assert probs.shape == (2, 3)
    assert np.allclose(probs.sum(axis=1), 1.0)
