"""The execution seam (faithgate/scoring/execution.py): recipe, local executor, driver-side cache,
settings parsing and source-grouped batching. Runs without Ray."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from faithgate.cache import ScoreCache
from faithgate.config import GateConfig
from faithgate.errors import ConfigError, InputError
from faithgate.scoring.execution import (
    CachedExecutor,
    ExecutionSettings,
    Executor,
    LocalExecutor,
    ScorerRecipe,
    make_executor,
)
from faithgate.scoring.ray_executor import RayOptions, source_batches
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example, Score

SRC_A = "The mayor opened the new bridge in Leeds on Monday. It cost 40 million pounds."
SRC_B = "A storm closed three schools in Cork. Classes resume on Friday, the council said."
EXAMPLES = [
    Example("a1", SRC_A, "The mayor opened a bridge in Leeds."),
    Example("b1", SRC_B, "A storm closed schools in Cork."),
    Example("a2", SRC_A, "The mayor opened a bridge in York."),
    Example("b2", SRC_B, "A storm closed ten schools in Cork."),
]


class CountingExecutor:
    """Wraps an executor and records which cells it was asked to compute."""

    name = "counting"

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.calls: list[tuple[list[str], dict[str, list[int]] | None]] = []

    def score(
        self,
        examples: Sequence[Example],
        *,
        todo: Mapping[str, Sequence[int]] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list[dict[str, Score]]:
        self.calls.append(
            ([e.id for e in examples], {k: list(v) for k, v in todo.items()} if todo else None)
        )
        return self.inner.score(examples, todo=todo, progress=progress)

    def settings_hashes(self) -> dict[str, str]:
        return self.inner.settings_hashes()

    def close(self) -> None:
        self.inner.close()


def test_recipe_pickles_and_rebuilds_the_same_scorer() -> None:
    recipe = ScorerRecipe(("overlap", "ner"), metric_settings={"overlap": {"component": "rouge1"}})
    clone = pickle.loads(pickle.dumps(recipe))
    assert clone == recipe
    built = clone.build()
    direct = Scorer(["overlap", "ner"], metric_settings={"overlap": {"component": "rouge1"}})
    assert built.settings_hashes() == direct.settings_hashes()
    assert recipe.select(["ner"]).metric_names == ["ner"]
    assert recipe.select(["ner"]).metric_settings == {}


def test_recipe_from_config_keeps_only_selected_metric_settings() -> None:
    cfg = GateConfig.from_dict(
        {
            "metrics": ["overlap"],
            "metric_settings": {"overlap": {"component": "rouge1"}, "ner": {}},
            "backend": "onnx",
        }
    )
    recipe = ScorerRecipe.from_config(cfg)
    assert recipe.metrics == ("overlap",)
    assert recipe.metric_settings == {"overlap": {"component": "rouge1"}}
    assert recipe.backend == "onnx"


def test_local_executor_equals_scorer_and_honours_todo() -> None:
    recipe = ScorerRecipe(("overlap", "ner"))
    local = LocalExecutor(recipe)
    got = local.score(EXAMPLES)
    want = Scorer(["overlap", "ner"]).score(EXAMPLES)
    assert [{k: s.to_dict() for k, s in r.items()} for r in got] == [
        {k: s.to_dict() for k, s in r.items()} for r in want
    ]
    part = local.score(EXAMPLES, todo={"overlap": [1], "ner": [0, 1]})
    assert [sorted(r) for r in part] == [["ner"], ["ner", "overlap"], [], []]
    assert part[1]["overlap"].value == want[1]["overlap"].value


def test_cached_executor_sends_only_missing_cells(tmp_path: Path) -> None:
    recipe = ScorerRecipe(("overlap", "ner"))
    cache = ScoreCache(tmp_path / "scores.sqlite")
    inner = CountingExecutor(LocalExecutor(recipe))
    cached = CachedExecutor(inner, cache)
    done: list[int] = []
    first = cached.score(EXAMPLES, progress=done.append)
    assert sum(done) == len(EXAMPLES)
    assert inner.calls[0][0] == ["a1", "b1", "a2", "b2"]
    assert (cache.hits, cache.misses) == (0, 8)
    # The same examples again: all hits, nothing sent. One new example: only it travels.
    again = cached.score(EXAMPLES)
    assert len(inner.calls) == 1 and cache.hits == 8
    assert [r["overlap"].value for r in again] == [r["overlap"].value for r in first]
    new = Example("c1", SRC_A, "The bridge cost 40 million pounds.")
    cached.score([*EXAMPLES, new])
    assert inner.calls[-1] == (["c1"], {"overlap": [0], "ner": [0]})
    # A scorer with this cache (the local path of the gate) hits what the wrapper wrote.
    scorer = Scorer(["overlap", "ner"], cache=cache)
    hits = cache.hits
    scorer.score(EXAMPLES)
    assert cache.hits - hits == 8


def test_a_score_made_under_other_settings_stops_the_run_and_is_never_cached(
    tmp_path: Path,
) -> None:
    """The driver's cache stored whatever scores an executor returned under its own settings
    hash, even ones made under another (a worker with other models or library versions)."""

    class Elsewhere(CountingExecutor):
        name = "elsewhere"

        def score(self, examples, *, todo=None, progress=None):  # type: ignore[no-untyped-def]
            rows = super().score(examples, todo=todo, progress=progress)
            for row in rows:
                for score in row.values():
                    score.settings_hash += "-elsewhere"
            return rows

    cache = ScoreCache(tmp_path / "scores.sqlite")
    cached = CachedExecutor(Elsewhere(LocalExecutor(ScorerRecipe(("overlap",)))), cache)
    [driver] = cached.settings_hashes().values()
    with pytest.raises(InputError) as err:
        cached.score(EXAMPLES)
    message = str(err.value)
    assert message.startswith("the overlap score of example 'a1' was made on the elsewhere ")
    assert f"with settings {driver}-elsewhere, but this run's overlap settings are {driver}:" in (
        message
    )
    assert "\n" not in message
    assert all(cache.get(driver, e.source, e.summary) is None for e in EXAMPLES)


def test_the_executor_and_result_checks_find_the_same_first_mismatch() -> None:
    """``check_settings_hashes`` (an executor's scores against the driver's hashes) and
    ``result.consistent_settings_hashes`` (a result's recorded hashes against its scores) made
    the same comparison in two copies; both now ask ``first_settings_mismatch``: the same first
    score, each in its own words. A score without a hash, or of a metric without an expected
    one, is not compared."""
    from faithgate.result import (
        ExampleResult,
        MetricResult,
        consistent_settings_hashes,
        first_settings_mismatch,
    )
    from faithgate.scoring.execution import check_settings_hashes

    hashes = {"m": "m|a", "n": "n|a"}
    rows = [
        {"m": Score("m", 0.5, "m|a", "e0"), "n": Score("n", 0.5, "", "e0")},
        {"m": Score("m", 0.5, "m|a", "e1"), "x": Score("x", 0.5, "x|b", "e1")},
        {"n": Score("n", 0.5, "n|b", "e2"), "m": Score("m", 0.5, "m|b", "e2")},
    ]
    assert first_settings_mismatch(hashes, rows) == (2, "n", "n|b", "n|a")
    assert first_settings_mismatch(hashes, rows[:2]) is None
    with pytest.raises(InputError) as err:
        check_settings_hashes(rows, hashes, where="w")
    assert str(err.value).startswith(
        "the n score of example 'e2' was made on w with settings n|b, but this run's n "
        "settings are n|a: "
    )
    results = [
        ExampleResult(
            row["m"].example_id,
            "s",
            True,
            scores={
                k: MetricResult(k, 0.5, True, settings_hash=s.settings_hash) for k, s in row.items()
            },
        )
        for row in rows
    ]
    with pytest.raises(InputError) as err:
        consistent_settings_hashes(hashes, results, whose="this run's")
    assert str(err.value) == (
        "example 'e2': its n score was made with settings n|b, this run's n scores with n|a"
    )
    # A metric the result records no hash for takes its first score's: x|b, and m's first.
    assert consistent_settings_hashes({}, results[:2]) == {"m": "m|a", "x": "x|b"}


def test_make_executor_local_reuses_a_given_scorer(tmp_path: Path) -> None:
    """Given a scorer with a cache (and no ``cache``), the executor uses that cache: a second
    run is all hits (the seam fix of s20 had dropped it); ``cache=None`` scores afresh."""
    scorer = Scorer(["overlap"], cache=str(tmp_path / "s.sqlite"))
    ex = make_executor(ExecutionSettings(), ScorerRecipe(("overlap",)), scorer=scorer)
    assert isinstance(ex, CachedExecutor) and ex.inner.scorer is scorer
    examples = [Example("a", "The cat sat on the mat.", "The cat sat.")]
    first, second = ex.score(examples), ex.score(examples)
    assert first[0]["overlap"].value == second[0]["overlap"].value
    assert (scorer.cache.hits, scorer.cache.misses) == (1, 1)
    bare = make_executor(None, ScorerRecipe(("overlap",)), scorer=scorer, cache=None)
    assert isinstance(bare, LocalExecutor) and bare.scorer is scorer
    bare.score(examples)
    assert (scorer.cache.hits, scorer.cache.misses) == (1, 1)  # not looked up
    wrapped = make_executor(None, ScorerRecipe(("overlap",)), cache=ScoreCache(tmp_path / "c.db"))
    assert isinstance(wrapped, CachedExecutor) and wrapped.name == "local"


def test_execution_settings_parse_and_override() -> None:
    cfg = GateConfig.from_dict(
        {
            "execution": {
                "executor": "ray",
                "address": "ray://head:10001",
                "num_workers": 4,
                "batch_size": 8,
                "num_cpus": 2,
                "num_gpus": 0.5,
                "runtime_env": {"env_vars": {"HF_HUB_OFFLINE": "1"}},
            }
        }
    )
    ex = cfg.execution
    ray = ex.options_for()  # the chosen executor's own options
    assert (ex.executor, ray.address, ray.num_workers, ray.batch_size) == (
        "ray",
        "ray://head:10001",
        4,
        8,
    )
    assert (ray.num_cpus, ray.num_gpus) == (2.0, 0.5)
    assert ray.runtime_env == {"env_vars": {"HF_HUB_OFFLINE": "1"}}
    assert "execution" not in cfg.to_dict()  # where scores ran is not part of a result
    over = cfg.override(execution={"executor": "local", "num_workers": "2"})
    assert (over.execution.executor, over.execution.options_for("ray").num_workers) == (
        "local",
        2,
    )
    assert over.execution.options_for("ray").address == "ray://head:10001"
    for bad, key in (
        ({"executor": "spark"}, "execution.executor"),
        ({"num_workers": 0}, "execution.num_workers"),
        ({"batch_size": 1.5}, "execution.batch_size"),
        ({"num_gpus": -1}, "execution.num_gpus"),
        ({"workers": 2}, "execution.workers"),
        # Text numbers are for command-line values; in a file "4" is a typing slip.
        ({"num_workers": "4"}, "execution.num_workers: expected an integer, got '4'"),
        ({"num_cpus": "0.5"}, "execution.num_cpus: expected a number, got '0.5'"),
    ):
        with pytest.raises(ConfigError, match=key):
            GateConfig.from_dict({"execution": bad})


def test_source_batches_keep_summaries_of_one_source_together() -> None:
    exs = [Example(str(i), f"s{i % 3}", f"y{i}") for i in range(9)]  # 3 sources x 3
    todo = {"m": list(range(9))}
    batches = source_batches(exs, todo, 4)
    assert batches == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert source_batches(exs, todo, 6) == [[0, 3, 6, 1, 4, 7], [2, 5, 8]]
    # A source with more summaries than a batch holds spans several; only todo cells travel.
    big = [Example(str(i), "same", f"y{i}") for i in range(5)]
    assert source_batches(big, {"m": [0, 1, 2, 4]}, 3) == [[0, 1, 2], [4]]


class RecordingRemote:
    """Stands in for the Ray executor (``EXECUTORS["ray"]`` patched to it): records the
    options it was built with and scores in process."""

    name = "ray"
    parallel = True
    Options = RayOptions
    built: list[tuple[str, RayOptions]] = []

    def __init__(self, recipe: ScorerRecipe) -> None:
        self.local = LocalExecutor(recipe)

    @classmethod
    def create(cls, recipe, options, *, scorer=None, pool=None, cache=None):  # type: ignore[no-untyped-def]
        RecordingRemote.built.append((cls.name, options))
        return cls(recipe)

    def score(self, examples, *, todo=None, progress=None):  # type: ignore[no-untyped-def]
        return self.local.score(examples, todo=todo, progress=progress)

    def settings_hashes(self) -> dict[str, str]:
        return self.local.settings_hashes()

    def close(self) -> None:
        pass


def test_bench_and_calibrate_take_the_executor_from_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[tool.faithgate.execution]`` is honoured by ``bench`` and ``calibrate`` as by
    ``check``; flags override single keys of it."""
    import json

    from click.testing import CliRunner
    from ray_helpers import PoisonMetric

    from faithgate.cli import cli
    from faithgate.metrics import base
    from faithgate.scoring import execution

    base.metric_names()  # discovery first, then the model-free test metric
    monkeypatch.setitem(base._REGISTRY, "poison", PoisonMetric)
    fake = execution.RegisteredExecutor(f"{__name__}:RecordingRemote", "a recording stand-in")
    monkeypatch.setitem(execution.EXECUTORS, "ray", fake)
    monkeypatch.setattr(RecordingRemote, "built", [])
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "labelled.jsonl"
    rows = [
        {"id": f"{k}{tag}", "source": SRC_A, "summary": text, "label": label, "pair_id": str(k)}
        for k in range(3)
        for tag, text, label in (
            ("g", f"The mayor opened the new bridge {k}.", 1),
            ("b", f"The king closed an old tunnel {k}.", 0),
        )
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "pyproject.toml").write_text(
        "[tool.faithgate.execution]\nexecutor = 'ray'\nnum_workers = 3\nbatch_size = 5\n"
    )
    runner = CliRunner()
    bench = ["bench", "--data", str(data), "--metric", "poison", "--no-cache", "-q"]
    res = runner.invoke(cli, [*bench, "--resamples", "0"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, [*bench, "--resamples", "0", "--num-workers", "2"])
    assert res.exit_code == 0, res.output
    calibrate = ["calibrate", "--data", str(data), "--metric", "poison", "--no-cache"]
    res = runner.invoke(cli, [*calibrate, "--dry-run", "--resamples", "0"])
    assert res.exit_code == 0, res.output
    got = [(name, s.num_workers, s.batch_size) for name, s in RecordingRemote.built]
    assert got == [("ray", 3, 5), ("ray", 2, 5), ("ray", 3, 5)]
    # --executor local wins over the file: nothing remote is built.
    res = runner.invoke(cli, [*bench, "--resamples", "0", "--executor", "local"])
    assert res.exit_code == 0, res.output
    assert len(RecordingRemote.built) == 3
    # A broken execution table is an error, not a silent local run.
    (tmp_path / "pyproject.toml").write_text("[tool.faithgate.execution]\nexecutor = 'spark'\n")
    res = runner.invoke(cli, [*bench, "--resamples", "0"])
    assert res.exit_code == 2 and "execution.executor" in res.output, res.output


def test_cached_executor_feeds_chunks_and_keeps_finished_ones(tmp_path: Path) -> None:
    """Big inputs go to the executor chunk by chunk (a run of one source is never cut), each
    chunk's scores reach the cache before the next is sent: an interrupted run keeps them."""
    from faithgate.scoring.execution import chunk_bounds

    exs = [Example(f"{s}{k}", f"source {s}", f"summary {s} {k}") for s in "abc" for k in range(3)]
    assert list(chunk_bounds(exs, 2)) == [(0, 3), (3, 6), (6, 9)]  # extended to the source end
    assert list(chunk_bounds(exs, 4)) == [(0, 6), (6, 9)]
    assert list(chunk_bounds(exs[:1], 4)) == [(0, 1)]

    class Interrupt(BaseException):
        pass

    class StopsOnThirdChunk(CountingExecutor):
        def score(self, examples, *, todo=None, progress=None):  # type: ignore[no-untyped-def]
            if len(self.calls) == 2:
                raise Interrupt  # Ctrl-C while the third chunk is scored
            return super().score(examples, todo=todo, progress=progress)

    recipe = ScorerRecipe(("ner",))
    cache = ScoreCache(tmp_path / "scores.sqlite")
    examples = EXAMPLES * 1 + [
        Example(f"x{e.id}", e.source, e.summary + " Again.") for e in EXAMPLES
    ]
    inner = StopsOnThirdChunk(LocalExecutor(recipe))
    with pytest.raises(Interrupt):
        CachedExecutor(inner, cache, chunk_size=3).score(examples)
    assert [ids for ids, _ in inner.calls] == [["a1", "b1", "a2"], ["b2", "xa1", "xb1"]]
    # The rerun reads the two finished chunks back and computes only the rest.
    inner = CountingExecutor(LocalExecutor(recipe))
    done: list[int] = []
    hits = cache.hits
    full = CachedExecutor(inner, cache, chunk_size=3).score(examples, progress=done.append)
    assert cache.hits - hits == 6 and [ids for ids, _ in inner.calls] == [["xa2", "xb2"]]
    assert sum(done) == len(examples)
    want = LocalExecutor(recipe).score(examples)
    assert [r["ner"].to_dict() for r in full] == [r["ner"].to_dict() for r in want]


def test_ctrl_c_inside_a_ray_wait_reaches_the_callers_handler() -> None:
    """Ray turns a Ctrl-C during its blocking calls into an interruption only when SIGINT
    raises ``KeyboardInterrupt`` (anything else is swallowed inside Ray and the Ctrl-C lost);
    around those calls it does, and the caller's own handler (the CLI's) then runs."""
    import signal

    from faithgate.scoring.ray_executor.cluster import sigint_as_keyboard_interrupt

    class Interrupted(BaseException):
        pass

    def handler(signum: int, frame: object) -> None:
        raise Interrupted()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        with pytest.raises(Interrupted), sigint_as_keyboard_interrupt():
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            signal.raise_signal(signal.SIGINT)  # as Ray's signal check would see it
        assert signal.getsignal(signal.SIGINT) is handler  # restored
        with sigint_as_keyboard_interrupt():
            pass
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_address_that_names_the_cluster_ray_is_on_is_not_reported_ignored(caplog) -> None:
    """With Ray already initialised, ``address = "auto"`` (the documented example) and the
    connected cluster's own address were each reported "ignored"; only another address is."""
    import logging
    from types import SimpleNamespace

    pytest.importorskip("ray")
    from faithgate.scoring.ray_executor import RayExecutor

    ray = SimpleNamespace(get_runtime_context=lambda: SimpleNamespace(gcs_address="10.0.0.5:6379"))
    warned = {}
    for address in ("auto", "10.0.0.5:6379", "ray://10.0.0.5:10001", "ray://other:10001"):
        caplog.clear()
        settings = ExecutionSettings(executor="ray", address=address)
        with caplog.at_level(logging.WARNING, logger="faithgate.scoring.ray_executor"):
            RayExecutor(ScorerRecipe(("overlap",)), settings)._warn_address_ignored(ray)
        warned[address] = any("is ignored" in r.getMessage() for r in caplog.records)
    assert warned == {
        "auto": False,
        "10.0.0.5:6379": False,
        "ray://10.0.0.5:10001": False,  # Ray Client: another port than the GCS's
        "ray://other:10001": True,
    }


def test_ray_only_flags_without_the_ray_executor_are_refused(tmp_path, monkeypatch):
    """`faithgate check --num-workers 3 --address auto` ran locally and passed without a word."""
    from click.testing import CliRunner

    from faithgate.cli import cli
    from faithgate.cli.execution_options import execution_settings

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="--address and --num-workers only apply to the ray"):
        execution_settings(None, "auto", 3)
    with pytest.raises(ConfigError, match="--num-workers only applies to the ray executor"):
        execution_settings("local", None, 3)
    assert execution_settings("ray", None, 2).options_for().num_workers == 2
    # from a configuration file they are settings kept for later (and for the library's
    # GateConfig.override): no error
    kept = ExecutionSettings.from_dict({"num_workers": 3}, "faithgate.toml")
    assert kept.executor == "local" and kept.options_for("ray").num_workers == 3
    over = GateConfig().override(execution={"num_workers": 2}).execution
    assert over.options_for("ray").num_workers == 2
    (tmp_path / "faithgate.toml").write_text("[execution]\nexecutor = 'ray'\n")
    assert execution_settings(None, None, 2).options_for().num_workers == 2  # file: ray
    (tmp_path / "faithgate.toml").unlink()
    (tmp_path / "o.jsonl").write_text('{"id": "a", "source": "A cat sat.", "summary": "A cat."}\n')
    args = ["check", "--outputs", "o.jsonl", "--metric", "overlap", "--threshold", "0.1"]
    res = CliRunner().invoke(cli, [*args, "--no-cache", "--num-workers", "3"])
    assert res.exit_code == 2 and "add --executor ray" in res.stderr
