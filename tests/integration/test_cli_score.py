"""``faithgate score`` and ``faithgate metrics``: output, JSON validity and exit codes 0/1/2."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from fake_encoder import regex_split

from faithgate import text as textmod
from faithgate.cli import cli

SOURCE = "The cat sat on the mat. A dog barked loudly."
SUMMARY = "The cat sat. The dog sang."
FAST = ["--metric", "overlap", "--metric", "sentsim", "--set", "sentsim.sim=token_f1"]


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setattr(textmod, "split_sentences", regex_split)
    src = tmp_path / "source.txt"
    src.write_text(SOURCE, encoding="utf-8")
    summ = tmp_path / "summary.txt"
    summ.write_text(SUMMARY, encoding="utf-8")
    return src, summ


def invoke(args, **kwargs):
    return CliRunner().invoke(cli, args, **kwargs)


def test_metrics_lists_the_registry_one_line_each():
    result = invoke(["metrics"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    names = [line.split()[0] for line in lines]
    assert {"bertscore", "sentsim", "ner", "overlap"} <= set(names)
    assert len(names) == len(set(names))
    data = json.loads(invoke(["metrics", "--format", "json"]).stdout)
    assert {d["name"] for d in data} == set(names)
    by_name = {d["name"]: d for d in data}
    # the defaults are marked; a combination lists its components' models
    assert [d["name"] for d in data if d["default"]] == ["ensemble", "facts"]
    for default in ("ensemble", "facts"):
        assert "[a default metric of check and the gate]" in next(
            line for line in lines if line.startswith(default)
        )
    assert {"embedder", "lm"} <= set(by_name["ensemble"]["roles"])
    assert by_name["combined"]["roles"] == []


def test_score_text_output_marks_least_supported_sentence(files):
    src, _ = files
    result = invoke(["score", "--source", str(src), "--summary", SUMMARY, *FAST])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "overlap" in out and "0.4000" in out  # ROUGE-2 precision 2/5 (see test_metrics_overlap)
    assert "hash overlap|en_core_web_sm@" in out and "hash sentsim|" in out
    rows = [line for line in out.splitlines() if line.strip().startswith(("1 ", "2 "))]
    assert len(rows) == 2
    assert "least supported" in rows[1] and "*" in rows[1]
    assert "least supported" not in rows[0]


def test_score_json_is_valid_and_complete(files):
    src, summ = files
    result = invoke(
        ["score", "--source", str(src), "--summary", f"@{summ}", *FAST, "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["metrics"]["overlap"]["value"] == pytest.approx(0.4)
    # metric|model@fingerprint|backend|quantization|digest (token_f1: spaCy is the one model)
    assert re.fullmatch(
        r"sentsim\|en_core_web_sm@[0-9a-f]{6}\|spacy\|-\|[0-9a-f]{12}",
        data["metrics"]["sentsim"]["settings_hash"],
    )
    assert data["metrics"]["overlap"]["models"][0]["role"] == "spacy"
    assert [s["least_supported_by"] for s in data["sentences"]] == [[], ["overlap", "sentsim"]]


def test_source_from_stdin(files):
    result = invoke(
        ["score", "--source", "-", "--summary", SUMMARY, "--metric", "overlap"], input=SOURCE
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source", "MISSING", "--summary", "x"], "does not exist"),
        (["--summary", " "], "summary is empty"),
        (["--summary", "\u200b \u2060"], "summary is empty"),  # invisible only: was exit 1
        (["--summary", "@MISSING"], "does not exist"),
        (["--summary", "x", "--metric", "nope"], "unknown metric 'nope'"),
        (["--summary", "x", "--model", "embedder"], "--model expects KEY=VALUE"),
        (["--summary", "x", "--model", "tagger=x"], "unknown model role"),
        (["--summary", "x", "--set", "idf=true"], "--set expects METRIC.KEY=VALUE"),
        (["--summary", "x", "--metric", "overlap", "--set", "overlap.component=bleu"], "component"),
        (["--summary", "x", "--format", "xml"], "xml"),
        (["--summary", "x", "--metric", "nli_needs_model_x"], "unknown metric"),
        (
            ["--summary", "x", "--metric", "sentsimm"],
            "unknown metric 'sentsimm' (did you mean 'sentsim'?); available: alignscore, bertscore, ",
        ),
        (["--source", ".", "--summary", "x"], "the source (.) is a directory"),
        (
            ["--source", "/dev/zero", "--summary", "x"],
            "the source (/dev/zero) is a character device, not a regular file or a pipe",
        ),
        (["--summary", "@"], "--summary @: a file name must follow '@'"),
        (["--summary", "x", "--set", "bad"], "--set expects METRIC.KEY=VALUE, got 'bad'"),
        (["--source", "-", "--summary", "@-"], "both read standard input"),
        (
            ["--summary", "@/dev/zero"],
            "the summary (/dev/zero) is a character device, not a regular file or a pipe",
        ),
    ],
)
def test_bad_usage_or_input_exits_2_with_one_line(files, args, message):
    src, _ = files
    if "--source" not in args:
        args = ["--source", str(src), *args]
    result = invoke(["score", *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unscorable_summary_exits_1(files):
    src, _ = files
    result = invoke(["score", "--source", str(src), "--summary", "!!!", "--metric", "overlap"])
    assert result.exit_code == 1
    assert "could not score with overlap: the summary has no words to compare" in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_metric_returning_a_non_finite_value_exits_1(files, value):
    """A metric (a plugin's) returning NaN or inf without an error was "could not be scored"
    in the verdict but exit 0, where ``score --help`` promises exit 1."""
    import gate_fakes  # registers gate_fake

    src, _ = files
    args = ["score", "--source", str(src), "--summary", f"{value} x.", "--metric", gate_fakes.NAME]
    result = invoke(args)
    assert result.exit_code == 1, result.output
    assert f"could not score with {gate_fakes.NAME}: metric returned" in result.stderr


def test_internal_error_exits_1_without_traceback(files, monkeypatch):
    from faithgate.scoring.scorer import Scorer

    def boom(self, examples):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Scorer, "score", boom)
    src, _ = files
    result = invoke(["score", "--source", str(src), "--summary", SUMMARY, "--metric", "overlap"])
    assert result.exit_code == 1
    assert result.stderr.strip() == "faithgate: internal error: RuntimeError: disk on fire"


@pytest.mark.slow
def test_bump_reference_and_edited_summary_score_differently(bump_rows, tmp_path):
    ref, edit = bump_rows[0], bump_rows[1]
    src = tmp_path / "article.txt"
    src.write_text(ref["source"], encoding="utf-8")
    outs = []
    for row in (ref, edit):
        result = invoke(
            ["score", "--source", str(src), "--summary", row["summary"], "--format", "json"]
        )
        assert result.exit_code == 0, result.output
        outs.append(json.loads(result.stdout))
    for name in ("bertscore", "sentsim", "ner", "overlap"):
        assert name in outs[0]["metrics"]
    assert any(
        outs[0]["metrics"][m]["value"] != outs[1]["metrics"][m]["value"] for m in outs[0]["metrics"]
    )
    assert outs[0]["sentences"] and all(s["values"] for s in outs[0]["sentences"])


def test_a_combination_shows_its_votes_and_its_components(files, tmp_path):
    """A combination's score says which component pulled it down, and its components are
    scored once, beside it, and shown as its votes (text and JSON)."""
    src, summ = files
    weights = tmp_path / "w.json"
    weights.write_text(
        json.dumps(
            {
                "format": "faithgate-combination/1",
                "metrics": ["overlap", "sentsim"],
                "metric_settings": {"sentsim": {"sim": "token_f1"}},
                "mean": [0.9, 0.9],
                "scale": [0.1, 0.1],
                "coef": [0.5, 0.5],
                "intercept": 0.0,
            }
        )
    )
    args = ["score", "--source", str(src), "--summary", f"@{summ}", "--metric", "combined"]
    args += ["--set", f"combined.weights={weights}"]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    # the line under the combination's (wrapped to 100 columns, so found by its start)
    lines = result.stdout.splitlines()
    assert any(x.strip().startswith("votes (terms of the logit; lowest first): ") for x in lines)
    assert re.search(r"^overlap .*\(a vote of combined\)", result.stdout, re.M)
    assert re.search(r"^sentsim .*\(a vote of combined\)", result.stdout, re.M)
    data = json.loads(invoke([*args, "--format", "json"]).stdout)
    combo = data["metrics"]["combined"]
    assert data["metrics"]["overlap"]["vote_of"] == "combined"
    assert "vote_of" not in combo
    votes = combo["details"]["votes"]
    assert set(votes) == {"overlap", "sentsim"}
    assert combo["details"]["logit"] == pytest.approx(sum(votes.values()))
    for name in votes:  # the component shown is the one the combination used
        assert combo["details"]["components"][name] == data["metrics"][name]["value"]
    # a component the user selected too is theirs, not marked as a vote
    both = json.loads(invoke([*args, "--metric", "overlap", "--format", "json"]).stdout)
    assert "vote_of" not in both["metrics"]["overlap"]
    assert both["metrics"]["sentsim"]["vote_of"] == "combined"


def test_a_cut_source_is_said_in_the_likelihood_details() -> None:
    from faithgate.cli.score import summarize_details
    from faithgate.types import Score

    def line(context: dict) -> str:
        return summarize_details(Score("loglik", -1.5, "h", "0", details={"context": context}))

    base = {"window": 2048, "source_tokens": 6700, "summary_tokens": 90, "summary_kept": 90}
    selected = {**base, "policy": "select", "cut": True, "source_kept": 1900}
    selected.update(sentences=211, sentences_kept=54)
    assert line(selected).endswith(
        "read 54 of 211 source sentences, those most relevant to the summary (2048-token window)"
    )
    start = {**base, "policy": "keep_start", "cut": True, "source_kept": 1860}
    assert "read the first 1860 of 6700 source tokens (2048-token window)" in line(start)
    end = {**start, "policy": "keep_end", "summary_kept": 500, "summary_tokens": 900}
    assert line(end).endswith(
        "read the last 1860 of 6700 source tokens (2048-token window); "
        "scored the first 500 of 900 summary tokens"
    )
    assert "read" not in line({**base, "policy": "select", "cut": False, "source_kept": 6700})


def test_the_repetition_details_line_names_the_most_repeated_ngram(tmp_path) -> None:
    src = tmp_path / "src.txt"
    src.write_text("The actor died in Connecticut.", encoding="utf-8")
    looped = " ".join(["The actor was arrested \x1b[31min New York."] * 3)
    r = invoke(["score", "--source", str(src), "--summary", looped, "--metric", "repetition"])
    assert r.exit_code == 0, r.output
    assert "7/18 word 4-grams distinct; most repeated: 'the actor was arrested' x3" in r.output
    assert "\x1b" not in r.output


def test_a_metric_that_could_not_score_fails_its_threshold_in_the_verdict(tmp_path) -> None:
    # The verdict line ignored it: "verdict: PASS: repetition" (or "none") beside a failed ner.
    src = tmp_path / "src.txt"
    src.write_text("Toyota said on Tuesday its chief executive will step down.", encoding="utf-8")
    summary = "丰田汽车公司周二表示其首席执行官将于四月卸任。"
    args = ["score", "--source", str(src), "--summary", summary, "--threshold", "0.8"]
    r = invoke([*args, "--metric", "ner", "--metric", "repetition"])
    assert "verdict: FAIL: ner could not be scored (thresholds from --threshold)" in r.output
    data = json.loads(invoke([*args, "--metric", "ner", "--format", "json"]).stdout)
    assert data["metrics"]["ner"]["passed"] is False


def test_a_threshold_outside_the_metrics_range_is_warned_as_check_does(files) -> None:
    """``check`` warned about ``sentsim = 60`` (never met) and ``overlap = 0`` (never fails);
    ``score`` showed ``FAIL: sentsim 0.8119 < 60.0000`` and said nothing."""
    src, _ = files
    args = ["score", "--source", str(src), "--summary", SUMMARY, *FAST]
    r = invoke([*args, "--threshold", "sentsim=60", "--threshold", "overlap=0"])
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines() == [  # in the order of the metrics
        "faithgate: warning: threshold overlap = 0.0 cannot fail: overlap scores are >= 0, so it "
        "judges nothing",
        "faithgate: warning: threshold sentsim = 60.0 cannot be met: sentsim scores are <= 1, "
        "so it fails every run",
    ]
    r = invoke([*args, "--threshold", "0.5", "--format", "json"])
    assert r.exit_code == 0 and r.stderr == ""


def test_range_warnings_use_each_metrics_settings_and_bounds() -> None:
    from faithgate.cli.score import range_warnings
    from faithgate.scoring.scorer import resolve_metrics

    metrics = resolve_metrics(["ensemble", "qgqa", "bertscore"], {"bertscore": {"component": "f1"}})
    assert range_warnings(metrics, {"ensemble": 1.5, "qgqa": 0.0, "bertscore": -5.0}) == [
        "threshold ensemble = 1.5 cannot be met: ensemble scores are <= 1, so it fails every run",
        "threshold qgqa = 0.0 cannot fail: qgqa scores are >= 0, so it judges nothing",
    ]  # bertscore's F1 is unbounded below: -5 can fail
    assert range_warnings(metrics, {}) == []


def test_a_pipe_is_read_as_a_source(files, tmp_path) -> None:
    """``--source <(cmd)`` is /dev/fd/N, a pipe: it was refused as a file that "does not
    exist"."""
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "w", encoding="utf-8") as f:
            f.write(SOURCE)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    r = invoke(["score", "--source", str(fifo), "--summary", SUMMARY, "--metric", "overlap"])
    writer.join(5)
    assert r.exit_code == 0, r.output
    assert "overlap" in r.stdout and "0.4000" in r.stdout


def test_process_substitution_is_read(tmp_path) -> None:
    import shutil
    import subprocess
    import sys

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash for process substitution")
    cmd = (
        f"{sys.executable} -m faithgate score --source <(printf %s {SOURCE!r}) "
        f"--summary @<(printf %s {SUMMARY!r}) --metric overlap --format json"
    )
    r = subprocess.run([bash, "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["metrics"]["overlap"]["value"] == pytest.approx(0.4)
    assert data["source"].startswith("/dev/fd/")


def test_a_source_or_summary_file_of_invisible_characters_is_empty(files, tmp_path):
    """``str.strip`` keeps U+200B and U+FEFF: such a file was "could not score ... empty
    summary" (exit 1), not "is empty" (exit 2) as a blank one is (review s23, F12)."""
    src, summ = files
    blank = tmp_path / "blank.txt"
    blank.write_text("\ufeff\u200b\n\u00ad", encoding="utf-8")
    for args, message in (
        (["--source", str(blank), "--summary", SUMMARY], f"source {blank} is empty"),
        (["--source", str(src), "--summary", f"@{blank}"], f"summary {blank} is empty"),
    ):
        result = invoke(["score", *args, "--metric", "overlap"])
        assert result.exit_code == 2, result.output
        assert message in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["score", "--source", "-", "--summary", "a b", "--metric", "overlap"],
        ["calibrate", "--data", "-", "--metric", "overlap", "--dry-run"],
    ],
    ids=["score", "calibrate"],
)
def test_closed_standard_input_is_an_input_error(args) -> None:
    """``<&-`` leaves Python without ``sys.stdin``: reading ``-`` was "internal error:
    AttributeError" (exit 1), not bad input (exit 2) (review s23, F11)."""
    import shlex
    import shutil
    import subprocess
    import sys

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash to close standard input")
    cmd = f"{shlex.quote(sys.executable)} -m faithgate {shlex.join(args)} <&-"
    r = subprocess.run([bash, "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "standard input is closed" in r.stderr and "internal error" not in r.stderr
