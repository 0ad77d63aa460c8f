"""The training data of a run: SNLI pairs, synthetic pairs of the documents and labelled
pairs, split by document into training and held-out pairs, kept in the work directory."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faithgate.errors import InputError
from faithgate.perturb import reads_as_english
from faithgate.safety import paths
from faithgate.safety.escape import printable
from faithgate.training import corpora, synth
from faithgate.training.corpora import LABELS, NLIPair
from faithgate.training.recipe import BUILTIN_CORPORA, TrainConfig, key_digest


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
    return workdir / f"dataset-{key_digest(key_data)}.json.gz"


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
        cache = workdir / f"labelled-{key_digest([digest, config.synth.recipe()])}.jsonl"
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
    return workdir / f"synth-{key_digest(key_parts)}.jsonl"
