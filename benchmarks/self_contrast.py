"""Self-contrast: is a summary the LM's favourite among its own one-edit neighbours? (issue 11)

The idea: a pooled threshold fails because scores vary more between articles than one edit
moves them. Comparing a summary with *its own* minimal edits, given the same source, cancels
the article: a faithful summary should beat its edits (as in BUMP's pairs, where `loglik`
orders 86% correctly), while an unfaithful one has a neighbour that undoes its error (the
swapped entity swapped back, the negation removed) and should lose to it.

Per (source X, summary S): the neighbours p are ``faithgate.perturb(X, S, seed=0)`` (one edit
per type), all scored by the LM given X in one cached prefix pass (the likelihood engine:
``y_s2s`` and ``y_lm``). Aggregations, fixed before any figure (higher = more faithful):

- ``sum_max`` = lp(S) - max_p lp(p), lp the summed log-probability given X; ``mean_max`` the
  same with the mean per token; ``pmi_max`` with pmi = lp(.|X) - lp(.|no source);
- ``sum_lse`` / ``pmi_lse`` = -log mean_p exp(q(p) - q(S)) (a soft maximum);
- ``win_sum`` / ``win_pmi`` = the share of neighbours scoring below S;
- ``sum_mean`` / ``pmi_meanmargin`` = q(S) - mean_p q(p);

against ``loglik`` (mean lp(S|X)) and ``pmi_mean``. ROC AUC per file, label 1 = faithful.

    python benchmarks/self_contrast.py extract ../shared/data/falke2019.jsonl --limit 100 --out F.jsonl
    python benchmarks/self_contrast.py report F.jsonl G.jsonl ...

``extract`` scores ``faithgate bench``'s seeded sample (``--limit`` rows, seed 0; BUMP pairs
kept whole), appends one JSON line per row and skips ids already in ``--out`` (re-run it after
a cut); a (source, summary) repeated under other ids is scored once per run. ONNX backend, 2 threads; ``--model`` an lm export directory (default: the lm role's).
Nothing here ships: the figures are in docs/metrics/likelihood.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

AGGREGATES = (
    "loglik",
    "pmi_mean",
    "sum_max",
    "mean_max",
    "pmi_max",
    "sum_lse",
    "pmi_lse",
    "win_sum",
    "win_pmi",
    "sum_mean",
    "pmi_meanmargin",
)


def extract(path: Path, limit: int, out: Path, model: str | None) -> None:
    from faithgate import models
    from faithgate.backends.onnx_backend import OnnxBackend
    from faithgate.engines.likelihood import LikelihoodConfig, LikelihoodEngine
    from faithgate.evaluation.bench.files import limit_examples
    from faithgate.perturb import perturb
    from faithgate.types import Example

    rows = {
        r["id"]: r for r in (json.loads(ln) for ln in path.open(encoding="utf-8") if ln.strip())
    }
    examples = [Example(r["id"], r["source"], r["summary"]) for r in rows.values()]
    sample = limit_examples(examples, limit, seed=0) if limit > 0 else examples
    done = set()
    if out.exists():
        done = {json.loads(line)["id"] for line in out.open(encoding="utf-8")}
    spec = models.resolve("lm", model)
    lm = OnnxBackend().load(spec, "causal-lm", threads=2)
    engine = LikelihoodEngine(lm, LikelihoodConfig())
    todo = [e for e in sample if e.id not in done]
    # (source, summary) -> (own, neighbours): a text repeated under other ids (BUMP's
    # references, one row per pair) is scored once and its row written from this.
    scored: dict[tuple[str, str], tuple[list[float], list[list[float]]]] = {}
    start = time.time()
    with out.open("a", encoding="utf-8") as fh:
        for k in range(0, len(todo), 8):
            chunk = todo[k : k + 8]
            planned: set[tuple[str, str]] = set()
            plan = []
            for e in chunk:
                if (e.source, e.summary) in scored or (e.source, e.summary) in planned:
                    continue
                planned.add((e.source, e.summary))
                neighbours = [p.summary for p in perturb(e.source, e.summary, seed=0)]
                plan.append((e, neighbours))
                pairs = [(e.source, s) for s in [e.summary, *neighbours]]
                engine.request(pairs, ["y_s2s", "y_lm"])
            for e, neighbours in plan:

                def sums(summary: str, e: Example = e) -> list[float]:
                    lp = engine.get(e.source, summary)
                    a, b = lp["y_s2s"], lp["y_lm"]
                    ok = np.isfinite(a) & np.isfinite(b)
                    return [float(a[ok].sum()), float(a[ok].mean()), float((a[ok] - b[ok]).sum())]

                scored[(e.source, e.summary)] = (sums(e.summary), [sums(p) for p in neighbours])
            for e in chunk:
                own, neighbour_sums = scored[(e.source, e.summary)]
                row = rows[e.id]
                record = {
                    "id": e.id,
                    "label": row["label"],
                    "pair_id": row.get("pair_id"),
                    "error_type": row.get("error_type"),
                    "own": own,
                    "neighbours": neighbour_sums,
                }
                fh.write(json.dumps(record) + "\n")
            fh.flush()
            engine.release_all()
            print(
                f"{k + len(chunk)}/{len(todo)} rows, {time.time() - start:.0f} s", file=sys.stderr
            )


def aggregates(record: dict) -> dict[str, float]:
    """Every aggregation of one row (NaN where it has no neighbour)."""
    lp_sum, lp_mean, pmi = record["own"]
    nb = np.array(record["neighbours"], dtype=float).reshape(-1, 3)
    n_tokens = lp_sum / lp_mean if lp_mean else float("nan")
    out = {"loglik": lp_mean, "pmi_mean": pmi / n_tokens if n_tokens else float("nan")}
    if not len(nb):
        return out | {name: float("nan") for name in AGGREGATES[2:]}
    return out | {
        "sum_max": lp_sum - nb[:, 0].max(),
        "mean_max": lp_mean - nb[:, 1].max(),
        "pmi_max": pmi - nb[:, 2].max(),
        "sum_lse": -float(np.log(np.mean(np.exp(nb[:, 0] - lp_sum)))),
        "pmi_lse": -float(np.log(np.mean(np.exp(nb[:, 2] - pmi)))),
        "win_sum": float(np.mean(nb[:, 0] < lp_sum)),
        "win_pmi": float(np.mean(nb[:, 2] < pmi)),
        "sum_mean": lp_sum - nb[:, 0].mean(),
        "pmi_meanmargin": pmi - nb[:, 2].mean(),
    }


def report(paths: list[Path]) -> None:
    from sklearn.metrics import roc_auc_score

    print(
        "| file (distinct items, with neighbours) | "
        + " | ".join(AGGREGATES)
        + " | pair consistency |"
    )
    print("|---|" + "---:|" * len(AGGREGATES) + "---|")
    intervals: list[tuple[str, str]] = []
    for path in paths:
        records = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
        feats = [aggregates(r) for r in records]
        # ROC AUC over distinct items: a summary repeated under several ids (BUMP's references,
        # one per pair) counts once; the same text gives bit-identical scores.
        distinct: dict[tuple, int] = {}
        for i, r in enumerate(records):
            distinct.setdefault((r["label"], *r["own"]), i)
        keep = sorted(distinct.values())
        labels = np.array([records[i]["label"] for i in keep])
        cells = []
        for name in AGGREGATES:
            v = np.array([feats[i][name] for i in keep], dtype=float)
            v = np.where(np.isnan(v), np.nanmedian(v), v)  # no neighbour: neutral, still counted
            cells.append(f"{roc_auc_score(labels, v):.3f}")
        by_pair: dict[str, dict[int, dict]] = {}
        for r, f in zip(records, feats, strict=True):
            if r.get("pair_id"):
                by_pair.setdefault(r["pair_id"], {})[r["label"]] = f
        whole = [p for p in by_pair.values() if 0 in p and 1 in p]
        cons = "-"
        if whole:
            cons = (
                ", ".join(
                    f"{n} {np.mean([p[1][n] > p[0][n] for p in whole]):.2f}"
                    for n in ("loglik", "sum_max", "mean_max", "sum_lse", "pmi_max")
                )
                + f" ({len(whole)} pairs)"
            )
        with_nb = sum(1 for i in keep if records[i]["neighbours"])
        print(f"| {path.stem} ({len(keep)}, {with_nb}) | " + " | ".join(cells) + f" | {cons} |")
        intervals.append((path.stem, _intervals(feats, keep, labels)))
    print("\nROC AUC [95% bootstrap CI] and the paired difference from `loglik`:")
    for stem, text in intervals:
        print(f"- {stem}: {text}")


def _intervals(feats: list[dict], keep: list[int], labels: np.ndarray) -> str:
    from faithgate.evaluation.meta import bootstrap_ci, roc_auc

    def column(name: str) -> np.ndarray:
        v = np.array([feats[i][name] for i in keep], dtype=float)
        return np.where(np.isnan(v), np.nanmedian(v), v)

    base = column("loglik")
    parts = []
    for name in ("loglik", "sum_lse", "mean_max"):
        v = column(name)
        lo, hi = bootstrap_ci(roc_auc, v, labels)
        text = f"{name} {roc_auc(v, labels):.3f} [{lo:.3f}, {hi:.3f}]"
        if name != "loglik":
            d_lo, d_hi = bootstrap_ci(
                lambda a, b, y: roc_auc(a, y) - roc_auc(b, y), v, base, labels
            )
            text += f" (difference [{d_lo:+.3f}, {d_hi:+.3f}])"
        parts.append(text)
    return "; ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("extract")
    ex.add_argument("data", type=Path)
    ex.add_argument("--limit", type=int, default=100)
    ex.add_argument("--out", type=Path, required=True)
    ex.add_argument("--model", help="lm export directory (default: the lm role's)")
    rep = sub.add_parser("report")
    rep.add_argument("files", type=Path, nargs="+")
    args = ap.parse_args()
    if args.cmd == "extract":
        extract(args.data, args.limit, args.out, args.model)
    else:
        report(args.files)


if __name__ == "__main__":
    main()
