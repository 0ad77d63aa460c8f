"""A parser of GitHub Actions workflow commands as the runner reads a step's output (test helper).

Mirrors ``ActionCommandManager`` / ``ActionCommand.TryParseV2`` of actions/runner: output is
split into lines at ``\\n``, ``\\r\\n`` and ``\\r``; a line is a command when, after leading
white space is trimmed, it starts with ``::`` and has a second ``::`` ending the command name
and properties; ``::stop-commands::TOKEN`` ignores every command until a line ``::TOKEN::``.
Tests use it to prove that nothing faithgate prints forges a command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_LINES = re.compile(r"\r\n|\r|\n")


@dataclass
class Command:
    name: str
    properties: dict[str, str] = field(default_factory=dict)
    data: str = ""
    raw: str = ""  # the line as the runner saw it (leading blanks trimmed)


def _unescape(text: str) -> str:
    return (
        text.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def parse_line(line: str) -> Command | None:
    """The command in one output line, or None (the runner's V2 syntax)."""
    text = line.lstrip()
    if not text.startswith("::"):
        return None
    end = text.find("::", 2)
    if end < 0:
        return None
    head, data = text[2:end], text[end + 2 :]
    name, _, props_text = head.partition(" ")
    if not name:
        return None
    props: dict[str, str] = {}
    for pair in filter(None, props_text.split(",")):
        key, sep, value = pair.partition("=")
        if sep:
            props[key] = _unescape(value)
    return Command(name, props, _unescape(data), text)


def parse_output(output: str) -> list[Command]:
    """Every command the runner would execute for ``output`` (stop/resume markers excluded)."""
    commands: list[Command] = []
    stop_token: str | None = None
    for line in _LINES.split(output):
        if stop_token is not None:
            if line.strip() == f"::{stop_token}::":
                stop_token = None
            continue
        command = parse_line(line)
        if command is None:
            continue
        if command.name == "stop-commands":
            stop_token = command.data
            continue
        commands.append(command)
    return commands
