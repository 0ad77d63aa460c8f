"""Reports of a gate result: JUnit XML, Markdown, HTML, JSON and the terminal table.

Reports only read a ``GateResult`` (never a model). ``render(kind, result)`` returns the text
of one report; ``write_reports(result, reports)`` writes every configured one (and, with
``baseline``, the new baseline in the same set).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from faithgate.errors import InputError, WriteError
from faithgate.formats import REPORT_FORMATS
from faithgate.result import GateResult
from faithgate.safety.atomic import atomic_write_files
from faithgate.safety.paths import same_file

if TYPE_CHECKING:
    from faithgate.config import Reports

# Every report format, from the registry (``faithgate.formats``).
KINDS = tuple(REPORT_FORMATS)


def to_json(result: GateResult) -> str:
    """The result JSON (also what a baseline holds): strict JSON, a non-finite number as null."""
    return result.json_text(check=False)


def render(kind: str, result: GateResult) -> str:
    """The text of one report kind for ``result`` (its renderer from the registry)."""
    fmt = REPORT_FORMATS.get(kind)
    if fmt is None:
        raise InputError(f"unknown report kind {kind!r}; choose one of: {', '.join(KINDS)}")
    module, attr = fmt.renderer.split(":")
    renderer: Callable[[GateResult], str] = getattr(importlib.import_module(module), attr)
    return renderer(result)


def write_reports(
    result: GateResult, reports: Reports, *, baseline: str | Path | None = None
) -> dict[str, Path]:
    """Write each configured report (creating directories) as one set: all are replaced, or
    (a write failing) none, so no report of this run stands beside another run's; returns
    kind -> path. ``baseline`` (``Gate.baseline_to_write``) joins the set: the result becomes
    the new baseline only when every report is written, and the other way round."""
    # The baseline's text first: ``json_text`` refuses a result ``load`` would refuse (scores
    # of other settings hashes than it records), before any file is written.
    baseline_text = result.json_text() if baseline is not None else None
    texts = {kind: render(kind, result) for kind, _ in reports.items()}
    written = {kind: Path(path) for kind, path in reports.items()}
    files: list[tuple[str | Path, str]] = [(path, texts[kind]) for kind, path in written.items()]
    # A json report at the baseline path is that file, with the same text: written once.
    if baseline_text is not None and not any(same_file(p, baseline) for p in written.values()):
        files.append((baseline, baseline_text))
    try:
        atomic_write_files(files)
    except WriteError as exc:  # every previous report (and the baseline) survives
        raise InputError(_not_written(exc, written, baseline)) from None
    return written


def _not_written(exc: WriteError, written: dict[str, Path], baseline: str | Path | None) -> str:
    """The one line for a report set that could not be written: which file failed, and that
    nothing was replaced (or which files were all the same, where one could not be put back)."""
    if baseline is not None and str(exc.path) == str(baseline):
        what = "the baseline"
    else:
        kind = next((k for k, p in written.items() if str(p) == str(exc.path)), "")
        what = f"the {kind} report"
    if exc.replaced:
        shown = ", ".join(str(p) for p in exc.replaced)
        outcome = f"only {shown} replaced (could not be put back), the rest left unchanged"
    elif what == "the baseline":
        outcome = "it is left unchanged" + (" and no report was written" if written else "")
    else:
        outcome = "no report was written" + (
            " and the baseline is left unchanged" if baseline is not None else ""
        )
    return f"cannot write {what} to {exc.path}: {exc.reason}; {outcome}"
