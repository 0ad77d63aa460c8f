"""Does the source's own LM log-probability explain the between-article spread of ``loglik``?

On BUMP 90-98% of a score's variance lies between articles (``source_variance.py``). A judge of
one summary has its source: if articles whose text the LM finds surprising also get lower
summary log-probabilities, ``loglik - b * (source's mean token log-prob)`` would cancel part of
that spread. This scores, with the default LM (ONNX), every labelled (source, summary) item of
a data set: the summary's mean log p(y_t | X) (``y_s2s``: ``loglik``), its mean log p(y_t)
without the source (``y_lm``) and the source's own mean log p(x_t) (``x_lm``), then prints the
correlation over sources of ``x_lm`` with the mean ``y_s2s`` of their faithful summaries and
the pooled ROC AUC of ``y_s2s - b * x_lm`` for a few ``b`` (b scanned on the data it reports:
an upper bound, not a fitted recipe).

    python benchmarks/source_normalisation.py ../shared/data/bump_task1.jsonl --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from faithgate.engines.likelihood import LikelihoodEngine, finite_mean
from faithgate.scoring.scorer import Scorer


def score(path: Path, chunk: int = 40) -> list[dict]:
    items: dict[tuple[str, str], int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("label") is not None:
            items[(row["source"], row["summary"])] = int(row["label"])
    scorer = Scorer(["loglik"], backend="onnx")
    engine = LikelihoodEngine(scorer.pool.get("lm", "causal-lm"), scorer.metrics[0].config)
    pairs, out = list(items), []
    sources = {s: i for i, s in enumerate(dict.fromkeys(s for s, _ in pairs))}
    for k in range(0, len(pairs), chunk):
        part = pairs[k : k + chunk]
        engine.request(part, ["x_lm", "y_s2s", "y_lm"])
        for source, summary in part:
            lp = engine.get(source, summary)
            out.append(
                {
                    "source": sources[source],
                    "label": items[(source, summary)],
                    **{q: finite_mean(lp[q]) for q in ("x_lm", "y_s2s", "y_lm")},
                }
            )
        engine.release_all()
        print(f"{k + len(part)} / {len(pairs)}", file=sys.stderr, flush=True)
    return out


def report(rows: list[dict]) -> None:
    rows = [r for r in rows if np.isfinite(r["x_lm"]) and np.isfinite(r["y_s2s"])]
    x, y = (np.array([r[q] for r in rows]) for q in ("x_lm", "y_s2s"))
    label, source = np.array([r["label"] for r in rows]), np.array([r["source"] for r in rows])
    faithful = sorted({s for s, lab in zip(source, label, strict=True) if lab == 1})
    mean_y = [y[(source == s) & (label == 1)].mean() for s in faithful]
    x_of = [x[source == s][0] for s in faithful]
    print(f"items {len(rows)}, sources {len(set(source))}")
    print(f"corr over sources (x_lm, faithful mean y_s2s): {np.corrcoef(x_of, mean_y)[0, 1]:.3f}")
    for b in (0.0, 0.25, 0.5, 0.75, 1.0, 1.5):
        print(f"b {b:<4}  ROC AUC of y_s2s - b * x_lm: {roc_auc_score(label, y - b * x):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--json", type=Path, help="per-item values: written, or read if present")
    args = ap.parse_args()
    if args.json and args.json.is_file():
        rows = json.loads(args.json.read_text())
    else:
        rows = score(args.data)
        if args.json:
            args.json.write_text(json.dumps(rows))
    report(rows)


if __name__ == "__main__":
    main()
