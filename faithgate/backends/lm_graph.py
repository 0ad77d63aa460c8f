"""Export-time rewrites of a language model's ONNX graph that leave its scores unchanged.

``drop_softmax_nan_guards``: transformers' SDPA attention, as optimum exports it, masks with
``-inf`` and then guards the softmax with ``Where(IsNaN(p), 0, p)``, because a query row whose
keys are all masked would otherwise give NaN. The guard costs two full passes over every
(batch, heads, query, key) probability tensor in every layer: 15% of SmolLM2-135M's time on a
700-token source on this project's CPU. Masking with the most negative finite float instead
(what transformers' eager attention does) makes a fully masked row finite (uniform), so the
guard has nothing left to do and is removed. Any row with at least one visible key is
bit-identical, because ``exp(finfo.min - rowmax)`` and ``exp(-inf)`` are both exactly 0.
Only the exact pattern ``Where(IsNaN(s), c, s)`` with ``s = Softmax(Add(scores,
Where(mask, 0, -inf)))`` and constant ``c`` is rewritten; graphs without it are left alone.

``add_score_from``: a new graph input ``score_from`` (int64, shape [1]) drops the first
positions before the LM head, so ``target_logprobs`` covers positions ``score_from:`` only. A
source prefix run only for its key/value cache then skips the head and the full-vocabulary
log-softmax on every source token: on a 700-token source those are a fifth of SmolLM2-135M's
time (its 576 x 49,152 head is a fifth of its multiply-adds). Scores of the positions kept are
those of the whole graph: the head is position-wise.

Pure ``onnx`` protobuf edits: no torch.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np


def _constant_array(node: Any) -> np.ndarray | None:
    from onnx import numpy_helper

    if node is None or node.op_type != "Constant" or not node.attribute:
        return None
    attr = node.attribute[0]
    return numpy_helper.to_array(attr.t) if attr.name == "value" else None


def drop_softmax_nan_guards(graph: Any) -> int:
    """Remove every attention softmax NaN guard of ``graph`` (an ``onnx.GraphProto``, edited
    in place) whose mask can be made finite; returns the number of guards removed."""
    from onnx import numpy_helper

    # Positions, not id(): protobuf may hand out a fresh wrapper for a node on each access.
    position = {out: k for k, node in enumerate(graph.node) for out in node.output}
    producer = {out: graph.node[k] for out, k in position.items()}
    consumers = Counter(name for node in graph.node for name in node.input)
    graph_outputs = {out.name for out in graph.output}
    finite_min = np.finfo(np.float32).min
    dropped: set[int] = set()  # positions in graph.node
    renamed: dict[str, str] = {}
    fills: set[str] = set()  # the guards' constant zeros, dropped too once nothing reads them
    for guard in graph.node:
        if guard.op_type != "Where" or len(guard.input) != 3:
            continue
        isnan = producer.get(guard.input[0])
        softmax = producer.get(guard.input[2])
        if (
            isnan is None
            or isnan.op_type != "IsNaN"
            or guard.output[0] in graph_outputs
            or isnan.input[0] != guard.input[2]
            or consumers.get(isnan.output[0]) != 1
            or softmax is None
            or softmax.op_type != "Softmax"
            or _constant_array(producer.get(guard.input[1])) is None
        ):
            continue
        add = producer.get(softmax.input[0])
        if add is None or add.op_type != "Add":
            continue
        masks = [producer.get(i) for i in add.input]
        masks = [m for m in masks if m is not None and m.op_type == "Where"]
        if len(masks) != 1:
            continue
        fill = producer.get(masks[0].input[2])
        value = _constant_array(fill)
        if value is None or value.dtype != np.float32:
            continue
        if np.all(np.isneginf(value)):
            tensor = numpy_helper.from_array(np.full_like(value, finite_min))
            fill.attribute[0].t.CopyFrom(tensor)
        elif not np.all(value == finite_min):
            continue  # some other fill: a fully masked row might still be NaN
        dropped.update((position[guard.output[0]], position[isnan.output[0]]))
        fills.add(guard.input[1])
        renamed[guard.output[0]] = softmax.output[0]
    if not renamed:
        return 0
    kept = [node for k, node in enumerate(graph.node) if k not in dropped]
    for node in kept:
        for k, name in enumerate(node.input):
            if name in renamed:
                node.input[k] = renamed[name]
    # Only the guards' own zeros: a constant read from inside a subgraph (If, Loop) would look
    # unused from here.
    used = {name for node in kept for name in node.input}
    used.update(out.name for out in graph.output)
    unread_fills = fills - used
    kept = [n for n in kept if n.op_type != "Constant" or n.output[0] not in unread_fills]
    del graph.node[:]
    graph.node.extend(kept)
    return len(renamed)


SCORE_FROM = "score_from"
_INT64_MAX = np.iinfo(np.int64).max


def add_score_from(graph: Any, logits: str, targets: str) -> bool:
    """Give ``graph`` the input ``score_from`` (see the module docstring): the hidden states
    entering the MatMul that produces ``logits`` and the ``targets`` tensor are sliced from
    that position on (axis 1). Returns False, leaving the graph alone, when ``logits`` is not
    produced by a MatMul (directly or through one bias Add)."""
    from onnx import TensorProto, helper, numpy_helper

    producer = {out: node for node in graph.node for out in node.output}
    head = producer.get(logits)
    if head is not None and head.op_type == "Add":
        head = next(
            (producer[i] for i in head.input if i in producer and producer[i].op_type == "MatMul"),
            None,
        )
    if head is None or head.op_type != "MatMul":
        return False
    graph.input.append(helper.make_tensor_value_info(SCORE_FROM, TensorProto.INT64, [1]))
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array([_INT64_MAX], np.int64), "fg_slice_end"),
            numpy_helper.from_array(np.array([1], np.int64), "fg_slice_axis"),
        ]
    )
    # Rewire first: inserting copies a node into the graph.
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name == targets:
                node.input[k] = "fg_scored_targets"
    hidden = head.input[0]
    head.input[0] = "fg_scored_hidden"
    bounds = [SCORE_FROM, "fg_slice_end", "fg_slice_axis"]
    at = next(k for k, node in enumerate(graph.node) if node.input[:1] == ["fg_scored_hidden"])
    graph.node.insert(
        at,
        helper.make_node("Slice", [hidden, *bounds], ["fg_scored_hidden"], name="fg_slice_hidden"),
    )
    graph.node.insert(
        0,
        helper.make_node(
            "Slice", [targets, *bounds], ["fg_scored_targets"], name="fg_slice_targets"
        ),
    )
    return True


# Ops a key-padding mask passes through, value by value, on its way to the attention scores.
_MASK_ELEMENTWISE = frozenset({"Cast", "Sub", "Where", "Not", "Mul"})


def drop_mask_expands(graph: Any) -> int:
    """Remove every ``Expand`` of a key-padding mask to (batch, 1, queries, keys) that only
    elementwise ops and key-axis ``Slice`` s read on its way to an ``Add`` with the attention
    scores (``graph``, an ``onnx.GraphProto``, is edited in place); returns how many.

    transformers' eager attention, as optimum exports BART and PEGASUS, expands the
    (batch, keys) mask to one row per query before turning it into additive form (Cast, 1 -
    mask, Where(mask, finfo.min, .)): four passes over a queries x keys tensor per run, about
    half of a 1-layer encoder's op time on a 900-token source (ORT profile). Left at
    (batch, 1, 1, keys), every op computes the same values once per key and the ``Add``
    broadcasts them over the queries: the scores are bit-identical. A mask whose expansion
    is read by anything else (its ``Shape``, a causal-mask ``ScatterND``) is left alone.
    """
    from onnx import numpy_helper

    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    inputs = {i.name for i in graph.input}
    outputs = {o.name for o in graph.output}
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}

    def const(name: str) -> np.ndarray | None:
        if name in constants:
            return constants[name]
        return _constant_array(producer.get(name))

    def from_mask_input(name: str) -> bool:
        while name in producer and producer[name].op_type in ("Unsqueeze", "Cast"):
            name = producer[name].input[0]
        return name in inputs and name.endswith("attention_mask")

    def reads_values_only(name: str) -> bool:
        """Everything downstream of ``name`` up to the Adds is elementwise or a key-axis
        Slice, and nothing else (no Shape, no graph output) reads it."""
        frontier, seen = [name], set()
        while frontier:
            tensor = frontier.pop()
            if tensor in seen:
                continue
            seen.add(tensor)
            if tensor in outputs:
                return False
            for node in consumers.get(tensor, []):
                if node.op_type == "Add":
                    continue  # broadcasts (batch, 1, 1, keys) over the queries
                if node.op_type == "Slice":
                    axes = const(node.input[3]) if len(node.input) > 3 else None
                    if node.input[0] != tensor or axes is None or set(axes.tolist()) - {3, -1}:
                        return False
                elif node.op_type not in _MASK_ELEMENTWISE:
                    return False
                frontier.extend(node.output)
        return True

    dropped = []
    for node in graph.node:
        if node.op_type != "Expand" or not from_mask_input(node.input[0]):
            continue
        if not reads_values_only(node.output[0]):
            continue
        for reader in consumers.get(node.output[0], []):
            for k, name in enumerate(reader.input):
                if name == node.output[0]:
                    reader.input[k] = node.input[0]
        dropped.append(node)
    for node in dropped:
        graph.node.remove(node)
    return len(dropped)
