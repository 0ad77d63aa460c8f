"""HHEM-2.1-open on torch, natively: a Flan-T5 encoder with a token-classification head read at
the first position, over one prompt that holds premise and hypothesis.

It reproduces ``HHEMv2ForSequenceClassification.predict`` of Vectara's published modeling
code (hub repository ``vectara/hallucination_evaluation_model``) without running it: each
pair becomes ``prompt.format(text1=premise, text2=hypothesis)`` (the template is recorded in
the converted directory, ``faithgate.convert``), tokenized with the T5 tokenizer's own
special tokens (the template's leading ``<pad>`` and the closing ``</s>``), never truncated;
the class probabilities are the softmax of the logits at position 0.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.backends.base import PairClassifier
from faithgate.backends.torch_common import import_torch, load_hf_model, load_tokenizer
from faithgate.backends.windowing import equal_length_batches
from faithgate.errors import ModelFileError
from faithgate.models import ModelSpec

CHECKER_KEY = "faithgate_checker"
PROMPT_KEY = "faithgate_prompt"


def checker_kind(spec: ModelSpec) -> str | None:
    """The ``faithgate_checker`` a converted directory records (``alignscore``, ``hhem``),
    None for any other model (or a hub id: converted checkers are always directories)."""
    path = Path(str(spec.location)) / "config.json"
    if spec.origin == "hub" or not path.is_file():
        return None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # the loader reports the damaged file
    if not isinstance(config, dict):
        return None
    if config.get("model_type") == "HHEMv2":  # the hub's form: transformers asks for remote code
        raise ModelFileError(
            f"{spec.role} model {spec.name!r} is HHEM-2 as published (remote code): convert it "
            "with `faithgate convert hhem DIR DEST --foundation FLAN_T5_DIR`, then score with "
            "--metric hhem --model hhem=DEST"
        )
    kind = config.get(CHECKER_KEY)
    return str(kind) if kind is not None else None


def format_prompts(prompt: str, premises: Sequence[str], hypotheses: Sequence[str]) -> list[str]:
    """HHEM's inputs: the template filled with each pair (``str.format``: braces in the
    texts are kept as they are, only the template's fields are read)."""
    return [prompt.format(text1=p, text2=h) for p, h in zip(premises, hypotheses, strict=True)]


class TorchHHEM(PairClassifier):
    """``PairClassifier`` of a converted HHEM directory (``faithgate convert hhem``)."""

    def __init__(self, spec: ModelSpec, batch_size: int = 8) -> None:
        super().__init__(spec, backend="torch")
        self.torch = import_torch()
        from transformers import AutoModelForTokenClassification

        self.tokenizer = load_tokenizer(spec)
        self.model = load_hf_model(spec, AutoModelForTokenClassification)
        prompt = getattr(self.model.config, PROMPT_KEY, None)
        if not isinstance(prompt, str) or "{text1}" not in prompt or "{text2}" not in prompt:
            raise ModelFileError(
                f"{spec.role} model {spec.name!r} records no HHEM prompt with {{text1}} and "
                "{text2}: convert it with `faithgate convert hhem`"
            )
        self.prompt = prompt
        self.batch_size = batch_size

    @property
    def max_length(self) -> int:
        # T5's relative positions take any length and HHEM cuts nothing: the tokenizer's
        # nominal window, for callers that plan by it.
        limit = self.tokenizer.model_max_length
        return int(limit if limit and limit < 1e6 else 512)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    @property
    def pair_special_tokens(self) -> int:
        return self.count_tokens(self.prompt.format(text1="", text2="")) + 1

    @property
    def labels(self) -> list[str]:
        id2label = self.model.config.id2label
        return [str(id2label[i]).lower() for i in range(len(id2label))]

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        torch = self.torch
        texts = format_prompts(self.prompt, premises, hypotheses)
        out = np.zeros((len(texts), len(self.labels)), dtype=np.float64)
        if not texts:
            return out
        lengths = [len(ids) for ids in self.tokenizer(texts, verbose=False)["input_ids"]]
        # Equal lengths share a batch: no padding, so a pair's score is the same in any batch.
        for idx in equal_length_batches(lengths, self.batch_size):
            batch = [texts[i] for i in idx]
            enc = self.tokenizer(batch, padding=True, return_tensors="pt", verbose=False)
            with torch.inference_mode():
                logits = self.model(**enc).logits[:, 0, :].float()
            out[idx] = torch.softmax(logits, dim=-1).numpy()
        return out


def onnx_module(model: Any) -> Any:
    """The HHEM graph to export: ids and mask in, the first position's logits out."""
    torch = import_torch()

    class FirstTokenLogits(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).logits[:, 0, :]

    return FirstTokenLogits(model).eval()


def export_onnx(model: Any, tokenizer: Any, path: Path, opset: int) -> None:
    """Write HHEM's fp32 graph (``onnx_module``) to ``path`` with dynamic batch and length."""
    torch = import_torch()
    enc = tokenizer(["a b c", "a b"], padding=True, return_tensors="pt")
    axes = {0: "batch", 1: "sequence"}
    with torch.inference_mode(), warnings.catch_warnings():
        # The TorchScript exporter is what optimum uses for the other tasks too.
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            onnx_module(model),
            (enc["input_ids"], enc["attention_mask"]),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["logits"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "logits": {0: "batch"}},
            opset_version=opset,
            dynamo=False,
        )
