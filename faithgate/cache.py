"""A persistent score cache keyed by (settings hash, source, summary).

An unchanged example under an unchanged metric configuration is never rescored: the gate,
``faithgate bench`` and the pytest plugin share it. SQLite gives atomic writes that are safe
across processes (pytest-xdist workers, parallel CI jobs on one runner).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from faithgate.types import Score

_SCHEMA = "CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, score TEXT NOT NULL)"


def cache_key(settings_hash: str, source: str, summary: str) -> str:
    blob = json.dumps([settings_hash, source, summary], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


class ScoreCache:
    """Scores stored in one SQLite file. Failed scores are never cached (they are retried)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as conn:
            conn.execute(_SCHEMA)
        self.hits = 0
        self.misses = 0

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            self._local.conn = conn
        return conn

    def get(self, settings_hash: str, source: str, summary: str) -> Score | None:
        row = (
            self._connect()
            .execute(
                "SELECT score FROM scores WHERE key = ?",
                (cache_key(settings_hash, source, summary),),
            )
            .fetchone()
        )
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return Score.from_dict(json.loads(row[0]))

    def put(self, settings_hash: str, source: str, summary: str, score: Score) -> None:
        if not score.ok:
            return
        conn = self._connect()
        with conn:
            conn.execute(
                "INSERT OR REPLACE INTO scores (key, score) VALUES (?, ?)",
                (cache_key(settings_hash, source, summary), json.dumps(score.to_dict())),
            )

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
