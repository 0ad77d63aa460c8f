"""The fixture fails closed (review s19 of the pytest plugin): inner pytest runs (``pytester``,
in this process) of small projects with the ``toy`` metrics of ``test_plugin_markers_and_messages``.

A class marker's threshold and settings stay with its metric; a check that could not score is
``FaithgateScoringError``, which ``pytest.raises(AssertionError)`` does not swallow; text the
library refuses (NUL, lone surrogate), numbers given as text, an empty ``types`` list and a
seed that is no integer are one-line failures; an unscorable original of a perturbation check
is recorded like any other check.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from test_plugin import FIXTURES_ONLY, SRC, run
from test_plugin_markers_and_messages import project

pytest_plugins = ["pytester"]

# ``faithgate.perturb.perturb`` replaced in the inner process by one fixed edit (no spaCy):
# the fixture imports it at call time.
FAKE_PERTURB = """

import faithgate.perturb as _perturb_module
from faithgate.perturb import Perturbation


def _one_edit(source, summary, types=None, seed=0, **_):
    edited = summary.rstrip(".") + " in London."
    return [Perturbation("entity_extrinsic", "Extrinsic Entity", edited, "", " in London", 0, 0)]


_perturb_module.perturb = _one_edit
"""


def test_a_class_markers_threshold_and_settings_stay_with_its_metric(
    pytester: pytest.Pytester,
) -> None:
    """A class's ``(metric="toy2", threshold=0.1, settings=...)`` was merged into a test
    marker's ``(metric="toy")``: toy's check ran at 0.1 (and with toy2's settings) and passed
    where thresholds.toy = 0.9 fails it."""
    toml = 'metrics = ["toy"]\n[thresholds]\ntoy = 0.9\n'
    tests = f"""
import pytest

SRC = {SRC!r}
HALF = "The cat sat. The dog flew."  # toy 2/3 (power 2: 5/9)


@pytest.mark.faithgate(metric="toy2", threshold=0.1, settings={{"power": 2}})
class TestToy2Class:
    @pytest.mark.faithgate(metric="toy")
    def test_inner_metric_keeps_its_threshold(self, faithgate):
        faithgate.assert_faithful(SRC, HALF)

    @pytest.mark.faithgate(metric="toy")
    def test_inner_metric_keeps_its_settings(self, faithgate):
        assert faithgate.score(SRC, HALF).value == pytest.approx(2 / 3)

    @pytest.mark.faithgate(metric="toy")
    def test_class_metric_keeps_the_class_values(self, faithgate):
        score = faithgate.assert_faithful(SRC, HALF, metric="toy2")
        assert score.value == pytest.approx(5 / 9)

    @pytest.mark.faithgate(threshold=0.95)
    def test_a_marker_naming_no_metric_applies_to_the_class_metric(self, faithgate):
        faithgate.assert_faithful(SRC, HALF)
"""
    project(pytester, tests, **{"faithgate.toml": toml})
    result = run(pytester)
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "*test_inner_metric_keeps_its_threshold - *toy = 0.6667 < threshold 0.9000",
            "*test_a_marker_naming_no_metric_applies_to_the_class_metric - "
            "*toy2 = 0.5556 < threshold 0.9500",
        ]
    )


def test_b_a_check_that_could_not_score_is_no_assertion_error(pytester: pytest.Pytester) -> None:
    """ "Could not score" was an AssertionError: a negative test (``pytest.raises(
    AssertionError)``) passed when the metric scored nothing."""
    tests = f"""
import pytest

SRC = {SRC!r}

def test_rejects(faithgate):
    with pytest.raises(AssertionError):
        faithgate.assert_faithful(SRC, "The dog flew UNSCORABLE.", metric="toy", threshold=0.5)

def test_prefers(faithgate):
    with pytest.raises(AssertionError):
        faithgate.assert_consistent(SRC, "The dog UNSCORABLE.", "The cat sat.", metric="toy")

def test_perturbation(faithgate):
    with pytest.raises(AssertionError):
        faithgate.assert_consistent_under_perturbation(SRC, "The cat UNSCORABLE.", metric="toy")

def test_the_error_type(faithgate):
    from pytest_faithgate import FaithgateScoringError

    assert not issubclass(FaithgateScoringError, AssertionError)
    with pytest.raises(FaithgateScoringError, match="could not score"):
        faithgate.assert_faithful(SRC, "The dog UNSCORABLE.", metric="toy", threshold=0.5)
"""
    project(pytester, tests)
    (pytester.path / "conftest.py").write_text(
        (pytester.path / "conftest.py").read_text(encoding="utf-8") + FAKE_PERTURB,
        encoding="utf-8",
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "FAILED *test_rejects - pytest_faithgate.FaithgateScoringError: faithgate: toy could "
            "not score the summary: toy refuses",
            "FAILED *test_prefers - pytest_faithgate.FaithgateScoringError: faithgate: toy could "
            "not score the faithful summary: toy refuses",
            "FAILED *test_perturbation - pytest_faithgate.FaithgateScoringError: faithgate: toy "
            "could not score the original summary: toy refuses",
        ]
    )


def test_c_text_the_library_refuses_is_one_line(pytester: pytest.Pytester) -> None:
    """A NUL character or a lone surrogate in a summary was an InputError traceback (the
    Example was built outside the fixture's error handling)."""
    tests = f"""
SRC = {SRC!r}

def test_nul(faithgate):
    faithgate.assert_faithful(SRC, "The cat\\x00 sat.", metric="toy", threshold=0.5)

def test_surrogate(faithgate):
    faithgate.score(SRC, "The cat \\ud800 sat.", metric="toy")

def test_nul_in_the_source(faithgate):
    faithgate.assert_consistent("The cat\\x00 sat.", "The cat sat.", "A dog.", metric="toy")
"""
    project(pytester, tests)
    result = run(pytester)
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "FAILED *test_nul - Failed: faithgate: Example 'test_inner.py::test_nul#1': summary contains "
            "NUL characters*",
            "FAILED *test_surrogate - Failed: faithgate: Example 'test_inner.py::test_surrogate#1': "
            "summary contains a lone surrogate (U+D800)*",
            "FAILED *test_nul_in_the_source - Failed: faithgate: Example *: source contains NUL*",
        ]
    )
    out = result.stdout.str()
    assert "Traceback" not in out and "InputError" not in out and "types.py" not in out


def test_d_numbers_given_as_text_are_refused(pytester: pytest.Pytester) -> None:
    """``threshold="1e-9"``, ``b"0.5"``, ``margin="0"``, ``min_rate="0.0"`` were converted and
    used, where the configuration refuses ``thresholds.x = "0.5"``."""
    tests = f"""
import pytest

SRC = {SRC!r}

@pytest.mark.faithgate(metric="toy", threshold="1e-9")
def test_marker_threshold(faithgate):
    faithgate.assert_faithful(SRC, "The dog flew.")

def test_call_threshold(faithgate):
    faithgate.assert_faithful(SRC, "The dog flew.", metric="toy", threshold=" 0.5\\n")

def test_bytes_threshold(faithgate):
    faithgate.assert_faithful(SRC, "The dog flew.", metric="toy", threshold=b"0.5")

@pytest.mark.faithgate(metric="toy", margin="0")
def test_marker_margin(faithgate):
    faithgate.assert_consistent(SRC, "The cat sat.", "The dog sat.")

def test_min_rate(faithgate):
    faithgate.assert_consistent_under_perturbation(
        SRC, "The cat sat.", metric="toy", min_rate="0.0"
    )

def test_a_fraction_is_a_number(faithgate):
    import fractions
    faithgate.assert_faithful(SRC, "The cat sat.", metric="toy", threshold=fractions.Fraction(1, 2))
"""
    project(pytester, tests)
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=5)
    result.stdout.fnmatch_lines_random(
        [
            "FAILED *test_marker_threshold - Failed: faithgate: threshold must be a finite number, "
            "got '1e-9'",
            "FAILED *test_call_threshold - Failed: faithgate: threshold must be a finite number, "
            "got ' 0.5\\n'",
            "FAILED *test_bytes_threshold - Failed: faithgate: threshold must be a finite number, "
            "got b'0.5'",
            "FAILED *test_marker_margin - Failed: faithgate: margin must be a finite number, got '0'",
            "FAILED *test_min_rate - Failed: faithgate: min_rate must be a finite number, got '0.0'",
        ]
    )


def test_e_an_unscorable_original_is_recorded(pytester: pytest.Pytester) -> None:
    """``assert_consistent_under_perturbation`` raised before recording when the original
    could not be scored: no row in the summary table, no JUnit property."""
    toml = 'metrics = ["toy"]\n'
    tests = f"""
SRC = {SRC!r}

def test_pert(faithgate):
    faithgate.assert_consistent_under_perturbation(SRC, "The cat UNSCORABLE.", metric="toy")

def test_plain(faithgate):
    faithgate.assert_faithful(SRC, "The cat UNSCORABLE.", metric="toy", threshold=0.5)
"""
    project(pytester, tests, **{"faithgate.toml": toml})
    (pytester.path / "conftest.py").write_text(
        (pytester.path / "conftest.py").read_text(encoding="utf-8") + FAKE_PERTURB,
        encoding="utf-8",
    )
    result = run(pytester, *FIXTURES_ONLY, "--junitxml", "j.xml")
    result.assert_outcomes(failed=2)
    result.stdout.re_match_lines_random(
        [
            r"fixture checks: 2, failed: 2",
            r"test_inner.py::test_pert +assert_consistent_under_perturbation +toy +- +1.0000 "
            r"+ERROR",
            r"test_inner.py::test_plain +assert_faithful +toy +- +0.5000 +ERROR",
        ]
    )
    root = ET.parse(pytester.path / "j.xml").getroot()
    case = next(c for c in root.iter("testcase") if c.get("name") == "test_pert")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["faithgate.toy"] == "nan"
    assert props["faithgate.toy.passed"] == "False"
    assert props["faithgate.toy.limit"] == "1.0"


def test_f_empty_types_and_a_seed_that_is_no_integer_fail(pytester: pytest.Pytester) -> None:
    """``types=[]`` ran every perturbation type (an empty filter widened the check);
    ``seed="abc"`` and ``seed=None`` were accepted."""
    tests = f"""
import pytest

SRC = {SRC!r}

def test_types_empty(faithgate):
    faithgate.assert_consistent_under_perturbation(SRC, "The cat sat.", metric="toy", types=[])

@pytest.mark.faithgate(metric="toy", types=())
def test_marker_types_empty(faithgate):
    faithgate.assert_consistent_under_perturbation(SRC, "The cat sat.")

def test_seed_text(faithgate):
    faithgate.assert_consistent_under_perturbation(SRC, "The cat sat.", metric="toy", seed="abc")

def test_seed_none(faithgate):
    faithgate.assert_consistent_under_perturbation(SRC, "The cat sat.", metric="toy", seed=None)
"""
    project(pytester, tests)
    result = run(pytester)
    result.assert_outcomes(failed=4)
    empty = (
        "faithgate: types= is empty: name at least one perturbation type, or leave types out "
        "for all of them"
    )
    result.stdout.fnmatch_lines_random(
        [
            f"FAILED *test_types_empty - Failed: {empty}",
            f"FAILED *test_marker_types_empty - Failed: {empty}",
            "FAILED *test_seed_text - Failed: faithgate: seed= must be an integer, got str 'abc'",
            "FAILED *test_seed_none - Failed: faithgate: seed= must be an integer, got NoneType None",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_blank_summary_is_a_scoring_error_as_documented(pytester: pytest.Pytester) -> None:
    """A whitespace-only summary failed as bad usage ("must be non-empty text") where the docs
    (and a zero-width space) give ``FaithgateScoringError``, and ``score()`` raised instead of
    returning ``ok == False``."""
    tests = f"""
import pytest
from pytest_faithgate import FaithgateScoringError

SRC = {SRC!r}

@pytest.mark.parametrize("blank", ["   ", "\\u200b", ""])
def test_blank(faithgate, blank):
    assert not faithgate.score(SRC, blank, metric="toy").ok
    with pytest.raises(FaithgateScoringError, match="empty summary"):
        faithgate.assert_faithful(SRC, blank, metric="toy", threshold=0.5)

def test_blank_source_is_still_usage(faithgate):
    faithgate.assert_faithful("  ", "The cat sat.", metric="toy", threshold=0.5)
"""
    project(pytester, tests)
    result = run(pytester)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*faithgate: source must be non-empty text, got '  '*"])
