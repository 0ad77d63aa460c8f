"""Benchmark a checker on data it was not trained on, for a checker trained with ``--labelled``.

    python benchmarks/checker_heldout.py --out-dir DIR [--trained-on summeval ...] -- BENCH ARGS

``faithgate train --labelled FILE --labelled-dev-fraction F --seed S`` holds out a seeded share
``F`` of each labelled file's source documents (``dataset.is_held_out`` on the document key). This
script writes, for every file the checker was trained on, the rows of its held-out documents to
``DIR/<name>.jsonl``; files it was not trained on (BUMP task 1 above all, which is evaluation data
only) are used whole. Then it runs ``faithgate bench`` over those files with the arguments after
``--`` (metrics, ``--model nli=...``, ``--limit``, ``--json``, ...), so every figure comes from
documents the checker never saw.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bump_data import data_dir  # noqa: E402

from faithgate.io import read_jsonl_rows  # noqa: E402
from faithgate.training.corpora import LabelledSummary  # noqa: E402
from faithgate.training.dataset import is_held_out  # noqa: E402

TRAINED_ON = ("summeval", "falke2019", "cogensumm", "factcc_subset")


def held_out_rows(path: Path, fraction: float, seed: int) -> list[dict]:
    """Rows of ``path`` whose source document falls in the held-out split."""
    rows = []
    for _, row in read_jsonl_rows(path):
        key = LabelledSummary("", row["source"], row["summary"], True).document_key
        if is_held_out(key, fraction, seed):
            rows.append(row)
    return rows


def main() -> None:
    argv = sys.argv[1:]
    bench_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="shared data directory (default: ../shared/data)")
    ap.add_argument("--out-dir", required=True, type=Path)
    ap.add_argument("--trained-on", action="append", help=f"default: {' '.join(TRAINED_ON)}")
    ap.add_argument("--fraction", type=float, default=0.5, help="--labelled-dev-fraction used")
    ap.add_argument("--seed", type=int, default=0, help="the training --seed")
    args = ap.parse_args(argv)
    trained_on = set(args.trained_on or TRAINED_ON)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for path in sorted(data_dir(args.data).glob("*.jsonl")):
        if path.stem in trained_on:
            rows = held_out_rows(path, args.fraction, args.seed)
            target = args.out_dir / path.name
            target.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            print(f"{path.stem}: {len(rows)} held-out rows -> {target}", file=sys.stderr)
            files.append(target)
        else:
            print(f"{path.stem}: not trained on, used whole", file=sys.stderr)
            files.append(path)
    cmd = ["faithgate", "bench", *[a for f in files for a in ("--data", str(f))], *bench_args]
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":
    main()
