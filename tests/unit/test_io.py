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


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        # an unclosed quote in the last column took in every later row as one summary
        ('id,source,summary\n1,a,"abc\n2,x,y\n3,z,w\n', 2, "unexpected end of data"),
        # quotes inside a quoted field were moved ('He said no" today"')
        ('id,source,summary\n1,x,y\n2,a,"He said "no" today"\n3,x,y\n', 3, "',' expected"),
        ('id,source,summary\n1,"a "b" c",d\n', 2, "',' expected"),
        ('id,source,summary\n1,"a"x,b\n', 2, "',' expected"),
        # the line of the record that starts the broken cell, not the end of the file
        ('source,summary\n"multi\nline",c\n\n"unclosed,T\nx,y\nz,w\n', 5, "unexpected end"),
    ],
    ids=["unclosed-last-cell", "quotes-inside-quoted", "quotes-inside-cell", "text-after-quote",
         "line-of-the-record"],
)  # fmt: skip
def test_a_csv_quote_that_does_not_balance_is_an_error_not_merged_rows(
    tmp_path, content, line, reason
):
    """csv's lenient mode silently merged the rows after an unclosed quote into one cell, or
    moved quotes: rows the gate never scored (review s23, F6)."""
    p = write(tmp_path, "o.csv", content)
    with pytest.raises(InputError) as err:
        load_examples(p)
    assert str(err.value).startswith(f"{p}:{line}: invalid CSV (")
    assert reason in str(err.value) and "\n" not in str(err.value)


def test_well_formed_csv_quoting_still_loads_with_the_same_ids(tmp_path):
    """Doubled quotes, quoted commas and line breaks, CRLF and blank lines are standard CSV;
    a record's default id stays its last line, as before (baselines hold those ids)."""
    p = write(
        tmp_path,
        "c.csv",
        'source,summary\r\n\r\n"S, one","He said ""no"" today"\r\n"two\r\nlines",T\r\n',
    )
    a, b = load_examples(p)
    assert (a.id, a.source, a.summary) == ("3", "S, one", 'He said "no" today')
    # A cell's CRLF is read as written and scored as "\n" (types.normalized: line ends are one).
    assert (b.id, b.source, b.summary) == ("5", "two\nlines", "T")


def test_a_csv_cell_as_long_as_a_jsonl_field_loads(tmp_path):
    """csv's default field limit (131,072 characters) refused a long document that loads from
    JSONL (review s23, F9); the limit is raised for the read only."""
    import csv

    source = "word " * 30_000
    before = csv.field_size_limit()
    p = write(tmp_path, "big.csv", f'id,source,summary\n1,"{source}",b\n')
    j = write(tmp_path, "big.jsonl", json.dumps({"id": "1", "source": source, "summary": "b"}))
    assert load_examples(p) == load_examples(j)
    assert csv.field_size_limit() == before


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"meta": {"pair_id": "x"}, "pair_id": "y"}, "field 'pair_id' is given both"),
        ({"meta": {"k": 1}, "k": 1}, "field 'k' is given both"),
        ({"meta": False}, "field 'meta' must be an object"),
        ({"meta": 0}, "field 'meta' must be an object"),
        ({"meta": ""}, "field 'meta' must be an object"),
        ({"meta": []}, "field 'meta' must be an object"),
    ],
    ids=["pair_id-conflict", "same-value", "false", "zero", "empty-string", "empty-list"],
)
def test_meta_conflicts_and_falsy_non_object_meta_are_refused(tmp_path, record, message):
    """A top-level field replaced the same key of ``meta`` silently (``pair_id`` decides
    pairing), and a falsy ``meta`` was read as none (review s23, F8)."""
    p = write(tmp_path, "m.jsonl", json.dumps({"source": "S", "summary": "T", **record}) + "\n")
    with pytest.raises(InputError, match=rf"m\.jsonl:1: {message}"):
        load_examples(p)
    p = write(tmp_path, "n.jsonl", '{"source": "S", "summary": "T", "meta": null, "k": 1}\n')
    assert load_examples(p)[0].meta == {"k": 1}  # null is no meta, as before


def test_csv_score_cells_are_numbers_and_labels_may_be_written_as_floats(tmp_path):
    """CSV has only text: bench refused every CSV ``score`` column ("got '0.9'"), and a label
    "1.0" (pandas' way with missing values) was refused while JSON 1.0 was read (s23, F10)."""
    p = write(
        tmp_path,
        "s.csv",
        "id,source,summary,label,score,note\n"
        "1,S,T,1.0,0.9,0.9\n2,S,U,0.0,,x\n3,S,V,,7,\n4,S,W,1,-1e-3,\n5,S,X,0,n/a,\n",
    )
    got = [(e.label, e.meta) for e in load_examples(p)]
    assert got == [
        (1, {"score": 0.9, "note": "0.9"}),  # only `score` is read as a number
        (0, {"score": None, "note": "x"}),
        (None, {"score": 7, "note": ""}),
        (1, {"score": -0.001, "note": ""}),
        (0, {"score": "n/a", "note": ""}),  # not a number: left for bench to refuse by name
    ]
    p = write(tmp_path, "s.jsonl", '{"source": "S", "summary": "T", "score": "0.9"}\n')
    assert load_examples(p)[0].meta == {"score": "0.9"}  # JSON keeps its types
    p = write(tmp_path, "b.csv", "source,summary,label\nS,T,1.5\n")
    with pytest.raises(InputError, match="field 'label' must be"):
        load_examples(p)


def test_closed_standard_input_is_an_input_error(monkeypatch):
    """With fd 0 closed (``<&-``) Python has no ``sys.stdin``: reading ``-`` was an internal
    error (exit 1), not bad input (exit 2) (review s23, F11)."""
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(InputError, match="standard input is closed"):
        load_examples("-")
    closed = io.TextIOWrapper(io.BytesIO(b""))
    closed.close()
    monkeypatch.setattr(sys, "stdin", closed)
    with pytest.raises(InputError, match="standard input is closed"):
        load_examples("-")


@pytest.mark.parametrize("blank_id", ["\u200b", " \ufeff ", "\u2060\u00ad"])
def test_an_id_of_invisible_characters_is_empty(tmp_path, blank_id):
    """An id of only U+200B prints as nothing but passed the "id is empty" check (s23, F13)."""
    p = write(tmp_path, "i.jsonl", json.dumps({"id": blank_id, "source": "S", "summary": "T"}))
    with pytest.raises(InputError, match=r"i\.jsonl:1: field 'id' is empty"):
        load_examples(p)
    p = write(tmp_path, "j.jsonl", json.dumps({"id": "a\u200b", "source": "S", "summary": "T"}))
    assert load_examples(p)[0].id == "a\u200b"  # ids are kept as given, not normalised


def test_a_csv_score_too_long_to_read_is_an_input_error(tmp_path):
    """A ``score`` cell of 5000 digits raised Python's int-conversion ValueError: an internal
    error (exit 1), where the same number in JSONL is bad input naming file and line (exit 2)."""
    from click.testing import CliRunner

    from faithgate.cli import cli

    p = write(tmp_path, "s.csv", "id,source,summary,score\n1,S,T,0.5\n2,S,U," + "9" * 5000 + "\n")
    with pytest.raises(InputError, match=r"s\.csv:3: field 'score' is a number with more than"):
        load_examples(p)
    res = CliRunner().invoke(
        cli, ["bench", "--data", str(p), "--metric", "overlap", "--no-cache", "--json"]
    )
    assert res.exit_code == 2, res.output
    assert "s.csv:3: field 'score' is a number with more than 4300 digits" in res.output
    assert "internal error" not in res.output


def test_concurrent_csv_reads_leave_the_field_limit_as_it_was(tmp_path, monkeypatch):
    """``csv.field_size_limit`` is process-wide: threads reading CSV at once restored each
    other's raised limit (left at 2**31 - 1) or lowered it under a read of a long cell (a
    spurious "field larger than field limit"). Each raising of the limit is slowed down here so
    that, without the lock, the threads' reads overlap every time."""
    import csv
    import threading
    import time

    real_limit = csv.field_size_limit

    def slow_limit(*args):
        old = real_limit(*args)
        if args:
            time.sleep(0.005)  # the window another thread would run in
        return old

    big = write(tmp_path, "big.csv", f'id,source,summary\n1,"{"word " * 40_000}",T\n')
    small = write(tmp_path, "small.csv", "id,source,summary\n1,S,T\n2,S,U\n")
    before = real_limit()
    monkeypatch.setattr(csv, "field_size_limit", slow_limit)
    start = threading.Barrier(6)
    errors: list[str] = []

    def reader(path, rows):
        start.wait()
        for _ in range(3):
            try:
                assert len(load_examples(path)) == rows
            except Exception as exc:  # any failure is reported below
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    threads = [threading.Thread(target=reader, args=(big, 1)) for _ in range(3)]
    threads += [threading.Thread(target=reader, args=(small, 2)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert real_limit() == before
