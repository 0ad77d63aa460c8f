"""``faithgate github ...``: the GitHub Actions steps of ``action.yml``.

``faithgate github report`` turns a gate result JSON into step outputs, the job summary and
``::error`` annotations (``faithgate.report.github``); ``faithgate github report-args`` gives
``faithgate check`` one ``--NAME FILE`` per report format of the registry (``faithgate.formats``)
and ``report --report-dir`` reads them back, so the action names no format by hand;
``faithgate github cache-dir`` names the score cache directory of the configuration. Errors are
rendered by the one error boundary in ``faithgate.cli`` as a workflow ``::error`` line (so GitHub
shows them), with the usual exit codes.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from faithgate.errors import ConfigError, InputError
from faithgate.escape import printable
from faithgate.formats import REPORT_FORMATS, file_report_kinds
from faithgate.report.github import (
    ReportRequest,
    format_output,
    run_report,
    workflow_command,
    write_env_file,
)

# The format whose file is the gate result JSON the report reads (``--result``).
RESULT_FORMAT = "json"


def render_error(message: str) -> None:
    """How the error boundary shows an error of these commands: a workflow command, and on
    GitHub the step output ``error`` (one line), which the action's job summary shows when
    the gate could not run."""
    click.echo(workflow_command("error", message, title="faithgate"))
    output = os.environ.get("GITHUB_OUTPUT")
    if output:
        write_env_file(output, format_output("error", printable(message)), None)


@click.group("github")
def github_command() -> None:
    """GitHub Actions steps: step outputs, job summary, annotations, the cache directory."""


github_command.render_error = render_error  # type: ignore[attr-defined]


def _report_file_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--NAME FILE`` for every file report format of the registry but the result JSON
    (``--result``), handed to the command as one ``reports`` mapping (name -> path or None)."""
    kinds = [k for k in file_report_kinds() if k != RESULT_FORMAT]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["reports"] = {k: kwargs.pop(f"report_{k}") for k in kinds}
        return fn(*args, **kwargs)

    for kind in reversed(kinds):
        wrapper = click.option(
            f"--{kind}",
            f"report_{kind}",
            metavar="FILE",
            help=f"{kind} report: its path becomes output {REPORT_FORMATS[kind].action_output}"
            + (" (and the job summary)" if kind == "markdown" else ""),
        )(wrapper)
    return wrapper


@github_command.command("report")
@click.option("--result", help="gate result JSON (faithgate check --json)")
@click.option(
    "--report-dir",
    metavar="DIR",
    help="the directory of `faithgate github report-args --dir DIR`: the result JSON and each "
    "report format's file in DIR, unless given by its own option",
)
@_report_file_options
@click.option("--stderr", "stderr_path", help="stderr of faithgate check (its last line explains an error)")  # fmt: skip
@click.option("--exit-code", type=int, help="exit code of faithgate check")
@click.option(
    "--fail-on-regression",
    type=click.Choice(["true", "false"], case_sensitive=False),
    default="true",
    metavar="true|false",
)
@click.option("--max-annotations", type=click.IntRange(min=0), default=50, metavar="N")
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    help="the check's --config (default: $FG_CONFIG, else searched as the check does): the "
    "result names its input relative to that file's directory",
)
def report_command(
    result: str | None,
    report_dir: str | None,
    reports: dict[str, str | None],
    stderr_path: str | None,
    exit_code: int | None,
    fail_on_regression: str,
    max_annotations: int,
    config_path: str | None,
) -> None:
    """Outputs, job summary and annotations of a gate result."""
    from faithgate.config import load_config
    from faithgate.errors import FaithgateError

    try:
        input_root = str(load_config(config_path or os.environ.get("FG_CONFIG") or None).root)
    except FaithgateError:  # the check failed on it too: its error is what the step reports
        input_root = None
    if report_dir is not None:
        in_dir = report_paths(report_dir)
        result = result or in_dir[RESULT_FORMAT]
        reports = {k: path or in_dir[k] for k, path in reports.items()}
    if result is None:
        raise InputError("faithgate github report: give --result FILE or --report-dir DIR")
    request = ReportRequest(
        result=result,
        reports=reports,
        stderr=stderr_path,
        exit_code=exit_code,
        fail_on_regression=fail_on_regression.lower() == "true",
        max_annotations=max_annotations,
        input_root=input_root,
    )
    run_report(request, os.environ, click.get_text_stream("stdout"))


def report_paths(directory: str) -> dict[str, str]:
    """Each file report format's file in ``directory`` (``ReportFormat.report_filename``)."""
    return {
        k: str(Path(directory) / REPORT_FORMATS[k].report_filename) for k in file_report_kinds()
    }


@github_command.command("report-args")
@click.option("--dir", "directory", required=True, metavar="DIR", help="the report directory")
@click.option("--config", "config_path", metavar="FILE", help="the check's --config")
@click.option("--outputs", metavar="FILE", help="the check's --outputs")
@click.option("--data", metavar="FILE", help="the check's --data")
@click.option("--baseline", metavar="FILE", help="the check's --baseline")
def report_args_command(
    directory: str,
    config_path: str | None,
    outputs: str | None,
    data: str | None,
    baseline: str | None,
) -> None:
    """The `faithgate check` arguments writing every file report of the registry into DIR
    (``--NAME DIR/FILE`` ...), NUL-separated for bash's ``mapfile -d ''``; report files left in
    DIR by an earlier run are removed first, so none is taken for this run's. Given the
    check's input options, it refuses (exit 2, nothing removed) a report path that is one of
    the run's inputs (a baseline kept in DIR) or a directory."""
    from faithgate.config import load_config
    from faithgate.gate import input_files
    from faithgate.paths import refuse_overwriting_inputs

    config = load_config(config_path).override(outputs=outputs, data=data, baseline=baseline)
    paths = report_paths(directory)
    try:
        refuse_overwriting_inputs(
            [(f"{kind} report", path) for kind, path in paths.items()], input_files(config)
        )
    except InputError as exc:
        raise InputError(f"{exc} (report-dir {directory})") from None
    out = click.get_binary_stream("stdout")
    for kind, path in paths.items():
        Path(path).unlink(missing_ok=True)
        out.write(os.fsencode(f"--{kind}") + b"\0" + os.fsencode(path) + b"\0")
    out.flush()


@github_command.command("cache-dir")
@click.option("--config", "config_path", help="configuration file (default: $FG_CONFIG, else searched)")  # fmt: skip
def cache_dir_command(config_path: str | None) -> None:
    """The score cache directory as output ``cache-dir``: the configured ``cache_dir``, else
    ``.faithgate`` next to the configuration, as ``faithgate check`` and the pytest plugin
    use (the action passes it to ``faithgate check --cache-dir``, so CI and local runs share
    one cache layout)."""
    from faithgate.config import load_config

    config = load_config(config_path or os.environ.get("FG_CONFIG") or None)
    path = str(config.cache_path.resolve())
    if "\n" in path or "\r" in path:
        # actions/cache reads each line of its ``path`` as a path of its own.
        raise ConfigError(f"cache_dir must be one line (a path), got {path!r}")
    line = format_output("cache-dir", path)
    write_env_file(os.environ.get("GITHUB_OUTPUT"), line, click.get_text_stream("stdout"))
