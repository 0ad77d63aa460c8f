"""Fit (and measure, leave one data set out) the ``ensemble`` metric's scales.

``ensemble`` is the plain mean of its components' z-scores: every component has weight 1/n and
only each component's mean and standard deviation are learned, so almost nothing can be
over-fitted to one benchmark's taxonomy. This script:

1. scores every row of the development files under ``--data`` (every ``*.jsonl`` except BUMP
   task 1, which is evaluation data only) with the components, through the bench score cache;
2. reports, per development set, the ROC AUC of each component and of the ensemble whose
   scales come from the *other* sets (leave one data set out), and BUMP task 1 (pooled ROC AUC
   over distinct items, pair consistency) for the ensemble fitted on all development sets;
3. with ``--out``, writes the weights file fitted on all development sets (format
   ``faithgate-combination/1``), with the files' SHA-256, row counts and the figures above.

Reproduce the shipped file::

    python benchmarks/fit_ensemble.py --data ../shared/data --out faithgate/data/ensemble.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np

from faithgate.atomic import atomic_write_text
from faithgate.cache import ScoreCache
from faithgate.evaluation.bench import default_cache_path
from faithgate.evaluation.meta import dedupe, roc_auc
from faithgate.io import load_examples
from faithgate.metrics.combined import COMBINATION_FORMAT
from faithgate.scorer import Scorer

COMPONENTS = ("sentsim", "overlap", "harim_plus")
EVALUATION_ONLY = "bump_task1"


def score_file(scorer: Scorer, path: Path) -> dict:
    examples = load_examples(path)
    rows = []
    for start in range(0, len(examples), 64):
        batch = examples[start : start + 64]
        rows += scorer.score(batch)
        scorer.release()
        print(f"  {path.stem}: {start + len(batch)}/{len(examples)}", file=sys.stderr)
    values = np.array(
        [[r[m].value if r[m].ok else math.nan for m in COMPONENTS] for r in rows], dtype=float
    )
    return {
        "values": values,
        "labels": np.array([-1 if e.label is None else e.label for e in examples]),
        "keys": [(e.source, e.summary) for e in examples],
        "pairs": [(e.meta.get("pair_id"), e.meta.get("role")) for e in examples],
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


def usable(d: dict) -> tuple[np.ndarray, np.ndarray, list]:
    """Distinct labelled items with every component scored."""
    idx = dedupe(d["keys"])
    x, y = d["values"][idx], d["labels"][idx]
    keep = ~np.isnan(x).any(axis=1) & (y >= 0)
    return x[keep], y[keep], [d["keys"][i] for i in idx[keep]]


def scales(sets: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    x = np.vstack([usable(d)[0] for d in sets])
    return x.mean(axis=0), x.std(axis=0)


def ensemble(values: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return ((values - mean) / scale).mean(axis=1)


def consistency(d: dict, scores: np.ndarray) -> float:
    by_pair: dict = {}
    for (pair, role), s in zip(d["pairs"], scores, strict=True):
        by_pair.setdefault(pair, {})[role] = s
    got = [p["reference"] > p["edited"] for p in by_pair.values() if len(p) == 2]
    return float(np.mean(got))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path, help="directory of benchmark JSONL")
    ap.add_argument("--out", type=Path, help="where to write the weights file")
    args = ap.parse_args()
    scorer = Scorer(list(COMPONENTS), cache=ScoreCache(str(default_cache_path())))
    files = sorted(args.data.glob("*.jsonl"))
    data = {f.stem: score_file(scorer, f) for f in files}
    dev = [name for name in data if name != EVALUATION_ONLY]

    header = [*COMPONENTS, "ensemble (LODO)"]
    print("| data set | " + " | ".join(header) + " |")
    print("|---" * (len(header) + 1) + "|")
    means = np.zeros(len(header))
    per_set: dict = {}
    for name in dev:
        x, y, keys = usable(data[name])
        mean, scale = scales([data[o] for o in dev if o != name])
        aucs = [roc_auc(x[:, j], y) for j in range(len(COMPONENTS))]
        aucs.append(roc_auc(ensemble(x, mean, scale), y))
        means += np.array(aucs) / len(dev)
        per_set[name] = dict(zip(header, np.round(aucs, 4).tolist(), strict=True))
        print(f"| {name} ({len(y)}) | " + " | ".join(f"{a:.3f}" for a in aucs) + " |")
    print("| mean | " + " | ".join(f"{a:.3f}" for a in means) + " |")

    mean, scale = scales([data[o] for o in dev])
    figures: dict = {
        "roc_auc_leave_one_set_out": per_set,
        "mean": dict(zip(header, means.round(4).tolist(), strict=True)),
    }
    if EVALUATION_ONLY in data:
        d = data[EVALUATION_ONLY]
        x, y, _ = usable(d)
        auc = roc_auc(ensemble(x, mean, scale), y)
        cons = consistency(d, ensemble(d["values"], mean, scale))
        comp = [roc_auc(x[:, j], y) for j in range(len(COMPONENTS))]
        print(
            f"BUMP task 1 ({len(y)} distinct items): ensemble ROC AUC {auc:.3f}, "
            f"consistency {cons:.3f}; components "
            + ", ".join(f"{m} {a:.3f}" for m, a in zip(COMPONENTS, comp, strict=True))
        )
        figures["bump_task1"] = {"roc_auc": round(auc, 4), "consistency": round(cons, 4)}
    if args.out:
        n = len(COMPONENTS)
        doc = {
            "format": COMBINATION_FORMAT,
            "metrics": list(COMPONENTS),
            "metric_settings": {},
            "mean": mean.tolist(),
            "scale": scale.tolist(),
            "coef": [1.0 / n] * n,
            "intercept": 0.0,
            "trained_on": {
                name: {"rows": len(data[name]["keys"]), "sha256": data[name]["sha256"]}
                for name in dev
            },
            "recipe": "equal weights on z-scores; mean and scale over the development sets' "
            "distinct labelled items (benchmarks/fit_ensemble.py)",
            "measured": figures,
        }
        atomic_write_text(args.out, json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
