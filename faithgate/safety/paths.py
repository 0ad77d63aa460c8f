"""Refuse to write over the files a run reads: the one guard every writing command calls.

A report, baseline or configuration written by faithgate must never land on one of the run's
own inputs (the outputs JSONL, the data JSONL, the configuration file, a baseline that is only
read). ``refuse_overwriting_inputs`` compares resolved paths, so ``./outputs.jsonl``,
``sub/../outputs.jsonl``, an absolute path and a symlink (or hard link) to the same file are
all recognised; two outputs aimed at one file are refused too. It runs before any scoring, so
a mistyped flag costs nothing and nothing is written. ``refuse_dir_over_inputs`` is the same
guard for a directory that is published whole (``train`` and ``export --out``).
``owned_lock`` is the lock file beside such a directory (``DIR.lock``): created only where no
file is, so a lock never truncates, overwrites or deletes a file of the user's.
``refuse_not_a_file`` (after ``input_mode`` for an input) is the one check (and wording) of a
path read or written that names a directory, a device, a FIFO or a socket where a file is
expected.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from faithgate.errors import InputError
from faithgate.safety.escape import printable


def _identity(path: Path) -> tuple[str, tuple[int, int] | None]:
    """A resolved path and, for an existing file, its (device, inode) (catches hard links)."""
    resolved = os.path.realpath(path)
    try:
        st = os.stat(resolved)
    except OSError:
        return resolved, None
    return resolved, (st.st_dev, st.st_ino)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (after symlinks, ``..`` and hard links)."""
    ra, ia = _identity(Path(a))
    rb, ib = _identity(Path(b))
    return ra == rb or (ia is not None and ia == ib)


def refuse_overwriting_inputs(
    outputs: Iterable[tuple[str, str | Path | None]],
    inputs: Iterable[tuple[str, str | Path | None]],
    *,
    bookkeeping: Iterable[tuple[str, str | Path | None]] = (),
) -> None:
    """Raise ``InputError`` (exit 2) when a file to write is one of the inputs, or when two
    files to write are the same file, or when an output can never be a file
    (``refuse_unwritable``). Each entry is ``(what, path)``; ``None`` paths and the stdin
    marker ``-`` are ignored. Messages name both roles, e.g. ``the json report
    (outputs.jsonl) is the outputs file of this run``. ``bookkeeping`` are files faithgate
    writes for itself (``last-result.json``), after the outputs: never over an input or an
    output either, but one that cannot be written is no reason to refuse the run (failing to
    write it is a warning), so they are not held to ``refuse_unwritable``."""
    ins = [(what, Path(p)) for what, p in inputs if p is not None and str(p) != "-"]
    outs = [
        (what, Path(p), own)
        for own, files in ((False, outputs), (True, bookkeeping))
        for what, p in files
        if p is not None and str(p) != "-"
    ]
    for i, (what, path, own) in enumerate(outs):
        for in_what, in_path in ins:
            if same_file(path, in_path):
                raise InputError(
                    f"the {what} ({path}) is the {in_what} of this run; refusing to overwrite "
                    "an input: choose another path"
                )
        for other_what, other, _ in outs[:i]:
            if same_file(path, other):
                raise InputError(
                    f"the {what} and the {other_what} are the same file ({path}): choose two paths"
                )
        if not own:
            refuse_unwritable(what, path)


def file_kind(mode: int) -> str | None:
    """What a file that is not a regular file is (``os.stat`` mode), in words ("a directory",
    "a named pipe (FIFO)", "a character device", ...), or ``None`` for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "a special file"


def input_mode(
    path: str | Path, shown: object, missing: str, error: type[InputError] = InputError
) -> int:
    """``os.stat(path).st_mode`` of an input about to be checked with ``refuse_not_a_file``;
    ``error`` (one line) otherwise: ``missing`` when nothing is there, ``{shown}: cannot read
    it (...)`` for any other failure (a loop of links, a name too long, no permission)."""
    try:
        return os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise error(missing) from None
    except OSError as exc:
        raise error(f"{shown}: cannot read it ({exc.strerror or exc})") from None


def refuse_not_a_file(
    path: str | Path,
    mode: int,
    what: str | None = None,
    *,
    pipe: bool = False,
    directory: bool = False,
    advice: str | None = None,
) -> None:
    """The one check of what a path names (``os.stat`` mode ``mode``), for a file read or
    written: raise ``InputError`` (exit 2) unless it is a regular file (or, with ``pipe``, a
    named pipe: ``--outputs <(cmd)`` is read like a file; with ``directory``, a directory).
    One wording everywhere, the path escaped: ``the {what} ({path}) is {kind}, not a regular
    file[ or a pipe][; advice]`` (without ``what``: ``{path} is {kind}, ...``)."""
    kind = file_kind(mode)
    if kind is None or (pipe and stat.S_ISFIFO(mode)) or (directory and stat.S_ISDIR(mode)):
        return
    accepted = [
        "a regular file",
        *(["a pipe"] if pipe else []),
        *(["a directory"] if directory else []),
    ]
    shown = printable(path)
    subject = f"the {what} ({shown})" if what else shown
    *others, last = accepted
    alternatives = f"{', '.join(others)} or {last}" if others else last
    raise InputError(f"{subject} is {kind}, not {alternatives}" + (f"; {advice}" if advice else ""))


def refuse_unwritable(what: str, path: str | Path) -> None:
    """Raise ``InputError`` (exit 2) when ``path`` can never be written as a file: it is a
    directory, a device, FIFO or socket (faithgate replaces a file whole, by rename: that would
    replace ``/dev/null`` or a pipe with a regular file), or a file stands where one of its
    directories should be. Checked before any work, so a long scoring run does not end in a
    write that was bound to fail."""
    path = Path(path)
    shown = printable(path)
    try:
        try:
            mode = os.stat(path).st_mode  # follows a symlink: what a write would replace
        except (FileNotFoundError, NotADirectoryError):  # nothing there yet (or a file in the
            mode = None  # way, said below)
        if mode is not None:
            refuse_not_a_file(
                path,
                mode,
                what,
                advice="give a file path"
                if stat.S_ISDIR(mode)
                else "faithgate writes a report by replacing the file whole, which would "
                "replace it; give a file path",
            )
        for ancestor in Path(os.path.abspath(path)).parents:
            if ancestor.exists():
                if not ancestor.is_dir():
                    raise InputError(
                        f"the {what} ({shown}) cannot be written: {printable(ancestor)} is a "
                        "file, not a directory"
                    )
                return
    except OSError as exc:  # a name too long, a loop of links: no file can be written there
        raise InputError(f"the {what} ({shown}) cannot be written: {exc.strerror or exc}") from None


def lies_inside(inner: Path, outer: Path) -> bool:
    """Whether ``inner`` is ``outer`` or lies below it, after symlinks and ``..`` (compared by
    device and inode, so a bind mount or a differently spelled path is caught too)."""
    try:
        st = os.stat(outer)
    except OSError:
        return False
    real = Path(os.path.realpath(inner))
    for path in (real, *real.parents):
        try:
            here = os.stat(path)
        except OSError:
            continue
        if (here.st_dev, here.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


def refuse_dir_over_inputs(
    target: Path, inputs: Iterable[tuple[str, str | Path | None]], what: str = "--out"
) -> None:
    """Raise ``InputError`` (exit 2) when the output directory ``target`` is one of the run's
    inputs (``(what, path)`` pairs: a model directory, a data file), lies inside one, or holds
    one: publishing there would replace or delete what the run reads. Inputs that are not
    local paths (hub ids, ``None``) are skipped."""
    for name, path in inputs:
        if path is None or not Path(path).exists():
            continue
        if lies_inside(target, Path(path)) or lies_inside(Path(path), target):
            raise InputError(
                f"{what} {target} is, holds or lies inside the {name} {path}; refusing to "
                "overwrite an input: choose another directory"
            )


# What a lock file faithgate creates holds: how a later run knows the file is faithgate's (and
# may lock it, and delete it once done) rather than a file of the user's that has the name.
LOCK_MARKER = b"faithgate lock\n"


def _foreign_lock(lock: Path, why: str, what: str) -> InputError:
    return InputError(
        f"the lock file {printable(lock)} {why}, not a faithgate lock; refusing to use it (it is "
        f"left untouched): move it away or choose another {what}"
    )


def _head(fd: int) -> bytes:
    """The first bytes of an open file: enough to tell ``LOCK_MARKER`` from anything else."""
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, len(LOCK_MARKER) + 1)


def _open_lock(lock: Path, what: str) -> int | None:
    """A descriptor of the lock file: created (holding ``LOCK_MARKER``) where no file is,
    else the existing file opened without truncation once it is shown to be a lock (it holds
    ``LOCK_MARKER``, or nothing: what earlier faithgate versions left). ``None`` when the file
    vanished in between (its holder finished): the caller tries again."""
    flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(lock, flags | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        pass
    except OSError as exc:
        raise InputError(
            f"cannot create the lock file {printable(lock)} ({exc.strerror})"
        ) from None
    else:
        try:
            os.write(fd, LOCK_MARKER)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(lock)
            raise
        return fd
    try:  # no O_CREAT, no O_TRUNC; O_NONBLOCK: a FIFO of that name must not hang the open
        fd = os.open(lock, flags | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(lock):
            raise _foreign_lock(lock, "is a symbolic link", what) from None
        if os.path.isdir(lock):
            raise _foreign_lock(lock, "is a directory", what) from None
        raise _foreign_lock(lock, f"cannot be opened ({exc.strerror})", what) from None
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise _foreign_lock(lock, f"is {kind}", what)
        if _head(fd) not in (b"", LOCK_MARKER):
            raise _foreign_lock(lock, "exists and holds data", what)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def owned_lock(
    lock: str | Path, what: str = "--out", waiting: Callable[[], None] | None = None
) -> Iterator[None]:
    """Hold the lock file ``lock`` (``DIR.lock`` beside a directory faithgate publishes) for the
    duration: one process at a time writes that directory.

    The file is created with ``O_CREAT | O_EXCL`` (never truncating anything) and holds
    ``LOCK_MARKER``; an existing file is used only when it is such a lock (or empty, as earlier
    faithgate versions left theirs), and nothing is ever written into it. Anything else there
    (a file with data, a symbolic link, a directory) is the user's: ``InputError`` (exit 2)
    naming it, ``what`` (the option that chose the directory) in the advice. A lock faithgate
    made is deleted when released; a waiter that then holds the deleted file sees that and
    locks the new one. ``waiting``, when given, is called once if another process holds the
    lock, before this one waits for it (to say why nothing happens)."""
    lock = Path(lock)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: filelock, on the file checked above
        from filelock import FileLock

        fd = _open_lock(lock, what)
        if fd is not None:
            os.close(fd)
        with FileLock(str(lock)):
            yield
        return
    while True:
        fd = _open_lock(lock, what)
        if fd is None:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if waiting else 0))
            except BlockingIOError:  # only with LOCK_NB: held by another process
                waiting, say = None, waiting
                if say is not None:
                    say()
                fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                here = os.stat(lock, follow_symlinks=False)
            except FileNotFoundError:
                here = None
            if here is not None and os.path.samestat(os.fstat(fd), here):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # its holder deleted it while we waited: lock the file there now
    try:
        yield
    finally:
        try:
            ours = os.path.samestat(os.fstat(fd), os.stat(lock, follow_symlinks=False))
            if ours and _head(fd) == LOCK_MARKER:
                os.unlink(lock)  # still held: nobody else can be using this file
        except OSError:
            pass
        finally:
            os.close(fd)
