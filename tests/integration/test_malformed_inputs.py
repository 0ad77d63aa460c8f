"""Inputs that used to crash with "internal error" (exit 1).

Each now gives a clear one-line error with exit 2, or a score: a lone surrogate in JSONL,
U+FFFE / U+FFFF in a summary with ``--junit``, JSON nested 200,000 levels deep in the outputs
or the baseline (refused before any scoring), a score cache that is not a database, a
truncated ONNX file, a 1.2M-character source, and raw U+2028 / U+0085 inside JSONL strings.
"""

from __future__ import annotations

import json
import sqlite3
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner
from gate_fakes import NAME, FakeMetric, summary

from faithgate.cli import cli
from faithgate.errors import InputError, ModelFileError
from faithgate.io import jsonl_lines, load_examples

DEEP = 200_000


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
        f"[thresholds]\n{NAME} = 0.5\n"
    )
    FakeMetric.calls.clear()
    return tmp_path


def write_outputs(root, rows, ensure_ascii=True):
    text = "".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in rows)
    (root / "outputs.jsonl").write_text(text, encoding="utf-8")


def check(*args):
    return CliRunner().invoke(cli, ["check", *args])


def one_line_error(res, code=2):
    assert res.exit_code == code, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr
    return lines[0]


def test_lone_surrogate_in_jsonl_is_a_clear_input_error(project):
    (project / "outputs.jsonl").write_text(
        '{"id": "a", "source": "src", "summary": "0.9 ok \\ud800 here."}\n'
    )
    line = one_line_error(check())
    assert "outputs.jsonl:1: field 'summary' contains a lone surrogate (U+D800)" in line
    (project / "outputs.jsonl").write_text(
        '{"id": "a", "source": "src", "summary": "0.9 ok.", "meta": {"x": "\\udfff"}}\n'
    )
    assert "lone surrogate (U+DFFF)" in one_line_error(check())


@pytest.mark.parametrize("char", ["\ufffe", "\uffff", "\x01"])
def test_xml_forbidden_characters_in_a_summary_still_give_a_junit_report(project, char):
    write_outputs(
        project, [{"id": f"i{char}", "source": "src", "summary": f"0.9 odd {char} text."}], False
    )
    res = check("--junit", "r.xml")
    assert res.exit_code == 0, res.output
    root = ET.parse(project / "r.xml").getroot()
    case = next(root.iter("testcase"))
    assert case.get("name") == f"i\\u{ord(char):04x}"


def test_deeply_nested_outputs_are_refused_before_scoring(project):
    deep = "[" * DEEP + "]" * DEEP
    (project / "outputs.jsonl").write_text(deep + "\n")
    assert "outputs.jsonl:1: invalid JSON (nested too deeply)" in one_line_error(check())


def test_deeply_nested_baseline_is_refused_before_scoring(project):
    write_outputs(project, [{"id": "a", "source": "src", "summary": summary(0.9)}])
    (project / "base.json").write_text('{"a": ' * DEEP + "1" + "}" * DEEP)
    line = one_line_error(check("--baseline", "base.json"))
    assert "base.json: not a faithgate result JSON (nested too deeply)" in line
    assert FakeMetric.calls == []  # the baseline is read before anything is scored


def _edited_baseline(project, edit):
    """A real result JSON as baseline (this run's outputs), changed by ``edit(data)``."""
    write_outputs(project, [{"id": "a", "source": "src", "summary": summary(0.9)}])
    assert check("--json", "base.json").exit_code == 0
    data = json.loads((project / "base.json").read_text())
    edit(data)
    (project / "base.json").write_text(json.dumps(data))
    FakeMetric.calls.clear()


def _set_value(value):
    def edit(data):
        data["examples"][0]["scores"][NAME]["value"] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        # A non-finite baseline made the regression rule pass whatever the new scores.
        (_set_value(float("inf")), f"the {NAME} value must be a finite number or null, got inf"),
        (_set_value(float("nan")), f"the {NAME} value must be a finite number or null, got nan"),
        (_set_value("0.9"), f"the {NAME} value must be a finite number or null, got '0.9'"),
        (_set_value(True), f"the {NAME} value must be a finite number or null, got True"),
        (lambda d: d["examples"][0].update(id=None), "an example id must be a string, got None"),
        (lambda d: d["examples"][0].update(scores=[1]), "malformed faithgate result"),
        (lambda d: d["examples"][0]["scores"].update({NAME: 5}), "malformed faithgate result"),
        (
            lambda d: d["examples"][0]["scores"][NAME].update(settings_hash="other|abc"),
            f"example 'a': its {NAME} score was made with settings other|abc, the result's",
        ),
    ],
)
def test_a_malformed_baseline_is_an_input_error_before_scoring(project, edit, message):
    _edited_baseline(project, edit)
    line = one_line_error(check("--baseline", "base.json"))
    assert "base.json: " in line and message in line, line
    assert FakeMetric.calls == []


def _set_example(**fields):
    def edit(data):
        data["examples"][0].update(fields)

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set_example(summary=None), "example 'a': summary must be a string, got None"),
        (_set_example(summary=[]), "example 'a': summary must be a string, got []"),
        (_set_example(probe="false"), "example 'a': 'probe' must be true or false, got 'false'"),
        (_set_example(passed="true"), "example 'a': 'passed' must be true or false, got 'true'"),
    ],
    ids=["summary-null", "summary-list", "probe-string", "passed-string"],
)
def test_baseline_example_fields_of_the_wrong_type_are_refused(project, edit, message):
    """A baseline summary of null crashed the per-example thresholds after scoring (internal
    error), and "probe": "false" read as true, so the baseline's examples silently vanished."""
    _edited_baseline(project, edit)
    with (project / "faithgate.toml").open("a") as fh:
        fh.write("[rules]\nregression = { per_example_drop = 0.05 }\n")
    line = one_line_error(check("--baseline", "base.json"))
    assert "base.json: " in line and message in line, line
    assert FakeMetric.calls == []


def test_a_baseline_near_the_float_limit_fails_the_regression_rule(project):
    """1e308 is finite, but a mean over it overflows: the bootstrap's bound is NaN, which
    must not read as "noise" (it passed), and numpy must not print warnings."""
    _edited_baseline(project, _set_value(1e308))
    write_outputs(
        project,
        [
            {"id": "a", "source": "src", "summary": summary(0.9)},
            {"id": "b", "source": "src", "summary": summary(0.9)},
        ],
    )
    data = json.loads((project / "base.json").read_text())
    data["examples"].append({**data["examples"][0], "id": "b"})
    (project / "base.json").write_text(json.dumps(data))
    res = check("--baseline", "base.json")
    assert res.exit_code == 1, res.output
    assert f"regression[{NAME}]" in res.stdout.splitlines()[0]
    assert "Warning" not in res.stderr, res.stderr


def test_a_baseline_recording_no_settings_hash_is_not_compared(project):
    """Without its settings hashes a baseline cannot be shown comparable: the regression rule
    fails (it used to compare it silently)."""

    def drop_hashes(data):
        del data["settings_hashes"]
        for score in data["examples"][0]["scores"].values():
            score["settings_hash"] = ""

    _edited_baseline(project, drop_hashes)
    res = check("--baseline", "base.json")
    assert res.exit_code == 1, res.output
    assert f"baseline {NAME} scores were made with other settings (none recorded vs " in res.output


def test_deeply_nested_config_is_an_input_error(project):
    (project / "faithgate.toml").write_text("a = " + "[" * DEEP + "]" * DEEP + "\n")
    assert "invalid TOML" in one_line_error(check())


def test_a_score_cache_that_is_not_a_database_is_moved_aside(project):
    write_outputs(project, [{"id": "a", "source": "src", "summary": summary(0.9)}])
    cache = project / ".fg" / "scores.sqlite"
    cache.parent.mkdir()
    junk = b"this is not a database, it is a text file left by a crashed copy\n" * 20
    cache.write_bytes(junk)
    res = check()
    assert res.exit_code == 0, res.output
    [warning] = res.stderr.strip().splitlines()
    assert (
        "damaged or not a SQLite database" in warning
        and "moved it to scores.sqlite.corrupt-" in warning
    )
    [aside] = cache.parent.glob("scores.sqlite.corrupt-*")
    assert aside.read_bytes() == junk  # nothing deleted
    assert sqlite3.connect(cache).execute("SELECT count(*) FROM scores").fetchone() == (1,)
    assert check().exit_code == 0 and FakeMetric.calls == ["a"]  # the new cache is used


def test_a_foreign_sqlite_database_as_cache_is_moved_aside(project):
    write_outputs(project, [{"id": "a", "source": "src", "summary": summary(0.9)}])
    (project / ".fg").mkdir()
    with sqlite3.connect(project / ".fg" / "scores.sqlite") as conn:
        conn.execute("CREATE TABLE scores (other TEXT)")
    res = check()
    assert res.exit_code == 0, res.output
    assert "not a faithgate score cache" in res.stderr


def test_a_cache_dir_that_is_a_file_is_an_input_error(project):
    write_outputs(project, [{"id": "a", "source": "src", "summary": summary(0.9)}])
    (project / "afile").write_text("x")
    toml = (
        (project / "faithgate.toml").read_text().replace('cache_dir = ".fg"', 'cache_dir = "afile"')
    )
    (project / "faithgate.toml").write_text(toml)
    line = one_line_error(check())
    assert "as the score cache directory" in line


def test_truncated_onnx_file_is_a_model_file_error_exit_2(tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from faithgate.backends.onnx_backend import get_session

    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    path = tmp_path / "model.onnx"
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))
    assert get_session(path) is not None
    data = path.read_bytes()
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="damaged or not an ONNX model") as info:
        get_session(bad)
    assert info.value.exit_code == 2


# json.dumps escapes C0 controls but leaves these raw with ensure_ascii=False.
@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"])
def test_jsonl_with_raw_line_separators_inside_strings_parses(tmp_path, sep):
    path = tmp_path / "o.jsonl"
    rows = [
        {"id": "a", "source": f"one{sep}two", "summary": f"x{sep}y"},
        {"id": "b", "source": "s", "summary": "t"},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    assert sep in path.read_text("utf-8")  # raw, not escaped
    examples = load_examples(path)
    # The row is read whole; the separator is scored as the line end it is (types.normalized).
    expected = "one\n\ntwo" if sep == "\u2029" else "one\ntwo"
    assert [e.source for e in examples] == [expected, "s"]
    assert jsonl_lines('{"a": 1}\r\n{"b": 2}') == ['{"a": 1}\r', '{"b": 2}']


def test_bad_json_line_numbers_count_only_newlines(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_text('{"id": "a", "source": "s\u2028", "summary": "t"}\n{bad\n', "utf-8")
    with pytest.raises(InputError, match=r"o.jsonl:2: invalid JSON"):
        load_examples(path)


def test_long_sources_are_parsed_in_pieces_without_losing_text(monkeypatch):
    from faithgate import text as textmod

    text = "First sentence here. " * 40 + "\n\n" + "Another paragraph starts. " * 40
    monkeypatch.setattr(textmod, "PARSE_PIECE_CHARS", 300)
    pieces = textmod.pieces(text, 300)
    assert "".join(pieces) == text and all(len(p) <= 300 for p in pieces)
    doc = textmod._parse_cached.__wrapped__(text, None)
    assert doc.text == text
    assert len(list(doc.sents)) == 80


@pytest.mark.slow
def test_a_1_2_million_character_source_scores_without_spacy_noise(project):
    # spaCy refuses a text over its max_length in characters (E088); its time goes by tokens.
    # Each sentence is padded with a run of spaces (one token), so the source keeps its 1.2M
    # characters and the real limits with a twelfth of the tokens (about 50 s less per run).
    sent = "The committee in Boston approved the new budget on Monday after a debate." + " " * 927
    source = (sent * (1_200_000 // len(sent) + 1))[:1_200_000]
    from faithgate.text import PARSE_PIECE_CHARS, load_spacy

    assert len(source.strip()) > load_spacy(None).max_length > PARSE_PIECE_CHARS
    write_outputs(
        project, [{"id": "big", "source": source, "summary": "The committee approved it."}]
    )
    toml = project / "faithgate.toml"  # the real ner metric, with a threshold of its own
    toml.write_text(toml.read_text().replace(NAME, "ner").replace("ner = 0.5", "ner = 0.01"))
    res = check("--no-cache", "-q")
    assert res.exit_code in (0, 1), res.output
    assert res.stderr == "", res.stderr  # no E088 warning, no retry warning


NOT_UTF8 = "o\udcff.jsonl"  # the file name b"o\xff.jsonl", as Python holds it


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--outputs", NOT_UTF8, "--json", "r.json"],
        ["check", "--outputs", "outputs.jsonl", "--html", "r\udcff.html"],
        ["calibrate", "--data", NOT_UTF8, "--metric", NAME, "--config", "c.toml"],
    ],
    ids=["check-outputs", "check-report", "calibrate-data"],
)
def test_a_file_name_that_is_not_utf8_is_refused_up_front(project, args):
    """A non-UTF-8 file name reached the result JSON, the reports and calibrate's TOML: after
    scoring, "internal error: UnicodeEncodeError ... surrogates not allowed" (exit 1)."""
    rows = [{"id": "a", "source": "src", "summary": summary(0.9), "label": 1}]
    write_outputs(project, rows)
    (project / NOT_UTF8).write_bytes((project / "outputs.jsonl").read_bytes())
    line = one_line_error(CliRunner().invoke(cli, args))
    assert "\\xff" in line and "is not valid UTF-8" in line, line
    assert FakeMetric.calls == []
    assert not (project / "c.toml").exists()


def test_a_path_outside_the_project_that_is_not_utf8_is_written_escaped(tmp_path):
    """Paths are written into results relative to the project, else whole: a name whose bytes
    are not UTF-8 (reached without the command line, e.g. from the plugin) broke the JSON."""
    from faithgate.config import GateConfig

    cfg = GateConfig.from_dict({"metrics": [NAME]}, root=tmp_path / "project")
    assert cfg.display_path(f"/elsewhere/{NOT_UTF8}") == "/elsewhere/o\\xff.jsonl"
    json.dumps(cfg.display_path(f"/elsewhere/{NOT_UTF8}"), ensure_ascii=False).encode("utf-8")
