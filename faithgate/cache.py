"""A persistent score cache keyed by (settings hash, source, summary).

An unchanged example under an unchanged metric configuration is never rescored: the gate,
``faithgate bench`` and the pytest plugin share it. SQLite gives atomic writes that are safe
across processes (pytest-xdist workers, parallel CI jobs on one runner).

A cache file that is not a SQLite database (a crashed copy, a file someone put there) is moved
aside to ``scores.sqlite.corrupt-<time>`` with a one-line warning and a fresh cache is started
(when it is named like a cache, ``*.sqlite``; any other file at the cache path is refused):
a cache only saves time, so losing it must not stop a gate, and nothing is deleted. A cache
location that cannot be created or opened at all is an input error naming the path. A file
damaged beyond its first page is found when it is opened (SQLite's ``quick_check``) and moved
aside too; damage or an SQLite failure met later in a run (a full disk) is one warning, and the
run goes on without the cache.

Each row is the score's JSON and a digest of it and its key (``_digest``): ``quick_check``
checks the file's structure, not what a row holds, so a flipped bit in a stored score
(``"value": 1.0`` read as ``0.0``) was served as a score. A row is a miss (scored again and
overwritten) unless its digest matches and it reads back as a score of the shape the cache
writes (``_stored_score``): a JSON object, a finite number for its value (not ``true``, not
NaN, not text), no error. A row an older faithgate wrote has no digest: it is a miss once, and
an older faithgate reads a row with one as unreadable, a miss as well. A digest is no
signature: it finds damage, not a deliberate edit (which can compute it again).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from faithgate.errors import InputError
from faithgate.numbers import is_finite_number
from faithgate.safety.escape import safe_line
from faithgate.safety.paths import refuse_not_a_file
from faithgate.types import Score

# The first bytes of every SQLite 3 database file, and the names a cache file may have when
# it is not (yet) one: an empty file SQLite made, or a damaged copy to be moved aside.
SQLITE_HEADER = b"SQLite format 3\x00"
CACHE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
# What a user can do about a cache that cannot be used (the plugin words the flags its way).
CACHE_HINT = "set cache_dir / --cache-dir, or use --no-cache"
_SCHEMA = "CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, score TEXT NOT NULL)"
log = logging.getLogger(__name__)


def cache_key(settings_hash: str, source: str, summary: str) -> str:
    blob = json.dumps([settings_hash, source, summary], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def _digest(key: str, text: bytes) -> bytes:
    """The digest stored after a row's JSON ``text``: 16 hex digits of the SHA-256 of its key
    and text, so a row changed by damage, or another key's row in its place, is found."""
    return hashlib.sha256(key.encode() + b"\n" + text).hexdigest()[:16].encode()


def _stored_row(key: str, score: Score) -> tuple[str, str]:
    """The ``(key, score)`` row of ``score``: its JSON, a newline, ``_digest``."""
    text = json.dumps(score.to_dict()).encode()
    return key, (text + b"\n" + _digest(key, text)).decode()


def _stored_score(key: str, stored: object) -> Score | None:
    """The score of a row (``stored``: its bytes, as ``_stored_row`` wrote them), or None when
    the row is not one: no digest or another, not UTF-8 or JSON, not an object, a value that
    is no finite number (``true``, NaN, ``"0.5"``), an error (failed scores are never stored),
    or fields of other types. None is a miss: the example is scored again and the row
    overwritten."""
    if not isinstance(stored, bytes):
        return None  # NULL, or a number: no row this cache wrote
    text, newline, digest = stored.rpartition(b"\n")
    if not newline or digest != _digest(key, text):
        return None
    try:
        data = json.loads(text.decode("utf-8"))
        if not (
            isinstance(data, dict)
            and isinstance(data.get("metric"), str)
            and is_finite_number(data.get("value"))
            and isinstance(data.get("settings_hash"), str)
            and isinstance(data.get("example_id", ""), str)
            and isinstance(data.get("sentences", []), list)
            and all(_is_sentence(s) for s in data.get("sentences", []))
            and isinstance(data.get("details") or {}, dict)
            and data.get("error") is None
        ):
            return None
        score = Score.from_dict(data)
        # Its usage (requests, tokens: ``details["usage"]``) was spent by the run that stored
        # it; read back it costs nothing, so a run's usage totals count only what it sent.
        score.details.pop("usage", None)
        return score
    # OverflowError: an integer too large for a float (is_finite_number's isfinite)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):
        return None


def _is_sentence(data: object) -> bool:
    """Whether ``data`` reads as a stored ``SentenceScore`` (its value None when it was NaN)."""
    return (
        isinstance(data, dict)
        and set(data) <= {"index", "text", "value", "evidence"}
        and isinstance(data.get("index"), int)
        and not isinstance(data.get("index"), bool)
        and isinstance(data.get("text"), str)
        and (data.get("value") is None or is_finite_number(data.get("value")))
        and (data.get("evidence") is None or isinstance(data.get("evidence"), str))
    )


class ScoreCache:
    """Scores stored in one SQLite file. Failed scores are never cached (they are retried)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._refuse_a_users_file()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Which file was opened: another process (an xdist worker, a concurrent
            # ``faithgate check``) may move the same damaged file aside first.
            seen = self._file_id()
            self._open()
        except sqlite3.DatabaseError as exc:
            if not self._is_foreign_file(exc):
                raise InputError(
                    f"cannot open the score cache {safe_line(self.path)}: {safe_line(exc)} "
                    f"({CACHE_HINT})"
                ) from None
            self.close()
            self._replace_damaged(exc, seen)
        except OSError as exc:
            raise InputError(
                f"cannot use {self.path.parent} as the score cache directory: "
                f"{exc.strerror or exc} ({CACHE_HINT})"
            ) from None
        self.hits = 0
        self.misses = 0
        self._failed = False

    def _refuse_a_users_file(self) -> None:
        """Raise ``InputError`` when the cache path holds a file that is no cache of any kind:
        not an SQLite database, and not named like one (``.sqlite``, ``.sqlite3``, ``.db``).
        SQLite would take over an empty file and a damaged cache is moved aside; a test module
        or an outputs file given as the cache path (``--faithgate-cache test_a.py``) must stay
        as it is. A FIFO, device or socket there is refused before it is opened: reading a named
        pipe with no writer blocked ``faithgate check`` forever."""
        try:
            mode = os.stat(self.path).st_mode
        except OSError:
            return  # created here, or an unusable path: _open's error names it
        if not stat.S_ISDIR(mode):  # a directory: SQLite cannot open it, and _open says so
            refuse_not_a_file(self.path, mode, "score cache", advice=CACHE_HINT)
        try:
            with self.path.open("rb") as f:
                head = f.read(len(SQLITE_HEADER))
        except OSError:
            return  # created here, or an unusable path: _open's error names it
        if head == SQLITE_HEADER:
            self._refuse_a_users_database()
            return
        if self.path.suffix.lower() in CACHE_SUFFIXES:
            return
        raise InputError(
            f"the score cache {safe_line(self.path)} is a file that is not a score cache (not "
            f"an SQLite database, and not named *{', *'.join(CACHE_SUFFIXES)}); refusing to "
            "replace it: choose another cache file"
        )

    def _refuse_a_users_database(self) -> None:
        """Raise ``InputError`` when the SQLite database at the cache path holds tables other
        than the cache's: someone's database, which adding a table (or switching it to WAL)
        would change. Read only; a damaged file is left to ``_open`` (moved aside)."""
        uri = self.path.resolve().as_uri() + "?mode=ro"
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
                rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                others = sorted({name for (name,) in rows} - {"scores"})
        except sqlite3.Error:
            return
        if others:
            raise InputError(
                f"the score cache {safe_line(self.path)} is an SQLite database with other "
                f"tables ({safe_line(', '.join(others[:3]))}), not a score cache; refusing to "
                "use it: choose another cache file"
            )

    def _open(self, attempts: int = 20) -> None:
        for attempt in range(attempts):
            try:
                with self._connect() as conn:
                    conn.execute(_SCHEMA)
                    # Both columns, not their text: a damaged row that is not UTF-8 is a miss
                    # when looked up, not a cache that cannot be opened.
                    conn.execute("SELECT typeof(key), typeof(score) FROM scores LIMIT 1").fetchall()
                    # A damaged page past the first shows only when read: check every page now
                    # (about 50 ms for 60 MB), not halfway through a run.
                    verdict = conn.execute("PRAGMA quick_check").fetchone()
                if verdict is None or verdict[0] != "ok":
                    raise sqlite3.DatabaseError(
                        f"damaged: {verdict[0] if verdict else 'no answer'}"
                    )
                return
            except sqlite3.OperationalError as exc:
                if "no such column" in str(exc):  # a database, but not ours
                    raise sqlite3.DatabaseError("file is not a faithgate score cache") from exc
                # Processes opening a new file at once (xdist workers) can meet "database is
                # locked" while one switches it to WAL, which the busy timeout does not wait
                # for: try again shortly (about 10 s in all).
                if "locked" not in str(exc) or attempt == attempts - 1:
                    raise
                self.close()
                time.sleep(0.05 * (attempt + 1))

    @staticmethod
    def _is_foreign_file(exc: sqlite3.DatabaseError) -> bool:
        # OperationalError ("unable to open", "locked", "readonly") is about access, not content.
        return not isinstance(exc, sqlite3.OperationalError)

    def _file_id(self) -> tuple[int, int] | None:
        """(device, inode) of the file at the cache path, or None when there is none."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def _replace_damaged(self, exc: sqlite3.DatabaseError, seen: tuple[int, int] | None) -> None:
        """Move the damaged file (``seen``) aside and open a fresh cache, with one warning.
        When another process got there first (the file is gone, or the path already holds a
        new file), open what is there now: its fresh cache."""
        try:
            aside = self._move_aside(seen)
        except OSError as move_exc:
            raise InputError(
                f"the score cache {safe_line(self.path)} is damaged ({safe_line(exc)}) and "
                f"cannot be moved aside: {safe_line(move_exc.strerror or move_exc)} (remove it, "
                "or set cache_dir / --cache-dir, or use --no-cache)"
            ) from None
        if aside is None:
            log.warning(
                "score cache %s was damaged or not a SQLite database (%s); another process "
                "already moved it aside; using the new one",
                safe_line(self.path),
                safe_line(exc),
            )
        else:
            log.warning(
                "score cache %s is damaged or not a SQLite database (%s); moved it to %s and "
                "started a new one",
                safe_line(self.path),
                safe_line(exc),
                safe_line(aside.name),
            )
        try:
            self._open()
        except sqlite3.Error as again:
            raise InputError(
                f"cannot open the score cache {safe_line(self.path)}: {safe_line(again)} "
                f"({CACHE_HINT})"
            ) from None

    def _move_aside(self, seen: tuple[int, int] | None = None) -> Path | None:
        """Move the damaged cache file (and SQLite's side files) to ``*.corrupt-<time>``.
        None when it was no longer there to move: another process moved it first (xdist
        workers opening one damaged file at once), and may already have started a new cache
        at the path, which is left alone. ``seen``: the (device, inode) of the damaged file,
        when known; a different file at the path is that newer cache."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        if seen is not None and self._file_id() != seen:
            return None
        # SQLite's side files belong to the bad file and go first: once the file itself is
        # gone another process may start a new cache at the path, whose own -wal/-shm must stay.
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            with contextlib.suppress(FileNotFoundError):
                side.replace(aside.with_name(aside.name + suffix))
        try:
            self.path.replace(aside)
        except FileNotFoundError:
            return None
        return aside

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            self._local.conn = conn
        return conn

    def _give_up(self, exc: sqlite3.Error) -> None:
        """Go on without the cache after an SQLite failure mid-run: a cache only saves time."""
        if not self._failed:
            log.warning(
                "score cache %s failed (%s); scoring the rest of this run without it",
                safe_line(self.path),
                safe_line(exc),
            )
        self._failed = True
        self.close()

    def get(self, settings_hash: str, source: str, summary: str) -> Score | None:
        row = None
        key = cache_key(settings_hash, source, summary)
        if not self._failed:
            try:
                # As bytes: a damaged row that is not UTF-8 would make SQLite's text an
                # error, and the cache would be off for every run, not that row a miss.
                row = (
                    self._connect()
                    .execute("SELECT CAST(score AS BLOB) FROM scores WHERE key = ?", (key,))
                    .fetchone()
                )
            except sqlite3.Error as exc:
                self._give_up(exc)
        if row is None:
            self.misses += 1
            return None
        score = _stored_score(key, row[0])
        if score is None:
            self.misses += 1  # an unreadable or damaged entry: score again (put() overwrites it)
            return None
        if score.settings_hash and score.settings_hash != settings_hash:
            # Made under other settings (an older faithgate cached a Ray worker's scores under
            # the driver's hash): not this configuration's score; scored again, overwritten.
            self.misses += 1
            return None
        self.hits += 1
        return score

    def put(self, settings_hash: str, source: str, summary: str, score: Score) -> None:
        self.put_many([(settings_hash, source, summary, score)])

    def put_many(self, items: Iterable[tuple[str, str, str, Score]]) -> None:
        """``put`` for many ``(settings_hash, source, summary, score)`` in one transaction (one
        commit, not one per score: a commit costs a disk sync, ~25 ms on a busy machine)."""
        rows = [
            _stored_row(cache_key(h, source, summary), score)
            for h, source, summary, score in items
            if score.ok
        ]
        if not rows or self._failed:
            return
        try:
            conn = self._connect()
            with conn:
                conn.executemany("INSERT OR REPLACE INTO scores (key, score) VALUES (?, ?)", rows)
        except sqlite3.Error as exc:
            self._give_up(exc)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
