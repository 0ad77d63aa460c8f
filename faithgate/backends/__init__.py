"""Backends behind one interface, and the per-process pool of loaded models.

``ModelPool.get(role, task)`` resolves the role, picks a backend (``auto``: an exported ONNX
model in the cache wins, else torch) and loads the model once; later calls return the same
object, so a pytest session or a long ``bench`` run pays each load once.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faithgate import models
from faithgate.backends.base import Backend, RoleModel
from faithgate.backends.manifest import find_export
from faithgate.errors import ConfigError, InputError, option_error
from faithgate.safety.escape import printable


@dataclass(frozen=True)
class BackendEntry:
    """One backend in the dispatch table: its ``name`` (``--backend``, ``backend =``), the
    class implementing it (``"module:Class"``, imported on use so the torch-free runtime never
    imports torch), the modules it needs (``requires``: availability) and the loader options
    only it understands (``own_options``: dropped when another backend loads the role, so a
    role configured for one backend still loads under ``auto`` with the other)."""

    name: str
    target: str
    requires: tuple[str, ...] = ()
    own_options: tuple[str, ...] = ()

    def available(self) -> bool:
        """Whether the modules it needs are installed (nothing is imported)."""
        return all(importlib.util.find_spec(m) is not None for m in self.requires)

    def versions(self) -> dict[str, str]:
        """Installed versions of the modules it needs (nothing is imported): part of a model's
        identity, so a score computed under another version is not reused."""
        return {m: v for m in self.requires if (v := library_version(m)) is not None}


@functools.cache
def library_version(module: str) -> str | None:
    """The version of the distribution that ``import module`` would load, None when none is
    installed (or which one cannot be told); nothing is imported.

    A distribution's name can differ from its module's (``onnxruntime-gpu`` installs
    ``onnxruntime``), and two can provide one module: a GPU build earlier on ``sys.path`` than
    an installed CPU build, or both installed into one directory (``faithgate[runtime]``, then
    ``pip install onnxruntime-gpu``: the files on disk are the last one's). The version is that
    of the distribution in the module's directory whose record of the module's file matches
    the file there, so a score's hash names the build that computed it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    own = list(importlib.metadata.distributions(name=module))
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return own[0].version if own else None
    origin = Path(spec.origin).resolve()
    # the directory holding the package (or the one-file module)
    root = origin.parent.parent if spec.submodule_search_locations is not None else origin.parent
    mine = [d for d in own if _root(d) == root]
    if len(mine) == 1 and _records_file(mine[0], origin, root):
        return mine[0].version  # the usual case: settled without reading other records
    candidates = own + [
        d
        for name in _module_distributions().get(module, ())
        if name != module
        for d in importlib.metadata.distributions(name=name)
    ]
    here = [d for d in candidates if _root(d) == root]
    # installed over each other: the one whose record of the file is the file on disk
    here = [d for d in here if _records_file(d, origin, root)] or here
    if here:
        return here[0].version
    # Not beside any record (an editable or source-tree install): the one distribution that
    # could be it; with several, which one runs cannot be told.
    return candidates[0].version if len(candidates) == 1 else None


def _root(dist: importlib.metadata.Distribution) -> Path:
    return Path(str(dist.locate_file(""))).resolve()


@functools.cache
def _module_distributions() -> dict[str, list[str]]:
    """Top-level module -> the distributions that install it, read once per process, only
    where a module's own distribution does not settle it (it reads every RECORD); a malformed
    RECORD of an unrelated package gives nothing rather than stopping every score."""
    try:
        return importlib.metadata.packages_distributions()
    except Exception:  # noqa: BLE001 - any broken metadata: fall back to the module's own name
        return {}


def _records_file(dist: importlib.metadata.Distribution, path: Path, root: Path) -> bool:
    """Whether ``dist``'s RECORD lists ``path`` (under ``root``) with the SHA-256 of the file
    now there."""
    import base64
    import hashlib

    relative = path.relative_to(root).as_posix()
    for entry in dist.files or ():
        if entry.as_posix() != relative or entry.hash is None:
            continue
        digest = hashlib.new(entry.hash.mode, path.read_bytes()).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == entry.hash.value
    return False


# The one dispatch table: choices of the CLI, the plugin and the configuration derive from it.
BACKEND_TABLE: dict[str, BackendEntry] = {
    entry.name: entry
    for entry in (
        BackendEntry(
            "torch",
            "faithgate.backends.torch_backend:TorchBackend",
            ("torch", "transformers", "tokenizers"),
        ),
        BackendEntry(
            "onnx",
            "faithgate.backends.onnx_backend:OnnxBackend",
            ("onnxruntime", "tokenizers"),
            own_options=("threads", "provider"),  # onnxruntime session options
        ),
    )
}
BACKENDS = {name: entry.target for name, entry in BACKEND_TABLE.items()}
BACKEND_CHOICES = ("auto", *BACKENDS)


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise InputError(f"unknown backend {name!r}; choose one of: {', '.join(BACKEND_CHOICES)}")
    module, attr = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), attr)()


def precision_label(identity: dict[str, Any]) -> str:
    """The precision a settings hash's readable prefix shows for a model ``identity``, as its
    backend names it (``Backend.precision``); ``-`` for a model of no registered backend."""
    backend = identity.get("backend")
    return get_backend(backend).precision(identity) if backend in BACKENDS else "-"


# Loader options that only split the work (batch sizes, threads): scores are the same under
# any of them (batch independence is tested), so they are left out of the settings hash.
# Every other option (an encoder's window ``stride``, ``max_length``, the execution
# ``provider``, as resolved: ``ModelPool.identity``) can move a score and is part of the
# model's identity.
WORK_SPLIT_OPTIONS = frozenset({"batch_size", "batch_tokens", "threads"})


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _non_negative_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# The execution providers ``model_options.<role>.provider`` names (``onnx_backend.providers_for``):
# ``auto`` (CUDA when onnxruntime-gpu sees a GPU, else CPU), ``cpu``, ``cuda`` (CUDA or an error).
PROVIDERS = ("auto", "cpu", "cuda")


# Every loader option a role's ``model_options`` may set, with what its value must be. Checked
# when the pool is made, so a typo or a wrong type is a configuration error before any model
# loads (not a failure of every example); which options a backend takes for a task stays the
# loader's own check.
LOADER_OPTIONS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "batch_size": ("a positive integer", _positive_int),
    "batch_tokens": ("a positive integer", _positive_int),
    "threads": ("a positive integer", _positive_int),
    "max_length": ("a positive integer", _positive_int),
    "max_answer_tokens": ("a positive integer", _positive_int),
    "stride": ("a non-negative integer", _non_negative_int),
    "provider": (
        "an onnxruntime execution provider: auto, cpu or cuda",
        lambda v: isinstance(v, str) and v.lower() in PROVIDERS,
    ),
    # The label override of a classifier (``PairClassifier.set_label_override``).
    "labels": (
        "a list of class names in output order",
        lambda v: (
            isinstance(v, list) and bool(v) and all(isinstance(x, str) and x.strip() for x in v)
        ),
    ),
    "supported_label": (
        "the name of the class that means supported",
        lambda v: isinstance(v, str) and bool(v.strip()),
    ),
}


def check_model_options(role: str, options: Any) -> None:
    """Raise ``InputError`` for loader options ``role`` cannot take: not a table, an unknown
    name, or a value of the wrong type. spaCy models are loaded by spaCy and take none."""
    where = f"model_options.{role}"
    if not isinstance(options, dict):
        raise InputError(f"{where} must be a table of loader options, got {type(options).__name__}")
    if role == "spacy" and options:
        raise InputError(f"{where}: the spacy role takes no loader options")
    for name, value in options.items():
        if name not in LOADER_OPTIONS:
            raise InputError(
                f"unknown loader option {where}.{printable(str(name))}; "
                f"options are: {', '.join(sorted(LOADER_OPTIONS))}"
            )
        wanted, valid = LOADER_OPTIONS[name]
        if not valid(value):
            raise InputError(f"{where}.{name} must be {wanted}, got {printable(repr(value))}")


# The tasks the onnx backend serves (``onnx_backend.OnnxBackend.load_manifest``): where
# ``provider = "cuda"`` can be honoured, after ``faithgate export``.
ONNX_TASKS = ("text-encoder", "pair-classifier", "causal-lm", "seq2seq-lm")


def options_for(
    backend: str,
    options: dict[str, Any],
    role: str | None = None,
    task: str | None = None,
    why: str = "",
) -> dict[str, Any]:
    """``options`` without those only another backend understands.

    ``provider = "cuda"`` is not dropped: it asks for a GPU, which only onnxruntime gives
    here (the torch backend runs on the CPU), so a backend without that option refuses it
    (``ConfigError``, exit 2) instead of scoring on the CPU; onnx_models/README.md promises
    "``provider=cuda`` without a CUDA device is a one-line error, not a silent CPU run".
    ``role`` and ``task`` make the message precise; ``why`` says how ``backend`` was chosen."""
    entry = BACKEND_TABLE.get(backend)
    provider = options.get("provider")
    if (
        isinstance(provider, str)
        and provider.lower() == "cuda"
        and not (entry and "provider" in entry.own_options)
    ):
        if task is not None and task not in ONNX_TASKS:
            how = f'the {task} model has no ONNX backend: drop provider = "cuda"'
        else:
            how = (
                "CUDA needs the onnx backend with onnxruntime-gpu and an ONNX export of the "
                f"model (faithgate export {role or 'ROLE'} --device cuda): use that, or drop "
                'provider = "cuda"'
            )
        raise ConfigError(
            f'model_options.{role or "ROLE"}.provider = "cuda" asks for a GPU, but the model '
            f"runs on the {backend} backend{why}, which faithgate runs on the CPU only; {how}"
        )
    foreign = {
        o for name, entry in BACKEND_TABLE.items() if name != backend for o in entry.own_options
    }
    return {k: v for k, v in options.items() if k not in foreign}


def choose_backend(spec: models.ModelSpec, task: str, requested: str = "auto") -> str:
    """``auto`` -> onnx when an exported model for (spec, task) is in the cache, else torch."""
    if requested != "auto":
        if requested not in BACKENDS:
            raise InputError(
                f"unknown backend {requested!r}; choose one of: {', '.join(BACKEND_CHOICES)}"
            )
        return requested
    return "onnx" if find_export(spec, task) is not None else "torch"


class ModelPool:
    """Loaded models keyed by (role, location, task, backend, options); thread-safe."""

    def __init__(
        self,
        model_names: dict[str, str] | None = None,
        backend: str = "auto",
        allow_download: bool = False,
        model_options: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        for given in (model_names, model_options):  # a typo'd role must not be ignored
            unknown = set(given or {}) - set(models.ROLES)
            if unknown:
                raise InputError(
                    f"unknown model role(s) {', '.join(sorted(map(str, unknown)))}; "
                    f"roles are: {', '.join(models.ROLES)}"
                )
        if backend not in BACKEND_CHOICES:
            raise InputError(
                f"unknown backend {backend!r}; choose one of: {', '.join(BACKEND_CHOICES)}"
            )
        for role, options in (model_options or {}).items():
            check_model_options(role, options)
        self.model_names = dict(model_names or {})
        self.backend = backend
        self.allow_download = allow_download
        self.model_options = dict(model_options or {})
        self._loaded: dict[tuple, RoleModel] = {}
        self._specs: dict[str, models.ModelSpec] = {}
        # Models handed in ready-made (``add``): they win over resolution and loading.
        self._added: dict[tuple[str, str], RoleModel] = {}
        self._lock = threading.RLock()

    def add(self, model: RoleModel, role: str | None = None, task: str | None = None) -> None:
        """Serve an already-built model for ``(role, task)`` (default: the model's own).

        The seam for tests (fake encoders with hand-made vectors) and for embedding faithgate
        in a process that already holds a model; its ``spec`` becomes the role's spec, so
        settings hashes name it.
        """
        role = role or model.spec.role
        task = task or model.task
        if role not in models.ROLES:
            raise InputError(f"unknown model role {role!r}; roles are: {', '.join(models.ROLES)}")
        with self._lock:
            self._added[(role, task)] = model
            self._specs[role] = model.spec

    def spec(self, role: str) -> models.ModelSpec:
        with self._lock:
            if role not in self._specs:
                self._specs[role] = models.resolve(
                    role, self.model_names.get(role), allow_download=self.allow_download
                )
            return self._specs[role]

    def backend_for(self, role: str, task: str) -> str:
        added = self._added.get((role, task))
        if added is not None:
            return added.backend
        return choose_backend(self.spec(role), task, self.backend)

    def identity(self, role: str, task: str) -> dict[str, Any]:
        """What identifies a role's model for ``task`` without loading it (settings hashes):
        name, weights fingerprint, backend, the versions of the libraries that run it, and the
        fields the backend adds (``Backend.identity``: the loader options that can move a
        score; an ONNX export's quantization and provider)."""
        spec = self.spec(role)
        # A directory the user gave is known by its content (its fingerprint), not its name: a
        # renamed copy must keep its cached scores and baselines (``metrics.base.hashed``).
        # Absent for every other origin, and for a model object given without files (its
        # fingerprint is its name), whose hashes stay as they were.
        on_disk = spec.origin == "path" and Path(str(spec.location)).exists()
        local = {"origin": "path"} if on_disk else {}
        if role == "spacy":  # run by spaCy itself through faithgate.text, no backend choice
            return {
                "role": role,
                "model": spec.name,
                **local,
                "fingerprint": spec.fingerprint,
                "libraries": {"spacy": library_version("spacy")},
            }
        backend = self.backend_for(role, task)
        entry = BACKEND_TABLE.get(backend)
        identity: dict[str, Any] = {
            "role": role,
            "model": spec.name,
            **local,
            "fingerprint": spec.fingerprint,
            "backend": backend,
            "libraries": entry.versions() if entry is not None else {},
        }
        options = {
            k: v
            for k, v in self._options_for(backend, role, task, {}).items()
            if k not in WORK_SPLIT_OPTIONS
        }
        if backend in BACKENDS:
            identity.update(get_backend(backend).identity(spec, task, options))
        elif options:  # a model added ready-made under a backend of its own (a test's fake)
            identity["options"] = dict(sorted(options.items()))
        return identity

    def _options_for(
        self, backend: str, role: str, task: str, options: dict[str, Any]
    ) -> dict[str, Any]:
        """The role's ``model_options`` with ``options`` over them, for ``backend``."""
        why = (
            " (backend auto: no ONNX export of it is in the cache)"
            if self.backend == "auto"
            else ""
        )
        merged = {**self.model_options.get(role, {}), **options}
        return options_for(backend, merged, role, task, why)

    def get(self, role: str, task: str, **options: Any) -> RoleModel:
        added = self._added.get((role, task))
        if added is not None:
            return added
        spec = self.spec(role)
        backend = self.backend_for(role, task)
        merged = self._options_for(backend, role, task, options)
        # A list option (``labels``) keyed as a tuple: the key must hash.
        frozen = tuple(
            (k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(merged.items())
        )
        key = (role, spec.location, task, backend, frozen)
        with self._lock:
            model = self._loaded.get(key)
            if model is None:
                try:
                    model = get_backend(backend).load(spec, task, **merged)
                except TypeError as exc:  # a model class made with an option it does not take
                    error = option_error(exc, f"the {backend} {task} model", role)
                    if error is None:
                        raise
                    raise error from exc
                self._loaded[key] = model
            return model


__all__ = [
    "BACKENDS",
    "BACKEND_CHOICES",
    "BACKEND_TABLE",
    "LOADER_OPTIONS",
    "ONNX_TASKS",
    "PROVIDERS",
    "BackendEntry",
    "ModelPool",
    "check_model_options",
    "choose_backend",
    "get_backend",
    "options_for",
    "precision_label",
]
