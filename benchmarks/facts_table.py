"""False alarms and catches of the ``facts`` metric on the public labelled sets.

For each data set (split by origin where it mixes CNN/DM and XSum): the share of faithful
summaries (label 1) that ``facts`` flags (value < 1: at least one unsupported number, date or
name), which is its false-alarm rate as a gate with threshold 1.0, and the share of unfaithful
summaries (label 0) it flags, which is what it catches alone. BUMP's repeated reference rows
are counted once; its catches are also given per error type. ``--dev`` lists the unsupported
facts of the false alarms of one set (the development set), for reading, not for the table.

    FAITHGATE_SHARED_DATA=../shared/data python benchmarks/facts_table.py [--sets a,b] [--dev NAME]

Development data: ``cogensumm`` (and the hand-written cases of
``tests/unit/test_facts_metric.py``); every other set is reported only.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

from faithgate.scorer import Scorer
from faithgate.types import Example

SETS = ("cogensumm", "summeval", "polytope", "factcc_subset", "falke2019", "qags", "bump_task1")
DEV = "cogensumm"


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
    ap.add_argument("--dev", default=None, help="print the false alarms of this set")
    ap.add_argument("--json", default=None, help="write the table as JSON here")
    args = ap.parse_args()
    data = Path(os.environ.get("FAITHGATE_SHARED_DATA", "../shared/data"))
    scorer = Scorer(["facts"])
    table = []
    for name in args.sets.split(","):
        rows = load(data / f"{name}.jsonl")
        examples = [Example(r["id"], r["source"], r["summary"]) for r in rows]
        start = time.perf_counter()
        scores = [s["facts"] for s in scorer.score(examples)]
        seconds = time.perf_counter() - start
        groups: dict[str, list[tuple[dict, object]]] = defaultdict(list)
        for r, s in zip(rows, scores, strict=True):
            groups[r.get("origin") or "all"].append((r, s))
        for origin, items in sorted(groups.items()):
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
                if name == args.dev and r["label"] == 1 and hit:
                    print(f"FALSE ALARM {r['id']}: {s.details.get('unsupported')}")
            row = {
                "set": name,
                "origin": origin,
                "role": "development" if name == DEV else "reported",
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

    print("| set | origin | data role | faithful n | false alarms | unfaithful n | caught |")
    print("|---|---|---|---|---|---|---|")
    for row in table:
        fa = "-" if row["false_alarm"] is None else f"{row['false_alarm']:.1%}"
        ca = "-" if row["caught"] is None else f"{row['caught']:.1%}"
        print(
            f"| {row['set']} | {row['origin']} | {row['role']} | {row['faithful']} | {fa} "
            f"| {row['unfaithful']} | {ca} |"
        )
    for row in table:
        if row["per_error_type"]:
            print(f"\n{row['set']} ({row['origin']}) caught per error type:")
            for t, (hit, n) in row["per_error_type"].items():
                print(f"  {t}: {hit}/{n} ({hit / n:.0%})")
    for row in table:
        print(f"{row['set']}: {row['examples']} examples scored in {row['seconds']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
