"""Two processes (xdist workers, a concurrent ``faithgate check``) open one damaged score cache
at once: the second must not fail when the first has already moved the file aside.

The race is simulated, not timed: the second cache's first ``_open`` fails on the damaged file
and, before it moves the file aside, "the other process" moves it (or moves it and starts a
fresh cache at the path).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from faithgate.cache import ScoreCache
from faithgate.types import Score

DAMAGED = b"not a database, a crashed copy " * 300


def _race(monkeypatch: pytest.MonkeyPatch, other: Callable[[], None]) -> None:
    """Run ``other()`` right after the next ``ScoreCache._open`` fails on the damaged file."""
    real_open = ScoreCache._open
    state = {"done": False}

    def open_then_lose_the_race(self: ScoreCache, *args, **kwargs) -> None:
        try:
            real_open(self, *args, **kwargs)
        except sqlite3.DatabaseError:
            if not state["done"]:
                state["done"] = True
                self.close()
                other()
            raise

    monkeypatch.setattr(ScoreCache, "_open", open_then_lose_the_race)


def _asides(path: Path) -> list[Path]:
    return sorted(
        p
        for p in path.parent.glob(f"{path.name}.corrupt-*")
        if not p.name.endswith(("-wal", "-shm"))
    )


def test_the_damaged_file_already_moved_by_another_process(tmp_path, monkeypatch, caplog):
    """The second worker's ``path.replace(aside)`` was a FileNotFoundError traceback."""
    path = tmp_path / "scores.sqlite"
    path.write_bytes(DAMAGED)
    kept = tmp_path / "moved-by-the-other-worker"
    _race(monkeypatch, lambda: path.replace(kept))
    with caplog.at_level(logging.WARNING, logger="faithgate.cache"):
        cache = ScoreCache(path)
    assert "another process already moved it aside" in caplog.text
    assert kept.read_bytes() == DAMAGED  # the other worker's move stands
    assert _asides(path) == []
    score = Score("m", 0.5, "h", "1")
    cache.put("h", "src", "sum", score)
    assert cache.get("h", "src", "sum").value == 0.5  # a working, fresh cache
    cache.close()


def test_a_fresh_cache_started_by_another_process_is_not_moved_aside(tmp_path, monkeypatch, caplog):
    """The other worker moved the damaged file aside and started a new cache at the path
    (and wrote a score to it): the late worker must use that cache, not move it aside too."""
    path = tmp_path / "scores.sqlite"
    path.write_bytes(DAMAGED)
    first: list[ScoreCache] = []

    def other_worker() -> None:
        cache = ScoreCache(path)  # moves the damaged file aside, starts a fresh cache
        cache.put("h", "src", "sum", Score("m", 0.25, "h", "1"))
        first.append(cache)

    _race(monkeypatch, other_worker)
    with caplog.at_level(logging.WARNING, logger="faithgate.cache"):
        late = ScoreCache(path)
    asides = _asides(path)
    assert len(asides) == 1 and asides[0].read_bytes() == DAMAGED
    hit = late.get("h", "src", "sum")
    assert hit is not None and hit.value == 0.25  # the other worker's cache, shared
    assert "another process already moved it aside" in caplog.text
    late.close()
    first[0].close()


def test_a_damaged_cache_that_cannot_be_moved_aside_is_one_input_error(tmp_path, monkeypatch):
    from faithgate.errors import InputError

    path = tmp_path / "scores.sqlite"
    path.write_bytes(DAMAGED)

    def refuse(self, target):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "replace", refuse)
    with pytest.raises(InputError, match=r"is damaged .* cannot be moved aside: Permission denied"):
        ScoreCache(path)


def test_a_fresh_cache_started_the_moment_the_file_moves_keeps_its_side_files(
    tmp_path, monkeypatch
):
    """SQLite's -wal/-shm of the damaged file were moved after the file itself: a process that
    started a new cache in between lost its write-ahead log (its scores) to the aside name."""
    path = tmp_path / "scores.sqlite"
    path.write_bytes(DAMAGED)
    path.with_name(path.name + "-wal").write_bytes(b"the damaged file's log")
    real_replace = Path.replace
    other: list[ScoreCache] = []

    def replace_then_race(self: Path, target):
        moved = real_replace(self, target)
        if self == path and not other:  # the damaged file just left: another process starts
            cache = ScoreCache(path)
            cache.put("h", "src", "sum", Score("m", 0.75, "h", "1"))
            other.append(cache)
        return moved

    monkeypatch.setattr(Path, "replace", replace_then_race)
    late = ScoreCache(path)
    [aside] = _asides(path)
    assert aside.with_name(aside.name + "-wal").read_bytes() == b"the damaged file's log"
    hit = late.get("h", "src", "sum")
    assert hit is not None and hit.value == 0.75  # the new cache's log stayed with it
    late.close()
    other[0].close()
