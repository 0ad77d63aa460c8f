"""The result of the last run with a cache, beside it (``last-result.json``): a convenience,
faithgate's own file, never the verdict: a write that fails is a warning."""

from __future__ import annotations

import os
import re
from pathlib import Path

from faithgate.errors import WriteError
from faithgate.result import GateResult
from faithgate.safety.escape import printable


def save_last_result(result: GateResult, last: Path) -> list[str]:
    """Write ``result`` to ``last``; the warnings when it cannot be. Like the cache itself, a
    full disk or a read-only cache directory costs it, never the verdict or reports. A
    directory, FIFO or device there is not faithgate's: never written into, replaced or
    removed (the atomic write refuses it), only warned about."""
    try:
        if not is_own_result(last):
            raise WriteError(last, "a file that faithgate did not write is there")
        result.save(last)
    except WriteError as exc:
        # The previous run's file would read as this run's result: removed if it can be.
        stale = ""
        try:
            if last.is_file() and is_own_result(last):
                last.unlink()
                stale = "; the previous run's file there is removed"
            elif os.path.lexists(last):
                stale = " (left as it was)"
        except OSError:
            stale = "; it still holds the previous run's result"
        return [
            f"cannot write {printable(last)}: {exc.reason}{stale}; the verdict and "
            "reports of this run stand"
        ]
    return []


def is_own_result(path: Path) -> bool:
    """Whether ``path`` is free for the last run's result: absent, or a file that a run wrote
    (a JSON object whose first keys include ``schema`` or ``verdict``, as ``GateResult.save``
    writes them, in its first 4 KiB). A user's file of that name, or anything else there, is
    never replaced or removed."""
    if not os.path.lexists(path):
        return True
    if not path.is_file():  # follows a symlink: the atomic write replaces what it points to
        return True  # not a regular file: the atomic write refuses it, with its own reason
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return True  # unreadable: the write reports what is wrong
    return (
        head.lstrip().startswith(b"{") and re.search(rb'"(schema|verdict)"\s*:', head) is not None
    )
