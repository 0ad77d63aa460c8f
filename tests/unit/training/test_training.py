"""`faithgate train`: synthetic pairs, deterministic and resumable training, shipping."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from tiny_models import MAYOR_TEXT

from faithgate.training import synth
from faithgate.training.corpora import (
    Document,
    clean_wiki,
    labelled_summaries,
    user_documents,
)

DOC = Document("hand-1", MAYOR_TEXT, "hand")


@pytest.fixture(scope="module")
def doc_pairs():
    return synth.document_pairs(DOC, synth.SynthConfig(claims_per_document=5, seed=3))


def test_supported_claims_are_sentences_or_compressions_of_their_premise(doc_pairs):
    supported = [p for p in doc_pairs if p.label == 0]
    assert supported, "every document with sentences yields supported claims"
    for p in supported:
        if p.kind == "supported:verbatim":
            assert p.hypothesis in p.premise
        else:
            assert p.kind == "supported:compressed"
            # A compression keeps the words in order and only drops some.
            words = iter(p.premise.replace(",", " ").split())
            assert all(w in words for w in p.hypothesis.rstrip(".").replace(",", " ").split())


def test_unsupported_claims_are_edits_the_premise_does_not_state(doc_pairs):
    unsupported = [p for p in doc_pairs if p.label != 0]
    assert unsupported
    for p in unsupported:
        assert p.hypothesis not in p.premise
        if p.kind == "unrelated_sentence":  # another sentence of the document: not stated
            assert p.label == 1 and p.hypothesis in DOC.text
        elif p.kind == "inserted_modifier":  # a detail from outside the window: not stated
            assert p.label == 1 and p.hypothesis[:-1].rstrip(".") not in p.premise
        else:  # an edit of what the window states: negation, swaps, numbers, dates
            assert p.label == 2, p
    kinds = {p.kind for p in unsupported}
    assert {"predicate_negation", "unrelated_sentence", "inserted_modifier"} <= kinds


def test_negation_of_a_stated_fact_is_a_contradiction():
    doc = Document(
        "hand-2",
        "The committee approved the plan on Tuesday. Workers will start building the bridge "
        "in March. The project is expected to cost 12 million euros.",
        "hand",
    )
    pairs = synth.document_pairs(doc, synth.SynthConfig(claims_per_document=3, seed=0))
    negations = [p for p in pairs if p.kind == "predicate_negation"]
    assert negations and all(p.label == 2 for p in negations)
    assert any(" not " in p.hypothesis or "n't" in p.hypothesis for p in negations)


def test_generation_is_deterministic_per_seed():
    cfg = synth.SynthConfig(claims_per_document=5, seed=3)
    assert synth.document_pairs(DOC, cfg) == synth.document_pairs(DOC, cfg)
    other = synth.document_pairs(DOC, synth.SynthConfig(claims_per_document=5, seed=4))
    assert other != synth.document_pairs(DOC, cfg)


def test_compress_drops_an_appositive_and_keeps_the_clause():
    from faithgate.text import load_spacy

    sent = next(load_spacy()("The mayor, a former teacher, opened the library.").sents)
    import random

    assert synth.compress(sent, random.Random(0)) == "The mayor opened the library."


def test_write_pairs_resumes_after_the_documents_already_written(tmp_path):
    cfg = synth.SynthConfig(claims_per_document=2, seed=0)
    docs = [DOC, Document("hand-3", "Anna won the race in Oslo. She trained for ten years.", "h")]
    path = tmp_path / "pairs.jsonl"
    full = synth.write_pairs(docs, cfg, path)
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:20])  # second document torn mid-line
    calls = []
    again = synth.write_pairs(docs, cfg, path, progress=lambda k, n: calls.append(k))
    assert again == full and calls == [1, 2]
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line)["doc"])
        except json.JSONDecodeError:
            assert line == lines[1][:20]  # the torn fragment, left on a line of its own
    assert rows == ["hand-1", "hand-3"]


def test_clean_wiki_keeps_prose_and_link_labels():
    markup = (
        "{{Infobox|name=x}}'''Albedo''' is the [[diffuse reflection|reflection]] of "
        "[[sunlight]]<ref>{{cite web|url=x}}</ref> from a surface, measured on a scale from 0 "
        "to 1, where 0 is a black body that absorbs all radiation and 1 reflects it all.\n\n"
        "== History ==\n* a list item\n"
    )
    assert clean_wiki(markup) == [
        "Albedo is the reflection of sunlight from a surface, measured on a scale from 0 to 1, "
        "where 0 is a black body that absorbs all radiation and 1 reflects it all."
    ]


def test_user_files_are_validated_with_line_numbers(tmp_path):
    bad = tmp_path / "docs.jsonl"
    bad.write_text('{"source": "fine text"}\n{"id": 3}\n')
    with pytest.raises(Exception, match=r"docs.jsonl:2: expected a 'source'"):
        user_documents(bad)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"source": "s", "summary": "t", "label": 1}\n{"source": "s"}\n')
    with pytest.raises(Exception, match=r"pairs.jsonl:2"):
        labelled_summaries(pairs)
    pairs.write_text('{"source": "s", "summary": "t", "label": 2}\n')
    with pytest.raises(Exception, match=r"pairs.jsonl:1: field 'label' must be 1, 0"):
        labelled_summaries(pairs)


@pytest.mark.parametrize(
    ("reader", "row", "message"),
    [
        (user_documents, {"source": "Some text \ud800 here."}, "field 'source' contains a lone"),
        (user_documents, {"text": "\u0000" * 40}, "field 'text' contains NUL characters"),
        (user_documents, {"id": "\udfff", "source": "Fine text."}, "field 'id' contains a lone"),
        (user_documents, {"source": "\u200b \ufeff"}, "expected a 'source' (or 'text') string"),
        (
            labelled_summaries,
            {"source": "The mayor \ud800 opened it.", "summary": "It opened.", "label": 1},
            "field 'source' contains a lone surrogate",
        ),
        (
            labelled_summaries,
            {"source": "The mayor opened it.", "summary": "a\u0000b", "label": 0},
            "field 'summary' contains NUL characters",
        ),
        (
            labelled_summaries,
            {"source": "The mayor opened it.", "summary": " \u200b", "label": 0},
            "field 'summary' is empty",
        ),
    ],
    ids=[
        "doc-surrogate",
        "doc-nul",
        "doc-id-surrogate",
        "doc-blank",
        "lab-surrogate",
        "lab-nul",
        "lab-blank",
    ],
)
def test_user_text_that_is_not_text_is_refused_naming_file_line_and_field(
    tmp_path, reader, row, message
):
    """A lone surrogate in --documents or --labelled text was an internal error (it crashed
    while tokenising), and a document of NUL characters was trained on."""
    from faithgate.errors import InputError

    path = tmp_path / "in.jsonl"
    path.write_text(
        json.dumps({"source": "A fine first row.", "summary": "Fine.", "label": 1})
        + "\n"
        + json.dumps(row)
        + "\n"
    )
    with pytest.raises(InputError, match=rf"in.jsonl:2: {re.escape(message)}"):
        reader(path)


def test_labelled_summaries_skip_graded_only_rows_and_key_documents_by_text(tmp_path):
    path = tmp_path / "bench.jsonl"
    rows = [
        {"id": "a", "source": DOC.text, "summary": "x", "label": 1},
        {"id": "b", "source": DOC.text + "  ", "summary": "y", "label": 0},
        {"id": "c", "source": "Another text.", "summary": "z", "label": None},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = labelled_summaries(path)
    assert [(i.id, i.faithful) for i in items] == [("bench:a", True), ("bench:b", False)]
    # Both summaries of one article share a key, so a split never separates them.
    assert items[0].document_key == items[1].document_key


# --- labelled summaries -> sentence-level pairs ---------------------------------------------

SOURCE_SENTENCES = [
    "The mayor of Springfield, John Carter, opened a new public library on Monday.",
    "The building cost 4 million dollars and holds 20,000 books.",
    "Carter said the library would stay open until 9 pm every weekday.",
    "Local students had campaigned for the library since 2015.",
]


def test_evidence_is_the_most_overlapping_source_sentences_in_source_order():
    got = synth.evidence(
        "The library, which cost $4 million, holds 20,000 books.", SOURCE_SENTENCES, 2
    )
    assert got == " ".join(SOURCE_SENTENCES[:2])
    got = synth.evidence("Students campaigned for it since 2015.", SOURCE_SENTENCES, 1)
    assert got == SOURCE_SENTENCES[3]


def test_a_faithful_summary_gives_supported_sentences_and_their_edited_twins():
    summary = "Springfield opened a library on Monday. It holds 20,000 books, the mayor said."
    cfg = synth.SynthConfig(seed=1)
    pairs = synth.labelled_summary_pairs("r1", DOC.text, summary, True, cfg)
    supported = [p for p in pairs if p.label == synth.ENTAILMENT]
    assert [p.hypothesis for p in supported] == [
        "Springfield opened a library on Monday.",
        "It holds 20,000 books, the mayor said.",
    ]
    for p in supported:  # against evidence from the source, not the whole article
        assert p.premise.startswith("The mayor of Springfield") and len(p.premise) < len(DOC.text)
    edits = [p for p in pairs if p.label != synth.ENTAILMENT]
    assert edits and all(p.label == synth.CONTRADICTION for p in edits)
    assert all(p.kind.startswith("labelled:") and p.hypothesis not in summary for p in edits)
    assert pairs == synth.labelled_summary_pairs("r1", DOC.text, summary, True, cfg)


def test_an_unfaithful_summary_is_one_unsupported_pair():
    one = synth.labelled_summary_pairs(
        "r2", DOC.text, "The library holds 50,000 books.", False, synth.SynthConfig()
    )
    assert [(p.hypothesis, p.label, p.kind) for p in one] == [
        ("The library holds 50,000 books.", synth.CONTRADICTION, "labelled:unfaithful")
    ]
    # Which sentence of a longer summary is wrong is unknown: the whole summary is the claim.
    two = synth.labelled_summary_pairs(
        "r3",
        DOC.text,
        "Carter opened a library. It holds 50,000 books.",
        False,
        synth.SynthConfig(),
    )
    assert [(p.hypothesis, p.kind) for p in two] == [
        ("Carter opened a library. It holds 50,000 books.", "labelled:unfaithful_summary")
    ]


# --- training ------------------------------------------------------------------------------


class Stopped(Exception):
    """Raised by ``_stop_at_3``: the tests' stand-in for a run interrupted mid-training."""


def _stop_at_3(line: str) -> None:
    """A ``log`` callback that interrupts a run when it reports step 3."""
    if line.startswith("step 3/"):
        raise Stopped


def _config(out: Path, base: Path, docs: Path, seed: int = 0, **kw):
    from faithgate.training.recipe import TrainConfig

    return TrainConfig(
        output=str(out),
        base_model=str(base),
        documents=[str(docs)],
        snli_pairs=0,
        synth=synth.SynthConfig(claims_per_document=3, seed=seed),
        dev_fraction=0.0,
        batch_size=4,
        max_length=96,
        max_steps=4,
        checkpoint_every=1,
        seed=seed,
        **kw,
    )


def _weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def _same(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_training_is_deterministic_per_seed(tmp_path, tiny_base, tiny_docs, torch):
    from faithgate.training.train import train

    quiet = lambda line: None  # noqa: E731
    a = train(_config(tmp_path / "a", tiny_base, tiny_docs), log=quiet, threads=1)
    b = train(_config(tmp_path / "b", tiny_base, tiny_docs), log=quiet, threads=1)
    c = train(_config(tmp_path / "c", tiny_base, tiny_docs, seed=1), log=quiet, threads=1)
    wa, wb, wc = _weights(a), _weights(b), _weights(c)
    assert _same(wa, wb)
    assert not _same(wa, wc)
    meta = json.loads((a / "faithgate_training.json").read_text())
    assert meta["steps"] == 4 and meta["recipe"]["seed"] == 0
    assert meta["data"][str(tiny_docs)]["documents"] == 2
    frozen = "bert.embeddings.word_embeddings.weight"
    from safetensors.torch import load_file

    base = load_file(str(tiny_base / "model.safetensors"))
    assert torch.equal(wa[frozen], base["embeddings.word_embeddings.weight"])


def test_an_interrupted_run_resumes_to_the_same_weights(tmp_path, tiny_base, tiny_docs):
    from faithgate.training.train import train

    with pytest.raises(Stopped):
        train(_config(tmp_path / "r", tiny_base, tiny_docs), log=_stop_at_3, threads=1, log_every=1)
    assert (tmp_path / "r.work" / "checkpoint.pt").is_file()
    lines: list[str] = []
    resumed = train(_config(tmp_path / "r", tiny_base, tiny_docs), log=lines.append, threads=1)
    assert any(line.startswith("resumed at step 2/4") for line in lines)
    straight = train(_config(tmp_path / "s", tiny_base, tiny_docs), log=lambda _: None, threads=1)
    assert _same(_weights(resumed), _weights(straight))


def test_a_checkpoint_of_another_recipe_is_refused(tmp_path, tiny_base, tiny_docs):
    from faithgate.errors import InputError
    from faithgate.training.train import train

    train(_config(tmp_path / "x", tiny_base, tiny_docs), log=lambda _: None, threads=1)
    with pytest.raises(InputError, match="another recipe"):
        train(_config(tmp_path / "x", tiny_base, tiny_docs, learning_rate=1e-3), log=lambda _: None)


def test_labelled_files_are_split_by_document_and_evaluated_apart(tmp_path, tiny_base, tiny_docs):
    from faithgate.training.dataset import build_dataset, is_held_out

    other = DOC.text.replace("Springfield", "Shelbyville")
    rows = [
        {"id": f"{i}", "source": src, "summary": "The library holds 20,000 books.", "label": lab}
        for i, (src, lab) in enumerate([(DOC.text, 1), (DOC.text, 0), (other, 1), (other, 0)])
    ]
    path = tmp_path / "lab.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _config(tmp_path / "m", tiny_base, tiny_docs, labelled=[str(path)])
    cfg.labelled_dev_fraction = 0.5
    data = build_dataset(cfg, tmp_path / "work", log=lambda _: None)
    items = labelled_summaries(path)
    held = {i.document_key for i in items if is_held_out(i.document_key, 0.5, cfg.seed)}
    n_held = sum(1 for i in items if i.document_key in held)
    # each row gives at least one pair; held-out rows only in dev_labelled, the rest in train
    labelled_train = [p for p in data.train if p.kind.startswith("labelled:")]
    assert len(data.dev_labelled) >= n_held and len(labelled_train) >= len(items) - n_held
    assert data.sources[str(path)]["documents"] == 2
    assert data.sources[str(path)]["held_out_documents"] == len(held)
    held_premises = {p.premise for p in data.dev_labelled}
    assert not held_premises & {p.premise for p in labelled_train}


def test_training_continues_from_a_trained_checker(tmp_path, tiny_base, tiny_docs):
    from faithgate.errors import InputError
    from faithgate.training.train import train

    quiet = lambda line: None  # noqa: E731
    first = train(_config(tmp_path / "a", tiny_base, tiny_docs), log=quiet, threads=1)
    second = train(
        _config(tmp_path / "b", tiny_base, tiny_docs, init_from=str(first)), log=quiet, threads=1
    )
    fresh = train(_config(tmp_path / "c", tiny_base, tiny_docs), log=quiet, threads=1)
    assert not _same(_weights(second), _weights(fresh))  # started from `first`, not a fresh head
    meta = json.loads((second / "faithgate_training.json").read_text())
    assert (
        meta["init_from"]["recipe_hash"]
        == json.loads((first / "faithgate_training.json").read_text())["recipe_hash"]
    )
    with pytest.raises(InputError, match="no model.safetensors"):
        train(_config(tmp_path / "d", tiny_base, tiny_docs, init_from=str(tiny_docs.parent)))
    with pytest.raises(InputError, match="labels are not"):
        train(_config(tmp_path / "e", tiny_base, tiny_docs, init_from=str(tiny_base)))


def test_the_dataset_is_kept_and_read_back_without_rebuilding(tmp_path, tiny_base, tiny_docs):
    from faithgate.training import dataset as dataset_module
    from faithgate.training.dataset import build_dataset, dataset_file

    cfg = _config(tmp_path / "d", tiny_base, tiny_docs)
    first = build_dataset(cfg, tmp_path / "work", log=lambda _: None)
    assert dataset_file(cfg, tmp_path / "work").is_file()

    def refuse(*args, **kwargs):
        raise AssertionError("rebuilt a dataset that was kept")

    original = dataset_module._build_dataset
    dataset_module._build_dataset = refuse
    try:
        again = build_dataset(cfg, tmp_path / "work", log=lambda _: None)
    finally:
        dataset_module._build_dataset = original
    assert again == first and again.train
    # Settings that do not decide the pairs share the file; one that does gets its own.
    assert dataset_file(_config(tmp_path / "x", tiny_base, tiny_docs, learning_rate=1e-3), tmp_path)
    same = dataset_file(_config(tmp_path / "x", tiny_base, tiny_docs, epochs=2), tmp_path)
    other = dataset_file(_config(tmp_path / "x", tiny_base, tiny_docs, seed=1), tmp_path)
    assert same.name == dataset_file(cfg, tmp_path).name != other.name


def test_float16_init_rounds_the_trained_tensors_and_is_part_of_the_recipe(
    tmp_path, tiny_base, tiny_docs, torch
):
    from safetensors.torch import load_file

    from faithgate.training.train import train

    plain = _config(tmp_path / "p", tiny_base, tiny_docs)
    half = _config(tmp_path / "h", tiny_base, tiny_docs, init_precision="float16")
    assert "init_precision" not in plain.recipe()  # earlier recipes keep their hash
    assert half.recipe()["init_precision"] == "float16"
    assert half.recipe_hash() != plain.recipe_hash()
    half.max_steps = 1
    half.learning_rate = 1e-12  # one step that barely moves: the start shows through
    trained = _weights(train(half, log=lambda _: None, threads=1))
    base = load_file(str(tiny_base / "model.safetensors"))
    query = base["encoder.layer.0.attention.self.query.weight"]
    got = trained["bert.encoder.layer.0.attention.self.query.weight"]
    assert torch.allclose(got, query.half().float(), atol=1e-9)
    assert not torch.equal(query.half().float(), query)  # the rounding is visible at this size
    frozen = trained["bert.embeddings.word_embeddings.weight"]
    assert torch.equal(frozen, base["embeddings.word_embeddings.weight"])  # frozen: not rounded


def test_a_cuda_device_without_cuda_is_a_clear_error(tmp_path, tiny_base, tiny_docs, torch):
    from faithgate.errors import InputError
    from faithgate.training.train import train

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(InputError, match="no CUDA device"):
        train(_config(tmp_path / "c", tiny_base, tiny_docs), log=lambda _: None, device="cuda")
    with pytest.raises(InputError, match="expected cpu, cuda or cuda:N"):
        train(_config(tmp_path / "c", tiny_base, tiny_docs), log=lambda _: None, device="tpu")


def test_an_edited_document_file_is_not_trained_on_stale(tmp_path, tiny_base, tiny_docs):
    from faithgate.training.dataset import build_dataset

    docs = tmp_path / "docs.jsonl"
    docs.write_bytes(tiny_docs.read_bytes())
    cfg = _config(tmp_path / "d", tiny_base, docs)
    first = build_dataset(cfg, tmp_path / "work", log=lambda _: None)
    rows = [json.loads(line) for line in docs.read_text().splitlines()]
    rows[0]["source"] = rows[0]["source"].replace("Springfield", "Ogdenville")
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines: list[str] = []
    again = build_dataset(cfg, tmp_path / "work", log=lines.append)
    assert any("changed since" in line for line in lines)
    assert again.sources[str(docs)]["sha256"] != first.sources[str(docs)]["sha256"]
    assert not any("Ogdenville" in p.premise for p in first.train)
    assert any("Ogdenville" in p.premise for p in again.train)  # fresh synthetic pairs too


def test_the_shipped_checkers_recipe_keeps_its_hash():
    """Settings added to TrainConfig later must not change the hash of recipes made before
    them: the shipped checker's manifest and its build command give its recorded hash."""
    from faithgate.training.recipe import TrainConfig

    manifest = json.loads(
        (
            Path(__file__).resolve().parents[3] / "onnx_models/checker/faithgate_training.json"
        ).read_text()
    )
    recipe = dict(manifest["recipe"])
    recipe["synth"] = synth.SynthConfig.from_recipe(recipe["synth"])
    from_manifest = TrainConfig(output="x", **recipe)
    assert from_manifest.recipe() == manifest["recipe"]
    assert from_manifest.recipe_hash() == manifest["recipe_hash"]
    # onnx_models/build_checker.sh: --snli-pairs 15000 --max-steps 1200 --seed 0 --synthesis 1
    shipped = synth.SynthConfig(synthesis=1)
    built = TrainConfig(output="x", snli_pairs=15000, max_steps=1200, seed=0, synth=shipped)
    assert built.recipe_hash() == manifest["recipe_hash"]


# --- what `faithgate train` must never do: delete, overwrite, mix or crash -----------------


def _quiet(line: str) -> None:
    pass


def _cli(args: list[str]):
    from click.testing import CliRunner

    from faithgate.cli import cli

    # The tiny base takes 128 positions: the default --max-length (256) is refused for it.
    length = [] if "--max-length" in args else ["--max-length", "96"]
    return CliRunner().invoke(cli, ["train", *args, *length])


def test_an_out_directory_faithgate_did_not_write_is_refused_untouched(
    tmp_path, tiny_base, tiny_docs
):
    from faithgate.errors import InputError
    from faithgate.training.train import train

    user = tmp_path / "userdir"
    user.mkdir()
    (user / "precious.txt").write_text("notes\n")
    with pytest.raises(InputError, match="not empty and holds no faithgate_training.json"):
        train(_config(user, tiny_base, tiny_docs), log=_quiet, threads=1)
    res = _cli(["--out", str(user), "--documents", str(tiny_docs), "--base-model", str(tiny_base)])
    assert res.exit_code == 2 and res.output.startswith("faithgate: --out ")
    assert res.output.count("\n") == 1 and "Traceback" not in res.output
    assert (user / "precious.txt").read_text() == "notes\n"
    assert not (tmp_path / "userdir.work").exists()  # refused before any work
    # An empty directory, and an earlier output of `faithgate train`, are replaced.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (
        train(_config(empty, tiny_base, tiny_docs), log=_quiet, threads=1) / "config.json"
    ).is_file()
    shutil.rmtree(tmp_path / "empty.work")  # a new recipe, not a resume
    again = train(_config(empty, tiny_base, tiny_docs, seed=1), log=_quiet, threads=1)
    meta = json.loads((again / "faithgate_training.json").read_text())
    assert meta["recipe"]["seed"] == 1
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []  # the temporary and the replaced directories are gone


def test_an_out_that_is_or_holds_an_input_is_refused(tmp_path, tiny_base, tiny_docs):
    from faithgate.errors import InputError
    from faithgate.training.train import train

    first = train(_config(tmp_path / "m1", tiny_base, tiny_docs), log=_quiet, threads=1)
    before = (first / "model.safetensors").read_bytes()
    shutil.rmtree(tmp_path / "m1.work")  # no checkpoint of another recipe to stop the run
    for out in (first, first / "inner", tmp_path / "x" / ".." / "m1"):
        with pytest.raises(InputError, match="refusing to overwrite an input"):
            train(_config(out, tiny_base, tiny_docs, init_from=str(first)), log=_quiet)
    res = _cli(
        ["--out", str(first), "--init-from", str(first), "--documents", str(tiny_docs),
         "--base-model", str(tiny_base)]
    )  # fmt: skip
    assert res.exit_code == 2 and "refusing to overwrite an input" in res.output
    assert (first / "model.safetensors").read_bytes() == before
    # The base model and the data files are inputs too.
    with pytest.raises(InputError, match="--base-model"):
        train(_config(tiny_base / "out", tiny_base, tiny_docs), log=_quiet)
    docs = first / "docs.jsonl"
    docs.write_bytes(tiny_docs.read_bytes())
    with pytest.raises(InputError, match="--documents file"):
        train(_config(first, tiny_base, docs), log=_quiet)


def test_a_resume_on_changed_documents_is_refused(tmp_path, tiny_base, tiny_docs):
    from faithgate.errors import InputError
    from faithgate.training.train import train

    docs = tmp_path / "docs.jsonl"
    docs.write_bytes(tiny_docs.read_bytes())
    with pytest.raises(Stopped):
        train(_config(tmp_path / "r", tiny_base, docs), log=_stop_at_3, threads=1, log_every=1)
    docs.write_text(docs.read_text().replace("Springfield", "Ogdenville"))
    lines: list[str] = []
    with pytest.raises(InputError, match="trained on other data .* remove it to start afresh"):
        train(_config(tmp_path / "r", tiny_base, docs), log=lines.append, threads=1)
    assert not any(line.startswith("resumed") for line in lines)
    assert not (tmp_path / "r").exists()


def test_a_damaged_checkpoint_is_an_input_error_naming_it(tmp_path, tiny_base, tiny_docs, torch):
    from faithgate.errors import InputError
    from faithgate.training.train import train

    out = tmp_path / "c"
    train(_config(out, tiny_base, tiny_docs), log=_quiet, threads=1)
    ckpt = tmp_path / "c.work" / "checkpoint.pt"
    whole = ckpt.read_bytes()
    legacy = torch.load(ckpt, weights_only=False)
    legacy.pop("dataset_sha256", None)  # as written before checkpoints recorded their data
    buf = tmp_path / "legacy.pt"
    torch.save(legacy, buf)
    for damage in (whole[: len(whole) // 2], b"garbage", b"", buf.read_bytes()):
        ckpt.write_bytes(damage)
        with pytest.raises(InputError, match=r"checkpoint\.pt is not a checkpoint .* remove it"):
            train(_config(out, tiny_base, tiny_docs), log=_quiet, threads=1)
    ckpt.write_bytes(b"garbage")
    res = _cli(["--out", str(out), "--documents", str(tiny_docs), "--base-model", str(tiny_base),
                "--snli-pairs", "0", "--max-steps", "1"])  # fmt: skip
    assert res.exit_code == 2 and "internal error" not in res.output
    assert "checkpoint.pt" in res.output and "remove it to start afresh" in res.output


def test_documents_with_the_same_ids_in_two_files_are_all_kept(tmp_path, tiny_base):
    from faithgate.errors import InputError
    from faithgate.training.dataset import build_dataset

    towns = ["Springfield", "Shelbyville", "Ogdenville", "Brockway"]
    files = []
    for k in range(2):
        path = tmp_path / f"part{k}.jsonl"
        rows = [
            {"id": str(i), "source": DOC.text.replace("Springfield", towns[2 * k + i])}
            for i in range(2)
        ]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        files.append(str(path))
    cfg = _config(tmp_path / "m", tiny_base, tmp_path / "unused")
    cfg.documents = files
    data = build_dataset(cfg, tmp_path / "work", log=_quiet)
    premises = " ".join(p.premise for p in data.train)
    assert all(town in premises for town in towns)  # no document stood in for another
    assert [d.id for d in user_documents(files[0])] == ["part0:0", "part0:1"]
    # Same-named files without ids would still clash: refused, naming both.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "docs.jsonl").write_text(json.dumps({"source": DOC.text}) + "\n")
    cfg.documents = [str(tmp_path / "a" / "docs.jsonl"), str(tmp_path / "b" / "docs.jsonl")]
    with pytest.raises(InputError, match=r"document id 'docs-1' is also a document of .*a/docs"):
        build_dataset(cfg, tmp_path / "work2", log=_quiet)
    # A repeated id within one file names its line.
    dup = tmp_path / "dup.jsonl"
    dup.write_text("".join(json.dumps({"id": "x", "source": DOC.text}) + "\n" for _ in range(2)))
    with pytest.raises(InputError, match=r"dup.jsonl:2: duplicate id 'x' \(first on line 1\)"):
        user_documents(dup)


FRENCH = (
    "Le maire de Lyon, Grégory Doucet, a annoncé lundi la construction de trois nouvelles "
    "écoles. Les travaux commenceront en mars 2025 et coûteront 40 millions d'euros. Selon la "
    "mairie, 1 200 élèves seront accueillis. L'opposition a critiqué le calendrier."
)


def test_documents_that_do_not_read_as_english_are_left_out_of_the_pairs(tmp_path, tiny_base):
    # The edit rules are English: on French they made pairs such as "en resigns 2025"
    # (contradiction) and "coûteront." cut mid-clause (entailment), trained on silently.
    from faithgate.errors import InputError
    from faithgate.training.dataset import build_dataset

    mixed = tmp_path / "mixed.jsonl"
    rows = [{"id": "en", "source": DOC.text}, {"id": "fr", "source": FRENCH}]
    mixed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _config(tmp_path / "m", tiny_base, tmp_path / "unused")
    cfg.documents = [str(mixed)]
    logged: list[str] = []
    data = build_dataset(cfg, tmp_path / "work", log=logged.append)
    assert data.train or data.dev
    assert not any("Lyon" in p.premise for p in data.train + data.dev)
    assert any("1 of 2 documents do not read as English" in line for line in logged)
    assert data.sources[str(mixed)]["not_english"] == 1
    french = tmp_path / "fr.jsonl"
    french.write_text(json.dumps({"id": "fr", "source": FRENCH}) + "\n")
    cfg.documents = [str(french)]
    with pytest.raises(InputError, match="no document reads as English"):
        build_dataset(cfg, tmp_path / "work2", log=_quiet)


def test_labelled_ids_must_be_unique_and_labels_read_as_bench_reads_them(tmp_path):
    from faithgate.errors import InputError

    path = tmp_path / "lab.jsonl"

    def write(*labels, ids=None):
        rows = [
            {"id": (ids or [str(i) for i in range(len(labels))])[i], "source": DOC.text,
             "summary": "s", "label": lab}
            for i, lab in enumerate(labels)
        ]  # fmt: skip
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    write(1, 0, ids=["a", "a"])
    with pytest.raises(InputError, match=r"lab.jsonl:2: duplicate id 'a' \(first on line 1\)"):
        labelled_summaries(path)
    for bad in (0.6, 2, "yes"):
        write(1, bad)
        with pytest.raises(InputError, match=r"lab.jsonl:2: field 'label' must be 1, 0"):
            labelled_summaries(path)
    path.write_text('{"source": "s", "summary": "t", "label": Infinity}\n')
    with pytest.raises(InputError, match=r"lab.jsonl:1: field 'label'"):
        labelled_summaries(path)
    write(1, 0, True, False, "1", "false", 1.0, None, "")
    got = [item.faithful for item in labelled_summaries(path)]
    assert got == [True, False, True, False, True, False, True]  # null and "" are skipped


@pytest.mark.parametrize("seed", ["-1", "4294967296"])
def test_a_seed_out_of_range_is_a_usage_error(seed, tmp_path):
    res = _cli(["--out", str(tmp_path / "m"), "--seed", seed])
    assert res.exit_code == 2 and "--seed" in res.output and "internal error" not in res.output


@pytest.mark.parametrize("out", [".", "./", ".."])
def test_the_current_directory_is_no_out(out, tmp_path, monkeypatch, tiny_base, tiny_docs):
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    res = _cli(["--out", out, "--documents", str(tiny_docs), "--base-model", str(tiny_base),
                "--snli-pairs", "0", "--max-steps", "1"])  # fmt: skip
    assert res.exit_code == 2 and "not the current directory" in res.output, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd"] and not any(work.iterdir())


def test_train_prints_paths_as_safe_lines(tmp_path, tiny_base, tiny_docs):
    out = tmp_path / "m\x1b[2J\n::warning::forged"
    res = _cli(["--out", str(out), "--documents", str(tiny_docs), "--base-model", str(tiny_base),
                "--snli-pairs", "0", "--max-steps", "1", "--dev-fraction", "0", "--threads", "1"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.output and "\n::warning" not in res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("faithgate train: recipe ") and lines[0].endswith(
        "\\n::warning::forged"
    )
    assert any(line.startswith("wrote ") and "\\x1b[2J" in line for line in lines)


def test_a_resume_after_the_init_from_weights_changed_is_refused(tmp_path, tiny_base, tiny_docs):
    """The recipe names --init-from by path: a checkpoint begun from other weights at that
    path must not be continued (the manifest would name the new start)."""
    from faithgate.errors import InputError
    from faithgate.training.train import train

    first = train(_config(tmp_path / "a", tiny_base, tiny_docs), log=_quiet, threads=1)
    other = train(
        _config(tmp_path / "b", tiny_base, tiny_docs, learning_rate=1e-3), log=_quiet, threads=1
    )
    start = tmp_path / "start"
    shutil.copytree(first, start)
    cfg = _config(tmp_path / "r", tiny_base, tiny_docs, init_from=str(start))
    with pytest.raises(Stopped):
        train(cfg, log=_stop_at_3, threads=1, log_every=1)
    shutil.rmtree(start)
    shutil.copytree(other, start)  # the same path, other weights
    lines: list[str] = []
    with pytest.raises(InputError) as err:
        train(cfg, log=lines.append, threads=1)
    message = str(err.value)
    assert "\n" not in message and "the starting model changed" in message
    assert "new --out" in message and "r.work" in message
    assert not any(line.startswith(("resumed", "synthetic", "dataset")) for line in lines)
    assert not (tmp_path / "r").exists()
    shutil.rmtree(start)
    shutil.copytree(first, start)  # the checkpoint's own start: resumed as before
    lines.clear()
    done = train(cfg, log=lines.append, threads=1)
    assert any(line.startswith("resumed at step 2/4") for line in lines)
    meta = json.loads((done / "faithgate_training.json").read_text())
    started = hashlib.sha256((first / "model.safetensors").read_bytes()).hexdigest()
    assert meta["init_from"]["sha256"] == started  # the weights the checkpoint began from


def test_a_resume_after_the_base_model_changed_is_refused(tmp_path, tiny_base, tiny_docs):
    """The recipe names --base-model by path: a checkpoint begun on other base weights at that
    path must not be continued with the new tokenizer and a manifest naming the new base."""
    from safetensors.torch import load_file, save_file

    from faithgate.errors import InputError
    from faithgate.training.train import train

    base = tmp_path / "base"
    shutil.copytree(tiny_base, base)
    cfg = _config(tmp_path / "r", base, tiny_docs)
    with pytest.raises(Stopped):
        train(cfg, log=_stop_at_3, threads=1, log_every=1)
    weights = load_file(str(base / "model.safetensors"))
    changed = {name: tensor * 1.01 for name, tensor in weights.items()}
    save_file(changed, str(base / "model.safetensors"), metadata={"format": "pt"})
    lines: list[str] = []
    with pytest.raises(InputError) as err:
        train(cfg, log=lines.append, threads=1)
    message = str(err.value)
    assert "\n" not in message and "the base model changed" in message and "r.work" in message
    assert not any(line.startswith(("resumed", "synthetic", "dataset")) for line in lines)
    save_file(weights, str(base / "model.safetensors"), metadata={"format": "pt"})
    # A checkpoint of an earlier faithgate, without the record, is resumed unchecked, saying so.
    import torch

    ckpt = tmp_path / "r.work" / "checkpoint.pt"
    state = torch.load(ckpt, weights_only=False)
    del state["base_fingerprint"]
    torch.save(state, ckpt)
    lines.clear()
    train(cfg, log=lines.append, threads=1)  # its own base again: resumed as before
    assert any(line.startswith("resumed at step 2/4") for line in lines)
    assert any("resumed without checking the base model" in line for line in lines)


@pytest.mark.parametrize("bad", ["labelled", "documents", "missing_documents", "init_from"])
def test_bad_inputs_are_refused_before_any_work_and_leave_no_work_dir(
    tmp_path, tiny_base, tiny_docs, monkeypatch, bad
):
    from faithgate.errors import InputError
    from faithgate.training import train as train_module
    from faithgate.training.train import train

    def no_synthesis(*args, **kwargs):
        raise AssertionError("synthesis started before the inputs were checked")

    monkeypatch.setattr(synth, "write_pairs", no_synthesis)
    monkeypatch.setattr(train_module, "build_dataset", no_synthesis)
    lab = tmp_path / "lab.jsonl"
    lab.write_text('{"source": "a", "summary": "b", "label": 2}\n')
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"source": "fine text"}\n{"id": 3}\n')
    kwargs = {
        "labelled": {"labelled": [str(lab)]},
        "documents": {},
        "missing_documents": {},
        "init_from": {"init_from": str(tiny_docs.parent)},
    }[bad]
    documents = {"documents": docs, "missing_documents": tmp_path / "nope.jsonl"}.get(
        bad, tiny_docs
    )
    cfg = _config(tmp_path / "o", tiny_base, documents, **kwargs)
    message = {
        "labelled": r"lab\.jsonl:1: field 'label'",
        "documents": r"docs\.jsonl:2: expected a 'source'",
        "missing_documents": r"nope\.jsonl: no such file",
        "init_from": "no model.safetensors",
    }[bad]
    with pytest.raises(InputError, match=message):
        train(cfg, log=_quiet, threads=1)
    assert not (tmp_path / "o.work").exists() and not (tmp_path / "o").exists()
