"""``faithgate check``: run the configured gate and exit 0 (pass), 1 (gate failed) or 2 (usage
or input error). Flags override ``[tool.faithgate]`` / ``faithgate.toml``; the command only
translates arguments, the decisions are made by ``faithgate.gate``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import click

from faithgate.backends import BACKEND_CHOICES
from faithgate.cli.execution_options import (
    execution_options,
    execution_overrides,
    refuse_foreign_flags,
)
from faithgate.errors import InputError, did_you_mean
from faithgate.formats import REPORT_FORMATS, file_report_kinds


def report_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--NAME FILE`` for every file report format of the registry (``faithgate.formats``),
    handed to the command as one ``reports`` mapping (kind -> path or None)."""
    kinds = file_report_kinds()

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["reports"] = {k: kwargs.pop(f"report_{k}") for k in kinds}
        return fn(*args, **kwargs)

    for kind in reversed(kinds):
        fmt = REPORT_FORMATS[kind]
        wrapper = click.option(
            f"--{kind}", f"report_{kind}", type=click.Path(dir_okay=False), help=fmt.help
        )(wrapper)
    return wrapper


def _parse_thresholds(values: tuple[str, ...]) -> tuple[float | None, dict[str, float]]:
    """``--threshold 0.5`` (every selected metric) or ``--threshold NAME=0.5`` (one metric)."""
    common: float | None = None
    named: dict[str, float] = {}
    for raw in values:
        name, sep, num = raw.rpartition("=")
        try:
            value = float(num)
        except ValueError:
            raise InputError(f"--threshold {raw!r}: expected a number or NAME=NUMBER") from None
        if not math.isfinite(value):  # -inf passes every summary; inf and NaN fail every one
            raise InputError(f"--threshold {raw!r}: expected a finite number")
        # A second value for the same metric would silently win (or lose) over the first.
        if sep:
            if not name:
                raise InputError(f"--threshold {raw!r}: metric name missing before '='")
            if name in named:
                raise InputError(f"--threshold for {name} given twice ({named[name]:g}, {value:g})")
            named[name] = value
        else:
            if common is not None:
                raise InputError(
                    f"--threshold for every metric given twice ({common:g}, {value:g})"
                )
            common = value
    if common is not None and named:
        raise InputError(
            f"--threshold {common:g} (every metric) and --threshold NAME=X for "
            f"{', '.join(sorted(named))}: give one form, so no threshold silently replaces another"
        )
    return common, named


@click.command("check")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="faithgate.toml or pyproject.toml (default: search from the current directory)",
)
@click.option(
    "--outputs",
    type=click.Path(dir_okay=False),
    help="JSONL of outputs to gate (id, source, summary, ...)",
)
@click.option("--summarizer", metavar="MOD:FN", help="summarizer callable to run over --data")
@click.option("--data", type=click.Path(dir_okay=False), help="JSONL of sources for --summarizer")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    help="metric to gate on (repeatable; replaces the configured metrics)",
)
@click.option(
    "--threshold",
    "thresholds",
    multiple=True,
    metavar="X|NAME=X",
    help="per-example threshold for every selected metric, or for one metric",
)
@click.option("--min-pass-rate", type=float, metavar="R", help="minimum share of passing examples")
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    help="previous result JSON: enables the regression rule",
)
@click.option(
    "--update-baseline",
    is_flag=True,
    help="write this run's result as the new baseline (after checking the old one); "
    "refused when the gate fails, unless --force",
)
@click.option(
    "--force",
    is_flag=True,
    help="with --update-baseline: write the baseline even when the gate fails",
)
@click.option("--backend", type=click.Choice(BACKEND_CHOICES), help="model backend")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    help="score cache directory (default: .faithgate next to the configuration)",
)
@click.option("--no-cache", is_flag=True, help="score everything afresh; read and write no cache")
@report_options
@click.option(
    "--progress/--no-progress",
    default=None,
    help="progress bar while scoring (default: on a terminal for long runs)",
)
@click.option("-q", "--quiet", is_flag=True, help="print only the verdict line")
@execution_options
def check_command(
    config_path: str | None,
    outputs: str | None,
    summarizer: str | None,
    data: str | None,
    metrics: tuple[str, ...],
    thresholds: tuple[str, ...],
    min_pass_rate: float | None,
    baseline: str | None,
    update_baseline: bool,
    force: bool,
    backend: str | None,
    cache_dir: str | None,
    no_cache: bool,
    reports: dict[str, str | None],
    progress: bool | None,
    quiet: bool,
    executor: str | None,
    address: str | None,
    num_workers: int | None,
) -> None:
    """Score outputs and gate on the configured rules: exit 0 pass, 1 fail, 2 usage error."""
    from faithgate.config import load_config
    from faithgate.gate import BaselinePolicy, Gate
    from faithgate.report import render, write_reports
    from faithgate.report.terminal import headline
    from faithgate.safety.escape import safe_line

    if outputs and (summarizer or data):
        raise InputError("give either --outputs or --summarizer with --data, not both")
    if data and not summarizer:
        raise InputError("--data needs --summarizer (a module:function to run over it)")
    if force and not update_baseline:
        raise InputError("--force only applies to --update-baseline")
    config = load_config(config_path)
    common, named = _parse_thresholds(thresholds)
    config = config.override(
        metrics=list(metrics) or None,
        outputs=outputs,
        summarizer=summarizer,
        data=data,
        baseline=baseline,
        backend=backend,
        cache_dir=cache_dir,
        min_pass_rate=min_pass_rate,
        thresholds=named or None,
        threshold=common,
        **reports,
        execution=execution_overrides(executor, address, num_workers),
    )
    refuse_foreign_flags(config.execution, address, num_workers)
    unknown = set(named) - set(config.metrics)
    if unknown:
        # A typo gets the "did you mean" a misspelled thresholds key of the config file gets.
        close = did_you_mean(min(unknown), config.metrics)
        hint = f"; {close}" if close else ""
        raise InputError(
            f"--threshold names metric(s) not selected: {', '.join(sorted(unknown))} "
            f"(selected: {', '.join(config.metrics)}){hint}"
        )
    gate = Gate(
        config,
        progress=progress,
        use_cache=not no_cache,
        baseline=BaselinePolicy(
            update=update_baseline,
            force=force,
            # A --baseline that does not exist is an error (a typo), not a first run.
            explicit=baseline is not None,
            # Written with the reports, as one set: a report that cannot be written must not
            # leave the baseline replaced behind an exit 2 that says nothing was written.
            defer=True,
        ),
    )
    result = gate.run()
    for warning in gate.warnings:
        click.echo(f"faithgate: warning: {safe_line(warning)}", err=True)
    try:
        written = write_reports(result, gate.reports, baseline=gate.baseline_to_write)
    except InputError:
        click.echo(headline(result))  # the verdict is known: say it beside the exit 2
        raise
    if not quiet:
        click.echo(render("terminal", result), nl=False)
        for kind, path in written.items():
            click.echo(f"{kind} report: {safe_line(path)}")
    if gate.baseline_note:
        # Also under --quiet: whether the reference changed is never a detail.
        click.echo(safe_line(gate.baseline_note), err=not result.passed and not force)
    # Every run ends on its verdict (the report opens with it too): the last line a
    # reader or a CI log shows.
    click.echo(headline(result))
    if not result.passed:
        click.get_current_context().exit(1)
