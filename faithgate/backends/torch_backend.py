"""PyTorch + transformers backend: the reference implementation every other backend matches."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.backends import options_for
from faithgate.backends.base import (
    Backend,
    PairClassifier,
    RoleModel,
    TextEncoder,
    TokenEmbeddings,
)
from faithgate.backends.torch_common import (  # noqa: F401 - re-exported for old imports
    hf_kwargs,
    import_torch,
    load_hf_model,
    load_tokenizer,
    model_label,
)
from faithgate.backends.torch_lm import load_language_model
from faithgate.backends.torch_qa import load_qa_model
from faithgate.backends.windowing import (  # noqa: F401 - re-exported for old imports
    ST_POOLINGS,
    embed_in_windows,
    equal_length_batches,
    pool_and_normalise,
    pooling_modes,
    read_pooling,
    run_in_length_order,
    stitch_windows,
    token_windows,
    window_stride,
)
from faithgate.errors import BackendError, ModelFileError
from faithgate.models import ModelSpec
from faithgate.threads import warn_if_torch_came_first


class _TokenizedModel:
    """Window size and token counts of a transformers model and its tokenizer."""

    model: Any
    tokenizer: Any

    @property
    def max_length(self) -> int:
        limit = getattr(self.model.config, "max_position_embeddings", 512)
        tok_limit = self.tokenizer.model_max_length
        return int(min(limit, tok_limit if tok_limit and tok_limit < 1e6 else limit))

    def count_tokens(self, text: str) -> int:
        # verbose=False: long texts are windowed on purpose, no length warning wanted.
        return len(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def unknown_only(self, text: str) -> bool:
        ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        unk = self.tokenizer.unk_token_id
        return bool(ids) and unk is not None and all(i == unk for i in ids)


# The sentence-transformers modules the text encoder reproduces: the transformer, its pooling
# (cls or mean, ``windowing.pool_and_normalise``) and the L2 normalisation it always applies.
_ST_MODULES = ("Transformer", "Pooling", "Normalize")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError included
        raise ModelFileError(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc


def sentence_pooling(spec: ModelSpec) -> str:
    """The pooling of a sentence-transformers model (``cls`` or ``mean``; ``mean`` when the
    directory has no ``1_Pooling``), as ``windowing.read_pooling`` reads it for an ONNX
    export, after refusing (``ModelFileError``, exit 2) what the encoder would not reproduce:
    another pooling (max, last token, sqrt-length, weighted mean, several at once), a module
    such as ``Dense`` in ``modules.json``, or a damaged file. A hub id (downloads are on) has
    those two files fetched first: ``from_pretrained`` alone would not bring them."""
    root = _hub_sentence_files(spec) if spec.origin == "hub" else Path(str(spec.location))
    if root is None or not root.is_dir():
        return "mean"
    modules_file = root / "modules.json"
    if modules_file.is_file():
        modules = _read_json(modules_file)
        if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
            raise ModelFileError(f"cannot read {modules_file}: not a list of modules")
        for module in modules:
            kind = str(module.get("type", "")).rsplit(".", 1)[-1]
            where = str(module.get("path", "")).strip("/")
            if kind not in _ST_MODULES or (kind == "Pooling" and where != "1_Pooling"):
                raise ModelFileError(
                    f"{spec.role} model {model_label(spec)} has a sentence-transformers module "
                    f"{kind or '?'} at {where or '?'!r} ({modules_file}) that faithgate does "
                    f"not apply; it runs only {', '.join(_ST_MODULES)} (1_Pooling: cls or mean)"
                )
    config_file = root / "1_Pooling" / "config.json"
    if not config_file.is_file():
        return read_pooling(spec.location)
    config = _read_json(config_file)
    if not isinstance(config, dict):
        raise ModelFileError(f"cannot read {config_file}: not a JSON object")
    modes = pooling_modes(config)
    if len(modes) != 1 or modes[0] not in ST_POOLINGS:
        raise ModelFileError(
            f"{spec.role} model {model_label(spec)} asks for pooling "
            f"{' + '.join(modes) or '(none)'} in {config_file}; faithgate pools by "
            "pooling_mode_cls_token or pooling_mode_mean_tokens only"
        )
    return ST_POOLINGS[modes[0]]  # what read_pooling reads for it too


def _hub_sentence_files(spec: ModelSpec) -> Path | None:
    """The snapshot directory in the Hugging Face cache holding ``spec``'s ``modules.json``
    and ``1_Pooling/config.json`` at its revision, fetched there (as sentence-transformers
    would) when the repository has them; None when it has neither (a plain transformers
    model: mean pooling). A hub that cannot be asked is a ``ModelNotFoundError``, not a guess:
    the pooling decides every vector."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError
    except ImportError:
        return None  # transformers could not load a hub id without it either
    from faithgate.errors import ModelNotFoundError
    from faithgate.models import hf_hub_cache, hub_problem

    snapshot = None
    for name, depth in (("modules.json", 1), ("1_Pooling/config.json", 2)):
        try:
            found = hf_hub_download(
                spec.name, name, revision=spec.revision, cache_dir=str(hf_hub_cache())
            )
        except Exception as exc:  # huggingface_hub raises many types; report one line
            # The hub says the file is absent; the local form means the hub was not reached.
            if isinstance(exc, EntryNotFoundError) and not isinstance(exc, LocalEntryNotFoundError):
                continue
            raise ModelNotFoundError(
                f"cannot read the sentence pooling of {spec.role} model {spec.name!r} from the "
                f"hub ({hub_problem(exc)}); point the role at a local directory"
            ) from None
        snapshot = Path(found).parents[depth - 1]
    return snapshot


class TorchTextEncoder(_TokenizedModel, TextEncoder):
    def __init__(self, spec: ModelSpec, batch_size: int = 32, stride: int | None = None) -> None:
        super().__init__(spec, backend="torch")
        self.torch = import_torch()
        from transformers import AutoModel

        self.pooling = sentence_pooling(spec)  # before the weights: a refusal costs nothing
        self.tokenizer = load_tokenizer(spec)
        self.model = load_hf_model(spec, AutoModel, self.task)
        self.batch_size = batch_size
        self.stride = window_stride(stride, self.max_length - 2, spec.role)  # [CLS], [SEP]

    def _forward(self, batch_ids: list[list[int]], layer: int | None) -> list[np.ndarray]:
        """Run id sequences (special tokens included) and return per-token vectors."""
        torch = self.torch
        pad = self.tokenizer.pad_token_id or 0
        width = max(len(ids) for ids in batch_ids)
        input_ids = torch.full((len(batch_ids), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch_ids), width), dtype=torch.long)
        for i, ids in enumerate(batch_ids):
            input_ids[i, : len(ids)] = torch.tensor(ids)
            mask[i, : len(ids)] = 1
        with torch.inference_mode():
            out = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        hidden = out.hidden_states[-1 if layer is None else layer]
        return [hidden[i, : len(ids)].float().numpy() for i, ids in enumerate(batch_ids)]

    def token_embeddings(
        self, texts: Sequence[str], layer: int | None = None
    ) -> list[TokenEmbeddings]:
        tok = self.tokenizer
        encoded = [tok(t, add_special_tokens=False, verbose=False)["input_ids"] for t in texts]
        embedded = embed_in_windows(
            encoded,
            (self.max_length - 2, self.stride),  # room for [CLS] and [SEP]
            (tok.build_inputs_with_special_tokens, 1, 1),  # [CLS]/[SEP] dropped again
            lambda b: self._forward(b, layer),
            self.batch_size,
            self.model.config.hidden_size,
        )
        return [
            TokenEmbeddings(tok.convert_ids_to_tokens(ids), vecs, windowed=windowed)
            for ids, (vecs, windowed) in zip(encoded, embedded, strict=True)
        ]

    def sentence_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        tok = self.tokenizer
        seqs = [tok(t, truncation=True, max_length=self.max_length)["input_ids"] for t in texts]
        vectors = run_in_length_order(seqs, self.batch_size, lambda b: self._forward(b, None))
        return pool_and_normalise(vectors, self.pooling, self.model.config.hidden_size)


class TorchPairClassifier(_TokenizedModel, PairClassifier):
    def __init__(
        self,
        spec: ModelSpec,
        batch_size: int = 16,
        labels: Sequence[str] | None = None,
        supported_label: str | None = None,
    ) -> None:
        super().__init__(spec, backend="torch")
        self.torch = import_torch()
        from transformers import AutoModelForSequenceClassification

        self.tokenizer = load_tokenizer(spec)
        self.model = load_hf_model(spec, AutoModelForSequenceClassification, self.task)
        self.batch_size = batch_size
        self.set_label_override(labels, supported_label, self._native_labels())

    @property
    def pair_special_tokens(self) -> int:
        return int(self.tokenizer.num_special_tokens_to_add(pair=True))

    def _native_labels(self) -> list[str]:
        id2label = self.model.config.id2label
        return [str(id2label[i]).lower() for i in range(len(id2label))]

    @property
    def labels(self) -> list[str]:
        return self.apply_label_override(self._native_labels())

    def _encode(self, premises: list[str], hypotheses: list[str], tensors: bool = True) -> Any:
        """Cut the premise (the source side) to fit; when a hypothesis alone is longer than the
        window, only_first cannot fit it, so cut both sides (as the onnxruntime backend does;
        the NLI metrics split such a hypothesis first, so they never reach this).
        ``tensors=False``: plain id lists, unpadded (to read the lengths)."""
        kwargs: dict[str, Any] = {"max_length": self.max_length}
        if tensors:
            kwargs.update(padding=True, return_tensors="pt")
        try:
            return self.tokenizer(premises, hypotheses, truncation="only_first", **kwargs)
        except Exception:  # noqa: BLE001 - tokenizers raises a bare Exception for this case
            return self.tokenizer(premises, hypotheses, truncation="longest_first", **kwargs)

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        torch = self.torch
        premises, hypotheses = list(premises), list(hypotheses)
        out = np.zeros((len(premises), len(self.labels)), dtype=np.float64)
        if not premises:
            return out
        # Pairs of equal token length share a batch: no padding, so a pair's probabilities do
        # not depend on the other pairs scored with it (see backends.windowing).
        lengths = [len(ids) for ids in self._encode(premises, hypotheses, False)["input_ids"]]
        for idx in equal_length_batches(lengths, self.batch_size):
            enc = self._encode([premises[i] for i in idx], [hypotheses[i] for i in idx])
            with torch.inference_mode():
                logits = self.model(**enc).logits.float()
            out[idx] = torch.softmax(logits, dim=-1).numpy()
        return out

    @property
    def eos_text(self) -> str:
        tok = self.tokenizer
        text = tok.eos_token or tok.sep_token
        if not text:
            raise BackendError(f"nli model {self.spec.name!r}: its tokenizer has no eos token")
        return str(text)

    def predict_proba_texts(self, texts: Sequence[str]) -> np.ndarray:
        torch = self.torch
        texts = list(texts)
        out = np.zeros((len(texts), len(self.labels)), dtype=np.float64)
        if not texts:
            return out
        kwargs: dict[str, Any] = {"max_length": self.max_length, "truncation": True}
        lengths = [len(ids) for ids in self.tokenizer(texts, **kwargs)["input_ids"]]
        # Equal token lengths share a batch (no padding): a text's probabilities do not depend
        # on the texts scored with it.
        for idx in equal_length_batches(lengths, self.batch_size):
            enc = self.tokenizer([texts[i] for i in idx], return_tensors="pt", **kwargs)
            with torch.inference_mode():
                logits = self.model(**enc).logits.float()
            out[idx] = torch.softmax(logits, dim=-1).numpy()
        return out


class TorchBackend(Backend):
    name = "torch"

    def precision(self, identity: dict[str, Any]) -> str:
        return "fp32"  # weights loaded as stored, in float32

    def load(self, spec: ModelSpec, task: str, **options: Any) -> RoleModel:
        # Options only another backend understands (onnxruntime's threads/provider) are
        # dropped by the dispatch table, ``faithgate.backends.options_for``; provider "cuda"
        # is refused there (this backend runs on the CPU only).
        options = options_for(self.name, options, spec.role, task)
        warn_if_torch_came_first()  # MKL's reproducible mode needs faithgate before torch
        if task == "text-encoder":
            return TorchTextEncoder(spec, **options)
        if task == "pair-classifier":
            from faithgate.backends.torch_hhem import TorchHHEM, checker_kind

            if checker_kind(spec) == "hhem":  # one prompt per pair, T5 (faithgate.convert)
                return TorchHHEM(spec, **options)
            return TorchPairClassifier(spec, **options)
        if task in ("causal-lm", "seq2seq-lm"):
            return load_language_model(spec, task, **options)
        if task in ("text-generator", "extractive-qa"):
            return load_qa_model(spec, task, **options)
        raise BackendError(f"the torch backend has no task {task!r}")
