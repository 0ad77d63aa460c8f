"""Spot-check summaries from Python: faithgate's API without a notebook.

    python examples/api_spot_check.py                      # the bundled news example
    python examples/api_spot_check.py --metrics sentsim bertscore --release outputs_edited.jsonl

Shows the three calls most scripts need:

1. ``faithgate.score(source, summary, metrics=[...])`` for a one-off check;
2. ``faithgate.Scorer([...])`` kept alive to score many summaries without reloading models;
3. ``Score.least_supported()`` to point at the sentence a reviewer should read first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import faithgate

NEWS = Path(__file__).resolve().parent / "news"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", nargs="+", default=["sentsim"], help="metric names")
    parser.add_argument("--reference", default="outputs.jsonl", help="last release's outputs")
    parser.add_argument("--release", default="outputs_edited.jsonl", help="outputs to check")
    args = parser.parse_args(argv)

    try:
        before = faithgate.load_examples(NEWS / args.reference)
        after = {ex.id: ex for ex in faithgate.load_examples(NEWS / args.release)}

        # 1. One summary, one call (loads the models, so use it for a handful of checks).
        first = before[0]
        one = faithgate.score(first.source, first.summary, metrics=args.metrics)
        print(f"{first.id}: " + ", ".join(f"{m} {s.value:.4f}" for m, s in one.items()))

        # 2. Many summaries: one Scorer, models loaded once, examples scored in batches.
        scorer = faithgate.Scorer(args.metrics)
        paired = [ex for ex in before if ex.id in after]
        old = scorer.score(paired)
        new = scorer.score([after[ex.id] for ex in paired])
    except faithgate.FaithgateError as exc:  # bad input, unknown metric, missing model
        print(f"faithgate: {exc}", file=sys.stderr)
        return exc.exit_code

    # 3. Compare the releases summary by summary and show where the new one is weakest.
    metric = args.metrics[0]
    print(f"\n{'id':<8} {args.reference:>22} {args.release:>22}  change   least supported sentence")
    for ex, o, n in zip(paired, old, new, strict=True):
        a, b = o[metric], n[metric]
        if not (a.ok and b.ok):
            print(f"{ex.id:<8} could not score: {a.error or b.error}")
            continue
        weakest = b.least_supported()
        where = f'"{weakest.text}" ({weakest.value:.3f})' if weakest else "-"
        print(f"{ex.id:<8} {a.value:>22.4f} {b.value:>22.4f} {b.value - a.value:+.4f}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
