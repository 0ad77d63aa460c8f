"""``pytest --faithgate`` and baselines that are missing or name other outputs (review s19).

Inner pytest runs (``pytester``, in a subprocess) of the ``toy`` project of ``test_plugin``.
"""

from __future__ import annotations

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
