"""`faithgate train` runs: an evaluation cut short is run on resume, held-out labelled sources
are never trained on as synthetic documents, the threads and device of each stretch of steps
are recorded (a resume on others says so), and one run at a time works in OUT.work."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from tiny_models import MAYOR_TEXT, tiny_train_config


def _quiet(line: str) -> None:
    pass


class Stopped(Exception):
    pass


def _weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def _same(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --- item 2: an interrupted held-out evaluation --------------------------------------------


def test_an_evaluation_interrupted_at_the_end_is_run_on_resume(
    tmp_path, tiny_base, tiny_docs, monkeypatch
):
    """The step checkpoint at the last step is written before the evaluation: a run stopped
    during the evaluation resumes at the end, and must still evaluate (and publish) it."""
    from faithgate.training import train as train_module
    from faithgate.training.train import train

    evaluate = train_module.evaluate

    def interrupted(*args, **kwargs):
        raise Stopped  # Ctrl-C or a job's time limit during the held-out evaluation

    kw = {"dev_fraction": 0.5, "seed": 1}
    monkeypatch.setattr(train_module, "evaluate", interrupted)
    with pytest.raises(Stopped):
        train(tiny_train_config(tmp_path / "r", tiny_base, tiny_docs, **kw), log=_quiet, threads=1)
    monkeypatch.setattr(train_module, "evaluate", evaluate)
    lines: list[str] = []
    resumed = train(
        tiny_train_config(tmp_path / "r", tiny_base, tiny_docs, **kw), log=lines.append, threads=1
    )
    assert any(re.fullmatch(r"resumed at step (\d+)/\1", line) for line in lines)
    assert any(line.startswith("held-out after epoch 1: {'n': ") for line in lines)
    straight = train(
        tiny_train_config(tmp_path / "s", tiny_base, tiny_docs, **kw), log=_quiet, threads=1
    )
    meta = json.loads((resumed / "faithgate_training.json").read_text())
    want = json.loads((straight / "faithgate_training.json").read_text())
    assert meta["held_out_pairs"] > 0 and meta["history"][0]["held_out"]["n"] > 0
    assert meta["history"] == want["history"]
    assert _same(_weights(resumed), _weights(straight))
    # Resumed again, from the checkpoint that now holds the evaluation: not evaluated twice.
    lines.clear()
    train(
        tiny_train_config(tmp_path / "r", tiny_base, tiny_docs, **kw), log=lines.append, threads=1
    )
    assert not any(line.startswith("held-out after") for line in lines)
    meta = json.loads((resumed / "faithgate_training.json").read_text())
    assert meta["history"] == want["history"]


# --- item 4: held-out labelled sources are not synthetic training documents ----------------


def _labelled_overlap_run(tmp_path, tiny_base, synthesis: int):
    """Four documents, each also the (reflowed, upper-cased) source of a labelled item, half of
    which are held out: the dataset, its log lines, and the held-out towns."""
    from faithgate.training import synth
    from faithgate.training.corpora import labelled_summaries
    from faithgate.training.dataset import build_dataset, is_held_out

    towns = ["Springfield", "Shelbyville", "Ogdenville", "Brockway"]
    sources = [  # every sentence names its town: each pair shows which document it is from
        MAYOR_TEXT.replace("Springfield", town)
        .replace("library", f"{town} library")
        .replace("building", f"{town} building")
        for town in towns
    ]
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(json.dumps({"id": str(i), "source": s}) + "\n" for i, s in enumerate(sources))
    )
    rows = [
        # the same article, its whitespace reflowed and its case changed: still the same text
        {"id": str(i), "source": "  " + s.replace(". ", ".\n").upper(), "label": 1,
         "summary": f"The library in {town} cost 4 million dollars."}
        for i, (town, s) in enumerate(zip(towns, sources, strict=True))
    ]  # fmt: skip
    lab = tmp_path / "lab.jsonl"
    lab.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tiny_train_config(
        tmp_path / "m",
        tiny_base,
        docs,
        labelled=[str(lab)],
        labelled_dev_fraction=0.5,
        synth=synth.SynthConfig(claims_per_document=3, seed=0, synthesis=synthesis),
    )
    lines: list[str] = []
    data = build_dataset(cfg, tmp_path / "work", log=lines.append)
    held = [
        towns[int(item.id.split(":")[-1])]
        for item in labelled_summaries(lab)
        if is_held_out(item.document_key, 0.5, cfg.seed)
    ]
    assert held and len(held) < len(towns)  # both sides of the split are exercised
    synthetic = [p for p in data.train if not p.kind.startswith("labelled:")]
    trained = {t for t in towns if any(t in p.premise or t in p.hypothesis for p in synthetic)}
    return data, lines, held, towns, trained


def test_a_document_that_is_a_held_out_labelled_source_is_not_trained_on(tmp_path, tiny_base):
    """Synthesis 2 leaves such documents out, their copies in another case too (the split's
    ``held_out_key`` case-folds; the exclusion compared whitespace only)."""
    data, lines, held, towns, trained = _labelled_overlap_run(tmp_path, tiny_base, 2)
    held_dev = {t for t in towns if t in held}
    assert trained == set(towns) - held_dev
    assert data.dev_labelled and all(
        any(town.upper() in p.premise for town in held) for p in data.dev_labelled
    )
    left_out = [line for line in lines if "left out of training" in line]
    assert left_out == [
        f"synthetic pairs: {len(held)} documents left out of training: each is the source of a "
        "held-out labelled item (--labelled-dev-fraction)"
    ]
    counts = data.sources["synthetic"]
    assert counts["documents_left_out_as_held_out_labelled_sources"] == len(held)


def test_synthesis_1_keeps_its_data_and_warns_of_held_out_labelled_sources(tmp_path, tiny_base):
    """Synthesis 1 is the recipe whose data must rebuild as it was: leaving documents out there
    changed the data under an unchanged recipe hash (and a resume said a file had changed).
    It keeps them, and says that the held-out labelled figures measure text trained on."""
    data, lines, held, towns, trained = _labelled_overlap_run(tmp_path, tiny_base, 1)
    assert trained == set(towns)
    assert not [line for line in lines if "left out of training" in line]
    assert [line for line in lines if line.startswith("warning: synthetic pairs:")] == [
        f"warning: synthetic pairs: {len(held)} training documents are sources of held-out "
        "labelled items, so the held-out labelled figures measure text trained on; --synthesis 1 "
        "keeps them to rebuild its data as it was, --synthesis 2 leaves them out"
    ]
    assert data.sources["synthetic"]["documents_left_out_as_held_out_labelled_sources"] == 0


# --- item 10: threads and device are provenance ---------------------------------------------


def test_threads_and_device_are_recorded_and_a_resume_on_other_threads_says_so(
    tmp_path, tiny_base, tiny_docs, torch
):
    from faithgate.training.train import train

    def stop_at_3(line: str) -> None:
        if line.startswith("step 3/"):
            raise Stopped

    before = torch.get_num_threads()
    with pytest.raises(Stopped):
        train(
            tiny_train_config(tmp_path / "r", tiny_base, tiny_docs),
            log=stop_at_3,
            threads=1,
            log_every=1,
        )
    assert torch.get_num_threads() == before  # a library call leaves torch's setting alone
    lines: list[str] = []
    out = train(
        tiny_train_config(tmp_path / "r", tiny_base, tiny_docs), log=lines.append, threads=2
    )
    warned = [line for line in lines if line.startswith("resumed with other threads")]
    assert warned == [
        "resumed with other threads than the checkpoint was trained with (threads 1 -> 2): the "
        "weights may differ from an uninterrupted run's in the last bits"
    ]
    meta = json.loads((out / "faithgate_training.json").read_text())
    assert meta["threads"] == 2 and meta["device"] == "cpu"
    assert meta["runs"] == [
        {"from_step": 0, "threads": 1, "device": "cpu"},
        {"from_step": 2, "threads": 2, "device": "cpu"},
    ]
    assert "threads" not in meta["recipe"]  # provenance, not recipe
    # The libraries the pairs and weights came from (spaCy's tagging decides perturb's edits),
    # and the digest of the pairs trained on, so a rebuild can be compared with this run.
    import spacy

    assert meta["versions"]["spacy"] == spacy.__version__
    assert {"torch", "python", "transformers", "numpy", "thinc"} <= set(meta["versions"])
    assert re.fullmatch(r"en_core_web_sm\w*==3\.\d+\.\d+", meta["versions"]["spacy_pipeline"])
    assert re.fullmatch(r"[0-9a-f]{64}", meta["dataset_sha256"])
    assert torch.get_num_threads() == before
    # The same threads again: resumed without a word about them.
    lines.clear()
    train(tiny_train_config(tmp_path / "r", tiny_base, tiny_docs), log=lines.append, threads=2)
    assert not any(line.startswith("resumed with other") for line in lines)


# --- item 21: one run at a time on an OUT -------------------------------------------------


def test_a_second_run_on_the_same_out_waits_for_the_first(tmp_path, tiny_base, tiny_docs):
    from faithgate.safety import paths
    from faithgate.training.train import train
    from faithgate.training.workdir import work_dir

    out = tmp_path / "m"
    lock = Path(str(work_dir(out)) + ".lock")
    waiting = threading.Event()
    result: list[object] = []

    def log(line: str) -> None:
        if line.startswith("waiting for another faithgate train on this --out"):
            waiting.set()

    def run() -> None:
        try:
            result.append(train(tiny_train_config(out, tiny_base, tiny_docs), log=log, threads=1))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
            result.append(exc)

    with paths.owned_lock(lock):  # another run holds OUT.work
        second = threading.Thread(target=run)
        second.start()
        while not waiting.wait(0.05) and second.is_alive():
            pass
        assert waiting.is_set(), result  # it waited, rather than writing beside the first
        assert not out.exists() and not work_dir(out).exists()
    second.join(timeout=300)
    assert result == [out] and (out / "config.json").is_file()
    assert not lock.exists()  # released and removed
