"""Readers: JSONL / CSV records validated with file:line errors; documented edge cases."""

from __future__ import annotations

import io
import json
import sys

import pytest

from faithgate.config import load_config
from faithgate.errors import InputError
from faithgate.io import load_examples, write_jsonl


def write(tmp_path, name, content, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_jsonl_ok_with_blank_lines_default_ids_and_meta(tmp_path):
    p = write(
        tmp_path,
        "a.jsonl",
        '{"source": "S1", "summary": "T1", "label": true, "pair_id": 7}\n\n'
        '{"id": 5, "source": "S2", "summary": "T2", "meta": {"k": 1}, "label": null}\n',
    )
    a, b = load_examples(p)
    assert (a.id, a.label, a.meta) == ("1", 1, {"pair_id": 7})  # unknown field kept in meta
    assert (b.id, b.label, b.meta) == ("5", None, {"k": 1})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"source": "S", "summary": "T"}\n{"source": "S"\n', "a.jsonl:2: invalid JSON"),
        ('{"source": "S"}\n', "a.jsonl:1: missing required field 'summary'"),
        ('{"source": 3, "summary": "T"}\n', "a.jsonl:1: field 'source' must be text"),
        ('{"source": "  ", "summary": "T"}\n', "a.jsonl:1: field 'source' is empty"),
        ("[1, 2]\n", "a.jsonl:1: expected a JSON object"),
        ('{"source": "S", "summary": "T", "label": 2}\n', "a.jsonl:1: field 'label'"),
        (
            '{"id": "x", "source": "S", "summary": "T"}\n{"id": "x", "source": "S", "summary": "U"}\n',
            "a.jsonl:2: duplicate id 'x' (first on line 1)",
        ),
        ("\n\n", "a.jsonl: no records"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, content, message):
    p = write(tmp_path, "a.jsonl", content)
    with pytest.raises(InputError) as err:
        load_examples(p)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"id": "a", "source": "S", "summary": "Aliens.", "summary": "T"}\n',
            "a.jsonl:1: field 'summary' given twice",
        ),
        (
            '{"source": "S", "summary": "T"}\n{"source": "S", "summary": "T", "meta": '
            '{"k": 1, "k": 2}}\n',
            "a.jsonl:2: field 'k' given twice",
        ),
        ('{"id": ' + "9" * 5000 + ', "source": "S", "summary": "T"}\n', "more than 4300 digits"),
    ],
    ids=["summary-twice", "nested-key-twice", "5000-digits"],
)
def test_a_repeated_field_or_an_unreadable_number_is_an_error(tmp_path, content, message):
    """A field given twice in a record was read as its last value, silently (the unfaithful
    first summary was never scored); a 5000-digit number was an internal error."""
    p = write(tmp_path, "a.jsonl", content)
    with pytest.raises(InputError, match=message):
        load_examples(p)


def test_missing_field_names_the_records_fields_and_a_likely_rename(tmp_path):
    """A file written for another tool (SummaC / AggreFact: document, claim) is refused, never
    read through a guessed field, and the error says which field to rename."""
    p = write(tmp_path, "agg.jsonl", '{"document": "D", "claim": "C", "label": 1}\n')
    with pytest.raises(InputError) as err:
        load_examples(p)
    assert str(err.value) == (
        "agg.jsonl:1: missing required field 'source' (the record's fields: 'claim', "
        "'document', 'label'; rename 'document' to 'source' if it holds the source)"
    ).replace("agg.jsonl", str(p))
    p = write(tmp_path, "b.jsonl", '{"source": "S", "claim": "C"}\n')
    with pytest.raises(InputError, match="rename 'claim' to 'summary' if it holds the summary"):
        load_examples(p)
    many = {f"f{i}": i for i in range(10)} | {"source": "S"}
    p = write(tmp_path, "c.jsonl", json.dumps(many) + "\n")
    with pytest.raises(InputError) as err:
        load_examples(p)
    assert "'f7', ...)" in str(err.value) and "rename" not in str(err.value)


def test_undecodable_bytes_name_the_line(tmp_path):
    p = write(tmp_path, "b.jsonl", b'{"source": "S", "summary": "T"}\n{"source": "\xff"}\n', "wb")
    with pytest.raises(InputError, match=r"b\.jsonl:2: not valid UTF-8"):
        load_examples(p)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_examples(tmp_path / "nope.jsonl")
    with pytest.raises(
        InputError, match="is a directory, not a regular file or a pipe"
    ):  # "no such file"
        load_examples(tmp_path)
    with pytest.raises(
        InputError, match="is a directory, not a regular file; give the configuration file"
    ):
        load_config(tmp_path)
    with pytest.raises(InputError, match="unknown input format"):
        load_examples(tmp_path / "x.txt", fmt="xml")


def test_csv_with_a_repeated_header_column_is_refused(tmp_path):
    """csv.DictReader keeps the last of two same-named columns: the other would vanish."""
    p = write(tmp_path, "d.csv", 'source,summary,summary\n"a b",a,c\n')
    with pytest.raises(InputError, match=r"d\.csv:1: the header repeats column\(s\) 'summary'"):
        load_examples(p)


def test_csv_reader(tmp_path):
    p = write(
        tmp_path,
        "c.csv",
        'id,source,summary,label,system\nr1,"Source, with comma","Sum ""quoted""",0,bart\n',
    )
    (ex,) = load_examples(p)
    assert ex.id == "r1" and ex.source == "Source, with comma" and ex.summary == 'Sum "quoted"'
    assert ex.label == 0 and ex.meta == {"system": "bart"}


def test_csv_errors(tmp_path):
    p = write(tmp_path, "c.csv", "source,summary\nS,T\nS,T,extra\n")
    with pytest.raises(InputError, match=r"c\.csv:3: more cells than header columns"):
        load_examples(p)
    p = write(tmp_path, "d.csv", "source,summary\nS,\n")
    with pytest.raises(InputError, match=r"d\.csv:2: field 'summary' is empty"):
        load_examples(p)
    p = write(tmp_path, "e.csv", "")
    with pytest.raises(InputError, match="empty CSV"):
        load_examples(p)


def test_stdin_and_write_round_trip(tmp_path, monkeypatch):
    data = b'{"id": "a", "source": "S", "summary": "T"}\n'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    (ex,) = load_examples("-")
    assert ex.id == "a"
    out = tmp_path / "sub" / "out.jsonl"
    write_jsonl([ex.to_dict()], out)
    assert load_examples(out)[0] == ex


def test_the_gate_reads_an_empty_summary_as_an_output(tmp_path):
    """An empty summary is a summarizer's bad output (it fails its own example), not bad input;
    other readers (bench, calibrate, perturb) still refuse it, and a blank source stays an
    error everywhere (review s19, finding 6)."""
    p = write(
        tmp_path, "o.jsonl", '{"source": "S", "summary": ""}\n{"source": "S", "summary": " "}\n'
    )
    with pytest.raises(InputError, match=r"o\.jsonl:1: field 'summary' is empty"):
        load_examples(p)
    assert [e.summary for e in load_examples(p, allow_empty_summary=True)] == ["", ""]
    p = write(tmp_path, "s.jsonl", '{"source": " ", "summary": "T"}\n')
    with pytest.raises(InputError, match=r"s\.jsonl:1: field 'source' is empty"):
        load_examples(p, allow_empty_summary=True)


def test_a_summarizer_module_of_another_project_is_not_reused(tmp_path, monkeypatch):
    """Two projects with their own ``summ.py`` in one process: the second got the first's
    summarizer, since ``summ`` was already in ``sys.modules``."""
    import sys

    from faithgate.summarize import load_summarizer

    for name, says in (("a", "A"), ("b", "B")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "fg_two_projects_summ.py").write_text(
            f"def summarize(source):\n    return {says!r}\n"
        )
    monkeypatch.delitem(sys.modules, "fg_two_projects_summ", raising=False)
    ref = "fg_two_projects_summ:summarize"
    got = [load_summarizer(ref, [tmp_path / name])("x") for name in ("a", "b", "b", "a")]
    assert got == ["A", "B", "B", "A"]
    sys.modules.pop("fg_two_projects_summ", None)
