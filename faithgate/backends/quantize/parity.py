"""The parity gate that decides whether to keep a quantized form (issue 5).

It compares scores of the quantized model with the fp32 reference on a calibration sample of
(source, faithful summary, unfaithful summary) triples - BUMP minimal pairs when a BUMP file is
given, else ``BUILTIN_CALIBRATION`` - and passes only when

- mean |score difference| <= 0.01 for bounded scores (cosines, probabilities), and <= 0.05
  nats for mean token log-probabilities (each score on its own scale),
- the order of the two summaries of a pair agrees with fp32 on >= 99% of pairs,
- consistency (share of pairs where the faithful summary scores higher) moves by <= 1 point.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.errors import InputError
from faithgate.io import read_jsonl_rows

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
