"""onnxruntime backend: the torch-free runtime over models exported by ``faithgate export``.

Imports only onnxruntime, ``tokenizers`` (the Rust library, reading ``tokenizer.json``) and
numpy, so ``pip install 'faithgate[runtime]'`` scores without torch or transformers. Every task
model mirrors its torch reference in ``torch_backend`` / ``torch_lm`` step for step (same
tokenization, windowing, batching and padding), so scores agree within float rounding (fp32)
or within the parity gate measured at export (int8).

Sessions are created once per process per (file, threads, providers) and shared (a file
replaced under the same name, by a re-export, gets a new session; ``drop_sessions`` lets go of
a directory's); CPU by default, CUDA first when onnxruntime-gpu sees a GPU
(``provider="cuda"`` to insist, ``"cpu"`` to refuse it). ``threads`` sets onnxruntime's
intra-op thread count.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.backends.base import (
    Backend,
    LanguageModel,
    PairClassifier,
    RoleModel,
    TextEncoder,
    TokenEmbeddings,
    special_wrap,
)
from faithgate.backends.expand import (
    context_model_bytes,
    expanded_model_bytes,
    unsigned_model_bytes,
)
from faithgate.backends.lm_graph import SCORE_FROM
from faithgate.backends.manifest import AGAIN, MANIFEST_NAME, ExportManifest, find_export
from faithgate.backends.windowing import (
    DEFAULT_STRIDE,
    batches_by_token_budget,
    equal_length_batches,
    pool_and_normalise,
    run_in_length_order,
    split_by_sizes,
    stitch_windows,
    token_windows,
    window_stride,
)
from faithgate.errors import BackendError, ModelFileError
from faithgate.models import ModelSpec
from faithgate.threads import onnxruntime_spinning

log = logging.getLogger(__name__)

_SESSIONS: dict[tuple, Any] = {}
_SESSIONS_LOCK = threading.Lock()


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:
        raise BackendError(
            "the onnx backend needs onnxruntime: pip install 'faithgate[runtime]'"
        ) from exc
    return onnxruntime


# A one-node Identity graph (opset 13, float[1] -> float[1]), serialised: enough for a session
# to say which provider it really got, without the onnx package (not in the runtime extra).
_PROBE_MODEL = (
    b'\x08\x07:;\n\x10\n\x01x\x12\x01y"\x08Identity\x12\x05probeZ\x0f\n\x01x\x12\n\n\x08'
    b"\x08\x01\x12\x04\n\x02\x08\x01b\x0f\n\x01y\x12\n\n\x08\x08\x01\x12\x04\n\x02\x08\x01B\x04\n\x00\x10\r"
)
_CUDA_USABLE: list[bool] = []  # memo: one probe per process
_CUDA_PROBE_LOCK = threading.Lock()


def cuda_usable() -> bool:
    """Whether a session here really runs on CUDA, not only whether onnxruntime lists it.

    ``get_available_providers()`` names what the wheel was built with: onnxruntime-gpu lists
    CUDA on a machine without a GPU or without libcublas, and its sessions then fall back to
    the CPU. So a probe session is made once per process and asked what it got.
    """
    with _CUDA_PROBE_LOCK:
        if not _CUDA_USABLE:
            ort = _ort()
            usable = False
            if "CUDAExecutionProvider" in ort.get_available_providers():
                options = ort.SessionOptions()
                options.log_severity_level = 3  # the fallback's warning is this function's answer
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        probe = ort.InferenceSession(
                            _PROBE_MODEL,
                            sess_options=options,
                            providers=["CUDAExecutionProvider", "CPUExecutionProvider"],
                        )
                    usable = probe.get_providers()[0] == "CUDAExecutionProvider"
                except Exception:  # noqa: BLE001 - any failure to start CUDA means "not usable"
                    usable = False
            _CUDA_USABLE.append(usable)
        return _CUDA_USABLE[0]


def _wanted_provider(provider: str | None) -> str:
    wanted = (provider or "auto").lower()
    if wanted not in ("auto", "cpu", "cuda"):
        raise BackendError(f"unknown execution provider {provider!r}; choose auto, cpu or cuda")
    return wanted


def providers_for(provider: str | None = None) -> list[str]:
    """Execution providers: CUDA first where a session can run on it, CPU always last.

    ``cuda`` where CUDA cannot start here is an error rather than a quiet run on the CPU.
    """
    wanted = _wanted_provider(provider)
    if wanted == "cuda" and not cuda_usable():
        raise BackendError(
            "provider cuda asked for, but onnxruntime finds no CUDA device it can run on here "
            "(it needs onnxruntime-gpu, a GPU and the CUDA libraries)"
        )
    if wanted != "cpu" and cuda_usable():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def hashed_provider(provider: str | None = None) -> str:
    """The provider a settings hash records for ``provider``: ``"cuda"`` or ``"cpu"``.

    ``auto`` (or none) is resolved: CUDA where a probe session really runs on it
    (``cuda_usable``), else the CPU. An explicit ``cuda`` is recorded as written, without
    needing a GPU here: a CPU Ray driver hashes what its GPU workers will run.
    """
    wanted = _wanted_provider(provider)
    if wanted == "auto":
        return "cuda" if cuda_usable() else "cpu"
    return wanted


_INT8_WEIGHTS: list[str] = []  # memo: one probe per process
_INT8_PROBE_LOCK = threading.Lock()


def _integer_product_exact(weights: np.ndarray, zero_point: int | None) -> bool:
    """Whether onnxruntime's CPU ``MatMulInteger`` of uint8 activations (zero point 128) and
    the constant ``weights`` gives the exact integer product, on the inputs where a 16-bit
    accumulation saturates (255 x 127, twice) and on a few rows more."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    ort = _ort()
    k, n = weights.shape
    inits = [
        numpy_helper.from_array(weights, "w"),
        numpy_helper.from_array(np.array(128, np.uint8), "a0"),
    ]
    inputs = ["a", "w", "a0"]
    if zero_point is not None:
        inits.append(numpy_helper.from_array(np.array(zero_point, weights.dtype), "w0"))
        inputs.append("w0")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", inputs, ["y"])],
        "int8_probe",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [None, k])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [None, n])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    exact_w = weights.astype(np.int64) - (zero_point or 0)
    rng = np.random.default_rng(0)
    rows = np.stack([np.full(k, 255), np.zeros(k), np.tile([255, 0], k // 2)]).astype(np.uint8)
    feeds = [rows, rows[:1], rng.integers(0, 256, (8, k)).astype(np.uint8)]
    return all(
        np.array_equal(session.run(None, {"a": a})[0], (a.astype(np.int64) - 128) @ exact_w)
        for a in feeds
    )


def int8_weights_form() -> str:
    """How int8 weights of ``MatMulInteger`` must be loaded here for exact integer products:
    ``"int8"``, as stored, or ``"uint8"``, shifted by 128 (``expand.unsigned_int8_weights``).

    onnxruntime multiplies uint8 activations by int8 weights with ``vpmaddubsw`` on x86 CPUs
    without VNNI (AVX2: AMD Zen 1-3, Intel before Ice Lake), which adds two products in 16 bits
    and saturates: a w8a8 or int8-dynamic graph then scores differently, and wrongly, from the
    same file on a VNNI machine (19% off on random data here, an AVX2 AMD EPYC). uint8 x uint8
    is exact on both, so where int8 weights are not, they are loaded as uint8: the products
    are the same integers, the scores bit for bit those of a VNNI machine. Probed once per
    process; ``BackendError`` where neither form is exact (``w8a8`` and ``int8-dynamic``
    exports cannot run here; ``int8-static`` runs its QDQ graph unfused, ``w8a32-ctx8`` only its
    exact graph: ``get_session``).
    """
    with _INT8_PROBE_LOCK:
        if not _INT8_WEIGHTS:
            try:
                import onnx  # noqa: F401 - the probe and the rewrite build graphs with it
            except ImportError as exc:
                raise BackendError(
                    "w8a8 and int8-dynamic exports need the onnx package to check this CPU's "
                    "int8 arithmetic: pip install 'faithgate[runtime]'"
                ) from exc
            signed = np.tile(np.array([127, 127, -127, -128, 5, -3], np.int8), 11)[:64]
            weights = np.stack([signed, -np.maximum(signed, -127), np.roll(signed, 1)], axis=1)
            if _integer_product_exact(weights, None):
                _INT8_WEIGHTS.append("int8")
            elif _integer_product_exact((weights.astype(np.int16) + 128).astype(np.uint8), 128):
                _INT8_WEIGHTS.append("uint8")
            else:
                _INT8_WEIGHTS.append("")
        if not _INT8_WEIGHTS[0]:
            raise BackendError(
                "onnxruntime's int8 products are not exact on this CPU (uint8 x int8 nor "
                "uint8 x uint8): w8a8 and int8-dynamic exports cannot run here; "
                "export with --quantize w8a32"
            )
        return _INT8_WEIGHTS[0]


def _exact_int8_form() -> str:
    """``int8_weights_form``, or ``""`` where no int8 form is exact here (or it cannot be
    probed): for the graphs that then have an exact fallback."""
    try:
        return int8_weights_form()
    except BackendError:
        return ""


_CONTEXT_FALLBACK_WARNED: list[bool] = []  # one warning per process


# The in-memory forms a session can load a file as (get_session's ``graph``).
GRAPHS = ("stored", "expanded", "context-int8", "int8", "int8-qdq")
# Export modes whose graphs multiply in int8 (MatMulInteger) as stored: graph "int8".
INT8_PRODUCT_MODES = ("w8a8", "int8-dynamic")
# Export modes stored as QDQ graphs (Q/DQ around fp32 MatMuls), which onnxruntime fuses into
# int8 kernels at load: graph "int8-qdq".
INT8_QDQ_MODES = ("int8-static",)


def _file_identity(path: Path) -> tuple[int, ...]:
    """What tells the file now at ``path`` from an earlier one of that name: a re-export
    publishes new files under the same names, and a session of the old one would score the old
    graph under the new model's hash."""
    try:
        st = os.stat(path)
    except OSError:
        return ()  # no file: loading it fails below, with a one-line error
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def drop_sessions(directory: str | Path) -> None:
    """Forget the cached sessions of files under ``directory``. The cache holds the reference
    that keeps a session (and its weights) in memory: an export lets go of its temporary
    graphs' sessions after each parity run, and of those of the directory it replaced."""
    prefix = os.path.join(os.path.abspath(directory), "")
    with _SESSIONS_LOCK:
        for key in [k for k in _SESSIONS if k[0].startswith(prefix)]:
            del _SESSIONS[key]


def get_session(
    path: Path,
    threads: int | None = None,
    provider: str | None = None,
    graph: str = "stored",
) -> Any | None:
    """One ``InferenceSession`` per (file, threads, providers, graph) per process; a file
    replaced at ``path`` (``_file_identity``) is loaded again, and the old one's sessions
    dropped.

    ``graph`` is one of ``GRAPHS``: ``"stored"``, the file as it is; ``"expanded"``
    (``w8a32`` exports), its 8-bit weight blocks dequantized to fp32 once at load
    (``expand.expanded_model_bytes``): the same values at fp32 speed; ``"context-int8"``
    (``w8a32-ctx8`` exports), its int8 context graph (``expand.context_model_bytes``), or
    ``None`` where that cannot be built here (the exact graph then runs every pass);
    ``"int8"`` (``INT8_PRODUCT_MODES``), the file with its int8 weights in the form whose
    products are exact on this CPU (``int8_weights_form``); ``"int8-qdq"``
    (``INT8_QDQ_MODES``), the file as stored, with onnxruntime's QDQ fusion turned off where
    uint8 x int8 products are not exact here (the fused kernel saturates; unfused, the graph
    computes its dequantized values in fp32). The ``"int8"`` form's scores are therefore the
    same on every CPU; an ``"int8-qdq"`` graph's are the same up to fp32 rounding (its products
    summed as integers where fused, in fp32 where not).
    """
    if graph not in GRAPHS:
        raise ValueError(f"graph must be one of {GRAPHS}, not {graph!r}")
    ort = _ort()
    providers = providers_for(provider)
    name = os.path.abspath(path)
    identity = _file_identity(path)
    key = (name, int(threads or 0), tuple(providers), graph, identity)
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(key)
        if session is None and key not in _SESSIONS:
            # Sessions of a file no longer at this path are never asked for again.
            for old in [k for k in _SESSIONS if k[0] == name and k[4] != identity]:
                del _SESSIONS[old]
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # Idle threads sleep: spinning ones took the cores of a shared machine (threads.py).
            options.add_session_config_entry(
                "session.intra_op.allow_spinning", onnxruntime_spinning()
            )
            if threads:
                options.intra_op_num_threads = int(threads)
                options.inter_op_num_threads = 1
            if graph == "int8-qdq" and _exact_int8_form() != "int8":
                # Fused, a QDQ MatMul becomes one int8 kernel (QLinearMatMul) that saturates
                # in 16 bits on x86 without VNNI (25-46% off on a random MatMul); unfused, the
                # same Q/DQ values are multiplied in fp32, as the graph defines them.
                options.add_session_config_entry("session.disable_quant_qdq", "1")
            try:
                model = None
                if graph == "context-int8":
                    try:
                        model = context_model_bytes(path, int8_weights_form() == "uint8")
                    except BackendError as exc:
                        # No exact int8 form here: no context graph; the exact graph runs.
                        if not _CONTEXT_FALLBACK_WARNED:
                            _CONTEXT_FALLBACK_WARNED.append(True)
                            log.warning(
                                "w8a32-ctx8: cache-only passes run the exact graph: %s", exc
                            )
                        model = None
                elif graph == "expanded":
                    model = expanded_model_bytes(path)
                elif graph == "int8" and int8_weights_form() == "uint8":
                    model = unsigned_model_bytes(path)
                if graph == "context-int8" and model is None:
                    _SESSIONS[key] = None
                    return None
                session = ort.InferenceSession(
                    model if model is not None else str(path), options, providers=providers
                )
            except BackendError:
                raise  # this machine cannot run the form (int8_weights_form): not a bad file
            except Exception as exc:  # onnxruntime raises its own exception types
                # A file that exists but does not load is bad input (truncated, corrupt).
                raise ModelFileError(
                    f"cannot load ONNX model {path}: the file is damaged or not an ONNX model "
                    f"(export it again with `faithgate export`): {exc}"
                ) from exc
            _SESSIONS[key] = session
        return session


def _load_tokenizer(manifest: ExportManifest) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise BackendError(
            "the onnx backend needs tokenizers: pip install 'faithgate[runtime]'"
        ) from exc
    assert manifest.directory is not None
    path = manifest.directory / "tokenizer.json"
    if not path.is_file():
        raise BackendError(f"ONNX export {manifest.directory} has no tokenizer.json")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for a damaged file
        raise ModelFileError(f"cannot load {path}: not a valid tokenizer file ({exc})") from exc
    # Padding and truncation are done here, per call, exactly as the torch backend does.
    tok.no_padding()
    tok.no_truncation()
    return tok


class _OnnxRoleMixin:
    """Shared loading: manifest, tokenizer, session(s)."""

    manifest: ExportManifest

    def _setup(self, manifest: ExportManifest, threads: int | None, provider: str | None) -> None:
        self.manifest = manifest
        self.config = manifest.config
        self.tokenizer = _load_tokenizer(manifest)
        graph = "stored"
        if manifest.quantization in ("w8a32", "w8a32-ctx8"):
            graph = "expanded"
        elif manifest.quantization in INT8_PRODUCT_MODES:
            graph = "int8"
        elif manifest.quantization in INT8_QDQ_MODES:
            graph = "int8-qdq"
        self.sessions = {
            part: get_session(manifest.path_of(part), threads, provider, graph)
            for part in manifest.files
        }
        self.input_names = {
            part: {i.name for i in s.get_inputs()} for part, s in self.sessions.items()
        }

    @property
    def max_length(self) -> int:
        return int(self.config["max_length"])

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def unknown_only(self, text: str) -> bool:
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        unk_token = getattr(self.tokenizer.model, "unk_token", None)
        unk = self.tokenizer.token_to_id(unk_token) if unk_token else None
        return bool(ids) and unk is not None and all(i == unk for i in ids)

    def _pad(self, rows: Sequence[Sequence[int]], pad: int) -> tuple[np.ndarray, np.ndarray]:
        width = max(1, max(len(r) for r in rows))
        ids = np.full((len(rows), width), pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        return ids, mask


class OnnxTextEncoder(_OnnxRoleMixin, TextEncoder):
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
        seqs, owners, spans_of = [], [], []
        for ti, enc in enumerate(encoded):
            spans = token_windows(len(enc.ids), inner, self.stride)
            spans_of.append(spans)
            for start, end in spans:
                seqs.append(self.prefix + list(enc.ids[start:end]) + self.suffix)
                owners.append(ti)
        vectors = (
            run_in_length_order(seqs, self.batch_size, lambda b: self._forward(b, layer))
            if seqs
            else []
        )
        per_text: list[list[np.ndarray]] = [[] for _ in texts]
        cut_end = len(self.suffix)
        for owner, vecs in zip(owners, vectors, strict=True):
            per_text[owner].append(vecs[len(self.prefix) : len(vecs) - cut_end])
        dim = int(self.config["hidden_size"])
        result = []
        for ti, enc in enumerate(encoded):
            vecs = (
                stitch_windows(spans_of[ti], per_text[ti])
                if enc.ids
                else np.zeros((0, dim), np.float32)
            )
            result.append(TokenEmbeddings(list(enc.tokens), vecs, windowed=len(spans_of[ti]) > 1))
        return result

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


class OnnxPairClassifier(_OnnxRoleMixin, PairClassifier):
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


class _OnnxLMBase(_OnnxRoleMixin, LanguageModel):
    """Shared by decoder-only and encoder-decoder ONNX models. The exported graphs carry an
    extra input ``target_ids`` and output ``target_logprobs`` = log_softmax(logits)[target]
    (added at export), so the (batch, length, vocabulary) logits never leave onnxruntime."""

    def __init__(
        self,
        spec: ModelSpec,
        manifest: ExportManifest,
        max_length: int | None = None,
        batch_tokens: int = 4096,
        threads: int | None = None,
        provider: str | None = None,
    ) -> None:
        LanguageModel.__init__(self, spec, backend="onnx", quantization=manifest.quantization)
        self._setup(manifest, threads, provider)
        limit = int(self.config["max_length"])
        self._max_length = min(limit, int(max_length)) if max_length else limit
        self.batch_tokens = int(batch_tokens)

    @property
    def max_length(self) -> int:
        return self._max_length

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def token_texts(self, ids: Sequence[int]) -> list[str]:
        return [self.tokenizer.decode([int(i)], skip_special_tokens=False) for i in ids]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        return [(int(a), int(b)) for a, b in enc.offsets]

    def special_tokens(self) -> tuple[list[int], list[int]]:
        probe = "a"
        return special_wrap(
            self.tokenizer.encode(probe, add_special_tokens=True).ids, self.tokenize(probe)
        )

    @property
    def bos_token_id(self) -> int | None:
        return self.config.get("bos_id")

    @property
    def eos_token_id(self) -> int | None:
        return self.config.get("eos_id")

    @property
    def pad_id(self) -> int:
        return int(self.config["pad_id"])


class OnnxCausalLM(_OnnxLMBase):
    """Decoder-only teacher forcing; prefix caching when exported with key/value cache."""

    task = "causal-lm"

    def __init__(self, spec: ModelSpec, manifest: ExportManifest, **options: Any) -> None:
        super().__init__(spec, manifest, **options)
        self.session = self.sessions["model"]
        self.with_past = bool(self.config.get("with_past"))
        self.kv_names = [n for n in sorted(self.input_names["model"]) if n.startswith("past_")]
        self._check_config_fits_graph()
        self.present_names = [
            o.name for o in self.session.get_outputs() if o.name.startswith("present")
        ]
        # Exports made before faithgate added this input score every position.
        self.takes_score_from = SCORE_FROM in self.input_names["model"]
        # w8a32-ctx8: the int8 graph that fills the cache of an unscored prefix (expand.py).
        self.context_session = (
            get_session(
                manifest.path_of("model"),
                options.get("threads"),
                options.get("provider"),
                graph="context-int8",
            )
            if manifest.quantization == "w8a32-ctx8" and self.with_past
            else None
        )
        # On CUDA the key/value cache of a prefix stays on the GPU (IO binding) from the prefix
        # pass to its continuations, and is repeated for a batch there (``_repeat_cache``): no
        # round trip through host memory (on an H200 it halved loglik's model time).
        # None: numpy in and out (the CPU, where binding buys nothing).
        on_cuda = self.session.get_providers()[0] == "CUDAExecutionProvider"
        self.cache_device: str | None = "cuda" if on_cuda and self.with_past else None
        self._repeat_session: Any = None
        self._repeat_lock = threading.Lock()

    def _check_config_fits_graph(self) -> None:
        """``ModelFileError`` (exit 2) where the manifest's cache settings are not the graph's:
        fed as they are, onnxruntime fails on every pass with an error about an input."""
        where = self.manifest.directory / MANIFEST_NAME if self.manifest.directory else "manifest"
        wrong: list[str] = []
        if self.with_past != bool(self.kv_names):
            wrong.append(
                f"with_past is {str(self.with_past).lower()} and the graph has "
                f"{'' if self.kv_names else 'no '}key/value cache inputs"
            )
        elif self.with_past:
            for i in self.session.get_inputs():
                if i.name not in self.kv_names or len(i.shape) != 4:
                    continue
                for axis, key in ((1, "num_kv_heads"), (3, "head_dim")):
                    dim = i.shape[axis]  # a static dimension is an int, a symbolic one a str
                    if isinstance(dim, int) and dim != self.config.get(key):
                        wrong.append(f"{key} is {self.config.get(key)!r}, its graph has {dim}")
                if wrong:
                    break
        if wrong:
            raise ModelFileError(
                f"{where}: config does not match its graph ({'; '.join(wrong)}); {AGAIN}"
            )

    def _empty_past(self, batch: int) -> dict[str, np.ndarray]:
        shape = (batch, int(self.config["num_kv_heads"]), 0, int(self.config["head_dim"]))
        return {name: np.zeros(shape, dtype=np.float32) for name in self.kv_names}

    def _feeds(
        self,
        ids: np.ndarray,
        mask: np.ndarray,
        targets: np.ndarray,
        positions: np.ndarray,
        past: dict[str, np.ndarray] | None = None,
        score_from: int = 0,
    ) -> dict[str, np.ndarray]:
        """The graph's inputs: position ids where it takes them, an empty cache by default,
        every position scored by default."""
        feeds = {"input_ids": ids, "attention_mask": mask, "target_ids": targets}
        if "position_ids" in self.input_names["model"]:
            feeds["position_ids"] = positions
        if self.takes_score_from:
            feeds[SCORE_FROM] = np.array([score_from], dtype=np.int64)
        if self.with_past:
            feeds.update(past if past is not None else self._empty_past(len(ids)))
        return feeds

    def _run(
        self,
        ids: np.ndarray,
        mask: np.ndarray,
        targets: np.ndarray,
        positions: np.ndarray,
        past: dict[str, np.ndarray] | None = None,
        want_present: bool = False,
        score_from: int = 0,
        context: bool = False,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``context``: the pass only fills the cache; it runs on the int8 context graph
        where the export has one."""
        feeds = self._feeds(ids, mask, targets, positions, past, score_from)
        session = self.session
        if context and self.context_session is not None:
            session = self.context_session
        elif self.cache_device is not None:
            return self._run_bound(feeds, want_present)
        names = ["target_logprobs"] + (self.present_names if want_present else [])
        outs = session.run(names, feeds)
        present = dict(zip(self.present_names, outs[1:], strict=False)) if want_present else {}
        return outs[0].astype(np.float64), present

    def _run_bound(
        self, feeds: dict[str, Any], want_present: bool
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """``_run`` through IO binding: each input from host memory or, a cache already there,
        from ``cache_device``; the log-probabilities to the host, the cache (``OrtValue``s)
        left on ``cache_device``."""
        ort = _ort()
        binding = self.session.io_binding()
        for name, value in feeds.items():
            if isinstance(value, ort.OrtValue):
                binding.bind_ortvalue_input(name, value)
            else:
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
        binding.bind_output("target_logprobs", "cpu")
        for name in self.present_names:  # all bound: left unbound they would come to the host
            binding.bind_output(name, self.cache_device)
        self.session.run_with_iobinding(binding)
        outs = binding.get_outputs()
        present = dict(zip(self.present_names, outs[1:], strict=True)) if want_present else {}
        return outs[0].numpy().astype(np.float64), present

    def _repeat_cache(self, past: dict[str, Any], batch: int) -> dict[str, Any]:
        """A one-row key/value cache repeated for ``batch`` rows: numpy on the host, an
        ``Expand`` per tensor on ``cache_device`` for a cache there."""
        if not past or not isinstance(next(iter(past.values())), _ort().OrtValue):
            return {k: np.repeat(v, batch, axis=0) for k, v in past.items()}
        if batch == 1:
            return past
        names = list(past)
        try:
            session = self._repeat_graph(len(names))
        except ImportError:  # no onnx package to build the graph: repeated on the host
            return {k: np.repeat(v.numpy(), batch, axis=0) for k, v in past.items()}
        binding = session.io_binding()
        for i, name in enumerate(names):
            binding.bind_ortvalue_input(f"x{i}", past[name])
            binding.bind_output(f"y{i}", self.cache_device)
        binding.bind_cpu_input("shape", np.array([batch, 1, 1, 1], dtype=np.int64))
        session.run_with_iobinding(binding)
        return dict(zip(names, binding.get_outputs(), strict=True))

    def _repeat_graph(self, count: int) -> Any:
        """The session of ``y_i = Expand(x_i, shape)`` for ``count`` cache tensors, built once
        (onnx, in the runtime extra), on this model's providers and element type."""
        with self._repeat_lock:
            if self._repeat_session is None:
                from onnx import TensorProto, helper

                kinds = {i.name: i.type for i in self.session.get_inputs()}
                half = kinds.get(self.kv_names[0]) == "tensor(float16)"
                elem = TensorProto.FLOAT16 if half else TensorProto.FLOAT
                dims = ["batch", "heads", "length", "head_dim"]
                graph = helper.make_graph(
                    [
                        helper.make_node("Expand", [f"x{i}", "shape"], [f"y{i}"])
                        for i in range(count)
                    ],
                    "repeat_cache",
                    [helper.make_tensor_value_info(f"x{i}", elem, dims) for i in range(count)]
                    + [helper.make_tensor_value_info("shape", TensorProto.INT64, [4])],
                    [helper.make_tensor_value_info(f"y{i}", elem, None) for i in range(count)],
                )
                model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
                model.ir_version = 8  # what every onnxruntime this code supports reads
                ort = _ort()
                options = ort.SessionOptions()
                # One CPU thread, sleeping when idle, as every session here (threads.py): the
                # Expands run on the GPU, and a default pool would spin on the CPU's cores.
                options.intra_op_num_threads = 1
                options.add_session_config_entry(
                    "session.intra_op.allow_spinning", onnxruntime_spinning()
                )
                self._repeat_session = ort.InferenceSession(
                    model.SerializeToString(), options, providers=self.session.get_providers()
                )
            return self._repeat_session

    def calibration_feeds(
        self, texts: Sequence[str], max_tokens: int = 512
    ) -> list[dict[str, np.ndarray]]:
        """Model inputs for quantizers that read activations: one feed per text (bos + its
        first ``max_tokens`` tokens), with an empty key/value cache."""
        feeds = []
        bos = [] if self.bos_token_id is None else [int(self.bos_token_id)]
        for t in texts:
            ids = np.array([bos + list(self.tokenize(t))[:max_tokens]], dtype=np.int64)
            positions = np.arange(ids.shape[1], dtype=np.int64)[None, :]
            feeds.append(self._feeds(ids, np.ones_like(ids), np.zeros_like(ids), positions))
        return feeds

    def _next_token_logprobs(self, rows: list[list[int]]) -> list[np.ndarray]:
        ids, mask = self._pad(rows, self.pad_id)
        targets = np.zeros_like(ids)
        targets[:, :-1] = ids[:, 1:]  # position t predicts token t+1
        positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape).astype(np.int64)
        lp, _ = self._run(ids, mask, targets, np.ascontiguousarray(positions))
        return [lp[r, : len(row) - 1] if row else np.zeros(0) for r, row in enumerate(rows)]

    def _prefix_cache(
        self, tokens: Sequence[int], targets: Sequence[int], score_prefix: bool
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The key/value cache of ``tokens`` (as ``past_key_values.*`` feeds) and, with
        ``score_prefix``, the log-probabilities of ``targets`` (token t+1 at position t).

        Run only for its cache, the prefix skips the LM head where the export allows (on all
        but its last position: an empty head input trips quantized kernels), and runs on the
        int8 context graph where the export has one (``w8a32-ctx8``)."""
        ids = np.array([tokens], dtype=np.int64)
        skip = 0 if score_prefix or not self.takes_score_from else ids.shape[1] - 1
        lp, cache = self._run(
            ids,
            np.ones_like(ids),
            np.array([targets], dtype=np.int64),
            np.arange(ids.shape[1], dtype=np.int64)[None, :],
            want_present=True,
            score_from=skip,
            context=not score_prefix,
        )
        return lp[0], {k.replace("present", "past_key_values"): v for k, v in cache.items()}

    def prefix_logprobs(
        self,
        prefix: Sequence[int],
        continuations: Sequence[Sequence[Sequence[int]]],
        score_prefix: bool = True,
    ) -> tuple[np.ndarray, list[list[np.ndarray]]]:
        prefix = [int(t) for t in prefix]
        if not prefix:
            return np.zeros(0), self.segment_logprobs(continuations)
        flat = [[int(t) for seg in segs for t in seg] for segs in continuations]
        for ids in flat:
            if len(prefix) + len(ids) > self.max_length:
                raise BackendError(
                    f"sequence of {len(prefix) + len(ids)} tokens exceeds the model window "
                    f"{self.max_length}"
                )
        if not self.with_past or len(prefix) == 1:
            # No cache in this export (or nothing worth caching): score prefix + continuation
            # in full; equal values, more compute.
            if not continuations:
                lp = self.segment_logprobs([[prefix]])[0][0] if score_prefix else np.zeros(0)
                return lp, []
            full = self.segment_logprobs([[prefix, *segs] for segs in continuations])
            return (full[0][0] if score_prefix else np.zeros(0)), [row[1:] for row in full]
        # The cache holds prefix[:-1]; every continuation row re-feeds prefix[-1] so that its
        # first position predicts the first continuation token (the torch backend reads that
        # from the prefix pass; the values agree within float rounding).
        lp, past = self._prefix_cache(prefix[:-1], prefix[1:], score_prefix)
        prefix_lp = np.concatenate([[math.nan], lp]) if score_prefix else np.zeros(0)
        past_len = len(prefix) - 1
        results: list[list[np.ndarray]] = [[] for _ in continuations]
        for idx in batches_by_token_budget(
            [len(ids) + len(prefix) for ids in flat], self.batch_tokens
        ):
            rows = [[prefix[-1], *flat[i]] for i in idx]
            b = len(rows)
            ids, row_mask = self._pad(rows, self.pad_id)
            targets = np.zeros_like(ids)
            targets[:, :-1] = ids[:, 1:]
            mask = np.concatenate([np.ones((b, past_len), np.int64), row_mask], axis=1)
            positions = np.broadcast_to(
                np.arange(past_len, past_len + ids.shape[1]), ids.shape
            ).astype(np.int64)
            batch_past = self._repeat_cache(past, b)
            lp, _ = self._run(ids, mask, targets, np.ascontiguousarray(positions), batch_past)
            for r, i in enumerate(idx):
                n = len(flat[i])
                results[i] = split_by_sizes(lp[r, :n], [len(s) for s in continuations[i]])
        return prefix_lp, results


class OnnxSeq2SeqLM(_OnnxLMBase):
    """Encoder-decoder teacher forcing: encoder graph once, decoder graph on the target."""

    task = "seq2seq-lm"

    @property
    def max_target_length(self) -> int:
        return self.max_length

    @property
    def decoder_start_token_id(self) -> int | None:
        start = self.config.get("decoder_start_id")
        return int(self.pad_id if start is None else start)

    def seq2seq_logprobs(
        self, batch: Sequence[tuple[Sequence[int], Sequence[int]]]
    ) -> list[np.ndarray]:
        start = self.decoder_start_token_id
        results: list[np.ndarray] = [np.zeros(0)] * len(batch)
        for enc, tgt in batch:
            if len(enc) > self.max_length or len(tgt) > self.max_target_length:
                raise BackendError(
                    f"encoder input of {len(enc)} / target of {len(tgt)} tokens exceeds the "
                    f"model window {self.max_length}"
                )
        hidden = self._encode_once([e for e, t in batch if len(t)])
        lengths = [max(len(e), len(t)) for e, t in batch]
        pair_lengths = [(len(e), len(t)) for e, t in batch]  # both sides unpadded
        for idx in batches_by_token_budget(lengths, self.batch_tokens, keys=pair_lengths):
            rows = [(list(map(int, batch[i][0])), list(map(int, batch[i][1]))) for i in idx]
            if all(not t for _, t in rows):
                continue
            enc_ids, enc_mask = self._pad([e for e, _ in rows], self.pad_id)
            states = np.stack([hidden[tuple(e)] for e, _ in rows])
            dec_rows = [[start, *t[:-1]][: len(t)] for _, t in rows]
            dec_in, _ = self._pad(dec_rows, self.pad_id)
            targets, _ = self._pad([t for _, t in rows], self.pad_id)
            feeds = {
                "input_ids": dec_in,
                "encoder_hidden_states": states,
                "encoder_attention_mask": enc_mask,
                "target_ids": targets,
            }
            feeds = {k: v for k, v in feeds.items() if k in self.input_names["decoder"]}
            (lp,) = self.sessions["decoder"].run(["target_logprobs"], feeds)
            for r, i in enumerate(idx):
                results[i] = lp[r, : len(rows[r][1])].astype(np.float64)
        return results

    def _encode_once(self, inputs: Sequence[Sequence[int]]) -> dict[tuple[int, ...], np.ndarray]:
        """Encoder states of each distinct input, run once: a source shared by several
        targets (its summaries, its y and x passes) and the empty source shared by every
        summary's y_lm were encoded once per target. Batched by equal length, as the decoder
        (no padding, so a state never depends on its batch)."""
        distinct = sorted({tuple(int(i) for i in e) for e in inputs})
        states: dict[tuple[int, ...], np.ndarray] = {}
        for idx in batches_by_token_budget([len(e) for e in distinct], self.batch_tokens):
            enc_ids, enc_mask = self._pad([distinct[i] for i in idx], self.pad_id)
            (hidden,) = self.sessions["encoder"].run(
                ["last_hidden_state"], {"input_ids": enc_ids, "attention_mask": enc_mask}
            )
            for r, i in enumerate(idx):
                states[distinct[i]] = hidden[r]
        return states


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
