"""What the training tests share: a tiny random base model and two tiny documents to train on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_models import MAYOR_TEXT


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory, torch, transformers) -> Path:
    """A random 2-layer BERT with MiniLM's tokenizer, saved like a hub checkpoint."""
    from tiny_models import MINILM_SIZED, save_minilm_bert

    torch.manual_seed(0)
    path, _, _ = save_minilm_bert(
        tmp_path_factory.mktemp("tiny-base"),
        "BertModel",
        **MINILM_SIZED,
        max_position_embeddings=128,
    )
    return path


@pytest.fixture(scope="module")
def tiny_docs(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("docs") / "docs.jsonl"
    rows = [
        {"id": "d1", "source": MAYOR_TEXT},
        {"id": "d2", "source": MAYOR_TEXT.replace("Springfield", "Shelbyville")},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
