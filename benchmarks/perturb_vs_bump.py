"""Generated minimal pairs vs BUMP's human ones: does a metric catch them equally often?

For every distinct BUMP task-1 reference summary, ``faithgate.perturb`` makes one edit per
perturbation type. Each metric scores the references, the generated edits and BUMP's human
edits; the table reports, per BUMP error type, the share of pairs in which the metric scores
the reference strictly higher (consistency, ties fail) with bootstrap 95% intervals, for the
generated edits next to the human edits of the same type.

    python benchmarks/perturb_vs_bump.py --metric bertscore --metric ner [--data DIR] [--limit N]

The data directory defaults to $FAITHGATE_SHARED_DATA, else ../shared/data next to the repo.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from faithgate.evaluation.bench.scoring import Bench, default_cache_path
from faithgate.evaluation.meta import bootstrap_ci, pair_wins
from faithgate.io import load_examples
from faithgate.perturb import TYPES, perturb
from faithgate.types import Example

BUMP_TYPES = [
    "Intrinsic Predicate",
    "Extrinsic Predicate",
    "Intrinsic Entity",
    "Extrinsic Entity",
    "Intrinsic Circumstance",
    "Extrinsic Circumstance",
    "Coreference",
    "Number",
]


def data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("FAITHGATE_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def cons(wins: np.ndarray) -> str:
    if wins.size == 0:
        return "–"
    lo, hi = bootstrap_ci(lambda w: float(w.mean()), wins, n_resamples=1000, seed=0)
    return f"{wins.mean():.3f} [{lo:.2f}, {hi:.2f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--metric", action="append", required=True)
    ap.add_argument("--data", help="directory holding bump_task1.jsonl")
    ap.add_argument("--limit", type=int, help="use the first N distinct references only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--rules", type=int, default=None, help="perturb's rules revision (default: the latest)"
    )
    ap.add_argument("--cache", default=str(default_cache_path()))
    args = ap.parse_args()

    rows = load_examples(data_dir(args.data) / "bump_task1.jsonl")
    refs: dict[tuple[str, str], Example] = {}
    for ex in rows:
        if ex.meta.get("role") == "reference":
            refs.setdefault((ex.source, ex.summary), ex)
    ref_list = list(refs.values())[: args.limit]
    ref_keys = {(r.source, r.summary) for r in ref_list}
    print(f"{len(ref_list)} distinct reference summaries", file=sys.stderr)

    t0 = time.perf_counter()
    generated: list[tuple[Example, Example, str, str]] = []  # ref, variant, error type, type
    for i, ref in enumerate(ref_list):
        extra = {} if args.rules is None else {"rules": args.rules}
        for v in perturb(ref.source, ref.summary, seed=args.seed, max_per_type=1, **extra):
            var = Example(f"gen-{i}-{v.type}", ref.source, v.summary, label=0)
            generated.append((ref, var, v.error_type, v.type))
    gen_seconds = time.perf_counter() - t0

    # BUMP's human edits of these references
    by_pair: dict[str, list[Example]] = defaultdict(list)
    for ex in rows:
        by_pair[ex.meta.get("pair_id")].append(ex)
    human: list[tuple[Example, Example, str]] = []
    for members in by_pair.values():
        ref = next((m for m in members if m.meta.get("role") == "reference"), None)
        ed = next((m for m in members if m.meta.get("role") == "edited"), None)
        if ref and ed and (ref.source, ref.summary) in ref_keys:
            human.append((ref, ed, ed.meta.get("error_type")))

    to_score = ref_list + [g[1] for g in generated] + [h[1] for h in human]
    bench = Bench(args.metric, cache=args.cache, progress=True)
    runs = bench.score(to_score)
    index = {(ex.source, ex.summary): i for i, ex in enumerate(to_score)}

    per_type = defaultdict(int)
    for g in generated:
        per_type[g[3]] += 1
    print(
        f"generated {len(generated)} edits in {gen_seconds:.1f} s "
        f"({gen_seconds / max(1, len(ref_list)):.2f} s per reference); per type: "
        + ", ".join(f"{t} {per_type[t]}" for t in TYPES),
        file=sys.stderr,
    )

    overall_human = {}
    for name, run in runs.items():
        s = run.scores

        def wins(pairs: list[tuple[Example, Example]], s: np.ndarray = s) -> np.ndarray:
            a = [s[index[(r.source, r.summary)]] for r, _ in pairs]
            b = [s[index[(e.source, e.summary)]] for _, e in pairs]
            return pair_wins(a, b)

        overall_human[name] = float(wins([(r, e) for r, e, _ in human]).mean())
        print(f"\n### {name}\n")
        print(
            "| error type | generated pairs | generated consistency [95% CI] "
            "| BUMP human pairs | BUMP consistency [95% CI] |"
        )
        print("|---|---:|---|---:|---|")
        for et in BUMP_TYPES:
            g = [(r, v) for r, v, e, _ in generated if e == et]
            h = [(r, e) for r, e, t in human if t == et]
            print(
                f"| {et} | {len(g)} | {cons(wins(g))} | {len(h) or '–'} "
                f"| {cons(wins(h)) if h else '–'} |"
            )
        g_all = [(r, v) for r, v, _, _ in generated]
        h_all = [(r, e) for r, e, _ in human]
        print(
            f"| **all** | {len(g_all)} | {cons(wins(g_all))} | {len(h_all)} | {cons(wins(h_all))} |"
        )
        print("\nBy generated edit rule:\n")
        print("| rule | pairs | consistency [95% CI] |")
        print("|---|---:|---|")
        for t in TYPES:
            g = [(r, v) for r, v, _, tt in generated if tt == t]
            print(f"| {t} | {len(g)} | {cons(wins(g))} |")
    best = max(overall_human, key=overall_human.get)
    print(f"\nBest metric on BUMP's human edits: {best} (consistency {overall_human[best]:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
