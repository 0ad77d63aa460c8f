"""Load-time forms of ``w8a32`` exports: 8-bit weights on disk, fp32 MatMuls in memory, and
(``w8a32-ctx8``) an int8 graph for the passes whose outputs only fill a key/value cache.

A ``w8a32`` export stores its weights as 8-bit blocks (``MatMulNBits`` with ``accuracy_level``
0, ``GatherBlockQuantized``) and computes in fp32: onnxruntime's kernel dequantizes every block
on every call, which made the form slower than the fp32 export it equals (the shipped NLI
checker 0.82x, SmolLM2 0.71-0.83x; issue 13). Dequantizing each block once when the model is
loaded gives the same products (each weight is q * scale either way; measured within 2e-6 on
the checker's probabilities) at fp32 speed, while the file on disk stays small.

A ``w8a32-ctx8`` export (causal LMs) also carries SmoothQuant's per-channel scales, as ``Mul``
nodes named ``fg_ctx8_smooth*`` in front of the MatMuls they smooth. From its expanded graph
``int8_context_graph`` builds a second graph whose smoothed MatMuls run in int8 with per-token
activation scales (``MatMulInteger``, onnxruntime's fast CPU kernel). The LM runs a source's
cache-only prefix pass there and scores the summary tokens with the exact graph: both summaries
of a pair read the same int8-made cache, so its error largely cancels in their comparison,
while the tokens being scored keep fp32 arithmetic (issue 13).

Torch-free: needs the ``onnx`` package to rewrite the graph. Without it, or for a model whose
rewritten form would pass protobuf's 2 GB limit (checked per form: an expanded graph grows by 3
bytes a weight, the context graph stays about the stored size), the file is loaded as it is
(same values, slower).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.errors import BackendError

# Over this many bytes a rewritten graph (expanded, or the int8 context graph) could not be
# serialized in one protobuf message.
MAX_REWRITTEN_BYTES = 1_800_000_000


def _attributes(node: Any) -> dict[str, int]:
    return {a.name: a.i for a in node.attribute}


# Block-quantized ops (onnxruntime's com.microsoft domain) -> the index of their 8-bit data
# input; their scales are input 2.
_DATA_INPUT = {"MatMulNBits": 1, "GatherBlockQuantized": 0}


def _expandable(node: Any, inits: dict[str, Any]) -> bool:
    """An 8-bit, symmetric (no zero points) block op over constants whose fp32 expansion
    computes the same: ``MatMulNBits`` with fp32 arithmetic (``accuracy_level`` 0), or
    ``GatherBlockQuantized`` of a table along its rows."""
    data = _DATA_INPUT.get(node.op_type)
    if data is None or node.domain != "com.microsoft" or len(node.input) != 3:
        return False
    attrs = _attributes(node)
    if node.op_type == "MatMulNBits":
        same_arithmetic = attrs.get("accuracy_level", 0) == 0
    else:
        same_arithmetic = attrs.get("gather_axis", 0) == 0 and attrs.get("quantize_axis", 1) == 1
    return (
        same_arithmetic
        and attrs.get("bits") == 8
        and node.input[data] in inits
        and node.input[2] in inits
    )


def _matmul_weight(node: Any, inits: dict[str, Any]) -> np.ndarray:
    """The fp32 (K, N) weight of an expandable 8-bit ``MatMulNBits`` node, dequantized."""
    from onnx import numpy_helper

    q = numpy_helper.to_array(inits[node.input[1]])  # (N, blocks, block_size) uint8
    scales = numpy_helper.to_array(inits[node.input[2]]).reshape(q.shape[0], q.shape[1], 1)
    blocks = (q.astype(np.float32) - 128.0) * scales.astype(np.float32)
    return np.ascontiguousarray(blocks.reshape(q.shape[0], -1)[:, : _attributes(node)["K"]].T)


def _subgraphs(node: Any) -> Iterator[Any]:
    """The graphs held by ``node``'s attributes (an ``If``'s branches, a ``Loop``'s or a
    ``Scan``'s body)."""
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs


def _names_read(nodes: Sequence[Any]) -> set[str]:
    """Every name ``nodes`` read, their subgraphs' nodes included (a subgraph may read an
    initializer of the graph around it)."""
    read: set[str] = set()
    for node in nodes:
        read.update(node.input)
        for sub in _subgraphs(node):
            read |= _names_read(sub.node)
    return read


def replace_graph_nodes(
    graph: Any, nodes: list[Any], consumed: set[str], added: Sequence[Any] = ()
) -> None:
    """Rewrite ``graph`` in place: its nodes become ``nodes``; the initializers named in
    ``consumed`` are dropped unless a node (or a node of a subgraph) still reads them; ``added``
    ones are appended."""
    still_read = _names_read(nodes)
    kept = [t for t in graph.initializer if t.name not in consumed or t.name in still_read]
    del graph.initializer[:]
    graph.initializer.extend([*kept, *added])
    del graph.node[:]
    graph.node.extend(nodes)


def expand_weight_blocks(model: Any) -> int:
    """Rewrite ``model`` (an ``onnx.ModelProto``) in place: every 8-bit fp32-arithmetic
    ``MatMulNBits`` becomes a ``MatMul`` over its dequantized fp32 weight, every 8-bit
    ``GatherBlockQuantized`` a ``Gather`` over its dequantized table. Dequantization follows
    the ops' definitions: w = (q - 128) * scale per block of ``block_size`` along K (the
    table's columns). Returns the number of nodes rewritten."""
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    nodes: list[Any] = []
    consumed: set[str] = set()
    added = []
    for node in graph.node:
        if not _expandable(node, inits):
            nodes.append(node)
            continue
        attrs = _attributes(node)
        if node.op_type == "MatMulNBits":
            name = node.input[1] + "_fp32"
            added.append(numpy_helper.from_array(_matmul_weight(node, inits), name))
            consumed.update(node.input[1:3])
            nodes.append(
                helper.make_node("MatMul", [node.input[0], name], list(node.output), name=node.name)
            )
        else:  # GatherBlockQuantized
            q = numpy_helper.to_array(inits[node.input[0]])  # (rows, cols) uint8
            scales = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32)
            block = attrs.get("block_size", 128)
            rows, cols = q.shape
            table = (q.astype(np.float32).reshape(rows, cols // block, block) - 128.0) * scales[
                ..., None
            ]
            name = node.input[0] + "_fp32"
            added.append(numpy_helper.from_array(table.reshape(rows, cols), name))
            consumed.update([node.input[0], node.input[2]])
            nodes.append(
                helper.make_node(
                    "Gather", [name, node.input[1]], list(node.output), name=node.name, axis=0
                )
            )
    if added:
        replace_graph_nodes(graph, nodes, consumed, added)
    return len(added)


def _load_in_memory(path: Path, growth_per_weight: int) -> Any | None:
    """The graph at ``path`` as an ``onnx.ModelProto`` to rewrite, or ``None`` when that cannot
    be done here: no ``onnx`` package, external data, or over 2 GB once rewritten, the rewrite
    adding at most ``growth_per_weight`` bytes per 8-bit weight."""
    try:
        import onnx
    except ImportError:
        return None
    if Path(str(path) + "_data").exists():
        return None  # external tensors: a graph this large is not expanded in memory
    model = onnx.load(str(path))
    inits = {t.name: t for t in model.graph.initializer}
    growth = sum(
        growth_per_weight * int(np.prod(inits[node.input[_DATA_INPUT[node.op_type]]].dims))
        for node in model.graph.node
        if _expandable(node, inits)
    )
    return None if model.ByteSize() + growth > MAX_REWRITTEN_BYTES else model


def expanded_model_bytes(path: Path) -> bytes | None:
    """The serialized fp32-expanded form of the ``w8a32`` graph at ``path``, or ``None`` when
    it cannot be made here (``_load_in_memory``) or has no 8-bit blocks: the caller then loads
    the file itself."""
    model = _load_in_memory(path, growth_per_weight=3)  # uint8 -> float32
    if model is None or not expand_weight_blocks(model):
        return None
    return model.SerializeToString()


def context_model_bytes(path: Path, unsigned_weights: bool = False) -> bytes | None:
    """The serialized int8 context graph (``int8_context_graph``) of the ``w8a32-ctx8`` graph at
    ``path``, made from its stored blocks (no fp32 copy of the whole graph on the way), or
    ``None`` when it cannot be made here or the graph has no smoothed MatMuls. With
    ``unsigned_weights`` its int8 weights are stored as uint8 (``unsigned_int8_weights``)."""
    # Each rewritten weight's blocks give way to an int8 column copy of it: about the same bytes.
    model = _load_in_memory(path, growth_per_weight=1)
    if model is None or not int8_context_graph(model):
        return None
    if unsigned_weights:
        _unsigned_int8_weights_of(model, path)
    return model.SerializeToString()


def unsigned_model_bytes(path: Path) -> bytes | None:
    """The serialized graph at ``path`` with its ``MatMulInteger`` weights made unsigned
    (``unsigned_int8_weights``), or ``None`` when it has none (load the file as it is).
    ``BackendError`` when the graph cannot be rewritten here (``_load_in_memory``), or keeps an
    int8 weight the rewrite cannot reach: its int8 products would then run on the kernel that
    saturates."""
    model = _load_in_memory(path, growth_per_weight=0)
    if model is None:
        raise BackendError(
            f"cannot load {path} on this CPU: onnxruntime's uint8 x int8 products saturate here "
            "(no VNNI), and rewriting the int8 weights to uint8 needs the onnx package and a "
            "graph under 2 GB; export it as w8a32 instead"
        )
    return model.SerializeToString() if _unsigned_int8_weights_of(model, path) else None


def _unsigned_int8_weights_of(model: Any, path: Path) -> int:
    """``unsigned_int8_weights`` of the graph loaded from ``path``, its errors naming it."""
    try:
        return unsigned_int8_weights(model)
    except BackendError as exc:
        raise BackendError(f"cannot load {path}: {exc}") from exc


# Ops whose int8 weight onnxruntime multiplies on its uint8 x int8 CPU kernel (the one that
# saturates without VNNI) -> the index of that weight input. Only ``MatMulInteger`` over a
# main-graph initializer is rewritten (``unsigned_int8_weights``); any other int8 weight of
# these ops is refused where the rewrite is needed.
INT8_WEIGHT_INPUT = {
    "MatMulInteger": 1,
    "MatMulIntegerToFloat": 1,  # com.microsoft
    "DynamicQuantizeMatMul": 1,  # com.microsoft
    "ConvInteger": 1,
    "QLinearMatMul": 3,
    "QLinearConv": 3,
    "QGemm": 3,  # com.microsoft
}


def _element_types(graph: Any, outer: dict[str, int]) -> dict[str, int]:
    """Tensor element type (``TensorProto`` enum) by name, as far as ``graph`` declares it:
    its inputs, value infos and outputs, ``Constant`` and ``Cast`` outputs, initializers,
    over those of the graphs around it (``outer``); 0 (undefined) where not declared."""
    types = dict(outer)
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type"):
            types[value.name] = value.type.tensor_type.elem_type
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            types[node.output[0]] = value.data_type if value is not None else 0
        elif node.op_type == "Cast" and node.output:
            types[node.output[0]] = next((a.i for a in node.attribute if a.name == "to"), 0)
    for t in graph.initializer:
        types[t.name] = t.data_type
    return types


def _refuse_int8_weights(graph: Any, outer: dict[str, int] | None = None) -> None:
    """``BackendError`` where an op of ``INT8_WEIGHT_INPUT`` in ``graph`` or its subgraphs
    multiplies by a weight not known to be uint8 (int8, or of a type the graph does not
    declare): on this CPU onnxruntime would compute it on the kernel that saturates."""
    from onnx import TensorProto

    types = _element_types(graph, outer or {})
    for node in graph.node:
        index = INT8_WEIGHT_INPUT.get(node.op_type)
        if index is not None and len(node.input) > index and node.input[index]:
            weight = node.input[index]
            if types.get(weight, TensorProto.UNDEFINED) != TensorProto.UINT8:
                raise BackendError(
                    "onnxruntime's uint8 x int8 products saturate on this CPU (no VNNI), and "
                    f"{node.op_type} node {node.name or '(unnamed)'!r} multiplies by "
                    f"{weight!r}, an int8 weight faithgate cannot load as uint8 (it rewrites "
                    "MatMulInteger weights stored as initializers of the main graph, not one "
                    "made by a Constant node, a graph input or a subgraph's): its scores "
                    "would be wrong here; export with --quantize w8a32"
                )
        for sub in _subgraphs(node):
            _refuse_int8_weights(sub, types)


def unsigned_int8_weights(model: Any) -> int:
    """Rewrite ``model`` in place: every ``MatMulInteger`` over a constant int8 weight W (zero
    point z, 0 when absent) reads W + 128 as uint8 with zero point z + 128 instead. The integer
    products are the same, (a - a0)(W - z) = (a - a0)((W + 128) - (z + 128)), but onnxruntime
    computes uint8 x uint8 without the 16-bit saturation of its uint8 x int8 kernel on x86 CPUs
    without VNNI (``vpmaddubsw``: two products of 255 x 127 overflow; measured 19% off on
    random data on an AVX2 AMD EPYC). Returns the number of nodes rewritten.

    Fails closed: ``BackendError`` where an int8 weight of an int8-product op is left
    (``INT8_WEIGHT_INPUT``: one made by a ``Constant`` node, a graph input, a weight inside an
    ``If`` / ``Loop`` / ``Scan`` subgraph, or an op other than ``MatMulInteger``), which would
    otherwise run on the saturating kernel."""
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    made: dict[str, str] = {}  # int8 initializer -> its uint8 form
    added: list[Any] = []

    def unsigned(name: str) -> str:
        if name not in made:
            made[name] = name + "_u8"
            shifted = numpy_helper.to_array(inits[name]).astype(np.int16) + 128
            added.append(numpy_helper.from_array(shifted.astype(np.uint8), made[name]))
        return made[name]

    def is_int8(name: str) -> bool:
        return name in inits and inits[name].data_type == 3  # TensorProto.INT8

    default_zero = "fg_u8_zero_point"  # for weights without a zero point (0 -> 128)
    nodes: list[Any] = []
    rewritten = 0
    for node in graph.node:
        a, w, a_zero, w_zero = (
            [*node.input, "", ""][:4] if node.op_type == "MatMulInteger" else [""] * 4
        )
        if not is_int8(w) or (w_zero and not is_int8(w_zero)):
            nodes.append(node)
            continue
        if not w_zero and not any(t.name == default_zero for t in added):
            added.append(numpy_helper.from_array(np.array(128, np.uint8), default_zero))
        inputs = [a, unsigned(w), a_zero, unsigned(w_zero) if w_zero else default_zero]
        nodes.append(helper.make_node("MatMulInteger", inputs, list(node.output), name=node.name))
        rewritten += 1
    if rewritten:
        replace_graph_nodes(graph, nodes, set(made), added)
    _refuse_int8_weights(graph)
    return rewritten


# --- per-token int8 MatMuls (w8a8 exports and the w8a32-ctx8 context graph) ------------------

# Name prefix of the smoothing ``Mul`` nodes of a ``w8a32-ctx8`` export.
CONTEXT_SMOOTHING_PREFIX = "fg_ctx8_smooth"


def int8_constants() -> list[Any]:
    """The scalar constants the per-token int8 nodes read (added once per graph)."""
    from onnx import numpy_helper

    return [
        numpy_helper.from_array(np.array([-1], np.int64), "fg_w8a8_axes"),
        numpy_helper.from_array(np.array(1e-8, np.float32), "fg_w8a8_eps"),
        numpy_helper.from_array(np.array(1.0 / 127.0, np.float32), "fg_w8a8_inv127"),
        numpy_helper.from_array(np.array(128.0, np.float32), "fg_w8a8_shift"),
        numpy_helper.from_array(np.array(128, np.uint8), "fg_w8a8_zero_point"),
    ]


def int8_columns(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 weights with one scale per output column: w ~= w_q * scale."""
    scale = np.abs(w).max(axis=0) / 127.0
    scale[scale == 0] = 1.0
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8), scale.astype(np.float32)


def per_token_uint8_nodes(x: str, q: str) -> list[Any]:
    """Nodes quantizing activations ``x`` per row (token): scale_t = max_j |x_tj| / 127,
    ``q_u8`` = round(x / scale_t) + 128 as uint8, ``q_scale`` = scale_t."""
    from onnx import TensorProto, helper

    return [
        helper.make_node("Abs", [x], [q + "_abs"]),
        helper.make_node("ReduceMax", [q + "_abs", "fg_w8a8_axes"], [q + "_max"]),
        helper.make_node("Max", [q + "_max", "fg_w8a8_eps"], [q + "_max_eps"]),
        helper.make_node("Mul", [q + "_max_eps", "fg_w8a8_inv127"], [q + "_scale"]),
        helper.make_node("Div", [x, q + "_scale"], [q + "_div"]),
        helper.make_node("Round", [q + "_div"], [q + "_round"]),
        helper.make_node("Add", [q + "_round", "fg_w8a8_shift"], [q + "_shift"]),
        helper.make_node("Cast", [q + "_shift"], [q + "_u8"], to=TensorProto.UINT8),
    ]


def int8_matmul_nodes(qx: str, x_scale: str, tag: str, output: str) -> list[Any]:
    """y = MatMulInteger(qx, ``tag_w``) * x_scale * ``tag_w_scale``: the product of per-token
    uint8 activations and per-column int8 weights, back in fp32."""
    from onnx import TensorProto, helper

    return [
        helper.make_node("MatMulInteger", [qx, tag + "_w", "fg_w8a8_zero_point"], [tag + "_i"]),
        helper.make_node("Cast", [tag + "_i"], [tag + "_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", [tag + "_f", x_scale], [tag + "_fx"]),
        helper.make_node("Mul", [tag + "_fx", tag + "_w_scale"], [output]),
    ]


def int8_context_graph(model: Any) -> int:
    """Rewrite the graph ``model`` in place into its int8 context form: every MatMul over a
    constant weight (fp32 ``MatMul``, or 8-bit ``MatMulNBits`` as stored, dequantized here)
    whose input is an ``fg_ctx8_smooth*`` output (already smoothed, X / s; its weight
    diag(s) W) becomes ``MatMulInteger`` on per-token uint8 activations and per-column int8
    weights, as ``w8a8`` exports compute. Returns the number of MatMuls rewritten (0: not a
    ``w8a32-ctx8`` graph, left as it was)."""
    from onnx import numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    smoothed = {
        n.output[0]
        for n in graph.node
        if n.op_type == "Mul" and n.name.startswith(CONTEXT_SMOOTHING_PREFIX)
    }
    quantized_inputs: dict[str, tuple[str, str]] = {}
    nodes: list[Any] = []
    consumed: set[str] = set()
    added: list[Any] = []
    for node in graph.node:
        if not node.input or node.input[0] not in smoothed:
            nodes.append(node)
            continue
        if node.op_type == "MatMulNBits" and _expandable(node, inits):
            weight = _matmul_weight(node, inits)
        elif node.op_type == "MatMul" and node.input[1] in inits:
            weight = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
        else:
            nodes.append(node)
            continue
        if weight.ndim != 2:
            nodes.append(node)
            continue
        x = node.input[0]
        if x not in quantized_inputs:
            q = f"fg_ctx8_x{len(quantized_inputs)}"
            nodes += per_token_uint8_nodes(x, q)
            quantized_inputs[x] = (q + "_u8", q + "_scale")
        tag = node.input[1] + "_ctx8"
        w_q, w_scale = int8_columns(weight)
        added += [
            numpy_helper.from_array(w_q, tag + "_w"),
            numpy_helper.from_array(w_scale, tag + "_w_scale"),
        ]
        consumed.update(node.input[1:])
        nodes += int8_matmul_nodes(*quantized_inputs[x], tag, node.output[0])
    if not added:
        return 0
    replace_graph_nodes(graph, nodes, consumed, added + int8_constants())
    return len(added) // 2
