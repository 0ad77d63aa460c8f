"""Backend choice and option handling shared by the torch and onnxruntime backends."""

from __future__ import annotations

import numpy as np
import pytest

from faithgate.backends import ModelPool
from faithgate.errors import BackendError, ConfigError, InputError


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
        # silently dropped on torch, an error only on onnx (exit 1, after the model was found)
        ({"nli": {"provider": "rocm"}}, "model_options.nli.provider must be an onnxruntime e"),
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


# --- provider = "cuda" on torch (review s19, finding 6) ------------------------------------------


@pytest.mark.parametrize("provider", ["cuda", "CUDA"])
def test_cuda_asked_for_on_the_torch_backend_is_a_configuration_error(provider: str) -> None:
    """It was dropped and the role scored on the CPU, under the hash of a run without it;
    onnx_models/README.md: "provider=cuda without a CUDA device is a one-line error, not a
    silent CPU run". Refused before any model loads (the hash and the load both)."""
    pool = ModelPool(backend="torch", model_options={"embedder": {"provider": provider}})
    for call in (pool.identity, pool.get):
        with pytest.raises(ConfigError, match='model_options.embedder.provider = "cuda"') as e:
            call("embedder", "text-encoder")
        assert "torch backend, which faithgate runs on the CPU only" in str(e.value)
        assert "\n" not in str(e.value) and e.value.exit_code == 2
    assert not pool._loaded


def test_cuda_asked_for_under_auto_without_an_export_says_why_torch_was_chosen(
    tmp_path, monkeypatch
) -> None:
    """Whether "cuda" was an error depended on an export being in the cache: with one the
    onnx backend refused it on a CPU machine, without one torch ran on the CPU."""
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    pool = ModelPool(model_options={"embedder": {"provider": "cuda"}})
    with pytest.raises(ConfigError, match="backend auto: no ONNX export of it is in the cache"):
        pool.identity("embedder", "text-encoder")


def test_the_torch_backend_refuses_cuda_when_loaded_directly() -> None:
    from faithgate import models
    from faithgate.backends.torch_backend import TorchBackend

    spec = models.resolve("embedder")
    with pytest.raises(ConfigError, match='model_options.embedder.provider = "cuda"'):
        TorchBackend().load(spec, "text-encoder", provider="cuda")


def test_cpu_and_auto_providers_stay_out_of_a_torch_models_identity() -> None:
    """torch runs on the CPU: ``cpu`` and ``auto`` (CUDA only where onnxruntime-gpu sees a GPU)
    ask for nothing it does not do, so they keep the hash of a run without them."""

    def identity(options: dict) -> dict:
        return ModelPool(backend="torch", model_options={"embedder": options}).identity(
            "embedder", "text-encoder"
        )

    assert identity({"provider": "cpu"}) == identity({}) == identity({"provider": "Auto"})


@pytest.mark.parametrize("provider", [None, "auto", "Auto"])
def test_an_onnx_models_identity_names_the_provider_auto_resolves_to(
    provider: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Provider "auto" (or none) was hashed as written, so a CPU driver and a CUDA worker
    (whose scores differ slightly) shared one settings hash. The identity names where the
    sessions run: "cuda" where a session really starts on CUDA; on the CPU nothing, as "cpu"
    and no provider always did, so those three hash the same. No GPU is used: whether CUDA is
    usable is patched, and no export or session is needed for the identity."""
    pytest.importorskip("onnxruntime")
    from faithgate.backends import onnx_session

    def identity(cuda: bool, options: dict) -> dict:
        monkeypatch.setattr(onnx_session, "cuda_usable", lambda: cuda)
        pool = ModelPool(backend="onnx", model_options={"embedder": options})
        return pool.identity("embedder", "text-encoder")

    given = {} if provider is None else {"provider": provider, "stride": 8}
    on_cpu = identity(False, given)
    on_cuda = identity(True, given)
    assert on_cuda["options"] == {**given, "provider": "cuda"}
    assert on_cpu.get("options") == ({"stride": 8} if given else None)
    cpu_said = {**given, "provider": "cpu"}
    assert identity(False, cpu_said) == on_cpu
    assert identity(True, cpu_said) == on_cpu  # "cpu" refuses the GPU that is there
    assert identity(True, {**given, "provider": "cuda"}) == on_cuda


def test_an_explicit_cuda_provider_is_hashed_as_written_on_a_machine_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CPU Ray driver builds the settings hashes of its GPU workers: "cuda" there raised
    "no CUDA device" while the hash was computed. It is recorded as written (the sessions,
    which need the GPU, still refuse to start without one)."""
    pytest.importorskip("onnxruntime")
    from faithgate.backends import onnx_backend, onnx_session

    monkeypatch.setattr(onnx_session, "cuda_usable", lambda: False)
    pool = ModelPool(backend="onnx", model_options={"embedder": {"provider": "cuda"}})
    assert pool.identity("embedder", "text-encoder")["options"] == {"provider": "cuda"}
    with pytest.raises(BackendError, match="no CUDA device"):
        onnx_backend.providers_for("cuda")
    with pytest.raises(BackendError, match="unknown execution provider"):
        onnx_backend.hashed_provider("gpu")


def test_cuda_listed_by_onnxruntime_but_not_startable_is_not_usable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """onnxruntime-gpu lists CUDAExecutionProvider on machines with no GPU or no CUDA
    libraries, and its sessions then fall back to the CPU: the hash said "cuda" for a CPU run.
    ``cuda_usable`` asks a probe session which provider it really got. On a CPU-only
    onnxruntime a session asked for CUDA falls back the same way, which this reproduces."""
    ort = pytest.importorskip("onnxruntime")
    from faithgate.backends import onnx_backend, onnx_session

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has CUDA: the fallback is not reproducible here")
    monkeypatch.setattr(
        ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    monkeypatch.setattr(onnx_session, "_CUDA_USABLE", [])
    assert onnx_backend.cuda_usable() is False
    assert onnx_backend.hashed_provider("auto") == "cpu"
    assert onnx_backend.providers_for("auto") == ["CPUExecutionProvider"]


def test_options_for_keeps_a_backends_own_options_and_refuses_cuda_elsewhere() -> None:
    from faithgate.backends import options_for

    both = {"provider": "cuda", "threads": 2, "stride": 8}
    assert options_for("onnx", both) == both
    assert options_for("torch", {"provider": "cpu", "threads": 2, "stride": 8}) == {"stride": 8}
    with pytest.raises(ConfigError, match="faithgate export lm --device cuda"):
        options_for("torch", both, "lm", "causal-lm")
    # qa and qg have no ONNX backend: exporting is no way out
    with pytest.raises(ConfigError, match="extractive-qa model has no ONNX backend: drop pro"):
        options_for("torch", both, "qa", "extractive-qa")
