"""Pure-numpy helpers shared by every backend: token windows, stitching, pooling.

They live apart from ``torch_backend`` so the torch-free runtime (``onnx_backend``) computes
token embeddings of long texts exactly as the torch reference does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.errors import ConfigError

# The overlap of consecutive windows of a text encoder (``model_options.<role>.stride``).
DEFAULT_STRIDE = 64


def window_stride(stride: int | None, size: int, role: str, default: int = DEFAULT_STRIDE) -> int:
    """The overlap of consecutive windows of ``size`` tokens. A ``stride`` the user set must be
    below ``size`` (``ConfigError`` when the encoder loads): ``token_windows`` once advanced by
    one token instead, silently, hundreds of times the passes. Not set (None), it is ``default``
    (a manifest's recorded stride, else ``DEFAULT_STRIDE``), half the window where that does
    not fit (a model with a window of 64 tokens or less)."""
    if stride is None:
        return default if 0 <= default < size else size // 2
    if not 0 <= stride < size:
        raise ConfigError(
            f"model_options.{role}.stride = {stride} must be below the model's window of "
            f"{size} tokens (it is the overlap of consecutive windows)"
        )
    return stride


def token_windows(n_tokens: int, size: int, stride: int) -> list[tuple[int, int]]:
    """[start, end) windows of at most ``size`` covering ``n_tokens`` with ``stride`` overlap
    (``0 <= stride < size``: ``window_stride``)."""
    if n_tokens <= size:
        return [(0, n_tokens)]
    if not 0 <= stride < size:
        raise ValueError(f"stride {stride} must be in [0, {size})")
    step = size - stride
    spans, start = [], 0
    while True:
        end = min(start + size, n_tokens)
        spans.append((start, end))
        if end == n_tokens:
            return spans
        start += step


def stitch_windows(spans: list[tuple[int, int]], outputs: list[np.ndarray]) -> np.ndarray:
    """Concatenate per-window token vectors, giving each token the window where it sits
    furthest from an edge (the later window takes over at the middle of an overlap)."""
    pieces = []
    covered = 0
    for i, ((start, end), vecs) in enumerate(zip(spans, outputs, strict=True)):
        if i + 1 < len(spans):
            next_start = spans[i + 1][0]
            keep_end = (next_start + end) // 2 if next_start < end else end
        else:
            keep_end = end
        pieces.append(vecs[covered - start : keep_end - start])
        covered = keep_end
    return np.concatenate(pieces, axis=0)


def pool_and_normalise(vectors: list[np.ndarray], pooling: str, dim: int) -> np.ndarray:
    """Pool per-token vectors (special tokens included, as sentence-transformers does)."""
    pooled = np.zeros((len(vectors), dim), dtype=np.float32)
    for i, v in enumerate(vectors):
        pooled[i] = v[0] if pooling == "cls" else v.mean(axis=0)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.clip(norms, 1e-12, None)


# The sentence-transformers poolings a text encoder applies (``pool_and_normalise``), by the
# ``1_Pooling/config.json`` key that asks for each.
ST_POOLINGS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean"}


def pooling_modes(config: dict[str, Any]) -> list[str]:
    """The poolings a ``1_Pooling/config.json`` asks for, sorted: each ``pooling_mode_*`` key
    that is on, with its value where that is not a boolean (several means pooling by several
    at once; only one of ``ST_POOLINGS`` is one faithgate applies)."""
    return sorted(
        str(k) if isinstance(v, bool) else f"{k}={v}"
        for k, v in config.items()
        if str(k).startswith("pooling_mode") and v
    )


def read_pooling(model_dir: str | Path) -> str:
    """sentence-transformers pooling mode from ``1_Pooling/config.json`` (default: mean)."""
    cfg = Path(model_dir) / "1_Pooling" / "config.json"
    if cfg.is_file():
        data = json.loads(cfg.read_text())
        if data.get("pooling_mode_cls_token"):
            return "cls"
    return "mean"


# Batches never mix sequence lengths, so no sequence is ever padded. Padding changes the
# shapes of a forward pass and with them the float32 summation order inside its kernels, so
# a padded sequence's outputs differed (by ~1e-7) with the other texts of its batch: a cached
# score and a fresh one disagreed. Without padding a sequence's outputs depend only on the
# sequence (tests/unit/test_batch_independence.py checks it bit for bit, every metric); batching
# is kept for texts of equal length, where it is free. Where equal lengths are rare and
# batching matters (likelihood continuations after a cached source), a sequence is padded to
# ``bucket_width`` of its own length, which depends on nothing else either.


def equal_length_batches(lengths: Sequence[Hashable], max_items: int) -> list[list[int]]:
    """Indices grouped by exactly equal length (or length tuple, e.g. encoder and decoder
    lengths), at most ``max_items`` per batch, shortest first; within a length, given order."""
    by_length: dict[Any, list[int]] = {}
    for i, n in enumerate(lengths):
        by_length.setdefault(n, []).append(i)
    step = max(1, int(max_items))
    return [
        group[b : b + step]
        for n in sorted(by_length)
        for group in [by_length[n]]
        for b in range(0, len(group), step)
    ]


def bucket_width(n: int, step: int = 16) -> int:
    """``n`` rounded up to a multiple of ``step``: the padded width of a sequence of ``n``
    tokens when it is padded by a rule that depends on its own length only. Batching such
    sequences by their bucket keeps a row's shapes (and so its float results) independent of
    its batch while letting sequences of nearby lengths share a forward pass."""
    return -(-int(n) // step) * step


def run_in_length_order(
    seqs: Sequence[Sequence[int]],
    batch_size: int,
    forward: Callable[[list[list[int]]], list[np.ndarray]],
) -> list[np.ndarray]:
    """Run ``forward`` over batches of equal-length id sequences (no padding: see above) and
    return its per-sequence outputs in the original order."""
    results: list[np.ndarray | None] = [None] * len(seqs)
    for idx in equal_length_batches([len(s) for s in seqs], batch_size):
        for i, out in zip(idx, forward([list(seqs[i]) for i in idx]), strict=True):
            results[i] = out
    return results  # type: ignore[return-value]


def embed_in_windows(
    encoded: Sequence[Sequence[int]],
    window: tuple[int, int],
    wrap: tuple[Callable[[list[int]], list[int]], int, int],
    forward: Callable[[list[list[int]]], list[np.ndarray]],
    batch_size: int,
    dim: int,
) -> list[tuple[np.ndarray, bool]]:
    """Token vectors of each id list, embedded in overlapping windows (``window``: inner size
    and stride), with whether it took more than one window. ``wrap`` is the function adding
    a window's special tokens and how many it puts before and after the ids (dropped again)."""
    add_specials, lead, trail = wrap
    seqs, owners, spans_of = [], [], []
    for ti, ids in enumerate(encoded):
        spans_of.append(token_windows(len(ids), *window))
        for start, end in spans_of[-1]:
            seqs.append(add_specials(list(ids[start:end])))
            owners.append(ti)
    per_text: list[list[np.ndarray]] = [[] for _ in encoded]
    for owner, vecs in zip(owners, run_in_length_order(seqs, batch_size, forward), strict=True):
        per_text[owner].append(vecs[lead : len(vecs) - trail])
    return [
        (stitch_windows(spans, parts) if ids else np.zeros((0, dim), np.float32), len(spans) > 1)
        for ids, spans, parts in zip(encoded, spans_of, per_text, strict=True)
    ]


def batches_by_token_budget(
    lengths: Sequence[int], budget: int, keys: Sequence[Hashable] | None = None
) -> list[list[int]]:
    """Indices grouped into batches of equal length (no padding: see above) whose size
    (length x count) stays within ``budget`` tokens; a sequence longer than the budget gets a
    batch alone. ``keys`` (default: the lengths) decide what "equal" means, e.g. the pair of
    encoder and decoder lengths of a sequence-to-sequence model."""
    batches: list[list[int]] = []
    for group in equal_length_batches(lengths if keys is None else keys, len(lengths) or 1):
        step = max(1, budget // max(lengths[group[0]], 1))
        batches.extend(group[b : b + step] for b in range(0, len(group), step))
    return batches


def split_by_sizes(values: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """Consecutive float64 slices of ``values`` of the given sizes (per-segment log-probs)."""
    out, start = [], 0
    for n in sizes:
        out.append(np.asarray(values[start : start + n], dtype=np.float64))
        start += n
    return out
