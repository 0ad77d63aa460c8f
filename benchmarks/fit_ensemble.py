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
from collections.abc import Callable
from pathlib import Path

import numpy as np

from faithgate.cache import ScoreCache
from faithgate.evaluation.bench.combination import apply_combination
from faithgate.evaluation.bench.scoring import default_cache_path
from faithgate.evaluation.meta import consistency, dedupe, items_from_examples, pairs, roc_auc
from faithgate.io import load_examples
from faithgate.metrics.combined import COMBINATION_FORMAT
from faithgate.safety.atomic import atomic_write_text
from faithgate.scoring.scorer import Scorer
from faithgate.types import Score

COMPONENTS = ("sentsim", "overlap", "harim_plus", "ner")
EVALUATION_ONLY = "bump_task1"


def score_file(
    scorer: Scorer, path: Path, read: Callable[[Score], float] = lambda score: score.value
) -> dict:
    """Every row of ``path`` scored by the components, each component's number taken by
    ``read`` from its score (its value by default)."""
    examples = load_examples(path)
    # Batches follow the sources, not the file: the LM passes a source once for all of its
    # summaries in a batch, and some files interleave their articles (CoGenSumm, Polytope:
    # about 60 sources in every 64 rows, so nearly one source pass per row).
    first: dict[str, int] = {}
    order = sorted(range(len(examples)), key=lambda i: first.setdefault(examples[i].source, i))
    scored: dict[int, dict[str, Score]] = {}
    for start in range(0, len(order), 64):
        batch = order[start : start + 64]
        scored.update(zip(batch, scorer.score([examples[i] for i in batch]), strict=True))
        scorer.release()
        print(f"  {path.stem}: {start + len(batch)}/{len(examples)}", file=sys.stderr)
    rows = [scored[i] for i in range(len(examples))]
    items = items_from_examples(examples)
    return {
        "values": np.array(
            [[read(r[m]) if r[m].ok else math.nan for m in COMPONENTS] for r in rows], dtype=float
        ),
        "labels": np.array([-1 if it.label is None else it.label for it in items]),
        "keys": [it.key for it in items],
        "origins": [it.origin for it in items],
        "pairs": pairs(items),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


def usable(d: dict, origin: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Scores and labels of the distinct labelled items with every component scored (only
    those of ``origin``, e.g. ``xsum``, when given)."""
    idx = dedupe(d["keys"])
    x, y = d["values"][idx], d["labels"][idx]
    keep = ~np.isnan(x).any(axis=1) & (y >= 0)
    if origin is not None:
        keep &= np.array([d["origins"][i] == origin for i in idx], dtype=bool)
    return x[keep], y[keep]


def origins(d: dict) -> list[str]:
    """The source corpora a data set mixes (QAGS: cnndm and xsum), or [] if only one."""
    found = sorted({o for o in d["origins"] if o is not None})
    return found if len(found) > 1 else []


def weights_doc(sets: list[dict]) -> dict:
    """The weights document (the ``combined`` format) with scales from ``sets``."""
    x = np.vstack([usable(d)[0] for d in sets])
    n = len(COMPONENTS)
    return {
        "format": COMBINATION_FORMAT,
        "metrics": list(COMPONENTS),
        "metric_settings": {},
        "mean": x.mean(axis=0).tolist(),
        "scale": x.std(axis=0).tolist(),
        "coef": [1.0 / n] * n,
        "intercept": 0.0,
    }


def ensemble(doc: dict, values: np.ndarray) -> np.ndarray:
    """The metric's own formula (``combined``'s), on rows of component scores."""
    return apply_combination(doc, {m: values[:, j] for j, m in enumerate(COMPONENTS)})


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
        x, y = usable(data[name])
        doc = weights_doc([data[o] for o in dev if o != name])
        aucs = [roc_auc(x[:, j], y) for j in range(len(COMPONENTS))]
        aucs.append(roc_auc(ensemble(doc, x), y))
        means += np.array(aucs) / len(dev)
        per_set[name] = dict(zip(header, np.round(aucs, 4).tolist(), strict=True))
        print(f"| {name} ({len(y)}) | " + " | ".join(f"{a:.3f}" for a in aucs) + " |")
        # Abstractive (XSum) and extractive-leaning (CNN/DM) summaries fail differently:
        # report a mixed set's halves too (not part of the mean).
        for origin in origins(data[name]):
            xo, yo = usable(data[name], origin)
            sub = [roc_auc(xo[:, j], yo) for j in range(len(COMPONENTS))]
            sub.append(roc_auc(ensemble(doc, xo), yo))
            per_set[f"{name}[{origin}]"] = dict(zip(header, np.round(sub, 4).tolist(), strict=True))
            print(
                f"| {name}, {origin} only ({len(yo)}) | "
                + " | ".join(f"{a:.3f}" for a in sub)
                + " |"
            )
    print("| mean | " + " | ".join(f"{a:.3f}" for a in means) + " |")

    doc = weights_doc([data[o] for o in dev])
    figures: dict = {
        "roc_auc_leave_one_set_out": per_set,
        "mean": dict(zip(header, means.round(4).tolist(), strict=True)),
    }
    if EVALUATION_ONLY in data:
        d = data[EVALUATION_ONLY]
        x, y = usable(d)
        auc = roc_auc(ensemble(doc, x), y)
        scores = ensemble(doc, d["values"])
        cons = consistency([scores[p] for p, _ in d["pairs"]], [scores[n] for _, n in d["pairs"]])
        comp = [roc_auc(x[:, j], y) for j in range(len(COMPONENTS))]
        print(
            f"BUMP task 1 ({len(y)} distinct items): ensemble ROC AUC {auc:.3f}, "
            f"consistency {cons:.3f}; components "
            + ", ".join(f"{m} {a:.3f}" for m, a in zip(COMPONENTS, comp, strict=True))
        )
        figures["bump_task1"] = {"roc_auc": round(auc, 4), "consistency": round(cons, 4)}
    if args.out:
        doc |= {
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
