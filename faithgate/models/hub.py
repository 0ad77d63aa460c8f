"""The Hugging Face hub and its local cache: snapshots and files already downloaded
(``huggingface_hub.try_to_load_from_cache``), and the commit the hub serves for a revision,
which names a hub model's weights in its fingerprint."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path

from faithgate.errors import ModelNotFoundError

COMMIT = re.compile(r"[0-9a-f]{40}")
_lock = threading.Lock()


def hf_hub_cache() -> Path:
    """The Hugging Face hub cache, found as ``huggingface_hub`` finds it (``HF_HUB_CACHE``,
    ``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, ``HF_HOME`` defaulting to
    ``$XDG_CACHE_HOME/huggingface``, then ``~/.cache/huggingface``). Read on every call:
    ``huggingface_hub.constants`` fixes it when first imported, and the environment may change
    after that (a test, an embedding process)."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return Path(os.path.expanduser(os.environ[variable]))
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    home = os.environ.get("HF_HOME") or os.path.join(xdg, "huggingface")
    return Path(os.path.expanduser(home)) / "hub"


def hf_cached_file(hub_id: str, filename: str, revision: str | None = None) -> Path | bool | None:
    """``filename`` of ``hub_id`` at ``revision`` (default ``main``) in the Hugging Face cache
    (``huggingface_hub.try_to_load_from_cache``: the commit read from ``refs/<revision>``
    unless the revision is one): its path when cached; False where the cache records that the
    repository has no such file (``.no_exist/<commit>/``); None where the cache does not know,
    for a name that is no hub id, or without ``huggingface_hub`` (the core install, which runs
    no hub model). Reads files only, never the network."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(
            hub_id, filename, cache_dir=hf_hub_cache(), revision=revision
        )
    except ValueError:  # HFValidationError: not a hub id ("../x", "a/b/c")
        return None
    if isinstance(found, str):
        return Path(found)
    return None if found is None else False  # the sentinel _CACHED_NO_EXIST


def hf_cached_snapshot(hub_id: str, revision: str | None = None) -> Path | None:
    """The snapshot of ``hub_id`` at ``revision`` (default ``main``) in the Hugging Face cache
    (``models--org--name/snapshots/<commit>``, found through its ``config.json``), when it
    holds a loadable model (``config.json`` and safetensors weights); else None. Reads files
    only, never the network."""
    config = hf_cached_file(hub_id, "config.json", revision)
    if not isinstance(config, Path):
        return None
    snapshot = config.parent
    if not any(f.suffix == ".safetensors" and f.is_file() for f in snapshot.iterdir()):
        return None
    return snapshot


_hub_commits: dict[tuple[str, str, str], str] = {}


def hub_problem(exc: BaseException) -> str:
    """What went wrong asking the hub, for a one-line message: the exception's type and the
    first line of its text (``huggingface_hub``'s errors carry a long response body)."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def hub_commit(role: str, name: str, revision: str | None) -> str:
    """The commit the hub serves for the ``role`` model ``name`` (a hub id) at ``revision``
    (default ``main``): the revision itself when it is a commit hash, else what ``huggingface_hub`` resolves it to
    while fetching ``config.json`` (the request transformers makes first when it loads; offline
    or unreachable, ``huggingface_hub`` answers from its cache's ``refs``). Asked once per
    process. Raises ``ModelNotFoundError`` when no commit can be known: a score must never be
    filed under weights nobody can name."""
    pinned = revision
    revision = revision or "main"
    if COMMIT.fullmatch(revision):
        return revision
    key = (str(hf_hub_cache()), name, revision)
    with _lock:
        if key in _hub_commits:
            return _hub_commits[key]
    problem = "huggingface_hub is not installed"
    commit = None
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        hf_hub_download = None
    if hf_hub_download is not None:
        try:
            found = hf_hub_download(
                name, "config.json", revision=pinned, cache_dir=str(hf_hub_cache())
            )
            commit = Path(found).parent.name
        except Exception as exc:  # huggingface_hub raises many types; report one line
            problem = hub_problem(exc)
    if commit is None or not COMMIT.fullmatch(commit):
        raise ModelNotFoundError(
            f"cannot tell which commit of {role} model {name!r} the hub serves at "
            f"revision {revision!r} ({problem}): pin one with {name}@COMMIT, or point "
            "the role at a local directory"
        )
    with _lock:
        _hub_commits[key] = commit
    return commit


def commit_fingerprint(hub_id: str, commit: str) -> str:
    return hashlib.sha256(f"{hub_id}|{commit}|hub-commit".encode()).hexdigest()[:12]
