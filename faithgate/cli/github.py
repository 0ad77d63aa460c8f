"""``faithgate github ...``: the GitHub Action's steps (``action.yml``), a hidden command.

``faithgate github action`` is the Action's gate step: it reads the Action's inputs (the
``INPUT_*`` variables action.yml sets, or ``--NAME`` options), checks them with the messages of
``faithgate.cli.action_steps`` (whose steps run before faithgate is installed), clears the
report directory, runs ``faithgate check`` with one ``--NAME FILE`` per report format of the
registry (``faithgate.formats``) and reports the result: step outputs, the job summary and
``::error`` annotations (``faithgate.report.github``). Its parts are commands of their own:
``faithgate github report`` (a result JSON to outputs, summary and annotations, anywhere),
``faithgate github report-args`` (the check's report arguments for a directory) and
``faithgate github cache-dir`` (the score cache directory of the configuration). Errors are
rendered by the one error boundary in ``faithgate.cli`` as a workflow ``::error`` line (so
GitHub shows them), with the usual exit codes.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import secrets
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import click

from faithgate.cli.action_steps import (
    INPUT_DEFAULTS,
    env_name,
    input_problem,
    read_inputs,
    split_list,
)
from faithgate.errors import ConfigError, InputError
from faithgate.formats import REPORT_FORMATS, file_report_kinds
from faithgate.report.github import (
    ReportRequest,
    format_output,
    run_report,
    workflow_command,
    write_env_file,
    write_outputs,
)
from faithgate.safety.escape import printable

# The format whose file is the gate result JSON the report reads (``--result``).
RESULT_FORMAT = "json"

# How each file report starts, as its renderer writes it (``faithgate.formats``): the JUnit XML
# with its ``faithgate.examples`` suite, the result JSON with its ``schema`` and
# ``faithgate_version`` keys, the Markdown with its ``## <icon> faithgate: VERDICT`` heading, the
# HTML with its ``<title>faithgate: VERDICT</title>``. ``report-args`` removes a file left at a
# report's name only when it starts so (a report of an earlier run, which faithgate wrote); any
# other file there is the user's, and is refused, never removed. A format without an entry here
# has no file faithgate may remove (``tests/unit/report/test_report_args.py`` renders every
# format of the registry and checks that its report is recognised).
_REPORT_STARTS: dict[str, re.Pattern[str]] = {
    "junit": re.compile(
        r'<\?xml[^>]*\?>\s*<testsuites\b[^>]*>\s*<testsuite\b[^>]*\sname="faithgate\.examples"'
    ),
    # Exactly the renderer's heading: "## About faithgate: A guide" is a user's file.
    "markdown": re.compile("## (\u2705|\u274c) faithgate: (PASS|FAIL)\\b"),
    "json": re.compile(r'\{\s*"schema"\s*:\s*\d+\s*,\s*"faithgate_version"\s*:'),
    "html": re.compile(
        r"<!DOCTYPE html>\s*<html\b[^>]*>\s*<head>.*?<title>faithgate: (PASS|FAIL)</title>",
        re.DOTALL,
    ),
}
# Every start above lies well inside a report's first bytes (the HTML title comes before its
# style sheet).
_REPORT_HEAD_BYTES = 4096


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
    help="false: a gate failing only its regression rule on a measured drop passes the step, "
    "with a warning per regression (the Action's fail-on-regression input)",
)
@click.option(
    "--max-annotations",
    type=click.IntRange(min=0),
    default=50,
    metavar="N",
    help="at most N ::error annotations of failing examples (a notice counts the rest); "
    "failing rules are annotated besides",
)
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
    input_root = _input_root(config_path or os.environ.get("FG_CONFIG") or None)
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
    (``--NAME DIR/FILE`` ...), NUL-separated for bash's ``mapfile -d ''``, after
    ``clear_report_dir`` (an earlier run's reports removed; a file of the user's, an input
    or a directory at a report's path refused: exit 2, nothing removed)."""
    paths = clear_report_dir(directory, config_path, outputs=outputs, data=data, baseline=baseline)
    out = click.get_binary_stream("stdout")
    for kind, path in paths.items():
        out.write(os.fsencode(f"--{kind}") + b"\0" + os.fsencode(path) + b"\0")
    out.flush()


def clear_report_dir(
    directory: str,
    config_path: str | None,
    *,
    outputs: str | None = None,
    data: str | None = None,
    baseline: str | None = None,
) -> dict[str, str]:
    """Each file report's path in ``directory`` (``report_paths``), once the reports an
    earlier run left there are removed, so none is taken for this run's. Only faithgate's own
    reports are removed (recognised by how each format starts); a file of the user's at a
    report's name is refused (``InputError``, nothing removed), as is, given the check's
    inputs, a report path that is one of the run's inputs (a baseline kept in the directory)
    or a directory. A directory whose name holds a character ``printable`` escapes (a control
    character, a line break, a bidirectional control) is refused: its paths are printed raw
    (``report-args``) and become step outputs."""
    from faithgate.config import load_config
    from faithgate.gate import input_files
    from faithgate.safety.paths import refuse_overwriting_inputs

    if printable(directory) != directory:
        # The paths go to stdout as they are (bash reads them back as arguments): escaped,
        # they would name other files; raw, a name holding ``ESC [ 2J`` or an OSC 8 link
        # would reach a terminal. Such a name is refused, as the action refuses line breaks.
        raise InputError(
            f"the report directory {printable(directory)} holds a control, line-break or "
            "bidirectional character (shown escaped): faithgate prints report paths as they "
            "are for faithgate check; choose a directory name without one"
        )
    config = load_config(config_path).override(outputs=outputs, data=data, baseline=baseline)
    paths = report_paths(directory)
    try:
        refuse_overwriting_inputs(
            [(f"{kind} report", path) for kind, path in paths.items()], input_files(config)
        )
        # Every file is checked before any is removed: one of the user's leaves all as they were.
        stale = [report for kind, path in paths.items() if (report := _earlier_report(kind, path))]
        for report in stale:
            _remove(report)
    except InputError as exc:
        raise InputError(f"{exc} (report-dir {directory})") from None
    return paths


def _earlier_report(kind: str, path: str) -> str | None:
    """The file to remove at ``path`` before the check: ``None`` when nothing is there (or a
    link to nothing), the file itself when it is a ``kind`` report faithgate wrote (through a
    symbolic link, the file it points to: the link is the user's and stays, and the check
    writes the new report through it). Any other file is the user's: ``InputError``."""
    shown = printable(path)
    target = os.path.realpath(path)
    try:
        mode = os.stat(target).st_mode
        if not stat.S_ISREG(mode):  # (refused as unwritable before; never opened: a FIFO blocks)
            raise InputError(f"the {kind} report ({shown}) is not a regular file")
        with open(target, "rb") as fh:
            head = fh.read(_REPORT_HEAD_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise InputError(
            f"the {kind} report ({shown}) cannot be read ({exc.strerror or exc}): faithgate "
            "removes an earlier run's report there only once it has seen that it wrote it"
        ) from None
    start = _REPORT_STARTS.get(kind)
    if start is not None and start.match(head.decode("utf-8", "replace")):
        return target
    raise InputError(
        f"the {kind} report ({shown}) is a file faithgate did not write (not a {kind} report "
        "of an earlier run); refusing to remove it, as faithgate does with an earlier run's "
        "reports before the check: move it away or choose another report directory"
    )


def _remove(path: str) -> None:
    """Remove an earlier run's report (``_earlier_report``)."""
    try:
        os.unlink(path)
    except FileNotFoundError:  # (removed meanwhile: the same outcome)
        pass
    except OSError as exc:
        raise InputError(
            f"cannot remove {printable(path)}, a report of an earlier run "
            f"({exc.strerror or exc}): it would be taken for this run's"
        ) from None


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
    write_outputs(
        os.environ.get("GITHUB_OUTPUT"), {"cache-dir": path}, click.get_text_stream("stdout")
    )


# ---------------------------------------------------------------------- the Action's gate step

# The Action's inputs this step reads (``faithgate.cli.action_steps.INPUT_DEFAULTS``): each
# also an option ``--NAME``, which wins over its ``INPUT_*`` variable.
GATE_INPUTS = (
    "config",
    "outputs",
    "summarizer",
    "data",
    "metrics",
    "thresholds",
    "min-pass-rate",
    "baseline",
    "fail-on-regression",
    "report-dir",
    "max-annotations",
)
# The check's file inputs, which ``clear_report_dir`` refuses to remove.
_FILE_INPUTS = ("config", "outputs", "data", "baseline")


def _gate_input_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--NAME VALUE`` for every input of ``GATE_INPUTS``, handed to the command as one
    ``given`` mapping (input name -> value, or None when not given)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["given"] = {name: kwargs.pop(name.replace("-", "_")) for name in GATE_INPUTS}
        return fn(*args, **kwargs)

    for name in reversed(GATE_INPUTS):
        default = INPUT_DEFAULTS[name]
        wrapper = click.option(
            f"--{name}",
            name.replace("-", "_"),
            metavar="VALUE",
            help=f"the Action's input {name} (default: ${env_name(name)}, else "
            + (f"'{default}')" if default else "empty)"),
        )(wrapper)
    return wrapper


@github_command.command("action")
@_gate_input_options
@click.option(
    "--cache-dir",
    envvar="FG_CACHE_DIR",
    metavar="DIR",
    help="the score cache directory for faithgate check (`faithgate github cache-dir`)",
)
def action_command(given: dict[str, str | None], cache_dir: str | None) -> None:
    """The Action's gate step: check the inputs (the Action's messages), clear the report
    directory, run `faithgate check` with every report format, and report the result to
    GitHub (step outputs with `exit-code` and `step-exit-code`, job summary, annotations).
    Exit 0 once the gate decided (the Action's last step fails the job), 2 when it could not
    run (a bad input or report-dir: one ::error line)."""
    inputs = read_inputs(os.environ, given)
    problem = input_problem(inputs)
    if problem:  # as the Action's input check says it (``action_steps.error_command``)
        raise InputError(problem)
    run_gate(inputs, os.environ, click.get_text_stream("stdout"), cache_dir=cache_dir)


CheckRunner = Callable[[list[str], BinaryIO], int]


def run_check_process(args: list[str], stderr: BinaryIO) -> int:
    """``faithgate check ARGS`` in a process of its own (this interpreter's), as a user runs
    it: its stdout is the step's, its stderr goes to ``stderr``; returns its exit code."""
    command = [sys.executable, "-m", "faithgate", "check", *args]
    code = subprocess.run(command, stderr=stderr, check=False).returncode
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says


def check_arguments(inputs: Mapping[str, str], cache_dir: str | None = None) -> list[str]:
    """The ``faithgate check`` options the inputs ask for (the report files apart): empty
    inputs are left to the configuration; list inputs give one option per entry."""
    args: list[str] = []
    for name in (*_FILE_INPUTS, "summarizer"):
        if inputs[name]:
            args += [f"--{name}", inputs[name]]
    args += [arg for metric in split_list(inputs["metrics"]) for arg in ("--metric", metric)]
    for threshold in split_list(inputs["thresholds"]):
        args += ["--threshold", threshold]
    if inputs["min-pass-rate"]:
        args += ["--min-pass-rate", inputs["min-pass-rate"]]
    if cache_dir:
        args += ["--cache-dir", cache_dir]
    return args


def report_directory(name: str) -> str:
    """The absolute path of input ``report-dir`` (relative to the current directory; ``-``
    is a directory of that name), created when missing."""
    path = os.path.abspath(name)
    with contextlib.suppress(OSError):  # (a file there, no permission: said below)
        os.makedirs(path, exist_ok=True)
    if not os.path.isdir(path) or not os.access(path, os.X_OK):
        raise InputError(f"cannot create or enter input report-dir '{name}'")
    if "\n" in path or "\r" in path:
        raise InputError("input report-dir resolves to a path with a line break")
    return path


def run_gate(
    inputs: Mapping[str, str],
    env: Mapping[str, str],
    out: TextIO,
    *,
    cache_dir: str | None = None,
    run_check: CheckRunner | None = None,
) -> int:
    """The gate step with checked ``inputs``: reports into ``report-dir``, the check's exit
    code as output ``exit-code``, then ``run_report`` (outputs, summary, annotations).
    ``InputError`` when the check cannot start (report-dir, a report path refused)."""
    directory = report_directory(inputs["report-dir"])
    config_path = inputs["config"] or None
    files = {name: inputs[name] or None for name in _FILE_INPUTS if name != "config"}
    reports = clear_report_dir(directory, config_path, **files)
    args = check_arguments(inputs, cache_dir)
    args += [arg for kind, path in reports.items() for arg in (f"--{kind}", path)]
    try:
        fd, log = tempfile.mkstemp(prefix="faithgate-stderr.", dir=env.get("RUNNER_TEMP") or None)
    except OSError as exc:
        raise InputError(f"cannot create a temporary file ({exc.strerror or exc})") from None
    try:
        # The check prints user text (ids, sentences, file names): escaped, and on top of
        # that the runner ignores workflow commands until the random token ends the stop.
        token = f"faithgate-{secrets.token_hex(16)}"
        out.write(f"::stop-commands::{token}\n")
        out.flush()
        # Its stderr, for the report's annotations: a temporary file of the runner's, never
        # one in report-dir (a user's stderr.log there was overwritten once).
        with os.fdopen(fd, "wb") as stderr:
            code = (run_check or run_check_process)(args, stderr)
        err = click.get_text_stream("stderr")
        err.write(Path(log).read_text("utf-8", errors="replace"))
        err.flush()
        out.write(f"::{token}::\n")
        write_outputs(env.get("GITHUB_OUTPUT"), {"exit-code": str(code)}, out)
        request = ReportRequest(
            result=reports[RESULT_FORMAT],
            reports={k: path for k, path in reports.items() if k != RESULT_FORMAT},
            stderr=log,
            exit_code=code,
            fail_on_regression=inputs["fail-on-regression"] == "true",
            max_annotations=int(inputs["max-annotations"]),
            input_root=_input_root(config_path),
        )
        return run_report(request, env, out)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(log)


def _input_root(config_path: str | None) -> str | None:
    """The directory the result names its input relative to: the configuration's."""
    from faithgate.config import load_config
    from faithgate.errors import FaithgateError

    try:
        return str(load_config(config_path).root)
    except FaithgateError:  # the check failed on it too: its error is what the step reports
        return None
