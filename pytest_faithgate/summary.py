"""The ``faithgate`` section of pytest's terminal summary (controller / single process only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from faithgate.safety.escape import safe_line


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return safe_line(value)  # test ids and names can carry user text


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A plain left-aligned text table (no dependencies, stable for tests to parse)."""
    cells = [list(header)] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def check_rows(checks: Sequence[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for c in checks:
        if c.get("error"):
            verdict = "ERROR"
        elif c.get("passed") is None:
            verdict = "-"
        else:
            verdict = "PASS" if c["passed"] else "FAIL"
        rows.append([c["test"], c["check"], c["metric"], c["value"], c["limit"], verdict])
    return rows


def write_terminal_summary(
    tr: Any,
    checks: Sequence[dict[str, Any]],
    gates: Sequence[dict[str, Any]],
    render_gate: Callable[[dict[str, Any]], list[str]],
    logged: Sequence[str] = (),
) -> None:
    """Write the gate tables, the faithgate log warnings (escaped lines) and the fixture
    checks table; nothing when there is none of them."""
    if not checks and not gates and not logged:
        return
    tr.write_sep("=", "faithgate")
    for gate in gates:
        for line in render_gate(gate):
            tr.write_line(line)
        tr.write_line("")
    if logged:
        for line in logged:
            tr.write_line(line)
        tr.write_line("")
    if checks:
        # xdist delivers reports in completion order; sort by test id (stable within a test).
        checks = sorted(checks, key=lambda c: c["test"])
        failed = sum(1 for c in checks if c.get("passed") is False)
        tr.write_line(f"fixture checks: {len(checks)}, failed: {failed}")
        header = ("test", "check", "metric", "value", "limit", "verdict")
        for line in format_table(header, check_rows(checks)):
            tr.write_line(line)
