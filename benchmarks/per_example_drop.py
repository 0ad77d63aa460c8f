"""Per-example baseline thresholds on BUMP task 1: how many one-edit outputs would fail.

``rules.regression.per_example_drop`` holds an output that minimally edits the last release's
output to its own threshold, ``baseline score - drop``. On BUMP's minimal pairs the reference
plays the last release and its edit the new output; for each metric and drop this prints the
share of edits that would fail (score below reference - drop: the detection rate), the share of
pairs the rule would compare at all (at most ``--max-changed-words`` words changed) and, for
reference, pooled ROC AUC (what one threshold for every article achieves).

Scores come from ``faithgate bench``'s score cache (computed on a miss), so running
``faithgate bench --data .../bump_task1.jsonl --metric M`` first makes this instant.

    python benchmarks/per_example_drop.py --metric harim_plus --drop harim_plus=0.01,0.05,0.1 \
        --metric bertscore --drop bertscore=0.005,0.01,0.02 --backend torch

BUMP is evaluation data: nothing here chooses a drop; the example project's 0.05 for
``harim_plus`` was set before these figures (a few hundredths of a nat per token, well above
the zero drift of a deterministic rescoring). Prints Markdown.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from bump_data import data_dir, load_pairs
from sklearn.metrics import roc_auc_score

from faithgate.evaluation.bench.scoring import Bench
from faithgate.gate.pairs import changed_words
from faithgate.types import Example


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="directory holding bump_task1.jsonl")
    ap.add_argument("--metric", action="append", required=True)
    ap.add_argument(
        "--drop", action="append", default=[], help="METRIC=D1,D2,... (default 0,0.01,0.05)"
    )
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--max-changed-words", type=int, default=6)
    ap.add_argument("--limit", type=int, default=None, help="first N pairs")
    args = ap.parse_args(argv)

    drops = {m: [0.0, 0.01, 0.05] for m in args.metric}
    for spec in args.drop:
        name, _, values = spec.partition("=")
        drops[name] = [float(x) for x in values.split(",")]
    pairs = load_pairs(data_dir(args.data), args.limit)
    examples = [
        Example(f"{ref['pair_id']}:{role}", row["source"], row["summary"])
        for ref, edit in pairs
        for role, row in (("reference", ref), ("edited", edit))
    ]
    runs = Bench(args.metric, backend=args.backend, progress=True).score(examples)
    compared = np.array(
        [changed_words(r["summary"], e["summary"]) <= args.max_changed_words for r, e in pairs]
    )
    print(
        f"BUMP task 1: {len(pairs)} minimal pairs; {compared.mean():.1%} of edits change at "
        f"most {args.max_changed_words} words (compared per example)\n"
    )
    print(
        "| metric | settings | pooled ROC AUC | drop | edits failing (all pairs) | "
        "edits failing (compared pairs) |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for m in args.metric:
        run = runs[m]
        values = run.scores.reshape(-1, 2)
        ref, edit = values[:, 0], values[:, 1]
        ok = np.isfinite(ref) & np.isfinite(edit)
        # Pooled AUC over distinct items (references repeat in BUMP).
        distinct: dict[tuple[str, str], tuple[float, int]] = {}
        for (r, e), (vr, ve) in zip(pairs, values, strict=True):
            distinct[(r["source"], r["summary"])] = (vr, 1)
            distinct[(e["source"], e["summary"])] = (ve, 0)
        items = [(v, y) for v, y in distinct.values() if np.isfinite(v)]
        auc = roc_auc_score([y for _, y in items], [v for v, _ in items])
        for d in drops[m]:
            fails = ok & (edit < ref - d)
            print(
                f"| `{m}` | `{run.settings_hash}` | {auc:.3f} | {d:g} | "
                f"{fails.sum() / len(pairs):.3f} | "
                f"{(fails & compared).sum() / max(1, compared.sum()):.3f} |"
            )
        if (~ok).any():
            print(f"\n{m}: {(~ok).sum()} pairs not scored (count as not failing)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
