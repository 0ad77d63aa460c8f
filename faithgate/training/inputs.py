"""The checks of a run's inputs before any long work: the document and labelled files, the
``--init-from`` checker and the ``--base-model`` with its tokenizer."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from faithgate import models
from faithgate.errors import InputError, ModelNotFoundError
from faithgate.safety.escape import printable
from faithgate.training import corpora
from faithgate.training.corpora import LABELS
from faithgate.training.dataset import dataset_file, refuse_repeated_files
from faithgate.training.recipe import BUILTIN_CORPORA, TRAINING_META, TrainConfig
from faithgate.training.workdir import work_dir


def init_checker(path: str) -> dict[str, Any]:
    """A trained checker to continue from: its directory and the identity recorded in the new
    manifest (its own recipe hash and the digest of its weights)."""
    location = Path(path)
    weights = location / "model.safetensors"
    if not weights.is_file():
        raise InputError(
            f"--init-from {printable(path)}: no model.safetensors there (a trained checker dir)"
        )
    config = _json_object(location / "config.json", f"--init-from {printable(path)}")
    labels = config.get("id2label")
    labels = labels if isinstance(labels, dict) else {}
    if [labels.get(str(i)) for i in range(len(LABELS))] != list(LABELS):
        raise InputError(f"--init-from {printable(path)}: its labels are not {', '.join(LABELS)}")
    meta_path = location / TRAINING_META
    recipe = None
    if meta_path.exists():
        recipe = _json_object(meta_path, f"--init-from {printable(path)}").get("recipe_hash")
    try:
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    except OSError as exc:
        raise InputError(f"{printable(weights)} cannot be read ({exc.strerror})") from None
    return {"location": str(location), "meta": {"recipe_hash": recipe, "sha256": digest}}


def _json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path``; ``InputError`` naming ``what`` and the file otherwise."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{what}: no {path.name} there (a trained checker dir)") from None
    except OSError as exc:
        raise InputError(f"{what}: {path.name} cannot be read ({exc.strerror})") from None
    except (ValueError, RecursionError) as exc:  # bad JSON or UTF-8
        raise InputError(f"{what}: {path.name} is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise InputError(f"{what}: {path.name} is not a JSON object")
    return data


def check_inputs(config: TrainConfig) -> dict[str, Any] | None:
    """Read and validate, before any long work (and before ``OUT.work`` is made), every input
    file the run parses: the ``--documents`` and ``--labelled`` files (line-numbered errors)
    and the ``--init-from`` checker, whose identity (``init_checker``) is returned. A file
    that is absent is accepted only where a dataset built earlier (``dataset_file``) stands
    in for it, as ``build_dataset`` allows."""
    refuse_repeated_files(config)
    rules = config.synth.perturb_rules
    if isinstance(rules, bool) or rules not in (1, 2, 3):  # perturb's revisions
        raise InputError(f"--perturb-rules {rules!r}: expected 1, 2 or 3")
    kept = dataset_file(config, work_dir(config.output)).is_file()
    for name in config.documents:
        if name not in BUILTIN_CORPORA and (not kept or Path(name).exists()):
            corpora.user_documents(name)
    for path in config.labelled:
        if not kept or Path(path).exists():
            corpora.labelled_summaries(path)
    return init_checker(config.init_from) if config.init_from else None


def check_base(config: TrainConfig) -> tuple[models.ModelSpec, Any]:
    """The ``--base-model`` (resolved) and its tokenizer, loaded before any long work: a
    missing model, or a directory without a tokenizer or a usable config.json, is an
    ``InputError`` (exit 2) naming it, not an internal error after the dataset is built."""
    from transformers import AutoConfig, AutoTokenizer

    name = printable(config.base_model)
    try:
        # Any encoder directory or hub id; the role only picks the offline fallbacks.
        base = models.resolve("embedder", config.base_model)
    except ModelNotFoundError:
        raise InputError(
            f"--base-model {name}: not found (no such directory, and not in the faithgate "
            "cache, an installed package or the Hugging Face cache); give a local model "
            "directory or a hub id downloaded earlier"
        ) from None
    try:
        base_config = AutoConfig.from_pretrained(base.location)
        tokenizer = AutoTokenizer.from_pretrained(base.location)
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise InputError(
            f"--base-model {name}: cannot load its config.json and tokenizer "
            f"({type(exc).__name__}); give a transformers model directory that holds both"
        ) from None
    # Longer inputs than its position table were a tensor-size RuntimeError mid-training.
    positions = getattr(base_config, "max_position_embeddings", None)
    if isinstance(positions, int) and config.max_length > positions:
        raise InputError(
            f"--max-length {config.max_length} is longer than --base-model {name} takes "
            f"({positions} positions); give --max-length {positions} or less"
        )
    return base, tokenizer
