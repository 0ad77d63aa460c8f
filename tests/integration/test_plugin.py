"""Tests of the pytest plugin (``pytest --faithgate``), run on inner projects with ``pytester``.

Inner runs are in this process (``runpytest_inprocess``; ``run`` then restores the metric
registry the inner conftest adds ``toy`` to), except under xdist (its workers are processes
anyway) and where a test reads pytest's per-process state (``subprocess=True``). The metric
``toy`` is cheap and exact: per '.'-sentence, the share of its words found in the source (to the power
``power``); the score is the mean over sentences, so expected values are computed by hand.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest

pytest_plugins = ["pytester"]

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


# Unrelated plugins installed here cost seconds of start-up per inner run (hypothesis alone
# ~1.5 s of imports); block them. The cache provider would write .pytest_cache.
QUIET = (
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
    "-p",
    "no:benchmark",
    "-p",
    "no:anyio",
)


# ``--faithgate`` for the fixture's summary table only, in a project with nothing to gate: the
# gate item (which fails there, saying "nothing to gate") is deselected, as a user would.
FIXTURES_ONLY = ("--faithgate", "-m", "not faithgate_gate")


def run(pytester: pytest.Pytester, *args: str, subprocess: bool = False) -> pytest.RunResult:
    """Inner pytest, in this process unless it runs xdist (``-n``) or ``subprocess`` is asked
    for (what pytest caches per process matters): a subprocess starts pytest and imports
    faithgate and the plugin anew, ~1 CPU s per run."""
    if subprocess or "-n" in args:
        return pytester.runpytest_subprocess(*QUIET, *args)
    with own_registry():
        return pytester.runpytest_inprocess(*QUIET, *args)


@contextlib.contextmanager
def own_registry() -> Iterator[None]:
    """What an inner run changes in this process's faithgate is put back afterwards: the
    metrics its conftest registers and ``faithgate.perturb.perturb``, which some replace.
    (The modules it imports are imported before pytester starts: tests/conftest.py.)"""
    from faithgate.metrics import base

    perturb_module = importlib.import_module("faithgate.perturb")
    registry = dict(base._REGISTRY)
    perturb = perturb_module.perturb
    try:
        yield
    finally:
        base._REGISTRY.clear()
        base._REGISTRY.update(registry)
        perturb_module.perturb = perturb


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


def test_fixture_pass_readable_failures_and_junit(pytester: pytest.Pytester) -> None:
    write_project(pytester, FIXTURE_TESTS)
    xml_path = pytester.path / "junit.xml"
    result = run(pytester, *FIXTURES_ONLY, f"--junitxml={xml_path}")
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
    # Every check is attached to its test case in pytest's JUnit XML.
    props = {
        case.get("name"): [(p.get("name"), p.get("value")) for p in case.iter("property")]
        for case in ET.parse(xml_path).getroot().iter("testcase")
    }
    assert ("faithgate.toy", "0.666667") in props["test_score"]
    assert props["test_not_faithful"] == [
        ("faithgate.toy", "0.666667"),
        ("faithgate.toy.limit", "0.9"),
        ("faithgate.toy.passed", "False"),
    ]
    assert ("faithgate.toy.unfaithful", "1.0") in props["test_inconsistent"]
    assert ("faithgate.toy.passed", "False") in props["test_inconsistent"]


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
    with_plugin = run(pytester, "--strict-markers")
    with_plugin.assert_outcomes(passed=1)
    # A subprocess: pytest caches the marker names it has seen per process.
    without = run(pytester, "--strict-markers", "-p", "no:faithgate", subprocess=True)
    # Without the plugin the marker is unknown: proves the plugin registers it.
    assert without.ret != 0
    assert "'faithgate' not found in `markers`" in without.stdout.str()
    # No gate item, no header line, no summary, nothing written: the output is the output of
    # a run without the plugin, apart from the plugin list and the timing.
    plain = run(
        pytester,
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
    result = run(pytester, *FIXTURES_ONLY, "--strict-markers")
    result.assert_outcomes(passed=2, failed=2, errors=1)
    result.stdout.fnmatch_lines(["faithgate: defaults (no configuration file); metrics: *"])
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


def test_config_error_is_one_line(pytester: pytest.Pytester) -> None:
    (pytester.path / "faithgate.toml").write_text('metrcs = ["toy"]\n')
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = run(pytester, "--faithgate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: faithgate: *faithgate.toml*unknown key 'metrcs'*"])
    assert "Traceback" not in result.stderr.str()
    # A gate whose input is missing fails its item with one line, not a traceback.
    pytester.makeconftest(TOY_CONFTEST)
    (pytester.path / "faithgate.toml").write_text('metrics = ["toy"]\noutputs = "gone.jsonl"\n')
    result = run(pytester, "--faithgate")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["faithgate: *gone.jsonl: no such file"])
    assert "Traceback" not in result.stdout.str() and "raise " not in result.stdout.str()


GATE_OUTPUTS = "\n".join(
    json.dumps({"id": i, "source": SRC, "summary": s})
    for i, s in (
        ("a", "The cat sat on the mat."),  # toy 1.0
        ("b", "The cat sat. The dog flew."),  # toy 2/3, least supported "The dog flew"
        ("c", "It was sunny."),  # toy 1.0
    )
)


def gate_toml(threshold: float, extra: str = "") -> str:
    return (
        'metrics = ["toy"]\noutputs = "outputs.jsonl"\n'
        f"[thresholds]\ntoy = {threshold}\n[rules]\nmin_pass_rate = 0.9\n"
        '[reports]\nmarkdown = "reports/gate.md"\njson = "reports/gate.json"\n' + extra
    )


PLAIN_TEST = "def test_plain():\n    assert True\n"


def test_gate_item_fails_with_rule_table(pytester: pytest.Pytester) -> None:
    write_project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.8)}
    )
    result = run(pytester, "--faithgate", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    # The failure report is the gate's rule table and failing examples, not a traceback.
    result.stdout.fnmatch_lines(
        [
            "*_ faithgate gate on outputs.jsonl _*",
            "faithgate: FAIL: 1 of 2 rules failed (pass_rate); 2/3 examples pass*",
            "rule*value*limit*result*",
            "pass_rate*0.6667*FAIL*",
            "failing examples (1):",
            '*b: toy 0.6667 < threshold 0.8*least supported sentence*"The dog flew"*',
        ]
    )
    assert "Traceback" not in result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED faithgate.toml::faithgate[[]outputs.jsonl[]]*"])
    # Reports configured in faithgate.toml are written by the controller.
    saved = json.loads((pytester.path / "reports" / "gate.json").read_text())
    assert saved["verdict"] == "fail" and saved["n_passed"] == 2
    assert "FAIL" in (pytester.path / "reports" / "gate.md").read_text()


def test_gate_item_passes_and_can_be_deselected(pytester: pytest.Pytester) -> None:
    write_project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.6)}
    )
    xml_path = pytester.path / "junit.xml"
    result = run(pytester, "--faithgate", "--strict-markers", f"--junitxml={xml_path}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*= faithgate =*",
            "faithgate: PASS: 2 of 2 rules pass; 3/3 examples pass*mean toy 0.8889*",
        ]
    )
    case = next(
        c
        for c in ET.parse(xml_path).getroot().iter("testcase")
        if "faithgate[" in c.get("name", "")
    )
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["faithgate.verdict"] == "pass"
    # In full, as faithgate's own JUnit report writes them (a rounded mean could read as its
    # min_mean while failing it).
    assert props["faithgate.pass_rate"] == "1"
    assert props["faithgate.mean.toy"].startswith("0.88888888")
    assert props["faithgate.rule.pass_rate.passed"] == "True"
    # The gate is an ordinary item: -m / -k deselect it.
    only_plain = run(pytester, "--faithgate", "-m", "not faithgate_gate")
    only_plain.assert_outcomes(passed=1, deselected=1)


def test_xdist_two_workers_gate_and_baseline(pytester: pytest.Pytester) -> None:
    tests = "\n".join(
        f"def test_{i}(faithgate):\n"
        f"    faithgate.assert_faithful({SRC!r}, 'The cat sat. The dog flew.', "
        f"threshold={0.9 if i == 3 else 0.5}, metric='toy')\n"
        for i in range(8)
    )
    write_project(
        pytester, tests, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.6)}
    )
    xml_path = pytester.path / "junit.xml"
    result = run(
        pytester,
        "--faithgate",
        "-n",
        "2",
        f"--junitxml={xml_path}",
        "--faithgate-baseline",
        "base.json",
        "--faithgate-update-baseline",
        "--faithgate-markdown",
        "pr.md",
    )
    result.assert_outcomes(passed=8, failed=1)
    out = result.stdout.str()
    # One summary, printed by the controller, with the checks of both workers and the gate.
    assert out.count("= faithgate =") == 1
    summary = out[out.index("= faithgate =") :]
    assert "fixture checks: 8, failed: 1" in summary
    assert "test_inner.py::test_3  assert_faithful  toy     0.6667  0.9000  FAIL" in summary
    assert summary.count("faithgate: PASS: ") == 1
    assert "regression[toy]" in summary
    # Each worker process built its toy scorer once (the fixture's and the gate's share
    # settings, hence one instance per process that ran a test).
    pids = [pid for pid, _ in instances(pytester)]
    assert 1 <= len(set(pids)) <= 2 and len(set(pids)) == len(pids)
    # Worker reports carry the properties into the controller's JUnit XML.
    values = [
        p.get("value")
        for p in ET.parse(xml_path).getroot().iter("property")
        if p.get("name") == "faithgate.toy"
    ]
    assert values == ["0.666667"] * 8
    # The baseline and the Markdown report are written.
    assert json.loads((pytester.path / "base.json").read_text())["n_examples"] == 3
    assert "PASS" in (pytester.path / "pr.md").read_text()
    # Second run (no xdist) against that baseline: unchanged, passes, every score cached.
    again = run(pytester, "--faithgate", "--faithgate-baseline", "base.json", "-k", "gate")
    again.assert_outcomes(passed=1, deselected=8)
    again.stdout.fnmatch_lines(["regression[[]toy[]]*PASS*", "score cache: 3 hits, 0 misses*"])


@pytest.fixture(scope="session")
def perturbation_engine() -> None:
    """spaCy, its model and what they import, loaded before pytester snapshots
    ``sys.modules`` (tests/conftest.py says why): an edit made once here."""
    perturb = importlib.import_module("faithgate.perturb").perturb
    assert perturb("Bob Jones met Alice Smith in Paris.", "Bob met Alice.")


@pytest.mark.slow  # the perturbation engine parses with spaCy
@pytest.mark.usefixtures("perturbation_engine")
def test_assert_consistent_under_perturbation(pytester: pytest.Pytester) -> None:
    src = "Police arrested Bob Jones in Paris on Monday. A court convicted Alice Smith."
    write_project(
        pytester,
        f"""
        SRC = {src!r}

        def test_caught(faithgate):
            # toy sees words missing from the source: the extrinsic entity is caught
            assert faithgate.assert_consistent_under_perturbation(
                SRC, "Police arrested Bob Jones in Paris.", types=["entity_extrinsic"], metric="toy"
            ) == 1.0

        def test_not_caught(faithgate):
            # "arrested" -> "convicted" uses a source word: toy ties, so the edit is not caught
            faithgate.assert_consistent_under_perturbation(
                SRC,
                "Police arrested Bob Jones in Paris.",
                types=["predicate_verb_intrinsic", "entity_extrinsic"],
                metric="toy",
            )
        """,
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E*faithgate: toy prefers the original summary in 1/2 edits (rate 0.50 < min_rate 1.00)",
            "E*not caught [[]predicate_verb_intrinsic[]] 'arrested' -> 'convicted' (1.0000)*",
        ]
    )


# -- issue 16, point 7: look like any other pytest plugin ---------------------------------


def test_collection_line_counts_the_gate_item(pytester: pytest.Pytester) -> None:
    """Without other tests, pytest must not say "collected 0 items" and then run one."""
    (pytester.path / "outputs.jsonl").write_text(GATE_OUTPUTS, encoding="utf-8")
    (pytester.path / "faithgate.toml").write_text(gate_toml(0.6), encoding="utf-8")
    pytester.makeconftest(TOY_CONFTEST)
    result = run(pytester, "--faithgate", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*collected 1 item"])
    assert "collected 0 items" not in result.stdout.str()
    # with ordinary tests too, and with --collect-only
    write_project(pytester, PLAIN_TEST)
    result = run(pytester, "--faithgate", "--collect-only")
    result.stdout.fnmatch_lines(["*collected 2 items*"])


def test_failing_gate_table_is_printed_once(pytester: pytest.Pytester) -> None:
    write_project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.8)}
    )
    result = run(pytester, "--faithgate")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    # The rule table appears once: in FAILURES, the gate item's failure report.
    assert out.count("rule             value") + out.count("rule       value") == 1, out
    assert out.count("pass_rate  ") == 1
    summary = out[out.index("= faithgate =") :]
    assert summary.splitlines()[1].startswith("faithgate: FAIL: 1 of 2 rules failed (pass_rate)")
    assert "see FAILURES above" in summary


def test_update_baseline_refused_when_the_gate_fails(pytester: pytest.Pytester) -> None:
    write_project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.8)}
    )
    args = ("--faithgate", "--faithgate-baseline", "base.json", "--faithgate-update-baseline")
    result = run(pytester, *args)
    result.assert_outcomes(passed=1, failed=1)
    assert not (pytester.path / "base.json").exists()
    result.stdout.fnmatch_lines(["baseline NOT updated: the gate failed*"])
    forced = run(pytester, *args, "--faithgate-force-baseline")
    forced.assert_outcomes(passed=1, failed=1)
    assert (pytester.path / "base.json").is_file()
    forced.stdout.fnmatch_lines(["baseline updated: base.json (forced*"])


def test_json_report_at_a_baseline_a_failing_run_may_not_replace(pytester: pytest.Pytester):
    """``--faithgate-json`` at the baseline path wrote the failing result over the baseline."""
    write_project(
        pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": gate_toml(0.8)}
    )
    args = ("--faithgate", "--faithgate-baseline", "base.json", "--faithgate-update-baseline")
    run(pytester, *args, "--faithgate-force-baseline")
    before = (pytester.path / "base.json").read_bytes()
    result = run(pytester, *args, "--faithgate-json", "base.json")
    result.assert_outcomes(passed=1, failed=1)
    assert (pytester.path / "base.json").read_bytes() == before
    result.stdout.fnmatch_lines(["baseline NOT updated*the json report is that file*"])


def test_gate_warnings_reach_the_summary(pytester: pytest.Pytester) -> None:
    """A threshold for a metric that is not selected is not applied; the gate item's summary
    says so, as `faithgate check` does on stderr."""
    toml = gate_toml(0.6).replace("toy = 0.6\n", "toy = 0.6\nbertscore = 0.9\n")
    write_project(pytester, PLAIN_TEST, **{"outputs.jsonl": GATE_OUTPUTS, "faithgate.toml": toml})
    result = run(pytester, "--faithgate")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["faithgate: warning: thresholds for bertscore are not applied: not selected metrics*"]
    )


def test_a_gate_result_that_does_not_read_back_is_one_summary_line():
    """A gate result whose scores carried another settings hash than it records crashed the
    terminal summary with an INTERNALERROR traceback (``pytest_sessionfinish`` said one line)."""
    from faithgate.config import GateConfig
    from faithgate.gate.evaluate import evaluate
    from faithgate.types import Example, Score
    from pytest_faithgate.gate_plugin import render_gate

    config = GateConfig.from_dict({"metrics": ["m"], "thresholds": {"m": 0.5}})
    result = evaluate(
        config, [Example("e0", "src", "Fine.")], [{"m": Score("m", 0.9, "m:a")}], {"m": "m:a"}
    )
    data = result.to_dict()
    data["examples"][0]["scores"]["m"]["settings_hash"] = "m:elsewhere"
    lines = render_gate(data)
    assert lines == [
        "faithgate: example 'e0': its m score was made with settings m:elsewhere, the result's m "
        "scores with m:a"
    ]
