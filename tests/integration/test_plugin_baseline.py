"""``pytest --faithgate`` and baselines that are missing or name other outputs (review s19).

Inner pytest runs (``pytester``, in this process) of the ``toy`` project of ``test_plugin``.
"""

from __future__ import annotations

import json

import pytest
from test_plugin import GATE_OUTPUTS, PLAIN_TEST, gate_toml, run, write_project

pytest_plugins = ["pytester"]


def test_an_explicit_baseline_that_does_not_exist_is_a_usage_error(pytester: pytest.Pytester):
    """As ``faithgate check --baseline``: a path named on the command line that does not exist
    is a typo far more often than a first run; it skipped the regression rule and passed."""
    write_project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.6)}
    )
    result = run(pytester, "--faithgate", "--faithgate-baseline", "base.jsn")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: faithgate: no baseline at base.jsn (given with --faithgate-baseline); check "
            "the path, or run with --faithgate-update-baseline to create it"
        ]
    )
    assert "Traceback" not in result.stderr.str()
    # With --faithgate-update-baseline the run creates it.
    created = run(
        pytester, "--faithgate", "--faithgate-baseline", "base.jsn", "--faithgate-update-baseline"
    )
    created.assert_outcomes(passed=2)
    assert (pytester.path / "base.jsn").is_file()


def test_a_threshold_for_no_registered_metric_fails_the_gate_item(pytester: pytest.Pytester):
    toml = gate_toml(0.6).replace("[rules]", "tyo = 0.9\n[rules]")
    write_project(pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": toml})
    result = run(pytester, "--faithgate")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["faithgate: faithgate.toml: thresholds.tyo: no metric is named 'tyo'; did you mean 'toy'?"]
    )


def test_update_baseline_is_written_with_the_reports_as_one_set(pytester: pytest.Pytester):
    """The gate item replaced the baseline, and the reports were written at session end: a
    report that could not be written left a new baseline behind an error saying nothing was
    written. Now the baseline joins the report set: neither, or both."""
    write_project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.6)}
    )
    args = ["--faithgate", "--faithgate-baseline", "base.json", "--faithgate-update-baseline"]
    assert run(pytester, *args).ret == pytest.ExitCode.OK
    base = pytester.path / "base.json"
    data = json.loads(base.read_text())
    data["created"] = "an earlier run"  # a baseline this run would replace
    base.write_text(json.dumps(data))
    previous = base.read_text()
    # After the gate ran and before the reports are written, a directory takes the markdown
    # report's place: that write fails (the checks before the run had found the path free).
    conftest = pytester.path / "conftest.py"
    conftest.write_text(
        conftest.read_text()
        + "\n\nimport pathlib\n\nimport pytest\n\n\n@pytest.hookimpl(tryfirst=True)\n"
        "def pytest_sessionfinish(session):\n"
        "    if pathlib.Path('block').exists():\n"
        "        pathlib.Path('reports/gate.md').unlink()\n"
        "        pathlib.Path('reports/gate.md').mkdir()\n"
    )
    (pytester.path / "block").touch()
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["faithgate: cannot write the markdown report to *"])
    assert "baseline is left unchanged" in result.stdout.str()
    assert "baseline updated" not in result.stdout.str()
    assert base.read_text() == previous
    (pytester.path / "reports" / "gate.md").rmdir()
    (pytester.path / "block").unlink()
    written = run(pytester, *args)
    assert written.ret == pytest.ExitCode.OK
    assert "baseline updated: base.json" in written.stdout.str()
    assert json.loads(base.read_text())["created"] != "an earlier run"


def test_regression_without_a_baseline_path_is_a_usage_error(pytester: pytest.Pytester):
    """As ``faithgate check`` exits 2: rules.regression with no baseline path failed the gate
    item after scoring ("no baseline given"); --faithgate-baseline gives the path."""
    toml = gate_toml(0.6).replace("[rules]\n", "[rules]\nregression = true\n")
    write_project(pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": toml})
    result = run(pytester, "--faithgate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: faithgate: rules.regression needs a baseline to compare with: set 'baseline' "
            "(the path of a previous result JSON) in the configuration, or pass "
            "--faithgate-baseline"
        ]
    )
    args = ["--faithgate", "--faithgate-baseline", "base.json"]
    run(pytester, *args, "--faithgate-update-baseline").assert_outcomes(passed=2)
    run(pytester, *args).assert_outcomes(passed=2)


def test_update_baseline_with_a_new_metric_still_compares_the_others(pytester: pytest.Pytester):
    """As ``faithgate check --update-baseline`` (the same Gate): adding a metric skips only
    that metric's regression; a run that regressed on toy fails and is not written."""
    write_project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.3)}
    )
    args = ["--faithgate", "--faithgate-baseline", "base.json", "--faithgate-update-baseline"]
    run(pytester, *args).assert_outcomes(passed=2)
    base = pytester.path / "base.json"
    recorded = base.read_text()
    # Every toy score drops (a word of each summary is not in the source), yet passes 0.3.
    rows = [json.loads(line) for line in GATE_OUTPUTS.splitlines()]
    for row in rows:
        row["summary"] = row["summary"].replace("sat", "napped").replace("was", "got")
    (pytester.path / "outputs.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    toml = gate_toml(0.3).replace('["toy"]', '["toy", "repetition"]')
    (pytester.path / "faithgate.toml").write_text(toml)
    result = run(pytester, *args)
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert "FAIL: 1 of 4 rules failed (regression[toy]); 3/3 examples pass" in text
    assert "regression[toy]: mean toy dropped by" in text
    assert "the baseline at base.json holds no repetition scores made with these settings" in text
    assert "baseline NOT updated: the gate failed" in text
    assert base.read_text() == recorded
