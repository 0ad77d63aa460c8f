"""The files faithgate keeps for models: its home directory, content digests remembered
across runs (``file_digests``), and directories published whole and atomically
(``publish_dir``), refusing to replace a directory that holds the user's files."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from faithgate.errors import InputError
from faithgate.safety.atomic import current_umask
from faithgate.safety.escape import printable, safe_line
from faithgate.safety.paths import lies_inside


def faithgate_home() -> Path:
    """Root of faithgate's cache: converted models, exports, score caches. A ``FAITHGATE_HOME``
    that is something other than a directory is an ``InputError`` (exit 2) naming it, not an
    internal error from the first file written under it."""
    given = os.environ.get("FAITHGATE_HOME")
    home = Path(given or Path.home() / ".cache" / "faithgate")
    if given and os.path.lexists(home) and not home.is_dir():
        raise InputError(f"FAITHGATE_HOME ({printable(home)}) is not a directory")
    return home


def is_model_dir(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def progress_line(message: str) -> None:
    """A progress line on stderr for a long one-off step (stdout stays the command's output)."""
    print(f"faithgate: {safe_line(message)}", file=sys.stderr, flush=True)  # names a file


def same_file(a: Path, b: Path) -> bool:
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file's content, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


FINGERPRINT_MEMO = "fingerprints.json"
_memo: dict[str, str] | None = None
_memo_lock = threading.Lock()


def file_digests(paths: list[Path]) -> list[str]:
    """SHA-256 of each file's content, remembered by (real path, size, mtime, inode, ctime,
    device) in ``<faithgate home>/fingerprints.json`` (written once per call, when a file was
    new): a 540 MB model is read once (about 0.4 s), not on every run. A file whose content
    may have changed is read again: size and mtime alone miss new weights of the same size
    whose mtime was kept (``cp -p``, ``rsync -a``, ``touch -r``, an archive's fixed dates),
    and the inode misses a rewrite in place (``cp`` over the file, ``rsync --inplace``) or a
    new file given a freed inode number. The change time (ctime) moves on every write, rename
    or re-creation and no copy tool can set it (git's index and Bazel rely on it the same
    way); a chmod or chown moves it too, which costs one re-read. (On Windows before Python
    3.12 ``st_ctime`` is the creation time, which a rewrite in place keeps.) The memo is best
    effort: unreadable or unwritable, every file is hashed."""
    global _memo
    memo_path = faithgate_home() / FINGERPRINT_MEMO
    if _memo is None:
        try:
            loaded = json.loads(memo_path.read_text(encoding="utf-8"))
            _memo = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            _memo = {}
    digests, new = [], {}
    for path in paths:
        st = path.stat()
        key = (
            f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
            f"|{st.st_ctime_ns}|{st.st_dev}"
        )
        if key not in _memo:
            new[key] = file_sha256(path)
        digests.append(new.get(key) or _memo[key])
    if new:
        with _memo_lock:  # threads of one process share the memo; dumping it must not race
            _memo.update(new)
            text = json.dumps(_memo, sort_keys=True)
        try:  # another process may write it at the same time: the last writer wins, both valid
            from faithgate.safety.atomic import atomic_write_text

            atomic_write_text(memo_path, text)
        except (OSError, InputError):
            pass
    return digests


# What faithgate writes into a directory it publishes whole (``publish_dir``), by the manifest
# that marks it as faithgate's: ``faithgate export --out`` (optimum's export: the ONNX graphs
# and their external data, the model's config and tokenizer files; ``backends.export``),
# ``faithgate train --out`` (transformers' ``save_pretrained`` of the model and its tokenizer;
# ``training.train``) and a shipped checker (its weights, config and an ``onnx/`` export;
# ``training.ship``). An earlier output is replaced only when it holds nothing else: a
# directory that once received an export and then the user's project files (``app.py``,
# ``src/``) holds the manifest too, and replacing it deleted them.
_MODEL_FILES = (
    r"config\.json|generation_config\.json|tokenizer(_config)?\.json|special_tokens_map\.json"
    r"|added_tokens\.json|vocab\.(txt|json)|merges\.txt|[\w.-]+\.model|chat_template\.jinja"
    # A file manager's own records (macOS Finder writes .DS_Store on opening the folder):
    # no user data, and refusing them would block every re-export there.
    r"|\.DS_Store|Thumbs\.db|desktop\.ini"
)
_PUBLISHED_FILES = {
    "faithgate_onnx.json": re.compile(
        rf"faithgate_onnx\.json|{_MODEL_FILES}|[\w.-]+\.onnx(_data)?"
    ),
    "faithgate_training.json": re.compile(
        rf"faithgate_training\.json|{_MODEL_FILES}|(model|weights)\.safetensors"
        r"|model-\d+-of-\d+\.safetensors|model\.safetensors\.index\.json"
    ),
}
# Directories inside such an output, by its manifest: the name, and the manifest of their own
# (a shipped checker's ONNX export, itself held to what an export writes).
_PUBLISHED_DIRS = {"faithgate_training.json": {"onnx": "faithgate_onnx.json"}}


def refuse_current_dir(target: Path, what: str = "--out") -> None:
    """Raise ``InputError`` (exit 2) when ``target`` is the current directory or one above it:
    a directory published there (``publish_dir``) would replace the user's working tree, and a
    current directory cannot be renamed away by the name ``.``."""
    if target.name in ("", "..") or lies_inside(Path.cwd(), target):
        raise InputError(
            f"{what} {printable(target)}: give a new directory, not the current directory or "
            "one above it (it would be replaced whole, with every file in it)"
        )


def _listed_files(manifest: Path) -> set[str]:
    """The file names an export's manifest records (its graphs and tokenizer files), which an
    export wrote beside it; empty when it records none or cannot be read."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        names = [*dict(data.get("files") or {}).values(), *list(data.get("tokenizer_files") or [])]
    except (OSError, ValueError, TypeError, AttributeError):
        return set()
    return {str(n) for n in names if isinstance(n, str)}


def foreign_entries(target: Path, manifest: str) -> list[str]:
    """The entries of ``target``, an earlier output holding ``manifest``, that the run writing
    such an output does not write (``_PUBLISHED_FILES``, the names its manifest lists, and
    ``_PUBLISHED_DIRS`` holding only what theirs allow), sorted; ``dir/`` for a directory,
    ``dir/name`` for an entry inside one. Raises ``OSError`` when a directory cannot be read."""
    allowed = _PUBLISHED_FILES.get(manifest)
    listed = _listed_files(target / manifest)
    subdirs = _PUBLISHED_DIRS.get(manifest, {})
    foreign: list[str] = []
    with os.scandir(target) as entries:
        found = sorted(entries, key=lambda e: e.name)
    for entry in found:
        name = entry.name
        if entry.is_dir(follow_symlinks=False):
            inner = subdirs.get(name)
            if inner is not None and (Path(entry.path) / inner).is_file():
                foreign += [f"{name}/{n}" for n in foreign_entries(Path(entry.path), inner)]
            else:
                foreign.append(f"{name}/")
        elif not ((allowed is not None and allowed.fullmatch(name)) or name in listed):
            foreign.append(name)
    return foreign


def refuse_foreign_dir(target: Path, manifest: str, what: str = "--out") -> None:
    """Raise ``InputError`` (exit 2) unless ``publish_dir`` may put a directory at ``target``:
    nothing there, an empty directory, or an earlier output of the same kind (it holds
    ``manifest``, the file faithgate writes into every such directory, and nothing but what
    such a run writes: ``foreign_entries``). Anything else is the user's, and replacing it
    would delete their files; so is the current directory, or one above it
    (``refuse_current_dir``)."""
    refuse_current_dir(target, what)
    if target.is_symlink():  # replacing the link would leave its directory, confusingly
        raise InputError(f"{what} {target} is a symbolic link: give the directory itself")
    if not target.exists():
        return
    if not target.is_dir():
        raise InputError(f"{what} {target} is a file, not a directory")
    try:
        if (target / manifest).is_file():
            foreign = foreign_entries(target, manifest)
            if foreign:
                more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
                them = "them" if foreign[1:] else "it"
                raise InputError(
                    f"{what} {target} holds {manifest} (an earlier faithgate output) but also "
                    f"{printable(foreign[0])}{more}, which faithgate does not write there; "
                    f"refusing to replace the directory, which would delete {them}: move {them} "
                    "away or give a new or empty directory"
                )
            return
        empty = next(target.iterdir(), None) is None
    except OSError as exc:
        raise InputError(f"{what} {target} cannot be read ({exc.strerror})") from None
    if not empty:
        raise InputError(
            f"{what} {target} is a directory that is not empty and holds no {manifest} (not an "
            "earlier faithgate output); refusing to replace it: give a new or empty directory"
        )


def publish_dir(tmp: Path, target: Path, manifest: str | None = None) -> None:
    """Move a fully written directory into place, replacing an older one: readers (other
    processes) see the old directory or the complete new one, never half of either (for an
    instant between two renames, neither).

    With ``manifest``, ``target`` is a user's choice and is replaced only when
    ``refuse_foreign_dir`` allows it (checked again here: the run may have taken hours)."""
    if manifest is not None:
        refuse_foreign_dir(target, manifest)
    # ``tempfile.mkdtemp`` made ``tmp`` 0700, and some writers make their files 0600
    # (safetensors' ``save_file``): published, everything in it gets a new file's or
    # directory's usual mode (a model directory made for others, a shared cache, a Docker
    # image run as another user). Nothing in such a directory is executable.
    mask = current_umask()
    for folder, subfolders, files in os.walk(tmp):
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o666 & ~mask)
        for name in subfolders:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o777 & ~mask)
    os.chmod(tmp, 0o777 & ~mask)
    if not target.exists():
        tmp.rename(target)
        return
    # The old directory is moved aside before the new one takes its name, and deleted only
    # once the new one is there: a failed rename puts it back, nothing is lost.
    holder = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
    aside = holder / "old"
    target.rename(aside)
    try:
        tmp.rename(target)
    except BaseException:
        # Ctrl-C (``Interrupted``, ``KeyboardInterrupt``) too: the old one goes back unless the
        # new one got there just before the interrupt.
        if not target.exists():
            aside.rename(target)
            holder.rmdir()
        elif not tmp.exists():  # the new one is in place: only the old one to delete
            shutil.rmtree(holder, ignore_errors=True)
        raise
    shutil.rmtree(holder, ignore_errors=True)
