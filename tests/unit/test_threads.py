"""faithgate.threads: torch's OpenMP waits passively and MKL runs in its reproducible mode unless
the user chose; metrics compute with numpy's BLAS on one thread, restored afterwards."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from faithgate import threads
from faithgate.metrics.base import Metric
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example, Score


def _policy_after_import(env_policy: str | None, variable: str = "OMP_WAIT_POLICY") -> str:
    env = {k: v for k, v in os.environ.items() if k != variable}
    if env_policy is not None:
        env[variable] = env_policy
    code = f"import os, faithgate; print(os.environ.get({variable!r}, '<unset>'))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


# (variable, value faithgate sets, a user's own value, the function that sets it)
BEFORE_TORCH = [
    ("OMP_WAIT_POLICY", "PASSIVE", "ACTIVE", threads.prefer_passive_openmp),
    ("MKL_CBWR", threads.REPRODUCIBLE_MKL, "AVX2", threads.prefer_reproducible_mkl),
]


@pytest.mark.parametrize(("variable", "ours", "users", "setter"), BEFORE_TORCH)
def test_import_sets_it_when_unset_and_keeps_a_users(variable, ours, users, setter):
    assert _policy_after_import(None, variable) == ours
    assert _policy_after_import(users, variable) == users


@pytest.mark.parametrize(("variable", "ours", "users", "setter"), BEFORE_TORCH)
def test_too_late_once_torch_is_loaded(monkeypatch, variable, ours, users, setter):
    # The library read the variable when torch loaded: setting it now would claim an effect it
    # has not.
    monkeypatch.delenv(variable, raising=False)
    monkeypatch.setitem(sys.modules, "torch", object())
    monkeypatch.setattr(threads, "MISSED", set())  # the process's own record stays as it was
    assert setter() is False
    assert variable not in os.environ


def test_torch_projection_rows_do_not_depend_on_their_company():
    """What the setting is for, on whatever CPU runs the suite: a row of a product equals the
    same row computed alone (torch imported after faithgate, as in every faithgate process)."""
    pytest.importorskip("torch")
    code = (
        "import faithgate, torch\n"
        "torch.manual_seed(0)\n"
        "bad = 0\n"
        "for k, n in [(384, 384), (384, 1536), (1536, 384)]:\n"
        "    lin = torch.nn.Linear(k, n)\n"
        "    with torch.no_grad():\n"
        "        for rows in range(5, 60, 3):\n"
        "            x = torch.randn(4 * rows, k)\n"
        "            bad += int(not torch.equal(lin(x[:rows]), lin(x)[:rows]))\n"
        "print(bad)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "0"


def _openblas_threads() -> list[int]:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return [
        info["num_threads"]
        for info in threadpoolctl.threadpool_info()
        if info["internal_api"] == "openblas"
    ]


def test_metric_blas_threads_limits_and_restores():
    before = _openblas_threads()
    if not before:
        pytest.skip("numpy is not linked against OpenBLAS here: nothing to limit")
    with threads.metric_blas_threads():
        assert set(_openblas_threads()) == {1}
    assert _openblas_threads() == before


class BlasProbe(Metric):
    """Records numpy's OpenBLAS thread counts seen while scoring."""

    name = "blas_probe_test"

    def __init__(self, **settings):
        super().__init__(**settings)
        self.seen: list[list[int]] = []

    def score_batch(self, examples, ctx):
        self.seen.append(_openblas_threads())
        return [Score(self.name, 1.0, self.settings_hash(ctx), ex.id) for ex in examples]


def test_scorer_runs_metrics_on_one_blas_thread():
    if not _openblas_threads():
        pytest.skip("numpy is not linked against OpenBLAS here: nothing to limit")
    probe = BlasProbe()
    Scorer([probe]).score([Example("a", "source text", "summary")])
    assert probe.seen == [[1] * len(probe.seen[0])]


def _tiny_onnx(path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize(("policy", "spinning"), [(None, "0"), ("PASSIVE", "0"), ("ACTIVE", "1")])
def test_onnxruntime_sessions_spin_only_when_asked(tmp_path, monkeypatch, policy, spinning):
    pytest.importorskip("onnxruntime")
    from faithgate.backends import onnx_backend, onnx_session

    if policy is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", policy)
    monkeypatch.setattr(onnx_session, "_SESSIONS", {})  # a fresh session, not a cached one
    session = onnx_backend.get_session(_tiny_onnx(tmp_path / "identity.onnx"), threads=1)
    options = session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == spinning
