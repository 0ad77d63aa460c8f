"""Self-contained HTML report: one file, inline CSS and SVG, no scripts or external assets
(it can be attached to a CI run or opened offline).

Sections (each a ``<section id=...>`` so tests and readers can find them): ``verdict`` (badge and
headline numbers), ``rules`` (the rule table), ``distribution`` (a histogram of each metric's
scores with its threshold), ``examples`` (every gated example, failing first, with the least
supported sentence highlighted inside the summary), ``pairs`` (minimal pairs, inconsistent
first) and ``settings`` (settings hash of every metric).
"""

from __future__ import annotations

import math
from html import escape as html_escape

from faithgate.report.format import (
    fmt_against,
    fmt_mean,
    fmt_rate,
    fmt_usage,
    fmt_value,
    rule_limit,
    rule_tally,
)
from faithgate.result import ExampleResult, GateResult, PairResult
from faithgate.safety.escape import printable_lines


def escape(text: str, quote: bool = True) -> str:
    """``html.escape`` of user text after ``printable_lines``: C1 controls and bidi overrides
    (which a browser would apply, reordering what a reader sees) are shown as escapes, as in
    the other reports."""
    return html_escape(printable_lines(text), quote=quote)


MAX_EXAMPLES = 500
MAX_PAIRS = 200

_CSS = """
:root { --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; --muted:#57606a; --line:#d0d7de;
        --bg:#f6f8fa; --mark:#ffebe9; }
* { box-sizing: border-box; }
body { font: 14px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color:#1f2328;
       margin: 0; padding: 24px 32px; max-width: 1200px; }
h1 { font-size: 22px; margin: 0 0 4px; display: flex; align-items: center; gap: 12px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.badge { font-size: 13px; font-weight: 600; color: #fff; padding: 3px 10px; border-radius: 12px; }
.badge.pass { background: var(--ok); } .badge.fail { background: var(--bad); }
.sub { color: var(--muted); margin: 0 0 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 140px;
        background: var(--bg); }
.card .k { color: var(--muted); font-size: 12px; } .card .v { font-size: 20px; font-weight: 600; }
table { border-collapse: collapse; width: 100%; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.fail td:first-child { border-left: 3px solid var(--bad); }
tr.pass td:first-child { border-left: 3px solid var(--ok); }
.pass-t { color: var(--ok); font-weight: 600; } .fail-t { color: var(--bad); font-weight: 600; }
.warn-t { color: var(--warn); font-weight: 600; }
mark { background: #fff8c5; border-bottom: 2px solid #d4a72c; padding: 0 1px; }
tr.fail mark { background: var(--mark); border-bottom-color: var(--bad); }
td:first-child code { white-space: nowrap; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: var(--bg);
       padding: 1px 4px; border-radius: 4px; }
.reason { color: var(--bad); font-size: 13px; margin-top: 4px; }
.hists { display: flex; flex-wrap: wrap; gap: 24px; }
.hist figcaption { font-size: 12px; color: var(--muted); }
.note { color: var(--muted); font-size: 12px; }
"""


def _status(passed: bool) -> str:
    return '<span class="pass-t">pass</span>' if passed else '<span class="fail-t">fail</span>'


def _summary_with_mark(e: ExampleResult) -> str:
    """The summary with its least supported sentence wrapped in ``<mark>``."""
    ls = e.least_supported
    text = e.summary
    if ls is not None and ls.text and ls.text in text:
        start = text.index(ls.text)
        end = start + len(ls.text)
        title = escape(f"least supported ({ls.metric} {ls.value:.3f})", quote=True)
        return (
            escape(text[:start])
            + f'<mark title="{title}">{escape(text[start:end])}</mark>'
            + escape(text[end:])
        )
    return escape(text)


def _histogram(values: list[float], threshold: float | None, metric: str) -> str:
    """An inline SVG histogram (20 bins over the observed range) with the threshold line."""
    w, h, pad = 320, 120, 20
    if not values:
        return f'<p class="note">no scored values for {escape(metric)}</p>'
    lo, hi = min(values), max(values)
    if threshold is not None:
        lo, hi = min(lo, threshold), max(hi, threshold)
    if math.isclose(lo, hi):
        lo, hi = lo - 0.5, hi + 0.5
    bins = 20
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / (hi - lo) * bins))] += 1
    top = max(counts)
    bw = (w - 2 * pad) / bins
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'role="img" aria-label="{escape(metric)} score histogram">',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#8c959f"/>',
    ]
    for i, c in enumerate(counts):
        if not c:
            continue
        bh = (h - 2 * pad) * c / top
        x = pad + i * bw
        mid = lo + (i + 0.5) * (hi - lo) / bins
        fill = "#cf222e" if threshold is not None and mid < threshold else "#2f81f7"
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{h - pad - bh:.1f}" width="{bw - 2:.1f}" '
            f'height="{bh:.1f}" fill="{fill}"><title>{c}</title></rect>'
        )
    if threshold is not None:
        tx = pad + (threshold - lo) / (hi - lo) * (w - 2 * pad)
        parts.append(
            f'<line x1="{tx:.1f}" y1="{pad / 2}" x2="{tx:.1f}" y2="{h - pad}" stroke="#1f2328" '
            f'stroke-dasharray="4 3"/><text x="{tx + 3:.1f}" y="{pad / 2 + 8}" font-size="10">'
            f"threshold {threshold:g}</text>"
        )
    parts.append(
        f'<text x="{pad}" y="{h - 4}" font-size="10" fill="#57606a">{lo:.3g}</text>'
        f'<text x="{w - pad}" y="{h - 4}" font-size="10" fill="#57606a" '
        f'text-anchor="end">{hi:.3g}</text></svg>'
    )
    return "".join(parts)


def _pair_cell(p: PairResult, metric: str) -> str:
    """A pair's faithful / edited scores by ``metric``, coloured by its verdict; a metric the
    pair rule does not judge (``rules.pair_consistency.metrics``) is shown uncoloured and
    labelled, never as a failure."""
    scores = " / ".join(fmt_against(p.faithful_scores.get(metric), p.unfaithful_scores.get(metric)))
    if metric not in p.consistent:
        return f'<td class="num">{scores} (not gated)</td>'
    cls = "pass-t" if p.consistent[metric] else "fail-t"
    return f'<td class="num"><span class="{cls}">{scores}</span></td>'


def _rules_stat(result: GateResult) -> str:
    """The rules card, e.g. "2/3 (1 skipped)": a skipped rule passed without being checked,
    so it is not counted as passing."""
    tally = rule_tally(result)
    text = f"{tally.passed}/{tally.total}"
    return text + (f" ({tally.skipped} skipped)" if tally.skipped else "")


def to_html(result: GateResult) -> str:
    """The HTML report of ``result`` (a complete document)."""
    verdict = result.verdict
    rate = result.pass_rate
    means = result.means()
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>faithgate: {verdict.upper()}</title>",
        f"<style>{_CSS}</style></head><body>",
        '<section id="verdict">',
        f'<h1>faithgate <span class="badge {verdict}">{verdict.upper()}</span></h1>',
        f'<p class="sub">{escape(result.input or "")} · {escape(result.created)} · '
        f"faithgate {escape(result.faithgate_version)}</p>",
        '<div class="cards">',
        f'<div class="card"><div class="k">examples passing</div><div class="v">'
        f"{result.n_passed}/{result.n_examples}"
        + (f" ({fmt_rate(rate, rule_limit(result, 'pass_rate'))})" if rate is not None else "")
        + "</div></div>",
        f'<div class="card"><div class="k">rules passing</div><div class="v">'
        f"{_rules_stat(result)}</div></div>",
    ]
    for m, v in means.items():
        out.append(
            f'<div class="card"><div class="k">mean {escape(m)}</div>'
            f'<div class="v">{fmt_mean(result, m, v)}</div></div>'
        )
    if result.pairs:
        out.append(
            f'<div class="card"><div class="k">minimal pairs</div>'
            f'<div class="v">{len(result.pairs)}</div></div>'
        )
    out.append("</div></section>")

    out.append('<section id="rules"><h2>Rules</h2><table><thead><tr>')
    out.append("<th>Rule</th><th>Value</th><th>Limit</th><th>Result</th><th>Detail</th>")
    out.append("</tr></thead><tbody>")
    for r in result.rules:
        value, limit = fmt_against(r.value, r.limit)
        out.append(
            f'<tr class="{"pass" if r.passed else "fail"}"><td><code>{escape(r.name)}</code></td>'
            f'<td class="num">{value}</td><td class="num">{limit}</td>'
            f"<td>{'skipped' if r.skipped else _status(r.passed)}</td>"
            f"<td>{escape(r.message)}</td></tr>"
        )
    out.append("</tbody></table></section>")

    out.append('<section id="distribution"><h2>Score distribution</h2><div class="hists">')
    for m in result.metrics:
        values = list(result.values(m).values())
        out.append(
            f'<figure class="hist">{_histogram(values, result.thresholds.get(m), m)}'
            f"<figcaption>{escape(m)}: {len(values)} scored examples"
            + (
                f"; red bars are below the threshold {result.thresholds[m]:g}"
                if m in result.thresholds
                else ""
            )
            + "</figcaption></figure>"
        )
    out.append("</div></section>")

    outputs = sorted(result.outputs, key=lambda e: (e.passed, e.margin()))
    out.append(f'<section id="examples"><h2>Examples ({len(outputs)})</h2>')
    out.append(
        '<p class="note">Failing examples first; the least supported sentence is '
        "<mark>highlighted</mark>.</p>"
    )
    out.append("<table><thead><tr><th>Example</th>")
    out.extend(f"<th>{escape(m)}</th>" for m in result.metrics)
    out.append("<th>Result</th><th>Summary</th></tr></thead><tbody>")
    for e in outputs[:MAX_EXAMPLES]:
        cells = []
        for m in result.metrics:
            s = e.scores.get(m)
            if s is None or s.value is None:
                why = escape(s.error if s and s.error else "not scored", quote=True)
                cells.append(
                    f'<td class="num"><span class="warn-t" title="{why}">unscored</span></td>'
                )
            else:
                cls = "" if s.passed else ' class="fail-t"'
                value = fmt_against(s.value, s.threshold)[0]
                cells.append(f'<td class="num"><span{cls}>{value}</span></td>')
        reason = f'<div class="reason">{escape(e.message)}</div>' if not e.passed else ""
        out.append(
            f'<tr class="{"pass" if e.passed else "fail"}" data-id="{escape(e.id, quote=True)}">'
            f"<td><code>{escape(e.id)}</code></td>{''.join(cells)}<td>{_status(e.passed)}</td>"
            f"<td>{_summary_with_mark(e)}{reason}</td></tr>"
        )
    out.append("</tbody></table>")
    if len(outputs) > MAX_EXAMPLES:
        out.append(
            f'<p class="note">{len(outputs) - MAX_EXAMPLES} more examples not shown '
            "(see the JSON report).</p>"
        )
    out.append("</section>")

    if result.pairs:
        pairs = sorted(result.pairs, key=lambda p: all(p.consistent.values()))
        out.append(f'<section id="pairs"><h2>Minimal pairs ({len(pairs)})</h2>')
        out.append("<table><thead><tr><th>Pair</th><th>Error type</th>")
        out.extend(f"<th>{escape(m)}: faithful / edited</th>" for m in result.metrics)
        out.append("<th>Edit</th><th>Edited summary</th></tr></thead><tbody>")
        for p in pairs[:MAX_PAIRS]:
            ok = all(p.consistent.values())
            cells = "".join(_pair_cell(p, m) for m in result.metrics)
            origin = " (generated)" if p.generated else ""
            out.append(
                f'<tr class="{"pass" if ok else "fail"}"><td><code>{escape(p.pair_id)}</code>'
                f"{origin}</td><td>{escape(p.error_type or '-')}</td>{cells}"
                f"<td><code>{escape(p.edit)}</code></td><td>{escape(p.unfaithful_summary)}</td></tr>"
            )
        out.append("</tbody></table></section>")

    out.append(
        '<section id="settings"><h2>Settings</h2><table><thead><tr><th>Metric</th>'
        "<th>Settings hash</th><th>Threshold</th></tr></thead><tbody>"
    )
    for m in result.metrics:
        thr = result.thresholds.get(m)
        out.append(
            f"<tr><td>{escape(m)}</td><td><code>{escape(result.settings_hashes.get(m, '?'))}"
            f'</code></td><td class="num">{fmt_value(thr)}</td></tr>'
        )
    out.append("</tbody></table>")
    if result.cache or result.seconds is not None:
        bits = []
        if result.seconds is not None:
            bits.append(f"{result.seconds:.2f} s")
        if result.cache:
            bits.append(
                f"score cache: {result.cache.get('hits', 0)} hits, "
                f"{result.cache.get('misses', 0)} misses"
            )
        out.append(f'<p class="note">{escape(" · ".join(bits))}</p>')
    for metric, counters in result.usage.items():  # what a paid model cost this run
        out.append(f'<p class="note">{escape(f"{metric} usage: {fmt_usage(counters)}")}</p>')
    out.append("</section></body></html>")
    return "\n".join(out) + "\n"
