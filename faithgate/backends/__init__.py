"""Backends behind one interface, and the per-process pool of loaded models.

``ModelPool.get(role, task)`` resolves the role, picks a backend (``auto``: an exported ONNX
model in the cache wins, else torch) and loads the model once; later calls return the same
object, so a pytest session or a long ``bench`` run pays each load once.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from faithgate import models
from faithgate.backends.base import Backend, RoleModel
from faithgate.backends.manifest import find_export
from faithgate.errors import InputError

BACKENDS = {
    "torch": "faithgate.backends.torch_backend:TorchBackend",
    "onnx": "faithgate.backends.onnx_backend:OnnxBackend",
}
BACKEND_CHOICES = ("auto", *BACKENDS)


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise InputError(f"unknown backend {name!r}; choose one of: {', '.join(BACKEND_CHOICES)}")
    module, attr = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), attr)()


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
        unknown = set(model_names or {}) - set(models.ROLES)
        if unknown:
            raise InputError(
                f"unknown model role(s) {', '.join(sorted(unknown))}; "
                f"roles are: {', '.join(models.ROLES)}"
            )
        if backend not in BACKEND_CHOICES:
            raise InputError(
                f"unknown backend {backend!r}; choose one of: {', '.join(BACKEND_CHOICES)}"
            )
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

    def get(self, role: str, task: str, **options: Any) -> RoleModel:
        added = self._added.get((role, task))
        if added is not None:
            return added
        spec = self.spec(role)
        merged = {**self.model_options.get(role, {}), **options}
        backend = self.backend_for(role, task)
        key = (role, spec.location, task, backend, tuple(sorted(merged.items())))
        with self._lock:
            model = self._loaded.get(key)
            if model is None:
                model = get_backend(backend).load(spec, task, **merged)
                self._loaded[key] = model
            return model


__all__ = ["BACKENDS", "BACKEND_CHOICES", "ModelPool", "choose_backend", "get_backend"]
