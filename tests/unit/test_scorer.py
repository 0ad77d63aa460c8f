"""Scorer: metrics from names or instances, per-example isolation of failures, score cache."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from faithgate.cache import ScoreCache
from faithgate.errors import InputError
from faithgate.metrics.base import Metric
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example, Score


class CountingMetric(Metric):
    """Value = summary length / 100; raises on a summary containing BROKEN."""

    name = "counting_test"
    defaults = {"scale": 100}

    def __init__(self, **settings):
        super().__init__(**settings)
        self.scored: list[str] = []

    def score_batch(self, examples, ctx):
        out = []
        for ex in examples:  # fail before scoring anything, as a batched model call would
            if "BROKEN" in ex.summary:
                raise ValueError(f"cannot score {ex.id}")
        for ex in examples:
            self.scored.append(ex.id)
            out.append(
                Score(
                    self.name,
                    len(ex.summary) / self.settings["scale"],
                    self.settings_hash(ctx),
                    ex.id,
                )
            )
        return out


EXAMPLES = [Example("a", "src", "abcd"), Example("b", "src", "ab")]


def test_scores_align_with_examples():
    metric = CountingMetric()
    res = Scorer([metric]).score(EXAMPLES)
    assert [r["counting_test"].value for r in res] == [0.04, 0.02]
    assert [r["counting_test"].example_id for r in res] == ["a", "b"]
    assert Scorer([metric]).score([]) == []


def test_a_broken_example_fails_alone():
    metric = CountingMetric()
    res = Scorer([metric]).score([*EXAMPLES, Example("c", "src", "BROKEN")])
    assert res[0]["counting_test"].ok and res[1]["counting_test"].ok
    bad = res[2]["counting_test"]
    assert not bad.ok and "ValueError: cannot score c" in bad.error


def test_a_blank_source_or_summary_fails_every_metric_unseen():
    """A summary of spaces reached the likelihood metrics and scored above a faithful one
    (pmi_mink 0.91 > 0.25): blank text fails before any metric sees it, alone in its batch."""
    metric = CountingMetric()
    batch = [Example("s", " \n", "abcd"), Example("y", "src", "\t \n"), *EXAMPLES]
    res = Scorer([metric]).score(batch)
    assert [r["counting_test"].error for r in res[:2]] == ["empty source", "empty summary"]
    assert [r["counting_test"].example_id for r in res] == ["s", "y", "a", "b"]
    assert [r["counting_test"].value for r in res[2:]] == [0.04, 0.02]
    assert metric.scored == ["a", "b"]


def test_example_fields_are_checked_where_it_is_built():
    with pytest.raises(InputError, match="Example 'a': summary must be a string, got bytes"):
        Example("a", "src", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="Example 'a': source must be a string, got NoneType"):
        Example("a", None, "t")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="Example id must be a string, got NoneType"):
        Example(None, "s", "t")  # type: ignore[arg-type]
    ex = Example(5, "s", "t")  # type: ignore[arg-type]
    assert ex.id == "5" and Example.from_dict(ex.to_dict()) == ex


def test_example_text_that_cannot_be_encoded_is_refused_where_it_is_built():
    """A lone surrogate from a library user failed every metric with a UnicodeEncodeError
    text; it is one InputError naming the field, as load_examples gives."""
    with pytest.raises(
        InputError, match=r"Example 'a': source contains a lone surrogate \(U\+D800"
    ):
        Example("a", "x\ud800", "t")
    with pytest.raises(InputError, match="Example 'a': reference contains a lone surrogate"):
        Example("a", "s", "t", reference="\udfff")
    with pytest.raises(InputError, match="Example id contains NUL characters"):
        Example("a\x00", "s", "t")


def test_cache_hits_skip_scoring_and_failures_are_not_cached(tmp_path):
    cache = ScoreCache(tmp_path / "scores.sqlite")
    metric = CountingMetric()
    examples = [*EXAMPLES, Example("c", "src", "BROKEN")]
    first = Scorer([metric], cache=cache).score(examples)
    assert metric.scored == ["a", "b"]
    metric.scored.clear()
    # Same texts under new ids: served from the cache, ids rewritten.
    again = [Example("x", "src", "abcd"), Example("y", "src", "ab"), Example("z", "src", "BROKEN")]
    second = Scorer([metric], cache=str(tmp_path / "scores.sqlite")).score(again)
    assert metric.scored == []
    assert [r["counting_test"].value for r in second[:2]] == [
        r["counting_test"].value for r in first[:2]
    ]
    assert second[0]["counting_test"].example_id == "x"
    assert not second[2]["counting_test"].ok  # the failure was retried, not cached
    assert cache.hits == 0  # the second scorer opened its own handle on the same file


def test_changed_settings_miss_the_cache(tmp_path):
    path = str(tmp_path / "s.sqlite")
    Scorer([CountingMetric()], cache=path).score(EXAMPLES)
    metric = CountingMetric(scale=10)
    scorer = Scorer([metric], cache=path)
    res = scorer.score(EXAMPLES)
    assert metric.scored == ["a", "b"] and res[0]["counting_test"].value == 0.4
    scorer.score(EXAMPLES)
    assert scorer.cache.hits == 2


def test_configuration_errors():
    with pytest.raises(InputError, match="no metric"):
        Scorer([])
    with pytest.raises(InputError, match="selected twice"):
        Scorer([CountingMetric(), CountingMetric()])
    with pytest.raises(InputError, match="unknown metric 'no_such_metric'; available: "):
        Scorer(["no_such_metric"])  # nothing close: no guess
    # A typo names the metric it is closest to.
    with pytest.raises(InputError, match=r"'harimplus' \(did you mean 'harim_plus'\?\); avail"):
        Scorer(["harimplus"])
    with pytest.raises(InputError, match="not selected"):
        Scorer([CountingMetric()], metric_settings={"bertscore": {"idf": True}})
    with pytest.raises(InputError, match="unknown model role"):
        Scorer([CountingMetric()], models={"tagger": "x"})
    with pytest.raises(InputError, match="unknown backend"):
        Scorer([CountingMetric()], backend="tpu")


def test_release_empties_shared_engines_and_keeps_their_counters():
    """``Scorer.release`` (end of a run): an engine with ``release_all`` empties itself in
    place (its counters survive); any other shared object is dropped and made afresh."""
    from faithgate.backends import ModelPool
    from faithgate.metrics.base import ScoringContext

    class Engine:
        def __init__(self):
            self.memo, self.stats = {"x": 1}, {"passes": 3}

        def release_all(self):
            self.memo.clear()

    ctx = ScoringContext(ModelPool())
    engine = ctx.shared("likelihood:a", Engine)
    memo = ctx.shared("nli", lambda: {"pair": 0.5})
    ctx.release()
    assert ctx.shared("likelihood:a", Engine) is engine and engine.memo == {}
    assert engine.stats == {"passes": 3}
    assert ctx.shared("nli", dict) == {} and memo == {"pair": 0.5}


def test_cache_open_waits_out_a_brief_lock(tmp_path, monkeypatch):
    """Two xdist workers creating the cache file at once: "database is locked" while one
    switches it to WAL is retried, not reported as an unusable cache."""
    import sqlite3

    real_connect = ScoreCache._connect
    failures = iter([True, True])

    def flaky(self):
        if next(failures, False):
            raise sqlite3.OperationalError("database is locked")
        return real_connect(self)

    monkeypatch.setattr(ScoreCache, "_connect", flaky)
    cache = ScoreCache(tmp_path / "scores.sqlite")
    cache.put("h", "src", "sum", Score("m", 0.5, "h", "a"))
    assert cache.get("h", "src", "sum").value == 0.5

    always = sqlite3.OperationalError("database is locked")
    monkeypatch.setattr(ScoreCache, "_connect", lambda self: (_ for _ in ()).throw(always))
    monkeypatch.setattr("faithgate.cache.time.sleep", lambda s: None)
    with pytest.raises(InputError, match="database is locked"):
        ScoreCache(tmp_path / "other.sqlite")


def test_wrong_argument_types_are_input_errors():
    with pytest.raises(InputError, match="settings of metric 'overlap' must be a mapping"):
        Scorer(["overlap"], metric_settings={"overlap": None})
    with pytest.raises(InputError, match="a metric is a name or a Metric, got list"):
        Scorer([["overlap"]])  # type: ignore[list-item]
    with pytest.raises(InputError, match="cache must be a path or a ScoreCache, got int"):
        Scorer(["overlap"], cache=5)  # type: ignore[arg-type]


def _fill_and_damage(path, rows=2000):
    """A cache of ``rows`` scores whose middle pages are overwritten: the first page (the
    schema) still reads, a lookup past the damage does not."""
    import os
    import sqlite3

    cache = ScoreCache(path)
    cache.put_many([("h", f"src {i} " * 50, f"sum {i}", Score("m", 0.5, "h")) for i in range(rows)])
    cache.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 2)
        f.write(b"\xa5" * 8192)


def test_a_cache_damaged_past_its_first_page_is_moved_aside_when_opened(tmp_path, caplog):
    path = tmp_path / "scores.sqlite"
    _fill_and_damage(path)
    damaged = path.read_bytes()
    cache = ScoreCache(path)  # was fine here, then "database disk image is malformed" mid-run
    assert cache.get("h", "src 1000 " * 50, "sum 1000") is None
    [aside] = [
        p for p in tmp_path.glob("scores.sqlite.corrupt-*") if not p.name.endswith(("-wal", "-shm"))
    ]
    assert aside.read_bytes() == damaged  # kept, not deleted
    assert "damaged or not a SQLite database" in caplog.text
    cache.put("h", "s", "t", Score("m", 0.25, "h"))
    assert cache.get("h", "s", "t").value == 0.25  # a fresh cache


def test_an_sqlite_failure_mid_run_is_one_warning_and_the_run_goes_on(
    tmp_path, caplog, monkeypatch
):
    import sqlite3

    cache = ScoreCache(tmp_path / "scores.sqlite")
    cache.put("h", "src", "sum", Score("m", 0.5, "h"))

    def fail(self):
        raise sqlite3.OperationalError("database or disk is full")

    cache.close()
    with monkeypatch.context() as patch:
        patch.setattr(ScoreCache, "_connect", fail)
        cache.put("h", "src2", "sum2", Score("m", 0.5, "h"))
        assert cache.get("h", "src", "sum") is None  # a miss: scored again, not an error
        cache.put_many([("h", "src3", "sum3", Score("m", 0.5, "h"))])
    assert caplog.text.count("database or disk is full") == 1
    assert "scoring the rest of this run without it" in caplog.text
    assert cache.get("h", "src", "sum") is None  # stays off for this run
    assert ScoreCache(tmp_path / "scores.sqlite").get("h", "src", "sum").value == 0.5


class OddValueMetric(Metric):
    """Values as a project's own metric might return them: inf, -inf, numpy, text, a bool."""

    name = "odd_value_test"
    VALUES = {"inf": float("inf"), "-inf": float("-inf"), "np": None, "text": "0.9", "bool": True}

    def score_batch(self, examples, ctx):
        import numpy as np

        h = self.settings_hash(ctx)
        values = {**self.VALUES, "np": np.float32(0.5)}
        return [Score(self.name, values[ex.id], h, ex.id) for ex in examples]


def test_a_non_finite_or_non_numeric_value_is_a_failed_score_not_a_pass(tmp_path):
    """An infinite score passed every threshold (the gate said PASS, mean inf) and broke the
    reports; a text value crashed a later sum. Both are failed scores naming the value."""
    examples = [Example(i, "src", "sum") for i in OddValueMetric.VALUES]
    cache = ScoreCache(tmp_path / "scores.sqlite")
    got = {
        s.example_id: s
        for s in (
            r["odd_value_test"] for r in Scorer([OddValueMetric()], cache=cache).score(examples)
        )
    }
    assert {i: s.failure for i, s in got.items()} == {
        "inf": "metric returned inf",
        "-inf": "metric returned -inf",
        "np": None,
        "text": "metric returned a str value, not a number",
        "bool": "metric returned a bool value, not a number",
    }
    assert type(got["np"].value) is float and got["np"].value == 0.5
    assert cache.get(got["inf"].settings_hash, "src", "sum").value == 0.5  # only np's cached
    assert not Score("m", float("inf"), "h").ok and Score("m", 1e308, "h").ok


def test_a_users_file_or_database_at_the_cache_path_is_refused_untouched(tmp_path):
    """`--faithgate-cache test_a.py` moved the test module aside and put a database in its
    place; an empty `__init__.py` became one; a user's SQLite database got a table added."""
    import sqlite3

    module = tmp_path / "test_a.py"
    module.write_text("def test(): pass\n")
    empty = tmp_path / "__init__.py"
    empty.write_text("")
    database = tmp_path / "app.db"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    before = {p: p.read_bytes() for p in (module, empty, database)}
    for path in (module, empty):
        with pytest.raises(InputError, match="is a file that is not a score cache .not an SQLite"):
            ScoreCache(path)
    with pytest.raises(InputError, match=r"is an SQLite database with other tables \(users\)"):
        ScoreCache(database)
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["__init__.py", "app.db", "test_a.py"]
    # A file named like a cache is a cache: empty (SQLite made it) or damaged (moved aside).
    (tmp_path / "new.sqlite").write_text("")
    ScoreCache(tmp_path / "new.sqlite").put("h", "s", "t", Score("m", 0.5, "h"))


def test_a_cache_that_cannot_be_opened_says_how_to_go_on(tmp_path):
    """The "cannot open the score cache" error gave no way out, unlike the directory's error."""
    (tmp_path / "scores.sqlite").mkdir()  # SQLite cannot open a directory
    with pytest.raises(InputError, match="cannot open the score cache") as err:
        ScoreCache(tmp_path / "scores.sqlite")
    assert str(err.value).endswith("(set cache_dir / --cache-dir, or use --no-cache)")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
def test_a_fifo_at_the_cache_path_is_refused_not_read(tmp_path):
    """A named pipe at <cache_dir>/scores.sqlite was opened for reading to look at its header:
    with no writer that blocks forever, and `faithgate check` hung until the CI timeout."""
    fifo = tmp_path / "scores.sqlite"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def open_cache() -> None:
        try:
            ScoreCache(fifo)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=open_cache, daemon=True)
    thread.start()
    thread.join(timeout=20)
    if thread.is_alive():  # blocked in open(): a writer that closes at once lets it go on
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=20)
        pytest.fail("opening the cache blocked on the FIFO")
    [exc] = outcome
    assert isinstance(exc, InputError)
    assert str(exc) == (
        f"the score cache ({fifo}) is a named pipe (FIFO), not a regular file; "
        "set cache_dir / --cache-dir, or use --no-cache"
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.sqlite"]


def test_a_cached_score_made_under_other_settings_is_a_miss(tmp_path):
    """A score stored under one settings hash but made under another (a Ray worker's, cached
    by an older faithgate under the driver's hash) was served as that hash's score."""
    cache = ScoreCache(tmp_path / "scores.sqlite")
    cache.put("h", "src", "sum", Score("m", 0.5, "h-on-a-worker", "a"))
    assert cache.get("h", "src", "sum") is None
    assert (cache.hits, cache.misses) == (0, 1)


class PreparingMetric(CountingMetric):
    """``CountingMetric`` whose ``prepare`` raises on a summary containing BOOM."""

    name = "preparing_test"

    def prepare(self, examples, ctx):
        for ex in examples:
            if "BOOM" in ex.summary:
                raise ValueError(f"cannot prepare\n{ex.id}")


class CombiningMetric(Metric):
    """Combines ``CountingMetric``; its ``combine`` raises on a summary containing BOOM."""

    name = "combining_test"

    def __init__(self, **settings):
        super().__init__(**settings)
        self._parts = (CountingMetric(),)

    @property
    def components(self):
        return self._parts

    def combine(self, examples, component_scores, ctx):
        out = []
        for ex, part in zip(examples, component_scores[0], strict=True):
            if "BOOM" in ex.summary:
                raise ValueError(f"cannot combine\n{ex.id}")
            out.append(Score(self.name, part.value, self.settings_hash(ctx), ex.id))
        return out

    def score_batch(self, examples, ctx):
        return self.combine(examples, [self._parts[0].score_batch(examples, ctx)], ctx)


@pytest.mark.parametrize("metric", [PreparingMetric, CombiningMetric])
def test_an_exception_in_prepare_or_combine_fails_only_its_example(metric):
    """An exception in ``prepare`` or ``combine`` aborted the whole run, where one in
    ``score_batch`` fails only its example."""
    examples = [*EXAMPLES, Example("c", "src", "BOOM")]
    got = [r[metric.name] for r in Scorer([metric()]).score(examples)]
    assert [s.value for s in got[:2]] == [0.04, 0.02]
    verb = "prepare" if metric is PreparingMetric else "combine"
    assert not got[2].ok and got[2].error == f"ValueError: cannot {verb}\\nc"


class LeavingMetric(Metric):
    """Calls sys.exit() or pytest.skip() on the summary that names it."""

    name = "leaving_test"

    def score_batch(self, examples, ctx):
        import sys

        for ex in examples:
            if ex.summary == "exit":
                sys.exit(0)
            if ex.summary == "skip":
                pytest.skip("no model here")
        return [Score(self.name, 0.5, self.settings_hash(ctx), ex.id) for ex in examples]


def test_a_metric_calling_sys_exit_or_pytest_skip_fails_its_examples_not_the_gate():
    """sys.exit(0) in a project's metric ended a gate with exit 0 (a passing build) and
    pytest.skip() skipped it; each is now that example's failed score."""
    examples = [Example(i, "src", i) for i in ("exit", "skip", "fine")]
    got = [r["leaving_test"] for r in Scorer([LeavingMetric()]).score(examples)]
    assert [s.failure for s in got] == ["SystemExit: 0", "Skipped: no model here", None]


def test_one_metric_or_type_may_be_given_as_a_string_and_examples_must_be_examples():
    """Scorer("overlap") selected metrics 'o', 'v', ...; perturb types="entity" likewise;
    Scorer.score(["text"]) was an AttributeError."""
    from faithgate.perturb import resolve_types

    assert Scorer("overlap").metric_names == ["overlap"]
    assert resolve_types("entity") == ["entity_intrinsic", "entity_extrinsic"]
    with pytest.raises(InputError, match="metrics are names or Metrics, got int"):
        Scorer(5)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="examples are faithgate.Example objects, got a str"):
        Scorer([CountingMetric()]).score(["a summary"])  # type: ignore[list-item]


def test_an_integer_for_a_float_setting_is_the_same_settings_hash():
    """`lambda = 7` and the default 7.0 made two hashes: a baseline "not comparable"."""
    default = Scorer(["overlap", CountingMetric()]).settings_hashes()

    class Scaled(CountingMetric):
        name = "scaled_test"
        defaults = {"scale": 100.0}

    assert (
        Scorer([Scaled(scale=100)]).settings_hashes()
        == Scorer([Scaled()]).settings_hashes()
        != Scorer([Scaled(scale=100.5)]).settings_hashes()
    )
    assert default == Scorer(["overlap", CountingMetric(scale=100)]).settings_hashes()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        # "false" is truthy: it enabled downloads (the configuration file requires a bool too)
        ({"allow_download": "false"}, "allow_download must be True or False, got str 'false'"),
        ({"allow_download": 1}, "allow_download must be True or False, got int 1"),
        (
            {"models": "abc"},
            "models must be a mapping of model role -> model name or path, got str",
        ),
        (
            {"models": {"embedder": 3}},
            r"models\['embedder'\] must be a model name or path, got int",
        ),
        (
            {"metric_settings": [("overlap", {})]},
            "metric_settings must be a mapping of metric name -> settings, got list",
        ),
        ({"model_options": [1]}, "model_options must be a mapping of model role -> loader"),
        (
            {"model_options": {"embedder": 3}},
            r"model_options\['embedder'\] must be a mapping of loader option -> value, got int",
        ),
    ],
)
def test_scorer_arguments_of_the_wrong_type_are_one_input_error(kwargs, message):
    """They were a truthy string that allowed downloads, or ValueError / AttributeError /
    TypeError from deep inside."""
    with pytest.raises(InputError, match=message):
        Scorer("overlap", **kwargs)


def test_downloads_are_allowed_by_true_only(monkeypatch):
    from faithgate.models import downloads_allowed

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert downloads_allowed(True)
    assert not downloads_allowed("false") and not downloads_allowed("no")
    assert not downloads_allowed(False)


def test_scorer_models_take_a_path():
    from pathlib import Path

    scorer = Scorer("bertscore", models={"embedder": Path("some/dir")}, allow_download=False)
    assert scorer.pool.model_names == {"embedder": str(Path("some/dir"))}
