"""False alarms and catches of the ``facts`` metric on the public labelled sets.

For each data set (split by origin where it mixes CNN/DM and XSum): the share of faithful
summaries (label 1) that ``facts`` flags (value < 1: at least one unsupported number, date or
name), which is its false-alarm rate as a gate with threshold 1.0, and the share of unfaithful
summaries (label 0) it flags, which is what it catches alone. BUMP's repeated reference rows
are counted once; its catches are also given per error type.

Development split: the rows whose source hashes into the development half
(``sha256(SEED + source)``, first byte even; ``--seed``, default ``SEED``), in every set, plus
the hand-written cases of ``tests/unit/metrics/test_facts_metric.py``. Splitting by source keeps
all summaries of one article on one side. Each set is reported three times: its development
half, its held-out half, and the whole; only the held-out rows were never read. ``--dev``
prints the unsupported facts of the development half's flagged rows, for error analysis;
``--rows FILE`` writes every row's flag and unsupported facts (to compare two versions).

    FAITHGATE_SHARED_DATA=../shared/data python benchmarks/facts_table.py [--sets a,b] [--dev]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

SETS = ("cogensumm", "summeval", "polytope", "factcc_subset", "falke2019", "qags", "bump_task1")
# The seed of the development/held-out split (issue 47's false-alarm work, 2026-11-29).
SEED = "facts-dev-2026-11-29:"


def is_dev(source: str, seed: str = SEED) -> bool:
    """Whether the row of ``source`` is in the development half: first byte of the sha256 even."""
    return hashlib.sha256((seed + source).encode("utf-8")).digest()[0] % 2 == 0


def load(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    seen: set[tuple[str, str]] = set()
    out = []
    for r in rows:
        if r.get("label") not in (0, 1):
            continue
        key = (r["source"], r["summary"])
        if key in seen:  # BUMP repeats each reference once per edit
            continue
        seen.add(key)
        out.append(r)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--dev", action="store_true", help="print the development half's flags")
    ap.add_argument("--seed", default=SEED, help="seed of the development/held-out split")
    ap.add_argument("--json", default=None, help="write the table as JSON here")
    ap.add_argument("--rows", default=None, help="write each row's flag and facts (JSONL) here")
    args = ap.parse_args()
    data = Path(os.environ.get("FAITHGATE_SHARED_DATA", "../shared/data"))
    scorer = Scorer(["facts"])
    table = []
    dumped = []
    for name in args.sets.split(","):
        rows = load(data / f"{name}.jsonl")
        examples = [Example(r["id"], r["source"], r["summary"]) for r in rows]
        start = time.perf_counter()
        scores = [s["facts"] for s in scorer.score(examples)]
        seconds = time.perf_counter() - start
        groups: dict[tuple[str, str], list[tuple[dict, object]]] = defaultdict(list)
        for r, s in zip(rows, scores, strict=True):
            part = "development" if is_dev(r["source"], args.seed) else "held-out"
            origin = r.get("origin") or "all"
            groups[(origin, part)].append((r, s))
            groups[(origin, "whole")].append((r, s))
            hit = not s.ok or s.value < 1.0
            dumped.append(
                {
                    "set": name,
                    "id": r["id"],
                    "part": part,
                    "label": r["label"],
                    "flagged": hit,
                    "unsupported": s.details.get("unsupported") if s.ok else None,
                }
            )
            if args.dev and part == "development" and hit:
                kind = "FALSE ALARM" if r["label"] == 1 else "caught"
                print(f"{kind} {name} {r['id']}: {s.details.get('evidence')}")
        order = {"development": 0, "held-out": 1, "whole": 2}
        for origin, part in sorted(groups, key=lambda k: (k[0], order[k[1]])):
            items = groups[(origin, part)]
            flagged = Counter()
            total = Counter()
            by_type: Counter = Counter()
            by_type_total: Counter = Counter()
            for r, s in items:
                hit = not s.ok or s.value < 1.0
                total[r["label"]] += 1
                flagged[r["label"]] += hit
                if r["label"] == 0 and r.get("error_type"):
                    by_type_total[r["error_type"]] += 1
                    by_type[r["error_type"]] += hit
            row = {
                "set": name,
                "origin": origin,
                "part": part,
                "faithful": total[1],
                "false_alarm": flagged[1] / total[1] if total[1] else None,
                "unfaithful": total[0],
                "caught": flagged[0] / total[0] if total[0] else None,
                "per_error_type": {
                    t: (by_type[t], by_type_total[t]) for t in sorted(by_type_total)
                },
                "seconds": round(seconds, 1),
                "examples": len(rows),
            }
            table.append(row)

    print("| set | origin | rows | faithful n | false alarms | unfaithful n | caught |")
    print("|---|---|---|---|---|---|---|")
    for row in table:
        fa = "-" if row["false_alarm"] is None else f"{row['false_alarm']:.1%}"
        ca = "-" if row["caught"] is None else f"{row['caught']:.1%}"
        print(
            f"| {row['set']} | {row['origin']} | {row['part']} | {row['faithful']} | {fa} "
            f"| {row['unfaithful']} | {ca} |"
        )
    for row in table:
        if row["per_error_type"]:
            print(f"\n{row['set']} ({row['origin']}, {row['part']}) caught per error type:")
            for t, (hit, n) in row["per_error_type"].items():
                print(f"  {t}: {hit}/{n} ({hit / n:.0%})")
    timed = set()
    for row in table:
        if row["set"] not in timed:
            timed.add(row["set"])
            ms = 1000 * row["seconds"] / max(1, row["examples"])
            print(
                f"{row['set']}: {row['examples']} examples in {row['seconds']} s ({ms:.0f} ms each)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1), encoding="utf-8")
    if args.rows:
        lines = (json.dumps(d, ensure_ascii=False) for d in dumped)
        Path(args.rows).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
