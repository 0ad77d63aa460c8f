"""``ship`` cleans up after itself and says in one line what is missing; a document longer
than spaCy takes is parsed in pieces; transformers' load warning quotes the base path escaped."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from tiny_models import MAYOR_TEXT, tiny_train_config

from faithgate.errors import BackendError, InputError
from faithgate.training import ship, synth
from faithgate.training.corpora import Document
from faithgate.training.recipe import TRAINING_META


def _trained(tmp_path: Path, torch, *, work: bool) -> Path:
    """A stand-in for a `faithgate train` output (the recipe, two tensors) and, with
    ``work``, its work directory holding the synthetic pairs of one held-out document."""
    from safetensors.torch import save_file

    from faithgate.training.recipe import TrainConfig

    trained = tmp_path / "model"
    trained.mkdir()
    recipe = TrainConfig(output=str(trained), documents=["docs.jsonl"], dev_fraction=1.0).recipe()
    meta = {"recipe": recipe, "data": {"docs.jsonl": {"sha256": "0" * 64, "documents": 1}}}
    (trained / TRAINING_META).write_text(json.dumps(meta))
    (trained / "config.json").write_text("{}")
    save_file({"classifier.weight": torch.zeros(3, 4)}, str(trained / "model.safetensors"))
    if work:
        pairs = [
            {"premise": "P.", "hypothesis": "A b c d e f.", "label": 0, "kind": "supported:verbatim"},
            {"premise": "P.", "hypothesis": "A b c d e g.", "label": 2, "kind": "number"},
        ]  # fmt: skip
        workdir = tmp_path / "model.work"
        workdir.mkdir()
        (workdir / "synth-0123456789ab.jsonl").write_text(json.dumps({"doc": "d", "pairs": pairs}))
    return trained


def test_ship_without_synthetic_pairs_is_one_line_and_leaves_nothing(tmp_path, torch, capsys):
    trained = _trained(tmp_path, torch, work=False)
    dest_parent = tmp_path / "ship"
    dest_parent.mkdir()
    with pytest.raises(SystemExit) as exit_info:
        ship.main([str(trained), str(dest_parent / "checker")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("faithgate ship: no synthetic pairs (synth-*.jsonl) in ")
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert list(dest_parent.iterdir()) == []


def test_ship_removes_the_assembled_model_when_the_export_fails(tmp_path, torch, monkeypatch):
    """The assembled model (as big as the checker) went to DEST's folder and was removed only
    on success: a parity-gate refusal left ``assembled.*`` behind."""
    from faithgate import models
    from faithgate.backends import export

    trained = _trained(tmp_path, torch, work=True)
    dest_parent = tmp_path / "ship"
    dest_parent.mkdir()
    monkeypatch.setattr(models, "package_dir", lambda name: tmp_path / "base-package")

    def assemble(base: Path, delta: Path, out: Path) -> None:
        out.mkdir(parents=True)
        (out / "model.safetensors").write_bytes(b"x" * 1000)

    def refuse(*args, **kwargs):
        assert list(dest_parent.glob("assembled.*/model/model.safetensors"))  # it was there
        assert len(kwargs["calibration"]) == 1  # the held-out document's triple
        raise BackendError("w8a32 failed the parity gate")

    monkeypatch.setattr(models, "assemble_trained", assemble)
    monkeypatch.setattr(export, "export_model", refuse)
    with pytest.raises(BackendError, match="parity gate"):
        ship.ship(trained, dest_parent / "checker", quantize="w8a32", log=lambda line: None)
    assert list(dest_parent.iterdir()) == []


def test_ship_picks_this_models_synthetic_pairs_among_several(tmp_path, torch):
    import hashlib

    trained = _trained(tmp_path, torch, work=True)
    meta = json.loads((trained / TRAINING_META).read_text())
    only = ship.find_synth_file(trained, meta)
    assert only.name == "synth-0123456789ab.jsonl"  # the only one: taken, as before
    only.with_name("synth-ba9876543210.jsonl").write_text("")  # another recipe's
    with pytest.raises(InputError, match=r"2 synthetic pair files .* none is this model's"):
        ship.find_synth_file(trained, meta)
    # The key dataset.build_dataset names the file by: documents, synth recipe, user files.
    key = json.dumps(
        [["docs.jsonl"], meta["recipe"]["synth"], {"docs.jsonl": "0" * 64}], sort_keys=True
    )
    mine = only.with_name(f"synth-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsonl")
    mine.write_text("")
    assert ship.find_synth_file(trained, meta) == mine


@pytest.mark.slow
@pytest.mark.xdist_group("spacy")
def test_a_document_longer_than_spacy_takes_is_parsed_in_pieces(monkeypatch):
    """spaCy refuses a text over ``nlp.max_length`` (E088: 1,000,000 characters), which was
    an internal error of ``faithgate train``; a document under it is parsed as before."""
    from faithgate.text import load_spacy

    nlp = load_spacy(None)
    config = synth.SynthConfig(claims_per_document=4, seed=1)
    short = Document("short", MAYOR_TEXT, "test")
    before = synth.document_pairs(short, config)
    assert before
    long_text = "\n\n".join([MAYOR_TEXT] * 4)
    monkeypatch.setattr(nlp, "max_length", len(MAYOR_TEXT) + 10)  # not 1e6 characters here
    pairs = synth.document_pairs(Document("long", long_text, "test"), config)
    assert pairs and all(p.premise and p.hypothesis for p in pairs)
    assert synth.document_pairs(short, config) == before  # under the limit: unchanged


def test_the_base_model_path_in_transformers_load_warning_is_escaped(
    tmp_path, tiny_base, tiny_docs
):
    """transformers' "Some weights of ... were not initialized from the model checkpoint at
    <path>" went raw to stderr: a path with an escape sequence or a workflow command line
    reached the terminal or CI log as it was."""
    import shutil

    from faithgate.training.train import train

    base = tmp_path / "b\x1b[31mRED\n::error::forged"
    shutil.copytree(tiny_base, base)
    lines: list[str] = []
    config = tiny_train_config(
        tmp_path / "out",
        base,
        tiny_docs,
        synth=synth.SynthConfig(claims_per_document=2, seed=0),
        max_steps=1,
        checkpoint_every=100,
    )
    # What transformers' own stderr handler would get (its stream is whatever sys.stderr was
    # when transformers was imported, so capsys/capfd cannot be relied on to see it).
    raw: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: raw.append(record.getMessage())  # type: ignore[method-assign]
    transformers_log = logging.getLogger("transformers.modeling_utils")
    transformers_log.addHandler(handler)
    try:
        train(config, log=lines.append, threads=1)
    finally:
        transformers_log.removeHandler(handler)
    assert not any("\x1b" in message for message in raw), raw
    warning = [line for line in lines if line.startswith("Some weights of")]
    assert len(warning) == 1 and "\\x1b[31mRED\\n::error::forged" in warning[0], lines
    assert "newly initialized" in warning[0] and "\n" not in warning[0]


def test_a_synth_file_that_is_no_file_is_refused_before_any_work(tmp_path, torch, capsys):
    trained = _trained(tmp_path, torch, work=True)
    for given in (tmp_path / "missing.jsonl", tmp_path):
        with pytest.raises(SystemExit) as exit_info:
            ship.main([str(trained), str(tmp_path / "checker"), "--synth-file", str(given)])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("faithgate ship: --synth-file ") and "is not a file" in err
        assert "Traceback" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "checker").exists()
    assert not list(tmp_path.glob("assembled*")) and not list(tmp_path.glob(".checker*"))


@pytest.mark.parametrize(
    ("dest", "message"),
    [
        ("model", "DEST {tmp}/model is, holds or lies inside the trained model"),
        ("model/shipped", "lies inside the trained model"),
        (".", "is, holds or lies inside the trained model"),  # holds it
        ("no/such/dir/checker", "its directory does not exist"),
        ("user", "DEST {tmp}/user"),  # a user's directory: refused before any work
    ],
)
def test_dest_is_checked_before_any_work(tmp_path, torch, capsys, dest, message):
    """`ship TRAINED TRAINED` replaced the trained fp32 model without a word; a DEST whose
    folder is missing was a FileNotFoundError traceback; a user's directory was refused only
    after the assembly and export (and named an --out option ship does not have)."""
    trained = _trained(tmp_path, torch, work=True)
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "notes.txt").write_text("mine\n")
    before = sorted(p.name for p in trained.iterdir())
    with pytest.raises(SystemExit) as exit_info:
        ship.main([str(trained), str(tmp_path / dest)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message.format(tmp=tmp_path) in err, err
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "--out" not in err
    assert sorted(p.name for p in trained.iterdir()) == before
    assert (tmp_path / "user" / "notes.txt").read_text() == "mine\n"
    assert not list(tmp_path.glob("assembled*"))


def test_negative_calibration_pairs_and_torn_synthetic_lines(tmp_path, torch, capsys):
    trained = _trained(tmp_path, torch, work=True)
    with pytest.raises(SystemExit) as exit_info:
        ship.main([str(trained), str(tmp_path / "c"), "--calibration-pairs", "-3"])
    assert exit_info.value.code == 2
    assert "--calibration-pairs must be >= 0, got -3" in capsys.readouterr().err
    # An interrupted synthesis leaves a torn last line: skipped, as train's reader does.
    synth_file = next((tmp_path / "model.work").glob("synth-*.jsonl"))
    with synth_file.open("a") as fh:
        fh.write('\n{"doc": "e", "pairs": [{"premise": "P\x01')
    meta = json.loads((trained / TRAINING_META).read_text())
    from faithgate.training.recipe import TrainConfig

    config = TrainConfig(**{**meta["recipe"], "output": str(trained)})
    assert len(ship.held_out_triples(config, synth_file)) == 1
