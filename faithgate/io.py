"""Reading examples from JSONL and CSV, with errors that name the file and line.

Record rules (the same for both formats):

- ``source`` and ``summary`` are required, must be strings and must not be empty or blank:
  anything else is an ``InputError`` naming ``file:line`` (a gate must not score nothing).
- ``id`` is optional; without it the id is ``"<line>"``. Ids must be unique in a file.
- ``reference`` is an optional string; ``label`` is optional: 1/0, true/false, or null.
- Any other field is **kept** under ``Example.meta`` (nested ``meta`` objects are merged in), so
  benchmark fields such as ``pair_id``, ``error_type`` or ``score`` reach reports untouched.
- A file that is not valid UTF-8 is an error naming the line of the first bad byte.
- Blank lines in JSONL are skipped.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from faithgate.atomic import atomic_writer
from faithgate.errors import InputError
from faithgate.types import Example

KNOWN_FIELDS = ("id", "source", "summary", "reference", "label", "meta")


def load_examples(path: str | Path, fmt: str | None = None) -> list[Example]:
    """Read examples from a ``.jsonl`` / ``.json`` (JSON Lines) or ``.csv`` file, or ``-``
    for JSON Lines on standard input."""
    name = str(path)
    fmt = fmt or ("csv" if name.lower().endswith(".csv") else "jsonl")
    if fmt not in ("jsonl", "csv"):
        raise InputError(f"unknown input format {fmt!r}: use jsonl or csv")
    text = _read_text(name)
    rows = _jsonl_rows(text, name) if fmt == "jsonl" else _csv_rows(text, name)
    examples: list[Example] = []
    seen: dict[str, int] = {}
    for line, record in rows:
        ex = record_to_example(record, where=f"{name}:{line}", default_id=str(line))
        if ex.id in seen:
            raise InputError(f"{name}:{line}: duplicate id {ex.id!r} (first on line {seen[ex.id]})")
        seen[ex.id] = line
        examples.append(ex)
    if not examples:
        raise InputError(f"{name}: no records")
    return examples


def record_to_example(record: Any, where: str, default_id: str) -> Example:
    """Validate one record (a dict) and build an ``Example``; errors name ``where``."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for key in ("source", "summary"):
        if key not in record:
            raise InputError(f"{where}: missing required field {key!r}")
        value = record[key]
        if not isinstance(value, str):
            raise InputError(f"{where}: field {key!r} must be text, got {type(value).__name__}")
        if not value.strip():
            raise InputError(f"{where}: field {key!r} is empty")
    reference = record.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise InputError(f"{where}: field 'reference' must be text or null")
    raw_id = record.get("id", default_id)
    if raw_id is None or (isinstance(raw_id, str) and not raw_id.strip()):
        raise InputError(f"{where}: field 'id' is empty")
    if not isinstance(raw_id, str | int):
        raise InputError(f"{where}: field 'id' must be a string or integer")
    meta = record.get("meta") or {}
    if not isinstance(meta, dict):
        raise InputError(f"{where}: field 'meta' must be an object")
    extra = {k: v for k, v in record.items() if k not in KNOWN_FIELDS}
    return Example(
        id=str(raw_id),
        source=record["source"],
        summary=record["summary"],
        reference=reference,
        label=_parse_label(record.get("label"), where),
        meta={**meta, **extra},
    )


def _parse_label(value: Any, where: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in {"0", "1", "true", "false"}:
        return int(value.strip().lower() in {"1", "true"})
    raise InputError(f"{where}: field 'label' must be 1, 0, true, false or empty, got {value!r}")


def _read_text(name: str) -> str:
    if name == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(name)
        if not path.is_file():
            raise InputError(f"{name}: no such file")
        data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{name}:{line}: not valid UTF-8 (byte {exc.start})") from None


def _jsonl_rows(text: str, name: str) -> Iterator[tuple[int, Any]]:
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield line_no, json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{name}:{line_no}: invalid JSON ({exc.msg})") from None


def _csv_rows(text: str, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames:
        raise InputError(f"{name}: empty CSV (no header)")
    for row in reader:
        if None in row:  # more cells than header columns
            raise InputError(f"{name}:{reader.line_num}: more cells than header columns")
        yield reader.line_num, {k: v for k, v in row.items()}


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> None:
    """Write dicts as JSON Lines (UTF-8, one object per line), creating parent directories."""
    with atomic_writer(path) as fh:  # a failed write leaves the previous file intact
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
