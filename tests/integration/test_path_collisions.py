"""A report or baseline path that is an input of the run is refused.

``faithgate check --json outputs.jsonl`` used to exit 0 and replace the user's outputs with the
result. Every writing command now refuses (exit 2, one line, nothing written) a path that
resolves to one of its inputs, however it is spelled: relative, with ``..``, absolute, through
a symlink or a hard link.
"""

from __future__ import annotations

import json
import os
import stat

import pytest
from click.testing import CliRunner
from gate_fakes import NAME, summary

from faithgate.cli import cli
from faithgate.safety.paths import refuse_overwriting_inputs, same_file


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"e{i}", "source": "src", "summary": summary(0.9)} for i in range(3)]
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
        f"[thresholds]\n{NAME} = 0.5\n"
    )
    (tmp_path / "sub").mkdir()
    return tmp_path


def snapshot(root):
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".fg" not in p.parts
    }


def check(*args):
    return CliRunner().invoke(cli, ["check", *args], catch_exceptions=False)


@pytest.mark.parametrize(
    "args, role",
    [
        (["--json", "outputs.jsonl"], "outputs file"),
        (["--markdown", "sub/../outputs.jsonl"], "outputs file"),
        (["--junit", "{abs}/outputs.jsonl"], "outputs file"),
        (["--html", "faithgate.toml"], "configuration file"),
        (["--json", "link.json"], "outputs file"),  # a symlink to outputs.jsonl
        (["--markdown", "hard.md"], "outputs file"),  # a hard link to outputs.jsonl
        (["--baseline", "base.json", "--json", "base.json"], "baseline"),
        (["--baseline", "outputs.jsonl", "--update-baseline"], "outputs file"),
        (["--baseline", "./faithgate.toml", "--update-baseline"], "configuration file"),
    ],
)
def test_check_refuses_a_report_or_baseline_on_an_input(project, args, role):
    (project / "link.json").symlink_to(project / "outputs.jsonl")
    os.link(project / "outputs.jsonl", project / "hard.md")
    (project / "base.json").write_text('{"metrics": [], "examples": []}\n')
    before = snapshot(project)
    res = check(*[a.replace("{abs}", str(project)) for a in args])
    assert res.exit_code == 2, res.output
    assert f"is the {role} of this run" in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert snapshot(project) == before


def test_a_report_on_the_summarizer_module_or_a_settings_file_is_refused(project):
    """``--html summ.py`` replaced the user's summarizer with the report (exit 0), and
    ``--json w.json`` a combination's weights file."""
    (project / "summ.py").write_text("def f(source):\n    return '0.9 ' + source\n")
    (project / "src.jsonl").write_text(json.dumps({"id": "a", "source": "alpha"}) + "\n")
    before = snapshot(project)
    res = check("--summarizer", "summ:f", "--data", "src.jsonl", "--html", "summ.py")
    assert res.exit_code == 2, res.output
    assert "is the summarizer's module of this run" in res.output
    assert snapshot(project) == before
    (project / "w.json").write_text("{}")
    with (project / "faithgate.toml").open("a") as fh:
        fh.write('[metric_settings.combined]\nweights = "w.json"\n')
    before = snapshot(project)
    res = check("--json", "w.json")
    assert res.exit_code == 2, res.output
    assert "is the metric_settings.combined.weights file of this run" in res.output
    assert snapshot(project) == before


def test_a_baseline_kept_as_the_cache_directorys_last_result_is_not_overwritten(project):
    """Every run with a cache writes .fg/last-result.json: a failing run replaced a baseline
    kept there (without --update-baseline)."""
    assert check("--json", "base.json").exit_code == 0
    (project / ".fg").mkdir(exist_ok=True)
    (project / ".fg" / "last-result.json").write_bytes((project / "base.json").read_bytes())
    before = (project / ".fg" / "last-result.json").read_bytes()
    res = check("--baseline", ".fg/last-result.json", "--threshold", "0.99")
    assert res.exit_code == 2, res.output
    assert "is the baseline of this run" in res.output
    assert (project / ".fg" / "last-result.json").read_bytes() == before
    assert check("--baseline", ".fg/last-result.json", "--no-cache").exit_code == 0


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_last_result_that_is_no_file_is_a_warning_and_left_as_it_is(project, kind):
    """A directory or FIFO at .fg/last-result.json (faithgate's own bookkeeping, not a report
    the user asked for) stopped the run before scoring (exit 2, no verdict, no reports), while
    failing to write that file at the end is only a warning. Now it is that warning too, and
    what is there is neither written into, replaced nor removed."""
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("needs mkfifo")
    last = project / ".fg" / "last-result.json"
    last.parent.mkdir()
    if kind == "directory":
        last.mkdir()
        (last / "keep.txt").write_text("mine\n")
    else:
        os.mkfifo(last)
    res = check("--json", "r.json")
    assert res.exit_code == 0, res.output
    assert "PASS" in res.output
    assert json.loads((project / "r.json").read_text())["passed"] is True
    [warning] = [line for line in res.stderr.splitlines() if "last-result.json" in line]
    kinds = {"directory": "a directory", "fifo": "a named pipe (FIFO)"}
    assert f"it is {kinds[kind]}, not a regular file (left as it was)" in warning
    assert "the verdict and reports of this run stand" in warning
    if kind == "directory":
        assert last.is_dir() and (last / "keep.txt").read_text() == "mine\n"
    else:
        assert stat.S_ISFIFO(os.lstat(last).st_mode)
    assert not [p for p in last.parent.iterdir() if p.name.startswith(".last-result")]  # no tmp


def test_a_users_file_at_the_last_result_is_a_warning_and_left_as_it_is(project):
    """A file of the user's named last-result.json in the cache directory was replaced by the
    run's result without a word. Only a file a run wrote (a result JSON) is replaced."""
    last = project / ".fg" / "last-result.json"
    last.parent.mkdir()
    last.write_text("my own notes\n")
    res = check()
    assert res.exit_code == 0, res.output
    [warning] = [line for line in res.stderr.splitlines() if "last-result.json" in line]
    assert "a file that faithgate did not write is there (left as it was)" in warning
    assert last.read_text() == "my own notes\n"
    last.unlink()
    # nor through a symlink: the atomic write would replace the file it points to
    (project / "notes.txt").write_text("linked notes\n")
    last.symlink_to(project / "notes.txt")
    res = check()
    assert res.exit_code == 0, res.output
    assert "a file that faithgate did not write is there" in res.stderr
    assert last.is_symlink() and (project / "notes.txt").read_text() == "linked notes\n"
    last.unlink()
    assert check().exit_code == 0
    first = last.read_bytes()
    assert first.startswith(b'{\n  "schema": 1')
    assert check("--threshold", "0.01").exit_code == 0  # a run's own file is replaced
    assert last.read_bytes() != first


def test_a_report_at_the_score_cache_is_refused(project):
    """`--markdown .fg/scores.sqlite` replaced the cache the run had just written to."""
    assert check().exit_code == 0
    cache = project / ".fg" / "scores.sqlite"
    before = cache.read_bytes()
    res = check("--markdown", ".fg/scores.sqlite")
    assert res.exit_code == 2, res.output
    assert "is the score cache of this run" in res.output
    assert cache.read_bytes() == before


def test_two_reports_on_one_file_are_refused(project):
    res = check("--json", "r.out", "--markdown", "sub/../r.out")
    assert res.exit_code == 2
    assert "are the same file" in res.output
    assert not (project / "r.out").exists()


def test_json_report_at_the_updated_baseline_is_allowed(project):
    res = check("--baseline", "base.json", "--update-baseline", "--json", "base.json")
    assert res.exit_code == 0, res.output
    assert json.loads((project / "base.json").read_text())["passed"] is True


def test_json_report_at_the_baseline_is_withheld_with_it_when_the_gate_fails(project):
    """A failing run with ``--update-baseline --json base.json`` said "baseline NOT updated"
    and replaced it anyway through the json report."""
    assert check("--baseline", "base.json", "--update-baseline").exit_code == 0
    before = (project / "base.json").read_bytes()
    res = check(
        "--baseline", "base.json", "--update-baseline", "--json", "base.json",
        "--markdown", "r.md", "--threshold", "0.95",
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    assert (project / "base.json").read_bytes() == before
    assert "the json report is that file: not written either" in res.stderr
    assert (project / "r.md").is_file() and "json report" not in res.stdout


def test_a_report_path_that_cannot_be_a_file_is_refused_before_scoring(project):
    """``--html afile/x.html`` (afile a file) failed after scoring with mkdir's "File exists",
    the junit and markdown reports of the run already written."""
    (project / "afile").write_text("mine")
    before = snapshot(project)
    res = check("--junit", "r.xml", "--markdown", "r.md", "--html", "afile/x.html")
    assert res.exit_code == 2, res.output
    assert res.output.strip() == (
        f"faithgate: the html report ({project / 'afile' / 'x.html'}) cannot be written: "
        f"{project / 'afile'} "
        "is a file, not a directory"
    )
    assert snapshot(project) == before
    (project / "faithgate.toml").write_text(
        (project / "faithgate.toml").read_text() + '[reports]\njson = "sub"\n'
    )
    res = check()
    assert (
        res.exit_code == 2
        and "sub) is a directory, not a regular file; give a file path" in res.output
    )


def test_a_report_name_too_long_for_the_file_system_is_one_line_exit_2(project):
    """ENAMETOOLONG from the directory check was an internal error (exit 1, a traceback under
    the plugin)."""
    before = snapshot(project)
    res = check("--markdown", "x" * 300 + ".md")
    assert res.exit_code == 2, res.output
    [line] = res.output.strip().splitlines()
    assert line.endswith("cannot be written: File name too long"), line
    assert snapshot(project) == before


def test_the_verdict_is_printed_when_the_reports_cannot_be_written(project, monkeypatch):
    from faithgate.errors import WriteError

    def disk_full(files, encoding="utf-8"):
        raise WriteError(files[0][0], "No space left on device")

    monkeypatch.setattr("faithgate.report.atomic_write_files", disk_full)
    res = check("--json", "r.json", "-q")
    assert res.exit_code == 2
    assert res.stdout.startswith("faithgate: PASS")
    assert "cannot write the json report to " in res.stderr
    assert "r.json: No space left on device; no report was written" in res.stderr


def test_ordinary_report_paths_still_work(project):
    res = check("--json", "sub/result.json", "--markdown", "sub/r.md")
    assert res.exit_code == 0, res.output
    assert (project / "sub" / "result.json").is_file()


def test_calibrate_refuses_to_write_its_data_as_config(project):
    data = project / "labelled.jsonl"
    data.write_text(json.dumps({"source": "a b", "summary": "a", "label": 1}) + "\n")
    before = data.read_bytes()
    res = CliRunner().invoke(
        cli,
        ["calibrate", "--data", "labelled.jsonl", "--metric", NAME, "--config", "./labelled.jsonl"],
    )
    assert res.exit_code == 2, res.output
    assert "is the --data file of this run" in res.output
    assert data.read_bytes() == before


def test_perturb_refuses_to_overwrite_its_input(project):
    before = (project / "outputs.jsonl").read_bytes()
    res = CliRunner().invoke(
        cli, ["perturb", "--input", "outputs.jsonl", "--output", "sub/../outputs.jsonl"]
    )
    assert res.exit_code == 2, res.output
    assert "is the --input file of this run" in res.output
    assert (project / "outputs.jsonl").read_bytes() == before


def test_bench_refuses_to_write_over_its_data(project):
    before = (project / "outputs.jsonl").read_bytes()
    res = CliRunner().invoke(
        cli, ["bench", "--data", "outputs.jsonl", "--metric", NAME, "--output", "outputs.jsonl"]
    )
    assert res.exit_code == 2, res.output
    assert (project / "outputs.jsonl").read_bytes() == before


def test_same_file_unit(tmp_path):
    a = tmp_path / "a"
    a.write_text("x")
    assert same_file(a, tmp_path / "." / "a")
    assert not same_file(a, tmp_path / "b")
    refuse_overwriting_inputs([("x", "-")], [("y", "-")])  # stdin/stdout markers are ignored
