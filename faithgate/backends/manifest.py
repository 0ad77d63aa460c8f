"""The ONNX export manifest (``faithgate_onnx.json``) and where exports are found.

Read by the torch-free runtime (``onnx_backend``, backend ``auto``, settings hashes) and
written by ``export``; it imports neither, so the runtime never reaches the export tooling
and ``export`` can build on ``onnx_backend`` without an import cycle.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faithgate import models
from faithgate.atomic import atomic_write_text
from faithgate.errors import BackendError, InputError

MANIFEST_NAME = "faithgate_onnx.json"
MANIFEST_FORMAT = 1


@dataclass
class ExportManifest:
    """What an export directory holds and how it was made (JSON: ``faithgate_onnx.json``)."""

    role: str
    task: str
    source: dict[str, Any]  # name, location, origin, revision, fingerprint, sha256 of weights
    opset: int
    quantization: str  # a mode of quantize.MODES: "none", "w8", "w4", "fp16", "int8-dynamic"...
    files: dict[str, str]  # part ("model", "encoder", "decoder") -> ONNX file name
    tokenizer_files: list[str]
    config: dict[str, Any]  # runtime facts read by the ONNX backend (no transformers there)
    parity: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)
    created: str = ""
    format: int = MANIFEST_FORMAT
    directory: Path | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("directory")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], directory: Path | None = None) -> ExportManifest:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "directory"}
        missing = {"role", "task", "source", "opset", "quantization", "files", "config"} - set(
            known
        )
        if missing:
            raise InputError(f"ONNX manifest lacks field(s): {', '.join(sorted(missing))}")
        return cls(**known, directory=directory)

    def save(self, directory: Path) -> Path:
        path = Path(directory) / MANIFEST_NAME
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path

    def path_of(self, part: str) -> Path:
        if self.directory is None:
            raise BackendError("ONNX manifest has no directory")
        return self.directory / self.files[part]


def load_manifest(directory: str | Path) -> ExportManifest:
    """Read ``faithgate_onnx.json`` from an export directory; one-line ``InputError`` if bad."""
    directory = Path(directory)
    path = directory / MANIFEST_NAME
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(
            f"{directory} is not a faithgate ONNX export (no {MANIFEST_NAME})"
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg})") from None
    if data.get("format", MANIFEST_FORMAT) > MANIFEST_FORMAT:
        raise InputError(f"{path}: manifest format {data['format']} is newer than this faithgate")
    manifest = ExportManifest.from_dict(data, directory)
    for part, name in manifest.files.items():
        if not (directory / name).is_file():
            raise InputError(f"{directory}: ONNX file {name!r} ({part}) is missing")
    return manifest


def default_export_dir(spec: models.ModelSpec, task: str) -> Path:
    """Cache directory of the export of ``spec`` for ``task``."""
    return models.cache_dir_for(spec.name, kind="onnx") / task


_FOUND: dict[tuple, tuple[float, ExportManifest | None]] = {}


def find_export(spec: models.ModelSpec, task: str) -> ExportManifest | None:
    """The usable export of ``spec`` for ``task``, or None.

    ``spec.location`` itself when it is an export directory (the user passed one), else the
    cache export whose recorded source fingerprint matches the model's current fingerprint (an
    export of weights that have since changed is ignored, never silently used).
    """
    location = Path(spec.location) if spec.origin != "hub" else None
    if location is not None and (location / MANIFEST_NAME).is_file():
        manifest = _cached_load(location)
        return manifest if manifest is not None and manifest.task == task else None
    directory = default_export_dir(spec, task)
    if not (directory / MANIFEST_NAME).is_file():
        # A model faithgate trained and ships carries its own export (onnx_models/<name>/onnx).
        shipped = models.shipped_export_dir(spec)
        if shipped is None or not (shipped / MANIFEST_NAME).is_file():
            return None
        directory = shipped
    manifest = _cached_load(directory)
    if manifest is None or manifest.task != task:
        return None
    if manifest.source.get("fingerprint") != spec.fingerprint:
        return None
    return manifest


def _cached_load(directory: Path) -> ExportManifest | None:
    """Manifest of ``directory``, re-read only when the file changed (find_export is called
    for every settings hash)."""
    path = directory / MANIFEST_NAME
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    key = (str(directory),)
    hit = _FOUND.get(key)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    try:
        manifest = load_manifest(directory)
    except InputError:
        manifest = None
    _FOUND[key] = (mtime, manifest)
    return manifest


def forget_manifest(directory: str | Path) -> None:
    """Drop the remembered manifest of ``directory`` (after an export replaced it)."""
    _FOUND.pop((str(directory),), None)
