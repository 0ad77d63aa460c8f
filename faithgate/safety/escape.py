"""Neutralising user text before it reaches a terminal, a log or a CI runner.

Example ids, summaries, sentences, file names and exception messages are user data. Printed
raw, a newline in an id starts a new output line (on GitHub Actions a line ``::error::...``
is a workflow command: a forged annotation, or ``::add-mask::`` / ``::stop-commands::``), a
carriage return overwrites what a reader sees, and an ANSI escape sequence recolours or clears
the terminal. Three functions, used by every printer:

- ``printable(text)`` for one field: every line break (LF, CR, NEL U+0085, U+2028, U+2029),
  control character (C0, DEL, C1: this disarms ANSI escape sequences, which start with ESC or
  CSI), bidirectional override (the "Trojan Source" characters) and lone surrogate (which would
  crash the stream's encoder) becomes a visible backslash escape (``\\n``, ``\\x1b``,
  ``\\u2028``). Text without such characters is returned unchanged.
- ``json_for_terminal(obj)`` for JSON printed to stdout: ``json.dumps`` with every character
  ``printable`` would escape written as a ``\\uXXXX`` escape, and the ``[`` of a legacy
  workflow command's ``##[`` as ``\\u005b`` (still valid, equal JSON).
- ``defuse_workflow_commands(block)`` for a whole block written to stdout/stderr: a line whose
  first non-blank characters are ``::`` is what GitHub's runner parses as a command, so its
  first colon is escaped (``\\::``). Once fields went through ``printable`` this can only
  happen when a field (an id, say) begins a line. The runner also still parses the legacy
  form ``##[name props]data`` *anywhere* in a line (``ActionCommand.TryParse``), so every
  ``##[`` is broken up as well (``#\\#[``).

Report files get the same treatment: ``markdown_literal`` (Markdown, via ``printable``) and
``printable_lines`` (JUnit XML and HTML, which keep tabs and line breaks as layout).

GitHub workflow commands that faithgate *means* to emit are built by one function,
``faithgate.report.github.workflow_command``, which escapes with GitHub's own rules (and runs
its text through ``printable`` first).
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any

import regex

# Cc: C0 controls, DEL, C1 controls (incl. U+0085 NEL, U+009B CSI); Cs: lone surrogates;
# Zl / Zp: U+2028 / U+2029; then the bidi embeddings, overrides, isolates and marks.
_UNSAFE = regex.compile(
    r"[\p{Cc}\p{Cs}\p{Zl}\p{Zp}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_COMMAND_LINE = regex.compile(r"^([^\S\n]*):(?=:)", regex.MULTILINE)


def _escape(match: regex.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` (``str()`` of it) with line breaks, control characters, bidi controls and
    lone surrogates shown as backslash escapes: safe to print as part of one line."""
    return _UNSAFE.sub(_escape, str(text))


def printable_lines(text: object) -> str:
    """``text`` for a report file that holds several lines (JUnit XML, HTML): as ``printable``
    (C0 and C1 controls, DEL, bidi controls, U+2028 / U+2029, lone surrogates escaped), but
    tab, LF and CR, which such a file shows as layout, are kept."""
    return _UNSAFE.sub(lambda m: m.group() if m.group() in "\t\n\r" else _escape(m), str(text))


def utf8_text(text: object) -> str:
    """``text`` (a file name, ``str()`` of anything else) as text UTF-8 can encode. Linux file
    names are bytes: Python holds the bytes that are not UTF-8 as lone surrogates
    (``surrogateescape``), which no UTF-8 writer (a JSON report, a TOML file) accepts. Those
    bytes are shown as ``\\xNN`` escapes (``o\\xff.jsonl``), any other lone surrogate as
    ``\\udNNN``; UTF-8 text is returned unchanged."""
    text = os.fsdecode(text) if isinstance(text, bytes | os.PathLike) else str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that is not an escaped byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def clipped(text: object, limit: int = 120) -> str:
    """``printable(text)`` cut to ``limit`` characters (an ellipsis ends a cut one): for a
    short field such as an example id in a line or an annotation title, where a megabyte of
    id would otherwise be printed in full for every failing example."""
    shown = printable(text)
    return shown if len(shown) <= limit else shown[: max(1, limit - 1)] + "\u2026"


def defuse_workflow_commands(block: str) -> str:
    """Escape what GitHub's runner would take for a workflow command: the leading ``:`` of a
    line starting ``::name ...::`` (after leading blanks), and every legacy ``##[name]``
    prefix, which the runner looks for anywhere in a line (``#\\#[``)."""
    return _COMMAND_LINE.sub(lambda m: m.group(1) + "\\:", block).replace("##[", "#\\#[")


def safe_line(text: object) -> str:
    """One line for a terminal or log: ``printable`` and then ``defuse_workflow_commands``."""
    return defuse_workflow_commands(printable(text))


# Markdown punctuation a user's text could use to format, link, embed an image, open an HTML
# tag or close a code span in a PR comment or job summary: shown literally, backslash-escaped.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&])")


# What GitHub's Markdown turns into a link by itself (GFM "autolinks (extension)"): a scheme's
# "://" and a "www." (e-mail addresses are broken by the "@" rule). GFM links a "www." at the
# start and after whitespace, "*", "_", "~" or "(", so every "www." is defused: "\bwww\." found
# none after "_" (no word boundary there), which GitHub links.
_AUTOLINK = re.compile(r"(?i)(://|www\.)")


def markdown_literal(text: object, *, keep_underscores: bool = False) -> str:
    """``text`` as literal Markdown on one line (a table cell, a list item): ``printable``,
    every formatting character backslash-escaped (a pipe would split a table's cell),
    mentions defused ("@user" and "@org/team" notify people on GitHub, so a zero-width space
    follows each "@") and links too: a URL in a summary (a model's invention, perhaps) is shown,
    not made clickable in a CI report, by a zero-width space inside its "://" or every "www.".
    ``keep_underscores`` leaves "_" as it is, for names also read in a terminal
    (``bump_task1``): it can only italicize, never link, embed or notify."""
    escaped = _MARKDOWN_SPECIAL.sub(
        lambda m: m.group() if keep_underscores and m.group() == "_" else "\\" + m.group(),
        printable(text),
    ).replace("@", "@\u200b")
    return _AUTOLINK.sub(lambda m: m.group(1)[0] + "\u200b" + m.group(1)[1:], escaped)


class PrintableFormatter(logging.Formatter):
    """A log formatter whose records come out as one safe line each (``safe_line``), for the
    handlers faithgate installs on its CLI (log messages quote exceptions, which quote input)."""

    def format(self, record: logging.LogRecord) -> str:
        record = logging.makeLogRecord(record.__dict__)  # a copy: other handlers see the original
        record.levelname = record.levelname.lower()
        return safe_line(super().format(record))


# Characters outside printable ASCII: each is checked against ``printable`` (the one list of
# unsafe characters), the common ASCII text is not looked at.
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e\n]")


def _json_escape(match: re.Match[str]) -> str:
    ch = match.group()
    return ch if printable(ch) == ch else f"\\u{ord(ch):04x}"


def json_for_terminal(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kwargs)`` safe to print: every character that
    ``faithgate.safety.escape.printable`` would escape (C1 controls such as U+009B CSI, DEL, U+2028,
    bidi overrides, lone surrogates) becomes a ``\\uXXXX`` escape. Such characters occur only
    inside JSON strings, so the text stays valid JSON and parses to the same value; other
    non-ASCII text stays readable."""
    text = _NOT_PRINTABLE_ASCII.sub(_json_escape, json.dumps(obj, ensure_ascii=False, **kwargs))
    # "##[" (a legacy workflow command, parsed anywhere in a line) occurs only inside strings.
    return text.replace("##[", "##\\u005b")


def exception_line(exc: BaseException) -> str:
    """Why something failed, from the exception it raised: ``Type: message`` (or ``Type``
    alone) as one escaped line, since the message may quote user text."""
    text = str(exc).strip()
    return safe_line(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)
