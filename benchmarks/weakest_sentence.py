"""Does the ensemble judge better from each vote's weakest summary sentence? (Not adopted.)

A summary is unfaithful if any one of its sentences is, so a vote could read its least
supported sentence (``Score.sentences``) instead of the whole summary (SummaC's and
AlignScore's per-sentence view). This compares, leaving one development set out as
``fit_ensemble.py`` does, the shipped ensemble with the same equal-weight vote over each
component's minimum over summary sentences; [95% bootstrap CI] of the difference, 1000 paired
resamples, seed 0; a mixed set is also split by origin.

Reads the component scores from the bench score cache, so run ``fit_ensemble.py`` first (it
scores every development row). Development sets only; BUMP is not read.

    python benchmarks/weakest_sentence.py --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from faithgate.cache import ScoreCache
from faithgate.evaluation.bench import default_cache_path
from faithgate.scorer import Scorer

DEV = ("cogensumm", "factcc_subset", "falke2019", "polytope", "qags", "summeval")
COMPONENTS = ("sentsim", "overlap", "harim_plus", "ner")


def rows(data: Path, name: str, hashes: dict[str, str], cache: ScoreCache) -> list[dict]:
    """Distinct labelled items with each component's value and weakest-sentence value."""
    seen: set[tuple[str, str]] = set()
    out = []
    for line in (data / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        key = (row["source"], row["summary"])
        if key in seen or row["label"] is None:
            continue
        seen.add(key)
        item = {"label": row["label"], "origin": row.get("origin")}
        for metric in COMPONENTS:
            score = cache.get(hashes[metric], *key)
            if score is None:
                raise SystemExit(f"{metric} not cached for a {name} row: run fit_ensemble.py first")
            values = [s.value for s in score.sentences if np.isfinite(s.value)]
            item[metric] = score.value
            item[metric + "_min"] = min(values) if values else score.value
        out.append(item)
    return out


def vote(sets: dict[str, list[dict]], held_out: str, features: list[str]) -> np.ndarray:
    train = np.array(
        [[r[f] for f in features] for k, rs in sets.items() if k != held_out for r in rs]
    )
    test = np.array([[r[f] for f in features] for r in sets[held_out]])
    return ((test - train.mean(0)) / train.std(0)).mean(1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path)
    args = ap.parse_args(argv)
    hashes = Scorer(list(COMPONENTS)).settings_hashes()
    cache = ScoreCache(str(default_cache_path()))
    sets = {name: rows(args.data, name, hashes, cache) for name in DEV}
    whole, weakest = list(COMPONENTS), [m + "_min" for m in COMPONENTS]
    rng = np.random.default_rng(0)
    print("| data set | items | ensemble | weakest-sentence votes | difference [95% CI] |")
    print("|---|---:|---:|---:|---|")
    for name in DEV:
        y = np.array([r["label"] for r in sets[name]])
        a, b = vote(sets, name, whole), vote(sets, name, weakest)
        origin = np.array([r["origin"] for r in sets[name]])
        parts = [("", np.ones(len(y), bool))]
        if len(set(origin)) > 1:
            parts += [(f", {o} half", origin == o) for o in sorted(set(origin))]
        for label, mask in parts:
            yy, aa, bb = y[mask], a[mask], b[mask]
            diffs = []
            for _ in range(1000):
                i = rng.integers(0, len(yy), len(yy))
                if len(set(yy[i])) == 2:
                    diffs.append(roc_auc_score(yy[i], bb[i]) - roc_auc_score(yy[i], aa[i]))
            lo, hi = np.percentile(diffs, [2.5, 97.5])
            auc_a, auc_b = roc_auc_score(yy, aa), roc_auc_score(yy, bb)
            print(
                f"| {name}{label} | {mask.sum()} | {auc_a:.3f} | {auc_b:.3f} "
                f"| {auc_b - auc_a:+.3f} [{lo:+.3f}, {hi:+.3f}] |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
