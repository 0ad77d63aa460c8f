"""Rows of the score cache: a row is served only when it reads back as the score that was
stored (its digest matches, and it has the shape the cache writes); anything else is a miss,
scored again and overwritten, never a crash or another score."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import sqlite3

import pytest

from faithgate.cache import ScoreCache, cache_key
from faithgate.metrics.base import Metric
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example, Score, SentenceScore


class LengthMetric(Metric):
    """Value = summary length / 100, with sentences (one of them NaN) and nested details."""

    name = "length_test"

    def __init__(self, **settings):
        super().__init__(**settings)
        self.scored: list[str] = []

    def score_batch(self, examples, ctx):
        self.scored.extend(ex.id for ex in examples)
        return [
            Score(
                self.name,
                len(ex.summary) / 100,
                self.settings_hash(ctx),
                ex.id,
                sentences=[
                    SentenceScore(0, ex.summary, float("nan")),
                    SentenceScore(1, ex.summary, len(ex.summary) / 100, "src"),
                ],
                details={"n": 1, "nested": {"x": [1, 2.5, None]}},
            )
            for ex in examples
        ]


EXAMPLES = [Example("a", "src", "abcd"), Example("b", "src", "ab")]
FRESH = {"a": 0.04, "b": 0.02}


def _fill(path):
    """A cache holding both examples' scores; ``(metric's settings hash, keys by id)``."""
    scorer = Scorer([LengthMetric()], cache=path)
    assert [r["length_test"].value for r in scorer.score(EXAMPLES)] == [0.04, 0.02]
    h = scorer.settings_hashes()["length_test"]
    scorer.cache.close()
    return h, {ex.id: cache_key(h, ex.source, ex.summary) for ex in EXAMPLES}


def _sql(path, statement, *args):
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(statement, args).fetchone()


def _raw(path, key):
    return _sql(path, "SELECT CAST(score AS BLOB) FROM scores WHERE key = ?", key)[0]


def _write(path, key, raw):
    _sql(path, "UPDATE scores SET score = CAST(? AS TEXT) WHERE key = ?", raw, key)


def _edit(path, key, change, sign=True):
    """Replace the JSON of ``key``'s row by ``change(its JSON text)``, with the digest made for
    the new text when ``sign`` (so the row's shape, not its digest, is what is tested) and
    the row had one (a cache as an older faithgate writes it has none)."""
    text, newline, digest = _raw(path, key).rpartition(b"\n")
    if not newline:
        text, digest = digest, b""
    new = change(text.decode()).encode()
    if newline:
        if sign:
            digest = hashlib.sha256(key.encode() + b"\n" + new).hexdigest()[:16].encode()
        new += b"\n" + digest
    _write(path, key, new)


def _rescored(path, corrupted="a"):
    """Score both examples again: the corrupted one is a miss, scored again and stored, and
    its row then hits; the other one hits."""
    metric = LengthMetric()
    scorer = Scorer([metric], cache=path)
    got = {r["length_test"].example_id: r["length_test"] for r in scorer.score(EXAMPLES)}
    assert {i: (s.value, s.ok) for i, s in got.items()} == {i: (v, True) for i, v in FRESH.items()}
    assert metric.scored == [corrupted]
    assert (scorer.cache.hits, scorer.cache.misses) == (1, 1)
    scorer.cache.close()
    again = LengthMetric()
    scorer = Scorer([again], cache=path)
    assert [r["length_test"].value for r in scorer.score(EXAMPLES)] == [0.04, 0.02]
    assert again.scored == [] and (scorer.cache.hits, scorer.cache.misses) == (2, 0)
    scorer.cache.close()


def _set(field, value):
    def change(text):
        data = json.loads(text)
        data[field] = value
        return json.dumps(data)

    return change


def _set_sentence_value(value):
    def change(text):
        data = json.loads(text)
        data["sentences"][1]["value"] = value
        return json.dumps(data)

    return change


def _replace_value(literal):
    return lambda text: text.replace('"value": 0.04,', f'"value": {literal},', 1)


CORRUPTIONS = {
    # Valid JSON that is no object: an AttributeError on every later run.
    "row null": lambda text: "null",
    "row number": lambda text: "0.5",
    "row list": lambda text: "[1, 2]",
    "row text": lambda text: '"x"',
    # A value that is no finite number: true was served as 1.0.
    "value true": _set("value", True),
    "value text": _set("value", "0.9"),
    "value null": _set("value", None),
    "value NaN": _replace_value("NaN"),
    "value Infinity": _replace_value("Infinity"),
    "value 1e999": _replace_value("1e999"),
    "value huge int": _replace_value("1" + "0" * 400),
    "value missing": lambda text: json.dumps(
        {k: v for k, v in json.loads(text).items() if k != "value"}
    ),
    # Other fields of other types (failed scores are never stored: an error is no row).
    "error": _set("error", "boom"),
    "metric": _set("metric", 5),
    "settings_hash": _set("settings_hash", None),
    "example_id": _set("example_id", ["a"]),
    "sentences": _set("sentences", "x"),
    "sentence value true": _set_sentence_value(True),
    "sentence value text": _set_sentence_value("0.1"),
    "sentence field": _set("sentences", [{"index": 0, "text": "t", "value": 0.1, "x": 1}]),
    "details": _set("details", [1]),
    "truncated": lambda text: text[: len(text) // 2],
    "deep": lambda text: "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("change", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_a_row_of_another_shape_is_a_miss_scored_again_and_overwritten(tmp_path, change):
    path = tmp_path / "scores.sqlite"
    _, keys = _fill(path)
    _edit(path, keys["a"], change)
    _rescored(path)


def test_a_good_row_hits(tmp_path):
    path = tmp_path / "scores.sqlite"
    h, _ = _fill(path)
    cache = ScoreCache(path)
    hit = cache.get(h, "src", "abcd")
    assert (cache.hits, cache.misses) == (1, 0)
    assert (hit.metric, hit.value, hit.settings_hash, hit.example_id) == (
        "length_test",
        0.04,
        h,
        "a",
    )
    assert [(s.index, s.text, s.evidence) for s in hit.sentences] == [
        (0, "abcd", None),
        (1, "abcd", "src"),
    ]
    assert math.isnan(hit.sentences[0].value) and hit.sentences[1].value == 0.04
    assert hit.details == {"n": 1, "nested": {"x": [1, 2.5, None]}}
    cache.close()


def test_a_row_changed_without_its_digest_is_a_miss(tmp_path):
    """An edit of the stored JSON (its value 0.04 -> 0.99) is found by the digest."""
    path = tmp_path / "scores.sqlite"
    _, keys = _fill(path)
    _edit(path, keys["a"], lambda text: text.replace("0.04", "0.99"), sign=False)
    _rescored(path)


def test_a_flipped_bit_in_the_cache_file_is_a_miss(tmp_path):
    """One bit flipped in the database file ("value": 0.04 -> 0.05) passes SQLite's checks
    and was served as the score."""
    path = tmp_path / "scores.sqlite"
    _fill(path)
    _sql(path, "PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    at = data.find(b'"value": 0.04,')
    assert at > 0  # the score's value (its second sentence's follows)
    data[at + len('"value": 0.0')] ^= 0x01  # "4" (0x34) -> "5" (0x35)
    path.write_bytes(bytes(data))
    assert _sql(path, "PRAGMA integrity_check") == ("ok",)  # SQLite sees no damage
    _rescored(path)


def test_another_rows_score_copied_in_is_a_miss(tmp_path):
    """The digest covers the row's key: b's row (and its digest) under a's key is no hit."""
    path = tmp_path / "scores.sqlite"
    _, keys = _fill(path)
    _write(path, keys["a"], _raw(path, keys["b"]))
    _rescored(path)


@pytest.mark.parametrize(
    "raw", [b'{"value": \xff}', b"\x00\xff", b"5"], ids=["not utf-8", "binary", "number"]
)
def test_a_row_that_is_no_text_is_a_miss_and_the_cache_stays_on(tmp_path, caplog, raw):
    """A row that is not UTF-8 made SQLite raise on reading it: the cache was turned off for
    the run (and every later one), not the row a miss."""
    path = tmp_path / "scores.sqlite"
    _, keys = _fill(path)
    _write(path, keys["a"], raw)
    with caplog.at_level(logging.WARNING):
        _rescored(path)
    assert "failed" not in caplog.text


def test_a_row_an_older_faithgate_wrote_is_a_miss_once(tmp_path):
    """A row without a digest (a cache made before rows had one) is scored again once and
    overwritten: the cache only saves time."""
    path = tmp_path / "scores.sqlite"
    _, keys = _fill(path)
    text = _raw(path, keys["a"]).rpartition(b"\n")[0]
    json.loads(text)  # the JSON alone, as rows were stored before
    _write(path, keys["a"], text)
    _rescored(path)
