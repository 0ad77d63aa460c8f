"""A ``Calibration`` record with fixed, plausible figures, for the tests that write one into
a configuration (``faithgate.evaluation.calibrate.write_calibration``)."""

from __future__ import annotations

from typing import Any

from faithgate.evaluation.calibrate import Calibration


def calibration(
    metric: str = "bertscore", threshold: float = 0.55123, **fields: Any
) -> Calibration:
    """The record for ``metric`` at ``threshold``; ``fields`` set any other of its fields."""
    figures: dict[str, Any] = {
        "ci95": (0.51, 0.58),
        "objective": "balanced_accuracy",
        "balanced_accuracy": 0.71,
        "precision_unfaithful": 0.6,
        "recall_unfaithful": 0.7,
        "n": 400,
        "n_faithful": 200,
        "n_unfaithful": 200,
        "data": "d.jsonl",
        "settings_hash": f"{metric}:abc",
    }
    return Calibration(metric=metric, threshold=threshold, **{**figures, **fields})
