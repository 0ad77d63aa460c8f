"""Loading transformers models and tokenizers: the helpers every torch task module shares.

Kept apart from ``torch_backend`` so ``torch_lm`` and ``torch_qa`` build on them while
``torch_backend`` dispatches to those modules (no import cycle). Torch-free at import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faithgate.errors import BackendError, ModelFileError
from faithgate.models import ModelSpec


def import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise BackendError(
            "the torch backend needs the full install: pip install 'faithgate[full]' "
            "(or export the model and use --backend onnx)"
        ) from exc
    return torch


def hf_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """Loading options shared by every transformers model: offline unless from the hub,
    safetensors only, no remote code unless asked."""
    kwargs: dict[str, Any] = {
        "trust_remote_code": spec.trust_remote_code,
        "local_files_only": spec.origin != "hub",
    }
    if spec.revision:
        kwargs["revision"] = spec.revision
    return kwargs


def load_tokenizer(spec: ModelSpec) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(spec.location, **hf_kwargs(spec))
    except Exception as exc:  # transformers raises many types; report one line
        raise load_error(spec)(
            f"cannot load tokenizer of {spec.role} model {spec.name!r}: {exc}"
        ) from exc


def load_error(spec: ModelSpec) -> type[BackendError]:
    """A local model that does not load is a bad input file (exit 2); anything else (a hub
    download, a missing dependency) stays a backend failure."""
    return ModelFileError if Path(str(spec.location)).exists() else BackendError


def load_hf_model(spec: ModelSpec, auto_class: Any) -> Any:
    try:
        model = auto_class.from_pretrained(spec.location, use_safetensors=True, **hf_kwargs(spec))
    except Exception as exc:
        raise load_error(spec)(f"cannot load {spec.role} model {spec.name!r}: {exc}") from exc
    model.eval()
    return model
