"""bench and calibrate report the figures they compute: the written threshold gives the gate the
reported classification, in-sample figures are labelled and cross-validated, every statistic
counts an item once (duplicates merged, keys labelled both ways left out), the permutation test
compares the AUCs it names, and the n shown is the n behind the figure."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from gate_fakes import NAME

from faithgate.cli import cli
from faithgate.config import load_config
from faithgate.errors import InputError
from faithgate.evaluation.bench.comparisons import compare_metrics
from faithgate.evaluation.bench.report import markdown_report
from faithgate.evaluation.calibrate import calibrate, write_calibration
from faithgate.evaluation.meta import Item, evaluate, evaluate_group, roc_auc


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _row(i: int, value: float, label: int) -> dict:
    """A row for the ``gate_fake`` metric: its score is the number the summary starts with."""
    return {"id": str(i), "source": "src doc", "summary": f"{value} words {i}.", "label": label}


def _gate_classification(scores, threshold: float) -> np.ndarray:
    return np.asarray(scores) >= threshold  # how the gate decides (faithgate.gate.evaluate): passes


# ---------------------------------------------------------------- 1. written threshold


def test_written_threshold_classifies_every_item_as_reported(tmp_path) -> None:
    """0.99991 (unfaithful) vs 0.99996 (faithful): the 4-place 0.9999 would pass every
    unfaithful item calibrate reported as caught."""
    s = [0.99991] * 4 + [0.99996] * 4
    y = [0] * 4 + [1] * 4
    cal = calibrate(s, y, n_resamples=50, metric="m")
    assert cal.balanced_accuracy == 1.0 and cal.recall_unfaithful == 1.0
    cfg = load_config(write_calibration(tmp_path / "faithgate.toml", cal))
    written = cfg.thresholds[cal.metric]
    assert written == cfg.calibration[cal.metric]["threshold"]
    assert _gate_classification(s, written).tolist() == [False] * 4 + [True] * 4
    assert len(repr(written)) <= len("0.99994")  # still a short, readable decimal


def test_written_threshold_matches_the_figures_on_random_close_scores(tmp_path) -> None:
    rng = np.random.default_rng(7)
    for trial in range(20):
        y = rng.integers(0, 2, 40)
        y[:3], y[3:6] = 0, 1
        s = 0.5 + np.round(rng.random(40), 2) * 1e-5 + y * 2e-6  # differences below 1e-4
        cal = calibrate(s, y, n_resamples=0, metric="m")
        written = load_config(write_calibration(tmp_path / f"{trial}.toml", cal)).thresholds["m"]
        passed = _gate_classification(s, written)
        tpr, tnr = passed[y == 1].mean(), (~passed[y == 0]).mean()
        assert (tpr + tnr) / 2 == pytest.approx(cal.balanced_accuracy, abs=1e-12)
        assert (~passed[y == 0]).mean() == pytest.approx(cal.recall_unfaithful, abs=1e-12)


# ---------------------------------------------------------------- 2. in-sample vs cross-validated


def test_in_sample_figures_are_labelled_and_a_cross_validated_one_is_given() -> None:
    """Pure noise: the in-sample balanced accuracy flatters (about 0.6 on 30 items), the
    cross-validated one is near chance."""
    in_sample, cross = [], []
    for seed in range(60):
        rng = np.random.default_rng(seed)
        cal = calibrate(rng.random(30), [1] * 15 + [0] * 15, n_resamples=0, seed=seed)
        in_sample.append(cal.balanced_accuracy)
        cross.append(cal.cv_balanced_accuracy)
        assert cal.cv_folds == 5
    assert np.mean(in_sample) > 0.57
    assert abs(np.mean(cross) - 0.5) < 0.04 and np.mean(cross) < np.mean(in_sample) - 0.05
    doc = cal.to_dict()
    assert doc["in_sample"] == ["balanced_accuracy", "precision_unfaithful", "recall_unfaithful"]
    assert doc["cv_folds"] == 5 and not math.isnan(doc["cv_balanced_accuracy"])
    # a small class means fewer folds; a class of one, none
    small = calibrate([0.1, 0.2, 0.3, 0.7, 0.8, 0.9, 0.95], [0, 0, 0, 1, 1, 1, 1], n_resamples=0)
    assert small.cv_folds == 3 and small.cv_balanced_accuracy == 1.0
    one = calibrate([0.1, 0.8, 0.9], [0, 1, 1], n_resamples=0)
    assert one.cv_folds == 0 and math.isnan(one.cv_balanced_accuracy)


def test_cli_calibrate_labels_in_sample_and_prints_the_cross_validated_figure(tmp_path) -> None:
    rng = np.random.default_rng(1)
    data = _write(
        tmp_path / "noise.jsonl",
        [_row(i, round(float(rng.random()), 4), i % 2) for i in range(30)],
    )
    args = ["calibrate", "--data", data, "--metric", NAME, "--no-cache", "--dry-run"]
    res = CliRunner().invoke(cli, [*args, "--resamples", "20"])
    assert res.exit_code == 0, res.output
    assert "in-sample" in res.stdout and "cross-validated (5-fold)" in res.stdout
    doc = json.loads(
        CliRunner().invoke(cli, [*args, "--resamples", "0", "--format", "json"]).stdout
    )
    assert "balanced_accuracy" in doc["in_sample"] and doc["cv_folds"] == 5
    helptext = CliRunner().invoke(cli, ["calibrate", "--help"]).stdout
    assert "in-sample" in helptext and "cross-validated" in helptext


# ---------------------------------------------------------------- 3. permutation test


def test_permutation_test_compares_the_aucs_on_items_every_metric_scored() -> None:
    """Metric b is perfect where it scored, but failed on the 4 highest-ranked faithful items;
    ranking those lowest (the old policy) made a the "best" and the difference no AUC's."""
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(20, dtype=int), np.zeros(20, dtype=int)]
    items = [Item(key=("s", str(i)), label=int(v)) for i, v in enumerate(y)]
    a = np.where(y == 1, rng.uniform(0.3, 1, 40), rng.uniform(0, 0.7, 40))
    b = y + rng.uniform(0, 0.5, 40)
    b[:4] = np.nan
    comps = compare_metrics(items, {"a": a, "b": b}, n_resamples=200)
    assert len(comps) == 1
    c = comps[0]
    common = ~np.isnan(b)
    assert c["a"] == "b" and c["n"] == int(common.sum()) == 36
    assert c["difference"] == pytest.approx(
        roc_auc(b[common], y[common]) - roc_auc(a[common], y[common])
    )
    assert "every compared metric scored" in c["items"]
    table = markdown_report({"datasets": {"d": {"metrics": {}, "comparisons": comps}}})
    assert "| d | roc_auc | b | a | 36 |" in table


# ---------------------------------------------------------------- 4. / 5. duplicates, conflicts


def test_calibrate_merges_repeated_rows_as_bench_does() -> None:
    """A reference repeated for each of its 5 edits counted 5 times moved the threshold."""
    keys = [("A", "ref")] * 5 + [("A", f"e{i}") for i in range(5)] + [("B", "ref"), ("B", "e")]
    s = [0.55] * 5 + [0.5, 0.52, 0.6, 0.62, 0.64] + [0.9, 0.3]
    y = [1] * 5 + [0] * 5 + [1, 0]
    merged = calibrate(s, y, keys=keys, n_resamples=0)
    first = [0, *range(5, 12)]
    once = calibrate([s[i] for i in first], [y[i] for i in first], n_resamples=0)
    assert merged.threshold == once.threshold and merged.n == once.n == 8
    assert merged.n_merged == 4 and merged.n_conflicting == 0
    assert merged.balanced_accuracy == once.balanced_accuracy


def test_cli_calibrate_reports_merged_rows(tmp_path) -> None:
    rows = []
    for k in range(3):  # a reference and 3 edits per source, the reference repeated per edit
        for e in range(3):
            rows.append(
                {"id": f"r{k}{e}", "source": f"s{k}", "summary": f"0.{7 + k} ref.", "label": 1}
            )
            rows.append(
                {"id": f"e{k}{e}", "source": f"s{k}", "summary": f"0.{2 + e} e{e}.", "label": 0}
            )
    data = _write(tmp_path / "bump.jsonl", rows)
    res = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--data",
            data,
            "--metric",
            NAME,
            "--no-cache",
            "--dry-run",
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["n"] == 12 and doc["n_merged"] == 6 and doc["n_faithful"] == 3
    text = (
        CliRunner()
        .invoke(cli, ["calibrate", "--data", data, "--metric", NAME, "--no-cache", "--dry-run"])
        .stdout
    )
    assert "6 repeated rows merged" in text


def _conflict_items(order: str) -> tuple[list[Item], list[float]]:
    """Key ``same`` is labelled 0 in one row and 1 in another; ``order`` says which first."""
    rows = [("same", 0.5, 0), ("f1", 0.9, 1), ("u1", 0.6, 0), ("f2", 0.8, 1), ("u2", 0.1, 0)]
    rows.append(("same", 0.5, 1))
    if order == "B":
        rows[0], rows[-1] = rows[-1], rows[0]
    return [Item(key=("s", k), label=y) for k, _, y in rows], [v for _, v, _ in rows]


def test_keys_labelled_both_ways_are_left_out_whatever_the_order() -> None:
    results = []
    for order in "AB":
        items, scores = _conflict_items(order)
        out = evaluate(items, scores, n_resamples=20)["overall"]
        assert out["n_conflicting"] == 1 and out["n_unique"] == 4 and out["n_roc_auc"] == 4
        results.append(out["roc_auc"])
        keys = [it.key for it in items]
        assert roc_auc(scores, [it.label for it in items], keys=keys) == out["roc_auc"]
        cal = calibrate(scores, [it.label for it in items], keys=keys, n_resamples=0)
        assert cal.n_conflicting == 1 and cal.n == 4
    assert results[0] == results[1] == 1.0  # f 0.9, 0.8 above u 0.6, 0.1
    result = {"datasets": {"d": {"metrics": {"m": {"overall": out}}}}}
    assert "| d | m | 4 distinct (6 rows, 1 conflicting) |" in markdown_report(result)


def test_a_pair_of_one_text_labelled_both_ways_is_left_out_of_consistency() -> None:
    """falke2019 has pairs whose two members are the same text: every metric tied on them, so
    they counted as failures although ROC AUC left that key out as conflicting."""
    items, scores = [], []
    for i, (good, bad) in enumerate([(0.9, 0.1), (0.8, 0.2), (0.7, 0.3)]):
        items += [
            Item(("s", f"f{i}"), 1, pair_id=f"p{i}"),
            Item(("s", f"u{i}"), 0, pair_id=f"p{i}"),
        ]
        scores += [good, bad]
    for i in range(3):  # the correct and the incorrect sentence are one text
        items += [
            Item(("t", f"x{i}"), 1, pair_id=f"q{i}"),
            Item(("t", f"x{i}"), 0, pair_id=f"q{i}"),
        ]
        scores += [0.5, 0.5]
    out = evaluate_group(items, scores, n_resamples=0)
    assert out["consistency"] == 1.0 and out["n_pairs"] == 3
    assert out["n_pairs_conflicting"] == 3 and out["n_conflicting"] == 3
    assert compare_metrics(items, {"a": np.array(scores), "b": np.array(scores)})[0]["n"] == 3
    result = {"datasets": {"d": {"metrics": {"m": {"overall": out}}}}}
    assert "(12 rows, 3 conflicting, 3 conflicting pairs) | 1.000" in markdown_report(result)


# ---------------------------------------------------------------- 6. the n behind the figures


def test_counts_behind_the_figures() -> None:
    """7 rows: a repeated reference (3 rows), 4 distinct others, one of them unscored."""
    items = [Item(key=("s", "ref"), label=1, human=4.0)] * 3 + [
        Item(key=("s", "a"), label=0, human=1.0),
        Item(key=("s", "b"), label=0, human=2.0),
        Item(key=("s", "c"), label=1, human=5.0),
        Item(key=("s", "d"), label=0, human=3.0),
    ]
    scores = [0.9, 0.9, 0.9, 0.2, 0.4, 0.8, float("nan")]
    out = evaluate_group(items, scores, n_resamples=0)
    assert out["n"] == 7 and out["n_failed"] == 1
    assert out["n_distinct"] == 5 and out["n_distinct_scored"] == 4
    assert out["n_distinct_failed"] == 1 and out["n_roc_auc"] == 4
    assert out["n_graded"] == 6  # the correlations drop the unscored row
    result = {"datasets": {"d": {"metrics": {"m": {"overall": out}}}}}
    assert "| d | m | 4 distinct (7 rows, 1 failed) |" in markdown_report(result)


# ---------------------------------------------------------------- 8. target precision


def test_target_precision_reached_only_by_flagging_everything_is_refused(tmp_path) -> None:
    s = [0.1, 0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    y = [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]  # 3 of 10 unfaithful, all scored above the faithful
    # flagging 9 reaches 2/9 = 0.222; only flagging all 10 reaches 0.25 or 0.3
    for p in (0.3, 0.25):
        with pytest.raises(InputError, match="only by flagging every summary.*3 of 10"):
            calibrate(s, y, target_precision=p, n_resamples=0)
    cal = calibrate(s, y, target_precision=0.2, n_resamples=0)  # flagging 9 of 10 reaches it
    assert sum(v < cal.threshold for v in s) == 9
    # a metric whose scores do not separate the classes: its "best" threshold flags everything
    with pytest.raises(InputError, match="only by flagging every summary"):
        calibrate([0.5] * 6, [1, 1, 1, 0, 0, 0], n_resamples=0)
    rows = [_row(i, v, lab) for i, (v, lab) in enumerate(zip(s, y, strict=True))]
    data = _write(tmp_path / "p.jsonl", rows)
    args = ["calibrate", "--data", data, "--metric", NAME, "--no-cache"]
    res = CliRunner().invoke(
        cli, [*args, "--target-precision", "0.3", "--config", str(tmp_path / "f.toml")]
    )
    assert res.exit_code == 2 and "flagging every summary" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "f.toml").exists()


# 12 items, 5 unfaithful (0.417): flagging the 1-10 lowest reaches precision 1.0 down to 0.4,
# flagging 11 only 0.364 and flagging all 12 the share, 0.417.
PRECISION_S = [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
PRECISION_Y = [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0]


def test_target_precision_at_or_below_the_share_uses_a_threshold_that_passes_some(
    tmp_path,
) -> None:
    """P = 0.4 is below the unfaithful share, yet thresholds flagging 1-10 items reach it: the
    highest of them is taken, not the flag-everything one (nor a refusal)."""
    cal = calibrate(PRECISION_S, PRECISION_Y, target_precision=0.4, n_resamples=50)
    assert sum(v < cal.threshold for v in PRECISION_S) == 10  # 0.7 < threshold <= 0.8
    assert 0.7 < cal.threshold < 0.8 and cal.precision_unfaithful == pytest.approx(0.4)
    assert cal.recall_unfaithful == pytest.approx(0.8)
    many = calibrate(PRECISION_S, PRECISION_Y, target_precision=0.8, n_resamples=0)
    assert sum(v < many.threshold for v in PRECISION_S) == 5  # 4/4 and 4/5 reach 0.8: 5
    rows = [
        _row(i, v, lab) for i, (v, lab) in enumerate(zip(PRECISION_S, PRECISION_Y, strict=True))
    ]
    data = _write(tmp_path / "p.jsonl", rows)
    res = CliRunner().invoke(
        cli,
        ["calibrate", "--data", data, "--metric", NAME, "--no-cache", "--target-precision", "0.4"]
        + ["--config", str(tmp_path / "f.toml"), "--resamples", "0"],
    )
    assert res.exit_code == 0, res.output
    written = load_config(tmp_path / "f.toml").thresholds[NAME]
    assert 0.7 < written <= 0.8
    helptext = CliRunner().invoke(cli, ["calibrate", "--help"]).stdout
    assert "passes at least one summary" in " ".join(helptext.split())


# ---------------------------------------------------------------- zero-width intervals


def test_calibrate_gives_no_zero_width_interval_from_few_items() -> None:
    cal = calibrate([0.2] * 4 + [0.8] * 5, [0] * 4 + [1] * 5, n_resamples=100)
    assert all(math.isnan(v) for v in cal.ci95)  # every resample: the same midpoint
    many = calibrate([0.1] * 12 + [0.9] * 12, [0] * 12 + [1] * 12, n_resamples=100)
    assert many.ci95 == (0.5, 0.5)  # 12 of each class: a tight interval is kept


# ---------------------------------------------------------------- CI rounding


CLOSE_S = [0.99991, 0.9999, 0.99989, 0.99996, 0.99997, 0.99998]
CLOSE_Y = [0, 0, 0, 1, 1, 1]


def test_ci_is_rounded_outward_at_the_thresholds_places(tmp_path) -> None:
    """Threshold 0.99994, bootstrap interval (0.99992, 0.99994): rounded to 4 places it was
    written as [0.9999, 0.9999], zero width and without the threshold."""
    cal = calibrate(CLOSE_S, CLOSE_Y, metric="m")
    assert cal.threshold == 0.99994
    lo, hi = cal.ci95
    assert lo < hi and lo <= cal.threshold <= hi
    assert (lo, hi) == (0.99992, 0.99994)  # 5 places, as the threshold
    cfg = load_config(write_calibration(tmp_path / "faithgate.toml", cal))
    written = cfg.calibration["m"]["ci95"]
    assert written == [lo, hi] and written[0] <= cfg.thresholds["m"] <= written[1]


def test_ci_rounding_goes_outward() -> None:
    from faithgate.evaluation.calibrate import outward_ci

    assert outward_ci((0.123449, 0.876501), 0.5) == (0.1234, 0.8766)  # never to nearest
    assert outward_ci((0.1 + 0.2, 0.7), 0.5) == (0.3, 0.7)  # float noise is not a place
    assert outward_ci((0.999921, 0.999939), 0.99994) == (0.99992, 0.99994)
    assert all(math.isnan(v) for v in outward_ci((math.nan, math.nan), 0.5))


def test_cli_prints_the_ci_it_writes(tmp_path) -> None:
    rows = [_row(i, v, lab) for i, (v, lab) in enumerate(zip(CLOSE_S, CLOSE_Y, strict=True))]
    data = _write(tmp_path / "close.jsonl", rows)
    path = tmp_path / "f.toml"
    args = ["calibrate", "--data", data, "--metric", NAME, "--no-cache", "--config", str(path)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    prov = load_config(path).calibration[NAME]
    assert prov["threshold"] == 0.99994 and prov["ci95"] == [0.99992, 0.99994]
    assert "threshold 0.99994 (95% CI 0.99992-0.99994)" in res.stdout
