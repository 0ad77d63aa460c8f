"""``faithgate github report-args --dir DIR``: before the check, it removes the reports an
earlier run left in DIR (so none is taken for this run's), and nothing else.

It once unlinked every file named ``faithgate.{xml,md,json,html}`` in DIR, the user's own notes
included, before the check had even run (exit 0); a check that then exited 2 put nothing in
their place (docs/data-safety.md section 1: nothing a user gave is lost).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from faithgate.cli import cli
from faithgate.config import GateConfig
from faithgate.formats import REPORT_FORMATS, file_report_kinds
from faithgate.gate.evaluate import evaluate
from faithgate.report import render
from faithgate.types import Example, Score, SentenceScore

FILES = {kind: REPORT_FORMATS[kind].report_filename for kind in file_report_kinds()}

# Files of the user's that happen to bear a report's name.
FOREIGN = {
    "markdown": "# My hand-written notes about faithgate\n",
    "html": "<html>mine</html>",
    "junit": "<x/>",
    "json": '{"kept": true}\n',
}


def _result(passing: bool):
    """A gate result: two examples that pass, or one under its threshold and one unscorable."""
    config = GateConfig.from_dict({"metrics": ["m"], "thresholds": {"m": 0.5}})
    examples = [Example("a", "src", "A summary."), Example("b", "src", "Another one.")]
    value = 0.9 if passing else 0.3
    first = Score("m", value, "m:abc", sentences=[SentenceScore(0, "A summary.", value)])
    second = Score("m", 0.8, "m:abc") if passing else Score.failed("m", "m:abc", "", "too long")
    return evaluate(config, examples, [{"m": first}, {"m": second}], {"m": "m:abc"})


def _report_args(directory: Path):
    return CliRunner().invoke(cli, ["github", "report-args", "--dir", str(directory)])


def _contents(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in directory.iterdir() if not p.is_symlink()}


def test_every_file_format_has_a_recognised_start():
    from faithgate.cli import github

    assert set(github._REPORT_STARTS) == set(file_report_kinds())


@pytest.mark.parametrize("passing", [True, False], ids=["pass", "fail"])
def test_the_reports_of_an_earlier_run_are_removed(tmp_path, passing):
    """Each format's report, as its renderer writes it, is recognised and removed."""
    result = _result(passing)
    for kind, name in FILES.items():
        (tmp_path / name).write_text(render(kind, result), encoding="utf-8")
    (tmp_path / "notes.md").write_text("mine\n")
    res = _report_args(tmp_path)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]
    assert res.stdout.split("\0")[:-1] == [
        item for kind, name in FILES.items() for item in (f"--{kind}", str(tmp_path / name))
    ]


@pytest.mark.parametrize("kind", list(FOREIGN))
def test_a_file_of_the_users_at_a_report_name_is_refused_and_nothing_removed(tmp_path, kind):
    result = _result(False)
    for other, name in FILES.items():  # an earlier run's reports beside it
        (tmp_path / name).write_text(render(other, result), encoding="utf-8")
    (tmp_path / FILES[kind]).write_text(FOREIGN[kind])
    before = _contents(tmp_path)
    res = _report_args(tmp_path)
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "Traceback" not in res.output, res.output
    assert f"({tmp_path / FILES[kind]}) is a file faithgate did not write" in res.output
    assert "refusing to remove it" in res.output and f"(report-dir {tmp_path})" in res.output
    assert _contents(tmp_path) == before  # the user's file, and the earlier reports too


def test_the_reviewers_case(tmp_path):
    """Hand-written notes, an HTML page and an XML file of the user's: all kept."""
    for kind in ("markdown", "html", "junit"):
        (tmp_path / FILES[kind]).write_text(FOREIGN[kind])
    res = _report_args(tmp_path)
    assert res.exit_code == 2 and res.stdout.startswith("::error title=faithgate::")
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        FILES[k]: FOREIGN[k] for k in ("markdown", "html", "junit")
    }


def test_a_report_another_tool_writes_under_the_name_is_the_users(tmp_path):
    """A JUnit file of another test runner, a JSON that is no faithgate result: refused."""
    (tmp_path / "faithgate.xml").write_text(
        '<?xml version="1.0" ?>\n<testsuites>\n\t<testsuite name="pytest" tests="1">'
        "</testsuite>\n</testsuites>\n"
    )
    res = _report_args(tmp_path)
    assert res.exit_code == 2 and "faithgate.xml) is a file faithgate did not write" in res.output
    (tmp_path / "faithgate.xml").unlink()
    (tmp_path / "faithgate.json").write_text('{"metrics": [], "examples": []}')
    res = _report_args(tmp_path)
    assert res.exit_code == 2 and "faithgate.json) is a file faithgate did not write" in res.output
    assert (tmp_path / "faithgate.json").read_text() == '{"metrics": [], "examples": []}'


def test_a_symlinked_report_keeps_its_link(tmp_path):
    """A report behind a symbolic link: the earlier report it points to is removed, the link
    (the user's) stays, and the check writes through it (``faithgate.safety.atomic``). A link to a
    file of the user's is refused, both left as they were."""
    reports, elsewhere = tmp_path / "reports", tmp_path / "elsewhere"
    reports.mkdir()
    elsewhere.mkdir()
    (elsewhere / "page.html").write_text(render("html", _result(True)), encoding="utf-8")
    (reports / "faithgate.html").symlink_to(elsewhere / "page.html")
    (reports / "faithgate.md").symlink_to(elsewhere / "missing.md")  # dangling: nothing to do
    res = _report_args(reports)
    assert res.exit_code == 0, res.output
    assert (reports / "faithgate.html").is_symlink() and not (elsewhere / "page.html").exists()
    assert (reports / "faithgate.md").is_symlink()
    (elsewhere / "page.html").write_text("<html>mine</html>")
    res = _report_args(reports)
    assert res.exit_code == 2 and "faithgate.html) is a file faithgate did not write" in res.output
    assert (elsewhere / "page.html").read_text() == "<html>mine</html>"
    assert (reports / "faithgate.html").is_symlink()


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("markdown", "## About faithgate: A faithfulness gate\n\nMy notes.\n"),
        ("markdown", "## Notes faithgate: TODO\n"),
        ("html", "<!DOCTYPE html>\n<html><head><title>faithgate: NOTES</title></head></html>\n"),
    ],
)
def test_a_heading_that_only_resembles_a_reports_is_the_users(tmp_path, kind, text):
    """Any word before "faithgate:" and any capitalised word after it passed for a report's
    heading: a user's "## About faithgate: A guide" was deleted."""
    (tmp_path / FILES[kind]).write_text(text)
    res = _report_args(tmp_path)
    assert res.exit_code == 2 and "is a file faithgate did not write" in res.output
    assert (tmp_path / FILES[kind]).read_text() == text
