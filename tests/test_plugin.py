"""Tests of the pytest plugin (``pytest --faithgate``), run on inner projects with ``pytester``.

Every inner run is a subprocess (``runpytest_subprocess``): the inner conftest registers a
test-only metric, and the registry of this process must not see it. The metric ``toy`` is cheap
and exact: per '.'-sentence, the share of its words found in the source (to the power
``power``); the score is the mean over sentences, so expected values are computed by hand.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

pytest_plugins = ["pytester"]

# Each inner subprocess loads the plugin and faithgate; keep them on one xdist worker so the
# outer run does not start several at once on a small machine.
pytestmark = pytest.mark.xdist_group("pytester-faithgate")

TOY_CONFTEST = """
import os
from faithgate.metrics.base import Metric, register
from faithgate.types import Score, SentenceScore


@register
class Toy(Metric):
    name = "toy"
    defaults = {"power": 1}

    def __init__(self, **settings):
        super().__init__(**settings)
        # One line per instance and process: tests check a scorer is built once per process.
        with open(os.path.join(os.path.dirname(__file__), "instances.log"), "a") as fh:
            fh.write(f"{os.getpid()} {self.settings['power']}\\n")

    def score_batch(self, examples, ctx):
        out = []
        for ex in examples:
            if "UNSCORABLE" in ex.summary:
                out.append(Score.failed(self.name, self.settings_hash(ctx), ex.id, "toy refuses"))
                continue
            src = set(ex.source.lower().replace(".", " ").split())
            sents = [s.strip() for s in ex.summary.split(".") if s.strip()]
            scored = []
            for i, s in enumerate(sents):
                words = s.lower().split()
                share = sum(w in src for w in words) / len(words)
                scored.append(SentenceScore(i, s, share ** self.settings["power"]))
            value = sum(s.value for s in scored) / len(scored)
            out.append(Score(self.name, value, self.settings_hash(ctx), ex.id, sentences=scored))
        return out
"""

SRC = "The cat sat on the mat. It was sunny."
# toy("The cat sat. The dog flew.") = mean(3/3, 1/3) = 2/3; least supported: "The dog flew".

FIXTURE_TESTS = f"""
import pytest

SRC = {SRC!r}


def test_score(faithgate):
    s = faithgate.score(SRC, "The cat sat. The dog flew.", metric="toy")
    assert s.value == pytest.approx(2 / 3)


def test_faithful_passes(faithgate):
    faithgate.assert_faithful(SRC, "The cat sat on the mat.", threshold=0.99, metric="toy")


@pytest.mark.faithgate(metric="toy", threshold=0.9)
def test_not_faithful(faithgate):
    faithgate.assert_faithful(SRC, "The cat sat. The dog flew.")


def test_consistent(faithgate):
    faithgate.assert_consistent(SRC, "The cat sat.", "The dog sat.", metric="toy")


def test_inconsistent(faithgate):
    faithgate.assert_consistent(SRC, "The dog sat.", "The cat sat.", metric="toy")
"""


def write_project(pytester: pytest.Pytester, tests: str, **files: str) -> None:
    pytester.makeconftest(TOY_CONFTEST)
    pytester.makepyfile(test_inner=tests)
    for name, text in files.items():
        (pytester.path / name).write_text(text, encoding="utf-8")


def instances(pytester: pytest.Pytester) -> list[tuple[str, str]]:
    log = pytester.path / "instances.log"
    if not log.exists():
        return []
    return [tuple(line.split()) for line in log.read_text().splitlines()]


def test_fixture_pass_and_readable_failures(pytester: pytest.Pytester) -> None:
    write_project(pytester, FIXTURE_TESTS)
    result = pytester.runpytest_subprocess("--faithgate", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    # The failure names the score, the threshold and the least supported sentence ...
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: faithgate: summary not faithful enough: toy = 0.6667 < "
            "threshold 0.9000",
            '*least supported sentence (#2, 0.3333): "The dog flew"',
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*faithgate: toy does not prefer the faithful summary: faithful = 0.6667, "
            "unfaithful = 1.0000*",
        ]
    )
    # ... and hides the plugin's own frames (__tracebackhide__).
    assert "fixture.py" not in out
    # The summary table lists every check with its verdict.
    result.stdout.fnmatch_lines(
        [
            "*= faithgate =*",
            "fixture checks: 5, failed: 2",
            "test*check*metric*value*limit*verdict",
            "test_inner.py::test_not_faithful*assert_faithful*toy*0.6667*0.9000*FAIL",
        ]
    )


def test_silent_without_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="""
        import pytest

        @pytest.mark.faithgate(metric="toy")
        def test_one():
            assert 1 + 1 == 2
        """
    )
    (pytester.path / "faithgate.toml").write_text('metrics = ["toy"]\noutputs = "out.jsonl"\n')
    with_plugin = pytester.runpytest_subprocess("--strict-markers", "-p", "no:cacheprovider")
    with_plugin.assert_outcomes(passed=1)
    without = pytester.runpytest_subprocess(
        "--strict-markers", "-p", "no:cacheprovider", "-p", "no:faithgate"
    )
    # Without the plugin the marker is unknown: proves the plugin registers it.
    assert without.ret != 0
    assert "'faithgate' not found in `markers`" in without.stdout.str()
    # No gate item, no header line, no summary, nothing written: the output is the output of
    # a run without the plugin, apart from the plugin list and the timing.
    plain = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-p",
        "no:faithgate",
        "-W",
        "ignore::pytest.PytestUnknownMarkWarning",
    )
    plain.assert_outcomes(passed=1)

    def normalized(lines: list[str]) -> list[str]:
        return [
            line.split(" in ")[0]
            for line in lines
            if not line.startswith(("plugins:", "running:", "     in:"))
        ]

    assert normalized(with_plugin.outlines) == normalized(plain.outlines)
    assert not (pytester.path / ".faithgate").exists()


def test_strict_markers_with_flag(pytester: pytest.Pytester) -> None:
    write_project(
        pytester,
        f"""
        import pytest

        @pytest.mark.faithgate(metric="toy", threshold=0.5)
        def test_marked(faithgate):
            faithgate.assert_faithful({SRC!r}, "The cat sat.")
        """,
    )
    result = pytester.runpytest_subprocess(
        "--faithgate", "--strict-markers", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["faithgate: defaults (no configuration file); metrics: *"])


def test_marker_settings_reach_the_fixture(pytester: pytest.Pytester) -> None:
    write_project(
        pytester,
        f"""
        import pytest

        SRC = {SRC!r}
        pytestmark = pytest.mark.faithgate(metric="toy", threshold=0.1)

        @pytest.mark.faithgate(settings={{"power": 2}})
        def test_power_two(faithgate):
            # sentence shares 1 and 1/3 squared: mean(1, 1/9) = 5/9
            assert faithgate.score(SRC, "The cat sat. The dog flew.").value == pytest.approx(5 / 9)

        def test_module_marker(faithgate):
            # module marker: metric toy, threshold 0.1 (0.6667 >= 0.1 passes)
            s = faithgate.assert_faithful(SRC, "The cat sat. The dog flew.")
            assert s.value == pytest.approx(2 / 3)

        @pytest.mark.faithgate(threshold=0.7)
        def test_closest_marker_wins(faithgate):
            faithgate.assert_faithful(SRC, "The cat sat. The dog flew.")

        @pytest.mark.faithgate(treshold=0.7)
        def test_typo(faithgate):
            pass

        def test_unscorable(faithgate):
            faithgate.assert_faithful(SRC, "UNSCORABLE text.")
        """,
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2, errors=1)
    for line in (
        "*ERROR at setup of test_typo*",
        "test_inner.py::test_typo: @pytest.mark.faithgate got unknown argument(s) treshold; "
        "allowed: metric, threshold*",
        "E*faithgate: summary not faithful enough: toy = 0.6667 < threshold 0.7000",
        "E*faithgate: toy could not score the summary: toy refuses",
    ):
        result.stdout.fnmatch_lines([line])
    assert "During handling" not in result.stdout.str()
    # Two settings (power 1 and 2): two scorers in this one process, each built once.
    assert sorted(p for _, p in instances(pytester)) == ["1", "2"]


def test_junit_properties(pytester: pytest.Pytester) -> None:
    write_project(pytester, FIXTURE_TESTS)
    xml_path = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        f"--junitxml={xml_path}", "-o", "junit_family=xunit1", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=3, failed=2)
    root = ET.parse(xml_path).getroot()
    props = {}
    for case in root.iter("testcase"):
        props[case.get("name")] = [(p.get("name"), p.get("value")) for p in case.iter("property")]
    assert ("faithgate.toy", "0.666667") in props["test_score"]
    assert props["test_not_faithful"] == [
        ("faithgate.toy", "0.666667"),
        ("faithgate.toy.limit", "0.9"),
        ("faithgate.toy.passed", "False"),
    ]
    assert ("faithgate.toy.unfaithful", "1.0") in props["test_inconsistent"]


def test_xdist_two_workers(pytester: pytest.Pytester) -> None:
    many = "\n".join(
        f"""
def test_{i}(faithgate):
    faithgate.assert_faithful({SRC!r}, "The cat sat. The dog flew.", threshold={0.5 if i != 3 else 0.9}, metric="toy")
"""
        for i in range(8)
    )
    write_project(pytester, many)
    xml_path = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess(
        "--faithgate", "-n", "2", f"--junitxml={xml_path}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=7, failed=1)
    out = result.stdout.str()
    # The table is printed once, by the controller, with the checks of both workers.
    assert out.count("= faithgate =") == 1 or out.count(" faithgate ") >= 1
    assert out.count("fixture checks: 8, failed: 1") == 1
    assert "test_inner.py::test_3  assert_faithful  toy     0.6667  0.9000  FAIL" in out
    # Each worker process built the toy scorer exactly once.
    pids = [pid for pid, _ in instances(pytester)]
    assert 1 <= len(pids) <= 2 and len(set(pids)) == len(pids)
    # Worker reports carry the properties into the controller's JUnit XML.
    values = [
        p.get("value")
        for p in ET.parse(xml_path).getroot().iter("property")
        if p.get("name") == "faithgate.toy"
    ]
    assert values == ["0.666667"] * 8


def test_config_error_is_one_line(pytester: pytest.Pytester) -> None:
    (pytester.path / "faithgate.toml").write_text('metrcs = ["toy"]\n')
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--faithgate", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: faithgate: *faithgate.toml*unknown key 'metrcs'*"])
    assert "Traceback" not in result.stderr.str()


def _json_dump(obj: object) -> str:  # pragma: no cover - kept for gate tests
    return json.dumps(obj)
