"""Reports of a gate result: JUnit XML, Markdown, HTML, JSON and the terminal table.

Reports only read a ``GateResult`` (never a model). ``render(kind, result)`` returns the text
of one report; ``write_reports(result, reports)`` writes every configured one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from faithgate.atomic import atomic_write_text
from faithgate.errors import InputError
from faithgate.result import GateResult

if TYPE_CHECKING:
    from faithgate.config import Reports

KINDS = ("junit", "markdown", "json", "html", "terminal")


def render(kind: str, result: GateResult) -> str:
    """The text of one report kind for ``result``."""
    if kind == "json":
        return json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n"
    if kind == "junit":
        from faithgate.report.junit import to_junit

        return to_junit(result)
    if kind == "markdown":
        from faithgate.report.markdown import to_markdown

        return to_markdown(result)
    if kind == "html":
        from faithgate.report.html import to_html

        return to_html(result)
    if kind == "terminal":
        from faithgate.report.terminal import to_terminal

        return to_terminal(result)
    raise InputError(f"unknown report kind {kind!r}; choose one of: {', '.join(KINDS)}")


def write_reports(result: GateResult, reports: Reports) -> dict[str, Path]:
    """Write each configured report (creating directories); returns kind -> path."""
    written: dict[str, Path] = {}
    for kind, path in reports.items():
        path = Path(path)
        try:
            atomic_write_text(path, render(kind, result))
        except OSError as exc:  # the previous report survives (atomic write)
            raise InputError(f"cannot write the {kind} report to {path}: {exc}") from None
        written[kind] = path
    return written
