"""Token surprise against the LM's own confidence: does it find unsupported words? (issue 11)

An edited fact is a token the document makes the LM *confident* about and the summary
contradicts (high surprise, low entropy); a faithful paraphrase is surprising where the LM is
unsure (high entropy). So per summary token t, under SmolLM2 with the source as prompt
(``X \\nTL;DR:\\n Y``, the likelihood engine's prompt), this reads

- lp_t = log p(y_t | X, y_<t), H_t the entropy of p(. | X, y_<t), top_t the log-probability of
  its argmax, and lp0_t = log p(y_t | y_<t) without the source;

and ``report`` scores summaries with fixed aggregations, written down before any figure:
``loglik`` = mean lp (the baseline), ``xs_*`` = -(max | mean of top 3 | mean) of the excess
surprise -lp_t - H_t, ``margin_*`` = the same of top_t - lp_t, ``pmi_min3`` = mean of the three
lowest lp_t - lp0_t; ROC AUC per file (label 1 = faithful).

    python benchmarks/token_surprise.py extract ../shared/data/falke2019.jsonl --limit 150 --out F.jsonl
    python benchmarks/token_surprise.py report F.jsonl G.jsonl ... [--pairs ../shared/data/bump_task1.jsonl]

``extract`` takes a seeded (0) sample of ``--limit`` distinct labelled rows, appends one JSON line per
summary and skips ids already in ``--out`` (re-run it after a cut). torch, CPU, 2 threads.
Nothing here ships: the figures are in docs/metrics/likelihood.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

SEPARATOR = "\nTL;DR:\n"
SOURCE_TOKENS, SUMMARY_TOKENS = 1800, 200


def extract(path: Path, limit: int, out: Path, model_dir: str | None) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from faithgate import models

    torch.set_num_threads(2)
    location = model_dir or str(models.resolve("lm").location)
    tok = AutoTokenizer.from_pretrained(location)
    lm = AutoModelForCausalLM.from_pretrained(location, dtype=torch.float32).eval()
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    # Labelled rows, each (source, summary) once (BUMP repeats its references).
    rows = list(
        {(r["source"], r["summary"]): r for r in rows if r.get("label") is not None}.values()
    )
    random.Random(0).shuffle(rows)
    done = set()
    if out.is_file():
        done = {json.loads(line)["id"] for line in out.open(encoding="utf-8")}
    by_source: dict[str, list[dict]] = {}
    for row in rows[:limit]:
        if row["id"] not in done:
            by_source.setdefault(row["source"], []).append(row)
    bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
    sep = tok(SEPARATOR, add_special_tokens=False).input_ids

    def token_figures(logits, ids):  # type: ignore[no-untyped-def]
        lp = torch.log_softmax(logits.float(), -1)
        target = lp.gather(-1, ids[:, None])[:, 0]
        entropy = -(lp.exp() * lp).sum(-1)
        return target.numpy(), entropy.numpy(), lp.max(-1).values.numpy()

    start, n = time.time(), 0
    with out.open("a", encoding="utf-8") as fh, torch.no_grad():
        for source, items in by_source.items():
            x = tok(source, add_special_tokens=False).input_ids[:SOURCE_TOKENS]
            prefix = bos + x + sep
            cached = lm(torch.tensor([prefix[:-1]]), use_cache=True)
            for row in items:
                y = tok(row["summary"], add_special_tokens=False).input_ids[:SUMMARY_TOKENS]
                past = copy.deepcopy(cached.past_key_values)
                logits = lm(torch.tensor([[prefix[-1], *y]]), past_key_values=past).logits[0, :-1]
                lp, ent, top = token_figures(logits, torch.tensor(y))
                bare = lm(torch.tensor([bos + sep + y])).logits[0, len(bos) + len(sep) - 1 : -1]
                lp0, _, _ = token_figures(bare, torch.tensor(y))
                record = {
                    "id": row["id"],
                    "dataset": row.get("dataset"),
                    "label": row["label"],
                    "lp": lp.round(4).tolist(),
                    "ent": ent.round(4).tolist(),
                    "top": top.round(4).tolist(),
                    "lp0": lp0.round(4).tolist(),
                }
                fh.write(json.dumps(record) + "\n")
                n += 1
            fh.flush()
            print(f"{n} summaries, {time.time() - start:.0f} s", file=sys.stderr, flush=True)


def _top_mean(values: np.ndarray, k: int) -> float:
    return float(np.mean(np.sort(values)[::-1][:k])) if len(values) else 0.0


AGGREGATIONS = {
    "loglik": lambda r: float(np.mean(r["lp"])),
    "pmi_min3": lambda r: -_top_mean(-(np.array(r["lp"]) - np.array(r["lp0"])), 3),
    "xs_max": lambda r: -float(np.max(-np.array(r["lp"]) - np.array(r["ent"]))),
    "xs_top3": lambda r: -_top_mean(-np.array(r["lp"]) - np.array(r["ent"]), 3),
    "xs_mean": lambda r: -float(np.mean(-np.array(r["lp"]) - np.array(r["ent"]))),
    "margin_max": lambda r: -float(np.max(np.array(r["top"]) - np.array(r["lp"]))),
    "margin_top3": lambda r: -_top_mean(np.array(r["top"]) - np.array(r["lp"]), 3),
    "margin_mean": lambda r: -float(np.mean(np.array(r["top"]) - np.array(r["lp"]))),
}


def _pairs(data: Path, records: dict[str, dict]) -> list[tuple[dict, dict]]:
    """(reference, edited) records of each minimal pair of ``data`` (BUMP: ``pair_id`` and
    ``role``), matched by text, since ``extract`` keeps each (source, summary) once."""
    rows = [json.loads(line) for line in data.open(encoding="utf-8") if line.strip()]
    by_text = {}
    for row in rows:
        if row["id"] in records:
            by_text[(row["source"], row["summary"])] = records[row["id"]]
    refs = {r["pair_id"]: r for r in rows if r.get("role") == "reference"}
    pairs = []
    for row in rows:
        ref = refs.get(row.get("pair_id"))
        if row.get("role") == "edited" and ref is not None:
            a = by_text.get((ref["source"], ref["summary"]))
            b = by_text.get((row["source"], row["summary"]))
            if a is not None and b is not None:
                pairs.append((a, b))
    return pairs


def report(paths: list[Path], pairs_data: Path | None = None) -> None:
    from faithgate.evaluation.meta import roc_auc

    table: dict[str, dict[str, float]] = {}
    for path in paths:
        rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
        rows = [r for r in rows if r["lp"]]
        labels = [int(r["label"]) for r in rows]
        table[path.stem] = {
            name: roc_auc([fn(r) for r in rows], labels) for name, fn in AGGREGATIONS.items()
        }
        table[path.stem]["n"] = len(rows)
        if pairs_data is not None:
            pairs = _pairs(pairs_data, {r["id"]: r for r in rows})
            print(f"{path.stem}: {len(pairs)} minimal pairs; consistency (ties fail):")
            for name, fn in AGGREGATIONS.items():
                won = np.mean([fn(a) > fn(b) for a, b in pairs]) if pairs else float("nan")
                print(f"  {name:12s} {won:.3f}")
    names = list(table)
    print("| aggregation | " + " | ".join(names) + " | mean |")
    print("|---|" + "---:|" * (len(names) + 1))
    for agg in AGGREGATIONS:
        values = [table[n][agg] for n in names]
        cells = " | ".join(f"{v:.3f}" for v in values)
        print(f"| `{agg}` | {cells} | {np.mean(values):.3f} |")
    print("| n | " + " | ".join(str(int(table[n]["n"])) for n in names) + " | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract")
    ex.add_argument("data", type=Path)
    ex.add_argument("--limit", type=int, default=150)
    ex.add_argument("--out", type=Path, required=True)
    ex.add_argument("--model", help="lm directory (default: the lm role's offline model)")
    rep = sub.add_parser("report")
    rep.add_argument("files", type=Path, nargs="+")
    rep.add_argument("--pairs", type=Path, help="the data file, for BUMP's pair consistency")
    args = ap.parse_args()
    if args.command == "extract":
        extract(args.data, args.limit, args.out, args.model)
    else:
        report(args.files, args.pairs)


if __name__ == "__main__":
    main()
