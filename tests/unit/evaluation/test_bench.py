"""faithgate bench on tiny synthetic files with a model-free test metric."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np
import pytest
from click.testing import CliRunner

from faithgate.cli import cli
from faithgate.errors import InputError
from faithgate.evaluation.bench.combination import apply_combination
from faithgate.evaluation.bench.files import benchmark_files, limit_examples
from faithgate.evaluation.bench.report import markdown_report
from faithgate.evaluation.bench.run import run_bench
from faithgate.evaluation.bench.scoring import Bench
from faithgate.io import load_examples, write_jsonl
from faithgate.metrics.base import Metric, ScoringContext, metric_names, register
from faithgate.scoring.scorer import Scorer
from faithgate.types import Example, Score

CALLS: dict[str, int] = {}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@register
class WordSupport(Metric):
    """Test-only: share of summary words that occur in the source (no model)."""

    name = "test_word_support"
    description = "test only"
    defaults = {"power": 1.0}

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        CALLS[self.name] = CALLS.get(self.name, 0) + len(examples)
        out = []
        for ex in examples:
            src = set(_words(ex.source))
            words = _words(ex.summary)
            value = (sum(w in src for w in words) / len(words)) ** self.settings["power"]
            out.append(Score(self.name, value, self.settings_hash(ctx), ex.id))
        return out


@register
class Length(Metric):
    """Test-only: shorter summaries score higher (a second, different signal)."""

    name = "test_shortness"
    description = "test only"

    def score_batch(self, examples: Sequence[Example], ctx: ScoringContext) -> list[Score]:
        CALLS[self.name] = CALLS.get(self.name, 0) + len(examples)
        return [
            Score(self.name, 1.0 / len(_words(ex.summary)), self.settings_hash(ctx), ex.id)
            for ex in examples
        ]


SRC1 = "the cat sat on the mat in paris on monday and purred"
SRC2 = "the committee approved the budget of ten million after a long debate"


def rows() -> list[dict]:
    """BUMP-style pairs: references repeat per edit; one edit adds no new word (a tie)."""
    ref1 = "the cat sat on the mat"
    ref2 = "the committee approved the budget"
    return [
        # p1: 1.0 vs 5/6 -> win
        dict(
            id="p1-ref",
            source=SRC1,
            summary=ref1,
            label=1,
            pair_id="p1",
            role="reference",
            origin="cnndm",
        ),
        dict(
            id="p1-ed",
            source=SRC1,
            summary="the dog sat on the mat",
            label=0,
            pair_id="p1",
            role="edited",
            error_type="Extrinsic Entity",
            origin="cnndm",
        ),
        # p2: 1.0 vs 1.0 (intrinsic swap, all words in source) -> tie, fails
        dict(
            id="p2-ref",
            source=SRC1,
            summary=ref1,
            label=1,
            pair_id="p2",
            role="reference",
            origin="cnndm",
        ),
        dict(
            id="p2-ed",
            source=SRC1,
            summary="the mat sat on the cat",
            label=0,
            pair_id="p2",
            role="edited",
            error_type="Intrinsic Entity",
            origin="cnndm",
        ),
        # p3: 1.0 vs 4/5 -> win
        dict(
            id="p3-ref",
            source=SRC2,
            summary=ref2,
            label=1,
            pair_id="p3",
            role="reference",
            origin="xsum",
        ),
        dict(
            id="p3-ed",
            source=SRC2,
            summary="the committee rejected the budget",
            label=0,
            pair_id="p3",
            role="edited",
            error_type="Extrinsic Predicate",
            origin="xsum",
        ),
    ]


@pytest.fixture()
def data_file(tmp_path):
    path = tmp_path / "tiny.jsonl"
    write_jsonl(rows(), path)
    return path


def test_test_metrics_registered() -> None:
    assert "test_word_support" in metric_names()


def test_bench_figures_by_hand(data_file, tmp_path) -> None:
    res = run_bench([data_file], ["test_word_support"], cache=tmp_path / "c.sqlite", n_resamples=50)
    m = res["datasets"]["tiny"]["metrics"]["test_word_support"]
    o = m["overall"]
    assert o["n"] == 6 and o["n_pairs"] == 3
    assert o["consistency"] == pytest.approx(2 / 3)
    # unique items: refs 1.0, 1.0 ; edits 5/6, 1.0, 4/5 -> wins 2 + 2 + ties 0.5 + 0.5 = 5 / 6
    assert o["n_unique"] == 5
    assert o["roc_auc"] == pytest.approx(5 / 6)
    by_type = m["by_error_type"]
    assert by_type["Intrinsic Entity"]["consistency"] == 0.0
    assert by_type["Extrinsic Entity"]["consistency"] == 1.0
    assert set(m["by_origin"]) == {"cnndm", "xsum"}
    table = markdown_report(res)
    # n: the 5 distinct scored items behind ROC AUC, out of 6 rows
    assert "| tiny | test_word_support | 5 distinct (6 rows) | 0.667 [" in table
    assert o["n_distinct"] == 5 and o["n_distinct_scored"] == 5 and o["n_roc_auc"] == 5
    assert "Intrinsic Entity" in table and "By origin" in table


def test_ci_bounds_have_the_estimates_decimals_rounded_outward() -> None:
    """A CI of [0.7066, 0.7121] printed at 2 decimals as [0.71, 0.71]: it looked zero-width and
    left out the estimate shown beside it, 0.709."""
    o = {"n": 200000, "n_pairs": 100000, "consistency": 0.70945}
    o["consistency_ci95"] = [0.7066, 0.7121]
    o["roc_auc"], o["roc_auc_ci95"] = 0.5, [0.4999, 0.5001]
    table = markdown_report({"datasets": {"big": {"metrics": {"m": {"overall": o}}}}})
    assert "| 0.709 [0.706, 0.713] | 0.500 [0.499, 0.501] |" in table


def test_user_names_in_the_markdown_table_cannot_format_link_or_ping() -> None:
    """File names and error types reached the table with only "|" escaped: raw HTML, links,
    images, code spans and @mentions rendered where the table was pasted."""
    o = {"n": 4, "roc_auc": 0.5}
    name = "bump_task1 <img src=x onerror=alert(1)> [l](http://e.x) @octocat `t` a|b"
    table = markdown_report({"datasets": {name: {"metrics": {"m": {"overall": o}}}}})
    row = next(line for line in table.splitlines() if "bump_task1" in line)
    assert "bump_task1 \\<img src=x onerror=alert\\(1\\)\\>" in row  # "_" kept: terminal reads it
    assert "\\[l\\]\\(http:\u200b//e.x\\)" in row and "@\u200boctocat" in row
    assert "\\`t\\`" in row and "a\\|b" in row


def test_cache_avoids_recomputation(data_file, tmp_path) -> None:
    cache = tmp_path / "c.sqlite"
    CALLS.clear()
    first = run_bench([data_file], ["test_word_support"], cache=cache, n_resamples=10)
    m1 = first["datasets"]["tiny"]["metrics"]["test_word_support"]
    # 5 distinct (source, summary) items: the repeated reference is scored once
    assert m1["computed"] == 5 and m1["cached"] == 0
    assert CALLS["test_word_support"] == 5
    CALLS.clear()
    second = run_bench(
        [data_file], ["test_word_support", "test_shortness"], cache=cache, n_resamples=10
    )
    ms = second["datasets"]["tiny"]["metrics"]
    assert ms["test_word_support"]["computed"] == 0 and ms["test_word_support"]["cached"] == 5
    assert "test_word_support" not in CALLS  # not recomputed
    assert ms["test_shortness"]["computed"] == 5
    # seconds per item is remembered for the cached metric
    assert ms["test_word_support"]["seconds_per_item"] is not None


def _combination_of_a_slow_component(tmp_path, monkeypatch) -> dict:
    """``combined`` settings over ``test_word_support`` alone, which is made to take 10 ms an
    item, so a combination's seconds per item show whether its component was counted."""
    import time as time_module

    slow = WordSupport.score_batch

    def slower(self, examples, ctx):
        time_module.sleep(0.01 * len(examples))
        return slow(self, examples, ctx)

    monkeypatch.setattr(WordSupport, "score_batch", slower)
    weights = tmp_path / "w.json"
    weights.write_text(
        json.dumps(
            {
                "format": "faithgate-combination/1",
                "metrics": ["test_word_support"],
                "metric_settings": {},
                "mean": [0.5],
                "scale": [0.25],
                "coef": [1.0],
                "intercept": 0.0,
            }
        )
    )
    return {"combined": {"weights": str(weights)}}


def test_a_combination_costs_its_components_too(data_file, tmp_path, monkeypatch) -> None:
    """A combination's own seconds are its formula's; bench reports them plus its components'
    (remembered by settings hash), whether the components were computed now or earlier."""
    settings = _combination_of_a_slow_component(tmp_path, monkeypatch)
    for cache in (tmp_path / "fresh.sqlite", tmp_path / "warm.sqlite"):
        if cache.name == "warm.sqlite":  # the component scored (and timed) first, alone
            run_bench([data_file], ["test_word_support"], cache=cache, n_resamples=10)
        CALLS.clear()
        res = run_bench(
            [data_file], ["combined"], cache=cache, metric_settings=settings, n_resamples=10
        )
        combo = res["datasets"]["tiny"]["metrics"]["combined"]
        assert combo["seconds_per_item"] is not None
        assert combo["seconds_per_item"] >= 0.009  # the component's 10 ms an item counts
        assert CALLS.get("test_word_support", 0) == (5 if cache.name == "fresh.sqlite" else 0)


class _RemoteLike:
    """What bench's driver sees of a Ray run: no ``scorer`` here; the worker's scorer, built
    from the recipe without a cache, computes a combination's components itself and returns
    only the selected metrics' cells (``ray_executor.ScoringWorker.score``)."""

    name = "remote-like"

    def __init__(self, recipe) -> None:
        self._worker = recipe.build()

    def score(self, examples, *, todo=None, progress=None):
        return self._worker.compute(list(examples), todo)

    def settings_hashes(self) -> dict[str, str]:
        return self._worker.settings_hashes()

    def close(self) -> None:
        pass


def test_a_combination_costs_its_components_once_after_a_remote_run(
    data_file, tmp_path, monkeypatch
) -> None:
    """After a remote run of ``combined`` (its components computed on the worker, inside its
    wall time), a local run that reads it from the cache and times its component again
    counted the component twice (about 20 ms an item for a 10 ms one); and a remote run that
    read it from the cache left its components out. Its seconds per item are now the same
    (its component's once) whichever executor computed or timed what."""
    from faithgate.scoring.execution import CachedExecutor

    settings = _combination_of_a_slow_component(tmp_path, monkeypatch)
    local_executor = Bench._executor

    def remote_executor(self):
        return CachedExecutor(_RemoteLike(self.recipe), self.cache)

    def per_item(metrics, cache, remote):
        monkeypatch.setattr(Bench, "_executor", remote_executor if remote else local_executor)
        res = run_bench([data_file], metrics, cache=cache, metric_settings=settings, n_resamples=10)
        return {m: r["seconds_per_item"] for m, r in res["datasets"]["tiny"]["metrics"].items()}

    first = per_item(["combined"], tmp_path / "r.sqlite", remote=True)
    assert 0.009 <= first["combined"] < 0.019  # its component's 10 ms, measured remotely
    # the component computed and timed in process; the combination read from the cache
    then = per_item(["test_word_support", "combined"], tmp_path / "r.sqlite", remote=False)
    assert 0.009 <= then["test_word_support"] < 0.019
    assert 0.009 <= then["combined"] < 0.019  # was about 0.02: the component counted twice
    # the other way round: timed in process first, then read from the cache remotely
    per_item(["combined"], tmp_path / "l.sqlite", remote=False)
    again = per_item(["combined"], tmp_path / "l.sqlite", remote=True)
    assert again["combined"] is not None and 0.009 <= again["combined"] < 0.019


def test_limit_keeps_pairs_whole(data_file) -> None:
    examples = load_examples(data_file)
    for seed in range(5):
        sample = limit_examples(examples, 3, seed=seed)
        pair_ids = [ex.meta["pair_id"] for ex in sample]
        assert all(pair_ids.count(p) == 2 for p in pair_ids)
        assert 3 <= len(sample) <= 4
    assert limit_examples(examples, None) == examples


def test_limit_keeps_a_pair_whose_integer_id_is_zero_whole() -> None:
    """``pair_id`` 0 is a pair like 1..5 (and like "p0"), not "no pair": its two rows are
    kept or left out together."""
    examples = [
        Example(f"{t}{k}", "src", f"s{t}{k}", label=y, meta={"pair_id": k})
        for k in range(6)
        for t, y in (("f", 1), ("u", 0))
    ]
    for seed in range(20):
        sample = limit_examples(examples, 4, seed=seed)
        pair_ids = [ex.meta["pair_id"] for ex in sample]
        assert all(pair_ids.count(p) == 2 for p in pair_ids), (seed, pair_ids)
        assert len(sample) == 4


@pytest.mark.parametrize(
    "damaged",
    ["[]", '"x"', "3", '{"h": 3}', '{"h": {"seconds": "a", "items": 1}}', '{"h": {}}', "{"],
)
def test_a_damaged_timings_file_is_moved_aside_with_a_warning(tmp_path, damaged, caplog) -> None:
    from faithgate.evaluation.bench.timings import Timings

    cache = tmp_path / "c.sqlite"
    timings = tmp_path / "c.timings.json"
    timings.write_text(damaged)
    with caplog.at_level("WARNING", logger="faithgate"):
        t = Timings(cache)
    assert t.data == {} and t.per_item("h") is None
    assert "damaged timings file" in caplog.text
    assert [p.read_text() for p in tmp_path.glob("c.timings.json.corrupt-*")] == [damaged]
    t.add("h", 2.0, 4)  # a fresh file, used as before
    assert Timings(cache).per_item("h") == 0.5


def test_bench_warns_when_a_file_has_one_class_or_no_labels(tmp_path) -> None:
    one = tmp_path / "one.jsonl"
    write_jsonl([r for r in rows() if r["label"] == 1], one)
    none = tmp_path / "none.jsonl"
    write_jsonl([{k: v for k, v in r.items() if k != "label"} for r in rows()], none)
    human = tmp_path / "human.jsonl"  # scores only: the correlations' kind of file, no warning
    write_jsonl(
        [
            {**{k: v for k, v in r.items() if k != "label"}, "score": i}
            for i, r in enumerate(rows())
        ],
        human,
    )
    # One unfaithful row that repeats a faithful one: no unfaithful item is left once the
    # rows are deduplicated, so no label-based figure either (it went unwarned).
    dup = tmp_path / "dup.jsonl"
    faithful = [r for r in rows() if r["label"] == 1]
    write_jsonl([*faithful, {**faithful[0], "id": "again", "label": 0}], dup)
    for path, expected in (
        # 3 faithful rows, 2 distinct: the references repeat per edit
        (one, "one: only one class among its distinct rows (2 faithful, 0 unfaithful)"),
        (dup, "dup: only one class among its distinct rows (1 faithful, 0 unfaithful, 1 "),
        (none, "none: no labels"),
        (human, None),
    ):
        res = CliRunner().invoke(
            cli,
            ["bench", "--data", str(path), "--metric", "test_word_support", "--no-cache", "-q"],
        )
        assert res.exit_code == 0, res.output  # the timing and any correlations still count
        if expected is None:
            assert "warning" not in res.stderr
        else:
            assert expected in res.stderr and "need both classes" in res.stderr
            assert res.stderr.count("\n") == 1


def _labelled(n: int, seed: int) -> list[dict]:
    """Unfaithful summaries add words absent from the source and are longer."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(2, 6))
        base = " ".join(_words(SRC2)[: 3 + int(rng.integers(0, 5))])
        label = int(i % 2 == 0)
        extra = "" if label else " " + " ".join(f"novel{j}" for j in range(k))
        out.append(
            dict(id=f"{seed}-{i}", source=SRC2, summary=base + extra + f" n{i}", label=label)
        )
    return out


def test_combine_fits_and_becomes_a_metric(tmp_path) -> None:
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    write_jsonl(_labelled(40, 1), train)
    write_jsonl(_labelled(20, 2), test)
    weights = tmp_path / "w.json"
    res = run_bench(
        [test],
        ["test_word_support", "test_shortness"],
        combine=train,
        save_weights=weights,
        cache=None,
        n_resamples=10,
    )
    comb = res["combination"]
    assert comb["metrics"] == ["test_word_support", "test_shortness"]
    assert comb["cv_roc_auc"] > 0.9
    assert comb["coef"][0] > 0  # more support -> more faithful
    assert res["datasets"]["test"]["metrics"]["combined"]["overall"]["roc_auc"] > 0.9
    assert "train" not in res["datasets"]  # fitted on train, reported on the --data files
    # the saved weights score like apply_combination, through the registry
    saved = json.loads(weights.read_text())
    examples = load_examples(test)
    scores = Scorer(["combined"], metric_settings={"combined": {"weights": str(weights)}}).score(
        examples
    )
    b = Bench(["test_word_support", "test_shortness"], cache=None)
    runs = {k: r.scores for k, r in b.score(examples).items()}
    expected = apply_combination(saved, runs)
    got = np.asarray([s["combined"].value for s in scores])
    assert np.allclose(got, expected)
    assert set(scores[0]["combined"].details["components"]) == {
        "test_word_support",
        "test_shortness",
    }


def test_combined_on_its_training_file_is_marked_in_sample(tmp_path) -> None:
    """On the file it was fitted on, the combination's figures are in-sample: the row says so
    and the combination is left out of that file's permutation tests (not of the others')."""
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    write_jsonl(_labelled(40, 1), train)
    write_jsonl(_labelled(20, 2), test)
    res = run_bench(
        [train, test],
        ["test_word_support", "test_shortness"],
        combine=train,
        cache=None,
        n_resamples=20,
    )
    assert res["datasets"]["train"]["metrics"]["combined"]["in_sample"] is True
    assert res["datasets"]["test"]["metrics"]["combined"]["in_sample"] is False
    named = {
        d: {c[k] for c in entry["comparisons"] for k in ("a", "b")}
        for d, entry in res["datasets"].items()
    }
    assert "combined" not in named["train"] and "combined" in named["test"]
    table = markdown_report(res)
    assert "| train | combined (in-sample) |" in table
    assert "| test | combined |" in table and "| test | combined (in-sample)" not in table
    assert "figures are in-sample" in table


def test_combined_without_weights_is_an_input_error() -> None:
    from faithgate.errors import InputError
    from faithgate.metrics.base import get_metric

    with pytest.raises(InputError, match="weights file"):
        get_metric("combined")


def test_plots_are_written(data_file, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    res = run_bench(
        [data_file], ["test_word_support"], cache=None, n_resamples=10, plots=tmp_path / "plots"
    )
    written = res["datasets"]["tiny"]["plots"]
    names = sorted(p.split("/")[-1] for p in written)
    assert names == ["tiny__test_word_support__hist.png", "tiny__test_word_support__roc.png"]
    for p in written:
        with open(p, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_bench_json_and_errors(data_file, tmp_path) -> None:
    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "bench",
            "--data",
            str(data_file),
            "--metric",
            "test_word_support",
            "--json",
            "-q",
            "--resamples",
            "10",
            "--cache",
            str(tmp_path / "c.sqlite"),
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # stderr: warnings (e.g. a CI left out: too few items)
    assert doc["datasets"]["tiny"]["metrics"]["test_word_support"]["overall"]["consistency"] == (
        pytest.approx(2 / 3)
    )
    bad = runner.invoke(
        cli, ["bench", "--data", str(tmp_path / "missing.jsonl"), "--metric", "test_word_support"]
    )
    assert bad.exit_code == 2
    nometric = runner.invoke(cli, ["bench", "--data", str(data_file)])
    assert nometric.exit_code == 2 and "--metric" in nometric.output


def test_cli_calibrate_writes_config(tmp_path) -> None:
    train = tmp_path / "train.jsonl"
    write_jsonl(_labelled(40, 1), train)
    config = tmp_path / "faithgate.toml"
    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "calibrate",
            "--data",
            str(train),
            "--metric",
            "test_word_support",
            "--config",
            str(config),
            "--no-cache",
            "--resamples",
            "50",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "threshold" in res.output and "written to" in res.output
    from faithgate.config import load_config

    cfg = load_config(config)
    thr = cfg.thresholds["test_word_support"]
    assert 0 < thr < 1
    assert cfg.calibration["test_word_support"]["balanced_accuracy"] == 1.0
    # A model-free metric: its name, then the digest.
    assert re.fullmatch(
        r"test_word_support\|[0-9a-f]{12}", cfg.calibration["test_word_support"]["settings_hash"]
    )


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_cli_perturb_file_roundtrip(tmp_path) -> None:
    src = tmp_path / "in.jsonl"
    write_jsonl(
        [
            dict(
                id="a",
                source="Obama met Merkel in Berlin on Monday. They talked.",
                summary="Obama met Merkel in Berlin.",
            )
        ],
        src,
    )
    out = tmp_path / "out.jsonl"
    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "perturb",
            "--input",
            str(src),
            "--output",
            str(out),
            "--types",
            "entity,circumstance",
            "--seed",
            "3",
        ],
    )
    assert res.exit_code == 0, res.output
    made = load_examples(out)
    assert made[0].label == 1 and made[0].summary == "Obama met Merkel in Berlin."
    assert len(made) >= 3 and all(ex.label == 0 for ex in made[1:])
    assert {ex.meta["pair_id"] for ex in made} == {"a"}
    assert all(
        "Entity" in ex.meta["error_type"] or "Circumstance" in ex.meta["error_type"]
        for ex in made[1:]
    )
    bad = runner.invoke(cli, ["perturb", "--source", "x", "--summary", "y", "--types", "bogus"])
    assert bad.exit_code == 2


def test_metric_comparison_by_permutation(data_file, tmp_path) -> None:
    res = run_bench(
        [data_file], ["test_word_support", "test_shortness"], cache=None, n_resamples=200
    )
    comps = res["datasets"]["tiny"]["comparisons"]
    assert len(comps) == 1
    c = comps[0]
    assert c["statistic"] == "consistency"
    # word support wins p1 and p3 (2/3); shortness ties every pair (same lengths) -> 0
    assert c["a"] == "test_word_support" and c["difference"] == pytest.approx(2 / 3)
    assert 0 < c["p_value"] <= 1
    assert "Paired permutation tests" in markdown_report(res)


def _csv_text(records: list[dict], columns: Sequence[str]) -> str:
    import csv
    import io

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue()


def test_a_data_directory_reads_its_csv_and_upper_case_jsonl_files_too(tmp_path) -> None:
    """``*.jsonl`` alone (case-sensitive) skipped ``b.csv`` and ``C.JSONL`` without a word,
    although ``--data b.csv`` reads one; other files are named in one warning, and a
    dataset's README and licences directory are skipped quietly (review s23, F7)."""
    d = tmp_path / "bd"
    d.mkdir()
    write_jsonl(rows(), d / "a.jsonl")
    columns = ("id", "source", "summary", "label", "pair_id", "role", "error_type", "origin")
    (d / "b.csv").write_text(_csv_text(rows(), columns), encoding="utf-8")
    write_jsonl(rows(), d / "C.JSONL")
    (d / "notes.tsv").write_text("x\ty\n")
    (d / "result.json").write_text("{}\n")
    (d / "README.md").write_text("# data\n")
    (d / "licenses").mkdir()
    (d / "licenses" / "x.jsonl").write_text("not read\n")
    res = CliRunner().invoke(
        cli,
        ["bench", "--data", str(d), "--metric", "test_word_support", "--no-cache", "--json"],
    )
    assert res.exit_code == 0, res.output
    assert list(json.loads(res.stdout)["datasets"]) == ["C", "a", "b"]  # sorted by name
    skipped = [line for line in res.stderr.splitlines() if "skipped" in line]
    assert skipped == [
        f"faithgate: warning: {d}: skipped 2 file(s) that are not .jsonl or .csv: 'notes.tsv', "
        "'result.json' (to read one, give it as --data FILE: a file not named .csv is read as "
        "JSON Lines)"
    ]
    assert "README" not in res.stderr and "licenses" not in res.stderr
    (d / "a.jsonl").unlink()
    (d / "b.csv").unlink()
    (d / "C.JSONL").unlink()
    with pytest.raises(InputError, match="no .jsonl or .csv files in this directory"):
        benchmark_files(d)


def test_the_shared_data_directory_is_read_without_a_warning(shared_data, caplog) -> None:
    """Seven .jsonl files beside a README.md and a licenses/ directory: nothing to warn of."""
    with caplog.at_level("WARNING", logger="faithgate"):
        files = benchmark_files(shared_data)
    assert [f.suffix for f in files] == [".jsonl"] * 7
    assert files == sorted(files, key=lambda f: f.name)
    assert not caplog.records


def test_bench_reads_human_scores_from_a_csv_file(tmp_path) -> None:
    """CSV cells are text: every CSV with a ``score`` column, empty cells included, was
    refused ("must be a finite number or null, got '0.9'") (review s23, F10)."""
    scored = [{**r, "score": "" if i == 1 else f"{0.9 - i / 10:.1f}"} for i, r in enumerate(rows())]
    path = tmp_path / "human.csv"
    path.write_text(_csv_text(scored, ("id", "source", "summary", "label", "score")))
    res = CliRunner().invoke(
        cli,
        ["bench", "--data", str(path), "--metric", "test_word_support", "--no-cache", "--json"],
    )
    assert res.exit_code == 0, res.output
    assert "finite number" not in res.stderr
