"""The schema library's glue: shapes of configuration, results and baselines are stated once, as
annotated fields of their dataclasses, and pydantic checks them.

Why pydantic (over msgspec or attrs + cattrs): its errors are structured, so every message keeps
the words faithgate used before. Each error carries its location with dict keys (a metric's name;
msgspec writes ``[...]``), the offending value (msgspec leaves it out) and its kind. It checks the
stdlib dataclasses as they are, and spaCy, a core dependency, already installs it.

``expect`` gives a type the words of its error; ``first_error`` picks what a message reports.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError, WrapValidator
from pydantic_core import ErrorDetails, PydanticCustomError

__all__ = ["ValidationError", "adapter", "expect", "first_error", "item", "none_as_empty"]


@functools.cache
def adapter(shape: Any) -> TypeAdapter[Any]:
    """The validator of ``shape`` (a dataclass or an annotated type), built once when first
    used: building them all at import would slow every command's start."""
    return TypeAdapter(shape)


def expect(wording: str, *, inside: bool = True) -> WrapValidator:
    """Metadata for ``Annotated``: a value that fails its type is reported as ``wording`` (what
    it must be, e.g. "true or false"), with the value itself as the error's input. With
    ``inside=False`` only the value's own type is reworded; errors inside it (an entry of an
    object) keep their own location and words."""

    def reword(value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            if not inside and any(e["loc"] for e in exc.errors()):
                raise
            raise PydanticCustomError("expected", wording) from None

    return WrapValidator(reword)


def none_as_empty(value: Any) -> Any:
    """A ``BeforeValidator`` for an optional object: null reads as an empty one."""
    return {} if value is None else value


def first_error(exc: ValidationError) -> ErrorDetails:
    """The error a one-line message reports: the first, in the order of the fields."""
    return exc.errors(include_url=False)[0]


def item(data: Any, *keys: Any) -> Any:
    """``data[keys[0]][keys[1]]...`` or ``None`` where the input has no such entry (to name the
    example or rule an error lies in, by its id or name)."""
    for key in keys:
        if isinstance(data, Mapping) or (isinstance(data, list) and isinstance(key, int)):
            try:
                data = data[key]
                continue
            except (KeyError, IndexError):
                pass
        return None
    return data
