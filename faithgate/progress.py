"""Progress on a terminal: a tqdm bar on stderr behind a plain callback.

Library code (the gate, bench) reports progress through a callback, ``advance(n)`` with the
number of items finished since the last call; this module is one such callback for a terminal,
kept out of ``faithgate.report`` so the gate needs no report to show it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def progress_bar(total: int, desc: str = "scoring") -> Iterator[Any]:
    """A tqdm bar on stderr (``bar.update(n)``), closed on exit."""
    from tqdm import tqdm  # imported on use: only runs that show a bar pay for it

    bar = tqdm(total=total, desc=desc, unit="ex", file=sys.stderr, dynamic_ncols=True, leave=False)
    try:
        yield bar
    finally:
        bar.close()


@contextmanager
def terminal_progress(total: int, desc: str = "scoring") -> Iterator[Callable[[int], None]]:
    """The progress callback of a tqdm bar on stderr: ``advance(n)`` moves it by ``n``."""
    with progress_bar(total, desc) as bar:
        yield bar.update
