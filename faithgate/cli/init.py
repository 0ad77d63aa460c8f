"""``faithgate init``: write a starter gate configuration for a user's project.

The starter gate runs ``facts`` (every number, date and name of an output is in its source)
and the fastest metric measured best per summary (``sentsim``). Thresholds come from
``faithgate calibrate``'s procedure on a labelled file when one is given, else from the
documented starting values (``STARTING_THRESHOLDS``, docs/gate.md). It never overwrites a
file: an existing target is refused, exit 2.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import click

from faithgate.errors import InputError
from faithgate.safety.escape import safe_line

# Starting thresholds when no labelled file is given (docs/gate.md, "faithgate init"):
# facts = 1.0: any unsupported number, date or name fails (false alarms on faithful CNN/DM
# summaries: docs/metrics/facts.md); sentsim = 0.74: 95% of the faithful summaries of the
# development set cogensumm score at least this (its 5th percentile is 0.7436; it flags 16%
# of the unfaithful ones). Calibrating on the user's own labelled outputs is better.
STARTING_THRESHOLDS = {"facts": 1.0, "sentsim": 0.74}
FAST_METRICS = ("sentsim",)
DEFAULT_OUTPUTS = "outputs.jsonl"


def _toml_string(value: str) -> str:
    """A TOML basic string holding ``value`` (JSON's escapes are TOML's)."""
    import json

    return json.dumps(value, ensure_ascii=False)


def render(
    metrics: list[str],
    thresholds: dict[str, float],
    calibrations: dict[str, dict[str, Any]],
    outputs: str | None,
) -> str:
    """The starter ``faithgate.toml``: its keys, with a comment on each."""
    names = ", ".join(_toml_string(m) for m in metrics)
    paired = ", ".join(_toml_string(m) for m in metrics if m != "facts")
    lines = [
        "# faithgate gate configuration, written by `faithgate init`.",
        "# Run `faithgate check` here. Every key: docs/gate.md in the faithgate repository.",
        f"metrics = [{names}]",
        (
            f"outputs = {_toml_string(outputs)}           # JSONL: id, source, summary per line"
            if outputs
            else f'# outputs = "{DEFAULT_OUTPUTS}"   # your outputs: JSONL, id, source, summary'
        ),
        'baseline = "faithgate-baseline.json"   # `faithgate check --update-baseline` writes it',
        '# backend = "torch"   # pin one backend before you record a baseline',
        "",
        "[thresholds]   # an output passes when its score >= the metric's threshold",
    ]
    for m in metrics:
        how = "calibrated" if m in calibrations else "starting value"
        if m == "facts":
            how = "every number, date and name must be in the source"
        lines.append(f"{m} = {thresholds[m]!r}   # {how}")
    lines += [
        "",
        "[rules]",
        "min_pass_rate = 1.0   # every output must pass",
        f"pair_consistency = {{ min_rate = 0.6, generate = true, metrics = [{paired}] }}",
        "regression = { tolerance = 0.01 }   # no drop against the baseline",
    ]
    for m, cal in calibrations.items():
        lines += ["", f"[calibration.{m}]   # provenance, from faithgate calibrate"]
        for key, value in cal.items():
            if isinstance(value, str):
                lines.append(f"{key} = {_toml_string(value)}")
            elif isinstance(value, list | tuple):
                lines.append(f"{key} = [{', '.join(repr(float(v)) for v in value)}]")
            elif isinstance(value, int | float) and not isinstance(value, bool):
                lines.append(f"{key} = {value!r}")
    return "\n".join(lines) + "\n"


def _refuse_existing(target: Path) -> None:
    if target.exists() or target.is_symlink():
        raise InputError(
            f"{target} exists already; faithgate init never overwrites a file: edit it, "
            "remove it, or pass --config NEW.toml"
        )
    pyproject = target.parent / "pyproject.toml"
    if target.name == "faithgate.toml" and pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8-sig"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
            return
        if isinstance(data.get("tool"), dict) and "faithgate" in data["tool"]:
            raise InputError(
                f"{pyproject} already has a [tool.faithgate] gate configuration; a "
                f"faithgate.toml beside it would replace it: edit that table instead"
            )


def _calibrate(labelled: str, metrics: list[str], backend: str) -> dict[str, Any]:
    """``faithgate calibrate``'s threshold (balanced accuracy) for each metric on the labelled
    file, with its provenance."""
    from faithgate.evaluation.bench.scoring import Bench
    from faithgate.evaluation.calibrate import MIN_PER_CLASS, calibrate, distinct_rows
    from faithgate.io import load_examples

    examples = [ex for ex in load_examples(labelled) if ex.label is not None]
    keys = [(ex.source, ex.summary) for ex in examples]
    kept, _, _ = distinct_rows(keys, [ex.label for ex in examples])
    n1 = sum(examples[i].label == 1 for i in kept)
    if min(n1, len(kept) - n1) < MIN_PER_CLASS:
        raise InputError(
            f"{labelled}: calibration needs at least {MIN_PER_CLASS} faithful (label 1) and "
            f"{MIN_PER_CLASS} unfaithful (label 0) distinct examples; got {n1} faithful and "
            f"{len(kept) - n1} unfaithful"
        )
    runs = Bench(metrics, backend=backend).score(examples)
    out = {}
    for m in metrics:
        cal = calibrate(
            runs[m].scores,
            [ex.label for ex in examples],
            metric=m,
            min_per_class=MIN_PER_CLASS,
            keys=keys,
        )
        out[m] = cal
    return out


@click.command("init")
@click.option(
    "--config",
    "config_path",
    default="faithgate.toml",
    show_default=True,
    metavar="FILE",
    help="The configuration file to write; never overwritten.",
)
@click.option(
    "--outputs",
    metavar="FILE.jsonl",
    help=f"Your summarizer's outputs (default: ./{DEFAULT_OUTPUTS} when it exists).",
)
@click.option(
    "--labelled",
    metavar="FILE.jsonl",
    help="Outputs labelled 1 (faithful) / 0 (unfaithful): thresholds are calibrated on them.",
)
@click.option(
    "--metric",
    "metric_names",
    multiple=True,
    metavar="NAME",
    help="A metric to gate on beside facts (repeatable; default: sentsim).",
)
@click.option("--backend", default="auto", show_default=True, help="Backend for calibration.")
def init_command(
    config_path: str,
    outputs: str | None,
    labelled: str | None,
    metric_names: tuple[str, ...],
    backend: str,
) -> None:
    """Write a starter gate configuration (faithgate.toml) for your project.

    It gates on facts and sentsim. Thresholds: calibrated on --labelled, else documented
    starting values. Exit 0 written; 2 the file exists or bad input.

    \b
    Example:
      faithgate init --outputs outputs.jsonl && faithgate check
    """
    from faithgate.metrics.base import metric_class

    target = Path(config_path)
    _refuse_existing(target)
    metrics = ["facts"] + [m for m in (metric_names or FAST_METRICS) if m != "facts"]
    for m in metrics:
        metric_class(m)  # an unknown name: one line naming the known ones, exit 2
    if outputs is None and (target.parent / DEFAULT_OUTPUTS).is_file():
        outputs = DEFAULT_OUTPUTS
    if outputs is not None:
        from faithgate.io import load_examples

        if not load_examples(outputs if Path(outputs).is_absolute() else target.parent / outputs):
            raise InputError(f"{outputs}: no outputs in the file")
    thresholds = {m: STARTING_THRESHOLDS.get(m) for m in metrics}
    calibrations: dict[str, dict[str, Any]] = {}
    if labelled is not None:
        others = [m for m in metrics if m != "facts"]
        for m, cal in _calibrate(labelled, others, backend).items():
            thresholds[m] = cal.threshold
            calibrations[m] = {
                k: v
                for k, v in cal.to_dict().items()
                if k in {"threshold", "ci95", "objective", "balanced_accuracy", "n", "data"}
            } | {"data": labelled}
    missing = [m for m, t in thresholds.items() if t is None]
    if missing:
        raise InputError(
            f"no starting threshold for {', '.join(missing)}: give --labelled FILE.jsonl to "
            "calibrate one, or choose among " + ", ".join(sorted(STARTING_THRESHOLDS))
        )
    text = render(metrics, thresholds, calibrations, outputs)  # type: ignore[arg-type]
    from faithgate.safety.atomic import atomic_write_text

    atomic_write_text(target, text)
    shown = ", ".join(f"{m} >= {thresholds[m]:g}" for m in metrics)
    how = "calibrated on " + safe_line(labelled) if labelled else "starting values"
    click.echo(f"wrote {safe_line(target)}: {shown} ({how})")
    if outputs is None:
        click.echo(f"next: put your outputs in {DEFAULT_OUTPUTS} (id, source, summary per line)")
    click.echo("next: faithgate check")
