"""Refuse to write over the files a run reads: the one guard every writing command calls.

A report, baseline or configuration written by faithgate must never land on one of the run's
own inputs (the outputs JSONL, the data JSONL, the configuration file, a baseline that is only
read). ``refuse_overwriting_inputs`` compares resolved paths, so ``./outputs.jsonl``,
``sub/../outputs.jsonl``, an absolute path and a symlink (or hard link) to the same file are
all recognised; two outputs aimed at one file are refused too. It runs before any scoring, so
a mistyped flag costs nothing and nothing is written. ``refuse_dir_over_inputs`` is the same
guard for a directory that is published whole (``train`` and ``export --out``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from faithgate.errors import InputError


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
) -> None:
    """Raise ``InputError`` (exit 2) when a file to write is one of the inputs, or when two
    files to write are the same file. Each entry is ``(what, path)``; ``None`` paths and the
    stdin marker ``-`` are ignored. Messages name both roles, e.g. ``the json report
    (outputs.jsonl) is the outputs file of this run``."""
    ins = [(what, Path(p)) for what, p in inputs if p is not None and str(p) != "-"]
    outs = [(what, Path(p)) for what, p in outputs if p is not None and str(p) != "-"]
    for i, (what, path) in enumerate(outs):
        for in_what, in_path in ins:
            if same_file(path, in_path):
                raise InputError(
                    f"the {what} ({path}) is the {in_what} of this run; refusing to overwrite "
                    "an input: choose another path"
                )
        for other_what, other in outs[:i]:
            if same_file(path, other):
                raise InputError(
                    f"the {what} and the {other_what} are the same file ({path}): choose two paths"
                )
        refuse_unwritable(what, path)


def refuse_unwritable(what: str, path: str | Path) -> None:
    """Raise ``InputError`` (exit 2) when ``path`` can never be written as a file: it is a
    directory, or a file stands where one of its directories should be. Checked before any
    work, so a long scoring run does not end in a write that was bound to fail."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"the {what} ({path}) is a directory: give a file path")
    for ancestor in Path(os.path.abspath(path)).parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise InputError(
                    f"the {what} ({path}) cannot be written: {ancestor} is a file, not a directory"
                )
            return


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
