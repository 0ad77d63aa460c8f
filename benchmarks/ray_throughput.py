"""Throughput of the local executor vs the Ray executor with 1 and 2 workers, same items.

The same ``--items`` BUMP task-1 rows (file order: about 12 summaries per article, so
document-prefix grouping matters) are scored by

- ``local``: ``LocalExecutor`` in this process;
- ``ray-1`` / ``ray-N``: ``RayExecutor`` on a local Ray runtime (``ray.init(num_cpus=...)``)
  with 1 and ``--workers`` actors, ``--batch-size`` examples per task.

Each contender first scores a few warm-up rows that are not in the timed set (model loads,
spaCy load; for Ray: every actor gets a warm-up batch), then the timed set once. Run with
``OMP_NUM_THREADS=1`` so the local executor uses one thread like each Ray actor (Ray sets
``OMP_NUM_THREADS`` to an actor's ``num_cpus``): the per-worker rate is then comparable.

Overhead per batch, two ways: (a) ``(t_ray1 - t_local) / batches`` (everything Ray adds on one
worker: dispatch, pickling examples and scores, the driver's bookkeeping); (b) the median
round trip of a batch with nothing to compute (``todo`` empty) sent to a warm actor.
Scores of every contender are compared cell by cell with the local ones (bit for bit).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/ray_throughput.py --items 200 \\
        --metric sentsim --json /tmp/ray_throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bump_data import data_dir  # noqa: E402

from faithgate.io import load_examples  # noqa: E402
from faithgate.scoring.execution import ExecutionSettings, LocalExecutor, ScorerRecipe  # noqa: E402
from faithgate.scoring.ray_executor import RayExecutor, source_batches  # noqa: E402
from faithgate.types import Example, Score  # noqa: E402


def _data(rows: list[dict[str, Score]]) -> list[dict[str, Any]]:
    return [{k: s.to_dict() for k, s in r.items()} for r in rows]


def _run_ray(
    ray: Any,
    recipe: ScorerRecipe,
    workers: int,
    batch_size: int,
    warm: list[Example],
    items: list[Example],
    roundtrips: int,
) -> dict[str, Any]:
    ex = RayExecutor(
        recipe, ExecutionSettings(executor="ray", num_workers=workers, batch_size=batch_size)
    )
    try:
        t0 = time.perf_counter()
        ex.score(warm)
        warm_s = time.perf_counter() - t0
        stats0 = dict(ex.stats)
        t0 = time.perf_counter()
        rows = ex.score(items)
        seconds = time.perf_counter() - t0
        batches = ex.stats["batches"] - stats0["batches"]
        # Round trip of a batch with nothing to compute: pickling + dispatch + return.
        probe = items[:batch_size]
        trips = []
        for _ in range(roundtrips):
            t0 = time.perf_counter()
            ray.get(ex.actors[0].score.remote(probe, {}))
            trips.append(time.perf_counter() - t0)
        return {
            "workers": workers,
            "seconds": seconds,
            "items_per_s": len(items) / seconds,
            "batches": batches,
            "warmup_s": warm_s,
            "roundtrip_ms": 1000 * statistics.median(trips),
            "passes": ex.stats["passes"] - stats0["passes"],
            "rows": rows,
        }
    finally:
        ex.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--metric", action="append", help="metric (repeatable; default sentsim)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray runtime")
    ap.add_argument("--roundtrips", type=int, default=20)
    ap.add_argument("--data", metavar="DIR", help="directory of bump_task1.jsonl")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)

    import ray

    metrics = tuple(args.metric or ["sentsim"])
    recipe = ScorerRecipe(metrics)
    rows = load_examples(data_dir(args.data) / "bump_task1.jsonl")
    items = rows[: args.items]
    warm_n = max(4, args.workers * args.batch_size)
    warm = [Example(f"warm{i}", e.source, e.summary) for i, e in enumerate(rows[-warm_n:])]

    local = LocalExecutor(recipe)
    t0 = time.perf_counter()
    local.score(warm)
    local_warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    local_rows = local.score(items)
    t_local = time.perf_counter() - t0
    want = _data(local_rows)
    del local

    # A loaded machine can take longer than Ray's defaults to bring its raylet up.
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    os.environ.setdefault("RAY_agent_register_timeout_ms", "180000")
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    try:
        runs = [
            _run_ray(ray, recipe, 1, args.batch_size, warm, items, args.roundtrips),
            _run_ray(ray, recipe, args.workers, args.batch_size, warm, items, args.roundtrips),
        ]
    finally:
        ray.shutdown()

    n_batches = len(source_batches(items, {m: range(len(items)) for m in metrics}, args.batch_size))
    print(
        f"{len(items)} BUMP items, metrics {', '.join(metrics)}, batch size {args.batch_size} "
        f"({n_batches} source-grouped batches)"
    )
    print(f"{'executor':<10} {'seconds':>8} {'items/s':>8} {'vs local':>8}  identical")
    print(f"{'local':<10} {t_local:8.1f} {len(items) / t_local:8.2f} {1.0:8.2f}  -")
    result: dict[str, Any] = {
        "items": len(items),
        "metrics": list(metrics),
        "batch_size": args.batch_size,
        "batches": n_batches,
        "local": {"seconds": t_local, "items_per_s": len(items) / t_local, "warmup_s": local_warm},
    }
    for run in runs:
        same = _data(run.pop("rows")) == want
        name = f"ray-{run['workers']}"
        print(
            f"{name:<10} {run['seconds']:8.1f} {run['items_per_s']:8.2f} "
            f"{t_local / run['seconds']:8.2f}  {'yes' if same else 'NO'}"
        )
        result[name] = {**run, "identical": same}
    one = result["ray-1"]
    per_batch = (one["seconds"] - t_local) / one["batches"]
    print(
        f"overhead per batch: {1000 * per_batch:.0f} ms from ray-1 vs local; "
        f"{one['roundtrip_ms']:.1f} ms round trip of an empty batch of {args.batch_size}"
    )
    result["overhead_per_batch_ms"] = 1000 * per_batch
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
