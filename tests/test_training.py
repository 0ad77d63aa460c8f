"""`faithgate train`: synthetic pairs, deterministic and resumable training, shipping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faithgate.training import synth
from faithgate.training.corpora import Document, clean_wiki, labelled_pairs, user_documents

torch = pytest.importorskip("torch")

DOC = Document(
    "hand-1",
    "The mayor of Springfield, John Carter, opened a new public library on Monday. "
    "The building cost 4 million dollars and holds 20,000 books. "
    "Carter said the library would stay open until 9 pm every weekday. "
    "Local students had campaigned for the library since 2015. "
    "The old library, which was built in 1952, will become a museum.",
    "hand",
)


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
        labelled_pairs(pairs)


# --- training ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> Path:
    """A random 2-layer BERT with MiniLM's tokenizer, saved like a hub checkpoint."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from faithgate import models

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(models.resolve("embedder").location)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=128,
    )
    path = tmp_path_factory.mktemp("tiny-base")
    BertModel(config).save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_docs(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("docs") / "docs.jsonl"
    rows = [
        {"id": "d1", "source": DOC.text},
        {"id": "d2", "source": DOC.text.replace("Springfield", "Shelbyville")},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _config(out: Path, base: Path, docs: Path, seed: int = 0, **kw):
    from faithgate.training.train import TrainConfig

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
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_training_is_deterministic_per_seed(tmp_path, tiny_base, tiny_docs):
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

    class Stop(Exception):
        pass

    def stop_at_3(line: str) -> None:
        if line.startswith("step 3/"):
            raise Stop

    with pytest.raises(Stop):
        train(_config(tmp_path / "r", tiny_base, tiny_docs), log=stop_at_3, threads=1, log_every=1)
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
