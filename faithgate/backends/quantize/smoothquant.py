"""The SmoothQuant forms of a graph (Xiao et al. 2023): ``w8a8`` (int8 weights and per-token
int8 activations) and ``w8a32-ctx8`` (``w8a32`` of the smoothed graph, whose int8 context
graph the runtime builds)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.backends.expand import (
    CONTEXT_SMOOTHING_PREFIX,
    int8_columns,
    int8_constants,
    int8_matmul_nodes,
    per_token_uint8_nodes,
    replace_graph_nodes,
)
from faithgate.backends.quantize.forms import quantize_w8a32, save_onnx
from faithgate.errors import InputError

# --- w8a8: SmoothQuant + per-token dynamic int8 ------------------------------------------------

# SmoothQuant's migration strength (the paper's default for OPT/LLaMA-sized models).
W8A8_ALPHA = 0.5


def activation_maxima(
    src: Path, feeds: Sequence[dict[str, np.ndarray]], names: Sequence[str]
) -> dict[str, np.ndarray]:
    """Per-channel (last axis) max |x| of the tensors ``names`` of the graph ``src`` over
    ``feeds``, by onnxruntime (no torch): the tensors become extra graph outputs."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    model = onnx.load(str(src))
    present = {o.name for o in model.graph.output}
    for name in names:
        if name not in present:
            model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if model.ByteSize() > 1_800_000_000:  # protobuf's 2 GB limit: go through a file
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "stats.onnx"
            onnx.save(model, str(path), save_as_external_data=True, location="stats.onnx_data")
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    else:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    del model
    inputs = {i.name for i in session.get_inputs()}
    maxima: dict[str, np.ndarray] = {}
    for feed in feeds:
        wanted = {k: v for k, v in feed.items() if k in inputs}
        for name, value in zip(names, session.run(list(names), wanted), strict=True):
            m = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = np.maximum(maxima[name], m) if name in maxima else m
    return maxima


def smoothing_scales(
    activation_max: np.ndarray, weight_max: np.ndarray, alpha: float = W8A8_ALPHA
) -> np.ndarray:
    """SmoothQuant's per-input-channel scales (Xiao et al. 2023, eq. 4):
    s_j = max|X_j|^alpha / max|W_j|^(1 - alpha); X / s and W * s multiply to X W."""
    s = np.maximum(activation_max, 1e-5) ** alpha / np.maximum(weight_max, 1e-5) ** (1.0 - alpha)
    return s.astype(np.float32)


def _smoothing_plan(
    model: Any, src: Path, feeds: Sequence[dict[str, np.ndarray]], alpha: float
) -> tuple[dict[int, np.ndarray], dict[str, list[int]], dict[str, np.ndarray]]:
    """SmoothQuant's scales for the graph ``model`` (loaded from ``src``): the position of each
    MatMul over a constant 2-D fp32 weight -> that weight; each input tensor -> the MatMuls
    reading it (q/k/v share one, gate/up another); each input -> its scales, from the input's
    per-channel maxima on ``feeds`` and the largest weight row over the MatMuls sharing it."""
    from onnx import numpy_helper

    if not feeds:
        raise InputError(
            "SmoothQuant (w8a8, w8a32-ctx8) needs calibration inputs (none were given)"
        )
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    # Positions in graph.node, not id(): protobuf may hand out fresh node wrappers.
    weights: dict[int, np.ndarray] = {}
    for i, node in enumerate(graph.node):
        if node.op_type == "MatMul" and node.input[1] in inits:
            w = numpy_helper.to_array(inits[node.input[1]])  # to_array copies: read once
            if w.ndim == 2 and w.dtype == np.float32:
                weights[i] = w
    groups: dict[str, list[int]] = {}
    for i in weights:
        groups.setdefault(graph.node[i].input[0], []).append(i)
    maxima = activation_maxima(src, feeds, list(groups))
    smooth = {
        x: smoothing_scales(
            maxima[x], np.max([np.abs(weights[i]).max(axis=1) for i in members], axis=0), alpha
        )
        for x, members in groups.items()
    }
    return weights, groups, smooth


def quantize_w8a8(
    src: Path,
    dst: Path,
    feeds: Sequence[dict[str, np.ndarray]],
    alpha: float = W8A8_ALPHA,
) -> dict[str, Any]:
    """SmoothQuant-smoothed int8 weights (per output channel) x int8 activations (per token).

    For each MatMul whose weight W (K x N) is a constant and input X its activations: with
    s_j = max|X_j|^alpha / max_n |W_jn|^(1-alpha) over the MatMuls sharing X (measured on
    ``feeds``), X' = X / s and W' = diag(s) W; W' is stored as int8 with one scale per column,
    and X' is quantized per row (token) at run time: scale_t = max_j |X'_tj| / 127,
    q = round(X' / scale_t) + 128 (uint8, zero point 128); y = MatMulInteger(q, W'_q) *
    scale_t * scale_n. Inputs shared by several MatMuls (q/k/v, gate/up) are smoothed and
    quantized once. Standard ONNX ops only, so the torch-free runtime runs it.
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    before = sum(t.ByteSize() for t in graph.initializer)
    weights, groups, smooth = _smoothing_plan(model, src, feeds, alpha)
    graph.initializer.extend(int8_constants())
    quantized_inputs: dict[str, tuple[str, str]] = {}
    replaced: set[str] = set()
    nodes: list[Any] = []
    for i, node in enumerate(graph.node):
        w = weights.get(i)
        if w is None:
            nodes.append(node)
            continue
        x, tag = node.input[0], "fg_w8a8" + node.name.replace("/", "_")
        if x not in quantized_inputs:
            q = tag + "_x"
            graph.initializer.append(numpy_helper.from_array(1.0 / smooth[x], q + "_inv_s"))
            nodes.append(helper.make_node("Mul", [x, q + "_inv_s"], [q + "_smooth"]))
            nodes += per_token_uint8_nodes(q + "_smooth", q)
            quantized_inputs[x] = (q + "_u8", q + "_scale")
        w_q, w_scale = int8_columns(w * smooth[x][:, None])
        graph.initializer.extend(
            [
                numpy_helper.from_array(w_q, tag + "_w"),
                numpy_helper.from_array(w_scale, tag + "_w_scale"),
            ]
        )
        replaced.add(node.input[1])
        nodes += int8_matmul_nodes(*quantized_inputs[x], tag, node.output[0])
    replace_graph_nodes(graph, nodes, replaced)
    after = sum(t.ByteSize() for t in graph.initializer)
    save_onnx(model, dst)
    return {
        "method": "SmoothQuant + per-token dynamic int8 activations x per-channel int8 weights "
        "(MatMulInteger)",
        "alpha": alpha,
        "matmuls_quantized": len(weights),
        "inputs_smoothed": len(groups),
        "calibration_inputs": len(feeds),
        "weight_bytes": {"before": before, "after": after},
    }


# --- w8a32-ctx8: exact scored tokens, an int8 context pass --------------------------------------


def quantize_context_int8(
    src: Path,
    dst: Path,
    feeds: Sequence[dict[str, np.ndarray]],
    alpha: float = W8A8_ALPHA,
) -> dict[str, Any]:
    """The ``w8a32-ctx8`` form of a causal LM: ``w8a32`` (8-bit weight blocks, fp32
    arithmetic) of the SmoothQuant-smoothed graph, from which the runtime builds an int8
    graph for cache-only passes (``expand.int8_context_graph``).

    Each input X shared by MatMuls over constant weights W gets an explicit
    ``Mul(X, 1/s)`` node (named ``fg_ctx8_smooth*``) and its weights become diag(s) W, with
    SmoothQuant's s (as in ``quantize_w8a8``, measured on ``feeds``): the same products in
    fp32, and the activations that reach those MatMuls are the smoothed ones, ready to be
    quantized per token. One file of ``w8a32``'s size serves both graphs.
    """
    import tempfile

    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    weights, groups, smooth = _smoothing_plan(model, src, feeds, alpha)
    readers = Counter(name for node in graph.node for name in node.input)
    first_reader = {min(members): x for x, members in groups.items()}
    smoothed: dict[str, str] = {}
    nodes: list[Any] = []
    for i, node in enumerate(graph.node):
        x = first_reader.get(i)
        if x is not None:
            name = f"{CONTEXT_SMOOTHING_PREFIX}{len(smoothed)}"
            graph.initializer.append(numpy_helper.from_array(1.0 / smooth[x], name + "_inv_s"))
            nodes.append(helper.make_node("Mul", [x, name + "_inv_s"], [name], name=name))
            smoothed[x] = name
        w = weights.get(i)
        if w is not None and readers[node.input[1]] == 1:  # a weight read once: fold s in
            x = node.input[0]
            inits[node.input[1]].CopyFrom(
                numpy_helper.from_array(w * smooth[x][:, None], node.input[1])
            )
            node.input[0] = smoothed[x]
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    with tempfile.TemporaryDirectory() as tmp:
        smoothed_src = Path(tmp) / "smoothed.onnx"
        save_onnx(model, smoothed_src)
        del model
        recipe = quantize_w8a32(smoothed_src, dst, "causal-lm")
    return {
        **recipe,
        "context": {
            "method": "SmoothQuant + per-token dynamic int8 activations x per-channel int8 "
            "weights (MatMulInteger), built at load for cache-only passes",
            "alpha": alpha,
            "inputs_smoothed": len(smoothed),
            "calibration_inputs": len(feeds),
        },
    }
