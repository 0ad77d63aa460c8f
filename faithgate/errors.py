"""Exceptions with messages meant for users: one line that says what to do.

Entry points (CLI, plugin, Action) catch ``FaithgateError`` and print its message without a
traceback; ``exit_code`` is 2 for bad usage or input, 1 for failures inside faithgate.
"""

from __future__ import annotations


class FaithgateError(Exception):
    """Base class: the message is a complete, user-facing sentence."""

    exit_code = 1


class InputError(FaithgateError):
    """Bad input from the user: a malformed file, an unknown metric, a wrong option."""

    exit_code = 2


class ConfigError(InputError):
    """Invalid configuration: names the offending key."""


class ModelNotFoundError(FaithgateError):
    """A model role could not be resolved offline; says what to install or pass."""

    exit_code = 2


class BackendError(FaithgateError):
    """A backend could not load or run a model."""


class ModelFileError(BackendError):
    """A model file given to faithgate is unreadable (truncated, corrupt, not a model): bad
    input like any other file, so exit 2; the message names the file and what to do."""

    exit_code = 2
