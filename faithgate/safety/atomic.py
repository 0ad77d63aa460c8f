"""Atomic file writes: the one way faithgate replaces a file.

Every file faithgate writes (baselines, the gate configuration, reports, manifests, benchmark
and calibration outputs) goes through ``atomic_write_text`` / ``atomic_write_bytes`` or the
``atomic_writer`` context manager. The new content goes to a temporary file in the target's
directory (same file system, so the final rename is atomic), is flushed and fsynced, and only
then renamed over the target. A failure at any point (disk full, a size limit, an exception
while rendering, Ctrl-C) leaves the previous file byte for byte as it was and removes the
temporary file. The file mode of an existing target is kept; a new file gets the usual
``0o666 & ~umask``.

The file system refusing the write (no permission, a directory or a file in the way, a full
disk, a file size limit) raises ``faithgate.errors.WriteError`` naming the path (exit 2), not a
bare ``OSError``; an exception of the caller's own code inside ``atomic_writer`` passes through.

A symlink at the target is followed: the file it points to is replaced (and the link kept), so
a baseline or configuration kept behind a symlink stays where the user put it. A target that
exists and is not a regular file (a directory, a device such as ``/dev/null``, a FIFO, a
socket) is never replaced: ``WriteError``.

(The ``atomicwrites`` package did this once but is archived and unmaintained; this is the same
recipe in a few lines.)
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from faithgate.errors import WriteError
from faithgate.safety.paths import file_kind

# Where Linux (4.7+) reports the process's umask; a test points it at a file of its own.
_PROC_STATUS = "/proc/self/status"


def current_umask() -> int:
    """The process's umask, the bits a new file's or directory's mode leaves out.

    Read from ``/proc/self/status`` where the kernel reports it (Linux 4.7+): ``os.umask`` can
    only be read by setting it, and for the instant it is 0 another thread's new file would be
    made world-writable. Elsewhere it is set and put back at once. The file is read as bytes:
    its ``Name:`` line holds the process name's raw bytes (a non-ASCII executable, or one
    renamed by ``prctl`` / ``setproctitle``), which text decoding refused."""
    try:
        with open(_PROC_STATUS, "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_writer(
    path: str | Path, mode: str = "w", encoding: str | None = "utf-8"
) -> Iterator[IO]:
    """Open a temporary file next to ``path`` for writing; on a clean exit it replaces ``path``.

    ``mode`` is ``"w"`` (text, ``encoding``) or ``"wb"``. Parent directories are created. On
    any exception the target is untouched and the temporary file removed.
    """
    if mode not in ("w", "wb"):
        raise ValueError("atomic_writer mode must be 'w' or 'wb'")
    fd, tmp, target, perms = _open_temporary(path)
    try:
        kwargs = {"encoding": encoding, "newline": ""} if mode == "w" else {}
        fh = os.fdopen(fd, mode, **kwargs)
        try:
            yield fh
            # The close too: a full disk on a small file fails at its last flush, not in write.
            with _as_write_error(path):
                fh.flush()
                os.fsync(fh.fileno())
                fh.close()
        finally:
            # After a failed write the bytes stay buffered and close() flushes them again: its
            # second OSError must not replace the WriteError (or the caller's own exception).
            with contextlib.suppress(OSError):
                fh.close()
        with _as_write_error(path):
            os.chmod(tmp, perms)
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(target.parent)


def _open_temporary(path: str | Path) -> tuple[int, Path, Path, int]:
    """(file descriptor, temporary path, target, file mode) of a new temporary file in the
    directory of ``path`` (created if missing), the target being the file ``path`` names."""
    target = Path(os.path.realpath(path))  # follow a symlink: replace what it points to
    with _as_write_error(path):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:  # mkdir's own words ("File exists") name no culprit
            raise NotADirectoryError(
                errno.ENOTDIR, "a file stands where its directory should be"
            ) from None
        try:
            mode = target.stat().st_mode
        except FileNotFoundError:
            mode = None
        perms = stat.S_IMODE(mode) if mode is not None else 0o666 & ~current_umask()
        kind = file_kind(mode) if mode is not None else None
        if kind is not None:
            # A directory, device, FIFO or socket: the rename would replace it with a regular
            # file (as root, ``/dev/null`` itself). Never replaced; it cannot be "left
            # unchanged" by a write into it either.
            raise OSError(errno.EEXIST, f"it is {kind}, not a regular file")
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    return fd, Path(tmp_name), target, perms


def atomic_write_files(files: Sequence[tuple[str | Path, str]], encoding: str = "utf-8") -> None:
    """Replace several files as one: every file's new text is written and fsynced to a
    temporary file beside it first, and only when all are ready are they renamed into place.
    A failure while writing any of them (a directory in the way, a full disk on the largest)
    leaves every target as it was, so a set of reports never mixes two runs. So does a rename
    failing (``_replace_all``: those already renamed are put back); ``WriteError.replaced``
    names any that could not be."""
    staged: list[tuple[Path, Path, str | Path]] = []
    try:
        for path, text in files:
            fd, tmp, target, perms = _open_temporary(path)
            staged.append((tmp, target, path))
            # WriteError outside the file: its close flushes again, and a full disk on a small
            # file fails only there.
            with _as_write_error(path), os.fdopen(fd, "w", encoding=encoding, newline="") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            with _as_write_error(path):
                os.chmod(tmp, perms)
        _replace_all(staged)
    except BaseException:
        for tmp, _, _ in staged:
            with contextlib.suppress(OSError):
                tmp.unlink()
        raise
    for directory in {target.parent for _, target, _ in staged}:
        _fsync_dir(directory)


def _replace_all(staged: Sequence[tuple[Path, Path, str | Path]]) -> None:
    """Rename each staged temporary file over its target. A rename failing part way (a file of
    another user in a sticky directory, a directory put in the way meanwhile) must not leave
    the targets renamed before it replaced: each previous file is kept aside as a hard link
    until every rename succeeded, and put back (a target that did not exist is removed)."""
    kept: list[Path] = []
    survivors: list[Path] = []  # kept links whose put-back failed: the only previous copy
    done: list[tuple[Path, Path | None, bool, str | Path]] = []  # target, kept, existed, path
    try:
        for tmp, target, path in staged:
            old, existed = _keep_aside(target)
            if old is not None:
                kept.append(old)
            with _as_write_error(path):
                os.replace(tmp, target)
            done.append((target, old, existed, path))
    except WriteError as exc:
        failed = _put_back(done)
        # A previous file that could not be put back stays in its link, named: never deleted.
        survivors.extend(old for _, old, _, _ in failed if old is not None)
        exc.add_replaced(
            [path if old is None else f"{path} (previous file kept as {old})"
             for _, old, _, path in failed]
        )  # fmt: skip
        raise
    except BaseException:
        survivors.extend(old for _, old, _, _ in _put_back(done) if old is not None)
        raise
    finally:
        for old in kept:
            if old not in survivors:
                with contextlib.suppress(OSError):
                    old.unlink()


def _keep_aside(target: Path) -> tuple[Path | None, bool]:
    """(a hard link to the file at ``target``, or None; whether there is one). No link where
    the file system has none (or refuses it): that target cannot be put back, and is named."""
    for _ in range(10):  # a random name taken: try another
        old = target.with_name(f".{target.name}.{os.urandom(4).hex()}.old")
        try:
            os.link(target, old)
            return old, True
        except FileExistsError:
            continue
        except FileNotFoundError:
            return None, False
        except OSError:
            break
    return None, os.path.lexists(target)


def _put_back(
    done: Sequence[tuple[Path, Path | None, bool, str | Path]],
) -> list[tuple[Path, Path | None, bool, str | Path]]:
    """Undo the renames of ``done`` (newest first); returns those that could not be undone."""
    failed = []
    for entry in reversed(done):
        target, old, existed, _ = entry
        try:
            if old is not None:
                os.replace(old, target)
            elif not existed:
                target.unlink()
            else:
                failed.append(entry)
        except OSError:
            failed.append(entry)
    return failed[::-1]


@contextlib.contextmanager
def _as_write_error(path: str | Path) -> Iterator[None]:
    """The file system refusing a write (permission, a directory or file in the way, a full
    disk) is ``WriteError``, exit 2, naming the path: not an internal error. Errors of the
    caller's own code inside ``atomic_writer`` pass through unchanged."""
    try:
        yield
    except OSError as exc:
        raise WriteError(path, exc.strerror or str(exc)) from None


def _fsync_dir(directory: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``text`` atomically (see the module docstring); returns ``path``."""
    with atomic_writer(path, "w", encoding) as fh, _as_write_error(path):
        fh.write(text)
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically; returns ``path``."""
    with atomic_writer(path, "wb", None) as fh, _as_write_error(path):
        fh.write(data)
    return Path(path)
