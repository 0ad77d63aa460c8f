"""The int8 forms the onnx backend loads exact on every CPU: ``int8-static`` QDQ graphs (no
saturating fused kernel where uint8 x int8 products are not exact), the ``w8a32-ctx8`` context
graph's fallback where no int8 form is exact, and the uint8 rewrite of int8 weights failing
closed on weights it cannot reach.

onnxruntime's uint8 x int8 kernel saturates in 16 bits on x86 CPUs without VNNI
(``onnx_backend.int8_weights_form``). The tests that depend on the probe's answer set it
(``_INT8_WEIGHTS``), so they mean the same on every machine; the int8-static one also runs
with the real probe, on inputs that saturate where the kernel does.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from faithgate.backends import expand, onnx_backend, onnx_session  # noqa: E402
from faithgate.errors import BackendError  # noqa: E402

pytestmark = pytest.mark.xdist_group("onnx")


@pytest.fixture(autouse=True)
def _no_cached_sessions(tmp_path):
    yield
    onnx_backend.drop_sessions(tmp_path)


def _save(tmp_path, name, nodes, inputs, outputs, inits, opset=13):
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs, inits),
        opset_imports=[helper.make_opsetid("", opset)],
        ir_version=8,
    )
    onnx.checker.check_model(model)
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def _static_int8_file(tmp_path):
    """A float MatMul quantized as ``int8-static`` exports are (``quantize_static_int8``: QDQ,
    int8 activations and per-channel int8 weights), and inputs on which the fused uint8 x int8
    kernel saturates on a CPU without VNNI (column 0's weights all large and positive)."""
    from faithgate.backends.quantize.forms import quantize_static_int8

    rng = np.random.default_rng(0)
    k, n = 256, 64
    w = rng.normal(size=(k, n)).astype(np.float32)
    w[:, 0] = np.abs(w[:, 0]) + 2
    src = _save(
        tmp_path,
        "f.onnx",
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n])],
        [numpy_helper.from_array(w, "w")],
    )
    dst = tmp_path / "q.onnx"
    calibration = [{"x": rng.normal(size=(4, k)).astype(np.float32)} for _ in range(4)]
    quantize_static_int8(src, dst, calibration)
    x = rng.normal(size=(3, k)).astype(np.float32) * 3
    return dst, x


def _unfused(path, x):
    """The QDQ graph's own arithmetic: no fusion into int8 kernels."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _qdq_fusion_disabled(session) -> bool:
    try:
        entry = session.get_session_options().get_session_config_entry("session.disable_quant_qdq")
    except RuntimeError:  # not set
        return False
    return entry == "1"


def test_int8_static_session_computes_the_qdq_graph_exactly(tmp_path, monkeypatch):
    """An ``int8-static`` manifest's session gives the QDQ graph's own (unfused) values on
    this CPU: where uint8 x int8 products saturate (no VNNI), onnxruntime's fused QDQ kernel
    was 25-46% off on this product; the backend then turns QDQ fusion off. Where the products
    are exact (VNNI) the fused kernel is kept and gives the same values."""
    path, x = _static_int8_file(tmp_path)
    monkeypatch.setattr(onnx_session, "load_tokenizer", lambda manifest: None)
    manifest = SimpleNamespace(
        quantization="int8-static",
        config={},
        files={"model": path.name},
        path_of=lambda part: path,
    )
    role = onnx_session.OnnxRole()
    role._setup(manifest, 1, "cpu")  # the real probe: int8_weights_form() on this CPU
    session = role.sessions["model"]
    ref = _unfused(path, x)
    (y,) = session.run(None, {"x": x})
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-6 * np.abs(ref).max())
    assert _qdq_fusion_disabled(session) == (onnx_session.exact_int8_form() != "int8")
    # A session of the file as stored is another cache entry, never this one.
    assert onnx_backend.get_session(path, 1, "cpu", graph="stored") is not session
    assert onnx_backend.get_session(path, 1, "cpu", graph="int8-qdq") is session
    # Whatever this CPU is: the probe's three answers.
    for form, disabled in (("uint8", True), ("", True), ("int8", False)):
        onnx_backend.drop_sessions(tmp_path)
        monkeypatch.setattr(onnx_session, "_INT8_WEIGHTS", [form])
        session = onnx_backend.get_session(path, 1, "cpu", graph="int8-qdq")
        assert _qdq_fusion_disabled(session) is disabled, form
        if disabled:
            np.testing.assert_array_equal(session.run(None, {"x": x})[0], ref)


def _ctx8_file(tmp_path):
    """One smoothed MatMul, as a ``w8a32-ctx8`` export carries (``fg_ctx8_smooth*``)."""
    rng = np.random.default_rng(0)
    return _save(
        tmp_path,
        "ctx8.onnx",
        [
            helper.make_node("Mul", ["x", "inv_s"], ["xs"], name="fg_ctx8_smooth0"),
            helper.make_node("MatMul", ["xs", "w"], ["y"], name="/proj/MatMul"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 8])],
        [
            numpy_helper.from_array(np.ones(16, np.float32), "inv_s"),
            numpy_helper.from_array(rng.normal(size=(16, 8)).astype(np.float32), "w"),
        ],
        opset=18,
    )


def test_context_graph_falls_back_where_no_int8_form_is_exact(tmp_path, monkeypatch, caplog):
    """``graph="context-int8"`` is ``None`` where the int8 context graph cannot be built here,
    a CPU where neither int8 form is exact included (the exact graph then runs every pass, with
    one warning), not an error; w8a8 / int8-dynamic graphs still refuse to load there, and
    the message no longer names w8a32-ctx8 among the forms that cannot run."""
    path = _ctx8_file(tmp_path)
    monkeypatch.setattr(onnx_session, "_INT8_WEIGHTS", ["uint8"])
    assert onnx_backend.get_session(path, threads=1, graph="context-int8") is not None
    onnx_backend.drop_sessions(tmp_path)
    monkeypatch.setattr(onnx_session, "_INT8_WEIGHTS", [""])
    monkeypatch.setattr(onnx_session, "_CONTEXT_FALLBACK_WARNED", [], raising=False)
    with caplog.at_level(logging.WARNING, logger=onnx_session.__name__):
        assert onnx_backend.get_session(path, threads=1, graph="context-int8") is None
        assert onnx_backend.get_session(path, threads=1, graph="context-int8") is None
    warned = [r for r in caplog.records if "w8a32-ctx8" in r.getMessage()]
    assert len(warned) == 1 and "exact graph" in warned[0].getMessage()
    assert onnx_backend.get_session(path, threads=1, graph="expanded") is not None
    with pytest.raises(BackendError, match="int8 products are not exact on this CPU") as err:
        onnx_backend.int8_weights_form()
    assert "w8a8 and int8-dynamic" in str(err.value)
    assert "ctx8" not in str(err.value) and "\n" not in str(err.value)


A = helper.make_tensor_value_info("a", TensorProto.UINT8, [None, 64])


def _y(name="y"):
    return helper.make_tensor_value_info(name, TensorProto.INT32, [None, 4])


def _int8_weight():
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, size=(64, 4)).astype(np.int8)
    w[:, 0] = 127  # saturates on the uint8 x int8 kernel without VNNI
    return w


def _if_node(branch_nodes, outputs):
    """``If`` over a constant true condition, both branches ``branch_nodes``."""
    branch = helper.make_graph(branch_nodes, "branch", [], outputs)
    return helper.make_node(
        "If", ["cond"], [o.name for o in outputs], then_branch=branch, else_branch=branch
    )


def _unreachable_weight_graph(tmp_path, case):
    """Graphs whose int8 ``MatMulInteger`` weight ``unsigned_int8_weights`` cannot rewrite."""
    w = _int8_weight()
    cond = numpy_helper.from_array(np.array(True), "cond")
    if case == "constant-node":
        nodes = [
            helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w, "w")),
            helper.make_node("MatMulInteger", ["a", "w"], ["y"], name="mm"),
        ]
        return _save(tmp_path, f"{case}.onnx", nodes, [A], [_y()], [])
    if case == "graph-input":
        w_in = helper.make_tensor_value_info("w", TensorProto.INT8, [64, 4])
        nodes = [helper.make_node("MatMulInteger", ["a", "w"], ["y"], name="mm")]
        return _save(tmp_path, f"{case}.onnx", nodes, [A, w_in], [_y()], [])
    assert case == "subgraph"  # an If branch reads the main graph's int8 initializer
    nodes = [
        helper.make_node("MatMulInteger", ["a", "w"], ["y"], name="mm"),
        _if_node([helper.make_node("MatMulInteger", ["a", "w"], ["z"], name="inner")], [_y("z")]),
    ]
    inits = [numpy_helper.from_array(w, "w"), cond]
    return _save(tmp_path, f"{case}.onnx", nodes, [A], [_y(), _y("z")], inits)


@pytest.mark.parametrize("case", ["constant-node", "graph-input", "subgraph"])
def test_int8_weights_the_rewrite_cannot_reach_are_refused(tmp_path, monkeypatch, case):
    """Where int8 weights must be loaded as uint8, one the rewrite does not reach (made by a
    ``Constant`` node, a graph input, read inside a subgraph) would run on the saturating
    kernel (49% off on this weight): loading the graph is a one-line ``BackendError`` instead.
    Where uint8 x int8 products are exact the file loads as stored."""
    path = _unreachable_weight_graph(tmp_path, case)
    with pytest.raises(BackendError, match="MatMulInteger node '(mm|inner)'") as err:
        expand.unsigned_int8_weights(onnx.load(str(path)))
    assert "\n" not in str(err.value)
    monkeypatch.setattr(onnx_session, "_INT8_WEIGHTS", ["uint8"])
    with pytest.raises(BackendError, match="cannot load .*saturate on this CPU") as err:
        onnx_backend.get_session(path, threads=1, graph="int8")
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setattr(onnx_session, "_INT8_WEIGHTS", ["int8"])
    assert onnx_backend.get_session(path, threads=1, graph="int8") is not None


def test_rewrite_keeps_an_initializer_a_subgraph_reads(tmp_path, monkeypatch):
    """An int8 weight rewritten for the main graph's ``MatMulInteger`` but also read inside an
    ``If`` branch (here dequantized) stays in the graph beside its uint8 form, and the
    rewritten graph gives the exact products."""
    w = _int8_weight()
    dq = helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], name="dq")
    path = _save(
        tmp_path,
        "sub_reads.onnx",
        [
            helper.make_node("MatMulInteger", ["a", "w"], ["y"], name="mm"),
            _if_node([dq], [helper.make_tensor_value_info("wf", TensorProto.FLOAT, [64, 4])]),
        ],
        [A],
        [_y(), helper.make_tensor_value_info("wf", TensorProto.FLOAT, [64, 4])],
        [
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(np.float32(0.5), "s"),
            numpy_helper.from_array(np.array(True), "cond"),
        ],
    )
    model = onnx.load(str(path))
    assert expand.unsigned_int8_weights(model) == 1
    assert {"w", "w_u8"} <= {t.name for t in model.graph.initializer}
    onnx.checker.check_model(model)
    a = np.random.default_rng(1).integers(0, 256, size=(5, 64)).astype(np.uint8)
    a[0] = 255
    monkeypatch.setattr(onnx_session, "_INT8_WEIGHTS", ["uint8"])
    y, wf = onnx_backend.get_session(path, threads=1, graph="int8").run(None, {"a": a})
    np.testing.assert_array_equal(y, a.astype(np.int64) @ w.astype(np.int64))
    np.testing.assert_array_equal(wf, w.astype(np.float32) * 0.5)
