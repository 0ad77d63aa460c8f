"""Load-time expansion of ``w8a32`` exports: 8-bit weights on disk, fp32 MatMuls in memory.

A ``w8a32`` export stores its weights as 8-bit blocks (``MatMulNBits`` with ``accuracy_level``
0, ``GatherBlockQuantized``) and computes in fp32: onnxruntime's kernel dequantizes every block
on every call, which made the form slower than the fp32 export it equals (the shipped NLI
checker 0.82x, SmolLM2 0.71-0.83x; issue 13). Dequantizing each block once when the model is
loaded gives the same products (each weight is q * scale either way; measured within 2e-6 on
the checker's probabilities) at fp32 speed, while the file on disk stays small.

Torch-free: needs the ``onnx`` package to rewrite the graph. Without it, or for a model whose
expanded form would pass protobuf's 2 GB limit, the file is loaded as it is (same values,
slower).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

# Over this many bytes the expanded graph could not be serialized in one protobuf message.
MAX_EXPANDED_BYTES = 1_800_000_000


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
            q = numpy_helper.to_array(inits[node.input[1]])  # (N, blocks, block_size) uint8
            scales = numpy_helper.to_array(inits[node.input[2]]).reshape(q.shape[0], q.shape[1], 1)
            blocks = (q.astype(np.float32) - 128.0) * scales.astype(np.float32)
            weight = blocks.reshape(q.shape[0], -1)[:, : attrs["K"]].T  # (K, N)
            name = node.input[1] + "_fp32"
            added.append(numpy_helper.from_array(np.ascontiguousarray(weight), name))
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
    rewritten = len(added)
    if rewritten:
        still_read = {i for n in nodes for i in n.input}
        kept = [t for t in graph.initializer if t.name not in consumed or t.name in still_read]
        del graph.initializer[:]
        graph.initializer.extend(kept + added)
        del graph.node[:]
        graph.node.extend(nodes)
    return rewritten


def expanded_model_bytes(path: Path) -> bytes | None:
    """The serialized fp32-expanded form of the ``w8a32`` graph at ``path``, or ``None`` when
    it cannot be made here (no ``onnx`` package, external data, or over 2 GB expanded): the
    caller then loads the file itself."""
    try:
        import onnx
    except ImportError:
        return None
    if Path(str(path) + "_data").exists():
        return None  # external tensors: a graph this large is not expanded in memory
    model = onnx.load(str(path))
    inits = {t.name: t for t in model.graph.initializer}
    growth = sum(  # uint8 -> float32
        3 * int(np.prod(inits[node.input[_DATA_INPUT[node.op_type]]].dims))
        for node in model.graph.node
        if _expandable(node, inits)
    )
    if model.ByteSize() + growth > MAX_EXPANDED_BYTES:
        return None
    if not expand_weight_blocks(model):
        return None
    return model.SerializeToString()
