"""The shipped NLI checker on BUMP task 1: consistency, pooled ROC AUC and CPU time per pair.

    python benchmarks/checker_bump.py [--limit N] [--backend onnx] [--metric entail_topk ...]
        [--threads N]

Scores every minimal pair (reference, edited) with each metric in one process, the summaries
of a pair in one batch (they share their source, so the source is split and embedded once),
and reports per metric: consistency (ties fail), ROC AUC over distinct (source, summary) items,
and CPU seconds per pair (``time.process_time``, all threads of this process; model loading
excluded). BUMP is evaluation data: nothing here feeds training or any setting.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from bump_data import data_dir, load_pairs  # noqa: E402

from faithgate import Example, Scorer  # noqa: E402
from faithgate.evaluation.meta import roc_auc  # noqa: E402
from faithgate.metrics.nli import AGGREGATES, combine_sentences  # noqa: E402

DEFAULT_METRICS = ("entail_topk", "summac_zs", "entail_s2s", "entail_d2s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--backend", default="onnx")
    ap.add_argument("--metric", action="append")
    ap.add_argument("--model", action="append", default=[], help="ROLE=ID_OR_PATH, e.g. nli=DIR")
    ap.add_argument("--out", help="write per-pair scores and the summary as JSON")
    ap.add_argument(
        "--threads", type=int, help="onnxruntime threads of the nli and embedder sessions"
    )
    args = ap.parse_args()
    pairs = load_pairs(data_dir(args.data), args.limit)
    metrics = args.metric or list(DEFAULT_METRICS)
    summary = {}
    per_pair: dict[str, list] = {}
    for name in metrics:
        models = dict(m.split("=", 1) for m in args.model)
        options = (
            {r: {"threads": args.threads} for r in ("nli", "embedder")} if args.threads else {}
        )
        scorer = Scorer([name], backend=args.backend, models=models, model_options=options)
        ref, edit = pairs[0]
        scorer.score([Example("warm", ref["source"], ref["summary"])])  # load models
        cpu0, wall0 = time.process_time(), time.perf_counter()
        rows = []
        for k, (ref, edit) in enumerate(pairs):
            a, b = scorer.score(
                [
                    Example(f"{k}r", ref["source"], ref["summary"]),
                    Example(f"{k}e", edit["source"], edit["summary"]),
                ]
            )
            rows.append((_sentences(a[name]), _sentences(b[name]), edit.get("error_type")))
            if (k + 1) % 50 == 0:
                print(f"{name}: {k + 1}/{len(pairs)}", file=sys.stderr, flush=True)
        cpu = (time.process_time() - cpu0) / len(pairs)
        wall = (time.perf_counter() - wall0) / len(pairs)
        per_pair[name] = rows
        # Every aggregate from the same per-sentence support (one model pass per metric).
        hows = ("mean", "min") if name == "summac_zs" else AGGREGATES
        for how in hows:
            key = f"{name}[{how}]"
            summary[key] = _figures(pairs, rows, how)
            summary[key].update(cpu_s_per_pair=round(cpu, 4), wall_s_per_pair=round(wall, 4))
            print(json.dumps({key: summary[key]}), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "pairs": per_pair}, indent=1))
    print(
        "| metric [aggregate] | pairs | consistency | ties | ROC AUC | CPU s/pair | wall s/pair |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, s in summary.items():
        print(
            f"| `{name}` | {s['pairs']} | {s['consistency']:.3f} | {s['ties']} | "
            f"{s['roc_auc']:.3f} | {s['cpu_s_per_pair']:.3f} | {s['wall_s_per_pair']:.3f} |"
        )


def _sentences(score) -> list[float]:  # type: ignore[no-untyped-def]
    if score.value != score.value:  # NaN: unscorable
        return []
    return [s.value for s in score.sentences] or [score.value]


def _figures(pairs, rows, how: str) -> dict:  # type: ignore[no-untyped-def]
    agg = [
        (
            combine_sentences(r, how) if r else float("nan"),
            combine_sentences(e, how) if e else float("nan"),
            t,
        )
        for r, e, t in rows
    ]
    ref_v = np.array([r[0] for r in agg], dtype=float)
    edit_v = np.array([r[1] for r in agg], dtype=float)
    consistency = float(np.mean(ref_v > edit_v))
    # Pooled AUC over distinct items: references repeat across pairs.
    items: dict[tuple[str, str], tuple[float, int]] = {}
    for (ref, edit), (rv, ev, _) in zip(pairs, agg, strict=True):
        items[(ref["source"], ref["summary"])] = (rv, 1)
        items[(edit["source"], edit["summary"])] = (ev, 0)
    values = np.array([v for v, _ in items.values()])
    labels = np.array([y for _, y in items.values()])
    by_type: dict[str, list[bool]] = {}
    for rv, ev, t in agg:
        by_type.setdefault(t or "?", []).append(rv > ev)
    return {
        "pairs": len(agg),
        "consistency": round(consistency, 4),
        "ties": int(np.sum(ref_v == edit_v)),
        "roc_auc": round(float(roc_auc(values, labels)), 4),
        "by_type": {t: round(float(np.mean(v)), 3) for t, v in sorted(by_type.items())},
    }


if __name__ == "__main__":
    main()
