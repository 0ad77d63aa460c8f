"""Quantized forms of exported ONNX models, and the parity gate that decides whether to keep one.

Modes (``--quantize``), smallest first:

- ``w4`` / ``w8``: weight-only block quantization (onnxruntime's ``MatMulNBitsQuantizer``):
  every MatMul with a constant weight becomes ``MatMulNBits`` (4 or 8-bit weights, one fp32
  scale per block of 32 input features, 64 for causal LMs, symmetric; ``accuracy_level=4``
  lets onnxruntime's CPU kernel quantize the activations to int8 per block on the fly, which
  is where the speed comes from) and the embedding tables (constant ``Gather`` data, most of a small encoder's
  bytes) become ``GatherBlockQuantized`` in blocks of 32. The MLP down projections of
  LLaMA-style decoders stay fp32 (``FP32_MATMULS``: their inputs carry activation outliers).
  On SmolLM2 at 8 bits the mean log-probability moves ~0.01 nats, where dynamic int8 moves
  it by 0.27 (issue 13). ``w8`` is the recommended mode; ``w4`` is half its size and usually
  fails the gate on minimal pairs.
- ``w8a32``: the same 8-bit weights in blocks of 16 (32 for causal LMs), with
  ``accuracy_level`` 0: the kernel
  computes in fp32 on dequantized weights, so only the weights' rounding remains (about the
  size of ``w8``). onnxruntime's kernel re-dequantizes on every call (SmolLM2 0.71-0.77x fp32),
  so the ONNX backend loads such a file expanded to fp32 MatMuls once (``expand.py``): fp32
  speed and memory, the small file on disk. For small classifiers whose
  int8 activations flip close minimal pairs: the shipped NLI checker passes the gate in this
  form (rank agreement 0.995 on 200 held-out triples) where ``w8`` does not (0.975).
- ``w8a8``: SmoothQuant (Xiao et al. 2023, "SmoothQuant: Accurate and Efficient Post-Training
  Quantization for Large Language Models"): each MatMul with a constant weight W and input X
  becomes (X diag(s)^-1) (diag(s) W) with s_j = max|X_j|^0.5 / max|W_j|^0.5 (activation maxima
  measured by onnxruntime on the built-in calibration sentences: never on a ``--calibration``
  file's pairs, which then judge it; without one those 12 triples are the parity sample too),
  then int8 weights per output channel and int8 activations per *token*, scaled on the fly
  (``MatMulInteger`` on uint8 x int8, the fast VNNI path on x86; loaded as uint8 x uint8 where
  that kernel saturates, ``onnx_backend.int8_weights_form``). Per-tensor activation scales
  (``int8-dynamic``) are what fails on language models: one outlier token or channel sets the
  scale of all. SmolLM2-135M on 50 BUMP pairs: 41% of the fp32 file, 1.26x fp32 ONNX's speed,
  mean log-prob moves 0.024 nats, one near-tie pair of 50 (fp32 margin 0.009 nats) flips
  (issue 13). ``auto``'s first choice for causal LMs on CPU; the tied embedding table stays
  fp32.
- ``fp16``: every float weight and activation in half precision, inputs and outputs kept fp32
  (``onnxruntime.transformers``' converter): for CUDA; on CPU onnxruntime falls back to casts.
- ``int8-dynamic``: weights of MatMul/Gemm stored as signed int8 per channel, activations
  quantized on the fly per batch (``quantize_dynamic``). No calibration data needed; the usual choice for
  transformers on CPU (Zafrir et al. 2019, "Q8BERT"; onnxruntime's transformer quantization notes).
- ``int8-static``: activations get fixed scales measured on calibration inputs (``quantize_static``,
  QDQ format). Faster on some CPUs, usually less accurate on transformers.

The parity gate (issue 5) compares scores of the quantized model with the fp32 reference on a
calibration sample of (source, faithful summary, unfaithful summary) triples - BUMP minimal pairs
when a BUMP file is given, else the built-in sentences below - and passes only when

- mean |score difference| <= 0.01 for bounded scores (cosines, probabilities), and <= 0.05
  nats for mean token log-probabilities (each score on its own scale),
- the order of the two summaries of a pair agrees with fp32 on >= 99% of pairs,
- consistency (share of pairs where the faithful summary scores higher) moves by <= 1 point.

``auto`` (the export default) tries the modes of ``AUTO_CANDIDATES`` smallest first and keeps
the first that passes; fp32 when none does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.backends.expand import (
    CONTEXT_SMOOTHING_PREFIX,
    int8_columns,
    int8_constants,
    int8_matmul_nodes,
    per_token_uint8_nodes,
    replace_graph_nodes,
)
from faithgate.errors import InputError
from faithgate.io import read_jsonl_rows

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


def save_onnx(model: Any, dst: Path) -> None:
    """Write ``model`` to ``dst``, its tensors beside it in ``<name>_data`` when the graph would
    pass protobuf's 2 GB limit."""
    import onnx

    large = model.ByteSize() > 1_800_000_000
    onnx.save(model, str(dst), save_as_external_data=large, location=dst.name + "_data")


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


# The fewest calibration pairs the parity gate decides on: with none, every measure is vacuous
# (no pair ranked otherwise, no consistency moved), so a quantized form would pass unmeasured.
MIN_PARITY_PAIRS = 1


@dataclass(frozen=True)
class Tolerance:
    """Limits of the parity gate (defaults from issues 5 and 13).

    Each score is gated on its own scale: ``max_mean_abs_diff`` for bounded scores (cosines,
    probabilities: 0.01), ``max_mean_abs_nats`` for log-probabilities (0.05 nats of mean token
    log-probability: w8 SmolLM2 moves 0.016, dynamic int8 0.27); then for every score the pair
    ranking agreement and the BUMP consistency change.
    """

    max_mean_abs_diff: float = 0.01  # bounded scores only
    min_rank_agreement: float = 0.99
    max_consistency_change: float = 0.01  # fraction of pairs: 0.01 = 1 point
    max_mean_abs_nats: float = 0.05  # unbounded scores (mean token log-probabilities)

    @classmethod
    def zero(cls) -> Tolerance:
        """A gate nothing but a bit-identical model passes (used to test refusal)."""
        return cls(0.0, 1.0, 0.0, 0.0)

    @classmethod
    def loose(cls) -> Tolerance:
        """A gate everything passes (benchmarks measure the figures themselves)."""
        return cls(1e9, 0.0, 1.0, 1e9)


@dataclass
class ParityReport:
    """How far one score series moved from the reference, and whether the gate passed."""

    score: str
    bounded: bool
    n_pairs: int
    mean_abs_diff: float
    max_abs_diff: float
    rank_agreement: float
    consistency_ref: float
    consistency_new: float
    passed: bool
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        # A non-finite figure is null: json.dumps would write a bare NaN, which is not JSON.
        return {
            k: ((round(v, 6) if math.isfinite(v) else None) if isinstance(v, float) else v)
            for k, v in asdict(self).items()
        }


def compare(
    name: str,
    reference: np.ndarray,
    candidate: np.ndarray,
    bounded: bool,
    tolerance: Tolerance = Tolerance(),  # noqa: B008 - frozen dataclass
) -> ParityReport:
    """Gate ``candidate`` scores against ``reference``.

    Both arrays have shape (n_pairs, 2): column 0 the faithful summary, column 1 the edited one.
    """
    ref = np.asarray(reference, dtype=np.float64)
    new = np.asarray(candidate, dtype=np.float64)
    if ref.shape != new.shape or ref.ndim != 2 or ref.shape[1] != 2:
        raise ValueError(f"score arrays must both be (n, 2), got {ref.shape} and {new.shape}")
    with np.errstate(invalid="ignore"):  # inf - inf is NaN, refused below: no warning
        diff = np.abs(ref - new)
        ref_order = np.sign(ref[:, 0] - ref[:, 1])
        new_order = np.sign(new[:, 0] - new[:, 1])
    agreement = float(np.mean(ref_order == new_order)) if len(ref) else 1.0
    cons_ref = float(np.mean(ref[:, 0] > ref[:, 1])) if len(ref) else 0.0
    cons_new = float(np.mean(new[:, 0] > new[:, 1])) if len(new) else 0.0
    mean_diff = float(diff.mean()) if diff.size else 0.0
    reasons = []
    if len(ref) < MIN_PARITY_PAIRS:  # nothing measured is nothing passed
        reasons.append(f"{len(ref)} calibration pairs < {MIN_PARITY_PAIRS}")
    # A NaN or infinite score (an fp16 overflow, inf - inf in a norm) is no score: refused by
    # name. Every check below is also written so that NaN fails it (a comparison with NaN is
    # False, so "not (x <= limit)"): one NaN used to turn the mean |diff| check off.
    bad = int(np.size(ref) - np.isfinite(ref).sum()), int(np.size(new) - np.isfinite(new).sum())
    if any(bad):
        reasons.append(f"non-finite scores ({bad[0]} in the reference, {bad[1]} in the candidate)")
    if bounded and not mean_diff <= tolerance.max_mean_abs_diff:
        reasons.append(f"mean |diff| {mean_diff:.4f} > {tolerance.max_mean_abs_diff}")
    if not bounded and not mean_diff <= tolerance.max_mean_abs_nats:
        reasons.append(f"mean |diff| {mean_diff:.4f} nats > {tolerance.max_mean_abs_nats}")
    if not agreement >= tolerance.min_rank_agreement:
        reasons.append(f"pair ranking agreement {agreement:.3f} < {tolerance.min_rank_agreement}")
    if not abs(cons_new - cons_ref) <= tolerance.max_consistency_change + 1e-12:
        reasons.append(
            f"consistency moved {100 * abs(cons_new - cons_ref):.1f} points "
            f"> {100 * tolerance.max_consistency_change:.1f}"
        )
    if (
        tolerance.max_mean_abs_diff == 0.0
        and tolerance.max_mean_abs_nats == 0.0
        and not float(diff.max(initial=0.0)) <= 0.0
    ):
        # A zero tolerance means "bit-identical", also for unbounded scores.
        reasons.append(f"max |diff| {float(diff.max()):.2e} > 0")
    return ParityReport(
        score=name,
        bounded=bounded,
        n_pairs=len(ref),
        mean_abs_diff=mean_diff,
        max_abs_diff=float(diff.max(initial=0.0)),
        rank_agreement=agreement,
        consistency_ref=cons_ref,
        consistency_new=cons_new,
        passed=not reasons,
        reasons=reasons,
    )


# --- calibration sample ---------------------------------------------------------------------

# Hand-written (source, faithful summary, unfaithful minimal edit) triples, used when no BUMP
# file is given. The edits follow BUMP's taxonomy: entity, predicate, circumstance, coreference.
BUILTIN_CALIBRATION: tuple[tuple[str, str, str], ...] = (
    (
        "The city council voted on Tuesday to build a new library next to the central park. "
        "Construction is expected to start in March and cost about 12 million dollars.",
        "The council voted to build a library next to the park.",
        "The council voted to build a stadium next to the park.",
    ),
    (
        "Maria Lopez, a nurse from Seville, won the regional marathon on Sunday in two hours "
        "and forty minutes, beating last year's champion by three minutes.",
        "Maria Lopez won the marathon on Sunday.",
        "Maria Lopez lost the marathon on Sunday.",
    ),
    (
        "The company reported that its profits fell by 8 percent in the second quarter because "
        "of higher energy prices, and said it would not cut jobs this year.",
        "Profits fell in the second quarter because of higher energy prices.",
        "Profits rose in the second quarter because of higher energy prices.",
    ),
    (
        "Heavy rain flooded dozens of homes in the northern valley overnight. Firefighters "
        "rescued an elderly couple, and nobody was injured, officials said.",
        "Firefighters rescued an elderly couple after rain flooded homes.",
        "Firefighters rescued an elderly couple after a fire destroyed homes.",
    ),
    (
        "Scientists at the university found that the new vaccine reduced infections by 60 "
        "percent in a trial of 3,000 adults. The results were published on Monday.",
        "A vaccine cut infections by 60 percent in a trial of adults.",
        "A vaccine cut infections by 90 percent in a trial of children.",
    ),
    (
        "The museum will reopen in June after a two-year renovation that added a new wing for "
        "modern art, the director told reporters.",
        "The museum reopens in June after a renovation.",
        "The museum closes in June for a renovation.",
    ),
    (
        "Tom Baker signed a three-year contract with the club on Friday. The striker scored 15 "
        "goals last season for his previous team in Lisbon.",
        "Tom Baker signed a three-year contract with the club.",
        "Tom Baker signed a one-year contract with the club.",
    ),
    (
        "A small plane made an emergency landing on a highway near the airport after its engine "
        "failed. The pilot and his two passengers walked away unhurt.",
        "A plane landed on a highway after its engine failed; nobody was hurt.",
        "A plane crashed on a highway after its engine failed; two people died.",
    ),
    (
        "The government announced that the minimum wage will rise to 11 euros an hour from "
        "January, a measure that unions had demanded for years.",
        "The minimum wage will rise to 11 euros an hour from January.",
        "The minimum wage will fall to 11 euros an hour from January.",
    ),
    (
        "Police arrested two men in connection with the robbery of a jewellery shop in the old "
        "town. The stolen watches have not been recovered.",
        "Two men were arrested over a jewellery shop robbery.",
        "Two women were arrested over a bank robbery.",
    ),
    (
        "Sarah thanked her brother, who had driven her to the hospital when she broke her leg "
        "during a ski trip in the Alps.",
        "Her brother drove Sarah to the hospital after she broke her leg.",
        "Sarah drove her brother to the hospital after he broke his leg.",
    ),
    (
        "The river reached its highest level in fifty years on Thursday, forcing the closure of "
        "three bridges in the capital.",
        "Three bridges closed as the river reached a fifty-year high.",
        "Three bridges collapsed as the river reached a hundred-year high.",
    ),
)

Triple = tuple[str, str, str]


def load_calibration(path: str | Path | None, n_pairs: int = 50, seed: int = 0) -> list[Triple]:
    """Calibration triples: BUMP minimal pairs from ``path`` (JSONL with ``pair_id`` and
    ``role`` reference/edited), a deterministic sample of ``n_pairs``; built-in sentences
    when ``path`` is None."""
    if path is None:
        return list(BUILTIN_CALIBRATION)
    path = Path(path)
    if not path.is_file():
        raise InputError(f"calibration file {str(path)!r} does not exist")
    refs: dict[str, dict[str, Any]] = {}
    edits: dict[str, dict[str, Any]] = {}
    # io's reader: bad UTF-8, bad JSON and too deep nesting are errors naming file:line.
    for lineno, row in read_jsonl_rows(path):
        where = f"{path}:{lineno}"
        if not isinstance(row, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(row).__name__}")
        pair, role = row.get("pair_id"), row.get("role")
        if pair is None or role not in ("reference", "edited", "correct", "incorrect"):
            continue
        # The texts a triple is built from: checked here, where the line is still known.
        needed = ("source", "summary") if role in ("reference", "correct") else ("summary",)
        for key in needed:
            if not isinstance(row.get(key), str):
                raise InputError(f"{where}: a {role} row needs a {key!r} string")
        target = refs if role in ("reference", "correct") else edits
        target.setdefault(str(pair), row)
    pairs = sorted(set(refs) & set(edits))
    if not pairs:
        raise InputError(
            f"{path}: no minimal pairs (rows with pair_id and role reference/edited) to calibrate on"
        )
    rng = np.random.default_rng(seed)
    chosen = sorted(rng.choice(len(pairs), size=min(n_pairs, len(pairs)), replace=False))
    return [
        (refs[pairs[i]]["source"], refs[pairs[i]]["summary"], edits[pairs[i]]["summary"])
        for i in chosen
    ]


# --- quantization -----------------------------------------------------------------------------


def quantize_dynamic_int8(src: Path, dst: Path) -> None:
    """Dynamic int8: per-channel signed weights of MatMul/Gemm, activations quantized at run
    time. Embedding tables (Gather) stay fp32: quantizing them costs accuracy and no time."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul", "Gemm"],
        extra_options={"MatMulConstBOnly": True},
    )


class _FeedReader:
    """onnxruntime CalibrationDataReader over a list of feed dicts."""

    def __init__(self, feeds: Sequence[dict[str, np.ndarray]]) -> None:
        self._it = iter(list(feeds))

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)

    def rewind(self) -> None:  # pragma: no cover - not used by MinMax calibration
        pass


def quantize_static_int8(src: Path, dst: Path, feeds: Sequence[dict[str, np.ndarray]]) -> None:
    """Static int8 (QDQ, MinMax calibration over ``feeds``, the model's inputs on calibration
    texts). Only MatMul/Gemm are quantized, as in the dynamic recipe."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    if not feeds:
        raise InputError("static quantization needs calibration inputs")
    quantize_static(
        str(src),
        str(dst),
        _FeedReader(feeds),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul", "Gemm"],
        extra_options={"ActivationSymmetric": True, "MatMulConstBOnly": True},
    )


# --- weight-only block quantization (w8 / w4) and fp16 ------------------------------------------

# Input features per scale. Encoders and classifiers: 32. Causal LMs: 64, where onnxruntime's
# int8-activation kernel ran 1.5x fp32 at 400 rows (1.1x with 32; MatMuls of SmolLM2's shapes)
# and log-probabilities stayed within the gate; on MiniLM, blocks of 64 flipped 2-4% of the
# sentsim / bertscore pairs (agreement 0.96 / 0.98, 1.000 with 32) for no speed (issue 13).
BLOCK_SIZE = 32
BLOCK_SIZE_BY_TASK = {"causal-lm": 64}
# w8a32 (fp32 arithmetic): blocks of 16 keep the shipped checker's close pairs (rank agreement
# 0.995 on held-out triples). SmolLM2 holds with 32 as well as with 16 (mean |diff| of the mean
# log-probability: 12 built-in triples 0.0126 vs 0.0129 nats, 30 Falke 2019 pairs 0.0106 vs
# 0.0110, every pair ordered as fp32 in both) from 43% of fp32's file instead of 46% (issue 13).
W8A32_BLOCK_SIZE = 16
W8A32_BLOCK_SIZE_BY_TASK = {"causal-lm": 32}
GATHER_BLOCK_SIZE = 32  # embedding rows: dequantized on lookup, so finer blocks cost no time
ACCURACY_LEVEL = 4  # MatMulNBits: int8 activations inside the kernel (CPU speed; issue 13)
MIN_GATHER_ELEMENTS = 65_536  # quantize embedding tables, not tiny ones (token types)
# MatMuls left in fp32: those whose *input activations* carry outliers, the MLP down projection
# of LLaMA-style decoders, whose input (the gated product) has a few channels far above the
# rest (Dettmers et al. 2022, "LLM.int8()"; Xiao et al. 2023, "SmoothQuant"), so int8
# activations in blocks lose the small ones. On SmolLM2 and 100 BUMP pairs (issue 13): all
# MatMuls quantized, blocks of 64, pair agreement with fp32 0.96; down projections kept fp32,
# 1.00 and 1.14x fp32's speed; down projections quantized with fp32 arithmetic
# (accuracy_level 0), 1.00 but 0.96x. Matched against node names (optimum names nodes after
# the module path); encoders have no such node.
FP32_MATMULS = ("/mlp/down_proj/",)


def quantize_weight_only(
    src: Path,
    dst: Path,
    bits: int = 8,
    block_size: int = BLOCK_SIZE,
    quantize_embeddings: bool = True,
    accuracy_level: int = ACCURACY_LEVEL,
    keep_fp32: Sequence[str] = FP32_MATMULS,
    gather_block_size: int = GATHER_BLOCK_SIZE,
) -> dict[str, Any]:
    """Weight-only block quantization of ``src`` into ``dst``: MatMul -> ``MatMulNBits``
    (onnxruntime's ``MatMulNBitsQuantizer``, symmetric, ``accuracy_level`` 4) and, with
    ``quantize_embeddings``, embedding ``Gather`` tables -> ``GatherBlockQuantized``. A MatMul
    whose weight is computed (a tied LM head reading the transposed embedding table) is not
    constant, so it and its table stay fp32: quantizing the head is what made SmolLM2's w8
    slower than fp32 in issue 13's measurements, and the tied table is stored once. MatMuls
    whose node name contains one of ``keep_fp32`` (see ``FP32_MATMULS``) are not quantized.

    Returns what was done (node counts, bytes before/after) for the manifest. Needs the
    ``onnx-ir`` package (imported by onnxruntime's quantizer; in the ``full`` extra).
    """
    import onnx

    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    except ImportError as exc:  # onnx-ir missing: onnxruntime does not declare it
        raise InputError(
            f"weight-only quantization needs onnxruntime's quantizer and onnx-ir ({exc}): "
            "pip install 'faithgate[full]'"
        ) from exc
    if bits not in (4, 8):
        raise InputError(f"weight-only quantization supports 4 or 8 bits, not {bits}")
    model = onnx.load(str(src))
    before = sum(t.ByteSize() for t in model.graph.initializer)
    excluded = [
        n.name
        for n in model.graph.node
        if n.op_type == "MatMul" and any(pattern in n.name for pattern in keep_fp32)
    ]
    quantizer = MatMulNBitsQuantizer(
        model,
        bits=bits,
        block_size=block_size,
        is_symmetric=True,
        accuracy_level=accuracy_level,
        nodes_to_exclude=excluded,
        op_types_to_quantize=("MatMul",),
    )
    _quiet_quantizer_logs()
    quantizer.process()
    qmodel = quantizer.model.model
    n_matmul = sum(1 for n in qmodel.graph.node if n.op_type == "MatMulNBits")
    n_gather = quantize_gathers(qmodel, bits, gather_block_size) if quantize_embeddings else 0
    after = sum(t.ByteSize() for t in qmodel.graph.initializer)
    save_onnx(qmodel, dst)
    return {
        "method": "MatMulNBits + GatherBlockQuantized (onnxruntime)",
        "bits": bits,
        "block_size": block_size,
        "gather_block_size": gather_block_size,
        "symmetric": True,
        "accuracy_level": accuracy_level,
        "matmuls_quantized": n_matmul,
        "matmuls_kept_fp32": len(excluded),
        "gathers_quantized": n_gather,
        "weight_bytes": {"before": before, "after": after},
    }


def _quiet_quantizer_logs() -> None:
    """onnxruntime's quantizer logs one line per node at INFO; faithgate reports a summary."""
    import logging

    for name in ("onnxruntime.quantization.matmul_nbits_quantizer", "root"):
        logging.getLogger(name).setLevel(logging.WARNING)


def quantize_gathers(model: Any, bits: int, block_size: int = GATHER_BLOCK_SIZE) -> int:
    """Replace each ``Gather`` over a large constant 2-D float table (token, position
    embeddings) by ``GatherBlockQuantized`` with uint8 data: blocks of ``block_size`` along the
    hidden axis, symmetric (the op's default zero point 2^(bits-1)), 4-bit values packed two a
    byte, low nibble first. onnxruntime's own quantizer only does 4-bit Gathers and moves the
    model to opset 21; this keeps the opset and does 8 bits too. A table that another node also
    reads (tied weights) is left alone: quantizing one reader would keep both copies.

    Returns the number of Gathers replaced.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    qmax = (1 << (bits - 1)) - 1  # 127 or 7: symmetric, the code -2^(bits-1) unused
    offset = 1 << (bits - 1)
    replaced = 0
    new_nodes = []
    for node in graph.node:
        table = inits.get(node.input[0]) if node.op_type == "Gather" and node.input else None
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if (
            table is None
            or axis != 0
            or readers.get(node.input[0], 0) != 1
            or len(table.dims) != 2
            or table.data_type != 1  # FLOAT
            or table.dims[1] % block_size
            or table.dims[0] * table.dims[1] < MIN_GATHER_ELEMENTS
        ):
            new_nodes.append(node)
            continue
        data = numpy_helper.to_array(table).astype(np.float32)
        rows, cols = data.shape
        blocks = data.reshape(rows, cols // block_size, block_size)
        scales = np.abs(blocks).max(axis=2) / qmax
        scales[scales == 0] = 1.0
        q = np.clip(np.rint(blocks / scales[..., None]), -qmax, qmax).astype(np.int16) + offset
        q = q.reshape(rows, cols).astype(np.uint8)
        if bits == 4:
            q = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
        qname, sname = table.name + f"_q{bits}", table.name + f"_q{bits}_scales"
        graph.initializer.append(numpy_helper.from_array(q, qname))
        graph.initializer.append(numpy_helper.from_array(scales.astype(np.float32), sname))
        new_nodes.append(
            helper.make_node(
                "GatherBlockQuantized",
                [qname, node.input[1], sname],
                list(node.output),
                name=(node.name or table.name) + f"_q{bits}",
                domain="com.microsoft",
                bits=bits,
                block_size=block_size,
                gather_axis=0,
                quantize_axis=1,
            )
        )
        graph.initializer.remove(table)
        replaced += 1
    if replaced:
        del graph.node[:]
        graph.node.extend(new_nodes)
        if not any(op.domain == "com.microsoft" for op in model.opset_import):
            model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return replaced


def convert_fp16(src: Path, dst: Path) -> dict[str, Any]:
    """Half-precision copy of ``src`` (weights and activations), fp32 inputs and outputs
    (``keep_io_types``), with onnxruntime's transformer converter: ``onnxconverter_common``'s
    produced graphs that do not load (issue 13). LayerNorm / Softmax / LogSoftmax stay fp32,
    where fp16 sums overflow or lose the small log-probabilities the likelihood metrics read."""
    import onnx
    from onnxruntime.transformers.onnx_model import OnnxModel

    model = OnnxModel(onnx.load(str(src)))
    keep = ["LayerNormalization", "SimplifiedLayerNormalization", "LogSoftmax", "Softmax"]
    model.convert_float_to_float16(keep_io_types=True, op_block_list=keep)
    save_onnx(model.model, dst)
    return {"method": "onnxruntime.transformers convert_float_to_float16", "fp32_ops": keep}


def quantize_w8a32(src: Path, dst: Path, task: str | None) -> dict[str, Any]:
    """``w8a32``: 8-bit weight blocks (MatMuls and embedding tables) with fp32 arithmetic, in
    the ``task``'s block size. fp32 arithmetic everywhere: no MatMul needs to be kept out for
    its activations."""
    block = W8A32_BLOCK_SIZE_BY_TASK.get(task or "", W8A32_BLOCK_SIZE)
    return quantize_weight_only(
        src, dst, bits=8, block_size=block, accuracy_level=0, keep_fp32=(),
        gather_block_size=block,
    )  # fmt: skip


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


# --- w8a8: SmoothQuant + per-token dynamic int8 ------------------------------------------------

# SmoothQuant's migration strength (the paper's default for OPT/LLaMA-sized models).
W8A8_ALPHA = 0.5


def activation_maxima(
    src: Path, feeds: Sequence[dict[str, np.ndarray]], names: Sequence[str]
) -> dict[str, np.ndarray]:
    """Per-channel (last axis) max |x| of the tensors ``names`` of the graph ``src`` over
    ``feeds``, by onnxruntime (no torch): the tensors become extra graph outputs."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    model = onnx.load(str(src))
    present = {o.name for o in model.graph.output}
    for name in names:
        if name not in present:
            model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if model.ByteSize() > 1_800_000_000:  # protobuf's 2 GB limit: go through a file
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "stats.onnx"
            onnx.save(model, str(path), save_as_external_data=True, location="stats.onnx_data")
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    else:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    del model
    inputs = {i.name for i in session.get_inputs()}
    maxima: dict[str, np.ndarray] = {}
    for feed in feeds:
        wanted = {k: v for k, v in feed.items() if k in inputs}
        for name, value in zip(names, session.run(list(names), wanted), strict=True):
            m = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = np.maximum(maxima[name], m) if name in maxima else m
    return maxima


def smoothing_scales(
    activation_max: np.ndarray, weight_max: np.ndarray, alpha: float = W8A8_ALPHA
) -> np.ndarray:
    """SmoothQuant's per-input-channel scales (Xiao et al. 2023, eq. 4):
    s_j = max|X_j|^alpha / max|W_j|^(1 - alpha); X / s and W * s multiply to X W."""
    s = np.maximum(activation_max, 1e-5) ** alpha / np.maximum(weight_max, 1e-5) ** (1.0 - alpha)
    return s.astype(np.float32)


def _smoothing_plan(
    model: Any, src: Path, feeds: Sequence[dict[str, np.ndarray]], alpha: float
) -> tuple[dict[int, np.ndarray], dict[str, list[int]], dict[str, np.ndarray]]:
    """SmoothQuant's scales for the graph ``model`` (loaded from ``src``): the position of each
    MatMul over a constant 2-D fp32 weight -> that weight; each input tensor -> the MatMuls
    reading it (q/k/v share one, gate/up another); each input -> its scales, from the input's
    per-channel maxima on ``feeds`` and the largest weight row over the MatMuls sharing it."""
    from onnx import numpy_helper

    if not feeds:
        raise InputError(
            "SmoothQuant (w8a8, w8a32-ctx8) needs calibration inputs (none were given)"
        )
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    # Positions in graph.node, not id(): protobuf may hand out fresh node wrappers.
    weights: dict[int, np.ndarray] = {}
    for i, node in enumerate(graph.node):
        if node.op_type == "MatMul" and node.input[1] in inits:
            w = numpy_helper.to_array(inits[node.input[1]])  # to_array copies: read once
            if w.ndim == 2 and w.dtype == np.float32:
                weights[i] = w
    groups: dict[str, list[int]] = {}
    for i in weights:
        groups.setdefault(graph.node[i].input[0], []).append(i)
    maxima = activation_maxima(src, feeds, list(groups))
    smooth = {
        x: smoothing_scales(
            maxima[x], np.max([np.abs(weights[i]).max(axis=1) for i in members], axis=0), alpha
        )
        for x, members in groups.items()
    }
    return weights, groups, smooth


def quantize_w8a8(
    src: Path,
    dst: Path,
    feeds: Sequence[dict[str, np.ndarray]],
    alpha: float = W8A8_ALPHA,
) -> dict[str, Any]:
    """SmoothQuant-smoothed int8 weights (per output channel) x int8 activations (per token).

    For each MatMul whose weight W (K x N) is a constant and input X its activations: with
    s_j = max|X_j|^alpha / max_n |W_jn|^(1-alpha) over the MatMuls sharing X (measured on
    ``feeds``), X' = X / s and W' = diag(s) W; W' is stored as int8 with one scale per column,
    and X' is quantized per row (token) at run time: scale_t = max_j |X'_tj| / 127,
    q = round(X' / scale_t) + 128 (uint8, zero point 128); y = MatMulInteger(q, W'_q) *
    scale_t * scale_n. Inputs shared by several MatMuls (q/k/v, gate/up) are smoothed and
    quantized once. Standard ONNX ops only, so the torch-free runtime runs it.
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    before = sum(t.ByteSize() for t in graph.initializer)
    weights, groups, smooth = _smoothing_plan(model, src, feeds, alpha)
    graph.initializer.extend(int8_constants())
    quantized_inputs: dict[str, tuple[str, str]] = {}
    replaced: set[str] = set()
    nodes: list[Any] = []
    for i, node in enumerate(graph.node):
        w = weights.get(i)
        if w is None:
            nodes.append(node)
            continue
        x, tag = node.input[0], "fg_w8a8" + node.name.replace("/", "_")
        if x not in quantized_inputs:
            q = tag + "_x"
            graph.initializer.append(numpy_helper.from_array(1.0 / smooth[x], q + "_inv_s"))
            nodes.append(helper.make_node("Mul", [x, q + "_inv_s"], [q + "_smooth"]))
            nodes += per_token_uint8_nodes(q + "_smooth", q)
            quantized_inputs[x] = (q + "_u8", q + "_scale")
        w_q, w_scale = int8_columns(w * smooth[x][:, None])
        graph.initializer.extend(
            [
                numpy_helper.from_array(w_q, tag + "_w"),
                numpy_helper.from_array(w_scale, tag + "_w_scale"),
            ]
        )
        replaced.add(node.input[1])
        nodes += int8_matmul_nodes(*quantized_inputs[x], tag, node.output[0])
    replace_graph_nodes(graph, nodes, replaced)
    after = sum(t.ByteSize() for t in graph.initializer)
    save_onnx(model, dst)
    return {
        "method": "SmoothQuant + per-token dynamic int8 activations x per-channel int8 weights "
        "(MatMulInteger)",
        "alpha": alpha,
        "matmuls_quantized": len(weights),
        "inputs_smoothed": len(groups),
        "calibration_inputs": len(feeds),
        "weight_bytes": {"before": before, "after": after},
    }


# --- w8a32-ctx8: exact scored tokens, an int8 context pass --------------------------------------


def quantize_context_int8(
    src: Path,
    dst: Path,
    feeds: Sequence[dict[str, np.ndarray]],
    alpha: float = W8A8_ALPHA,
) -> dict[str, Any]:
    """The ``w8a32-ctx8`` form of a causal LM: ``w8a32`` (8-bit weight blocks, fp32
    arithmetic) of the SmoothQuant-smoothed graph, from which the runtime builds an int8
    graph for cache-only passes (``expand.int8_context_graph``).

    Each input X shared by MatMuls over constant weights W gets an explicit
    ``Mul(X, 1/s)`` node (named ``fg_ctx8_smooth*``) and its weights become diag(s) W, with
    SmoothQuant's s (as in ``quantize_w8a8``, measured on ``feeds``): the same products in
    fp32, and the activations that reach those MatMuls are the smoothed ones, ready to be
    quantized per token. One file of ``w8a32``'s size serves both graphs.
    """
    import tempfile

    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src))
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    weights, groups, smooth = _smoothing_plan(model, src, feeds, alpha)
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    first_reader = {min(members): x for x, members in groups.items()}
    smoothed: dict[str, str] = {}
    nodes: list[Any] = []
    for i, node in enumerate(graph.node):
        x = first_reader.get(i)
        if x is not None:
            name = f"{CONTEXT_SMOOTHING_PREFIX}{len(smoothed)}"
            graph.initializer.append(numpy_helper.from_array(1.0 / smooth[x], name + "_inv_s"))
            nodes.append(helper.make_node("Mul", [x, name + "_inv_s"], [name], name=name))
            smoothed[x] = name
        w = weights.get(i)
        if w is not None and readers[node.input[1]] == 1:  # a weight read once: fold s in
            x = node.input[0]
            inits[node.input[1]].CopyFrom(
                numpy_helper.from_array(w * smooth[x][:, None], node.input[1])
            )
            node.input[0] = smoothed[x]
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    with tempfile.TemporaryDirectory() as tmp:
        smoothed_src = Path(tmp) / "smoothed.onnx"
        save_onnx(model, smoothed_src)
        del model
        recipe = quantize_w8a32(smoothed_src, dst, "causal-lm")
    return {
        **recipe,
        "context": {
            "method": "SmoothQuant + per-token dynamic int8 activations x per-channel int8 "
            "weights (MatMulInteger), built at load for cache-only passes",
            "alpha": alpha,
            "inputs_smoothed": len(smoothed),
            "calibration_inputs": len(feeds),
        },
    }
