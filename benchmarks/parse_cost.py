"""What spaCy parsing costs ``overlap`` and ``ner``: this checkout against another, side by side.

Each (metric, data set) is scored by two fresh processes, one per checkout, one after the other
in the same run (the machine's load changes; compare within a run): ``--old`` (default
``/work/main``, the code before batching) and this checkout. A process loads the metric,
scores 5 other examples to warm up (spaCy loaded), then scores the examples with the scorer's
cache off; the table gives CPU seconds (the process's own, less sensitive to other users of
the machine) and wall seconds per 1,000 examples, and whether both checkouts gave the same
values and sentences, bit for bit.

- ``tiny``: generated one-line examples (a two-sentence source, a one-sentence summary; every
  text distinct);
- ``news``: the first rows of SummEval (``$FAITHGATE_SHARED_DATA/summeval.jsonl``, CNN/DM
  articles, development data; each article repeats with ~16 summaries).

    python benchmarks/parse_cost.py                          # overlap, ner x tiny, news; 1,000
    python benchmarks/parse_cost.py --metric overlap --data tiny --n 50000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def tiny(n: int, offset: int = 0) -> list[tuple[str, str, str]]:
    return [
        (
            f"t{i}",
            f"The council approved plan {i} on Monday. It will cost {i * 7} dollars, officials said.",
            f"The council approved plan {i}.",
        )
        for i in range(offset, offset + n)
    ]


def news(n: int, offset: int = 0) -> list[tuple[str, str, str]]:
    data = Path(os.environ.get("FAITHGATE_SHARED_DATA", ROOT.parent / "shared" / "data"))
    rows = []
    with (data / "summeval.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            rows.append((row["id"], row["source"], row["summary"]))
    return rows[offset : offset + n]


def worker(metric: str, data: str, n: int, out: str) -> None:
    """Score in this process (whatever ``faithgate`` is on the path) and write figures."""
    from faithgate import Example, Scorer

    make = tiny if data == "tiny" else news
    scorer = Scorer([metric])
    warm = make(5, offset=n if data == "tiny" else 1595)
    scorer.score([Example(*row) for row in warm])
    examples = [Example(*row) for row in make(n)]
    cpu, wall = time.process_time(), time.perf_counter()
    scores = scorer.score(examples)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    digest = hashlib.sha256()
    for row in scores:
        s = row[metric]
        digest.update(repr((s.value, s.error, [(x.text, x.value) for x in s.sentences])).encode())
    Path(out).write_text(json.dumps({"cpu": cpu, "wall": wall, "digest": digest.hexdigest()}))


def run(code: Path, metric: str, data: str, n: int) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        env = {**os.environ, "PYTHONPATH": str(code)}
        cmd = [sys.executable, __file__, "--worker", metric, data, str(n), tmp.name]
        subprocess.run(cmd, env=env, check=True)
        return json.loads(Path(tmp.name).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default="/work/main", help="the checkout to compare with")
    parser.add_argument("--metric", action="append", choices=["overlap", "ner"])
    parser.add_argument("--data", action="append", choices=["tiny", "news"])
    parser.add_argument("--n", type=int, default=1000, help="examples per run")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        metric, data, n, out = args.worker
        worker(metric, data, int(n), out)
        return
    print(
        "| metric | data | n | old CPU s / 1k | new CPU s / 1k | CPU ratio | old wall s / 1k "
        "| new wall s / 1k | same scores |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for metric in args.metric or ["overlap", "ner"]:
        for data in args.data or ["tiny", "news"]:
            old = run(Path(args.old), metric, data, args.n)
            new = run(ROOT, metric, data, args.n)
            k = args.n / 1000
            print(
                f"| {metric} | {data} | {args.n} | {old['cpu'] / k:.2f} | {new['cpu'] / k:.2f} "
                f"| {old['cpu'] / new['cpu']:.1f}x | {old['wall'] / k:.2f} | {new['wall'] / k:.2f} "
                f"| {'yes' if old['digest'] == new['digest'] else 'NO'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
