"""The shipped NLI checker (``onnx_models/checker``): offline with no configuration, both
backends in parity, torch-free, and clear errors when its files are damaged."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from faithgate import Example, Scorer, models
from faithgate.cli import cli
from faithgate.errors import ModelNotFoundError

SHIPPED = models.SHIPPED_DIR / "checker"
SOURCE = (
    "The city council approved the new budget on Monday after a long debate. "
    "It will fund three new schools in the north of the city. "
    "The mayor, Ana Ruiz, said construction would begin in March."
)
FAITHFUL = "The council approved the budget, which funds three new schools."
UNFAITHFUL = "The council rejected the budget, which funds five new hospitals."


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "home"


def test_the_checker_ships_with_its_recipe_and_figures():
    meta = json.loads((SHIPPED / "faithgate_training.json").read_text())
    assert meta["recipe"]["seed"] == 0 and meta["steps"] > 0
    assert {"snli", "lee-news", "wikipedia"} <= set(meta["data"])
    assert meta["history"][-1]["held_out"]["n"] > 0
    manifest = json.loads((SHIPPED / "onnx" / "faithgate_onnx.json").read_text())
    assert manifest["role"] == "nli" and manifest["task"] == "pair-classifier"
    size = sum(p.stat().st_size for p in SHIPPED.rglob("*") if p.is_file())
    assert size < 60 * 2**20, f"shipped checker is {size / 2**20:.1f} MiB"


def test_nli_role_resolves_offline_with_no_model_given(home):
    spec = models.resolve("nli")
    assert spec.name == models.CHECKER and spec.origin == "cache"
    assert (Path(spec.location) / "model.safetensors").is_file()
    # Assembled once: a second resolution reuses the directory.
    assert models.resolve("nli").location == spec.location


def test_both_backends_score_the_checker_within_parity(home):
    examples = [Example("f", SOURCE, FAITHFUL), Example("u", SOURCE, UNFAITHFUL)]
    values = {}
    for backend in ("torch", "onnx"):
        scorer = Scorer(["entail_d2s", "summac_zs"], backend=backend)
        values[backend] = np.array(
            [[s[m].value for m in ("entail_d2s", "summac_zs")] for s in scorer.score(examples)]
        )
    manifest = json.loads((SHIPPED / "onnx" / "faithgate_onnx.json").read_text())
    tol = (
        manifest["parity"]["tolerance"]["max_mean_abs_diff"]
        if manifest["quantization"] != "none"
        else 1e-4
    )
    assert np.abs(values["torch"] - values["onnx"]).max() <= 2 * tol
    for backend in values:  # the checker prefers the faithful summary under both backends
        assert (values[backend][0] > values[backend][1]).all()


def test_auto_backend_uses_the_shipped_onnx_export(home):
    from faithgate.backends import choose_backend

    assert choose_backend(models.resolve("nli"), "pair-classifier") == "onnx"


def test_torch_free_runtime_scores_with_the_checker(home):
    code = f"""
import sys
for name in ("torch", "transformers", "optimum"):
    sys.modules[name] = None
from faithgate import Example, Scorer
[s] = Scorer(["entail_d2s"], backend="onnx").score([Example("x", {SOURCE!r}, {FAITHFUL!r})])
print(s["entail_d2s"].value)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert 0.0 <= float(proc.stdout.strip()) <= 1.0


@pytest.fixture
def damaged(tmp_path, monkeypatch, home) -> Path:
    root = tmp_path / "shipped"
    shutil.copytree(SHIPPED, root / "checker")
    monkeypatch.setattr(models, "SHIPPED_DIR", root)
    return root / "checker"


def _score_cli(tmp_path: Path, *extra: str):
    source = tmp_path / "article.txt"
    source.write_text(SOURCE)
    return CliRunner().invoke(
        cli,
        ["score", "--source", str(source), "--summary", FAITHFUL, "--metric", "entail_d2s", *extra],
    )


def test_truncated_weights_are_a_clear_error(damaged, tmp_path):
    weights = damaged / "weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ModelNotFoundError, match="damaged or truncated"):
        models.resolve("nli")
    result = _score_cli(tmp_path, "--backend", "torch")
    assert result.exit_code == 2
    assert "damaged or truncated" in result.output and "Traceback" not in result.output


def test_a_missing_checker_file_is_a_clear_error(damaged):
    (damaged / "config.json").unlink()
    with pytest.raises(ModelNotFoundError, match="incomplete: .*config.json is missing"):
        models.resolve("nli")


def test_a_truncated_onnx_checker_is_bad_input(damaged, tmp_path):
    onnx = (
        damaged
        / "onnx"
        / json.loads((damaged / "onnx" / "faithgate_onnx.json").read_text())["files"]["model"]
    )
    onnx.write_bytes(onnx.read_bytes()[:5000])
    result = _score_cli(tmp_path, "--backend", "onnx")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_an_updated_shipped_checker_replaces_the_assembled_copy(damaged):
    first = Path(models.resolve("nli").location)
    meta = json.loads((damaged / "faithgate_training.json").read_text())
    meta["note"] = "a newer release of the same weights"
    (damaged / "faithgate_training.json").write_text(json.dumps(meta))
    again = Path(models.resolve("nli").location)
    assert again == first
    assert json.loads((again / "faithgate_training.json").read_text())["note"] == meta["note"]


def test_a_damaged_assembled_copy_is_assembled_again(home, capsys):
    """The assembled checker in the cache is checked against the weights faithgate wrote: a
    truncated or changed model.safetensors is rebuilt (the shipped export then matches it
    again, so ``auto`` keeps ONNX), not loaded or skipped with a misleading error."""
    import hashlib
    import os

    from faithgate.backends import choose_backend

    manifest = json.loads((SHIPPED / "onnx" / "faithgate_onnx.json").read_text())
    want = manifest["source"]["sha256"]["model.safetensors"]
    spec = models.resolve("nli")
    weights = Path(spec.location) / "model.safetensors"
    size = weights.stat().st_size
    capsys.readouterr()
    for damage in (lambda b: b[: len(b) // 4], lambda b: b[:-4096] + bytes(4096)):
        weights.write_bytes(damage(weights.read_bytes()))
        again = models.resolve("nli")
        assert again.location == spec.location
        assert weights.stat().st_size == size
        assert hashlib.sha256(weights.read_bytes()).hexdigest() == want
        assert again.fingerprint == manifest["source"]["fingerprint"]
        assert choose_backend(again, "pair-classifier") == "onnx"
        assert "assembling it again" in capsys.readouterr().err
    # A copy assembled by an older faithgate (no record) or copied (a new mtime) is intact:
    # checked against the shipped export's digest and kept, not rebuilt.
    record = Path(spec.location) / ".faithgate_assembled.json"
    record.unlink()
    inode = weights.stat().st_ino
    os.utime(weights, ns=(1, 1))
    models.resolve("nli")
    assert weights.stat().st_ino == inode and record.is_file()
    assert "assembling it again" not in capsys.readouterr().err
