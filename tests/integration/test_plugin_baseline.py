"""``pytest --faithgate`` and baselines that are missing or name other outputs (review s19).

Inner pytest runs (``pytester``, in a subprocess) of the ``toy`` project of ``test_plugin``.
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
