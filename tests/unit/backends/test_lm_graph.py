"""``lm_graph.drop_softmax_nan_guards`` on a hand-built attention block: the guard goes, the
probabilities of every row with a visible key stay bit-identical, and a fully masked row
becomes finite instead of NaN."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from faithgate.backends.lm_graph import drop_softmax_nan_guards  # noqa: E402


def _const(name: str, value: float) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.array([value], np.float32))
    )


def _attention_block(fill: float) -> onnx.ModelProto:
    """probs = guard(Softmax(scores + Where(mask, 0, fill))), as optimum exports SDPA."""
    nodes = [
        _const("zero", 0.0),
        _const("fill", fill),
        _const("guard_zero", 0.0),
        helper.make_node("Where", ["mask", "zero", "fill"], ["bias"]),
        helper.make_node("Add", ["scores", "bias"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("IsNaN", ["probs"], ["nan"]),
        helper.make_node("Where", ["nan", "guard_zero", "probs"], ["guarded"]),
        helper.make_node("Identity", ["guarded"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "attention",
        [
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 3]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9  # what onnxruntime reads, whatever onnx writes by default
    return model


def _run(model: onnx.ModelProto) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    scores = np.array([[0.3, -1.2, 2.0], [1.0, 0.5, -0.5]], np.float32)
    mask = np.array([[True, False, True], [False, False, False]])  # row 2: nothing visible
    return session.run(["out"], {"scores": scores, "mask": mask})[0]


def test_guard_dropped_and_scores_unchanged():
    model = _attention_block(-np.inf)
    before = _run(model)
    assert drop_softmax_nan_guards(model.graph) == 1
    ops = [n.op_type for n in model.graph.node]
    assert "IsNaN" not in ops and ops.count("Where") == 1 and ops.count("Constant") == 2
    after = _run(model)
    assert np.array_equal(before[0], after[0])  # bit-identical where a key is visible
    assert np.array_equal(before[1], [0.0, 0.0, 0.0])  # the guard's zeros
    assert np.all(np.isfinite(after[1]))  # finite without the guard
    np.testing.assert_allclose(after[1], 1 / 3)


def test_other_fills_are_left_alone():
    """A fill that is neither -inf nor finfo.min might still give NaN rows: keep the guard."""
    model = _attention_block(-1e4)
    assert drop_softmax_nan_guards(model.graph) == 0
    assert "IsNaN" in [n.op_type for n in model.graph.node]
