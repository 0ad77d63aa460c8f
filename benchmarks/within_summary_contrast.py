"""Within-summary contrast of token support (issue 11, tried and not shipped).

The idea: a pooled threshold fails on BUMP because 90-98% of a score's variance lies between
articles (``source_variance.py``): how abstractive the reference is sets every token's support.
An error is local (one entity, number or verb), so the *least* supported tokens measured
against the summary's own typical token should cancel that style, where an absolute score does
not. The aggregations were fixed before any figure was seen: the summary's lowest token
log p(y_t | X) and the mean of its three lowest, each minus the summary's median (or mean)
token log-probability, and the same for the token PMI log p(y_t | X) - log p(y_t).

It reads the per-token log-probabilities that ``harim_plus`` keeps in its details
(``token_details``, on by default) from ``faithgate bench``'s score cache, so it scores
nothing itself: run ``faithgate bench --data ../shared/data --metric harim_plus`` first (every
row), then ``python benchmarks/within_summary_contrast.py --data ../shared/data``. Rows of every
settings hash found in the cache are read, the last one per example id winning; labels come
from the data files (label 1 = faithful). ROC AUC over the items, label 1 positive.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

DEFAULT_CACHE = Path.home() / ".cache" / "faithgate" / "bench" / "scores.sqlite"


def token_rows(cache: Path) -> dict[str, tuple[float, np.ndarray, np.ndarray]]:
    """example id -> (harim_plus value, log p(y_t | X), log p(y_t)) from the cache's rows."""
    con = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
    rows = {}
    for (text,) in con.execute("SELECT score FROM scores"):
        score = json.loads(text.rsplit("\n", 1)[0])  # the row's last line is its digest
        tokens = (score.get("details") or {}).get("tokens") or []
        if score.get("metric") != "harim_plus" or not tokens:
            continue
        s2s = np.array([t["s2s"] for t in tokens])
        lm = np.array([t["lm"] for t in tokens])
        rows[score["example_id"]] = (float(score["value"]), s2s, lm)
    return rows


def features(value: float, s2s: np.ndarray, lm: np.ndarray) -> dict[str, float]:
    pmi = s2s - lm
    k = min(3, len(s2s))
    return {
        "harim_plus": value,
        "loglik": float(s2s.mean()),
        "bottom3_pmi": float(np.sort(pmi)[:k].mean()),
        "min_s2s - median": float(s2s.min() - np.median(s2s)),
        "bottom3_s2s - median": float(np.sort(s2s)[:k].mean() - np.median(s2s)),
        "bottom3_s2s - mean": float(np.sort(s2s)[:k].mean() - s2s.mean()),
        "bottom3_pmi - median": float(np.sort(pmi)[:k].mean() - np.median(pmi)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of labelled JSONL files")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    rows = token_rows(args.cache)
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    labels: dict[str, list[int]] = defaultdict(list)
    for path in sorted(args.data.glob("*.jsonl")):
        seen: set[str] = set()  # BUMP repeats each reference once per edit: an item counts once
        for line in path.open(encoding="utf-8"):
            row = json.loads(line)
            if row.get("label") is None or row["id"] not in rows or row["id"] in seen:
                continue
            seen.add(row["id"])
            labels[path.stem].append(int(row["label"]))
            for name, x in features(*rows[row["id"]]).items():
                values[path.stem][name].append(x)
    names = list(features(0.0, np.zeros(3), np.zeros(3)))
    print("| data set (items) | " + " | ".join(f"`{n}`" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for name in sorted(labels):
        aucs = [roc_auc_score(labels[name], values[name][n]) for n in names]
        cells = " | ".join(f"{a:.3f}" for a in aucs)
        print(f"| {name} ({len(labels[name])}) | {cells} |")


if __name__ == "__main__":
    main()
