"""Markdown report: for a pull-request comment or a GitHub job summary.

A verdict line, the rule table, the worst examples (with their least supported sentence) and
the settings hash of every metric, so a reader can tell which scores are comparable.
"""

from __future__ import annotations

import re

from faithgate.report.format import (
    RuleTally,
    fmt_against,
    fmt_mean,
    fmt_rate,
    fmt_usage,
    fmt_value,
    one_line,
    rule_limit,
    rule_tally,
)
from faithgate.result import GateResult
from faithgate.safety.escape import clipped, markdown_literal


def _cell(text: str, limit: int = 200) -> str:
    """User text as literal Markdown in one table cell: whitespace collapsed (a newline ends
    the row), then ``markdown_literal``."""
    return markdown_literal(one_line(text, limit))


def _code(text: str, limit: int = 200, *, table: bool) -> str:
    """User text as an inline code span: fenced by more backticks than any run inside it (so
    it cannot close the span), padded when it starts or ends with one. Inside a code span
    nothing is formatted, entities are not decoded and backslash escapes do not work, so a
    pipe is escaped only in a table cell (``table``: GFM removes the backslash of ``\\|``
    before it reads the span); anywhere else the backslash would show. Names (ids, rules,
    metrics, paths) are not whitespace-collapsed: a line break or tab is shown as an escape
    (``clipped``), so ids "a\\nb" and "a b" stay two."""
    text = clipped(text, limit)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    escaped = text.replace("|", "\\|") if table else text
    return f"{fence}{pad}{escaped}{pad}{fence}"


def _rules_stat(tally: RuleTally) -> str:
    """The rules count, e.g. "**2/3** rules pass, 1 skipped": a skipped rule is not counted
    as passing."""
    text = f"**{tally.passed}/{tally.total}** rules pass"
    return text + (f", {tally.skipped} skipped" if tally.skipped else "")


def to_markdown(result: GateResult, max_examples: int = 10) -> str:
    """The Markdown report of ``result``."""
    icon = "✅" if result.passed else "❌"
    rate = result.pass_rate
    failed = ", ".join(_code(r.name, 80, table=False) for r in result.failed_rules)
    # The heading names what failed: the pass count alone can read "FAIL: 6/6 examples pass".
    out = [
        f"## {icon} faithgate: {result.verdict.upper()}" + (f" ({failed})" if failed else ""),
        "",
    ]
    stats = [
        f"**{result.n_passed}/{result.n_examples}** examples pass"
        + (f" ({fmt_rate(rate, rule_limit(result, 'pass_rate'))})" if rate is not None else ""),
        _rules_stat(rule_tally(result)),
    ]
    means = result.means()
    if means:
        stats.append(
            "mean "
            + ", ".join(
                f"{_code(m, table=False)} {fmt_mean(result, m, v)}" for m, v in means.items()
            )
        )
    if result.pairs:
        stats.append(f"{len(result.pairs)} minimal pairs")
    out.append(" · ".join(stats))
    out.append("")
    out.append("| Rule | Value | Limit | Result | Detail |")
    out.append("|---|---:|---:|:---:|---|")
    for r in result.rules:
        value, limit = fmt_against(r.value, r.limit)
        out.append(
            f"| {_code(r.name, table=True)} | {value} | {limit} | "
            f"{('⚠️ skipped' if r.skipped else '✅ pass') if r.passed else '❌ fail'} | "
            f"{_cell(r.message)} |"
        )
    worst = [e for e in result.worst_examples(max_examples) if not e.passed]
    if not worst:
        worst = result.worst_examples(min(3, max_examples))
        title = "Lowest-scoring examples"
    else:
        title = f"Failing examples ({len(result.failed_examples)})"
    if worst:
        out += ["", f"### {title}", ""]
        metric_cols = " | ".join(_code(m, table=True) for m in result.metrics)
        out.append(f"| Example | {metric_cols} | Result | Least supported sentence |")
        out.append("|---|" + "---:|" * len(result.metrics) + ":---:|---|")
        for e in worst:
            vals = []
            for m in result.metrics:
                s = e.scores.get(m)
                if s is None or s.value is None:
                    vals.append("⚠️ unscored")
                else:
                    mark = "" if s.passed else " ❌"
                    value, threshold = fmt_against(s.value, s.threshold)
                    if not s.passed and s.baseline is not None and s.threshold is not None:
                        # Held to its own threshold: say which, and the last release's score.
                        mark += f" < {threshold} (baseline {fmt_value(s.baseline)})"
                    vals.append(value + mark)
            ls = e.least_supported
            if ls is not None:
                sentence = f"“{_cell(ls.text, 160)}” ({_cell(ls.metric)} {fmt_value(ls.value, 3)})"
            elif not e.passed:
                sentence = _cell(e.message, 160)
            else:
                sentence = ""
            out.append(
                f"| {_code(e.id, 60, table=True)} | {' | '.join(vals)} | "
                f"{'✅' if e.passed else '❌'} | {sentence} |"
            )
        if len(result.failed_examples) > len(worst) and not worst[0].passed:
            out.append("")
            out.append(f"… and {len(result.failed_examples) - len(worst)} more failing examples.")
    bad_pairs = [p for p in result.pairs if not all(p.consistent.values())]
    if bad_pairs:
        out += ["", f"### Inconsistent minimal pairs ({len(bad_pairs)} of {len(result.pairs)})", ""]
        out.append("| Pair | Error type | Faithful vs edited score | Edit |")
        out.append("|---|---|---|---|")
        for p in bad_pairs[:max_examples]:
            verdicts = ", ".join(
                "{} {} vs {}".format(
                    _code(m, table=True),
                    *fmt_against(p.faithful_scores.get(m), p.unfaithful_scores.get(m)),
                )
                for m in result.metrics
                if p.consistent.get(m) is False  # a metric the pair rule does not judge: not listed
            )
            out.append(
                f"| {_code(p.pair_id, 60, table=True)} | {_cell(p.error_type or '-')} | {verdicts} | "
                f"{_cell(p.edit or p.unfaithful_summary, 140)} |"
            )
    out += ["", "<details><summary>Settings</summary>", ""]
    for m in result.metrics:
        thr = result.thresholds.get(m)
        out.append(
            f"- {_code(m, table=False)}: settings hash "
            f"{_code(result.settings_hashes.get(m, '?'), table=False)}"
            + (f", threshold {thr:g}" if thr is not None else "")
        )
    extra = []
    if result.input:
        extra.append(f"input {_code(result.input, 300, table=False)}")
    if result.seconds is not None:
        extra.append(f"{result.seconds:.2f} s")
    if result.cache:
        extra.append(
            f"score cache {result.cache.get('hits', 0)} hits / {result.cache.get('misses', 0)} misses"
        )
    if extra:
        out.append("- " + ", ".join(extra))
    for metric, counters in result.usage.items():  # what a paid model cost this run
        usage = fmt_usage(counters, escape=markdown_literal)
        out.append(f"- {_code(metric, table=False)} usage: {usage}")
    out.append(f"- faithgate {result.faithgate_version}, {result.created}")
    out += ["", "</details>", ""]
    return "\n".join(out)
