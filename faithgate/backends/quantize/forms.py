"""The weight-only block forms (``w8``, ``w4``, ``w8a32``: onnxruntime's ``MatMulNBits``
quantizer, embedding tables as ``GatherBlockQuantized``), the forms onnxruntime's own tools
make (``int8-dynamic``, ``int8-static``, ``fp16``), and how a form is written to disk."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.errors import InputError


def save_onnx(model: Any, dst: Path) -> None:
    """Write ``model`` to ``dst``, its tensors beside it in ``<name>_data`` when the graph would
    pass protobuf's 2 GB limit."""
    import onnx

    large = model.ByteSize() > 1_800_000_000
    onnx.save(model, str(dst), save_as_external_data=large, location=dst.name + "_data")


def quantize_dynamic_int8(src: Path, dst: Path) -> None:
    """Dynamic int8: per-channel signed weights of MatMul/Gemm, activations quantized at run
    time. Embedding tables (Gather) stay fp32: quantizing them costs accuracy and no time."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul", "Gemm"],
        extra_options={"MatMulConstBOnly": True},
    )


class _FeedReader:
    """onnxruntime CalibrationDataReader over a list of feed dicts."""

    def __init__(self, feeds: Sequence[dict[str, np.ndarray]]) -> None:
        self._it = iter(list(feeds))

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)

    def rewind(self) -> None:  # pragma: no cover - not used by MinMax calibration
        pass


def quantize_static_int8(src: Path, dst: Path, feeds: Sequence[dict[str, np.ndarray]]) -> None:
    """Static int8 (QDQ, MinMax calibration over ``feeds``, the model's inputs on calibration
    texts). Only MatMul/Gemm are quantized, as in the dynamic recipe."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    if not feeds:
        raise InputError("static quantization needs calibration inputs")
    quantize_static(
        str(src),
        str(dst),
        _FeedReader(feeds),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul", "Gemm"],
        extra_options={"ActivationSymmetric": True, "MatMulConstBOnly": True},
    )


# --- weight-only block quantization (w8 / w4) and fp16 ------------------------------------------

# Input features per scale. Encoders and classifiers: 32. Causal LMs: 64, where onnxruntime's
# int8-activation kernel ran 1.5x fp32 at 400 rows (1.1x with 32; MatMuls of SmolLM2's shapes)
# and log-probabilities stayed within the gate; on MiniLM, blocks of 64 flipped 2-4% of the
# sentsim / bertscore pairs (agreement 0.96 / 0.98, 1.000 with 32) for no speed (issue 13).
BLOCK_SIZE = 32
BLOCK_SIZE_BY_TASK = {"causal-lm": 64}
# w8a32 (fp32 arithmetic): blocks of 16 keep the shipped checker's close pairs (rank agreement
# 0.995 on held-out triples). SmolLM2 holds with 32 as well as with 16 (mean |diff| of the mean
# log-probability: 12 built-in triples 0.0126 vs 0.0129 nats, 30 Falke 2019 pairs 0.0106 vs
# 0.0110, every pair ordered as fp32 in both) from 43% of fp32's file instead of 46% (issue 13).
W8A32_BLOCK_SIZE = 16
W8A32_BLOCK_SIZE_BY_TASK = {"causal-lm": 32}
GATHER_BLOCK_SIZE = 32  # embedding rows: dequantized on lookup, so finer blocks cost no time
ACCURACY_LEVEL = 4  # MatMulNBits: int8 activations inside the kernel (CPU speed; issue 13)
MIN_GATHER_ELEMENTS = 65_536  # quantize embedding tables, not tiny ones (token types)
# MatMuls left in fp32: those whose *input activations* carry outliers, the MLP down projection
# of LLaMA-style decoders, whose input (the gated product) has a few channels far above the
# rest (Dettmers et al. 2022, "LLM.int8()"; Xiao et al. 2023, "SmoothQuant"), so int8
# activations in blocks lose the small ones. On SmolLM2 and 100 BUMP pairs (issue 13): all
# MatMuls quantized, blocks of 64, pair agreement with fp32 0.96; down projections kept fp32,
# 1.00 and 1.14x fp32's speed; down projections quantized with fp32 arithmetic
# (accuracy_level 0), 1.00 but 0.96x. Matched against node names (optimum names nodes after
# the module path); encoders have no such node.
FP32_MATMULS = ("/mlp/down_proj/",)


def quantize_weight_only(
    src: Path,
    dst: Path,
    bits: int = 8,
    block_size: int = BLOCK_SIZE,
    quantize_embeddings: bool = True,
    accuracy_level: int = ACCURACY_LEVEL,
    keep_fp32: Sequence[str] = FP32_MATMULS,
    gather_block_size: int = GATHER_BLOCK_SIZE,
) -> dict[str, Any]:
    """Weight-only block quantization of ``src`` into ``dst``: MatMul -> ``MatMulNBits``
    (onnxruntime's ``MatMulNBitsQuantizer``, symmetric, ``accuracy_level`` 4) and, with
    ``quantize_embeddings``, embedding ``Gather`` tables -> ``GatherBlockQuantized``. A MatMul
    whose weight is computed (a tied LM head reading the transposed embedding table) is not
    constant, so it and its table stay fp32: quantizing the head is what made SmolLM2's w8
    slower than fp32 in issue 13's measurements, and the tied table is stored once. MatMuls
    whose node name contains one of ``keep_fp32`` (see ``FP32_MATMULS``) are not quantized.

    Returns what was done (node counts, bytes before/after) for the manifest. Needs the
    ``onnx-ir`` package (imported by onnxruntime's quantizer; in the ``full`` extra).
    """
    import onnx

    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError as exc:  # onnx-ir missing: onnxruntime does not declare it
        raise InputError(
            f"weight-only quantization needs onnxruntime's quantizer and onnx-ir ({exc}): "
            "pip install 'faithgate[full]'"
        ) from exc
    if bits not in (4, 8):
        raise InputError(f"weight-only quantization supports 4 or 8 bits, not {bits}")
    model = onnx.load(str(src))
    before = sum(t.ByteSize() for t in model.graph.initializer)
    excluded = [
        n.name
        for n in model.graph.node
        if n.op_type == "MatMul" and any(pattern in n.name for pattern in keep_fp32)
    ]
    quantizer = MatMulNBitsQuantizer(
        model,
        bits=bits,
        block_size=block_size,
        is_symmetric=True,
        accuracy_level=accuracy_level,
        nodes_to_exclude=excluded,
        op_types_to_quantize=("MatMul",),
    )
    _quiet_quantizer_logs()
    quantizer.process()
    qmodel = quantizer.model.model
    n_matmul = sum(1 for n in qmodel.graph.node if n.op_type == "MatMulNBits")
    n_gather = quantize_gathers(qmodel, bits, gather_block_size) if quantize_embeddings else 0
    after = sum(t.ByteSize() for t in qmodel.graph.initializer)
    save_onnx(qmodel, dst)
    return {
        "method": "MatMulNBits + GatherBlockQuantized (onnxruntime)",
        "bits": bits,
        "block_size": block_size,
        "gather_block_size": gather_block_size,
        "symmetric": True,
        "accuracy_level": accuracy_level,
        "matmuls_quantized": n_matmul,
        "matmuls_kept_fp32": len(excluded),
        "gathers_quantized": n_gather,
        "weight_bytes": {"before": before, "after": after},
    }


def _quiet_quantizer_logs() -> None:
    """onnxruntime's quantizer logs one line per node at INFO; faithgate reports a summary."""
    import logging

    for name in ("onnxruntime.quantization.matmul_nbits_quantizer", "root"):
        logging.getLogger(name).setLevel(logging.WARNING)


def quantize_gathers(model: Any, bits: int, block_size: int = GATHER_BLOCK_SIZE) -> int:
    """Replace each ``Gather`` over a large constant 2-D float table (token, position
    embeddings) by ``GatherBlockQuantized`` with uint8 data: blocks of ``block_size`` along the
    hidden axis, symmetric (the op's default zero point 2^(bits-1)), 4-bit values packed two a
    byte, low nibble first. onnxruntime's own quantizer only does 4-bit Gathers and moves the
    model to opset 21; this keeps the opset and does 8 bits too. A table that another node also
    reads (tied weights) is left alone: quantizing one reader would keep both copies.

    Returns the number of Gathers replaced.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    readers = Counter(name for node in graph.node for name in node.input)
    qmax = (1 << (bits - 1)) - 1  # 127 or 7: symmetric, the code -2^(bits-1) unused
    offset = 1 << (bits - 1)
    replaced = 0
    new_nodes = []
    for node in graph.node:
        table = inits.get(node.input[0]) if node.op_type == "Gather" and node.input else None
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if (
            table is None
            or axis != 0
            or readers.get(node.input[0], 0) != 1
            or len(table.dims) != 2
            or table.data_type != 1  # FLOAT
            or table.dims[1] % block_size
            or table.dims[0] * table.dims[1] < MIN_GATHER_ELEMENTS
        ):
            new_nodes.append(node)
            continue
        data = numpy_helper.to_array(table).astype(np.float32)
        rows, cols = data.shape
        blocks = data.reshape(rows, cols // block_size, block_size)
        scales = np.abs(blocks).max(axis=2) / qmax
        scales[scales == 0] = 1.0
        q = np.clip(np.rint(blocks / scales[..., None]), -qmax, qmax).astype(np.int16) + offset
        q = q.reshape(rows, cols).astype(np.uint8)
        if bits == 4:
            q = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
        qname, sname = table.name + f"_q{bits}", table.name + f"_q{bits}_scales"
        graph.initializer.append(numpy_helper.from_array(q, qname))
        graph.initializer.append(numpy_helper.from_array(scales.astype(np.float32), sname))
        new_nodes.append(
            helper.make_node(
                "GatherBlockQuantized",
                [qname, node.input[1], sname],
                list(node.output),
                name=(node.name or table.name) + f"_q{bits}",
                domain="com.microsoft",
                bits=bits,
                block_size=block_size,
                gather_axis=0,
                quantize_axis=1,
            )
        )
        graph.initializer.remove(table)
        replaced += 1
    if replaced:
        del graph.node[:]
        graph.node.extend(new_nodes)
        if not any(op.domain == "com.microsoft" for op in model.opset_import):
            model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return replaced


def convert_fp16(src: Path, dst: Path) -> dict[str, Any]:
    """Half-precision copy of ``src`` (weights and activations), fp32 inputs and outputs
    (``keep_io_types``), with onnxruntime's transformer converter: ``onnxconverter_common``'s
    produced graphs that do not load (issue 13). LayerNorm / Softmax / LogSoftmax stay fp32,
    where fp16 sums overflow or lose the small log-probabilities the likelihood metrics read."""
    import onnx
    from onnxruntime.transformers.onnx_model import OnnxModel

    model = OnnxModel(onnx.load(str(src)))
    keep = ["LayerNormalization", "SimplifiedLayerNormalization", "LogSoftmax", "Softmax"]
    model.convert_float_to_float16(keep_io_types=True, op_block_list=keep)
    save_onnx(model.model, dst)
    return {"method": "onnxruntime.transformers convert_float_to_float16", "fp32_ops": keep}


def quantize_w8a32(src: Path, dst: Path, task: str | None) -> dict[str, Any]:
    """``w8a32``: 8-bit weight blocks (MatMuls and embedding tables) with fp32 arithmetic, in
    the ``task``'s block size. fp32 arithmetic everywhere: no MatMul needs to be kept out for
    its activations."""
    block = W8A32_BLOCK_SIZE_BY_TASK.get(task or "", W8A32_BLOCK_SIZE)
    return quantize_weight_only(
        src, dst, bits=8, block_size=block, accuracy_level=0, keep_fp32=(),
        gather_block_size=block,
    )  # fmt: skip
