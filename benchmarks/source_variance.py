"""How much of a metric's spread lies between articles, and what removing it would give.

For each data set under ``--data`` and each ``ensemble`` component (and the ensemble with its
shipped scales), over the distinct labelled items:

- ``pooled``: the ROC AUC a single threshold gets (label 1 = faithful), as ``faithgate bench``;
- ``between``: the share of the score's variance that lies between sources (1 - the variance
  left after subtracting each source's mean over its items);
- ``centred``: the ROC AUC after subtracting each source's mean, an *oracle*: it needs the other
  summaries of the same article, which a single summary's judge does not have. It bounds what
  calibrating scores across articles could give, and it is what comparing a summary with the
  same article's earlier output (``rules.regression.per_example_drop``) uses.

Only sources with two or more items are centred (``between`` and ``centred`` are over those
items; "-" where every source has one). Scores come
from the bench score cache (``benchmarks/fit_ensemble.py`` fills it). Reproduce::

    python benchmarks/source_variance.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from fit_ensemble import COMPONENTS, ensemble, score_file

from faithgate.cache import ScoreCache
from faithgate.evaluation.bench.scoring import default_cache_path
from faithgate.evaluation.meta import dedupe, roc_auc
from faithgate.io import load_examples
from faithgate.scoring.scorer import Scorer

SHIPPED_SCALES = Path(__file__).resolve().parents[1] / "faithgate" / "data" / "ensemble.json"


def centred(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``values`` minus the mean of its group's values."""
    _, inverse = np.unique(groups, return_inverse=True)
    means = np.bincount(inverse, weights=values) / np.bincount(inverse)
    return values - means[inverse]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path, help="directory of benchmark JSONL")
    args = ap.parse_args()
    doc = json.loads(SHIPPED_SCALES.read_text(encoding="utf-8"))
    scorer = Scorer(list(COMPONENTS), cache=ScoreCache(str(default_cache_path())))
    print("| data set (items, sources) | metric | pooled | between | centred (oracle) |")
    print("|---|---|---:|---:|---:|")
    for path in sorted(args.data.glob("*.jsonl")):
        d = score_file(scorer, path)
        examples = load_examples(path)
        idx = dedupe(d["keys"])
        x, y = d["values"][idx], d["labels"][idx]
        sources = np.array([examples[i].source for i in idx], dtype=object)
        keep = ~np.isnan(x).any(axis=1) & (y >= 0)
        x, y, sources = x[keep], y[keep], sources[keep]
        columns = {m: x[:, j] for j, m in enumerate(COMPONENTS)} | {"ensemble": ensemble(doc, x)}
        # Only sources with two or more items can be centred (a lone item centres to 0).
        _, inverse, counts = np.unique(sources, return_inverse=True, return_counts=True)
        shared = counts[inverse] > 1
        label = f"{path.stem} ({len(y)}, {len(counts)})"
        for name, v in columns.items():
            if shared.sum() < 2 or len(set(y[shared])) < 2:
                between, oracle = "-", "- (one item per source)"
            else:
                c, vs = centred(v[shared], sources[shared]), v[shared]
                between = f"{1.0 - c.var() / vs.var():.2f}" if vs.var() > 0 else "-"
                oracle = f"{roc_auc(c, y[shared]):.3f}"
            print(f"| {label} | {name} | {roc_auc(v, y):.3f} | {between} | {oracle} |")
            label = ""
        sys.stdout.flush()


if __name__ == "__main__":
    main()
