"""Reports read a GateResult: Markdown, JUnit XML (parsed), HTML (parsed), terminal, JSON."""

from __future__ import annotations

import html as htmllib
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from faithgate.config import GateConfig, Reports
from faithgate.gate.evaluate import evaluate
from faithgate.report import render, write_reports
from faithgate.report.markdown import to_markdown
from faithgate.result import GateResult
from faithgate.types import Example, Score, SentenceScore

M = "m"
H = {M: "m:abc123"}
NASTY = "Bob said <script>alert(1)</script> | not & true."


@pytest.fixture(scope="module")
def result() -> GateResult:
    exs = [
        Example("good", "src", "All fine here."),
        Example("low", "src", f"Supported start. {NASTY}"),
        Example("broken", "src", "Cannot score me."),
        Example("r1", "src", "Faithful one.", meta={"pair_id": "p1", "role": "reference"}),
        Example(
            "e1",
            "src",
            "Edited one.",
            meta={"pair_id": "p1", "role": "edited", "error_type": "Extrinsic Entity"},
        ),
    ]
    scores = [
        {M: Score(M, 0.9, H[M], "good", [SentenceScore(0, "All fine here.", 0.9)])},
        {
            M: Score(
                M,
                0.2,
                H[M],
                "low",
                [SentenceScore(0, "Supported start.", 0.8), SentenceScore(1, NASTY, 0.2)],
            )
        },
        {M: Score.failed(M, H[M], "broken", "ValueError: empty window")},
        {M: Score(M, 0.6, H[M], "r1")},
        {M: Score(M, 0.7, H[M], "e1")},  # inconsistent pair: edited scores higher
    ]
    cfg = GateConfig.from_dict(
        {
            "metrics": [M],
            "thresholds": {M: 0.5},
            "rules": {"min_pass_rate": 0.5, "pair_consistency": {"min_rate": 1.0}},
        }
    )
    return evaluate(cfg, exs, scores, H)


def test_markdown_has_verdict_rules_and_worst_examples(result):
    md = render("markdown", result)
    lines = md.splitlines()
    assert lines[0] == "## ❌ faithgate: FAIL (`pair_consistency[m]`)"
    assert "**2/4** examples pass (50.0%)" in md
    rule_rows = [ln for ln in lines if ln.startswith("| `") and ("pass |" in ln or "fail |" in ln)]
    assert len(rule_rows) == len(result.rules)
    assert any("`pair_consistency[m]`" in ln and "❌ fail" in ln for ln in rule_rows)
    assert "### Failing examples (2)" in md
    low_row = next(ln for ln in lines if ln.startswith("| `low`"))
    assert "0.2000 ❌" in low_row and "\\|" in low_row  # pipes in text are escaped
    assert low_row.count(" | ") == 3  # four cells: the escaped pipe did not split one
    assert "\\<script\\>" in low_row and "<script>" not in md
    broken_row = next(ln for ln in lines if ln.startswith("| `broken`"))
    assert "unscored" in broken_row and "ValueError: empty window" in broken_row
    assert "### Inconsistent minimal pairs (1 of 1)" in md
    assert "`m:abc123`" in md


def test_junit_one_case_per_example_and_rule_with_sentence_in_failure(result):
    root = ET.fromstring(render("junit", result))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    examples = suites["faithgate.examples"].findall("testcase")
    rules = suites["faithgate.rules"].findall("testcase")
    assert [c.get("name") for c in examples] == ["good", "low", "broken", "r1"]
    assert len(rules) == len(result.rules)
    low = next(c for c in examples if c.get("name") == "low")
    failure = low.find("failure")
    assert failure is not None and failure.get("type") == "unfaithful"
    assert NASTY in failure.get("message")  # the least supported sentence, unescaped by XML
    broken = next(c for c in examples if c.get("name") == "broken").find("failure")
    assert broken.get("type") == "unscorable" and "empty window" in broken.get("message")
    assert next(c for c in examples if c.get("name") == "good").find("failure") is None
    props = {p.get("name"): p.get("value") for p in suites["faithgate.examples"].iter("property")}
    assert props["faithgate.verdict"] == "fail"
    assert props["faithgate.settings_hash.m"] == "m:abc123"
    failed_rules = {c.get("name") for c in rules if c.find("failure") is not None}
    assert failed_rules == {r.name for r in result.failed_rules}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.stack: list[str] = []
        self.rows: dict[str, int] = {}
        self.marks: list[str] = []
        self.scripts = 0
        self.external = []
        self._in_mark = False
        self._section = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self._section = a.get("id", "")
            self.sections.append(self._section)
        if tag == "tr" and a.get("class") in ("pass", "fail"):
            self.rows[self._section] = self.rows.get(self._section, 0) + 1
        if tag == "mark":
            self._in_mark = True
            self.marks.append("")
        if tag == "script":
            self.scripts += 1
        for key in ("src", "href"):
            if key in a:
                self.external.append(a[key])

    def handle_endtag(self, tag):
        if tag == "mark":
            self._in_mark = False

    def handle_data(self, data):
        if self._in_mark:
            self.marks[-1] += data


def test_html_structure(result):
    doc = render("html", result)
    assert doc.startswith("<!DOCTYPE html>")
    p = _Collector()
    p.feed(doc)
    assert p.sections == ["verdict", "rules", "distribution", "examples", "pairs", "settings"]
    assert p.rows["rules"] == len(result.rules)
    assert p.rows["examples"] == result.n_examples
    assert p.rows["pairs"] == 1
    assert p.scripts == 0 and p.external == []  # self-contained, and the summary's <script>
    assert NASTY in p.marks  # the least supported sentence is highlighted, text intact
    assert "<svg" in doc and "threshold 0.5" in doc
    assert 'class="badge fail"' in doc


def test_terminal_table(result):
    text = render("terminal", result)
    assert text.startswith(
        "faithgate: FAIL: 1 of 3 rules failed (pair_consistency[m]); 2/4 examples pass (50.0%)"
    )
    for r in result.rules:
        assert r.name in text
    assert "failing examples (2):" in text and "broken: m: could not score" in text


# C1 controls (U+009B is CSI, the one-byte ESC [) and bidi controls ("Trojan Source").
UNSAFE = ["\x9b", "\x85", "\u202e", "\u202a", "\u2066", "\u2069"]


def test_junit_and_html_escape_c1_and_bidi_controls_as_markdown_does():
    """JUnit and HTML escaped only what XML forbids or HTML parses: an id ``x\\x9b31m`` and a
    summary holding U+202E reached faithgate.xml and faithgate.html raw (recolouring a
    terminal reading them, reordering what a browser or JUnit viewer shows)."""
    eid, sentence = "x\x9b31m", "Bob paid \u202eevil\u202c \u2066x\u2069 \x85 \u202a."
    cfg = GateConfig.from_dict({"metrics": [M], "thresholds": {M: 0.5}})
    scores = [{M: Score(M, 0.2, H[M], eid, [SentenceScore(0, sentence, 0.2)])}]
    bad = evaluate(cfg, [Example(eid, "src", f"Start.\t{sentence}\nEnd.")], scores, H)
    for kind in ("junit", "html", "markdown"):
        text = render(kind, bad)
        assert not [ch for ch in UNSAFE if ch in text], (kind, text)
        assert "x\\x9b31m" in text and "\\u202eevil" in text, kind
    root = ET.fromstring(render("junit", bad))
    [case] = root.find("testsuite").findall("testcase")
    assert case.get("name") == "x\\x9b31m"
    assert "Start.\tBob paid \\u202eevil" in case.find("system-out").text  # layout kept


def test_terminal_headline_escapes_a_plugins_metric_name():
    """Metric names come from installed plugins: the headline and the pair lines printed
    them raw while the rule names made of them were escaped."""
    name = "m\x1b[2J##[error]forged"
    cfg = GateConfig.from_dict(
        {"metrics": [name], "thresholds": {name: 0.5}, "rules": {"pair_consistency": {}}}
    )
    exs = [
        Example("r1", "src", "Faithful one.", meta={"pair_id": "p1", "role": "reference"}),
        Example("e1", "src", "Edited one.", meta={"pair_id": "p1", "role": "edited"}),
    ]
    scores = [{name: Score(name, 0.6, "h", "r1")}, {name: Score(name, 0.7, "h", "e1")}]
    text = render("terminal", evaluate(cfg, exs, scores, {name: "h"}))
    assert "\x1b" not in text and "##[" not in text
    assert "mean m\\x1b[2J#\\#[error]forged 0." in text.splitlines()[0]
    assert "  p1: m\\x1b[2J#\\#[error]forged 0.6000 faithful vs 0.7000 edited" in text


def test_write_reports_creates_directories_and_json_round_trips(result, tmp_path):
    reports = Reports(
        junit=tmp_path / "r" / "x.xml",
        markdown=tmp_path / "r" / "x.md",
        json=tmp_path / "r" / "x.json",
        html=tmp_path / "r" / "x.html",
    )
    written = write_reports(result, reports)
    assert set(written) == {"junit", "markdown", "json", "html"}
    assert all(p.is_file() for p in written.values())
    data = json.loads((tmp_path / "r" / "x.json").read_text())
    assert GateResult.from_dict(data).to_dict() == result.to_dict()
    assert data["verdict"] == "fail"


def test_markdown_and_json_show_a_per_example_baseline_threshold():
    """An output held to its own threshold (baseline - drop) shows both numbers."""
    cfg = GateConfig.from_dict({"metrics": [M], "rules": {"regression": {"per_example_drop": 0.1}}})
    before = evaluate(
        GateConfig.from_dict({"metrics": [M]}),
        [Example("a", "src", "The cat sat.")],
        [{M: Score(M, 0.9, H[M], "a")}],
        H,
    )
    after = evaluate(
        cfg,
        [Example("a", "src", "The dog sat.")],
        [{M: Score(M, 0.5, H[M], "a")}],
        H,
        baseline=before,
    )
    md = render("markdown", after)
    assert "| 0.5000 ❌ < 0.8000 (baseline 0.9000) |" in md
    back = GateResult.from_dict(json.loads(json.dumps(after.to_dict())))
    score = back.examples[0].scores[M]
    assert (score.baseline, score.threshold, score.passed) == (0.9, pytest.approx(0.8), False)
    assert "edit: 'cat' -> 'dog'" in back.examples[0].message


def test_markdown_literal_makes_no_link_of_a_url():
    # GitHub's Markdown links bare URLs, "www." names and e-mail addresses by itself: a URL a
    # model invented would be clickable in a CI report.
    from faithgate.safety.escape import markdown_literal

    shown = markdown_literal("see https://evil.example/p, WWW.x.com or a@b.com")
    assert "://" not in shown and "www." not in shown.lower() and "a@b" not in shown
    assert shown.replace("\u200b", "") == "see https://evil.example/p, WWW.x.com or a@b.com"


@pytest.mark.parametrize(
    "text",
    [
        "see _www.evil.example",
        "snake_case_WWW.evil.example",
        "see *www.evil.example*",
        "see ~www.evil.example~",
        "see (www.evil.example)",
        "www.evil.example at the start",
    ],
    ids=["underscore", "underscore-in-word", "star", "tilde", "parenthesis", "start"],
)
def test_markdown_literal_defuses_every_www_github_would_link(text):
    """GFM autolinks a "www." at the start and after whitespace, "*", "_", "~" or "(":
    "\\bwww\\." found no word boundary after "_", so "_www.evil.example" stayed a link."""
    from faithgate.safety.escape import markdown_literal

    shown = markdown_literal(text)
    assert "www." not in shown.lower()
    assert shown.replace("\u200b", "").replace("\\", "") == text


def test_markdown_user_text_renders_as_text_not_markup():
    """Rendered as GitHub does (CommonMark + tables): a file name or id with a backtick, a
    newline, "<img ...>" or "@user" opened raw HTML, a heading, a mention or closed its code
    span; ids with "<" were shown as "&lt;" inside code spans."""
    from markdown_it import MarkdownIt

    from faithgate.safety.escape import printable

    hostile = "x`<img src=x onerror=alert(1)>|\n## @octocat <details>\n::error::f"
    config = GateConfig.from_dict({"metrics": ["m"], "thresholds": {"m": 0.5}})
    ids = [hostile, "a`b|c <d>", "``x``"]
    examples = [Example(i, "src", f"{i} said @octocat ![t](http://e/t.png) **b**") for i in ids]
    scores = [{"m": Score("m", 0.2, "m:abc")} for _ in ids]
    result = evaluate(config, examples, scores, {"m": "m:abc"})
    result.input = hostile + ".jsonl"
    html = MarkdownIt("commonmark").enable("table").render(to_markdown(result))
    for bad in ("<img", "<h2>@", "<strong>b", "<em>", "<a ", "&amp;lt;"):
        assert bad not in html
    assert html.count("<details") == 1  # the report's own Settings fold only
    codes = re.findall(r"<code>(.*?)</code>", html)
    # every mention outside a code span (where GitHub links none) is defused
    assert "@octocat" not in re.sub(r"<code>.*?</code>", "", html)
    for i in ids:  # each id is one code span, shown as it is (a line break as "\\n", cut)
        shown = htmllib.escape(printable(i)[:50], quote=False)
        assert any(code.startswith(shown) for code in codes), shown
    rows = [ln for ln in to_markdown(result).splitlines() if ln.startswith("| `")]
    assert all("\n" not in r for r in rows)


@pytest.fixture()
def skipped_rule_result() -> GateResult:
    """A passing gate with a regression rule that was not checked (no baseline yet)."""
    from faithgate.result import RuleResult

    cfg = GateConfig.from_dict({"metrics": [M], "thresholds": {M: 0.5}})
    passing = evaluate(cfg, [Example("a", "src", "Fine.")], [{M: Score(M, 0.9, H[M], "a")}], H)
    skipped = RuleResult(
        f"regression[{M}]", "regression", None, 0.01, True, "skipped: no baseline yet", M
    )
    skipped.skipped = True
    passing.rules.append(skipped)
    return passing


def test_a_skipped_rule_is_not_counted_as_passing(skipped_rule_result):
    """Every report counts rules as the terminal does: "2 of 3 rules pass, 1 skipped" (a
    skipped rule was reported as "3/3 rules pass" and as a passing JUnit test case)."""
    result = skipped_rule_result
    assert len(result.rules) == 3 and result.passed
    assert render("terminal", result).startswith(
        "faithgate: PASS: 2 of 3 rules pass, 1 skipped (regression[m])"
    )
    assert "**2/3** rules pass, 1 skipped" in render("markdown", result)
    doc = render("html", result)
    assert re.search(r"rules passing</div><div class=\"v\">2/3 \(1 skipped\)</div>", doc), doc
    root = ET.fromstring(render("junit", result))
    rules = next(s for s in root.iter("testsuite") if s.get("name") == "faithgate.rules")
    assert (rules.get("tests"), rules.get("skipped"), rules.get("failures")) == ("3", "1", "0")
    (case,) = [c for c in rules.findall("testcase") if c.find("skipped") is not None]
    assert case.get("name") == "regression[m]"
    assert case.find("skipped").get("message") == "skipped: no baseline yet"


def test_markdown_escapes_pipes_only_in_table_cells():
    """Settings hashes hold "|": escaped as "\\|" in a table cell (GFM removes the backslash),
    shown as recorded in the Settings list, where a code span keeps every backslash."""
    from markdown_it import MarkdownIt

    settings = "m|en_core_web_sm@35a300|spacy|-|ccc8b2d91588"
    config = GateConfig.from_dict({"metrics": [M], "thresholds": {M: 0.5}})
    scores = [{M: Score(M, 0.2, settings, "x|y")}]
    result = evaluate(config, [Example("x|y", "src", "Wrong.")], scores, {M: settings})
    result.input = "out|puts.jsonl"
    md = to_markdown(result)
    html = MarkdownIt("commonmark").enable("table").render(md)
    codes = re.findall(r"<code>(.*?)</code>", html)
    assert settings in codes and "out|puts.jsonl" in codes and "x|y" in codes
    assert not [c for c in codes if "\\" in c], codes
    assert f"settings hash `{settings}`" in md


def _near_limit_result(values: list[float], rules: dict) -> GateResult:
    cfg = GateConfig.from_dict({"metrics": [M], "thresholds": {M: 0.5}, "rules": rules})
    exs = [Example(str(i), "src", f"summary {i}.") for i in range(len(values))]
    scores = [{M: Score(M, v, H[M], str(i))} for i, v in enumerate(values)]
    return evaluate(cfg, exs, scores, H)


def test_verdict_lines_never_round_a_failing_rate_or_mean_to_its_limit():
    """3599 of 4000 under a 90% minimum read "(90.0%)" in the headline, Markdown and HTML, and
    0.9000 in JUnit; a mean of 0.7499996 under min_mean 0.75 read 0.7500 (0.75 in the Action)."""
    from faithgate.report import github
    from faithgate.report.terminal import headline

    r = _near_limit_result([0.9] * 3599 + [0.1] * 401, {"min_pass_rate": 0.9})
    assert not r.passed
    for text in (headline(r), to_markdown(r), render("html", r)):
        assert "(89.98%)" in text and "(90.0%)" not in text
    assert 'name="faithgate.pass_rate" value="0.89975"' in render("junit", r)
    assert github.outputs_for(r.to_dict(), {})["pass-rate"] == "0.89975"

    r = _near_limit_result([0.7499996], {"min_mean": 0.75, "min_pass_rate": 0})
    assert not r.passed
    assert headline(r).endswith("; mean m 0.7499996")
    assert "mean `m` 0.7499996" in to_markdown(r)
    assert '<div class="v">0.7499996</div>' in render("html", r)
    assert 'name="faithgate.mean.m" value="0.7499996"' in render("junit", r)
    assert json.loads(github.outputs_for(r.to_dict(), {})["means"]) == {M: 0.7499996}


def test_a_rule_value_reads_as_its_limit_only_within_float_noise():
    """fmt_against printed a value one float step below its limit as 0.750000000000000 twice;
    the gate now counts that step as the limit itself, and 1e-9 below reads apart."""
    from faithgate.report.format import fmt_against

    assert fmt_against(0.7499999999999999, 0.75) == ("0.7500", "0.7500")
    assert fmt_against(1.0 - 1e-9, 1.0) == ("0.999999999", "1")
    assert fmt_against(0.49996, 0.5) == ("0.49996", "0.50000")  # as before


def _whitespace_ids_result() -> GateResult:
    ids = ["a\nb", "a b", "a\tb"]
    exs = [Example(i, "src", "Fine.") for i in ids]
    scores = [{M: Score(M, 0.9, H[M], i)} for i in ids]
    cfg = GateConfig.from_dict({"metrics": [M], "thresholds": {M: 0.5}})
    return evaluate(cfg, exs, scores, H)


def test_ids_differing_in_whitespace_stay_apart_in_junit_and_markdown():
    """A line break or tab in an id went raw into a JUnit attribute, which XML parsers read
    as a space, and Markdown collapsed it: three ids read as one ("a b")."""
    result = _whitespace_ids_result()
    root = ET.fromstring(render("junit", result))
    names = [
        tc.get("name") for tc in root.iter("testcase") if tc.get("classname").endswith("examples")
    ]
    assert names == ["a\\nb", "a b", "a\\tb"]
    md = render("markdown", result)
    for shown in ("`a\\nb`", "`a b`", "`a\\tb`"):
        assert shown in md


def test_result_json_is_strict_json_with_null_for_non_finite_numbers():
    """A rule's overflowed drop was written as a bare Infinity / NaN: not JSON for
    fromJSON() or JSON.parse."""
    result = _whitespace_ids_result()
    result.rules[0].value = float("inf")
    result.rules[0].details["lower_bound"] = float("nan")
    text = render("json", result)
    assert "Infinity" not in text and "NaN" not in text
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert data["rules"][0]["value"] is None
    assert data["rules"][0]["details"]["lower_bound"] is None
    assert GateResult.from_dict(data).rules[0].value is None  # it still loads as a baseline
    assert json.loads(result.json_text())["rules"][0]["value"] is None
