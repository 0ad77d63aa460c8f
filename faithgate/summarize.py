"""Run a user's summarizer over a dataset of sources, to gate what it produces.

The summarizer is named ``"package.module:function"``; the function takes one source text and
returns its summary as a string. The dataset is JSON Lines with a ``source`` field per record
(``id``, ``reference``, ``label`` and any other fields are optional and kept, as in
``faithgate.io``, except ``pair_id`` and ``role``: they describe a summary in the data, and the
summarizer's output is always an output, never a pair's probe). Every problem is one ``InputError`` line: a module that cannot be imported, a
missing attribute, something not callable, an exception raised on a record, or a return value
that is not a string. An empty (or blank) summary is the summarizer's bad output, not bad
input: it is kept, and the gate fails that example as unscorable ("empty summary").
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from faithgate.errors import InputError, Interrupted
from faithgate.io import _jsonl_rows, _read_text, check_text, record_to_example
from faithgate.types import Example

Summarizer = Callable[[str], str]
# A data row's minimal-pair fields: they describe the row's own summary, not the summarizer's.
PAIR_FIELDS = ("pair_id", "role")


def load_summarizer(ref: str, search_path: Iterable[str | Path] = ()) -> Summarizer:
    """Import ``module:function``. ``search_path`` directories (e.g. the configuration's
    directory) are tried before ``sys.path`` so a project's own modules are found."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"summarizer must be 'module:function', got {ref!r}")
    extra = [str(Path(p).resolve()) for p in search_path]
    extra.append(str(Path.cwd()))
    added = [p for p in extra if p not in sys.path]
    _forget_other_project_module(module_name.split(".")[0], extra)
    sys.path[:0] = added
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"summarizer {ref!r}: cannot import {module_name!r} ({exc})") from None
    except SystemExit as exc:  # sys.exit() would end the gate with its code: 0 passes a build
        raise InputError(
            f"summarizer {ref!r}: importing {module_name!r} called sys.exit({exc.code!r})"
        ) from None
    except (KeyboardInterrupt, Interrupted):
        raise
    # User code failing at import time; BaseException too: pytest.skip() must not skip a gate.
    except BaseException as exc:  # noqa: BLE001
        raise InputError(
            f"summarizer {ref!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from None
    finally:
        for p in added:
            if p in sys.path:
                sys.path.remove(p)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(f"summarizer {ref!r}: module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"summarizer {ref!r} is not callable ({type(obj).__name__})")
    return obj


def _forget_other_project_module(top: str, search_path: list[str]) -> None:
    """Drop ``top`` (and its submodules) from ``sys.modules`` when it was imported from
    another file than the one the search path holds: a process that gates two projects, each
    with its own ``summ.py``, ran the first project's summarizer for the second."""
    found = next(
        (
            candidate.resolve()
            for directory in search_path
            for candidate in (Path(directory) / f"{top}.py", Path(directory) / top / "__init__.py")
            if candidate.is_file()
        ),
        None,
    )
    loaded = sys.modules.get(top)
    where = getattr(loaded, "__file__", None)
    if found is None or loaded is None or (where and Path(where).resolve() == found):
        return
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        del sys.modules[name]


def load_sources(path: str | Path) -> list[Example]:
    """Records of a sources JSONL as examples with an empty summary (filled in later)."""
    name = str(path)
    out: list[Example] = []
    seen: set[str] = set()
    for line, record in _jsonl_rows(_read_text(name), name):
        if isinstance(record, dict) and "summary" not in record:
            record = {**record, "summary": "-"}  # placeholder so the shared validator applies
        ex = record_to_example(record, where=f"{name}:{line}", default_id=str(line))
        if ex.id in seen:
            raise InputError(f"{name}:{line}: duplicate id {ex.id!r}")
        seen.add(ex.id)
        out.append(ex)
    if not out:
        raise InputError(f"{name}: no records")
    return out


def summarize(
    fn: Summarizer, sources: Sequence[Example], name: str = "summarizer"
) -> list[Example]:
    """Examples whose summary is ``fn(source)``, checked to be a string (an empty one is kept:
    the scorer fails it as "empty summary", and the rest of the gate still runs)."""
    out = []
    for ex in sources:
        try:
            summary = fn(ex.source)
        except SystemExit as exc:  # sys.exit() would end the gate with its code: 0 passes a build
            raise InputError(
                f"{name} called sys.exit({exc.code!r}) on record {ex.id!r}; a summarizer must "
                "return the summary"
            ) from None
        except (KeyboardInterrupt, Interrupted):
            raise
        # The user's error on one line; BaseException too: pytest.skip() must not skip a gate.
        except BaseException as exc:  # noqa: BLE001
            raise InputError(
                f"{name} raised {type(exc).__name__} on record {ex.id!r}: {exc}"
            ) from None
        if not isinstance(summary, str):
            raise InputError(
                f"{name} returned {type(summary).__name__} for record {ex.id!r}; "
                "expected the summary as a string"
            )
        check_text(summary, f"the summary {name} returned for record {ex.id!r}")
        # The data file's pair fields described its rows, not this output: kept, a row with an
        # unfaithful role would leave the gate as a pair's probe (rules.given_pairs).
        meta = {k: v for k, v in ex.meta.items() if k not in PAIR_FIELDS}
        out.append(Example(ex.id, ex.source, summary, ex.reference, ex.label, meta))
    return out


def run_summarizer(
    ref: str | Summarizer, data: str | Path, search_path: Iterable[str | Path] = ()
) -> list[Example]:
    """Run the summarizer ``ref`` (``module:function`` or a callable) over the sources in
    ``data`` and return the examples to gate."""
    fn = load_summarizer(ref, search_path) if isinstance(ref, str) else ref
    name = ref if isinstance(ref, str) else getattr(ref, "__name__", "summarizer")
    return summarize(fn, load_sources(data), name=f"summarizer {name!r}")
