"""How a likelihood metric holds up when the source is long: drift, ordering and time.

Development data only (SummEval, ``../shared/data/summeval.jsonl``): for each of ``--docs``
articles with both a faithful (label 1) and an unfaithful (label 0) summary, one of each is
drawn (seed 0). Each article is then buried among other SummEval articles, at a random position,
until the source has at least ``--lengths`` words (0 = the article alone), and the metric scores
both summaries against it. A metric that reads long sources well scores them as it does against
the article alone: the report gives, per length, the mean shift from that score, the mean
absolute shift, the share of articles whose two summaries keep their order, and seconds per
article (both summaries; the machine's load adds noise, so compare settings in one run).

    python benchmarks/long_sources.py --out long.jsonl                       # defaults
    python benchmarks/long_sources.py --out long.jsonl --set harim_plus.max_length=null --label full
    python benchmarks/long_sources.py --report long.jsonl
    python benchmarks/long_sources.py --time-one 0 --set harim_plus.max_length=null   # s and peak RSS

``--out`` is appended to, a row per (label, article, length), so a stopped run resumes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from bump_data import data_dir

from faithgate import Example, Scorer
from faithgate.cli.score import parse_settings


def articles(path: Path, docs: int) -> list[tuple[str, dict, dict, list[str]]]:
    """(article, faithful row, unfaithful row, the other articles) for ``docs`` articles."""
    by_source: dict[str, list[dict]] = defaultdict(list)
    for line in path.open(encoding="utf-8"):
        if line.strip():
            row = json.loads(line)
            by_source[row["source"]].append(row)
    both = [s for s, rows in by_source.items() if {0, 1} <= {r["label"] for r in rows}]
    rng = random.Random(0)
    rng.shuffle(both)
    chosen = both[:docs]
    others = [s for s in by_source if s not in chosen]
    out = []
    for source in chosen:
        rows = by_source[source]
        faithful = rng.choice([r for r in rows if r["label"] == 1])
        unfaithful = rng.choice([r for r in rows if r["label"] == 0])
        out.append((source, faithful, unfaithful, others))
    return out


def bury(article: str, others: list[str], words: int, seed: int) -> str:
    """``article`` among other articles, at a random place, until ``words`` words."""
    rng = random.Random(seed)
    pool = others[:]
    rng.shuffle(pool)
    parts, total = [article], len(article.split())
    while total < words and pool:
        other = pool.pop()
        parts.insert(rng.randrange(len(parts) + 1), other)
        total += len(other.split())
    return "\n\n".join(parts)


def time_one(args: argparse.Namespace) -> None:
    """Article ``--time-one`` buried to the largest length: wall seconds for both summaries
    (after a warm-up) and this process's peak RSS. One process per setting."""
    import resource

    article, faithful, unfaithful, others = articles(
        data_dir(args.data) / "summeval.jsonl", args.docs
    )[args.time_one]
    words = max(int(x) for x in args.lengths.split(","))
    source = bury(article, others, words, seed=1000 * args.time_one + words)
    scorer = Scorer([args.metric], metric_settings=parse_settings(args.set))
    scorer.score([Example("warm-up", "A short source.", "A short summary.")])
    t = time.perf_counter()
    scorer.score(
        [Example("f", source, faithful["summary"]), Example("u", source, unfaithful["summary"])]
    )
    seconds = time.perf_counter() - t
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"article {args.time_one}, >= {words} words: {seconds:.1f} s, peak RSS {peak_mb} MB")


def run(args: argparse.Namespace) -> None:
    done = set()
    if Path(args.out).exists():
        for line in Path(args.out).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done.add((row["label"], row["doc"], row["words"]))
    scorer = Scorer([args.metric], metric_settings=parse_settings(args.set))
    lengths = [int(x) for x in args.lengths.split(",")]
    with open(args.out, "a", encoding="utf-8") as out:
        for d, (article, faithful, unfaithful, others) in enumerate(
            articles(data_dir(args.data) / "summeval.jsonl", args.docs)
        ):
            for words in lengths:
                if (args.label, d, words) in done:
                    continue
                source = bury(article, others, words, seed=1000 * d + words)
                t = time.perf_counter()
                res = scorer.score(
                    [
                        Example("f", source, faithful["summary"]),
                        Example("u", source, unfaithful["summary"]),
                    ]
                )
                row = {
                    "label": args.label,
                    "doc": d,
                    "words": words,
                    "sec": time.perf_counter() - t,
                }
                for key, r in zip("fu", res, strict=True):
                    score = r[args.metric]
                    row[key] = score.value if score.ok else None
                    row[key + "_context"] = score.details.get("context")
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(f"{args.label} doc {d} words {words}: {row['sec']:.1f}s", file=sys.stderr)


def report(path: str) -> None:
    text = Path(path).read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    alone = {(r["label"], r["doc"]): r for r in rows if r["words"] == 0}
    print(
        "| settings | source words >= | articles | mean shift (faithful, unfaithful) "
        "| mean abs. shift | order kept | s / article |"
    )
    print("|---|---:|---:|---|---:|---:|---:|")
    for label in sorted({r["label"] for r in rows}):
        for words in sorted({r["words"] for r in rows if r["label"] == label and r["words"]}):
            sub = [
                r
                for r in rows
                if r["label"] == label
                and r["words"] == words
                and (label, r["doc"]) in alone
                and None not in (r["f"], r["u"])
            ]
            if not sub:
                continue
            base = [alone[(label, r["doc"])] for r in sub]
            shift = np.array(
                [[r["f"] - b["f"], r["u"] - b["u"]] for r, b in zip(sub, base, strict=True)]
            )
            kept = np.mean(
                [(r["f"] > r["u"]) == (b["f"] > b["u"]) for r, b in zip(sub, base, strict=True)]
            )
            tokens = np.mean([r["u_context"]["source_tokens"] for r in sub])
            print(
                f"| {label} | {words} (~{tokens:.0f} tokens) | {len(sub)} | "
                f"{shift[:, 0].mean():+.2f}, {shift[:, 1].mean():+.2f} | {np.abs(shift).mean():.2f} "
                f"| {kept:.2f} | {np.mean([r['sec'] for r in sub]):.1f} |"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="directory holding summeval.jsonl (default ../shared/data)")
    ap.add_argument("--metric", default="harim_plus")
    ap.add_argument(
        "--set", action="append", default=[], help="METRIC.KEY=VALUE, as faithgate score --set"
    )
    ap.add_argument("--label", default="default", help="name of these settings in the report")
    ap.add_argument("--docs", type=int, default=12)
    ap.add_argument("--lengths", default="0,1500,3000,5500", help="source words, 0 = alone")
    ap.add_argument("--out", help="JSON lines to append to")
    ap.add_argument("--report", help="JSON lines to report on (Markdown)")
    ap.add_argument("--time-one", type=int, help="time one article (index) at the largest length")
    args = ap.parse_args(argv)
    if args.report:
        report(args.report)
    elif args.time_one is not None:
        time_one(args)
    elif args.out:
        run(args)
    else:
        ap.error("give --out to run or --report to report")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
