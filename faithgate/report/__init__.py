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

from faithgate.atomic import atomic_write_files
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
    """Write each configured report (creating directories) as one set: all are replaced, or
    (a write failing) none, so no report of this run stands beside another run's; returns
    kind -> path."""
    texts = {kind: render(kind, result) for kind, _ in reports.items()}
    written = {kind: Path(path) for kind, path in reports.items()}
    try:
        atomic_write_files([(path, texts[kind]) for kind, path in written.items()])
    except WriteError as exc:  # every previous report survives
        kind = next((k for k, p in written.items() if str(p) == str(exc.path)), "")
        raise InputError(
            f"cannot write the {kind} report to {exc.path}: {exc.reason}; no report was written"
        ) from None
    return written
