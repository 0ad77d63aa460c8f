"""The quantization modes: their names, the ones ``auto`` tries per device and task, and
``quantize_file``, which writes a graph's form in one of them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.backends.quantize.forms import (
    BLOCK_SIZE,
    BLOCK_SIZE_BY_TASK,
    convert_fp16,
    quantize_dynamic_int8,
    quantize_static_int8,
    quantize_w8a32,
    quantize_weight_only,
)
from faithgate.backends.quantize.smoothquant import quantize_context_int8, quantize_w8a8
from faithgate.errors import InputError

# Concrete modes an export can be in (the manifest's ``quantization``).
MODES = (
    "none", "w8", "w8a32", "w8a32-ctx8", "w8a8", "w4", "int8-dynamic", "int8-static", "fp16",
)  # fmt: skip
# Names accepted on the command line: the modes, ``auto`` and aliases.
QUANTIZATIONS = ("auto", *MODES, "int8", "fp32")
# ``auto`` tries these, smallest file first, and keeps the first that passes the parity gate
# (fp32 when none does). CPU: the weight-only modes (dynamic/static int8 are larger than w8 and
# failed the gate on every metric, issue 5). CUDA: fp16, whose kernels are the fast ones there.
AUTO_CANDIDATES: dict[str, tuple[str, ...]] = {
    "cpu": ("w4", "w8", "w8a32"),
    "cuda": ("fp16", "w8"),
}
# Per (device, task) where the candidates differ. Language models never try w4: it moves their
# log-probabilities by 0.07 nats and flips 12% of BUMP pairs (issue 13), so it costs a parity run
# that cannot pass. A causal LM tries w8a8 first: smaller than its w8 (no block scales; down
# projections quantized) and the fastest form measured (1.3-1.4x fp32 ONNX). Then w8a32: it
# quantizes the down projections that w8 keeps fp32, so its file is the smaller (SmolLM2: 46%
# against 57%), it moves log-probabilities less (0.008 against 0.011 nats on 100 BUMP pairs),
# and loaded expanded (expand.py) it runs at fp32's speed, as w8 does (1.09x against
# 1.03-1.08x); it holds fp32's memory while it runs, w8 less. w8a32-ctx8 (w8a32 with an int8
# source pass) is offered, not tried: 1.1-1.3x fp32 ONNX (less as more summaries share a source)
# and loglik's BUMP pairs keep w8a32's order (3 flips in 693), but harim_plus flips 8 (agreement
# 0.988 < 0.99) and it holds 35% more memory (issue 13).
AUTO_CANDIDATES_BY_TASK: dict[tuple[str, str], tuple[str, ...]] = {
    ("cpu", "causal-lm"): ("w8a8", "w8a32", "w8"),
    ("cpu", "seq2seq-lm"): ("w8", "w8a32"),
}


def auto_candidates(device: str, task: str) -> tuple[str, ...]:
    """The modes ``auto`` tries, in order, for a ``task`` export running on ``device``."""
    return AUTO_CANDIDATES_BY_TASK.get((device, task), AUTO_CANDIDATES[device])


# Modes whose quantizer reads the model's activations on calibration inputs.
NEEDS_FEEDS = ("int8-static", "w8a8", "w8a32-ctx8")


def normalise_quantization(name: str) -> str:
    """Canonical mode name: ``int8`` is ``int8-dynamic``, ``fp32`` is ``none``, ``auto`` stays
    ``auto``; ``InputError`` for unknown names."""
    name = (name or "none").strip().lower()
    if name in ("fp32", "none"):
        return "none"
    if name == "int8":
        return "int8-dynamic"
    if name not in QUANTIZATIONS:
        raise InputError(
            f"unknown quantization {name!r}; choose one of: auto, w8, w8a32, w8a32-ctx8, "
            "w8a8, w4, int8 (int8-dynamic), int8-static, fp16, none"
        )
    return name


def check_mode_fits_task(mode: str, task: str) -> None:
    """``InputError`` for a mode the ``task`` cannot use: ``w8a32-ctx8`` speeds up only the
    cache-filling passes of causal LMs."""
    if mode == "w8a32-ctx8" and task != "causal-lm":
        raise InputError(
            f"w8a32-ctx8 speeds up a causal LM's cached context passes; a {task} export has "
            "none (use w8a32)"
        )


def quantized_file_name(name: str, mode: str) -> str:
    """``model.onnx`` -> ``model.w8.onnx`` (``int8-*`` modes keep their historical ``int8``)."""
    tag = "int8" if mode.startswith("int8") else mode
    return name.replace(".onnx", f".{tag}.onnx")


def quantize_file(
    mode: str,
    src: Path,
    dst: Path,
    feeds: Sequence[dict[str, np.ndarray]] = (),
    task: str | None = None,
) -> dict[str, Any]:
    """Write the ``mode`` form of the fp32 graph ``src`` to ``dst``; return its recipe.
    ``task`` (the export's: ``causal-lm``, ``text-encoder``, ...) picks the block size."""
    if mode in ("w8", "w4"):
        block = BLOCK_SIZE_BY_TASK.get(task or "", BLOCK_SIZE)
        return quantize_weight_only(src, dst, bits=int(mode[1]), block_size=block)
    if mode == "w8a32":
        return quantize_w8a32(src, dst, task)
    if mode == "w8a8":
        return quantize_w8a8(src, dst, feeds)
    if mode == "w8a32-ctx8":
        check_mode_fits_task(mode, task or "")
        return quantize_context_int8(src, dst, feeds)
    if mode == "fp16":
        return convert_fp16(src, dst)
    if mode == "int8-dynamic":
        quantize_dynamic_int8(src, dst)
        return {"method": "quantize_dynamic (MatMul/Gemm, per-channel int8)"}
    if mode == "int8-static":
        quantize_static_int8(src, dst, feeds)
        return {"method": "quantize_static (QDQ, MinMax, per-channel int8)"}
    raise InputError(f"no quantizer for mode {mode!r}")
