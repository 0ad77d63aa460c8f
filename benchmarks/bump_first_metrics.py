"""BUMP task-1 consistency of the first metrics, and their cost per pair.

Consistency (Ma et al., 2023, "BUMP: A Benchmark of Unfaithful Minimal Pairs"): the share of
minimal pairs in which the reference summary scores strictly higher than its edited,
unfaithful twin; ties and unscorable pairs count as failures.

    nice -n 5 python benchmarks/bump_first_metrics.py            # all 693 pairs
    python benchmarks/bump_first_metrics.py --limit 50            # a quick look

Data: ``$FAITHGATE_SHARED_DATA`` or ``../shared/data`` beside the repository. Prints Markdown.
Time per pair = wall time of scoring the distinct (source, summary) rows of the selected pairs
(after the model is loaded, spaCy cache cleared per metric) / number of pairs, on this machine.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict

from bump_data import data_dir, load_pairs

from faithgate import text as textmod
from faithgate.backends import ModelPool
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example, Score

# (row label, metric, settings, extra components read from details)
CONFIGS = [
    ("bertscore (F1)", "bertscore", {}, ("precision", "recall", "f1")),
    ("bertscore idf (F1)", "bertscore", {"idf": True}, ("precision", "recall", "f1")),
    ("sentsim cosine (P)", "sentsim", {"sim": "cosine"}, ("precision", "recall", "f1")),
    ("sentsim token_f1 (P)", "sentsim", {"sim": "token_f1"}, ("precision", "recall", "f1")),
    ("ner exact", "ner", {"match": "exact"}, ()),
    ("ner token_f1", "ner", {"match": "token_f1"}, ()),
    ("overlap (ROUGE-2 P)", "overlap", {}, ("rouge1", "rouge2", "rougeL", "novel1", "novel2")),
]


def component(score: Score, name: str) -> float:
    if not score.ok:
        return float("nan")
    d = score.details
    if name in d:
        return float(d[name])
    if name in d.get("rouge_precision", {}):
        return float(d["rouge_precision"][name])
    if name in d.get("novel_ngrams", {}):
        return 1.0 - float(d["novel_ngrams"][name])
    return float("nan")


def consistent(ref: float, edit: float) -> bool:
    return not (math.isnan(ref) or math.isnan(edit)) and ref > edit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="directory holding bump_task1.jsonl")
    ap.add_argument("--limit", type=int, help="only the first N pairs")
    ap.add_argument("--batch", type=int, default=64, help="examples per score() call")
    ap.add_argument("--only", nargs="*", help="row labels (substring match) to run")
    args = ap.parse_args()

    pairs = load_pairs(data_dir(args.data), args.limit)
    rows = {}
    for ref, edit in pairs:
        for r in (ref, edit):
            rows.setdefault((r["source"], r["summary"]), r)
    # Sorted by source so that each batch embeds a source once.
    examples = sorted(
        (Example(r["id"], src, summ) for (src, summ), r in rows.items()),
        key=lambda e: (e.source, e.id),
    )
    pool = ModelPool()
    table, by_type = [], {}
    for label, metric, settings, comps in CONFIGS:
        if args.only and not any(o in label for o in args.only):
            continue
        scorer = Scorer([metric], metric_settings={metric: settings}, pool=pool)
        t0 = time.perf_counter()
        scorer.score(examples[:1])  # loads models (not timed per pair)
        load_s = time.perf_counter() - t0
        textmod.clear_caches()  # every metric pays its own spaCy parses
        t0 = time.perf_counter()
        scored: dict[tuple[str, str], Score] = {}
        for b in range(0, len(examples), args.batch):
            batch = examples[b : b + args.batch]
            for ex, res in zip(batch, scorer.score(batch), strict=True):
                scored[(ex.source, ex.summary)] = res[metric]
        elapsed = time.perf_counter() - t0

        def get(r: dict, _s: dict = scored) -> Score:
            return _s[(r["source"], r["summary"])]

        wins = [consistent(get(a).value, get(b).value) for a, b in pairs]
        ties = sum(get(a).ok and get(b).ok and get(a).value == get(b).value for a, b in pairs)
        failed = sum(not s.ok for s in scored.values())
        comp_cells = {
            c: sum(consistent(component(get(a), c), component(get(b), c)) for a, b in pairs)
            / len(pairs)
            for c in comps
        }
        table.append(
            (label, sum(wins) / len(pairs), ties, failed, elapsed / len(pairs), load_s, comp_cells)
        )
        types: dict[str, list[bool]] = defaultdict(list)
        for (_, b), w in zip(pairs, wins, strict=True):
            types[b["error_type"]].append(w)
        by_type[label] = {t: sum(v) / len(v) for t, v in types.items()}
        print(f"# done {label}: {sum(wins) / len(pairs):.3f} in {elapsed:.1f}s", file=sys.stderr)

    n = len(pairs)
    print(
        f"BUMP task 1: {n} minimal pairs, {len(examples)} distinct rows scored; "
        "consistency = share of pairs with reference > edited (ties fail)\n"
    )
    print("| metric | consistency | ties | unscorable rows | s / pair | load s | components |")
    print("|---|---|---|---|---|---|---|")
    for label, cons, ties, failed, spp, load_s, comps in table:
        comp_text = ", ".join(f"{k} {v:.3f}" for k, v in comps.items()) or "-"
        print(
            f"| {label} | {cons:.3f} | {ties} | {failed} | {spp:.3f} | {load_s:.1f} | {comp_text} |"
        )
    types = sorted({t for d in by_type.values() for t in d})
    print("\nConsistency by BUMP error type\n")
    print("| metric | " + " | ".join(types) + " |")
    print("|---|" + "---|" * len(types))
    for label, d in by_type.items():
        print(f"| {label} | " + " | ".join(f"{d.get(t, float('nan')):.3f}" for t in types) + " |")


if __name__ == "__main__":
    main()
