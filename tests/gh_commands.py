"""A parser of GitHub Actions workflow commands as the runner reads a step's output (test helper).

Mirrors ``ActionCommandManager`` / ``ActionCommand.TryParseV2`` of actions/runner: output is
split into lines at ``\\n``, ``\\r\\n`` and ``\\r``; a line is a command when, after leading
white space is trimmed, it starts with ``::`` and has a second ``::`` ending the command name
and properties; ``::stop-commands::TOKEN`` ignores every command until a line ``::TOKEN::``.
When a line is no V2 command, the runner still tries the legacy syntax
(``ActionCommand.TryParse``): the first ``##[`` *anywhere* in the line, then a ``]``;
between them the command name and ``;``-separated ``key=value`` properties, after it the data
(``##[error file=a;]message``). The runner accepts only its registered command names; this
parser accepts any name, so it is the stricter of the two.
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


def _unescape_legacy(text: str) -> str:
    return (
        text.replace("%3B", ";")
        .replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%5D", "]")
        .replace("%25", "%")
    )


def parse_legacy(line: str) -> Command | None:
    """The legacy ``##[name key=value;...]data`` command in one output line, or None."""
    start = line.find("##[")
    if start < 0:
        return None
    end = line.find("]", start)
    if end < 0:
        return None
    name, _, props_text = line[start + 3 : end].partition(" ")
    if not name:
        return None
    props: dict[str, str] = {}
    for pair in filter(None, props_text.split(";")):
        key, sep, value = pair.partition("=")
        if key and sep and value:
            props[key] = _unescape_legacy(value)
    return Command(name, props, _unescape_legacy(line[end + 1 :]), line)


def parse_line(line: str) -> Command | None:
    """The command in one output line, or None: the runner's V2 syntax, else the legacy one."""
    text = line.lstrip()
    if not text.startswith("::"):
        return parse_legacy(line)
    end = text.find("::", 2)
    if end < 0:
        return parse_legacy(line)
    head, data = text[2:end], text[end + 2 :]
    name, _, props_text = head.partition(" ")
    if not name:
        return parse_legacy(line)
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
        command = parse_line(line)
        if stop_token is not None:
            if command is not None and command.name == stop_token:  # ::TOKEN:: or ##[TOKEN]
                stop_token = None
            continue
        if command is None:
            continue
        if command.name == "stop-commands":
            stop_token = command.data
            continue
        commands.append(command)
    return commands
