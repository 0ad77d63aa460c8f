"""ONNX export manifests (``faithgate_onnx.json``) are checked when read: a damaged one is one
line naming the file and the field (exit 2), never an internal error; ``files`` stay inside the
export directory; a damaged manifest in a user's export directory is an error about it, one in
the cache is skipped by ``auto`` with a warning (an error under ``--backend onnx``). Also:
``export --device cuda`` without a CUDA device fails before any work, the README's table of
``auto``'s candidates is the code's, and a format-1 text encoder that pools otherwise than its
source is refused. No model is loaded: the exports here are hand-made."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from faithgate import models
from faithgate.backends import choose_backend
from faithgate.backends.manifest import (
    MANIFEST_NAME,
    default_export_dir,
    find_export,
    forget_manifest,
    load_manifest,
)
from faithgate.errors import InputError

REPO = Path(__file__).resolve().parents[3]


def _valid() -> dict[str, Any]:
    return {
        "format": 1,
        "role": "nli",
        "task": "pair-classifier",
        "source": {"name": "m", "fingerprint": "0123456789ab", "sha256": {}},
        "opset": 18,
        "quantization": "w8a32",
        "files": {"model": "model.w8a32.onnx"},
        "tokenizer_files": ["tokenizer.json"],
        "config": {
            "labels": ["entailment", "neutral", "contradiction"],
            "max_length": 256,
            "pad_id": 0,
            "model_type": "bert",
        },  # fmt: skip
        "parity": {},
        "tools": {},
        "created": "2026-01-01T00:00:00Z",
    }


def _export_dir(directory: Path, manifest: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.w8a32.onnx").write_bytes(b"not read by the manifest check")
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    (directory / MANIFEST_NAME).write_text(text)
    forget_manifest(directory)
    return directory


def _changed(**changes: Any) -> dict[str, Any]:
    data = _valid()
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for key in parents:
            node = node[key]
        if value is _DROP:
            del node[last]
        else:
            node[last] = value
    return data


_DROP = object()

# (manifest, what the one-line error must name)
DAMAGED = {
    "top-level list": ([1, 2], r"JSON object expected, got list"),
    "format string": (_changed(format="1"), r"field 'format' must be an integer"),
    "format newer": (_changed(format=99), r"format 99 is newer"),
    "files list": (_changed(files=["model.w8a32.onnx"]), r"field 'files' must be a JSON object"),
    "files wrong part": (_changed(files={"encoder": "model.w8a32.onnx"}), r"field 'files' must"),
    "files not a name": (_changed(files__model=3), r"field 'files.model' must be a file name"),
    "files outside": (
        _changed(files__model="../elsewhere/model.onnx"),
        r"field 'files.model' must be a file inside the export directory",
    ),
    "files absolute": (
        _changed(files__model="/etc/passwd"),
        r"field 'files.model' must be a file inside the export directory",
    ),
    "files missing": (_changed(files=_DROP), r"field\(s\) files missing"),
    "config null": (_changed(config=None), r"field 'config' must be a JSON object"),
    "config without labels": (_changed(config__labels=_DROP), r"field 'config.labels' is missing"),
    "config without max_length": (
        _changed(config__max_length=_DROP),
        r"field 'config.max_length' is missing",
    ),
    "labels a string": (_changed(config__labels="entailment"), r"field 'config.labels' must be"),
    "quantization unknown": (_changed(quantization="bogus"), r"field 'quantization' must be"),
    "task unknown": (_changed(task="regression"), r"field 'task' must be"),
    "opset string": (_changed(opset="18"), r"field 'opset' must be"),
    "source list": (_changed(source=[]), r"field 'source' must be"),
    "truncated JSON": (json.dumps(_valid())[:100], r"not valid JSON"),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_manifest_is_one_input_error_naming_the_file_and_field(tmp_path, case):
    manifest, message = DAMAGED[case]
    directory = _export_dir(tmp_path / "exp", manifest)
    with pytest.raises(InputError, match=message) as info:
        load_manifest(directory)
    text = str(info.value)
    assert str(directory / MANIFEST_NAME) in text or str(directory) in text
    assert "\n" not in text


def test_a_valid_manifest_and_the_shipped_one_load(tmp_path):
    manifest = load_manifest(_export_dir(tmp_path / "ok", _valid()))
    assert manifest.files == {"model": "model.w8a32.onnx"} and manifest.config["max_length"] == 256
    shipped = load_manifest(REPO / "onnx_models" / "checker" / "onnx")
    assert shipped.task == "pair-classifier"


def test_a_file_entry_through_a_link_out_of_the_directory_is_refused(tmp_path):
    outside = tmp_path / "outside.onnx"
    outside.write_bytes(b"x")
    directory = _export_dir(tmp_path / "exp", _changed(files__model="link.onnx"))
    (directory / "link.onnx").symlink_to(outside)
    with pytest.raises(InputError, match="inside the export directory"):
        load_manifest(directory)


def _model_dir(path: Path) -> Path:
    """A directory that passes for a model (config.json): enough for resolve and fingerprints."""
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "bert"}')
    return path


def test_a_damaged_manifest_in_a_users_export_dir_is_an_error_about_it(tmp_path):
    directory = _export_dir(tmp_path / "user-export", [1, 2])
    spec = models.resolve("nli", str(directory))
    where = re.escape(str(directory / MANIFEST_NAME))
    with pytest.raises(InputError, match=where):  # auto: not a silent fall back to torch
        choose_backend(spec, "pair-classifier")
    with pytest.raises(InputError, match=where):
        find_export(spec, "pair-classifier")
    pytest.importorskip("tokenizers")
    from faithgate.backends.onnx_backend import OnnxBackend

    with pytest.raises(InputError, match=where):  # onnx: not "no export, run export"
        OnnxBackend().load(spec, "pair-classifier")


def test_a_damaged_cache_manifest_is_skipped_by_auto_and_an_error_for_onnx(
    tmp_path, monkeypatch, caplog
):
    pytest.importorskip("tokenizers")
    from faithgate.backends.onnx_backend import OnnxBackend

    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    spec = models.resolve("embedder", str(_model_dir(tmp_path / "model")))
    cache = default_export_dir(spec, "text-encoder")
    for damaged in ([1, 2], "{not json", _changed(files=["model.onnx"])):
        _export_dir(cache, damaged)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="faithgate"):
            for _ in range(3):  # every settings hash asks again: one warning per process
                assert choose_backend(spec, "text-encoder") == "torch"
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        assert str(cache / MANIFEST_NAME) in warnings[0] and "skipped" in warnings[0]
        # --backend onnx: the damaged manifest is the error, not "no export, run export".
        assert choose_backend(spec, "text-encoder", "onnx") == "onnx"
        with pytest.raises(InputError, match=re.escape(str(cache / MANIFEST_NAME))):
            OnnxBackend().load(spec, "text-encoder")


# --- a format-1 text encoder that pools otherwise than its source ----------------------------

MAX_POOLING = {"word_embedding_dimension": 32, "pooling_mode_max_tokens": True}


def _encoder(source: dict[str, Any], fmt: int = 1, **config: Any) -> dict[str, Any]:
    """A text-encoder manifest of ``format`` ``fmt`` made from ``source``."""
    data = _changed(format=fmt, role="embedder", task="text-encoder", source=source)
    data["config"] = {
        "max_length": 64,
        "pad_id": 0,
        "hidden_size": 32,
        "num_layers": 2,
        "special_prefix": [101],
        "special_suffix": [102],
        **config,
    }
    return data


def _pooled_model(path: Path, pooling: dict[str, Any]) -> Path:
    _model_dir(path)
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return path


@pytest.mark.parametrize("recorded", [{"pooling": "mean"}, {}])
def test_a_format_1_export_of_a_max_pooling_model_is_refused(tmp_path, recorded):
    """Format 1 wrote mean for a pooling it did not apply (max, ...), and the runtime pooled
    such an export by mean: refused, one line, saying how to export it again."""
    model = _pooled_model(tmp_path / "model", MAX_POOLING)
    source = {"name": "m", "location": str(model), "origin": "path"}
    directory = _export_dir(tmp_path / "exp", _encoder(source, **recorded))
    with pytest.raises(InputError) as info:
        load_manifest(directory)
    text = str(info.value)
    assert text == (
        f"{directory / MANIFEST_NAME}: this text-encoder export (format 1) pools by mean, but "
        f"its source asks for pooling_mode_max_tokens in {model / '1_Pooling' / 'config.json'}; "
        "export it again with `faithgate export embedder`"
    )
    assert info.value.exit_code == 2


def test_a_format_1_encoder_is_refused_only_where_its_pooling_is_not_its_sources(tmp_path):
    cls = _pooled_model(tmp_path / "cls", {"pooling_mode_cls_token": True})
    mean = _pooled_model(tmp_path / "mean", {"pooling_mode_mean_tokens": True})
    usable = [
        _encoder({"location": str(mean), "origin": "path"}, pooling="mean"),
        _encoder({"location": str(cls), "origin": "path"}, pooling="cls"),
        _encoder({"location": str(tmp_path / "gone"), "origin": "path"}),
        _encoder({"location": str(tmp_path / "max"), "origin": "path"}, fmt=2, pooling="mean"),
        _encoder({"location": "org/m", "origin": "hub"}, fmt=2, pooling="cls"),
    ]
    _pooled_model(tmp_path / "max", MAX_POOLING)  # format 2 read the source's: trusted
    for i, data in enumerate(usable):
        load_manifest(_export_dir(tmp_path / f"ok{i}", data))
    stale = {
        "cls source": (
            _encoder({"location": str(cls), "origin": "package"}, pooling="mean"),
            "pools by mean, but its source asks for pooling_mode_cls_token",
        ),
        "hub": (
            _encoder({"name": "org/m", "location": "org/m", "origin": "hub"}, pooling="mean"),
            "pools by mean; format 1 of a hub model did not always read its pooling, and the hub "
            "cache has no 1_Pooling/config.json of it to check that against",
        ),
    }
    for case, (data, message) in stale.items():
        with pytest.raises(InputError, match=re.escape(message)):
            load_manifest(_export_dir(tmp_path / case, data))


def test_a_format_1_hub_encoder_is_checked_against_the_hub_cache(tmp_path, monkeypatch):
    """Exports made once faithgate fetched a hub model's 1_Pooling (still format 1) were
    refused with every other format-1 hub export, saying they "may not have read" it: the file
    the export fetched is in the hub cache, and is read as a source directory's is."""
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    commit = "a" * 40

    def repo(name: str) -> Path:
        folder = hub / ("models--" + name.replace("/", "--"))
        (folder / "refs").mkdir(parents=True)
        (folder / "refs" / "main").write_text(commit)
        return folder

    cls_file = repo("org/cls") / "snapshots" / commit / "1_Pooling" / "config.json"
    cls_file.parent.mkdir(parents=True)
    cls_file.write_text(json.dumps({"pooling_mode_cls_token": True}))
    plain = repo("org/plain") / ".no_exist" / commit / "1_Pooling" / "config.json"
    plain.parent.mkdir(parents=True)
    plain.touch()  # huggingface_hub's record that the repository has no such file

    def hub_encoder(name: str, pooling: str) -> dict[str, Any]:
        return _encoder({"name": name, "location": name, "origin": "hub"}, pooling=pooling)

    for i, data in enumerate([hub_encoder("org/cls", "cls"), hub_encoder("org/plain", "mean")]):
        load_manifest(_export_dir(tmp_path / f"ok{i}", data))
    stale = {
        "cls": (hub_encoder("org/cls", "mean"), f"asks for pooling_mode_cls_token in {cls_file}"),
        "plain": (hub_encoder("org/plain", "cls"), "but its source has no pooling config"),
        "uncached": (hub_encoder("org/other", "mean"), "the hub cache has no 1_Pooling"),
    }
    for case, (data, message) in stale.items():
        with pytest.raises(InputError, match=re.escape(message)) as info:
            load_manifest(_export_dir(tmp_path / case, data))
        assert info.value.exit_code == 2


def test_a_stale_format_1_cache_export_is_skipped_by_auto_and_an_error_for_onnx(
    tmp_path, monkeypatch, caplog
):
    pytest.importorskip("tokenizers")
    from faithgate.backends.onnx_backend import OnnxBackend

    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    model = _pooled_model(tmp_path / "model", MAX_POOLING)
    spec = models.resolve("embedder", str(model))
    source = {"location": str(model), "origin": "path", "fingerprint": spec.fingerprint}
    cache = _export_dir(default_export_dir(spec, "text-encoder"), _encoder(source))
    again = "export it again with `faithgate export embedder`"
    with caplog.at_level(logging.WARNING, logger="faithgate"):
        assert choose_backend(spec, "text-encoder") == "torch"
    assert any(again in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)
    with pytest.raises(InputError, match=re.escape(str(cache / MANIFEST_NAME))) as info:
        OnnxBackend().load(spec, "text-encoder")
    assert again in str(info.value) and info.value.exit_code == 2


# --- export --device cuda without a CUDA device ----------------------------------------------


def test_export_device_cuda_without_a_gpu_fails_before_any_work(monkeypatch):
    pytest.importorskip("onnxruntime")
    from click.testing import CliRunner

    from faithgate.backends import onnx_session
    from faithgate.cli import cli

    monkeypatch.setattr(onnx_session, "cuda_usable", lambda: False)
    done: list[str] = []

    def resolve(*args: Any, **kwargs: Any) -> Any:
        done.append("resolve")
        raise AssertionError("the model was resolved before the device was checked")

    monkeypatch.setattr(models, "resolve", resolve)
    result = CliRunner().invoke(cli, ["export", "embedder", "--device", "cuda"])
    assert result.exit_code == 1, result.output
    assert "no CUDA device" in result.output and result.output.count("\n") == 1
    assert done == []


def test_export_model_device_cuda_without_a_gpu_fails_before_loading(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    export = pytest.importorskip("faithgate.backends.export")
    from faithgate.backends import onnx_session
    from faithgate.errors import BackendError

    monkeypatch.setattr(onnx_session, "cuda_usable", lambda: False)
    monkeypatch.setattr(export, "_torch_model", lambda *a: pytest.fail("the model was loaded"))
    spec = models.ModelSpec("embedder", "m", str(_model_dir(tmp_path / "m")), "path")
    with pytest.raises(BackendError, match="no CUDA device"):
        export.export_model(spec, out=tmp_path / "out", device="cuda", calibration=[])
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.lock").exists()


# --- onnx_models/README.md: the role table's `auto` column is the code's ---------------------


def test_the_readme_role_table_lists_autos_cpu_candidates():
    from faithgate.backends.quantize.modes import auto_candidates

    tasks = {
        "embedder": "text-encoder",
        "nli": "pair-classifier",
        "lm": "causal-lm",
        "seq2seq": "seq2seq-lm",
    }
    text = (REPO / "onnx_models" / "README.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in tasks:
            rows[cells[0]] = tuple(m.strip() for m in cells[4].split(","))
    assert set(rows) == set(tasks)
    for role, task in tasks.items():
        assert rows[role] == auto_candidates("cpu", task), role
