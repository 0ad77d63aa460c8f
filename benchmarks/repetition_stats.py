"""How the ``repetition`` metric is distributed over summaries judged faithful, and what it
gives the degenerate summaries of docs/metrics/harim.md (the figures of
docs/metrics/repetition.md).

    python benchmarks/repetition_stats.py [--data ../shared/data] [--n 4]

Per file of the shared data: the distinct (source, summary) rows labelled faithful (label 1:
BUMP's references, Falke 2019's correct sentences, the other sets' system summaries judged
consistent), scored by the metric itself; min, 1st and 5th percentile (numpy's linear
interpolation), median, and how many score below 0.9 and 0.8. The same for the unfaithful
rows (label 0), for comparison; and on Polytope, whose annotators marked duplicated content
(``meta.error_subtypes`` has ``Duplication``), how many of the distinct summaries with and
without that mark score below each floor. Model-free, a few seconds. Nothing is fitted: the data is
evaluation data. Prints Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.types import Example

FILES = (
    "bump_task1",
    "cogensumm",
    "factcc_subset",
    "falke2019",
    "polytope",
    "qags",
    "summeval",
)
# docs/metrics/harim.md, "Limits: repetition and degenerate output score high"
UNFAITHFUL = "The actor was arrested in New York."
DEGENERATE = (
    ('"The actor died in Connecticut." (faithful)', "The actor died in Connecticut."),
    (f'"{UNFAITHFUL}"', UNFAITHFUL),
    ("the same unfaithful sentence 8 times", " ".join([UNFAITHFUL] * 8)),
    ('"the " 100 times', "the " * 100),
)


def data_dir(arg: str | None) -> Path:
    """``--data``, else ``$FAITHGATE_SHARED_DATA``, else ``../shared/data`` beside the repo."""
    env = os.environ.get("FAITHGATE_SHARED_DATA")
    return Path(arg or env or Path(__file__).resolve().parents[2] / "shared" / "data")


def values(metric, rows: list[dict]) -> tuple[np.ndarray, int]:
    """Scores of the distinct (source, summary) rows, and how many failed."""
    distinct = list({(r["source"], r["summary"]): r for r in rows}.values())
    examples = [Example(str(r["id"]), r["source"], r["summary"]) for r in distinct]
    scores = metric.score_batch(examples, ScoringContext())
    ok = [s.value for s in scores if s.ok]
    return np.array(ok), len(scores) - len(ok)


def row(name: str, v: np.ndarray, failed: int) -> str:
    p1, p5, median = np.percentile(v, [1, 5, 50])
    below = [int((v < t).sum()) for t in (0.9, 0.8)]
    share = [f"{b} ({b / len(v):.1%})" for b in below]
    return (
        f"| {name} | {len(v)} | {failed} | {v.min():.3f} | {p1:.3f} | {p5:.3f} | {median:.3f} "
        f"| {share[0]} | {share[1]} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="shared data directory (default: ../shared/data)")
    ap.add_argument("--n", type=int, default=4, help="the metric's n (default 4)")
    args = ap.parse_args()
    root = data_dir(args.data)
    metric = get_metric("repetition", n=args.n)
    header = (
        "| file | rows | failed | min | p1 | p5 | median | below 0.9 | below 0.8 |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for label, title in ((1, "faithful (label 1)"), (0, "unfaithful (label 0)")):
        print(f"\n`repetition` (n = {args.n}), distinct {title} summaries\n\n{header}")
        pooled, pooled_failed = [], 0
        for name in FILES:
            path = root / f"{name}.jsonl"
            if not path.is_file():
                print(f"| {name} | not found under {root} |||||||")
                continue
            with path.open(encoding="utf-8") as f:
                rows = [json.loads(x) for x in f if x.strip()]
            v, failed = values(metric, [r for r in rows if r.get("label") == label])
            print(row(name, v, failed))
            pooled.append(v)
            pooled_failed += failed
        if pooled:
            print(row("all files", np.concatenate(pooled), pooled_failed))
    polytope = root / "polytope.jsonl"
    if polytope.is_file():
        print(
            f"\nPolytope, all distinct summaries, by the annotators' `Duplication` mark "
            f"(n = {args.n})\n\n| floor | marked: below | not marked: below |\n|---|---:|---:|"
        )
        with polytope.open(encoding="utf-8") as f:
            rows = [json.loads(x) for x in f if x.strip()]
        rows = list({(r["source"], r["summary"]): r for r in rows}.values())
        marked, others = [], []
        for r in rows:
            mark = "Duplication" in (r.get("meta") or {}).get("error_subtypes", [])
            (marked if mark else others).append(r)
        v_marked, v_others = values(metric, marked)[0], values(metric, others)[0]
        for floor in (0.9, 0.8):
            print(
                f"| {floor} | {(v_marked < floor).sum()} of {len(v_marked)} "
                f"| {(v_others < floor).sum()} of {len(v_others)} |"
            )
    print(f"\nDegenerate summaries (n = {args.n})\n\n| summary | `repetition` | most repeated |")
    print("|---|---:|---|")
    ctx = ScoringContext()
    for title, summary in DEGENERATE:
        score = metric.score_batch([Example("d", "unused", summary)], ctx)[0]
        top = score.details.get("most_repeated")
        most = f'"{top["ngram"]}" x {top["count"]}' if top else "-"
        print(f"| {title} | {score.value:.3f} | {most} |")


if __name__ == "__main__":
    main()
