"""Threshold calibration on labelled data, written into the gate configuration.

A gate passes an example when ``score >= threshold``. ``calibrate`` picks the threshold

- that maximises balanced accuracy ``(TPR + TNR) / 2`` (the SummaC threshold, Laban et al.
  2022), or
- with ``target_precision=P``: the highest threshold (catching the most unfaithful summaries)
  that passes at least one summary and whose precision for the "unfaithful" prediction,
  ``P(label 0 | score < threshold)``, is at least ``P`` (flagging every summary always reaches
  the share of unfaithful items, and is never what was asked),

and a percentile-bootstrap 95% interval of that threshold (re-running the same choice on
resampled data), rounded outward (low end down, high end up) to the decimal places of the
written threshold (at least 4), so the written interval contains what the bootstrap found; NaN,
and not written, with fewer than ``MIN_CI_N`` examples of a class, no resamples, or an interval
of zero width after rounding with fewer than ``MIN_ZERO_WIDTH_CI_N`` of a class).
``faithgate calibrate`` refuses data with fewer than ``MIN_PER_CLASS`` scored
examples of either class: a threshold between one faithful and one unfaithful score says
nothing about the next summary. A threshold above every score (a gate failing every summary) is
refused too: a target precision that no threshold reaches without flagging every summary, or a
metric whose best balanced accuracy is only reached so.

Items are deduplicated by ``keys`` (``(source, summary)``) as ``faithgate bench`` does: a
reference repeated once per edit counts once (``n_merged`` rows merged), and a key labelled
both ways is left out (``n_conflicting``). The written threshold is the shortest decimal (at
least 4 places) that splits these items exactly as the chosen one does, so the gate
(``score >= threshold`` passes) classifies them as the reported figures say.

Balanced accuracy, precision and recall are **in-sample**: the threshold is chosen and scored
on the same items, which flatters it (about 0.6 balanced accuracy on 30 items of pure noise).
``cv_balanced_accuracy`` is the balanced accuracy of thresholds chosen on the other folds of a
seeded stratified k-fold split (``CV_FOLDS``, fewer when a class has fewer items), pooled over
the held-out predictions. ``write_calibration`` stores it in ``faithgate.toml`` or
``pyproject.toml`` (``[tool.faithgate]``) with tomlkit, so comments and layout of the file
survive.
"""

from __future__ import annotations

import codecs
import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

import numpy as np

from faithgate.config import find_config_file
from faithgate.errors import InputError
from faithgate.evaluation.meta import (
    MIN_CI_N,
    MIN_ZERO_WIDTH_CI_N,
    balanced_accuracy,
    best_threshold,
    conflicting_keys,
    dedupe_labelled,
    threshold_curve,
)
from faithgate.safety.escape import utf8_text
from faithgate.safety.userjson import parse_problem
from faithgate.scoring.scorer import DEFAULT_METRICS

# The fewest scored examples of each class ``faithgate calibrate`` writes a threshold from.
MIN_PER_CLASS = MIN_CI_N

# Folds of the cross-validated balanced accuracy (fewer when a class has fewer items).
CV_FOLDS = 5

# At or below this cross-validated balanced accuracy a metric does not tell these labels apart
# better than chance (0.5) by a margin worth a threshold: ``chance_warning`` says so.
CHANCE_BALANCED_ACCURACY = 0.55

# The figures computed on the items the threshold was chosen on.
IN_SAMPLE = ("balanced_accuracy", "precision_unfaithful", "recall_unfaithful")


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
    cv_balanced_accuracy: float = float("nan")  # out-of-fold: see the module docstring
    cv_folds: int = 0  # 0: not cross-validated (a class has fewer than 2 items)
    n_merged: int = 0  # rows merged into an earlier row with the same key and label
    n_conflicting: int = 0  # keys labelled both ways, left out
    n_unscored: int = 0  # distinct items the metric could not score, left out

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "in_sample": list(IN_SAMPLE)}


def precision_threshold(
    scores: Sequence[float], labels: Sequence[int], target_precision: float
) -> float:
    """Highest threshold whose "unfaithful" precision reaches ``target_precision`` (NaN if none).

    Only thresholds that flag at least one item and pass at least one qualify: flagging every
    item reaches any precision up to the share of unfaithful items, whatever the scores.
    """
    curve = threshold_curve(scores, labels)
    flagged = curve["flagged"]
    n = int(flagged[-1])  # the last candidate lies above every score: it flags them all
    reached = np.nan_to_num(curve["precision_unfaithful"]) >= target_precision
    ok = (flagged > 0) & (flagged < n) & reached
    if not ok.any():
        return float("nan")
    return float(curve["threshold"][np.flatnonzero(ok)[-1]])


def _choose(scores: np.ndarray, labels: np.ndarray, target_precision: float | None) -> float:
    if target_precision is None:
        return best_threshold(scores, labels)[0]
    return precision_threshold(scores, labels, target_precision)


def distinct_rows(keys: Sequence[Any], labels: Sequence[Any]) -> tuple[np.ndarray, int, int]:
    """The labelled rows calibration uses, deduplicated as ``faithgate bench`` does: indices of
    the first row of each key whose rows agree on the label; the number of rows merged into
    such a first row, and of keys left out because their rows are labelled both ways."""
    keys = list(keys)
    bad = conflicting_keys(keys, labels)
    kept, n_conflicting = dedupe_labelled(keys, labels, bad)
    return kept, sum(k not in bad for k in keys) - len(kept), n_conflicting


def _exact_threshold(threshold: float, scores: np.ndarray, digits: int = 4) -> float:
    """The shortest decimal, ``digits`` places or more, that splits ``scores`` exactly as
    ``threshold`` does (``score >= t``), so a written, readable threshold gives the gate the
    classification calibrate reported; ``threshold`` itself when none is shorter."""
    for d in range(digits, 18):
        t = round(threshold, d)
        if np.array_equal(scores >= t, scores >= threshold):
            return float(t)
    return float(threshold)


def decimal_places(x: float, minimum: int = 4) -> int:
    """Decimal places of the shortest decimal that reads back as ``x``, at least ``minimum``:
    the places a threshold from ``calibrate`` is shown and written with."""
    if not math.isfinite(x):
        return minimum
    exponent = Decimal(repr(float(x))).as_tuple().exponent
    return max(minimum, -int(exponent))


def outward_ci(ci: tuple[float, float], threshold: float) -> tuple[float, float]:
    """``ci`` rounded outward (low end down, high end up) to ``threshold``'s decimal places
    (``decimal_places``), so the rounded interval contains the unrounded one; NaN stays NaN."""
    q = Decimal(1).scaleb(-decimal_places(threshold))
    lo, hi = ci
    return (
        lo if math.isnan(lo) else float(Decimal(repr(float(lo))).quantize(q, ROUND_FLOOR)),
        hi if math.isnan(hi) else float(Decimal(repr(float(hi))).quantize(q, ROUND_CEILING)),
    )


def _cv_balanced_accuracy(
    s: np.ndarray, y: np.ndarray, target_precision: float | None, seed: int
) -> tuple[float, int]:
    """Balanced accuracy of out-of-fold predictions, each fold's threshold chosen on the
    other folds (stratified, shuffled with ``seed``); ``(NaN, 0)`` when a class has fewer
    than 2 items. A fold whose training part reaches no target precision flags nothing."""
    from sklearn.model_selection import StratifiedKFold

    folds = min(CV_FOLDS, int((y == 1).sum()), int((y == 0).sum()))
    if folds < 2:
        return float("nan"), 0
    pred = np.zeros(len(y), dtype=bool)  # predicted faithful
    for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(s, y):
        t = _choose(s[train], y[train], target_precision)
        pred[test] = True if math.isnan(t) else s[test] >= t
    pos, neg = y == 1, y == 0
    return float((pred[pos].mean() + (~pred[neg]).mean()) / 2), folds


def calibrate(
    scores: Sequence[float],
    labels: Sequence[int],
    *,
    metric: str = "",
    target_precision: float | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    min_per_class: int = 1,
    keys: Sequence[Any] | None = None,
) -> Calibration:
    """Choose a threshold on labelled scores (see the module docstring).

    With ``keys`` (e.g. ``(source, summary)`` per row), rows are deduplicated as by
    ``faithgate bench``: the first row of each key, keys labelled both ways left out. Unscored
    items (NaN) are left out. Raises ``InputError`` when a class has fewer than
    ``min_per_class`` (at least one) scored items, no threshold reaches the requested
    precision, or the chosen threshold would flag every item.
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    if len(s) != len(y) or (keys is not None and len(keys) != len(y)):
        raise ValueError("one score, label (and key) per row is required")
    labelled = np.flatnonzero(~np.isnan(y))
    n_merged = n_conflicting = 0
    if keys is not None:
        kept, n_merged, n_conflicting = distinct_rows(
            [keys[i] for i in labelled], y[labelled].tolist()
        )
        labelled = labelled[kept]
    s, y = s[labelled], y[labelled].astype(int)
    n_unscored = int(np.isnan(s).sum())
    s, y = s[~np.isnan(s)], y[~np.isnan(s)]
    n1, n0 = int((y == 1).sum()), int((y == 0).sum())
    need = max(1, min_per_class)
    if n1 < need or n0 < need:
        merged = (
            f" (after merging {n_merged} repeated rows and leaving out {n_conflicting} "
            "labelled both ways)"
            if n_merged or n_conflicting
            else ""
        )
        raise InputError(
            f"calibration needs at least {need} faithful (label 1) and {need} unfaithful "
            f"(label 0) examples with scores; got {n1} faithful and {n0} unfaithful{merged}"
        )
    if target_precision is not None and not 0 < target_precision <= 1:
        raise InputError(f"--target-precision must be in (0, 1], got {target_precision}")
    threshold = _choose(s, y, target_precision)
    if math.isnan(threshold):  # only with a target precision
        curve = threshold_curve(s, y)
        partial = (curve["flagged"] > 0) & (curve["flagged"] < len(s))
        best = float(np.nanmax(curve["precision_unfaithful"][partial], initial=0.0))
        if target_precision is not None and n0 / len(s) >= target_precision:
            raise InputError(
                f"--target-precision {target_precision:g} is reached only by flagging every "
                f"summary: {n0} of {len(s)} ({n0 / len(s):.3f}) are unfaithful, so a gate that "
                f"fails everything has that precision, and no threshold that passes a summary "
                f"reaches it (best {best:.3f})"
            )
        raise InputError(
            f"no threshold of {metric or 'this metric'} reaches precision {target_precision} "
            f"for 'unfaithful' on this data (best {best:.3f})"
        )
    if bool((s < threshold).all()):  # a gate failing every summary: never what was asked
        raise InputError(
            f"the best balanced accuracy of {metric or 'this metric'} on this data is reached "
            "only by flagging every summary: its scores do not separate faithful from "
            "unfaithful ones"
        )
    threshold = _exact_threshold(threshold, s)
    rng = np.random.default_rng(seed)
    boot = []
    # Too few of a class: every resample repeats the same few scores (a degenerate interval).
    for _ in range(n_resamples if min(n1, n0) >= MIN_CI_N else 0):
        idx = rng.integers(0, len(s), len(s))
        if len(set(y[idx].tolist())) < 2:
            continue
        t = _choose(s[idx], y[idx], target_precision)
        if not math.isnan(t):
            boot.append(_exact_threshold(t, s))  # on the threshold's own scale
    ci = (
        (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975)))
        if boot
        else (float("nan"), float("nan"))
    )
    # As written and shown: rounded outward at the threshold's places (a rounded-to-nearest
    # (0.99992, 0.99994) was [0.9999, 0.9999], zero width and without the threshold 0.99994).
    ci = outward_ci(ci, threshold)
    if ci[0] == ci[1] and min(n1, n0) < MIN_ZERO_WIDTH_CI_N:
        ci = (float("nan"), float("nan"))  # zero width from few items: not certainty
    flagged = s < threshold
    tp = int((flagged & (y == 0)).sum())
    objective = (
        "balanced_accuracy"
        if target_precision is None
        else f"precision_unfaithful>={target_precision:g}"
    )
    cv_ba, cv_folds = _cv_balanced_accuracy(s, y, target_precision, seed)
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
        cv_balanced_accuracy=cv_ba,
        cv_folds=cv_folds,
        n_merged=n_merged,
        n_conflicting=n_conflicting,
        n_unscored=n_unscored,
    )


def chance_warning(cal: Calibration) -> str | None:
    """A warning when the threshold's cross-validated balanced accuracy, the estimate of how it
    does on new data (the in-sample figure flatters it), is at most
    ``CHANCE_BALANCED_ACCURACY``: such a threshold fails faithful summaries about as often as
    unfaithful ones. ``None`` otherwise, and when it was not cross-validated."""
    cv = cal.cv_balanced_accuracy
    if not cal.cv_folds or math.isnan(cv) or cv > CHANCE_BALANCED_ACCURACY:
        return None
    return (
        f"{cal.metric or 'this metric'} does not separate these labels better than chance "
        f"(cross-validated balanced accuracy {cv:.3f}); the threshold may fail faithful outputs"
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


def _prefix(path: Path, data: Mapping[str, Any]) -> tuple[str, ...]:
    """Where the gate's keys live in ``path`` (read as ``data``): ``[tool.faithgate]`` in a
    pyproject.toml, and in a faithgate.toml that uses that table (the gate reads both forms
    there, and refuses a file that mixes them); the top level elsewhere."""
    tool = data.get("tool")
    uses_tool_table = isinstance(tool, Mapping) and "faithgate" in tool
    return ("tool", "faithgate") if path.name == "pyproject.toml" or uses_tool_table else ()


def _lookup(table: Any, keys: Sequence[str]) -> Any:
    """``table[k1][k2]...`` (a dict or a tomlkit container), None where a key is missing."""
    for key in keys:
        if not hasattr(table, "keys") or key not in table:
            return None
        table = table[key]
    return table


@dataclass
class _Target:
    """The configuration file as ``write_calibration`` found it."""

    raw: bytes  # its bytes (empty when it does not exist)
    text: str  # decoded, a byte order mark read past
    data: dict[str, Any]  # what the gate reads (tomllib)


def _read_target(path: Path) -> _Target:
    """The configuration file at ``path`` (empty when it does not exist), parsed as the gate
    parses it (a file the gate rejects is rejected in the same words), refused
    (``InputError``) when a key ``write_calibration`` writes under has another type."""
    import tomllib

    try:
        raw = path.read_bytes() if path.exists() else b""
        # utf-8-sig: a BOM (Windows editors) is read past, as the gate reads the file;
        # write_calibration puts it back.
        text = raw.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    try:
        # As faithgate.config reads it: tomllib's message, with the line and column it names
        # (tomlkit's own named a NUL at line 1 for an unclosed list).
        data = tomllib.loads(text)
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError is a ValueError
        raise InputError(f"{path}: invalid TOML ({parse_problem(exc)})") from None
    root: Any = data
    where = ""
    for key in _prefix(path, data):
        where += f"{key}"
        if key in root and not isinstance(root[key], dict):
            raise InputError(f"{path}: {where} must be a table; cannot write the calibration there")
        root = root.get(key, {})
        where += "."
    metrics = root.get("metrics")
    if metrics is not None and not (
        isinstance(metrics, str)
        or (isinstance(metrics, list) and all(isinstance(m, str) for m in metrics))
    ):
        raise InputError(
            f"{path}: {where}metrics must be a metric name or a list of them; cannot add the "
            "calibrated metric to it"
        )
    for key in ("thresholds", "calibration"):
        if key in root and not isinstance(root[key], dict):
            raise InputError(
                f"{path}: {where}{key} must be a table; cannot write the calibration there"
            )
    return _Target(raw, text, data)


@dataclass
class _Plan:
    """What ``write_calibration`` sets, under the gate's keys (``_prefix``)."""

    prefix: tuple[str, ...]
    metric: str
    selection: list[str] | None  # the gate's new ``metrics``; None: left as it is
    threshold: float
    entry: dict[str, Any]  # the ``calibration.<metric>`` table


def _plan(path: Path, target: _Target, cal: Calibration) -> _Plan:
    prefix = _prefix(path, target.data)
    root = _lookup(target.data, prefix)
    # A configuration the gate reads now (its selection to keep); a new one selects the metric.
    existing = root is not None if prefix else bool(target.raw)
    metrics = (root or {}).get("metrics")
    selection: list[str] | None = None
    if metrics is None and not existing:
        selection = [cal.metric]
    elif metrics is None:  # the gate runs its default selection: keep it, plus this metric
        selection = list(DEFAULT_METRICS)
        selection += [] if cal.metric in selection else [cal.metric]
    elif isinstance(metrics, str):  # one name is accepted for a list of one
        selection = None if metrics == cal.metric else [metrics, cal.metric]
    elif cal.metric not in metrics:
        selection = [*metrics, cal.metric]
    entry: dict[str, Any] = {"threshold": float(cal.threshold)}
    if all(math.isfinite(v) for v in cal.ci95):  # no interval: no key (TOML has no null)
        # Rounded outward, never to nearest: the written interval holds the unrounded one.
        entry["ci95"] = list(outward_ci(cal.ci95, cal.threshold))
    entry["objective"] = cal.objective
    entry["balanced_accuracy"] = _r(cal.balanced_accuracy)
    if not math.isnan(cal.precision_unfaithful):
        entry["precision_unfaithful"] = _r(cal.precision_unfaithful)
    entry["recall_unfaithful"] = _r(cal.recall_unfaithful)
    entry["in_sample"] = list(IN_SAMPLE)
    if not math.isnan(cal.cv_balanced_accuracy):
        entry["cv_balanced_accuracy"] = _r(cal.cv_balanced_accuracy)
        entry["cv_folds"] = cal.cv_folds
    entry["data"] = utf8_text(cal.data)  # a file name: TOML is UTF-8
    entry["n"] = cal.n
    entry["settings_hash"] = cal.settings_hash
    # Exactly the threshold the figures were computed at (``calibrate`` makes it short): a
    # rounded one could move items across it (0.99991 vs 0.99996 both round to 0.9999).
    return _Plan(prefix, cal.metric, selection, float(cal.threshold), entry)


def _expected(data: dict[str, Any], plan: _Plan) -> dict[str, Any]:
    """``data`` with the plan's keys set: what the written file must read as, and nothing
    else."""
    out = copy.deepcopy(data)
    root = out
    for key in plan.prefix:
        root = root.setdefault(key, {})
    if plan.selection is not None:
        root["metrics"] = list(plan.selection)
    root.setdefault("thresholds", {})[plan.metric] = plan.threshold
    root.setdefault("calibration", {})[plan.metric] = copy.deepcopy(plan.entry)
    return out


def _same(a: Any, b: Any) -> bool:
    """``a == b`` for parsed TOML, with types kept apart (``1``, ``1.0`` and ``true`` differ)
    and NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _entry_table(plan: _Plan) -> Any:
    import tomlkit

    entry = tomlkit.table()
    for key, value in plan.entry.items():
        entry[key] = value
    entry.add(tomlkit.nl())  # a blank line before the next table, as between the others
    return entry


def _set_selection(root: Any, plan: _Plan) -> None:
    if plan.selection is None:
        return
    metrics = root.get("metrics")
    if isinstance(metrics, list):  # appended: the list keeps its layout and comments
        metrics.append(plan.metric)
    else:
        root["metrics"] = list(plan.selection)


def _edit_in_place(doc: Any, plan: _Plan) -> str:
    """The calibration written where tomlkit puts it: new tables after their siblings."""
    import tomlkit

    root = doc
    if plan.prefix:
        tool = doc.setdefault("tool", tomlkit.table(is_super_table=True))
        root = tool.setdefault("faithgate", tomlkit.table())
    _set_selection(root, plan)
    thresholds = root.setdefault("thresholds", tomlkit.table())
    thresholds[plan.metric] = plan.threshold
    calibration = root.setdefault("calibration", tomlkit.table(is_super_table=True))
    calibration[plan.metric] = _entry_table(plan)
    return tomlkit.dumps(doc)


def _edit_appending(doc: Any, plan: _Plan) -> str:
    """For a file tomlkit cannot add a table to in place (dotted keys, ``faithgate.outputs =
    ...``, where it put the table's header before the dotted keys that follow, which then
    belonged to the new table): values are set in the tables that exist (tomlkit keeps a
    dotted key dotted), and each table new to the file goes at its end, under a header naming
    its whole path, which TOML allows under a table made with dotted keys."""
    import tomlkit

    tail = tomlkit.document()

    def put(keys: tuple[str, ...], item: Any) -> Any:
        table: Any = tail
        for key in keys[:-1]:
            if key not in table:
                table[key] = tomlkit.table(is_super_table=True)
            table = table[key]
        table[keys[-1]] = item
        return item

    root = _lookup(doc, plan.prefix)
    if root is None:  # no [tool.faithgate]: one, at the end
        root = put(plan.prefix, tomlkit.table())
        root.add(tomlkit.nl())
    _set_selection(root, plan)
    thresholds = root.get("thresholds")
    if thresholds is not None:
        thresholds[plan.metric] = plan.threshold
    else:
        thresholds = put((*plan.prefix, "thresholds"), tomlkit.table())
        thresholds[plan.metric] = plan.threshold
        thresholds.add(tomlkit.nl())
    calibration = root.get("calibration")
    if calibration is not None and plan.metric in calibration:
        del calibration[plan.metric]
    put((*plan.prefix, "calibration", plan.metric), _entry_table(plan))
    text = tomlkit.dumps(doc).replace("\r\n", "\n")
    added = tomlkit.dumps(tail)
    if text and added:  # a blank line between the file and what is added
        text += "" if text.endswith("\n") else "\n"
        text += "" if text.endswith("\n\n") else "\n"
    return text + added


def _edit_inline(doc: Any, plan: _Plan) -> str:
    """For a file neither other way can write into (an inline ``faithgate = {...}``; dotted
    keys tomlkit cannot read back with a table added at the end): no table header at all, each
    new table an inline one, set as a value where its keys live."""
    import tomlkit

    root = _lookup(doc, plan.prefix)
    if root is None:  # no [tool.faithgate] to add values to (the other ways add one)
        raise LookupError(".".join(plan.prefix))
    _set_selection(root, plan)
    thresholds = root.get("thresholds")
    if thresholds is None:
        thresholds = root["thresholds"] = tomlkit.inline_table()
    thresholds[plan.metric] = plan.threshold
    entry = tomlkit.inline_table()
    entry.update(plan.entry)
    calibration = root.get("calibration")
    if calibration is None:
        calibration = root["calibration"] = tomlkit.inline_table()
    calibration[plan.metric] = entry
    return tomlkit.dumps(doc)


def _finish(text: str, raw: bytes) -> str:
    """``text`` with the original file's last line, line endings and byte order mark."""
    text = text.replace("\r\n", "\n")
    if text.endswith("\n\n") and not raw.replace(b"\r\n", b"\n").endswith(b"\n\n"):
        text = text.rstrip("\n") + "\n"  # the entry's blank line, when it ends the file
    if b"\r\n" in raw:  # the user's line endings stay theirs: only the calibrated lines change
        text = text.replace("\n", "\r\n")
    if raw.startswith(codecs.BOM_UTF8):  # and so does a byte order mark
        text = "\ufeff" + text
    return text


def _reads_as(text: str, expected: dict[str, Any]) -> bool:
    """Whether ``text`` reads as ``expected`` to the gate (tomllib) and to tomlkit (the next
    ``calibrate`` edits it)."""
    import tomllib

    import tomlkit

    text = text.removeprefix("\ufeff")
    try:
        if not _same(tomllib.loads(text), expected):
            return False
    except (ValueError, RecursionError):  # not TOML: a table tomlkit wrote twice
        return False
    try:
        # With LF line ends: tomllib reads a CRLF inside a multi-line string as LF, tomlkit
        # keeps it (a CRLF pyproject with black's multi-line extend-exclude never matched).
        return _same(tomlkit.parse(text.replace("\r\n", "\n")).unwrap(), expected)
    except Exception:  # noqa: BLE001 - valid TOML tomlkit cannot read back
        return False


def _render(path: Path, cal: Calibration) -> str:
    """The text of ``path`` with ``cal`` written into it, checked to read (tomllib, as the gate
    reads it) exactly as the old file with only the calibrated keys set: ``InputError`` when
    neither way of editing it gives that."""
    import tomlkit

    target = _read_target(path)
    plan = _plan(path, target, cal)
    expected = _expected(target.data, plan)
    try:
        tomlkit.parse(target.text)
    except Exception as exc:  # noqa: BLE001 - valid TOML tomlkit cannot read: say so
        raise InputError(
            f"{path}: cannot edit this file to write the calibration (tomlkit: {exc}); "
            "it is left unchanged"
        ) from None
    for edit in (_edit_in_place, _edit_appending, _edit_inline):
        try:
            text = _finish(edit(tomlkit.parse(target.text), plan), target.raw)
        except Exception:  # noqa: BLE001, S112 - tomlkit refusing this layout: the next way
            continue
        if _reads_as(text, expected):
            return text
    tables = "[tool.faithgate] and its tables" if plan.prefix else "its tables"
    raise InputError(
        f"{path}: cannot add the calibration without changing other settings of this file "
        f"(its dotted keys or inline tables); left unchanged: write {tables} under [table] "
        "headers and run calibrate again"
    )


def check_calibration_target(path: str | Path, metric: str = "faithgate-check") -> None:
    """Refuse (``InputError``, exit 2) a configuration ``write_calibration`` could not write
    into (not TOML; ``tool`` or another key it writes under not a table; a layout it cannot
    add the calibration to without changing other settings): checked before scoring, so a
    long run does not end in that error. Nothing is written."""
    placeholder = Calibration(
        metric=metric,
        threshold=0.5,
        ci95=(0.25, 0.75),
        objective="balanced_accuracy",
        balanced_accuracy=0.5,
        precision_unfaithful=0.5,
        recall_unfaithful=0.5,
        n=2 * MIN_PER_CLASS,
        n_faithful=MIN_PER_CLASS,
        n_unfaithful=MIN_PER_CLASS,
        cv_balanced_accuracy=0.5,
        cv_folds=CV_FOLDS,
    )
    _render(Path(path), placeholder)


def write_calibration(path: str | Path, cal: Calibration) -> Path:
    """Write ``cal`` into the gate configuration at ``path``, preserving everything else.

    In ``pyproject.toml`` the keys live under ``[tool.faithgate]``, elsewhere at the top level:
    ``thresholds.<metric>`` (what the gate uses), ``calibration.<metric>`` (provenance), and the
    metric is added to the gate's selection when that does not name it: to the ``metrics``
    list, to a single name given as a string (a list of both), or, in a configuration with
    no ``metrics`` key, to the default selection the gate runs (``ensemble``), so no metric
    the gate ran is dropped. A configuration written anew selects the calibrated metric.
    A key it writes under that is not a table (``tool`` in a pyproject.toml, ``thresholds``)
    is refused (``InputError``; ``check_calibration_target`` checks it before scoring).

    New tables go where tomlkit puts them; in a file where that would move other keys (tables
    written with dotted keys), at the end of the file under headers naming their whole path.
    The new text is parsed again (tomllib) before it is written: unless it reads as the old
    file with only the keys above set, nothing is written (``InputError``).
    """
    from faithgate.safety.atomic import atomic_write_text

    path = Path(path)
    text = _render(path, cal)
    atomic_write_text(path, text)  # refused: WriteError, the old file intact
    return path
