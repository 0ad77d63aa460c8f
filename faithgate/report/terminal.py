"""Terminal report: the verdict, the rule table and the failing examples, as plain text.
(The progress bar shown while a long run scores is ``faithgate.progress``.)"""

from __future__ import annotations

import shutil
from typing import Any

from faithgate.progress import progress_bar  # noqa: F401 - re-exported for older imports
from faithgate.report.format import (
    MAX_COLUMNS,
    fmt_against,
    fmt_mean,
    fmt_rate,
    fmt_usage,
    one_line,
    rule_limit,
    rule_tally,
)
from faithgate.result import GateResult
from faithgate.safety.escape import clipped, defuse_workflow_commands, printable


def _table(headers: list[str], rows: list[list[str]], width: int | None = None) -> list[str]:
    """A plain table; with ``width``, the last column is wrapped at word boundaries so that
    no line is longer (its continuation lines start under it), never cut."""
    import textwrap

    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    start = sum(w + 2 for w in widths[:-1])
    if width is not None and start + widths[-1] > width:
        widths[-1] = max(len(headers[-1]), width - start, 20)
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line.rstrip(), "  ".join("-" * w for w in widths)]
    for r in rows:
        last = textwrap.wrap(r[-1], widths[-1], break_on_hyphens=False) or [""]
        cells = [*r[:-1], last[0]]
        out.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
        out.extend(" " * start + more for more in last[1:])
    return out


def headline(result: GateResult) -> str:
    """The verdict line: a failing gate names its failed rules first (the pass count alone can
    read "FAIL: 6/6 examples pass"), a passing one says how many rules it checked and which
    were skipped. Escaped for the terminal (``printable``, ``defuse_workflow_commands``)."""
    failed, skipped = result.failed_rules, result.skipped_rules
    tally = rule_tally(result)
    if failed:
        names = ", ".join(printable(r.name) for r in failed[:4])
        more = f" and {len(failed) - 4} more" if len(failed) > 4 else ""
        head = f"FAIL: {tally.failed} of {tally.total} rules failed ({names}{more})"
    else:
        head = f"PASS: {tally.passed} of {tally.total} rules pass"
        if skipped:
            head += f", {tally.skipped} skipped ({', '.join(printable(r.name) for r in skipped)})"
    rate = result.pass_rate
    stats = f"{result.n_passed}/{result.n_examples} examples pass" + (
        f" ({fmt_rate(rate, rule_limit(result, 'pass_rate'))})" if rate is not None else ""
    )
    # Metric names come from installed plugins (entry points): escaped as any other text.
    means = ", ".join(f"{printable(m)} {fmt_mean(result, m, v)}" for m, v in result.means().items())
    line = f"faithgate: {head}; {stats}" + (f"; mean {means}" if means else "")
    return defuse_workflow_commands(line)


def _pair_lines(result: GateResult, max_pairs: int) -> list[str]:
    """The inconsistent minimal pairs, worst first (largest score drop the wrong way)."""
    bad = [p for p in result.pairs if not all(p.consistent.values())]
    if not bad:
        return []

    def wrongness(p: Any) -> float:
        # How far the edited summary outscored the faithful one (unscored pairs first).
        gaps = []
        for m, ok in p.consistent.items():
            g, u = p.faithful_scores.get(m), p.unfaithful_scores.get(m)
            if not ok:
                gaps.append(float("inf") if g is None or u is None else u - g)
        return max(gaps) if gaps else 0.0

    bad.sort(key=wrongness, reverse=True)
    lines = ["", f"inconsistent minimal pairs ({len(bad)} of {len(result.pairs)}, worst first):"]
    for p in bad[:max_pairs]:
        scores = ", ".join(
            "{} {} faithful vs {} edited".format(
                printable(m), *fmt_against(p.faithful_scores.get(m), p.unfaithful_scores.get(m))
            )
            for m in result.metrics
            if p.consistent.get(m) is False  # a metric the pair rule does not judge: not listed
        )
        kind = f" [{printable(p.error_type)}]" if p.error_type else ""
        lines.append(f"  {printable(p.pair_id)}{kind}: {scores}")
        lines.append(f"      edit: {one_line(p.edit or p.unfaithful_summary, 200)}")
    if len(bad) > max_pairs:
        lines.append(f"  ... and {len(bad) - max_pairs} more")
    return lines


def to_terminal(
    result: GateResult, max_examples: int = 10, width: int | None = None, max_pairs: int = 5
) -> str:
    """Plain-text report for a terminal (no colour codes, so it is also fine in CI logs).

    User text (ids, messages, sentences) goes through ``printable`` and the whole block through
    ``defuse_workflow_commands``: nothing in an output file can forge a line, an escape
    sequence or a GitHub workflow command."""
    if width is None:
        width = min(MAX_COLUMNS, max(80, shutil.get_terminal_size((120, 24)).columns))
    lines: list[str] = [headline(result), ""]
    rows = [
        [
            printable(r.name),
            *fmt_against(r.value, r.limit),
            ("SKIP" if r.skipped else "PASS") if r.passed else "FAIL",
            one_line(r.message, 400),  # wrapped by the table, whole
        ]
        for r in result.rules
    ]
    lines.extend(_table(["rule", "value", "limit", "result", "detail"], rows, width))
    if result.failed_rules:
        # The table cuts long details; failing rules are what a reader needs in full.
        lines.append("")
        lines.append("failing rules:")
        for r in result.failed_rules:
            lines.append(f"  {printable(r.name)}: {one_line(r.message, 400)}")
    if result.skipped_rules:
        lines.append("")
        lines.append("skipped rules (passed without being checked):")
        for r in result.skipped_rules:
            lines.append(f"  {printable(r.name)}: {one_line(r.message, 400)}")
    lines.extend(_pair_lines(result, max_pairs))
    failed = result.failed_examples
    if failed:
        lines.append("")
        lines.append(f"failing examples ({len(failed)}):")
        for ex in failed[:max_examples]:
            # In full (up to 400 characters): the sentence named is the point of the line.
            lines.append(f"  {clipped(ex.id)}: {one_line(ex.message, 400)}")
        if len(failed) > max_examples:
            lines.append(f"  ... and {len(failed) - max_examples} more")
    if result.cache:
        hits, misses = result.cache.get("hits", 0), result.cache.get("misses", 0)
        lines.append("")
        lines.append(
            f"score cache: {hits} hits, {misses} misses"
            + (f"; {result.seconds:.2f} s" if result.seconds is not None else "")
        )
    if result.usage:  # a metric that calls a paid model says what this run cost
        lines.append("")
        lines.append("usage (this run):")
        for metric, counters in result.usage.items():
            lines.append(f"  {printable(metric)}: {fmt_usage(counters)}")
    # The rule table fits ``width`` (its details wrapped whole); the verdict line and the
    # lists of failing rules, skipped rules and failing examples keep one line per item, in
    # full, for the CI logs and scripts that grep them.
    return defuse_workflow_commands("\n".join(lines)) + "\n"
