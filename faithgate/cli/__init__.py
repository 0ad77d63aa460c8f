"""The ``faithgate`` command: a thin layer that parses arguments and calls the library.

Subcommands live in their own modules and are imported only when run, so ``faithgate --help``
is instant and a torch-free install can use every command whose metrics need no torch.
Exit codes: 0 success, 1 failure (internal error, or a gate that failed), 2 bad usage or input.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from faithgate import __version__
from faithgate.errors import FaithgateError

# command name -> "module:attribute" of its click command
COMMANDS = {
    "score": "faithgate.cli.score:score_command",
    "metrics": "faithgate.cli.score:metrics_command",
    "export": "faithgate.cli.export:export_command",
    "bench": "faithgate.cli.bench:bench_command",
    "calibrate": "faithgate.cli.bench:calibrate_command",
    "perturb": "faithgate.cli.bench:perturb_command",
    "check": "faithgate.cli.check:check_command",
    "train": "faithgate.cli.train:train_command",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx: click.Context) -> Any:
        # Same contract with or without ``main()`` (e.g. click.testing.CliRunner on ``cli``):
        # a FaithgateError is one stderr line and its exit code, an unexpected error exit 1.
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except click.exceptions.ClickException as exc:  # usage errors: one line too
            click.echo(f"faithgate: {exc.format_message()}", err=True)
            ctx.exit(exc.exit_code)
        except FaithgateError as exc:
            click.echo(f"faithgate: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except Exception as exc:  # noqa: BLE001 - never a traceback for users
            click.echo(f"faithgate: internal error: {type(exc).__name__}: {exc}", err=True)
            ctx.exit(1)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="faithgate")
def cli() -> None:
    """Score whether summaries say only what their sources support, and gate on it."""


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: user errors become one line on stderr and an exit code."""
    try:
        return cli.main(args=argv, prog_name="faithgate", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("faithgate: aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        click.echo(f"faithgate: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except FaithgateError as exc:
        click.echo(f"faithgate: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("faithgate: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - never a traceback for users; say what broke
        click.echo(f"faithgate: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
