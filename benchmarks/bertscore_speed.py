"""faithgate's ``bertscore`` against the ``bert_score`` package, side by side in one process.

Same model (the ``embedder`` role: all-MiniLM-L6-v2, last layer), same BUMP task-1 items
(``--pairs`` minimal pairs, both summaries: 2 x pairs (source, summary) items), summary as
candidate and source as reference (the "_art" variant: precision = summary tokens matched in
the source). Contenders:

- ``bert_score`` (0.3.13: ``pip install bert-score==0.3.13``, in the dev extra),
  ``BERTScorer(model_type=<the MiniLM directory>, num_layers=6, batch_size=64)``: scores only,
  no per-sentence details; truncates sources at the tokenizer's limit (512 tokens);
- faithgate ``bertscore`` with torch, and with each ONNX export given by ``--onnx NAME=DIR``
  (default: the export ``faithgate export embedder`` left in the cache, if any):
  per-sentence details and token matches included; sources longer than the encoder's
  512-token window are embedded in overlapping windows.

Every round runs every contender once on all items, in a rotating order, after one untimed
warm-up each (model load, spaCy load); faithgate's spaCy caches are cleared before each timed
run, so parses are never reused across runs. Reported, as a Markdown table headed by the date
and ``lscpu``'s CPU model: the best (least) seconds over the rounds, per item, and the ratio to
``bert_score`` (a ratio within one run: fair on a machine shared with other work), and the
same for the process's CPU seconds (all threads: the work done, which load changes less); plus the
largest difference of faithgate's precision from bert_score's P on the items whose source fits
in one window (the others differ by design).

``--torch-first`` imports torch before faithgate, as a script that imports ``bert_score``
first does: faithgate's thread and MKL settings (faithgate/threads.py) then come too late.

    python benchmarks/bertscore_speed.py --pairs 60 --rounds 2 --onnx w8=/tmp/emb-onnx
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
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
    from faithgate.scoring.scorer import Scorer
    from faithgate.types import Example

    scorer = Scorer(["bertscore"], backend=backend, models={"embedder": model})

    def run(items: list[tuple[str, str]]) -> list[float]:
        examples = [Example(str(i), src, summ) for i, (src, summ) in enumerate(items)]
        return [row["bertscore"].value for row in scorer.score(examples)]

    def timed(items: list[tuple[str, str]]) -> list[float]:
        textmod.clear_caches()
        return run(items)

    return run, timed


def bert_score_runner(model: str, layers: int) -> tuple[Any, Any]:
    from bert_score import BERTScorer

    scorer = BERTScorer(model_type=model, num_layers=layers, batch_size=64)

    def run(items: list[tuple[str, str]]) -> list[float]:
        p, _, _ = scorer.score([s for _, s in items], [src for src, _ in items], verbose=False)
        return [float(v) for v in p]

    return run, run


def cpu_model() -> str:
    """``lscpu``'s model name, and whether the CPU has AVX-512 (else AVX2)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown CPU"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    flags = fields.get("Flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    extra = [f for f in ("avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni") if f in flags]
    cores = fields.get("CPU(s)", "?").strip()
    return f"{fields.get('Model name', '?').strip()}, {cores} CPUs, {isa} ({' '.join(extra)})"


def default_onnx_export() -> str | None:
    """The embedder's export in the faithgate cache (``faithgate export embedder``), if any."""
    from faithgate import models
    from faithgate.backends.manifest import find_export

    manifest = find_export(models.resolve("embedder"), "text-encoder")
    return None if manifest is None else str(manifest.directory)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2, help="timed runs of each; best is kept")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    ap.add_argument("--torch-first", action="store_true",
                    help="import torch before faithgate (its settings then come too late)")  # fmt: skip
    ap.add_argument("--data", help="directory holding bump_task1.jsonl")
    ap.add_argument("--onnx", action="append", default=[], metavar="NAME=DIR",
                    help="an ONNX export of the embedder to time (repeatable)")  # fmt: skip
    ap.add_argument("--json", type=Path, help="write the timings here after every round")
    args = ap.parse_args()

    if args.torch_first:
        import torch  # noqa: F401  # before faithgate, as `import bert_score` first would
    # Else faithgate first, as in any faithgate process: its import sets torch's OpenMP wait
    # policy and MKL's mode (faithgate/threads.py) before torch loads, for every contender.
    from faithgate import models  # isort: skip

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    pairs = load_pairs(data_dir(args.data), args.pairs)
    items = [(row["source"], row["summary"]) for pair in pairs for row in pair]
    model_dir = models.resolve("embedder").location
    layers = int(json.loads((Path(model_dir) / "config.json").read_text())["num_hidden_layers"])
    from importlib.metadata import version

    # The distribution's version: bert_score 0.3.13's own __version__ still says 0.3.12.
    baseline = f"bert_score {version('bert-score')} (torch)"
    contenders: dict[str, tuple[Any, Any]] = {
        baseline: bert_score_runner(model_dir, layers),
        "faithgate torch": faithgate_runner("torch", model_dir),
    }
    default = default_onnx_export()
    for spec in args.onnx or ([f"default export={default}"] if default else []):
        name, _, path = spec.partition("=")
        contenders[f"faithgate onnx {name}"] = faithgate_runner("onnx", path)
    values: dict[str, list[float]] = {}
    for name, (warm, _) in contenders.items():
        print(f"warm-up: {name}", file=sys.stderr, flush=True)
        warm(items[:4])
    times: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}  # process CPU s, all threads
    names = list(contenders)
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]  # rotate: no fixed slot
        for name in order:
            t0, c0 = time.perf_counter(), time.process_time()
            values[name] = contenders[name][1](items)
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            print(f"round {r + 1} {name}: {times[name][-1]:.1f} s", file=sys.stderr, flush=True)
        if args.json:
            args.json.write_text(json.dumps({"items": len(items), "times": times}, indent=1))

    # Items whose source fits one 512-token window: there both tools see the same tokens.
    from faithgate.backends import ModelPool

    enc = ModelPool({"embedder": model_dir}, backend="torch").get("embedder", "text-encoder")
    short = np.array([enc.count_tokens(src) <= enc.max_length - 2 for src, _ in items])
    ref = np.array(values[baseline])
    base = min(times[baseline])
    order = "torch imported before faithgate" if args.torch_first else "faithgate imported first"
    print(f"\n### bertscore speed, {datetime.date.today()}: {cpu_model()}\n")
    print(f"{len(items)} BUMP task-1 items ({args.pairs} minimal pairs), one process, "
          f"{torch.get_num_threads()} torch threads, {order} (OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}, MKL_CBWR="
          f"{os.environ.get('MKL_CBWR', 'unset')}), best of {args.rounds} warm runs.\n")  # fmt: skip
    print("| contender | s (best) | ms / item | speed vs bert_score | CPU s (best) | CPU vs "
          f"bert_score | max abs P diff vs bert_score ({int(short.sum())} unwindowed items) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    base_cpu = min(cpu[baseline])
    for name in names:
        best, best_cpu = min(times[name]), min(cpu[name])
        diff = np.abs(np.array(values[name]) - ref)[short].max() if short.any() else float("nan")
        print(f"| {name} | {best:.1f} | {1000 * best / len(items):.0f} | {base / best:.2f}x "
              f"| {best_cpu:.1f} | {base_cpu / best_cpu:.2f}x | {diff:.1e} |")  # fmt: skip


if __name__ == "__main__":
    main()
