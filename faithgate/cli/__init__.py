"""The ``faithgate`` command: a thin layer that parses arguments and calls the library.

Subcommands live in their own modules and are imported only when run, so ``faithgate --help``
is instant and a torch-free install can use every command whose metrics need no torch.
Exit codes: 0 success, 1 failure (internal error, or a gate that failed), 2 bad usage or input.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
from typing import Any

import click

from faithgate import __version__
from faithgate.errors import FaithgateError, InputError, Interrupted
from faithgate.safety.escape import PrintableFormatter, safe_line, utf8_text

# command name -> "module:attribute" of its click command
COMMANDS = {
    "score": "faithgate.cli.score:score_command",
    "metrics": "faithgate.cli.score:metrics_command",
    "export": "faithgate.cli.export:export_command",
    "convert": "faithgate.cli.convert:convert_command",
    "bench": "faithgate.cli.bench:bench_command",
    "calibrate": "faithgate.cli.bench:calibrate_command",
    "perturb": "faithgate.cli.bench:perturb_command",
    "check": "faithgate.cli.check:check_command",
    "init": "faithgate.cli.init:init_command",
    "train": "faithgate.cli.train:train_command",
    "github": "faithgate.cli.github:github_command",
}


# What `faithgate --help` lists: one short line per command, in the order a user meets them
# (click cuts a docstring's first sentence at 45 characters, mid-word). Commands not listed
# here run but are not shown: `github` is the Action's internal step.
SHORT_HELP = {
    "score": "Score one summary against its source, sentence by sentence.",
    "check": "Run the gate over your outputs: exit 0 pass, 1 fail, 2 bad input.",
    "init": "Write a starter gate configuration (faithgate.toml).",
    "metrics": "List the available metrics, one line each.",
    "calibrate": "Pick a metric's threshold on labelled data; write it to the gate.",
    "bench": "Measure metrics on labelled benchmark files.",
    "perturb": "Make minimal unfaithful edits of a summary (BUMP taxonomy).",
    "export": "Export a role's model to ONNX for the torch-free runtime.",
    "train": "Train an NLI checker model on SNLI and synthetic pairs.",
}
EPILOG = """\b
Start here:
  faithgate score --source article.txt --summary "The summary to check."
  faithgate init && faithgate check

Docs: README.md and docs/getting-started.md in the faithgate repository."""

_NOT_UTF8 = "faithgate.argument_not_utf8"


def _plain(text: str | None) -> str | None:
    """Help text without reST's double backticks (``x`` reads `x` in a terminal)."""
    return text.replace("``", "`") if text else text


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        command = getattr(importlib.import_module(module), attr)
        command.help = _plain(command.help)
        for param in command.params:
            if isinstance(param, click.Option):
                param.help = _plain(param.help)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # From SHORT_HELP: no module is imported to list the commands, and none is cut.
        rows = [(name, SHORT_HELP[name]) for name in SHORT_HELP if name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # The one place every command's arguments come in: an argument that is not UTF-8 (a
        # Linux file name is bytes) is refused in ``invoke``, before anything reads or scores.
        # Kept, it reached result JSON, reports and calibrated TOML, which UTF-8 cannot hold.
        bad = next((a for a in args if utf8_text(a) != a), None)  # not UTF-8: escaped
        if bad is not None:
            ctx.meta[_NOT_UTF8] = bad
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        # Same contract with or without ``main()`` (e.g. click.testing.CliRunner on ``cli``):
        # a FaithgateError is one stderr line and its exit code, an unexpected error exit 1.
        try:
            bad = ctx.meta.get(_NOT_UTF8)
            if bad is not None:
                raise InputError(
                    f"the command-line argument {utf8_text(bad)} is not valid UTF-8: faithgate "
                    "reads arguments as UTF-8 text (a file name in another encoding cannot be "
                    "recorded in results, reports or configurations); rename the file, or pass "
                    "the text in UTF-8"
                )
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
            raise  # a closed stdout (``| head``) is no internal error: see main()
        except click.exceptions.ClickException as exc:  # usage errors: one line too
            _echo_usage_error(exc)
            ctx.exit(exc.exit_code)
        except FaithgateError as exc:
            # A command may show errors its own way (``faithgate github``: a workflow
            # ``::error`` line GitHub turns into an annotation); the exit code is decided here.
            name = ctx.invoked_subcommand
            command = self.get_command(ctx, name) if name else None
            render = getattr(command, "render_error", None)
            if callable(render):
                render(str(exc))
            else:
                click.echo(f"faithgate: {safe_line(exc)}", err=True)
            ctx.exit(exc.exit_code)
        except Exception as exc:  # noqa: BLE001 - never a traceback for users
            click.echo(
                f"faithgate: internal error: {type(exc).__name__}: {safe_line(exc)}", err=True
            )
            ctx.exit(1)


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.version_option(__version__, prog_name="faithgate")
def cli() -> None:
    """Score whether summaries say only what their sources support, and gate on it."""
    _log_to_stderr()


def _echo_usage_error(exc: click.ClickException) -> None:
    """A usage error as one escaped stderr line; bare `faithgate` (click's NoArgsIsHelpError,
    whose message is the whole help) as the help itself, line by line, each escaped."""
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", None)
    if no_args is not None and isinstance(exc, no_args):
        for line in exc.format_message().splitlines():
            click.echo(safe_line(line) if line.strip() else "", err=True)
        return
    click.echo(f"faithgate: {safe_line(exc.format_message())}", err=True)


def _log_to_stderr() -> None:
    """Warnings of the library as one escaped line each on stderr (``faithgate: warning: ...``),
    instead of logging's bare last-resort output (log messages quote user input)."""
    logger = logging.getLogger("faithgate")
    # A library's logging.config.dictConfig (disable_existing_loggers, import-linter's for one)
    # disables every logger created before it: the CLI's warnings must not be lost to that.
    for name, existing in list(logging.root.manager.loggerDict.items()):
        if isinstance(existing, logging.Logger) and name.split(".")[0] == "faithgate":
            existing.disabled = False
    if any(getattr(h, "_faithgate_cli", False) for h in logger.handlers):
        return
    handler = _StderrHandler()
    handler.setFormatter(PrintableFormatter("faithgate: %(levelname)s: %(message)s"))
    handler._faithgate_cli = True  # type: ignore[attr-defined]
    handler.setLevel(logging.WARNING)
    logger.addHandler(handler)


class _StderrHandler(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is at the time of the record (click's
    test runner and pytest swap it), like logging's own last-resort handler."""

    def __init__(self) -> None:
        super().__init__()

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted()


def _stdout_to_devnull() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test's capture)
        pass


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: user errors become one line on stderr and an exit code
    (0 success, 1 gate failed or internal error, 2 bad usage or input, 130 interrupted)."""
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, _raise_interrupted)
    try:
        return cli.main(args=argv, prog_name="faithgate", standalone_mode=False)
    except (Interrupted, KeyboardInterrupt):
        click.echo("faithgate: interrupted", err=True)
        sys.exit(130)
    except click.exceptions.Abort as exc:
        # click turns a KeyboardInterrupt (raised by user code, e.g. a summarizer) into Abort
        if isinstance(exc.__cause__, KeyboardInterrupt):
            click.echo("faithgate: interrupted", err=True)
            sys.exit(130)
        click.echo("faithgate: aborted", err=True)
        sys.exit(1)
    except BrokenPipeError:
        # The reader of stdout went away (``faithgate perturb ... | head -1``): exit quietly.
        # Errors inside a command reach click first, which does the same (PacifyFlushWrapper,
        # exit 1); this catches one raised outside it. As the Python docs' note on SIGPIPE
        # says, stdout goes to devnull, or the interpreter's last flush fails a second time.
        _stdout_to_devnull()
        sys.exit(1)
    except click.ClickException as exc:
        _echo_usage_error(exc)
        sys.exit(exc.exit_code)
    except FaithgateError as exc:
        click.echo(f"faithgate: {safe_line(exc)}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - never a traceback for users; say what broke
        click.echo(f"faithgate: internal error: {type(exc).__name__}: {safe_line(exc)}", err=True)
        sys.exit(1)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
