"""Exceptions with messages meant for users: one line that says what to do.

Entry points (CLI, plugin, Action) catch ``FaithgateError`` and print its message without a
traceback; ``exit_code`` is 2 for bad usage or input, 1 for failures inside faithgate.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


class Interrupted(BaseException):
    """Ctrl-C / SIGINT, as the CLI raises it from its signal handler. Not a
    ``KeyboardInterrupt``: click turns that into a blank line and "Aborted!"; this one reaches
    the CLI's ``main``, which prints one line and exits 130 (128 + SIGINT, the shell
    convention). Library code that isolates a user's failures (a summarizer's, a metric's)
    lets it through, as it does ``KeyboardInterrupt``."""


class FaithgateError(Exception):
    """Base class: the message is a complete, user-facing sentence."""

    exit_code = 1


class InputError(FaithgateError):
    """Bad input from the user: a malformed file, an unknown metric, a wrong option."""

    exit_code = 2


class ConfigError(InputError):
    """Invalid configuration: names the offending key."""


class WriteError(InputError):
    """A file faithgate was asked to write cannot be written there (no permission, a directory
    or a file in the way, a read-only file system): the path is the user's choice, so exit 2,
    and the previous file is left as it was (``faithgate.safety.atomic``)."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"cannot write {path} (left unchanged): {reason}")
        self.path = path
        self.reason = reason
        # Other files of the same set (``atomic_write_files``) that were replaced before this
        # one failed and could not be put back: rare (a file system without hard links).
        self.replaced: list[object] = []

    def add_replaced(self, paths: list[object]) -> None:
        """Record (and say) that ``paths``, of the same set, were replaced all the same."""
        if paths:
            self.replaced += paths
            shown = ", ".join(str(p) for p in paths)
            self.args = (f"{self.args[0]}; already replaced, could not be put back: {shown}",)


class ModelNotFoundError(FaithgateError):
    """A model role could not be resolved offline; says what to install or pass."""

    exit_code = 2


class BackendError(FaithgateError):
    """A backend could not load or run a model."""


class ModelFileError(BackendError):
    """A model file given to faithgate is unreadable (truncated, corrupt, not a model): bad
    input like any other file, so exit 2; the message names the file and what to do."""

    exit_code = 2


def option_error(exc: TypeError, model: str, role: str) -> ConfigError | None:
    """The configuration error a model class's ``TypeError`` stands for when it was made with
    a role's loader options: an option that model does not take (exit 2). None for any other
    ``TypeError``, a fault inside faithgate that the caller raises again."""
    if "unexpected keyword argument" not in str(exc):
        return None
    return ConfigError(f"model_options.{role}: {model} does not take this option ({exc})")


def did_you_mean(name: object, names: Iterable[str]) -> str:
    """``"did you mean 'x'?"`` for the closest of ``names`` to a misspelled ``name``
    (``difflib``), or ``""`` when none is close: the one wording of every such hint."""
    close = difflib.get_close_matches(str(name), list(names), n=1)
    return f"did you mean {close[0]!r}?" if close else ""


def no_metric_named(name: object, names: Sequence[str]) -> str:
    """What a key naming no metric says: "no metric is named 'x'", then the closest of
    ``names`` (``did_you_mean``) or, with none close, all of them."""
    close = did_you_mean(name, names)
    hint = f"; {close}" if close else f" (metrics: {', '.join(names)})"
    return f"no metric is named {name!r}{hint}"
