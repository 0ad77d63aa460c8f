"""The ONNX export manifest (``faithgate_onnx.json``) and where exports are found.

Read by the torch-free runtime (``onnx_backend``, backend ``auto``, settings hashes) and
written by ``export``; it imports neither, so the runtime never reaches the export tooling
and ``export`` can build on ``onnx_backend`` without an import cycle.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faithgate import models
from faithgate.backends.windowing import ST_POOLINGS, pooling_modes
from faithgate.errors import BackendError, InputError
from faithgate.safety.atomic import atomic_write_text
from faithgate.safety.escape import printable

log = logging.getLogger(__name__)

MANIFEST_NAME = "faithgate_onnx.json"
# 2: a text encoder's ``config.pooling`` is its source's own (the torch encoder's, read from
# ``1_Pooling/config.json``, a hub model's too, and only cls or mean). Format 1 recorded mean
# for every hub model and for a pooling it did not apply (max, ...): ``_stale_pooling``.
MANIFEST_FORMAT = 2


def manifest_format_for(task: str) -> int:
    """The format an export of ``task`` is written in: 2 for text encoders, whose pooling is
    what changed, and 1 for every other task, which format 2 leaves as it was (so an older
    faithgate still reads new NLI, LM and other exports)."""
    return MANIFEST_FORMAT if task == "text-encoder" else 1


# The end of every damaged-manifest error.
AGAIN = "export it again with `faithgate export`"


@dataclass
class ExportManifest:
    """What an export directory holds and how it was made (JSON: ``faithgate_onnx.json``)."""

    role: str
    task: str
    source: dict[str, Any]  # name, location, origin, revision, fingerprint, sha256 of weights
    opset: int
    quantization: str  # a mode of quantize.modes.MODES: "none", "w8", "w4", "fp16", ...
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
    def from_dict(cls, data: Any, directory: Path | None = None) -> ExportManifest:
        """The manifest of ``data`` (parsed JSON), checked by ``check_manifest``."""
        return cls(**check_manifest(data, directory), directory=directory)

    def save(self, directory: Path) -> Path:
        path = Path(directory) / MANIFEST_NAME
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path

    def path_of(self, part: str) -> Path:
        if self.directory is None:
            raise BackendError("ONNX manifest has no directory")
        return self.directory / self.files[part]


def load_manifest(directory: str | Path) -> ExportManifest:
    """Read ``faithgate_onnx.json`` from an export directory; one-line ``InputError`` naming
    the file (and the field) if it is missing, not JSON or not shaped as faithgate writes it."""
    directory = Path(directory)
    path = directory / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"{directory} is not a faithgate ONNX export (no {MANIFEST_NAME})"
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg}); {AGAIN}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not valid UTF-8; {AGAIN}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return ExportManifest.from_dict(data, directory)


# --- the shape of a manifest --------------------------------------------------------------------


def _int(minimum: int) -> tuple[str, Callable[[Any], bool]]:
    return (
        f"an integer >= {minimum}",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
    )


def _int_list() -> tuple[str, Callable[[Any], bool]]:
    return (
        "a list of token ids",
        lambda v: (
            isinstance(v, list)
            and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in v)
        ),
    )


def _optional_id() -> tuple[str, Callable[[Any], bool]]:
    return (
        "a token id or null",
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    )


_Check = tuple[str, Callable[[Any], bool]]
_STR: _Check = ("a string", lambda v: isinstance(v, str))
_DICT: _Check = ("a JSON object", lambda v: isinstance(v, dict))
_BOOL: _Check = ("true or false", lambda v: isinstance(v, bool))
_STR_LIST: _Check = (
    "a list of strings",
    lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
)

# The parts (``files``) of each task's export, and its ``config``: required keys, then
# optional ones, each with what its value must be (what the ONNX backend reads).
TASK_PARTS: dict[str, tuple[str, ...]] = {
    "text-encoder": ("model",),
    "pair-classifier": ("model",),
    "causal-lm": ("model",),
    "seq2seq-lm": ("encoder", "decoder"),
}
_COMMON_CONFIG: dict[str, _Check] = {"max_length": _int(1), "pad_id": _int(0)}
_LM_IDS: dict[str, _Check] = {"bos_id": _optional_id(), "eos_id": _optional_id()}
TASK_CONFIG: dict[str, tuple[dict[str, _Check], dict[str, _Check]]] = {
    "text-encoder": (
        {
            **_COMMON_CONFIG,
            "hidden_size": _int(1),
            "num_layers": _int(1),
            "special_prefix": _int_list(),
            "special_suffix": _int_list(),
        },
        {
            "pooling": ('"mean" or "cls"', lambda v: v in ("mean", "cls")),
            "stride": _int(0),
            "model_type": _STR,
        },
    ),
    "pair-classifier": (
        {
            **_COMMON_CONFIG,
            "labels": (
                "a non-empty list of strings",
                lambda v: isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v),
            ),
        },
        {"model_type": _STR},
    ),
    "causal-lm": (
        dict(_COMMON_CONFIG),
        {
            **_LM_IDS,
            "with_past": _BOOL,
            "num_kv_heads": _int(1),
            "head_dim": _int(1),
            "graph_rewrites": _DICT,
            "model_type": _STR,
        },
    ),
    "seq2seq-lm": (
        dict(_COMMON_CONFIG),
        {
            **_LM_IDS,
            "decoder_start_id": _optional_id(),
            "graph_rewrites": _DICT,
            "model_type": _STR,
        },
    ),
}


def _shown(value: Any) -> str:
    """A field's value in an error line: short, one line, escaped."""
    text = printable(repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


def _file_inside(directory: Path, name: str) -> bool:
    """Whether ``name`` (a manifest's file entry) is a plain path that stays in ``directory``."""
    if not name or "\x00" in name or Path(name).is_absolute():
        return False
    try:
        (directory / name).resolve().relative_to(directory.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def check_manifest(data: Any, directory: Path | None = None) -> dict[str, Any]:
    """The fields of a parsed manifest, each checked to be what faithgate writes (types, the
    task's parts and runtime config, the quantization mode, the format); with ``directory``,
    each ONNX file must be a file inside that directory; a format-1 text encoder must not pool
    otherwise than its source (``_stale_pooling``). Raises one-line ``InputError`` naming the
    file and the field; unknown top-level keys are ignored (a later minor addition)."""
    from faithgate.backends.quantize.modes import MODES  # imported on use: numpy, no cycle

    where = str(directory / MANIFEST_NAME) if directory is not None else "ONNX manifest"

    def bad(field_name: str, wanted: str, value: Any) -> InputError:
        return InputError(
            f"{where}: field {field_name!r} must be {wanted}, got {_shown(value)}; {AGAIN}"
        )

    if not isinstance(data, dict):
        raise InputError(
            f"{where}: not a faithgate ONNX manifest (a JSON object expected, got "
            f"{type(data).__name__}); {AGAIN}"
        )
    fmt = data.get("format", MANIFEST_FORMAT)
    if not (isinstance(fmt, int) and not isinstance(fmt, bool) and fmt >= 1):
        raise bad("format", "an integer >= 1", fmt)
    if fmt > MANIFEST_FORMAT:
        raise InputError(f"{where}: manifest format {fmt} is newer than this faithgate")
    missing = sorted(
        {"role", "task", "source", "opset", "quantization", "files", "config"} - set(data)
    )
    if missing:
        raise InputError(f"{where}: field(s) {', '.join(missing)} missing; {AGAIN}")
    top: dict[str, _Check] = {
        "role": ("a model role", lambda v: v in models.ROLES),
        "task": (
            f"one of {', '.join(TASK_PARTS)}",
            lambda v: isinstance(v, str) and v in TASK_PARTS,
        ),
        "source": _DICT,
        "opset": _int(1),
        "quantization": (
            f"one of {', '.join(MODES)}",
            lambda v: isinstance(v, str) and v in MODES,
        ),
        "files": _DICT,
        "config": _DICT,
        "tokenizer_files": _STR_LIST,
        "parity": _DICT,
        "tools": _DICT,
        "created": _STR,
    }
    for name, (wanted, valid) in top.items():
        if name in data and not valid(data[name]):
            raise bad(name, wanted, data[name])
    fingerprint = data["source"].get("fingerprint")
    if fingerprint is not None and not isinstance(fingerprint, str):
        raise bad("source.fingerprint", "a string", fingerprint)
    task, files = data["task"], data["files"]
    parts = TASK_PARTS[task]
    if sorted(files) != sorted(parts):
        raise bad("files", f"an object naming the file of each part ({', '.join(parts)})", files)
    for part in parts:
        name = files[part]
        if not isinstance(name, str):
            raise bad(f"files.{part}", "a file name", name)
        if directory is None:
            continue
        if not _file_inside(directory, name):
            raise bad(f"files.{part}", "a file inside the export directory", name)
        if not (directory / name).is_file():
            raise InputError(
                f"{directory}: ONNX file {printable(name)!r} ({part}) is missing; {AGAIN}"
            )
    config = data["config"]
    required, optional = TASK_CONFIG[task]
    for name, (wanted, valid) in required.items():
        if name not in config:
            raise InputError(
                f"{where}: field 'config.{name}' is missing (a {task} export needs it); {AGAIN}"
            )
        if not valid(config[name]):
            raise bad(f"config.{name}", wanted, config[name])
    for name, (wanted, valid) in optional.items():
        if name in config and not valid(config[name]):
            raise bad(f"config.{name}", wanted, config[name])
    stale = _stale_pooling(data)
    if stale is not None:
        raise InputError(
            f"{where}: {stale}; export it again with `faithgate export {data['role']}`"
        )
    if task == "causal-lm" and config.get("with_past"):
        for name in ("num_kv_heads", "head_dim"):
            if name not in config:
                raise InputError(
                    f"{where}: field 'config.{name}' is missing (an export with a key/value "
                    f"cache needs it); {AGAIN}"
                )
    return {
        k: data[k] for k in ExportManifest.__dataclass_fields__ if k in data and k != "directory"
    }


def _stale_pooling(data: dict[str, Any]) -> str | None:
    """Why a format-1 text-encoder export's recorded pooling is not its source's, or None.
    Format 1 wrote mean for any pooling the source's ``1_Pooling/config.json`` asks for other
    than cls (max, several at once, ...), and, before it fetched that file from the hub, for
    every hub model, so such an export pooled by mean where the model does not. A hub model's
    file is looked up in the local hub cache (where the export fetched it); a source directory
    that is gone (or has no pooling config) leaves nothing to contradict the export."""
    if data["task"] != "text-encoder" or data.get("format", 1) >= 2:
        return None
    recorded = data["config"].get("pooling", "mean")
    made = f"this text-encoder export (format 1) pools by {recorded}"
    source = data["source"]
    if source.get("origin") == "hub":
        name = source.get("name")
        revision = source.get("revision")
        cached = models.hf_cached_file(
            name if isinstance(name, str) else "",
            "1_Pooling/config.json",
            revision if isinstance(revision, str) else None,
        )
        if cached is None:
            return (
                f"{made}; format 1 of a hub model did not always read its pooling, and the hub "
                "cache has no 1_Pooling/config.json of it to check that against"
            )
        if cached is False:  # the repository has none: a plain transformers model, mean
            return None if recorded == "mean" else f"{made}, but its source has no pooling config"
        config_file = cached
    else:
        location = source.get("location")
        if not isinstance(location, str) or not location:
            return None
        config_file = Path(location) / "1_Pooling" / "config.json"
    try:
        pooling = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent or unreadable: the torch path reports a bad one
        return None
    if not isinstance(pooling, dict):
        return None
    modes = pooling_modes(pooling)
    if [ST_POOLINGS.get(m) for m in modes] == [recorded]:
        return None
    asked = " + ".join(modes) or "(no pooling)"
    return f"{made}, but its source asks for {asked} in {printable(str(config_file))}"


def default_export_dir(spec: models.ModelSpec, task: str) -> Path:
    """Cache directory of the export of ``spec`` for ``task``: ``onnx/<name>/<task>``, where a
    local directory's name also carries its fingerprint, since it is known by its basename
    (``runs/a/model`` and ``runs/b/model`` shared one folder, and the second export replaced
    the first). The fingerprint, not the path: a copy of the same weights elsewhere (another
    clone, a CI workspace) finds the export, as its scores are the same."""
    name = spec.name
    if spec.origin == "path":
        name = f"{name}-{str(spec.fingerprint)[:12]}"
    return models.cache_dir_for(name, kind="onnx") / task


def _basename_export_dir(spec: models.ModelSpec, task: str) -> Path | None:
    """Where a local directory's export was cached before its name carried a digest
    (2026-11-25): still found when its fingerprint matches, so no one has to export again."""
    if spec.origin != "path":
        return None
    return models.cache_dir_for(spec.name, kind="onnx") / task


_FOUND: dict[tuple, tuple[float, ExportManifest | InputError]] = {}
_WARNED: set[tuple[str, float]] = set()


def find_export(spec: models.ModelSpec, task: str, strict: bool = False) -> ExportManifest | None:
    """The usable export of ``spec`` for ``task``, or None.

    ``spec.location`` itself when it is an export directory (the user passed one: a damaged
    manifest there is an ``InputError`` naming it), else the cache export whose recorded source
    fingerprint matches the model's current fingerprint (an export of weights that have since
    changed is ignored, never silently used). A damaged manifest in the cache (or in the
    export faithgate ships) is skipped with a one-line warning, so ``auto`` runs on torch, or,
    with ``strict`` (the onnx backend was asked for), raised.
    """
    location = Path(spec.location) if spec.origin != "hub" else None
    if location is not None and (location / MANIFEST_NAME).is_file():
        manifest = _cached_load(location)
        if isinstance(manifest, InputError):
            raise InputError(str(manifest)) from None
        return manifest if manifest is not None and manifest.task == task else None
    directory = default_export_dir(spec, task)
    older = _basename_export_dir(spec, task)
    if not (directory / MANIFEST_NAME).is_file() and older is not None:
        found = _cached_load(older)
        if (
            isinstance(found, ExportManifest)
            and found.task == task
            and found.source.get("fingerprint") == spec.fingerprint
        ):
            return found
    if not (directory / MANIFEST_NAME).is_file():
        # A model faithgate trained and ships carries its own export (onnx_models/<name>/onnx).
        shipped = models.shipped_export_dir(spec)
        if shipped is None or not (shipped / MANIFEST_NAME).is_file():
            return None
        directory = shipped
    manifest = _cached_load(directory)
    if isinstance(manifest, InputError):
        if strict:
            raise InputError(str(manifest)) from None
        _warn_skipped(directory, manifest)
        return None
    if manifest is None or manifest.task != task:
        return None
    if manifest.source.get("fingerprint") != spec.fingerprint:
        return None
    return manifest


def _warn_skipped(directory: Path, error: InputError) -> None:
    """One warning per damaged manifest (per version of the file) and process."""
    hit = _FOUND.get((str(directory),))
    key = (str(directory), hit[0] if hit is not None else 0.0)
    if key in _WARNED:
        return
    _WARNED.add(key)
    log.warning("%s; that export is skipped (backend auto uses torch)", error)


def _cached_load(directory: Path) -> ExportManifest | InputError | None:
    """Manifest of ``directory``, or the ``InputError`` that says why it is not usable;
    re-read only when the file changed (find_export is called for every settings hash)."""
    path = directory / MANIFEST_NAME
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    key = (str(directory),)
    hit = _FOUND.get(key)
    if hit is not None and hit[0] == mtime:
        return hit[1]
    manifest: ExportManifest | InputError
    try:
        manifest = load_manifest(directory)
    except InputError as exc:
        manifest = exc
    _FOUND[key] = (mtime, manifest)
    return manifest


def forget_manifest(directory: str | Path) -> None:
    """Drop the remembered manifest of ``directory`` (after an export replaced it)."""
    _FOUND.pop((str(directory),), None)
