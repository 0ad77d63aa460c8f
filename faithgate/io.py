"""Reading examples from JSONL and CSV, with errors that name the file and line.

Record rules (the same for both formats):

- ``source`` and ``summary`` are required, must be strings and must not be empty or blank:
  anything else is an ``InputError`` naming ``file:line`` (a gate must not score nothing).
  The gate reads its outputs with ``allow_empty_summary``: an empty summary is a summarizer's
  bad output, which fails its own example (unscorable, "empty summary"), not bad input. A
  missing one's error lists the record's fields and names the one to rename where another
  tool's name for it is there (``document``, ``claim``, ...: ``FIELD_ALIASES``); such a field is
  never read in its place.
- ``id`` is optional; without it the id is ``"<line>"``. Ids must be unique in a file.
- ``reference`` is an optional string; ``label`` is optional: 1/0, true/false, or null.
- Any other field is **kept** under ``Example.meta`` (nested ``meta`` objects are merged in), so
  benchmark fields such as ``pair_id``, ``error_type`` or ``score`` reach reports untouched.
  A ``meta`` that is not an object (or null), and a key given both at the top level and inside
  ``meta``, are errors: one of the two values would be dropped silently.
- CSV is read strictly: an unbalanced quote is an error naming the record's line (lenient
  parsing let one take in every later row). Cells are text, except that a ``score`` cell that
  is a number is read as one and an empty ``score`` cell as null, as JSON would give them.
- A file that is not valid UTF-8 is an error naming the line of the first bad byte.
- Text must be Unicode text: a lone surrogate (``"\\ud800"``) or a NUL character is an error
  naming the field (``check_text``); JSON nested too deeply to parse, a number of more than
  4300 digits and a field given twice in one record (``"summary"`` twice: JSON parsers disagree
  on which one counts) are errors naming ``file:line`` (``faithgate.safety.userjson``), not a crash.
- JSONL lines end at ``\\n`` only (``jsonl_lines``): U+2028, U+0085 and the other characters
  ``str.splitlines`` breaks on are legal raw inside JSON strings.
- Blank lines in JSONL are skipped.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from faithgate.errors import InputError
from faithgate.safety.atomic import atomic_write_text
from faithgate.safety.paths import input_mode, refuse_not_a_file
from faithgate.safety.userjson import parse_json, parse_problem
from faithgate.types import Example, check_text, is_blank

KNOWN_FIELDS = ("id", "source", "summary", "reference", "label", "meta")


def load_examples(
    path: str | Path, fmt: str | None = None, *, allow_empty_summary: bool = False
) -> list[Example]:
    """Read examples from a ``.jsonl`` / ``.json`` (JSON Lines) or ``.csv`` file, or ``-``
    for JSON Lines on standard input. ``allow_empty_summary``: a blank summary is read as an
    (unscorable) output instead of refused."""
    name = str(path)
    fmt = fmt or ("csv" if name.lower().endswith(".csv") else "jsonl")
    if fmt not in ("jsonl", "csv"):
        raise InputError(f"unknown input format {fmt!r}: use jsonl or csv")
    text = _read_text(name)
    rows = _jsonl_rows(text, name) if fmt == "jsonl" else _csv_rows(text, name)
    examples: list[Example] = []
    seen: dict[str, int] = {}
    for line, record in rows:
        ex = record_to_example(
            record,
            where=f"{name}:{line}",
            default_id=str(line),
            allow_empty_summary=allow_empty_summary,
        )
        if ex.id in seen:
            raise InputError(f"{name}:{line}: duplicate id {ex.id!r} (first on line {seen[ex.id]})")
        seen[ex.id] = line
        examples.append(ex)
    if not examples:
        raise InputError(f"{name}: no records")
    return examples


# What other benchmarks and tools call the two texts (SummaC and AggreFact: document / claim;
# NLI: premise / hypothesis; generation logs: input / output ...). Only ever named in an error:
# a record is never read through them, as a guessed field would score the wrong text silently.
FIELD_ALIASES = {
    "source": ("document", "doc", "article", "text", "premise", "context", "input", "src"),
    "summary": ("claim", "hypothesis", "output", "prediction", "generated", "summ", "candidate"),
}


def _field_hint(key: str, record: dict[str, Any]) -> str:
    """The record's own fields, and which of them looks like ``key``: what a user needs to
    rename a file written for another tool."""
    names = sorted(str(k)[:40] for k in record)
    shown = ", ".join(repr(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
    hint = f" (the record's fields: {shown or 'none'}"
    likely = [a for a in FIELD_ALIASES[key] if a in record]
    if likely:
        hint += f"; rename {likely[0]!r} to {key!r} if it holds the {key}"
    return hint + ")"


def record_to_example(
    record: Any, where: str, default_id: str, *, allow_empty_summary: bool = False
) -> Example:
    """Validate one record (a dict) and build an ``Example``; errors name ``where``. With
    ``allow_empty_summary`` a blank summary is kept (the gate fails that example); a blank
    source is always an error."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for key in ("source", "summary"):
        if key not in record:
            raise InputError(f"{where}: missing required field {key!r}{_field_hint(key, record)}")
        value = record[key]
        if not isinstance(value, str):
            raise InputError(f"{where}: field {key!r} must be text, got {type(value).__name__}")
        check_text(value, f"{where}: field {key!r}")
        if is_blank(value) and not (key == "summary" and allow_empty_summary):
            raise InputError(f"{where}: field {key!r} is empty")
    reference = record.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise InputError(f"{where}: field 'reference' must be text or null")
    try:  # every other string (id, meta) must be writable back as UTF-8 too
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{where}: a field contains a lone surrogate (U+{ord(exc.object[exc.start]):04X}), "
            "which is not valid Unicode text"
        ) from None
    raw_id = record.get("id", default_id)
    # An id of only invisible characters (U+200B) prints as nothing, like an empty one.
    if raw_id is None or (isinstance(raw_id, str) and is_blank(raw_id)):
        raise InputError(f"{where}: field 'id' is empty")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        raise InputError(f"{where}: field 'id' must be a string or integer")
    if isinstance(raw_id, str):
        check_text(raw_id, f"{where}: field 'id'")
    meta = record.get("meta")
    if meta is None:  # absent or null: no nested fields
        meta = {}
    elif not isinstance(meta, dict):  # false, 0, "" and [] too: not "no meta"
        raise InputError(f"{where}: field 'meta' must be an object")
    extra = {k: v for k, v in record.items() if k not in KNOWN_FIELDS}
    both = sorted(str(k) for k in extra.keys() & meta.keys())
    if both:  # one value would silently replace the other (pair_id decides pairing)
        raise InputError(
            f"{where}: field {both[0]!r} is given both at the top level and inside 'meta': "
            "keep one of them"
        )
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
    # "1.0" / "0.0": how pandas writes a label column with missing values (JSON 1.0 is read).
    if isinstance(value, str) and _LABEL_FLOAT.fullmatch(value.strip()):
        return int(float(value))
    raise InputError(f"{where}: field 'label' must be 1, 0, true, false or empty, got {value!r}")


def read_stdin_bytes() -> bytes:
    """All of standard input; ``InputError`` when it is closed (``<&-``: Python then has no
    ``sys.stdin``), which was an internal error (exit 1) rather than bad input (exit 2)."""
    stream = sys.stdin
    if stream is None:
        raise InputError("standard input is closed: give a file, or pipe the text in")
    try:
        data = stream.buffer.read() if hasattr(stream, "buffer") else stream.read()
    except (OSError, ValueError) as exc:  # EBADF, or a stream closed inside this process
        raise InputError(f"standard input is closed or unreadable ({exc})") from None
    return data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape")


def _read_text(name: str) -> str:
    if name == "-":
        data = read_stdin_bytes()
    else:
        path = Path(name)
        mode = input_mode(path, name, f"{name}: no such file")
        # A pipe is read like a file (``--outputs <(cmd)`` is /dev/fd/N), as ``faithgate
        # score --source`` reads one; a device (/dev/zero would never end) is refused.
        refuse_not_a_file(name, mode, pipe=True)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{name}: cannot read it ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{name}:{line}: not valid UTF-8 (byte {exc.start})") from None


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text, split at ``\\n`` only (a ``\\r`` before it is JSON
    whitespace). ``str.splitlines`` would also split at U+2028, U+2029, U+0085, VT, FF and
    U+001C..U+001E, which ``json.dumps(ensure_ascii=False)`` leaves raw inside strings."""
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


def read_jsonl_rows(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) of each non-blank line of a JSON Lines file (``-``: stdin),
    with the same one-line ``file:line`` errors as ``load_examples`` (bad UTF-8, bad JSON,
    JSON nested too deeply)."""
    return _jsonl_rows(_read_text(str(path)), str(path))


def _jsonl_rows(text: str, name: str) -> Iterator[tuple[int, Any]]:
    for line_no, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        # One error line for bad JSON, JSON nested too deeply, a number too long to read and
        # a field given twice (json.loads alone keeps the last: the wrong text, silently).
        yield line_no, parse_json(line, f"{name}:{line_no}", line=True)


# A cell may be as long as a JSONL field (a 1.2M-character source): csv's default limit is
# 131,072 characters. C long is 32 bits on Windows, so 2**31 - 1 is the most every platform takes.
_CSV_FIELD_LIMIT = min(sys.maxsize, 2**31 - 1)
# csv.field_size_limit is one process-wide setting: two threads reading CSV at once would
# restore each other's raised value (left at 2**31 - 1) or drop it mid-read (a spurious "field
# larger than field limit"). Held from its raising to its restoring.
_CSV_LIMIT_LOCK = threading.Lock()
_CSV_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_LABEL_FLOAT = re.compile(r"[01]\.0*")


def _csv_cell(key: str, value: str | None, where: str) -> Any:
    """A CSV cell as the JSON value it stands for: CSV has only text, so a human ``score``
    (``0.9``) was refused by bench as text; an empty ``score`` cell is null. Other cells stay
    text (an id "007" is not 7). A number too long to read (an integer of more than
    ``sys.get_int_max_str_digits()`` digits) is an ``InputError`` naming ``where`` (``file:line``)
    and the field, as in JSON, not an internal error."""
    if key == "score" and isinstance(value, str):
        cell = value.strip()
        if not cell:
            return None
        if _CSV_NUMBER.fullmatch(cell):
            try:
                return int(cell) if cell.lstrip("+-").isdigit() else float(cell)
            except ValueError as exc:
                raise InputError(f"{where}: field {key!r} is {parse_problem(exc)}") from None
    return value


def _csv_rows(text: str, name: str) -> list[tuple[int, dict[str, Any]]]:
    """(line, record) of each CSV row; the line is the record's last (a quoted cell may span
    lines), as ``csv.DictReader`` numbered it: it is the default id, which baselines made by
    earlier versions hold. Parsed with ``strict``: leniently an unclosed quote took in every
    later line as one cell, and a stray quote inside a field was dropped or moved, silently."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[tuple[int, dict[str, Any]]] = []
    # The line the record being read starts on, for a parse error: an unclosed quote is found
    # only at the end of the file, whose line would point far from it.
    start = 1
    with _CSV_LIMIT_LOCK:  # the limit is process-wide: raised and restored by one thread at a time
        limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
        try:
            header = next(reader, None)
            if not header:
                raise InputError(f"{name}: empty CSV (no header)")
            repeated = sorted({f for f in header if header.count(f) > 1})
            if repeated:  # one of two same-named columns would be lost
                raise InputError(
                    f"{name}:1: the header repeats column(s) {', '.join(map(repr, repeated))}"
                )
            start = reader.line_num + 1
            for row in reader:
                if row:  # a blank line is no record
                    where = f"{name}:{reader.line_num}"
                    if len(row) > len(header):
                        raise InputError(f"{where}: more cells than header columns")
                    # A missing cell is None, refused by field (as csv.DictReader gave it).
                    cells: list[str | None] = [*row, *[None] * (len(header) - len(row))]
                    record = {k: _csv_cell(k, v, where) for k, v in zip(header, cells, strict=True)}
                    rows.append((reader.line_num, record))
                start = reader.line_num + 1
        except csv.Error as exc:  # e.g. a NUL byte, an unclosed quote, text after a closing quote
            raise InputError(f"{name}:{start}: invalid CSV ({exc})") from None
        finally:
            csv.field_size_limit(limit)
    return rows


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> None:
    """Write dicts as JSON Lines (UTF-8, one object per line), creating parent directories."""
    # A failed write leaves the previous file intact (WriteError, exit 2).
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
