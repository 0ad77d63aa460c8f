"""BUMP task-1 data for the benchmark scripts: where it is, and its minimal pairs."""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path


def data_dir(arg: str | None) -> Path:
    """``--data``, else ``$FAITHGATE_SHARED_DATA``, else ``../shared/data`` beside the repo."""
    env = os.environ.get("FAITHGATE_SHARED_DATA")
    path = Path(arg or env or Path(__file__).resolve().parents[2] / "shared" / "data")
    if not (path / "bump_task1.jsonl").is_file():
        sys.exit(f"bump_task1.jsonl not found under {path} (set FAITHGATE_SHARED_DATA)")
    return path


def load_pairs(path: Path, limit: int | None) -> list[tuple[dict, dict]]:
    """(reference row, edited row) per minimal pair, in file order; the first ``limit``."""
    rows = [json.loads(x) for x in (path / "bump_task1.jsonl").open(encoding="utf-8") if x.strip()]
    by_pair: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        by_pair[r["pair_id"]][r["role"]] = r
    pairs = [(p["reference"], p["edited"]) for p in by_pair.values()]
    return pairs[:limit] if limit else pairs
