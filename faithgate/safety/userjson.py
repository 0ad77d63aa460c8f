"""Parsing JSON a user gave: the one place for what can go wrong in it.

``json.loads`` fails in more ways than ``JSONDecodeError``: text nested a few thousand levels
deep raises ``RecursionError``, and an integer of more than ``sys.get_int_max_str_digits()``
digits (4300) raises a bare ``ValueError``. A key given twice in one object is no error at all:
the last one wins silently, so ``{"summary": "unfaithful", "summary": "faithful"}`` would gate
the second text while another parser reads the first. ``parse_json`` turns each of these into
one ``InputError`` line naming the file (and line): exit 2, never an internal error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from faithgate.errors import InputError


class RepeatedKey(ValueError):
    """A key given twice in one JSON object (``unique_object``)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"field {key!r} given twice")
        self.key = key


def unique_object(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads``: a dict, or ``RepeatedKey`` for a key given
    twice (``json.loads`` alone keeps the last one)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise RepeatedKey(key)
        out[key] = value
    return out


def parse_problem(exc: BaseException, *, position: bool = True) -> str:
    """What went wrong reading JSON (or TOML), in words, for an exception ``json.loads`` (with
    ``unique_object``) or ``tomllib.loads`` raised: the decoder's message (with its line and
    column when ``position``), "nested too deeply", a number with too many digits, or a
    repeated key."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, RepeatedKey):
        return str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return str(exc) if position else exc.msg
    if "integer string conversion" in str(exc):  # Python's limit on int("...") digits
        return f"a number with more than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def parse_json(text: str, where: object, what: str = "invalid JSON", *, line: bool = False) -> Any:
    """``json.loads(text)`` of text read from ``where`` (a file, ``file:line``, an option), with
    a key given twice refused. Anything wrong is ``InputError``: ``"{where}: {what} (reason)"``,
    or ``"{where}: field 'x' given twice"``. ``line``: the text is one line of a JSON Lines
    file, whose position ``where`` already names (the decoder's column is left out)."""
    try:
        return json.loads(text, object_pairs_hook=unique_object)
    except RepeatedKey as exc:
        raise InputError(f"{where}: {exc}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise InputError(f"{where}: {what} ({parse_problem(exc, position=not line)})") from None
