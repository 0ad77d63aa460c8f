"""Does the ensemble judge better from each vote's weakest summary sentence? (Not adopted.)

A summary is unfaithful if any one of its sentences is, so a vote could read its least
supported sentence (``Score.sentences``) instead of the whole summary (SummaC's and
AlignScore's per-sentence view). This compares, leaving one development set out exactly as
``fit_ensemble.py`` does (its functions), the shipped ensemble with the same equal-weight vote
over each component's minimum over summary sentences; [95% bootstrap CI] of the difference
(``faithgate.evaluation.meta.bootstrap_ci``, 1000 paired resamples, seed 0); a mixed set is
also split by origin.

Scores come through the bench score cache, so after ``fit_ensemble.py`` nothing is computed.
Development sets only; BUMP is not read.

    python benchmarks/weakest_sentence.py --data ../shared/data
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from fit_ensemble import (
    COMPONENTS,
    EVALUATION_ONLY,
    ensemble,
    origins,
    score_file,
    usable,
    weights_doc,
)

from faithgate.cache import ScoreCache
from faithgate.evaluation.bench.scoring import default_cache_path
from faithgate.evaluation.meta import bootstrap_ci, roc_auc
from faithgate.scoring.scorer import Scorer
from faithgate.types import Score


def weakest_sentence(score: Score) -> float:
    """The score of its least supported sentence (its value if it has none)."""
    values = [s.value for s in score.sentences if np.isfinite(s.value)]
    return min(values) if values else score.value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path)
    args = ap.parse_args(argv)
    scorer = Scorer(list(COMPONENTS), cache=ScoreCache(str(default_cache_path())))
    files = [f for f in sorted(args.data.glob("*.jsonl")) if f.stem != EVALUATION_ONLY]
    whole = {f.stem: score_file(scorer, f) for f in files}
    weakest = {f.stem: score_file(scorer, f, read=weakest_sentence) for f in files}
    print("| data set | items | ensemble | weakest-sentence votes | difference [95% CI] |")
    print("|---|---:|---:|---:|---|")
    for name in whole:
        doc_whole = weights_doc([d for o, d in whole.items() if o != name])
        doc_weakest = weights_doc([d for o, d in weakest.items() if o != name])
        for label, origin in [("", None)] + [(f", {o} half", o) for o in origins(whole[name])]:
            x, y = usable(whole[name], origin)
            x_min, y_min = usable(weakest[name], origin)
            assert np.array_equal(y, y_min)  # the same items, in the same order
            a, b = ensemble(doc_whole, x), ensemble(doc_weakest, x_min)
            lo, hi = bootstrap_ci(lambda yy, aa, bb: roc_auc(bb, yy) - roc_auc(aa, yy), y, a, b)
            auc_a, auc_b = roc_auc(a, y), roc_auc(b, y)
            print(
                f"| {name}{label} | {len(y)} | {auc_a:.3f} | {auc_b:.3f} "
                f"| {auc_b - auc_a:+.3f} [{lo:+.3f}, {hi:+.3f}] |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
