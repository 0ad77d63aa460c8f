"""``write_calibration`` (``faithgate calibrate``) on configurations written with TOML dotted
keys and inline tables, and its safety net.

tomlkit, given a table made with dotted keys (``faithgate.outputs = ...`` under ``[tool]``), put
the header of the calibration table it added before the dotted keys that followed, which then
belonged to the new table: ``[faithgate.calibration.<m>]`` became a top-level table holding
``faithgate.outputs`` and the threshold, exit 0, and the next ``check`` had "nothing to gate".
Now every edit is parsed again (tomllib, as the gate reads it, and tomlkit) and written only
when it reads as the old file with just the calibrated keys set; otherwise calibrate refuses
(exit 2), the file byte for byte as it was.

An invalid file was reported in tomlkit's words (``Unexpected character: '\\x00' at line 1 col
0`` for ``metrics = [``); it is reported as the gate reports it.
"""

from __future__ import annotations

import copy
import json
import math
import tomllib
from pathlib import Path

import gate_fakes  # noqa: F401 - registers the test metric gate_fake
import pytest
from calibration_records import calibration
from click.testing import CliRunner

from faithgate.cli import cli
from faithgate.config import load_config
from faithgate.errors import ConfigError, InputError
from faithgate.evaluation import calibrate as calibrate_module
from faithgate.evaluation.calibrate import (
    Calibration,
    check_calibration_target,
    write_calibration,
)


def _cal(metric: str = "gate_fake", threshold: float = 0.55123) -> Calibration:
    return calibration(
        metric, threshold, settings_hash="gate_fake:abc", cv_balanced_accuracy=0.7, cv_folds=5
    )


def _gate_keys(data: dict, name: str) -> dict:
    return data["tool"]["faithgate"] if name == "pyproject.toml" else data


def _written_as_asked(before: dict, after: dict, name: str, cals: list[Calibration]) -> None:
    """``after`` is ``before`` with only the calibrated keys set: each metric in ``metrics``,
    its threshold and its calibration table; every other key and value as it was."""
    expected = copy.deepcopy(before)
    root = _gate_keys(expected, name)
    for cal in cals:
        if cal.metric not in root["metrics"]:
            root["metrics"].append(cal.metric)
        root.setdefault("thresholds", {})[cal.metric] = cal.threshold
    written = _gate_keys(after, name)
    for cal in cals:
        entry = written["calibration"][cal.metric]
        assert entry["threshold"] == cal.threshold and entry["n"] == cal.n
        assert entry["settings_hash"] == cal.settings_hash and entry["cv_folds"] == 5
        root.setdefault("calibration", {})[cal.metric] = entry
    # A NaN of the user's (never equal to itself) kept as NaN.
    odd = [d.get("project", {}).pop("odd", None) for d in (expected, after)]
    assert (odd[0] is None) == (odd[1] is None) and all(x is None or math.isnan(x) for x in odd)
    assert after == expected


DOTTED = [
    # The reviewer's file: every key of [tool.faithgate] dotted under [tool].
    (
        "pyproject.toml",
        '[tool]\nfaithgate.metrics = ["gate_fake"]\nfaithgate.outputs = "outputs.jsonl"\n'
        "faithgate.thresholds.gate_fake = 0.2\n",
    ),
    # Dotted under [tool], another table after it.
    (
        "pyproject.toml",
        '[tool]\nfaithgate.metrics = ["gate_fake"]\nfaithgate.outputs = "outputs.jsonl"\n\n'
        '[project]\nname = "x"\n',
    ),
    # Dotted from the top level.
    (
        "pyproject.toml",
        'tool.faithgate.metrics = ["gate_fake"]\ntool.faithgate.outputs = "outputs.jsonl"\n'
        'tool.faithgate.thresholds.gate_fake = 0.2\n\n[project]\nname = "x"\n',
    ),
    # [tool] holding other tools' dotted keys and no faithgate yet: one is added.
    ("pyproject.toml", '[tool]\nruff.line-length = 100\nblack.target = "py311"\n'),
    # faithgate.toml: a dotted calibration before other keys.
    (
        "faithgate.toml",
        'metrics = ["gate_fake"]\ncalibration.x = 1\nthresholds.gate_fake = 0.2\n'
        'outputs = "outputs.jsonl"\n',
    ),
    # faithgate.toml: an earlier calibration of the metric written with dotted keys.
    (
        "faithgate.toml",
        'metrics = ["gate_fake"]\ncalibration.gate_fake.threshold = 0.1\n'
        'calibration.gate_fake.n = 3\nthresholds.gate_fake = 0.2\noutputs = "outputs.jsonl"\n',
    ),
    # Inline tables: no header can go inside them.
    (
        "pyproject.toml",
        '[tool]\nfaithgate = { metrics = ["gate_fake"], outputs = "outputs.jsonl" }\n',
    ),
    (
        "faithgate.toml",
        'metrics = ["gate_fake"]\nthresholds = { gate_fake = 0.2 }\ncalibration = { x = 1 }\n'
        'outputs = "outputs.jsonl"\n',
    ),
]

MIXED = [
    # [tool.faithgate] as a table, its subtables dotted inside it, a table after it.
    (
        "pyproject.toml",
        '[tool.faithgate]\nmetrics = ["gate_fake"]\nthresholds.gate_fake = 0.2\n'
        'outputs = "outputs.jsonl"\ncalibration.x.a = 1\nrules.min_pass_rate = 1\n\n'
        "[tool.ruff]\nline-length = 100\n",
    ),
    # faithgate.toml: dotted keys at the top level, then tables.
    (
        "faithgate.toml",
        'metrics = ["gate_fake"]\nthresholds.gate_fake = 0.2\noutputs = "outputs.jsonl"\n'
        "[rules]\nmin_pass_rate = 1\n\n[calibration.other]\nthreshold = 0.3\n",
    ),
    # A pyproject.toml mixing dotted [tool] keys with [tool.faithgate.*] tables, CRLF and a BOM.
    (
        "pyproject.toml",
        '\ufeff[tool]\r\nfaithgate.metrics = ["gate_fake"]\r\nfaithgate.outputs = "outputs.jsonl"'
        '\r\n\r\n[tool.faithgate.rules]\r\nmin_pass_rate = 1\r\n\r\n[project]\r\nname = "x"\r\n'
        "when = 1979-05-27T07:32:00-08:00\r\nodd = nan\r\n",
    ),
    # CRLF with multi-line strings (black's extend-exclude, a description): tomllib reads their
    # CRLF as LF and tomlkit keeps it, so the read-back refused every such file.
    (
        "pyproject.toml",
        '[tool.black]\r\nextend-exclude = """\r\n/build/\r\n"""\r\n\r\n[project]\r\n'
        "description = '''\r\nTwo\r\nlines'''\r\n\r\n[tool.faithgate]\r\n"
        'metrics = ["gate_fake"]\r\noutputs = "outputs.jsonl"\r\n',
    ),
]


@pytest.mark.parametrize(("name", "text"), DOTTED + MIXED)
def test_dotted_keys_stay_where_they_were(tmp_path, name, text) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode())
    before = tomllib.loads(text.removeprefix("\ufeff"))
    had_outputs = "outputs" in str(before)
    check_calibration_target(path)  # writable: not refused before scoring
    assert path.read_bytes() == text.encode()  # and not written by the check
    cals = [_cal()]
    write_calibration(path, cals[0])
    after = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    if name == "pyproject.toml" and "faithgate" not in before["tool"]:  # added, as a new one
        before["tool"]["faithgate"] = {"metrics": ["gate_fake"]}
    _written_as_asked(before, after, name, cals)
    # Again, for another metric and the same one at another threshold: still only those keys.
    cals = [_cal("other", 0.25), _cal("gate_fake", 0.75)]
    for cal in cals:
        write_calibration(path, cal)
    after = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    _written_as_asked(before, after, name, cals)
    # And the gate reads what was written, its outputs where the user put them.
    config = load_config(path)
    assert config.thresholds["gate_fake"] == 0.75 and config.thresholds["other"] == 0.25
    assert config.calibration["gate_fake"]["threshold"] == 0.75
    if had_outputs:
        assert config.outputs is not None and Path(config.outputs).name == "outputs.jsonl"
    # The file's line endings and byte order mark stay its own.
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") == text.startswith("\ufeff")
    if "\r\n" in text:
        assert raw.count(b"\n") == raw.count(b"\r\n")


def test_the_dotted_file_of_the_report_keeps_its_keys_in_tool_faithgate(tmp_path) -> None:
    """The reviewer's file, as written: no top-level ``faithgate`` table, ``outputs`` and the
    threshold still dotted keys of ``[tool]``, the calibration under ``tool.faithgate``."""
    path = tmp_path / "pyproject.toml"
    path.write_text(DOTTED[0][1])
    write_calibration(path, _cal())
    text = path.read_text()
    data = tomllib.loads(text)
    assert list(data) == ["tool"] and list(data["tool"]) == ["faithgate"]
    assert text.startswith(
        '[tool]\nfaithgate.metrics = ["gate_fake"]\nfaithgate.outputs = "outputs.jsonl"\n'
        "faithgate.thresholds.gate_fake = 0.55123\n\n[tool.faithgate.calibration.gate_fake]\n"
    )


def test_the_file_is_refused_unchanged_when_no_edit_reads_back_as_asked(
    tmp_path, monkeypatch
) -> None:
    """The safety net: an edit that moved a user's key (as tomlkit did with dotted keys) or
    that does not hold the calibration is never written; one line naming the file, exit 2."""
    path = tmp_path / "pyproject.toml"
    original = DOTTED[0][1].encode()
    path.write_bytes(original)

    def moved(doc, plan):  # the old corruption: faithgate.outputs under the new table
        return (
            '[tool]\nfaithgate.metrics = ["gate_fake"]\n\n[faithgate.calibration.gate_fake]\n'
            'threshold = 0.5\nfaithgate.outputs = "outputs.jsonl"\n'
            "faithgate.thresholds.gate_fake = 0.5\n"
        )

    def dropped(doc, plan):  # the user's keys kept, the threshold not written
        return DOTTED[0][1]

    def broken(doc, plan):  # not TOML at all
        return "[tool]\n[tool]\n"

    for edit in ("_edit_in_place", "_edit_appending", "_edit_inline"):
        monkeypatch.setattr(calibrate_module, edit, moved)
    monkeypatch.setattr(calibrate_module, "_edit_appending", dropped)
    monkeypatch.setattr(calibrate_module, "_edit_inline", broken)
    for call in (lambda: write_calibration(path, _cal()), lambda: check_calibration_target(path)):
        with pytest.raises(InputError) as err:
            call()
        message = str(err.value)
        assert message.startswith(f"{path}: cannot add the calibration") and "\n" not in message
        assert "left unchanged" in message and err.value.exit_code == 2
        assert path.read_bytes() == original

    # Through the CLI: exit 2, one line, before anything is scored, the file as it was.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    _labelled(tmp_path / "l.jsonl")
    res = CliRunner().invoke(
        cli, ["calibrate", "--data", "l.jsonl", "--metric", "gate_fake", "--resamples", "0"]
    )
    assert res.exit_code == 2, res.output
    assert "cannot add the calibration" in res.output and "Traceback" not in res.output
    assert path.read_bytes() == original


def _labelled(path: Path) -> None:
    rows = [
        {"id": f"f{i}", "source": "The source.", "summary": f"0.{9 - i} good {i}.", "label": 1}
        for i in range(4)
    ] + [
        {"id": f"u{i}", "source": "The source.", "summary": f"0.{i + 1} bad {i}.", "label": 0}
        for i in range(4)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(("name", "text"), [DOTTED[0], DOTTED[2], DOTTED[4]])
def test_calibrate_then_check_gates_with_the_users_outputs(tmp_path, monkeypatch, name, text):
    """The report's sequence: calibrate (exit 0), then check, which found "nothing to gate"
    (exit 2) once calibrate had moved ``outputs``; now it gates at the calibrated threshold."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    (tmp_path / name).write_text(text)
    _labelled(tmp_path / "l.jsonl")
    (tmp_path / "outputs.jsonl").write_text(
        json.dumps({"id": "a", "source": "The source.", "summary": "0.3 low."}) + "\n"
    )
    runner = CliRunner()
    args = ["--data", "l.jsonl", "--metric", "gate_fake", "--resamples", "0", "--no-cache"]
    res = runner.invoke(cli, ["calibrate", *args])
    assert res.exit_code == 0, res.output
    threshold = load_config(tmp_path / name).thresholds["gate_fake"]
    assert 0.4 < threshold <= 0.6  # between the labels: 0.3 now fails, 0.2 passed
    res = runner.invoke(cli, ["check", "--no-cache"])
    assert res.exit_code == 1, res.output  # a gate that ran and failed, not a usage error
    assert "nothing to gate" not in res.output and "0/1 examples pass" in res.output


def test_a_faithgate_toml_with_a_tool_faithgate_table_is_written_there(tmp_path, monkeypatch):
    """The gate reads [tool.faithgate] in a faithgate.toml too; calibrate wrote top-level keys
    beside it (and the default selection), and the gate then refused the file as mixing both
    forms (exit 2)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    (tmp_path / "faithgate.toml").write_text(
        '[tool.faithgate]\nmetrics = ["gate_fake"]\noutputs = "outputs.jsonl"\n'
        "[tool.faithgate.thresholds]\ngate_fake = 0.1\n"
    )
    _labelled(tmp_path / "l.jsonl")
    (tmp_path / "outputs.jsonl").write_text(
        json.dumps({"id": "a", "source": "The source.", "summary": "0.3 low."}) + "\n"
    )
    runner = CliRunner()
    args = ["--data", "l.jsonl", "--metric", "gate_fake", "--resamples", "0", "--no-cache"]
    assert runner.invoke(cli, ["calibrate", *args]).exit_code == 0
    data = tomllib.loads((tmp_path / "faithgate.toml").read_text())
    assert set(data) == {"tool"}  # nothing at the top level
    assert data["tool"]["faithgate"]["metrics"] == ["gate_fake"]  # the selection kept
    assert 0.4 < data["tool"]["faithgate"]["thresholds"]["gate_fake"] <= 0.6
    res = runner.invoke(cli, ["check", "--no-cache"])
    assert res.exit_code == 1 and "0/1 examples pass" in res.output, res.output


def test_invalid_toml_is_reported_as_the_gate_reports_it(tmp_path) -> None:
    """``metrics = [`` was "not valid TOML (Unexpected character: '\\x00' at line 1 col 0)"
    (tomlkit's words; the file has no NUL) from calibrate, and what tomllib says from check."""
    path = tmp_path / "faithgate.toml"
    path.write_text("metrics = [\n")
    with pytest.raises(ConfigError) as gate:
        load_config(path)
    for call in (lambda: write_calibration(path, _cal()), lambda: check_calibration_target(path)):
        with pytest.raises(InputError) as err:
            call()
        assert str(err.value) == str(gate.value)
        assert "invalid TOML (" in str(err.value) and "\\x00" not in str(err.value)
        assert err.value.exit_code == 2
    assert path.read_text() == "metrics = [\n"


def test_invalid_toml_through_the_cli(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    (tmp_path / "faithgate.toml").write_text("metrics = [\n")
    _labelled(tmp_path / "l.jsonl")
    runner = CliRunner()
    # --config: the file is not read as the gate's configuration first, only as calibrate's
    # target (where tomlkit's message came through).
    args = ["--data", "l.jsonl", "--metric", "gate_fake", "--resamples", "0"]
    res = runner.invoke(cli, ["calibrate", *args, "--config", "faithgate.toml"])
    check = runner.invoke(cli, ["check", "--no-cache"])
    assert res.exit_code == check.exit_code == 2
    assert "\\x00" not in res.output and "invalid TOML (" in res.output
    # The same words (the file named as given: relative with --config, absolute when found).
    reason = "faithgate.toml: invalid TOML (Invalid value (at end of document))"
    assert res.output.strip() == f"faithgate: {reason}"
    assert check.output.strip().endswith(reason)
