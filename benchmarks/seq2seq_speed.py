"""Encoder-decoder likelihood speed: torch vs ONNX fp32 vs quantized ONNX, side by side.

One tiny random BART (``tests/seq2seq_models.py``, its seed, a 1,024-token window; real
``BartTokenizerFast`` over a vocabulary trained on the test corpus) scores BUMP task-1 items
(``--pairs`` minimal pairs, both summaries: 2 x pairs (source, summary) items; evaluation data,
read only for timing) through the likelihood engine, as ``loglik`` + ``harim_plus`` do: the
passes y_s2s (source -> summary) and y_lm (empty source -> summary), the reference target form
(``target_special_tokens``), sources cut to their first 1,024 tokens (``keep_start``: no spaCy
in the timing).

Contenders: torch fp32; the fp32 ONNX export; each ``--quantize`` mode exported from the same
model through ``faithgate export``'s parity gate (a mode the gate refuses is reported as such,
not timed). Every round runs every contender once on all items, in an order rotated each
round, after one untimed warm-up each; the table gives the median items/s over rounds, the
median items per CPU-second of the process (steadier than wall time on a shared machine),
the median per-round ratio to torch (wall time), the share of time spent in the backend's
``seq2seq_logprobs``, and the largest |mean y_s2s (= loglik) difference| against torch.

    nice -n 5 python benchmarks/seq2seq_speed.py --pairs 25 --rounds 5 --threads 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bump_data import data_dir, load_pairs  # noqa: E402
from seq2seq_models import save_seq2seq_model  # noqa: E402


def _engine(backend: str, location: Path, threads: int) -> Any:
    from faithgate.backends import ModelPool
    from faithgate.engines.likelihood import LikelihoodConfig, LikelihoodEngine

    options = {"seq2seq": {"threads": threads}} if threads else {}  # 0: the backends' default
    pool = ModelPool({"seq2seq": str(location)}, backend=backend, model_options=options)
    model = pool.get("seq2seq", "seq2seq-lm")
    # target_special_tokens: absent from faithgate before the reference target form (a run
    # over an older checkout times its text-only targets).
    extra = {"target_special_tokens": True}
    if "target_special_tokens" not in LikelihoodConfig.__dataclass_fields__:
        extra = {}
    config = LikelihoodConfig(role="seq2seq", cut="keep_start", max_length=1024, **extra)
    return LikelihoodEngine(model, config)


def _run(engine: Any, items: list[tuple[str, str]]) -> tuple[float, float, float, np.ndarray]:
    """(seconds, CPU seconds of the process, seconds inside seq2seq_logprobs, mean y_s2s per
    item), from a cold engine."""
    model = engine.model
    inside = [0.0]
    call = type(model).seq2seq_logprobs

    def timed(batch: Any) -> Any:
        t = time.perf_counter()
        out = call(model, batch)
        inside[0] += time.perf_counter() - t
        return out

    model.seq2seq_logprobs = timed
    engine.release_all()
    start, cpu = time.perf_counter(), time.process_time()
    engine.request(items, ["y_s2s", "y_lm"])
    engine.run()
    means = np.array([np.mean(engine.get(s, y)["y_s2s"]) for s, y in items])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    del model.seq2seq_logprobs
    return seconds, cpu, inside[0], means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="0: the backends' default")
    parser.add_argument("--quantize", nargs="*", default=["w8", "w8a32"])
    parser.add_argument("--data", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from faithgate import models
    from faithgate.backends.export import export_model
    from faithgate.errors import FaithgateError

    pairs = load_pairs(data_dir(args.data), args.pairs)
    items = [(r["source"], r["summary"]) for pair in pairs for r in pair]
    work = Path(tempfile.mkdtemp(prefix="seq2seq_speed_"))
    bart = save_seq2seq_model("bart", work / "bart", positions=1024)
    spec = models.resolve("seq2seq", str(bart))
    locations: dict[str, tuple[str, Path]] = {"torch": ("torch", bart)}
    gate: dict[str, str] = {"torch": "reference", "onnx fp32": "fp32"}
    locations["onnx fp32"] = (
        "onnx",
        export_model(spec, "seq2seq-lm", out=work / "fp32", quantize="none").directory,
    )
    for mode in args.quantize:
        name = f"onnx {mode}"
        try:
            manifest = export_model(
                spec, "seq2seq-lm", out=work / mode, quantize=mode, require_quantized=True
            )
        except FaithgateError as exc:
            gate[name] = f"refused: {str(exc).splitlines()[0][:120]}"
            continue
        locations[name] = ("onnx", manifest.directory)
        gate[name] = "passed"
    engines = {n: _engine(b, loc, args.threads) for n, (b, loc) in locations.items()}
    names = list(engines)
    for name in names:  # warm-up: sessions, first-call allocations
        _run(engines[name], items[:4])
    times: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}
    inside: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names}
    means: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        this: dict[str, float] = {}
        for name in order:
            seconds, cpu, model_s, m = _run(engines[name], items)
            this[name] = seconds
            times[name].append(seconds)
            cpus[name].append(cpu)
            inside[name].append(model_s / seconds)
            means[name] = m
        for name in names:
            ratios[name].append(this["torch"] / this[name])
    rows = []
    for name in names:
        rows.append(
            {
                "form": name,
                "items_per_s": len(items) / statistics.median(times[name]),
                "items_per_cpu_s": len(items) / statistics.median(cpus[name]),
                "vs_torch": statistics.median(ratios[name]),
                "model_share": statistics.median(inside[name]),
                "max_abs_diff_vs_torch": float(np.abs(means[name] - means["torch"]).max()),
                "gate": gate[name],
            }
        )
    for name, verdict in gate.items():
        if name not in engines:
            rows.append({"form": name, "gate": verdict})
    print(
        f"{len(items)} items (BUMP task 1, {args.pairs} pairs), {args.rounds} rounds, "
        f"{args.threads} threads"
    )
    print("| form | items/s | items/CPU-s | x torch | in model | max abs diff | export gate |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        if "items_per_s" not in row:
            print(f"| {row['form']} | - | - | - | - | - | {row['gate']} |")
            continue
        print(
            f"| {row['form']} | {row['items_per_s']:.1f} | {row['items_per_cpu_s']:.1f} | "
            f"{row['vs_torch']:.2f} | "
            f"{row['model_share']:.0%} | {row['max_abs_diff_vs_torch']:.1e} | {row['gate']} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"items": len(items), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
