"""Threshold calibration on synthetic scores with a known best threshold; config writing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from calibration_records import calibration

from faithgate.config import find_config_file, load_config
from faithgate.errors import InputError
from faithgate.evaluation.calibrate import (
    CHANCE_BALANCED_ACCURACY,
    calibrate,
    chance_warning,
    default_config_path,
    precision_threshold,
    write_calibration,
)


def synthetic(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Faithful ~ U(0.45, 1), unfaithful ~ U(0, 0.55): the best threshold lies in the
    overlap [0.45, 0.55], and the population optimum is its middle, 0.5."""
    rng = np.random.default_rng(seed)
    y = np.r_[np.ones(n // 2, dtype=int), np.zeros(n // 2, dtype=int)]
    s = np.r_[rng.uniform(0.45, 1.0, n // 2), rng.uniform(0.0, 0.55, n // 2)]
    return s, y


def test_balanced_accuracy_threshold_is_the_known_optimum() -> None:
    s, y = synthetic()
    cal = calibrate(s, y, metric="m", n_resamples=200)
    assert 0.45 <= cal.threshold <= 0.55
    assert cal.ci95[0] <= cal.threshold <= cal.ci95[1]
    assert cal.ci95[0] > 0.4 and cal.ci95[1] < 0.6
    # population balanced accuracy at 0.5: 1 - (0.05/0.55)/2 - (0.05/0.55)/2 ~ 0.909
    assert cal.balanced_accuracy > 0.88
    assert cal.objective == "balanced_accuracy"
    assert cal.n == 400 and cal.n_faithful == 200 and cal.n_unfaithful == 200


def test_perfectly_separable_scores() -> None:
    s = [0.1, 0.2, 0.3, 0.7, 0.8]
    y = [0, 0, 0, 1, 1]
    cal = calibrate(s, y, n_resamples=50)
    assert cal.threshold == pytest.approx(0.5)  # midpoint between 0.3 and 0.7
    assert cal.balanced_accuracy == 1.0
    assert cal.precision_unfaithful == 1.0 and cal.recall_unfaithful == 1.0


def test_target_precision() -> None:
    # sorted: 0.1(0) 0.2(0) 0.3(1) 0.4(0) 0.5(1) 0.6(1)
    s = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    y = [0, 0, 1, 0, 1, 1]
    # flag < 0.25: precision 2/2; flag < 0.35: 2/3; flag < 0.45: 3/4
    assert precision_threshold(s, y, 1.0) == pytest.approx(0.25)
    assert precision_threshold(s, y, 0.75) == pytest.approx(0.45)
    cal = calibrate(s, y, target_precision=0.75, n_resamples=50)
    assert cal.threshold == pytest.approx(0.45)
    assert cal.precision_unfaithful == pytest.approx(0.75)
    assert cal.objective == "precision_unfaithful>=0.75"
    # an unreachable precision is a one-line input error
    with pytest.raises(InputError, match="reaches precision"):
        calibrate([0.1, 0.2], [1, 0], target_precision=0.9, n_resamples=10)


def test_needs_both_classes_and_ignores_nan() -> None:
    with pytest.raises(InputError, match="faithful"):
        calibrate([0.1, 0.2], [1, 1])
    cal = calibrate([0.1, float("nan"), 0.9], [0, 0, 1], n_resamples=20)
    assert cal.n == 2 and 0.1 < cal.threshold < 0.9


def test_a_constant_metric_is_refused_at_any_magnitude() -> None:
    """At 1e12 the pad above the highest score was below one float step, so the "flag none"
    candidate equalled the scores and a constant metric was calibrated to pass everything."""
    from faithgate.evaluation.meta import candidate_thresholds

    for value in (0.5, 1e12, -1e12, 1e300):
        t = candidate_thresholds([value, value])
        assert t[0] < value < t[-1]
        with pytest.raises(InputError, match="flagging every summary"):
            calibrate([value] * 6, [1, 1, 1, 0, 0, 0], min_per_class=3)


def test_write_into_pyproject_preserves_comments(tmp_path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text(
        '[project]\nname = "x"  # keep me\n\n[tool.faithgate]\n# my comment\nmetrics = ["ner"]\n'
        "[tool.faithgate.thresholds]\nner = 0.3\n"
    )
    write_calibration(path, calibration())
    text = path.read_text()
    assert "# keep me" in text and "# my comment" in text
    cfg = load_config(path)
    assert cfg.thresholds == {"ner": 0.3, "bertscore": 0.55123}
    assert list(cfg.metrics) == ["ner", "bertscore"]
    prov = cfg.calibration["bertscore"]
    assert prov["threshold"] == 0.55123 and prov["ci95"] == [0.51, 0.58]
    assert prov["n"] == 400 and prov["settings_hash"] == "bertscore:abc"
    # re-calibrating replaces, never duplicates
    write_calibration(path, calibration())
    assert path.read_text().count("[tool.faithgate.calibration.bertscore]") == 1


def test_write_keeps_the_files_line_endings(tmp_path) -> None:
    """A CRLF file stays CRLF (every line of it used to change to LF), an LF file LF."""
    for eol in ("\r\n", "\n"):
        path = tmp_path / "faithgate.toml"
        original = f'metrics = ["ner"]{eol}[thresholds]{eol}ner = 0.3{eol}'
        path.write_bytes(original.encode())
        write_calibration(path, calibration())
        raw = path.read_bytes().decode()
        assert f"[thresholds]{eol}ner = 0.3{eol}" in raw
        assert raw.count(eol) == raw.count("\n") and raw.count("\n") > 3
        assert load_config(path).thresholds == {"ner": 0.3, "bertscore": 0.55123}


def test_a_byte_order_mark_is_read_past_and_kept(tmp_path) -> None:
    """A configuration starting with a UTF-8 BOM (as Windows editors write it) was "invalid
    TOML" to the gate and to calibrate, while JSONL and CSV files with one were read."""
    for name in ("faithgate.toml", "pyproject.toml"):
        path = tmp_path / name
        table = "[tool.faithgate]\n" if name == "pyproject.toml" else ""
        path.write_bytes(b"\xef\xbb\xbf" + f'{table}metrics = ["ner"]\n'.encode())
        assert list(load_config(path).metrics) == ["ner"]
        write_calibration(path, calibration())
        assert path.read_bytes().startswith(b"\xef\xbb\xbf") and "\ufeff" not in path.read_text(
            encoding="utf-8-sig"
        )
        assert load_config(path).thresholds == {"bertscore": 0.55123}


def test_write_new_faithgate_toml(tmp_path) -> None:
    assert default_config_path(tmp_path) == tmp_path / "faithgate.toml"
    path = write_calibration(default_config_path(tmp_path), calibration())
    cfg = load_config(path)
    assert cfg.thresholds == {"bertscore": 0.55123}
    assert cfg.calibration["bertscore"]["objective"] == "balanced_accuracy"
    assert not math.isnan(cfg.thresholds["bertscore"])
    (tmp_path / "pyproject.toml").write_text("")
    assert default_config_path(tmp_path) == tmp_path / "faithgate.toml"  # existing file wins


TOOL_TABLE = '[project]\nname = "x"\n\n[tool.faithgate]\nmetrics = ["ner"]\n'
NO_TABLE = '[project]\nname = "x"\n'


@pytest.mark.parametrize(
    ("files", "cwd", "expected"),
    [
        # A subdirectory of a project: the project's file, not a new one beside the user.
        ({"faithgate.toml": "metrics = ['ner']\n"}, "sub", "faithgate.toml"),
        # A pyproject.toml without [tool.faithgate] is not a configuration: the parent's is.
        ({"faithgate.toml": "", "sub/pyproject.toml": NO_TABLE}, "sub", "faithgate.toml"),
        # In one directory faithgate.toml first, then a pyproject.toml with the table.
        ({"faithgate.toml": "", "pyproject.toml": TOOL_TABLE}, ".", "faithgate.toml"),
        ({"pyproject.toml": TOOL_TABLE, "sub/faithgate.toml": ""}, "sub", "sub/faithgate.toml"),
        ({"pyproject.toml": TOOL_TABLE, "sub/pyproject.toml": NO_TABLE}, "sub", "pyproject.toml"),
        # No configuration anywhere: the directory's pyproject.toml, else a new faithgate.toml.
        ({"sub/pyproject.toml": NO_TABLE}, "sub", "sub/pyproject.toml"),
        ({}, "sub", "sub/faithgate.toml"),
    ],
)
def test_calibrate_writes_where_load_config_reads(tmp_path, files, cwd, expected) -> None:
    """``calibrate`` picks its file by ``load_config``'s rule (``find_config_file``), so the
    gate run from the same directory uses the threshold just written."""
    (tmp_path / "sub").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    start = tmp_path / cwd
    target = default_config_path(start)
    assert target.resolve() == (tmp_path / expected).resolve()
    found = find_config_file(start)
    if found is not None:
        assert found == target and load_config(start=start).source == found
    write_calibration(target, calibration())
    config = load_config(start=start)
    assert config.source == target.resolve()
    assert config.thresholds["bertscore"] == 0.55123
    assert config.calibration["bertscore"]["settings_hash"] == "bertscore:abc"


def test_bad_toml_is_an_input_error(tmp_path) -> None:
    bad = tmp_path / "faithgate.toml"
    bad.write_text("metrics = [\n")
    # As the gate says it (tomllib's message), not tomlkit's "Unexpected character: '\x00'".
    with pytest.raises(InputError, match=r"invalid TOML \(Invalid value \(at end of document"):
        write_calibration(bad, calibration())


def test_a_threshold_no_better_than_chance_out_of_sample_is_warned() -> None:
    """``calibrate`` wrote a threshold whose cross-validated balanced accuracy was 0.455
    (0.670 in-sample, which flatters it) and said nothing."""
    scores = [1.0, 0.667, 0.875, 0.5, 0.444, 0, 0, 0, 0, 0]
    cal = calibrate(scores, [1, 1, 0, 0, 1, 1, 1, 0, 0, 0], metric="sentsim")
    assert cal.balanced_accuracy == pytest.approx(0.6)
    assert cal.cv_balanced_accuracy == pytest.approx(0.4)
    assert chance_warning(cal) == (
        "sentsim does not separate these labels better than chance (cross-validated balanced "
        "accuracy 0.400); the threshold may fail faithful outputs"
    )
    for cv, warned in ((0.455, True), (CHANCE_BALANCED_ACCURACY, True), (0.56, False)):
        cal = calibration(cv_balanced_accuracy=cv, cv_folds=4)
        assert (chance_warning(cal) is not None) == warned
    assert chance_warning(calibration()) is None  # not cross-validated: nothing to judge by
    s, y = synthetic(200)
    assert chance_warning(calibrate(s, y, n_resamples=0)) is None  # separable: no warning


def test_the_calibration_table_is_followed_by_a_blank_line(tmp_path) -> None:
    """``[tool.faithgate.calibration.<m>]`` was inserted right before ``[tool.ruff]``."""
    path = tmp_path / "pyproject.toml"
    original = (
        '[project]\nname = "x"\n\n[tool.faithgate]\nmetrics = ["ner"]\n\n'
        "[tool.faithgate.thresholds]\nner = 0.3\n\n[tool.ruff]\nline-length = 100\n"
    )
    path.write_text(original)
    write_calibration(path, calibration())
    write_calibration(path, calibration("overlap", settings_hash="bertscore:abc"))
    write_calibration(path, calibration())  # replaced in place
    text = path.read_text()
    assert "\n\n[tool.ruff]\nline-length = 100\n" in text
    assert 'settings_hash = "bertscore:abc"\n\n[tool.faithgate.calibration.overlap]' in text
    assert "\n\n\n" not in text and text.endswith("line-length = 100\n")
    for header in [line for line in text.splitlines() if line.startswith("[")][1:]:
        assert f"\n\n{header}\n" in text, header
    # At the end of a file: no blank line left behind it.
    new = tmp_path / "faithgate.toml"
    write_calibration(new, calibration())
    assert new.read_text().endswith('settings_hash = "bertscore:abc"\n')
    assert load_config(path).calibration["bertscore"]["n"] == 400


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        # No `metrics` key: the gate runs the default selection, which is kept.
        (
            "faithgate.toml",
            "[rules]\nmin_mean = { ensemble = 0.1 }\n",
            ["ensemble", "facts", "bertscore"],
        ),
        (
            "pyproject.toml",
            "[tool.faithgate]\n[tool.faithgate.rules]\nmin_pass_rate = 0.5\n",
            ["ensemble", "facts", "bertscore"],
        ),  # fmt: skip
        # One name as a string (accepted for a list of one): both, as a list.
        ("faithgate.toml", 'metrics = "sentsim"\n', ["sentsim", "bertscore"]),
        ("faithgate.toml", 'metrics = "bertscore"\n', ["bertscore"]),
        ("faithgate.toml", 'metrics = ["ner", "bertscore"]\n', ["ner", "bertscore"]),
        # A configuration written anew selects the calibrated metric.
        ("pyproject.toml", '[project]\nname = "x"\n', ["bertscore"]),
    ],
)
def test_write_adds_the_metric_to_the_selection_the_gate_runs(tmp_path, name, text, expected):
    path = tmp_path / name
    path.write_text(text)
    write_calibration(path, calibration())
    cfg = load_config(path)
    assert list(cfg.metrics) == expected
    assert cfg.thresholds["bertscore"] == 0.55123


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("pyproject.toml", 'tool = "x"\n', "tool must be a table"),
        ("pyproject.toml", "[tool]\nfaithgate = 3\n", "tool.faithgate must be a table"),
        ("faithgate.toml", "metrics = 3\n", "metrics must be a metric name or a list"),
        ("faithgate.toml", "thresholds = 0.5\n", "thresholds must be a table"),
        ("faithgate.toml", "calibration = [1]\n", "calibration must be a table"),
    ],
)
def test_a_configuration_it_cannot_write_into_is_refused_before_scoring(
    tmp_path, name, text, message
):
    from faithgate.evaluation.calibrate import check_calibration_target

    path = tmp_path / name
    path.write_text(text)
    for call in (check_calibration_target, lambda p: write_calibration(p, calibration())):
        with pytest.raises(InputError, match=message):
            call(path)
    assert path.read_text() == text
