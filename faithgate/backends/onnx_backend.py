"""onnxruntime backend: the torch-free runtime over models exported by ``faithgate export``.

Imports only onnxruntime, ``tokenizers`` (the Rust library, reading ``tokenizer.json``) and
numpy, so ``pip install 'faithgate[runtime]'`` scores without torch or transformers. Every task
model mirrors its torch reference in ``torch_backend`` / ``torch_lm`` step for step (same
tokenization, windowing, batching and padding), so scores agree within float rounding (fp32)
or within the parity gate measured at export (int8).

Here: the text encoder, the pair classifier and the backend (``OnnxBackend``: loading, and
what identifies a model it runs). Sessions, providers and int8 forms are in ``onnx_session``;
the language models in ``onnx_lm``. ``threads`` sets onnxruntime's intra-op thread count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from faithgate.backends.base import (
    Backend,
    PairClassifier,
    RoleModel,
    TextEncoder,
    TokenEmbeddings,
)
from faithgate.backends.manifest import ExportManifest, find_export
from faithgate.backends.onnx_lm import OnnxCausalLM, OnnxSeq2SeqLM
from faithgate.backends.onnx_session import OnnxRole, hashed_provider
from faithgate.backends.onnx_session import cuda_usable as cuda_usable
from faithgate.backends.onnx_session import drop_sessions as drop_sessions
from faithgate.backends.onnx_session import get_session as get_session
from faithgate.backends.onnx_session import int8_weights_form as int8_weights_form
from faithgate.backends.onnx_session import providers_for as providers_for
from faithgate.backends.windowing import (
    DEFAULT_STRIDE,
    embed_in_windows,
    equal_length_batches,
    pool_and_normalise,
    run_in_length_order,
    window_stride,
)
from faithgate.errors import BackendError
from faithgate.models import ModelSpec


class OnnxTextEncoder(OnnxRole, TextEncoder):
    def __init__(
        self,
        spec: ModelSpec,
        manifest: ExportManifest,
        batch_size: int = 32,
        stride: int | None = None,
        threads: int | None = None,
        provider: str | None = None,
    ) -> None:
        TextEncoder.__init__(self, spec, backend="onnx", quantization=manifest.quantization)
        self._setup(manifest, threads, provider)
        self.batch_size = batch_size
        self.pooling = self.config.get("pooling", "mean")
        self.prefix = list(self.config["special_prefix"])
        self.suffix = list(self.config["special_suffix"])
        self.session = self.sessions["model"]
        # The option, checked against the window token_embeddings uses; else the export's.
        self.stride = window_stride(
            stride,
            self.max_length - len(self.prefix) - len(self.suffix),
            spec.role,
            default=int(self.config.get("stride", DEFAULT_STRIDE)),
        )

    def _output_name(self, layer: int | None) -> str:
        if layer is None:
            return "last_hidden_state"
        n = int(self.config["num_layers"]) + 1
        if not -n <= layer < n:
            # IndexError, as the torch backend's hidden-state tuple raises (metrics catch it)
            raise IndexError(f"layer {layer} out of range for a model with {n - 1} layers")
        return f"hidden_states.{layer % n}"

    def _forward(self, batch_ids: list[list[int]], layer: int | None) -> list[np.ndarray]:
        ids, mask = self._pad(batch_ids, int(self.config["pad_id"]))
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names["model"]:
            feeds["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = self.session.run([self._output_name(layer)], feeds)
        return [hidden[i, : len(r)].astype(np.float32) for i, r in enumerate(batch_ids)]

    def token_embeddings(
        self, texts: Sequence[str], layer: int | None = None
    ) -> list[TokenEmbeddings]:
        inner = self.max_length - len(self.prefix) - len(self.suffix)
        encoded = [self.tokenizer.encode(t, add_special_tokens=False) for t in texts]
        embedded = embed_in_windows(
            [enc.ids for enc in encoded],
            (inner, self.stride),
            (lambda ids: self.prefix + ids + self.suffix, len(self.prefix), len(self.suffix)),
            lambda b: self._forward(b, layer),
            self.batch_size,
            int(self.config["hidden_size"]),
        )
        return [
            TokenEmbeddings(list(enc.tokens), vecs, windowed=windowed)
            for enc, (vecs, windowed) in zip(encoded, embedded, strict=True)
        ]

    def sentence_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        inner = self.max_length - len(self.prefix) - len(self.suffix)
        seqs = [
            self.prefix
            + list(self.tokenizer.encode(t, add_special_tokens=False).ids[:inner])
            + self.suffix
            for t in texts
        ]
        vectors = run_in_length_order(seqs, self.batch_size, lambda b: self._forward(b, None))
        return pool_and_normalise(vectors, self.pooling, int(self.config["hidden_size"]))

    def calibration_feeds(self, texts: Sequence[str]) -> list[dict[str, np.ndarray]]:
        """Model inputs for static quantization: one feed per text."""
        feeds = []
        inner = self.max_length - len(self.prefix) - len(self.suffix)
        for t in texts:
            ids = self.prefix + self.tokenizer.encode(t, add_special_tokens=False).ids[:inner]
            arr, mask = self._pad([ids + self.suffix], int(self.config["pad_id"]))
            feed = {"input_ids": arr, "attention_mask": mask}
            if "token_type_ids" in self.input_names["model"]:
                feed["token_type_ids"] = np.zeros_like(arr)
            feeds.append(feed)
        return feeds


class OnnxPairClassifier(OnnxRole, PairClassifier):
    def __init__(
        self,
        spec: ModelSpec,
        manifest: ExportManifest,
        batch_size: int = 16,
        threads: int | None = None,
        provider: str | None = None,
        labels: Sequence[str] | None = None,
        supported_label: str | None = None,
    ) -> None:
        PairClassifier.__init__(self, spec, backend="onnx", quantization=manifest.quantization)
        self._setup(manifest, threads, provider)
        self.batch_size = batch_size
        self.set_label_override(labels, supported_label, list(self.config["labels"]))
        self.session = self.sessions["model"]
        # The tokenizer's own post-processor and truncation: what transformers' fast
        # tokenizer calls under tokenizer(premises, hypotheses, truncation="only_first").
        from tokenizers import Tokenizer

        assert manifest.directory is not None
        self.pair_tokenizer = Tokenizer.from_file(str(manifest.directory / "tokenizer.json"))
        self.pair_tokenizer.no_padding()
        self.pair_tokenizer.enable_truncation(self.max_length, strategy="only_first")
        # Single texts (``predict_proba_texts``): cut at their end, as transformers does.
        self.single_tokenizer = Tokenizer.from_file(str(manifest.directory / "tokenizer.json"))
        self.single_tokenizer.no_padding()
        self.single_tokenizer.enable_truncation(self.max_length)

        # HHEM (faithgate.backends.torch_hhem): each pair is one prompt, never cut.
        self.prompt = self.config.get("prompt")
        if self.prompt:
            self.pair_tokenizer.no_truncation()

    @property
    def pair_special_tokens(self) -> int:
        processor = self.pair_tokenizer.post_processor
        if processor is None:
            return 0
        return int(processor.num_special_tokens_to_add(True))

    @property
    def labels(self) -> list[str]:
        return self.apply_label_override(list(self.config["labels"]))

    def _feeds(self, premises: Sequence[str], hypotheses: Sequence[str]) -> dict[str, np.ndarray]:
        batch = list(zip(premises, hypotheses, strict=True))
        try:
            if self.prompt:
                batch = [self.prompt.format(text1=p, text2=h) for p, h in batch]
            encs = self.pair_tokenizer.encode_batch(batch)
        except Exception:  # noqa: BLE001 - a hypothesis alone longer than the window
            # only_first cannot fit it; cut both sides instead of failing the batch (the NLI
            # metrics split such a hypothesis into pieces first, so they never reach this).
            self.pair_tokenizer.enable_truncation(self.max_length, strategy="longest_first")
            try:
                encs = self.pair_tokenizer.encode_batch(batch)
            finally:
                self.pair_tokenizer.enable_truncation(self.max_length, strategy="only_first")
        ids, mask = self._pad([e.ids for e in encs], int(self.config["pad_id"]))
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names["model"]:
            types = np.zeros_like(ids)
            for i, e in enumerate(encs):
                types[i, : len(e.type_ids)] = e.type_ids
            feeds["token_type_ids"] = types
        return feeds

    def predict_proba(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        if len(premises) != len(hypotheses):
            raise BackendError("predict_proba needs as many premises as hypotheses")
        premises, hypotheses = list(premises), list(hypotheses)
        out = np.zeros((len(premises), len(self.labels)), dtype=np.float64)
        if not premises:
            return out
        # Pairs of equal token length share a batch: no padding, so a pair's probabilities do
        # not depend on the other pairs scored with it (see backends.windowing).
        lengths = [int(m.sum()) for m in self._feeds(premises, hypotheses)["attention_mask"]]
        for idx in equal_length_batches(lengths, self.batch_size):
            feeds = self._feeds([premises[i] for i in idx], [hypotheses[i] for i in idx])
            (logits,) = self.session.run(["logits"], feeds)
            logits = logits.astype(np.float32)
            z = np.exp(logits - logits.max(axis=-1, keepdims=True))
            out[idx] = z / z.sum(axis=-1, keepdims=True)
        return out

    def calibration_feeds(self, texts: Sequence[str]) -> list[dict[str, np.ndarray]]:
        return [self._feeds([texts[i]], [texts[i + 1]]) for i in range(0, len(texts) - 1, 2)]

    @property
    def eos_text(self) -> str:
        """From the export's ``special_tokens_map.json`` (or ``tokenizer_config.json``), which
        the export copies beside ``tokenizer.json``: ``eos_token``, else ``sep_token``."""
        import json

        assert self.manifest.directory is not None
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            path = self.manifest.directory / name
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            for key in ("eos_token", "sep_token"):
                token = data.get(key) if isinstance(data, dict) else None
                if isinstance(token, dict):
                    token = token.get("content")
                if isinstance(token, str) and token:
                    return token
        raise BackendError(
            f"ONNX export {self.manifest.directory} names no eos token "
            "(special_tokens_map.json): re-export it"
        )

    def _single_feeds(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        encs = self.single_tokenizer.encode_batch(list(texts))
        ids, mask = self._pad([e.ids for e in encs], int(self.config["pad_id"]))
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names["model"]:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return feeds

    def predict_proba_texts(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), len(self.labels)), dtype=np.float64)
        if not texts:
            return out
        lengths = [int(m.sum()) for m in self._single_feeds(texts)["attention_mask"]]
        for idx in equal_length_batches(lengths, self.batch_size):
            (logits,) = self.session.run(["logits"], self._single_feeds([texts[i] for i in idx]))
            logits = logits.astype(np.float32)
            z = np.exp(logits - logits.max(axis=-1, keepdims=True))
            out[idx] = z / z.sum(axis=-1, keepdims=True)
        return out


# --- language models --------------------------------------------------------------------------


class OnnxBackend(Backend):
    """Loads exported models (see ``faithgate.backends.export``) into onnxruntime sessions."""

    name = "onnx"

    def identity(self, spec: ModelSpec, task: str, options: dict[str, Any]) -> dict[str, Any]:
        """The export's quantization, and the options with the provider the sessions run on,
        not the word configured: "auto" (or none) is CUDA where a session really gets it, the
        CPU elsewhere, and their scores differ slightly, so a CPU run and a CUDA run must not
        share a hash. An explicit "cuda" is recorded as written (a CPU Ray driver of GPU
        workers). A CPU run records none: "cpu", "auto" there and no provider hash the same."""
        fields: dict[str, Any] = {}
        # Here onnx is chosen (asked for, or auto found an export): a damaged manifest is the
        # error, not a warning that the run goes on torch.
        manifest = find_export(spec, task, strict=True)
        if manifest is not None:
            fields["quantization"] = manifest.quantization
        options = dict(options)
        if hashed_provider(options.pop("provider", None)) == "cuda":
            options["provider"] = "cuda"
        return {**fields, **super().identity(spec, task, options)}

    def precision(self, identity: dict[str, Any]) -> str:
        quantization = identity.get("quantization")
        if not quantization:
            return "-"
        return "fp32" if str(quantization) == "none" else str(quantization)

    def load(self, spec: ModelSpec, task: str, **options: Any) -> RoleModel:
        # strict: a damaged manifest is an error about it, not "no export" (auto skips it).
        manifest = find_export(spec, task, strict=True)
        if manifest is None:
            raise BackendError(
                f"no ONNX export of {spec.role} model {spec.name!r} for {task}: run "
                f"`faithgate export {spec.role}` (or use --backend torch)"
            )
        return self.load_manifest(manifest, spec=spec, **options)

    def load_manifest(
        self, manifest: ExportManifest, spec: ModelSpec | None = None, **options: Any
    ) -> RoleModel:
        """Load an export directly from its manifest (used at export time for parity)."""
        if spec is None:
            src = manifest.source
            spec = ModelSpec(
                manifest.role,
                src.get("name", manifest.role),
                str(manifest.directory),
                "path",
                revision=src.get("revision"),
            )
        options = {k: v for k, v in options.items() if v is not None}
        classes: dict[str, Any] = {
            "text-encoder": OnnxTextEncoder,
            "pair-classifier": OnnxPairClassifier,
            "causal-lm": OnnxCausalLM,
            "seq2seq-lm": OnnxSeq2SeqLM,
        }
        cls = classes.get(manifest.task)
        if cls is None:
            raise BackendError(f"the onnx backend has no task {manifest.task!r}")
        return cls(spec, manifest, **options)
