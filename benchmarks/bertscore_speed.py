"""faithgate's ``bertscore`` against ``bert_score`` 0.3.12, side by side in one process.

Same model (the ``embedder`` role: all-MiniLM-L6-v2, last layer), same BUMP task-1 items
(``--pairs`` minimal pairs, both summaries: 2 x pairs (source, summary) items), summary as
candidate and source as reference (the "_art" variant: precision = summary tokens matched in
the source). Contenders:

- ``bert_score`` 0.3.12 (``pip install bert-score==0.3.12``), ``BERTScorer(model_type=<the
  MiniLM directory>, num_layers=6)``: scores only, no per-sentence details; truncates sources
  at the tokenizer's limit (512 tokens);
- faithgate ``bertscore`` with torch, with the fp32 ONNX export and with each quantized export
  given by ``--onnx NAME=DIR``: per-sentence details and token matches included; sources
  longer than the encoder's 512-token window are embedded in overlapping windows.

Every round runs every contender once on all items, in a rotating order, after one untimed
warm-up each (model load, spaCy load); faithgate's spaCy caches are cleared before each timed
run, so parses are never reused across runs. Reported: median seconds over the rounds, per
item, and the ratio to ``bert_score``; plus agreement of faithgate's precision with
bert_score's P on the items whose source fits in one window (the others differ by design).

    nice -n 10 python benchmarks/bertscore_speed.py --pairs 50 --rounds 3 \\
        --onnx fp32=/tmp/fg-bench/embedder-none --onnx w8=/tmp/fg-bench/embedder-w8 \\
        --json /tmp/bertscore_speed.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bump_data import data_dir, load_pairs  # noqa: E402


def faithgate_runner(backend: str, model: str) -> tuple[Any, Any]:
    """(warm-up, timed run) callables scoring with faithgate's bertscore."""
    from faithgate import text as textmod
    from faithgate.scorer import Scorer
    from faithgate.types import Example

    scorer = Scorer(["bertscore"], backend=backend, models={"embedder": model})

    def run(items: list[tuple[str, str]]) -> list[float]:
        examples = [Example(str(i), src, summ) for i, (src, summ) in enumerate(items)]
        return [row["bertscore"].value for row in scorer.score(examples)]

    def timed(items: list[tuple[str, str]]) -> list[float]:
        textmod._parse_cached.cache_clear()
        if hasattr(textmod, "_sentences_cached"):
            textmod._sentences_cached.cache_clear()
        return run(items)

    return run, timed


def bert_score_runner(model: str, layers: int) -> tuple[Any, Any]:
    from bert_score import BERTScorer

    scorer = BERTScorer(model_type=model, num_layers=layers, batch_size=64)

    def run(items: list[tuple[str, str]]) -> list[float]:
        p, _, _ = scorer.score([s for _, s in items], [src for src, _ in items], verbose=False)
        return [float(v) for v in p]

    return run, run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", help="directory holding bump_task1.jsonl")
    ap.add_argument("--onnx", action="append", default=[], metavar="NAME=DIR",
                    help="an ONNX export of the embedder to time (repeatable)")  # fmt: skip
    ap.add_argument("--json", type=Path, help="write the timings here after every round")
    args = ap.parse_args()

    # faithgate first, as in any faithgate process: its import sets torch's OpenMP wait policy
    # (faithgate/threads.py) before torch loads, for every contender of this one process.
    from faithgate import models  # isort: skip

    import torch

    torch.set_num_threads(args.threads)
    pairs = load_pairs(data_dir(args.data), args.pairs)
    items = [(row["source"], row["summary"]) for pair in pairs for row in pair]
    model_dir = models.resolve("embedder").location
    layers = int(json.loads((Path(model_dir) / "config.json").read_text())["num_hidden_layers"])
    contenders: dict[str, tuple[Any, Any]] = {
        "bert_score 0.3.12 (torch)": bert_score_runner(model_dir, layers),
        "faithgate torch": faithgate_runner("torch", model_dir),
    }
    for spec in args.onnx:
        name, _, path = spec.partition("=")
        contenders[f"faithgate onnx {name}"] = faithgate_runner("onnx", path)
    values: dict[str, list[float]] = {}
    for name, (warm, _) in contenders.items():
        print(f"warm-up: {name}", file=sys.stderr, flush=True)
        warm(items[:4])
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]  # rotate: no fixed slot
        for name in order:
            t0 = time.perf_counter()
            values[name] = contenders[name][1](items)
            times[name].append(time.perf_counter() - t0)
            print(f"round {r + 1} {name}: {times[name][-1]:.1f} s", file=sys.stderr, flush=True)
        if args.json:
            args.json.write_text(json.dumps({"items": len(items), "times": times}, indent=1))

    # Items whose source fits one 512-token window: there both tools see the same tokens.
    from faithgate.backends import ModelPool

    enc = ModelPool({"embedder": model_dir}, backend="torch").get("embedder", "text-encoder")
    short = np.array([enc.count_tokens(src) <= enc.max_length - 2 for src, _ in items])
    ref = np.array(values["bert_score 0.3.12 (torch)"])
    base = statistics.median(times["bert_score 0.3.12 (torch)"])
    print(f"\n### bertscore speed: {len(items)} BUMP task-1 items ({args.pairs} minimal pairs), "
          f"{args.threads} threads, median of {args.rounds} rounds\n")  # fmt: skip
    print("| contender | s (median) | ms / item | speed vs bert_score | "
          f"max abs P diff vs bert_score ({int(short.sum())} unwindowed items) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    for name in names:
        med = statistics.median(times[name])
        diff = np.abs(np.array(values[name]) - ref)[short].max() if short.any() else float("nan")
        print(f"| {name} | {med:.1f} | {1000 * med / len(items):.0f} | {base / med:.2f}x "
              f"| {diff:.1e} |")  # fmt: skip


if __name__ == "__main__":
    main()
