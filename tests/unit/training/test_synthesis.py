"""Synthesis revisions (``SynthConfig.synthesis``): revision 2 fixes the labels and the split
of the synthetic pairs, and revision 1 still makes the data the shipped checker was trained on
(``onnx_models/build_checker.sh`` passes ``--synthesis 1``)."""

from __future__ import annotations

import bz2
import hashlib
import json
import random
import re
import shlex
import zipfile
from dataclasses import asdict
from pathlib import Path

import pytest

from faithgate.training import corpora, synth
from faithgate.training.corpora import Document, held_out_key

BOILER = "The company said it would publish full results at the end of the month."
BODY = [
    "The bank will raise interest rates if inflation keeps rising next year.",
    "Smokers who quit before the age of forty live almost as long as non-smokers.",
    "The company denied it would cut jobs, according to a spokesman for the firm.",
    "The mayor of Springfield opened a new public library on Monday morning.",
    "The building cost four million dollars and holds twenty thousand books.",
    "Local students had campaigned for the new library for more than ten years.",
]
# Opens and closes with the same sentence, as boilerplate does; the other sentences are ones
# synthesis 1 compressed wrongly.
MIXED = Document("hand-mixed", " ".join([BOILER, *BODY, BOILER]), "hand")
# Synthesis 1's compressions of BODY that its sentence does not entail, or that are garbled.
WRONG = {
    "The bank will raise interest rates.",
    "Smokers live almost as long as non-smokers.",
    "The company denied it would cut jobs, according.",
}


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def _stated(pair) -> bool:
    return _words(pair.hypothesis) in _words(pair.premise)


def _compressions(text: str, synthesis: int) -> set[str]:
    from faithgate.text import load_spacy

    sent = next(load_spacy()(text).sents)
    return {synth.compress(sent, random.Random(k), synthesis) for k in range(30)} - {text}


# --- 5: compress keeps conditions and restrictive clauses, and leaves no dangling word ------


@pytest.mark.parametrize(
    "text, wrong",
    [
        (BODY[0], "The bank will raise interest rates."),
        (
            "Prices will fall as long as supply keeps growing next year.",
            "Prices will fall as long.",
        ),
        (
            "The deal will go ahead provided that the board agrees to the terms.",
            "The deal will go ahead.",
        ),
        (BODY[1], "Smokers live almost as long as non-smokers."),
        (
            "Residents who live near the river were told to leave their homes.",
            "Residents who live were told to leave their homes.",
        ),
        (BODY[2], "The company denied it would cut jobs, according."),
        (
            "Wages rose faster than prices, as some workers had been for years.",
            "Wages rose faster than prices, as some workers had been.",
        ),
        (
            "India has accused Pakistan-based militants of carrying out the attack on parliament.",
            "India has accused -based militants of carrying out the attack on parliament.",
        ),
    ],
)
def test_compress_keeps_conditions_restrictive_clauses_and_whole_words(text, wrong):
    assert wrong in _compressions(text, 1)  # what synthesis 1 labelled supported
    assert wrong not in _compressions(text, 2)


def test_compress_still_drops_what_a_summary_may_drop():
    assert "The old library will become a local history museum." in _compressions(
        "The old library, which was built in 1952, will become a local history museum.", 2
    )
    assert _compressions("The mayor, a former teacher, opened the library on Monday.", 2) == {
        "The mayor opened the library on Monday.",
        "The mayor, a former teacher, opened the library.",
    }
    assert _compressions(BODY[2], 2) == {"The company denied it would cut jobs."}


def test_compressed_claims_of_a_document_are_entailed_by_it():
    config = synth.SynthConfig(seed=0, compress_probability=1.0)
    for seed in range(4):
        pairs = synth.document_pairs(MIXED, synth.SynthConfig(**{**asdict(config), "seed": seed}))
        compressed = {p.hypothesis for p in pairs if p.kind == "supported:compressed"}
        assert compressed and not compressed & WRONG, compressed


# --- 6: no unsupported pair states what its premise says --------------------------------


def test_no_unsupported_pair_is_stated_by_its_premise():
    pairs = [
        p for seed in range(10) for p in synth.document_pairs(MIXED, synth.SynthConfig(seed=seed))
    ]
    assert {p.kind for p in pairs} >= {"unrelated_sentence", "predicate_negation"}
    assert not [p for p in pairs if p.label != synth.ENTAILMENT and _stated(p)]


# --- 3: the held-out split keeps copies of one text and chunks of one article together -------


def test_held_out_key_is_the_article_or_the_normalised_text():
    a = Document("lee-1", "The mayor  opened the\nlibrary.", "lee-news")
    b = Document("lee-2", "the Mayor opened the library.", "lee-news")
    c = Document("lee-3", "The mayor opened the museum.", "lee-news")
    assert held_out_key(a) == held_out_key(b) != held_out_key(c)
    one = Document("wiki-Albedo-0", "Albedo is ...", "wikipedia", "Albedo")
    two = Document("wiki-Albedo-1", "It is measured ...", "wikipedia", "Albedo")
    assert held_out_key(one) == held_out_key(two) != held_out_key(a)


def test_wikipedia_chunks_name_their_article(tmp_path):
    para = "Albedo is the fraction of sunlight that a surface reflects back into space. " * 5
    page = (
        "<page><title>Albedo</title><text>"
        + "\n\n".join([para] * 4)
        + "</text></page><page><title>Anarchism</title><text>"
        + para.replace("Albedo", "Anarchism")
        + "</text></page>"
    )
    name = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    wheel = tmp_path / "gensim.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"gensim/test/test_data/{name}", bz2.compress(page.encode()))
    docs = corpora.wikipedia(corpora.Archive(wheel, "x"), chunk_chars=600)
    assert [(d.id, d.article) for d in docs] == [
        ("wiki-Albedo-0", "Albedo"),
        ("wiki-Albedo-1", "Albedo"),
        ("wiki-Anarchism-0", "Anarchism"),
    ]
    assert held_out_key(docs[0]) == held_out_key(docs[1]) != held_out_key(docs[2])


TOWNS = ["Ashford", "Bexley", "Carlow", "Dunmore", "Elgin", "Fenwick"]
TOWNS += ["Galway", "Harlow", "Ipswich", "Jarrow", "Kendal", "Lurgan"]
# Every sentence names the town, so every premise tells which article it came from.
TOWN_TEXT = (
    "The mayor of {t}, John Carter, opened a new public library in {t} on Monday. "
    "The {t} building cost 4 million dollars and holds 20,000 books. "
    "Carter said the {t} library would stay open until 9 pm every weekday. "
    "Local students in {t} had campaigned for the library since 2015. "
    "The old {t} library, which was built in 1952, will become a museum."
)


def _copies_file(tmp_path: Path) -> Path:
    """Twelve articles, each twice under two ids (as the Lee corpus holds 7 such pairs)."""
    rows = [
        {"id": f"{town}-{copy}", "source": TOWN_TEXT.format(t=town)}
        for town in TOWNS
        for copy in (1, 2)
    ]
    path = tmp_path / "copies.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _sides(data) -> dict[str, set[str]]:
    """The sides (train / dev) each town's pairs fell on."""
    sides: dict[str, set[str]] = {}
    for name, pairs in (("train", data.train), ("dev", data.dev)):
        for p in pairs:
            (town,) = [t for t in TOWNS if t in p.premise]
            sides.setdefault(town, set()).add(name)
    return sides


@pytest.mark.parametrize("synthesis", [1, 2])
def test_copies_of_one_text_fall_on_one_side_of_the_split(tmp_path, synthesis):
    from faithgate.training import ship
    from faithgate.training.dataset import build_dataset
    from faithgate.training.recipe import TrainConfig

    path = _copies_file(tmp_path)
    config = TrainConfig(
        output=str(tmp_path / "m"),
        documents=[str(path)],
        snli_pairs=0,
        synth=synth.SynthConfig(claims_per_document=2, synthesis=synthesis),
        dev_fraction=0.5,
    )
    data = build_dataset(config, tmp_path / "work", log=lambda _: None)
    sides = _sides(data)
    assert len(sides) == 12
    straddling = sorted(town for town, where in sides.items() if len(where) == 2)
    if synthesis == 1:  # split by id: copies of one text on both sides
        assert straddling
        return
    assert not straddling and data.dev and data.train
    # ship's calibration triples come from the held-out side only, by the key train used
    (pairs_file,) = (tmp_path / "work").glob("synth-*.jsonl")
    triples = ship.held_out_triples(config, pairs_file, n=1000)
    assert triples and {t[0] for t in triples} <= {p.premise for p in data.dev}


# --- 8: a pronoun is resolved only to an agreeing subject of the sentence before ------------

NURSES = (
    "Prime Minister John Howard met a group of nurses in Sydney on Monday. "
    "The head of the nurses union spoke to reporters after the meeting. "
    "{} said the hospital needed two hundred more staff by next year."
)
VISIT = (
    "The storm hit the coast on Monday night. "
    "Prime Minister John Howard visited the town on Tuesday. "
    "{} said the government would pay for the repairs."
)


def _resolved(text: str, agreeing: bool) -> str | None:
    from faithgate.text import load_spacy
    from faithgate.training.paraphrase import render, resolve_pronoun

    sents = list(load_spacy()(text).sents)
    found = resolve_pronoun(sents, 2, agreeing)
    return None if found is None else render(list(sents[2]), found[0])


def test_a_pronoun_is_resolved_only_to_an_agreeing_subject_of_the_sentence_before():
    wrong = "John Howard said the hospital needed two hundred more staff by next year."
    assert _resolved(NURSES.format("She"), agreeing=False) == wrong  # synthesis 1
    assert _resolved(NURSES.format("She"), agreeing=True) is None
    assert _resolved(NURSES.format("He"), agreeing=True) is None  # not the subject before
    right = "John Howard said the government would pay for the repairs."
    assert _resolved(VISIT.format("He"), agreeing=True) == right
    assert _resolved(VISIT.format("She"), agreeing=True) is None  # John: not "she"
    mrs = VISIT.replace("Prime Minister John Howard", "Mrs Smith")
    assert _resolved(mrs.format("She"), agreeing=True) == (
        "Mrs Smith said the government would pay for the repairs."
    )


def test_synthesis_2_paraphrases_resolve_no_pronoun_to_the_wrong_person():
    doc = Document("nurses", NURSES.format("She") + " " + VISIT.format("He"), "hand")
    found = {1: set(), 2: set()}
    for synthesis in (1, 2):
        for seed in range(12):
            config = synth.SynthConfig(seed=seed, paraphrase_probability=1.0, synthesis=synthesis)
            found[synthesis] |= {
                p.hypothesis
                for p in synth.document_pairs(doc, config)
                if p.kind.startswith("supported:paraphrase:") and "pronoun" in p.kind
            }
    assert any("John Howard said the hospital" in h for h in found[1])
    assert not any("John Howard said the hospital" in h for h in found[2])


# --- synthesis 1: the shipped checker's data and recipe hash, unchanged ---------------------

# sha256 of the pairs of MIXED for seeds 0-3, as the code that made the shipped checker's pairs
# (commit ea83d0c) makes them.
_SYNTHESIS_1_MIXED = "18fab3c69dd1d8e48570b634d2dfc6ee4f01586bf00bf672cb2c48a0d38d742b"


def test_synthesis_1_makes_the_pairs_it_always_made():
    pairs = [
        asdict(p)
        for seed in range(4)
        for p in synth.document_pairs(MIXED, synth.SynthConfig(seed=seed, synthesis=1))
    ]
    assert hashlib.sha256(json.dumps(pairs).encode()).hexdigest() == _SYNTHESIS_1_MIXED
    # ... which holds the mistakes synthesis 2 fixes
    assert {p["hypothesis"] for p in pairs} & WRONG
    assert any(p["label"] != 0 and p["hypothesis"] in p["premise"] for p in pairs)
    newer = [
        asdict(p)
        for seed in range(4)
        for p in synth.document_pairs(MIXED, synth.SynthConfig(seed=seed, synthesis=2))
    ]
    assert newer != pairs


def test_synthesis_1_keeps_the_shipped_recipe_hash_and_2_is_a_new_recipe(tmp_path):
    from click.testing import CliRunner

    import faithgate.training.train as train_module
    from faithgate.cli.train import train_command
    from faithgate.training.recipe import TrainConfig

    manifest = json.loads(
        (
            Path(__file__).resolve().parents[3] / "onnx_models/checker/faithgate_training.json"
        ).read_text()
    )
    assert "synthesis" not in manifest["recipe"]["synth"]
    assert synth.SynthConfig.from_recipe(manifest["recipe"]["synth"]).synthesis == 1
    assert synth.SynthConfig().synthesis == 2
    assert synth.SynthConfig().recipe()["synthesis"] == 2
    # the arguments onnx_models/build_checker.sh gives faithgate train
    build = Path(__file__).resolve().parents[3] / "onnx_models/build_checker.sh"
    (line,) = [
        ln
        for ln in build.read_text().replace("\\\n", " ").splitlines()
        if ln.startswith("faithgate train ")
    ]
    args = shlex.split(line.replace("$out", str(tmp_path / "m")))[2:]
    assert args[args.index("--synthesis") + 1] == "1"

    def recipe_of(argv: list[str]) -> TrainConfig:
        got: list[TrainConfig] = []
        original = train_module.train
        train_module.train = lambda config, **kw: got.append(config)
        try:
            res = CliRunner().invoke(train_command, argv)
        finally:
            train_module.train = original
        assert res.exit_code == 0, res.output
        return got[0]

    shipped = recipe_of(args)
    assert shipped.recipe() == manifest["recipe"]
    assert shipped.recipe_hash() == manifest["recipe_hash"] == "9a2ffc29a8d5"
    without = [a for a in args if a not in ("--synthesis", "1")]
    assert recipe_of(without).recipe_hash() != manifest["recipe_hash"]


def test_a_resume_of_a_synthesis_1_run_names_the_option(tmp_path):
    from faithgate.errors import InputError
    from faithgate.training.checkpoint import load_checkpoint
    from faithgate.training.recipe import TrainConfig

    torch = pytest.importorskip("torch")
    first = TrainConfig(output=str(tmp_path / "m"), synth=synth.SynthConfig(synthesis=1))
    state = {"recipe_hash": first.recipe_hash(), "dataset_sha256": "", "total_steps": 1}
    state |= {"model": {}, "optimizer": {}, "scheduler": {}, "step": 1, "history": []}
    state["torch_rng"] = torch.get_rng_state()
    torch.save(state, tmp_path / "checkpoint.pt")
    newer = TrainConfig(output=str(tmp_path / "m"))
    with pytest.raises(InputError, match="--synthesis 1"):
        load_checkpoint(tmp_path / "checkpoint.pt", newer, "cpu")
