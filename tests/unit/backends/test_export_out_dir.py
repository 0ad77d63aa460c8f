"""Which ``--out`` directory ``faithgate export`` / ``faithgate train`` may replace whole
(``models.refuse_foreign_dir``, checked again by ``models.publish_dir``): nothing there, an empty
directory, or an earlier output of theirs holding nothing but what such a run writes; never the
current directory. No model is loaded: these refusals come first, so the tests take
milliseconds.

A directory was once replaced whenever it held the manifest, whatever else it held: a project
directory with ``faithgate_onnx.json`` beside ``app.py`` and ``src/`` lost both; and
``faithgate export --out .`` exported into (and so replaced) the current directory, which
``faithgate train`` refused (docs/data-safety.md section 2)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from export_cli import export_cli, fake_model

from faithgate import models
from faithgate.errors import InputError

ONNX = "faithgate_onnx.json"
TRAINING = "faithgate_training.json"


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _earlier_export(directory: Path, **listed: object) -> Path:
    """What ``faithgate export`` leaves (a tiny BERT classifier, quantized; as listed by
    tests/unit/backends/test_onnx_export.py's exports), with a manifest naming its files."""
    manifest = {
        "files": {"model": "model.w4.onnx"},
        "tokenizer_files": [
            "special_tokens_map.json",
            "tokenizer.json",
            "tokenizer_config.json",
            "vocab.txt",
        ],
        **listed,
    }
    names = ["config.json", "generation_config.json", "model.w4.onnx", "model.w4.onnx_data"]
    names += list(manifest["tokenizer_files"])  # type: ignore[arg-type]
    _write(directory, {name: name for name in names})
    (directory / ONNX).write_text(json.dumps(manifest))
    return directory


def _new_dir(parent: Path) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="out.", dir=parent))
    (tmp / ONNX).write_text("{}")
    (tmp / "model.onnx").write_text("new")
    return tmp


def test_the_manifest_names_are_the_writers():
    from faithgate.backends.export import MANIFEST_NAME
    from faithgate.training.recipe import TRAINING_META

    assert (MANIFEST_NAME, TRAINING_META) == (ONNX, TRAINING)


def test_a_project_directory_holding_the_manifest_is_not_replaced(tmp_path):
    """The reviewer's case, at the level of the library: nothing deleted."""
    project = _write(
        tmp_path / "proj", {ONNX: "{}", "app.py": "print()\n", "src/mod.py": "x = 1\n"}
    )
    before = _tree(project)
    with pytest.raises(InputError) as err:
        models.refuse_foreign_dir(project, ONNX)
    message = str(err.value)
    assert message.startswith(f"--out {project} holds {ONNX} (an earlier faithgate output)")
    assert "but also app.py (and 1 more), which faithgate does not write" in message
    assert "\n" not in message
    new = _new_dir(tmp_path)
    with pytest.raises(InputError, match="but also app.py"):
        models.publish_dir(new, project, manifest=ONNX)  # checked again when publishing
    assert _tree(project) == before
    assert (new / "model.onnx").read_text() == "new"  # the caller's to remove


def test_the_export_cli_refuses_it_before_loading_anything(tmp_path):
    model = fake_model(tmp_path)
    project = _write(tmp_path / "proj", {ONNX: "{}", "app.py": "print()\n"})
    res = export_cli("nli", "--model", str(model), "--quantize", "none", "--out", str(project))
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"faithgate: --out {project} holds {ONNX}")
    assert res.output.count("\n") == 1 and "Traceback" not in res.output
    assert _tree(project) == {ONNX: "{}", "app.py": "print()\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "proj"]  # no lock, no temp


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"notes.txt": "mine"}, "notes.txt"),  # a .txt the manifest does not list
        ({"README.md": "mine"}, "README.md"),
        ({".git/HEAD": "ref"}, ".git/"),
        ({"onnx/model.onnx": "x"}, "onnx/"),  # only a shipped model holds an onnx/ export
        ({"model.safetensors": "w"}, "model.safetensors"),  # a training output's weights
    ],
)
def test_an_earlier_export_with_anything_else_in_it_is_refused(tmp_path, extra, named):
    out = _write(_earlier_export(tmp_path / "out"), extra)
    before = _tree(out)
    with pytest.raises(InputError, match=f"but also {named.replace('.', '[.]')}"):
        models.refuse_foreign_dir(out, ONNX)
    assert _tree(out) == before


def test_an_earlier_export_is_replaced(tmp_path):
    """Everything an export writes: its graphs (and their external data), the model's config
    and tokenizer files, and any file its manifest lists (a tokenizer's own file names)."""
    out = _earlier_export(tmp_path / "out", tokenizer_files=["tokenizer.json", "source.spm"])
    _write(out, {"source.spm": "spm", "decoder_model.w8.onnx": "g", "encoder_model.onnx": "g"})
    assert models.foreign_entries(out, ONNX) == []
    models.publish_dir(_new_dir(tmp_path), out, manifest=ONNX)
    assert (out / "model.onnx").read_text() == "new" and not (out / "source.spm").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_training_output_holds_only_what_training_writes(tmp_path):
    """``faithgate train`` (``save_pretrained`` of the model and tokenizer, its manifest) and a
    shipped checker (weights, config and an ``onnx/`` export): replaced; anything else,
    including a file inside the shipped export, refused."""
    trained = _write(
        tmp_path / "trained",
        {
            TRAINING: "{}",
            "config.json": "{}",
            "model.safetensors": "w",
            "special_tokens_map.json": "{}",
            "tokenizer.json": "{}",
            "tokenizer_config.json": "{}",
            "vocab.txt": "a\n",
        },
    )
    assert models.foreign_entries(trained, TRAINING) == []
    shipped = tmp_path / "checker"
    shutil.copytree(trained, shipped)
    (shipped / "model.safetensors").rename(shipped / "weights.safetensors")
    _earlier_export(shipped / "onnx")
    assert models.foreign_entries(shipped, TRAINING) == []
    models.refuse_foreign_dir(shipped, TRAINING)
    (shipped / "onnx" / "notes.md").write_text("mine")
    (trained / "app.py").write_text("print()\n")
    for out, named in ((shipped, "onnx/notes.md"), (trained, "app.py")):
        with pytest.raises(InputError, match=f"holds {TRAINING} .* but also {named}"):
            models.refuse_foreign_dir(out, TRAINING)
    (shipped / "onnx" / "notes.md").unlink()
    (shipped / "onnx" / ONNX).unlink()  # an onnx/ that is no export: not faithgate's
    assert models.foreign_entries(shipped, TRAINING) == ["onnx/"]


def test_the_shipped_checker_is_what_training_writes():
    checker = models.SHIPPED_DIR / "checker"
    if not (checker / TRAINING).is_file():
        pytest.skip("no shipped checker here")
    assert models.foreign_entries(checker, TRAINING) == []


@pytest.mark.parametrize("out", [".", "./", "..", "../here", "HERE"])
def test_the_current_directory_is_no_export_out(tmp_path, monkeypatch, out):
    """``export --out .`` exported into the current directory; ``train --out .`` was refused.
    Now both are, through the one check in ``refuse_foreign_dir``, empty directory or not."""
    here = tmp_path / "here"
    here.mkdir()
    model = fake_model(tmp_path)
    monkeypatch.chdir(here)
    out = str(here) if out == "HERE" else out
    res = export_cli("nli", "--model", str(model), "--quantize", "none", "--out", out)
    assert res.exit_code == 2, res.output
    assert "not the current directory or one above it" in res.output
    assert res.output.count("\n") == 1 and "Traceback" not in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here", "model"]
    assert not any(here.iterdir())
    # The library call, and an earlier export in the current directory, the same way.
    _earlier_export(here)
    with pytest.raises(InputError, match="not the current directory"):
        models.refuse_foreign_dir(Path(out), ONNX)
    from faithgate.backends.export import export_model

    spec = models.ModelSpec("nli", str(model), str(model), "path")
    with pytest.raises(InputError, match="not the current directory"):
        export_model(spec, out=out, quantize="none")
    assert (here / "model.w4.onnx").read_text() == "model.w4.onnx"


def test_a_file_managers_records_do_not_block_a_re_export(tmp_path):
    """macOS Finder writes .DS_Store on opening a folder: a re-export there was refused."""
    out = _earlier_export(tmp_path / "out")
    _write(out, {".DS_Store": "x", "Thumbs.db": "x", "desktop.ini": "x"})
    assert models.foreign_entries(out, ONNX) == []
    _write(out, {"notes.DS_Store.txt": "mine"})
    assert models.foreign_entries(out, ONNX) == ["notes.DS_Store.txt"]
