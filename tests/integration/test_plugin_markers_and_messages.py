"""The pytest plugin fails closed and speaks pytest's language.

Each test is an inner pytest run (``pytester``, in this process unless under xdist) of a small
project with the ``toy`` metric of ``test_plugin``: a skip raised while scoring fails the gate
or the check; a marker's threshold is its metric's only; margins and rates out of range, values
of the wrong type and user text in messages are one escaped line each; reports never replace
pytest's JUnit file; gate options without ``--faithgate`` are warned about; messages name the
plugin's options; checks in fixtures and the library's log warnings reach the ``faithgate``
summary.
"""

from __future__ import annotations

import re

import pytest
from gh_commands import parse_output
from test_plugin import GATE_OUTPUTS, PLAIN_TEST, SRC, TOY_CONFTEST, gate_toml, run

pytest_plugins = ["pytester"]

# Beside ``toy``: ``toy2`` and ``toy3`` (toy under other names), and two metrics that cannot
# be built here and say so the pytest way (an optional dependency, an expected failure).
CONFTEST = (
    TOY_CONFTEST
    + """
import pytest


@register
class Toy2(Toy):
    name = "toy2"


@register
class Toy3(Toy):
    name = "toy3"


@register
class NeedsGpu(Toy):
    name = "needs_gpu"

    def __init__(self, **settings):
        pytest.importorskip("no_such_module_for_faithgate")
        super().__init__(**settings)


@register
class Xfails(Toy):
    name = "xfails"

    def __init__(self, **settings):
        pytest.xfail("not on this machine")
"""
)


def project(pytester: pytest.Pytester, tests: str, **files: str) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=tests)
    for name, text in files.items():
        (pytester.path / name).write_text(text, encoding="utf-8")


def test_a_skip_while_scoring_fails_the_gate_and_the_check(pytester: pytest.Pytester) -> None:
    """pytest.importorskip / pytest.xfail in a metric made the gate item (and a fixture check)
    "skipped": the session passed without a verdict, with or without xdist."""
    toml = 'metrics = ["needs_gpu"]\noutputs = "outputs.jsonl"\n[thresholds]\nneeds_gpu = 0.5\n'
    tests = f"""
SRC = {SRC!r}

def test_skip_in_a_check(faithgate):
    faithgate.score(SRC, "The cat sat.", metric="needs_gpu")

def test_xfail_in_a_check(faithgate):
    faithgate.score(SRC, "The cat sat.", metric="xfails")
"""
    project(pytester, tests, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": toml})
    result = run(pytester, "--faithgate")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "faithgate: a summarizer or metric tried to skip the gate (could not import "
            "'no_such_module_for_faithgate'*); a gate that cannot score fails",
            "faithgate: metric 'needs_gpu' tried to skip the check (could not import*); a check "
            "that cannot score fails",
            "faithgate: metric 'xfails' tried to xfail the check (not on this machine)*",
        ]
    )
    parallel = run(pytester, "--faithgate", "-n", "2")
    parallel.assert_outcomes(failed=3)
    assert parallel.ret == pytest.ExitCode.TESTS_FAILED


def test_b_i_thresholds_belong_to_their_metric(pytester: pytest.Pytester) -> None:
    """A marker's threshold applied to a call on another metric (toy2's 0.95 became 0.1);
    ``--faithgate-threshold`` applies to the selected metrics, and says so when missing."""
    toml = 'metrics = ["toy"]\n[thresholds]\ntoy = 0.6\ntoy2 = 0.95\n'
    tests = f"""
import pytest

SRC = {SRC!r}
HALF = "The cat sat. The dog flew."  # toy 2/3

@pytest.mark.faithgate(metric="toy", threshold=0.1)
def test_other_metric_keeps_its_threshold(faithgate):
    faithgate.assert_faithful(SRC, HALF, metric="toy2")

@pytest.mark.faithgate(metric="toy", threshold=0.1)
def test_marker_beats_the_option(faithgate):
    faithgate.assert_faithful(SRC, HALF)

def test_option_reaches_a_selected_metric(faithgate):
    faithgate.assert_faithful(SRC, HALF, metric="toy")

def test_no_threshold_for_another_metric(faithgate):
    faithgate.assert_faithful(SRC, HALF, metric="toy3")
"""
    project(pytester, tests, **{"faithgate.toml": toml})
    result = run(pytester, "--faithgate-threshold", "0.7")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "*test_other_metric_keeps_its_threshold - *toy2 = 0.6667 < threshold 0.9500",
            "*test_option_reaches_a_selected_metric - *toy = 0.6667 < threshold 0.7000",
            "faithgate: no threshold for metric 'toy3': pass one to the call "
            "(assert_faithful(..., threshold=X)), mark the test "
            "@pytest.mark.faithgate(metric='toy3', threshold=X), or set thresholds.toy3 in "
            "[tool.faithgate] (--faithgate-threshold applies to the selected metrics only: toy)",
        ]
    )


def test_c_e_ranges_and_types_fail_in_one_line(pytester: pytest.Pytester) -> None:
    """A negative margin passed an unfaithful summary that scores higher, a min_rate out of
    [0, 1] passed anything; a marker's ``models="x"`` or ``types=5`` and a call's
    ``metric=[...]`` were TypeError tracebacks."""
    tests = f"""
import pytest

SRC = {SRC!r}

def test_negative_margin(faithgate):
    faithgate.assert_consistent(SRC, "The dog sat.", "The cat sat.", metric="toy", margin=-5)

@pytest.mark.faithgate(metric="toy", min_rate=-1)
def test_negative_min_rate(faithgate):
    faithgate.assert_consistent_under_perturbation(SRC, "The cat sat on the mat.")

def test_min_rate_over_one(faithgate):
    faithgate.assert_consistent_under_perturbation(
        SRC, "The cat sat on the mat.", metric="toy", min_rate=1.5
    )

@pytest.mark.faithgate(metric="toy", models="x")
def test_models_not_a_dict(faithgate):
    faithgate.score(SRC, "The cat sat.")

@pytest.mark.faithgate(metric="toy", types=5)
def test_types_not_names(faithgate):
    faithgate.assert_consistent_under_perturbation(SRC, "The cat sat on the mat.")

def test_metric_list(faithgate):
    faithgate.score(SRC, "The cat sat.", metric=["toy"])
"""
    project(pytester, tests)
    result = run(pytester)
    result.assert_outcomes(failed=4, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "faithgate: margin must be >= 0, got -5",
            "faithgate: min_rate must be between 0 and 1, got -1",
            "faithgate: min_rate must be between 0 and 1, got 1.5",
            "test_inner.py::test_models_not_a_dict: @pytest.mark.faithgate models= must be a "
            "dict of model role (str) -> model name (str), got str 'x'",
            "test_inner.py::test_types_not_names: @pytest.mark.faithgate types= must be a "
            "perturbation type name or a list of them (str), got int 5",
            "faithgate: metric= must be a metric name (str), got list ['toy']",
        ]
    )
    out = result.stdout.str()
    assert "Traceback" not in out and "TypeError" not in out


def test_d_user_text_in_fixture_failures_is_escaped(pytester: pytest.Pytester) -> None:
    """Marker keys, settings keys, model roles and a configuration's metric_settings key
    reached the failure message raw: an ESC byte, and ``::error::`` at a line's start."""
    toml = 'metrics = ["toy"]\n[metric_settings.toy2]\n"pw\\u001b[31m\\n::error::toml" = 1\n'
    tests = r"""
import pytest

SRC = "The cat sat on the mat."

@pytest.mark.faithgate(**{"x\n::error::key\x1b[31m": 1})
def test_key(faithgate):
    faithgate.score(SRC, "The cat sat.", metric="toy")

@pytest.mark.faithgate(metric="toy", settings={"pow\n::error::setting\x1b[31m": 2})
def test_settings(faithgate):
    faithgate.score(SRC, "The cat sat.")

@pytest.mark.faithgate(metric="toy", models={"emb\n::error::role\x1b[31m": "x"})
def test_models(faithgate):
    faithgate.score(SRC, "The cat sat.")

def test_configuration_key(faithgate):
    faithgate.score(SRC, "The cat sat.", metric="toy2")
"""
    project(pytester, tests, **{"faithgate.toml": toml})
    result = run(pytester)
    result.assert_outcomes(failed=3, errors=1)
    out = result.stdout.str() + result.stderr.str()
    for shown in (
        "x\\n::error::key\\x1b[31m",
        "pow\\n::error::setting\\x1b[31m",
        "emb\\n::error::role\\x1b[31m",
        "pw\\x1b[31m\\n::error::toml",
    ):
        assert shown in out
    assert parse_output(out) == [], out
    assert "\x1b" not in out


def test_e_the_plugin_loaded_twice_runs_once(pytester: pytest.Pytester) -> None:
    """``-p pytest_faithgate.plugin`` or ``pytest_plugins`` beside the installed entry point
    was a pluggy ValueError traceback."""
    project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.6)}
    )
    by_flag = run(pytester, "-p", "pytest_faithgate.plugin", "--faithgate")
    by_flag.assert_outcomes(passed=2)
    assert by_flag.stdout.str().count("faithgate: PASS") == 1
    (pytester.path / "conftest.py").write_text(
        CONFTEST + '\npytest_plugins = ["pytest_faithgate.plugin"]\n', encoding="utf-8"
    )
    by_conftest = run(pytester, "--faithgate")
    by_conftest.assert_outcomes(passed=2)
    assert "ValueError" not in by_conftest.stdout.str() + by_conftest.stderr.str()


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--faithgate-junit", "out.xml", "--junitxml", "out.xml"),
            "the faithgate junit report and the pytest --junitxml file are the same file (*out.xml)*",
        ),
        (
            ("--faithgate-markdown", "r.txt", "--faithgate-html", "r.txt"),
            "the faithgate html report and the faithgate markdown report are the same file*",
        ),
        (
            ("--faithgate-json", ".faithgate/scores.sqlite"),
            "the score cache and the faithgate json report are the same file*",
        ),
    ],
)
def test_f_reports_never_replace_another_output(
    pytester: pytest.Pytester, args: tuple[str, ...], message: str
) -> None:
    """``--faithgate-junit out.xml --junitxml out.xml`` replaced pytest's JUnit file (failures
    "0" of a failing session) with the gate's: refused before anything runs."""
    project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.6)}
    )
    result = run(pytester, "--faithgate", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: faithgate: {message}"])
    assert not (pytester.path / "out.xml").exists()


def test_g_gate_options_without_the_flag_are_warned_about(pytester: pytest.Pytester) -> None:
    project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.8)}
    )
    args = ("--faithgate-junit", "g.xml", "--faithgate-update-baseline")
    result = run(pytester, *args, "--faithgate-min-pass-rate", "1")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*PytestConfigWarning: faithgate: --faithgate-min-pass-rate, "
            "--faithgate-update-baseline, --faithgate-junit given without --faithgate: the gate "
            "does not run, so they have no effect*"
        ]
    )
    assert not (pytester.path / "g.xml").exists()


def test_h_j_k_plugin_words_fixture_phases_and_logged_warnings(pytester: pytest.Pytester):
    """The baseline refusal said "pass --force" (the plugin's is --faithgate-force-baseline);
    checks in a fixture's setup or teardown were left out of the table; the score cache's
    "moved it aside" warning was kept by pytest's log capture."""
    tests = f"""
import pytest

SRC = {SRC!r}

@pytest.fixture
def checked_in_setup(faithgate):  # fails: the test errors in setup, there is no call report
    faithgate.assert_faithful(SRC, "The cat sat. The dog flew.", metric="toy", threshold=0.9)
    yield

@pytest.fixture
def checked_in_teardown(faithgate):  # passes, after the call report
    yield
    faithgate.assert_faithful(SRC, "The cat sat.", metric="toy", threshold=0.5)

def test_setup(checked_in_setup):
    pass

def test_teardown(checked_in_teardown):
    pass
"""
    project(pytester, tests, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.8)})
    (pytester.path / ".faithgate").mkdir()
    (pytester.path / ".faithgate" / "scores.sqlite").write_bytes(b"not a database" * 100)
    result = run(
        pytester, "--faithgate", "--faithgate-baseline", "b.json", "--faithgate-update-baseline"
    )
    result.assert_outcomes(passed=1, failed=1, errors=1)  # failed: the gate
    summary = result.stdout.str().split("= faithgate =", 1)[-1]
    expected = [
        # H: the plugin's option, not the command's --force
        r"fix the failures, or pass --faithgate-force-baseline to record this failing run",
        # J: the checks of a fixture's setup and teardown are in the table
        r"fixture checks: 2, failed: 1",
        r"test_inner.py::test_setup +assert_faithful +toy +0.6667 +0.9000 +FAIL",
        r"test_inner.py::test_teardown +assert_faithful +toy +1.0000 +0.5000 +PASS",
        # K: the library's log warning, escaped, in the faithgate section
        r"faithgate: warning: score cache \S*scores.sqlite is damaged or not a SQLite database "
        r".*moved it to scores.sqlite.corrupt-",
    ]
    missing = [line for line in expected if not re.search(line, summary)]
    assert missing == [], summary


def test_h_configuration_errors_name_the_plugins_options(pytester: pytest.Pytester) -> None:
    project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.8)}
    )
    result = run(pytester, "--faithgate", "--faithgate-threshold", "nan")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: faithgate: option: --faithgate-threshold: expected a finite number, got nan"]
    )


@pytest.mark.parametrize(
    "library, plugin",
    [
        (
            "fix the failures, or pass --force to record this failing run",
            "fix the failures, or pass --faithgate-force-baseline to record this failing run",
        ),
        (
            "cannot use d as the score cache directory: Permission denied (set cache_dir / "
            "--cache-dir, or use --no-cache)",
            "cannot use d as the score cache directory: Permission denied (set cache_dir / "
            "--faithgate-cache FILE, or use --faithgate-no-cache)",
        ),
        (
            "set a threshold (--threshold NAME=X, or [tool.faithgate.thresholds]",
            "set a threshold (--faithgate-threshold X, or [tool.faithgate.thresholds]",
        ),
        (
            "create it from a passing run with `faithgate check --update-baseline`",
            "create it from a passing run with `pytest --faithgate --faithgate-update-baseline`",
        ),
        ("update it with --update-baseline", "update it with --faithgate-update-baseline"),
        (
            "--json at the baseline; --metric-x and a--force",
            "--faithgate-json at the baseline; --metric-x and a--force",
        ),
    ],
)
def test_h_library_flags_become_plugin_options(library: str, plugin: str) -> None:
    from pytest_faithgate.messages import plugin_text

    assert plugin_text(library) == plugin
