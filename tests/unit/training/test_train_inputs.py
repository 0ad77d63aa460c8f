"""`faithgate train`'s inputs: each one it cannot use is refused with one line and exit 2,
before the dataset is built where it can be (standard input, a file given twice, an
--init-from or --base-model directory it cannot load, a damaged kept dataset), and a pair
too long for --max-length is skipped and counted instead of failing the run."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from tiny_models import MAYOR_TEXT, tiny_train_config

from faithgate.errors import InputError
from faithgate.training import synth


def _quiet(line: str) -> None:
    pass


def _cli(*args: str, stdin: str | None = None):
    from click.testing import CliRunner

    from faithgate.cli import cli

    return CliRunner().invoke(cli, ["train", *args], input=stdin)


@pytest.fixture
def no_dataset(monkeypatch):
    """Fail the test if the run gets as far as building the dataset."""
    from faithgate.training import train as train_module

    def refuse(*args, **kwargs):
        raise AssertionError("the dataset was built before the input was refused")

    monkeypatch.setattr(train_module, "build_dataset", refuse)
    monkeypatch.setattr(synth, "write_pairs", refuse)


# --- standard input and repeated files (items 13, 20) ---------------------------------------


@pytest.mark.parametrize("option", ["--documents", "--labelled"])
def test_standard_input_is_refused_as_a_file(tmp_path, tiny_base, tiny_docs, option):
    rows = tiny_docs.read_text()
    args = ["--out", str(tmp_path / "m"), "--base-model", str(tiny_base), "--snli-pairs", "0",
            "--max-steps", "1", "--threads", "1"]  # fmt: skip
    if option == "--labelled":
        args += ["--documents", str(tiny_docs)]
        rows = json.dumps({"source": MAYOR_TEXT, "summary": "The mayor spoke.", "label": 1}) + "\n"
    res = _cli(*args, option, "-", stdin=rows)
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"faithgate: {option} -: training cannot read standard input")
    assert res.output.count("\n") == 1 and "internal error" not in res.output
    assert not (tmp_path / "m.work").exists()


@pytest.mark.parametrize("option", ["documents", "labelled"])
def test_a_pipe_or_directory_is_refused_as_a_file_before_any_work(
    tmp_path, tiny_base, tiny_docs, no_dataset, option
):
    import os

    from faithgate.training.train import train

    pipe = tmp_path / "rows.fifo"
    os.mkfifo(pipe)  # what `--documents <(cmd)` names: it could be read only once
    folder = tmp_path / "folder"
    folder.mkdir()
    for given, kind in ((pipe, r"a named pipe \(FIFO\)"), (folder, "a directory")):
        config = tiny_train_config(tmp_path / "o", tiny_base, tiny_docs)
        setattr(config, option, [*getattr(config, option), str(given)])
        with pytest.raises(InputError, match=f"the --{option} file .* is {kind}, not a regular"):
            train(config, log=_quiet, threads=1)
    assert not (tmp_path / "o.work").exists()


def test_a_file_given_twice_is_refused_before_any_work(
    tmp_path, tiny_base, tiny_docs, monkeypatch, no_dataset
):
    from faithgate.training.train import train

    lab = tmp_path / "lab.jsonl"
    lab.write_text(json.dumps({"source": MAYOR_TEXT, "summary": "It was.", "label": 1}) + "\n")
    monkeypatch.chdir(tmp_path)
    twice = tiny_train_config(
        tmp_path / "o", tiny_base, tiny_docs, labelled=[str(lab), "./lab.jsonl"]
    )
    with pytest.raises(InputError, match=r"--labelled \./lab\.jsonl is given twice \(as .*lab"):
        train(twice, log=_quiet, threads=1)
    docs = tiny_train_config(tmp_path / "o", tiny_base, tiny_docs)
    docs.documents = [str(tiny_docs), str(tiny_docs)]
    with pytest.raises(InputError, match=r"--documents .*docs\.jsonl is given twice"):
        train(docs, log=_quiet, threads=1)
    builtin = tiny_train_config(tmp_path / "o", tiny_base, tiny_docs)
    builtin.documents = ["lee-news", "lee-news"]
    with pytest.raises(InputError, match="--documents lee-news is given twice"):
        train(builtin, log=_quiet, threads=1)
    assert not (tmp_path / "o.work").exists()


def test_the_same_labelled_file_twice_does_not_double_its_pairs(tmp_path, tiny_base, tiny_docs):
    """build_dataset, called on its own, refuses the repeat too."""
    from faithgate.training.dataset import build_dataset

    lab = tmp_path / "lab.jsonl"
    lab.write_text(json.dumps({"source": MAYOR_TEXT, "summary": "It was.", "label": 1}) + "\n")
    cfg = tiny_train_config(tmp_path / "o", tiny_base, tiny_docs, labelled=[str(lab), str(lab)])
    with pytest.raises(InputError, match="given twice"):
        build_dataset(cfg, tmp_path / "work", log=_quiet)


# --- --init-from and --base-model directories (items 14, 15) --------------------------------


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, r"--init-from .*start: no config\.json there"),
        ({"config.json": "[1, 2]"}, r"--init-from .*start: config\.json is not a JSON object"),
        ({"config.json": "{bad"}, r"--init-from .*start: config\.json is not valid JSON"),
        (
            {"config.json": "GOOD", "faithgate_training.json": "{bad"},
            r"--init-from .*start: faithgate_training\.json is not valid JSON",
        ),
    ],
)
def test_an_init_from_directory_it_cannot_read_is_an_input_error(
    tmp_path, tiny_base, tiny_docs, no_dataset, files, message
):
    from faithgate.training.train import train

    start = tmp_path / "start"
    start.mkdir()
    (start / "model.safetensors").write_bytes(b"weights")
    labels = {"id2label": {"0": "entailment", "1": "neutral", "2": "contradiction"}}
    for name, text in files.items():
        (start / name).write_text(json.dumps(labels) if text == "GOOD" else text)
    cfg = tiny_train_config(tmp_path / "o", tiny_base, tiny_docs, init_from=str(start))
    with pytest.raises(InputError, match=message) as err:
        train(cfg, log=_quiet, threads=1)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "o.work").exists()


@pytest.mark.parametrize("broken", ["no_tokenizer", "empty_config", "missing"])
def test_a_base_model_it_cannot_load_is_refused_before_the_dataset(
    tmp_path, tiny_base, tiny_docs, no_dataset, broken
):
    from faithgate.training.train import train

    base = tmp_path / "notok"
    if broken != "missing":
        base.mkdir()
        shutil.copy(tiny_base / "model.safetensors", base)
        config = "{}" if broken == "empty_config" else (tiny_base / "config.json").read_text()
        (base / "config.json").write_text(config)
    cfg = tiny_train_config(tmp_path / "o", base, tiny_docs)
    message = {
        "missing": r"--base-model .*notok: not found .*give a local model directory",
        "no_tokenizer": r"--base-model .*notok: cannot load its config\.json and tokenizer",
        "empty_config": r"--base-model .*notok: cannot load its config\.json and tokenizer",
    }[broken]
    with pytest.raises(InputError, match=message) as err:
        train(cfg, log=_quiet, threads=1)
    assert "\n" not in str(err.value) and "--model embedder" not in str(err.value)
    assert not (tmp_path / "o.work").exists()
    res = _cli("--out", str(tmp_path / "o"), "--documents", str(tiny_docs), "--base-model",
               str(base), "--snli-pairs", "0", "--max-steps", "1")  # fmt: skip
    assert res.exit_code == 2 and "internal error" not in res.output
    assert res.output.count("\n") == 1  # the refusal alone: the recipe line comes with progress


def test_a_max_length_longer_than_the_base_takes_is_refused_before_the_dataset(
    tmp_path, tiny_base, tiny_docs, no_dataset
):
    """It was an internal error (a tensor-size RuntimeError) once training began."""
    from faithgate.training.train import train

    cfg = tiny_train_config(tmp_path / "o", tiny_base, tiny_docs, max_length=256)
    with pytest.raises(InputError, match=r"--max-length 256 is longer than .* \(128 positions\)"):
        train(cfg, log=_quiet, threads=1)
    assert not (tmp_path / "o.work").exists()


# --- a damaged kept dataset (item 16) -----------------------------------------------------


def test_a_damaged_kept_dataset_is_an_input_error_naming_it(tmp_path, tiny_base, tiny_docs):
    from faithgate.training.dataset import build_dataset, dataset_file
    from faithgate.training.train import train

    cfg = tiny_train_config(tmp_path / "m", tiny_base, tiny_docs)
    work = tmp_path / "m.work"
    build_dataset(cfg, work, log=_quiet)
    kept = dataset_file(cfg, work)
    whole = kept.read_bytes()
    for damage in (
        whole[:200],
        b"garbage",
        b"",
        gzip.compress(b"[1, 2]"),
        gzip.compress(json.dumps({"sources": {}, "train": [{"x": 1}]}).encode()),
        gzip.compress(
            json.dumps(
                {
                    "sources": {},
                    "dev": [],
                    "dev_labelled": [],
                    "snli_test": [],
                    "train": [{"premise": "a", "hypothesis": "b", "label": "0", "kind": "k"}],
                }
            ).encode()
        ),  # fmt: skip
    ):
        kept.write_bytes(damage)
        with pytest.raises(InputError, match=r"dataset-[0-9a-f]{12}\.json\.gz is not a dataset"):
            build_dataset(cfg, work, log=_quiet)
    kept.write_bytes(whole[:200])
    res = _cli("--out", str(tmp_path / "m"), "--documents", str(tiny_docs), "--base-model",
               str(tiny_base), "--snli-pairs", "0", "--max-steps", "1", "--dev-fraction", "0",
               "--checkpoint-every", "1", "--batch-size", "4", "--max-length", "96",
               "--claims-per-document", "3")  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "internal error" not in res.output and "remove it to build the dataset afresh" in (
        res.output
    )
    kept.write_bytes(whole)
    assert (train(cfg, log=_quiet, threads=1) / "config.json").is_file()


# --- a hypothesis longer than --max-length (item 11) --------------------------------------


def test_pairs_too_long_for_max_length_are_skipped_and_counted(tmp_path, tiny_base, tiny_docs):
    """A long unfaithful labelled summary is one hypothesis: at --max-length 48 it leaves no
    room for a premise. The run skips it (and resumes) instead of failing at its batch."""
    from faithgate.training.train import train

    sentence = "The mayor of Springfield opened a library that cost four million dollars."
    long_summary = " ".join([sentence] * 6)
    lab = tmp_path / "lab.jsonl"
    lab.write_text(
        json.dumps({"id": "long", "source": MAYOR_TEXT, "summary": long_summary, "label": 0}) + "\n"
    )
    cfg = tiny_train_config(
        tmp_path / "m", tiny_base, tiny_docs, labelled=[str(lab)], labelled_dev_fraction=0.0,
        max_length=48, max_steps=None, dev_fraction=0.5, seed=1,
    )  # fmt: skip
    lines: list[str] = []
    out = train(cfg, log=lines.append, threads=1)
    skipped = [line for line in lines if line.startswith("skipping pairs")]
    assert len(skipped) == 1 and "--max-length 48" in skipped[0]
    meta = json.loads((out / "faithgate_training.json").read_text())
    assert meta["skipped_over_long_hypothesis"]["train"] >= 1
    assert meta["steps"] == meta["history"][-1]["step"] > 0


def test_a_hypothesis_longer_than_a_tiny_max_length_is_no_internal_error(
    tmp_path, tiny_base, tiny_docs
):
    res = _cli("--out", str(tmp_path / "m"), "--documents", str(tiny_docs), "--base-model",
               str(tiny_base), "--snli-pairs", "0", "--max-steps", "2", "--batch-size", "4",
               "--max-length", "16", "--threads", "1")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "skipping pairs whose hypothesis leaves no room" in res.output


# --- --perturb-rules (item 7) -------------------------------------------------------------


def test_perturb_rules_is_an_option_and_rules_1_keeps_the_recipe_hash(monkeypatch, tmp_path):
    from faithgate.training import train as train_module
    from faithgate.training.inputs import check_inputs

    seen = []
    monkeypatch.setattr(train_module, "train", lambda config, **kw: seen.append(config))
    out = str(tmp_path / "m")
    assert _cli("--out", out).exit_code == 0
    assert _cli("--out", out, "--perturb-rules", "3").exit_code == 0
    default, three = seen
    assert default.synth.perturb_rules == 1 and "perturb_rules" not in default.synth.recipe()
    assert three.synth.perturb_rules == 3 and three.recipe()["synth"]["perturb_rules"] == 3
    assert three.recipe_hash() != default.recipe_hash()
    res = _cli("--out", out, "--perturb-rules", "4")
    assert res.exit_code == 2 and "--perturb-rules" in res.output and len(seen) == 2
    # Library callers are checked too: perturb would fail every edit, quietly, on another value.
    bad = tiny_train_config(tmp_path / "o", tmp_path, tmp_path / "docs.jsonl")
    bad.synth = synth.SynthConfig(perturb_rules=4)
    with pytest.raises(InputError, match="--perturb-rules 4: expected 1, 2 or 3"):
        check_inputs(bad)
