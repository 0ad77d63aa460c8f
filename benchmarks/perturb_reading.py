"""A blind reading sample of perturb's edits, and its tally once a reader has labelled it.

    python benchmarks/perturb_reading.py sample --out DIR [--types predicate_verb] [--rules 2 3]
        [--seed 4421] [--summaries 300] [--exclude OLD_DIR/key.json ...]
    python benchmarks/perturb_reading.py tally --dir DIR [--labels DIR/labels*.jsonl]

``sample`` takes the distinct faithful summaries (label 1) of the six development sets of the
shared data (BUMP task 1 left out), shuffles them with ``--seed``, drops those named in earlier
samples' ``key.json`` (``--exclude``), and makes one edit per type (``seed=0``) of the first
``--summaries`` with each rules revision asked for. An edit made by several revisions is read
once. It writes ``DIR/to_read.jsonl`` (id, source, summary, edited, original, replacement: what
the reader sees, nothing about the revision) and ``DIR/key.json`` (which revision and type made
each id). A reader labels each line "valid" (a grammatical, plausible claim the source does not
support), "garbage" (ungrammatical or nonsensical: fluency alone gives it away) or "still_true"
(the source supports it), one JSON line per id: ``{"id": ..., "label": ..., "why": ...}``.

``tally`` prints, per revision and edit type, the count of each label.

The figures of README.md's perturb paragraph came from two samples drawn this way (by an
earlier one-off form of this script: the same sets, seeds and counts, ``--types
predicate_verb``, which also left out the 150 summaries read while the rules were written, so
its ids differ): ``--rules 2 3 --seed 2311 --summaries 200`` (rules 3: 51 of 73 valid, rules 2:
29 of 128), then, after the last rules-3 fixes, ``--rules 3 --seed 4421 --summaries 300``
excluding the first (47 of 64), each read by helpers blind to the revision.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import sys
from collections import Counter
from pathlib import Path

from faithgate.perturb import perturb

SETS = ("summeval", "polytope", "cogensumm", "qags", "factcc_subset", "falke2019")


def data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    env = os.environ.get("FAITHGATE_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def faithful_rows(data: Path) -> list[tuple[str, dict]]:
    rows = []
    for name in SETS:
        seen = set()
        with open(data / f"{name}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                key = (row["source"], row["summary"])
                if row.get("label") == 1 and key not in seen:
                    seen.add(key)
                    rows.append((name, row))
    return rows


def sample(args: argparse.Namespace) -> int:
    rows = faithful_rows(data_dir(args.data))
    random.Random(args.seed).shuffle(rows)
    read = set()
    for path in args.exclude:
        read |= {(k["source"], k["summary"]) for k in json.loads(Path(path).read_text())}
    rows = [r for r in rows if (r[1]["source"], r[1]["summary"]) not in read]
    merged: dict[tuple[str, str], dict] = {}
    for name, row in rows[: args.summaries]:
        for rules in args.rules:
            for p in perturb(row["source"], row["summary"], types=args.types, seed=0, rules=rules):
                item = merged.setdefault(
                    (row["summary"], p.summary),
                    {
                        "set": name,
                        "source": row["source"],
                        "summary": row["summary"],
                        "edited": p.summary,
                        "original": p.original,
                        "replacement": p.replacement,
                        "start": p.start,
                        "type": p.type,
                        "rules": [],
                    },
                )
                item["rules"].append(rules)
    items = list(merged.values())
    random.Random(args.seed).shuffle(items)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shown = ("id", "source", "summary", "edited", "original", "replacement")
    for i, item in enumerate(items):
        item["id"] = f"v{i:03d}"
    (out / "key.json").write_text(json.dumps(items, indent=1), encoding="utf-8")
    with open(out / "to_read.jsonl", "w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps({k: item[k] for k in shown}) + "\n")
    print(f"{len(items)} edits: {dict(Counter(tuple(i['rules']) for i in items))}")
    return 0


def tally(args: argparse.Namespace) -> int:
    key = {k["id"]: k for k in json.loads((Path(args.dir) / "key.json").read_text())}
    labels = {}
    for path in args.labels or sorted(glob.glob(str(Path(args.dir) / "labels*.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                labels[row["id"]] = row["label"]
    missing = sorted(set(key) - set(labels))
    if missing:
        print(f"unlabelled: {len(missing)} ids, e.g. {missing[:5]}", file=sys.stderr)
    revisions = sorted({r for k in key.values() for r in k["rules"]})
    for rules in revisions:
        ids = [i for i, k in key.items() if rules in k["rules"] and i in labels]
        count = Counter(labels[i] for i in ids)
        share = count["valid"] / len(ids) if ids else float("nan")
        print(f"rules {rules}: {len(ids)} edits, {dict(count)}, valid {share:.0%}")
        for kind in sorted({key[i]["type"] for i in ids}):
            by_type = Counter(labels[i] for i in ids if key[i]["type"] == kind)
            print(f"  {kind}: {dict(by_type)}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--out", required=True)
    s.add_argument("--data")
    s.add_argument("--types", nargs="+", default=None)
    s.add_argument("--rules", nargs="+", type=int, default=[3])
    s.add_argument("--seed", type=int, default=4421)
    s.add_argument("--summaries", type=int, default=300)
    s.add_argument("--exclude", nargs="*", default=[])
    t = sub.add_parser("tally")
    t.add_argument("--dir", required=True)
    t.add_argument("--labels", nargs="*")
    args = ap.parse_args()
    return sample(args) if args.command == "sample" else tally(args)


if __name__ == "__main__":
    sys.exit(main())
