"""Threshold calibration on labelled data, written into the gate configuration.

A gate passes an example when ``score >= threshold``. ``calibrate`` picks the threshold

- that maximises balanced accuracy ``(TPR + TNR) / 2`` (the SummaC threshold, Laban et al.
  2022), or
- with ``target_precision=P``: the highest threshold (catching the most unfaithful summaries)
  whose precision for the "unfaithful" prediction, ``P(label 0 | score < threshold)``, is at
  least ``P``,

and a percentile-bootstrap 95% interval of that threshold (re-running the same choice on
resampled data; NaN, and not written, with fewer than ``MIN_CI_N`` examples of a class or no
resamples). ``faithgate calibrate`` refuses data with fewer than ``MIN_PER_CLASS`` scored
examples of either class: a threshold between one faithful and one unfaithful score says
nothing about the next summary. ``write_calibration`` stores it in ``faithgate.toml`` or ``pyproject.toml``
(``[tool.faithgate]``) with tomlkit, so comments and layout of the file survive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.config import find_config_file
from faithgate.errors import InputError
from faithgate.evaluation.meta import (
    MIN_CI_N,
    balanced_accuracy,
    best_threshold,
    threshold_curve,
)

# The fewest scored examples of each class ``faithgate calibrate`` writes a threshold from.
MIN_PER_CLASS = MIN_CI_N


@dataclass
class Calibration:
    """A calibrated threshold and where it came from."""

    metric: str
    threshold: float
    ci95: tuple[float, float]
    objective: str
    balanced_accuracy: float
    precision_unfaithful: float
    recall_unfaithful: float
    n: int
    n_faithful: int
    n_unfaithful: int
    data: str = ""
    settings_hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def precision_threshold(
    scores: Sequence[float], labels: Sequence[int], target_precision: float
) -> float:
    """Highest threshold whose "unfaithful" precision reaches ``target_precision`` (NaN if none).

    Only thresholds that flag at least one item qualify.
    """
    curve = threshold_curve(scores, labels)
    ok = (curve["flagged"] > 0) & (np.nan_to_num(curve["precision_unfaithful"]) >= target_precision)
    if not ok.any():
        return float("nan")
    return float(curve["threshold"][np.flatnonzero(ok)[-1]])


def _choose(scores: np.ndarray, labels: np.ndarray, target_precision: float | None) -> float:
    if target_precision is None:
        return best_threshold(scores, labels)[0]
    return precision_threshold(scores, labels, target_precision)


def calibrate(
    scores: Sequence[float],
    labels: Sequence[int],
    *,
    metric: str = "",
    target_precision: float | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    min_per_class: int = 1,
) -> Calibration:
    """Choose a threshold on labelled scores (see the module docstring).

    Unscored items (NaN) are left out. Raises ``InputError`` when a class has fewer than
    ``min_per_class`` (at least one) scored items or no threshold reaches the requested
    precision.
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    keep = ~np.isnan(s) & ~np.isnan(y)
    s, y = s[keep], y[keep].astype(int)
    n1, n0 = int((y == 1).sum()), int((y == 0).sum())
    need = max(1, min_per_class)
    if n1 < need or n0 < need:
        raise InputError(
            f"calibration needs at least {need} faithful (label 1) and {need} unfaithful "
            f"(label 0) examples with scores; got {n1} faithful and {n0} unfaithful"
        )
    if target_precision is not None and not 0 < target_precision <= 1:
        raise InputError(f"--target-precision must be in (0, 1], got {target_precision}")
    threshold = _choose(s, y, target_precision)
    if math.isnan(threshold):
        best = float(np.nanmax(threshold_curve(s, y)["precision_unfaithful"]))
        raise InputError(
            f"no threshold of {metric or 'this metric'} reaches precision {target_precision} "
            f"for 'unfaithful' on this data (best {best:.3f})"
        )
    rng = np.random.default_rng(seed)
    boot = []
    # Too few of a class: every resample repeats the same few scores (a degenerate interval).
    for _ in range(n_resamples if min(n1, n0) >= MIN_CI_N else 0):
        idx = rng.integers(0, len(s), len(s))
        if len(set(y[idx].tolist())) < 2:
            continue
        t = _choose(s[idx], y[idx], target_precision)
        if not math.isnan(t):
            boot.append(t)
    ci = (
        (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975)))
        if boot
        else (float("nan"), float("nan"))
    )
    flagged = s < threshold
    tp = int((flagged & (y == 0)).sum())
    objective = (
        "balanced_accuracy"
        if target_precision is None
        else f"precision_unfaithful>={target_precision:g}"
    )
    return Calibration(
        metric=metric,
        threshold=threshold,
        ci95=ci,
        objective=objective,
        balanced_accuracy=balanced_accuracy(s, y, threshold),
        precision_unfaithful=tp / int(flagged.sum()) if flagged.any() else float("nan"),
        recall_unfaithful=tp / n0,
        n=len(s),
        n_faithful=n1,
        n_unfaithful=n0,
    )


def default_config_path(cwd: str | Path = ".") -> Path:
    """Where ``faithgate calibrate`` writes without ``--config``: the file ``load_config`` reads
    from ``cwd`` (``faithgate.config.find_config_file``, the same search, parents included), so
    the gate uses the threshold just written. Where there is none: ``cwd``'s ``pyproject.toml``
    when it exists (a ``[tool.faithgate]`` table is added), else a new ``faithgate.toml``;
    ``load_config`` from ``cwd`` finds either."""
    found = find_config_file(cwd)
    if found is not None:
        return found
    cwd = Path(cwd)
    pyproject = cwd / "pyproject.toml"
    return pyproject if pyproject.is_file() else cwd / "faithgate.toml"


def _r(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


def write_calibration(path: str | Path, cal: Calibration) -> Path:
    """Write ``cal`` into the gate configuration at ``path``, preserving everything else.

    In ``pyproject.toml`` the keys live under ``[tool.faithgate]``, elsewhere at the top level:
    ``thresholds.<metric>`` (what the gate uses), ``calibration.<metric>`` (provenance), and the
    metric is added to ``metrics`` when that list does not name it.
    """
    import tomlkit

    path = Path(path)
    raw = path.read_bytes() if path.exists() else b""
    try:
        doc = tomlkit.parse(raw.decode("utf-8")) if path.exists() else tomlkit.document()
    except Exception as exc:  # noqa: BLE001 - a parse error is the user's file: say where
        raise InputError(f"{path}: not valid TOML ({exc})") from None
    root: Any = doc
    if path.name == "pyproject.toml":
        tool = doc.setdefault("tool", tomlkit.table(is_super_table=True))
        root = tool.setdefault("faithgate", tomlkit.table())
    metrics = root.get("metrics")
    if metrics is None:
        root["metrics"] = [cal.metric]
    elif isinstance(metrics, list) and cal.metric not in metrics:
        metrics.append(cal.metric)
    thresholds = root.setdefault("thresholds", tomlkit.table())
    thresholds[cal.metric] = _r(cal.threshold)
    calibration = root.setdefault("calibration", tomlkit.table(is_super_table=True))
    entry = tomlkit.table()
    entry["threshold"] = _r(cal.threshold)
    if all(math.isfinite(v) for v in cal.ci95):  # no interval: no key (TOML has no null)
        entry["ci95"] = [_r(v) for v in cal.ci95]
    entry["objective"] = cal.objective
    entry["balanced_accuracy"] = _r(cal.balanced_accuracy)
    if not math.isnan(cal.precision_unfaithful):
        entry["precision_unfaithful"] = _r(cal.precision_unfaithful)
    entry["recall_unfaithful"] = _r(cal.recall_unfaithful)
    entry["data"] = cal.data
    entry["n"] = cal.n
    entry["settings_hash"] = cal.settings_hash
    calibration[cal.metric] = entry
    from faithgate.atomic import atomic_write_text

    text = tomlkit.dumps(doc).replace("\r\n", "\n")
    if b"\r\n" in raw:  # the user's line endings stay theirs: only the calibrated lines change
        text = text.replace("\n", "\r\n")
    atomic_write_text(path, text)  # refused: WriteError, the old file intact
    return path
