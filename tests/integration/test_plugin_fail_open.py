"""``pytest --faithgate`` neither passes without gating nor writes over the run's own files.

Inner pytest runs (``pytester``, in this process unless under xdist) of small projects with the
``toy`` metric of ``test_plugin``:

- with nothing to gate (no configuration found, or one without ``outputs`` / ``summarizer``)
  the run passed ("1 passed", exit 0, no report) where ``faithgate check`` exits 2: now the
  gate item ``faithgate[nothing to gate]`` fails with check's reason, and deselecting it
  (``-m "not faithgate_gate"``) runs the other tests alone;
- a gate report (or the baseline being updated) at a test module, a conftest, pytest's ini
  file or another collected test file replaced that file with the report (exit 0): now a
  one-line usage error before any test runs, the file left as it was.
"""

from __future__ import annotations

import os
import sys
from glob import escape

import pytest
from test_plugin import GATE_OUTPUTS, PLAIN_TEST, gate_toml, run, write_project

pytest_plugins = ["pytester"]

NOTHING_TO_GATE = (
    "nothing to gate: set 'outputs' (a JSONL of summaries) or 'summarizer' + 'data' in "
    "[tool.faithgate]"
)
# Gate-only options: each asks for something only a gate that runs can give.
GATE_OPTIONS = (
    "--faithgate-threshold",
    "0.9",
    "--faithgate-min-pass-rate",
    "1",
    "--faithgate-json",
    "r.json",
)


def test_no_configuration_found_fails_as_faithgate_check_does(pytester: pytest.Pytester):
    write_project(pytester, PLAIN_TEST, **{"pyproject.toml": "[tool.pytest.ini_options]\n"})
    check = pytester.run(sys.executable, "-m", "faithgate", "check")
    assert check.ret == 2
    assert f"faithgate: {NOTHING_TO_GATE}" in check.stderr.str() + check.stdout.str()

    result = run(pytester, "--faithgate", *GATE_OPTIONS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"faithgate: {NOTHING_TO_GATE}, or name such a configuration with "
            f"--faithgate-config (no faithgate.toml or [tool.faithgate] found from "
            f"{pytester.path} up); to run the tests without the gate: -m 'not faithgate_gate'",
            escape(
                f"FAILED faithgate.toml::faithgate[nothing to gate] - faithgate: {NOTHING_TO_GATE}"
            )
            + "*",
        ]
    )
    # The plugin has no --outputs / --data: the message does not send the user to them.
    assert "--outputs" not in result.stdout.str()
    assert not (pytester.path / "r.json").exists()


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["in-process", "xdist"])
def test_a_configuration_without_a_dataset_fails(pytester: pytest.Pytester, xdist: tuple[str, ...]):
    toml = 'metrics = ["toy"]\n[thresholds]\ntoy = 0.5\n'
    write_project(pytester, PLAIN_TEST, **{"faithgate.toml": toml})
    result = run(pytester, "--faithgate", "-v", *xdist)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            escape(
                f"FAILED faithgate.toml::faithgate[nothing to gate] - faithgate: {NOTHING_TO_GATE}"
            )
            + "*"
        ]
    )
    assert "found from" not in result.stdout.str()  # the configuration was found


def test_deselecting_the_gate_runs_the_other_tests_alone(pytester: pytest.Pytester):
    """The documented way to run the tests (and the fixture's summary) without the gate."""
    write_project(pytester, PLAIN_TEST, **{"faithgate.toml": 'metrics = ["toy"]\n'})
    result = run(pytester, "--faithgate", "-m", "not faithgate_gate")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, deselected=1)


DOCTEST = ">>> 1 + 1\n2\n"


@pytest.mark.parametrize(
    "args, target, message",
    [
        (
            ("--faithgate-markdown", "test_inner.py"),
            "test_inner.py",
            "the faithgate markdown report (*test_inner.py) is a Python module; refusing to "
            "overwrite it: choose another path",
        ),
        (
            ("--faithgate-json", "conftest.py"),
            "conftest.py",
            "the faithgate json report (*conftest.py) is a Python module; *",
        ),
        (
            ("--faithgate-baseline", "conftest.py", "--faithgate-update-baseline"),
            "conftest.py",
            "the baseline (*conftest.py) is a Python module; *",
        ),
        (
            ("--faithgate-html", "pytest.ini"),
            "pytest.ini",
            "the faithgate html report (*pytest.ini) is a project configuration file; *",
        ),
        (
            ("-c", "my.ini", "--faithgate-junit", "my.ini"),
            "my.ini",
            "the faithgate junit report (*my.ini) is the pytest configuration file of this run; *",
        ),
        (  # known only once collected: a doctest text file
            ("--doctest-glob", "*.txt", "--faithgate-markdown", "test_doc.txt"),
            "test_doc.txt",
            "the faithgate markdown report (*test_doc.txt) is the collected test file of this "
            "run; *",
        ),
        (  # likewise: a hard link to the test module
            ("--faithgate-markdown", "hard.md"),
            "test_inner.py",
            "the faithgate markdown report (*hard.md) is the collected test file of this run; *",
        ),
    ],
    ids=["test-module", "conftest", "baseline", "ini", "ini-given", "doctest", "hard-link"],
)
def test_reports_never_replace_the_runs_own_files(
    pytester: pytest.Pytester, args: tuple[str, ...], target: str, message: str
) -> None:
    write_project(
        pytester,
        PLAIN_TEST,
        **{
            "outputs.jsonl": GATE_OUTPUTS,
            "faithgate.toml": gate_toml(0.6),
            "pytest.ini": "[pytest]\n",
            "my.ini": "[pytest]\n",
            "test_doc.txt": DOCTEST,
        },
    )
    os.link(pytester.path / "test_inner.py", pytester.path / "hard.md")
    before = (pytester.path / target).read_bytes()
    result = run(pytester, "--faithgate", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: faithgate: {message}"])
    assert "passed" not in result.stdout.str()  # refused before any test ran
    assert (pytester.path / target).read_bytes() == before


def test_under_xdist_a_collected_file_is_refused_before_writing(pytester: pytest.Pytester):
    """Only xdist's workers collect: the controller refuses before writing the reports."""
    write_project(
        pytester,
        PLAIN_TEST,
        **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.6)},
    )
    (pytester.path / "test_doc.txt").write_text(DOCTEST, encoding="utf-8")
    args = ("--doctest-glob", "*.txt", "--faithgate-markdown", "test_doc.txt", "-n", "2")
    result = run(pytester, "--faithgate", *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["faithgate: the faithgate markdown report (*test_doc.txt) is the collected test file*"]
    )
    assert (pytester.path / "test_doc.txt").read_text(encoding="utf-8") == DOCTEST
    assert not (pytester.path / "reports").exists()  # no report of the set was written


def test_an_earlier_report_is_still_replaced(pytester: pytest.Pytester):
    write_project(
        pytester,
        PLAIN_TEST,
        **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.6)},
    )
    (pytester.path / "old.md").write_text("an earlier report\n", encoding="utf-8")
    result = run(pytester, "--faithgate", "--faithgate-markdown", "old.md")
    assert result.ret == pytest.ExitCode.OK
    assert "faithgate: PASS" in (pytester.path / "old.md").read_text(encoding="utf-8")


# A conftest that skips or xfails every item (a GPU-only suite on a CPU runner, a flaky-test
# policy) skipped or xfailed the gate item too: exit 0 with the gate never run, or failed.
OUTSIDE = {
    "skip-in-setup": "def pytest_runtest_setup(item):\n    pytest.skip('no gpu on this runner')\n",
    "skip-marker": "def pytest_collection_modifyitems(items):\n"
    "    for i in items:\n        i.add_marker(pytest.mark.skip(reason='later'))\n",
    "xfail-not-run": "def pytest_collection_modifyitems(items):\n"
    "    for i in items:\n        i.add_marker(pytest.mark.xfail(reason='flaky', run=False))\n",
    "xfail": "def pytest_collection_modifyitems(items):\n"
    "    for i in items:\n        i.add_marker(pytest.mark.xfail(reason='flaky'))\n",
}


@pytest.mark.parametrize(
    ("how", "xdist"),
    [(how, ()) for how in OUTSIDE] + [("skip-marker", ("-n", "2"))],
    ids=[*OUTSIDE, "skip-marker-xdist"],
)
def test_a_gate_skipped_or_xfailed_from_outside_fails(
    pytester: pytest.Pytester, how: str, xdist: tuple[str, ...]
):
    toml = gate_toml(0.8)  # example b scores 2/3: the gate fails when it runs
    write_project(pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": toml})
    with (pytester.path / "conftest.py").open("a", encoding="utf-8") as conftest:
        conftest.write("\nimport pytest\n\n" + OUTSIDE[how])
    result = run(pytester, "--faithgate", "-rfE", *xdist)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    out = result.stdout.str()
    assert "INTERNALERROR" not in out + result.stderr.str()
    if how == "xfail":  # it ran and failed: its own failure, not an expected one
        assert "faithgate: FAIL:" in out and "xfailed" not in out.splitlines()[-1]
    else:
        assert "faithgate: the gate did not run (" in out
        assert "-m 'not faithgate_gate'" in out


def test_a_passing_gate_marked_xfail_is_an_ordinary_pass(pytester: pytest.Pytester):
    toml = gate_toml(0.5)
    write_project(pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": toml})
    with (pytester.path / "conftest.py").open("a", encoding="utf-8") as conftest:
        conftest.write("\nimport pytest\n\n" + OUTSIDE["xfail"])
    result = run(pytester, "--faithgate")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, xpassed=1)  # the gate passed; test_plain is an XPASS


def test_a_configuration_outside_the_rootdir_is_named_by_its_full_path(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
):
    """Its node id was pytest's fallback "::" + file name: with a configuration file named
    ``warning``, the line "::warning::faithgate[...] PASSED", a GitHub workflow command."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "outputs.jsonl").write_text(GATE_OUTPUTS, encoding="utf-8")
    (elsewhere / "warning").write_text(gate_toml(0.5), encoding="utf-8")
    write_project(pytester, PLAIN_TEST)
    result = run(pytester, "--faithgate", "-v", f"--faithgate-config={elsewhere / 'warning'}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    lines = result.stdout.lines
    assert not [line for line in lines if line.startswith("::")]
    assert [line for line in lines if line.startswith(f"{elsewhere}/warning::faithgate[")]


def test_empty_option_and_metric_values_are_refused(pytester: pytest.Pytester):
    """`--faithgate-metric=`, `--faithgate-config=`, `--faithgate-cache=` fell back to their
    defaults (a run gated another metric, or another configuration, than the line asked for),
    and so did `metric=""` in the marker and in the fixture's call."""
    write_project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.5)}
    )
    for option in ("--faithgate-metric=", "--faithgate-config=", "--faithgate-cache= "):
        result = run(pytester, "--faithgate", option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, option
        assert f"{option.strip('= ')}: expected a value, got none" in result.stderr.str()
    pytester.makepyfile(
        test_inner="""
import pytest

@pytest.mark.faithgate(metric="")
def test_marker(faithgate):
    faithgate.assert_faithful("The cat sat.", "The cat sat.", threshold=0.1)

def test_call(faithgate):
    faithgate.assert_faithful("The cat sat.", "The cat sat.", metric=" ", threshold=0.1)
"""
    )
    result = run(pytester, "-rf")
    result.assert_outcomes(failed=1, errors=1)
    out = result.stdout.str()
    assert "metric= must be a metric name (str), got str ''" in out
    assert "metric= must be a metric name (str), got str ' '" in out
