"""Reports of a gate result: JUnit XML, Markdown, HTML, JSON and the terminal table.

Reports only read a ``GateResult`` (never a model). ``render(kind, result)`` returns the text
of one report; ``write_reports(result, reports)`` writes every configured one.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from faithgate.atomic import atomic_write_text
from faithgate.errors import InputError, WriteError
from faithgate.formats import REPORT_FORMATS
from faithgate.result import GateResult

if TYPE_CHECKING:
    from faithgate.config import Reports

# Every report format, from the registry (``faithgate.formats``).
KINDS = tuple(REPORT_FORMATS)


def to_json(result: GateResult) -> str:
    """The result JSON (also what a baseline holds)."""
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n"


def render(kind: str, result: GateResult) -> str:
    """The text of one report kind for ``result`` (its renderer from the registry)."""
    fmt = REPORT_FORMATS.get(kind)
    if fmt is None:
        raise InputError(f"unknown report kind {kind!r}; choose one of: {', '.join(KINDS)}")
    module, attr = fmt.renderer.split(":")
    renderer: Callable[[GateResult], str] = getattr(importlib.import_module(module), attr)
    return renderer(result)


def write_reports(result: GateResult, reports: Reports) -> dict[str, Path]:
    """Write each configured report (creating directories); returns kind -> path."""
    written: dict[str, Path] = {}
    for kind, path in reports.items():
        path = Path(path)
        try:
            atomic_write_text(path, render(kind, result))
        except WriteError as exc:  # the previous report survives (atomic write)
            raise InputError(f"cannot write the {kind} report to {path}: {exc.reason}") from None
        written[kind] = path
    return written
