"""onnxruntime sessions for the onnx backend, and what every ONNX role model shares.

Sessions are created once per process per (file, threads, providers, graph) and shared (a file
replaced under the same name, by a re-export, gets a new session; ``drop_sessions`` lets go of
a directory's); CPU by default, CUDA first when onnxruntime-gpu sees a GPU (``cuda_usable``
probes it; ``provider="cuda"`` to insist, ``"cpu"`` to refuse it). Int8 graphs load in the
form whose products are exact on this CPU (``int8_weights_form``). ``OnnxRole`` loads a role
model's manifest, tokenizer and session(s).
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.backends.expand import (
    context_model_bytes,
    expanded_model_bytes,
    unsigned_model_bytes,
)
from faithgate.backends.manifest import ExportManifest
from faithgate.errors import BackendError, ModelFileError
from faithgate.threads import onnxruntime_spinning

log = logging.getLogger(__name__)

_SESSIONS: dict[tuple, Any] = {}
_SESSIONS_LOCK = threading.Lock()


def import_ort() -> Any:
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
            ort = import_ort()
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

    ort = import_ort()
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


def exact_int8_form() -> str:
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
    ort = import_ort()
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
            if graph == "int8-qdq" and exact_int8_form() != "int8":
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


def load_tokenizer(manifest: ExportManifest) -> Any:
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


class OnnxRole:
    """Shared loading: manifest, tokenizer, session(s)."""

    manifest: ExportManifest

    def _setup(self, manifest: ExportManifest, threads: int | None, provider: str | None) -> None:
        self.manifest = manifest
        self.config = manifest.config
        self.tokenizer = load_tokenizer(manifest)
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
