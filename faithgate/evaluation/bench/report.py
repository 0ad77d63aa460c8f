"""The Markdown tables of a bench result, and the result made ready for JSON."""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

import numpy as np

from faithgate.safety.escape import markdown_literal


def _f(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}"


def _with_ci(value: Any, ci: Any, group: Mapping[str, Any] | None = None, stat: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if group is not None and stat in group.get("ci_n_too_small", ()):
        return f"{_f(value)} [n too small]"  # not a degenerate [1.00, 1.00]
    if not ci or ci[0] is None:
        return _f(value)
    return f"{_f(value)} [{_outward(ci[0], False)}, {_outward(ci[1], True)}]"


def _outward(bound: Any, up: bool, digits: int = 3) -> str:
    """A CI bound with the estimate's decimals, rounded outward (the lower end down, the upper
    up), so the shown interval holds the shown estimate and the unrounded interval."""
    if bound is None or (isinstance(bound, float) and math.isnan(bound)):
        return _f(bound, digits)
    rounding = ROUND_CEILING if up else ROUND_FLOOR
    return str(Decimal(repr(float(bound))).quantize(Decimal(1).scaleb(-digits), rounding))


def _stat(group: Mapping[str, Any], stat: str) -> str:
    """A statistic of ``group`` with its interval (``_with_ci``)."""
    return _with_ci(group.get(stat), group.get(f"{stat}_ci95"), group, stat)


def _md(text: Any) -> str:
    """User text (file, error type, origin names) as one literal Markdown table cell
    (``markdown_literal``, as ``check``'s report): no HTML, link, image, mention or code span
    of a user's making renders where the table is pasted (a job summary, a PR comment)."""
    return markdown_literal(text, keep_underscores=True)


def _n_cell(o: Mapping[str, Any]) -> str:
    """The n behind a row's figures, compact: distinct scored items behind ROC AUC (else the
    graded items behind the correlations, else rows), then what it leaves out, e.g. ``785
    distinct (1386 rows)``, ``470 (474 rows, 4 failed)``, ``1244 distinct (1268 rows, 1
    conflicting)``, ``1244 distinct (1268 rows, 3 conflicting, 3 conflicting pairs)``."""
    if "n_roc_auc" in o:
        n = o["n_roc_auc"]
        text = f"{n}" + (" distinct" if o.get("n_distinct", o["n"]) != o["n"] else "")
        failed = o.get("n_distinct_failed", 0)
    elif "n_graded" in o:
        n, text, failed = o["n_graded"], f"{o['n_graded']}", o.get("n_failed", 0)
    else:
        n, text, failed = o["n"], f"{o['n']}", o.get("n_failed", 0)
    parts = [f"{o['n']} rows"] if n != o["n"] else []
    if failed:
        parts.append(f"{failed} failed")
    if o.get("n_conflicting"):
        parts.append(f"{o['n_conflicting']} conflicting")
    if o.get("n_pairs_conflicting"):  # pairs of one text labelled both ways: not in consistency
        parts.append(f"{o['n_pairs_conflicting']} conflicting pairs")
    return text + (f" ({', '.join(parts)})" if parts else "")


def _metric_cell(name: str, m: Mapping[str, Any]) -> str:
    """A metric's name; a combination scored on its own training file is marked in-sample."""
    return _md(name) + (" (in-sample)" if m.get("in_sample") else "")


def markdown_report(result: Mapping[str, Any]) -> str:
    """Main table (one row per dataset x metric) plus breakdowns by error type and origin."""
    lines = [
        "| dataset | metric | n | consistency [95% CI] | ROC AUC [95% CI] "
        "| bal. acc., test half [95% CI] "
        "| Pearson | Spearman | Kendall | s/item |",
        "|---|---|---:|---|---|---|---:|---:|---:|---:|",
    ]
    by_type: list[str] = []
    by_origin: list[str] = []
    for dname, entry in result["datasets"].items():
        for mname, m in entry["metrics"].items():
            o = m["overall"]
            metric = _metric_cell(mname, m)
            lines.append(
                f"| {_md(dname)} | {metric} | {_n_cell(o)} | {_stat(o, 'consistency')} "
                f"| {_stat(o, 'roc_auc')} "
                f"| {_stat(o, 'balanced_accuracy')} "
                f"| {_f(o.get('pearson'))} | {_f(o.get('spearman'))} | {_f(o.get('kendall'))} "
                f"| {_f(m.get('seconds_per_item'), 4)} |"
            )
            for t, g in m.get("by_error_type", {}).items():
                by_type.append(
                    f"| {_md(dname)} | {_md(t)} | {metric} "
                    f"| {g.get('n_pairs', g.get('n_roc_auc', g['n']))} "
                    f"| {_stat(g, 'consistency')} "
                    f"| {_stat(g, 'roc_auc')} |"
                )
            for origin, g in m.get("by_origin", {}).items():
                by_origin.append(
                    f"| {_md(dname)} | {_md(origin)} | {metric} "
                    f"| {g.get('n_roc_auc', g.get('n_graded', g['n']))} "
                    f"| {_stat(g, 'roc_auc')} "
                    f"| {_f(g.get('pearson'))} | {_f(g.get('spearman'))} | {_f(g.get('kendall'))} |"
                )
    if by_type:
        lines += [
            "",
            "By error type (pairs for paired data, else items):",
            "",
            "| dataset | error type | metric | pairs / n | consistency [95% CI] | ROC AUC [95% CI] |",
            "|---|---|---|---:|---|---|",
            *by_type,
        ]
    if by_origin:
        lines += [
            "",
            "By origin:",
            "",
            "| dataset | origin | metric | n | ROC AUC [95% CI] | Pearson | Spearman | Kendall |",
            "|---|---|---|---:|---|---:|---:|---:|",
            *by_origin,
        ]
    comparisons = [
        f"| {_md(d)} | {c['statistic']} | {_md(c['a'])} | {_md(c['b'])} | {c.get('n', '–')} "
        f"| {c['difference']:+.3f} | {c['p_value']:.4f} |"
        for d, entry in result["datasets"].items()
        for c in entry.get("comparisons", [])
    ]
    if comparisons:
        lines += [
            "",
            "Paired permutation tests (best metric vs each other one; consistency over every "
            "pair, an unscored member failing; ROC AUC over the n distinct items every compared "
            "metric scored):",
            "",
            "| dataset | statistic | best | other | n | difference | p |",
            "|---|---|---|---|---:|---:|---:|",
            *comparisons,
        ]
    comb = result.get("combination")
    if comb:
        terms = ", ".join(
            f"{_md(m)}: {w:+.3f}" for m, w in zip(comb["metrics"], comb["coef"], strict=True)
        )
        lines += [
            "",
            f"Combination fitted on {_md(comb['trained_on'])} (n={comb['n_train']}, "
            f"C={comb['C']}, "
            f"{comb['cv_folds']}-fold CV ROC AUC {comb['cv_roc_auc']:.3f}); standardised "
            f"weights: {terms}.",
        ]
        if any(
            m.get("in_sample")
            for entry in result["datasets"].values()
            for m in entry["metrics"].values()
        ):
            lines.append(
                "Rows marked combined (in-sample) are its training file: their figures are "
                "in-sample (the cross-validated ROC AUC above is not), and it is left out of "
                "that file's permutation tests."
            )
    return "\n".join(lines)


def json_ready(obj: Any) -> Any:
    """NaN -> None and numpy -> Python, recursively (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_ready(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    return obj
