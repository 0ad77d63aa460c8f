"""Semantics that failed open or looked wrong.

Infinite thresholds made every example pass (``-inf``) and are now refused like NaN;
``overlap`` tokenises by Unicode word rules (Chinese, Arabic, Russian and Hindi get real scores,
Thai is refused plainly); NUL-byte sources are refused; SIGINT ends with one line and exit 130.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from gate_fakes import NAME, summary

from faithgate.cli import cli
from faithgate.metrics.base import ScoringContext, get_metric
from faithgate.types import Example
from faithgate.words import main_script, unsupported_script, words


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    row = {"id": "a", "source": "src", "summary": summary(0.9)}
    (tmp_path / "outputs.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\noutputs = "outputs.jsonl"\ncache_dir = ".fg"\n'
    )
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [
        ["--threshold", f"{NAME}=-inf"],
        ["--threshold", "-inf"],
        ["--threshold", f"{NAME}=inf"],
        ["--threshold", f"{NAME}=-Infinity"],
        ["--threshold", f"{NAME}=1e999"],  # overflows to inf
        ["--threshold", f"{NAME}=nan"],
        ["--min-pass-rate", "nan"],
        ["--min-pass-rate", "-inf"],
    ],
)
def test_non_finite_numbers_on_the_command_line_are_refused(project, args):
    res = CliRunner().invoke(cli, ["check", *args])
    assert res.exit_code == 2, res.output
    assert "expected a finite number" in res.stderr or "between 0 and 1" in res.stderr


@pytest.mark.parametrize(
    "table",
    [
        f"[thresholds]\n{NAME} = -inf\n",
        f"[thresholds]\n{NAME} = +inf\n",
        f"[thresholds]\n{NAME} = nan\n",
        f"[rules]\nmin_mean = {{ {NAME} = -inf }}\n",
    ],
)
def test_non_finite_numbers_in_the_configuration_are_refused(project, table):
    with (project / "faithgate.toml").open("a") as fh:
        fh.write(table)
    res = CliRunner().invoke(cli, ["check"])
    assert res.exit_code == 2, res.output
    assert "expected a finite number" in res.stderr


LANGS = {
    "chinese": (
        "北京是中国的首都。今天天气很好，我们去了公园。",
        "北京是中国的首都。",
        "上海是日本的首都。",
    ),
    "arabic": (
        "القاهرة هي عاصمة مصر. يعيش فيها ملايين الناس.",
        "القاهرة هي عاصمة مصر.",
        "الرياض هي عاصمة فرنسا.",
    ),
    "russian": (
        "Москва является столицей России. В городе живут миллионы людей.",
        "Москва является столицей России.",
        "Париж является столицей Германии.",
    ),
    "hindi": (
        "दिल्ली भारत की राजधानी है। यहाँ लाखों लोग रहते हैं।",
        "दिल्ली भारत की राजधानी है।",
        "मुंबई चीन की राजधानी है।",
    ),
}


@pytest.mark.parametrize("lang", sorted(LANGS))
def test_overlap_scores_languages_with_words(lang):
    source, copied, edited = LANGS[lang]
    assert len(words(copied)) >= 4, words(copied)
    metric = get_metric("overlap", component="rouge1")
    good, bad = metric.score_batch(
        [Example("g", source, copied), Example("b", source, edited)], ScoringContext()
    )
    assert good.ok and bad.ok, (good.error, bad.error)
    assert good.value == pytest.approx(1.0)  # every word of a copied sentence is in the source
    assert 0.0 < bad.value < good.value  # the edited words are not


def test_word_tokens_by_hand():
    assert words("北京欢迎你") == ["北", "京", "欢", "迎", "你"]
    assert words("Кошка СИДЕЛА.") == ["кошка", "сидела"]
    assert words("ذهب الولد ١٢٣") == ["ذهب", "الولد", "١٢٣"]
    assert words("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]  # combining marks stay in the word
    # UAX #29 keeps a katakana run together; hiragana and ideographs are one per character
    assert words("コンピュータを使う") == ["コンピュータ", "を", "使", "う"]
    assert words("The U.S. cat's mat!") == ["the", "u", "s", "cat", "s", "mat"]  # as rouge-score


def test_main_script_by_hand():
    assert main_script("Café au lait") == "Latin"
    assert main_script("北京是中国的首都") == "Han"
    assert main_script("Москва (Mosc)") == "Cyrillic"  # 6 of 10 letters
    assert main_script("Moskva Москва") is None  # half and half is no majority
    assert main_script("123 !!") is None and main_script("") is None


def test_unsupported_language_is_said_plainly():
    assert unsupported_script("ภาษาไทยง่ายนิดเดียว") == "Thai"
    assert unsupported_script("Bangkok (กรุงเทพ) is big and busy") is None  # a name in passing
    metric = get_metric("overlap")
    [score] = metric.score_batch(
        [Example("t", "ภาษาไทยง่ายนิดเดียว แต่ยาก", "ภาษาไทยง่าย")], ScoringContext()
    )
    assert not score.ok and math.isnan(score.value)
    assert score.error.startswith("Thai text is not supported")
    [emoji] = metric.score_batch([Example("e", "The cat sat.", "🙂 🙂 !!")], ScoringContext())
    assert "has no words to compare" in emoji.error


def test_nul_byte_sources_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nul.txt").write_bytes(b"\x00" * 64)
    res = CliRunner().invoke(
        cli, ["score", "--source", "nul.txt", "--summary", "a b", "--metric", "overlap"]
    )
    assert res.exit_code == 2, res.output
    assert "contains NUL characters" in res.stderr
    row = {"id": "a", "source": "text\u0000more", "summary": "text"}
    (tmp_path / "o.jsonl").write_text(json.dumps(row) + "\n")
    res = CliRunner().invoke(cli, ["check", "--outputs", "o.jsonl", "--metric", "overlap"])
    assert res.exit_code == 2
    assert "o.jsonl:1: field 'source' contains NUL characters" in res.stderr


SLOW_SUMMARIZER = """
import pathlib, time
def summarize(source):
    pathlib.Path("started").write_text("yes")
    time.sleep(60)
    return source
"""


def test_sigint_takes_the_interrupted_path_exit_130(project):
    (project / "slow.py").write_text(SLOW_SUMMARIZER)
    (project / "data.jsonl").write_text(json.dumps({"id": "a", "source": "x y"}) + "\n")
    cache = project / ".fg" / "scores.sqlite"
    cache.parent.mkdir()
    with sqlite3.connect(cache) as conn:
        conn.execute("CREATE TABLE scores (key TEXT PRIMARY KEY, score TEXT NOT NULL)")
        conn.execute("INSERT INTO scores VALUES ('k', '{}')")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "faithgate",
            "check",
            "--summarizer",
            "slow:summarize",
            "--data",
            "data.jsonl",
            "--metric",
            "overlap",
            "--cache-dir",
            ".fg",
        ],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    deadline = time.monotonic() + 120
    while not (project / "started").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err == "faithgate: interrupted\n"
    with sqlite3.connect(cache) as conn:
        assert conn.execute("SELECT score FROM scores WHERE key = 'k'").fetchone() == ("{}",)


def test_pair_fields_without_a_pair_rule_do_not_take_rows_out_of_the_gate(project):
    """A row with pair_id and role "edited" was a probe even with no pair rule: the unfaithful
    output was left out of the per-example gate and the gate passed, with no warning."""
    rows = [
        {"id": "a", "source": "src", "summary": summary(0.9), "pair_id": "p", "role": "reference"},
        {"id": "b", "source": "src", "summary": summary(0.1), "pair_id": "p", "role": "edited"},
    ]
    (project / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(cli, ["check", "-q", "--no-cache", "--threshold", "0.5"])
    assert res.exit_code == 1, res.output
    assert "1/2 examples pass" in res.output
    assert "2 outputs carry pair_id and role fields, which are ignored" in res.stderr


def test_pair_rows_that_form_no_pair_are_named_on_stderr(project):
    """A pair whose edited row said "p " (trailing space) and a lone edited row were gated as
    outputs with no word: the pair rule judged one pair of three and passed."""
    rows = [
        {"id": "a", "source": "src", "summary": summary(0.9), "pair_id": "p", "role": "reference"},
        {"id": "b", "source": "src", "summary": summary(0.95), "pair_id": "p ", "role": "edited"},
        {"id": "c", "source": "src", "summary": summary(0.9), "pair_id": "q", "role": "Reference"},
        {"id": "d", "source": "src", "summary": summary(0.1), "pair_id": "q", "role": "Edited "},
        {"id": "e", "source": "src", "summary": summary(0.9), "pair_id": "z", "role": "edited"},
    ]
    (project / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    toml = project / "faithgate.toml"
    toml.write_text(toml.read_text() + "[rules]\npair_consistency = 1.0\n")
    res = CliRunner().invoke(cli, ["check", "--no-cache"])
    assert res.exit_code == 1, res.output  # the pair p (0.9 vs 0.95) is inconsistent
    assert "1/2 pairs ranked faithful > edited" in res.output
    assert "1 row with pair fields forms no pair (gated as outputs)" in res.output
    assert "faithgate: warning: 1 row with pair fields forms no pair" in res.stderr
    assert "'e' (pair_id 'z', role 'edited')" in res.stderr
    assert "taken as one pair id: 'p', 'p '" in res.stderr
    # A role that is neither faithful nor unfaithful: exit 2 before scoring.
    rows[3]["role"] = "edtied"
    (project / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(cli, ["check", "--no-cache"])
    assert res.exit_code == 2, res.output
    assert "'d' (pair_id 'q', role 'edtied')" in res.output


PAIR_SUMMARIZER = """
def summarize(source):
    return "0.1 aliens landed." if source == "bad" else "0.9 fine words."
"""


def test_a_summarizers_outputs_are_never_pair_probes(project):
    """A summarizer's outputs kept pair_id and role from the data file, so the output made for a
    row marked "edited" was a probe: a failing summary was left out of the gate."""
    (project / "pair_summ.py").write_text(PAIR_SUMMARIZER)
    rows = [
        {"id": "a", "source": "good", "pair_id": "p", "role": "reference"},
        {"id": "b", "source": "bad", "pair_id": "p", "role": "edited"},
    ]
    (project / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (project / "faithgate.toml").write_text(
        f'metrics = ["{NAME}"]\ncache_dir = ".fg"\n[thresholds]\n{NAME} = 0.5\n'
        "[rules]\npair_consistency = { min_rate = 0.5, generate = true, per_example = 1 }\n"
    )
    args = ["check", "--no-cache", "--summarizer", "pair_summ:summarize", "--data", "data.jsonl"]
    res = CliRunner().invoke(cli, [*args, "--json", "r.json"])
    assert res.exit_code == 1, res.output
    result = json.loads((project / "r.json").read_text())
    outputs = {e["id"]: e for e in result["examples"] if not e["probe"]}
    assert sorted(outputs) == ["a", "b"] and not outputs["b"]["passed"]


@pytest.fixture
def pipe():
    """A pipe holding ``text`` (written whole, then closed), named as ``<(cmd)`` names one."""
    ends = []

    def make(text: str) -> str:
        read, write = os.pipe()
        ends.append(read)
        os.write(write, text.encode())
        os.close(write)
        return f"/dev/fd/{read}"

    yield make
    for fd in ends:
        os.close(fd)


def test_a_pipe_is_read_as_an_input_file(project, pipe):
    """``--outputs <(cmd)`` (a pipe, /dev/fd/N) was "no such file", while ``faithgate score
    --source`` read pipes; ``bench --data`` likewise said "no such file or directory"."""
    rows = [
        {"id": "a", "source": "src", "summary": summary(0.9), "label": 1},
        {"id": "b", "source": "src", "summary": summary(0.2), "label": 0},
    ]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    args = ["check", "-q", "--no-cache", "--threshold", "0.1", "--outputs", pipe(text)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert "2/2 examples pass" in res.output
    args = ["bench", "--data", pipe(text), "--metric", NAME, "--no-cache", "-q", "--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs UNIX sockets")
def test_an_input_that_is_no_file_nor_pipe_says_what_it_is(project):
    """A device or socket given as the outputs file was "no such file", which is false."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(project / "o.sock"))
        res = CliRunner().invoke(cli, ["check", "--outputs", "o.sock"])
    assert res.exit_code == 2
    assert "o.sock is a socket, not a regular file or a pipe" in res.stderr


def test_a_baseline_given_as_a_pipe_is_read_not_skipped(project, pipe):
    """``--baseline <(git show main:base.json)`` was taken for a missing baseline: exit 0 with
    the regression rule skipped, where the drop against it fails the gate."""
    res = CliRunner().invoke(cli, ["check", "--json", "base.json", "--threshold", "0.1"])
    assert res.exit_code == 0, res.output
    rows = [{"id": "a", "source": "src", "summary": summary(0.2)}]
    (project / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = (project / "base.json").read_text()
    res = CliRunner().invoke(cli, ["check", "--threshold", "0.1", "--baseline", pipe(base)])
    assert res.exit_code == 1, res.output
    assert "no baseline" not in res.output
    assert f"regression[{NAME}]" in res.output


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs UNIX sockets")
@pytest.mark.parametrize(
    "args, subject",
    [
        (["check", "--outputs", "o.sock"], "o.sock"),
        (["check", "--baseline", "o.sock"], "the baseline (o.sock)"),
        (["check", "--config", "o.sock"], "o.sock"),
        (["bench", "--data", "o.sock", "--metric", NAME, "--no-cache"], "o.sock"),
        (["score", "--source", "o.sock", "--summary", "x"], "the source (o.sock)"),
        (["check", "--json", "o.sock"], "o.sock)"),  # the json report (/abs/path/o.sock)
    ],
    ids=["check-outputs", "check-baseline", "check-config", "bench-data", "score-source", "json"],
)
def test_every_command_names_a_special_file_in_one_wording(project, args, subject):
    """Inputs that are no file were refused in three wordings ("is not a regular file or a
    pipe" without saying what it is, "not a regular file, a pipe or a directory"), a
    configuration file that is a socket was "not found", and a baseline that is one was
    taken for a missing baseline (exit 0, the regression rule skipped)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(project / "o.sock"))
        res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    [line] = res.stderr.strip().splitlines()
    assert f"{subject} is a socket, not a regular file" in line, line


def test_script_shares_count_letters_not_combining_marks():
    """Thai vowel and tone signs and Devanagari matras were counted as letters of their
    script, but not in the letter total: a Latin sentence quoting a Thai name was refused as
    "Thai", and shares added up to 1.29 (review s23, F3)."""
    from faithgate.words import script_share

    quoted = "Prayut Chan-o-cha (ประยุทธ์ จันทร์โอชา) said."  # 18 Latin letters, 14 Thai
    assert unsupported_script(quoted) is None
    assert script_share(quoted, "Thai") == pytest.approx(14 / 32)
    [score] = get_metric("overlap").score_batch(
        [Example("t", "Prayut Chan-o-cha (ประยุทธ์ จันทร์โอชา) said it.", quoted)],
        ScoringContext(),
    )
    assert score.ok, score.error
    modi = "PM Modi (नरेंद्र मोदी) spoke."  # 11 Latin letters, 6 Devanagari
    latin, deva = script_share(modi, "Latin"), script_share(modi, "Devanagari")
    assert (latin, deva) == (pytest.approx(11 / 17), pytest.approx(6 / 17))
    assert main_script(modi) == "Latin" and main_script("नरेंद्र मोदी") == "Devanagari"
    assert unsupported_script("ภาษาไทยง่ายนิดเดียว") == "Thai"  # Thai text is still refused


@pytest.mark.slow
def test_soft_hyphens_in_the_source_do_not_change_overlap_or_ner():
    """The review's example: with "Ob\\u00adama" and "Ber\\u00adlin" in the source, overlap fell
    from 1.0 to 0.2 and ner from 1.0 to 0.33 (Barack Obama, Berlin not found) (s23, F1)."""
    plain = "Barack Obama visited Berlin on Tuesday. He met the chancellor."
    shy = "Barack Ob\u00adama visited Ber\u00adlin on Tuesday. He met\u200b the chan\u2060cellor."
    summary = "Barack Obama visited Berlin on Tuesday."
    for name in ("overlap", "ner"):
        metric = get_metric(name)
        a, b = metric.score_batch(
            [Example("a", plain, summary), Example("b", shy, summary)], ScoringContext()
        )
        assert a.ok and b.ok, (a.error, b.error)
        assert (a.value, b.value) == (1.0, 1.0), name
