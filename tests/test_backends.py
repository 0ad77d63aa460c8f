"""Backend choice and option handling shared by the torch and onnxruntime backends."""

from __future__ import annotations

import numpy as np
import pytest

from faithgate.backends import ModelPool
from faithgate.errors import InputError


def test_unknown_backend_and_role_are_input_errors() -> None:
    with pytest.raises(InputError, match="unknown backend"):
        ModelPool(backend="tensorflow")
    with pytest.raises(InputError, match="unknown model role"):
        ModelPool({"summarizer": "x"})


@pytest.mark.slow
def test_torch_accepts_onnx_session_options() -> None:
    """A role configured with onnxruntime options still loads when auto falls back to torch."""
    pool = ModelPool(backend="torch", model_options={"embedder": {"threads": 2, "provider": "cpu"}})
    vectors = pool.get("embedder", "text-encoder").sentence_embeddings(["A man eats food."])
    assert vectors.shape == (1, 384)
    assert np.isclose(np.linalg.norm(vectors[0]), 1.0, atol=1e-5)
