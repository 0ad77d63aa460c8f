"""Batch independence on a CPU this machine is not: the probes under ``qemu-x86_64 -cpu MODEL``.

MKL, oneDNN, OpenBLAS and onnxruntime pick their float32 kernels by CPUID: vendor and
instruction sets. QEMU's user-mode emulator runs this machine's own Python, libraries and
faithgate, but answers CPUID as ``MODEL`` (default ``EPYC-Rome-v2``: AuthenticAMD, AVX2 and
FMA, no AVX-512), so every library takes the code branch it takes on that CPU. QEMU emulates
the float instructions to IEEE rules (FMA fused); MKL's products run about 10,000 times slower,
so only small probes fit.

Probes (each a fresh interpreter; counts of checks whose bits changed, 0 is the promise):

- ``projections``: ``tests/unit/test_determinism.py``'s 57 MiniLM projection shapes, a row
  alone against the same row in a product 4x as tall, and 2 threads against 1, with
  faithgate imported first (its ``MKL_CBWR=AUTO,STRICT``);
- ``projections-auto``: the same under ``MKL_CBWR=AUTO`` (faithgate's setting before issue 44);
- ``projections-unset``: the same without faithgate and with no ``MKL_CBWR``;
- ``encoder-torch`` / ``encoder-onnx``: faithgate's text encoder (MiniLM; torch, or the ONNX
  export ``faithgate export embedder`` left in the cache) on one 10-token text, alone and
  among 2 and 5 copies of itself; torch also on 1 thread against 2.

Each result is appended to ``--out`` as a JSON line as it finishes; a rerun skips the probes
already there, so an interrupted run resumes. About 25 minutes a probe on one core.

    apt-get install qemu-user   # QEMU 7.2 or newer: AVX2 in its emulator
    python benchmarks/emulated_cpu.py --out /tmp/emulated.jsonl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What the emulated CPU reports to the libraries, printed by every probe.
CPU_SEEN = """
import json as _json, numpy as _np
from numpy._core._multiarray_umath import __cpu_features__ as _f
_seen = {"avx2": _f["AVX2"], "avx512f": _f["AVX512F"], "fma": _f["FMA3"]}
"""

ENCODER = """
import json, os, sys, faithgate, numpy as np
from faithgate.backends import ModelPool
backend = sys.argv[1]
if backend == "torch":
    import torch
    torch.set_num_threads(2)
enc = ModelPool(backend=backend).get("embedder", "text-encoder")
text = "The city council approved a new budget on Monday."
company = threads = 0
alone = enc.token_embeddings([text])[0].vectors
for k in (2, 5):
    company += int(not all(np.array_equal(t.vectors, alone) for t in enc.token_embeddings([text] * k)))
if backend == "torch":
    torch.set_num_threads(1)
    threads += int(not np.array_equal(enc.token_embeddings([text] * 5)[0].vectors, alone))
print(json.dumps({"company": company, "threads": threads, "cpu_seen": _seen,
                  "encoder": type(enc).__name__, "tokens": int(alone.shape[0])}))
"""


def _projections() -> str:
    """The projection probe of tests/unit/test_determinism.py, so both check the same thing."""
    spec = importlib.util.spec_from_file_location(
        "test_determinism", ROOT / "tests" / "unit" / "test_determinism.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    code = module.PROJECTIONS.replace(
        'print(json.dumps({"company": company, "threads": threads}))',
        'print(json.dumps({"company": company, "threads": threads, "cpu_seen": _seen}))',
    )
    assert "cpu_seen" in code, "the test's probe prints something else now"
    return code


def probes() -> dict[str, tuple[str, list[str], dict[str, str | None]]]:
    """name -> (code, arguments, environment changes; None removes a variable)."""
    projections = _projections()
    without_faithgate = projections.replace("import json, faithgate, torch", "import json, torch")
    assert without_faithgate != projections, "the probe no longer imports faithgate first"
    return {
        "projections": (projections, [], {"MKL_CBWR": None}),
        "projections-auto": (projections, [], {"MKL_CBWR": "AUTO"}),
        "projections-unset": (without_faithgate, [], {"MKL_CBWR": None}),
        "encoder-torch": (ENCODER, ["torch"], {"MKL_CBWR": None}),
        "encoder-onnx": (ENCODER, ["onnx"], {"MKL_CBWR": None}),
    }


def run_probe(qemu: str, cpu: str, code: str, args: list[str], changes: dict) -> dict:
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    command = [qemu, "-cpu", cpu, sys.executable, "-c", CPU_SEEN + code, *args]
    start = time.monotonic()
    out = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    seconds = round(time.monotonic() - start, 1)
    if out.returncode != 0:
        errors = [line for line in out.stderr.splitlines() if "TCG doesn't support" not in line]
        return {"error": "\n".join(errors[-5:]), "seconds": seconds}
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", default="EPYC-Rome-v2", help="QEMU CPU model")
    parser.add_argument("--qemu", default="qemu-x86_64")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, appended")
    parser.add_argument("--probe", action="append", help="run only these (repeatable)")
    args = parser.parse_args()
    qemu = shutil.which(args.qemu)
    if qemu is None:
        sys.exit(f"{args.qemu} not found: apt-get install qemu-user (7.2 or newer)")
    done = set()
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            row = json.loads(line)
            if "error" not in row:
                done.add((row["cpu"], row["probe"]))
    for name, (code, probe_args, changes) in probes().items():
        if (args.probe and name not in args.probe) or (args.cpu, name) in done:
            continue
        row = {
            "cpu": args.cpu,
            "probe": name,
            **run_probe(qemu, args.cpu, code, probe_args, changes),
        }
        print(json.dumps(row), flush=True)
        with args.out.open("a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
