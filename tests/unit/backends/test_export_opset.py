"""``faithgate export --opset``: the opsets an export can be made at (``backends.export``'s
``MIN_OPSET`` to ``MAX_OPSET``), checked before any model is resolved or loaded.

``--opset -1`` (or 999) once loaded the model, then exited 1 with torch's "Unsupported
onnx_opset_version" and a dump of the traced graph on standard output.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from faithgate import models
from faithgate.backends import export as export_module
from faithgate.backends.export import (
    DEFAULT_OPSET,
    MAX_OPSET,
    MIN_OPSET,
    check_opset,
    export_model,
    load_manifest,
)
from faithgate.cli import cli
from faithgate.errors import InputError

CORPUS = [
    "The council voted to build a new library in the city park.",
    "Police said two men were arrested after the fire.",
]


@pytest.mark.parametrize("opset", ["-1", "0", str(MIN_OPSET - 1), str(MAX_OPSET + 1), "999"])
def test_an_opset_out_of_range_is_refused_before_the_model_is_resolved(
    tmp_path, monkeypatch, opset
):
    def resolve(*args, **kwargs):
        raise AssertionError("the model was resolved")

    monkeypatch.setattr(models, "resolve", resolve)
    out = tmp_path / "o"
    res = CliRunner().invoke(cli, ["export", "nli", "--opset", opset, "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert res.output == (
        f"faithgate: --opset {opset} is not supported: give an ONNX opset from {MIN_OPSET} to "
        f"{MAX_OPSET} (default {DEFAULT_OPSET})\n"
    )
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("opset", [-1, MAX_OPSET + 1, True, 18.0, "18"])
def test_the_library_refuses_it_before_loading_the_model(tmp_path, monkeypatch, opset):
    def load(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(export_module, "_torch_model", load)
    spec = models.ModelSpec("nli", "m", str(tmp_path / "m"), "path")
    with pytest.raises(InputError, match=r"^opset .* is not supported: give an ONNX opset from"):
        export_model(spec, out=tmp_path / "o", quantize="none", opset=opset)  # type: ignore[arg-type]
    assert not (tmp_path / "o").exists()


def test_the_range_holds_the_default_and_the_cli_says_it():
    from faithgate.cli.export import export_command

    assert MIN_OPSET <= DEFAULT_OPSET <= MAX_OPSET
    for opset in (MIN_OPSET, DEFAULT_OPSET, MAX_OPSET):
        check_opset(opset)
    [option] = [p for p in export_command.params if p.name == "opset"]
    assert option.default == DEFAULT_OPSET  # the CLI spells it out (not importing the backend)
    assert f"{MIN_OPSET} to {MAX_OPSET}" in (option.help or "")


def test_the_highest_opset_is_the_highest_torchs_exporter_supports(torch):
    """optimum exports with the TorchScript exporter (``dynamo=False``); above this opset it
    warns that the opset is not supported (and above ``ONNX_MAX_OPSET`` it fails)."""
    constants = pytest.importorskip("torch.onnx._constants")
    highest = getattr(constants, "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", None)
    if highest is None:
        pytest.skip("this torch names no highest TorchScript exporter opset")
    assert highest == MAX_OPSET


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, torch, transformers) -> dict[str, Path]:
    pytest.importorskip("optimum.exporters.onnx", reason="exports need faithgate[full]")
    from tiny_models import save_tiny_models

    torch.manual_seed(0)
    out, _ = save_tiny_models(tmp_path_factory.mktemp("tiny"), CORPUS)
    return out


@pytest.mark.parametrize(
    ("key", "role", "opset"),
    [("nli", "nli", MIN_OPSET), ("nli", "nli", MAX_OPSET), ("llama", "lm", MIN_OPSET)],
)
def test_an_export_at_either_end_of_the_range_is_made(tiny, tmp_path, key, role, opset):
    """The lowest opset: transformers' SDPA attention needs 14 (BERT, Llama); the causal LM's
    graph rewrite (Unsqueeze/Squeeze with axes as inputs) needs 13."""
    import onnx

    spec = models.resolve(role, str(tiny[key]))
    manifest = export_model(spec, out=tmp_path / "o", quantize="none", opset=opset)
    assert manifest.opset == opset and load_manifest(tmp_path / "o").opset == opset
    graph = onnx.load(str(tmp_path / "o" / manifest.files["model"]), load_external_data=False)
    assert {i.version for i in graph.opset_import if i.domain in ("", "ai.onnx")} == {opset}
