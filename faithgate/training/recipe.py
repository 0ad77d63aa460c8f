"""The recipe of a trained checker: every setting that decides its weights, hashed into the
recipe hash its manifest (``TRAINING_META``) records."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from faithgate.training import synth

BUILTIN_CORPORA = ("lee-news", "wikipedia")
TRAINING_META = "faithgate_training.json"


@dataclass
class TrainConfig:
    """Everything that decides the trained weights (hashed into ``recipe_hash``)."""

    output: str
    base_model: str = "sentence-transformers/all-MiniLM-L6-v2"
    documents: list[str] = field(default_factory=lambda: list(BUILTIN_CORPORA))
    labelled: list[str] = field(default_factory=list)
    # Share of the labelled files' source documents held out for evaluation (by document).
    labelled_dev_fraction: float = 0.2
    # Keep at most this many synthetic training pairs (a seeded sample); None keeps all.
    max_synthetic_pairs: int | None = None
    # Continue from a trained checker (a transformers directory with this project's three
    # labels, head included) instead of a fresh head on ``base_model``.
    init_from: str | None = None
    snli_pairs: int = 20000
    synth: synth.SynthConfig = field(default_factory=synth.SynthConfig)
    dev_fraction: float = 0.05
    epochs: int = 1
    batch_size: int = 32
    max_length: int = 256
    learning_rate: float = 6e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    freeze_word_embeddings: bool = True
    max_steps: int | None = None
    checkpoint_every: int = 100
    seed: int = 0
    # "float16" rounds the trained tensors of the base model to float16 before training (the
    # frozen word embeddings stay as they are): the base then travels in half the bytes, e.g.
    # to a lent GPU machine, and any machine that starts from the rounded copy gets the same
    # start. "float32" (the default) starts from the base's own values.
    init_precision: str = "float32"

    def recipe(self) -> dict[str, Any]:
        """The settings a manifest records (``synth``'s as ``SynthConfig.recipe`` gives them);
        a setting added later is left out at its default, so earlier recipes keep their hash."""
        data = asdict(self)
        data.pop("output")
        data["synth"] = self.synth.recipe()
        # Settings added after the first shipped checker, left out while they change nothing.
        unused = {
            "labelled_dev_fraction": not self.labelled,
            "max_synthetic_pairs": self.max_synthetic_pairs is None,
            "init_from": self.init_from is None,
            "init_precision": self.init_precision == "float32",
        }
        for name, leave_out in unused.items():
            if leave_out:
                data.pop(name)
        return data

    def recipe_hash(self) -> str:
        data = self.recipe()
        data.pop("checkpoint_every")
        return key_digest(data)


def key_digest(key: Any) -> str:
    """The first 12 hex digits of the SHA-256 of ``key`` as sorted JSON: what names the recipe
    and each file a run keeps in ``OUT.work``."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
