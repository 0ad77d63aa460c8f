"""``bench``, ``calibrate`` and ``perturb`` on small and hostile inputs: nothing a user gave is
overwritten, no figure from one or two rows reads as certain, bad fields and options are one
line and exit 2 (never an internal error), user text reaches the terminal escaped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from faithgate.cli import cli

SRC = "The committee approved the budget of ten million after a long debate in Paris."
FAITHFUL = [
    "The committee approved the budget.",
    "The budget of ten million was approved.",
    "After a long debate the committee approved the budget.",
    "The committee approved a budget in Paris.",
    "A budget of ten million was approved after a debate.",
]
UNFAITHFUL = [
    "The council rejected the tax plan of Berlin.",
    "Senators vetoed a ninety billion dollar war chest.",
    "The mayor resigned over a bribery scandal in Rome.",
    "Voters elected a new king on Tuesday morning.",
    "Police arrested twelve protesters outside the stadium.",
]


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def labelled(n_per_class: int = 5, **extra: object) -> list[dict]:
    rows = [
        {"id": f"f{i}", "source": SRC, "summary": s, "label": 1, **extra}
        for i, s in enumerate(FAITHFUL[:n_per_class])
    ]
    return rows + [
        {"id": f"u{i}", "source": SRC, "summary": s, "label": 0, **extra}
        for i, s in enumerate(UNFAITHFUL[:n_per_class])
    ]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    write_rows(tmp_path / "l.jsonl", labelled())
    return tmp_path


def _bench(*args: str):
    return invoke("bench", "--metric", "overlap", "-q", "--resamples", "20", *args)


# ---------------------------------------------------------------- 1. outputs vs inputs/cache


def test_bench_output_cannot_replace_the_score_cache(project):
    assert _bench("--data", "l.jsonl", "--cache", "c.sqlite").exit_code == 0
    before = (project / "c.sqlite").read_bytes()
    res = _bench("--data", "l.jsonl", "--cache", "c.sqlite", "--output", "./c.sqlite")
    assert res.exit_code == 2, res.output
    assert "score cache" in res.stderr and "same file" in res.stderr
    assert (project / "c.sqlite").read_bytes() == before


def test_bench_default_cache_is_protected_too(project):
    default = project / "home" / "bench" / "scores.sqlite"
    res = _bench("--data", "l.jsonl", "--output", str(default))
    assert res.exit_code == 2, res.output
    assert not default.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--cache", "l.jsonl"],  # the cache would move the data aside as "corrupt"
        ["--cache", "c.sqlite", "--output", "c.timings.json"],  # the cache's timings file
        ["--combine", "l.jsonl", "--save-weights", "c.sqlite", "--cache", "c.sqlite"],
        ["--plots", "figs", "--cache", "figs/l__overlap__roc.png"],  # a plot onto the cache
        ["--plots", "figs", "--output", "figs/l__overlap__hist.png"],  # a plot onto a report
    ],
)
def test_bench_outputs_never_land_on_inputs_or_the_cache(project, args):
    before = (project / "l.jsonl").read_bytes()
    res = _bench("--data", "l.jsonl", *args)
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("faithgate: ") and "Traceback" not in res.output
    assert (project / "l.jsonl").read_bytes() == before
    assert not (project / "c.sqlite").exists()  # refused before any scoring


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--output", "out.json"], "the --output (out.json) is also the --plots directory"),
        (["--cache", "out.json"], "the score cache (out.json) is also the --plots directory"),
        (["--no-cache", "--plots", "l.jsonl"], "--plots l.jsonl is a file, not a directory"),
    ],
)
def test_a_plots_directory_in_the_way_is_refused_before_scoring(project, args, message):
    """These failed only once every score was computed (and left an out.json directory)."""
    if "--plots" not in args:
        args = ["--plots", "out.json", *args]
    res = _bench("--data", "l.jsonl", *args)
    assert res.exit_code == 2, res.output
    assert message in res.stderr
    assert not (project / "out.json").exists()
    assert not list(project.rglob("*.sqlite"))  # nothing was scored


@pytest.mark.parametrize(
    "args",
    [
        ["--cache", "c.sqlite", "--config", "c.sqlite"],
        ["--cache", "l.jsonl", "--dry-run"],
        ["--config", "adir", "--no-cache"],  # a directory: refused before scoring
    ],
)
def test_calibrate_outputs_never_land_on_inputs_or_the_cache(project, args):
    (project / "adir").mkdir()
    (project / "c.sqlite").write_bytes(b"")
    before = (project / "l.jsonl").read_bytes()
    res = invoke("calibrate", "--data", "l.jsonl", "--metric", "overlap", *args)
    assert res.exit_code == 2, res.output
    assert "internal error" not in res.output
    assert (project / "l.jsonl").read_bytes() == before
    assert (project / "c.sqlite").read_bytes() == b""


@pytest.mark.parametrize(
    "args",
    [
        # The combination's weights the run reads (docs/data-safety.md section 2).
        ["--metric", "combined", "--set", "combined.weights=w.json", "--output", "w.json"],
        ["--metric", "combined", "--set", "combined.weights=./w.json", "--output", "sub/../w.json"],
        ["--metric", "overlap", "--set", "combined.weights=w.json"]
        + ["--combine", "l.jsonl", "--save-weights", "w.json"],
        ["--metric", "overlap", "--model", "nli=w.json", "--output", "w.json"],  # a model file
        [
            "--metric",
            "overlap",
            "--model",
            "nli=mdir",
            "--output",
            "mdir/model.safetensors",
        ],  # a file in a model dir
        [
            "--metric",
            "overlap",
            "--model",
            "nli=mdir",
            "--output",
            "mdir/new.json",
        ],  # or anything written into it
    ],
)
def test_bench_outputs_never_land_on_files_named_by_set_or_model(project, args):
    (project / "sub").mkdir()
    (project / "mdir").mkdir()
    (project / "mdir" / "model.safetensors").write_bytes(b"weights")
    (project / "w.json").write_text('{"fitted": "weights"}')
    res = invoke("bench", "--data", "l.jsonl", "-q", "--no-cache", *args)
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("faithgate: ") and res.stderr.count("\n") == 1
    assert "--set combined.weights file" in res.stderr or "--model nli " in res.stderr
    assert (project / "w.json").read_text() == '{"fitted": "weights"}'
    assert (project / "mdir" / "model.safetensors").read_bytes() == b"weights"
    assert not (project / "mdir" / "new.json").exists()


def test_calibrate_config_never_lands_on_a_file_named_by_set(project):
    (project / "w.toml").write_text("# weights of something\n")
    res = invoke("calibrate", "--data", "l.jsonl", "--metric", "overlap", "--no-cache",
                 "--config", "w.toml", "--set", "overlap.x=w.toml")  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "--set overlap.x file" in res.stderr
    assert (project / "w.toml").read_text() == "# weights of something\n"


def test_calibrate_refuses_a_pyproject_whose_tool_is_no_table_before_scoring(project):
    (project / "pyproject.toml").write_text('tool = "x"\n')
    res = invoke("calibrate", "--data", "l.jsonl", "--metric", "overlap",
                 "--config", "pyproject.toml", "--cache", "c.sqlite")  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "internal error" not in res.output and "tool must be a table" in res.stderr
    assert not (project / "c.sqlite").exists()  # refused before any scoring
    assert (project / "pyproject.toml").read_text() == 'tool = "x"\n'


def test_a_timings_file_that_is_not_an_object_is_moved_aside(project):
    (project / "c.timings.json").write_text("[]")
    res = _bench("--data", "l.jsonl", "--cache", "c.sqlite")
    assert res.exit_code == 0, res.output
    assert "internal error" not in res.output
    assert "warning: damaged timings file" in res.stderr
    assert [p.read_text() for p in project.glob("c.timings.json.corrupt-*")] == ["[]"]
    assert isinstance(json.loads((project / "c.timings.json").read_text()), dict)


@pytest.mark.parametrize("types", [",", "", " , "])
def test_perturb_types_naming_nothing_is_a_usage_error(project, types):
    (project / "art.txt").write_text(SRC)
    res = invoke("perturb", "--source", "art.txt", "--summary", FAITHFUL[0], "--types", types)
    assert res.exit_code == 2, res.output
    assert "--types names no perturbation type" in res.stderr and not res.stdout


def test_perturb_reads_the_summary_as_score_does(project):
    """`--summary @-` was "summary file '-' does not exist"; a blank summary was perturbed."""
    (project / "art.txt").write_text(SRC)
    piped = CliRunner().invoke(
        cli,
        ["perturb", "--source", "art.txt", "--summary", "@-", "--format", "json"],
        input=FAITHFUL[0],
    )
    typed = invoke("perturb", "--source", "art.txt", "--summary", FAITHFUL[0], "--format", "json")
    assert piped.exit_code == 0, piped.output
    assert piped.stdout == typed.stdout and json.loads(piped.stdout)
    both = invoke("perturb", "--source", "-", "--summary", "@-")
    assert both.exit_code == 2 and "both read standard input" in both.stderr
    blank = invoke("perturb", "--source", "art.txt", "--summary", "  ")
    assert blank.exit_code == 2 and "the summary is empty" in blank.stderr


# ---------------------------------------------------------------- 2. too few rows for a CI


def test_one_minimal_pair_has_no_confidence_interval(project):
    write_rows(
        project / "pair.jsonl",
        [
            {"id": "r", "source": SRC, "summary": FAITHFUL[0], "label": 1, "pair_id": "p"},
            {"id": "e", "source": SRC, "summary": UNFAITHFUL[0], "label": 0, "pair_id": "p"},
        ],
    )
    res = _bench("--data", "pair.jsonl", "--no-cache")
    assert res.exit_code == 0, res.output
    assert "1.000 [1.00, 1.00]" not in res.stdout
    assert "[0.00, 0.00]" not in res.stdout
    assert "1.000 [n too small]" in res.stdout  # consistency
    assert "warning: pair: overlap: no 95% CI for consistency, roc_auc" in res.stderr
    doc = json.loads(_bench("--data", "pair.jsonl", "--no-cache", "--json").stdout)
    overall = doc["datasets"]["pair"]["metrics"]["overlap"]["overall"]
    assert overall["consistency_ci95"] == [None, None]
    assert overall["roc_auc_ci95"] == [None, None]
    assert overall["ci_n_too_small"] == ["consistency", "roc_auc"]


def test_enough_rows_keep_their_confidence_interval(project):
    rows = labelled()
    rows[0]["label"] = 0  # 4 vs 6, not separable: an interval with a width
    write_rows(project / "mixed.jsonl", rows)
    doc = json.loads(_bench("--data", "mixed.jsonl", "--no-cache", "--json").stdout)
    overall = doc["datasets"]["mixed"]["metrics"]["overlap"]["overall"]
    assert None not in overall["roc_auc_ci95"]
    assert "roc_auc" not in overall.get("ci_n_too_small", [])


def test_zero_width_interval_from_few_items_is_not_shown_as_certain(project):
    """5 vs 5 separable items: every resample gives ROC AUC 1.0; [1.00, 1.00] from so few
    items would read as certainty (fewer than 10 of the smaller class: "n too small")."""
    res = _bench("--data", "l.jsonl", "--no-cache")
    assert res.exit_code == 0, res.output
    assert "1.000 [1.00, 1.00]" not in res.stdout and "1.000 [n too small]" in res.stdout
    doc = json.loads(_bench("--data", "l.jsonl", "--no-cache", "--json").stdout)
    overall = doc["datasets"]["l"]["metrics"]["overlap"]["overall"]
    assert overall["roc_auc"] == 1.0 and overall["roc_auc_ci95"] == [None, None]
    assert "roc_auc" in overall["ci_n_too_small"]


def test_zero_width_consistency_from_few_pairs_is_not_shown_as_certain(project):
    """5 minimal pairs of one error type, every faithful member ahead: consistency 1.0 in every
    resample; [1.00, 1.00] from 5 pairs (overall and by type) would read as certainty."""
    rows = [
        {"id": f"{m}{i}", "source": SRC, "summary": s, "label": lab, "pair_id": str(i),
         "error_type": "Extrinsic Predicate"}
        for i in range(5)
        for m, s, lab in (("r", FAITHFUL[i], 1), ("e", UNFAITHFUL[i], 0))
    ]  # fmt: skip
    write_rows(project / "pairs.jsonl", rows)
    res = _bench("--data", "pairs.jsonl", "--no-cache")
    assert res.exit_code == 0, res.output
    assert "[1.00, 1.00]" not in res.stdout and "[0.00, 0.00]" not in res.stdout
    assert "| Extrinsic Predicate | overlap | 5 | 1.000 [n too small]" in res.stdout
    doc = json.loads(_bench("--data", "pairs.jsonl", "--no-cache", "--json").stdout)
    m = doc["datasets"]["pairs"]["metrics"]["overlap"]
    for group in (m["overall"], m["by_error_type"]["Extrinsic Predicate"]):
        assert group["n_pairs"] == 5 and group["consistency"] == 1.0
        assert group["consistency_ci95"] == [None, None]
        assert "consistency" in group["ci_n_too_small"]


def test_calibrate_refuses_too_few_examples_per_class(project):
    write_rows(project / "two.jsonl", labelled(1))
    res = invoke("calibrate", "--data", "two.jsonl", "--metric", "overlap", "--config", "f.toml")
    assert res.exit_code == 2, res.output
    assert "at least 3 faithful" in res.stderr and "got 1 faithful and 1 unfaithful" in res.stderr
    assert not (project / "f.toml").exists()


def test_calibrate_without_resamples_writes_no_nan_interval(project):
    res = invoke(
        "calibrate", "--data", "l.jsonl", "--metric", "overlap", "--config", "f.toml",
        "--resamples", "0", "--no-cache",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "nan" not in res.stdout and "no 95% CI: --resamples 0" in res.stdout
    text = (project / "f.toml").read_text()
    assert "nan" not in text and "ci95" not in text


def test_calibrate_warns_before_writing_a_threshold_no_better_than_chance(project):
    """A threshold whose cross-validated balanced accuracy was at chance (0.455) was written
    with no word: the gate then failed the project's own faithful output."""
    texts = FAITHFUL + UNFAITHFUL  # overlap 1, .667, .875, .5, .444, then 0 five times
    rows = [
        {"id": f"r{i}", "source": SRC, "summary": s, "label": int(i in (0, 1, 4, 5, 6))}
        for i, s in enumerate(texts)
    ]
    write_rows(project / "chance.jsonl", rows)
    args = ["calibrate", "--data", "chance.jsonl", "--metric", "overlap", "--resamples", "20"]
    res = invoke(*args, "--config", "f.toml")
    assert res.exit_code == 0, res.output
    warning = (
        "faithgate: warning: overlap does not separate these labels better than chance "
        "(cross-validated balanced accuracy 0.400); the threshold may fail faithful outputs"
    )
    assert res.stderr.splitlines() == [warning]
    assert "balanced accuracy 0.600 in-sample, cross-validated (5-fold) 0.400" in res.stdout
    lines = res.output.splitlines()
    assert lines.index(warning) == len(lines) - 2 and lines[-1].startswith("  written to ")
    res = invoke(*args, "--dry-run", "--format", "json")
    assert res.exit_code == 0 and res.stderr.splitlines() == [warning]
    assert json.loads(res.stdout)["cv_balanced_accuracy"] == pytest.approx(0.4)
    # Data the metric separates: no warning.
    res = invoke("calibrate", "--data", "l.jsonl", "--metric", "overlap", "--dry-run")
    assert res.exit_code == 0 and res.stderr == "", res.output


def test_a_dry_run_checks_and_names_the_file_it_would_write(project):
    """--dry-run skipped the target's check (exit 0 where the real run is exit 2) and never
    said which file it would write."""
    (project / "pyproject.toml").write_text("tool = 1\n")
    args = ["calibrate", "--data", "l.jsonl", "--metric", "overlap", "--resamples", "0"]
    for extra in ([], ["--dry-run"]):
        res = invoke(*args, *extra)
        assert res.exit_code == 2 and "tool must be a table" in res.stderr, res.output
    (project / "pyproject.toml").unlink()
    res = invoke(*args, "--dry-run")
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[-1] == "  not written (--dry-run): would write to faithgate.toml"
    assert not (project / "faithgate.toml").exists()
    data = json.loads(invoke(*args, "--dry-run", "--format", "json").stdout)
    assert data["written_to"] is None and data["would_write_to"] == "faithgate.toml"


# ---------------------------------------------------------------- 3. same file names


def test_two_data_files_with_one_name_are_refused(project):
    for d in ("a", "b"):
        (project / d).mkdir()
        write_rows(project / d / "d.jsonl", labelled())
    res = _bench("--data", "a/d.jsonl", "--data", "b", "--no-cache", "--plots", "figs")
    assert res.exit_code == 2, res.output
    assert "both named 'd'" in res.stderr
    assert str(Path("a/d.jsonl")) in res.stderr and str(Path("b/d.jsonl")) in res.stderr
    assert not (project / "figs").exists()


# ---------------------------------------------------------------- 4. / 6. field types


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("score", "5", "field 'score' (the human judgement) must be a finite number"),
        ("score", True, "field 'score'"),
        ("score", float("inf"), "field 'score'"),
        ("score", float("nan"), "field 'score'"),
        ("pair_id", ["x"], "field 'pair_id' must be text, an integer or null, got list"),
        ("origin", 3, "field 'origin' must be text or null, got int"),
        ("error_type", 3, "field 'error_type' must be text or null, got int"),
    ],
)
def test_benchmark_fields_of_the_wrong_type_name_file_and_line(project, field, value, message):
    rows = labelled()
    rows[3][field] = value
    text = "".join(json.dumps(r) + "\n" for r in rows)  # Infinity / NaN as Python writes them
    (project / "bad.jsonl").write_text("\n" + text)  # a blank first line: row 4 is line 5
    res = _bench("--data", "bad.jsonl", "--no-cache")
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"faithgate: bad.jsonl:5: {message}"), res.stderr
    assert "Warning" not in res.output and "internal error" not in res.output


def test_integer_pair_ids_group_like_their_strings(project):
    write_rows(
        project / "p.jsonl",
        [
            {"id": f"{k}{t}", "source": SRC, "summary": s, "label": y, "pair_id": k}
            for k in range(3)
            for t, s, y in (("r", FAITHFUL[k], 1), ("e", UNFAITHFUL[k], 0))
        ],
    )
    doc = json.loads(_bench("--data", "p.jsonl", "--no-cache", "--json").stdout)
    assert doc["datasets"]["p"]["metrics"]["overlap"]["overall"]["n_pairs"] == 3


# ---------------------------------------------------------------- 6. / 9. options


@pytest.mark.parametrize(
    "args, option",
    [
        (["bench", "--data", "l.jsonl", "--metric", "overlap", "--seed", "-1"], "--seed"),
        (["bench", "--data", "l.jsonl", "--metric", "overlap", "--seed", str(2**32)], "--seed"),
        (["calibrate", "--data", "l.jsonl", "--metric", "overlap", "--seed", "-1"], "--seed"),
        (["calibrate", "--data", "l.jsonl", "--metric", "overlap", "--resamples", "-3"],
         "--resamples"),
        (["bench", "--data", "l.jsonl", "--metric", "overlap", "--combine", "l.jsonl",
          "--combine-limit", "-1"], "--combine-limit"),
        (["bench", "--data", "l.jsonl", "--metric", "overlap", "--combine", "l.jsonl",
          "--combine-limit", "-5"], "--combine-limit"),
        (["bench", "--data", "l.jsonl", "--metric", "overlap", "--limit", "0"], "--limit"),
    ],
)  # fmt: skip
def test_out_of_range_options_are_usage_errors(project, args, option):
    res = invoke(*args, "--no-cache")
    assert res.exit_code == 2, res.output
    assert f"Invalid value for '{option}'" in res.stderr
    assert "internal error" not in res.output


# ---------------------------------------------------------------- 7. escaping


FORGED = "x\n::error::forged"


def test_file_names_reach_the_terminal_escaped(project):
    write_rows(project / f"{FORGED}.jsonl", labelled())
    res = invoke(
        "bench", "--data", f"{FORGED}.jsonl", "--metric", "overlap", "--metric", "ner",
        "--resamples", "20", "--no-cache", "--combine", f"{FORGED}.jsonl",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    for stream in (res.stdout, res.stderr):
        assert not any(line.lstrip().startswith("::") for line in stream.splitlines()), stream
    assert "x\\n::error::forged: scoring" in res.stderr  # progress
    # In the Markdown table as literal Markdown: the backslash of the escape is escaped too.
    assert "| x\\\\n::error::forged | consistency |" in res.stdout or (
        "| x\\\\n::error::forged | roc_auc |" in res.stdout  # the comparisons table
    )
    assert "Combination fitted on x\\\\n::error::forged.jsonl" in res.stdout


def test_written_paths_are_escaped(project):
    res = invoke(
        "calibrate", "--data", "l.jsonl", "--metric", "overlap", "--config", f"{FORGED}.toml",
        "--resamples", "0", "--no-cache",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "written to x\\n::error::forged.toml" in res.stdout
    assert not any(line.startswith("::") for line in res.stdout.splitlines())


# ---------------------------------------------------------------- perturb (spaCy)


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_perturb_says_which_rows_got_no_edit_for_not_reading_as_english(project):
    """perturb's English rules made garbage pairs of German rows; those rows get no edit now,
    and the command says how many and why."""
    german = (
        "Der Bürgermeister von Berlin, Klaus Wowereit, eröffnete am Montag den neuen Flughafen. "
        "Er sagte, das Projekt habe sechs Milliarden Euro gekostet und sei ein großer Erfolg für "
        "die Stadt, die lange darauf gewartet habe."
    )
    src = "Obama met Merkel in Berlin with 12 aides on Monday."
    write_rows(
        project / "in.jsonl",
        [
            {
                "id": "de",
                "source": german,
                "summary": "Wowereit eröffnete am Montag den Flughafen.",
            },
            {"id": "en", "source": src, "summary": "Obama met Merkel with 12 aides."},
        ],
    )
    res = invoke("perturb", "--input", "in.jsonl", "--types", "number", "--output", "out.jl")
    assert res.exit_code == 0, res.output
    assert "1 input row(s) got no edit: their source does not read as English" in res.stderr
    rows = [json.loads(line) for line in (project / "out.jl").read_text().splitlines()]
    assert {r["pair_id"] for r in rows} == {"en"}


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_perturb_skips_input_rows_labelled_unfaithful(project):
    src = "Obama met Merkel in Berlin with 12 aides on Monday."
    write_rows(
        project / "in.jsonl",
        [
            {"id": "good", "source": src, "summary": "Obama met Merkel with 12 aides.", "label": 1},
            {"id": "bad", "source": src, "summary": "Obama met Putin with 12 aides.", "label": 0},
            {"id": "plain", "source": src, "summary": "Obama met Merkel with 12 aides."},
        ],
    )
    res = invoke("perturb", "--input", "in.jsonl", "--types", "number", "--output", f"{FORGED}.jl")
    assert res.exit_code == 0, res.output
    assert "skipped 1 input row(s) labelled 0 (unfaithful)" in res.stderr
    assert "wrote" in res.stderr and "to x\\n::error::forged.jl" in res.stderr
    rows = [json.loads(line) for line in (project / f"{FORGED}.jl").read_text().splitlines()]
    assert {r["pair_id"] for r in rows} == {"good", "plain"}
    assert all(r["label"] == 1 for r in rows if r["role"] == "reference")
    assert "Obama met Putin with 12 aides." not in {r["summary"] for r in rows}


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_perturb_a_huge_number_is_not_a_crash(project):
    huge = "1" + "0" * 400
    (project / "src.txt").write_text(f"They paid {huge} dollars and 3 more.")
    res = invoke(
        "perturb", "--source", "src.txt", "--summary", f"They paid {huge} dollars and 3 more.",
        "--types", "number", "--per-type", "0",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "internal error" not in res.output


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_json_on_stdout_escapes_terminal_controls(project):
    unsafe = "\u202e\u009b31m"
    (project / "src.txt").write_text("Obama met Merkel in Berlin with 12 aides.")
    summary = f"Obama met Merkel with 12 aides {unsafe}."
    res = invoke(
        "perturb", "--source", "src.txt", "--summary", summary, "--types", "number",
        "--format", "json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "\u202e" not in res.stdout and "\u009b" not in res.stdout
    variants = json.loads(res.stdout)
    assert variants and all(unsafe in v["summary"] for v in variants)
    (project / "in.jsonl").write_text(
        json.dumps({"id": "a", "source": "Obama met Merkel in Berlin.", "summary": summary}) + "\n"
    )
    for fmt in ("json", "text"):
        res = invoke("perturb", "--input", "in.jsonl", "--types", "number", "--format", fmt)
        assert res.exit_code == 0, res.output
        assert "\u202e" not in res.stdout and "\u009b" not in res.stdout
        rows = (
            json.loads(res.stdout)
            if fmt == "json"
            else [json.loads(line) for line in res.stdout.splitlines()]
        )
        assert rows[0]["summary"] == summary


def test_score_json_escapes_terminal_controls(project):
    (project / "src.txt").write_text(SRC)
    summary = "The committee approved \u202ethe budget\u009b2J."
    res = invoke(
        "score", "--source", "src.txt", "--summary", summary, "--metric", "overlap",
        "--format", "json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "\u202e" not in res.stdout and "\u009b" not in res.stdout
    assert "\\u202e" in res.stdout
    assert summary in json.dumps(json.loads(res.stdout), ensure_ascii=False)


# ---------------------------------------------------------------- BrokenPipe


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_stdout_closed_early_is_a_quiet_exit(project):
    write_rows(
        project / "big.jsonl",
        [
            {"id": f"r{i}", "source": "Obama met Merkel in Berlin with 12 aides.",
             "summary": "Obama met Merkel with 12 aides."}
            for i in range(600)
        ],
    )  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "faithgate", "perturb", "--input", "big.jsonl", "--types", "number"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # like `| head -1`: read one line, then close the pipe
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert json.loads(first)["id"] == "r0-orig"
    assert "internal error" not in err and "BrokenPipe" not in err and "Exception" not in err
    assert proc.returncode == 1  # like click and the Python docs: 1, and nothing on stderr
