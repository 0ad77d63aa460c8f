"""Loading transformers models and tokenizers: the helpers every torch task module shares.

Kept apart from ``torch_backend`` so ``torch_lm`` and ``torch_qa`` build on them while
``torch_backend`` dispatches to those modules (no import cycle). Torch-free at import.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from faithgate.errors import BackendError, ModelFileError
from faithgate.models import ModelSpec, quiet_legacy_notice
from faithgate.safety.escape import printable, safe_line


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

    quiet_legacy_notice()
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


# What kind of model an architecture name (``config.architectures``) says a checkpoint is,
# by the suffix transformers gives its task heads. XLNet's ``XLNetLMHeadModel`` is its
# pretraining checkpoint (a permutation LM, used as an encoder by BERTScore): no kind.
_NAME_KINDS = (
    ("ForSequenceClassification", "classifier"),
    ("ForQuestionAnswering", "qa"),
    ("ForMaskedLM", "masked-lm"),
    ("ForCausalLM", "causal-lm"),
    ("LMHeadModel", "causal-lm"),  # GPT2LMHeadModel, BertLMHeadModel
)
_KIND_NAMES = {
    "classifier": "a sequence classifier",
    "qa": "an extractive QA model",
    "masked-lm": "a masked language model",
    "causal-lm": "a causal (decoder-only) language model",
    "seq2seq": "an encoder-decoder (sequence-to-sequence) model",
}
# Per task: what it needs (for the message) and the kinds that are clearly something else.
# A masked LM stays a text encoder (BERTScore's checkpoints are ``*ForMaskedLM``); a
# classifier does not: its trunk was fine-tuned for its head, not for embeddings.
TASK_KINDS: dict[str, tuple[str, frozenset[str]]] = {
    "text-encoder": (
        "a text encoder (a sentence-transformers or BERT-style model)",
        frozenset({"causal-lm", "seq2seq", "classifier"}),
    ),
    "pair-classifier": (
        "an NLI classifier (*ForSequenceClassification)",
        frozenset({"causal-lm", "seq2seq", "masked-lm", "qa"}),
    ),
    "causal-lm": (
        "a decoder-only language model (*ForCausalLM)",
        frozenset({"seq2seq", "classifier", "masked-lm", "qa"}),
    ),
    "seq2seq-lm": (
        "an encoder-decoder model (*ForConditionalGeneration)",
        frozenset({"causal-lm", "classifier", "masked-lm", "qa"}),
    ),
    "text-generator": (
        "an encoder-decoder model (*ForConditionalGeneration)",
        frozenset({"causal-lm", "classifier", "masked-lm", "qa"}),
    ),
    "extractive-qa": (
        "an extractive QA model (*ForQuestionAnswering)",
        frozenset({"causal-lm", "seq2seq", "classifier", "masked-lm"}),
    ),
}
# Buffers transformers may list as missing though nothing was lost (rebuilt at load).
_REBUILT_BUFFERS = re.compile(r"(^|\.)(position_ids|inv_freq|masked_bias|attn\.bias)$")
# Weights a task never reads, so a checkpoint may lack them: an encoder's pooler (the text
# encoder reads hidden states only).
_UNUSED_WEIGHTS: dict[str, re.Pattern[str]] = {"text-encoder": re.compile(r"(^|\.)pooler\.")}


def model_kind(config: Any) -> tuple[str, str] | None:
    """``(kind, architecture)`` of a transformers config, from ``architectures`` (a key of
    ``_KIND_NAMES``), or None when nothing says. ``*ForConditionalGeneration`` is an
    encoder-decoder only when ``is_encoder_decoder`` says so (Gemma 3's is a decoder)."""
    names = [a for a in (getattr(config, "architectures", None) or []) if isinstance(a, str)]
    encoder_decoder = bool(getattr(config, "is_encoder_decoder", False))
    for name in names:
        if name == "XLNetLMHeadModel":
            continue
        for suffix, kind in _NAME_KINDS:
            if name.endswith(suffix):
                return kind, name
        if encoder_decoder and name.endswith(("ForConditionalGeneration", "ForSeq2SeqLM")):
            return "seq2seq", name
    # An encoder-decoder config with no head named (T5EncoderModel keeps T5's config: no kind).
    if encoder_decoder and not any(name.endswith("EncoderModel") for name in names):
        return "seq2seq", names[0] if names else getattr(config, "model_type", "?")
    return None


def model_label(spec: ModelSpec) -> str:
    """The model's name for messages, with its location when that differs."""
    location = str(spec.location)
    return repr(spec.name) if spec.name == location else f"{spec.name!r} ({location})"


def check_model_kind(spec: ModelSpec, task: str, config: Any) -> None:
    """Refuse (``ModelFileError``, exit 2) a checkpoint whose architecture is clearly of
    another kind than ``task`` needs: it would load (transformers takes the trunk of any
    checkpoint) and score without complaint, wrongly."""
    if task not in TASK_KINDS:
        return
    wanted, refused = TASK_KINDS[task]
    found = model_kind(config)
    if found is not None and found[0] in refused:
        kind, arch = found
        if task == "causal-lm" and kind == "seq2seq":
            # The likelihood metrics score with an encoder-decoder as the seq2seq role.
            raise ModelFileError(
                f"{spec.role} model {model_label(spec)} is {_KIND_NAMES[kind]} ({arch}), "
                f"not {wanted}: pass it as the seq2seq role instead (--model seq2seq=..., "
                '[tool.faithgate.models] seq2seq = "..."); the likelihood metrics then '
                "score with it"
            )
        raise ModelFileError(
            f"{spec.role} model {model_label(spec)} is {_KIND_NAMES[kind]} ({arch}), "
            f"not {wanted}: pass a model of that kind with --model {spec.role}=..."
        )


def check_loading_info(spec: ModelSpec, task: str, info: dict[str, Any]) -> None:
    """Refuse a checkpoint that lacks weights the model needs: transformers initialises them
    at random, so the scores would change from one run to the next under one settings hash."""
    unused = _UNUSED_WEIGHTS.get(task)
    missing = sorted(
        str(k)
        for k in info.get("missing_keys") or ()
        if not _REBUILT_BUFFERS.search(str(k)) and not (unused and unused.search(str(k)))
    )
    if missing:
        shown = ", ".join(missing[:4]) + (
            f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        )
        what = TASK_KINDS[task][0] if task in TASK_KINDS else f"a {task} model"
        raise ModelFileError(
            f"{spec.role} model {model_label(spec)} lacks weights {what} needs ({shown}): "
            "they would be initialised at random; pass a complete checkpoint of that kind"
        )


def _drop_missing_weights_warning(record: logging.LogRecord) -> bool:
    """transformers' "Some weights of ... are newly initialized" warning (two lines on stderr)
    while ``load_hf_model`` runs: it refuses such a checkpoint itself, in one line, or accepts
    one whose only missing weights the task never reads (an encoder's pooler)."""
    message = record.getMessage()
    return not (message.startswith("Some weights of") and "newly initialized" in message)


@contextmanager
def load_warnings_to(log: Callable[[str], None], location: str) -> Iterator[None]:
    """While a model loads from ``location``: transformers' warnings about its weights ("Some
    weights of ... were not initialized from the model checkpoint at <location> ...") go to
    ``log`` as escaped lines (``safe_line``), not raw to stderr: a path can hold terminal
    escapes or a line GitHub's runner takes for a workflow command. The advice to train the
    model is left out (the caller is training it)."""
    caught: list[str] = []

    def catch(record: logging.LogRecord) -> bool:
        caught.append(record.getMessage())
        return False

    transformers_log = logging.getLogger("transformers.modeling_utils")
    transformers_log.addFilter(catch)
    try:
        yield
    finally:
        transformers_log.removeFilter(catch)
        for message in caught:
            for line in message.replace(location, printable(location)).split("\n"):
                if line.strip() and not line.startswith("You should probably TRAIN"):
                    log(safe_line(line))


def load_hf_model(spec: ModelSpec, auto_class: Any, task: str = "") -> Any:
    """``auto_class.from_pretrained`` of ``spec``, refused when it is not a ``task`` model
    (``check_model_kind``, read from the saved config before any weight loads: a model class
    may rewrite its config, BART's causal-LM class clears ``is_encoder_decoder``) or when
    weights were missing (``check_loading_info``)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(spec.location, **hf_kwargs(spec))
    except Exception as exc:
        raise load_error(spec)(f"cannot load {spec.role} model {spec.name!r}: {exc}") from exc
    check_model_kind(spec, task, config)
    transformers_log = logging.getLogger("transformers.modeling_utils")
    transformers_log.addFilter(_drop_missing_weights_warning)
    try:
        model, info = auto_class.from_pretrained(
            spec.location, use_safetensors=True, output_loading_info=True, **hf_kwargs(spec)
        )
    except Exception as exc:
        raise load_error(spec)(f"cannot load {spec.role} model {spec.name!r}: {exc}") from exc
    finally:
        transformers_log.removeFilter(_drop_missing_weights_warning)
    check_loading_info(spec, task, info)
    model.eval()
    return model
