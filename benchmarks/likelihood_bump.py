"""Likelihood metrics on BUMP task 1: quality, and the cost of document-prefix caching.

Quality. Consistency (Ma et al. 2023, BUMP): share of minimal pairs whose reference summary
scores strictly higher than its edited twin (ties and unscorable pairs fail). ROC AUC
(scikit-learn) over the distinct (source, summary) items of the selected pairs, label 1 for
references and 0 for edits; per error type over that type's edits and their references.

Speed (on the first ``--speed-limit`` pairs, after the model is loaded and warmed up):
  bare        one forward pass over [bos source sep summary] per distinct item (batched);
  loglik      the loglik metric with and without prefix caching (same items);
  all five    loglik, harim, harim_plus, cop, fflm together, prefix caching on.
Times are reported per pair (total / pairs). Target: caching >= 1.8x faster per pair;
all five <= 2.5x the bare pass.

    nice -n 5 python benchmarks/likelihood_bump.py --limit 40 --speed-limit 8 \
        --scores /tmp/lik_scores.jsonl
    python benchmarks/likelihood_bump.py --report-only --scores /tmp/lik_scores.jsonl

Pairs are taken in file order (consecutive pairs share a source, as in a gate that scores
many outputs per article). Item scores are appended to ``--scores`` as they are computed, so
an interrupted run can still be reported (``--report-only``). Data: ``--data``,
``$FAITHGATE_SHARED_DATA`` or ``../shared/data`` beside the repository. Prints Markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

from bump_data import data_dir

METRICS = ["loglik", "harim", "harim_plus", "cop", "fflm"]


def load_pairs(path: Path, limit: int | None) -> list[dict]:
    """[{pair_id, error_type, reference: row, edited: row}] in file order."""
    pairs: dict[str, dict] = {}
    with (path / "bump_task1.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            p = pairs.setdefault(row["pair_id"], {"pair_id": row["pair_id"]})
            p[row["role"]] = row
            if row["role"] == "edited":
                p["error_type"] = row["error_type"]
    out = [p for p in pairs.values() if "reference" in p and "edited" in p]
    return out[:limit] if limit else out


def items_of(pairs: list[dict]) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}
    for p in pairs:
        for role in ("reference", "edited"):
            seen.setdefault((p[role]["source"], p[role]["summary"]), None)
    return list(seen)


def key_of(item: tuple[str, str]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(item).encode()).hexdigest()[:16]


def make_scorer(pool, metrics: list[str], prefix_cache: bool = True):
    from faithgate.scoring.scorer import Scorer

    settings = {m: {"prefix_cache": prefix_cache, "token_details": False} for m in metrics}
    return Scorer(metrics, pool=pool, metric_settings=settings)


def examples(items: list[tuple[str, str]]):
    from faithgate.types import Example

    return [Example(key_of(it), it[0], it[1]) for it in items]


def speed(pool, items: list[tuple[str, str]], n_pairs: int, out: Path) -> list[tuple[str, float]]:
    """Seconds per pair of each configuration over the same distinct items (the all-five
    run's scores are appended to ``out`` for the quality table)."""
    lm = pool.get("lm", "causal-lm")
    sep = lm.tokenize("\nTL;DR:\n")
    bos = [lm.bos_token_id] if lm.bos_token_id is not None else []
    # Warm-up (allocator, first-call overheads) on a short input.
    make_scorer(pool, ["loglik"]).score(examples([("A short warm-up source.", "Warm-up.")]))
    rows = []
    t = time.perf_counter()
    by_source: dict[str, list[str]] = defaultdict(list)
    for src, summ in items:
        by_source[src].append(summ)
    for src, summs in by_source.items():  # same batching granularity as the metrics
        x = lm.tokenize(src)
        lm.segment_logprobs([[bos + x + sep + lm.tokenize(s)] for s in summs])
    rows.append(("bare forward pass [bos X sep Y]", time.perf_counter() - t))
    for label, metrics, cache in (
        ("loglik, prefix caching on", ["loglik"], True),
        ("loglik, prefix caching off", ["loglik"], False),
        ("all five metrics, prefix caching on", METRICS, True),
    ):
        scorer = make_scorer(pool, metrics, cache)
        t = time.perf_counter()
        records = []
        for src, summs in by_source.items():
            results = scorer.score(examples([(src, s) for s in summs]))
            records.extend(zip([(src, s) for s in summs], results, strict=True))
        rows.append((label, time.perf_counter() - t))
        if metrics == METRICS:
            write_records(out, records)
    return [(label, secs / n_pairs) for label, secs in rows]


def write_records(out: Path, records: list) -> None:
    with out.open("a", encoding="utf-8") as fh:
        for item, res in records:
            record = {"key": key_of(item)}
            record.update({m: (s.value if s.ok else None) for m, s in res.items()})
            fh.write(json.dumps(record) + "\n")


def score_items(
    pool, items: list[tuple[str, str]], metrics: list[str], out: Path, done: dict[str, dict]
) -> None:
    by_source: dict[str, list[str]] = defaultdict(list)
    for src, summ in items:
        if any(m not in done.get(key_of((src, summ)), {}) for m in metrics):
            by_source[src].append(summ)
    scorer = make_scorer(pool, metrics)
    for n, (src, summs) in enumerate(by_source.items(), 1):
        t = time.perf_counter()
        results = scorer.score(examples([(src, s) for s in summs]))
        write_records(out, list(zip([(src, s) for s in summs], results, strict=True)))
        print(
            f"  source {n}/{len(by_source)}: {len(summs)} summaries, "
            f"{time.perf_counter() - t:.0f} s",
            file=sys.stderr,
            flush=True,
        )


def read_scores(path: Path) -> dict[str, dict]:
    scores: dict[str, dict] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                scores.setdefault(rec["key"], {}).update(rec)
    return scores


def _num(v) -> float:
    return float("nan") if v is None else float(v)


def quality(pairs: list[dict], scores: dict[str, dict]) -> str:
    """Markdown table: per error type and metric, consistency / ROC AUC (pairs scored)."""
    from sklearn.metrics import roc_auc_score

    def item_key(row: dict) -> str:
        return key_of((row["source"], row["summary"]))

    groups: dict[str, list[dict]] = {"all": pairs}
    for p in pairs:
        groups.setdefault(p["error_type"], []).append(p)
    lines = [
        "| error type | " + " | ".join(f"{m}: cons / AUC (pairs)" for m in METRICS) + " |",
        "|---|" + "---|" * len(METRICS),
    ]
    for name in ["all", *sorted(k for k in groups if k != "all")]:
        cells = []
        for m in METRICS:
            ps = [
                p
                for p in groups[name]
                if m in scores.get(item_key(p["reference"]), {})
                and m in scores.get(item_key(p["edited"]), {})
            ]
            if not ps:
                cells.append("-")
                continue
            wins = 0
            items: dict[str, tuple[float, int]] = {}
            for p in ps:
                ref = _num(scores[item_key(p["reference"])][m])
                edit = _num(scores[item_key(p["edited"])][m])
                wins += int(not math.isnan(ref) and not math.isnan(edit) and ref > edit)
                items[item_key(p["reference"])] = (ref, 1)
                items[item_key(p["edited"])] = (edit, 0)
            vals = [(v, y) for v, y in items.values() if not math.isnan(v)]
            labels = {y for _, y in vals}
            auc = (
                roc_auc_score([y for _, y in vals], [v for v, _ in vals])
                if labels == {0, 1}
                else float("nan")
            )
            cells.append(f"{100 * wins / len(ps):.1f}% / {auc:.3f} ({len(ps)})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="directory holding bump_task1.jsonl")
    ap.add_argument("--limit", type=int, help="first N pairs for quality (default: all 693)")
    ap.add_argument("--speed-limit", type=int, default=8, help="first N pairs timed (0: skip)")
    ap.add_argument("--scores", default="likelihood_bump_scores.jsonl", help="item scores file")
    ap.add_argument("--report-only", action="store_true", help="tables from --scores only")
    ap.add_argument(
        "--metrics", default=",".join(METRICS), help="metrics for the quality phase (comma list)"
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: on a shared, loaded CPU one thread ran ~7x faster)",
    )
    args = ap.parse_args()

    pairs = load_pairs(data_dir(args.data), args.limit)
    out = Path(args.scores)
    if not args.report_only:
        from faithgate.backends import ModelPool

        options = {"threads": args.threads} if args.threads else {}
        pool = ModelPool(backend="torch", model_options={"lm": options})
        t = time.perf_counter()
        pool.get("lm", "causal-lm")
        print(f"model loaded in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        if args.speed_limit:
            speed_pairs = pairs[: args.speed_limit]
            items = items_of(speed_pairs)
            rows = speed(pool, items, len(speed_pairs), out)
            base = dict(rows)
            bare = base["bare forward pass [bos X sep Y]"]
            print(f"\n### Speed: {len(speed_pairs)} pairs ({len(items)} distinct items)\n")
            print("| configuration | s / pair | vs bare pass |\n|---|---|---|")
            for label, secs in rows:
                print(f"| {label} | {secs:.2f} | {secs / bare:.2f}x |")
            speedup = base["loglik, prefix caching off"] / base["loglik, prefix caching on"]
            print(f"\nprefix caching speed-up (loglik): {speedup:.2f}x")
            sys.stdout.flush()
        metrics = [m for m in args.metrics.split(",") if m]
        unknown = set(metrics) - set(METRICS)
        if unknown:
            sys.exit(f"unknown metric(s): {', '.join(sorted(unknown))}")
        if metrics:
            score_items(pool, items_of(pairs), metrics, out, read_scores(out))
    print(f"\n### BUMP task 1 quality ({len(pairs)} pairs selected)\n")
    print(quality(pairs, read_scores(out)))


if __name__ == "__main__":
    main()
