"""Published checker checkpoints turned into standard transformers directories.

Two checkers are released in forms transformers cannot load by itself:

- **AlignScore** (Zha et al., 2023, "AlignScore: Evaluating Factual Consistency with a Unified
  Alignment Function", ACL): a PyTorch Lightning ``.ckpt`` of ``BERTAlignModel``, a RoBERTa
  (``base_model``) with three heads on its pooler output (``tri_layer``: aligned / neutral /
  contradiction, ``bin_layer``: not aligned / aligned, ``reg_layer``) and an MLM head.
  RoBERTa's pooler (dense + tanh on ``<s>``) followed by a linear head is exactly
  ``RobertaForSequenceClassification``'s classification head, so the pooler becomes
  ``classifier.dense`` and the chosen head ``classifier.out_proj``. The checkpoint carries no
  configuration or tokenizer: they come from the RoBERTa it was trained from (``base``).
- **HHEM-2.1-open** (Vectara): ``HHEMv2ForSequenceClassification``, remote code wrapping a
  Flan-T5 ``T5ForTokenClassification`` (weights under ``t5.``) and a prompt template; the T5
  configuration and tokenizer come from its ``foundation`` (``google/flan-t5-base``). The
  conversion writes a self-contained ``T5ForTokenClassification`` directory that records the
  prompt (``faithgate_prompt``), so no remote code ever runs.

Both write ``faithgate_checker`` into the configuration; the ``alignscore`` and ``hhem``
metrics refuse a model without it. Needs torch, transformers and safetensors (the full
install); the converted directory then exports to ONNX like any other (``faithgate export``).
"""

from __future__ import annotations

import collections
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faithgate.errors import BackendError, InputError, ModelFileError
from faithgate.safety.escape import printable

# Hub ids of the published checkpoints (``--allow-download``) and what each needs.
ALIGNSCORE_HUB = "yzha/AlignScore"
ALIGNSCORE_FILES = {"large": "AlignScore-large.ckpt", "base": "AlignScore-base.ckpt"}
ALIGNSCORE_BASES = {"large": "FacebookAI/roberta-large", "base": "FacebookAI/roberta-base"}
HHEM_HUB = "vectara/hallucination_evaluation_model"
HHEM_FOUNDATION = "google/flan-t5-base"
# HHEMv2Config.prompt of the published code (configuration_hhem_v2.py); used when the
# checkpoint's config.json does not carry its own.
HHEM_PROMPT = (
    "<pad> Determine if the hypothesis is true given the premise?\n\n"
    "Premise: {text1}\n\nHypothesis: {text2}"
)
# AlignScore's heads: index 0 of the three-way head is ALIGNED (the reference's ``nli_sp``
# mode reads ``[:, 0]``); index 1 of the binary head is aligned (``bin_sp`` reads ``[:, 1]``).
ALIGNSCORE_HEADS: dict[str, tuple[str, dict[int, str]]] = {
    "nli": ("tri_layer", {0: "entailment", 1: "neutral", 2: "contradiction"}),
    "bin": ("bin_layer", {0: "not_aligned", 1: "aligned"}),
}
HHEM_LABELS = {0: "hallucinated", 1: "consistent"}
CHECKER_KEY = "faithgate_checker"
PROMPT_KEY = "faithgate_prompt"

# Lightning pickles its hyper-parameters as AttributeDict (a dict): read as a plain dict, so
# the checkpoint loads with torch's weights-only unpickler (no arbitrary code runs).
_LIGHTNING_DICTS = (
    "pytorch_lightning.utilities.parsing.AttributeDict",
    "lightning_fabric.utilities.data.AttributeDict",
    "lightning.fabric.utilities.data.AttributeDict",
)


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise BackendError(
            "converting a checkpoint needs the full install: pip install 'faithgate[full]'"
        ) from exc
    return torch


def read_lightning_state(path: Path) -> dict[str, Any]:
    """The ``state_dict`` of a Lightning checkpoint, read weights-only (``ModelFileError``
    for a file that is no such checkpoint or holds objects other than tensors and dicts)."""
    torch = _torch()
    # Read as an OrderedDict: the weights-only unpickler fills only its own dict types.
    safe = [(collections.OrderedDict, name) for name in _LIGHTNING_DICTS]
    try:
        with torch.serialization.safe_globals(safe):
            ckpt = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - pickle and zip errors of many types: one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ModelFileError(
            f"cannot read {printable(path)} as a PyTorch Lightning checkpoint "
            f"({type(exc).__name__}: {printable(first)})"
        ) from None
    state = ckpt.get("state_dict") if isinstance(ckpt, dict) else None
    if not isinstance(state, dict):
        raise ModelFileError(f"{printable(path)} has no state_dict: not a Lightning checkpoint")
    return state


def _read_config(base: Path) -> dict[str, Any]:
    try:
        config = json.loads((base / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {printable(base / 'config.json')}: {exc}") from None
    if not isinstance(config, dict):
        raise InputError(f"{printable(base / 'config.json')} is not a JSON object")
    return config


def _finish(tmp: Path, dest: Path) -> Path:
    """Move the finished directory ``tmp`` to ``dest`` (replacing an earlier conversion)."""
    if dest.exists():
        if not (dest / "config.json").is_file() or CHECKER_KEY not in _read_config(dest):
            raise InputError(
                f"{printable(dest)} exists and is not a converted checker: choose another DEST"
            )
        shutil.rmtree(dest)
    tmp.rename(dest)
    return dest


def _save(
    dest: Path,
    config: dict[str, Any],
    weights: dict[str, Any],
    tokenizer_from: Path,
    log: Callable[[str], None],
) -> Path:
    """Write config, safetensors weights and the tokenizer of ``tokenizer_from`` to ``dest``
    (through a temporary directory beside it: a failed conversion leaves nothing)."""
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    dest = Path(dest).absolute()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_from))
        tokenizer.save_pretrained(str(tmp))
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp / "model.safetensors"))
        log(f"wrote {printable(dest)}")
        return _finish(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def convert_alignscore(
    ckpt: str | Path,
    base: str | Path,
    dest: str | Path,
    head: str = "nli",
    log: Callable[[str], None] = lambda msg: None,
) -> Path:
    """Convert an AlignScore ``.ckpt`` into a ``RobertaForSequenceClassification`` directory.

    ``base`` is a local directory of the RoBERTa it was trained from (``config.json`` and
    tokenizer; ``roberta-large`` for AlignScore-large). ``head``: ``nli`` (the three-way head
    the reference scores with by default, ``nli_sp``) or ``bin`` (its ``bin_sp`` mode).
    """
    if head not in ALIGNSCORE_HEADS:
        raise InputError(f"AlignScore head must be one of: {', '.join(ALIGNSCORE_HEADS)}")
    base = Path(base)
    config = _read_config(base)
    if config.get("model_type") != "roberta":
        raise InputError(
            f"AlignScore base {printable(base)} is a {config.get('model_type')!r} model: "
            "AlignScore's released checkpoints are RoBERTa (roberta-base / roberta-large)"
        )
    state = read_lightning_state(Path(ckpt))
    layer, labels = ALIGNSCORE_HEADS[head]
    weights: dict[str, Any] = {}
    for key, tensor in state.items():
        if key.startswith("base_model.pooler.dense."):
            weights["classifier.dense." + key.rsplit(".", 1)[1]] = tensor
        elif key.startswith("base_model.") and not key.endswith("position_ids"):
            weights["roberta." + key[len("base_model.") :]] = tensor
        elif key.startswith(layer + "."):
            weights["classifier.out_proj." + key.rsplit(".", 1)[1]] = tensor
    needed = [
        "roberta.embeddings.word_embeddings.weight",
        "classifier.dense.weight",
        "classifier.dense.bias",
        "classifier.out_proj.weight",
        "classifier.out_proj.bias",
    ]
    missing = [k for k in needed if k not in weights]
    if missing:
        raise ModelFileError(
            f"{printable(ckpt)} is not an AlignScore checkpoint of a RoBERTa: no "
            f"{', '.join(missing)} (from base_model.*, base_model.pooler.*, {layer}.*)"
        )
    vocab, hidden = weights["roberta.embeddings.word_embeddings.weight"].shape
    if (vocab, hidden) != (config.get("vocab_size"), config.get("hidden_size")):
        raise InputError(
            f"AlignScore checkpoint {printable(ckpt)} has embeddings {vocab}x{hidden}, its "
            f"base {printable(base)} {config.get('vocab_size')}x{config.get('hidden_size')}: "
            "pass the RoBERTa it was trained from (roberta-large for AlignScore-large)"
        )
    config.update(
        architectures=["RobertaForSequenceClassification"],
        id2label={str(i): name for i, name in labels.items()},
        label2id={name: i for i, name in labels.items()},
        num_labels=len(labels),
        problem_type="single_label_classification",
        **{CHECKER_KEY: "alignscore", "faithgate_alignscore_head": head},
    )
    config.pop("_name_or_path", None)
    return _save(Path(dest), config, weights, base, log)


def convert_hhem(
    source: str | Path,
    foundation: str | Path,
    dest: str | Path,
    log: Callable[[str], None] = lambda msg: None,
) -> Path:
    """Convert an HHEM-2.1-open directory (``config.json`` of ``HHEMv2``, weights under
    ``t5.``) into a self-contained ``T5ForTokenClassification`` directory; ``foundation`` is
    a local directory of the Flan-T5 it names (configuration and tokenizer)."""
    from safetensors.torch import load_file

    source, foundation = Path(source), Path(foundation)
    hhem_config = _read_config(source)
    files = sorted(source.glob("*.safetensors"))
    if not files:
        raise ModelFileError(f"{printable(source)} has no .safetensors weights")
    weights: dict[str, Any] = {}
    for file in files:
        for key, tensor in load_file(str(file)).items():
            if key.startswith("t5."):
                weights[key[3:]] = tensor
    # T5's shared embedding and the encoder's are one tensor: a checkpoint may keep either.
    embed = weights.pop("transformer.encoder.embed_tokens.weight", None)
    if "transformer.shared.weight" not in weights and embed is not None:
        weights["transformer.shared.weight"] = embed
    if "classifier.weight" not in weights or "transformer.shared.weight" not in weights:
        raise ModelFileError(
            f"{printable(source)} is not an HHEM-2 checkpoint: no t5.classifier / "
            "t5.transformer.shared weights"
        )
    config = _read_config(foundation)
    if config.get("model_type") != "t5":
        raise InputError(f"HHEM foundation {printable(foundation)} is not a T5 model")
    n_labels, hidden = weights["classifier.weight"].shape
    if n_labels != 2 or hidden != config.get("d_model"):
        raise InputError(
            f"HHEM checkpoint {printable(source)} has a {n_labels}x{hidden} classifier; its "
            f"foundation {printable(foundation)} has d_model {config.get('d_model')}"
        )
    prompt = hhem_config.get("prompt") or HHEM_PROMPT
    config.update(
        architectures=["T5ForTokenClassification"],
        id2label={str(i): name for i, name in HHEM_LABELS.items()},
        label2id={name: i for i, name in HHEM_LABELS.items()},
        num_labels=2,
        **{CHECKER_KEY: "hhem", PROMPT_KEY: prompt},
    )
    config.pop("_name_or_path", None)
    return _save(Path(dest), config, weights, foundation, log)


def download_and_convert(
    hub_id: str, dest: Path, variant: str = "large", log: Callable[[str], None] = print
) -> Path:
    """Fetch a published checker from the hub and convert it into ``dest``
    (``--allow-download``): AlignScore's ``.ckpt`` with its RoBERTa's configuration and
    tokenizer, or HHEM-2.1-open with Flan-T5-base's."""
    from huggingface_hub import hf_hub_download, snapshot_download

    config_files = ["config.json", "*.json", "*.txt", "*.model"]
    if hub_id == ALIGNSCORE_HUB:
        if variant not in ALIGNSCORE_FILES:
            raise InputError(f"AlignScore variant must be one of: {', '.join(ALIGNSCORE_FILES)}")
        log(f"downloading {hub_id}/{ALIGNSCORE_FILES[variant]}")
        ckpt = hf_hub_download(hub_id, ALIGNSCORE_FILES[variant])
        base = snapshot_download(ALIGNSCORE_BASES[variant], allow_patterns=config_files)
        return convert_alignscore(ckpt, base, dest, log=log)
    if hub_id == HHEM_HUB:
        log(f"downloading {hub_id}")
        source = snapshot_download(hub_id, allow_patterns=["config.json", "*.safetensors"])
        foundation = snapshot_download(HHEM_FOUNDATION, allow_patterns=config_files)
        return convert_hhem(source, foundation, dest, log=log)
    raise InputError(f"no converter for {hub_id!r}; converted: {ALIGNSCORE_HUB}, {HHEM_HUB}")


# Hub ids whose published form needs ``download_and_convert`` (``faithgate.models.resolve``).
CONVERTED_HUB_IDS = (ALIGNSCORE_HUB, HHEM_HUB)
