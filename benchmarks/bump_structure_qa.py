"""BUMP task-1 consistency and ROC AUC per error type for qgqa, feqa, frames and triples with
the offline defaults, and seconds per pair.

Consistency (Ma et al., 2023, "BUMP: A Benchmark of Unfaithful Minimal Pairs"): the share of
minimal pairs whose reference summary scores strictly higher than its edited twin (ties and
unscorable rows count as failures). ROC AUC per error type: the pairs of that type, reference
rows labelled 1 and edited rows 0, each distinct (source, summary) counted once, unscorable
rows left out (their number is printed).

    nice -n 5 python benchmarks/bump_structure_qa.py --limit 50
    nice -n 5 python benchmarks/bump_structure_qa.py --metrics frames,triples      # all pairs
    python benchmarks/bump_structure_qa.py --report-only                         # table again

Scores are appended pair by pair to ``--scores`` (JSON Lines), so a long run can be stopped
and resumed, and the table printed from whatever has finished. Seconds per pair = wall time
of scoring a pair's not-yet-scored rows (models already loaded) averaged over pairs; the QA
metrics share one analysis, so ``qgqa+feqa`` is timed together. Data: ``$FAITHGATE_SHARED_DATA``
or ``../shared/data`` beside the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from bump_data import data_dir, load_pairs

from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

KNOWN = ("qgqa", "feqa", "frames", "triples")


def parse_spec(spec: str) -> tuple[str, str, dict]:
    """``"frames:component=recall,sim=token_f1"`` -> (label, metric, settings)."""
    name, _, rest = spec.partition(":")
    settings: dict = {}
    for item in filter(None, rest.split(";")):
        key, _, value = item.partition("=")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    return spec, name, settings


def group_of(label: str) -> str:
    # The QA metrics share one analysis (questions and answers): timed together.
    return "qgqa+feqa" if label in ("qgqa", "feqa") else label


def row_key(row: dict) -> str:
    return hashlib.sha256((row["source"] + "\x00" + row["summary"]).encode()).hexdigest()[:16]


def read_scores(path: Path) -> tuple[dict[tuple[str, str], float], dict[str, list[float]]]:
    values: dict[tuple[str, str], float] = {}
    seconds: dict[str, list[float]] = defaultdict(list)
    if path.is_file():
        for line in path.open(encoding="utf-8"):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a run killed mid-line: that row is redone
                continue
            if "seconds" in rec:
                seconds[rec["group"]].append(rec["seconds"])
            else:
                v = rec["value"]
                values[(rec["metric"], rec["key"])] = float("nan") if v is None else float(v)
    return values, seconds


def run(pairs, metrics: list[str], scores_path: Path, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    values, _ = read_scores(scores_path)
    groups: dict[str, list[str]] = defaultdict(list)
    for m in metrics:
        groups[group_of(m)].append(m)
    scorers = {}
    for g, labels in groups.items():
        specs = [parse_spec(label) for label in labels]
        scorers[g] = Scorer(
            [name for _, name, _ in specs],
            metric_settings={name: st for _, name, st in specs if st},
            model_options={"lm": {"threads": threads}},
        )
    # Load every model before timing.
    for scorer in scorers.values():
        scorer.score([Example("warmup", "Alice met Bob in Paris.", "Alice met Bob.")])
    scores_path.parent.mkdir(parents=True, exist_ok=True)
    with scores_path.open("a", encoding="utf-8") as out:
        for n, (ref, edit) in enumerate(pairs, 1):
            for group, ms in groups.items():
                todo = [r for r in (ref, edit) if any((m, row_key(r)) not in values for m in ms)]
                todo = list({row_key(r): r for r in todo}.values())
                if not todo:
                    continue
                start = time.perf_counter()
                results = scorers[group].score(
                    [Example(r["id"], r["source"], r["summary"]) for r in todo]
                )
                elapsed = time.perf_counter() - start
                for r, res in zip(todo, results, strict=True):
                    for m in ms:
                        s = res[parse_spec(m)[1]]
                        values[(m, row_key(r))] = s.value
                        rec = {"metric": m, "key": row_key(r), "id": r["id"]}
                        rec["value"] = None if math.isnan(s.value) else s.value
                        if s.error:
                            rec["error"] = s.error
                        out.write(json.dumps(rec) + "\n")
                out.write(
                    json.dumps({"group": group, "pair": ref["pair_id"], "seconds": elapsed}) + "\n"
                )
                out.flush()
            if n % 10 == 0:
                print(f"  {n}/{len(pairs)} pairs", file=sys.stderr, flush=True)


def roc_auc(refs: list[float], edits: list[float], ref_keys: list[str], edit_keys: list[str]):
    from sklearn.metrics import roc_auc_score

    seen, s, y = set(), [], []
    for vals, keys, label in ((refs, ref_keys, 1), (edits, edit_keys, 0)):
        for v, k in zip(vals, keys, strict=True):
            if k in seen or math.isnan(v):
                continue
            seen.add(k)
            s.append(v)
            y.append(label)
    return float(roc_auc_score(y, s)) if len(set(y)) == 2 else float("nan")


def report(pairs, metrics: list[str], scores_path: Path) -> str:
    values, seconds = read_scores(scores_path)
    lines = []
    per_type: dict[str, dict[str, tuple]] = defaultdict(dict)
    header = "| metric | pairs scored | consistency | ROC AUC | unscorable rows | s / pair |"
    lines += [header, "|---|---|---|---|---|---|"]
    for m in metrics:
        done = [(r, e) for r, e in pairs if (m, row_key(r)) in values and (m, row_key(e)) in values]
        if not done:
            continue
        ref_v = [values[(m, row_key(r))] for r, _ in done]
        edit_v = [values[(m, row_key(e))] for _, e in done]
        wins = [1.0 if (a > b) else 0.0 for a, b in zip(ref_v, edit_v, strict=True)]
        auc = roc_auc(ref_v, edit_v, [row_key(r) for r, _ in done], [row_key(e) for _, e in done])
        keys = {row_key(x) for p in done for x in p}
        failed = sum(1 for k in keys if math.isnan(values[(m, k)]))
        secs = seconds.get(group_of(m), [])
        n_timed = len(secs)
        spp = f"{sum(secs) / n_timed:.2f}" if n_timed else "n/a"
        lines.append(
            f"| {m} | {len(done)} | {np.mean(wins):.3f} | {auc:.3f} | {failed}/{len(keys)} "
            f"| {spp} ({group_of(m)}) |"
        )
        by_type: dict[str, list] = defaultdict(list)
        for (r, e), a, b in zip(done, ref_v, edit_v, strict=True):
            by_type[e["error_type"]].append((r, e, a, b))
        for t, items in by_type.items():
            cons = float(np.mean([1.0 if a > b else 0.0 for _, _, a, b in items]))
            auc_t = roc_auc(
                [a for *_, a, _ in items],
                [b for *_, b in items],
                [row_key(r) for r, *_ in items],
                [row_key(e) for _, e, *_ in items],
            )
            per_type[t][m] = (len(items), cons, auc_t)
    lines += ["", "Per error type: consistency / ROC AUC (pairs)", ""]
    lines.append("| error type | " + " | ".join(metrics) + " |")
    lines.append("|---|" + "---|" * len(metrics))
    for t in sorted(per_type):
        cells = []
        for m in metrics:
            if m in per_type[t]:
                n, c, a = per_type[t][m]
                cells.append(f"{c:.3f} / {a:.3f} ({n})")
            else:
                cells.append("-")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="first N minimal pairs (default all)")
    ap.add_argument(
        "--metrics",
        default="qgqa,feqa,frames,triples",
        help="comma-separated; settings as frames:component=recall;sim=token_f1",
    )
    ap.add_argument("--data", default=None)
    ap.add_argument(
        "--scores",
        default=str(Path(os.environ.get("TMPDIR", "/tmp")) / "faithgate_bump_structure_qa.jsonl"),
        help="JSON Lines file the scores are appended to (resumable)",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared CPU)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args()
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    unknown = {parse_spec(m)[1] for m in metrics} - set(KNOWN)
    if unknown:
        sys.exit(f"unknown metric(s): {', '.join(sorted(unknown))}")
    pairs = load_pairs(data_dir(args.data), args.limit)
    scores_path = Path(args.scores)
    if not args.report_only:
        run(pairs, metrics, scores_path, args.threads)
    print(report(pairs, metrics, scores_path))


if __name__ == "__main__":
    main()
