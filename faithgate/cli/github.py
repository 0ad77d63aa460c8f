"""``faithgate github ...``: the GitHub Actions steps of ``action.yml``.

``faithgate github report`` turns a gate result JSON into step outputs, the job summary and
``::error`` annotations (``faithgate.report.github``); ``faithgate github cache-dir`` names the
score cache directory of the configuration. Errors are rendered by the one error boundary in
``faithgate.cli`` as a workflow ``::error`` line (so GitHub shows them), with the usual exit
codes.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from faithgate.report.github import (
    DEFAULT_CACHE_DIR,
    ReportRequest,
    format_output,
    run_report,
    workflow_command,
    write_env_file,
)


def render_error(message: str) -> None:
    """How the error boundary shows an error of these commands: a workflow command."""
    click.echo(workflow_command("error", message, title="faithgate"))


@click.group("github")
def github_command() -> None:
    """GitHub Actions steps: step outputs, job summary, annotations, the cache directory."""


github_command.render_error = render_error  # type: ignore[attr-defined]


@github_command.command("report")
@click.option("--result", required=True, help="gate result JSON (faithgate check --json)")
@click.option("--markdown", help="Markdown report for the job summary")
@click.option("--junit", help="JUnit XML report (only its path is reported)")
@click.option("--html", help="HTML report (only its path is reported)")
@click.option("--stderr", "stderr_path", help="stderr of faithgate check (its last line explains an error)")  # fmt: skip
@click.option("--exit-code", type=int, help="exit code of faithgate check")
@click.option(
    "--fail-on-regression",
    type=click.Choice(["true", "false"], case_sensitive=False),
    default="true",
    metavar="true|false",
)
@click.option("--max-annotations", type=int, default=50, metavar="N")
def report_command(
    result: str,
    markdown: str | None,
    junit: str | None,
    html: str | None,
    stderr_path: str | None,
    exit_code: int | None,
    fail_on_regression: str,
    max_annotations: int,
) -> None:
    """Outputs, job summary and annotations of a gate result."""
    request = ReportRequest(
        result=result,
        markdown=markdown,
        junit=junit,
        html=html,
        stderr=stderr_path,
        exit_code=exit_code,
        fail_on_regression=fail_on_regression.lower() == "true",
        max_annotations=max_annotations,
    )
    run_report(request, os.environ, click.get_text_stream("stdout"))


@github_command.command("cache-dir")
@click.option("--config", "config_path", help="configuration file (default: $FG_CONFIG, else searched)")  # fmt: skip
def cache_dir_command(config_path: str | None) -> None:
    """The score cache directory as output ``cache-dir``: the configured ``cache_dir``, else
    ``.faithgate`` in the current directory (the action passes it to ``faithgate check
    --cache-dir`` so scores are cached either way)."""
    from faithgate.config import load_config

    config = load_config(config_path or os.environ.get("FG_CONFIG") or None)
    path = Path(config.cache_dir) if config.cache_dir is not None else Path(DEFAULT_CACHE_DIR)
    line = format_output("cache-dir", str(path.resolve()))
    write_env_file(os.environ.get("GITHUB_OUTPUT"), line, click.get_text_stream("stdout"))
