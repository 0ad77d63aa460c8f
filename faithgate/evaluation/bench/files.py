"""The files ``faithgate bench`` reads: a file or a directory's data files, and a reproducible
sample of their rows that keeps pairs whole."""

from __future__ import annotations

import logging
import random
import stat
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from faithgate.errors import InputError
from faithgate.io import read_jsonl_rows
from faithgate.safety.escape import safe_line
from faithgate.safety.paths import input_mode, refuse_not_a_file
from faithgate.types import Example

logger = logging.getLogger(__name__)


# What bench reads from a directory, in any case (``.JSONL``): the formats ``load_examples``
# tells apart. A ``.json`` file there is as often a result (``--output``) or weights file
# (``--save-weights``) as JSON Lines: it is skipped with the others, by name (give it as a file).
DATA_SUFFIXES = (".jsonl", ".csv")
# Files a dataset directory holds besides its data, skipped without a word (../shared/data
# has a README.md and a licenses/ directory).
_DOC_SUFFIXES = (".md", ".txt", ".rst")
_DOC_NAMES = ("readme", "license", "licence", "copying", "notice", "citation")


def benchmark_files(path: str | Path, *, warn: bool = True) -> list[Path]:
    """The data files named by ``path``: the file itself, or every ``.jsonl`` and ``.csv`` file
    of a directory (any case; sorted by name). The directory's other files are skipped, with
    one warning naming them (``warn``) unless they are documentation (README, licences),
    hidden, or subdirectories: ``*.jsonl`` alone skipped ``.csv`` and ``.JSONL`` silently."""
    p = Path(path)
    mode = input_mode(p, p, f"{p}: no such file or directory")
    # A pipe (``--data <(cmd)``) is read once, as a file; a device (/dev/zero would never
    # end) or a socket is refused.
    refuse_not_a_file(p, mode, pipe=True, directory=True)
    if not stat.S_ISDIR(mode):
        return [p]
    files: list[Path] = []
    skipped: list[str] = []
    for f in sorted(p.iterdir(), key=lambda f: f.name):
        if f.suffix.lower() in DATA_SUFFIXES and not f.is_dir():
            files.append(f)
        elif not _quietly_skipped(f):
            skipped.append(f.name)
    if not files:
        raise InputError(f"{p}: no .jsonl or .csv files in this directory")
    if skipped and warn:
        shown = ", ".join(repr(n) for n in skipped[:5]) + (", ..." if len(skipped) > 5 else "")
        logger.warning(
            "%s: skipped %d file(s) that are not .jsonl or .csv: %s (to read one, give it as "
            "--data FILE: a file not named .csv is read as JSON Lines)",
            safe_line(str(p)),
            len(skipped),
            safe_line(shown),
        )
    return files


def _quietly_skipped(f: Path) -> bool:
    """A directory entry that is no data file by its nature: a subdirectory, a hidden file,
    or documentation."""
    name = f.name.lower()
    return (
        name.startswith(".")
        or f.suffix.lower() in _DOC_SUFFIXES
        or name.split(".")[0] in _DOC_NAMES
        or f.is_dir()
    )


def refuse_same_names(files: Sequence[Path]) -> None:
    """Results, the report's rows and ``--plots`` file names are keyed by a file's stem, so
    two files named alike (``a/d.jsonl``, ``b/d.jsonl``, or one file given twice) would
    overwrite each other's figures: refused, before any scoring, naming both."""
    seen: dict[str, Path] = {}
    for f in files:
        if f.stem in seen:
            raise InputError(
                f"two --data files are both named {f.stem!r} ({seen[f.stem]}, {f}): results and "
                "--plots files are named after the file, so one would overwrite the other; "
                "rename or copy one of them (or give it once)"
            )
        seen[f.stem] = f


def record_locator(path: Path) -> Callable[[int], str]:
    """``where(i)`` for ``items_from_examples``: ``file:line`` of the ``i``-th record, found by
    reading the file again only when a record is refused (the error path)."""

    def where(i: int) -> str:
        if path.suffix.lower() != ".csv":
            for k, (line, _) in enumerate(read_jsonl_rows(path)):
                if k == i:
                    return f"{path}:{line}"
        return f"{path}: record {i + 1}"

    return where


def limit_examples(examples: Sequence[Example], limit: int | None, seed: int = 0) -> list[Example]:
    """A reproducible sample of about ``limit`` rows that keeps pair groups whole (a BUMP pair
    without its partner is useless for consistency) and the file order."""
    if limit is None or limit >= len(examples):
        return list(examples)
    if limit <= 0:
        raise InputError("--limit must be positive")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        pair = ex.meta.get("pair_id")  # an integer id 0 is a pair too (not "no pair")
        groups[f"id:{ex.id}" if pair is None or pair == "" else str(pair)].append(i)
    keys = list(groups)
    random.Random(seed).shuffle(keys)
    chosen: list[int] = []
    for k in keys:
        if len(chosen) >= limit:
            break
        chosen.extend(groups[k])
    return [examples[i] for i in sorted(chosen)]
