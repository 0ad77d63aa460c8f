"""int8 quantization of exported ONNX models, and the parity gate that decides whether to keep it.

Quantization (onnxruntime.quantization):

- ``dynamic``: weights of MatMul/Gemm stored as signed int8 per channel, activations quantized
  on the fly per batch (``quantize_dynamic``). No calibration data needed; the usual choice for
  transformers on CPU (Zafrir et al. 2019, "Q8BERT"; onnxruntime's transformer quantization notes).
- ``static``: activations get fixed scales measured on calibration inputs (``quantize_static``,
  QDQ format). Faster on some CPUs, usually less accurate on transformers.

The parity gate (issue 5) compares scores of the quantized model with the fp32 reference on a
calibration sample of (source, faithful summary, unfaithful summary) triples - BUMP minimal pairs
when a BUMP file is given, else the built-in sentences below - and passes only when

- mean |score difference| <= 0.01 for bounded scores (cosines, probabilities),
- the order of the two summaries of a pair agrees with fp32 on >= 99% of pairs,
- consistency (share of pairs where the faithful summary scores higher) moves by <= 1 point.

Unbounded scores (log-probabilities) are gated on ranking and consistency only; their mean
difference is still recorded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.errors import InputError

QUANTIZATIONS = ("none", "int8", "int8-dynamic", "int8-static")


def normalise_quantization(name: str) -> str:
    """``int8`` is an alias of ``int8-dynamic``; raise ``InputError`` for unknown names."""
    name = (name or "none").strip().lower()
    if name in ("fp32", "none"):
        return "none"
    if name == "int8":
        return "int8-dynamic"
    if name not in QUANTIZATIONS:
        raise InputError(
            f"unknown quantization {name!r}; choose one of: none, int8, int8-dynamic, int8-static"
        )
    return name


@dataclass(frozen=True)
class Tolerance:
    """Limits of the parity gate (defaults from issue 5)."""

    max_mean_abs_diff: float = 0.01  # bounded scores only
    min_rank_agreement: float = 0.99
    max_consistency_change: float = 0.01  # fraction of pairs: 0.01 = 1 point

    @classmethod
    def zero(cls) -> Tolerance:
        """A gate nothing but a bit-identical model passes (used to test refusal)."""
        return cls(0.0, 1.0, 0.0)


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
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


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
    diff = np.abs(ref - new)
    ref_order = np.sign(ref[:, 0] - ref[:, 1])
    new_order = np.sign(new[:, 0] - new[:, 1])
    agreement = float(np.mean(ref_order == new_order)) if len(ref) else 1.0
    cons_ref = float(np.mean(ref[:, 0] > ref[:, 1])) if len(ref) else 0.0
    cons_new = float(np.mean(new[:, 0] > new[:, 1])) if len(new) else 0.0
    mean_diff = float(diff.mean()) if diff.size else 0.0
    reasons = []
    if bounded and mean_diff > tolerance.max_mean_abs_diff:
        reasons.append(f"mean |diff| {mean_diff:.4f} > {tolerance.max_mean_abs_diff}")
    if agreement < tolerance.min_rank_agreement:
        reasons.append(f"pair ranking agreement {agreement:.3f} < {tolerance.min_rank_agreement}")
    if abs(cons_new - cons_ref) > tolerance.max_consistency_change + 1e-12:
        reasons.append(
            f"consistency moved {100 * abs(cons_new - cons_ref):.1f} points "
            f"> {100 * tolerance.max_consistency_change:.1f}"
        )
    if tolerance.max_mean_abs_diff == 0.0 and float(diff.max(initial=0.0)) > 0.0:
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
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            pair, role = row.get("pair_id"), row.get("role")
            if pair is None or role not in ("reference", "edited", "correct", "incorrect"):
                continue
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
